/*
 * test_codec — Criterion tests of worker/kafka/codec.c: varints, the bounded
 * reader and writer, header-version rules, request-header and response-prefix
 * parsing (including the NEED_MORE / MALFORMED split), Produce acks.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "worker/kafka/codec.h"

#define MAXF	(100u * 1024 * 1024)

/* ---- varints ---- */

Test(varint, roundtrip_and_widths)
{
	static const struct {
		uint32_t v;
		size_t w;
	} c[] = {
		{ 0, 1 }, { 1, 1 }, { 127, 1 }, { 128, 2 }, { 16383, 2 }, { 16384, 3 },
		{ 2097151, 3 }, { 2097152, 4 }, { 268435455, 4 }, { 268435456, 5 },
		{ UINT32_MAX, 5 },
	};
	uint8_t b[8];
	uint32_t v;
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		cr_assert_eq(kc_uvarint_size(c[i].v), c[i].w, "%u", c[i].v);
		cr_assert_eq(kc_put_uvarint(b, c[i].v), c[i].w);
		cr_assert_eq(kc_get_uvarint(b, sizeof(b), &v), (int)c[i].w);
		cr_assert_eq(v, c[i].v);
		/* one byte short: runs out */
		cr_assert_eq(kc_get_uvarint(b, c[i].w - 1, &v), 0);
	}
	kc_put_uvarint(b, 128);
	cr_assert_eq(b[0], 0x80);
	cr_assert_eq(b[1], 0x01);
}

Test(varint, five_byte_limit)
{
	static const uint8_t max[] = { 0xff, 0xff, 0xff, 0xff, 0x0f };
	static const uint8_t over[] = { 0xff, 0xff, 0xff, 0xff, 0x10 };
	static const uint8_t six[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x00 };
	uint32_t v;

	cr_assert_eq(kc_get_uvarint(max, 5, &v), 5);
	cr_assert_eq(v, UINT32_MAX);
	cr_assert_eq(kc_get_uvarint(over, 5, &v), -1);
	cr_assert_eq(kc_get_uvarint(six, 6, &v), -1);
	/* zero-padded but <= 5 bytes is legal, like Java's reader */
	cr_assert_eq(kc_get_uvarint((const uint8_t *)"\x80\x00", 2, &v), 2);
	cr_assert_eq(v, 0);
}

/* ---- reader ---- */

Test(reader, strings)
{
	static const uint8_t b[] = {
		0x00, 0x03, 'a', 'b', 'c',	/* "abc" */
		0xff, 0xff,			/* null */
		0x04, 'x', 'y', 'z',		/* compact "xyz" */
		0x00,				/* compact null */
		0x01,				/* compact "" */
	};
	struct kc_reader r;
	const uint8_t *s;

	kc_rd_init(&r, b, sizeof(b));
	cr_assert_eq(kc_rd_string(&r, false, false, &s), 3);
	cr_assert(memcmp(s, "abc", 3) == 0);
	cr_assert_eq(kc_rd_string(&r, false, true, &s), -1);
	cr_assert_null(s);
	cr_assert_eq(kc_rd_string(&r, true, false, &s), 3);
	cr_assert(memcmp(s, "xyz", 3) == 0);
	cr_assert_eq(kc_rd_string(&r, true, true, &s), -1);
	cr_assert_eq(kc_rd_string(&r, true, false, &s), 0);
	cr_assert_eq(r.status, KC_OK);
	cr_assert_eq(r.p, r.end);
	/* reading past the end is malformed and sticky */
	cr_assert_eq(kc_rd_i16(&r), 0);
	cr_assert_eq(r.status, KC_MALFORMED);
	cr_assert_eq(kc_rd_i8(&r), 0);
	cr_assert_eq(r.status, KC_MALFORMED);

	/* non-nullable null */
	kc_rd_init(&r, b + 5, 2);
	kc_rd_string(&r, false, false, NULL);
	cr_assert_eq(r.status, KC_MALFORMED);
	cr_assert_str_eq(r.err, "null in non-nullable string");
	kc_rd_init(&r, b + 11, 1);
	kc_rd_string(&r, true, false, NULL);
	cr_assert_eq(r.status, KC_MALFORMED);
	/* length below -1 */
	kc_rd_init(&r, (const uint8_t *)"\xff\xfe", 2);
	kc_rd_string(&r, false, true, NULL);
	cr_assert_eq(r.status, KC_MALFORMED);
	/* length past the end */
	kc_rd_init(&r, (const uint8_t *)"\x00\x05" "ab", 4);
	kc_rd_string(&r, false, false, NULL);
	cr_assert_eq(r.status, KC_MALFORMED);
	/* compact 0x8000 bytes (N+1 = 0x8001) */
	kc_rd_init(&r, (const uint8_t *)"\x81\x80\x02", 3);
	kc_rd_string(&r, true, false, NULL);
	cr_assert_eq(r.status, KC_MALFORMED);
	cr_assert_str_eq(r.err, "string longer than 0x7fff");
}

