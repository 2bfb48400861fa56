/*
 * test_rewrite — Criterion tests of worker/kafka/rewrite.c: broker-address
 * rewriting of Metadata v0-13 and FindCoordinator v0-6 responses.
 *
 * Fixtures are either the byte-exact vectors of reference/kafka-protocol.md
 * or frames built field by field by the small builder below (written from
 * the schema tables, independently of the code under test).  A rewrite is
 * checked against the frame the builder produces with the mapped addresses.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/kafka/codec.h"
#include "worker/kafka/rewrite.h"

/* ---- frame builder ---- */

struct bb {
	uint8_t *b;
	size_t n, cap;
};

static void
bb_init(struct bb *b)
{
	b->cap = 1 << 16;
	b->n = 0;
	b->b = calloc(1, b->cap);
	cr_assert_not_null(b->b);
}

static void
bb_raw(struct bb *b, const void *p, size_t n)
{
	cr_assert(b->n + n <= b->cap, "builder overflow");
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void
bb_u8(struct bb *b, uint8_t v)
{
	bb_raw(b, &v, 1);
}

static void
bb_i16(struct bb *b, int16_t v)
{
	uint8_t x[2] = { (uint8_t)((uint16_t)v >> 8), (uint8_t)v };

	bb_raw(b, x, 2);
}

static void
bb_i32(struct bb *b, int32_t v)
{
	uint32_t u = (uint32_t)v;
	uint8_t x[4] = { (uint8_t)(u >> 24), (uint8_t)(u >> 16), (uint8_t)(u >> 8), (uint8_t)u };

	bb_raw(b, x, 4);
}

static void
bb_uv(struct bb *b, uint32_t v)
{
	while (v >= 0x80) {
		bb_u8(b, (uint8_t)(v | 0x80));
		v >>= 7;
	}
	bb_u8(b, (uint8_t)v);
}

/* (compact) string; NULL = null */
static void
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

static void
bb_arr(struct bb *b, bool flex, int32_t n)
{
	if (flex)
		bb_uv(b, (uint32_t)n + 1);
	else
		bb_i32(b, n);
}

static void
bb_fix(struct bb *b)
{
	uint32_t u = (uint32_t)(b->n - 4);

	b->b[0] = (uint8_t)(u >> 24);
	b->b[1] = (uint8_t)(u >> 16);
	b->b[2] = (uint8_t)(u >> 8);
	b->b[3] = (uint8_t)u;
}

static void
assert_bytes(const uint8_t *got, size_t glen, const uint8_t *exp, size_t elen)
{
	size_t i;

	for (i = 0; i < glen && i < elen; i++)
		if (got[i] != exp[i])
			break;
	cr_assert(glen == elen && i == elen,
	    "frames differ: got %zu bytes, expected %zu, first difference at %zu "
	    "(got %02x, expected %02x)", glen, elen, i,
	    i < glen ? got[i] : 0, i < elen ? exp[i] : 0);
}

/* ---- test broker map ---- */

struct tmap_ent {
	int32_t node;
	const char *host;
	int32_t port;
};

struct tmap {
	const struct tmap_ent *e;
	size_t n;
	int calls;
	int32_t nodes[512];
	char up_host[256];
	int32_t up_port;
};

static int
tmap_fn(void *ctx, int32_t node, const char *uh, size_t uhl, int32_t up,
    const char **h, size_t *hl, int32_t *p)
{
	struct tmap *m = ctx;
	size_t i;

	if (m->calls < 512)
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

static struct kc_broker_map
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

static int
rewrite(int16_t key, int16_t v, const uint8_t *f, size_t len, struct kc_broker_map *bm,
    uint8_t **out, size_t *out_len, char *err)
{
	return kc_rewrite_response(key, v, f, len, bm, out, out_len, err, 128);
}

/*
 * Trailing bytes after a complete response: one 00 (what librdkafka's mock
 * cluster sends after Metadata v9+) and aa bb cc.  They are accepted and
 * dropped, and kc_broker_map.trailing counts them.
 */
static const struct {
	const char *b;
	size_t n;
} tails[] = {
	{ "\x00", 1 },
	{ "\xaa\xbb\xcc", 3 },
};
#define NTAILS	(sizeof(tails) / sizeof(tails[0]))

/* f (n bytes) plus tails[i], size prefix fixed up; *fl gets the length. */
static uint8_t *
with_tail(const uint8_t *f, size_t n, size_t i, size_t *fl)
{
	uint8_t *b = malloc(n + tails[i].n);

	cr_assert_not_null(b);
	memcpy(b, f, n);
	memcpy(b + n, tails[i].b, tails[i].n);
	*fl = n + tails[i].n;
	kc_put_i32(b, (int32_t)(*fl - 4));
	return b;
}

/*
 * f plus each of tails rewrites to exp (elen bytes), reports the trailing
 * bytes, and runs the map `calls` times.
 */
static void
check_tails(int16_t key, int16_t v, const uint8_t *f, size_t n, const uint8_t *exp, size_t elen,
    const struct tmap_ent *e, size_t ne, int calls)
{
	struct tmap m;
	struct kc_broker_map bm;
	uint8_t *t, *out;
	size_t i, tl, on;
	char err[128];

	for (i = 0; i < NTAILS; i++) {
		bm = mk_map(&m, e, ne);
		t = with_tail(f, n, i, &tl);
		out = NULL;
		on = 0;
		err[0] = '\0';
		cr_assert_eq(rewrite(key, v, t, tl, &bm, &out, &on, err), KC_OK,
		    "key %d v%d + %zu trailing bytes: %s", key, v, tails[i].n, err);
		assert_bytes(out, on, exp, elen);
		cr_assert_eq(bm.trailing, tails[i].n, "key %d v%d: trailing %zu, not %zu", key, v,
		    bm.trailing, tails[i].n);
		cr_assert_eq(m.calls, calls, "key %d v%d + %zu trailing bytes: map ran %d times",
		    key, v, tails[i].n, m.calls);
		free(out);
		free(t);
	}
}

/* ---- document vectors ---- */

static const uint8_t md_v0_vec[68] = {
	0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x01,
	0x00, 0x00, 0x00, 0x01, 0x00, 0x07, 'k', 'a', 'f', 'k', 'a', '-', '1', 0x00, 0x00, 0x23, 0x84,
	0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x74, 0x00, 0x00, 0x00, 0x01,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
	0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01,
};

#define MD_V12_HEAD \
	0x00, 0x00, 0x00, 0x07, 0x00, \
	0x00, 0x00, 0x00, 0x00, 0x02
#define MD_V12_BROKER_UP \
	0x00, 0x00, 0x00, 0x01, 0x08, 'k', 'a', 'f', 'k', 'a', '-', '1', 0x00, 0x00, 0x23, 0x84, 0x00, 0x00
#define MD_V12_BROKER_PROXY \
	0x00, 0x00, 0x00, 0x01, 0x0c, 0x70, 0x72, 0x6f, 0x78, 0x79, 0x2e, 0x6c, 0x6f, 0x63, 0x61, 0x6c, \
	0x00, 0x00, 0x4a, 0x39, 0x00, 0x00
#define MD_V12_REST \
	0x03, 0x63, 0x31, 0x00, 0x00, 0x00, 0x01, 0x02, \
	0x00, 0x00, 0x02, 0x74, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, \
	0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x00, \
	0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, \
	0x02, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00, \
	0x80, 0x00, 0x00, 0x00, 0x00

static const uint8_t md_v12_vec[94] = {
	0x00, 0x00, 0x00, 0x5a, MD_V12_HEAD, MD_V12_BROKER_UP, MD_V12_REST, 0x00
};
static const uint8_t md_v12_expect[98] = {
	0x00, 0x00, 0x00, 0x5e, MD_V12_HEAD, MD_V12_BROKER_PROXY, MD_V12_REST, 0x00
};
static const uint8_t md_v13_vec[96] = {
	0x00, 0x00, 0x00, 0x5c, MD_V12_HEAD, MD_V12_BROKER_UP, MD_V12_REST, 0x00, 0x00, 0x00
};
static const uint8_t md_v13_expect[100] = {
	0x00, 0x00, 0x00, 0x60, MD_V12_HEAD, MD_V12_BROKER_PROXY, MD_V12_REST, 0x00, 0x00, 0x00
};

Test(metadata, v0_vector_rewrite)
{
	static const uint8_t expect[72] = {
		0x00, 0x00, 0x00, 0x44, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x01,
		0x00, 0x00, 0x00, 0x01, 0x00, 0x0b, 'p', 'r', 'o', 'x', 'y', '.', 'l', 'o', 'c', 'a', 'l',
		0x00, 0x00, 0x4a, 0x39,
		0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x74, 0x00, 0x00, 0x00, 0x01,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
		0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01,
	};
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 1);
	uint8_t *out = NULL;
	size_t n = 0;
	char err[128] = "";

	cr_assert_eq(rewrite(3, 0, md_v0_vec, sizeof(md_v0_vec), &bm, &out, &n, err), KC_OK, "%s", err);
	assert_bytes(out, n, expect, sizeof(expect));
	cr_assert_eq(m.calls, 1);
	cr_assert_eq(m.nodes[0], 1);
	cr_assert_str_eq(m.up_host, "kafka-1");
	cr_assert_eq(m.up_port, 9092);
	free(out);
}

Test(metadata, v12_vector_rewrite)
{
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 1);
	static const uint8_t broker[] = { MD_V12_BROKER_PROXY };
	uint8_t *out = NULL;
	size_t n = 0;
	char err[128] = "";

	cr_assert_eq(rewrite(3, 12, md_v12_vec, sizeof(md_v12_vec), &bm, &out, &n, err), KC_OK, "%s", err);
	cr_assert_eq(n, 98);
	cr_assert_eq(kc_get_i32(out), 94);
	cr_assert(memcmp(out + 14, broker, sizeof(broker)) == 0);
	cr_assert(memcmp(out + 14, "\x00\x00\x00\x01\x0c" "proxy.local" "\x00\x00\x4a\x39\x00\x00", 22) == 0);
	assert_bytes(out, n, md_v12_expect, sizeof(md_v12_expect));
	cr_assert_eq(m.calls, 1);
	cr_assert_str_eq(m.up_host, "kafka-1");
	cr_assert_eq(bm.trailing, 0);
	free(out);
}

