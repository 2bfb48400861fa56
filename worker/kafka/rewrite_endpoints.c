/*
 * rewrite_endpoints — broker-address rewriting of the responses that carry
 * addresses besides Metadata and FindCoordinator: the brokers of
 * DescribeCluster (key 60, v0-2) and the KIP-951 NodeEndpoints of Produce
 * (v10-13) and Fetch (v16-18) responses.  Older Produce (v0-9) and Fetch (v0-15)
 * responses are walked with the same code and copied unchanged.
 *
 * Like rewrite.c, every response is validated completely before the broker
 * map runs: each field of its version is walked to the end of the message,
 * record sets are skipped by their length without being read, and the
 * tagged structs the schema defines (CurrentLeader, DivergingEpoch,
 * SnapshotId, NodeEndpoints) must fill their tag exactly.  Bytes after the
 * end of the message are accepted and dropped (kc_rw_end): everything below
 * works on the frame cut at that end.
 *
 * Produce and Fetch put NodeEndpoints in the top-level tagged-field section,
 * which is the last thing in the message.  So the rewrite is one validating
 * pass over the frame (which records where that section starts) and one
 * copy: the bytes before the section are copied with a single memcpy, then
 * the section is re-emitted with tag 0 rebuilt (its size varint recomputed)
 * and every other tag copied byte for byte, in the order received.  A
 * response without NodeEndpoints comes out byte-identical (up to the end of
 * the message: trailing bytes are dropped there too).  A Fetch response too
 * large to collect is streamed instead (fetchwalk.h): only its section is
 * held, and kc_ne_scan / kc_ne_fields below serve its rewrite too.
 *
 * Entries the map rejects are dropped (the array count is re-encoded);
 * entries with a negative node id are dropped without calling the map (an
 * upstream address must never reach a client).  A NodeEndpoints tag whose
 * entries are all dropped stays, as an empty array.
 *
 * Schema facts relied on (apache/kafka clients/src/main/resources/common/
 * message/ JSON schemas; every struct in a flexible version ends with a tag
 * section, tagged structs are encoded inside their tag's bytes):
 *
 * ProduceResponse.json, flexible 9+:
 *   Responses [ Name string (v0-12) | TopicId uuid (v13+),
 *               PartitionResponses [ Index int32, ErrorCode int16,
 *                 BaseOffset int64, LogAppendTimeMs int64 (v2+),
 *                 LogStartOffset int64 (v5+),
 *                 RecordErrors [ BatchIndex int32,
 *                   BatchIndexErrorMessage nullable string ] (v8+),
 *                 ErrorMessage nullable string (v8+),
 *                 tag 0 CurrentLeader { LeaderId int32, LeaderEpoch int32 } (v10+) ] ]
 *   ThrottleTimeMs int32 (v1+)
 *   tag 0 NodeEndpoints [ NodeId int32, Host string, Port int32,
 *                         Rack nullable string ] (v10+)
 *   v11 only adds an error code (KIP-890), v12 is identical to v11 (KIP-890
 *   transaction version 2), v13 replaces Name with TopicId (KIP-516).
 *
 * FetchResponse.json, flexible 12+:
 *   ThrottleTimeMs int32 (v1+), ErrorCode int16 (v7+), SessionId int32 (v7+),
 *   Responses [ Topic string (v0-12) | TopicId uuid (v13+),
 *               Partitions [ PartitionIndex int32, ErrorCode int16,
 *                 HighWatermark int64, LastStableOffset int64 (v4+),
 *                 LogStartOffset int64 (v5+),
 *                 AbortedTransactions nullable [ ProducerId int64,
 *                   FirstOffset int64 ] (v4+),
 *                 PreferredReadReplica int32 (v11+),
 *                 Records nullable records (all versions),
 *                 tag 0 DivergingEpoch { Epoch int32, EndOffset int64 },
 *                 tag 1 CurrentLeader { LeaderId int32, LeaderEpoch int32 },
 *                 tag 2 SnapshotId { EndOffset int64, Epoch int32 } (v12+) ] ]
 *   tag 0 NodeEndpoints, same element layout as Produce (v16+)
 *   v14, v15, v17 and v18 change nothing in the response (KIP-405, KIP-903,
 *   KIP-853, KIP-1166: v18 adds a follower's high watermark to the request).
 *
 * DescribeClusterResponse.json, flexible 0+ (so response header v1):
 *   ThrottleTimeMs int32, ErrorCode int16, ErrorMessage nullable string,
 *   EndpointType int8 (v1+, KIP-919: 1 brokers, 2 controllers),
 *   ClusterId string, ControllerId int32,
 *   Brokers [ BrokerId int32, Host string, Port int32, Rack nullable string,
 *             IsFenced bool (v2+, KIP-1073) ],
 *   ClusterAuthorizedOperations int32
 *   A response whose EndpointType is not 1 lists controllers, which the
 *   proxy does not serve: all its entries are dropped, unmapped.
 *
 * The address entries (kc_ep_node, kc_ep_rebuild) are shared with
 * rewrite_share.c, which rewrites the NodeEndpoints of ShareFetch (78) and
 * ShareAcknowledge (79): a regular field there, not a tagged one.
 */
