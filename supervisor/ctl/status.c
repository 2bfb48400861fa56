/*
 * status — how ferryctl renders `status [NAME]` for people: the contract
 * table (NAME STATE SINCE GEN PID CONNS REASON, a row per worker when a
 * cluster lists more than one), the SNI gateway line, certificate expiry,
 * the last unasked worker exit (lastCrash); and the ages and colours the
 * other views share. See ctl_priv.h.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl_priv.h"

/* --- ages ---------------------------------------------------------------- */

void
ctl_fmt_age(long long secs, char *buf, size_t len)
{
	if (secs < 0)
		secs = 0;
	if (secs < 60)
		snprintf(buf, len, "%llds", secs);
	else if (secs < 3600 && secs % 60 == 0)
		snprintf(buf, len, "%lldm", secs / 60);
	else if (secs < 3600)
		snprintf(buf, len, "%lldm%llds", secs / 60, secs % 60);
	else if (secs < 86400 && secs % 3600 / 60 == 0)
		snprintf(buf, len, "%lldh", secs / 3600);
	else if (secs < 86400)
		snprintf(buf, len, "%lldh%lldm", secs / 3600, secs % 3600 / 60);
	else if (secs % 86400 / 3600 == 0)
		snprintf(buf, len, "%lldd", secs / 86400);
	else
		snprintf(buf, len, "%lldd%lldh", secs / 86400, secs % 86400 / 3600);
}

/* Age of an RFC 3339 UTC time ("2026-11-21T08:04:05.123Z"), or "-". */
static void
ctl_since(const json_t *v, char *buf, size_t len)
{
	struct tm tm;
	int n = 0;
	time_t t;

	memset(&tm, 0, sizeof tm);
	if (!json_is_string(v) ||
	    sscanf(json_string_value(v), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year,
	    &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 ||
	    n == 0) {
		snprintf(buf, len, "-");
		return;
	}
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	if ((t = timegm(&tm)) == (time_t)-1) {
		snprintf(buf, len, "-");
		return;
	}
	ctl_fmt_age((long long)(time(NULL) - t), buf, len);
}

/* --- colour ------------------------------------------------------------- */

/* ANSI colour only when stdout is a terminal, $NO_COLOR is unset or empty
 * (no-color.org) and $TERM is not "dumb"; set once by ctl_color_init(). */
static bool ctl_color;

static bool
ctl_color_wanted(void)
{
	const char *nc = getenv("NO_COLOR"), *term = getenv("TERM");

	if (nc != NULL && nc[0] != '\0')
		return false;
	if (term != NULL && strcmp(term, "dumb") == 0)
		return false;
	return isatty(STDOUT_FILENO) == 1;
}

void
ctl_color_init(bool json)
{
	ctl_color = !json && ctl_color_wanted();
}

/* text padded to width (0: not padded), in colour code when colour is on. */
void
ctl_paint(const char *code, const char *text, size_t width)
{
	if (ctl_color && code != NULL)
		printf("\033[%sm%-*s\033[0m", code, (int)width, text);
	else
		printf("%-*s", (int)width, text);
}

const char *
ctl_state_color(const char *state)
{
	if (state == NULL)
		return NULL;
	if (strstr(state, "unresponsive") || strncmp(state, "failed", 6) == 0 ||
	    strncmp(state, "stopped", 7) == 0)
		return CTL_RED;
	if (strncmp(state, "accepting", 9) == 0)
		return CTL_GREEN;
	return CTL_YELLOW;
}

/* --- the status table --------------------------------------------------- */

#define CTL_COLS 7

struct ctl_row {
	char col[CTL_COLS][256];
};

struct ctl_table {
	struct ctl_row *rows;
	size_t n, cap;
};

static struct ctl_row *
ctl_table_add(struct ctl_table *t)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 8;
		struct ctl_row *nr = realloc(t->rows, cap * sizeof *nr);

		if (nr == NULL)
			return NULL;
		t->rows = nr;
		t->cap = cap;
	}
	memset(&t->rows[t->n], 0, sizeof t->rows[t->n]);
	return &t->rows[t->n++];
}

