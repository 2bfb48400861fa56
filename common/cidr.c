/*
 * cidr — CIDR lists and address matching; see cidr.h for the syntax and the
 * IPv4-mapped rule.
 */
#include "common/cidr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const uint8_t cidr_mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

static void __attribute__((format(printf, 3, 4)))
cidr_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Whether the bits of a after the first `prefix` are all zero. */
static bool
cidr_host_bits_clear(const uint8_t *a, size_t bytes, unsigned prefix)
{
	for (size_t i = prefix / 8; i < bytes; i++) {
		uint8_t mask = i == prefix / 8 ? (uint8_t)(0xffu >> (prefix % 8)) : 0xff;
		if (a[i] & mask)
			return false;
	}
	return true;
}

static void
cidr_mask(uint8_t *a, size_t bytes, unsigned prefix)
{
	for (size_t i = prefix / 8; i < bytes; i++)
		a[i] &= i == prefix / 8 ? (uint8_t)~(0xffu >> (prefix % 8)) : 0;
}

int
cidr_parse(const char *s, size_t len, struct cidr *out, char *err, size_t errlen)
{
	char text[CIDR_TEXT_MAX + 1], shown[CIDR_TEXT_MAX + 1];
	const char *slash;
	size_t alen;
	unsigned prefix = 0, maxp;
	bool has_prefix;
	uint8_t a[16] = { 0 };
	struct cidr c = { .prefix = 0 };

	if (len == 0) {
		cidr_err(err, errlen, "empty network");
		return -1;
	}
	if (len > CIDR_TEXT_MAX) {
		cidr_err(err, errlen, "'%.20s...': not an IPv4 or IPv6 network (too long)", s);
		return -1;
	}
	memcpy(text, s, len);
	text[len] = '\0';
	slash = memchr(text, '/', len);
	alen = slash ? (size_t)(slash - text) : len;
	has_prefix = slash != NULL;
	if (has_prefix) {
		const char *p = slash + 1;
		size_t plen = len - alen - 1;

		if (plen == 0 || plen > 3 || (plen > 1 && p[0] == '0')) {
			cidr_err(err, errlen, "'%s': prefix length must be a decimal number "
			    "without leading zeros", text);
			return -1;
		}
		for (size_t i = 0; i < plen; i++) {
			if (p[i] < '0' || p[i] > '9') {
				cidr_err(err, errlen, "'%s': prefix length must be a decimal "
				    "number without leading zeros", text);
				return -1;
			}
			prefix = prefix * 10 + (unsigned)(p[i] - '0');
		}
	}
	text[alen] = '\0';
	if (inet_pton(AF_INET, text, a) == 1) {
		c.v4 = true;
		maxp = 32;
	} else if (inet_pton(AF_INET6, text, a) == 1) {
		maxp = 128;
	} else {
		if (has_prefix)
			text[alen] = '/';
		cidr_err(err, errlen, "'%s': not an IPv4 or IPv6 address%s", text,
		    memchr(text, '%', len) ? " (zone ids are not supported)" : "");
		return -1;
	}
	if (has_prefix)
		text[alen] = '/';
	if (!has_prefix)
		prefix = maxp;
	if (prefix > maxp) {
		cidr_err(err, errlen, "'%s': prefix length %u is above %u for an %s network",
		    text, prefix, maxp, c.v4 ? "IPv4" : "IPv6");
		return -1;
	}
	if (!cidr_host_bits_clear(a, maxp / 8, prefix)) {
		struct cidr net = { .prefix = (uint8_t)prefix, .v4 = c.v4 };
		memcpy(net.addr, a, maxp / 8);
		cidr_mask(net.addr, maxp / 8, prefix);
		if (cidr_format(&net, shown, sizeof shown) < 0)
			shown[0] = '\0';
		cidr_err(err, errlen, "'%s': bits set after the /%u prefix (the network is %s; "
		    "a single host is written without a prefix)", text, prefix, shown);
		return -1;
	}
	/* ::ffff:a.b.c.d/96+n is the IPv4 network a.b.c.d/n. */
	if (!c.v4 && prefix >= 96 && memcmp(a, cidr_mapped, 12) == 0) {
		memmove(a, a + 12, 4);
		memset(a + 4, 0, 12);
		prefix -= 96;
		c.v4 = true;
	}
	memcpy(c.addr, a, 16);
	c.prefix = (uint8_t)prefix;
	*out = c;
	return 0;
}

