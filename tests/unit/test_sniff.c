/*
 * test_sniff — Criterion tests of worker/kafka/sniff.c: verdicts on the
 * first bytes an upstream sends (TLS records, HTTP, text banners, absurd
 * or negative size prefixes, plausible Kafka responses) and the operator
 * line that describes them.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "worker/kafka/sniff.h"

#define MAXF	(100u * 1024 * 1024)

static enum kc_sniff
sniff(const char *bytes, size_t n)
{
	return kc_sniff_response((const uint8_t *)bytes, n, MAXF);
}

Test(sniff, tls_records)
{
	/* alert (21) TLS 1.2 record: what a TLS server answers to plaintext */
	cr_assert_eq(sniff("\x15\x03\x03\x00\x02\x02\x46", 7), KC_SNIFF_TLS);
	/* handshake (22) TLS 1.0 record version, as in a ServerHello */
	cr_assert_eq(sniff("\x16\x03\x01\x00\x5a", 5), KC_SNIFF_TLS);
	/* change_cipher_spec (20) and application_data (23), SSL 3.0 .. 3.4 */
	cr_assert_eq(sniff("\x14\x03\x00\x00", 4), KC_SNIFF_TLS);
	cr_assert_eq(sniff("\x17\x03\x04\x00", 4), KC_SNIFF_TLS);
	/* not TLS: content type 24, or version 3.5, or major 2 */
	cr_assert_neq(sniff("\x18\x03\x03\x00", 4), KC_SNIFF_TLS);
	cr_assert_neq(sniff("\x16\x03\x05\x00", 4), KC_SNIFF_TLS);
	cr_assert_neq(sniff("\x16\x02\x03\x00", 4), KC_SNIFF_TLS);
	/* even with a max_frame that would allow such a size */
	cr_assert_eq(kc_sniff_response((const uint8_t *)"\x15\x03\x03\x00", 4, UINT64_MAX),
	    KC_SNIFF_TLS);
}

Test(sniff, http_and_text)
{
	const char *h = "HTTP/1.0 400 Bad request\r\n";
	cr_assert_eq(sniff(h, strlen(h)), KC_SNIFF_HTTP);
	cr_assert_eq(sniff("HTTP", 4), KC_SNIFF_HTTP);
	cr_assert_eq(sniff("SSH-2.0-OpenSSH_9.2\r\n", 21), KC_SNIFF_TEXT);
	cr_assert_eq(sniff("-ERR unknown command\r\n", 22), KC_SNIFF_TEXT);
	cr_assert_eq(sniff("220 ", 4), KC_SNIFF_TEXT);
	cr_assert_eq(kc_sniff_response((const uint8_t *)"HTTP", 4, UINT64_MAX), KC_SNIFF_HTTP);
}

Test(sniff, sizes)
{
	/* a real ApiVersions v0 answer: size 6 + ... */
	cr_assert_eq(sniff("\x00\x00\x00\x06\x00\x00\x00\x01\x00\x23", 10), KC_SNIFF_KAFKA);
	cr_assert_eq(sniff("\x00\x00\x00\x04", 4), KC_SNIFF_KAFKA);          /* smallest */
	cr_assert_eq(sniff("\x06\x40\x00\x00", 4), KC_SNIFF_KAFKA);          /* = max */
	cr_assert_eq(sniff("\x06\x40\x00\x01", 4), KC_SNIFF_BAD_SIZE);       /* max + 1 */
	cr_assert_eq(sniff("\x00\x00\x00\x03", 4), KC_SNIFF_BAD_SIZE);       /* < 4 */
	cr_assert_eq(sniff("\x00\x00\x00\x00", 4), KC_SNIFF_BAD_SIZE);
	cr_assert_eq(sniff("\xff\xe0\x17\x5f", 4), KC_SNIFF_BAD_SIZE);       /* negative */
	cr_assert_eq(sniff("\x80\x00\x00\x00", 4), KC_SNIFF_BAD_SIZE);       /* INT32_MIN */
	cr_assert_eq(kc_sniff_response((const uint8_t *)"\x01\x02\x03\x04", 4, 10u << 20),
	    KC_SNIFF_BAD_SIZE);
	cr_assert_eq(kc_sniff_response((const uint8_t *)"\x01\x02\x03\x04", 4, 32u << 20),
	    KC_SNIFF_KAFKA);
}

