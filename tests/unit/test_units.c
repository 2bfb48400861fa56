/*
 * test_units — unit tests for common/units.c: every parser's accepted
 * forms, its rejections (with the exact reason text where the reason is
 * part of the user-facing contract), overflow edges, and that the printers
 * produce text the parsers read back to the same value.
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "common/units.h"

static uint64_t
dur_ok(const char *s)
{
	char err[256] = "";
	uint64_t v = 12345;

	cr_assert_eq(units_parse_duration_ms(s, &v, err, sizeof err), 0,
	    "'%s' rejected: %s", s, err);
	return v;
}

static const char *
dur_bad(const char *s, char *err, size_t len)
{
	uint64_t v = 777;

	err[0] = '\0';
	cr_assert_eq(units_parse_duration_ms(s, &v, err, len), -1,
	    "'%s' accepted", s);
	cr_assert_eq(v, 777, "output written on failure");
	cr_assert_neq(err[0], '\0', "no reason for '%s'", s);
	return err;
}

static uint64_t
size_ok(const char *s)
{
	char err[256] = "";
	uint64_t v = 12345;

	cr_assert_eq(units_parse_size(s, &v, err, sizeof err), 0,
	    "'%s' rejected: %s", s, err);
	return v;
}

static const char *
size_bad(const char *s, char *err, size_t len)
{
	uint64_t v;

	err[0] = '\0';
	cr_assert_eq(units_parse_size(s, &v, err, len), -1, "'%s' accepted", s);
	cr_assert_neq(err[0], '\0');
	return err;
}

Test(units_duration, accepts_units)
{
	cr_assert_eq(dur_ok("500ms"), 500);
	cr_assert_eq(dur_ok("30s"), 30000);
	cr_assert_eq(dur_ok("10m"), 600000);
	cr_assert_eq(dur_ok("1h"), 3600000);
	cr_assert_eq(dur_ok("0"), 0);
	cr_assert_eq(dur_ok("0s"), 0);
	cr_assert_eq(dur_ok("0ms"), 0);
	cr_assert_eq(dur_ok("  5s\t"), 5000);
	cr_assert_eq(dur_ok("007s"), 7000);
	cr_assert_eq(dur_ok("18446744073709551615ms"), UINT64_MAX);
	cr_assert_eq(dur_ok("5124095576030h"), 5124095576030ULL * 3600000);
}

Test(units_duration, rejects_malformed)
{
	char err[256];

	cr_assert_str_eq(dur_bad("30", err, sizeof err),
	    "invalid duration '30': missing unit (ms, s, m or h)");
	cr_assert_str_eq(dur_bad("", err, sizeof err), "empty duration");
	cr_assert_str_eq(dur_bad("5x", err, sizeof err),
	    "invalid duration '5x' (units: ms, s, m, h)");
	dur_bad("5S", err, sizeof err);
	dur_bad("5 s", err, sizeof err);
	dur_bad("-5s", err, sizeof err);
	dur_bad("+5s", err, sizeof err);
	dur_bad("s", err, sizeof err);
	dur_bad("1.5s", err, sizeof err);
	dur_bad("5sec", err, sizeof err);
	dur_bad("5d", err, sizeof err);
}

Test(units_duration, rejects_overflow)
{
	char err[256];

	/* digits alone overflow */
	cr_assert_str_eq(dur_bad("18446744073709551616ms", err, sizeof err),
	    "duration '18446744073709551616ms' is too large");
	/* digits fit, the multiplication does not */
	cr_assert_str_eq(dur_bad("5124095576031h", err, sizeof err),
	    "duration '5124095576031h' is too large");
	dur_bad("18446744073709552s", err, sizeof err);
	dur_bad("99999999999999999999999999", err, sizeof err);
}

Test(units_duration, small_error_buffer_is_safe)
{
	char err[8];
	uint64_t v;

	cr_assert_eq(units_parse_duration_ms("bogus", &v, err, sizeof err), -1);
	cr_assert_eq(strlen(err), 7);
	cr_assert_eq(units_parse_duration_ms("bogus", &v, NULL, 0), -1);
}

