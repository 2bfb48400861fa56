/*
 * proxyproto — PROXY protocol v1/v2 header parser; see proxyproto.h for the
 * grammar accepted and the return convention.
 *
 * Version 1 is walked by one grammar walker over the line received so far.
 * It runs in one of two modes: "complete" when the line's CRLF is present
 * (running out of bytes is then malformed), "partial" when it is not yet
 * (running out of bytes while every byte so far fits the grammar is
 * PP_NEED_MORE). Every field is judged byte by byte, so "PROXY TCP4 1.2.3.4
 * 5.6.7.8 6553" needs more while "... 65536" is already a bad port.
 */
#include "worker/proxyproto.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/un.h>

static const uint8_t pp_v1_sig[6] = { 'P', 'R', 'O', 'X', 'Y', ' ' };
static const uint8_t pp_v2_sig[PP_V2_SIG_LEN] = {
	0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A
};

const char *
pp_status_str(enum pp_status s)
{
	switch (s) {
	case PP_OK: return "ok";
	case PP_NEED_MORE: return "need-more";
	case PP_MALFORMED: return "malformed";
	}
	return "unknown";
}

const char *
pp_reason_str(enum pp_reason r)
{
	static const char *const names[PP_R_COUNT] = {
		[PP_R_NONE] = "none",
		[PP_R_NOT_PROXY] = "not_proxy",
		[PP_R_V1_TOO_LONG] = "v1_too_long",
		[PP_R_V1_SYNTAX] = "v1_syntax",
		[PP_R_V1_ADDRESS] = "v1_address",
		[PP_R_V1_PORT] = "v1_port",
		[PP_R_V2_VERSION] = "v2_version",
		[PP_R_V2_COMMAND] = "v2_command",
		[PP_R_V2_FAMILY] = "v2_family",
		[PP_R_V2_TOO_LARGE] = "v2_too_large",
		[PP_R_V2_LENGTH] = "v2_length",
		[PP_R_V2_TLV] = "v2_tlv",
		[PP_R_V2_CRC] = "v2_crc",
	};
	return (unsigned)r < PP_R_COUNT ? names[r] : "unknown";
}

const char *
pp_command_str(enum pp_command c)
{
	switch (c) {
	case PP_CMD_PROXY: return "PROXY";
	case PP_CMD_LOCAL: return "LOCAL";
	case PP_CMD_UNKNOWN: return "UNKNOWN";
	}
	return "unknown";
}

const char *
pp_family_str(enum pp_family f)
{
	switch (f) {
	case PP_FAM_UNSPEC: return "UNSPEC";
	case PP_FAM_TCP4: return "TCP4";
	case PP_FAM_TCP6: return "TCP6";
	case PP_FAM_UNIX: return "UNIX";
	}
	return "unknown";
}

const char *
pp_detect_str(enum pp_detect d)
{
	switch (d) {
	case PP_DETECT_NEED_MORE: return "need-more";
	case PP_DETECT_NONE: return "none";
	case PP_DETECT_V1: return "v1";
	case PP_DETECT_V2: return "v2";
	}
	return "unknown";
}

enum pp_detect
pp_detect(const uint8_t *buf, size_t n)
{
	size_t m;

	if (n == 0)
		return PP_DETECT_NEED_MORE;
	m = n < sizeof pp_v1_sig ? n : sizeof pp_v1_sig;
	if (memcmp(buf, pp_v1_sig, m) == 0)
		return m == sizeof pp_v1_sig ? PP_DETECT_V1 : PP_DETECT_NEED_MORE;
	m = n < sizeof pp_v2_sig ? n : sizeof pp_v2_sig;
	if (memcmp(buf, pp_v2_sig, m) == 0)
		return m == sizeof pp_v2_sig ? PP_DETECT_V2 : PP_DETECT_NEED_MORE;
	return PP_DETECT_NONE;
}

bool
pp_has_address(const struct pp_header *hdr)
{
	return hdr->command == PP_CMD_PROXY && hdr->family != PP_FAM_UNSPEC;
}

static int
pp_fail(struct pp_header *hdr, enum pp_reason r)
{
	hdr->reason = r;
	return PP_MALFORMED;
}