Test(reader, partial_need_more_vs_malformed)
{
	static const uint8_t b[] = { 0x00, 0x05, 'a', 'b', 'c', 'd', 'e' };
	struct kc_reader r;

	/* the string fits the frame, only 4 bytes are present: need more */
	kc_rd_init_partial(&r, b, sizeof(b), 4);
	kc_rd_string(&r, false, false, NULL);
	cr_assert_eq(r.status, KC_NEED_MORE);
	/* the string does not fit the frame: malformed even with bytes missing */
	kc_rd_init_partial(&r, b, 5, 4);
	kc_rd_string(&r, false, false, NULL);
	cr_assert_eq(r.status, KC_MALFORMED);
	/* varint cut at avail vs at frame end */
	kc_rd_init_partial(&r, (const uint8_t *)"\x80\x80\x01", 3, 1);
	kc_rd_uvarint(&r);
	cr_assert_eq(r.status, KC_NEED_MORE);
	kc_rd_init(&r, (const uint8_t *)"\x80\x80", 2);
	kc_rd_uvarint(&r);
	cr_assert_eq(r.status, KC_MALFORMED);
}

Test(reader, arrays_bytes_tags)
{
	struct kc_reader r;
	const uint8_t *s;

	/* int32 arrays */
	kc_rd_init(&r, (const uint8_t *)"\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x02", 12);
	cr_assert(kc_rd_i32_array(&r, false));
	cr_assert_eq(r.p, r.end);
	kc_rd_init(&r, (const uint8_t *)"\x03\x00\x00\x00\x01\x00\x00\x00\x02", 9);
	cr_assert(kc_rd_i32_array(&r, true));
	kc_rd_init(&r, (const uint8_t *)"\x00\x00\x00\x03\x00\x00\x00\x01", 8);
	cr_assert_not(kc_rd_i32_array(&r, false));
	cr_assert_eq(r.status, KC_MALFORMED);
	/* null arrays */
	kc_rd_init(&r, (const uint8_t *)"\xff\xff\xff\xff", 4);
	cr_assert_eq(kc_rd_array(&r, false, true, 1), -1);
	cr_assert_eq(r.status, KC_OK);
	kc_rd_init(&r, (const uint8_t *)"\xff\xff\xff\xff", 4);
	kc_rd_array(&r, false, false, 1);
	cr_assert_eq(r.status, KC_MALFORMED);
	kc_rd_init(&r, (const uint8_t *)"\x00", 1);
	kc_rd_array(&r, true, false, 1);
	cr_assert_eq(r.status, KC_MALFORMED);
	/* bytes */
	kc_rd_init(&r, (const uint8_t *)"\x00\x00\x00\x02\xaa\xbb\x03\xcc\xdd\x00", 10);
	cr_assert_eq(kc_rd_bytes(&r, false, false, &s), 2);
	cr_assert_eq(s[1], 0xbb);
	cr_assert_eq(kc_rd_bytes(&r, true, false, &s), 2);
	cr_assert_eq(s[0], 0xcc);
	cr_assert_eq(kc_rd_bytes(&r, true, true, &s), -1);
	cr_assert_eq(r.status, KC_OK);
	kc_rd_init(&r, (const uint8_t *)"\x7f\xff\xff\xff", 4);
	kc_rd_bytes(&r, false, false, &s);
	cr_assert_eq(r.status, KC_MALFORMED);
	/* tags: two fields */
	kc_rd_init(&r, (const uint8_t *)"\x02\x00\x01\xaa\x05\x02\xbb\xcc", 8);
	cr_assert(kc_rd_tags(&r));
	cr_assert_eq(r.p, r.end);
	/* tag size past end */
	kc_rd_init(&r, (const uint8_t *)"\x01\x00\x05\xaa", 4);
	cr_assert_not(kc_rd_tags(&r));
	cr_assert_str_eq(r.err, "tagged field past end of frame");
	/* huge count with few bytes fails fast */
	kc_rd_init(&r, (const uint8_t *)"\xff\xff\xff\xff\x0f\x00\x00", 7);
	cr_assert_not(kc_rd_tags(&r));
}

