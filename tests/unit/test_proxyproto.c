/*
 * test_proxyproto — unit tests for worker/proxyproto.c, the PROXY protocol
 * v1/v2 header parser: valid headers of every family (TCP4, TCP6 with
 * IPv4-mapped and upper-case forms, UNIX stream and abstract names,
 * UNKNOWN, LOCAL, AF_UNSPEC, datagram fallback), TLVs walked and found, the
 * CRC32C TLV checked against an independent table-driven CRC; every strict
 * prefix of every valid header answers need-more and the header plus
 * trailing client bytes answers the same length; hostile input (64 KiB
 * headers refused after 16 bytes, v1 without CRLF refused at 107 bytes,
 * lone CR/LF, bad ports and addresses judged before the line ends, wrong
 * signatures, versions, commands, families, lengths, TLVs); first-byte
 * detection of Kafka frames and TLS ClientHellos for optional mode; and
 * headers captured from haproxy 2.6 (send-proxy, send-proxy-v2 with
 * crc32c, unique-id and authority TLVs) as fixtures.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "worker/proxyproto.h"

static const uint8_t SIG[12] = { 0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49,
				 0x54, 0x0A };

/* Parses n bytes from an exact-size heap copy (ASan sees any overread). */
static int
parse_n(const void *buf, size_t n, struct pp_header *h)
{
	uint8_t *copy = malloc(n ? n : 1);
	int rc;

	cr_assert_not_null(copy);
	if (n > 0)
		memcpy(copy, buf, n);
	rc = pp_parse(copy, n, h);
	free(copy);
	return rc;
}

/* A valid header: every strict prefix needs more; the whole parses OK with
 * len == n; with client bytes after it, the same header and len. */
static void
check_valid(const uint8_t *buf, size_t n, struct pp_header *out)
{
	struct pp_header h;
	uint8_t *more = malloc(n + 5);

	for (size_t k = 0; k < n; k++) {
		int rc = parse_n(buf, k, &h);
		cr_assert_eq(rc, PP_NEED_MORE, "prefix %zu of %zu: %s (%s)", k, n, pp_status_str(rc),
		    pp_reason_str(h.reason));
		cr_assert_eq(h.reason, PP_R_NONE);
	}
	int rc = parse_n(buf, n, out);
	cr_assert_eq(rc, PP_OK, "whole header: %s (%s)", pp_status_str(rc), pp_reason_str(out->reason));
	cr_assert_eq(out->len, n, "len %zu, expected %zu", out->len, n);
	cr_assert_eq(out->reason, PP_R_NONE);

	cr_assert_not_null(more);
	memcpy(more, buf, n);
	memcpy(more + n, "\x00\x00\x00\x2a\x16", 5);	/* a Kafka size prefix, a TLS byte */
	cr_assert_eq(parse_n(more, n + 5, &h), PP_OK);
	cr_assert_eq(h.len, n);
	cr_assert_eq(memcmp(&h, out, sizeof h), 0, "trailing bytes changed the result");
	free(more);
}

static void
check_valid_str(const char *s, struct pp_header *out)
{
	check_valid((const uint8_t *)s, strlen(s), out);
}

/* Malformed with reason r; every prefix is need-more or the same verdict;
 * returns the length of the shortest prefix already malformed. */
static size_t
check_bad(const uint8_t *buf, size_t n, enum pp_reason r)
{
	struct pp_header h;
	size_t first = n + 1;

	int rc = parse_n(buf, n, &h);
	cr_assert_eq(rc, PP_MALFORMED, "'%.*s': accepted (%s), expected %s", (int)(n < 60 ? n : 60),
	    buf, pp_status_str(rc), pp_reason_str(r));
	cr_assert_eq(h.reason, r, "'%.*s': reason %s, expected %s", (int)(n < 60 ? n : 60), buf,
	    pp_reason_str(h.reason), pp_reason_str(r));
	cr_assert_eq(h.len, 0);
	/* past PP_MAX_HEADER a prefix answers as the whole does */
	for (size_t k = 0; k < n && k <= PP_MAX_HEADER + 1; k++) {
		rc = parse_n(buf, k, &h);
		if (rc == PP_MALFORMED) {
			cr_assert_eq(h.reason, r, "prefix %zu: reason %s, expected %s", k,
			    pp_reason_str(h.reason), pp_reason_str(r));
			if (first > n)
				first = k;
		} else {
			cr_assert_eq(rc, PP_NEED_MORE, "prefix %zu of a bad header accepted", k);
			cr_assert(first > n, "prefix %zu needs more after prefix %zu was malformed", k,
			    first);
		}
	}
	return first > n ? n : first;
}

static size_t
check_bad_str(const char *s, enum pp_reason r)
{
	return check_bad((const uint8_t *)s, strlen(s), r);
}