/* One row per worker, indented under its cluster: "  #INDEX" STATE SINCE
 * GEN PID CONNS. */
static void
ctl_worker_row(const json_t *w, struct ctl_row *r)
{
	const json_t *pid = json_object_get(w, "pid");
	const char *state = json_string_value(json_object_get(w, "state"));
	const char *live = json_string_value(json_object_get(w, "liveness"));

	snprintf(r->col[0], sizeof r->col[0], "  #%lld",
	    (long long)json_integer_value(json_object_get(w, "index")));
	snprintf(r->col[1], sizeof r->col[1], "%s%s", state ? state : "?",
	    live && strcmp(live, "unresponsive") == 0 ? ",unresponsive" : "");
	ctl_since(json_object_get(w, "since"), r->col[2], sizeof r->col[2]);
	snprintf(r->col[3], sizeof r->col[3], "%lld",
	    (long long)json_integer_value(json_object_get(w, "generation")));
	if (json_is_integer(pid))
		snprintf(r->col[4], sizeof r->col[4], "%lld", (long long)json_integer_value(pid));
	else
		snprintf(r->col[4], sizeof r->col[4], "-");
	snprintf(r->col[5], sizeof r->col[5], "%lld",
	    (long long)json_integer_value(json_object_get(w, "connections")));
	r->col[6][0] = '\0';
}

static void
ctl_cluster_row(const json_t *c, struct ctl_row *r)
{
	const json_t *gen = json_object_get(c, "generation"), *w;
	const char *reason = json_string_value(json_object_get(c, "reason"));
	const char *state = json_string_value(json_object_get(c, "state"));
	const char *name = json_string_value(json_object_get(c, "name"));
	long long conns = 0;
	bool have_pid = false;
	size_t i;

	const char *live = json_string_value(json_object_get(c, "liveness"));
	bool unresponsive = live && strcmp(live, "unresponsive") == 0;

	snprintf(r->col[0], sizeof r->col[0], "%s", name ? name : "?");
	/* a hung worker is not what its lifecycle state says: show it */
	snprintf(r->col[1], sizeof r->col[1], "%s%s", state ? state : "?",
	    unresponsive ? ",unresponsive" : "");
	ctl_since(json_object_get(c, unresponsive ? "livenessSince" : "since"), r->col[2],
	    sizeof r->col[2]);
	if (json_is_integer(gen))
		snprintf(r->col[3], sizeof r->col[3], "%lld", (long long)json_integer_value(gen));
	else
		snprintf(r->col[3], sizeof r->col[3], "-");
	snprintf(r->col[4], sizeof r->col[4], "-");
	json_array_foreach(json_object_get(c, "workers"), i, w) {
		const json_t *pid = json_object_get(w, "pid");

		conns += json_integer_value(json_object_get(w, "connections"));
		if (!have_pid && json_is_integer(pid) && json_is_integer(gen) &&
		    json_integer_value(json_object_get(w, "generation")) ==
		    json_integer_value(gen)) {
			snprintf(r->col[4], sizeof r->col[4], "%lld",
			    (long long)json_integer_value(pid));
			have_pid = true;
		}
	}
	snprintf(r->col[5], sizeof r->col[5], "%lld", conns);
	snprintf(r->col[6], sizeof r->col[6], "%s", reason && *reason ? reason : "-");
}

/* Columns padded to width, the last one (REASON) as is; STATE in colour;
 * no trailing blanks (a worker row has no REASON). */
static void
ctl_print_row(const char *const cells[CTL_COLS], const size_t width[CTL_COLS], bool header)
{
	size_t k, last = CTL_COLS - 1;

	while (last > 0 && cells[last][0] == '\0')
		last--;
	for (k = 0; k <= last; k++) {
		const char *code = header ? CTL_BOLD : k == 1 ? ctl_state_color(cells[k]) : NULL;

		ctl_paint(code, cells[k], k < last ? width[k] : 0);
		if (k < last)
			fputs("  ", stdout);
	}
	putchar('\n');
}

/* The contract table (header NAME STATE SINCE GEN PID CONNS REASON first),
 * one row per cluster; a cluster listing more than one worker (workers > 1,
 * or two generations during a reload) gets an indented row per worker. */
