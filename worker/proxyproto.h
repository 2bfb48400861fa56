/*
 * proxyproto — the PROXY protocol header (versions 1 and 2, as haproxy's
 * doc/proxy-protocol.txt specifies them) that a load balancer puts before
 * the first byte of a client connection to carry the client's real address.
 * Pure: the parser looks at the bytes received so far and says whether they
 * are a whole header, the start of one, or something that can never be one.
 * No sockets, no allocation, no logging.
 *
 * Version 1 is one line of US-ASCII text, at most PP_V1_MAX (107) bytes
 * including its CRLF:
 *   "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n"
 *   "PROXY TCP6 2001:db8::1 2001:db8::2 56324 443\r\n"
 *   "PROXY UNKNOWN\r\n"   (anything printable may follow UNKNOWN before CRLF)
 * Parsing is strict: exactly one space between fields, IPv4 as four decimal
 * numbers 0..255 without leading zeros, IPv6 as inet_pton reads it (hex
 * groups, one "::", an embedded dotted quad as haproxy prints IPv4-mapped
 * addresses), ports 0..65535 without leading zeros, the family of both
 * addresses as announced, and only CRLF as the line end (a lone CR or LF is
 * malformed).
 *
 * Version 2 is binary: a 12-byte signature (\r\n\r\n\0\r\nQUIT\n), a
 * version/command byte (version 2; command LOCAL or PROXY), a family byte
 * (AF_UNSPEC/INET/INET6/UNIX × UNSPEC/STREAM/DGRAM), a 16-bit length of what
 * follows, then the addresses and TLVs. ferry refuses a header longer than
 * PP_MAX_HEADER in all (16 + length), and says so as soon as the length
 * field has arrived, so a 64 KiB header is refused after 16 bytes without
 * buffering it. For PROXY with TCP over IPv4/IPv6 or a UNIX stream the
 * address block must fit the length; the rest must be whole TLVs (type,
 * 16-bit length, value), which are walked and skipped; a CRC32C TLV, when
 * present, is verified (the spec requires it of a receiver that can).
 * Datagram families and AF_UNSPEC are accepted with family PP_FAM_UNSPEC
 * (their addresses are not used: the spec's fallback). LOCAL (health checks
 * of the balancer) skips the whole block: the family byte is checked, the
 * addresses and TLVs are ignored as the spec says.
 *
 * Need more versus malformed: the parser judges the bytes as soon as they
 * arrive (an IPv6 address of v1 once its terminating space is in). A prefix
 * that a valid header could still continue is PP_NEED_MORE; the first byte
 * that no valid header could have there makes it PP_MALFORMED with a
 * reason, and every longer input gives that same reason. The caller bounds the wait (the handshake
 * deadline): a header that stops arriving is its business, not the
 * parser's. Since nothing after a header is ever needed to judge it, a
 * caller can MSG_PEEK, parse, and on PP_NEED_MORE consume everything it
 * peeked (it is all header), on PP_OK consume exactly hdr.len: the bytes
 * after the header (a Kafka frame, a TLS ClientHello) stay in the socket.
 *
 * Telling a header from a client that sends none (proxy_protocol =
 * optional): pp_detect() looks at the first bytes only. A header starts
 * with 'P' (v1) or '\r' (v2); a Kafka request starts with the high byte of
 * its size (0x50 and 0x0D would be frames of 1.3 GB and 218 MB, above any
 * max_frame_bytes a broker accepts) and a TLS record with 0x16 0x03. So the
 * first byte alone says PP_DETECT_NONE for every Kafka or TLS client.
 *
 * Return convention: pp_parse returns enum pp_status (PP_OK = 0,
 * PP_NEED_MORE = 1, PP_MALFORMED = -1, the values of the codec's tri-state);
 * on PP_MALFORMED hdr->reason says why (pp_reason_str gives a stable
 * snake_case name fit for a metric label).
 */
#ifndef FERRY_WORKER_PROXYPROTO_H
#define FERRY_WORKER_PROXYPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define PP_V1_MAX 107           /* longest v1 line, CRLF included */
#define PP_V2_SIG_LEN 12
#define PP_V2_FIXED 16          /* signature, ver/cmd, family, length */
#define PP_MAX_HEADER 4096      /* largest header accepted (v2: 16 + length) */

enum pp_status { PP_OK = 0, PP_NEED_MORE = 1, PP_MALFORMED = -1 };
/* "ok", "need-more", "malformed". */
const char *pp_status_str(enum pp_status s);

