/*
 * test_config_oom — out of memory in the config parser is an error, never a
 * crash or abort(): allocation-failure injection over every allocation that
 * parsing, the canonical text and the error list make.
 *
 * This binary is linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,
 * --wrap=strdup,--wrap=free (tests/unit/meson.build), so every call to those from
 * ferry's own objects (common/config*.c, units.c, file.c and this file) goes
 * through the __wrap_ functions below. When armed, they fail either the Nth
 * call only (one failure, then memory "comes back") or every call from the
 * Nth on (memory stays exhausted). Each test first counts the calls of a
 * clean run, then loops N over every one of them and checks: no crash, the
 * documented failure result (-1 and an "out of memory" error, or NULL), the
 * output left zeroed, and no leak: the wrappers count live blocks, which
 * must be back to their starting number after every iteration, and under
 * ASan each test ends with a LeakSanitizer check (a leak reported only at
 * exit would not fail a Criterion test).
 */
#include <criterion/criterion.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define LEAK_CHECK() cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, \
	"LeakSanitizer found leaks (see the report above)")
#else
#define LEAK_CHECK() ((void)0)
#endif

/* ---- allocation-failure injection ---- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
void __wrap_free(void *p);

enum oom_mode { OOM_OFF, OOM_COUNT, OOM_ONE, OOM_FROM };

/* volatile: the compiler takes malloc for a builtin that touches no program
 * state, and would otherwise drop the arming store before a direct call. */
static volatile enum oom_mode oom_mode;
static volatile long oom_calls;		/* wrapped calls since arming */
static volatile long oom_at;		/* the call number that fails (1-based) */
static volatile long oom_failed;	/* calls made to fail */
static volatile long oom_live;		/* blocks allocated and not freed */

static bool
oom_fail(void)
{
	if (oom_mode == OOM_OFF)
		return false;
	oom_calls++;
	if ((oom_mode == OOM_ONE && oom_calls == oom_at) ||
	    (oom_mode == OOM_FROM && oom_calls >= oom_at)) {
		oom_failed++;
		return true;
	}
	return false;
}

static void *
oom_new(void *p)
{
	if (p != NULL)
		oom_live++;
	return p;
}

void *
__wrap_malloc(size_t n)
{
	return oom_fail() ? NULL : oom_new(__real_malloc(n));
}

void *
__wrap_calloc(size_t k, size_t n)
{
	return oom_fail() ? NULL : oom_new(__real_calloc(k, n));
}

void *
__wrap_realloc(void *p, size_t n)
{
	void *np;

	if (oom_fail())
		return NULL;
	if ((np = __real_realloc(p, n)) != NULL && p == NULL)
		oom_live++;
	return np;
}

char *
__wrap_strdup(const char *s)
{
	return oom_fail() ? NULL : oom_new(__real_strdup(s));
}

void
__wrap_free(void *p)
{
	if (p != NULL)
		oom_live--;
	__real_free(p);
}

static void
oom_arm(enum oom_mode mode, long at)
{
	oom_mode = mode;
	oom_at = at;
	oom_calls = 0;
	oom_failed = 0;
}

/* Disarms; returns the number of wrapped calls made while armed. */
static long
oom_disarm(void)
{
	oom_mode = OOM_OFF;
	return oom_calls;
}

/* ---- helpers ---- */

/* Every wrapper must be in the link: a strdup/calloc/realloc/malloc that
 * bypassed them would make the loops below cover nothing. */
Test(config_oom, wrappers_are_linked)
{
	oom_arm(OOM_FROM, 1);
	void *a = malloc(8), *b = calloc(1, 8), *c = realloc(NULL, 8);
	char *d = strdup("x");
	oom_disarm();
	cr_assert(a == NULL && b == NULL && c == NULL && d == NULL);
	cr_assert_eq(oom_failed, 4);
}

static const char good_text[] =
	"[ferry]\n"
	"admin_listen = 127.0.0.1:9390\n"
	"drain_timeout = 5s\n"
	"[cluster a]\n"
	"upstream = 127.0.0.1:9092,[::1]:9093,kafka.example:9094\n"
	"bootstrap = 127.0.0.1:9392\n"
	"broker_ports = 9393-9396\n"
	"node_ids = 1-3,7\n"
	"[cluster b]\n"
	"upstream = 127.0.0.1:9092\n"
	"bootstrap = 0.0.0.0:9492\n"
	"advertised_host = proxy.example\n"
	"broker_ports = 9493-9495\n"			/* node ids by default */
	"[cluster c]\n"
	"upstream = h:1\n"
	"bootstrap = 127.0.0.1:9592\n"
	"broker_ports = 9593\n"
	"[cluster d]\n"
	"upstream = h:1\n"
	"bootstrap = 127.0.0.1:9692\n"
	"broker_ports = 9693\n"
	"[cluster e]\n"					/* a 5th: clusters grow */
	"upstream = h:1\n"
	"bootstrap = 127.0.0.1:9792\n"
	"broker_ports = 9793\n";