/*
 * librdkafka 2.12's mock cluster writes the empty tag section at the end of
 * Metadata v9+ twice: the response parses completely and one 00 is left.
 * librdkafka and the Java client ignore it; the proxy accepts it, and the
 * client gets exactly the parsed response (the 00 dropped, size fixed up).
 */
Test(metadata, v12_librdkafka_mock_extra_tag_byte)
{
	static const uint8_t mock[95] = {
		0x00, 0x00, 0x00, 0x5b, MD_V12_HEAD, MD_V12_BROKER_UP, MD_V12_REST, 0x00, 0x00
	};
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 1);
	uint8_t *out = NULL;
	size_t n = 0;
	char err[128] = "";

	cr_assert_eq(rewrite(3, 12, mock, sizeof(mock), &bm, &out, &n, err), KC_OK, "%s", err);
	assert_bytes(out, n, md_v12_expect, sizeof(md_v12_expect));
	cr_assert_eq(kc_get_i32(out), 94);
	cr_assert_eq(bm.trailing, 1);
	cr_assert_eq(m.calls, 1);
	free(out);
	check_tails(3, 12, md_v12_vec, sizeof(md_v12_vec), md_v12_expect, sizeof(md_v12_expect),
	    proxy_map, 1, 1);
}

/*
 * The same shape as the mock sends it for a brokers-only request: three
 * brokers on 127.0.0.1 without racks, cluster id, controller, no topics, the
 * final tag section and the extra 00.
 */
#define MOCK_BROKER(id, port) \
	0x00, 0x00, 0x00, (id), 0x0a, '1', '2', '7', '.', '0', '.', '0', '.', '1', \
	0x00, 0x00, (uint8_t)((port) >> 8), (uint8_t)(port), 0x00, 0x00
#define PROXY_BROKER(id, port) \
	0x00, 0x00, 0x00, (id), 0x0c, 'p', 'r', 'o', 'x', 'y', '.', 'l', 'o', 'c', 'a', 'l', \
	0x00, 0x00, (uint8_t)((port) >> 8), (uint8_t)(port), 0x00, 0x00
#define MOCK_REST \
	0x0c, 'm', 'o', 'c', 'k', 'C', 'l', 'u', 's', 't', 'e', 'r', \
	0x00, 0x00, 0x00, 0x02, 0x01, 0x00

Test(metadata, v12_librdkafka_mock_three_brokers)
{
	static const uint8_t mock[] = {
		0x00, 0x00, 0x00, 0x59, 0x00, 0x00, 0x00, 0x2a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04,
		MOCK_BROKER(1, 39001), MOCK_BROKER(2, 39002), MOCK_BROKER(3, 39003), MOCK_REST,
		0x00,	/* the extra empty tag section */
	};
	static const uint8_t expect[] = {
		0x00, 0x00, 0x00, 0x5e, 0x00, 0x00, 0x00, 0x2a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04,
		PROXY_BROKER(1, 19001), PROXY_BROKER(2, 19002), PROXY_BROKER(3, 19003), MOCK_REST,
	};
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	uint8_t *out = NULL;
	size_t n = 0;
	char err[128] = "";

	cr_assert_eq(sizeof(mock), 4 + 0x59);
	cr_assert_eq(sizeof(expect), 4 + 0x5e);
	cr_assert_eq(rewrite(3, 12, mock, sizeof(mock), &bm, &out, &n, err), KC_OK, "%s", err);
	assert_bytes(out, n, expect, sizeof(expect));
	cr_assert_eq(bm.trailing, 1);
	cr_assert_eq(m.calls, 3);
	cr_assert_eq(m.nodes[2], 3);
	cr_assert_str_eq(m.up_host, "127.0.0.1");
	cr_assert_eq(m.up_port, 39003);
	free(out);
	/* the output is a response like any other: no trailing bytes left */
	bm = mk_map(&m, proxy_map, 3);
	cr_assert_eq(rewrite(3, 12, expect, sizeof(expect), &bm, &out, &n, err), KC_OK, "%s", err);
	assert_bytes(out, n, expect, sizeof(expect));
	cr_assert_eq(bm.trailing, 0);
	free(out);
}

Test(metadata, v13_vector_rewrite)
{
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 1);
	uint8_t *out = NULL;
	size_t n = 0;
	char err[128] = "";

	cr_assert_eq(rewrite(3, 13, md_v13_vec, sizeof(md_v13_vec), &bm, &out, &n, err), KC_OK, "%s", err);
	assert_bytes(out, n, md_v13_expect, sizeof(md_v13_expect));
	cr_assert_eq(bm.trailing, 0);
	free(out);
	/*
	 * Read as v12, a v13 frame is a complete v12 response (its first error
	 * code byte reads as the empty tag section) followed by 2 bytes, which
	 * are trailing bytes: accepted, dropped, counted.
	 */
	cr_assert_eq(rewrite(3, 12, md_v13_vec, sizeof(md_v13_vec), &bm, &out, &n, err), KC_OK,
	    "%s", err);
	assert_bytes(out, n, md_v12_expect, sizeof(md_v12_expect));
	cr_assert_eq(bm.trailing, 2);
	free(out);
	out = NULL;
	cr_assert_eq(m.calls, 2);
	/* the other way round the error_code is missing: malformed */
	cr_assert_eq(rewrite(3, 13, md_v12_vec, sizeof(md_v12_vec), &bm, &out, &n, err), KC_MALFORMED);
	cr_assert_null(out);
	cr_assert_eq(bm.trailing, 0);
	cr_assert_eq(m.calls, 2, "map must not run on a malformed frame");
	check_tails(3, 13, md_v13_vec, sizeof(md_v13_vec), md_v13_expect, sizeof(md_v13_expect),
	    proxy_map, 1, 1);
}