#include <stdlib.h>
#include <string.h>

#include "worker/kafka/codec.h"
#include "worker/kafka/rewrite.h"
#include "worker/kafka/rewrite_priv.h"

/* Smallest encodings, for kc_rd_array's early length check. */
#define AT_MIN		16	/* two int64 */
#define RECERR_MIN	6	/* int32 + null string (+ tags) */
#define PPART_MIN	14	/* Produce partition v0 */
#define FPART_MIN	15	/* Fetch partition v0 (records compact: 1 byte + 14) */
#define TOPIC_MIN	3	/* compact name, count, tags */

/* ---- tagged fields ---- */

bool
kc_ep_tag_value(struct kc_reader *r, uint32_t tag, uint32_t size, kc_ep_tag_fn fn, void *ctx)
{
	struct kc_reader val;

	if (!kc_rd_need(r, size))
		return false;
	kc_rd_init(&val, r->p, size);
	fn(&val, tag, ctx);
	if (val.status == KC_OK && val.p != val.end)
		kc_rd_fail(&val, KC_MALFORMED, "tagged field longer than its value");
	if (val.status != KC_OK) {
		/* inside a whole value, running out of it is malformed */
		kc_rd_fail(r, KC_MALFORMED, val.err);
		return false;
	}
	r->p += size;
	return true;
}

/* A tag section; fn NULL = every field is opaque. */
static void
ep_tags(struct kc_reader *r, kc_ep_tag_fn fn, void *ctx)
{
	uint32_t n, i, tag, size;

	n = kc_rd_uvarint(r);
	for (i = 0; i < n && kc_rd_ok(r); i++) {
		tag = kc_rd_uvarint(r);
		size = kc_rd_uvarint(r);
		if (!kc_rd_ok(r))
			return;
		if (size > kc_rd_left(r)) {
			kc_rd_fail(r, KC_MALFORMED, "tagged field past end of frame");
			return;
		}
		if (fn != NULL) {
			if (!kc_ep_tag_value(r, tag, size, fn, ctx))
				return;
		} else {
			if (!kc_rd_need(r, size))
				return;
			r->p += size;
		}
	}
}

/* LeaderIdAndEpoch: Produce partition tag 0, Fetch partition tag 1. */
static void
ep_leader(struct kc_reader *val)
{
	(void)kc_rd_i32(val);		/* LeaderId */
	(void)kc_rd_i32(val);		/* LeaderEpoch */
	kc_rd_tags(val);
}

static void
pr_partition_tag(struct kc_reader *val, uint32_t tag, void *ctx)
{
	(void)ctx;
	if (tag == 0)
		ep_leader(val);
	else
		kc_rd_skip(val, kc_rd_left(val));
}

void
kc_fe_partition_tag(struct kc_reader *val, uint32_t tag, void *ctx)
{
	(void)ctx;
	switch (tag) {
	case 0:				/* DivergingEpoch */
		(void)kc_rd_i32(val);	/* Epoch */
		(void)kc_rd_i64(val);	/* EndOffset */
		kc_rd_tags(val);
		break;
	case 1:				/* CurrentLeader */
		ep_leader(val);
		break;
	case 2:				/* SnapshotId */
		(void)kc_rd_i64(val);	/* EndOffset */
		(void)kc_rd_i32(val);	/* Epoch */
		kc_rd_tags(val);
		break;
	default:
		kc_rd_skip(val, kc_rd_left(val));
	}
}

