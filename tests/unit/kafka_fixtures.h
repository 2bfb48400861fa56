/*
 * kafka_fixtures — shared by test_matrix and test_endpoints: a byte builder,
 * a field-by-field cursor, a test broker map, the generic rewrite check, and
 * one response builder per API, written from the schema facts below
 * independently of the code under test.
 *
 * The generic check (check_rw) rewrites a fixture built with upstream
 * addresses, compares it byte for byte with the fixture built with the
 * proxy's addresses (so every field but host/port, unknown tags and record
 * bytes included, must come out unchanged), then rejects every strict
 * prefix (size prefix fixed up), checking that the broker map never ran on a
 * rejected frame, and accepts the fixture plus trailing bytes (one 00, as
 * librdkafka's mock cluster sends after Metadata v9+, and aa bb cc): they are
 * dropped, so the output is the same byte for byte, the map runs as often,
 * and kc_broker_map.trailing counts them.
 *
 * Schema facts (apache/kafka clients/src/main/resources/common/message/):
 *  - flexible versions: Metadata 9+, FindCoordinator 3+, Produce 9+,
 *    Fetch 12+, ApiVersions 3+ (response header always v0), DescribeCluster
 *    all; flexible responses use response header v1 (tag section).
 *  - ProduceResponse: Responses [Name (v0-12) | TopicId uuid (v13+),
 *    PartitionResponses [Index i32, ErrorCode i16, BaseOffset i64,
 *    LogAppendTimeMs i64 v2+, LogStartOffset i64 v5+, RecordErrors
 *    [BatchIndex i32, BatchIndexErrorMessage nstring] v8+, ErrorMessage
 *    nstring v8+, tag 0 CurrentLeader {LeaderId i32, LeaderEpoch i32} v10+]],
 *    ThrottleTimeMs i32 v1+, top-level tag 0 NodeEndpoints [NodeId i32,
 *    Host string, Port i32, Rack nstring] v10+.
 *  - FetchResponse: ThrottleTimeMs v1+, ErrorCode i16 v7+, SessionId i32
 *    v7+, Responses [Topic (v0-12) | TopicId (v13+), Partitions
 *    [PartitionIndex i32, ErrorCode i16, HighWatermark i64, LastStableOffset
 *    i64 v4+, LogStartOffset i64 v5+, AbortedTransactions nullable
 *    [ProducerId i64, FirstOffset i64] v4+, PreferredReadReplica i32 v11+,
 *    Records nullable bytes, tags 0 DivergingEpoch {Epoch i32, EndOffset
 *    i64}, 1 CurrentLeader {LeaderId i32, LeaderEpoch i32}, 2 SnapshotId
 *    {EndOffset i64, Epoch i32}]], top-level tag 0 NodeEndpoints v16+;
 *    v17 and v18 change the request only.
 *  - DescribeClusterResponse: ThrottleTimeMs i32, ErrorCode i16,
 *    ErrorMessage nstring, EndpointType i8 v1+, ClusterId string,
 *    ControllerId i32, Brokers [BrokerId i32, Host string, Port i32, Rack
 *    nstring, IsFenced bool v2+], ClusterAuthorizedOperations i32.
 *  - Metadata / FindCoordinator / ApiVersions: reference/kafka-protocol.md
 *    sections 3, 4 and 6.
 */
#ifndef FERRY_TESTS_UNIT_KAFKA_FIXTURES_H
#define FERRY_TESTS_UNIT_KAFKA_FIXTURES_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/kafka/apiversions.h"
#include "worker/kafka/codec.h"
#include "worker/kafka/rewrite.h"

/* ---- byte builder ---- */

struct bb {
	uint8_t *b;
	size_t n, cap;
};

static inline void
bb_init(struct bb *b)
{
	b->cap = 4096;
	b->n = 0;
	b->b = malloc(b->cap);
	cr_assert_not_null(b->b);
}

static inline void
bb_free(struct bb *b)
{
	free(b->b);
	b->b = NULL;
}