/* ---- version 1 ---------------------------------------------------------- */

/* The walker: bytes p[i..end) of the line; `complete` when end is the CR of
 * the line's CRLF. */
struct pp_v1 {
	const uint8_t *p;
	size_t i, end;
	bool complete;
};

/* What running out of bytes means in the walker's mode. */
static int
pp_v1_out(const struct pp_v1 *w, struct pp_header *hdr, enum pp_reason r)
{
	return w->complete ? pp_fail(hdr, r) : PP_NEED_MORE;
}

/* One literal: PP_OK when it is there (consumed), PP_NEED_MORE when the
 * bytes run out on a prefix of it, PP_MALFORMED (no reason set) when a byte
 * differs. */
static int
pp_v1_lit(struct pp_v1 *w, const char *s)
{
	size_t k, len = strlen(s);

	for (k = 0; k < len; k++) {
		if (w->i + k >= w->end)
			return PP_NEED_MORE;
		if (w->p[w->i + k] != (uint8_t)s[k])
			return PP_MALFORMED;
	}
	w->i += len;
	return PP_OK;
}

static int
pp_v1_space(struct pp_v1 *w, struct pp_header *hdr)
{
	if (w->i >= w->end)
		return pp_v1_out(w, hdr, PP_R_V1_SYNTAX);
	if (w->p[w->i] != ' ')
		return pp_fail(hdr, PP_R_V1_SYNTAX);
	w->i++;
	return PP_OK;
}

/*
 * A decimal number of at most max_digits digits and at most max, without
 * leading zeros, ending at a byte that is not a digit (not consumed) or the
 * end of the bytes. Bad digits fail with r at once; PP_NEED_MORE when the
 * bytes run out in partial mode (a longer number may still be valid). In
 * complete mode the end of the line ends the number.
 */
static int
pp_v1_number(struct pp_v1 *w, struct pp_header *hdr, unsigned max, unsigned max_digits,
	     enum pp_reason r, unsigned *out)
{
	unsigned v = 0, digits = 0;

	while (w->i < w->end && w->p[w->i] >= '0' && w->p[w->i] <= '9') {
		if (digits == 1 && v == 0)
			return pp_fail(hdr, r);         /* leading zero */
		v = v * 10 + (unsigned)(w->p[w->i] - '0');
		if (++digits > max_digits || v > max)
			return pp_fail(hdr, r);
		w->i++;
	}
	if (w->i >= w->end && !w->complete)
		return PP_NEED_MORE;
	if (digits == 0)
		return pp_fail(hdr, r);
	*out = v;
	return PP_OK;
}

static int
pp_v1_addr4(struct pp_v1 *w, struct pp_header *hdr, struct sockaddr_storage *ss)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	uint8_t a[4];
	unsigned v;
	int rc;

	for (int k = 0; k < 4; k++) {
		if (k > 0) {
			if (w->i >= w->end)
				return pp_v1_out(w, hdr, PP_R_V1_ADDRESS);
			if (w->p[w->i] != '.')
				return pp_fail(hdr, PP_R_V1_ADDRESS);
			w->i++;
		}
		rc = pp_v1_number(w, hdr, 255, 3, PP_R_V1_ADDRESS, &v);
		if (rc != PP_OK)
			return rc;
		a[k] = (uint8_t)v;
	}
	if (w->i < w->end && w->p[w->i] != ' ')
		return pp_fail(hdr, PP_R_V1_ADDRESS);   /* "1.2.3.4.5", "1.2.3.4x" */
	memset(ss, 0, sizeof *ss);
	sin->sin_family = AF_INET;
	memcpy(&sin->sin_addr, a, 4);
	return PP_OK;
}

static int
pp_v1_addr6(struct pp_v1 *w, struct pp_header *hdr, struct sockaddr_storage *ss)
{
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
	char text[INET6_ADDRSTRLEN];
	size_t len = 0;
	struct in6_addr a;

	while (w->i < w->end && w->p[w->i] != ' ') {
		uint8_t c = w->p[w->i];
		bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
		    (c >= 'A' && c <= 'F') || c == ':' || c == '.';
		if (!ok || len + 1 >= sizeof text)
			return pp_fail(hdr, PP_R_V1_ADDRESS);
		text[len++] = (char)c;
		w->i++;
	}
	if (w->i >= w->end && !w->complete)
		return PP_NEED_MORE;
	text[len] = '\0';
	if (inet_pton(AF_INET6, text, &a) != 1)
		return pp_fail(hdr, PP_R_V1_ADDRESS);
	memset(ss, 0, sizeof *ss);
	sin6->sin6_family = AF_INET6;
	sin6->sin6_addr = a;
	return PP_OK;
}