/* ---- address entries ---- */

void
kc_ep_node(struct kc_reader *r, bool fenced, struct kc_ep_node *e)
{
	e->node_id = kc_rd_i32(r);
	e->host_len = kc_rd_string(r, true, false, &e->host);
	e->port = kc_rd_i32(r);
	e->tail = r->p;
	(void)kc_rd_string(r, true, true, NULL);	/* Rack */
	if (fenced)
		(void)kc_rd_i8(r);			/* IsFenced */
	kc_rd_tags(r);
	e->end = r->p;
}

/*
 * Maps e and appends it to o (reserving room for it plus `more` bytes).
 * 1 = emitted, 0 = dropped, or KC_MALFORMED with *why.
 */
static int
ep_emit(struct rw_out *o, const struct kc_broker_map *map, const struct kc_ep_node *e,
    size_t more, const char **why)
{
	const char *h = NULL;
	size_t hl = 0, esz;
	int32_t port = -1;

	if (e->node_id < 0)
		return 0;
	if (map->map(map->ctx, e->node_id, (const char *)e->host, (size_t)e->host_len,
	    e->port, &h, &hl, &port) != 0)
		return 0;
	if (!rw_host_ok(h, hl)) {
		*why = "mapped host invalid or too long";
		return KC_MALFORMED;
	}
	if (h == NULL)
		h = "";
	esz = 4 + rw_string_size(true, hl) + 4 + (size_t)(e->end - e->tail);
	if (!rw_reserve(o, o->len + esz + more)) {
		*why = "out of memory";
		return KC_MALFORMED;
	}
	rw_i32(o, e->node_id);
	rw_string(o, true, h, hl);
	rw_i32(o, port);
	rw_put(o, e->tail, (size_t)(e->end - e->tail));
	return 1;
}

int
kc_ep_rebuild(const uint8_t *frame, size_t len, size_t count_off, size_t entries_off,
    size_t rest_off, int32_t n, bool fenced, bool drop_all, const struct kc_broker_map *map,
    uint8_t **out, size_t *out_len, char *err, size_t errlen)
{
	struct rw_out o = { NULL, 0, 0 };
	struct kc_reader r;
	struct kc_ep_node e;
	const char *why = "out of memory";
	uint32_t kept = 0;
	size_t w;
	int32_t i;
	int rc;

	if (!rw_reserve(&o, len + (size_t)n * 32 + 16))
		return kc_rw_fail(&o, err, errlen, why);
	rw_put(&o, frame, count_off);
	o.len += entries_off - count_off;	/* the count, patched below; can only shrink */
	kc_rd_init(&r, frame, len);
	r.p += entries_off;
	for (i = 0; i < n; i++) {
		kc_ep_node(&r, fenced, &e);
		if (drop_all)
			continue;
		rc = ep_emit(&o, map, &e, len - (size_t)(e.end - frame), &why);
		if (rc < 0)
			return kc_rw_fail(&o, err, errlen, why);
		kept += (uint32_t)rc;
	}
	w = kc_uvarint_size(kept + 1);
	kc_put_uvarint(o.b + count_off, kept + 1);
	if (w < entries_off - count_off) {
		memmove(o.b + count_off + w, o.b + entries_off, o.len - entries_off);
		o.len -= entries_off - count_off - w;
	}
	if (!rw_reserve(&o, o.len + len - rest_off))
		return kc_rw_fail(&o, err, errlen, why);
	rw_put(&o, frame + rest_off, len - rest_off);
	return kc_rw_finish(&o, out, out_len, err, errlen);
}

/* ---- NodeEndpoints (Produce, Fetch) ---- */

struct ne_scan {
	bool known;	/* the version defines top-level tag 0 as NodeEndpoints */
	int found;	/* NodeEndpoints fields seen */
};

static void
ne_top_tag(struct kc_reader *val, uint32_t tag, void *ctx)
{
	struct ne_scan *sc = ctx;
	struct kc_ep_node e;
	int32_t i, n;

	if (tag != 0 || !sc->known) {
		kc_rd_skip(val, kc_rd_left(val));
		return;
	}
	sc->found++;
	n = kc_rd_array(val, true, false, KC_EP_NODE_MIN);
	for (i = 0; i < n && kc_rd_ok(val); i++)
		kc_ep_node(val, false, &e);
}

