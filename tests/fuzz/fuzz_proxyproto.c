/*
 * fuzz_proxyproto — libFuzzer harness for the edge of a client connection:
 * the PROXY protocol header parser (worker/proxyproto.c) and the trusted
 * source lists of proxy_protocol_from (common/cidr.c).
 *
 * Input: byte 0 selects the mode.
 *   bit 7 clear: the rest is the bytes received at the start of a
 *     connection, parsed as a PROXY header.
 *   bit 7 set: the rest, up to its first NUL, is the text of a
 *     proxy_protocol_from value.
 *
 * Oracles (besides ASan/UBSan, every parse on an exact-size copy):
 *   PROXY mode
 *   - the status is PP_OK, PP_NEED_MORE or PP_MALFORMED; MALFORMED carries a
 *     named reason, the others PP_R_NONE; a header that is not OK is all
 *     zero but its reason;
 *   - OK: 0 < len <= min(n, PP_MAX_HEADER); a v1 header is at most 107 bytes
 *     and ends with CRLF; a v2 header is 16 + its length field; the
 *     family, the sockaddr families and pp_has_address agree; TLVs lie
 *     inside the header and pp_tlv_find finds only what is inside them;
 *   - monotonicity: a prefix of the bytes answers NEED_MORE or the same as
 *     the whole (same reason, or for OK the identical header); an OK header
 *     parses the same from exactly its len bytes, and every shorter prefix
 *     needs more; pp_detect agrees (NONE => not_proxy; v1/v2 => that
 *     version);
 *   - round trip: an OK header with TCP4/TCP6 addresses, printed again as a
 *     v1 line and built again as a v2 header, parses to the same addresses
 *     and ports.
 *   CIDR mode
 *   - an error leaves an empty list and a message; a parsed list has 1..64
 *     networks, each containing its own network address (no host bits);
 *   - canonical round trip: cidr_list_format parses back to identical
 *     entries, and formatting that again gives the same text;
 *   - matching: cidr_list_match of each network's address (as AF_INET, or
 *     AF_INET6 and its IPv4-mapped form) agrees with cidr_contains.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#include "common/cidr.h"
#include "tests/fuzz/fuzz_common.h"
#include "worker/proxyproto.h"

static int
parse_copy(const uint8_t *data, size_t n, struct pp_header *h)
{
	uint8_t *p = fuzz_dup(data, n);
	int rc = pp_parse(p, n, h);

	free(p);
	return rc;
}

static bool
all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

static void
check_result(const uint8_t *data, size_t n, int rc, const struct pp_header *h)
{
	FUZZ_CHECK(rc == PP_OK || rc == PP_NEED_MORE || rc == PP_MALFORMED, "status %d", rc);
	FUZZ_CHECK(strcmp(pp_status_str((enum pp_status)rc), "unknown") != 0, "status name");
	if (rc != PP_OK) {
		struct pp_header z = *h;
		z.reason = PP_R_NONE;
		FUZZ_CHECK(all_zero(&z, sizeof z), "a header that is not OK carries fields");
		if (rc == PP_MALFORMED)
			FUZZ_CHECK(h->reason > PP_R_NONE && h->reason < PP_R_COUNT &&
			    strcmp(pp_reason_str(h->reason), "unknown") != 0, "reason %d", h->reason);
		else
			FUZZ_CHECK(h->reason == PP_R_NONE, "need-more with reason %d", h->reason);
		return;
	}
	FUZZ_CHECK(h->reason == PP_R_NONE, "OK with reason %d", h->reason);
	FUZZ_CHECK(h->len > 0 && h->len <= n && h->len <= PP_MAX_HEADER, "len %zu of %zu", h->len, n);
	if (h->version == 1) {
		FUZZ_CHECK(h->len <= PP_V1_MAX, "v1 len %zu", h->len);
		FUZZ_CHECK(data[h->len - 2] == '\r' && data[h->len - 1] == '\n', "v1 without CRLF");
		FUZZ_CHECK(h->command != PP_CMD_LOCAL, "v1 LOCAL");
		FUZZ_CHECK(h->tlv_count == 0 && h->tlv_len == 0, "v1 TLVs");
	} else {
		FUZZ_CHECK(h->version == 2, "version %d", h->version);
		FUZZ_CHECK(h->len == 16 + ((size_t)data[14] << 8 | data[15]), "v2 len %zu", h->len);
		FUZZ_CHECK(h->command != PP_CMD_UNKNOWN, "v2 UNKNOWN");
		FUZZ_CHECK(h->tlv_off + h->tlv_len <= h->len, "TLVs past the header");
		FUZZ_CHECK((h->tlv_count == 0) == (h->tlv_len == 0), "TLV count vs bytes");
	}
	int fam = h->family == PP_FAM_TCP4 ? AF_INET : h->family == PP_FAM_TCP6 ? AF_INET6 :
	    h->family == PP_FAM_UNIX ? AF_UNIX : 0;
	FUZZ_CHECK(h->src.ss_family == fam && h->dst.ss_family == fam, "family %d vs %d/%d",
	    h->family, h->src.ss_family, h->dst.ss_family);
	FUZZ_CHECK(pp_has_address(h) == (h->command == PP_CMD_PROXY && fam != 0), "has_address");
	if (h->command != PP_CMD_PROXY)
		FUZZ_CHECK(h->family == PP_FAM_UNSPEC, "%s with a family", pp_command_str(h->command));
	for (int t = 0; t < 256; t += 37) {
		const uint8_t *val;
		size_t vlen;
		if (pp_tlv_find(data, h, (uint8_t)t, &val, &vlen) == 0)
			FUZZ_CHECK(val >= data + h->tlv_off + 3 &&
			    val + vlen <= data + h->tlv_off + h->tlv_len, "TLV value outside");
	}
}

/* The addresses of two headers are the same (family, address, port). */
static bool
same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
	return x->sin6_port == y->sin6_port && memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0;
}