static void
pp_set_port(struct sockaddr_storage *ss, unsigned port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
}

/* The line after "PROXY ". PP_OK only in complete mode, with every byte up
 * to the CR used. */
static int
pp_v1_walk(struct pp_v1 *w, struct pp_header *hdr)
{
	static const char *const protos[] = { "TCP4", "TCP6", "UNKNOWN" };
	int which = -1, rc;
	bool partial = false;
	unsigned sport, dport;

	for (int k = 0; k < 3 && which < 0; k++) {
		struct pp_v1 t = *w;
		rc = pp_v1_lit(&t, protos[k]);
		if (rc == PP_OK) {
			which = k;
			*w = t;
		} else if (rc == PP_NEED_MORE) {
			partial = true;
		}
	}
	if (which < 0)
		return partial ? pp_v1_out(w, hdr, PP_R_V1_SYNTAX) : pp_fail(hdr, PP_R_V1_SYNTAX);

	if (which == 2) {
		/* UNKNOWN: the end of the line, or a space and anything printable
		 * (the line was cut at its first non-printable byte). */
		if (w->i < w->end && w->p[w->i] != ' ')
			return pp_fail(hdr, PP_R_V1_SYNTAX);
		if (!w->complete)
			return PP_NEED_MORE;
		hdr->command = PP_CMD_UNKNOWN;
		hdr->family = PP_FAM_UNSPEC;
		return PP_OK;
	}

	int (*addr)(struct pp_v1 *, struct pp_header *, struct sockaddr_storage *) =
	    which == 0 ? pp_v1_addr4 : pp_v1_addr6;
	if ((rc = pp_v1_space(w, hdr)) != PP_OK ||
	    (rc = addr(w, hdr, &hdr->src)) != PP_OK ||
	    (rc = pp_v1_space(w, hdr)) != PP_OK ||
	    (rc = addr(w, hdr, &hdr->dst)) != PP_OK ||
	    (rc = pp_v1_space(w, hdr)) != PP_OK ||
	    (rc = pp_v1_number(w, hdr, 65535, 5, PP_R_V1_PORT, &sport)) != PP_OK ||
	    (rc = pp_v1_space(w, hdr)) != PP_OK ||
	    (rc = pp_v1_number(w, hdr, 65535, 5, PP_R_V1_PORT, &dport)) != PP_OK)
		return rc;
	if (w->i != w->end)
		return pp_fail(hdr, w->p[w->i] >= '0' && w->p[w->i] <= '9' ? PP_R_V1_PORT
		    : PP_R_V1_SYNTAX);
	pp_set_port(&hdr->src, sport);
	pp_set_port(&hdr->dst, dport);
	hdr->command = PP_CMD_PROXY;
	hdr->family = which == 0 ? PP_FAM_TCP4 : PP_FAM_TCP6;
	return PP_OK;
}

