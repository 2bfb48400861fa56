/*
 * test_cidr — unit tests for common/cidr.c, the networks of
 * proxy_protocol_from: the list syntax (blanks, hosts without a prefix,
 * 64 entries and not 65), every error an operator can make (empty list or
 * entry, bad prefix, leading zeros, bits after the prefix with the network
 * named, zone ids, brackets, names), prefix edges (/0, /1, /31, /32, /127,
 * /128), IPv4-mapped peers matched as IPv4 and ::ffff: entries stored as
 * IPv4, IPv6 entries not matching IPv4 peers, other families, and the
 * canonical text read back to the same list.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#include "common/cidr.h"

static struct sockaddr_storage
peer(const char *ip)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof ss);
	if (strchr(ip, ':') != NULL) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(40000);
		cr_assert_eq(inet_pton(AF_INET6, ip, &s6->sin6_addr), 1, "%s", ip);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		s4->sin_port = htons(40000);
		cr_assert_eq(inet_pton(AF_INET, ip, &s4->sin_addr), 1, "%s", ip);
	}
	return ss;
}

static bool
match(const struct cidr_list *l, const char *ip)
{
	struct sockaddr_storage ss = peer(ip);
	return cidr_list_match(l, (const struct sockaddr *)&ss);
}

static void
parse_ok(const char *s, struct cidr_list *l)
{
	char err[256] = "";
	cr_assert_eq(cidr_list_parse(s, l, err, sizeof err), 0, "'%s': %s", s, err);
}

/* Refused, with an error containing `want`. */
static void
parse_bad(const char *s, const char *want)
{
	struct cidr_list l;
	char err[256] = "";

	l.n = 99;
	cr_assert_eq(cidr_list_parse(s, &l, err, sizeof err), -1, "'%s' accepted", s);
	cr_assert_eq(l.n, 0, "'%s': list not emptied", s);
	cr_assert(strstr(err, want) != NULL, "'%s': error '%s' does not say '%s'", s, err, want);
}

static void
fmt_is(const struct cidr_list *l, const char *want)
{
	char buf[CIDR_LIST_MAX * (CIDR_TEXT_MAX + 2)];
	cr_assert_gt(cidr_list_format(l, buf, sizeof buf), 0);
	cr_assert_str_eq(buf, want);
}

Test(cidr, issue_example)
{
	struct cidr_list l;

	parse_ok("10.0.0.0/8, 192.168.1.0/24, ::1/128, 2001:db8::/32", &l);
	cr_assert_eq(l.n, 4);
	cr_assert(match(&l, "10.0.0.0"));
	cr_assert(match(&l, "10.255.255.255"));
	cr_assert(match(&l, "10.1.2.3"));
	cr_assert_not(match(&l, "11.0.0.0"));
	cr_assert_not(match(&l, "9.255.255.255"));
	cr_assert(match(&l, "192.168.1.0"));
	cr_assert(match(&l, "192.168.1.255"));
	cr_assert_not(match(&l, "192.168.2.0"));
	cr_assert_not(match(&l, "192.168.0.255"));
	cr_assert(match(&l, "::1"));
	cr_assert_not(match(&l, "::2"));
	cr_assert_not(match(&l, "::"));
	cr_assert(match(&l, "2001:db8::"));
	cr_assert(match(&l, "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"));
	cr_assert_not(match(&l, "2001:db9::"));
	cr_assert_not(match(&l, "2001:db7:ffff::"));
	fmt_is(&l, "10.0.0.0/8, 192.168.1.0/24, ::1/128, 2001:db8::/32");
}