int
cidr_list_parse(const char *s, struct cidr_list *out, char *err, size_t errlen)
{
	const char *p = s;
	size_t n = 0;

	out->n = 0;
	for (;;) {
		const char *start, *end, *comma;

		while (*p == ' ' || *p == '\t')
			p++;
		start = p;
		comma = strchr(p, ',');
		end = comma ? comma : p + strlen(p);
		p = end;
		while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
		if (end == start) {
			if (n == 0 && comma == NULL)
				cidr_err(err, errlen, "empty list of networks");
			else
				cidr_err(err, errlen, "entry %zu of the list of networks is "
				    "empty", n + 1);
			out->n = 0;
			return -1;
		}
		if (n == CIDR_LIST_MAX) {
			cidr_err(err, errlen, "more than %d networks", CIDR_LIST_MAX);
			out->n = 0;
			return -1;
		}
		if (cidr_parse(start, (size_t)(end - start), &out->e[n], err, errlen) < 0) {
			out->n = 0;
			return -1;
		}
		n++;
		if (comma == NULL)
			break;
		p = comma + 1;
	}
	out->n = n;
	return 0;
}

/* The address of sa as 16 bytes and whether it is IPv4 (mapped included).
 * -1 for other families. */
static int
cidr_peer(const struct sockaddr *sa, uint8_t a[16], bool *v4)
{
	memset(a, 0, 16);
	if (sa->sa_family == AF_INET) {
		memcpy(a, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
		*v4 = true;
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const uint8_t *b = ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr;
		if (memcmp(b, cidr_mapped, 12) == 0) {
			memcpy(a, b + 12, 4);
			*v4 = true;
		} else {
			memcpy(a, b, 16);
			*v4 = false;
		}
		return 0;
	}
	return -1;
}

static bool
cidr_in(const struct cidr *c, const uint8_t a[16], bool v4)
{
	unsigned full = c->prefix / 8, rest = c->prefix % 8;

	if (c->v4 != v4)
		return false;
	if (memcmp(a, c->addr, full) != 0)
		return false;
	if (rest == 0)
		return true;
	return ((a[full] ^ c->addr[full]) & (uint8_t)(0xff00u >> rest)) == 0;
}

bool
cidr_contains(const struct cidr *c, const struct sockaddr *sa)
{
	uint8_t a[16];
	bool v4;

	return cidr_peer(sa, a, &v4) == 0 && cidr_in(c, a, v4);
}

bool
cidr_list_match(const struct cidr_list *l, const struct sockaddr *sa)
{
	uint8_t a[16];
	bool v4;

	if (cidr_peer(sa, a, &v4) < 0)
		return false;
	for (size_t i = 0; i < l->n; i++)
		if (cidr_in(&l->e[i], a, v4))
			return true;
	return false;
}

int
cidr_format(const struct cidr *c, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN];
	int n;

	if (inet_ntop(c->v4 ? AF_INET : AF_INET6, c->addr, ip, sizeof ip) == NULL)
		return -1;
	n = snprintf(buf, len, "%s/%u", ip, (unsigned)c->prefix);
	return n < 0 || (size_t)n >= len ? -1 : n;
}

int
cidr_list_format(const struct cidr_list *l, char *buf, size_t len)
{
	size_t used = 0;

	if (len == 0)
		return -1;
	buf[0] = '\0';
	for (size_t i = 0; i < l->n; i++) {
		int n;

		if (i > 0) {
			if (len - used < 3)
				return -1;
			memcpy(buf + used, ", ", 3);
			used += 2;
		}
		n = cidr_format(&l->e[i], buf + used, len - used);
		if (n < 0)
			return -1;
		used += (size_t)n;
	}
	return (int)used;
}