Test(writer, overflow_is_sticky)
{
	uint8_t b[6];
	struct kc_writer w;

	kc_wr_init(&w, b, sizeof(b));
	kc_wr_i16(&w, 0x1234);
	kc_wr_string(&w, true, "ab", 2);
	cr_assert_not(w.overflow);
	cr_assert(memcmp(b, "\x12\x34\x03" "ab", 5) == 0);
	kc_wr_i16(&w, 1);
	cr_assert(w.overflow);
	kc_wr_i8(&w, 1);
	cr_assert(w.overflow);
	cr_assert_eq(w.p, b + 5);
}

/* ---- header versions ---- */

Test(headers, flexible_table)
{
	cr_assert_not(kc_is_flexible(0, 8));
	cr_assert(kc_is_flexible(0, 9));
	cr_assert_not(kc_is_flexible(1, 11));
	cr_assert(kc_is_flexible(1, 12));
	cr_assert_not(kc_is_flexible(3, 8));
	cr_assert(kc_is_flexible(3, 9));
	cr_assert_not(kc_is_flexible(10, 2));
	cr_assert(kc_is_flexible(10, 3));
	cr_assert_not(kc_is_flexible(17, 1));
	cr_assert_not(kc_is_flexible(17, 100));
	cr_assert(kc_is_flexible(18, 3));
	cr_assert_not(kc_is_flexible(18, 2));
	cr_assert(kc_is_flexible(36, 2));
	cr_assert_not(kc_is_flexible(47, 0));
	cr_assert_not(kc_is_flexible(47, 9));
	cr_assert(kc_is_flexible(60, 0));
	cr_assert(kc_is_flexible(68, 0));
	cr_assert_not(kc_is_flexible(53, 0));
	cr_assert(kc_is_flexible(53, 1));
	cr_assert(kc_is_flexible(200, 0));	/* unknown future key */
	cr_assert_not(kc_is_flexible(-1, 0));
	cr_assert_not(kc_is_flexible(3, -1));
}

Test(headers, request_header_versions)
{
	cr_assert_eq(kc_request_header_version(7, 0), 0);
	cr_assert_eq(kc_request_header_version(7, 1), 1);
	cr_assert_eq(kc_request_header_version(0, 8), 1);
	cr_assert_eq(kc_request_header_version(0, 9), 2);
	cr_assert_eq(kc_request_header_version(18, 0), 1);
	cr_assert_eq(kc_request_header_version(18, 3), 2);
	cr_assert_eq(kc_request_header_version(17, 1), 1);
	cr_assert_eq(kc_request_header_version(3, 12), 2);
	cr_assert_eq(kc_request_header_version(999, 0), 2);
}