static inline void
bb_raw(struct bb *b, const void *p, size_t n)
{
	while (b->n + n > b->cap) {
		b->cap *= 2;
		b->b = realloc(b->b, b->cap);
		cr_assert_not_null(b->b);
	}
	if (n > 0)
		memcpy(b->b + b->n, p, n);
	b->n += n;
}

static inline void
bb_u8(struct bb *b, uint8_t v)
{
	bb_raw(b, &v, 1);
}

static inline void
bb_i16(struct bb *b, int16_t v)
{
	uint8_t x[2] = { (uint8_t)((uint16_t)v >> 8), (uint8_t)v };

	bb_raw(b, x, 2);
}

static inline void
bb_i32(struct bb *b, int32_t v)
{
	uint32_t u = (uint32_t)v;
	uint8_t x[4] = { (uint8_t)(u >> 24), (uint8_t)(u >> 16), (uint8_t)(u >> 8), (uint8_t)u };

	bb_raw(b, x, 4);
}

static inline void
bb_i64(struct bb *b, int64_t v)
{
	bb_i32(b, (int32_t)(uint32_t)((uint64_t)v >> 32));
	bb_i32(b, (int32_t)(uint32_t)(uint64_t)v);
}

static inline void
bb_uv(struct bb *b, uint32_t v)
{
	while (v >= 0x80) {
		bb_u8(b, (uint8_t)(v | 0x80));
		v >>= 7;
	}
	bb_u8(b, (uint8_t)v);
}

/* (compact) string; NULL = null */
static inline void
bb_str(struct bb *b, bool flex, const char *s)
{
	size_t n = s != NULL ? strlen(s) : 0;

	if (flex)
		bb_uv(b, s != NULL ? (uint32_t)n + 1 : 0);
	else
		bb_i16(b, s != NULL ? (int16_t)n : -1);
	if (s != NULL)
		bb_raw(b, s, n);
}

/* (compact) array count; -1 = null */
static inline void
bb_arr(struct bb *b, bool flex, int32_t n)
{
	if (flex)
		bb_uv(b, (uint32_t)(n + 1));
	else
		bb_i32(b, n);
}

/* (compact) nullable bytes; p NULL = null */
static inline void
bb_bytes(struct bb *b, bool flex, const uint8_t *p, size_t n)
{
	if (flex)
		bb_uv(b, p != NULL ? (uint32_t)n + 1 : 0);
	else
		bb_i32(b, p != NULL ? (int32_t)n : -1);
	if (p != NULL)
		bb_raw(b, p, n);
}

/* One tagged field whose value is v. */
static inline void
bb_tag(struct bb *b, uint32_t tag, const struct bb *v)
{
	bb_uv(b, tag);
	bb_uv(b, (uint32_t)v->n);
	bb_raw(b, v->b, v->n);
}

static inline void
bb_fix(struct bb *b)
{
	kc_put_i32(b->b, (int32_t)(b->n - 4));
}

/* Size placeholder, correlation id, header tags when flexible. */
static inline void
bb_head(struct bb *b, bool header_v1)
{
	bb_i32(b, 0);
	bb_i32(b, 7);
	if (header_v1)
		bb_raw(b, "\x01\x03\x02\xc0\xde", 5);	/* header tag 3 = c0 de */
}

static inline void
assert_bytes(const uint8_t *got, size_t glen, const uint8_t *exp, size_t elen, const char *what)
{
	size_t i;

	for (i = 0; i < glen && i < elen; i++)
		if (got[i] != exp[i])
			break;
	cr_assert(glen == elen && i == elen,
	    "%s: frames differ: got %zu bytes, expected %zu, first difference at %zu "
	    "(got %02x, expected %02x)", what, glen, elen, i,
	    i < glen ? got[i] : 0, i < elen ? exp[i] : 0);
}

/* ---- field-by-field cursor over an output frame ---- */

struct cur {
	const uint8_t *p, *end;
};

static inline void
cur_need(struct cur *c, size_t n)
{
	cr_assert((size_t)(c->end - c->p) >= n, "cursor ran off the frame");
}