/* ss is AF_INET (ip without ':') or AF_INET6, with that address and port. */
static void
expect_addr(const struct sockaddr_storage *ss, const char *ip, unsigned port)
{
	bool six = strchr(ip, ':') != NULL;
	const void *a = six ? (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr
	    : (const void *)&((const struct sockaddr_in *)ss)->sin_addr;
	in_port_t p = six ? ((const struct sockaddr_in6 *)ss)->sin6_port
	    : ((const struct sockaddr_in *)ss)->sin_port;
	char got[INET6_ADDRSTRLEN];

	cr_assert_eq(ss->ss_family, six ? AF_INET6 : AF_INET, "family %d for %s", ss->ss_family, ip);
	cr_assert_not_null(inet_ntop(ss->ss_family, a, got, sizeof got));
	cr_assert_str_eq(got, ip);
	cr_assert_eq(ntohs(p), port, "port %u, expected %u", ntohs(p), port);
}

/* ---- builders for v2 ---- */

struct v2 {
	uint8_t b[PP_MAX_HEADER + 64];
	size_t n;
};

static void
v2_start(struct v2 *v, uint8_t ver_cmd, uint8_t fam)
{
	memcpy(v->b, SIG, 12);
	v->b[12] = ver_cmd;
	v->b[13] = fam;
	v->b[14] = v->b[15] = 0;
	v->n = 16;
}

static void
v2_raw(struct v2 *v, const void *p, size_t n)
{
	cr_assert_leq(v->n + n, sizeof v->b);
	memcpy(v->b + v->n, p, n);
	v->n += n;
}

static void
v2_tlv(struct v2 *v, uint8_t type, const void *val, size_t len)
{
	uint8_t t[3] = { type, (uint8_t)(len >> 8), (uint8_t)len };
	v2_raw(v, t, 3);
	v2_raw(v, val, len);
}

/* Sets the length field from the bytes written. */
static void
v2_fix(struct v2 *v)
{
	size_t len = v->n - 16;
	v->b[14] = (uint8_t)(len >> 8);
	v->b[15] = (uint8_t)len;
}

static void
v2_ip4(struct v2 *v, const char *src, const char *dst, uint16_t sport, uint16_t dport)
{
	uint8_t a[12];
	cr_assert_eq(inet_pton(AF_INET, src, a), 1);
	cr_assert_eq(inet_pton(AF_INET, dst, a + 4), 1);
	a[8] = (uint8_t)(sport >> 8); a[9] = (uint8_t)sport;
	a[10] = (uint8_t)(dport >> 8); a[11] = (uint8_t)dport;
	v2_raw(v, a, 12);
}

/* CRC32C, table-driven: independent of the bitwise one under test. */
static uint32_t
crc32c_table(const uint8_t *p, size_t n)
{
	static uint32_t t[256];
	static int init;
	uint32_t c = 0xFFFFFFFFu;

	if (!init) {
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t x = i;
			for (int k = 0; k < 8; k++)
				x = (x & 1) ? (x >> 1) ^ 0x82F63B78u : x >> 1;
			t[i] = x;
		}
		init = 1;
	}
	while (n--)
		c = t[(c ^ *p++) & 0xFF] ^ (c >> 8);
	return c ^ 0xFFFFFFFFu;
}

/* Appends a CRC32C TLV and fills it in (the header length must include
 * everything, so call last and v2_fix first). */
static void
v2_crc(struct v2 *v, int corrupt)
{
	size_t at;
	uint32_t c;

	v2_tlv(v, PP2_TYPE_CRC32C, "\0\0\0\0", 4);
	v2_fix(v);
	at = v->n - 4;
	c = crc32c_table(v->b, v->n) ^ (uint32_t)corrupt;
	v->b[at] = (uint8_t)(c >> 24); v->b[at + 1] = (uint8_t)(c >> 16);
	v->b[at + 2] = (uint8_t)(c >> 8); v->b[at + 3] = (uint8_t)c;
}

/* ---- names ---- */

Test(proxyproto, names)
{
	for (int r = 0; r < PP_R_COUNT; r++)
		cr_assert_str_neq(pp_reason_str((enum pp_reason)r), "unknown", "reason %d", r);
	cr_assert_str_eq(pp_reason_str(PP_R_V2_TOO_LARGE), "v2_too_large");
	cr_assert_str_eq(pp_reason_str(PP_R_COUNT), "unknown");
	cr_assert_str_eq(pp_status_str(PP_NEED_MORE), "need-more");
	cr_assert_str_eq(pp_status_str(PP_MALFORMED), "malformed");
	cr_assert_str_eq(pp_command_str(PP_CMD_LOCAL), "LOCAL");
	cr_assert_str_eq(pp_command_str(PP_CMD_UNKNOWN), "UNKNOWN");
	cr_assert_str_eq(pp_family_str(PP_FAM_TCP6), "TCP6");
	cr_assert_str_eq(pp_family_str(PP_FAM_UNIX), "UNIX");
	cr_assert_str_eq(pp_detect_str(PP_DETECT_V2), "v2");
	cr_assert_eq(PP_OK, 0);
	cr_assert_eq(PP_NEED_MORE, 1);
	cr_assert_eq(PP_MALFORMED, -1);
}

/* ---- detection ---- */

Test(proxyproto, detect_kafka_and_tls_on_first_byte)
{
	static const uint8_t kafka[] = { 0x00, 0x00, 0x00, 0x2a, 0x00, 0x12, 0x00, 0x03 };
	static const uint8_t tls[] = { 0x16, 0x03, 0x01, 0x02, 0x00, 0x01 };
	static const uint8_t big[] = { 0x05, 0xff, 0xff, 0xff };

	cr_assert_eq(pp_detect(kafka, 1), PP_DETECT_NONE);
	cr_assert_eq(pp_detect(kafka, sizeof kafka), PP_DETECT_NONE);
	cr_assert_eq(pp_detect(tls, 1), PP_DETECT_NONE);
	cr_assert_eq(pp_detect(big, 1), PP_DETECT_NONE);
	cr_assert_eq(pp_detect((const uint8_t *)"GET / HTTP/1.1\r\n", 1), PP_DETECT_NONE);
	cr_assert_eq(pp_detect(NULL, 0), PP_DETECT_NEED_MORE);

	struct pp_header h;
	cr_assert_eq(parse_n(kafka, 1, &h), PP_MALFORMED);
	cr_assert_eq(h.reason, PP_R_NOT_PROXY);
	cr_assert_eq(parse_n(tls, 1, &h), PP_MALFORMED);
	cr_assert_eq(h.reason, PP_R_NOT_PROXY);
}