struct seen {
	int n;
	int32_t node, port;
	char host[64];
};

static void
cb(void *ctx, int32_t node, const char *h, size_t hl, int32_t port)
{
	struct seen *s = ctx;

	s->n++;
	s->node = node;
	s->port = port;
	snprintf(s->host, sizeof(s->host), "%.*s", (int)hl, h);
}

Test(metadata, v12_walk_learns_upstream)
{
	struct seen s;
	char err[128] = "";
	int32_t ctrl = 0;

	memset(&s, 0, sizeof(s));
	cr_assert_eq(kc_metadata_walk(12, md_v12_vec, sizeof(md_v12_vec), cb, &s, &ctrl, err, sizeof(err)),
	    KC_OK, "%s", err);
	cr_assert_eq(s.n, 1);
	cr_assert_eq(s.node, 1);
	cr_assert_eq(s.port, 9092);
	cr_assert_str_eq(s.host, "kafka-1");
	cr_assert_eq(ctrl, 1);
	/* trailing bytes after the message are ignored, as by the rewrite */
	{
		uint8_t *t;
		size_t i, tl;

		for (i = 0; i < NTAILS; i++) {
			t = with_tail(md_v12_vec, sizeof(md_v12_vec), i, &tl);
			memset(&s, 0, sizeof(s));
			ctrl = 0;
			cr_assert_eq(kc_metadata_walk(12, t, tl, cb, &s, &ctrl, err, sizeof(err)),
			    KC_OK, "%s", err);
			cr_assert_eq(s.n, 1);
			cr_assert_eq(s.node, 1);
			cr_assert_eq(s.port, 9092);
			cr_assert_str_eq(s.host, "kafka-1");
			cr_assert_eq(ctrl, 1);
			/* a size prefix that does not cover them is still malformed */
			s.n = 0;
			cr_assert_eq(kc_metadata_walk(12, t, tl - 1, cb, &s, NULL, err, sizeof(err)),
			    KC_MALFORMED);
			cr_assert_eq(s.n, 0);
			free(t);
		}
	}
	s.n = 0;
	cr_assert_eq(kc_metadata_walk(12, md_v12_vec, sizeof(md_v12_vec) - 1, cb, &s, NULL, err,
	    sizeof(err)), KC_MALFORMED);
	cr_assert_eq(s.n, 0);
	cr_assert_eq(kc_metadata_walk(14, md_v12_vec, sizeof(md_v12_vec), cb, &s, NULL, err,
	    sizeof(err)), KC_MALFORMED);
}

/* ---- generic Metadata builder ---- */

struct tbroker {
	int32_t node;
	const char *host;
	int32_t port;
	const char *rack;
	const char *tags;	/* raw tag section bytes, NULL = empty */
	size_t tags_len;
};

/* null_name: the second topic's name is null (legal from v12 only). */
static void
build_md_x(struct bb *b, int v, const struct tbroker *br, size_t nb, bool null_name)
{
	bool flex = v >= 9;
	size_t i;
	int t, p;

	bb_i32(b, 0);
	bb_i32(b, 7);
	if (flex)
		bb_raw(b, "\x01\x03\x02\xc0\xde", 5);	/* header tags: tag 3 = c0 de */
	if (v >= 3)
		bb_i32(b, 25);			/* throttle */
	bb_arr(b, flex, (int32_t)nb);
	for (i = 0; i < nb; i++) {
		bb_i32(b, br[i].node);
		bb_str(b, flex, br[i].host);
		bb_i32(b, br[i].port);
		if (v >= 1)
			bb_str(b, flex, br[i].rack);
		if (flex) {
			if (br[i].tags != NULL)
				bb_raw(b, br[i].tags, br[i].tags_len);
			else
				bb_u8(b, 0);
		}
	}
	if (v >= 2)
		bb_str(b, flex, "cluster-A");
	if (v >= 1)
		bb_i32(b, 2);			/* controller */
	bb_arr(b, flex, 2);
	for (t = 0; t < 2; t++) {
		bb_i16(b, (int16_t)(t == 0 ? 0 : 3));
		bb_str(b, flex, null_name && t == 1 ? NULL : (t == 0 ? "orders" : "x"));
		if (v >= 10)
			bb_raw(b, "\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f", 16);
		if (v >= 1)
			bb_u8(b, (uint8_t)t);
		bb_arr(b, flex, t == 0 ? 2 : 0);
		for (p = 0; t == 0 && p < 2; p++) {
			bb_i16(b, 0);
			bb_i32(b, p);
			bb_i32(b, p + 1);
			if (v >= 7)
				bb_i32(b, 5);
			/* large ids: a misread count runs off the frame */
			bb_arr(b, flex, 2);
			bb_i32(b, 1001);
			bb_i32(b, 1002);
			bb_arr(b, flex, 1);
			bb_i32(b, 1001 + p);
			if (v >= 5) {
				bb_arr(b, flex, 1);
				bb_i32(b, 1003);
			}
			if (flex)
				bb_raw(b, p == 0 ? "\x00" : "\x01\x00\x01\x7f", p == 0 ? 1 : 4);
		}
		if (v >= 8)
			bb_i32(b, INT32_MIN);
		if (flex)
			bb_u8(b, 0);
	}
	if (v >= 8 && v <= 10)
		bb_i32(b, INT32_MIN);
	if (v >= 13)
		bb_i16(b, 0);
	if (flex)
		bb_raw(b, "\x02\x00\x00\x09\x03\xaa\xbb\xcc", 8);	/* two top-level tags */
	bb_fix(b);
}

static void
build_md(struct bb *b, int v, const struct tbroker *br, size_t nb)
{
	build_md_x(b, v, br, nb, v >= 12);
}

static const struct tbroker up3[] = {
	{ 1, "kafka-1.internal.example", 9092, "rack-a", NULL, 0 },
	{ 2, "kafka-2.internal.example", 9093, NULL, NULL, 0 },
	{ 3, "kafka-3.internal.example", 9094, "rack-c", NULL, 0 },
};
static const struct tbroker px3[] = {
	{ 1, "proxy.local", 19001, "rack-a", NULL, 0 },
	{ 2, "proxy.local", 19002, NULL, NULL, 0 },
	{ 3, "proxy.local", 19003, "rack-c", NULL, 0 },
};

/* Builds version v with upstream and proxy addresses and checks the rewrite. */
static void
check_md_version(int v)
{
	struct bb in, exp;
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	uint8_t *out = NULL;
	size_t n = 0, cut;
	char err[128] = "";
	int rc;

	bb_init(&in);
	bb_init(&exp);
	build_md(&in, v, up3, 3);
	build_md(&exp, v, px3, 3);
	rc = rewrite(3, (int16_t)v, in.b, in.n, &bm, &out, &n, err);
	cr_assert_eq(rc, KC_OK, "v%d: %s", v, err);
	assert_bytes(out, n, exp.b, exp.n);
	cr_assert_eq(m.calls, 3);
	cr_assert_eq(m.nodes[0], 1);
	cr_assert_eq(m.nodes[2], 3);
	cr_assert_str_eq(m.up_host, "kafka-3.internal.example");
	cr_assert_eq(m.up_port, 9094);
	free(out);

	cr_assert_eq(bm.trailing, 0);

	/* every strict prefix (size fixed up) is malformed */
	for (cut = 8; cut < in.n; cut++) {
		uint8_t *f = malloc(cut);

		memcpy(f, in.b, cut);
		kc_put_i32(f, (int32_t)(cut - 4));
		out = NULL;
		cr_assert_eq(rewrite(3, (int16_t)v, f, cut, &bm, &out, &n, err), KC_MALFORMED,
		    "v%d prefix %zu accepted", v, cut);
		cr_assert_null(out);
		free(f);
	}
	cr_assert_eq(m.calls, 3, "map ran on a malformed frame");
	/* trailing bytes are accepted and dropped: the same output */
	check_tails(3, (int16_t)v, in.b, in.n, exp.b, exp.n, proxy_map, 3, 3);
	/* and the walk ignores them too */
	{
		uint8_t *t;
		size_t i, tl;

		for (i = 0; i < NTAILS; i++) {
			t = with_tail(in.b, in.n, i, &tl);
			cr_assert_eq(kc_metadata_walk((int16_t)v, t, tl, NULL, NULL, NULL, err, 128),
			    KC_OK, "v%d: %s", v, err);
			free(t);
		}
	}
	free(in.b);
	free(exp.b);
}