Test(sniff, need_more)
{
	cr_assert_eq(sniff("", 0), KC_SNIFF_NEED_MORE);
	cr_assert_eq(sniff("\x15\x03\x03", 3), KC_SNIFF_NEED_MORE);
	cr_assert_eq(sniff("HTT", 3), KC_SNIFF_NEED_MORE);
}

Test(sniff, names)
{
	cr_assert_str_eq(kc_sniff_str(KC_SNIFF_TLS), "TLS");
	cr_assert_str_eq(kc_sniff_str(KC_SNIFF_HTTP), "HTTP");
	cr_assert_str_eq(kc_sniff_str(KC_SNIFF_TEXT), "text");
	cr_assert_str_eq(kc_sniff_str(KC_SNIFF_KAFKA), "kafka");
	cr_assert_str_eq(kc_sniff_str(KC_SNIFF_BAD_SIZE), "bad-size");
	cr_assert_str_eq(kc_sniff_str(KC_SNIFF_NEED_MORE), "need-more");
	cr_assert_str_eq(kc_sniff_str((enum kc_sniff)99), "unknown");
}

static const char *
describe(const char *bytes, size_t n, char *buf, size_t len)
{
	const uint8_t *p = (const uint8_t *)bytes;
	return kc_sniff_describe(kc_sniff_response(p, n, MAXF), p, n, MAXF, buf, len);
}

Test(sniff, describe)
{
	char b[200];
	cr_assert_str_eq(describe("\x15\x03\x03\x00\x02\x02\x46", 7, b, sizeof b),
	    "first response bytes look like TLS (15 03 03 00 02 02 46)");
	cr_assert_str_eq(describe("\x16\x03\x01\x00\x5a\x02\x00\x00\x56\x03", 10, b, sizeof b),
	    "first response bytes look like TLS (16 03 01 00 5a 02 00 00 ...)");
	const char *h = "HTTP/1.0 400 Bad \"request\"\r\nServer: x\r\n";
	cr_assert_str_eq(describe(h, strlen(h), b, sizeof b),
	    "first response bytes look like HTTP (\"HTTP/1.0 400 Bad ?request?\")");
	cr_assert_str_eq(describe("SSH-2.0-X\r\n", 11, b, sizeof b),
	    "first response bytes look like text (\"SSH-2.0-X\")");
	cr_assert_str_eq(describe("\xff\xff\xff\xfe\x01", 5, b, sizeof b),
	    "malformed response: size prefix -2 (not 4..104857600) (ff ff ff fe 01)");
	cr_assert_str_eq(describe("\x15\x03", 2, b, sizeof b),
	    "response cut short after 2 byte(s) (15 03)");
	/* long text is cut at 40 characters */
	const char *l = "HTTP/1.1 200 OK, and a status line that goes on and on and on";
	cr_assert_str_eq(describe(l, strlen(l), b, sizeof b),
	    "first response bytes look like HTTP (\"HTTP/1.1 200 OK, and a status line that \")");
}

Test(sniff, describe_small_buffers)
{
	char b[64];
	/* every length from 0 up: NUL-terminated, never past the end */
	const char *h = "HTTP/1.0 400 Bad request\r\n";
	for (size_t len = 1; len <= sizeof b; len++) {
		memset(b, 'Z', sizeof b);
		describe(h, strlen(h), b, len);
		cr_assert(memchr(b, 0, len) != NULL, "len %zu", len);
		for (size_t i = len; i < sizeof b; i++)
			cr_assert_eq(b[i], 'Z', "len %zu: byte %zu written", len, i);
		memset(b, 'Z', sizeof b);
		describe("\x15\x03\x03\x00\x02\x02\x46\x00\x01", 9, b, len);
		cr_assert(memchr(b, 0, len) != NULL, "len %zu", len);
		for (size_t i = len; i < sizeof b; i++)
			cr_assert_eq(b[i], 'Z', "len %zu: byte %zu written", len, i);
	}
	cr_assert_eq(kc_sniff_describe(KC_SNIFF_TLS, (const uint8_t *)"x", 1, MAXF, b, 0), b);
}
