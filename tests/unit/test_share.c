/*
 * test_share — worker/kafka/rewrite_share.c: the NodeEndpoints of ShareFetch
 * (78) and ShareAcknowledge (79) responses, v1-2, rewritten to the proxy's
 * addresses (fixtures from kafka_share_fixtures.h; check_rw also rejects
 * every strict prefix and accepts trailing bytes); entries the map rejects
 * and negative node ids dropped, the count re-encoded narrower; empty
 * arrays; hosts whose length changes varint widths; large record sets;
 * malformed frames (null records, null arrays, the other key's or
 * version's layout, versions outside 1-2) rejected before the map runs;
 * and the version policy that lets exactly v1-2 through.
 */
#include "tests/unit/kafka_share_fixtures.h"

#include "worker/kafka/apiversions.h"

static const int16_t share_keys[] = { KC_API_SHARE_FETCH, KC_API_SHARE_ACKNOWLEDGE };

Test(share, every_version_rewritten)
{
	struct sh_opts up = { UP, 3, true, 0 }, px = { PX, 3, true, 0 };
	struct bb in, exp;
	size_t k;
	int v;

	for (k = 0; k < 2; k++) {
		for (v = 1; v <= 2; v++) {
			build_share(&in, share_keys[k], v, &up);
			build_share(&exp, share_keys[k], v, &px);
			check_rw(share_keys[k], v, &in, &exp, 3);
			bb_free(&in);
			bb_free(&exp);
		}
	}
}

/* Where NodeEndpoints starts in a fixture of (key, v): before its count,
 * the count and the empty top-level tag section of the empty variant. */
static size_t
sh_ne_at(int16_t key, int v)
{
	struct sh_opts none = { NULL, 0, false, 0 };
	struct bb b;
	size_t at;

	build_share(&b, key, v, &none);
	at = b.n - 2;
	bb_free(&b);
	return at;
}

Test(share, field_by_field)
{
	struct sh_opts up = { UP, 3, false, 0 };
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	struct bb in;
	struct cur c;
	uint8_t *out = NULL;
	size_t n = 0, ne_at = sh_ne_at(KC_API_SHARE_ACKNOWLEDGE, 2);
	char err[128] = "";
	int i;

	build_sa(&in, 2, &up);
	cr_assert_eq(kc_rewrite_response(79, 2, in.b, in.n, &bm, &out, &n, err, sizeof(err)),
	    KC_OK, "%s", err);
	/* everything before NodeEndpoints is the input's, size prefix aside */
	cr_assert(memcmp(out + 4, in.b + 4, ne_at - 4) == 0);
	c.p = out + ne_at;
	c.end = out + n;
	ex_uv(&c, 4);
	for (i = 0; i < 3; i++) {
		ex_i32(&c, PX[i].id);
		ex_cstr(&c, "proxy.local");
		ex_i32(&c, 19001 + i);
		ex_cstr(&c, PX[i].rack);
		if (PX[i].tags)
			ex_raw(&c, PX[i].tags, PX[i].tl);
		else
			ex_uv(&c, 0);
	}
	ex_uv(&c, 0);
	ex_end(&c);
	cr_assert_eq(m.calls, 3);
	cr_assert_eq(m.nodes[0], 1);
	cr_assert_eq(m.nodes[2], 3);
	cr_assert_str_eq(m.up_host, "kafka-3.internal.example");
	cr_assert_eq(m.up_port, 9094);
	free(out);
	bb_free(&in);
}

Test(share, unmapped_and_negative_dropped)
{
	static const struct node up[] = {
		{ 7, "kafka-7", 9097, NULL, NULL, 0, 0 },	/* no proxy port */
		{ 2, "kafka-2", 9093, "r", NULL, 0, 0 },
		{ -1, "leak.example", 9000, NULL, NULL, 0, 0 },
	};
	static const struct node px[] = {
		{ 2, "proxy.local", 19002, "r", NULL, 0, 0 },
	};
	struct sh_opts in_o = { up, 3, true, 0 }, ex_o = { px, 1, true, 0 };
	struct sh_opts only7 = { up, 1, false, 0 }, empty = { NULL, 0, false, 0 };
	struct bb in, exp;
	size_t k;

	for (k = 0; k < 2; k++) {
		build_share(&in, share_keys[k], 1, &in_o);
		build_share(&exp, share_keys[k], 1, &ex_o);
		check_rw(share_keys[k], 1, &in, &exp, 2);	/* not for -1 */
		bb_free(&in);
		bb_free(&exp);
		/* every entry dropped: an empty array */
		build_share(&in, share_keys[k], 2, &only7);
		build_share(&exp, share_keys[k], 2, &empty);
		check_rw(share_keys[k], 2, &in, &exp, 1);
		cr_assert(memcmp(exp.b + exp.n - 2, "\x01\x00", 2) == 0);
		bb_free(&in);
		bb_free(&exp);
		/* an empty array: the frame unchanged, no map call */
		build_share(&in, share_keys[k], 2, &empty);
		check_rw(share_keys[k], 2, &in, &in, 0);
		bb_free(&in);
	}
}