Test(metadata, fixture_v1) { check_md_version(1); }
Test(metadata, fixture_v3) { check_md_version(3); }
Test(metadata, fixture_v5) { check_md_version(5); }
Test(metadata, fixture_v7) { check_md_version(7); }
Test(metadata, fixture_v8) { check_md_version(8); }
Test(metadata, fixture_v9) { check_md_version(9); }
Test(metadata, fixture_v10) { check_md_version(10); }
Test(metadata, fixture_v11) { check_md_version(11); }

Test(metadata, fixture_all_versions)
{
	int v;

	for (v = 0; v <= 13; v++)
		check_md_version(v);
}

Test(metadata, fixture_v1_field_layout)
{
	/* spot-check v1 by hand: header, broker count, first broker, rack */
	struct bb in;
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	uint8_t *out = NULL;
	size_t n = 0;
	char err[128] = "";

	bb_init(&in);
	build_md(&in, 1, up3, 3);
	cr_assert_eq(rewrite(3, 1, in.b, in.n, &bm, &out, &n, err), KC_OK, "%s", err);
	cr_assert_eq(kc_get_i32(out), (int32_t)n - 4);
	cr_assert_eq(kc_get_i32(out + 4), 7);		/* corr */
	cr_assert_eq(kc_get_i32(out + 8), 3);		/* brokers */
	cr_assert_eq(kc_get_i32(out + 12), 1);		/* node 1 */
	cr_assert_eq(kc_get_i16(out + 16), 11);
	cr_assert(memcmp(out + 18, "proxy.local", 11) == 0);
	cr_assert_eq(kc_get_i32(out + 29), 19001);
	cr_assert_eq(kc_get_i16(out + 33), 6);		/* rack */
	cr_assert(memcmp(out + 35, "rack-a", 6) == 0);
	cr_assert_eq(kc_get_i32(out + 41), 2);		/* node 2 */
	cr_assert_eq(kc_get_i32(out + 45 + 2 + 11), 19002);
	cr_assert_eq(kc_get_i16(out + 45 + 2 + 11 + 4), -1);	/* rack null */
	free(out);
	free(in.b);
}

Test(metadata, host_127_long_to_short_and_back)
{
	char long_host[128];
	struct tbroker ub[1] = { { 1, NULL, 9092, NULL, NULL, 0 } };
	struct tbroker pb[1] = { { 1, "proxy.local", 19001, NULL, NULL, 0 } };
	struct tmap_ent le[1] = { { 1, NULL, 29092 } };
	struct bb in, exp;
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 1);
	uint8_t *out = NULL;
	size_t n = 0, off;
	char err[128] = "";

	memset(long_host, 'h', 127);
	long_host[127] = '\0';
	ub[0].host = long_host;

	/* upstream 127 bytes -> proxy.local */
	bb_init(&in);
	bb_init(&exp);
	build_md(&in, 12, ub, 1);
	build_md(&exp, 12, pb, 1);
	off = 4 + 4 + 5 + 4 + 1 + 4;	/* size, corr, header tags, throttle, count, node */
	cr_assert_eq(in.b[off], 0x80);
	cr_assert_eq(in.b[off + 1], 0x01);
	cr_assert_eq(rewrite(3, 12, in.b, in.n, &bm, &out, &n, err), KC_OK, "%s", err);
	assert_bytes(out, n, exp.b, exp.n);
	cr_assert_eq(n, in.n - 127 - 2 + 11 + 1);
	cr_assert_eq(strlen(m.up_host), 127);
	free(out);

	/* upstream short -> 127-byte proxy host */
	le[0].host = long_host;
	pb[0].host = "kafka-1";
	pb[0].port = 9092;
	ub[0].port = 29092;
	bm = mk_map(&m, le, 1);
	free(in.b);
	free(exp.b);
	bb_init(&in);
	bb_init(&exp);
	build_md(&in, 12, pb, 1);	/* kafka-1:9092 upstream */
	build_md(&exp, 12, ub, 1);	/* long host, port 29092 */
	cr_assert_eq(rewrite(3, 12, in.b, in.n, &bm, &out, &n, err), KC_OK, "%s", err);
	assert_bytes(out, n, exp.b, exp.n);
	cr_assert_eq(out[off], 0x80);
	cr_assert_eq(out[off + 1], 0x01);
	cr_assert_eq(kc_get_i32(out + off + 2 + 127), 29092);
	free(out);

	/* the same in v1 (INT16 lengths) */
	free(in.b);
	free(exp.b);
	bb_init(&in);
	bb_init(&exp);
	build_md(&in, 1, pb, 1);
	build_md(&exp, 1, ub, 1);
	cr_assert_eq(rewrite(3, 1, in.b, in.n, &bm, &out, &n, err), KC_OK, "%s", err);
	assert_bytes(out, n, exp.b, exp.n);
	free(out);
	free(in.b);
	free(exp.b);
}

Test(metadata, unknown_broker_tag_preserved)
{
	static const uint8_t tag[] = { 0x01, 0x05, 0x02, 0xaa, 0xbb };
	uint8_t in[98], exp[102];
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 1);
	uint8_t *out = NULL;
	size_t n = 0;
	char err[128] = "";

	/* v12 vector with the broker's tag section replaced by 01 05 02 aa bb */
	memcpy(in, md_v12_vec, 31);
	memcpy(in + 31, tag, 5);
	memcpy(in + 36, md_v12_vec + 32, 94 - 32);
	kc_put_i32(in, 94);
	memcpy(exp, md_v12_expect, 35);
	memcpy(exp + 35, tag, 5);
	memcpy(exp + 40, md_v12_expect + 36, 98 - 36);
	kc_put_i32(exp, 98);

	cr_assert_eq(rewrite(3, 12, in, sizeof(in), &bm, &out, &n, err), KC_OK, "%s", err);
	assert_bytes(out, n, exp, sizeof(exp));
	cr_assert(memcmp(out + 14 + 4 + 12 + 4 + 1, tag, 5) == 0);
	free(out);

	/* a tag whose size runs past the frame */
	in[33] = 0x7f;
	cr_assert_eq(rewrite(3, 12, in, sizeof(in), &bm, &out, &n, err), KC_MALFORMED);
}

Test(metadata, unknown_node_dropped)
{
	static const struct tbroker kept[] = {
		{ 1, "proxy.local", 19001, "rack-a", NULL, 0 },
		{ 3, "proxy.local", 19003, "rack-c", NULL, 0 },
	};
	static const struct tmap_ent map13[] = {
		{ 1, "proxy.local", 19001 },
		{ 3, "proxy.local", 19003 },
	};
	int versions[] = { 0, 1, 9, 12 };
	size_t i;

	for (i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		int v = versions[i];
		struct bb in, exp;
		struct tmap m;
		struct kc_broker_map bm = mk_map(&m, map13, 2);
		uint8_t *out = NULL;
		size_t n = 0;
		char err[128] = "";

		bb_init(&in);
		bb_init(&exp);
		build_md(&in, v, up3, 3);
		build_md(&exp, v, kept, 2);
		cr_assert_eq(rewrite(3, (int16_t)v, in.b, in.n, &bm, &out, &n, err), KC_OK, "%s", err);
		assert_bytes(out, n, exp.b, exp.n);
		cr_assert_eq(m.calls, 3);
		free(out);
		free(in.b);
		free(exp.b);
	}
}