Test(cidr, ipv4_mapped)
{
	struct cidr_list l;

	/* a dual-stack socket shows an IPv4 client as ::ffff:a.b.c.d */
	parse_ok("10.0.0.0/8", &l);
	cr_assert(match(&l, "::ffff:10.9.9.9"));
	cr_assert_not(match(&l, "::ffff:11.0.0.1"));
	/* ...but not the IPv4-compatible form or the same bits elsewhere */
	cr_assert_not(match(&l, "::10.9.9.9"));
	cr_assert_not(match(&l, "::ffff:0:10.9.9.9"));

	/* an entry written in the mapped form is the IPv4 network */
	parse_ok("::ffff:10.0.0.0/104, ::ffff:192.0.2.1", &l);
	cr_assert(l.e[0].v4);
	cr_assert_eq(l.e[0].prefix, 8);
	cr_assert_eq(l.e[1].prefix, 32);
	cr_assert(match(&l, "10.1.1.1"));
	cr_assert(match(&l, "::ffff:10.1.1.1"));
	cr_assert(match(&l, "192.0.2.1"));
	cr_assert_not(match(&l, "192.0.2.2"));
	fmt_is(&l, "10.0.0.0/8, 192.0.2.1/32");
	parse_ok("::ffff:0.0.0.0/96", &l);
	fmt_is(&l, "0.0.0.0/0");

	/* IPv6 "everything" is not IPv4 "everything" */
	parse_ok("::/0", &l);
	cr_assert(match(&l, "2001:db8::1"));
	cr_assert(match(&l, "::1"));
	cr_assert_not(match(&l, "127.0.0.1"));
	cr_assert_not(match(&l, "::ffff:127.0.0.1"));
	parse_ok("0.0.0.0/0", &l);
	cr_assert(match(&l, "127.0.0.1"));
	cr_assert(match(&l, "255.255.255.255"));
	cr_assert(match(&l, "::ffff:127.0.0.1"));
	cr_assert_not(match(&l, "::1"));
}

Test(cidr, hosts_and_prefix_edges)
{
	struct cidr_list l;

	parse_ok("192.0.2.7", &l);
	cr_assert_eq(l.e[0].prefix, 32);
	cr_assert(match(&l, "192.0.2.7"));
	cr_assert_not(match(&l, "192.0.2.6"));
	fmt_is(&l, "192.0.2.7/32");

	parse_ok("2001:db8::7", &l);
	cr_assert_eq(l.e[0].prefix, 128);
	cr_assert(match(&l, "2001:db8::7"));
	cr_assert_not(match(&l, "2001:db8::6"));

	parse_ok("128.0.0.0/1", &l);
	cr_assert(match(&l, "128.0.0.0"));
	cr_assert(match(&l, "255.1.2.3"));
	cr_assert_not(match(&l, "127.255.255.255"));

	parse_ok("192.0.2.6/31", &l);
	cr_assert(match(&l, "192.0.2.6"));
	cr_assert(match(&l, "192.0.2.7"));
	cr_assert_not(match(&l, "192.0.2.8"));
	cr_assert_not(match(&l, "192.0.2.5"));

	parse_ok("2001:db8::/127", &l);
	cr_assert(match(&l, "2001:db8::1"));
	cr_assert_not(match(&l, "2001:db8::2"));

	parse_ok("2001:db8:8000::/33", &l);
	cr_assert(match(&l, "2001:db8:8000::1"));
	cr_assert(match(&l, "2001:db8:ffff::1"));
	cr_assert_not(match(&l, "2001:db8:7fff::1"));

	parse_ok("255.255.255.255/32, ::/128", &l);
	cr_assert(match(&l, "255.255.255.255"));
	cr_assert(match(&l, "::"));
}

Test(cidr, blanks_and_counts)
{
	struct cidr_list l;
	char buf[CIDR_LIST_MAX * 16 + 32];
	size_t n = 0;

	parse_ok("  10.0.0.0/8 ,\t192.168.0.0/16\t,::1  ", &l);
	cr_assert_eq(l.n, 3);
	cr_assert(match(&l, "192.168.3.4"));

	for (int i = 0; i < CIDR_LIST_MAX; i++)
		n += (size_t)snprintf(buf + n, sizeof buf - n, "%s10.%d.0.0/16", i ? "," : "", i);
	parse_ok(buf, &l);
	cr_assert_eq(l.n, CIDR_LIST_MAX);
	cr_assert(match(&l, "10.63.1.1"));
	cr_assert_not(match(&l, "10.64.1.1"));
	snprintf(buf + n, sizeof buf - n, ",10.200.0.0/16");
	parse_bad(buf, "more than 64 networks");
}

