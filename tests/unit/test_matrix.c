/*
 * test_matrix — the version matrix of every response ferry parses: for each
 * API and each version the proxy advertises (Metadata 0-13, FindCoordinator
 * 0-6, DescribeCluster 0-2, Produce 0-13, Fetch 0-18, ApiVersions 0-5) a
 * fixture from kafka_fixtures.h is rewritten by kc_rewrite_response and
 * compared byte for byte with the same fixture built with the proxy's
 * addresses; every strict prefix is rejected, and trailing bytes after the
 * response (00, aa bb cc) are accepted, dropped and counted.  The
 * DescribeCluster, Produce v10 and Fetch v16 outputs are also walked field
 * by field, and the caps of apiversions.c (ShareFetch and ShareAcknowledge
 * 1-2 included) are checked against the rewriters.  Edge cases of the newer
 * rewriters are in test_endpoints.c and test_share.c (whose version matrix
 * covers ShareFetch and ShareAcknowledge).
 */
#include "tests/unit/kafka_share_fixtures.h"

Test(matrix, metadata_v0_to_v13)
{
	struct bb in, exp;
	int v;

	for (v = 0; v <= 13; v++) {
		build_md(&in, v, UP, 3);
		build_md(&exp, v, PX, 3);
		check_rw(KC_API_METADATA, v, &in, &exp, 3);
		bb_free(&in);
		bb_free(&exp);
	}
}

Test(matrix, findcoordinator_v0_to_v6)
{
	static const struct coord up[] = {
		{ "group-a", 2, "kafka-2.internal.example", 9093, 0, "ok" },
		{ "group-b", -1, "", -1, 15, "not available" },
		{ "txn-c", 3, "kafka-3.internal.example", 9094, 0, NULL },
	};
	static const struct coord px[] = {
		{ "group-a", 2, "proxy.local", 19002, 0, "ok" },
		{ "group-b", -1, "", -1, 15, "not available" },
		{ "txn-c", 3, "proxy.local", 19003, 0, NULL },
	};
	struct bb in, exp;
	int v;

	for (v = 0; v <= 6; v++) {
		build_fc(&in, v, up, 3);
		build_fc(&exp, v, px, 3);
		check_rw(KC_API_FIND_COORDINATOR, v, &in, &exp, v <= 3 ? 1 : 2);
		bb_free(&in);
		bb_free(&exp);
	}
}

Test(matrix, describecluster_v0_to_v2)
{
	struct bb in, exp;
	int v;

	for (v = 0; v <= 2; v++) {
		build_dc(&in, v, 1, UP, 3);
		build_dc(&exp, v, 1, PX, 3);
		check_rw(KC_API_DESCRIBE_CLUSTER, v, &in, &exp, 3);
		bb_free(&in);
		bb_free(&exp);
	}
}

static void
check_dc_field_by_field(int v)
{
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	struct bb in;
	struct cur c;
	uint8_t *out = NULL;
	size_t n = 0;
	char err[128] = "";
	int i;

	build_dc(&in, v, 1, UP, 3);
	cr_assert_eq(kc_rewrite_response(60, (int16_t)v, in.b, in.n, &bm, &out, &n, err,
	    sizeof(err)), KC_OK, "%s", err);
	c.p = out;
	c.end = out + n;
	ex_i32(&c, (int32_t)n - 4);
	ex_i32(&c, 7);
	ex_raw(&c, "\x01\x03\x02\xc0\xde", 5);
	ex_i32(&c, 12);
	ex_i16(&c, 0);
	ex_cstr(&c, "all good");
	if (v >= 1)
		ex_i8(&c, 1);
	ex_cstr(&c, "cluster-A");
	ex_i32(&c, 2);
	ex_uv(&c, 4);
	for (i = 0; i < 3; i++) {
		ex_i32(&c, i + 1);
		ex_cstr(&c, "proxy.local");
		ex_i32(&c, 19001 + i);
		ex_cstr(&c, UP[i].rack);
		if (v >= 2)
			ex_i8(&c, (int8_t)UP[i].fenced);
		if (UP[i].tags != NULL)
			ex_raw(&c, UP[i].tags, UP[i].tl);
		else
			ex_uv(&c, 0);
	}
	ex_i32(&c, INT32_MIN);
	ex_raw(&c, "\x01\x03\x03\x01\x02\x03", 6);
	ex_end(&c);
	cr_assert_eq(m.calls, 3);
	cr_assert_str_eq(m.up_host, "kafka-3.internal.example");
	cr_assert_eq(m.up_port, 9094);
	free(out);
	bb_free(&in);
}

Test(describecluster, field_by_field)
{
	check_dc_field_by_field(0);
	check_dc_field_by_field(1);
	check_dc_field_by_field(2);
}

