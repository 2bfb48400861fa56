/*
 * test_clusterlist — GET /admin/clusters's query from the string the admin
 * process reads (clusterquery.h) to the list ferryd selects with it
 * (clusterlist.h) over a process table built in memory: name globs,
 * states, every sort key, pages, failed and unresponsive clusters first,
 * and the 400 answers for bad parameters.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/http.h"
#include "supervisor/clusterlist.h"
#include "supervisor/clusterquery.h"
#include "supervisor/supervisor.h"

#define T0 1700000000000ULL
#define N 6

static struct sup fx;
static struct sup_cluster cl[N];
static struct sup_cluster *ptrs[N];
static struct sup_gen gens[N];
static struct sup_proc procs[N][1];

/* name, state, unresponsive, since (s after T0), connections */
static const struct { const char *name; enum lc_state st; bool unresp; unsigned since, conns; }
fx_def[N] = {
	{ "team-a", LC_ACCEPTING, false, 10, 5 },
	{ "ops-b", LC_FAILED, false, 20, 0 },
	{ "team-c", LC_ACCEPTING, true, 30, 1 },
	{ "team-d", LC_ACCEPTING, false, 40, 9 },
	{ "ops-e", LC_INITIALIZING, false, 50, 0 },
	{ "team-f", LC_DRAINING, false, 5, 2 },
};

static void
fx_setup(void)
{
	memset(&fx, 0, sizeof fx);
	fx.clusters = ptrs;
	fx.n_clusters = N;
	for (size_t i = 0; i < N; i++) {
		struct sup_cluster *c = &cl[i];
		struct sup_gen *g = &gens[i];
		memset(c, 0, sizeof *c);
		memset(g, 0, sizeof *g);
		ptrs[i] = c;
		c->sup = &fx;
		snprintf(c->name, sizeof c->name, "%s", fx_def[i].name);
		c->st = fx_def[i].st == LC_FAILED ? FSM_C_FAILED : FSM_C_ACTIVE;
		g->cluster = c;
		g->generation = 1;
		g->n_procs = 1;
		g->procs = procs[i];
		memset(g->procs, 0, sizeof procs[i]);
		g->procs[0].gen = g;
		g->procs[0].alive = true;
		g->procs[0].pid = 100 + (pid_t)i;
		g->lc.state = fx_def[i].st;
		g->st = fx_def[i].st == LC_ACCEPTING ? FSM_G_ACCEPTING : fx_def[i].st == LC_FAILED ?
		    FSM_G_FAILED : fx_def[i].st == LC_DRAINING ? FSM_G_DRAINING : FSM_G_STARTING;
		g->lc.since_ms = T0 + fx_def[i].since * 1000;
		g->unresponsive = fx_def[i].unresp;
		g->unresponsive_since_ms = T0 + fx_def[i].since * 1000;
		int fd = metrics_create(1, &g->procs[0].metrics);
		cr_assert_geq(fd, 0);
		close(fd);
		METRIC_ADD(g->procs[0].metrics, connections_active, fx_def[i].conns);
		c->gens = g;
	}
}

static void
fx_teardown(void)
{
	for (size_t i = 0; i < N; i++)
		metrics_unmap(gens[i].procs[0].metrics);
}

TestSuite(clusterlist, .init = fx_setup, .fini = fx_teardown);

/* The names listed for query q, comma-separated, into out. */
static void
names(const char *q, char *out, size_t len)
{
	struct adminproto_list_query l;
	char err[256];
	size_t at = 0, i;
	json_t *c;

	cr_assert_eq(clusterquery_parse(q, &l, err, sizeof err), 0, "%s: %s", q ? q : "-", err);
	json_t *o = clusterlist_json(&fx, &l);
	cr_assert_not_null(o);
	out[0] = '\0';
	json_array_foreach(json_object_get(o, "clusters"), i, c)
		at += (size_t)snprintf(out + at, len - at, "%s%s", i ? "," : "",
		    json_string_value(json_object_get(c, "name")));
	if (l.given) {
		cr_assert_eq(json_integer_value(json_object_get(o, "total")), N);
		cr_assert(json_is_integer(json_object_get(o, "matched")));
	} else {
		cr_assert_eq(json_object_size(o), 1, "no parameter: {\"clusters\"} alone");
	}
	json_decref(o);
}

#define EXPECT_LIST(q, want) do { \
	char got_[256]; \
	names(q, got_, sizeof got_); \
	cr_expect_str_eq(got_, want, "%s", (q) ? (q) : "(no query)"); \
} while (0)

Test(clusterlist, failed_and_unresponsive_first_then_file_order)
{
	EXPECT_LIST(NULL, "ops-b,team-c,team-a,team-d,ops-e,team-f");
	EXPECT_LIST("", "ops-b,team-c,team-a,team-d,ops-e,team-f");
	EXPECT_LIST("sort=file", "ops-b,team-c,team-a,team-d,ops-e,team-f");
}

