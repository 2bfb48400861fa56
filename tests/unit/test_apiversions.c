/*
 * test_apiversions — Criterion tests of worker/kafka/apiversions.c: the
 * version policy, ApiVersions response intersection (v0-v5, tagged features
 * preserved, count varint re-encoded), the KIP-511 v0 fallback, the
 * synthetic UNSUPPORTED_VERSION reply and the requests the worker builds.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "worker/kafka/apiversions.h"
#include "worker/kafka/codec.h"
#include "worker/kafka/rewrite.h"

#define MAXF	(100u * 1024 * 1024)

/* ---- builder ---- */

struct bb {
	uint8_t b[8192];
	size_t n;
};

static void
bb_raw(struct bb *b, const void *p, size_t n)
{
	cr_assert(b->n + n <= sizeof(b->b));
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void
bb_i16(struct bb *b, int16_t v)
{
	uint8_t x[2];

	kc_put_i16(x, v);
	bb_raw(b, x, 2);
}

static void
bb_i32(struct bb *b, int32_t v)
{
	uint8_t x[4];

	kc_put_i32(x, v);
	bb_raw(b, x, 4);
}

static void
bb_uv(struct bb *b, uint32_t v)
{
	uint8_t x[5];

	bb_raw(b, x, kc_put_uvarint(x, v));
}

static void
bb_fix(struct bb *b)
{
	kc_put_i32(b->b, (int32_t)(b->n - 4));
}

static void
assert_bytes(const uint8_t *got, size_t glen, const uint8_t *exp, size_t elen)
{
	size_t i;

	for (i = 0; i < glen && i < elen; i++)
		if (got[i] != exp[i])
			break;
	cr_assert(glen == elen && i == elen,
	    "frames differ: got %zu bytes, expected %zu, first difference at %zu", glen, elen, i);
}

struct ent {
	int16_t key, min, max;
	const char *tags;	/* v3+: raw entry tags, NULL = empty */
	size_t tl;
};

/* ApiVersions response of body version v (header v0). */
static void
build_av(struct bb *b, int v, int16_t ec, const struct ent *e, size_t n, const char *top_tags,
    size_t ttl)
{
	size_t i;

	b->n = 0;
	bb_i32(b, 0);
	bb_i32(b, 77);
	bb_i16(b, ec);
	if (v >= 3)
		bb_uv(b, (uint32_t)n + 1);
	else
		bb_i32(b, (int32_t)n);
	for (i = 0; i < n; i++) {
		bb_i16(b, e[i].key);
		bb_i16(b, e[i].min);
		bb_i16(b, e[i].max);
		if (v >= 3) {
			if (e[i].tags != NULL)
				bb_raw(b, e[i].tags, e[i].tl);
			else
				bb_raw(b, "\x00", 1);
		}
	}
	if (v >= 1)
		bb_i32(b, 250);
	if (v >= 3) {
		if (top_tags != NULL)
			bb_raw(b, top_tags, ttl);
		else
			bb_raw(b, "\x00", 1);
	}
	bb_fix(b);
}

static const struct ent up_entries[] = {
	{ 0, 0, 11, NULL, 0 },		/* Produce: under the cap (13) */
	{ 1, 4, 18, NULL, 0 },		/* Fetch: at the cap (18) */
	{ 3, 0, 12, NULL, 0 },		/* Metadata: under the cap */
	{ 4, 0, 7, NULL, 0 },		/* LeaderAndIsr: refused */
	{ 10, 0, 6, NULL, 0 },
	{ 17, 0, 1, NULL, 0 },
	{ 18, 0, 4, NULL, 0 },
	{ 19, 2, 7, NULL, 0 },		/* CreateTopics: forwarded as is */
	{ 36, 0, 2, NULL, 0 },
	{ 60, 0, 1, NULL, 0 },		/* DescribeCluster: under the cap (2) */
	{ 78, 0, 1, NULL, 0 },		/* ShareFetch: 0-1 capped to 1-1 */
	{ 500, 0, 3, NULL, 0 },		/* newer than the codec's table: dropped */
};
static const struct ent exp_entries[] = {
	{ 0, 0, 11, NULL, 0 },
	{ 1, 4, 18, NULL, 0 },
	{ 3, 0, 12, NULL, 0 },
	{ 10, 0, 6, NULL, 0 },
	{ 17, 0, 1, NULL, 0 },
	{ 18, 0, 4, NULL, 0 },
	{ 19, 2, 7, NULL, 0 },
	{ 36, 0, 2, NULL, 0 },
	{ 60, 0, 1, NULL, 0 },
	{ 78, 1, 1, NULL, 0 },
};
#define NUP	(sizeof(up_entries) / sizeof(up_entries[0]))
#define NEXP	(sizeof(exp_entries) / sizeof(exp_entries[0]))

/* ApiVersions never calls the broker map; counts calls if it did. */
static int
no_map(void *ctx, int32_t node, const char *uh, size_t uhl, int32_t up, const char **h,
    size_t *hl, int32_t *p)
{
	(*(int *)ctx)++;
	return -1;
}

/*
 * Trailing bytes after a complete response: one 00 (what librdkafka's mock
 * cluster sends after Metadata v9+) and aa bb cc.
 */
static const struct {
	const char *b;
	size_t n;
} tails[] = {
	{ "\x00", 1 },
	{ "\xaa\xbb\xcc", 3 },
};
#define NTAILS	(sizeof(tails) / sizeof(tails[0]))

/* in plus tails[i], size prefix fixed up. */
static void
add_tail(struct bb *t, const struct bb *in, size_t i)
{
	memcpy(t->b, in->b, in->n);
	t->n = in->n;
	bb_raw(t, tails[i].b, tails[i].n);
	kc_put_i32(t->b, (int32_t)(t->n - 4));
}

/*
 * in plus each of tails intersects (directly and through kc_rewrite_response,
 * which reports them in map->trailing) to exp, the trailing bytes dropped;
 * kc_apiversions_find reads it as it reads in.
 */
static void
check_tails(int v, const struct bb *in, const struct bb *exp)
{
	static struct bb t;
	uint8_t out[8192], *o2;
	size_t i, n, n2;
	int16_t lo, hi, lo2, hi2;
	int calls = 0, rc, rc2;
	struct kc_broker_map bm = { .map = no_map, .ctx = &calls, .trailing = SIZE_MAX };
	char err[128];

	for (i = 0; i < NTAILS; i++) {
		add_tail(&t, in, i);
		n = 0;
		err[0] = '\0';
		cr_assert_eq(kc_apiversions_intersect(t.b, t.n, (int16_t)v, out, sizeof(out), &n,
		    err, sizeof(err)), KC_OK, "v%d + %zu trailing bytes: %s", v, tails[i].n, err);
		assert_bytes(out, n, exp->b, exp->n);
		o2 = NULL;
		n2 = 0;
		bm.trailing = SIZE_MAX;
		cr_assert_eq(kc_rewrite_response(18, (int16_t)v, t.b, t.n, &bm, &o2, &n2, err,
		    sizeof(err)), KC_OK, "v%d + %zu trailing bytes: %s", v, tails[i].n, err);
		assert_bytes(o2, n2, exp->b, exp->n);
		cr_assert_eq(bm.trailing, tails[i].n, "v%d: trailing %zu, not %zu", v, bm.trailing,
		    tails[i].n);
		free(o2);
		/* find: the same answers with and without them */
		rc = kc_apiversions_find(in->b, in->n, (int16_t)v, 18, &lo, &hi);
		rc2 = kc_apiversions_find(t.b, t.n, (int16_t)v, 18, &lo2, &hi2);
		cr_assert_eq(rc2, rc);
		if (rc == KC_OK) {
			cr_assert_eq(lo2, lo);
			cr_assert_eq(hi2, hi);
		}
		cr_assert_eq(kc_apiversions_find(t.b, t.n, (int16_t)v, 9999, NULL, NULL),
		    KC_APIVERSIONS_ABSENT);
	}
	/* without trailing bytes the count is 0 */
	o2 = NULL;
	bm.trailing = SIZE_MAX;
	cr_assert_eq(kc_rewrite_response(18, (int16_t)v, in->b, in->n, &bm, &o2, &n2, err,
	    sizeof(err)), KC_OK, "%s", err);
	cr_assert_eq(bm.trailing, 0);
	free(o2);
	cr_assert_eq(calls, 0);
}

static void
check_intersect(int v, const struct bb *in, const struct bb *exp)
{
	uint8_t out[8192];
	size_t n = 0;
	char err[128] = "";

	cr_assert_eq(kc_apiversions_intersect(in->b, in->n, (int16_t)v, out, sizeof(out), &n, err,
	    sizeof(err)), KC_OK, "v%d: %s", v, err);
	assert_bytes(out, n, exp->b, exp->n);
	check_tails(v, in, exp);
}

Test(intersect, v0_exact_bytes)
{
	static const uint8_t exp[] = {
		0x00, 0x00, 0x00, 0x46, 0x00, 0x00, 0x00, 0x4d, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x0a,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x0b,
		0x00, 0x01, 0x00, 0x04, 0x00, 0x12,
		0x00, 0x03, 0x00, 0x00, 0x00, 0x0c,
		0x00, 0x0a, 0x00, 0x00, 0x00, 0x06,
		0x00, 0x11, 0x00, 0x00, 0x00, 0x01,
		0x00, 0x12, 0x00, 0x00, 0x00, 0x04,
		0x00, 0x13, 0x00, 0x02, 0x00, 0x07,
		0x00, 0x24, 0x00, 0x00, 0x00, 0x02,
		0x00, 0x3c, 0x00, 0x00, 0x00, 0x01,
		0x00, 0x4e, 0x00, 0x01, 0x00, 0x01,
	};
	struct bb in;
	uint8_t out[512];
	size_t n = 0;
	char err[128] = "";

	build_av(&in, 0, 0, up_entries, NUP, NULL, 0);
	cr_assert_eq(in.n, 14 + 6 * NUP);
	cr_assert_eq(kc_apiversions_intersect(in.b, in.n, 0, out, sizeof(out), &n, err, sizeof(err)),
	    KC_OK, "%s", err);
	assert_bytes(out, n, exp, sizeof(exp));
	{
		struct bb e;

		memcpy(e.b, exp, sizeof(exp));
		e.n = sizeof(exp);
		check_tails(0, &in, &e);
	}
}

Test(intersect, v1_v2)
{
	struct bb in, exp;
	int v;

	for (v = 1; v <= 2; v++) {
		build_av(&in, v, 0, up_entries, NUP, NULL, 0);
		build_av(&exp, v, 0, exp_entries, NEXP, NULL, 0);
		check_intersect(v, &in, &exp);
	}
}

/* SupportedFeatures (tag 0), FinalizedFeaturesEpoch (1), FinalizedFeatures (2) */
static const char features[] =
	"\x03"
	"\x00\x17" "\x02" "\x11" "metadata.version" "\x00\x01" "\x00\x19" "\x00"
	"\x01\x08" "\x00\x00\x00\x00\x00\x00\x00\x2a"
	"\x02\x17" "\x02" "\x11" "metadata.version" "\x00\x14" "\x00\x14" "\x00";

Test(intersect, v3_features_and_entry_tags_preserved)
{
	struct ent up[NUP], ex[NEXP];
	struct bb in, exp;
	size_t i;
	int v;

	cr_assert_eq(sizeof(features) - 1, 1 + 2 + 23 + 2 + 8 + 2 + 23);
	memcpy(up, up_entries, sizeof(up));
	memcpy(ex, exp_entries, sizeof(ex));
	/* an unknown tag on Fetch and on the unknown key */
	for (i = 0; i < NUP; i++)
		if (up[i].key == 1 || up[i].key == 500)
			up[i].tags = "\x01\x07\x02\xde\xad", up[i].tl = 5;
	for (i = 0; i < NEXP; i++)
		if (ex[i].key == 1 || ex[i].key == 500)
			ex[i].tags = "\x01\x07\x02\xde\xad", ex[i].tl = 5;
	for (v = 3; v <= 5; v++) {
		build_av(&in, v, 0, up, NUP, features, sizeof(features) - 1);
		build_av(&exp, v, 0, ex, NEXP, features, sizeof(features) - 1);
		check_intersect(v, &in, &exp);
		/* through kc_rewrite_response too */
		{
			uint8_t *out = NULL;
			size_t n = 0;
			char err[128] = "";

			cr_assert_eq(kc_rewrite_response(18, (int16_t)v, in.b, in.n, NULL, &out, &n,
			    err, sizeof(err)), KC_OK, "%s", err);
			assert_bytes(out, n, exp.b, exp.n);
			cr_assert(memcmp(out + n - (sizeof(features) - 1), features,
			    sizeof(features) - 1) == 0);
			free(out);
		}
	}
}

Test(intersect, cap_empties_range)
{
	static const struct ent up[] = {
		{ 1, 19, 20, NULL, 0 },		/* Fetch 19+ only: dropped */
		{ 0, 14, 15, NULL, 0 },		/* Produce 14+ only: dropped */
		{ 3, 5, 13, NULL, 0 },		/* Metadata: min kept */
		{ 60, 3, 4, NULL, 0 },		/* DescribeCluster 3+ only: dropped */
	};
	static const struct ent ex[] = {
		{ 3, 5, 13, NULL, 0 },
	};
	struct bb in, exp;

	build_av(&in, 3, 0, up, 4, NULL, 0);
	build_av(&exp, 3, 0, ex, 1, NULL, 0);
	check_intersect(3, &in, &exp);
	build_av(&in, 0, 0, up, 4, NULL, 0);
	build_av(&exp, 0, 0, ex, 1, NULL, 0);
	check_intersect(0, &in, &exp);
}

/* The caps raised with the KIP-951 / DescribeCluster / KIP-932 rewriters. */
Test(intersect, raised_caps)
{
	static const struct ent up[] = {
		{ 0, 3, 14, NULL, 0 },		/* Produce 3-14 -> 3-13 */
		{ 1, 4, 19, NULL, 0 },		/* Fetch 4-19 -> 4-18 */
		{ 60, 0, 2, NULL, 0 },		/* DescribeCluster 0-2: advertised */
		{ 78, 1, 2, NULL, 0 },		/* ShareFetch 1-2: advertised */
		{ 79, 0, 3, NULL, 0 },		/* ShareAcknowledge 0-3 -> 1-2 */
		{ 3, 0, 13, NULL, 0 },
	};
	static const struct ent ex[] = {
		{ 0, 3, 13, NULL, 0 },
		{ 1, 4, 18, NULL, 0 },
		{ 60, 0, 2, NULL, 0 },
		{ 78, 1, 2, NULL, 0 },
		{ 79, 1, 2, NULL, 0 },
		{ 3, 0, 13, NULL, 0 },
	};
	struct bb in, exp;
	int v;

	for (v = 0; v <= 5; v++) {
		build_av(&in, v, 0, up, 6, v >= 3 ? features : NULL, v >= 3 ? sizeof(features) - 1 : 0);
		build_av(&exp, v, 0, ex, 6, v >= 3 ? features : NULL, v >= 3 ? sizeof(features) - 1 : 0);
		check_intersect(v, &in, &exp);
	}
	/* DescribeCluster 0-3 upstream is capped to 0-2 */
	{
		static const struct ent u2[] = { { 60, 0, 3, NULL, 0 } };
		static const struct ent e2[] = { { 60, 0, 2, NULL, 0 } };

		build_av(&in, 3, 0, u2, 1, NULL, 0);
		build_av(&exp, 3, 0, e2, 1, NULL, 0);
		check_intersect(3, &in, &exp);
	}
	cr_assert(kc_request_allowed(0, 13));
	cr_assert_not(kc_request_allowed(0, 14));
	cr_assert(kc_request_allowed(1, 18));
	cr_assert_not(kc_request_allowed(1, 19));
	cr_assert(kc_request_allowed(18, 5));
	cr_assert_not(kc_request_allowed(18, 6));
	cr_assert(kc_request_allowed(60, 2));
	cr_assert_not(kc_request_allowed(60, 3));
	cr_assert_not(kc_request_allowed(78, 0));
	cr_assert_not(kc_request_allowed(79, 0));
	cr_assert(kc_request_allowed(78, 2));
	cr_assert(kc_request_allowed(79, 1));
	cr_assert_not(kc_request_allowed(79, 3));
	/* every allowed version of a rewritten API has a rewriter */
	for (v = 10; v <= 13; v++)
		cr_assert(kc_response_needs_rewrite(0, (int16_t)v));
	for (v = 16; v <= 18; v++)
		cr_assert(kc_response_needs_rewrite(1, (int16_t)v));
	for (v = 0; v <= 2; v++)
		cr_assert(kc_response_needs_rewrite(60, (int16_t)v));
	for (v = 1; v <= 2; v++) {
		cr_assert(kc_response_needs_rewrite(78, (int16_t)v));
		cr_assert(kc_response_needs_rewrite(79, (int16_t)v));
	}
}

Test(intersect, count_varint_narrows)
{
	/* 128 entries: N+1 = 129 = 81 01; two refused -> 126, N+1 = 127 = 7f.
	 * The kept ones are forwarded-only keys (repeated: the codec does not
	 * care about duplicates). */
	static const int16_t fwd[] = { 2, 8, 9, 11, 12, 13, 14, 15, 16, 19, 20, 21 };
	struct ent up[128], ex[126];
	struct bb in, exp;
	int i, j = 0;

	for (i = 0; i < 128; i++) {
		up[i] = (struct ent){ (int16_t)(i == 5 ? 27 : i == 6 ? 4 : fwd[i % 12]), 0, 1,
		    NULL, 0 };
		if (i != 5 && i != 6)
			ex[j++] = up[i];
	}
	build_av(&in, 3, 0, up, 128, features, sizeof(features) - 1);
	build_av(&exp, 3, 0, ex, 126, features, sizeof(features) - 1);
	cr_assert_eq(in.b[10], 0x81);
	cr_assert_eq(in.b[11], 0x01);
	cr_assert_eq(exp.b[10], 0x7f);
	check_intersect(3, &in, &exp);
}

Test(intersect, v5_request_vector)
{
	/* the answer of a broker that knows ApiVersions 0-4 (Kafka 3.9) to a
	 * v5 request (a Kafka 4.4 client): a v0 body with error 35 */
	static const uint8_t f[] = {
		0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x07,
		0x00, 0x23, 0x00, 0x00, 0x00, 0x01, 0x00, 0x12, 0x00, 0x00, 0x00, 0x04,
	};
	uint8_t out[64], *o2 = NULL;
	size_t n = 0;
	int16_t lo = -1, hi = -1;
	char err[128] = "";
	int rv;

	cr_assert_eq(kc_apiversions_find(f, sizeof(f), 5, 18, &lo, &hi), KC_OK);
	cr_assert_eq(lo, 0);
	cr_assert_eq(hi, 4);
	cr_assert_eq(kc_apiversions_find(f, sizeof(f), 5, 3, &lo, &hi), KC_APIVERSIONS_ABSENT);
	for (rv = 0; rv <= 5; rv++) {
		cr_assert_eq(kc_apiversions_intersect(f, sizeof(f), (int16_t)rv, out, sizeof(out), &n,
		    err, sizeof(err)), KC_OK, "rv %d: %s", rv, err);
		assert_bytes(out, n, f, sizeof(f));
		cr_assert_eq(kc_apiversions_find(f, sizeof(f), (int16_t)rv, 18, &lo, &hi), KC_OK);
	}
	for (rv = 4; rv <= 5; rv++) {
		cr_assert_eq(kc_rewrite_response(18, (int16_t)rv, f, sizeof(f), NULL, &o2, &n, err,
		    sizeof(err)), KC_OK);
		assert_bytes(o2, n, f, sizeof(f));
		free(o2);
	}
}

Test(intersect, v0_fallback_needs_error_35)
{
	struct bb in;
	static const struct ent e[] = { { 18, 0, 3, NULL, 0 }, { 3, 0, 20, NULL, 0 } };
	uint8_t out[256];
	size_t n;
	char err[128];

	/* a v0 body with error 0 is not a valid v3 answer */
	build_av(&in, 0, 0, e, 2, NULL, 0);
	cr_assert_eq(kc_apiversions_intersect(in.b, in.n, 3, out, sizeof(out), &n, err, sizeof(err)),
	    KC_MALFORMED);
	cr_assert_eq(kc_apiversions_find(in.b, in.n, 3, 18, NULL, NULL), KC_MALFORMED);
	/* with error 35 it is accepted (find reads it as v0) and the error
	 * response is relayed unchanged: it only names the retry version */
	build_av(&in, 0, 35, e, 2, NULL, 0);
	int16_t lo, hi;
	cr_assert_eq(kc_apiversions_find(in.b, in.n, 3, 18, &lo, &hi), KC_OK);
	cr_assert_eq(hi, 3);
	cr_assert_eq(kc_apiversions_intersect(in.b, in.n, 3, out, sizeof(out), &n, err, sizeof(err)),
	    KC_OK);
	cr_assert_eq(n, in.n);
	cr_assert_arr_eq(out, in.b, in.n);
}

Test(intersect, malformed)
{
	struct bb in;
	uint8_t out[1024];
	size_t n;
	char err[128];
	size_t cut;

	build_av(&in, 3, 0, up_entries, NUP, features, sizeof(features) - 1);
	/* every strict prefix */
	for (cut = 8; cut < in.n; cut++) {
		uint8_t f[1024];

		memcpy(f, in.b, cut);
		kc_put_i32(f, (int32_t)(cut - 4));
		cr_assert_eq(kc_apiversions_intersect(f, cut, 3, out, sizeof(out), &n, err, sizeof(err)),
		    KC_MALFORMED, "prefix %zu", cut);
	}
	/* a trailing byte is accepted and dropped: the output is the same */
	{
		uint8_t o1[1024];
		size_t n1 = 0;

		cr_assert_eq(kc_apiversions_intersect(in.b, in.n, 3, o1, sizeof(o1), &n1, err,
		    sizeof(err)), KC_OK, "%s", err);
		in.b[in.n++] = 0;
		bb_fix(&in);
		cr_assert_eq(kc_apiversions_intersect(in.b, in.n, 3, out, sizeof(out), &n, err,
		    sizeof(err)), KC_OK, "%s", err);
		assert_bytes(out, n, o1, n1);
		cr_assert_eq(n, in.n - 1 - (NUP - NEXP) * 7);
	}
	/* size prefix mismatch, output too small, bad version */
	build_av(&in, 3, 0, up_entries, NUP, features, sizeof(features) - 1);
	cr_assert_eq(kc_apiversions_intersect(in.b, in.n - 1, 3, out, sizeof(out), &n, err,
	    sizeof(err)), KC_MALFORMED);
	cr_assert_eq(kc_apiversions_intersect(in.b, in.n, 3, out, in.n - 1, &n, err, sizeof(err)),
	    KC_MALFORMED);
	cr_assert_eq(kc_apiversions_intersect(in.b, in.n, -1, out, sizeof(out), &n, err, sizeof(err)),
	    KC_MALFORMED);
	/* a v3 body is not a v2 body */
	cr_assert_eq(kc_apiversions_intersect(in.b, in.n, 2, out, sizeof(out), &n, err, sizeof(err)),
	    KC_MALFORMED);
	/* null api_keys array */
	in.b[10] = 0;
	cr_assert_eq(kc_apiversions_intersect(in.b, in.n, 3, out, sizeof(out), &n, err, sizeof(err)),
	    KC_MALFORMED);
	/* feature tag size past end */
	build_av(&in, 3, 0, up_entries, 2, "\x01\x00\x40\x00", 4);
	cr_assert_eq(kc_apiversions_intersect(in.b, in.n, 3, out, sizeof(out), &n, err, sizeof(err)),
	    KC_MALFORMED);
	cr_assert_str_eq(err, "tagged field past end of frame");
}

Test(find, raw_ranges)
{
	struct bb in;

	build_av(&in, 3, 0, up_entries, NUP, features, sizeof(features) - 1);
	{
		int16_t lo = -1, hi = -1;

		cr_assert_eq(kc_apiversions_find(in.b, in.n, 3, 3, &lo, &hi), KC_OK);
		cr_assert_eq(lo, 0);
		cr_assert_eq(hi, 12);
		cr_assert_eq(kc_apiversions_find(in.b, in.n, 3, 1, &lo, &hi), KC_OK);
		cr_assert_eq(lo, 4);
		cr_assert_eq(hi, 18);
		cr_assert_eq(kc_apiversions_find(in.b, in.n, 3, 2, &lo, &hi), KC_APIVERSIONS_ABSENT);
		cr_assert_eq(KC_APIVERSIONS_ABSENT, -2);
		cr_assert_eq(kc_apiversions_find(in.b, in.n - 1, 3, 3, &lo, &hi), KC_MALFORMED);
	}
	build_av(&in, 0, 0, up_entries, NUP, NULL, 0);
	{
		int16_t lo = -1, hi = -1;

		cr_assert_eq(kc_apiversions_find(in.b, in.n, 0, 0, &lo, &hi), KC_OK);
		cr_assert_eq(hi, 11);
	}
}

/* ---- synthetic reply and built requests ---- */

Test(build, unsupported_reply)
{
	static const uint8_t exp[] = {
		0x00, 0x00, 0x00, 0x10, 0x01, 0x02, 0x03, 0x04,
		0x00, 0x23, 0x00, 0x00, 0x00, 0x01, 0x00, 0x12, 0x00, 0x00, 0x00, 0x05,
	};
	uint8_t b[64];
	size_t n;
	int16_t lo, hi;

	n = kc_build_apiversions_unsupported(b, sizeof(b), 0x01020304);
	assert_bytes(b, n, exp, sizeof(exp));
	cr_assert_eq(kc_build_apiversions_unsupported(b, 19, 1), 0);
	cr_assert_eq(kc_build_apiversions_unsupported(b, 20, 1), 20);
	/* it parses as the answer to any ApiVersions version */
	cr_assert_eq(kc_apiversions_find(exp, sizeof(exp), 7, 18, &lo, &hi), KC_OK);
	cr_assert_eq(hi, 5);
}

Test(build, apiversions_request)
{
	static const uint8_t exp[] = {
		0x00, 0x00, 0x00, 0x0f, 0x00, 0x12, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
		0x00, 0x05, 'f', 'e', 'r', 'r', 'y',
	};
	static const uint8_t exp_null[] = {
		0x00, 0x00, 0x00, 0x0a, 0x00, 0x12, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xff, 0xff,
	};
	uint8_t b[64];
	struct kc_req_header h;
	char err[64];
	size_t n;

	n = kc_build_apiversions_request(b, sizeof(b), 1, "ferry");
	assert_bytes(b, n, exp, sizeof(exp));
	cr_assert_eq(kc_parse_request_header(b, n, MAXF, &h, err, sizeof(err)), KC_OK);
	cr_assert_eq(h.header_len, n);
	n = kc_build_apiversions_request(b, sizeof(b), 2, NULL);
	assert_bytes(b, n, exp_null, sizeof(exp_null));
	cr_assert_eq(kc_build_apiversions_request(b, 18, 1, "ferry"), 0);
	cr_assert_eq(kc_build_apiversions_request(b, 19, 1, "ferry"), 19);
}

Test(build, metadata_requests)
{
	static const uint8_t v1[] = {
		0x00, 0x00, 0x00, 0x13, 0x00, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00, 0x2a,
		0x00, 0x05, 'f', 'e', 'r', 'r', 'y',
		0x00, 0x00, 0x00, 0x00,
	};
	static const uint8_t v4[] = {
		0x00, 0x00, 0x00, 0x14, 0x00, 0x03, 0x00, 0x04, 0x00, 0x00, 0x00, 0x2a,
		0x00, 0x05, 'f', 'e', 'r', 'r', 'y',
		0x00, 0x00, 0x00, 0x00, 0x00,
	};
	static const uint8_t v8[] = {
		0x00, 0x00, 0x00, 0x16, 0x00, 0x03, 0x00, 0x08, 0x00, 0x00, 0x00, 0x2a,
		0x00, 0x05, 'f', 'e', 'r', 'r', 'y',
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	};
	static const uint8_t v9[] = {
		0x00, 0x00, 0x00, 0x15, 0x00, 0x03, 0x00, 0x09, 0x00, 0x00, 0x00, 0x2a,
		0x00, 0x05, 'f', 'e', 'r', 'r', 'y', 0x00,
		0x01, 0x00, 0x00, 0x00, 0x00,
	};
	static const uint8_t v12[] = {
		0x00, 0x00, 0x00, 0x14, 0x00, 0x03, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x2a,
		0x00, 0x05, 'f', 'e', 'r', 'r', 'y', 0x00,
		0x01, 0x00, 0x00, 0x00,
	};
	uint8_t b[128];
	size_t n;
	int v;

	n = kc_build_metadata_request(b, sizeof(b), 1, 42, "ferry");
	assert_bytes(b, n, v1, sizeof(v1));
	n = kc_build_metadata_request(b, sizeof(b), 4, 42, "ferry");
	assert_bytes(b, n, v4, sizeof(v4));
	n = kc_build_metadata_request(b, sizeof(b), 8, 42, "ferry");
	assert_bytes(b, n, v8, sizeof(v8));
	n = kc_build_metadata_request(b, sizeof(b), 9, 42, "ferry");
	assert_bytes(b, n, v9, sizeof(v9));
	n = kc_build_metadata_request(b, sizeof(b), 10, 42, "ferry");
	cr_assert_eq(n, sizeof(v9));
	cr_assert_eq(b[7], 10);
	cr_assert(memcmp(b + 8, v9 + 8, n - 8) == 0);
	n = kc_build_metadata_request(b, sizeof(b), 11, 42, "ferry");
	cr_assert_eq(n, sizeof(v12));
	cr_assert_eq(b[7], 11);
	cr_assert(memcmp(b + 8, v12 + 8, n - 8) == 0);
	n = kc_build_metadata_request(b, sizeof(b), 12, 42, "ferry");
	assert_bytes(b, n, v12, sizeof(v12));
	n = kc_build_metadata_request(b, sizeof(b), 13, 42, "ferry");
	cr_assert_eq(n, sizeof(v12));
	cr_assert_eq(b[7], 13);
	cr_assert(memcmp(b + 8, v12 + 8, n - 8) == 0);
	cr_assert_eq(kc_build_metadata_request(b, sizeof(b), 0, 42, "ferry"), 0);
	cr_assert_eq(kc_build_metadata_request(b, sizeof(b), 14, 42, "ferry"), 0);
	cr_assert_eq(kc_build_metadata_request(b, sizeof(v12) - 1, 12, 42, "ferry"), 0);

	/* every version parses back with the right header */
	for (v = 1; v <= 13; v++) {
		struct kc_req_header h;
		char err[64] = "";

		n = kc_build_metadata_request(b, sizeof(b), (int16_t)v, 7, NULL);
		cr_assert_gt(n, 0);
		cr_assert_eq(kc_parse_request_header(b, n, MAXF, &h, err, sizeof(err)), KC_OK, "%s", err);
		cr_assert_eq(h.api_key, 3);
		cr_assert_eq(h.api_version, v);
		cr_assert_eq(h.client_id_len, -1);
		cr_assert_eq(h.header_version, v >= 9 ? 2 : 1);
		cr_assert_eq(h.header_len, v >= 9 ? 15u : 14u);
	}
}

/* ---- policy ---- */

Test(policy, caps)
{
	static const struct {
		int16_t key, min, max;
	} c[] = {
		{ 0, 0, 13 }, { 1, 0, 18 }, { 3, 0, 13 }, { 10, 0, 6 }, { 17, 0, 1 },
		{ 18, 0, 5 }, { 36, 0, 2 }, { 60, 0, 2 }, { 78, 1, 2 }, { 79, 1, 2 },
	};
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		int16_t lo = -1, hi = -1;

		cr_assert(kc_api_cap(c[i].key, &lo, &hi));
		cr_assert_eq(lo, c[i].min);
		cr_assert_eq(hi, c[i].max);
		cr_assert(kc_request_allowed(c[i].key, c[i].min));
		cr_assert(kc_request_allowed(c[i].key, c[i].max));
		if (c[i].min > 0)
			cr_assert_not(kc_request_allowed(c[i].key, (int16_t)(c[i].min - 1)));
		cr_assert_not(kc_request_allowed(c[i].key, (int16_t)(c[i].max + 1)), "key %d", c[i].key);
	}
	cr_assert_not(kc_api_cap(2, NULL, NULL));
}