Test(metadata, drop_narrows_count_varint)
{
	/* 127 brokers: count N+1 = 128 = 80 01; dropping one gives 7f */
	static struct tbroker up[127], px[126];
	static char hosts[127][16];
	struct tmap_ent e[126];
	struct bb in, exp;
	struct tmap m;
	struct kc_broker_map bm;
	uint8_t *out = NULL;
	size_t n = 0;
	char err[128] = "";
	int i, j = 0;

	for (i = 0; i < 127; i++) {
		snprintf(hosts[i], sizeof(hosts[i]), "b%d", i);
		up[i] = (struct tbroker){ i, hosts[i], 9092, NULL, NULL, 0 };
		if (i == 64)
			continue;
		px[j] = (struct tbroker){ i, "p", 20000 + i, NULL, NULL, 0 };
		e[j] = (struct tmap_ent){ i, "p", 20000 + i };
		j++;
	}
	bm = mk_map(&m, e, 126);
	bb_init(&in);
	bb_init(&exp);
	build_md(&in, 9, up, 127);
	build_md(&exp, 9, px, 126);
	cr_assert_eq(in.b[17], 0x80);
	cr_assert_eq(in.b[18], 0x01);
	cr_assert_eq(exp.b[17], 0x7f);
	cr_assert_eq(rewrite(3, 9, in.b, in.n, &bm, &out, &n, err), KC_OK, "%s", err);
	assert_bytes(out, n, exp.b, exp.n);
	cr_assert_eq(m.calls, 127);
	free(out);
	free(in.b);
	free(exp.b);
}

Test(metadata, negative_node_left_alone)
{
	static const struct tbroker in_b[] = {
		{ -1, "", -1, NULL, "\x01\x05\x02\xaa\xbb", 5 },
		{ 2, "kafka-2", 9093, NULL, NULL, 0 },
	};
	static const struct tbroker exp_b[] = {
		{ -1, "", -1, NULL, "\x01\x05\x02\xaa\xbb", 5 },
		{ 2, "proxy.local", 19002, NULL, NULL, 0 },
	};
	struct bb in, exp;
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	uint8_t *out = NULL;
	size_t n = 0;
	char err[128] = "";

	bb_init(&in);
	bb_init(&exp);
	build_md(&in, 12, in_b, 2);
	build_md(&exp, 12, exp_b, 2);
	cr_assert_eq(rewrite(3, 12, in.b, in.n, &bm, &out, &n, err), KC_OK, "%s", err);
	assert_bytes(out, n, exp.b, exp.n);
	cr_assert_eq(m.calls, 1);
	cr_assert_eq(m.nodes[0], 2);
	free(out);
	free(in.b);
	free(exp.b);
}

Test(metadata, growth_beyond_initial_estimate)
{
	/* short upstream hosts, long proxy hosts: the output must grow */
	static struct tbroker up[40], px[40];
	static char big[40][300];
	struct tmap_ent e[40];
	struct bb in, exp;
	struct tmap m;
	struct kc_broker_map bm;
	uint8_t *out = NULL;
	size_t n = 0;
	char err[128] = "";
	int i;

	for (i = 0; i < 40; i++) {
		memset(big[i], 'a' + i % 26, 299);
		big[i][299] = '\0';
		up[i] = (struct tbroker){ i, "k", 9092, "r", NULL, 0 };
		px[i] = (struct tbroker){ i, big[i], 30000 + i, "r", NULL, 0 };
		e[i] = (struct tmap_ent){ i, big[i], 30000 + i };
	}
	bm = mk_map(&m, e, 40);
	bb_init(&in);
	bb_init(&exp);
	build_md(&in, 10, up, 40);
	build_md(&exp, 10, px, 40);
	cr_assert_eq(rewrite(3, 10, in.b, in.n, &bm, &out, &n, err), KC_OK, "%s", err);
	assert_bytes(out, n, exp.b, exp.n);
	free(out);
	free(in.b);
	free(exp.b);
}

/* ---- malformed inputs ---- */

static int
try_v12(const uint8_t *f, size_t n, char *err)
{
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 1);
	uint8_t *out = NULL;
	size_t on = 0;
	int rc = rewrite(3, 12, f, n, &bm, &out, &on, err);

	if (rc != KC_OK)
		cr_assert_null(out);
	free(out);
	if (rc != KC_OK)
		cr_assert_eq(m.calls, 0, "map ran on a malformed frame");
	return rc;
}

Test(malformed, null_topic_name_before_v12)
{
	int v;

	for (v = 0; v <= 13; v++) {
		struct bb in;
		struct tmap m;
		struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
		uint8_t *out = NULL;
		size_t n = 0;
		char err[128] = "";
		int rc;

		bb_init(&in);
		build_md_x(&in, v, up3, 3, true);
		rc = rewrite(3, (int16_t)v, in.b, in.n, &bm, &out, &n, err);
		if (v >= 12)
			cr_assert_eq(rc, KC_OK, "v%d: %s", v, err);
		else {
			cr_assert_eq(rc, KC_MALFORMED, "v%d accepted a null topic name", v);
			cr_assert_str_eq(err, "null in non-nullable string");
		}
		free(out);
		free(in.b);
	}
}

Test(malformed, size_prefix)
{
	uint8_t f[94];
	char err[128];

	memcpy(f, md_v12_vec, 94);
	kc_put_i32(f, 91);
	cr_assert_eq(try_v12(f, 94, err), KC_MALFORMED);
	kc_put_i32(f, -1);
	cr_assert_eq(try_v12(f, 94, err), KC_MALFORMED);
	cr_assert_eq(try_v12(f, 4, err), KC_MALFORMED);
}

Test(malformed, host_length_past_end)
{
	uint8_t f[94];
	char err[128];

	memcpy(f, md_v12_vec, 94);
	f[18] = 0x7f;		/* host compact length 126 */
	cr_assert_eq(try_v12(f, 94, err), KC_MALFORMED);
}

Test(malformed, host_null_in_non_nullable)
{
	uint8_t f[94];
	char err[128];

	memcpy(f, md_v12_vec, 94);
	f[18] = 0x00;		/* compact null host */
	cr_assert_eq(try_v12(f, 94, err), KC_MALFORMED);
	cr_assert_str_eq(err, "null in non-nullable string");
	/* v0: INT16 -1 host */
	memcpy(f, md_v0_vec, 68);
	f[16] = 0xff;
	f[17] = 0xff;
	{
		struct tmap m;
		struct kc_broker_map bm = mk_map(&m, proxy_map, 1);
		uint8_t *out = NULL;
		size_t n;

		cr_assert_eq(rewrite(3, 0, f, 68, &bm, &out, &n, err), KC_MALFORMED);
		cr_assert_str_eq(err, "null in non-nullable string");
	}
}

/* A v12 response whose single broker host has hl bytes. */
static void
build_long_host(struct bb *b, size_t hl)
{
	b->cap = hl + 64;
	b->n = 0;
	b->b = calloc(1, b->cap);
	cr_assert_not_null(b->b);
	bb_i32(b, 0);
	bb_i32(b, 7);
	bb_u8(b, 0);		/* header tags */
	bb_i32(b, 0);		/* throttle */
	bb_u8(b, 2);		/* one broker */
	bb_i32(b, 1);
	bb_uv(b, (uint32_t)hl + 1);
	memset(b->b + b->n, 'x', hl);
	b->n += hl;
	bb_i32(b, 9092);
	bb_u8(b, 0);		/* rack */
	bb_u8(b, 0);		/* tags */
	bb_u8(b, 0);		/* cluster_id */
	bb_i32(b, 1);		/* controller */
	bb_u8(b, 1);		/* topics [] */
	bb_u8(b, 0);		/* tags */
	bb_fix(b);
}