Test(matrix, produce_v0_to_v13)
{
	struct pr_opts up = { UP, 3, true, true }, px = { PX, 3, true, true };
	struct bb in, exp;
	int v;

	for (v = 0; v <= 13; v++) {
		build_pr(&in, v, &up);
		build_pr(&exp, v, &px);
		check_rw(KC_API_PRODUCE, v, &in, &exp, v >= 10 ? 3 : 0);
		if (v < 10)
			assert_bytes(exp.b, exp.n, in.b, in.n, "no NodeEndpoints before v10");
		bb_free(&in);
		bb_free(&exp);
	}
}

Test(matrix, produce_without_node_endpoints_is_identical)
{
	struct pr_opts none = { NULL, 0, false, false }, t7 = { NULL, 0, false, true };
	struct bb in;
	int v;

	for (v = 9; v <= 13; v++) {
		build_pr(&in, v, &none);
		check_rw(KC_API_PRODUCE, v, &in, &in, 0);
		bb_free(&in);
		build_pr(&in, v, &t7);
		check_rw(KC_API_PRODUCE, v, &in, &in, 0);
		bb_free(&in);
	}
}

/* Produce v10 with NodeEndpoints then an unknown tag 7, walked field by field. */
Test(produce, v10_field_by_field)
{
	struct pr_opts up = { UP, 3, true, true };
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	struct bb in;
	struct cur c;
	uint8_t *out = NULL;
	size_t n = 0, i, vsize;
	char err[128] = "";
	int t, p;

	build_pr(&in, 10, &up);
	cr_assert_eq(kc_rewrite_response(0, 10, in.b, in.n, &bm, &out, &n, err, sizeof(err)),
	    KC_OK, "%s", err);
	c.p = out;
	c.end = out + n;
	ex_i32(&c, (int32_t)n - 4);
	ex_i32(&c, 7);
	ex_raw(&c, "\x01\x03\x02\xc0\xde", 5);
	ex_uv(&c, 3);
	for (t = 0; t < 2; t++) {
		ex_cstr(&c, t == 0 ? "orders" : "logs");
		ex_uv(&c, t == 0 ? 3 : 2);
		for (p = 0; p < (t == 0 ? 2 : 1); p++) {
			ex_i32(&c, p);
			ex_i16(&c, (int16_t)(p == 1 ? 6 : 0));
			ex_i64(&c, 0x0102030405060708LL + p);
			ex_i64(&c, -1);
			ex_i64(&c, 42);
			if (p == 1) {
				ex_uv(&c, 3);
				ex_i32(&c, 3);
				ex_cstr(&c, NULL);
				ex_uv(&c, 0);
				ex_i32(&c, 4);
				ex_cstr(&c, "bad record");
				ex_raw(&c, "\x01\x06\x01\x66", 4);
				ex_cstr(&c, "not leader");
				/* CurrentLeader untouched, unknown partition tag 9 kept */
				ex_raw(&c, "\x02\x00\x09\x00\x00\x00\x02\x00\x00\x00\x07\x00", 12);
				ex_raw(&c, "\x09\x02\xbe\xef", 4);
			} else {
				ex_uv(&c, 1);
				ex_cstr(&c, NULL);
				ex_uv(&c, 0);
			}
		}
		ex_uv(&c, 0);
	}
	ex_i32(&c, 25);
	/* top-level tags: NodeEndpoints rewritten, then tag 7 byte for byte */
	ex_uv(&c, 2);
	ex_uv(&c, 0);
	vsize = 1;
	for (i = 0; i < 3; i++)
		vsize += 4 + 12 + 4 + (PX[i].rack ? 1 + strlen(PX[i].rack) : 1) +
		    (PX[i].tags ? PX[i].tl : 1);
	ex_uv(&c, (uint32_t)vsize);
	ex_uv(&c, 4);
	for (i = 0; i < 3; i++) {
		ex_i32(&c, (int32_t)i + 1);
		ex_cstr(&c, "proxy.local");
		ex_i32(&c, 19001 + (int32_t)i);
		ex_cstr(&c, UP[i].rack);
		if (UP[i].tags != NULL)
			ex_raw(&c, UP[i].tags, UP[i].tl);
		else
			ex_uv(&c, 0);
	}
	ex_raw(&c, "\x07\x03\x01\x02\x03", 5);
	ex_end(&c);
	cr_assert_eq(m.calls, 3);
	cr_assert_eq(m.nodes[0], 1);
	cr_assert_eq(m.nodes[1], 2);
	cr_assert_eq(m.nodes[2], 3);
	cr_assert_str_eq(m.up_host, "kafka-3.internal.example");
	cr_assert_eq(m.up_port, 9094);
	free(out);
	bb_free(&in);
}