/* Every row has its reason; the table is in key order, one row per key;
 * `held` only on caps. */
Test(policy, table_rows_have_reasons)
{
	const struct kc_api_policy *p;
	size_t n, i;
	int caps = 0, refused = 0;

	p = kc_api_policy(&n);
	cr_assert_gt(n, 0);
	for (i = 0; i < n; i++) {
		cr_assert_not_null(p[i].why, "key %d", p[i].key);
		cr_assert_gt(strlen(p[i].why), 10, "key %d", p[i].key);
		cr_assert(p[i].key >= 0 && p[i].key <= KC_API_KEY_MAX_KNOWN, "key %d", p[i].key);
		if (i > 0)
			cr_assert_gt(p[i].key, p[i - 1].key, "rows out of order at key %d", p[i].key);
		if (p[i].kind == KC_POLICY_CAP) {
			caps++;
			cr_assert(p[i].min >= 0 && p[i].min <= p[i].max, "key %d", p[i].key);
			cr_assert(kc_api_cap(p[i].key, NULL, NULL));
			cr_assert_not(kc_api_refused(p[i].key));
		} else {
			refused++;
			cr_assert_eq(p[i].kind, KC_POLICY_REFUSED);
			cr_assert_null(p[i].held, "key %d", p[i].key);
			cr_assert(kc_api_refused(p[i].key));
			cr_assert_not(kc_api_cap(p[i].key, NULL, NULL));
		}
	}
	cr_assert_eq(caps, 10);
	cr_assert_gt(refused, 20);
}

