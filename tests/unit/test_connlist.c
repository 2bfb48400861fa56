/*
 * Unit tests for supervisor/connlist and the admin process's reading of
 * its query string (supervisor/connquery.c): the query (every parameter,
 * percent decoding, what is a 400), the filters, a row as JSON (nulls where the
 * client said nothing, no field a secret could be in), a cluster's listing
 * over the tables of several workers and generations (sorted by start,
 * paged, dead workers left out, unlisted counted), and the client software
 * series of /metrics (merged across workers, bounded, buckets).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/conntab.h"
#include "supervisor/connlist.h"
#include "supervisor/connquery.h"
#include "supervisor/supervisor.h"

/* ---- the query -------------------------------------------------------------- */

static int
parse(const char *qs, struct adminproto_conn_query *q, char *err)
{
	return connquery_parse(qs, q, err, 200);
}

Test(connlist_query, defaults)
{
	struct adminproto_conn_query q;
	char err[200];
	cr_assert_eq(parse(NULL, &q, err), 0);
	cr_expect_eq(q.limit, ADMINPROTO_CONN_LIMIT_DEFAULT);
	cr_expect_eq(q.offset, 0);
	cr_expect(!q.by_client_id && !q.by_principal);
	cr_assert_eq(parse("", &q, err), 0);
	cr_expect_eq(q.limit, ADMINPROTO_CONN_LIMIT_DEFAULT);
}

Test(connlist_query, every_parameter_and_decoding)
{
	struct adminproto_conn_query q;
	char err[200] = "";
	cr_assert_eq(parse("limit=5&offset=10&client_id=orders%2Dapp+v2&principal=CN%3Dalice%2C%20O",
	    &q, err), 0, "%s", err);
	cr_expect_eq(q.limit, 5);
	cr_expect_eq(q.offset, 10);
	cr_expect(q.by_client_id);
	cr_expect_str_eq(q.client_id, "orders-app v2");
	cr_expect(q.by_principal);
	cr_expect_str_eq(q.principal, "CN=alice, O");
	cr_assert_eq(parse("client_id=", &q, err), 0, "an empty client id is one");
	cr_expect(q.by_client_id);
	cr_expect_str_eq(q.client_id, "");
	cr_assert_eq(parse("limit=1000&&offset=0", &q, err), 0, "%s", err);
	cr_expect_eq(q.limit, 1000);
}

Test(connlist_query, bad_ones_are_400)
{
	static const char *const bad[] = {
		"limit=0", "limit=1001", "limit=-1", "limit=abc", "limit=", "limit=1x",
		"limit= 5", "offset=-1", "offset=100000001", "offset=1e3", "limit",
		"limit=5&limit=6", "client_id=a&client_id=b", "principal=a&principal=b",
		"user=alice", "clientId=x", "client_id=%zz", "client_id=%4", "client_id=a%00b",
		"offset=99999999999999999999999",
	};
	struct adminproto_conn_query q;
	char err[200];
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = 0;
		cr_expect_eq(parse(bad[i], &q, err), -1, "%s accepted", bad[i]);
		cr_expect(err[0], "%s: no reason", bad[i]);
	}
	/* a value longer than a client id can be */
	char longq[600] = "client_id=";
	memset(longq + strlen(longq), 'x', 256);
	cr_expect_eq(parse(longq, &q, err), -1);
	longq[strlen("client_id=") + 255] = 0;
	cr_expect_eq(parse(longq, &q, err), 0, "255 bytes fit");
	/* the name of an unknown parameter is shown, printable */
	cr_expect_eq(parse("a%0Ab=1", &q, err), -1);
	cr_expect(strchr(err, '\n') == NULL, "%s", err);
}

/* ---- rows --------------------------------------------------------------------- */

