/*
 * test_status — the read model of the admin API over a process table built
 * in memory: serving generation, readiness per startup policy, the exact
 * JSON documents of docs/design.md §7 and the Prometheus exposition.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "supervisor/sandboxstatus.h"
#include "shm_pages.h"
#include "supervisor/status.h"
#include "supervisor/supervisor.h"

#define T0 1700000000123ULL     /* 2023-11-14T22:13:20.123Z */

static struct sup fx_sup;
static struct sup_cluster fx_clusters[2];
static struct sup_cluster *fx_cluster_ptrs[2];
static struct sup_gen fx_workers[5];
static struct sup_proc fx_procs[5][1];
static struct sup_listener fx_listeners[3];

static void
fx_worker(struct sup_gen *w, struct sup_cluster *c, uint64_t gen, pid_t pid,
	  enum lc_state st, const char *reason, bool with_metrics)
{
	memset(w, 0, sizeof *w);
	w->procs = fx_procs[w - fx_workers];
	memset(w->procs, 0, sizeof fx_procs[0]);
	w->cluster = c;
	w->generation = gen;
	w->n_procs = 1;
	w->procs[0].gen = w;
	w->procs[0].pid = pid;
	w->procs[0].alive = pid != 0;
	w->lc.state = st;
	w->st = st == LC_ACCEPTING ? FSM_G_ACCEPTING : st == LC_DRAINING ? FSM_G_DRAINING :
		st == LC_FAILED ? FSM_G_FAILED : st == LC_STOPPED ? FSM_G_STOPPED : FSM_G_STARTING;
	w->lc.since_ms = T0 + gen * 1000;
	snprintf(w->lc.reason, sizeof w->lc.reason, "%s", reason ? reason : "");
	if (with_metrics) {
		int fd = metrics_create(gen, &w->procs[0].metrics);
		cr_assert_geq(fd, 0);
		close(fd);
	}
}

/* n requests of api key `api` (counted both in the total and per API, as
 * the worker does) */
static void
fx_requests(struct metrics *m, int api, uint64_t n)
{
	METRIC_ADD(m, requests, n);
	for (uint64_t i = 0; i < n; i++)
		metrics_request(m, api);
}

/*
 * alpha: gen 2 initializing (pid 200, reload in progress) beside gen 1
 *        accepting (pid 100): serving = gen 1.
 * beta:  gen 3 failed (pid 0, no block), gen 2 stopped (pid 0, block still
 *        mapped with a stale gauge): serving = gen 3.
 */
static void
fx_setup(void)
{
	struct sup_cluster *a = &fx_clusters[0], *b = &fx_clusters[1];

	memset(&fx_sup, 0, sizeof fx_sup);
	memset(fx_clusters, 0, sizeof fx_clusters);
	fx_cluster_ptrs[0] = &fx_clusters[0];
	fx_cluster_ptrs[1] = &fx_clusters[1];
	fx_sup.clusters = fx_cluster_ptrs;
	fx_sup.n_clusters = 2;
	fx_sup.started_at_ms = T0;
	fx_sup.cfg.startup_policy = CFG_STARTUP_FAIL_FAST;

	a->sup = &fx_sup;
	snprintf(a->name, sizeof a->name, "alpha");
	snprintf(a->config_version, sizeof a->config_version, "sha256:%064d", 1);
	fx_listeners[0] = (struct sup_listener){ SUP_LISTENER_BOOTSTRAP, -1, { "0.0.0.0", 9192 }, -1 };
	fx_listeners[1] = (struct sup_listener){ SUP_LISTENER_BROKER, 1, { "0.0.0.0", 9193 }, -1 };
	fx_listeners[2] = (struct sup_listener){ SUP_LISTENER_BROKER, 2, { "::1", 9194 }, -1 };
	a->listeners = fx_listeners;
	a->n_listeners = 3;
	a->upstream = SUP_UPSTREAM_REACHABLE;
	a->upstream_since_ms = T0 + 500;
	a->restarts = 3;
	fx_worker(&fx_workers[0], a, 2, 200, LC_INITIALIZING, "reload", true);
	fx_worker(&fx_workers[1], a, 1, 100, LC_ACCEPTING, NULL, true);
	fx_workers[0].next = &fx_workers[1];
	a->gens = &fx_workers[0];
	a->retired = metrics_totals_new();
	cr_assert_not_null(a->retired);
	fx_requests(a->retired, 0, 100);
	METRIC_ADD(a->retired, connections_active, 50);   /* gauges of the dead never count */
	fx_requests(fx_workers[1].procs[0].metrics, 0, 10);
	METRIC_ADD(fx_workers[1].procs[0].metrics, connections_active, 5);
	METRIC_ADD(fx_workers[1].procs[0].metrics, in_flight, 2);
	fx_requests(fx_workers[0].procs[0].metrics, 0, 3);
	METRIC_ADD(fx_workers[0].procs[0].metrics, connections_active, 1);

	b->sup = &fx_sup;
	snprintf(b->name, sizeof b->name, "beta");
	b->upstream = SUP_UPSTREAM_UNREACHABLE;
	b->upstream_since_ms = T0;
	snprintf(b->upstream_error, sizeof b->upstream_error, "connection refused");
	fx_worker(&fx_workers[2], b, 3, 0, LC_FAILED, "bind 0.0.0.0:9292: address in use", false);
	fx_worker(&fx_workers[3], b, 2, 0, LC_STOPPED, "crashed", true);
	fx_workers[2].next = &fx_workers[3];
	b->gens = &fx_workers[2];
	fx_requests(fx_workers[3].procs[0].metrics, 0, 7);
	METRIC_ADD(fx_workers[3].procs[0].metrics, connections_active, 4);
}