Test(policy, refused_and_forwarded)
{
	static const int16_t refused[] = {
		4, 5, 6, 7, 27, 52, 53, 54, 55, 56, 58, 59, 62, 63, 67, 70, 73,
		80, 81, 82, 83, 84, 85, 86, 87, 94,
	};
	static const int16_t forwarded[] = {
		2, 8, 9, 11, 12, 13, 14, 15, 16, 19, 20, 21, 22, 23, 24, 25, 26, 28, 29, 32,
		37, 42, 44, 47, 50, 57, 61, 64, 65, 66, 68, 69, 71, 72, 74, 75, 76, 77,
		88, 89, 90, 91, 92, 93,
	};
	size_t i;

	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		cr_assert(kc_api_refused(refused[i]));
		cr_assert_not(kc_request_allowed(refused[i], 0), "key %d", refused[i]);
		cr_assert_not(kc_request_allowed(refused[i], 1), "key %d", refused[i]);
	}
	for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++) {
		cr_assert_not(kc_api_refused(forwarded[i]));
		cr_assert(kc_request_allowed(forwarded[i], 0), "key %d", forwarded[i]);
		cr_assert(kc_request_allowed(forwarded[i], 30), "key %d", forwarded[i]);
	}
	cr_assert_not(kc_request_allowed(-1, 0));
	/* keys newer than the codec's table are refused (and not advertised) */
	cr_assert(kc_api_refused(95));
	cr_assert(kc_api_refused(1000));
	cr_assert_not(kc_request_allowed(95, 0));
	cr_assert_not(kc_request_allowed(1000, 3));
	cr_assert_not(kc_request_allowed(3, -1));
}