static struct conntab_entry
entry(uint64_t id, int64_t since, const char *client_id, const char *principal)
{
	struct conntab_entry e;
	memset(&e, 0, sizeof e);
	e.id = id;
	e.since_ms = since;
	e.node_id = -1;
	snprintf(e.addr, sizeof e.addr, "127.0.0.2:%u", 40000 + (unsigned)id);
	snprintf(e.state, sizeof e.state, "open");
	if (client_id) {
		e.flags |= CONNTAB_F_CLIENT_ID;
		snprintf(e.client_id, sizeof e.client_id, "%s", client_id);
	}
	if (principal) {
		e.flags |= CONNTAB_F_PRINCIPAL;
		snprintf(e.mechanism, sizeof e.mechanism, "PLAIN");
		snprintf(e.principal, sizeof e.principal, "%s", principal);
	}
	return e;
}

Test(connlist_row, filters)
{
	struct adminproto_conn_query q;
	char err[200];
	struct conntab_entry a = entry(1, 1, "orders", "alice"), b = entry(2, 2, NULL, NULL);
	cr_assert_eq(parse("client_id=orders", &q, err), 0);
	cr_expect(connlist_match(&q, &a));
	cr_expect(!connlist_match(&q, &b), "no client id yet");
	cr_assert_eq(parse("principal=alice", &q, err), 0);
	cr_expect(connlist_match(&q, &a));
	cr_expect(!connlist_match(&q, &b));
	cr_assert_eq(parse("principal=ALICE", &q, err), 0);
	cr_expect(!connlist_match(&q, &a), "exact, case and all");
	/* a null client_id does not match the empty one */
	b.flags |= CONNTAB_F_CLIENT_ID | CONNTAB_F_CLIENT_ID_NULL;
	cr_assert_eq(parse("client_id=", &q, err), 0);
	cr_expect(!connlist_match(&q, &b));
	b.flags &= ~CONNTAB_F_CLIENT_ID_NULL;
	cr_expect(connlist_match(&q, &b));
	cr_assert_eq(parse("limit=3", &q, err), 0);
	cr_expect(connlist_match(&q, &a) && connlist_match(&q, &b), "no filter");
}

Test(connlist_row, json_fields)
{
	struct conntab_entry e = entry(9, 1764000000000, "orders", "alice");
	e.flags |= CONNTAB_F_PROXIED | CONNTAB_F_TLS | CONNTAB_F_SOFTWARE |
	    CONNTAB_F_SOFTWARE_VALID | CONNTAB_F_BROKER;
	e.node_id = 2;
	snprintf(e.software_name, sizeof e.software_name, "librdkafka");
	snprintf(e.software_version, sizeof e.software_version, "2.0.2");
	json_t *j = connlist_row_json(&e, 4242, 1, 7, 1764000065500);
	cr_assert_not_null(j);
	cr_expect_str_eq(json_string_value(json_object_get(j, "address")), "127.0.0.2:40009");
	cr_expect(json_is_true(json_object_get(j, "proxied")));
	cr_expect(json_is_true(json_object_get(j, "tls")));
	cr_expect_str_eq(json_string_value(json_object_get(j, "listener")), "broker");
	cr_expect_eq(json_integer_value(json_object_get(j, "nodeId")), 2);
	cr_expect_str_eq(json_string_value(json_object_get(j, "clientId")), "orders");
	cr_expect_str_eq(json_string_value(json_object_get(j, "clientSoftwareName")), "librdkafka");
	cr_expect_str_eq(json_string_value(json_object_get(j, "clientSoftwareVersion")), "2.0.2");
	cr_expect_str_eq(json_string_value(json_object_get(j, "saslMechanism")), "PLAIN");
	cr_expect_str_eq(json_string_value(json_object_get(j, "principal")), "alice");
	cr_expect_str_eq(json_string_value(json_object_get(j, "since")), "2025-11-24T16:00:00.000Z");
	cr_expect_eq(json_integer_value(json_object_get(j, "ageSeconds")), 65);
	cr_expect_eq(json_integer_value(json_object_get(j, "pid")), 4242);
	cr_expect_eq(json_integer_value(json_object_get(j, "worker")), 1);
	cr_expect_eq(json_integer_value(json_object_get(j, "generation")), 7);
	cr_expect_eq(json_integer_value(json_object_get(j, "id")), 9);
	cr_expect_eq(json_object_size(j), 17, "no other field (nothing a secret could be in)");
	json_decref(j);
	/* what the client has not said is null */
	e = entry(3, 5, NULL, NULL);
	j = connlist_row_json(&e, 1, 0, 1, 0);
	cr_expect(json_is_null(json_object_get(j, "clientId")));
	cr_expect(json_is_null(json_object_get(j, "clientSoftwareName")));
	cr_expect(json_is_null(json_object_get(j, "saslMechanism")));
	cr_expect(json_is_null(json_object_get(j, "principal")));
	cr_expect(json_is_null(json_object_get(j, "nodeId")));
	cr_expect_str_eq(json_string_value(json_object_get(j, "listener")), "bootstrap");
	cr_expect_eq(json_integer_value(json_object_get(j, "ageSeconds")), 0);
	json_decref(j);
}