static inline void
ex_i8(struct cur *c, int8_t v)
{
	cur_need(c, 1);
	cr_assert_eq((int8_t)c->p[0], v);
	c->p += 1;
}

static inline void
ex_i16(struct cur *c, int16_t v)
{
	cur_need(c, 2);
	cr_assert_eq(kc_get_i16(c->p), v);
	c->p += 2;
}

static inline void
ex_i32(struct cur *c, int32_t v)
{
	cur_need(c, 4);
	cr_assert_eq(kc_get_i32(c->p), v, "got %d expected %d", kc_get_i32(c->p), v);
	c->p += 4;
}

static inline void
ex_i64(struct cur *c, int64_t v)
{
	cur_need(c, 8);
	cr_assert_eq((uint32_t)kc_get_i32(c->p), (uint32_t)((uint64_t)v >> 32));
	cr_assert_eq((uint32_t)kc_get_i32(c->p + 4), (uint32_t)(uint64_t)v);
	c->p += 8;
}

static inline void
ex_uv(struct cur *c, uint32_t v)
{
	uint32_t got = 0;
	int w;

	w = kc_get_uvarint(c->p, (size_t)(c->end - c->p), &got);
	cr_assert_gt(w, 0);
	cr_assert_eq(got, v, "varint %u, expected %u", got, v);
	c->p += w;
}

static inline void
ex_raw(struct cur *c, const void *p, size_t n)
{
	cur_need(c, n);
	cr_assert(memcmp(c->p, p, n) == 0);
	c->p += n;
}

/* compact string; NULL = null */
static inline void
ex_cstr(struct cur *c, const char *s)
{
	ex_uv(c, s != NULL ? (uint32_t)strlen(s) + 1 : 0);
	if (s != NULL)
		ex_raw(c, s, strlen(s));
}

static inline void
ex_end(struct cur *c)
{
	cr_assert(c->p == c->end, "%zu bytes left after the last field", (size_t)(c->end - c->p));
}

/* ---- broker map ---- */

struct tmap_ent {
	int32_t node;
	const char *host;
	int32_t port;
};

struct tmap {
	const struct tmap_ent *e;
	size_t n;
	int calls;
	int32_t nodes[64];
	char up_host[256];
	int32_t up_port;
};

static inline int
tmap_fn(void *ctx, int32_t node, const char *uh, size_t uhl, int32_t up,
    const char **h, size_t *hl, int32_t *p)
{
	struct tmap *m = ctx;
	size_t i;

	if (m->calls < 64)
		m->nodes[m->calls] = node;
	m->calls++;
	snprintf(m->up_host, sizeof(m->up_host), "%.*s", (int)uhl, uh);
	m->up_port = up;
	for (i = 0; i < m->n; i++) {
		if (m->e[i].node == node) {
			*h = m->e[i].host;
			*hl = strlen(m->e[i].host);
			*p = m->e[i].port;
			return 0;
		}
	}
	return -1;
}

static const struct tmap_ent proxy_map[] = {
	{ 1, "proxy.local", 19001 },
	{ 2, "proxy.local", 19002 },
	{ 3, "proxy.local", 19003 },
};

static inline struct kc_broker_map
mk_map(struct tmap *m, const struct tmap_ent *e, size_t n)
{
	struct kc_broker_map bm;

	memset(m, 0, sizeof(*m));
	m->e = e;
	m->n = n;
	bm.map = tmap_fn;
	bm.ctx = m;
	bm.trailing = SIZE_MAX;	/* kc_rewrite_response must set it */
	return bm;
}

/* ---- addresses ---- */

struct node {
	int32_t id;
	const char *host;
	int32_t port;
	const char *rack;
	const char *tags;	/* raw entry tag section (flexible), NULL = empty */
	size_t tl;
	uint8_t fenced;		/* DescribeCluster v2 */
};

