/*
 * test_endpoints — edge cases of worker/kafka/rewrite_endpoints.c: entries
 * the map rejects or with negative node ids dropped, DescribeCluster
 * controller lists, the NodeEndpoints tag before its version (opaque),
 * twice, empty, with host lengths that change varint widths, malformed tag
 * values, large record sets, and random mutations.  Fixtures come from
 * kafka_fixtures.h.
 */
#include "tests/unit/kafka_fixtures.h"

Test(describecluster, unmapped_and_negative_dropped)
{
	static const struct node up[] = {
		{ 1, "kafka-1", 9092, NULL, NULL, 0, 0 },
		{ -1, "leak.example", 9000, NULL, NULL, 0, 0 },
		{ 9, "kafka-9", 9099, "r9", NULL, 0, 1 },
		{ 3, "kafka-3", 9094, NULL, NULL, 0, 0 },
	};
	static const struct node px[] = {
		{ 1, "proxy.local", 19001, NULL, NULL, 0, 0 },
		{ 3, "proxy.local", 19003, NULL, NULL, 0, 0 },
	};
	struct bb in, exp;
	int v;

	for (v = 0; v <= 2; v++) {
		build_dc(&in, v, 1, up, 4);
		build_dc(&exp, v, 1, px, 2);
		check_rw(KC_API_DESCRIBE_CLUSTER, v, &in, &exp, 3);	/* not for -1 */
		bb_free(&in);
		bb_free(&exp);
	}
}

Test(describecluster, controllers_dropped_unmapped)
{
	struct bb in, exp;

	/* EndpointType 2 (controllers): the proxy serves no controller */
	build_dc(&in, 1, 2, UP, 3);
	build_dc(&exp, 1, 2, NULL, 0);
	check_rw(KC_API_DESCRIBE_CLUSTER, 1, &in, &exp, 0);
	bb_free(&in);
	bb_free(&exp);
}

Test(describecluster, malformed)
{
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	struct bb in;
	size_t at;
	char err[128] = "";

	/* a v2 body is not a v1 body (IsFenced bytes misalign it) */
	build_dc(&in, 2, 1, UP, 3);
	cr_assert_eq(try_rw(60, 1, &in, &bm, err), KC_MALFORMED);
	cr_assert_eq(try_rw(60, 3, &in, &bm, err), KC_MALFORMED);
	cr_assert_str_eq(err, "response version not rewritable");
	bb_free(&in);
	/* null ClusterId */
	build_dc(&in, 0, 1, UP, 3);
	at = 4 + 4 + 5 + 4 + 2 + 9;
	cr_assert_eq(in.b[at], 10);
	in.b[at] = 0;
	cr_assert_eq(try_rw(60, 0, &in, &bm, err), KC_MALFORMED);
	cr_assert_str_eq(err, "null in non-nullable string");
	bb_free(&in);
	cr_assert_eq(m.calls, 0);
}

Test(produce, unmapped_negative_and_all_dropped)
{
	static const struct node up[] = {
		{ 7, "kafka-7", 9097, NULL, NULL, 0, 0 },	/* no proxy port */
		{ 2, "kafka-2", 9093, "r", NULL, 0, 0 },
		{ -1, "leak.example", 9000, NULL, NULL, 0, 0 },
	};
	static const struct node px[] = {
		{ 2, "proxy.local", 19002, "r", NULL, 0, 0 },
	};
	struct pr_opts in_o = { up, 3, true, true }, ex_o = { px, 1, true, true };
	struct pr_opts only7 = { up, 1, true, false }, empty = { NULL, 0, true, false };
	struct bb in, exp;

	build_pr(&in, 11, &in_o);
	build_pr(&exp, 11, &ex_o);
	check_rw(KC_API_PRODUCE, 11, &in, &exp, 2);
	bb_free(&in);
	bb_free(&exp);
	/* every entry dropped: the tag stays, as an empty array */
	build_pr(&in, 12, &only7);
	build_pr(&exp, 12, &empty);
	check_rw(KC_API_PRODUCE, 12, &in, &exp, 1);
	cr_assert(memcmp(exp.b + exp.n - 4, "\x01\x00\x01\x01", 4) == 0);
	bb_free(&in);
	bb_free(&exp);
	/* an empty NodeEndpoints stays empty */
	build_pr(&in, 10, &empty);
	check_rw(KC_API_PRODUCE, 10, &in, &in, 0);
	bb_free(&in);
}