static void
round_trip(const struct pp_header *h)
{
	char s[INET6_ADDRSTRLEN], d[INET6_ADDRSTRLEN], line[160];
	uint8_t v2[16 + 36];
	struct pp_header r;
	bool six = h->family == PP_FAM_TCP6;
	const void *sa, *da;
	unsigned sp, dp;

	if (six) {
		const struct sockaddr_in6 *x = (const void *)&h->src, *y = (const void *)&h->dst;
		sa = &x->sin6_addr, da = &y->sin6_addr;
		sp = ntohs(x->sin6_port), dp = ntohs(y->sin6_port);
	} else {
		const struct sockaddr_in *x = (const void *)&h->src, *y = (const void *)&h->dst;
		sa = &x->sin_addr, da = &y->sin_addr;
		sp = ntohs(x->sin_port), dp = ntohs(y->sin_port);
	}
	FUZZ_CHECK(inet_ntop(six ? AF_INET6 : AF_INET, sa, s, sizeof s) != NULL, "ntop");
	FUZZ_CHECK(inet_ntop(six ? AF_INET6 : AF_INET, da, d, sizeof d) != NULL, "ntop");
	int n = snprintf(line, sizeof line, "PROXY TCP%c %s %s %u %u\r\n", six ? '6' : '4', s, d, sp,
	    dp);
	FUZZ_CHECK(parse_copy((const uint8_t *)line, (size_t)n, &r) == PP_OK, "v1 of '%s' refused",
	    line);
	FUZZ_CHECK(same_addr(&r.src, &h->src) && same_addr(&r.dst, &h->dst), "v1 round trip");

	size_t alen = six ? 16 : 4, bl = 2 * alen + 4;
	memcpy(v2, "\r\n\r\n\0\r\nQUIT\n", 12);
	v2[12] = 0x21;
	v2[13] = six ? 0x21 : 0x11;
	v2[14] = 0;
	v2[15] = (uint8_t)bl;
	memcpy(v2 + 16, sa, alen);
	memcpy(v2 + 16 + alen, da, alen);
	v2[16 + 2 * alen] = (uint8_t)(sp >> 8);
	v2[17 + 2 * alen] = (uint8_t)sp;
	v2[18 + 2 * alen] = (uint8_t)(dp >> 8);
	v2[19 + 2 * alen] = (uint8_t)dp;
	FUZZ_CHECK(parse_copy(v2, 16 + bl, &r) == PP_OK, "v2 rebuilt refused");
	FUZZ_CHECK(same_addr(&r.src, &h->src) && same_addr(&r.dst, &h->dst), "v2 round trip");
}