bool
kc_ne_scan(struct kc_reader *r, bool known, int *found)
{
	struct ne_scan sc = { known, 0 };

	ep_tags(r, ne_top_tag, &sc);
	*found = sc.found;
	return kc_rd_ok(r);
}

int
kc_ne_fields(const uint8_t *sec, size_t len, const struct kc_broker_map *map, bool drop,
    struct rw_out *t, uint32_t *nfields, uint32_t *max_tag, const char **why)
{
	struct rw_out v = { NULL, 0, 0 };
	struct kc_reader r, val;
	struct kc_ep_node e;
	const uint8_t *field;
	uint32_t nf, i, tag, size, kept, vsize;
	int32_t j, n;
	int rc;

	*why = "out of memory";
	*nfields = 0;
	*max_tag = 0;
	kc_rd_init(&r, sec, len);
	nf = kc_rd_uvarint(&r);
	for (i = 0; i < nf; i++) {
		field = r.p;
		tag = kc_rd_uvarint(&r);
		size = kc_rd_uvarint(&r);
		if (tag != 0) {
			kc_rd_skip(&r, size);
			if (!rw_reserve(t, t->len + (size_t)(r.p - field)))
				goto fail;
			rw_put(t, field, (size_t)(r.p - field));
		} else {
			kc_rd_init(&val, r.p, size);
			r.p += size;
			if (drop)
				continue;
			n = kc_rd_array(&val, true, false, KC_EP_NODE_MIN);
			v.len = 0;
			kept = 0;
			for (j = 0; j < n; j++) {
				kc_ep_node(&val, false, &e);
				rc = ep_emit(&v, map, &e, 0, why);
				if (rc < 0)
					goto fail;
				kept += (uint32_t)rc;
			}
			if (v.len > UINT32_MAX - 5) {
				*why = "rewritten frame too large";
				goto fail;
			}
			vsize = (uint32_t)(kc_uvarint_size(kept + 1) + v.len);
			if (!rw_reserve(t, t->len + 15 + vsize))
				goto fail;
			rw_uvarint(t, 0);
			rw_uvarint(t, vsize);
			rw_uvarint(t, kept + 1);
			rw_put(t, v.b, v.len);
		}
		(*nfields)++;
		if (tag > *max_tag)
			*max_tag = tag;
	}
	free(v.b);
	return KC_OK;

fail:
	free(v.b);
	return KC_MALFORMED;
}

/*
 * The validated frame's (len = the end of the message) top-level tag
 * section starts at tags_off and runs to the end.  Emits the frame with
 * every NodeEndpoints field rebuilt.
 */
static int
ne_rewrite(const uint8_t *frame, size_t len, size_t tags_off, const struct kc_broker_map *map,
    uint8_t **out, size_t *out_len, char *err, size_t errlen)
{
	struct rw_out t = { NULL, 0, 0 }, o = { NULL, 0, 0 };
	const char *why = "out of memory";
	uint32_t nf, max_tag;

	/* pass over the (small) section: its fields go to t */
	if (kc_ne_fields(frame + tags_off, len - tags_off, map, false, &t, &nf, &max_tag,
	    &why) != KC_OK)
		goto fail;
	/* one copy of everything before the section */
	if (!rw_reserve(&o, tags_off + 5 + t.len))
		goto fail;
	rw_put(&o, frame, tags_off);
	rw_uvarint(&o, nf);
	rw_put(&o, t.b, t.len);
	free(t.b);
	return kc_rw_finish(&o, out, out_len, err, errlen);

fail:
	free(t.b);
	return kc_rw_fail(&o, err, errlen, why);
}

/* The frame unchanged, in a buffer of its own. */
static int
ep_copy(const uint8_t *frame, size_t len, uint8_t **out, size_t *out_len, char *err,
    size_t errlen)
{
	struct rw_out o = { NULL, 0, 0 };

	if (!rw_reserve(&o, len))
		return kc_rw_fail(&o, err, errlen, "out of memory");
	rw_put(&o, frame, len);
	return kc_rw_finish(&o, out, out_len, err, errlen);
}

/*
 * Shared tail of Produce and Fetch: r sits at the top-level tag section
 * (flexible versions) or at the end of the message.  Validates it and
 * rewrites, dropping any trailing bytes.
 */