/* Before v10 a top-level (or partition) tag 0 is unknown: opaque, copied. */
Test(produce, tag0_before_v10_is_opaque)
{
	static const uint32_t tag0 = 0;
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	struct bb in, val;
	uint8_t *out = NULL;
	size_t n = 0;
	char err[128] = "";

	bb_init(&val);
	bb_node_endpoints(&val, UP, 3);
	build_pr_tags(&in, 9, 1, &tag0, &val);
	check_rw(KC_API_PRODUCE, 9, &in, &in, 0);
	bb_free(&in);
	/* the same tag in v10 is rewritten */
	build_pr_tags(&in, 10, 1, &tag0, &val);
	cr_assert_eq(kc_rewrite_response(0, 10, in.b, in.n, &bm, &out, &n, err, sizeof(err)),
	    KC_OK, "%s", err);
	cr_assert_eq(m.calls, 3);
	cr_assert_lt(n, in.n);
	free(out);
	bb_free(&in);
	bb_free(&val);
}

Test(produce, duplicate_tag0_both_rewritten)
{
	static const uint32_t tags[3] = { 0, 5, 0 };
	struct bb in, exp, up[3], px[3];
	int i;

	for (i = 0; i < 3; i++) {
		bb_init(&up[i]);
		bb_init(&px[i]);
	}
	bb_node_endpoints(&up[0], UP, 1);
	bb_node_endpoints(&px[0], PX, 1);
	bb_node_endpoints(&up[2], UP + 1, 2);
	bb_node_endpoints(&px[2], PX + 1, 2);
	build_pr_tags(&in, 10, 3, tags, up);
	build_pr_tags(&exp, 10, 3, tags, px);
	check_rw(KC_API_PRODUCE, 10, &in, &exp, 3);
	bb_free(&in);
	bb_free(&exp);
	for (i = 0; i < 3; i++) {
		bb_free(&up[i]);
		bb_free(&px[i]);
	}
}

/*
 * A 127-byte upstream host: its compact length is 80 01 and the tag size
 * needs two bytes; rewritten to proxy.local both shrink to one byte.  And
 * the reverse: a 127-byte proxy host grows both.
 */
Test(produce, host_length_changes_varint_widths)
{
	char lh[128];
	struct node up[1] = { { 1, NULL, 9092, NULL, NULL, 0, 0 } };
	struct node px[1] = { { 1, "proxy.local", 19001, NULL, NULL, 0, 0 } };
	struct tmap_ent le[1] = { { 1, NULL, 29092 } };
	struct pr_opts in_o = { up, 1, true, true }, ex_o = { px, 1, true, true };
	struct tmap m;
	struct kc_broker_map bm;
	struct bb in, exp;
	uint8_t *out = NULL;
	size_t n = 0, at;
	char err[128] = "";

	memset(lh, 'h', 127);
	lh[127] = '\0';
	up[0].host = lh;
	build_pr(&in, 10, &in_o);
	build_pr(&exp, 10, &ex_o);
	/* top tags: count 2, tag 0, size 4+2+127+4+1+1+1 = 140 (8c 01) */
	at = in.n - 5 - 140 - 2 - 1 - 1;
	cr_assert_eq(in.b[at], 2);
	cr_assert_eq(in.b[at + 1], 0);
	cr_assert_eq(in.b[at + 2], 0x8c);
	cr_assert_eq(in.b[at + 3], 0x01);
	cr_assert_eq(in.b[at + 4], 2);		/* one entry */
	cr_assert_eq(in.b[at + 9], 0x80);	/* host length 127 + 1 */
	cr_assert_eq(in.b[at + 10], 0x01);
	check_rw(KC_API_PRODUCE, 10, &in, &exp, 1);
	cr_assert_eq(exp.n, in.n - 127 - 2 + 12 - 1);
	bb_free(&in);
	bb_free(&exp);

	/* short upstream, 127-byte proxy host */
	le[0].host = lh;
	bm = mk_map(&m, le, 1);
	build_pr(&in, 10, &ex_o);			/* proxy.local:19001 upstream */
	up[0].port = 29092;
	build_pr(&exp, 10, &in_o);			/* long host, port 29092 */
	cr_assert_eq(kc_rewrite_response(0, 10, in.b, in.n, &bm, &out, &n, err, sizeof(err)),
	    KC_OK, "%s", err);
	assert_bytes(out, n, exp.b, exp.n, "grow");
	cr_assert_eq(m.calls, 1);
	cr_assert_str_eq(m.up_host, "proxy.local");
	free(out);
	bb_free(&in);
	bb_free(&exp);
}