static const struct node UP[3] = {
	{ 1, "kafka-1.internal.example", 9092, "rack-a", NULL, 0, 0 },
	{ 2, "kafka-2.internal.example", 9093, NULL, "\x01\x05\x02\xaa\xbb", 5, 0 },
	{ 3, "kafka-3.internal.example", 9094, "rack-c", NULL, 0, 1 },
};
static const struct node PX[3] = {
	{ 1, "proxy.local", 19001, "rack-a", NULL, 0, 0 },
	{ 2, "proxy.local", 19002, NULL, "\x01\x05\x02\xaa\xbb", 5, 0 },
	{ 3, "proxy.local", 19003, "rack-c", NULL, 0, 1 },
};

static inline void
bb_entry_tags(struct bb *b, const struct node *n)
{
	if (n->tags != NULL)
		bb_raw(b, n->tags, n->tl);
	else
		bb_u8(b, 0);
}

/* A NodeEndpoints value (compact array of NodeEndpoint). */
static inline void
bb_node_endpoints(struct bb *b, const struct node *ns, size_t nn)
{
	size_t i;

	bb_arr(b, true, (int32_t)nn);
	for (i = 0; i < nn; i++) {
		bb_i32(b, ns[i].id);
		bb_str(b, true, ns[i].host);
		bb_i32(b, ns[i].port);
		bb_str(b, true, ns[i].rack);
		bb_entry_tags(b, &ns[i]);
	}
}

/* ---- the generic check ---- */

/* Trailing bytes check_rw appends: librdkafka's mock cluster's extra 00, and more. */
static const struct {
	const char *b;
	size_t n;
} rw_tails[] = {
	{ "\x00", 1 },
	{ "\xaa\xbb\xcc", 3 },
};

/*
 * Rewrites in, compares with exp, checks the map ran `calls` times (-1: do
 * not check) and that no trailing bytes were reported, then rejects every
 * strict prefix and accepts in plus each of rw_tails, with the same output
 * and the same map calls.
 */
static inline void
check_rw(int16_t key, int v, const struct bb *in, const struct bb *exp, int calls)
{
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	uint8_t *out = NULL, *f;
	size_t n = 0, cut, i, fl;
	char err[128] = "", what[64];
	int rc, seen;

	snprintf(what, sizeof(what), "%s v%d", kc_api_name(key), v);
	rc = kc_rewrite_response(key, (int16_t)v, in->b, in->n, &bm, &out, &n, err, sizeof(err));
	cr_assert_eq(rc, KC_OK, "%s: %s", what, err);
	cr_assert_not_null(out);
	assert_bytes(out, n, exp->b, exp->n, what);
	cr_assert_eq((size_t)kc_get_i32(out), n - 4);
	cr_assert_eq(bm.trailing, 0, "%s: %zu trailing bytes reported", what, bm.trailing);
	if (calls >= 0)
		cr_assert_eq(m.calls, calls, "%s: map ran %d times, expected %d", what, m.calls, calls);
	free(out);
	seen = m.calls;

	f = malloc(in->n + 8);
	cr_assert_not_null(f);
	for (cut = 8; cut < in->n; cut++) {
		memcpy(f, in->b, cut);
		kc_put_i32(f, (int32_t)(cut - 4));
		out = NULL;
		rc = kc_rewrite_response(key, (int16_t)v, f, cut, &bm, &out, &n, err, sizeof(err));
		cr_assert_eq(rc, KC_MALFORMED, "%s: prefix of %zu/%zu bytes accepted", what, cut,
		    in->n);
		cr_assert_null(out);
	}
	cr_assert_eq(m.calls, seen, "%s: map ran on a malformed frame", what);

	for (i = 0; i < sizeof(rw_tails) / sizeof(rw_tails[0]); i++) {
		fl = in->n + rw_tails[i].n;
		memcpy(f, in->b, in->n);
		memcpy(f + in->n, rw_tails[i].b, rw_tails[i].n);
		kc_put_i32(f, (int32_t)(fl - 4));
		m.calls = 0;
		bm.trailing = SIZE_MAX;
		out = NULL;
		rc = kc_rewrite_response(key, (int16_t)v, f, fl, &bm, &out, &n, err, sizeof(err));
		cr_assert_eq(rc, KC_OK, "%s + %zu trailing bytes: %s", what, rw_tails[i].n, err);
		assert_bytes(out, n, exp->b, exp->n, what);
		cr_assert_eq(bm.trailing, rw_tails[i].n, "%s: %zu trailing bytes reported, not %zu",
		    what, bm.trailing, rw_tails[i].n);
		cr_assert_eq(m.calls, seen, "%s + %zu trailing bytes: map ran %d times, not %d",
		    what, rw_tails[i].n, m.calls, seen);
		free(out);
	}
	free(f);
}