Test(units_size, accepts_units)
{
	cr_assert_eq(size_ok("0"), 0);
	cr_assert_eq(size_ok("123"), 123);
	cr_assert_eq(size_ok("123B"), 123);
	cr_assert_eq(size_ok("512KiB"), 512 * 1024);
	cr_assert_eq(size_ok("100MiB"), 100ULL << 20);
	cr_assert_eq(size_ok("1GiB"), 1ULL << 30);
	cr_assert_eq(size_ok(" 2MiB "), 2ULL << 20);
	cr_assert_eq(size_ok("17179869183GiB"), 17179869183ULL << 30);
}

Test(units_size, rejects_decimal_units_with_hint)
{
	char err[256];

	cr_assert_str_eq(size_bad("10MB", err, sizeof err),
	    "invalid size '10MB' (use KiB/MiB/GiB, powers of 1024)");
	cr_assert(strstr(size_bad("10KB", err, sizeof err), "KiB/MiB/GiB"));
	cr_assert(strstr(size_bad("10k", err, sizeof err), "KiB/MiB/GiB"));
	cr_assert(strstr(size_bad("1G", err, sizeof err), "KiB/MiB/GiB"));
}

Test(units_size, rejects_malformed)
{
	char err[256];

	cr_assert_str_eq(size_bad("10XB", err, sizeof err),
	    "invalid size '10XB' (use B, KiB, MiB or GiB)");
	cr_assert_str_eq(size_bad("", err, sizeof err), "empty size");
	size_bad("MiB", err, sizeof err);
	size_bad("10 MiB", err, sizeof err);
	size_bad("10mib", err, sizeof err);
	size_bad("-1", err, sizeof err);
	size_bad("1.5MiB", err, sizeof err);
	size_bad("1TiB", err, sizeof err);
}

Test(units_size, rejects_overflow)
{
	char err[256];

	cr_assert_str_eq(size_bad("17179869184GiB", err, sizeof err),
	    "size '17179869184GiB' is too large");
	size_bad("18446744073709551616", err, sizeof err);
	size_bad("18014398509481984KiB", err, sizeof err);
}

Test(units_u64, range_and_syntax)
{
	char err[256];
	uint64_t v;

	cr_assert_eq(units_parse_u64("42", 1, 100, &v, err, sizeof err), 0);
	cr_assert_eq(v, 42);
	cr_assert_eq(units_parse_u64("1", 1, 100, &v, err, sizeof err), 0);
	cr_assert_eq(units_parse_u64("100", 1, 100, &v, err, sizeof err), 0);
	cr_assert_eq(units_parse_u64("101", 1, 100, &v, err, sizeof err), -1);
	cr_assert_str_eq(err, "101 out of range (1-100)");
	cr_assert_eq(units_parse_u64("0", 1, 100, &v, err, sizeof err), -1);
	cr_assert_eq(units_parse_u64("", 1, 100, &v, err, sizeof err), -1);
	cr_assert_eq(units_parse_u64("12a", 1, 100, &v, err, sizeof err), -1);
	cr_assert_str_eq(err, "invalid number '12a'");
	cr_assert_eq(units_parse_u64("-1", 0, 100, &v, err, sizeof err), -1);
	cr_assert_eq(units_parse_u64("18446744073709551615", 0, UINT64_MAX, &v,
	    err, sizeof err), 0);
	cr_assert_eq(v, UINT64_MAX);
	cr_assert_eq(units_parse_u64("18446744073709551616", 0, UINT64_MAX, &v,
	    err, sizeof err), -1);
}

static void
addr_ok(const char *s, const char *host, unsigned port)
{
	struct cfg_addr a;
	char err[256] = "";

	memset(&a, 0x55, sizeof a);
	cr_assert_eq(units_parse_addr(s, &a, 0, err, sizeof err), 0,
	    "'%s' rejected: %s", s, err);
	cr_assert_str_eq(a.host, host);
	cr_assert_eq(a.port, port);
}

static const char *
addr_bad(const char *s, int allow_zero, char *err, size_t len)
{
	struct cfg_addr a;

	err[0] = '\0';
	cr_assert_eq(units_parse_addr(s, &a, allow_zero, err, len), -1,
	    "'%s' accepted", s);
	cr_assert_neq(err[0], '\0');
	return err;
}

Test(units_addr, accepts)
{
	addr_ok("127.0.0.1:9092", "127.0.0.1", 9092);
	addr_ok("kafka-1.example:9092", "kafka-1.example", 9092);
	addr_ok("under_score:1", "under_score", 1);
	addr_ok("[::1]:9092", "::1", 9092);
	addr_ok("[::]:65535", "::", 65535);
	addr_ok("[fe80::1:2]:80", "fe80::1:2", 80);
	addr_ok(" 0.0.0.0:9192 ", "0.0.0.0", 9192);
}

