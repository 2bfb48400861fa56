/*
 * test_log — the line formatter of common/log.c: field order in logfmt and
 * JSON, escaping of hostile messages and values (quotes, backslashes,
 * control characters, invalid UTF-8: every JSON line must parse and keep
 * the text), truncation that still yields one valid line, the journald
 * priority prefix, and the $JOURNAL_STREAM check.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"

#define T0 1700000000123ULL /* 2023-11-14T22:13:20.123Z */

static const struct log_line_ctx worker_ctx = {
	.proc = "worker", .cluster = "A", .gen = 3, .pid = 4242, .json = false,
};

static char line[4096];

static size_t
fmt(const struct log_line_ctx *ctx, enum log_level l, const char *msg, const char *kv)
{
	size_t n = log_format_line(line, sizeof line, ctx, l, T0, msg, kv);
	cr_assert_lt(n, sizeof line);
	line[n] = '\0';
	return n;
}

static json_t *
parse_line(size_t n)
{
	json_error_t err;
	cr_assert_eq(line[n - 1], '\n');
	cr_assert_null(memchr(line, '\n', n - 1), "more than one line: %s", line);
	json_t *j = json_loadb(line, n - 1, 0, &err);
	cr_assert_not_null(j, "not JSON (%s): %s", err.text, line);
	return j;
}

static const char *
member(json_t *j, const char *k)
{
	json_t *v = json_object_get(j, k);
	cr_assert(json_is_string(v), "member %s missing or not a string in %s", k, line);
	return json_string_value(v);
}

Test(log, logfmt_fields_in_order)
{
	size_t n = fmt(&worker_ctx, LOG_INFO, "worker started", "port=9092 why=\"a b\"");
	cr_assert_str_eq(line, "ts=2023-11-14T22:13:20.123Z level=info proc=worker cluster=A gen=3 "
	    "pid=4242 msg=\"worker started\" port=9092 why=\"a b\"\n");
	cr_assert_eq(n, strlen(line));

	struct log_line_ctx sup = { .proc = "supervisor", .pid = 1 };
	fmt(&sup, LOG_WARN, "x", "");
	cr_assert_str_eq(line, "ts=2023-11-14T22:13:20.123Z level=warn proc=supervisor pid=1 msg=\"x\"\n");
}

Test(log, logfmt_hostile_stays_one_line)
{
	size_t n = fmt(&worker_ctx, LOG_ERROR, "bad \"frame\"\nlevel=debug \\ \x01",
	    "peer=\"1.2.3.4\" error=\"line1\nline2\r\x7f\"");
	cr_assert_null(memchr(line, '\n', n - 1), "%s", line);
	cr_assert_not_null(strstr(line, "msg=\"bad \\\"frame\\\"\\nlevel=debug \\\\ \\x01\""), "%s", line);
	cr_assert_not_null(strstr(line, "error=\"line1\\nline2\\r\\x7f\""), "%s", line);

	/* a cluster name with spaces or quotes is quoted */
	struct log_line_ctx c = worker_ctx;
	c.cluster = "a \"b\"";
	fmt(&c, LOG_INFO, "m", NULL);
	cr_assert_not_null(strstr(line, " cluster=\"a \\\"b\\\"\" gen=3 "), "%s", line);
}

Test(log, json_fields)
{
	struct log_line_ctx c = worker_ctx;
	c.json = true;
	size_t n = fmt(&c, LOG_INFO, "worker started", "port=9092 why=\"a \\\"quoted\\\" b\" flag");
	json_t *j = parse_line(n);
	cr_assert_str_eq(member(j, "ts"), "2023-11-14T22:13:20.123Z");
	cr_assert_str_eq(member(j, "level"), "info");
	cr_assert_str_eq(member(j, "proc"), "worker");
	cr_assert_str_eq(member(j, "cluster"), "A");
	cr_assert_str_eq(member(j, "gen"), "3");
	cr_assert_str_eq(member(j, "pid"), "4242");
	cr_assert_str_eq(member(j, "msg"), "worker started");
	cr_assert_str_eq(member(j, "port"), "9092");
	cr_assert_str_eq(member(j, "why"), "a \"quoted\" b");
	cr_assert_str_eq(member(j, "flag"), "");
	/* order: ts level proc cluster gen pid msg, then the event */
	cr_assert_eq(strncmp(line, "{\"ts\":", 6), 0);
	cr_assert_lt(strstr(line, "\"proc\""), strstr(line, "\"cluster\""));
	cr_assert_lt(strstr(line, "\"gen\""), strstr(line, "\"pid\""));
	cr_assert_lt(strstr(line, "\"msg\""), strstr(line, "\"port\""));
	json_decref(j);
}