Test(headers, response_header_versions)
{
	cr_assert_eq(kc_response_header_version(18, 0), 0);
	cr_assert_eq(kc_response_header_version(18, 3), 0);
	cr_assert_eq(kc_response_header_version(18, 4), 0);
	cr_assert_eq(kc_response_header_version(3, 8), 0);
	cr_assert_eq(kc_response_header_version(3, 9), 1);
	cr_assert_eq(kc_response_header_version(10, 3), 1);
	cr_assert_eq(kc_response_header_version(10, 2), 0);
	cr_assert_eq(kc_response_header_version(60, 0), 1);
	cr_assert_eq(kc_response_header_version(17, 1), 0);
}

Test(headers, names)
{
	cr_assert_str_eq(kc_api_name(0), "Produce");
	cr_assert_str_eq(kc_api_name(1), "Fetch");
	cr_assert_str_eq(kc_api_name(3), "Metadata");
	cr_assert_str_eq(kc_api_name(10), "FindCoordinator");
	cr_assert_str_eq(kc_api_name(18), "ApiVersions");
	cr_assert_str_eq(kc_api_name(36), "SaslAuthenticate");
	cr_assert_str_eq(kc_api_name(60), "DescribeCluster");
	cr_assert_str_eq(kc_api_name(78), "ShareFetch");
	cr_assert_str_eq(kc_api_name(92), "DeleteShareGroupOffsets");
	cr_assert_str_eq(kc_api_name(93), "StreamsGroupTopologyDescriptionUpdate");
	cr_assert_str_eq(kc_api_name(94), "UnregisterController");
	cr_assert_str_eq(kc_api_name(95), "Unknown");
	cr_assert_str_eq(kc_api_name(-1), "Unknown");
	cr_assert_str_eq(kc_status_str(KC_OK), "ok");
	cr_assert_str_eq(kc_status_str(KC_NEED_MORE), "need more");
	cr_assert_str_eq(kc_status_str(KC_MALFORMED), "malformed");
}

/* ---- request header parsing ---- */

/* Metadata v1, client "ferry", empty topics: header v1, 19 header bytes. */
static const uint8_t req_v1[] = {
	0x00, 0x00, 0x00, 0x13, 0x00, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00, 0x2a,
	0x00, 0x05, 'f', 'e', 'r', 'r', 'y',
	0x00, 0x00, 0x00, 0x00,
};
/* Metadata v1, null client id */
static const uint8_t req_v1_null[] = {
	0x00, 0x00, 0x00, 0x0e, 0x00, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00, 0x2b,
	0xff, 0xff,
	0x00, 0x00, 0x00, 0x00,
};
/* Metadata v12 with two header tags: header v2, 27 header bytes. */
static const uint8_t req_v2[] = {
	0x00, 0x00, 0x00, 0x1b, 0x00, 0x03, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x2c,
	0x00, 0x05, 'f', 'e', 'r', 'r', 'y',
	0x02, 0x00, 0x01, 0xaa, 0x05, 0x02, 0xbb, 0xcc,
	0x01, 0x00, 0x00, 0x00,
};
/* ApiVersions v3, null client id, empty header tags. */
static const uint8_t req_v2_null[] = {
	0x00, 0x00, 0x00, 0x10, 0x00, 0x12, 0x00, 0x03, 0x00, 0x00, 0x00, 0x2d,
	0xff, 0xff, 0x00,
	0x02, 'k', 0x02, '1', 0x00,
};
/* ControlledShutdown v0: header v0 */
static const uint8_t req_v0[] = {
	0x00, 0x00, 0x00, 0x0c, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2e,
	0x00, 0x00, 0x00, 0x01,
};

static void
check_need_more_below(const uint8_t *b, size_t header_len)
{
	struct kc_req_header h;
	char err[64];
	size_t a;

	for (a = 0; a < header_len; a++)
		cr_assert_eq(kc_parse_request_header(b, a, MAXF, &h, err, sizeof(err)),
		    KC_NEED_MORE, "avail %zu", a);
	cr_assert_eq(kc_parse_request_header(b, header_len, MAXF, &h, err, sizeof(err)), KC_OK);
}