Test(units_addr, port_zero_only_when_allowed)
{
	struct cfg_addr a;
	char err[256];

	cr_assert_str_eq(addr_bad("h:0", 0, err, sizeof err),
	    "invalid address 'h:0': port must be 1-65535");
	cr_assert_eq(units_parse_addr("h:0", &a, 1, err, sizeof err), 0);
	cr_assert_eq(a.port, 0);
}

Test(units_addr, rejects)
{
	char err[256];
	char longhost[300];

	cr_assert_str_eq(addr_bad("::1:9092", 0, err, sizeof err),
	    "invalid address '::1:9092' (write IPv6 addresses as [addr]:port)");
	cr_assert_str_eq(addr_bad("localhost", 0, err, sizeof err),
	    "invalid address 'localhost' (expected host:port)");
	cr_assert_str_eq(addr_bad(":9092", 0, err, sizeof err),
	    "invalid address ':9092': empty host");
	cr_assert_str_eq(addr_bad("[]:9092", 0, err, sizeof err),
	    "invalid address '[]:9092' (brackets are only for IPv6 addresses)");
	addr_bad("h:65536", 0, err, sizeof err);
	addr_bad("h:", 0, err, sizeof err);
	addr_bad("h:12x", 0, err, sizeof err);
	addr_bad("h:-1", 0, err, sizeof err);
	addr_bad("h:+1", 0, err, sizeof err);
	addr_bad("[::1]9092", 0, err, sizeof err);
	addr_bad("[::1]", 0, err, sizeof err);
	addr_bad("[::1", 0, err, sizeof err);
	addr_bad("[localhost]:1", 0, err, sizeof err);
	addr_bad("bad host:1", 0, err, sizeof err);
	addr_bad("bad/host:1", 0, err, sizeof err);
	addr_bad("", 0, err, sizeof err);

	memset(longhost, 'a', 256);
	strcpy(longhost + 256, ":1");
	cr_assert_str_eq(addr_bad(longhost, 0, err, sizeof err),
	    "invalid address: host longer than 255 characters");
}

Test(units_addr, longest_host_fits)
{
	struct cfg_addr a;
	char s[300], err[256];

	memset(s, 'h', 255);
	strcpy(s + 255, ":7");
	cr_assert_eq(units_parse_addr(s, &a, 0, err, sizeof err), 0, "%s", err);
	cr_assert_eq(strlen(a.host), 255);
	cr_assert_eq(a.port, 7);
}

Test(units_port_range, accepts)
{
	uint16_t a = 0, b = 0;
	char err[256];

	cr_assert_eq(units_parse_port_range("9193-9195", &a, &b, err, sizeof err), 0);
	cr_assert_eq(a, 9193);
	cr_assert_eq(b, 9195);
	cr_assert_eq(units_parse_port_range("9193", &a, &b, err, sizeof err), 0);
	cr_assert_eq(a, 9193);
	cr_assert_eq(b, 9193);
	cr_assert_eq(units_parse_port_range("1-65535", &a, &b, err, sizeof err), 0);
	cr_assert_eq(a, 1);
	cr_assert_eq(b, 65535);
	cr_assert_eq(units_parse_port_range("5-5", &a, &b, err, sizeof err), 0);
}

Test(units_port_range, rejects)
{
	static const char *const bad[] = {
		"", "0-5", "1-65536", "a-b", "-", "9193-", "-9193", "1-2-3",
		"9193 - 9195", "70000",
	};
	uint16_t a = 1, b = 2;
	char err[256];
	size_t i;

	cr_assert_eq(units_parse_port_range("9195-9193", &a, &b, err, sizeof err), -1);
	cr_assert_str_eq(err,
	    "invalid port range '9195-9193' (first port greater than last)");
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		cr_assert_eq(units_parse_port_range(bad[i], &a, &b, err,
		    sizeof err), -1, "'%s' accepted", bad[i]);
		cr_assert_neq(err[0], '\0');
	}
	cr_assert_eq(a, 1);
	cr_assert_eq(b, 2);
}

