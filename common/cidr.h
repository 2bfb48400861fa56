/*
 * cidr — lists of IPv4 and IPv6 networks written as CIDR blocks, and the
 * test whether an address falls in one: what `proxy_protocol_from =
 * 10.0.0.0/8, 192.168.1.0/24, ::1/128, 2001:db8::/32` means. Pure (no
 * allocation, no I/O); role-free, so in common/: the config parser reads the
 * list, the worker matches accepted peers against it.
 *
 * Syntax: entries separated by commas, blanks around them ignored. An entry
 * is ADDRESS or ADDRESS/PREFIX; without a prefix it is a single host (/32 or
 * /128). IPv4 addresses are dotted quads as inet_pton reads them (four
 * decimal numbers, no leading zeros); IPv6 addresses as inet_pton reads
 * them, without a zone ("%eth0") or brackets. PREFIX is decimal without
 * leading zeros, 0..32 for IPv4 and 0..128 for IPv6. Bits set after the
 * prefix are refused ("10.0.0.1/8" is a typo for a host or for 10.0.0.0/8,
 * and the error names the network). At most CIDR_LIST_MAX entries; an
 * empty list or an empty entry is an error.
 *
 * IPv4 and IPv4-mapped IPv6: a peer on a dual-stack socket shows up as
 * ::ffff:a.b.c.d. Such an address is matched as the IPv4 address it is, and
 * an entry written as ::ffff:a.b.c.d/96+n is stored as a.b.c.d/n. IPv4
 * entries match IPv4 peers (AF_INET or mapped); IPv6 entries match the other
 * IPv6 peers, so "::/0" means every IPv6 client and not the IPv4 ones.
 *
 * Return conventions: 0 / -1 with a message in err (no file:line: the
 * config parser prefixes it).
 */
#ifndef FERRY_COMMON_CIDR_H
#define FERRY_COMMON_CIDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define CIDR_LIST_MAX 64
/* Longest text of one entry: an IPv6 address and "/128". */
#define CIDR_TEXT_MAX (46 + 4)

struct cidr {
	uint8_t addr[16];       /* IPv4: the first 4 bytes, the rest zero */
	uint8_t prefix;         /* bits: 0..32 (IPv4) or 0..128 (IPv6) */
	bool v4;
};

struct cidr_list {
	size_t n;
	struct cidr e[CIDR_LIST_MAX];
};

/* One entry, len bytes at s (no blanks). 0 or -1 with err. */
int cidr_parse(const char *s, size_t len, struct cidr *out, char *err, size_t errlen);

/* A whole list (NUL-terminated). 0, or -1 with err and *out emptied. */
int cidr_list_parse(const char *s, struct cidr_list *out, char *err, size_t errlen);

/* Whether the address (AF_INET or AF_INET6; other families: false) is in
 * the network / in any network of the list. */
bool cidr_contains(const struct cidr *c, const struct sockaddr *sa);
bool cidr_list_match(const struct cidr_list *l, const struct sockaddr *sa);

/* "10.0.0.0/8", "2001:db8::/32" (inet_ntop form, prefix always written)
 * into buf (CIDR_TEXT_MAX is enough). Returns the length, or -1 when it does
 * not fit. */
int cidr_format(const struct cidr *c, char *buf, size_t len);
/* The list as cidr_list_parse reads it back: entries joined by ", ".
 * Returns the length, or -1 when it does not fit. */
int cidr_list_format(const struct cidr_list *l, char *buf, size_t len);

#endif