Test(request_header, v1_client_id)
{
	struct kc_req_header h;
	char err[64] = "";

	cr_assert_eq(kc_parse_request_header(req_v1, sizeof(req_v1), MAXF, &h, err, sizeof(err)),
	    KC_OK, "%s", err);
	cr_assert_eq(h.size, 19);
	cr_assert_eq(h.api_key, 3);
	cr_assert_eq(h.api_version, 1);
	cr_assert_eq(h.correlation_id, 42);
	cr_assert_eq(h.client_id_len, 5);
	cr_assert(memcmp(h.client_id, "ferry", 5) == 0);
	cr_assert_eq(h.client_id, req_v1 + 14);
	cr_assert_eq(h.header_len, 19);
	cr_assert_eq(h.header_version, 1);
	check_need_more_below(req_v1, 19);
}

Test(request_header, v1_null_client_id)
{
	struct kc_req_header h;
	char err[64] = "";

	cr_assert_eq(kc_parse_request_header(req_v1_null, sizeof(req_v1_null), MAXF, &h, err,
	    sizeof(err)), KC_OK, "%s", err);
	cr_assert_eq(h.client_id_len, -1);
	cr_assert_null(h.client_id);
	cr_assert_eq(h.correlation_id, 43);
	cr_assert_eq(h.header_len, 14);
	check_need_more_below(req_v1_null, 14);
}

Test(request_header, v2_with_tags)
{
	struct kc_req_header h;
	char err[64] = "";

	cr_assert_eq(kc_parse_request_header(req_v2, sizeof(req_v2), MAXF, &h, err, sizeof(err)),
	    KC_OK, "%s", err);
	cr_assert_eq(h.api_version, 12);
	cr_assert_eq(h.header_version, 2);
	cr_assert_eq(h.client_id_len, 5);
	cr_assert_eq(h.header_len, 27);
	cr_assert_eq(req_v2[h.header_len], 0x01);	/* body starts with topics */
	check_need_more_below(req_v2, 27);
}

Test(request_header, v2_null_client_id)
{
	struct kc_req_header h;
	char err[64] = "";

	cr_assert_eq(kc_parse_request_header(req_v2_null, sizeof(req_v2_null), MAXF, &h, err,
	    sizeof(err)), KC_OK, "%s", err);
	cr_assert_eq(h.api_key, 18);
	cr_assert_eq(h.header_version, 2);
	cr_assert_eq(h.client_id_len, -1);
	cr_assert_eq(h.header_len, 15);
	check_need_more_below(req_v2_null, 15);
}

Test(request_header, v0_controlled_shutdown)
{
	struct kc_req_header h;
	char err[64] = "";

	cr_assert_eq(kc_parse_request_header(req_v0, sizeof(req_v0), MAXF, &h, err, sizeof(err)),
	    KC_OK, "%s", err);
	cr_assert_eq(h.header_version, 0);
	cr_assert_eq(h.header_len, 12);
	cr_assert_eq(h.client_id_len, -1);
	check_need_more_below(req_v0, 12);
}

static int
parse(const uint8_t *b, size_t n, uint64_t max, char *err)
{
	struct kc_req_header h;

	return kc_parse_request_header(b, n, max, &h, err, 64);
}

