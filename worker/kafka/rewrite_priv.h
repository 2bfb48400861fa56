/*
 * rewrite_priv — what rewrite.c, rewrite_endpoints.c, rewrite_share.c and
 * apiversions.c share and nothing else should see: the version ranges each
 * rewriter parses, the growing output buffer, the frame checks common to
 * every response, and the address entries (NodeEndpoints elements,
 * DescribeCluster brokers) of rewrite_endpoints.c.
 *
 * The output buffer (struct rw_out) is reserved before every put: the rw_*
 * writers do no bounds checks of their own.
 */
#ifndef FERRY_WORKER_KAFKA_REWRITE_PRIV_H
#define FERRY_WORKER_KAFKA_REWRITE_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "worker/kafka/codec.h"
#include "worker/kafka/rewrite.h"

/* Highest version each rewriter has a schema for. */
#define MD_MAX_VERSION	13	/* Metadata */
#define FC_MAX_VERSION	6	/* FindCoordinator */
#define AV_MAX_VERSION	5	/* ApiVersions */
#define PR_MAX_VERSION	13	/* Produce */
#define FE_MAX_VERSION	18	/* Fetch */
#define DC_MAX_VERSION	2	/* DescribeCluster */
#define SH_MIN_VERSION	1	/* ShareFetch, ShareAcknowledge (v0: early access) */
#define SH_MAX_VERSION	2
/* First versions whose responses carry KIP-951 NodeEndpoints. */
#define PR_NODE_ENDPOINTS_FROM	10
#define FE_NODE_ENDPOINTS_FROM	16

/* Growing output buffer; the caller reserves before every put. */
struct rw_out {
	uint8_t *b;
	size_t len, cap;
};

static inline bool
rw_reserve(struct rw_out *o, size_t need)
{
	uint8_t *nb;
	size_t ncap;

	if (need <= o->cap)
		return true;
	ncap = need + need / 2;
	if (ncap < need)
		ncap = need;
	nb = realloc(o->b, ncap);
	if (nb == NULL)
		return false;
	o->b = nb;
	o->cap = ncap;
	return true;
}

static inline void
rw_put(struct rw_out *o, const void *src, size_t n)
{
	if (n > 0)
		memcpy(o->b + o->len, src, n);
	o->len += n;
}

static inline void
rw_i16(struct rw_out *o, int16_t v)
{
	kc_put_i16(o->b + o->len, v);
	o->len += 2;
}

static inline void
rw_i32(struct rw_out *o, int32_t v)
{
	kc_put_i32(o->b + o->len, v);
	o->len += 4;
}

static inline void
rw_uvarint(struct rw_out *o, uint32_t v)
{
	o->len += kc_put_uvarint(o->b + o->len, v);
}

static inline size_t
rw_string_size(bool flex, size_t len)
{
	return (flex ? kc_uvarint_size((uint32_t)len + 1) : 2) + len;
}

/* A non-null string (the caller checked len <= KC_MAX_STRING). */
static inline void
rw_string(struct rw_out *o, bool flex, const char *s, size_t len)
{
	if (flex)
		rw_uvarint(o, (uint32_t)len + 1);
	else
		rw_i16(o, (int16_t)len);
	rw_put(o, s, len);
}

/* A null string: compact 0 or INT16 -1. */
static inline size_t
rw_null_size(bool flex)
{
	return flex ? 1 : 2;
}

static inline void
rw_null(struct rw_out *o, bool flex)
{
	if (flex)
		o->b[o->len++] = 0;
	else
		rw_i16(o, -1);
}

static inline bool
rw_host_ok(const char *h, size_t hl)
{
	return hl <= KC_MAX_STRING && (h != NULL || hl == 0);
}

/* Frees o, sets err; always KC_MALFORMED. */
int kc_rw_fail(struct rw_out *o, char *err, size_t errlen, const char *why);
/* Patches the size prefix and hands o->b over as *out. */
int kc_rw_finish(struct rw_out *o, uint8_t **out, size_t *out_len, char *err, size_t errlen);
/* A whole response frame: len >= 8 and the size prefix == len - 4. */
int kc_rw_check_frame(const uint8_t *frame, size_t len, char *err, size_t errlen);
/* Size prefix, correlation id and (response header v1) the header tags. */
void kc_rw_skip_header(struct kc_reader *r, int16_t key, int16_t v);
/*
 * End of a walk over frame: KC_OK when r is healthy, with *plen = the bytes
 * the message parsed to (size prefix included, <= the frame length).  Bytes
 * after that are trailing: accepted (clients ignore them, and librdkafka's
 * mock cluster writes an extra empty tag section after Metadata v9+), and
 * dropped by the rewriters, which go on with len = *plen.  Otherwise
 * KC_MALFORMED with err set.
 */
int kc_rw_end(struct kc_reader *r, const uint8_t *frame, size_t *plen, char *err,
	      size_t errlen);