/* 130 entries (count 131 = 83 01) of which two are mapped: the count
 * narrows to one byte. */
Test(share, count_varint_narrows)
{
	struct node up[130], px[2];
	struct sh_opts in_o = { up, 130, false, 0 }, ex_o = { px, 2, false, 0 };
	struct bb in, exp;
	int i;

	for (i = 0; i < 130; i++)
		up[i] = (struct node){ i == 40 ? 1 : i == 90 ? 3 : 9, "kafka-x", 9092, NULL,
		    NULL, 0, 0 };
	px[0] = (struct node){ 1, "proxy.local", 19001, NULL, NULL, 0, 0 };
	px[1] = (struct node){ 3, "proxy.local", 19003, NULL, NULL, 0, 0 };
	build_sf(&in, 1, &in_o);
	build_sf(&exp, 1, &ex_o);
	check_rw(KC_API_SHARE_FETCH, 1, &in, &exp, 130);
	bb_free(&in);
	bb_free(&exp);
}

/* A 127-byte upstream host (compact length 80 01) becomes proxy.local, and
 * a 300-byte proxy host replaces a short one; records of 100 KiB. */
Test(share, host_lengths_and_big_records)
{
	char lh[128], ph[301];
	struct node up[1] = { { 1, NULL, 9092, "rack-a", NULL, 0, 0 } };
	struct node px[1] = { { 1, "proxy.local", 19001, "rack-a", NULL, 0, 0 } };
	struct tmap_ent lm[1];
	struct sh_opts in_o = { up, 1, true, 100 << 10 }, ex_o = { px, 1, true, 100 << 10 };
	struct tmap m;
	struct kc_broker_map bm;
	struct bb in, exp;
	uint8_t *out = NULL;
	size_t n = 0;
	char err[128] = "";

	memset(lh, 'h', 127);
	lh[127] = '\0';
	up[0].host = lh;
	build_sf(&in, 2, &in_o);
	build_sf(&exp, 2, &ex_o);
	check_rw(KC_API_SHARE_FETCH, 2, &in, &exp, 1);
	cr_assert_eq(exp.n, in.n - 127 - 2 + 11 + 1);
	bb_free(&in);
	bb_free(&exp);

	memset(ph, 'p', 300);
	ph[300] = '\0';
	lm[0] = (struct tmap_ent){ 1, ph, 29092 };
	bm = mk_map(&m, lm, 1);
	build_sa(&in, 1, &ex_o);			/* proxy.local:19001 upstream */
	up[0].host = ph;
	up[0].port = 29092;
	build_sa(&exp, 1, &in_o);
	cr_assert_eq(kc_rewrite_response(79, 1, in.b, in.n, &bm, &out, &n, err, sizeof(err)),
	    KC_OK, "%s", err);
	assert_bytes(out, n, exp.b, exp.n, "grow");
	cr_assert_eq(m.calls, 1);
	cr_assert_str_eq(m.up_host, "proxy.local");
	free(out);
	bb_free(&in);
	bb_free(&exp);
}

/* Offset of partition 1's Records in a ShareFetch v1 fixture without big
 * records: after the header and the first partition. */
static size_t
sf_records_p1(void)
{
	return 4 + 4 + 5 +		/* size, corr, header tags */
	    4 + 2 + 1 + 4 +		/* throttle, error, message, lock timeout */
	    1 + 16 + 1 +		/* Responses, TopicId, Partitions */
	    4 + 2 + 1 + 2 + 1 + 9 +	/* partition 0 up to CurrentLeader */
	    1 + 90 +			/* its records (compact length 91 = 5b) */
	    1 + 19 + 22 + 5 +		/* AcquiredRecords, partition tags */
	    4 + 2 + 15 + 2 + 17 + 12;	/* partition 1 up to its Records */
}