Test(request_header, malformed)
{
	uint8_t b[64];
	char err[64];

	/* size < 8, negative, above max */
	memcpy(b, req_v1, sizeof(req_v1));
	kc_put_i32(b, 7);
	cr_assert_eq(parse(b, 4, MAXF, err), KC_MALFORMED);
	kc_put_i32(b, 0);
	cr_assert_eq(parse(b, 4, MAXF, err), KC_MALFORMED);
	kc_put_i32(b, -1);
	cr_assert_eq(parse(b, 4, MAXF, err), KC_MALFORMED);
	kc_put_i32(b, INT32_MIN);
	cr_assert_eq(parse(b, 23, MAXF, err), KC_MALFORMED);
	kc_put_i32(b, 19);
	cr_assert_eq(parse(b, 23, 18, err), KC_MALFORMED);
	cr_assert_eq(parse(b, 23, 19, err), KC_OK);
	/* TLS ClientHello on a plaintext port: huge size */
	cr_assert_eq(parse((const uint8_t *)"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\x00", 12, MAXF, err),
	    KC_MALFORMED);

	/* client_id length below -1 */
	memcpy(b, req_v1, sizeof(req_v1));
	b[12] = 0xff;
	b[13] = 0xfe;
	cr_assert_eq(parse(b, sizeof(req_v1), MAXF, err), KC_MALFORMED);
	/* client_id past the frame end: malformed even when not all bytes are here */
	memcpy(b, req_v1, sizeof(req_v1));
	b[13] = 0x40;
	cr_assert_eq(parse(b, sizeof(req_v1), MAXF, err), KC_MALFORMED);
	cr_assert_eq(parse(b, 14, MAXF, err), KC_MALFORMED);
	/* ... but inside the frame and not all here: need more */
	b[13] = 0x08;
	cr_assert_eq(parse(b, 16, MAXF, err), KC_NEED_MORE);

	/* negative api key / version */
	memcpy(b, req_v1, sizeof(req_v1));
	b[4] = 0xff;
	cr_assert_eq(parse(b, sizeof(req_v1), MAXF, err), KC_MALFORMED);
	memcpy(b, req_v1, sizeof(req_v1));
	b[6] = 0x80;
	cr_assert_eq(parse(b, sizeof(req_v1), MAXF, err), KC_MALFORMED);

	/* header tag size past the frame end */
	memcpy(b, req_v2, sizeof(req_v2));
	b[21] = 0x30;
	cr_assert_eq(parse(b, sizeof(req_v2), MAXF, err), KC_MALFORMED);
	cr_assert_str_eq(err, "tagged field past end of frame");
	/* tag count varint longer than 5 bytes */
	memcpy(b, req_v2, sizeof(req_v2));
	memcpy(b + 19, "\x80\x80\x80\x80\x80\x01", 6);
	cr_assert_eq(parse(b, sizeof(req_v2), MAXF, err), KC_MALFORMED);
	cr_assert_str_eq(err, "varint longer than 5 bytes");
	/* tag section runs past the frame (size says the frame ends inside it) */
	memcpy(b, req_v2, sizeof(req_v2));
	kc_put_i32(b, 18);
	cr_assert_eq(parse(b, 22, MAXF, err), KC_MALFORMED);
}

/* ---- response prefix ---- */

Test(response_prefix, parse)
{
	int32_t size = 0, corr = 0;
	char err[64];

	cr_assert_eq(kc_parse_response_prefix((const uint8_t *)"\x00\x00\x00\x04\x00\x00\x00\x09", 8,
	    MAXF, &size, &corr, err, sizeof(err)), KC_OK);
	cr_assert_eq(size, 4);
	cr_assert_eq(corr, 9);
	cr_assert_eq(kc_parse_response_prefix((const uint8_t *)"\x00\x00\x00\x04\x00\x00\x00\x09", 7,
	    MAXF, &size, &corr, err, sizeof(err)), KC_NEED_MORE);
	cr_assert_eq(kc_parse_response_prefix((const uint8_t *)"\x00\x00\x00", 3,
	    MAXF, &size, &corr, err, sizeof(err)), KC_NEED_MORE);
	cr_assert_eq(kc_parse_response_prefix((const uint8_t *)"\x00\x00\x00\x03\x00\x00\x00\x09", 8,
	    MAXF, &size, &corr, err, sizeof(err)), KC_MALFORMED);
	cr_assert_eq(kc_parse_response_prefix((const uint8_t *)"\x00\x00\x00\x03", 4,
	    MAXF, &size, &corr, err, sizeof(err)), KC_MALFORMED);
	cr_assert_eq(kc_parse_response_prefix((const uint8_t *)"\xff\xff\xff\xff", 4,
	    MAXF, &size, &corr, err, sizeof(err)), KC_MALFORMED);
	cr_assert_eq(kc_parse_response_prefix((const uint8_t *)"\x00\x00\x10\x00", 4,
	    4095, &size, &corr, err, sizeof(err)), KC_MALFORMED);
	cr_assert_eq(kc_parse_response_prefix((const uint8_t *)"\x00\x00\x10\x00\x00\x00\x00\x01", 8,
	    4096, &size, &corr, err, sizeof(err)), KC_OK);
}