Test(malformed, string_longer_than_0x7fff)
{
	struct bb b;
	char err[128] = "";

	build_long_host(&b, 0x8000);
	cr_assert(memcmp(b.b + 18, "\x81\x80\x02", 3) == 0);
	cr_assert_eq(try_v12(b.b, b.n, err), KC_MALFORMED);
	cr_assert_str_eq(err, "string longer than 0x7fff");
	free(b.b);
	/* exactly 0x7fff is accepted */
	build_long_host(&b, 0x7fff);
	cr_assert(memcmp(b.b + 18, "\x80\x80\x02", 3) == 0);
	cr_assert_eq(try_v12(b.b, b.n, err), KC_OK, "%s", err);
	free(b.b);
}

Test(malformed, varint_longer_than_5_bytes)
{
	/* broker count as a 6-byte varint */
	static const uint8_t f[] = {
		0x00, 0x00, 0x00, 0x0f, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x81, 0x80, 0x80, 0x80, 0x80, 0x00,
	};
	char err[128];

	cr_assert_eq(try_v12(f, sizeof(f), err), KC_MALFORMED);
	cr_assert_str_eq(err, "varint longer than 5 bytes");
}

Test(malformed, tag_size_past_end)
{
	uint8_t f[97];
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 1);
	uint8_t *out = NULL;
	size_t n;
	char err[128];

	/* top-level tags: one field, tag 0, size 72, but 1 byte left */
	memcpy(f, md_v12_vec, 93);
	memcpy(f + 93, "\x01\x00\x48\xaa", 4);
	kc_put_i32(f, 93);
	cr_assert_eq(try_v12(f, 97, err), KC_MALFORMED);
	cr_assert_str_eq(err, "tagged field past end of frame");
	/* size 1 fits, and the tag survives the rewrite */
	f[95] = 0x01;
	cr_assert_eq(rewrite(3, 12, f, 97, &bm, &out, &n, err), KC_OK, "%s", err);
	cr_assert_eq(n, 101);
	cr_assert(memcmp(out + 97, "\x01\x00\x01\xaa", 4) == 0);
	free(out);
	/* header tag section claiming a field misaligns the rest */
	memcpy(f, md_v12_vec, 94);
	f[8] = 0x01;
	cr_assert_eq(try_v12(f, 94, err), KC_MALFORMED);
}

Test(malformed, negative_and_huge_array_counts)
{
	uint8_t f[68];
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 1);
	uint8_t *out = NULL;
	size_t n;
	char err[128];

	memcpy(f, md_v0_vec, 68);
	kc_put_i32(f + 8, -1);		/* brokers null */
	cr_assert_eq(rewrite(3, 0, f, 68, &bm, &out, &n, err), KC_MALFORMED);
	kc_put_i32(f + 8, -5);
	cr_assert_eq(rewrite(3, 0, f, 68, &bm, &out, &n, err), KC_MALFORMED);
	kc_put_i32(f + 8, 0x7fffffff);
	cr_assert_eq(rewrite(3, 0, f, 68, &bm, &out, &n, err), KC_MALFORMED);
	memcpy(f, md_v0_vec, 68);
	kc_put_i32(f + 52, 1000);	/* replica_nodes count past end */
	cr_assert_eq(rewrite(3, 0, f, 68, &bm, &out, &n, err), KC_MALFORMED);
	cr_assert_eq(m.calls, 0);
}

Test(malformed, unsupported_versions)
{
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 1);
	uint8_t *out = NULL;
	size_t n;
	char err[128];

	cr_assert_eq(rewrite(3, 14, md_v12_vec, 94, &bm, &out, &n, err), KC_MALFORMED);
	cr_assert_eq(rewrite(3, -1, md_v12_vec, 94, &bm, &out, &n, err), KC_MALFORMED);
	cr_assert_eq(rewrite(10, 7, md_v12_vec, 94, &bm, &out, &n, err), KC_MALFORMED);
	cr_assert_eq(rewrite(0, 9, md_v12_vec, 94, &bm, &out, &n, err), KC_MALFORMED);
	cr_assert_eq(rewrite(3, 12, md_v12_vec, 94, NULL, &out, &n, err), KC_MALFORMED);
	cr_assert_null(out);
}

Test(malformed, mapped_host_too_long)
{
	static char huge[0x8001];
	struct tmap_ent e[1] = { { 1, huge, 1 } };
	struct tmap m;
	struct kc_broker_map bm;
	uint8_t *out = NULL;
	size_t n;
	char err[128];

	memset(huge, 'z', 0x8000);
	bm = mk_map(&m, e, 1);
	cr_assert_eq(rewrite(3, 12, md_v12_vec, 94, &bm, &out, &n, err), KC_MALFORMED);
	cr_assert_null(out);
}

Test(malformed, random_mutations_never_crash)
{
	struct bb in;
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	uint32_t seed = 12345;
	int i, v, k;

	for (v = 0; v <= 13; v++) {
		bb_init(&in);
		build_md(&in, v, up3, 3);
		for (i = 0; i < 400; i++) {
			uint8_t *f = malloc(in.n), *out = NULL;
			size_t n = 0;
			char err[128];

			memcpy(f, in.b, in.n);
			for (k = 0; k < 3; k++) {
				seed = seed * 1103515245u + 12345u;
				f[4 + (seed >> 8) % (in.n - 4)] = (uint8_t)(seed >> 20);
			}
			if (rewrite(3, (int16_t)v, f, in.n, &bm, &out, &n, err) == KC_OK) {
				cr_assert_not_null(out);
				cr_assert_eq((size_t)kc_get_i32(out), n - 4);
			}
			free(out);
			free(f);
		}
		free(in.b);
	}
}

/* ---- FindCoordinator ---- */

Test(findcoordinator, v0)
{
	struct bb in;
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	uint8_t *out = NULL;
	size_t n = 0;
	char err[128] = "";

	bb_init(&in);
	bb_i32(&in, 0);
	bb_i32(&in, 42);
	bb_i16(&in, 0);
	bb_i32(&in, 2);
	bb_str(&in, false, "kafka-2");
	bb_i32(&in, 9093);
	bb_fix(&in);
	cr_assert_eq(rewrite(10, 0, in.b, in.n, &bm, &out, &n, err), KC_OK, "%s", err);
	cr_assert_eq(n, 4 + 4 + 2 + 4 + 2 + 11 + 4);
	cr_assert_eq(kc_get_i32(out), (int32_t)n - 4);
	cr_assert_eq(kc_get_i32(out + 4), 42);
	cr_assert_eq(kc_get_i16(out + 8), 0);
	cr_assert_eq(kc_get_i32(out + 10), 2);
	cr_assert_eq(kc_get_i16(out + 14), 11);
	cr_assert(memcmp(out + 16, "proxy.local", 11) == 0);
	cr_assert_eq(kc_get_i32(out + 27), 19002);
	cr_assert_eq(m.calls, 1);
	cr_assert_str_eq(m.up_host, "kafka-2");
	cr_assert_eq(m.up_port, 9093);
	free(out);

	/* unknown node: error 15, node -1, host "", port -1 */
	kc_put_i32(in.b + 10, 7);
	cr_assert_eq(rewrite(10, 0, in.b, in.n, &bm, &out, &n, err), KC_OK, "%s", err);
	{
		static const uint8_t exp[] = {
			0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x2a, 0x00, 0x0f,
			0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
		};
		assert_bytes(out, n, exp, sizeof(exp));
	}
	free(out);
	free(in.b);
}