Test(clusterlist, sort_keys)
{
	EXPECT_LIST("sort=name", "ops-b,team-c,ops-e,team-a,team-d,team-f");
	EXPECT_LIST("sort=connections", "team-c,ops-b,team-d,team-a,team-f,ops-e");
	EXPECT_LIST("sort=state", "ops-b,team-c,team-f,ops-e,team-a,team-d");
	EXPECT_LIST("sort=since", "team-c,ops-b,ops-e,team-d,team-a,team-f");
}

Test(clusterlist, name_globs_and_states)
{
	EXPECT_LIST("name=team-*", "team-c,team-a,team-d,team-f");
	EXPECT_LIST("name=ops-%2A,team-%5bad%5d", "ops-b,team-a,team-d,ops-e");
	EXPECT_LIST("name=team-a", "team-a");
	EXPECT_LIST("name=nothing*", "");
	EXPECT_LIST("state=failed", "ops-b");
	EXPECT_LIST("state=unresponsive", "team-c");
	EXPECT_LIST("state=failed,unresponsive", "ops-b,team-c");
	EXPECT_LIST("state=accepting", "team-c,team-a,team-d");
	EXPECT_LIST("state=initializing,draining&name=*-e&sort=name", "ops-e");
}

Test(clusterlist, pages)
{
	EXPECT_LIST("limit=2", "ops-b,team-c");
	EXPECT_LIST("limit=2&offset=2", "team-a,team-d");
	EXPECT_LIST("offset=5", "team-f");
	EXPECT_LIST("offset=99", "");
	struct adminproto_list_query l;
	char err[256];
	cr_assert_eq(clusterquery_parse("state=accepting&limit=1", &l, err, sizeof err), 0);
	json_t *o = clusterlist_json(&fx, &l);
	cr_assert_eq(json_integer_value(json_object_get(o, "matched")), 3);
	cr_assert_eq(json_array_size(json_object_get(o, "clusters")), 1);
	json_decref(o);
}

Test(clusterlist, bad_parameters_are_refused_with_a_reason)
{
	static const struct { const char *q, *msg; } bad[] = {
		{ "color=red", "unknown query parameter 'color'" },
		{ "sort=name&sort=state", "'sort' given twice" },
		{ "state=dead", "unknown state 'dead'" },
		{ "state=failed,", "unknown state ''" },
		{ "sort=size", "sort: unknown key 'size'" },
		{ "limit=0", "limit: '0' is not a number from 1" },
		{ "limit=ten", "limit: 'ten'" },
		{ "offset=-1", "offset: '-1'" },
		{ "name=", "name: an empty pattern" },
		{ "name=a,,b", "name: an empty pattern" },
		{ "name=%zz", "malformed query string" },
		{ "=x", "malformed query string" },
		{ "limit=100001", "limit: '100001' is not a number from 1 to 100000" },
		{ "offset=100000001", "offset: '100000001'" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct adminproto_list_query l;
		char err[256] = "";
		cr_expect_eq(clusterquery_parse(bad[i].q, &l, err, sizeof err), -1, "%s", bad[i].q);
		cr_expect(strstr(err, bad[i].msg) != NULL, "%s: %s", bad[i].q, err);
		cr_expect_eq(l.names[0], '\0', "%s: nothing kept after an error", bad[i].q);
		cr_expect_eq(l.given, 0, "%s", bad[i].q);
	}
}

Test(clusterlist, name_patterns_fit_the_request)
{
	/* the globs travel in a fixed field: 1023 bytes fit, 1024 do not */
	static char q[16 + ADMINPROTO_LIST_NAMES_MAX];
	struct adminproto_list_query l;
	char err[256] = "";

	snprintf(q, sizeof q, "name=");
	memset(q + 5, '*', ADMINPROTO_LIST_NAMES_MAX - 1);
	q[5 + ADMINPROTO_LIST_NAMES_MAX - 1] = '\0';
	cr_assert_eq(clusterquery_parse(q, &l, err, sizeof err), 0, "%s", err);
	cr_expect_eq(strlen(l.names), ADMINPROTO_LIST_NAMES_MAX - 1);
	strcat(q, "*");
	cr_expect_eq(clusterquery_parse(q, &l, err, sizeof err), -1);
	cr_expect(strstr(err, "name: 1024 bytes of patterns, at most 1023") != NULL, "%s", err);
}

Test(clusterlist, query_pairs_are_decoded)
{
	size_t pos = 0;
	char *k, *v;
	const char *q = "a=1+2&&b=%41%2c&c";
	cr_assert_eq(http_query_next(q, &pos, &k, &v), 1);
	cr_expect_str_eq(k, "a");
	cr_expect_str_eq(v, "1 2");
	free(k);
	free(v);
	cr_assert_eq(http_query_next(q, &pos, &k, &v), 1);
	cr_expect_str_eq(k, "b");
	cr_expect_str_eq(v, "A,");
	free(k);
	free(v);
	cr_assert_eq(http_query_next(q, &pos, &k, &v), 1);
	cr_expect_str_eq(k, "c");
	cr_expect_str_eq(v, "");
	free(k);
	free(v);
	cr_assert_eq(http_query_next(q, &pos, &k, &v), 0);
	pos = 0;
	cr_assert_eq(http_query_next("x=%00", &pos, &k, &v), -1);
}