Test(proxyproto, detect_signatures)
{
	const char *v1 = "PROXY ";

	for (size_t k = 1; k < 6; k++)
		cr_assert_eq(pp_detect((const uint8_t *)v1, k), PP_DETECT_NEED_MORE, "v1 prefix %zu", k);
	cr_assert_eq(pp_detect((const uint8_t *)v1, 6), PP_DETECT_V1);
	cr_assert_eq(pp_detect((const uint8_t *)"PROXYX", 6), PP_DETECT_NONE);
	cr_assert_eq(pp_detect((const uint8_t *)"PROX\n", 5), PP_DETECT_NONE);
	cr_assert_eq(pp_detect((const uint8_t *)"proxy ", 6), PP_DETECT_NONE);
	for (size_t k = 1; k < 12; k++)
		cr_assert_eq(pp_detect(SIG, k), PP_DETECT_NEED_MORE, "v2 prefix %zu", k);
	cr_assert_eq(pp_detect(SIG, 12), PP_DETECT_V2);

	/* the signature wrong in its last byte, or in its NUL */
	uint8_t bad[12];
	memcpy(bad, SIG, 12);
	bad[11] = '\r';
	cr_assert_eq(pp_detect(bad, 12), PP_DETECT_NONE);
	memcpy(bad, SIG, 12);
	bad[4] = ' ';
	cr_assert_eq(pp_detect(bad, 5), PP_DETECT_NONE);
	cr_assert_eq(check_bad(bad, 12, PP_R_NOT_PROXY), 5);
}

/* ---- version 1 ---- */

Test(proxyproto, v1_tcp4)
{
	struct pp_header h;

	check_valid_str("PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n", &h);
	cr_assert_eq(h.version, 1);
	cr_assert_eq(h.command, PP_CMD_PROXY);
	cr_assert_eq(h.family, PP_FAM_TCP4);
	cr_assert(pp_has_address(&h));
	expect_addr(&h.src, "192.168.0.1", 56324);
	expect_addr(&h.dst, "192.168.0.11", 443);
	cr_assert_eq(h.tlv_count, 0);

	check_valid_str("PROXY TCP4 0.0.0.0 255.255.255.255 0 65535\r\n", &h);
	expect_addr(&h.src, "0.0.0.0", 0);
	expect_addr(&h.dst, "255.255.255.255", 65535);
	/* the longest TCP4 line of the spec: 56 bytes */
	check_valid_str("PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n", &h);
	cr_assert_eq(h.len, 56);
}

Test(proxyproto, v1_tcp6)
{
	struct pp_header h;

	check_valid_str("PROXY TCP6 2001:db8::1 2001:db8::2 40000 9092\r\n", &h);
	cr_assert_eq(h.family, PP_FAM_TCP6);
	expect_addr(&h.src, "2001:db8::1", 40000);
	expect_addr(&h.dst, "2001:db8::2", 9092);

	/* haproxy prints an IPv4-mapped peer of a dual-stack socket this way */
	check_valid_str("PROXY TCP6 ::ffff:10.1.2.3 ::ffff:10.0.0.1 1234 9092\r\n", &h);
	expect_addr(&h.src, "::ffff:10.1.2.3", 1234);

	check_valid_str("PROXY TCP6 2001:DB8:0:0:0:0:0:ABCD ::1 1 2\r\n", &h);
	expect_addr(&h.src, "2001:db8::abcd", 1);
	expect_addr(&h.dst, "::1", 2);

	/* the longest TCP6 line of the spec: 104 bytes */
	const char *l = "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
	    "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
	cr_assert_eq(strlen(l), 104);
	check_valid_str(l, &h);
}

Test(proxyproto, v1_unknown)
{
	struct pp_header h;

	check_valid_str("PROXY UNKNOWN\r\n", &h);
	cr_assert_eq(h.len, 15);
	cr_assert_eq(h.command, PP_CMD_UNKNOWN);
	cr_assert_eq(h.family, PP_FAM_UNSPEC);
	cr_assert_not(pp_has_address(&h));
	cr_assert_eq(h.src.ss_family, 0);

	/* the spec's worst case, 107 bytes: the rest of the line is ignored */
	const char *w = "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
	    "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
	cr_assert_eq(strlen(w), PP_V1_MAX);
	check_valid_str(w, &h);
	cr_assert_eq(h.command, PP_CMD_UNKNOWN);
	check_valid_str("PROXY UNKNOWN whatever the sender had\r\n", &h);

	check_bad_str("PROXY UNKNOWNX\r\n", PP_R_V1_SYNTAX);
	check_bad_str("PROXY UNKNOWN \x01\r\n", PP_R_V1_SYNTAX);
	check_bad_str("PROXY UNKNOWN\n", PP_R_V1_SYNTAX);
}