/* One rewrite whose output is only checked for success; frees it. */
static inline int
try_rw(int16_t key, int v, const struct bb *in, struct kc_broker_map *bm, char *err)
{
	uint8_t *out = NULL;
	size_t n = 0;
	int rc;

	rc = kc_rewrite_response(key, (int16_t)v, in->b, in->n, bm, &out, &n, err, 128);
	if (rc != KC_OK)
		cr_assert_null(out);
	free(out);
	return rc;
}

/* ==== Metadata 0-13 ==== */

static inline void
build_md(struct bb *b, int v, const struct node *br, size_t nb)
{
	bool flex = v >= 9;
	size_t i;
	int t, p;

	bb_init(b);
	bb_head(b, flex);
	if (v >= 3)
		bb_i32(b, 25);				/* throttle_time_ms */
	bb_arr(b, flex, (int32_t)nb);
	for (i = 0; i < nb; i++) {
		bb_i32(b, br[i].id);
		bb_str(b, flex, br[i].host);
		bb_i32(b, br[i].port);
		if (v >= 1)
			bb_str(b, flex, br[i].rack);
		if (flex)
			bb_entry_tags(b, &br[i]);
	}
	if (v >= 2)
		bb_str(b, flex, "cluster-A");		/* cluster_id */
	if (v >= 1)
		bb_i32(b, 2);				/* controller_id */
	bb_arr(b, flex, 2);				/* topics */
	for (t = 0; t < 2; t++) {
		bb_i16(b, (int16_t)(t == 0 ? 0 : 3));
		bb_str(b, flex, t == 1 && v >= 12 ? NULL : (t == 0 ? "orders" : "gone"));
		if (v >= 10)
			bb_raw(b, "\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f", 16);
		if (v >= 1)
			bb_u8(b, 0);			/* is_internal */
		bb_arr(b, flex, t == 0 ? 2 : 0);
		for (p = 0; t == 0 && p < 2; p++) {
			bb_i16(b, 0);
			bb_i32(b, p);
			bb_i32(b, p + 1);		/* leader */
			if (v >= 7)
				bb_i32(b, 4);		/* leader_epoch */
			bb_arr(b, flex, 3);
			bb_i32(b, 1);
			bb_i32(b, 2);
			bb_i32(b, 3);
			bb_arr(b, flex, 1);
			bb_i32(b, p + 1);
			if (v >= 5) {
				bb_arr(b, flex, 1);
				bb_i32(b, 3);
			}
			if (flex)
				bb_raw(b, "\x01\x08\x01\x7f", 4);
		}
		if (v >= 8)
			bb_i32(b, INT32_MIN);
		if (flex)
			bb_u8(b, 0);
	}
	if (v >= 8 && v <= 10)
		bb_i32(b, INT32_MIN);			/* cluster_authorized_operations */
	if (v >= 13)
		bb_i16(b, 0);				/* error_code */
	if (flex)
		bb_raw(b, "\x01\x09\x02\x12\x34", 5);
	bb_fix(b);
}

/* ==== FindCoordinator 0-6 ==== */

struct coord {
	const char *key;
	int32_t node;
	const char *host;
	int32_t port;
	int16_t ec;
	const char *msg;
};