Test(produce, malformed_tags)
{
	static const uint32_t tag0 = 0;
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	struct bb in, val;
	char err[128] = "";

	/* NodeEndpoints value with a stray byte after the array */
	bb_init(&val);
	bb_node_endpoints(&val, UP, 2);
	bb_u8(&val, 0);
	build_pr_tags(&in, 10, 1, &tag0, &val);
	cr_assert_eq(try_rw(0, 10, &in, &bm, err), KC_MALFORMED);
	cr_assert_str_eq(err, "tagged field longer than its value");
	bb_free(&in);
	/* the value cut by one byte: the last entry's tags run out */
	val.n -= 2;
	build_pr_tags(&in, 10, 1, &tag0, &val);
	cr_assert_eq(try_rw(0, 10, &in, &bm, err), KC_MALFORMED);
	cr_assert_str_eq(err, "tagged field past end of frame");
	bb_free(&in);
	/* null NodeEndpoints array (compact 0) */
	val.n = 0;
	bb_u8(&val, 0);
	build_pr_tags(&in, 10, 1, &tag0, &val);
	cr_assert_eq(try_rw(0, 10, &in, &bm, err), KC_MALFORMED);
	cr_assert_str_eq(err, "null in non-nullable array");
	bb_free(&in);
	/* tag size past the end of the frame */
	build_pr_tags(&in, 10, 0, NULL, NULL);
	in.n--;
	bb_raw(&in, "\x01\x00\x40\x01", 4);
	bb_fix(&in);
	cr_assert_eq(try_rw(0, 10, &in, &bm, err), KC_MALFORMED);
	cr_assert_str_eq(err, "tagged field past end of frame");
	bb_free(&in);
	bb_free(&val);
	cr_assert_eq(m.calls, 0);
}

Test(produce, current_leader_must_fill_its_tag)
{
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	struct bb in;
	char err[128] = "";
	int v;

	/* v10: topic "t", one partition whose CurrentLeader tag is 8 bytes */
	for (v = 9; v <= 10; v++) {
		bb_init(&in);
		bb_head(&in, true);
		bb_uv(&in, 2);
		bb_str(&in, true, "t");
		bb_uv(&in, 2);
		bb_i32(&in, 0);
		bb_i16(&in, 0);
		bb_i64(&in, 0);
		bb_i64(&in, -1);
		bb_i64(&in, 0);
		bb_uv(&in, 1);
		bb_u8(&in, 0);
		bb_raw(&in, "\x01\x00\x08\x00\x00\x00\x01\x00\x00\x00\x02", 11);
		bb_u8(&in, 0);
		bb_i32(&in, 0);
		bb_u8(&in, 0);
		bb_fix(&in);
		/* opaque in v9, a truncated LeaderIdAndEpoch in v10 */
		cr_assert_eq(try_rw(0, v, &in, &bm, err), v == 9 ? KC_OK : KC_MALFORMED, "v%d", v);
		bb_free(&in);
	}
}

Test(produce, mapped_host_too_long)
{
	static char huge[0x8001];
	struct tmap_ent e[1] = { { 1, huge, 1 } };
	struct pr_opts up = { UP, 1, true, false };
	struct tmap m;
	struct kc_broker_map bm;
	struct bb in;
	char err[128] = "";

	memset(huge, 'z', 0x8000);
	bm = mk_map(&m, e, 1);
	build_pr(&in, 10, &up);
	cr_assert_eq(try_rw(0, 10, &in, &bm, err), KC_MALFORMED);
	cr_assert_str_eq(err, "mapped host invalid or too long");
	bb_free(&in);
}

/* 1 MiB of records: one validating pass, the records copied untouched. */
Test(fetch, large_records)
{
	struct fe_opts up = { UP, 3, true, true, 1u << 20 }, px = { PX, 3, true, true, 1u << 20 };
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	struct bb in, exp;
	uint8_t *out = NULL;
	size_t n = 0;
	char err[128] = "";
	int v;

	for (v = 12; v <= 17; v++) {
		build_fe(&in, v, &up);
		build_fe(&exp, v, &px);
		m.calls = 0;
		cr_assert_eq(kc_rewrite_response(1, (int16_t)v, in.b, in.n, &bm, &out, &n, err,
		    sizeof(err)), KC_OK, "v%d %s", v, err);
		assert_bytes(out, n, exp.b, exp.n, "large fetch");
		cr_assert_eq(m.calls, v >= 16 ? 3 : 0);
		free(out);
		/* one byte short inside the records */
		in.n = in.n / 2;
		bb_fix(&in);
		cr_assert_eq(try_rw(1, (int16_t)v, &in, &bm, err), KC_MALFORMED);
		cr_assert_str_eq(err, "length past end of frame");
		bb_free(&in);
		bb_free(&exp);
	}
}