Test(proxyproto, v1_line_length)
{
	char line[300];

	/* 108 bytes with its CRLF: one too many */
	snprintf(line, sizeof line, "PROXY UNKNOWN %092d\r\n", 0);
	cr_assert_eq(strlen(line), 108);
	check_bad_str(line, PP_R_V1_TOO_LONG);

	/* no CRLF at all: refused once 107 bytes have come, not before */
	memset(line, 'a', sizeof line);
	memcpy(line, "PROXY UNKNOWN ", 14);
	struct pp_header h;
	cr_assert_eq(parse_n(line, 106, &h), PP_NEED_MORE);
	cr_assert_eq(parse_n(line, 107, &h), PP_MALFORMED);
	cr_assert_eq(h.reason, PP_R_V1_TOO_LONG);
	cr_assert_eq(check_bad((const uint8_t *)line, 300, PP_R_V1_TOO_LONG), 107);

	/* a CR at byte 107: its LF would make 108 */
	memset(line, 'a', sizeof line);
	memcpy(line, "PROXY UNKNOWN ", 14);
	line[106] = '\r';
	cr_assert_eq(parse_n(line, 107, &h), PP_MALFORMED);
	cr_assert_eq(h.reason, PP_R_V1_TOO_LONG);
	line[105] = '\r';
	line[106] = '\n';
	cr_assert_eq(parse_n(line, 107, &h), PP_OK);
	cr_assert_eq(h.len, 107);

	/* 64 KiB of a line that never ends */
	size_t big = 65536;
	char *p = malloc(big);
	memset(p, '1', big);
	memcpy(p, "PROXY TCP4 ", 11);
	cr_assert_lt(check_bad((const uint8_t *)p, big, PP_R_V1_ADDRESS), 20);
	memset(p, ' ', big);
	memcpy(p, "PROXY UNKNOWN", 13);
	cr_assert_eq(check_bad((const uint8_t *)p, 2048, PP_R_V1_TOO_LONG), 107);
	free(p);
}

Test(proxyproto, v1_line_end)
{
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", PP_R_V1_SYNTAX);
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX", PP_R_V1_SYNTAX);
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\r\n", PP_R_V1_SYNTAX);
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n", PP_R_V1_SYNTAX);
	check_bad((const uint8_t *)"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\0\r\n", 33, PP_R_V1_SYNTAX);
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", PP_R_V1_SYNTAX);
	check_bad_str("PROXY TCP4 1.2.3.4\r\n", PP_R_V1_SYNTAX);
	check_bad_str("PROXY TCP4\r\n", PP_R_V1_SYNTAX);
	check_bad_str("PROXY \r\n", PP_R_V1_SYNTAX);
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\xc3\xa9\r\n", PP_R_V1_SYNTAX);

	/* a CR as the last byte so far: its LF may still come */
	struct pp_header h;
	const char *s = "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r";
	cr_assert_eq(parse_n(s, strlen(s), &h), PP_NEED_MORE);
}

Test(proxyproto, v1_syntax)
{
	check_bad_str("PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n", PP_R_V1_SYNTAX);
	check_bad_str("PROXY tcp4 1.2.3.4 5.6.7.8 1 2\r\n", PP_R_V1_SYNTAX);
	check_bad_str("PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n", PP_R_V1_SYNTAX);
	check_bad_str("PROXY  TCP4 1.2.3.4 5.6.7.8 1 2\r\n", PP_R_V1_SYNTAX);
	check_bad_str("PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n", PP_R_V1_ADDRESS);
	check_bad_str("PROXY TCP4\t1.2.3.4 5.6.7.8 1 2\r\n", PP_R_V1_SYNTAX);
	check_bad_str("PROXY TCP41.2.3.4 5.6.7.8 1 2\r\n", PP_R_V1_SYNTAX);
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8  1 2\r\n", PP_R_V1_PORT);
	check_bad_str("PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n", PP_R_V1_ADDRESS);
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n", PP_R_V1_SYNTAX);
	check_bad_str("PROXYTCP4 1.2.3.4 5.6.7.8 1 2\r\n", PP_R_NOT_PROXY);
	/* judged at the first impossible byte, long before any CRLF */
	cr_assert_eq(check_bad_str("PROXY X", PP_R_V1_SYNTAX), 7);
	cr_assert_eq(check_bad_str("PROXY TCP7", PP_R_V1_SYNTAX), 10);
	cr_assert_eq(check_bad_str("PROXY UNKNOWNZ", PP_R_V1_SYNTAX), 14);
}