Test(matrix, fetch_v0_to_v18)
{
	struct fe_opts up = { UP, 3, true, true, 0 }, px = { PX, 3, true, true, 0 };
	struct bb in, exp;
	int v;

	for (v = 0; v <= 18; v++) {
		build_fe(&in, v, &up);
		build_fe(&exp, v, &px);
		check_rw(KC_API_FETCH, v, &in, &exp, v >= 16 ? 3 : 0);
		if (v < 16)
			assert_bytes(exp.b, exp.n, in.b, in.n, "no NodeEndpoints before v16");
		bb_free(&in);
		bb_free(&exp);
	}
}

Test(matrix, fetch_without_node_endpoints_is_identical)
{
	struct fe_opts none = { NULL, 0, false, false, 0 }, t7 = { NULL, 0, false, true, 0 };
	struct bb in;
	int v;

	for (v = 12; v <= 18; v++) {
		build_fe(&in, v, &none);
		check_rw(KC_API_FETCH, v, &in, &in, 0);
		bb_free(&in);
		build_fe(&in, v, &t7);
		check_rw(KC_API_FETCH, v, &in, &in, 0);
		bb_free(&in);
	}
}

/* Fetch v16 with records and NodeEndpoints, walked field by field. */
Test(fetch, v16_field_by_field)
{
	struct fe_opts up = { UP, 3, true, false, 0 };
	struct tmap m;
	struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
	struct bb in;
	struct cur c;
	uint8_t *out = NULL, rec[70];
	size_t n = 0, i;
	char err[128] = "";

	build_fe(&in, 16, &up);
	fill_records(rec, sizeof(rec), 16);
	cr_assert_eq(kc_rewrite_response(1, 16, in.b, in.n, &bm, &out, &n, err, sizeof(err)),
	    KC_OK, "%s", err);
	c.p = out;
	c.end = out + n;
	ex_i32(&c, (int32_t)n - 4);
	ex_i32(&c, 7);
	ex_raw(&c, "\x01\x03\x02\xc0\xde", 5);
	ex_i32(&c, 10);
	ex_i16(&c, 0);
	ex_i32(&c, 0x11223344);
	ex_uv(&c, 3);
	/* orders: uuid 20.., partitions 0 and 1 */
	ex_raw(&c, "\x20\x21\x22\x23\x24\x25\x26\x27\x28\x29\x2a\x2b\x2c\x2d\x2e\x2f", 16);
	ex_uv(&c, 3);
	ex_i32(&c, 0);
	ex_i16(&c, 0);
	ex_i64(&c, 1000);
	ex_i64(&c, 990);
	ex_i64(&c, 5);
	ex_uv(&c, 0);				/* aborted: null */
	ex_i32(&c, -1);
	ex_uv(&c, sizeof(rec) + 1);
	ex_raw(&c, rec, sizeof(rec));		/* record bytes untouched */
	ex_uv(&c, 4);
	ex_raw(&c, "\x00\x0d\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x4d\x00", 15);
	ex_raw(&c, "\x01\x09\x00\x00\x00\x02\x00\x00\x00\x09\x00", 11);
	ex_raw(&c, "\x02\x0d\x00\x00\x00\x00\x00\x00\x00\x64\x00\x00\x00\x04\x00", 15);
	ex_raw(&c, "\x0c\x03\x01\x02\x03", 5);
	ex_i32(&c, 1);
	ex_i16(&c, 0);
	ex_i64(&c, 1001);
	ex_i64(&c, 990);
	ex_i64(&c, 5);
	ex_uv(&c, 3);
	ex_i64(&c, 0x5000);
	ex_i64(&c, 991);
	ex_uv(&c, 0);
	ex_i64(&c, 0x5001);
	ex_i64(&c, 995);
	ex_raw(&c, "\x01\x03\x01\x33", 4);
	ex_i32(&c, 3);
	ex_uv(&c, 1);				/* records: empty */
	ex_uv(&c, 0);
	ex_uv(&c, 0);				/* topic tags */
	/* logs: one partition, null records */
	ex_raw(&c, "\x30\x31\x32\x33\x34\x35\x36\x37\x38\x39\x3a\x3b\x3c\x3d\x3e\x3f", 16);
	ex_uv(&c, 2);
	ex_i32(&c, 0);
	ex_i16(&c, 0);
	ex_i64(&c, 1000);
	ex_i64(&c, 990);
	ex_i64(&c, 5);
	ex_uv(&c, 0);
	ex_i32(&c, -1);
	ex_uv(&c, 0);				/* records: null */
	ex_uv(&c, 0);
	ex_uv(&c, 0);
	/* top-level: NodeEndpoints only */
	ex_uv(&c, 1);
	ex_uv(&c, 0);
	ex_uv(&c, 1 + (4 + 12 + 4 + 7 + 1) + (4 + 12 + 4 + 1 + 5) + (4 + 12 + 4 + 7 + 1));
	ex_uv(&c, 4);
	for (i = 0; i < 3; i++) {
		ex_i32(&c, (int32_t)i + 1);
		ex_cstr(&c, "proxy.local");
		ex_i32(&c, 19001 + (int32_t)i);
		ex_cstr(&c, UP[i].rack);
		if (UP[i].tags != NULL)
			ex_raw(&c, UP[i].tags, UP[i].tl);
		else
			ex_uv(&c, 0);
	}
	ex_end(&c);
	cr_assert_eq(m.calls, 3);
	free(out);
	bb_free(&in);
}