Test(fetch, unmapped_dropped_and_host_widths)
{
	char lh[128];
	struct node up[2] = {
		{ 1, NULL, 9092, NULL, NULL, 0, 0 },
		{ 5, "kafka-5", 9095, NULL, NULL, 0, 0 },	/* no proxy port */
	};
	static const struct node px[1] = { { 1, "proxy.local", 19001, NULL, NULL, 0, 0 } };
	struct fe_opts in_o = { up, 2, true, true, 0 }, ex_o = { px, 1, true, true, 0 };
	struct bb in, exp;

	memset(lh, 'f', 127);
	lh[127] = '\0';
	up[0].host = lh;
	build_fe(&in, 17, &in_o);
	build_fe(&exp, 17, &ex_o);
	check_rw(KC_API_FETCH, 17, &in, &exp, 2);
	cr_assert_eq(exp.n, in.n - (127 + 2 - 12) - (4 + 8 + 4 + 1 + 1) - 1);
	bb_free(&in);
	bb_free(&exp);
}

Test(fetch, malformed)
{
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	struct fe_opts up = { UP, 3, true, false, 0 };
	struct bb in;
	uint8_t *out = NULL;
	size_t n = 0, at;
	char err[128] = "";

	/* versions are not interchangeable */
	build_fe(&in, 16, &up);
	cr_assert_eq(kc_rewrite_response(1, 15, in.b, in.n, &bm, &out, &n, err, sizeof(err)),
	    KC_OK, "%s", err);		/* v15: tag 0 is opaque, so it parses */
	assert_bytes(out, n, in.b, in.n, "v16 bytes as v15");
	free(out);
	out = NULL;
	cr_assert_eq(m.calls, 0);
	/* v12 and v11 have topic names, not ids */
	cr_assert_eq(try_rw(1, 12, &in, &bm, err), KC_MALFORMED);
	cr_assert_eq(try_rw(1, 11, &in, &bm, err), KC_MALFORMED);
	cr_assert_eq(try_rw(1, 19, &in, &bm, err), KC_MALFORMED);
	cr_assert_str_eq(err, "response version not rewritable");
	bb_free(&in);

	/* a DivergingEpoch one byte short of its tag */
	build_fe(&in, 16, &up);
	at = 4 + 4 + 5 + 4 + 2 + 4 + 1 + 16 + 1 + 4 + 2 + 8 + 8 + 8 + 1 + 4 + 1 + 70 + 1;
	cr_assert_eq(in.b[at], 0x00);
	cr_assert_eq(in.b[at + 1], 0x0d);
	in.b[at + 1] = 0x0c;
	cr_assert_eq(try_rw(1, 16, &in, &bm, err), KC_MALFORMED);
	in.b[at + 1] = 0x0d;
	/* records length past the end of the frame (the 5-byte varint
	 * overwrites record bytes, which nobody reads) */
	cr_assert_eq(in.b[at - 72], 71);
	memcpy(in.b + at - 72, "\xff\xff\xff\xff\x07", 5);
	cr_assert_eq(try_rw(1, 16, &in, &bm, err), KC_MALFORMED);
	cr_assert_str_eq(err, "length past end of frame");
	bb_free(&in);
	cr_assert_eq(m.calls, 0);
}

/* Random byte mutations of every new fixture: never a crash or an
 * out-of-bounds access (the suite runs under ASan/UBSan), and whatever is
 * accepted comes out with a consistent size prefix. */
Test(matrix, random_mutations_never_crash)
{
	struct pr_opts po = { UP, 3, true, true };
	struct fe_opts fo = { UP, 3, true, true, 0 };
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	uint32_t seed = 4242;
	int key, v, i, k, maxv;

	for (key = 0; key < 3; key++) {
		maxv = key == 0 ? 13 : key == 1 ? 17 : 2;
		for (v = 0; v <= maxv; v++) {
			struct bb in;

			if (key == 0)
				build_pr(&in, v, &po);
			else if (key == 1)
				build_fe(&in, v, &fo);
			else
				build_dc(&in, v, 1, UP, 3);
			for (i = 0; i < 300; i++) {
				uint8_t *f = malloc(in.n), *out = NULL;
				size_t n = 0;
				char err[128];
				int16_t api = (int16_t)(key == 2 ? 60 : key);

				memcpy(f, in.b, in.n);
				for (k = 0; k < 3; k++) {
					seed = seed * 1103515245u + 12345u;
					f[4 + (seed >> 8) % (in.n - 4)] = (uint8_t)(seed >> 20);
				}
				if (kc_rewrite_response(api, (int16_t)v, f, in.n, &bm, &out, &n, err,
				    sizeof(err)) == KC_OK) {
					cr_assert_not_null(out);
					cr_assert_eq((size_t)kc_get_i32(out), n - 4);
				} else
					cr_assert_null(out);
				free(out);
				free(f);
			}
			bb_free(&in);
		}
	}
}