/* ---- Produce acks ---- */

struct acks_case {
	const uint8_t *b;
	size_t n;
	size_t acks_end;	/* offset just past acks */
	int16_t acks;
};

static void
check_acks(const struct acks_case *c)
{
	struct kc_req_header h;
	char err[64] = "";
	int16_t acks = 99;
	size_t a;

	cr_assert_eq(kc_parse_request_header(c->b, c->n, MAXF, &h, err, sizeof(err)), KC_OK, "%s", err);
	cr_assert_eq(kc_produce_acks(c->b, c->n, &h, &acks), KC_OK);
	cr_assert_eq(acks, c->acks);
	for (a = h.header_len; a < c->acks_end; a++)
		cr_assert_eq(kc_produce_acks(c->b, a, &h, &acks), KC_NEED_MORE, "avail %zu", a);
	for (a = 0; a < h.header_len; a++)
		cr_assert_eq(kc_produce_acks(c->b, a, &h, &acks), KC_NEED_MORE, "avail %zu", a);
	acks = 99;
	cr_assert_eq(kc_produce_acks(c->b, c->acks_end, &h, &acks), KC_OK);
	cr_assert_eq(acks, c->acks);
}

/* v0: header v1 then acks */
static const uint8_t prod_v0[] = {
	0x00, 0x00, 0x00, 0x15, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
	0x00, 0x05, 'f', 'e', 'r', 'r', 'y',
	0x00, 0x01, 0x00, 0x00, 0x03, 0xe8,
};
/* v3: null transactional id, acks -1 */
static const uint8_t prod_v3_null[] = {
	0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x02,
	0x00, 0x05, 'f', 'e', 'r', 'r', 'y',
	0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x03, 0xe8,
};
/* v3: transactional id "txn-1", acks 0 */
static const uint8_t prod_v3_txn[] = {
	0x00, 0x00, 0x00, 0x1c, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x03,
	0x00, 0x05, 'f', 'e', 'r', 'r', 'y',
	0x00, 0x05, 't', 'x', 'n', '-', '1', 0x00, 0x00, 0x00, 0x00, 0x03, 0xe8,
};
/* v9: header v2 (empty tags), compact null transactional id, acks 0 */
static const uint8_t prod_v9_null[] = {
	0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x04,
	0x00, 0x05, 'f', 'e', 'r', 'r', 'y', 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xe8,
};
/* v9: header tags present, compact "txn-1", acks 1 */
static const uint8_t prod_v9_txn[] = {
	0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x05,
	0xff, 0xff, 0x01, 0x00, 0x03, 0xaa, 0xbb, 0xcc,
	0x06, 't', 'x', 'n', '-', '1', 0x00, 0x01, 0x00, 0x00, 0x03, 0xe8,
	0x00, 0x00, 0x00, 0x00,
};

/* v13 (topic ids, KIP-516) as a whole request: the fields before acks are
 * those of v9-12; acks 0 (ferry must not wait for a response) */
static const uint8_t prod_v13[] = {
	0x00, 0x00, 0x00, 0x31, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x00, 0x00, 0x06,
	0x00, 0x05, 'f', 'e', 'r', 'r', 'y', 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xe8,
	0x02,						/* TopicData: one */
	0x5a, 0x11, 0x9c, 0x02, 0x44, 0x17, 0x4b, 0x0e,	/* TopicId */
	0x90, 0x3d, 0x21, 0x6f, 0x7a, 0x55, 0x01, 0xc4,
	0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* partition 0, null records */
	0x00, 0x00,					/* topic and request tags */
};