static inline void
build_fc(struct bb *b, int v, const struct coord *c, size_t nc)
{
	bool flex = v >= 3;
	size_t i;

	bb_init(b);
	bb_head(b, flex);
	if (v >= 1)
		bb_i32(b, 30);				/* throttle_time_ms */
	if (v <= 3) {
		bb_i16(b, c[0].ec);
		if (v >= 1)
			bb_str(b, flex, c[0].msg);
		bb_i32(b, c[0].node);
		bb_str(b, flex, c[0].host);
		bb_i32(b, c[0].port);
	} else {
		bb_arr(b, true, (int32_t)nc);
		for (i = 0; i < nc; i++) {
			bb_str(b, true, c[i].key);
			bb_i32(b, c[i].node);
			bb_str(b, true, c[i].host);
			bb_i32(b, c[i].port);
			bb_i16(b, c[i].ec);
			bb_str(b, true, c[i].msg);
			bb_raw(b, i == 0 ? "\x01\x04\x01\x42" : "\x00", i == 0 ? 4 : 1);
		}
	}
	if (flex)
		bb_raw(b, "\x01\x02\x01\x55", 4);
	bb_fix(b);
}

/* ==== DescribeCluster 0-2 ==== */

static inline void
build_dc(struct bb *b, int v, int8_t endpoint_type, const struct node *br, size_t nb)
{
	size_t i;

	bb_init(b);
	bb_head(b, true);
	bb_i32(b, 12);					/* ThrottleTimeMs */
	bb_i16(b, 0);					/* ErrorCode */
	bb_str(b, true, "all good");			/* ErrorMessage */
	if (v >= 1)
		bb_u8(b, (uint8_t)endpoint_type);	/* EndpointType */
	bb_str(b, true, "cluster-A");			/* ClusterId */
	bb_i32(b, 2);					/* ControllerId */
	bb_arr(b, true, (int32_t)nb);			/* Brokers */
	for (i = 0; i < nb; i++) {
		bb_i32(b, br[i].id);
		bb_str(b, true, br[i].host);
		bb_i32(b, br[i].port);
		bb_str(b, true, br[i].rack);
		if (v >= 2)
			bb_u8(b, br[i].fenced);
		bb_entry_tags(b, &br[i]);
	}
	bb_i32(b, INT32_MIN);				/* ClusterAuthorizedOperations */
	bb_raw(b, "\x01\x03\x03\x01\x02\x03", 6);	/* unknown top-level tag 3 */
	bb_fix(b);
}

/* ==== Produce 0-13 ==== */

struct pr_opts {
	const struct node *ne;	/* NodeEndpoints entries (v10+) */
	size_t nne;
	bool with_ne;		/* emit the NodeEndpoints tag at all */
	bool tag7;		/* unknown top-level tag 7 after tag 0 */
};

static inline void
bb_pr_partition(struct bb *b, int v, int idx)
{
	bool flex = v >= 9;

	bb_i32(b, idx);					/* Index */
	bb_i16(b, (int16_t)(idx == 1 ? 6 : 0));		/* ErrorCode */
	bb_i64(b, 0x0102030405060708LL + idx);		/* BaseOffset */
	if (v >= 2)
		bb_i64(b, -1);				/* LogAppendTimeMs */
	if (v >= 5)
		bb_i64(b, 42);				/* LogStartOffset */
	if (v >= 8) {
		bb_arr(b, flex, idx == 1 ? 2 : 0);	/* RecordErrors */
		if (idx == 1) {
			bb_i32(b, 3);
			bb_str(b, flex, NULL);
			if (flex)
				bb_u8(b, 0);
			bb_i32(b, 4);
			bb_str(b, flex, "bad record");
			if (flex)
				bb_raw(b, "\x01\x06\x01\x66", 4);
		}
		bb_str(b, flex, idx == 1 ? "not leader" : NULL);	/* ErrorMessage */
	}
	if (flex) {
		if (idx == 1 && v >= 10) {
			struct bb cl;

			/* tag 0 CurrentLeader {2, 7}, then an unknown tag 9 */
			bb_init(&cl);
			bb_i32(&cl, 2);
			bb_i32(&cl, 7);
			bb_u8(&cl, 0);
			bb_u8(b, 2);
			bb_tag(b, 0, &cl);
			bb_raw(b, "\x09\x02\xbe\xef", 4);
			bb_free(&cl);
		} else if (idx == 1) {
			bb_raw(b, "\x01\x09\x02\xbe\xef", 5);
		} else
			bb_u8(b, 0);
	}
}