static void
fx_teardown(void)
{
	size_t i;

	for (i = 0; i < sizeof fx_workers / sizeof fx_workers[0]; i++)
		if (fx_workers[i].procs)
			metrics_unmap(fx_workers[i].procs[0].metrics);
	metrics_unmap(fx_clusters[0].retired);
}

TestSuite(status, .init = fx_setup, .fini = fx_teardown);

/* --- serving / ready / find --------------------------------------------- */

Test(status, serving_generation)
{
	struct sup_cluster c;

	cr_assert_eq(sup_cluster_serving(&fx_clusters[0]), &fx_workers[1]);
	cr_assert_eq(sup_cluster_serving(&fx_clusters[1]), &fx_workers[2]);

	memset(&c, 0, sizeof c);
	cr_assert_null(sup_cluster_serving(&c));

	/* after commit: new accepting, old draining -> the new one */
	fx_workers[0].lc.state = LC_ACCEPTING;
	fx_workers[1].lc.state = LC_DRAINING;
	cr_assert_eq(sup_cluster_serving(&fx_clusters[0]), &fx_workers[0]);
	/* a draining generation still serves while a newer one initializes */
	fx_workers[0].lc.state = LC_INITIALIZING;
	cr_assert_eq(sup_cluster_serving(&fx_clusters[0]), &fx_workers[1]);
	/* a stopped generation does not serve: fall back to the newest */
	fx_workers[1].lc.state = LC_STOPPED;
	cr_assert_eq(sup_cluster_serving(&fx_clusters[0]), &fx_workers[0]);
}

Test(status, ready_fail_fast)
{
	cr_assert_not(sup_ready(&fx_sup));              /* beta failed */
	fx_workers[2].lc.state = LC_ACCEPTING;
	cr_assert(sup_ready(&fx_sup));
	fx_workers[1].lc.state = LC_DRAINING;           /* alpha draining */
	cr_assert_not(sup_ready(&fx_sup));
}

Test(status, ready_best_effort)
{
	fx_sup.cfg.startup_policy = CFG_STARTUP_BEST_EFFORT;
	cr_assert(sup_ready(&fx_sup));                  /* alpha up, beta failed */
	fx_workers[2].lc.state = LC_INITIALIZING;       /* beta still starting */
	cr_assert_not(sup_ready(&fx_sup));
	fx_workers[2].lc.state = LC_FAILED;
	fx_workers[1].lc.state = LC_FAILED;             /* nothing accepting */
	fx_workers[0].lc.state = LC_FAILED;
	cr_assert_not(sup_ready(&fx_sup));
}

Test(status, ready_edge_cases)
{
	fx_workers[2].lc.state = LC_ACCEPTING;
	cr_assert(sup_ready(&fx_sup));
	fx_sup.stopping = true;
	cr_assert_not(sup_ready(&fx_sup));
	fx_sup.stopping = false;
	fx_sup.n_clusters = 0;
	cr_assert(sup_ready(&fx_sup));
	fx_sup.cfg.startup_policy = CFG_STARTUP_BEST_EFFORT;
	cr_assert(sup_ready(&fx_sup));
}

Test(status, find_cluster_and_strings)
{
	cr_assert_eq(sup_find_cluster(&fx_sup, "beta"), &fx_clusters[1]);
	cr_assert_null(sup_find_cluster(&fx_sup, "gamma"));
	cr_assert_null(sup_find_cluster(&fx_sup, ""));
	cr_assert_str_eq(sup_listener_role_str(SUP_LISTENER_BOOTSTRAP), "bootstrap");
	cr_assert_str_eq(sup_listener_role_str(SUP_LISTENER_BROKER), "broker");
	cr_assert_str_eq(sup_upstream_state_str(SUP_UPSTREAM_UNKNOWN), "unknown");
	cr_assert_str_eq(sup_upstream_state_str(SUP_UPSTREAM_REACHABLE), "reachable");
	cr_assert_str_eq(sup_upstream_state_str(SUP_UPSTREAM_UNREACHABLE), "unreachable");
}

/* --- JSON --------------------------------------------------------------- */

/* The object has exactly these keys. */
static void
assert_keys(const json_t *o, const char *const *keys)
{
	size_t n = 0;

	cr_assert(json_is_object(o));
	for (; keys[n] != NULL; n++)
		cr_assert_not_null(json_object_get(o, keys[n]), "missing key %s", keys[n]);
	cr_assert_eq(json_object_size(o), n);
}

static const char *
sget(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);

	cr_assert(json_is_string(v), "%s is not a string", k);
	return json_string_value(v);
}

static json_int_t
iget(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);

	cr_assert(json_is_integer(v), "%s is not an integer", k);
	return json_integer_value(v);
}

static const char *const cluster_keys[] = { "name", "state", "since", "reason", "generation",
	"configVersion", "upstream", "listeners", "unknownNodes", "knownBrokers", "workers", "liveness",
	"livenessSince", "gateway", NULL };
static const char *const upstream_keys[] = { "state", "since", "lastError", NULL };
static const char *const listener_keys[] = { "role", "nodeId", "address", NULL };
static const char *const worker_keys[] = { "pid", "index", "generation", "state", "since",
	"liveness", "connections", "inFlight", NULL };