enum pp_reason {
	PP_R_NONE = 0,
	PP_R_NOT_PROXY,         /* neither "PROXY " nor the v2 signature */
	PP_R_V1_TOO_LONG,       /* no CRLF in the first 107 bytes */
	PP_R_V1_SYNTAX,         /* a byte the v1 grammar has no place for, a
	                           protocol other than TCP4/TCP6/UNKNOWN, a lone
	                           CR or LF */
	PP_R_V1_ADDRESS,        /* an address that is not of the family given,
	                           leading zeros, an octet above 255 */
	PP_R_V1_PORT,           /* a port above 65535 or with leading zeros */
	PP_R_V2_VERSION,        /* version nibble other than 2 */
	PP_R_V2_COMMAND,        /* command other than LOCAL (0) or PROXY (1) */
	PP_R_V2_FAMILY,         /* address family above 3 or transport above 2 */
	PP_R_V2_TOO_LARGE,      /* 16 + length above PP_MAX_HEADER */
	PP_R_V2_LENGTH,         /* length shorter than the family's addresses */
	PP_R_V2_TLV,            /* a TLV that runs past the header */
	PP_R_V2_CRC,            /* a CRC32C TLV of the wrong size or value */
	PP_R_COUNT,
};
/* "none", "not_proxy", "v1_too_long", "v1_syntax", "v1_address", "v1_port",
 * "v2_version", "v2_command", "v2_family", "v2_too_large", "v2_length",
 * "v2_tlv", "v2_crc". */
const char *pp_reason_str(enum pp_reason r);

enum pp_command {
	PP_CMD_PROXY = 0,       /* relayed: the addresses are the client's */
	PP_CMD_LOCAL,           /* v2 LOCAL: the balancer's own connection */
	PP_CMD_UNKNOWN,         /* v1 "PROXY UNKNOWN": use the real endpoints */
};
/* "PROXY", "LOCAL", "UNKNOWN". */
const char *pp_command_str(enum pp_command c);

enum pp_family {
	PP_FAM_UNSPEC = 0,      /* no address to use (LOCAL, UNKNOWN,
	                           AF_UNSPEC, datagram transports) */
	PP_FAM_TCP4,
	PP_FAM_TCP6,
	PP_FAM_UNIX,            /* v2 AF_UNIX stream, sun_path 108 bytes as sent */
};
/* "UNSPEC", "TCP4", "TCP6", "UNIX". */
const char *pp_family_str(enum pp_family f);

struct pp_header {
	int version;                    /* 1 or 2 */
	enum pp_command command;
	enum pp_family family;
	/* Set when family != PP_FAM_UNSPEC: AF_INET / AF_INET6 with address and
	 * port (network order, as in any sockaddr), or AF_UNIX with the 108
	 * bytes sent (not necessarily NUL-terminated; an abstract name starts
	 * with NUL). Zeroed otherwise. */
	struct sockaddr_storage src, dst;
	size_t len;                     /* bytes of the header, to consume */
	/* v2 TLVs, as offsets into the parsed buffer (0/0 when none): walk them
	 * with pp_tlv_find. */
	size_t tlv_off, tlv_len;
	unsigned tlv_count;
	enum pp_reason reason;          /* PP_R_NONE unless PP_MALFORMED */
};

enum pp_detect {
	PP_DETECT_NEED_MORE = 0,        /* n == 0, or a strict prefix of both */
	PP_DETECT_NONE,                 /* not a PROXY header */
	PP_DETECT_V1,                   /* starts with "PROXY " */
	PP_DETECT_V2,                   /* starts with the 12-byte signature */
};
/* "need-more", "none", "v1", "v2". */
const char *pp_detect_str(enum pp_detect d);

/* Whether the n bytes at buf begin a PROXY header. Decides on the first
 * byte that differs from both signatures: one byte for any Kafka or TLS
 * client, at most 6 (v1) or 12 (v2) bytes for a header. */
enum pp_detect pp_detect(const uint8_t *buf, size_t n);

/*
 * Parses the header at the start of buf[0..n). PP_OK fills *hdr (hdr->len
 * bytes form the header; what follows is the client's); PP_NEED_MORE when
 * the n bytes are a valid beginning (hdr->reason PP_R_NONE);
 * PP_MALFORMED with hdr->reason otherwise. Never reads past buf[n-1] and
 * never needs more than PP_MAX_HEADER bytes.
 */
int pp_parse(const uint8_t *buf, size_t n, struct pp_header *hdr);

/* Whether the header carries a client address to use in place of the
 * socket's (command PROXY and a family other than UNSPEC). */
bool pp_has_address(const struct pp_header *hdr);

/*
 * The first TLV of type `type` in a v2 header parsed with PP_OK from the
 * same buf: 0 with *val / *val_len set (inside buf), -1 when there is none.
 * TLVs were checked by pp_parse, so this cannot run off the header.
 */
int pp_tlv_find(const uint8_t *buf, const struct pp_header *hdr, uint8_t type,
		const uint8_t **val, size_t *val_len);

/* TLV types of the spec (section 2.2). */
#define PP2_TYPE_ALPN		0x01
#define PP2_TYPE_AUTHORITY	0x02
#define PP2_TYPE_CRC32C		0x03
#define PP2_TYPE_NOOP		0x04
#define PP2_TYPE_UNIQUE_ID	0x05
#define PP2_TYPE_SSL		0x20
#define PP2_TYPE_NETNS		0x30

#endif