static inline void
build_pr(struct bb *b, int v, const struct pr_opts *o)
{
	bool flex = v >= 9;
	int t, p;

	bb_init(b);
	bb_head(b, flex);
	bb_arr(b, flex, 2);				/* Responses */
	for (t = 0; t < 2; t++) {
		if (v >= 13)
			bb_raw(b, t == 0 ? "\x20\x21\x22\x23\x24\x25\x26\x27\x28\x29\x2a\x2b\x2c\x2d\x2e\x2f"
			    : "\x30\x31\x32\x33\x34\x35\x36\x37\x38\x39\x3a\x3b\x3c\x3d\x3e\x3f", 16);
		else
			bb_str(b, flex, t == 0 ? "orders" : "logs");
		bb_arr(b, flex, t == 0 ? 2 : 1);	/* PartitionResponses */
		for (p = 0; p < (t == 0 ? 2 : 1); p++)
			bb_pr_partition(b, v, p);
		if (flex)
			bb_u8(b, 0);
	}
	if (v >= 1)
		bb_i32(b, 25);				/* ThrottleTimeMs */
	if (flex) {
		bool ne = o != NULL && o->with_ne && v >= 10;
		bool t7 = o != NULL && o->tag7;

		bb_uv(b, (uint32_t)(ne + t7));
		if (ne) {
			struct bb val;

			bb_init(&val);
			bb_node_endpoints(&val, o->ne, o->nne);
			bb_tag(b, 0, &val);
			bb_free(&val);
		}
		if (t7)
			bb_raw(b, "\x07\x03\x01\x02\x03", 5);
	}
	bb_fix(b);
}

/* Produce v (flexible) without tags, then the raw top-level tag section
 * "count, field..." given as nf fields (each a tag number and a value). */
static inline void
build_pr_tags(struct bb *b, int v, uint32_t nf, const uint32_t *tags, const struct bb *vals)
{
	static const struct pr_opts none = { NULL, 0, false, false };
	uint32_t i;

	build_pr(b, v, &none);
	b->n--;					/* the empty tag section */
	bb_uv(b, nf);
	for (i = 0; i < nf; i++)
		bb_tag(b, tags[i], &vals[i]);
	bb_fix(b);
}

/* ==== Fetch 0-18 ==== */

struct fe_opts {
	const struct node *ne;
	size_t nne;
	bool with_ne, tag7;
	size_t big;		/* extra record bytes in the first partition */
};

/* Record bytes: opaque to the proxy, full of varint-looking bytes. */
static inline void
fill_records(uint8_t *p, size_t n, uint32_t seed)
{
	size_t i;

	for (i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16) | (i % 3 == 0 ? 0x80 : 0);
	}
}