Test(status, cluster_json_serving_with_reload_in_progress)
{
	json_t *c = status_cluster_json(&fx_clusters[0]), *up, *ls, *ws, *w;

	assert_keys(c, cluster_keys);
	cr_assert_str_eq(sget(c, "name"), "alpha");
	cr_assert_str_eq(sget(c, "state"), "accepting");
	cr_assert_str_eq(sget(c, "since"), "2023-11-14T22:13:21.123Z");
	cr_assert(json_is_null(json_object_get(c, "reason")));
	cr_assert_eq(iget(c, "generation"), 1);
	cr_assert_str_eq(sget(c, "configVersion"),
	    "sha256:0000000000000000000000000000000000000000000000000000000000000001");

	up = json_object_get(c, "upstream");
	assert_keys(up, upstream_keys);
	cr_assert_str_eq(sget(up, "state"), "reachable");
	cr_assert_str_eq(sget(up, "since"), "2023-11-14T22:13:20.623Z");
	cr_assert(json_is_null(json_object_get(up, "lastError")));

	ls = json_object_get(c, "listeners");
	cr_assert_eq(json_array_size(ls), 3);
	assert_keys(json_array_get(ls, 0), listener_keys);
	cr_assert_str_eq(sget(json_array_get(ls, 0), "role"), "bootstrap");
	cr_assert(json_is_null(json_object_get(json_array_get(ls, 0), "nodeId")));
	cr_assert_str_eq(sget(json_array_get(ls, 0), "address"), "0.0.0.0:9192");
	cr_assert_str_eq(sget(json_array_get(ls, 1), "role"), "broker");
	cr_assert_eq(iget(json_array_get(ls, 1), "nodeId"), 1);
	cr_assert_str_eq(sget(json_array_get(ls, 1), "address"), "0.0.0.0:9193");
	cr_assert_eq(iget(json_array_get(ls, 2), "nodeId"), 2);
	cr_assert_str_eq(sget(json_array_get(ls, 2), "address"), "[::1]:9194");

	/* both live generations, newest first */
	ws = json_object_get(c, "workers");
	cr_assert_eq(json_array_size(ws), 2);
	w = json_array_get(ws, 0);
	assert_keys(w, worker_keys);
	cr_assert_eq(iget(w, "pid"), 200);
	cr_assert_eq(iget(w, "generation"), 2);
	cr_assert_str_eq(sget(w, "state"), "initializing");
	cr_assert_str_eq(sget(w, "since"), "2023-11-14T22:13:22.123Z");
	cr_assert_eq(iget(w, "connections"), 1);
	cr_assert_eq(iget(w, "inFlight"), 0);
	w = json_array_get(ws, 1);
	assert_keys(w, worker_keys);
	cr_assert_eq(iget(w, "pid"), 100);
	cr_assert_eq(iget(w, "generation"), 1);
	cr_assert_str_eq(sget(w, "state"), "accepting");
	cr_assert_eq(iget(w, "connections"), 5);
	cr_assert_eq(iget(w, "inFlight"), 2);
	json_decref(c);
}

Test(status, cluster_json_failed)
{
	json_t *c = status_cluster_json(&fx_clusters[1]), *ws, *w, *up;

	assert_keys(c, cluster_keys);
	cr_assert_str_eq(sget(c, "state"), "failed");
	cr_assert_str_eq(sget(c, "reason"), "bind 0.0.0.0:9292: address in use");
	cr_assert_eq(iget(c, "generation"), 3);
	cr_assert(json_is_null(json_object_get(c, "configVersion")));
	cr_assert_eq(json_array_size(json_object_get(c, "listeners")), 0);
	up = json_object_get(c, "upstream");
	cr_assert_str_eq(sget(up, "state"), "unreachable");
	cr_assert_str_eq(sget(up, "lastError"), "connection refused");
	/* the reaped gen 2 is gone; the serving (failed) gen 3 is listed */
	ws = json_object_get(c, "workers");
	cr_assert_eq(json_array_size(ws), 1);
	w = json_array_get(ws, 0);
	assert_keys(w, worker_keys);
	cr_assert(json_is_null(json_object_get(w, "pid")));
	cr_assert_eq(iget(w, "generation"), 3);
	cr_assert_eq(iget(w, "connections"), 0);
	json_decref(c);
}

Test(status, cluster_json_without_workers)
{
	json_t *c;

	fx_clusters[1].gens = NULL;
	c = status_cluster_json(&fx_clusters[1]);
	assert_keys(c, cluster_keys);
	cr_assert_str_eq(sget(c, "state"), "initializing");
	cr_assert(json_is_null(json_object_get(c, "generation")));
	cr_assert_eq(json_array_size(json_object_get(c, "workers")), 0);
	json_decref(c);
}

Test(status, clusters_json_dump)
{
	json_t *j = status_clusters_json(&fx_sup), *a;
	size_t len;
	char *s;

	assert_keys(j, (const char *const[]){ "clusters", NULL });
	a = json_object_get(j, "clusters");
	cr_assert_eq(json_array_size(a), 2);
	cr_assert_str_eq(sget(json_array_get(a, 0), "name"), "alpha");
	cr_assert_str_eq(sget(json_array_get(a, 1), "name"), "beta");
	s = status_dump(j, &len);
	cr_assert_not_null(s);
	cr_assert_eq(len, strlen(s));
	cr_assert(strncmp(s, "{\"clusters\":[{\"name\":\"alpha\",\"state\":\"accepting\",", 49) == 0,
	    "%s", s);
	cr_assert_eq(s[len - 1], '\n');
	cr_assert_null(strstr(s, "\": "));      /* compact */
	cr_assert_null(strstr(s, ", \""));
	free(s);
	json_decref(j);
}

Test(status, health_json)
{
	json_t *j = status_health_json(&fx_sup, T0 + 42999);

	assert_keys(j, (const char *const[]){ "status", "version", "buildId", "pid", "execPath",
	    "uptimeSeconds", "startedAt", "processStartedAt", "clusters", "sandbox", NULL });
	cr_assert_str_eq(sget(j, "status"), "UP");
	cr_assert_str_eq(sget(j, "version"), FERRY_VERSION);
	/* the build id names the image that runs (hex of the GNU note) */
	cr_assert_eq(strspn(sget(j, "buildId"), "0123456789abcdef"), strlen(sget(j, "buildId")));
	cr_assert_gt(strlen(sget(j, "buildId")), 0);
	cr_assert_eq(iget(j, "uptimeSeconds"), 42);
	cr_assert_eq(iget(j, "clusters"), 2);
	json_decref(j);
	j = status_health_json(&fx_sup, T0 - 5000);     /* clock stepped back */
	cr_assert_eq(iget(j, "uptimeSeconds"), 0);
	json_decref(j);
}