/*
 * rewrite_endpoints.c; version already range-checked, map non-NULL.  On KC_OK
 * *trailing gets the number of trailing bytes dropped from the output.
 */
int kc_rw_produce(int v, const uint8_t *frame, size_t len, const struct kc_broker_map *map,
		  uint8_t **out, size_t *out_len, size_t *trailing, char *err, size_t errlen);
int kc_rw_fetch(int v, const uint8_t *frame, size_t len, const struct kc_broker_map *map,
		uint8_t **out, size_t *out_len, size_t *trailing, char *err, size_t errlen);
int kc_rw_describe_cluster(int v, const uint8_t *frame, size_t len,
			   const struct kc_broker_map *map, uint8_t **out, size_t *out_len,
			   size_t *trailing, char *err, size_t errlen);

/*
 * An address entry of a flexible response (rewrite_endpoints.c): a
 * NodeEndpoints element or a DescribeCluster broker.  node, host, port,
 * then the tail (rack, DescribeCluster v2 IsFenced, tags) that is copied as
 * it is.
 */
struct kc_ep_node {
	const uint8_t *host, *tail, *end;
	int32_t node_id, host_len, port;
};

/* Smallest encoded entry (int32, "", int32, null rack, tags), for kc_rd_array. */
#define KC_EP_NODE_MIN	11

/* Reads one entry at r (fenced: DescribeCluster v2's IsFenced byte). */
void kc_ep_node(struct kc_reader *r, bool fenced, struct kc_ep_node *e);
/*
 * A response whose only rewritten part is one compact array of address
 * entries (frame validated and cut at the end of the message; its count at
 * count_off, entries from entries_off to rest_off): emits the frame with
 * the bytes before the array copied, the entries mapped (those the map
 * rejects and negative node ids dropped; all of them, unmapped, when
 * drop_all), the count re-encoded and the bytes from rest_off on copied.
 * KC_OK with *out, or KC_MALFORMED (err set).
 */
int kc_ep_rebuild(const uint8_t *frame, size_t len, size_t count_off, size_t entries_off,
		  size_t rest_off, int32_t n, bool fenced, bool drop_all,
		  const struct kc_broker_map *map, uint8_t **out, size_t *out_len, char *err,
		  size_t errlen);

/*
 * Called for every field of a tag section with a reader spanning exactly
 * its value; must consume all of it (a known struct) or skip it (unknown).
 */
typedef void (*kc_ep_tag_fn)(struct kc_reader *val, uint32_t tag, void *ctx);
/*
 * The value of one tagged field (tag, size bytes, which the caller checked
 * fit the rest of r) read by fn from a reader spanning exactly it; r moves
 * past it. false when r failed: need more (the value not all there), or
 * malformed (fn failed inside it, or left bytes of it unread).
 */
bool kc_ep_tag_value(struct kc_reader *r, uint32_t tag, uint32_t size, kc_ep_tag_fn fn,
		     void *ctx);

/* A Fetch partition's tagged field (DivergingEpoch, CurrentLeader,
 * SnapshotId validated; others skipped): val spans exactly its value. */
void kc_fe_partition_tag(struct kc_reader *val, uint32_t tag, void *ctx);
/*
 * A Produce/Fetch top-level tag section at r, validated (known: the
 * version defines tag 0 as NodeEndpoints, whose entries are checked);
 * *found gets the number of NodeEndpoints fields. false when r failed.
 */
bool kc_ne_scan(struct kc_reader *r, bool known, int *found);
/*
 * The fields of a validated top-level tag section (sec: its count first,
 * len bytes) appended to t, without the count: NodeEndpoints rebuilt
 * through map (or left out when drop), the other fields copied byte for
 * byte in their order. *nfields gets the fields emitted, *max_tag the
 * highest tag among them (0 when none). KC_OK, or KC_MALFORMED with *why.
 */
int kc_ne_fields(const uint8_t *sec, size_t len, const struct kc_broker_map *map, bool drop,
		 struct rw_out *t, uint32_t *nfields, uint32_t *max_tag, const char **why);

/*
 * rewrite_share.c: ShareFetch (78) or ShareAcknowledge (79) responses,
 * v SH_MIN_VERSION..SH_MAX_VERSION (already range-checked), map non-NULL.
 */
int kc_rw_share(int16_t key, int v, const uint8_t *frame, size_t len,
		const struct kc_broker_map *map, uint8_t **out, size_t *out_len,
		size_t *trailing, char *err, size_t errlen);

/*
 * apiversions.c: kc_apiversions_intersect, also telling how many trailing
 * bytes it dropped (*trailing, on KC_OK; 0 for a relayed error response,
 * which is not parsed).
 */
int kc_av_intersect(const uint8_t *frame, size_t len, int16_t request_version, uint8_t *out,
		    size_t out_cap, size_t *out_len, size_t *trailing, char *err, size_t errlen);

#endif