static int
ne_finish(struct kc_reader *r, const uint8_t *frame, size_t len, bool flex, bool known,
    const struct kc_broker_map *map, uint8_t **out, size_t *out_len, size_t *trailing,
    char *err, size_t errlen)
{
	size_t tags_off = (size_t)(r->p - frame), end;
	int found = 0;

	if (flex)
		(void)kc_ne_scan(r, known, &found);
	if (kc_rw_end(r, frame, &end, err, errlen) != KC_OK)
		return KC_MALFORMED;
	*trailing = len - end;
	len = end;
	if (found == 0)
		return ep_copy(frame, len, out, out_len, err, errlen);
	return ne_rewrite(frame, len, tags_off, map, out, out_len, err, errlen);
}

/* ---- Produce ---- */

static void
pr_partition(struct kc_reader *r, int v)
{
	bool flex = v >= 9;
	int32_t i, n;

	(void)kc_rd_i32(r);				/* Index */
	(void)kc_rd_i16(r);				/* ErrorCode */
	(void)kc_rd_i64(r);				/* BaseOffset */
	if (v >= 2)
		(void)kc_rd_i64(r);			/* LogAppendTimeMs */
	if (v >= 5)
		(void)kc_rd_i64(r);			/* LogStartOffset */
	if (v >= 8) {
		n = kc_rd_array(r, flex, false, RECERR_MIN);	/* RecordErrors */
		for (i = 0; i < n && kc_rd_ok(r); i++) {
			(void)kc_rd_i32(r);		/* BatchIndex */
			(void)kc_rd_string(r, flex, true, NULL);
			if (flex)
				kc_rd_tags(r);
		}
		(void)kc_rd_string(r, flex, true, NULL);	/* ErrorMessage */
	}
	if (flex)
		ep_tags(r, v >= 10 ? pr_partition_tag : NULL, NULL);
}

static void
pr_topic(struct kc_reader *r, int v)
{
	bool flex = v >= 9;
	int32_t i, n;

	if (v >= 13)
		kc_rd_skip(r, 16);				/* TopicId */
	else
		(void)kc_rd_string(r, flex, false, NULL);	/* Name */
	n = kc_rd_array(r, flex, false, PPART_MIN);		/* PartitionResponses */
	for (i = 0; i < n && kc_rd_ok(r); i++)
		pr_partition(r, v);
	if (flex)
		kc_rd_tags(r);
}

int
kc_rw_produce(int v, const uint8_t *frame, size_t len, const struct kc_broker_map *map,
    uint8_t **out, size_t *out_len, size_t *trailing, char *err, size_t errlen)
{
	struct kc_reader r;
	bool flex = v >= 9;
	int32_t i, n;

	if (kc_rw_check_frame(frame, len, err, errlen) != KC_OK)
		return KC_MALFORMED;
	kc_rd_init(&r, frame, len);
	kc_rw_skip_header(&r, KC_API_PRODUCE, (int16_t)v);
	n = kc_rd_array(&r, flex, false, TOPIC_MIN);		/* Responses */
	for (i = 0; i < n && kc_rd_ok(&r); i++)
		pr_topic(&r, v);
	if (v >= 1)
		(void)kc_rd_i32(&r);				/* ThrottleTimeMs */
	return ne_finish(&r, frame, len, flex, v >= PR_NODE_ENDPOINTS_FROM, map, out, out_len,
	    trailing, err, errlen);
}

/* ---- Fetch ---- */

static void
fe_partition(struct kc_reader *r, int v)
{
	bool flex = v >= 12;
	int32_t i, n;

	(void)kc_rd_i32(r);				/* PartitionIndex */
	(void)kc_rd_i16(r);				/* ErrorCode */
	(void)kc_rd_i64(r);				/* HighWatermark */
	if (v >= 4)
		(void)kc_rd_i64(r);			/* LastStableOffset */
	if (v >= 5)
		(void)kc_rd_i64(r);			/* LogStartOffset */
	if (v >= 4) {
		n = kc_rd_array(r, flex, true, AT_MIN);	/* AbortedTransactions */
		for (i = 0; i < n && kc_rd_ok(r); i++) {
			(void)kc_rd_i64(r);		/* ProducerId */
			(void)kc_rd_i64(r);		/* FirstOffset */
			if (flex)
				kc_rd_tags(r);
		}
	}
	if (v >= 11)
		(void)kc_rd_i32(r);			/* PreferredReadReplica */
	(void)kc_rd_bytes(r, flex, true, NULL);		/* Records: opaque */
	if (flex)
		ep_tags(r, kc_fe_partition_tag, NULL);
}