static void
fuzz_pp(const uint8_t *data, size_t n)
{
	struct pp_header whole, h;
	int rc = parse_copy(data, n, &whole);

	check_result(data, n, rc, &whole);

	enum pp_detect d = pp_detect(data, n);
	FUZZ_CHECK(strcmp(pp_detect_str(d), "unknown") != 0, "detect name");
	if (d == PP_DETECT_NONE)
		FUZZ_CHECK(rc == PP_MALFORMED && whole.reason == PP_R_NOT_PROXY, "detect none, parse %d", rc);
	if (d == PP_DETECT_NEED_MORE)
		FUZZ_CHECK(rc == PP_NEED_MORE, "detect need-more, parse %d", rc);
	if (rc == PP_OK)
		FUZZ_CHECK(whole.version == (d == PP_DETECT_V1 ? 1 : 2), "detect vs version");

	/* prefixes: all of them for short inputs, a sample for long ones */
	size_t step = n <= 300 ? 1 : n / 97 + 1;
	for (size_t k = 0; k < n; k += step) {
		int r = parse_copy(data, k, &h);
		check_result(data, k, r, &h);
		if (rc == PP_OK && k < whole.len)
			FUZZ_CHECK(r == PP_NEED_MORE, "prefix %zu of an OK header of %zu: %d", k, whole.len, r);
		if (r == PP_NEED_MORE)
			continue;
		FUZZ_CHECK(r == rc, "prefix %zu answers %d, the whole %d", k, r, rc);
		if (r == PP_MALFORMED)
			FUZZ_CHECK(h.reason == whole.reason, "prefix %zu reason %s, whole %s", k,
			    pp_reason_str(h.reason), pp_reason_str(whole.reason));
		else
			FUZZ_CHECK(memcmp(&h, &whole, sizeof h) == 0, "prefix %zu: another header", k);
	}
	if (rc != PP_OK)
		return;
	FUZZ_CHECK(parse_copy(data, whole.len, &h) == PP_OK && memcmp(&h, &whole, sizeof h) == 0,
	    "the header alone parses differently");
	if (whole.family == PP_FAM_TCP4 || whole.family == PP_FAM_TCP6)
		round_trip(&whole);
}

/* ---- CIDR lists ---- */

static void
check_entry_match(const struct cidr_list *l, const struct cidr *c)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof ss);
	if (c->v4) {
		struct sockaddr_in *s4 = (void *)&ss;
		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, c->addr, 4);
		FUZZ_CHECK(cidr_contains(c, (void *)&ss), "v4 network not in itself");
		FUZZ_CHECK(cidr_list_match(l, (void *)&ss), "list does not match its network");
		/* the same address as an IPv4-mapped peer */
		struct sockaddr_in6 *s6 = (void *)&ss;
		memset(&ss, 0, sizeof ss);
		s6->sin6_family = AF_INET6;
		s6->sin6_addr.s6_addr[10] = s6->sin6_addr.s6_addr[11] = 0xff;
		memcpy(&s6->sin6_addr.s6_addr[12], c->addr, 4);
		FUZZ_CHECK(cidr_contains(c, (void *)&ss), "mapped v4 network not in itself");
	} else {
		struct sockaddr_in6 *s6 = (void *)&ss;
		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, c->addr, 16);
		bool mapped = memcmp(c->addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0;
		/* a v6 entry is never a mapped one of /96 or more (stored as v4) */
		FUZZ_CHECK(!(mapped && c->prefix >= 96), "mapped entry kept as IPv6");
		if (!mapped)
			FUZZ_CHECK(cidr_contains(c, (void *)&ss), "v6 network not in itself");
		bool any = false;
		for (size_t i = 0; i < l->n; i++)
			any |= cidr_contains(&l->e[i], (void *)&ss);
		FUZZ_CHECK(any == cidr_list_match(l, (void *)&ss), "match vs contains");
	}
}

static void
fuzz_cidr(const uint8_t *data, size_t n)
{
	char *text = malloc(n + 1), err[256], out[CIDR_LIST_MAX * (CIDR_TEXT_MAX + 2) + 1],
	    out2[sizeof out];
	struct cidr_list l, r;

	if (text == NULL)
		abort();
	memcpy(text, data, n);
	text[n] = '\0';
	err[0] = '\0';
	l.n = 77;
	if (cidr_list_parse(text, &l, err, sizeof err) < 0) {
		FUZZ_CHECK(l.n == 0 && err[0] != '\0', "error without message or with entries");
		free(text);
		return;
	}
	FUZZ_CHECK(l.n >= 1 && l.n <= CIDR_LIST_MAX, "%zu entries", l.n);
	for (size_t i = 0; i < l.n; i++) {
		FUZZ_CHECK(l.e[i].prefix <= (l.e[i].v4 ? 32 : 128), "prefix %u", l.e[i].prefix);
		if (l.e[i].v4)
			FUZZ_CHECK(all_zero(l.e[i].addr + 4, 12), "v4 entry with bytes after 4");
		check_entry_match(&l, &l.e[i]);
	}
	int len = cidr_list_format(&l, out, sizeof out);
	FUZZ_CHECK(len > 0, "format failed");
	FUZZ_CHECK(cidr_list_parse(out, &r, err, sizeof err) == 0, "'%s' does not parse back: %s",
	    out, err);
	FUZZ_CHECK(r.n == l.n && memcmp(r.e, l.e, l.n * sizeof l.e[0]) == 0, "'%s' parses to another list",
	    out);
	FUZZ_CHECK(cidr_list_format(&r, out2, sizeof out2) == len && strcmp(out, out2) == 0,
	    "format is not a fixed point");
	free(text);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 0x80)
		fuzz_cidr(data + 1, size - 1);
	else
		fuzz_pp(data + 1, size - 1);
	return 0;
}