Test(status, ready_json)
{
	json_t *j = status_ready_json(&fx_sup), *cl;

	assert_keys(j, (const char *const[]){ "ready", "startupPolicy", "clusters", NULL });
	cr_assert(json_is_false(json_object_get(j, "ready")));
	cr_assert_str_eq(sget(j, "startupPolicy"), "fail-fast");
	cl = json_object_get(j, "clusters");
	assert_keys(cl, (const char *const[]){ "alpha", "beta", NULL });
	cr_assert_str_eq(sget(cl, "alpha"), "accepting");
	cr_assert_str_eq(sget(cl, "beta"), "failed");
	json_decref(j);

	fx_sup.cfg.startup_policy = CFG_STARTUP_BEST_EFFORT;
	j = status_ready_json(&fx_sup);
	cr_assert(json_is_true(json_object_get(j, "ready")));
	cr_assert_str_eq(sget(j, "startupPolicy"), "best-effort");
	json_decref(j);
}

/* --- Prometheus --------------------------------------------------------- */

static size_t
count(const char *hay, const char *needle)
{
	size_t n = 0;

	while ((hay = strstr(hay, needle)) != NULL) {
		n++;
		hay += strlen(needle);
	}
	return n;
}

static bool
has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	const char *p = text;

	while ((p = strstr(p, line)) != NULL) {
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
		p += n;
	}
	return false;
}

Test(status, metrics_text)
{
	size_t len;
	char *t = status_metrics_text(&fx_sup, &len);

	cr_assert_not_null(t);
	cr_assert_eq(len, strlen(t));
	cr_assert_eq(t[len - 1], '\n');

	/* counters: retired + every mapped block (even of a reaped worker) */
	cr_assert(has_line(t, "# HELP ferry_requests_total Requests forwarded upstream, by API"));
	cr_assert(has_line(t, "# TYPE ferry_requests_total counter"));
	cr_assert(has_line(t, "ferry_requests_total{cluster=\"alpha\",api=\"Produce\"} 113"), "%s", t);
	cr_assert(has_line(t, "ferry_requests_total{cluster=\"beta\",api=\"Produce\"} 7"));
	cr_assert(has_line(t, "ferry_connections_accepted_total{cluster=\"alpha\"} 0"));
	/* gauges: live workers only */
	cr_assert(has_line(t, "# TYPE ferry_connections_active gauge"));
	cr_assert(has_line(t, "ferry_connections_active{cluster=\"alpha\"} 6"));
	cr_assert(has_line(t, "ferry_connections_active{cluster=\"beta\"} 0"));
	cr_assert(has_line(t, "ferry_in_flight{cluster=\"alpha\"} 2"));
	cr_assert_eq(count(t, "ferry_connections_active_total"), 0);
	cr_assert_eq(count(t, "# HELP ferry_requests_total "), 1);
	cr_assert_eq(count(t, "# TYPE ferry_in_flight "), 1);
	/* one TYPE per shared counter (requests and connections_rejected come
	 * with labels from promfam), plus cluster_state, worker_restarts,
	 * crash_loops, worker_connections, worker_unresponsive, cluster_generation,
	 * tls_cert_not_after_seconds (from promfam),
	 * config_reload_total, config_reload_duration_seconds,
	 * config_version_info, upgrades_total, build_info and up, plus the
	 * labelled families (bytes, rejected, frames rejected, PROXY headers,
	 * drain closes, request durations, client software) */
#define COUNT_FIELD(name, type, help) + 1
	cr_assert_eq(count(t, "# TYPE "), 0 METRICS_FIELDS(COUNT_FIELD) - 2 + 12 + 9);
	cr_assert(has_line(t, "ferry_upgrades_total{result=\"SUCCESS\"} 0"), "%s", t);
	cr_assert_eq(count(t, "ferry_build_info{version=\"" FERRY_VERSION "\",build_id=\""), 1);
	cr_assert(has_line(t, "ferry_bytes_total{cluster=\"alpha\",direction=\"client_to_upstream\"} 0"));
	cr_assert(has_line(t, "ferry_connections_rejected_total{cluster=\"alpha\",reason=\"max_connections\"} 0"));
	cr_assert(has_line(t, "ferry_drain_closes_total{cluster=\"beta\",outcome=\"forced\"} 0"));
	cr_assert(has_line(t, "ferry_worker_unresponsive_total{cluster=\"alpha\"} 0"));
	/* client software: the buckets are there even with no table to read */
	cr_assert(has_line(t, "# TYPE ferry_client_connections gauge"));
	cr_assert(has_line(t, "ferry_client_connections{cluster=\"alpha\",software=\"unknown\",version=\"\"} 0"));
	cr_assert(has_line(t, "ferry_connections_rejected_total{cluster=\"alpha\",reason=\"proxy_untrusted_source\"} 0"));
	cr_assert(has_line(t, "ferry_proxy_headers_total{cluster=\"beta\",version=\"2\"} 0"));
	cr_assert(has_line(t, "ferry_connections_expired_total{cluster=\"beta\"} 0"));
#undef COUNT_FIELD
	cr_assert(has_line(t, "# TYPE ferry_crash_loops_total counter"));
	cr_assert(has_line(t, "ferry_crash_loops_total{cluster=\"alpha\"} 0"));

	cr_assert(has_line(t, "# TYPE ferry_cluster_state gauge"));
	cr_assert(has_line(t, "ferry_cluster_state{cluster=\"alpha\",state=\"accepting\"} 1"));
	cr_assert(has_line(t, "ferry_cluster_state{cluster=\"alpha\",state=\"initializing\"} 0"));
	cr_assert(has_line(t, "ferry_cluster_state{cluster=\"beta\",state=\"failed\"} 1"));
	cr_assert(has_line(t, "ferry_cluster_state{cluster=\"beta\",state=\"stopped\"} 0"));
	cr_assert_eq(count(t, "ferry_cluster_state{"), 2 * LC_STATE_COUNT);
	cr_assert(has_line(t, "# TYPE ferry_worker_restarts_total counter"));
	cr_assert(has_line(t, "ferry_worker_restarts_total{cluster=\"alpha\"} 3"));
	cr_assert(has_line(t, "ferry_worker_restarts_total{cluster=\"beta\"} 0"));
	cr_assert(has_line(t, "# TYPE ferry_up gauge"));
	cr_assert(has_line(t, "ferry_up 1"));
	free(t);
}

