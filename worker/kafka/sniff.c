/*
 * sniff — first-bytes verdicts on what an upstream speaks; see sniff.h.
 */
#include "worker/kafka/sniff.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "worker/kafka/codec.h"

#define SNIFF_SHOW_HEX  8      /* bytes shown in hex */
#define SNIFF_SHOW_TEXT 40     /* characters shown of a text line */

static bool
sniff_printable(uint8_t c)
{
	return (c >= 0x20 && c < 0x7f) || c == '\r' || c == '\n' || c == '\t';
}

enum kc_sniff
kc_sniff_response(const uint8_t *p, size_t n, uint64_t max_frame)
{
	if (n < 4)
		return KC_SNIFF_NEED_MORE;
	if (p[0] >= 20 && p[0] <= 23 && p[1] == 3 && p[2] <= 4)
		return KC_SNIFF_TLS;
	if (memcmp(p, "HTTP", 4) == 0)
		return KC_SNIFF_HTTP;
	if (sniff_printable(p[0]) && sniff_printable(p[1]) && sniff_printable(p[2]) &&
	    sniff_printable(p[3]))
		return KC_SNIFF_TEXT;
	int32_t size = kc_get_i32(p);
	if (size < 4 || (uint64_t)size > max_frame)
		return KC_SNIFF_BAD_SIZE;
	return KC_SNIFF_KAFKA;
}

const char *
kc_sniff_str(enum kc_sniff s)
{
	switch (s) {
	case KC_SNIFF_NEED_MORE: return "need-more";
	case KC_SNIFF_KAFKA: return "kafka";
	case KC_SNIFF_TLS: return "TLS";
	case KC_SNIFF_HTTP: return "HTTP";
	case KC_SNIFF_TEXT: return "text";
	case KC_SNIFF_BAD_SIZE: return "bad-size";
	}
	return "unknown";
}

/* Appends the first bytes of p in hex ("15 03 03 ...") at buf+off. */
static size_t
sniff_hex(char *buf, size_t len, size_t off, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n && i < SNIFF_SHOW_HEX && off + 4 < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%02x", i ? " " : "", p[i]);
	if (n > SNIFF_SHOW_HEX && off + 4 < len)
		off += (size_t)snprintf(buf + off, len - off, " ...");
	return off;
}

/* Appends the first line of p, quoted, non-printable bytes as '?'. */
static size_t
sniff_line(char *buf, size_t len, size_t off, const uint8_t *p, size_t n)
{
	if (off + 3 >= len)
		return off;
	buf[off++] = '"';
	for (size_t i = 0; i < n && i < SNIFF_SHOW_TEXT && off + 2 < len; i++) {
		if (p[i] == '\r' || p[i] == '\n')
			break;
		buf[off++] = (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' && p[i] != '\\')
		    ? (char)p[i] : '?';
	}
	buf[off++] = '"';
	buf[off] = 0;
	return off;
}

char *
kc_sniff_describe(enum kc_sniff s, const uint8_t *p, size_t n, uint64_t max_frame,
		  char *buf, size_t len)
{
	if (len == 0)
		return buf;
	buf[0] = 0;
	int w;
	switch (s) {
	case KC_SNIFF_TLS:
	case KC_SNIFF_HTTP:
	case KC_SNIFF_TEXT:
		w = snprintf(buf, len, "first response bytes look like %s (", kc_sniff_str(s));
		break;
	case KC_SNIFF_BAD_SIZE:
		w = snprintf(buf, len, "malformed response: size prefix %d (not 4..%llu) (",
		    (int)kc_get_i32(p), (unsigned long long)max_frame);
		break;
	case KC_SNIFF_NEED_MORE:
		w = snprintf(buf, len, "response cut short after %zu byte(s) (", n);
		break;
	case KC_SNIFF_KAFKA:
	default:
		w = snprintf(buf, len, "first response bytes could start a Kafka response (");
		break;
	}
	size_t off = w < 0 ? 0 : (size_t)w;
	if (off >= len)
		return buf;
	if (s == KC_SNIFF_HTTP || s == KC_SNIFF_TEXT)
		off = sniff_line(buf, len, off, p, n);
	else
		off = sniff_hex(buf, len, off, p, n);
	if (off + 1 < len) {
		buf[off++] = ')';
		buf[off] = 0;
	}
	return buf;
}