Test(findcoordinator, v1_and_v2)
{
	int v;

	for (v = 1; v <= 2; v++) {
		struct bb in;
		struct tmap m;
		struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
		uint8_t *out = NULL;
		size_t n = 0;
		char err[128] = "";

		bb_init(&in);
		bb_i32(&in, 0);
		bb_i32(&in, 42);
		bb_i32(&in, 100);		/* throttle */
		bb_i16(&in, 0);
		bb_str(&in, false, "NONE");	/* error_message */
		bb_i32(&in, 1);
		bb_str(&in, false, "kafka-1");
		bb_i32(&in, 9092);
		bb_fix(&in);
		cr_assert_eq(rewrite(10, (int16_t)v, in.b, in.n, &bm, &out, &n, err), KC_OK, "%s", err);
		cr_assert_eq(kc_get_i32(out + 8), 100);
		cr_assert_eq(kc_get_i16(out + 12), 0);
		cr_assert_eq(kc_get_i16(out + 14), 4);
		cr_assert(memcmp(out + 16, "NONE", 4) == 0);
		cr_assert_eq(kc_get_i32(out + 20), 1);
		cr_assert_eq(kc_get_i16(out + 24), 11);
		cr_assert(memcmp(out + 26, "proxy.local", 11) == 0);
		cr_assert_eq(kc_get_i32(out + 37), 19001);
		cr_assert_eq(n, 41);
		free(out);

		/* unmapped: error 15, message null */
		kc_put_i32(in.b + 20, 9);
		cr_assert_eq(rewrite(10, (int16_t)v, in.b, in.n, &bm, &out, &n, err), KC_OK, "%s", err);
		cr_assert_eq(n, 4 + 4 + 4 + 2 + 2 + 4 + 2 + 4);
		cr_assert_eq(kc_get_i32(out), (int32_t)n - 4);
		cr_assert_eq(kc_get_i32(out + 8), 100);
		cr_assert_eq(kc_get_i16(out + 12), 15);
		cr_assert_eq(kc_get_i16(out + 14), -1);
		cr_assert_eq(kc_get_i32(out + 16), -1);
		cr_assert_eq(kc_get_i16(out + 20), 0);
		cr_assert_eq(kc_get_i32(out + 22), -1);
		free(out);
		free(in.b);
	}
}

Test(findcoordinator, v3)
{
	struct bb in;
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	uint8_t *out = NULL;
	size_t n = 0;
	char err[128] = "";

	bb_init(&in);
	bb_i32(&in, 0);
	bb_i32(&in, 43);
	bb_raw(&in, "\x01\x00\x01\x99", 4);	/* header tags */
	bb_i32(&in, 0);				/* throttle */
	bb_i16(&in, 0);
	bb_str(&in, true, NULL);		/* error_message null */
	bb_i32(&in, 3);
	bb_str(&in, true, "kafka-3");
	bb_i32(&in, 9094);
	bb_raw(&in, "\x01\x02\x01\x55", 4);	/* top-level tags */
	bb_fix(&in);
	cr_assert_eq(rewrite(10, 3, in.b, in.n, &bm, &out, &n, err), KC_OK, "%s", err);
	cr_assert_eq(kc_get_i32(out), (int32_t)n - 4);
	cr_assert_eq(kc_get_i32(out + 4), 43);
	cr_assert(memcmp(out + 8, "\x01\x00\x01\x99", 4) == 0);
	cr_assert_eq(kc_get_i32(out + 12), 0);
	cr_assert_eq(kc_get_i16(out + 16), 0);
	cr_assert_eq(out[18], 0x00);
	cr_assert_eq(kc_get_i32(out + 19), 3);
	cr_assert_eq(out[23], 12);
	cr_assert(memcmp(out + 24, "proxy.local", 11) == 0);
	cr_assert_eq(kc_get_i32(out + 35), 19003);
	cr_assert(memcmp(out + 39, "\x01\x02\x01\x55", 4) == 0);
	cr_assert_eq(n, 43);
	free(out);

	/* unmapped */
	kc_put_i32(in.b + 19, 8);
	cr_assert_eq(rewrite(10, 3, in.b, in.n, &bm, &out, &n, err), KC_OK, "%s", err);
	{
		static const uint8_t exp[] = {
			0x00, 0x00, 0x00, 0x1c, 0x00, 0x00, 0x00, 0x2b, 0x01, 0x00, 0x01, 0x99,
			0x00, 0x00, 0x00, 0x00, 0x00, 0x0f, 0x00, 0xff, 0xff, 0xff, 0xff,
			0x01, 0xff, 0xff, 0xff, 0xff, 0x01, 0x02, 0x01, 0x55,
		};
		assert_bytes(out, n, exp, sizeof(exp));
	}
	free(out);

	/* node -1 left alone, map not called */
	m.calls = 0;
	kc_put_i32(in.b + 19, -1);
	cr_assert_eq(rewrite(10, 3, in.b, in.n, &bm, &out, &n, err), KC_OK, "%s", err);
	assert_bytes(out, n, in.b, in.n);
	cr_assert_eq(m.calls, 0);
	free(out);

	/* trailing bytes: accepted, the node -1 frame comes out as it was without them */
	check_tails(10, 3, in.b, in.n, in.b, in.n, proxy_map, 3, 0);
	/* and with node 3 mapped, the same output as without them */
	kc_put_i32(in.b + 19, 3);
	cr_assert_eq(rewrite(10, 3, in.b, in.n, &bm, &out, &n, err), KC_OK, "%s", err);
	cr_assert_eq(bm.trailing, 0);
	check_tails(10, 3, in.b, in.n, out, n, proxy_map, 3, 1);
	free(out);
	free(in.b);
}

static void
fc_entry(struct bb *b, const char *key, int32_t node, const char *host, int32_t port,
    int16_t ec, const char *msg, const char *tags, size_t tl)
{
	bb_str(b, true, key);
	bb_i32(b, node);
	bb_str(b, true, host);
	bb_i32(b, port);
	bb_i16(b, ec);
	bb_str(b, true, msg);
	bb_raw(b, tags, tl);
}