/* ---- a cluster's listing ---------------------------------------------------- */

struct fixture {
	struct sup s;
	struct sup_cluster *c;
	struct sup_gen *g[2];
	struct conntab_writer w[3];
	int fds[3];
};

static struct fixture fx;

/* Cluster "alpha": generation 2 (two workers, pids 200 and 201) and
 * generation 1 (draining, one worker, pid 100); connections spread over
 * them with starts out of order. */
static void
setup(void)
{
	memset(&fx, 0, sizeof fx);
	fx.c = calloc(1, sizeof *fx.c);
	cr_assert_not_null(fx.c);
	snprintf(fx.c->name, sizeof fx.c->name, "alpha");
	for (int i = 0; i < 2; i++) {
		fx.g[i] = calloc(1, sizeof *fx.g[i]);
		cr_assert_not_null(fx.g[i]);
		fx.g[i]->cluster = fx.c;
	}
	fx.g[0]->generation = 2;
	fx.g[0]->n_procs = 2;
	fx.g[0]->next = fx.g[1];
	fx.g[1]->generation = 1;
	fx.g[1]->n_procs = 1;
	for (int i = 0; i < 2; i++) {
		fx.g[i]->procs = calloc(fx.g[i]->n_procs, sizeof *fx.g[i]->procs);
		cr_assert_not_null(fx.g[i]->procs);
	}
	fx.c->gens = fx.g[0];
	struct sup_proc *procs[3] = { &fx.g[0]->procs[0], &fx.g[0]->procs[1], &fx.g[1]->procs[0] };
	pid_t pids[3] = { 200, 201, 100 };
	for (int i = 0; i < 3; i++) {
		struct sup_proc *p = procs[i];
		p->gen = i < 2 ? fx.g[0] : fx.g[1];
		p->index = i < 2 ? (unsigned)i : 0;
		p->pid = pids[i];
		p->alive = true;
		p->conns_rows = 16;
		fx.fds[i] = conntab_create(16, &p->conns);
		cr_assert_geq(fx.fds[i], 0);
		cr_assert_eq(conntab_writer_init(&fx.w[i], p->conns, 16), 0);
	}
	static const struct { int w; uint64_t id; int64_t since; const char *cid, *pr; } conns[] = {
		{ 0, 1, 5000, "orders", "alice" },
		{ 0, 2, 1000, "billing", "bob" },
		{ 1, 1, 3000, "orders", NULL },
		{ 2, 7, 2000, "orders", "alice" },
		{ 2, 8, 4000, NULL, NULL },
	};
	for (size_t i = 0; i < sizeof conns / sizeof conns[0]; i++) {
		int r = conntab_take(&fx.w[conns[i].w]);
		struct conntab_entry e = entry(conns[i].id, conns[i].since, conns[i].cid, conns[i].pr);
		conntab_put(&fx.w[conns[i].w], r, &e);
	}
	fx.s.clusters = &fx.c;
	fx.s.n_clusters = 1;
}