Test(proxyproto, v1_addresses)
{
	check_bad_str("PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n", PP_R_V1_ADDRESS);
	check_bad_str("PROXY TCP4 1.2.3.00 5.6.7.8 1 2\r\n", PP_R_V1_ADDRESS);
	check_bad_str("PROXY TCP4 256.2.3.4 5.6.7.8 1 2\r\n", PP_R_V1_ADDRESS);
	check_bad_str("PROXY TCP4 1.2.3.1000 5.6.7.8 1 2\r\n", PP_R_V1_ADDRESS);
	check_bad_str("PROXY TCP4 1.2.3 5.6.7.8 1 2\r\n", PP_R_V1_ADDRESS);
	check_bad_str("PROXY TCP4 1.2.3.4.5 5.6.7.8 1 2\r\n", PP_R_V1_ADDRESS);
	check_bad_str("PROXY TCP4 1..3.4 5.6.7.8 1 2\r\n", PP_R_V1_ADDRESS);
	check_bad_str("PROXY TCP4 -1.2.3.4 5.6.7.8 1 2\r\n", PP_R_V1_ADDRESS);
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7 1 2\r\n", PP_R_V1_ADDRESS);
	check_bad_str("PROXY TCP4 ::1 ::1 1 2\r\n", PP_R_V1_ADDRESS);
	check_bad_str("PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n", PP_R_V1_ADDRESS);
	check_bad_str("PROXY TCP6 ::1 5.6.7.8 1 2\r\n", PP_R_V1_ADDRESS);
	check_bad_str("PROXY TCP6 1:::2 ::1 1 2\r\n", PP_R_V1_ADDRESS);
	check_bad_str("PROXY TCP6 12345::1 ::1 1 2\r\n", PP_R_V1_ADDRESS);
	check_bad_str("PROXY TCP6 fe80::1%eth0 ::1 1 2\r\n", PP_R_V1_ADDRESS);
	check_bad_str("PROXY TCP6 [::1] ::1 1 2\r\n", PP_R_V1_ADDRESS);
	check_bad_str("PROXY TCP6 ::g ::1 1 2\r\n", PP_R_V1_ADDRESS);
	/* a bad address before a lone CR: the address is what a prefix sees */
	check_bad_str("PROXY TCP4 1.2.3. 1\r.6.7.8 65536 1\r\n", PP_R_V1_ADDRESS);
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 01\r\n", PP_R_V1_PORT);
	/* the octet is judged as it arrives */
	cr_assert_eq(check_bad_str("PROXY TCP4 300.1.1.1 1.1.1.1 1 2\r\n", PP_R_V1_ADDRESS), 14);
	cr_assert_eq(check_bad_str("PROXY TCP4 00.1.1.1 1.1.1.1 1 2\r\n", PP_R_V1_ADDRESS), 13);
}

Test(proxyproto, v1_ports)
{
	struct pp_header h;

	check_valid_str("PROXY TCP4 1.2.3.4 5.6.7.8 0 0\r\n", &h);
	expect_addr(&h.src, "1.2.3.4", 0);
	check_valid_str("PROXY TCP4 1.2.3.4 5.6.7.8 65535 10\r\n", &h);
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 65536 1\r\n", PP_R_V1_PORT);
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1 65536\r\n", PP_R_V1_PORT);
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 099 1\r\n", PP_R_V1_PORT);
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1 00\r\n", PP_R_V1_PORT);
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1 123456\r\n", PP_R_V1_PORT);
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 99999 1\r\n", PP_R_V1_PORT);
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 -1 1\r\n", PP_R_V1_PORT);
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1 +2\r\n", PP_R_V1_PORT);
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1 2a\r\n", PP_R_V1_SYNTAX);
	check_bad_str("PROXY TCP4 1.2.3.4 5.6.7.8 1 \r\n", PP_R_V1_PORT);
	/* an overflowing port is refused before the line ends */
	const char *s = "PROXY TCP4 1.2.3.4 5.6.7.8 1 65536";
	cr_assert_eq(check_bad_str(s, PP_R_V1_PORT), strlen(s));
	s = "PROXY TCP4 1.2.3.4 5.6.7.8 1 6553";
	cr_assert_eq(parse_n(s, strlen(s), &h), PP_NEED_MORE);
}

/* ---- version 2 ---- */

Test(proxyproto, v2_tcp4)
{
	struct v2 v;
	struct pp_header h;

	v2_start(&v, 0x21, 0x11);
	v2_ip4(&v, "203.0.113.7", "10.0.0.1", 51000, 9092);
	v2_fix(&v);
	check_valid(v.b, v.n, &h);
	cr_assert_eq(h.len, 28);
	cr_assert_eq(h.version, 2);
	cr_assert_eq(h.command, PP_CMD_PROXY);
	cr_assert_eq(h.family, PP_FAM_TCP4);
	cr_assert(pp_has_address(&h));
	expect_addr(&h.src, "203.0.113.7", 51000);
	expect_addr(&h.dst, "10.0.0.1", 9092);
	cr_assert_eq(h.tlv_count, 0);
	const uint8_t *val;
	size_t vlen;
	cr_assert_eq(pp_tlv_find(v.b, &h, PP2_TYPE_AUTHORITY, &val, &vlen), -1);
}

Test(proxyproto, v2_tcp6)
{
	struct v2 v;
	struct pp_header h;
	uint8_t a[36] = { 0 };

	cr_assert_eq(inet_pton(AF_INET6, "2001:db8::7", a), 1);
	cr_assert_eq(inet_pton(AF_INET6, "::ffff:10.0.0.1", a + 16), 1);
	a[32] = 0xC3; a[33] = 0x50;	/* 50000 */
	a[34] = 0x23; a[35] = 0x84;	/* 9092 */
	v2_start(&v, 0x21, 0x21);
	v2_raw(&v, a, 36);
	v2_fix(&v);
	check_valid(v.b, v.n, &h);
	cr_assert_eq(h.family, PP_FAM_TCP6);
	expect_addr(&h.src, "2001:db8::7", 50000);
	expect_addr(&h.dst, "::ffff:10.0.0.1", 9092);
}