static int
ctl_print_table(const json_t *clusters)
{
	static const char *const hdr[CTL_COLS] = {
		"NAME", "STATE", "SINCE", "GEN", "PID", "CONNS", "REASON",
	};
	struct ctl_table t = { NULL, 0, 0 };
	size_t i, k, width[CTL_COLS];
	const json_t *c, *w;

	json_array_foreach(clusters, i, c) {
		const json_t *ws = json_object_get(c, "workers");
		struct ctl_row *r = ctl_table_add(&t);
		size_t j;

		if (r == NULL)
			goto oom;
		ctl_cluster_row(c, r);
		if (json_array_size(ws) > 1)
			json_array_foreach(ws, j, w) {
				if ((r = ctl_table_add(&t)) == NULL)
					goto oom;
				ctl_worker_row(w, r);
			}
	}
	for (k = 0; k < CTL_COLS; k++)
		width[k] = strlen(hdr[k]);
	for (i = 0; i < t.n; i++)
		for (k = 0; k < CTL_COLS; k++)
			if (strlen(t.rows[i].col[k]) > width[k])
				width[k] = strlen(t.rows[i].col[k]);
	ctl_print_row(hdr, width, true);
	for (i = 0; i < t.n; i++) {
		const char *cells[CTL_COLS];

		for (k = 0; k < CTL_COLS; k++)
			cells[k] = t.rows[i].col[k];
		ctl_print_row(cells, width, false);
	}
	free(t.rows);
	return 0;
oom:
	free(t.rows);
	ctl_err("out of memory");
	return -1;
}

/* `status NAME` of an SNI gateway cluster: a line below the table
 * with the names it serves on its one port (port-per-broker, the default,
 * adds nothing: its listeners are the ports themselves). */
static void
ctl_print_gateway(const json_t *c)
{
	const char *gw = json_string_value(json_object_get(c, "gateway"));
	const json_t *sni = json_object_get(c, "sni");
	const char *addr = NULL;
	const json_t *l;
	size_t i;

	if (gw == NULL || strcmp(gw, "sni") != 0 || !json_is_object(sni))
		return;
	json_array_foreach(json_object_get(c, "listeners"), i, l)
		if (addr == NULL)
			addr = json_string_value(json_object_get(l, "address"));
	printf("\ngateway sni on %s: bootstrap %s, brokers %s\n", addr ? addr : "?",
	    json_string_value(json_object_get(sni, "bootstrapHost")) ?
	    json_string_value(json_object_get(sni, "bootstrapHost")) : "?",
	    json_string_value(json_object_get(sni, "brokerPattern")) ?
	    json_string_value(json_object_get(sni, "brokerPattern")) : "?");
}

/* Below the table: line(name, obj) for each cluster that has an object
 * under key. */
static void
ctl_print_below(const json_t *clusters, const char *key,
		void (*line)(const char *name, const json_t *obj))
{
	size_t i;
	const json_t *c;

	json_array_foreach(clusters, i, c) {
		const json_t *obj = json_object_get(c, key);
		const char *name = json_string_value(json_object_get(c, "name"));

		if (json_is_object(obj))
			line(name ? name : "?", obj);
	}
}

/* A TLS cluster: when its certificate expires (tls.notAfter), flagged
 * within 14 days. */
static void
ctl_tls_line(const char *name, const json_t *tls)
{
	const char *na = json_string_value(json_object_get(tls, "notAfter"));
	struct tm tm;

	if (!na) {
		printf("%s: TLS certificate expiry unknown\n", name);
		return;
	}
	memset(&tm, 0, sizeof tm);
	if (!strptime(na, "%Y-%m-%dT%H:%M:%S", &tm)) {
		printf("%s: TLS certificate valid until %s\n", name, na);
		return;
	}
	long long left = ((long long)timegm(&tm) - (long long)time(NULL)) / 86400;
	printf("%s: TLS certificate valid until %s (%s%lld days%s)\n", name, na,
	    left < 0 ? "expired " : "", left < 0 ? -left : left,
	    left < 0 ? " ago" : left < 14 ? " left: renew it" : " left");
}