/* Every line is a comment or "name{labels} value"; samples follow their
 * metric's TYPE line (the text format requires grouping). */
Test(status, metrics_text_well_formed)
{
	regex_t sample, comment;
	char *t, *line, *save = NULL, current[128] = "";
	size_t len;

	cr_assert_eq(regcomp(&sample, "^(ferry_[a-z0-9_]+)(\\{[a-z_]+=\"[^\"]*\"(,[a-z_]+=\"[^\"]*\")*\\})? [0-9]+(\\.[0-9]+)?$",
	    REG_EXTENDED), 0);
	cr_assert_eq(regcomp(&comment, "^# (HELP|TYPE) (ferry_[a-z0-9_]+) .+$", REG_EXTENDED), 0);
	t = status_metrics_text(&fx_sup, &len);
	for (line = strtok_r(t, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		regmatch_t m[3];

		if (regexec(&comment, line, 3, m, 0) == 0) {
			snprintf(current, sizeof current, "%.*s", (int)(m[2].rm_eo - m[2].rm_so),
			    line + m[2].rm_so);
			continue;
		}
		cr_assert_eq(regexec(&sample, line, 3, m, 0), 0, "bad line: %s", line);
		cr_assert_eq(strncmp(line + m[1].rm_so, current, strlen(current)), 0,
		    "sample %s outside its group %s", line, current);
		{
			/* a histogram's samples carry _bucket, _sum, _count */
			const char *rest = line + m[1].rm_so + strlen(current);
			size_t rlen = (size_t)(m[1].rm_eo - m[1].rm_so) - strlen(current);

			cr_assert(rlen == 0 || (rlen == 7 && strncmp(rest, "_bucket", 7) == 0) ||
			    (rlen == 4 && strncmp(rest, "_sum", 4) == 0) ||
			    (rlen == 6 && strncmp(rest, "_count", 6) == 0), "%s", line);
		}
	}
	regfree(&sample);
	regfree(&comment);
	free(t);
}

Test(status, metrics_reload_and_generation)
{
	size_t len;
	char *t;

	snprintf(fx_sup.config_version, sizeof fx_sup.config_version, "sha256:%064d", 7);
	reload_stats_observe(&fx_sup.reload_stats, SUP_RELOAD_SUCCESS, 1);     /* le 0.001 */
	reload_stats_observe(&fx_sup.reload_stats, SUP_RELOAD_SUCCESS, 40);    /* le 0.05 */
	reload_stats_observe(&fx_sup.reload_stats, SUP_RELOAD_REJECTED, 0);
	reload_stats_observe(&fx_sup.reload_stats, SUP_RELOAD_FAILED, 90000);  /* +Inf only */
	t = status_metrics_text(&fx_sup, &len);
	cr_assert(has_line(t, "# TYPE ferry_config_reload_total counter"));
	cr_assert(has_line(t, "ferry_config_reload_total{result=\"SUCCESS\"} 2"), "%s", t);
	cr_assert(has_line(t, "ferry_config_reload_total{result=\"FAILED\"} 1"));
	cr_assert(has_line(t, "ferry_config_reload_total{result=\"REJECTED\"} 1"));
	cr_assert(has_line(t, "ferry_config_reload_total{result=\"UNCHANGED\"} 0"));
	cr_assert(has_line(t, "# TYPE ferry_config_reload_duration_seconds histogram"));
	cr_assert(has_line(t, "ferry_config_reload_duration_seconds_bucket{le=\"0.001\"} 2"));
	cr_assert(has_line(t, "ferry_config_reload_duration_seconds_bucket{le=\"0.025\"} 2"));
	cr_assert(has_line(t, "ferry_config_reload_duration_seconds_bucket{le=\"0.05\"} 3"));
	cr_assert(has_line(t, "ferry_config_reload_duration_seconds_bucket{le=\"60\"} 3"));
	cr_assert(has_line(t, "ferry_config_reload_duration_seconds_bucket{le=\"+Inf\"} 4"));
	cr_assert(has_line(t, "ferry_config_reload_duration_seconds_sum 90.041"));
	cr_assert(has_line(t, "ferry_config_reload_duration_seconds_count 4"));
	cr_assert_eq(count(t, "ferry_config_reload_duration_seconds_bucket{"), RELOAD_STATS_BUCKETS + 1);
	cr_assert(has_line(t, "ferry_config_version_info{version=\"sha256:"
	    "0000000000000000000000000000000000000000000000000000000000000007\"} 1"));
	cr_assert(has_line(t, "# TYPE ferry_cluster_generation gauge"));
	cr_assert(has_line(t, "ferry_cluster_generation{cluster=\"alpha\"} 1"));
	cr_assert(has_line(t, "ferry_cluster_generation{cluster=\"beta\"} 3"));
	free(t);
}

Test(status, metrics_label_escaping)
{
	size_t len;
	char *t;

	snprintf(fx_clusters[1].name, sizeof fx_clusters[1].name, "a\"b\\c");
	t = status_metrics_text(&fx_sup, &len);
	cr_assert(has_line(t, "ferry_up 1"));
	cr_assert_not_null(strstr(t, "ferry_requests_total{cluster=\"a\\\"b\\\\c\",api=\"Produce\"} 7\n"));
	free(t);
}

Test(status, unknown_nodes_listed)
{
	struct sup_cluster *a = &fx_clusters[0];
	static struct ipc_unknown_node nodes[1];
	static uint64_t since[1];
	nodes[0] = (struct ipc_unknown_node){ .node_id = 7, .port = 9092 };
	snprintf(nodes[0].host, sizeof nodes[0].host, "kafka-7");
	since[0] = T0;
	a->unknown_nodes = nodes;
	a->unknown_since_ms = since;
	a->n_unknown_nodes = 1;
	json_t *o = status_cluster_json(a);
	json_t *un = json_object_get(o, "unknownNodes");
	cr_assert_eq(json_array_size(un), 1);
	json_t *e = json_array_get(un, 0);
	cr_assert_eq(json_integer_value(json_object_get(e, "nodeId")), 7);
	cr_assert_str_eq(json_string_value(json_object_get(e, "upstream")), "kafka-7:9092");
	cr_assert(json_is_string(json_object_get(e, "since")));
	json_decref(o);
	o = status_cluster_json(&fx_clusters[1]);
	cr_assert_eq(json_array_size(json_object_get(o, "unknownNodes")), 0);
	json_decref(o);
}

/* --- one-line summaries (systemd STATUS=) --------------------------------- */

Test(status, summary_text)
{
	char buf[256];

	status_summary_text(&fx_sup, buf, sizeof buf);
	cr_assert_str_eq(buf, "2 clusters: 1 accepting, 1 failed");
	fx_workers[2].lc.state = LC_ACCEPTING;
	status_summary_text(&fx_sup, buf, sizeof buf);
	cr_assert_str_eq(buf, "2 clusters: 2 accepting");
	fx_clusters[1].st = FSM_C_LEAVING;
	status_summary_text(&fx_sup, buf, sizeof buf);
	cr_assert_str_eq(buf, "1 cluster: 1 accepting");
	fx_clusters[1].st = FSM_C_ACTIVE;
	fx_clusters[1].gens = NULL;                  /* no generation yet */
	status_summary_text(&fx_sup, buf, sizeof buf);
	cr_assert_str_eq(buf, "2 clusters: 1 initializing, 1 accepting");
	status_summary_text(&fx_sup, buf, 12);
	cr_assert_str_eq(buf, "2 clusters:");
	fx_sup.n_clusters = 0;
	status_summary_text(&fx_sup, buf, sizeof buf);
	cr_assert_str_eq(buf, "no clusters");
}

Test(status, reload_text)
{
	char buf[256];
	char *added[] = { "gamma", NULL }, *modified[] = { "alpha", "beta", NULL };
	char *errors[] = { "beta: bind 0.0.0.0:9292: Address in use", "second", NULL };
	struct sup_reload_record *rec = &fx_sup.last_reload;

	rec->status = SUP_RELOAD_SUCCESS;
	snprintf(rec->requested_version, sizeof rec->requested_version, "sha256:%s",
	    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
	rec->added = added;
	rec->modified = modified;
	status_reload_text(&fx_sup, buf, sizeof buf);
	cr_assert_str_eq(buf, "reload SUCCESS sha256:0123456789ab (1 added, 2 modified, 0 removed); "
	    "2 clusters: 1 accepting, 1 failed");

	rec->status = SUP_RELOAD_FAILED;
	rec->errors = errors;
	status_reload_text(&fx_sup, buf, sizeof buf);
	cr_assert_str_eq(buf, "reload FAILED: beta: bind 0.0.0.0:9292: Address in use; "
	    "2 clusters: 1 accepting, 1 failed");

	rec->status = SUP_RELOAD_UNCHANGED;
	rec->errors = NULL;
	status_reload_text(&fx_sup, buf, sizeof buf);
	cr_assert_str_eq(buf, "reload UNCHANGED; 2 clusters: 1 accepting, 1 failed");
	memset(rec, 0, sizeof *rec);   /* the arrays above are not malloc'd */
}

Test(status, latency_histogram)
{
	size_t len;
	struct metrics *m = fx_workers[1].procs[0].metrics;

	metrics_observe(m, 3, 200);       /* Metadata: 0.2 ms */
	metrics_observe(m, 3, 3000);      /* 3 ms */
	metrics_observe(m, 3, 20000000);  /* 20 s: only +Inf */
	char *t = status_metrics_text(&fx_sup, &len);
	cr_assert(has_line(t, "# TYPE ferry_request_duration_seconds histogram"));
	cr_assert(has_line(t, "ferry_request_duration_seconds_bucket{cluster=\"alpha\",api=\"Metadata\",le=\"0.00025\"} 1"), "%s", t);
	cr_assert(has_line(t, "ferry_request_duration_seconds_bucket{cluster=\"alpha\",api=\"Metadata\",le=\"0.005\"} 2"));
	cr_assert(has_line(t, "ferry_request_duration_seconds_bucket{cluster=\"alpha\",api=\"Metadata\",le=\"10\"} 2"));
	cr_assert(has_line(t, "ferry_request_duration_seconds_bucket{cluster=\"alpha\",api=\"Metadata\",le=\"+Inf\"} 3"));
	cr_assert(has_line(t, "ferry_request_duration_seconds_count{cluster=\"alpha\",api=\"Metadata\"} 3"));
	cr_assert(has_line(t, "ferry_request_duration_seconds_sum{cluster=\"alpha\",api=\"Metadata\"} 20.003200"));
	free(t);
}

/* metrics_latency: the histogram per cluster and API (default), per cluster
 * (every API summed into one), or not at all */
Test(status, latency_histogram_labels_follow_metrics_latency)
{
	size_t len;
	struct metrics *m = fx_workers[1].procs[0].metrics;

	metrics_observe(m, 3, 200);       /* Metadata */
	metrics_observe(m, 0, 3000);      /* Produce */
	fx_sup.cfg.metrics_latency = CFG_LATENCY_CLUSTER;
	char *t = status_metrics_text(&fx_sup, &len);
	cr_assert(has_line(t, "# TYPE ferry_request_duration_seconds histogram"));
	cr_assert(has_line(t, "ferry_request_duration_seconds_bucket{cluster=\"alpha\",le=\"0.00025\"} 1"), "%s", t);
	cr_assert(has_line(t, "ferry_request_duration_seconds_bucket{cluster=\"alpha\",le=\"0.005\"} 2"));
	cr_assert(has_line(t, "ferry_request_duration_seconds_count{cluster=\"alpha\"} 2"));
	cr_assert(has_line(t, "ferry_request_duration_seconds_sum{cluster=\"alpha\"} 0.003200"));
	cr_assert_null(strstr(t, "ferry_request_duration_seconds_count{cluster=\"alpha\",api"));
	/* requests keep their API label whatever the histogram does */
	cr_assert(has_line(t, "ferry_requests_total{cluster=\"alpha\",api=\"Produce\"} 113"));
	free(t);
	fx_sup.cfg.metrics_latency = CFG_LATENCY_OFF;
	t = status_metrics_text(&fx_sup, &len);
	cr_assert_null(strstr(t, "ferry_request_duration_seconds"), "%s", t);
	cr_assert(has_line(t, "ferry_requests_total{cluster=\"alpha\",api=\"Produce\"} 113"));
	free(t);
	fx_sup.cfg.metrics_latency = CFG_LATENCY_API;
	t = status_metrics_text(&fx_sup, &len);
	cr_assert(has_line(t, "ferry_request_duration_seconds_count{cluster=\"alpha\",api=\"Produce\"} 1"));
	cr_assert(has_line(t, "ferry_request_duration_seconds_count{cluster=\"alpha\",api=\"Metadata\"} 1"));
	free(t);
}

/* A scrape reads only the API slots a worker has seen: rendering
 * /metrics adds no page to any block (a read of an unwritten page of a
 * memfd would allocate it), and no line for an API nobody used. */
Test(status, metrics_text_reads_only_seen_api_slots)
{
	size_t len;
	struct metrics *m = fx_workers[1].procs[0].metrics;
	size_t before = shm_pages_resident(m, sizeof *m);

	char *t = status_metrics_text(&fx_sup, &len);
	cr_assert_eq(shm_pages_resident(m, sizeof *m), before, "a scrape touched unseen slots");
	cr_assert_null(strstr(t, "api=\"Fetch\""), "a line for an API never seen");
	free(t);
}

/* the gateway mode, and the names of an SNI gateway */
Test(status, cluster_json_gateway)
{
	struct sup_cluster *c = &fx_clusters[0];
	json_t *o = status_cluster_json(c);

	cr_assert_str_eq(sget(o, "gateway"), "ports");
	cr_assert_null(json_object_get(o, "sni"));
	json_decref(o);

	static struct cfg_cluster cl;
	static struct sup_ccfg cc;
	memset(&cl, 0, sizeof cl);
	memset(&cc, 0, sizeof cc);
	cc.cl = &cl;
	cl.gateway = CFG_GATEWAY_SNI;
	cl.sni_bootstrap_host = "kafka.example.com";
	cl.sni_broker_pattern = "broker-$(nodeId).kafka.example.com";
	c->ccfg = &cc;
	o = status_cluster_json(c);
	c->ccfg = NULL;
	cr_assert_str_eq(sget(o, "gateway"), "sni");
	const json_t *sni = json_object_get(o, "sni");
	static const char *const sni_keys[] = { "bootstrapHost", "brokerPattern", NULL };
	assert_keys(sni, sni_keys);
	cr_assert_str_eq(sget(sni, "bootstrapHost"), "kafka.example.com");
	cr_assert_str_eq(sget(sni, "brokerPattern"), "broker-$(nodeId).kafka.example.com");
	json_decref(o);
}

/* The sandbox in /admin/health: the kernel probed at start, what it lacks,
 * and what each live process reports in its block. */
Test(status, health_sandbox)
{
	fx_sup.cfg.sandbox = true;
	fx_sup.sandbox_kernel = (struct sandbox_kernel){ .seccomp = true, .landlock_abi = 3 };
	struct sandbox_kernel k = fx_sup.sandbox_kernel;
	/* alpha gen 1 (pid 100) has all the kernel offers; gen 2 (pid 200)
	 * has not locked down yet */
	atomic_store(&fx_workers[1].procs[0].metrics->sandbox.flags, sandbox_expected_flags(&k));
	json_t *j = status_health_json(&fx_sup, T0 + 1000), *sb = json_object_get(j, "sandbox");

	assert_keys(sb, (const char *const[]){ "setting", "kernel", "missing", "processes", NULL });
	cr_assert_str_eq(sget(sb, "setting"), "on");
	cr_assert(json_is_true(json_object_get(json_object_get(sb, "kernel"), "seccomp")));
	cr_assert_eq(iget(json_object_get(sb, "kernel"), "landlockAbi"), 3);
	cr_assert_not_null(strstr(sget(sb, "missing"), "Landlock network rules"));
	json_t *ps = json_object_get(sb, "processes");
	cr_assert_eq(json_array_size(ps), 3);   /* supervisor, alpha gen 2, alpha gen 1 */
	cr_assert_str_eq(sget(json_array_get(ps, 0), "role"), "supervisor");
	cr_assert_str_eq(sget(json_array_get(ps, 0), "sandbox"), "none");
	json_t *young = json_array_get(ps, 1), *old = json_array_get(ps, 2);
	assert_keys(old, (const char *const[]){ "role", "cluster", "generation", "index", "pid",
	    "sandbox", "complete", NULL });
	cr_assert_eq(iget(old, "pid"), 100);
	cr_assert_str_eq(sget(old, "cluster"), "alpha");
	cr_assert_str_eq(sget(old, "sandbox"),
	    sandbox_expected_flags(&k) & SANDBOX_F_SANITIZER ?
	    "seccomp,landlock-fs,no-new-privs,not-dumpable,sanitizer-allowlist" :
	    "seccomp,landlock-fs,no-new-privs,not-dumpable");
	cr_assert(json_is_true(json_object_get(old, "complete")));
	cr_assert_eq(iget(young, "pid"), 200);
	cr_assert_str_eq(sget(young, "sandbox"), "none");
	cr_assert(json_is_false(json_object_get(young, "complete")));
	json_decref(j);

	/* sandbox = off, everything offered: nothing missing, the worker off */
	fx_sup.cfg.sandbox = false;
	fx_sup.sandbox_kernel.landlock_abi = 7;
	atomic_store(&fx_workers[1].procs[0].metrics->sandbox.flags, SANDBOX_F_LOCKED | SANDBOX_F_OFF);
	j = status_health_json(&fx_sup, T0 + 1000);
	sb = json_object_get(j, "sandbox");
	cr_assert_str_eq(sget(sb, "setting"), "off");
	cr_assert(json_is_null(json_object_get(sb, "missing")));
	old = json_array_get(json_object_get(sb, "processes"), 2);
	cr_assert_str_eq(sget(old, "sandbox"), "off");
	cr_assert(json_is_false(json_object_get(old, "complete")));
	json_decref(j);
}

/* The admin process's entry: what its report (in the admin counters block)
 * says, judged against what the kernel offers. */
Test(status, health_sandbox_admin)
{
	fx_sup.sandbox_kernel = (struct sandbox_kernel){ .seccomp = true, .landlock_abi = 7 };
	struct sandbox_report r;
	memset(&r, 0, sizeof r);
	json_t *a = sandboxstatus_admin_json(&fx_sup, 321, &r);
	assert_keys(a, (const char *const[]){ "role", "pid", "sandbox", "complete", NULL });
	cr_assert_str_eq(sget(a, "role"), "admin");
	cr_assert_eq(iget(a, "pid"), 321);
	cr_assert_str_eq(sget(a, "sandbox"), "none");  /* not locked down yet */
	cr_assert(json_is_false(json_object_get(a, "complete")));
	json_decref(a);

	atomic_store(&r.flags, sandbox_expected_flags(&fx_sup.sandbox_kernel));
	a = sandboxstatus_admin_json(&fx_sup, 321, &r);
	cr_assert_not_null(strstr(sget(a, "sandbox"), "seccomp,landlock-fs,landlock-net,"
	    "landlock-scope,no-new-privs,not-dumpable"));
	cr_assert(json_is_true(json_object_get(a, "complete")));
	json_decref(a);

	/* less than the kernel offers (no Landlock scope): not complete */
	atomic_store(&r.flags, sandbox_expected_flags(&fx_sup.sandbox_kernel) &
	    ~SANDBOX_F_LANDLOCK_SCOPE);
	a = sandboxstatus_admin_json(&fx_sup, 321, &r);
	cr_assert(json_is_false(json_object_get(a, "complete")));
	json_decref(a);

	atomic_store(&r.flags, SANDBOX_F_LOCKED | SANDBOX_F_OFF);
	a = sandboxstatus_admin_json(&fx_sup, 321, &r);
	cr_assert_str_eq(sget(a, "sandbox"), "off");
	json_decref(a);
	a = sandboxstatus_admin_json(&fx_sup, 321, NULL);
	cr_assert_str_eq(sget(a, "sandbox"), "none");
	json_decref(a);
}

/* A worker that exited unasked is remembered in lastCrash (the generation
 * that replaces it has its own reason). */
Test(status, last_crash)
{
	json_t *c = status_cluster_json(&fx_clusters[0]);
	cr_assert_null(json_object_get(c, "lastCrash"));
	json_decref(c);
	fx_clusters[0].last_crash.at_ms = T0 + 5000;
	fx_clusters[0].last_crash.generation = 1;
	fx_clusters[0].last_crash.index = 1;
	fx_clusters[0].last_crash.pid = 4242;
	snprintf(fx_clusters[0].last_crash.reason, sizeof fx_clusters[0].last_crash.reason,
	    "sandbox violation: syscall openat");
	c = status_cluster_json(&fx_clusters[0]);
	json_t *lc = json_object_get(c, "lastCrash");
	assert_keys(lc, (const char *const[]){ "time", "generation", "index", "pid", "reason",
	    NULL });
	cr_assert_str_eq(sget(lc, "time"), "2023-11-14T22:13:25.123Z");
	cr_assert_eq(iget(lc, "generation"), 1);
	cr_assert_eq(iget(lc, "index"), 1);
	cr_assert_eq(iget(lc, "pid"), 4242);
	cr_assert_str_eq(sget(lc, "reason"), "sandbox violation: syscall openat");
	json_decref(c);
}