Test(proxyproto, v2_unix)
{
	struct v2 v;
	struct pp_header h;
	uint8_t a[216] = { 0 };

	strcpy((char *)a, "/run/client.sock");
	a[108] = '\0';				/* an abstract name */
	memcpy(a + 109, "ferry-abstract", 14);
	v2_start(&v, 0x21, 0x31);
	v2_raw(&v, a, 216);
	v2_fix(&v);
	check_valid(v.b, v.n, &h);
	cr_assert_eq(h.family, PP_FAM_UNIX);
	cr_assert(pp_has_address(&h));
	const struct sockaddr_un *s = (const struct sockaddr_un *)&h.src;
	const struct sockaddr_un *d = (const struct sockaddr_un *)&h.dst;
	cr_assert_eq(s->sun_family, AF_UNIX);
	cr_assert_str_eq(s->sun_path, "/run/client.sock");
	cr_assert_eq(d->sun_path[0], '\0');
	cr_assert_eq(memcmp(d->sun_path + 1, "ferry-abstract", 14), 0);

	/* a full 108-byte path without NUL stays inside sockaddr_storage */
	memset(a, 'x', 108);
	v2_start(&v, 0x21, 0x31);
	v2_raw(&v, a, 216);
	v2_fix(&v);
	check_valid(v.b, v.n, &h);
	cr_assert_eq(memcmp(((const struct sockaddr_un *)&h.src)->sun_path, a, 108), 0);

	/* unix datagram: accepted, no address */
	v2_start(&v, 0x21, 0x32);
	v2_raw(&v, a, 216);
	v2_fix(&v);
	check_valid(v.b, v.n, &h);
	cr_assert_eq(h.family, PP_FAM_UNSPEC);
	cr_assert_not(pp_has_address(&h));
}

Test(proxyproto, v2_local)
{
	struct v2 v;
	struct pp_header h;

	/* haproxy's health check: LOCAL, AF_UNSPEC, no address */
	v2_start(&v, 0x20, 0x00);
	check_valid(v.b, v.n, &h);
	cr_assert_eq(h.len, 16);
	cr_assert_eq(h.command, PP_CMD_LOCAL);
	cr_assert_eq(h.family, PP_FAM_UNSPEC);
	cr_assert_not(pp_has_address(&h));

	/* LOCAL with a block: skipped whole, whatever it holds */
	v2_start(&v, 0x20, 0x11);
	v2_raw(&v, "\x01\x02\x03", 3);
	v2_fix(&v);
	check_valid(v.b, v.n, &h);
	cr_assert_eq(h.command, PP_CMD_LOCAL);
	cr_assert_eq(h.family, PP_FAM_UNSPEC);
	cr_assert_eq(h.src.ss_family, 0);
	cr_assert_eq(h.tlv_count, 0);

	/* ...but its family byte is still checked */
	v2_start(&v, 0x20, 0x41);
	check_bad(v.b, v.n, PP_R_V2_FAMILY);
}

Test(proxyproto, v2_unspec_and_datagrams)
{
	struct v2 v;
	struct pp_header h;

	v2_start(&v, 0x21, 0x00);
	v2_raw(&v, "anything", 8);
	v2_fix(&v);
	check_valid(v.b, v.n, &h);
	cr_assert_eq(h.command, PP_CMD_PROXY);
	cr_assert_eq(h.family, PP_FAM_UNSPEC);
	cr_assert_not(pp_has_address(&h));

	v2_start(&v, 0x21, 0x12);		/* UDP over IPv4 */
	v2_ip4(&v, "1.2.3.4", "5.6.7.8", 1, 2);
	v2_tlv(&v, PP2_TYPE_NOOP, "", 0);
	v2_fix(&v);
	check_valid(v.b, v.n, &h);
	cr_assert_eq(h.family, PP_FAM_UNSPEC);
	cr_assert_eq(h.tlv_count, 1);

	v2_start(&v, 0x21, 0x10);		/* IPv4, transport unspec */
	v2_ip4(&v, "1.2.3.4", "5.6.7.8", 1, 2);
	v2_fix(&v);
	check_valid(v.b, v.n, &h);
	cr_assert_eq(h.family, PP_FAM_UNSPEC);
}

Test(proxyproto, v2_tlvs)
{
	struct v2 v;
	struct pp_header h;
	const uint8_t *val;
	size_t vlen;
	static const uint8_t ssl[] = { 0x01, 0, 0, 0, 0, 0x21, 0x00, 0x07, 'T', 'L', 'S', 'v',
				       '1', '.', '3' };

	v2_start(&v, 0x21, 0x11);
	v2_ip4(&v, "1.2.3.4", "5.6.7.8", 1000, 9092);
	v2_tlv(&v, PP2_TYPE_ALPN, "kafka", 5);
	v2_tlv(&v, PP2_TYPE_AUTHORITY, "bootstrap.kafka.example.com", 27);
	v2_tlv(&v, PP2_TYPE_NOOP, "\0\0\0\0\0", 5);
	v2_tlv(&v, PP2_TYPE_SSL, ssl, sizeof ssl);
	v2_tlv(&v, 0xEA, "vpce-0123", 9);	/* custom range (AWS) */
	v2_tlv(&v, PP2_TYPE_UNIQUE_ID, "", 0);
	v2_fix(&v);
	check_valid(v.b, v.n, &h);
	cr_assert_eq(h.tlv_count, 6);
	cr_assert_eq(h.tlv_off, 28);
	cr_assert_eq(h.tlv_off + h.tlv_len, v.n);
	cr_assert_eq(pp_tlv_find(v.b, &h, PP2_TYPE_AUTHORITY, &val, &vlen), 0);
	cr_assert_eq(vlen, 27);
	cr_assert_eq(memcmp(val, "bootstrap.kafka.example.com", 27), 0);
	cr_assert_eq(pp_tlv_find(v.b, &h, 0xEA, &val, &vlen), 0);
	cr_assert_eq(memcmp(val, "vpce-0123", 9), 0);
	cr_assert_eq(pp_tlv_find(v.b, &h, PP2_TYPE_UNIQUE_ID, &val, &vlen), 0);
	cr_assert_eq(vlen, 0);
	cr_assert_eq(pp_tlv_find(v.b, &h, PP2_TYPE_NETNS, &val, &vlen), -1);
	expect_addr(&h.src, "1.2.3.4", 1000);

	/* the largest header accepted: 4096 bytes in all */
	static uint8_t pad[PP_MAX_HEADER];
	v2_start(&v, 0x21, 0x11);
	v2_ip4(&v, "1.2.3.4", "5.6.7.8", 1, 2);
	v2_tlv(&v, PP2_TYPE_NOOP, pad, PP_MAX_HEADER - 16 - 12 - 3);
	v2_fix(&v);
	cr_assert_eq(v.n, PP_MAX_HEADER);
	check_valid(v.b, v.n, &h);
	cr_assert_eq(h.tlv_count, 1);
}