Test(cidr, errors)
{
	parse_bad("", "empty list");
	parse_bad("   ", "empty list");
	parse_bad("10.0.0.0/8,", "entry 2 of the list of networks is empty");
	parse_bad(",10.0.0.0/8", "entry 1 of the list of networks is empty");
	parse_bad("10.0.0.0/8,,::1", "entry 2 of the list of networks is empty");
	parse_bad("10.0.0.0/8, ,::1", "entry 2 of the list of networks is empty");
	parse_bad("10.0.0.1/8", "the network is 10.0.0.0/8");
	parse_bad("192.168.1.1/24", "bits set after the /24 prefix");
	parse_bad("2001:db8::1/32", "the network is 2001:db8::/32");
	parse_bad("0.0.0.1/0", "the network is 0.0.0.0/0");
	parse_bad("10.0.0.0/33", "prefix length 33 is above 32 for an IPv4 network");
	parse_bad("::/129", "above 128 for an IPv6 network");
	parse_bad("10.0.0.0/08", "without leading zeros");
	parse_bad("10.0.0.0/", "prefix length");
	parse_bad("10.0.0.0/a", "prefix length");
	parse_bad("10.0.0.0/-1", "prefix length");
	parse_bad("10.0.0.0/+8", "prefix length");
	parse_bad("10.0.0.0/1000", "prefix length");
	parse_bad("10.0.0.0/8/8", "prefix length");
	parse_bad("010.0.0.0/8", "not an IPv4 or IPv6 address");
	parse_bad("10.0.0/8", "'10.0.0/8': not an IPv4 or IPv6 address");
	parse_bad("10.0.0.256", "not an IPv4 or IPv6 address");
	parse_bad("fe80::1%eth0/64", "zone ids are not supported");
	parse_bad("[::1]/128", "not an IPv4 or IPv6 address");
	parse_bad("kafka.example.com", "not an IPv4 or IPv6 address");
	parse_bad("10.0.0.0 /8", "not an IPv4 or IPv6 address");
	parse_bad("10.0.0.0/8 10.1.0.0/16", "prefix length");
	parse_bad("1111:2222:3333:4444:5555:6666:7777:8888:9999:0000/128", "too long");
	parse_bad("10.0.0.0/8, 10.0.0.1/8", "the network is 10.0.0.0/8");
}

Test(cidr, single_and_other_families)
{
	struct cidr c;
	char err[128];
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	struct cidr_list l;

	cr_assert_eq(cidr_parse("10.0.0.0/8", 10, &c, err, sizeof err), 0);
	struct sockaddr_storage p = peer("10.2.3.4");
	cr_assert(cidr_contains(&c, (const struct sockaddr *)&p));
	p = peer("::ffff:10.2.3.4");
	cr_assert(cidr_contains(&c, (const struct sockaddr *)&p));
	cr_assert_not(cidr_contains(&c, (const struct sockaddr *)&un));
	/* len bounds the entry: the rest of the string is not read */
	cr_assert_eq(cidr_parse("10.0.0.0/8XYZ", 10, &c, err, sizeof err), 0);
	cr_assert_eq(cidr_parse("", 0, &c, err, sizeof err), -1);

	parse_ok("0.0.0.0/0, ::/0", &l);
	cr_assert_not(cidr_list_match(&l, (const struct sockaddr *)&un));
	/* err may be NULL */
	cr_assert_eq(cidr_list_parse("nope", &l, NULL, 0), -1);
}

Test(cidr, format_round_trip)
{
	static const char *const lists[] = {
		"10.0.0.0/8, 192.168.1.0/24, ::1/128, 2001:db8::/32",
		"0.0.0.0/0, ::/0",
		"::ffff:10.0.0.0/104",
		"2001:0DB8:0000::/48, 172.16.0.0/12",
		"fe80::/10, fc00::/7, 100.64.0.0/10, 127.0.0.1",
	};
	for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
		struct cidr_list a, b;
		char buf[1024];

		parse_ok(lists[i], &a);
		cr_assert_gt(cidr_list_format(&a, buf, sizeof buf), 0);
		parse_ok(buf, &b);
		cr_assert_eq(a.n, b.n);
		cr_assert_eq(memcmp(a.e, b.e, a.n * sizeof a.e[0]), 0, "'%s' -> '%s'", lists[i], buf);
		/* too small a buffer is refused, not cut */
		cr_assert_eq(cidr_list_format(&a, buf, strlen(buf)), -1);
	}
	struct cidr_list l;
	char buf[64];
	parse_ok("2001:db8::/32", &l);
	cr_assert_eq(cidr_list_format(&l, buf, sizeof buf), 13);
	cr_assert_str_eq(buf, "2001:db8::/32");
	cr_assert_eq(cidr_format(&l.e[0], buf, 13), -1);
}