/* librdkafka 2.0.2's mock answers ApiVersions v3 with error 35, a compact
 * count and untagged entries (captured from the mock). Error responses are
 * relayed unchanged, by kc_rewrite_response too: they carry no addresses. */
Test(intersect, error_response_relayed_unchanged)
{
	static const uint8_t mock_v3[] = {
		0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x07, 0x00, 0x23, 0x01,
		0x00, 0x12, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
	};
	uint8_t out[64];
	size_t n = 0;
	char err[128] = "";
	cr_assert_eq(kc_apiversions_intersect(mock_v3, sizeof mock_v3, 3, out, sizeof out, &n,
	    err, sizeof err), KC_OK, "%s", err);
	cr_assert_eq(n, sizeof mock_v3);
	cr_assert_arr_eq(out, mock_v3, sizeof mock_v3);

	uint8_t *o2 = NULL;
	size_t n2 = 0;
	cr_assert_eq(kc_rewrite_response(18, 3, mock_v3, sizeof mock_v3, NULL, &o2, &n2, err,
	    sizeof err), KC_OK, "%s", err);
	cr_assert_eq(n2, sizeof mock_v3);
	cr_assert_arr_eq(o2, mock_v3, sizeof mock_v3);
	free(o2);

	/* a size prefix that lies is still malformed */
	uint8_t bad[sizeof mock_v3];
	memcpy(bad, mock_v3, sizeof bad);
	bad[3] = 0x12;
	cr_assert_eq(kc_apiversions_intersect(bad, sizeof bad, 3, out, sizeof out, &n, err,
	    sizeof err), KC_MALFORMED);

	/* an error response is not parsed, so it has no end of message before
	 * the frame's: relayed with whatever follows, nothing counted */
	{
		struct bb in, t;
		int calls = 0;
		struct kc_broker_map bm = { .map = no_map, .ctx = &calls, .trailing = SIZE_MAX };

		memcpy(in.b, mock_v3, sizeof mock_v3);
		in.n = sizeof mock_v3;
		add_tail(&t, &in, 1);
		cr_assert_eq(kc_rewrite_response(18, 3, t.b, t.n, &bm, &o2, &n2, err, sizeof err),
		    KC_OK, "%s", err);
		assert_bytes(o2, n2, t.b, t.n);
		cr_assert_eq(bm.trailing, 0);
		cr_assert_eq(calls, 0);
		free(o2);
	}
}

/* The v0 UNSUPPORTED_VERSION body followed by trailing bytes: find still
 * reads it (KIP-511 fallback), the relay is unchanged. */
Test(intersect, v0_fallback_with_trailing_bytes)
{
	static const uint8_t f[] = {
		0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x07,
		0x00, 0x23, 0x00, 0x00, 0x00, 0x01, 0x00, 0x12, 0x00, 0x00, 0x00, 0x04,
	};
	struct bb in, t;
	size_t i;
	int rv;
	int16_t lo, hi;

	memcpy(in.b, f, sizeof f);
	in.n = sizeof f;
	for (i = 0; i < NTAILS; i++) {
		add_tail(&t, &in, i);
		for (rv = 0; rv <= 5; rv++) {
			lo = hi = -1;
			cr_assert_eq(kc_apiversions_find(t.b, t.n, (int16_t)rv, 18, &lo, &hi), KC_OK,
			    "rv %d + %zu trailing bytes", rv, tails[i].n);
			cr_assert_eq(lo, 0);
			cr_assert_eq(hi, 4);
		}
	}
}