static inline void
bb_fe_partition(struct bb *b, int v, int t, int idx, size_t big)
{
	bool flex = v >= 12;
	uint8_t *rec;
	size_t rn = 70 + big;

	bb_i32(b, idx);					/* PartitionIndex */
	bb_i16(b, 0);					/* ErrorCode */
	bb_i64(b, 1000 + idx);				/* HighWatermark */
	if (v >= 4)
		bb_i64(b, 990);				/* LastStableOffset */
	if (v >= 5)
		bb_i64(b, 5);				/* LogStartOffset */
	if (v >= 4) {
		if (idx == 0)
			bb_arr(b, flex, -1);		/* AbortedTransactions: null */
		else {
			bb_arr(b, flex, 2);
			bb_i64(b, 0x5000);
			bb_i64(b, 991);
			if (flex)
				bb_u8(b, 0);
			bb_i64(b, 0x5001);
			bb_i64(b, 995);
			if (flex)
				bb_raw(b, "\x01\x03\x01\x33", 4);
		}
	}
	if (v >= 11)
		bb_i32(b, idx == 0 ? -1 : 3);		/* PreferredReadReplica */
	if (t == 1)
		bb_bytes(b, flex, NULL, 0);		/* Records: null */
	else if (idx == 1)
		bb_bytes(b, flex, (const uint8_t *)"", 0);	/* Records: empty */
	else {
		rec = malloc(rn);
		cr_assert_not_null(rec);
		fill_records(rec, rn, (uint32_t)v);
		bb_bytes(b, flex, rec, rn);
		free(rec);
	}
	if (flex) {
		if (idx == 0 && t == 0) {
			/* DivergingEpoch, CurrentLeader, SnapshotId, unknown tag 12 */
			bb_u8(b, 4);
			bb_raw(b, "\x00\x0d" "\x00\x00\x00\x05" "\x00\x00\x00\x00\x00\x00\x00\x4d" "\x00", 15);
			bb_raw(b, "\x01\x09" "\x00\x00\x00\x02" "\x00\x00\x00\x09" "\x00", 11);
			bb_raw(b, "\x02\x0d" "\x00\x00\x00\x00\x00\x00\x00\x64" "\x00\x00\x00\x04" "\x00", 15);
			bb_raw(b, "\x0c\x03\x01\x02\x03", 5);
		} else
			bb_u8(b, 0);
	}
}

static inline void
build_fe(struct bb *b, int v, const struct fe_opts *o)
{
	bool flex = v >= 12;
	int t, p;

	bb_init(b);
	bb_head(b, flex);
	if (v >= 1)
		bb_i32(b, 10);				/* ThrottleTimeMs */
	if (v >= 7) {
		bb_i16(b, 0);				/* ErrorCode */
		bb_i32(b, 0x11223344);			/* SessionId */
	}
	bb_arr(b, flex, 2);				/* Responses */
	for (t = 0; t < 2; t++) {
		if (v >= 13)
			bb_raw(b, t == 0 ? "\x20\x21\x22\x23\x24\x25\x26\x27\x28\x29\x2a\x2b\x2c\x2d\x2e\x2f"
			    : "\x30\x31\x32\x33\x34\x35\x36\x37\x38\x39\x3a\x3b\x3c\x3d\x3e\x3f", 16);
		else
			bb_str(b, flex, t == 0 ? "orders" : "logs");
		bb_arr(b, flex, t == 0 ? 2 : 1);	/* Partitions */
		for (p = 0; p < (t == 0 ? 2 : 1); p++)
			bb_fe_partition(b, v, t, p, o != NULL ? o->big : 0);
		if (flex)
			bb_u8(b, 0);
	}
	if (flex) {
		bool ne = o != NULL && o->with_ne && v >= 16;
		bool t7 = o != NULL && o->tag7;

		bb_uv(b, (uint32_t)(ne + t7));
		if (ne) {
			struct bb val;

			bb_init(&val);
			bb_node_endpoints(&val, o->ne, o->nne);
			bb_tag(b, 0, &val);
			bb_free(&val);
		}
		if (t7)
			bb_raw(b, "\x07\x03\x01\x02\x03", 5);
	}
	bb_fix(b);
}

/* ==== ApiVersions 0-5 ==== */

struct av_ent {
	int16_t key, min, max;
};

static inline void
build_av(struct bb *b, int v, const struct av_ent *e, size_t n)
{
	size_t i;

	bb_init(b);
	bb_head(b, false);				/* always header v0 */
	bb_i16(b, 0);
	if (v >= 3)
		bb_uv(b, (uint32_t)n + 1);
	else
		bb_i32(b, (int32_t)n);
	for (i = 0; i < n; i++) {
		bb_i16(b, e[i].key);
		bb_i16(b, e[i].min);
		bb_i16(b, e[i].max);
		if (v >= 3)
			bb_raw(b, i == 1 ? "\x01\x07\x02\xde\xad" : "\x00", i == 1 ? 5 : 1);
	}
	if (v >= 1)
		bb_i32(b, 250);
	if (v >= 3)
		bb_raw(b, "\x01\x01\x08\x00\x00\x00\x00\x00\x00\x00\x2a", 11);
	bb_fix(b);
}

#endif