Test(share, malformed)
{
	struct sh_opts up = { UP, 3, true, 0 };
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	struct bb in;
	size_t at, k;
	char err[128] = "";
	int v;

	/* versions outside 1-2 have no schema here */
	for (k = 0; k < 2; k++) {
		build_share(&in, share_keys[k], 1, &up);
		for (v = -1; v <= 5; v += (v == 0 ? 3 : 1)) {
			cr_assert_eq(try_rw(share_keys[k], v, &in, &bm, err), KC_MALFORMED,
			    "v%d", v);
			cr_assert_str_eq(err, "response version not rewritable");
		}
		bb_free(&in);
	}
	/* one key's layout is not the other's */
	build_sf(&in, 1, &up);
	cr_assert_eq(try_rw(KC_API_SHARE_ACKNOWLEDGE, 1, &in, &bm, err), KC_MALFORMED);
	bb_free(&in);
	build_sa(&in, 2, &up);
	cr_assert_eq(try_rw(KC_API_SHARE_FETCH, 2, &in, &bm, err), KC_MALFORMED);
	bb_free(&in);
	/* ShareAcknowledge v2 has AcquisitionLockTimeoutMs, v1 has not */
	build_sa(&in, 2, &up);
	cr_assert_eq(try_rw(KC_API_SHARE_ACKNOWLEDGE, 1, &in, &bm, err), KC_MALFORMED);
	bb_free(&in);
	build_sa(&in, 1, &up);
	cr_assert_eq(try_rw(KC_API_SHARE_ACKNOWLEDGE, 2, &in, &bm, err), KC_MALFORMED);
	bb_free(&in);
	/* null Records (nullable in v0 only) */
	build_sf(&in, 1, &up);
	at = sf_records_p1();
	cr_assert_eq(in.b[at], 1, "fixture layout: %02x at %zu", in.b[at], at);
	in.b[at] = 0;
	cr_assert_eq(try_rw(KC_API_SHARE_FETCH, 1, &in, &bm, err), KC_MALFORMED);
	cr_assert_str_eq(err, "null in non-nullable bytes");
	bb_free(&in);
	/* null NodeEndpoints: compact 0 where the (empty) array is */
	{
		struct sh_opts none = { NULL, 0, false, 0 };

		build_sa(&in, 1, &none);
		cr_assert_eq(in.b[in.n - 2], 1);
		in.b[in.n - 2] = 0;
		cr_assert_eq(try_rw(KC_API_SHARE_ACKNOWLEDGE, 1, &in, &bm, err), KC_MALFORMED);
		cr_assert_str_eq(err, "null in non-nullable array");
		bb_free(&in);
	}
	/* a NodeEndpoints count larger than what follows */
	{
		struct sh_opts three = { UP, 3, false, 0 };
		size_t ne_at = sh_ne_at(KC_API_SHARE_FETCH, 2);

		build_sf(&in, 2, &three);
		cr_assert_eq(in.b[ne_at], 4);
		in.b[ne_at] = 5;
		cr_assert_eq(try_rw(KC_API_SHARE_FETCH, 2, &in, &bm, err), KC_MALFORMED);
		bb_free(&in);
	}
	cr_assert_eq(m.calls, 0, "the map ran on a malformed frame");
}

Test(share, policy)
{
	struct bb in, exp;
	size_t k;
	int16_t lo, hi;
	int v;

	for (k = 0; k < 2; k++) {
		cr_assert_not(kc_api_refused(share_keys[k]));
		cr_assert(kc_api_cap(share_keys[k], &lo, &hi));
		cr_assert_eq(lo, 1);
		cr_assert_eq(hi, 2);
		cr_assert_not(kc_request_allowed(share_keys[k], 0));
		cr_assert(kc_request_allowed(share_keys[k], 1));
		cr_assert(kc_request_allowed(share_keys[k], 2));
		cr_assert_not(kc_request_allowed(share_keys[k], 3));
		for (v = -1; v <= 4; v++)
			cr_assert_eq(kc_response_needs_rewrite(share_keys[k], (int16_t)v),
			    v >= 1 && v <= 2, "key %d v%d", share_keys[k], v);
	}
	/* ApiVersions: the broker's 0-3 become 1-2; v0-only is dropped */
	{
		static const struct av_ent up[] = {
			{ 76, 1, 1 }, { 77, 1, 1 }, { 78, 0, 3 }, { 79, 0, 0 },
		};
		static const struct av_ent ex[] = {
			{ 76, 1, 1 }, { 77, 1, 1 }, { 78, 1, 2 },
		};

		for (v = 0; v <= 4; v++) {
			build_av(&in, v, up, 4);
			build_av(&exp, v, ex, 3);
			check_rw(KC_API_API_VERSIONS, v, &in, &exp, 0);
			bb_free(&in);
			bb_free(&exp);
		}
	}
}