static int
pp_parse_v1(const uint8_t *buf, size_t n, struct pp_header *hdr)
{
	size_t limit = n < PP_V1_MAX ? n : PP_V1_MAX, i;
	struct pp_v1 w = { .p = buf, .i = sizeof pp_v1_sig };
	int rc;

	/* The line so far ends at its first byte that is not printable; it is
	 * complete when that byte starts a CRLF that fits in PP_V1_MAX. */
	for (i = sizeof pp_v1_sig; i < limit; i++)
		if (buf[i] < 0x20 || buf[i] > 0x7e)
			break;
	w.end = i;
	w.complete = i < limit && buf[i] == '\r' && i + 1 < n && buf[i + 1] == '\n' &&
	    i + 2 <= PP_V1_MAX;
	/* The bytes before i are judged first, so that a prefix of the line
	 * and the whole line give the same reason. */
	rc = pp_v1_walk(&w, hdr);
	if (rc != PP_NEED_MORE) {
		if (rc == PP_OK) {
			hdr->version = 1;
			hdr->len = w.end + 2;
		}
		return rc;
	}
	/* Every byte before i fits; what stops the line there? */
	if (i < limit) {
		if (buf[i] != '\r')
			return pp_fail(hdr, PP_R_V1_SYNTAX);    /* LF, NUL, 8-bit... */
		if (i + 2 > PP_V1_MAX)
			return pp_fail(hdr, PP_R_V1_TOO_LONG);  /* its LF would be byte 108 */
		if (i + 1 < n)
			return pp_fail(hdr, PP_R_V1_SYNTAX);    /* a CR without LF */
		return PP_NEED_MORE;                            /* the LF may come */
	}
	if (n >= PP_V1_MAX)
		return pp_fail(hdr, PP_R_V1_TOO_LONG);
	return PP_NEED_MORE;
}

/* ---- version 2 ---------------------------------------------------------- */

/* CRC32C (Castagnoli, reflected 0x82F63B78), the checksum of RFC 4960
 * appendix B that the CRC32C TLV carries. Bitwise: a header is at most
 * PP_MAX_HEADER bytes and only checked when the TLV is present. */
static uint32_t
pp_crc32c(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
	}
	return crc;
}

static uint16_t
pp_be16(const uint8_t *p)
{
	return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

/* Address block size for the family nibble (0 for AF_UNSPEC). */
static size_t
pp_v2_block(unsigned af)
{
	static const size_t sizes[4] = { 0, 12, 36, 216 };
	return sizes[af & 3];
}

static void
pp_v2_addresses(const uint8_t *a, unsigned af, struct pp_header *hdr)
{
	memset(&hdr->src, 0, sizeof hdr->src);
	memset(&hdr->dst, 0, sizeof hdr->dst);
	if (af == 1) {
		struct sockaddr_in *s = (struct sockaddr_in *)&hdr->src;
		struct sockaddr_in *d = (struct sockaddr_in *)&hdr->dst;
		s->sin_family = d->sin_family = AF_INET;
		memcpy(&s->sin_addr, a, 4);
		memcpy(&d->sin_addr, a + 4, 4);
		memcpy(&s->sin_port, a + 8, 2);
		memcpy(&d->sin_port, a + 10, 2);
		hdr->family = PP_FAM_TCP4;
	} else if (af == 2) {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)&hdr->src;
		struct sockaddr_in6 *d = (struct sockaddr_in6 *)&hdr->dst;
		s->sin6_family = d->sin6_family = AF_INET6;
		memcpy(&s->sin6_addr, a, 16);
		memcpy(&d->sin6_addr, a + 16, 16);
		memcpy(&s->sin6_port, a + 32, 2);
		memcpy(&d->sin6_port, a + 34, 2);
		hdr->family = PP_FAM_TCP6;
	} else {
		struct sockaddr_un *s = (struct sockaddr_un *)&hdr->src;
		struct sockaddr_un *d = (struct sockaddr_un *)&hdr->dst;
		_Static_assert(sizeof s->sun_path >= 108, "sun_path holds 108 bytes");
		s->sun_family = d->sun_family = AF_UNIX;
		memcpy(s->sun_path, a, 108);
		memcpy(d->sun_path, a + 108, 108);
		hdr->family = PP_FAM_UNIX;
	}
}

/* Walks the TLVs in buf[off..total): each whole, a CRC32C one verified. */
static int
pp_v2_tlvs(const uint8_t *buf, size_t off, size_t total, struct pp_header *hdr)
{
	hdr->tlv_off = off;
	hdr->tlv_len = total - off;
	while (off < total) {
		size_t vlen;

		if (total - off < 3)
			return pp_fail(hdr, PP_R_V2_TLV);
		vlen = pp_be16(buf + off + 1);
		if (total - off - 3 < vlen)
			return pp_fail(hdr, PP_R_V2_TLV);
		if (buf[off] == PP2_TYPE_CRC32C) {
			static const uint8_t zero[4];
			const uint8_t *v = buf + off + 3;
			uint32_t crc, want;

			if (vlen != 4)
				return pp_fail(hdr, PP_R_V2_CRC);
			want = (uint32_t)v[0] << 24 | (uint32_t)v[1] << 16 | (uint32_t)v[2] << 8 | v[3];
			crc = pp_crc32c(0xFFFFFFFFu, buf, (size_t)(v - buf));
			crc = pp_crc32c(crc, zero, 4);
			crc = pp_crc32c(crc, v + 4, total - (size_t)(v + 4 - buf));
			if ((crc ^ 0xFFFFFFFFu) != want)
				return pp_fail(hdr, PP_R_V2_CRC);
		}
		hdr->tlv_count++;
		off += 3 + vlen;
	}
	if (hdr->tlv_count == 0)
		hdr->tlv_off = hdr->tlv_len = 0;
	return PP_OK;
}