Test(log, json_keys_stay_unique)
{
	struct log_line_ctx sup = { .proc = "supervisor", .pid = 1, .json = true };
	size_t n = fmt(&sup, LOG_INFO, "worker started", "cluster=A gen=2 pid=77 msg=x ts=y level=z");
	json_t *j = parse_line(n);
	cr_assert_str_eq(member(j, "pid"), "1");
	cr_assert_str_eq(member(j, "event_pid"), "77");
	cr_assert_str_eq(member(j, "cluster"), "A");      /* not on a supervisor line */
	cr_assert_str_eq(member(j, "gen"), "2");
	cr_assert_str_eq(member(j, "msg"), "worker started");
	cr_assert_str_eq(member(j, "event_msg"), "x");
	cr_assert_str_eq(member(j, "event_ts"), "y");
	cr_assert_str_eq(member(j, "event_level"), "z");
	cr_assert_eq(json_object_size(j), 11, "%s", line);
	json_decref(j);

	struct log_line_ctx w = worker_ctx;
	w.json = true;
	n = fmt(&w, LOG_INFO, "m", "cluster=B gen=9");
	j = parse_line(n);
	cr_assert_str_eq(member(j, "cluster"), "A");
	cr_assert_str_eq(member(j, "event_cluster"), "B");
	cr_assert_str_eq(member(j, "event_gen"), "9");
	json_decref(j);
}

Test(log, json_escapes_hostile_strings)
{
	struct log_line_ctx c = worker_ctx;
	c.json = true;
	c.cluster = "evil\"},{\"x\":\"";
	const char *msg = "quote\" backslash\\ nl\n tab\t bell\x07 del\x7f caf\xc3\xa9 bad\xff\xfe"
	    " overlong\xc0\xaf surrogate\xed\xa0\x80 cut\xe2\x82";
	size_t n = fmt(&c, LOG_ERROR, msg, "k\"ey=\"v\\\\al\x01\" q=\"}{\"");
	json_t *j = parse_line(n);
	cr_assert_str_eq(member(j, "cluster"), "evil\"},{\"x\":\"");
	cr_assert_str_eq(member(j, "msg"), "quote\" backslash\\ nl\n tab\t bell\x07 del\x7f caf\xc3\xa9 "
	    "bad\xef\xbf\xbd\xef\xbf\xbd overlong\xef\xbf\xbd\xef\xbf\xbd "
	    "surrogate\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd cut\xef\xbf\xbd\xef\xbf\xbd");
	cr_assert_str_eq(member(j, "k\"ey"), "v\\al\x01");
	cr_assert_str_eq(member(j, "q"), "}{");
	cr_assert_null(json_object_get(j, "x"));
	json_decref(j);
}

Test(log, json_truncated_still_valid)
{
	static char big[10000];
	static char kv[3000];
	struct log_line_ctx c = worker_ctx;
	c.json = true;

	memset(big, '"', sizeof big - 1);           /* each needs 2 bytes escaped */
	for (size_t i = 0; i < sizeof kv - 1; i += 10)
		memcpy(kv + i, "k=\"\x01\x01\x01\" ", 9 < sizeof kv - 1 - i ? 9 : sizeof kv - 1 - i);
	size_t n = fmt(&c, LOG_WARN, big, NULL);
	cr_assert_geq(n, sizeof line - 8);
	json_decref(parse_line(n));

	/* a short msg, then far too many pairs */
	n = fmt(&c, LOG_WARN, "many", kv);
	json_t *j = parse_line(n);
	cr_assert_str_eq(member(j, "msg"), "many");
	json_decref(j);

	/* every buffer size from tiny-but-legal up: always one valid object */
	for (size_t cap = 256; cap < 700; cap += 7) {
		size_t m = log_format_line(line, cap, &c, LOG_INFO, T0, big + 9000, kv + 2500);
		cr_assert_leq(m, cap);
		json_decref(parse_line(m));
	}
}

Test(log, journald_prefix)
{
	struct log_line_ctx c = worker_ctx;
	c.journald = true;
	static const struct { enum log_level l; const char *p; } lv[] = {
		{ LOG_ERROR, "<3>" }, { LOG_WARN, "<4>" }, { LOG_INFO, "<6>" }, { LOG_DEBUG, "<7>" },
	};
	for (size_t i = 0; i < 4; i++) {
		fmt(&c, lv[i].l, "m", "k=v");
		cr_assert_eq(strncmp(line, lv[i].p, 3), 0, "%s", line);
		cr_assert_null(strstr(line, "ts="), "the journal stamps the time: %s", line);
	}
	fmt(&c, LOG_ERROR, "m", "k=v");
	cr_assert_str_eq(line, "<3>level=error proc=worker cluster=A gen=3 pid=4242 msg=\"m\" k=v\n");

	c.json = true;
	size_t n = fmt(&c, LOG_WARN, "m", "k=v");
	cr_assert_eq(strncmp(line, "<4>{", 4), 0, "%s", line);
	json_error_t err;
	json_t *j = json_loadb(line + 3, n - 4, 0, &err);
	cr_assert_not_null(j, "%s", line);
	cr_assert_null(json_object_get(j, "ts"));
	json_decref(j);
}

Test(log, journald_detect)
{
	struct stat st;
	char v[64];

	cr_assert_eq(fstat(STDERR_FILENO, &st), 0);
	unsetenv("JOURNAL_STREAM");
	cr_assert_not(log_journald_detect());
	snprintf(v, sizeof v, "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", v, 1);
	cr_assert(log_journald_detect());
	/* inherited by a child whose stderr was redirected elsewhere: no */
	snprintf(v, sizeof v, "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino + 1);
	setenv("JOURNAL_STREAM", v, 1);
	cr_assert_not(log_journald_detect());
	setenv("JOURNAL_STREAM", "garbage", 1);
	cr_assert_not(log_journald_detect());
	snprintf(v, sizeof v, "%llu:%llux", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", v, 1);
	cr_assert_not(log_journald_detect());
	unsetenv("JOURNAL_STREAM");
}