static void
teardown(void)
{
	struct sup_proc *procs[3] = { &fx.g[0]->procs[0], &fx.g[0]->procs[1], &fx.g[1]->procs[0] };
	for (int i = 0; i < 3; i++) {
		conntab_writer_free(&fx.w[i]);
		conntab_unmap(procs[i]->conns, procs[i]->conns_rows);
		close(fx.fds[i]);
	}
	for (int i = 0; i < 2; i++) {
		free(fx.g[i]->procs);
		free(fx.g[i]);
	}
	free(fx.c);
}

static json_t *
listing(const char *qs)
{
	struct adminproto_conn_query q;
	char err[200];
	cr_assert_eq(parse(qs, &q, err), 0, "%s", err);
	json_t *j = connlist_json(fx.c, &q, 10000);
	cr_assert_not_null(j);
	return j;
}

static int64_t
ith_since(json_t *j, size_t i)
{
	json_t *row = json_array_get(json_object_get(j, "connections"), i);
	return json_integer_value(json_object_get(row, "id"));
}

Test(connlist_cluster, oldest_first_over_every_worker, .init = setup, .fini = teardown)
{
	json_t *j = listing(NULL);
	cr_expect_str_eq(json_string_value(json_object_get(j, "cluster")), "alpha");
	cr_expect_eq(json_integer_value(json_object_get(j, "total")), 5);
	json_t *rows = json_object_get(j, "connections");
	cr_assert_eq(json_array_size(rows), 5);
	/* starts 1000 (w0 id 2), 2000 (gen 1 id 7), 3000, 4000, 5000 */
	static const int64_t want_ids[] = { 2, 7, 1, 8, 1 };
	static const int64_t want_pids[] = { 200, 100, 201, 100, 200 };
	for (size_t i = 0; i < 5; i++) {
		json_t *row = json_array_get(rows, i);
		cr_expect_eq(json_integer_value(json_object_get(row, "id")), want_ids[i], "row %zu", i);
		cr_expect_eq(json_integer_value(json_object_get(row, "pid")), want_pids[i], "row %zu",
		    i);
	}
	cr_expect_eq(json_integer_value(json_object_get(json_array_get(rows, 1), "generation")), 1,
	    "the draining generation's connections are listed");
	cr_expect(json_is_null(json_object_get(j, "nextOffset")));
	cr_expect_eq(json_integer_value(json_object_get(j, "unlisted")), 0);
	json_decref(j);
}

Test(connlist_cluster, pages, .init = setup, .fini = teardown)
{
	json_t *j = listing("limit=2");
	cr_expect_eq(json_array_size(json_object_get(j, "connections")), 2);
	cr_expect_eq(json_integer_value(json_object_get(j, "nextOffset")), 2);
	cr_expect_eq(ith_since(j, 0), 2);
	json_decref(j);
	j = listing("limit=2&offset=2");
	cr_expect_eq(ith_since(j, 0), 1);
	cr_expect_eq(ith_since(j, 1), 8);
	cr_expect_eq(json_integer_value(json_object_get(j, "nextOffset")), 4);
	json_decref(j);
	j = listing("limit=2&offset=4");
	cr_expect_eq(json_array_size(json_object_get(j, "connections")), 1);
	cr_expect(json_is_null(json_object_get(j, "nextOffset")));
	json_decref(j);
	j = listing("offset=50");
	cr_expect_eq(json_array_size(json_object_get(j, "connections")), 0);
	cr_expect_eq(json_integer_value(json_object_get(j, "total")), 5, "past the end: total kept");
	json_decref(j);
}

Test(connlist_cluster, filtered, .init = setup, .fini = teardown)
{
	json_t *j = listing("client_id=orders");
	cr_expect_eq(json_integer_value(json_object_get(j, "total")), 3);
	json_decref(j);
	j = listing("principal=alice&client_id=orders");
	cr_expect_eq(json_integer_value(json_object_get(j, "total")), 2);
	json_decref(j);
	j = listing("principal=nobody");
	cr_expect_eq(json_integer_value(json_object_get(j, "total")), 0);
	cr_expect_eq(json_array_size(json_object_get(j, "connections")), 0);
	json_decref(j);
}