static void
list_ok(const char *s, const int32_t *want, size_t nwant)
{
	int32_t *v = NULL;
	size_t n = 0, i;
	char err[256] = "";

	cr_assert_eq(units_parse_int_list(s, &v, &n, err, sizeof err), 0,
	    "'%s' rejected: %s", s, err);
	cr_assert_eq(n, nwant, "'%s': %zu entries", s, n);
	for (i = 0; i < n; i++)
		cr_assert_eq(v[i], want[i], "'%s'[%zu] = %d", s, i, (int)v[i]);
	free(v);
}

Test(units_int_list, accepts)
{
	list_ok("1-3", (int32_t[]){ 1, 2, 3 }, 3);
	list_ok("1,2,5", (int32_t[]){ 1, 2, 5 }, 3);
	list_ok("0-2,7", (int32_t[]){ 0, 1, 2, 7 }, 4);
	list_ok(" 5 , 3 - 4 ", (int32_t[]){ 5, 3, 4 }, 3);
	list_ok("0", (int32_t[]){ 0 }, 1);
	list_ok("2147483647", (int32_t[]){ INT32_MAX }, 1);
	list_ok("2147483646-2147483647",
	    (int32_t[]){ INT32_MAX - 1, INT32_MAX }, 2);
}

Test(units_int_list, rejects)
{
	static const char *const bad[] = {
		"", "1,,2", "1,", ",1", "3-1", "1,1", "1-3,2", "-1", "a",
		"2147483648", "1-", "1 2", "0-2147483647",
	};
	int32_t *v = NULL;
	size_t n = 99, i;
	char err[256];

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		cr_assert_eq(units_parse_int_list(bad[i], &v, &n, err,
		    sizeof err), -1, "'%s' accepted", bad[i]);
		cr_assert_neq(err[0], '\0');
		cr_assert_null(v);
		cr_assert_eq(n, 99);
	}
	units_parse_int_list("1-3,2", &v, &n, err, sizeof err);
	cr_assert_str_eq(err, "duplicate id 2 in '1-3,2'");
	units_parse_int_list("0-2147483647", &v, &n, err, sizeof err);
	cr_assert_str_eq(err, "list '0-2147483647' has more than 65536 entries");
}

Test(units_fmt, duration)
{
	static const struct {
		uint64_t ms;
		const char *s;
	} t[] = {
		{ 0, "0" }, { 1, "1ms" }, { 500, "500ms" }, { 1500, "1500ms" },
		{ 30000, "30s" }, { 90000, "90s" }, { 600000, "10m" },
		{ 3600000, "1h" }, { 5400000, "90m" }, { 7200000, "2h" },
		{ UINT64_MAX, "18446744073709551615ms" },
	};
	char buf[64];
	size_t i;

	for (i = 0; i < sizeof t / sizeof t[0]; i++) {
		units_fmt_duration(t[i].ms, buf, sizeof buf);
		cr_assert_str_eq(buf, t[i].s);
		cr_assert_eq(dur_ok(buf), t[i].ms, "round trip of %s", buf);
	}
}

Test(units_fmt, size)
{
	static const struct {
		uint64_t b;
		const char *s;
	} t[] = {
		{ 0, "0B" }, { 1023, "1023B" }, { 1024, "1KiB" },
		{ 1536, "1536B" }, { 100ULL << 20, "100MiB" },
		{ 1ULL << 30, "1GiB" }, { 1ULL << 40, "1024GiB" },
		{ (1ULL << 20) + 1024, "1025KiB" },
	};
	char buf[64];
	size_t i;

	for (i = 0; i < sizeof t / sizeof t[0]; i++) {
		units_fmt_size(t[i].b, buf, sizeof buf);
		cr_assert_str_eq(buf, t[i].s);
		cr_assert_eq(size_ok(buf), t[i].b, "round trip of %s", buf);
	}
}

Test(units_fmt, addr)
{
	struct cfg_addr a = { .host = "::1", .port = 9092 }, b;
	char buf[300], err[256];

	units_fmt_addr(&a, buf, sizeof buf);
	cr_assert_str_eq(buf, "[::1]:9092");
	cr_assert_eq(units_parse_addr(buf, &b, 0, err, sizeof err), 0);
	cr_assert_str_eq(b.host, "::1");
	cr_assert_eq(b.port, 9092);

	strcpy(a.host, "kafka.example");
	a.port = 1;
	units_fmt_addr(&a, buf, sizeof buf);
	cr_assert_str_eq(buf, "kafka.example:1");
}