static void
fe_topic(struct kc_reader *r, int v)
{
	bool flex = v >= 12;
	int32_t i, n;

	if (v >= 13)
		kc_rd_skip(r, 16);				/* TopicId */
	else
		(void)kc_rd_string(r, flex, false, NULL);	/* Topic */
	n = kc_rd_array(r, flex, false, FPART_MIN);		/* Partitions */
	for (i = 0; i < n && kc_rd_ok(r); i++)
		fe_partition(r, v);
	if (flex)
		kc_rd_tags(r);
}

int
kc_rw_fetch(int v, const uint8_t *frame, size_t len, const struct kc_broker_map *map,
    uint8_t **out, size_t *out_len, size_t *trailing, char *err, size_t errlen)
{
	struct kc_reader r;
	bool flex = v >= 12;
	int32_t i, n;

	if (kc_rw_check_frame(frame, len, err, errlen) != KC_OK)
		return KC_MALFORMED;
	kc_rd_init(&r, frame, len);
	kc_rw_skip_header(&r, KC_API_FETCH, (int16_t)v);
	if (v >= 1)
		(void)kc_rd_i32(&r);				/* ThrottleTimeMs */
	if (v >= 7) {
		(void)kc_rd_i16(&r);				/* ErrorCode */
		(void)kc_rd_i32(&r);				/* SessionId */
	}
	n = kc_rd_array(&r, flex, false, TOPIC_MIN);		/* Responses */
	for (i = 0; i < n && kc_rd_ok(&r); i++)
		fe_topic(&r, v);
	return ne_finish(&r, frame, len, flex, v >= FE_NODE_ENDPOINTS_FROM, map, out, out_len,
	    trailing, err, errlen);
}

/* ---- DescribeCluster ---- */

#define DC_ENDPOINT_BROKERS	1

int
kc_rw_describe_cluster(int v, const uint8_t *frame, size_t len,
    const struct kc_broker_map *map, uint8_t **out, size_t *out_len, size_t *trailing,
    char *err, size_t errlen)
{
	struct kc_reader r;
	struct kc_ep_node e;
	size_t count_off, brokers_off, rest_off, end;
	int32_t i, n;
	int8_t endpoint_type = DC_ENDPOINT_BROKERS;

	if (kc_rw_check_frame(frame, len, err, errlen) != KC_OK)
		return KC_MALFORMED;
	kc_rd_init(&r, frame, len);
	kc_rw_skip_header(&r, KC_API_DESCRIBE_CLUSTER, (int16_t)v);
	(void)kc_rd_i32(&r);				/* ThrottleTimeMs */
	(void)kc_rd_i16(&r);				/* ErrorCode */
	(void)kc_rd_string(&r, true, true, NULL);	/* ErrorMessage */
	if (v >= 1)
		endpoint_type = kc_rd_i8(&r);		/* EndpointType */
	(void)kc_rd_string(&r, true, false, NULL);	/* ClusterId */
	(void)kc_rd_i32(&r);				/* ControllerId */
	count_off = (size_t)(r.p - frame);
	n = kc_rd_array(&r, true, false, KC_EP_NODE_MIN);	/* Brokers */
	brokers_off = (size_t)(r.p - frame);
	for (i = 0; i < n && kc_rd_ok(&r); i++)
		kc_ep_node(&r, v >= 2, &e);
	rest_off = (size_t)(r.p - frame);
	(void)kc_rd_i32(&r);				/* ClusterAuthorizedOperations */
	kc_rd_tags(&r);
	if (kc_rw_end(&r, frame, &end, err, errlen) != KC_OK)
		return KC_MALFORMED;
	*trailing = len - end;
	len = end;	/* trailing bytes are dropped */

	/* controllers (EndpointType 2) are not served by the proxy: all dropped */
	return kc_ep_rebuild(frame, len, count_off, brokers_off, rest_off, n, v >= 2,
	    endpoint_type != DC_ENDPOINT_BROKERS, map, out, out_len, err, errlen);
}