Test(connlist_cluster, dead_workers_and_full_tables, .init = setup, .fini = teardown)
{
	fx.g[1]->procs[0].alive = false;  /* its rows are stale: never listed */
	cr_expect_eq(conntab_take(&fx.w[0]) >= 0, true);
	json_t *j = listing(NULL);
	cr_expect_eq(json_integer_value(json_object_get(j, "total")), 3);
	json_decref(j);
	/* a table that ran out of rows says how many it could not list */
	for (int i = 0; i < 20; i++)
		conntab_take(&fx.w[1]);
	j = listing(NULL);
	cr_expect_eq(json_integer_value(json_object_get(j, "unlisted")), 20 - 15);
	json_decref(j);
}

/* ---- software series ---------------------------------------------------------- */

static char *
metrics_text(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	cr_assert_not_null(f);
	connlist_metrics(f, &fx.s);
	fclose(f);
	return buf;
}

Test(connlist_software, merged_bounded_and_bucketed, .init = setup, .fini = teardown)
{
	/* worker 0: 3 librdkafka 2.0.2, worker 1: 2 of them and a java,
	 * generation 1: one that never said, one invalid */
	for (int i = 0; i < 3; i++)
		conntab_soft_move(&fx.w[0], CONNTAB_B_UNKNOWN, true, true, "librdkafka", "2.0.2");
	for (int i = 0; i < 2; i++)
		conntab_soft_move(&fx.w[1], CONNTAB_B_UNKNOWN, true, true, "librdkafka", "2.0.2");
	conntab_soft_move(&fx.w[1], CONNTAB_B_UNKNOWN, true, true, "apache-kafka-java", "4.1.0");
	conntab_soft_add(&fx.w[2], CONNTAB_B_UNKNOWN);
	conntab_soft_add(&fx.w[2], CONNTAB_B_INVALID);
	char *t = metrics_text();
	cr_expect(strstr(t, "# TYPE ferry_client_connections gauge\n") != NULL, "%s", t);
	cr_expect(strstr(t, "ferry_client_connections{cluster=\"alpha\",software=\"librdkafka\","
	    "version=\"2.0.2\"} 5\n") != NULL, "%s", t);
	cr_expect(strstr(t, "ferry_client_connections{cluster=\"alpha\",software=\"apache-kafka-java\","
	    "version=\"4.1.0\"} 1\n") != NULL, "%s", t);
	cr_expect(strstr(t, "software=\"unknown\",version=\"\"} 1\n") != NULL, "%s", t);
	cr_expect(strstr(t, "software=\"invalid\",version=\"\"} 1\n") != NULL, "%s", t);
	cr_expect(strstr(t, "software=\"other\",version=\"\"} 0\n") != NULL, "%s", t);
	/* the largest first */
	cr_expect(strstr(t, "librdkafka") < strstr(t, "apache-kafka-java"));
	free(t);
}

Test(connlist_software, at_most_32_series_per_cluster, .init = setup, .fini = teardown)
{
	/* 3 workers x 20 distinct pairs = 60 pairs: 32 series, the rest other */
	for (int w = 0; w < 3; w++)
		for (int k = 0; k < 20; k++) {
			char v[16];
			snprintf(v, sizeof v, "%d.%d", w, k);
			conntab_soft_move(&fx.w[w], CONNTAB_B_UNKNOWN, true, true, "client", v);
		}
	char *t = metrics_text();
	size_t series = 0;
	for (const char *p = t; (p = strstr(p, "software=\"client\"")) != NULL; p++)
		series++;
	cr_expect_eq(series, CONNLIST_SOFTWARE_SERIES, "%s", t);
	cr_expect(strstr(t, "software=\"other\",version=\"\"} 28\n") != NULL, "%s", t);
	free(t);
}