Test(produce_acks, v13_topic_ids)
{
	struct acks_case c = { prod_v13, sizeof(prod_v13), 23, 0 };

	cr_assert_eq(sizeof(prod_v13), 0x31 + 4);
	check_acks(&c);
}

Test(produce_acks, v0)
{
	struct acks_case c = { prod_v0, sizeof(prod_v0), 21, 1 };

	check_acks(&c);
}

Test(produce_acks, v3_null_txn)
{
	struct acks_case c = { prod_v3_null, sizeof(prod_v3_null), 23, -1 };

	check_acks(&c);
}

Test(produce_acks, v3_txn)
{
	struct acks_case c = { prod_v3_txn, sizeof(prod_v3_txn), 28, 0 };

	check_acks(&c);
}

Test(produce_acks, v9_null_txn)
{
	struct acks_case c = { prod_v9_null, sizeof(prod_v9_null), 23, 0 };

	check_acks(&c);
}

Test(produce_acks, v9_txn_with_header_tags)
{
	struct acks_case c = { prod_v9_txn, sizeof(prod_v9_txn), 28, 1 };

	check_acks(&c);
}

Test(produce_acks, versions_with_same_bytes_differ)
{
	/* v3 bytes read as v2 (no transactional id): acks = the id's length */
	uint8_t b[sizeof(prod_v3_txn)];
	struct kc_req_header h;
	char err[64];
	int16_t acks;

	memcpy(b, prod_v3_txn, sizeof(b));
	b[7] = 2;
	cr_assert_eq(kc_parse_request_header(b, sizeof(b), MAXF, &h, err, sizeof(err)), KC_OK);
	cr_assert_eq(kc_produce_acks(b, sizeof(b), &h, &acks), KC_OK);
	cr_assert_eq(acks, 5);
}

Test(produce_acks, malformed)
{
	uint8_t b[64];
	struct kc_req_header h;
	char err[64];
	int16_t acks;

	/* transactional id longer than the frame */
	memcpy(b, prod_v3_txn, sizeof(prod_v3_txn));
	cr_assert_eq(kc_parse_request_header(b, sizeof(prod_v3_txn), MAXF, &h, err, sizeof(err)), KC_OK);
	b[20] = 0x40;
	cr_assert_eq(kc_produce_acks(b, sizeof(prod_v3_txn), &h, &acks), KC_MALFORMED);
	cr_assert_eq(kc_produce_acks(b, 21, &h, &acks), KC_MALFORMED);
	/* length below -1 */
	b[19] = 0xff;
	b[20] = 0xf0;
	cr_assert_eq(kc_produce_acks(b, sizeof(prod_v3_txn), &h, &acks), KC_MALFORMED);
	/* v9 compact length above 0x7fff */
	memcpy(b, prod_v9_null, sizeof(prod_v9_null));
	cr_assert_eq(kc_parse_request_header(b, sizeof(prod_v9_null), MAXF, &h, err, sizeof(err)), KC_OK);
	memcpy(b + 20, "\x81\x80\x02", 3);
	cr_assert_eq(kc_produce_acks(b, sizeof(prod_v9_null), &h, &acks), KC_MALFORMED);
	/* v9 varint longer than 5 bytes */
	memcpy(b + 20, "\x80\x80\x80\x80\x80\x00", 6);
	cr_assert_eq(kc_produce_acks(b, sizeof(prod_v9_null), &h, &acks), KC_MALFORMED);
	/* frame ends before acks */
	memcpy(b, prod_v0, sizeof(prod_v0));
	kc_put_i32(b, 16);
	cr_assert_eq(kc_parse_request_header(b, 20, MAXF, &h, err, sizeof(err)), KC_OK);
	cr_assert_eq(kc_produce_acks(b, 20, &h, &acks), KC_MALFORMED);
	/* not a Produce request */
	cr_assert_eq(kc_parse_request_header(req_v1, sizeof(req_v1), MAXF, &h, err, sizeof(err)), KC_OK);
	cr_assert_eq(kc_produce_acks(req_v1, sizeof(req_v1), &h, &acks), KC_MALFORMED);
}