Test(findcoordinator, v4_two_coordinators)
{
	int v;

	for (v = 4; v <= 6; v++) {
		struct bb in, exp;
		struct tmap m;
		struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
		uint8_t *out = NULL;
		size_t n = 0, o;
		char err[128] = "";

		bb_init(&in);
		bb_init(&exp);
		bb_i32(&in, 0);
		bb_i32(&in, 44);
		bb_u8(&in, 0);
		bb_i32(&in, 0);
		bb_uv(&in, 3);
		fc_entry(&in, "group-a", 2, "kafka-2", 9093, 0, NULL, "\x01\x04\x01\x42", 4);
		fc_entry(&in, "group-b", -1, "", -1, 15, "not available", "\x00", 1);
		bb_u8(&in, 0);
		bb_fix(&in);

		cr_assert_eq(rewrite(10, (int16_t)v, in.b, in.n, &bm, &out, &n, err), KC_OK, "%s", err);
		cr_assert_eq(m.calls, 1);
		cr_assert_eq(m.nodes[0], 2);
		/* field by field */
		cr_assert_eq(kc_get_i32(out), (int32_t)n - 4);
		cr_assert_eq(kc_get_i32(out + 4), 44);
		cr_assert_eq(out[8], 0);
		cr_assert_eq(kc_get_i32(out + 9), 0);
		cr_assert_eq(out[13], 3);
		o = 14;
		cr_assert_eq(out[o], 8);
		cr_assert(memcmp(out + o + 1, "group-a", 7) == 0);
		o += 8;
		cr_assert_eq(kc_get_i32(out + o), 2);
		o += 4;
		cr_assert_eq(out[o], 12);
		cr_assert(memcmp(out + o + 1, "proxy.local", 11) == 0);
		o += 12;
		cr_assert_eq(kc_get_i32(out + o), 19002);
		o += 4;
		cr_assert_eq(kc_get_i16(out + o), 0);
		o += 2;
		cr_assert_eq(out[o], 0);	/* message null */
		o += 1;
		cr_assert(memcmp(out + o, "\x01\x04\x01\x42", 4) == 0);
		o += 4;
		/* second entry: untouched */
		cr_assert_eq(out[o], 8);
		cr_assert(memcmp(out + o + 1, "group-b", 7) == 0);
		o += 8;
		cr_assert_eq(kc_get_i32(out + o), -1);
		o += 4;
		cr_assert_eq(out[o], 1);
		o += 1;
		cr_assert_eq(kc_get_i32(out + o), -1);
		o += 4;
		cr_assert_eq(kc_get_i16(out + o), 15);
		o += 2;
		cr_assert_eq(out[o], 14);
		cr_assert(memcmp(out + o + 1, "not available", 13) == 0);
		o += 14;
		cr_assert_eq(out[o], 0);
		o += 1;
		cr_assert_eq(out[o], 0);	/* top-level tags */
		o += 1;
		cr_assert_eq(o, n);

		/* the same via the builder */
		bb_i32(&exp, 0);
		bb_i32(&exp, 44);
		bb_u8(&exp, 0);
		bb_i32(&exp, 0);
		bb_uv(&exp, 3);
		fc_entry(&exp, "group-a", 2, "proxy.local", 19002, 0, NULL, "\x01\x04\x01\x42", 4);
		fc_entry(&exp, "group-b", -1, "", -1, 15, "not available", "\x00", 1);
		bb_u8(&exp, 0);
		bb_fix(&exp);
		assert_bytes(out, n, exp.b, exp.n);
		free(out);
		free(in.b);
		free(exp.b);
	}
}

Test(findcoordinator, v4_unmapped_gets_error_15)
{
	struct bb in, exp;
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	uint8_t *out = NULL;
	size_t n = 0;
	char err[128] = "";

	bb_init(&in);
	bb_init(&exp);
	bb_i32(&in, 0);
	bb_i32(&in, 45);
	bb_u8(&in, 0);
	bb_i32(&in, 0);
	bb_uv(&in, 3);
	fc_entry(&in, "txn-1", 9, "kafka-9", 9099, 0, "fine", "\x01\x04\x01\x42", 4);
	fc_entry(&in, "txn-2", 1, "kafka-1", 9092, 0, NULL, "\x00", 1);
	bb_raw(&in, "\x01\x06\x00", 3);
	bb_fix(&in);
	bb_i32(&exp, 0);
	bb_i32(&exp, 45);
	bb_u8(&exp, 0);
	bb_i32(&exp, 0);
	bb_uv(&exp, 3);
	fc_entry(&exp, "txn-1", -1, "", -1, 15, NULL, "\x01\x04\x01\x42", 4);
	fc_entry(&exp, "txn-2", 1, "proxy.local", 19001, 0, NULL, "\x00", 1);
	bb_raw(&exp, "\x01\x06\x00", 3);
	bb_fix(&exp);
	cr_assert_eq(rewrite(10, 4, in.b, in.n, &bm, &out, &n, err), KC_OK, "%s", err);
	assert_bytes(out, n, exp.b, exp.n);
	cr_assert_eq(m.calls, 2);
	free(out);

	/* malformed: every truncation */
	{
		size_t cut;

		for (cut = 8; cut < in.n; cut++) {
			uint8_t *f = malloc(cut);

			memcpy(f, in.b, cut);
			kc_put_i32(f, (int32_t)(cut - 4));
			cr_assert_eq(rewrite(10, 4, f, cut, &bm, &out, &n, err), KC_MALFORMED,
			    "prefix %zu accepted", cut);
			free(f);
		}
	}
	cr_assert_eq(m.calls, 2, "map ran on a malformed frame");
	/* trailing bytes: accepted and dropped */
	check_tails(10, 4, in.b, in.n, exp.b, exp.n, proxy_map, 3, 2);
	free(in.b);
	free(exp.b);
}

Test(rewrite, needs_rewrite_table)
{
	int v;

	for (v = 0; v <= 13; v++)
		cr_assert(kc_response_needs_rewrite(3, (int16_t)v));
	cr_assert_not(kc_response_needs_rewrite(3, 14));
	for (v = 0; v <= 6; v++)
		cr_assert(kc_response_needs_rewrite(10, (int16_t)v));
	cr_assert_not(kc_response_needs_rewrite(10, 7));
	for (v = 0; v <= 5; v++)
		cr_assert(kc_response_needs_rewrite(18, (int16_t)v));
	cr_assert_not(kc_response_needs_rewrite(18, 6));
	/* KIP-951 NodeEndpoints: Produce v10+, Fetch v16+ */
	for (v = 0; v <= 9; v++)
		cr_assert_not(kc_response_needs_rewrite(0, (int16_t)v));
	for (v = 10; v <= 13; v++)
		cr_assert(kc_response_needs_rewrite(0, (int16_t)v));
	cr_assert_not(kc_response_needs_rewrite(0, 14));
	for (v = 0; v <= 15; v++)
		cr_assert_not(kc_response_needs_rewrite(1, (int16_t)v));
	for (v = 16; v <= 18; v++)
		cr_assert(kc_response_needs_rewrite(1, (int16_t)v));
	cr_assert_not(kc_response_needs_rewrite(1, 19));
	for (v = 0; v <= 2; v++)
		cr_assert(kc_response_needs_rewrite(60, (int16_t)v));
	cr_assert_not(kc_response_needs_rewrite(60, 3));
	/* KIP-932 NodeEndpoints: ShareFetch / ShareAcknowledge v1-2; v0 (the
	 * early access of Kafka 4.0) is refused, not parsed */
	cr_assert_not(kc_response_needs_rewrite(78, 0));
	cr_assert_not(kc_response_needs_rewrite(79, 0));
	for (v = 1; v <= 2; v++) {
		cr_assert(kc_response_needs_rewrite(78, (int16_t)v));
		cr_assert(kc_response_needs_rewrite(79, (int16_t)v));
	}
	cr_assert_not(kc_response_needs_rewrite(78, 3));
	cr_assert_not(kc_response_needs_rewrite(79, 3));
	cr_assert_not(kc_response_needs_rewrite(2, 0));
	cr_assert_not(kc_response_needs_rewrite(3, -1));
	cr_assert_not(kc_response_needs_rewrite(0, -1));
}

Test(rewrite, apiversions_dispatch)
{
	static const uint8_t in[] = {
		0x00, 0x00, 0x00, 0x1c, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x03,
		0x00, 0x03, 0x00, 0x00, 0x00, 0x0c,	/* Metadata 0-12 */
		0x00, 0x3c, 0x00, 0x00, 0x00, 0x01,	/* DescribeCluster: kept */
		0x00, 0x53, 0x00, 0x00, 0x00, 0x01,	/* InitializeShareGroupState: refused */
	};
	static const uint8_t exp[] = {
		0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x02,
		0x00, 0x03, 0x00, 0x00, 0x00, 0x0c,
		0x00, 0x3c, 0x00, 0x00, 0x00, 0x01,
	};
	uint8_t *out = NULL;
	size_t n = 0;
	char err[128] = "";

	cr_assert_eq(kc_rewrite_response(18, 0, in, sizeof(in), NULL, &out, &n, err, sizeof(err)),
	    KC_OK, "%s", err);
	assert_bytes(out, n, exp, sizeof(exp));
	free(out);
	cr_assert_eq(kc_rewrite_response(18, 1, in, sizeof(in), NULL, &out, &n, err, sizeof(err)),
	    KC_MALFORMED);
	cr_assert_null(out);
}