Test(matrix, apiversions_v0_to_v5)
{
	/* a newer broker than Kafka 4.4 (Produce 14, Fetch 19, ApiVersions 6, ShareFetch 3
	 * and key 95 unknown to ferry) */
	static const struct av_ent up[] = {
		{ 0, 0, 14 }, { 1, 4, 19 }, { 2, 1, 11 }, { 3, 0, 13 }, { 4, 0, 7 },
		{ 10, 0, 6 }, { 17, 0, 1 }, { 18, 0, 6 }, { 36, 0, 2 }, { 55, 0, 2 },
		{ 60, 0, 2 }, { 68, 0, 1 }, { 78, 1, 3 }, { 79, 1, 2 }, { 83, 0, 0 },
		{ 93, 0, 0 }, { 94, 0, 0 }, { 95, 0, 0 },
	};
	static const struct av_ent ex[] = {
		{ 0, 0, 13 }, { 1, 4, 18 }, { 2, 1, 11 }, { 3, 0, 13 },
		{ 10, 0, 6 }, { 17, 0, 1 }, { 18, 0, 5 }, { 36, 0, 2 },
		{ 60, 0, 2 }, { 68, 0, 1 }, { 78, 1, 2 }, { 79, 1, 2 }, { 93, 0, 0 },
	};
	struct bb in, exp;
	int v;

	for (v = 0; v <= 5; v++) {
		build_av(&in, v, up, sizeof(up) / sizeof(up[0]));
		build_av(&exp, v, ex, sizeof(ex) / sizeof(ex[0]));
		check_rw(KC_API_API_VERSIONS, v, &in, &exp, 0);
		bb_free(&in);
		bb_free(&exp);
	}
}

/* Every parsed API, at every version the proxy lets through, has a
 * rewriter that accepts its fixture (the caps and the codec agree). */
Test(matrix, caps_match_rewriters)
{
	static const int16_t keys[] = { 0, 1, 3, 10, 18, 60, 78, 79 };
	size_t i;
	int16_t lo, hi, v;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		cr_assert(kc_api_cap(keys[i], &lo, &hi), "key %d", keys[i]);
		for (v = lo; v <= hi; v++) {
			struct bb in;
			struct tmap m;
			struct kc_broker_map bm = mk_map(&m, proxy_map, 3);
			struct pr_opts po = { UP, 3, true, true };
			struct fe_opts fo = { UP, 3, true, true, 0 };
			uint8_t *out = NULL;
			size_t n = 0;
			char err[128] = "";

			switch (keys[i]) {
			case 0:
				build_pr(&in, v, &po);
				break;
			case 1:
				build_fe(&in, v, &fo);
				break;
			case 3:
				build_md(&in, v, UP, 3);
				break;
			case 10:
				{
					static const struct coord c[] = {
						{ "g", 1, "kafka-1", 9092, 0, NULL },
					};

					build_fc(&in, v, c, 1);
				}
				break;
			case 18:
				{
					static const struct av_ent e[] = { { 3, 0, 13 } };

					build_av(&in, v, e, 1);
				}
				break;
			case 78:
			case 79:
				{
					struct sh_opts so = { UP, 3, true, 0 };

					build_share(&in, keys[i], v, &so);
				}
				break;
			default:
				build_dc(&in, v, 1, UP, 3);
			}
			cr_assert_eq(kc_rewrite_response(keys[i], v, in.b, in.n, &bm, &out, &n,
			    err, sizeof(err)), KC_OK, "key %d v%d: %s", keys[i], v, err);
			free(out);
			bb_free(&in);
		}
		/* one above the cap: no rewriter accepts it, and it is refused */
		cr_assert_not(kc_request_allowed(keys[i], (int16_t)(hi + 1)));
	}
}