Test(proxyproto, v2_bad_tlvs)
{
	struct v2 v;

	/* one or two stray bytes after the addresses */
	for (size_t extra = 1; extra <= 2; extra++) {
		v2_start(&v, 0x21, 0x11);
		v2_ip4(&v, "1.2.3.4", "5.6.7.8", 1, 2);
		v2_raw(&v, "\x04\x00", extra);
		v2_fix(&v);
		check_bad(v.b, v.n, PP_R_V2_TLV);
	}
	/* a TLV longer than the header */
	v2_start(&v, 0x21, 0x11);
	v2_ip4(&v, "1.2.3.4", "5.6.7.8", 1, 2);
	v2_tlv(&v, PP2_TYPE_ALPN, "kafka", 5);
	v2_raw(&v, "\x02\x00\x10" "abc", 6);
	v2_fix(&v);
	check_bad(v.b, v.n, PP_R_V2_TLV);
	/* a TLV length of 65535 inside a small header */
	v2_start(&v, 0x21, 0x21);
	static const uint8_t a6[36];
	v2_raw(&v, a6, 36);
	v2_raw(&v, "\x01\xff\xff", 3);
	v2_fix(&v);
	check_bad(v.b, v.n, PP_R_V2_TLV);
}

Test(proxyproto, v2_crc32c)
{
	struct v2 v;
	struct pp_header h;

	/* the table CRC itself: the standard check value */
	cr_assert_eq(crc32c_table((const uint8_t *)"123456789", 9), 0xE3069283u);

	v2_start(&v, 0x21, 0x11);
	v2_ip4(&v, "198.51.100.9", "10.0.0.1", 40001, 9093);
	v2_tlv(&v, PP2_TYPE_UNIQUE_ID, "conn-42", 7);
	v2_crc(&v, 0);
	check_valid(v.b, v.n, &h);
	cr_assert_eq(h.tlv_count, 2);

	/* one bit off */
	v2_start(&v, 0x21, 0x11);
	v2_ip4(&v, "198.51.100.9", "10.0.0.1", 40001, 9093);
	v2_crc(&v, 0x100);
	check_bad(v.b, v.n, PP_R_V2_CRC);

	/* the checksum is right but an address byte changed after */
	v2_start(&v, 0x21, 0x11);
	v2_ip4(&v, "198.51.100.9", "10.0.0.1", 40001, 9093);
	v2_crc(&v, 0);
	v.b[16] ^= 1;
	check_bad(v.b, v.n, PP_R_V2_CRC);

	/* a CRC TLV of 3 bytes */
	v2_start(&v, 0x21, 0x11);
	v2_ip4(&v, "1.2.3.4", "5.6.7.8", 1, 2);
	v2_tlv(&v, PP2_TYPE_CRC32C, "abc", 3);
	v2_fix(&v);
	check_bad(v.b, v.n, PP_R_V2_CRC);
}

Test(proxyproto, v2_header_fields)
{
	struct v2 v;

	v2_start(&v, 0x11, 0x11);		/* version 1 in binary */
	cr_assert_eq(check_bad(v.b, v.n, PP_R_V2_VERSION), 13);
	v2_start(&v, 0x31, 0x11);
	check_bad(v.b, v.n, PP_R_V2_VERSION);
	v2_start(&v, 0x22, 0x11);		/* command 2 */
	cr_assert_eq(check_bad(v.b, v.n, PP_R_V2_COMMAND), 13);
	v2_start(&v, 0x2F, 0x11);
	check_bad(v.b, v.n, PP_R_V2_COMMAND);
	v2_start(&v, 0x21, 0x41);		/* family 4 */
	cr_assert_eq(check_bad(v.b, v.n, PP_R_V2_FAMILY), 14);
	v2_start(&v, 0x21, 0x13);		/* transport 3 */
	check_bad(v.b, v.n, PP_R_V2_FAMILY);
	v2_start(&v, 0x21, 0xF1);
	check_bad(v.b, v.n, PP_R_V2_FAMILY);
}