/* A cluster whose worker exited unasked (lastCrash): when, why, which
 * worker. A crash restart replaces the generation, so the table's REASON
 * no longer says it. */
static void
ctl_crash_line(const char *name, const json_t *lc)
{
	const char *why = json_string_value(json_object_get(lc, "reason"));
	char ago[32];

	ctl_since(json_object_get(lc, "time"), ago, sizeof ago);
	printf("%s: last crash %s ago: %s (worker #%lld, pid %lld)\n", name, ago,
	    why ? why : "?", (long long)json_integer_value(json_object_get(lc, "index")),
	    (long long)json_integer_value(json_object_get(lc, "pid")));
}

void
ctl_status_path(const struct ctl_opts *o, const char *name, char *path, size_t len, bool *one)
{
	char enc[768];
	size_t at;

	*one = name != NULL && strpbrk(name, "*?[,") == NULL && o->state == NULL &&
	    o->sort == NULL;
	if (*one) {
		ctl_pct_encode(name, enc, sizeof enc);
		snprintf(path, len, "/admin/clusters/%s", enc);
		return;
	}
	at = (size_t)snprintf(path, len, "/admin/clusters");
	const char *keys[3] = { "name", "state", "sort" };
	const char *vals[3] = { name, o->state, o->sort };
	for (int k = 0; k < 3 && at < len; k++) {
		if (vals[k] == NULL)
			continue;
		ctl_pct_encode(vals[k], enc, sizeof enc);
		at += (size_t)snprintf(path + at, len - at, "%c%s=%s", strchr(path, '?') ? '&' : '?',
		    keys[k], enc);
	}
}

int
ctl_status_check(const struct ctl_opts *o)
{
	static const char *const states[] = { "initializing", "accepting", "draining", "failed",
		"stopped", "unresponsive" };
	static const char *const sorts[] = { "file", "name", "connections", "state", "since" };

	if (o->sort != NULL) {
		size_t k = 0;
		while (k < sizeof sorts / sizeof sorts[0] && strcmp(o->sort, sorts[k]) != 0)
			k++;
		if (k == sizeof sorts / sizeof sorts[0]) {
			ctl_err("bad --sort '%s' (file, name, connections, state or since)", o->sort);
			return -1;
		}
	}
	for (const char *p = o->state; p != NULL;) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p), k = 0;

		while (k < sizeof states / sizeof states[0] &&
		    (strlen(states[k]) != n || strncmp(p, states[k], n) != 0))
			k++;
		if (k == sizeof states / sizeof states[0]) {
			ctl_err("bad --state '%s' (initializing, accepting, draining, failed, stopped, "
			    "unresponsive; comma-separated)", o->state);
			return -1;
		}
		p = comma ? comma + 1 : NULL;
	}
	return 0;
}

int
ctl_cmd_status(const struct ctl_reply *r, bool one)
{
	json_t *j, *list;
	int rc = CTL_EXIT_OK;

	if (r->status != 200)
		return ctl_http_failure(r);
	if ((j = ctl_body_json(r)) == NULL)
		return CTL_EXIT_UNREACHABLE;
	if (one) {
		list = json_array();
		json_array_append(list, j);
	} else
		list = json_incref(json_object_get(j, "clusters"));
	if (!json_is_array(list) || (one && !json_is_string(json_object_get(j, "name")))) {
		ctl_err("garbled reply from ferryd: %s", one ? "no cluster" : "no cluster list");
		rc = CTL_EXIT_UNREACHABLE;
	} else if (ctl_print_table(list) == -1)
		rc = CTL_EXIT_FAILED;
	else {
		if (one)
			ctl_print_gateway(j);
		ctl_print_below(list, "tls", ctl_tls_line);
		ctl_print_below(list, "lastCrash", ctl_crash_line);
		/* a filtered list says how much of the whole it is */
		const json_t *matched = json_object_get(j, "matched");
		if (!one && json_is_integer(matched))
			printf("(%lld of %lld clusters)\n", (long long)json_integer_value(matched),
			    (long long)json_integer_value(json_object_get(j, "total")));
	}
	json_decref(list);
	json_decref(j);
	return rc;
}