static int
pp_parse_v2(const uint8_t *buf, size_t n, struct pp_header *hdr)
{
	unsigned cmd, af, tp;
	size_t total, block;

	if (n <= 12)
		return PP_NEED_MORE;
	if (buf[12] >> 4 != 2)
		return pp_fail(hdr, PP_R_V2_VERSION);
	cmd = buf[12] & 0x0F;
	if (cmd > 1)
		return pp_fail(hdr, PP_R_V2_COMMAND);
	if (n <= 13)
		return PP_NEED_MORE;
	af = buf[13] >> 4;
	tp = buf[13] & 0x0F;
	if (af > 3 || tp > 2)
		return pp_fail(hdr, PP_R_V2_FAMILY);
	if (n < PP_V2_FIXED)
		return PP_NEED_MORE;
	total = PP_V2_FIXED + (size_t)pp_be16(buf + 14);
	if (total > PP_MAX_HEADER)
		return pp_fail(hdr, PP_R_V2_TOO_LARGE);
	block = pp_v2_block(af);
	if (cmd == 1 && total - PP_V2_FIXED < block)
		return pp_fail(hdr, PP_R_V2_LENGTH);
	if (n < total)
		return PP_NEED_MORE;

	hdr->version = 2;
	hdr->len = total;
	hdr->family = PP_FAM_UNSPEC;
	if (cmd == 0) {
		/* LOCAL: the balancer's own connection; its block is skipped. */
		hdr->command = PP_CMD_LOCAL;
		return PP_OK;
	}
	hdr->command = PP_CMD_PROXY;
	if (af == 0)
		return PP_OK;   /* AF_UNSPEC: no address, nothing to walk */
	if (tp == 1)
		pp_v2_addresses(buf + PP_V2_FIXED, af, hdr);
	return pp_v2_tlvs(buf, PP_V2_FIXED + block, total, hdr);
}

int
pp_parse(const uint8_t *buf, size_t n, struct pp_header *hdr)
{
	int rc;

	memset(hdr, 0, sizeof *hdr);
	switch (pp_detect(buf, n)) {
	case PP_DETECT_NEED_MORE:
		return PP_NEED_MORE;
	case PP_DETECT_NONE:
		return pp_fail(hdr, PP_R_NOT_PROXY);
	case PP_DETECT_V1:
		rc = pp_parse_v1(buf, n, hdr);
		break;
	default:
		rc = pp_parse_v2(buf, n, hdr);
		break;
	}
	if (rc != PP_OK) {
		/* Nothing half-filled leaves: only the reason. */
		enum pp_reason r = hdr->reason;
		memset(hdr, 0, sizeof *hdr);
		hdr->reason = rc == PP_MALFORMED ? r : PP_R_NONE;
	}
	return rc;
}

int
pp_tlv_find(const uint8_t *buf, const struct pp_header *hdr, uint8_t type,
	    const uint8_t **val, size_t *val_len)
{
	size_t off = hdr->tlv_off, end = hdr->tlv_off + hdr->tlv_len;

	if (hdr->version != 2 || hdr->tlv_count == 0)
		return -1;
	while (end - off >= 3) {
		size_t vlen = pp_be16(buf + off + 1);

		if (end - off - 3 < vlen)
			return -1;
		if (buf[off] == type) {
			*val = buf + off + 3;
			*val_len = vlen;
			return 0;
		}
		off += 3 + vlen;
	}
	return -1;
}