/* Many errors, so that the error list itself has to grow (8, then 16). */
static const char bad_text[] =
	"[ferry]\n"
	"bogus1 = 1\nbogus2 = 2\nbogus3 = 3\nbogus4 = 4\nbogus5 = 5\n"
	"bogus6 = 6\nbogus7 = 7\nbogus8 = 8\nbogus9 = 9\n"
	"[cluster a]\n"
	"upstream = h:1,h:2\n"
	"node_ids = 1,2,2\n"
	"broker_ports = 9000-9001\n"
	"[cluster b]\n"
	"upstream = h:1\n"
	"bootstrap = 127.0.0.1:9100\n"
	"broker_ports = 9101-9102\n";

static int
is_zero(const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i] != 0)
			return 0;
	return 1;
}

/* The errors after a failed allocation: some error says "out of memory",
 * each is a well-formed string, and the bare CFG_ERR_OOM entry (if any) is
 * the last one. */
static void
check_oom_errors(const struct cfg_errors *e, const char *what, long n)
{
	bool seen = false;

	cr_assert_geq(e->n, 1, "%s, allocation %ld: no error", what, n);
	for (size_t i = 0; i < e->n; i++) {
		cr_assert_not_null(e->msg[i], "%s, allocation %ld: NULL message", what, n);
		if (strstr(e->msg[i], "out of memory") != NULL)
			seen = true;
		if (strcmp(e->msg[i], CFG_ERR_OOM) == 0)
			cr_assert_eq(i, e->n - 1, "%s, allocation %ld: out of memory is "
			    "not the last error", what, n);
		else
			cr_assert(strncmp(e->msg[i], "t.ini:", 6) == 0, "%s, allocation %ld: "
			    "malformed error '%s'", what, n, e->msg[i]);
	}
	cr_assert(seen, "%s, allocation %ld: no 'out of memory' error (first: %s)",
	    what, n, e->msg[0]);
}

/* Parses text with allocation n failing (mode); it must fail cleanly. */
static void
parse_failing(const char *text, enum oom_mode mode, long n, const char *what)
{
	struct cfg c;
	struct cfg_errors e;
	long live = oom_live;
	int rc;

	memset(&c, 0x5a, sizeof c);
	cfg_errors_init(&e);
	oom_arm(mode, n);
	rc = cfg_parse_string("t.ini", text, strlen(text), &c, &e);
	oom_disarm();
	cr_assert_geq(oom_failed, 1, "%s: allocation %ld was never made", what, n);
	cr_assert_eq(rc, -1, "%s: parse succeeded although allocation %ld failed",
	    what, n);
	cr_assert(is_zero(&c, sizeof c), "%s, allocation %ld: cfg not zeroed", what, n);
	check_oom_errors(&e, what, n);
	cfg_errors_free(&e);
	cr_assert_eq(oom_live, live, "%s, allocation %ld: %ld blocks leaked", what, n,
	    oom_live - live);
}

/* Number of allocations a clean parse of text makes; rc must be want_rc. */
static long
count_parse(const char *text, int want_rc)
{
	struct cfg c;
	struct cfg_errors e;
	long n;
	int rc;

	cfg_errors_init(&e);
	oom_arm(OOM_COUNT, 0);
	rc = cfg_parse_string("t.ini", text, strlen(text), &c, &e);
	n = oom_disarm();
	cr_assert_eq(rc, want_rc, "clean parse: %s", e.n ? e.msg[0] : "");
	cfg_free(&c);
	cfg_errors_free(&e);
	return n;
}

/* ---- tests ---- */

Test(config_oom, valid_config_every_allocation_fails_once)
{
	long total = count_parse(good_text, 0);

	cr_assert_geq(total, 10, "only %ld allocations", total);
	for (long n = 1; n <= total; n++)
		parse_failing(good_text, OOM_ONE, n, "valid config, one failure");
	LEAK_CHECK();
}

Test(config_oom, valid_config_memory_exhausted_from_each_allocation)
{
	long total = count_parse(good_text, 0);

	for (long n = 1; n <= total; n++)
		parse_failing(good_text, OOM_FROM, n, "valid config, exhausted");
	LEAK_CHECK();
}

Test(config_oom, invalid_config_every_allocation)
{
	long total = count_parse(bad_text, -1);

	cr_assert_geq(total, 12, "only %ld allocations", total);
	for (long n = 1; n <= total; n++) {
		parse_failing(bad_text, OOM_ONE, n, "invalid config, one failure");
		parse_failing(bad_text, OOM_FROM, n, "invalid config, exhausted");
	}
	LEAK_CHECK();
}