Test(proxyproto, v2_lengths)
{
	struct v2 v;

	/* addresses longer than the length says */
	v2_start(&v, 0x21, 0x11);
	v2_raw(&v, "\x01\x02\x03\x04\x05\x06\x07\x08\x00\x01\x00", 11);
	v2_fix(&v);
	cr_assert_eq(check_bad(v.b, v.n, PP_R_V2_LENGTH), 16);
	v2_start(&v, 0x21, 0x21);
	v2_fix(&v);
	check_bad(v.b, v.n, PP_R_V2_LENGTH);
	v2_start(&v, 0x21, 0x31);
	static const uint8_t a[215];
	v2_raw(&v, a, 215);
	v2_fix(&v);
	check_bad(v.b, v.n, PP_R_V2_LENGTH);

	/* one byte above the maximum */
	v2_start(&v, 0x21, 0x11);
	v.b[14] = (uint8_t)((PP_MAX_HEADER - 15) >> 8);
	v.b[15] = (uint8_t)(PP_MAX_HEADER - 15);
	cr_assert_eq(check_bad(v.b, v.n, PP_R_V2_TOO_LARGE), 16);
}

Test(proxyproto, v2_64k_refused_after_16_bytes)
{
	size_t n = 16 + 65535;
	uint8_t *b = calloc(1, n);

	cr_assert_not_null(b);
	memcpy(b, SIG, 12);
	b[12] = 0x21;
	b[13] = 0x11;
	b[14] = 0xFF;
	b[15] = 0xFF;
	struct pp_header h;
	cr_assert_eq(parse_n(b, 15, &h), PP_NEED_MORE);
	cr_assert_eq(parse_n(b, 16, &h), PP_MALFORMED);
	cr_assert_eq(h.reason, PP_R_V2_TOO_LARGE);
	cr_assert_eq(parse_n(b, n, &h), PP_MALFORMED);
	cr_assert_eq(h.reason, PP_R_V2_TOO_LARGE);
	/* LOCAL too */
	b[12] = 0x20;
	cr_assert_eq(parse_n(b, 16, &h), PP_MALFORMED);
	cr_assert_eq(h.reason, PP_R_V2_TOO_LARGE);
	free(b);
}

Test(proxyproto, garbage)
{
	uint8_t b[256];
	struct pp_header h;

	for (int c = 0; c < 256; c++) {
		memset(b, c, sizeof b);
		int rc = parse_n(b, sizeof b, &h);
		cr_assert(rc == PP_MALFORMED && h.reason == PP_R_NOT_PROXY, "byte %02x", c);
		cr_assert_eq(parse_n(b, 2, &h), PP_MALFORMED, "byte %02x: 2 bytes", c);
	}
	/* v1 followed by the v2 signature, and the reverse */
	check_bad_str("PROXY \r\n\r\n", PP_R_V1_SYNTAX);
	uint8_t mix[20];
	memcpy(mix, SIG, 12);
	memcpy(mix + 12, "PROXY TC", 8);
	check_bad(mix, sizeof mix, PP_R_V2_VERSION);
}

/* ---- captured from haproxy 2.6 (Debian bookworm) by
 * tests/integration/proxyproto.py: a client on 127.0.0.1 / ::1 connected to
 * a haproxy frontend in TCP mode whose server line sends the header; a
 * listener recorded what it received (the header, then the client's first
 * bytes: a Kafka size prefix, or a TLS ClientHello passed through). ---- */

#include "proxyproto_haproxy.h"

Test(proxyproto, haproxy_captures)
{
	for (size_t i = 0; i < sizeof hap_captures / sizeof hap_captures[0]; i++) {
		const struct hap_capture *c = &hap_captures[i];
		struct pp_header h;

		check_valid(c->bytes, c->hdr_len, &h);
		cr_assert_eq(h.version, c->version, "%s", c->name);
		cr_assert_eq(h.command, c->command, "%s", c->name);
		cr_assert_eq(h.family, c->family, "%s", c->name);
		cr_assert_eq(h.tlv_count, c->tlv_count, "%s", c->name);
		if (c->family == PP_FAM_TCP4 || c->family == PP_FAM_TCP6) {
			expect_addr(&h.src, c->src, c->sport);
			expect_addr(&h.dst, c->dst, c->dport);
		}
		/* with what followed: the same header; a ClientHello starts right
		 * after it and is not a header itself */
		cr_assert_eq(parse_n(c->bytes, c->len, &h), PP_OK, "%s", c->name);
		cr_assert_eq(h.len, c->hdr_len, "%s", c->name);
		if (c->len > c->hdr_len) {
			cr_assert_eq(c->bytes[c->hdr_len], 0x16, "%s", c->name);
			cr_assert_eq(pp_detect(c->bytes + c->hdr_len, 1), PP_DETECT_NONE);
		}
		/* one flipped bit in the addresses of a header with a CRC32C */
		if (c->has_crc) {
			uint8_t *b = malloc(c->hdr_len);
			size_t block = c->family == PP_FAM_TCP6 ? 36 : 12;
			for (size_t k = 16; k < 16 + block; k++) {
				memcpy(b, c->bytes, c->hdr_len);
				b[k] ^= 0x40;
				cr_assert_eq(parse_n(b, c->hdr_len, &h), PP_MALFORMED, "%s: byte %zu",
				    c->name, k);
				cr_assert_eq(h.reason, PP_R_V2_CRC);
			}
			free(b);
		}
	}
}