Test(config_oom, parse_file_every_allocation)
{
	char path[] = "/tmp/ferry-test-oom-XXXXXX";
	int fd = mkstemp(path);
	long total;
	struct cfg c;
	struct cfg_errors e;

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, good_text, strlen(good_text)), (ssize_t)strlen(good_text));
	close(fd);

	cfg_errors_init(&e);
	oom_arm(OOM_COUNT, 0);
	cr_assert_eq(cfg_parse_file(path, &c, &e), 0);
	total = oom_disarm();
	cfg_free(&c);
	cfg_errors_free(&e);

	for (long n = 1; n <= total; n++) {
		long live = oom_live;

		memset(&c, 0x5a, sizeof c);
		cfg_errors_init(&e);
		oom_arm(OOM_ONE, n);
		int rc = cfg_parse_file(path, &c, &e);
		oom_disarm();
		cr_assert_eq(rc, -1, "allocation %ld", n);
		cr_assert(is_zero(&c, sizeof c));
		cr_assert_geq(e.n, 1);
		cr_assert(strstr(e.msg[e.n - 1], "out of memory") != NULL, "allocation %ld: %s",
		    n, e.msg[e.n - 1]);
		cfg_errors_free(&e);
		cr_assert_eq(oom_live, live, "allocation %ld: %ld blocks leaked", n,
		    oom_live - live);
	}
	unlink(path);
	LEAK_CHECK();
}

Test(config_oom, canonical_returns_null)
{
	struct cfg c;
	struct cfg_errors e;
	char *text, *good;
	long total;

	cfg_errors_init(&e);
	cr_assert_eq(cfg_parse_string("t.ini", good_text, strlen(good_text), &c, &e), 0);
	oom_arm(OOM_COUNT, 0);
	good = cfg_cluster_canonical(&c.clusters[0]);
	total = oom_disarm();
	cr_assert_not_null(good);
	cr_assert_geq(total, 1);
	for (long n = 1; n <= total; n++) {
		long live = oom_live;

		oom_arm(OOM_ONE, n);
		text = cfg_cluster_canonical(&c.clusters[0]);
		oom_disarm();
		cr_assert_null(text, "allocation %ld failed but text was returned", n);
		cr_assert_eq(oom_live, live, "allocation %ld: leaked", n);
	}
	/* and with memory back, the same text */
	text = cfg_cluster_canonical(&c.clusters[0]);
	cr_assert_str_eq(text, good);
	free(text);
	free(good);
	cfg_free(&c);
	cfg_errors_free(&e);
	LEAK_CHECK();
}

Test(config_oom, error_list_first_allocation)
{
	struct cfg_errors e;

	/* the message cannot be allocated: the static list takes over */
	cfg_errors_init(&e);
	oom_arm(OOM_ONE, 1);
	cfg_errors_add(&e, "t.ini:1: first");
	oom_disarm();
	cr_assert_eq(e.n, 1);
	cr_assert(e.oom);
	cr_assert_str_eq(e.msg[0], "out of memory");
	/* closed: later errors are dropped, "out of memory" stays last */
	cfg_errors_add(&e, "t.ini:2: second");
	cr_assert_eq(e.n, 1);
	cfg_errors_free(&e);
	cr_assert_eq(e.n, 0);
	cr_assert_null(e.msg);
	cr_assert(!e.oom);

	/* the message is allocated, the list is not */
	cfg_errors_init(&e);
	oom_arm(OOM_ONE, 2);
	cfg_errors_add(&e, "t.ini:1: first");
	oom_disarm();
	cr_assert_eq(e.n, 1);
	cr_assert_str_eq(e.msg[0], "out of memory");
	cfg_errors_free(&e);

	/* reusable after free */
	cfg_errors_add(&e, "t.ini:3: again");
	cr_assert_eq(e.n, 1);
	cr_assert_str_eq(e.msg[0], "t.ini:3: again");
	cfg_errors_free(&e);
}

Test(config_oom, error_list_cannot_grow)
{
	struct cfg_errors e;
	char want[32];
	size_t i, cap;

	cfg_errors_init(&e);
	for (i = 0; i < 7; i++)
		cfg_errors_add(&e, "t.ini:%zu: error", i + 1);
	cr_assert_eq(e.n, 7);
	cap = e.cap;
	/* the 8th needs the list to grow (one slot stays in reserve) */
	oom_arm(OOM_FROM, 2);
	cfg_errors_add(&e, "t.ini:8: error");
	oom_disarm();
	cr_assert_eq(e.cap, cap, "the list grew");
	cr_assert_eq(e.n, 8);
	cr_assert(e.oom);
	for (i = 0; i < 7; i++) {
		snprintf(want, sizeof want, "t.ini:%zu: error", i + 1);
		cr_assert_str_eq(e.msg[i], want);
	}
	cr_assert_str_eq(e.msg[7], "out of memory");
	cfg_errors_add(&e, "t.ini:9: dropped");
	cr_assert_eq(e.n, 8);
	cfg_errors_free(&e);
}
