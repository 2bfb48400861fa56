/*
 * test_staterec — the versioned state record of an upgrade
 * (supervisor/staterec.h) over a model built in memory: everything it
 * carries comes back the same (round trip), strictness (an unknown,
 * missing or mistyped key is refused with its path; a version not agreed
 * is refused), the order of the listening sockets, and counters by name
 * (unknown names dropped, absent ones zero, buckets folded by bound).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "supervisor/staterec.h"
#include "supervisor/supervisor.h"
#include "common/tlskeys.h"

#define T0 1700000000123ULL

static struct sup fx;
static struct sup_cluster fx_c[2];
static struct sup_cluster *fx_cp[2];
static struct sup_ccfg fx_cc[2];
static struct sup_listener fx_l[2][3];
static struct sup_gen fx_g[2];
static uint64_t fx_times[8];
static struct nodemap_entry fx_nodes[2];
static struct tlskeys fx_keys;
static struct metrics *fx_retired;
static struct ipc_unknown_node fx_unknown[SUP_UNKNOWN_NODES];
static uint64_t fx_unknown_since[SUP_UNKNOWN_NODES];
static char fx_text[] = "[ferry]\ncontrol_socket = /run/x.sock\n\n[cluster a]\n...\n";

static void
fx_setup(void)
{
	memset(&fx, 0, sizeof fx);
	memset(fx_c, 0, sizeof fx_c);
	memset(fx_cc, 0, sizeof fx_cc);
	memset(fx_g, 0, sizeof fx_g);
	fx.pid = 4121;
	fx.process_started_at_ms = T0 + 5;
	fx.started_at_ms = T0;
	fx.applied_at_ms = T0 + 10;
	fx.config_path = "/etc/ferry/ferry.ini";
	fx.config_text = fx_text;
	fx.config_len = strlen(fx_text);
	snprintf(fx.config_version, sizeof fx.config_version, "sha256:%064d", 7);
	fx.exec_path = "/usr/sbin/ferryd";
	fx.hup_pending = true;
	fx.reload_stats.result[SUP_RELOAD_SUCCESS] = 4;
	fx.reload_stats.bucket[3] = 2;
	fx.reload_stats.count = 4;
	fx.reload_stats.sum_ms = 321;
	fx.last_reload.status = SUP_RELOAD_FAILED;
	fx.last_reload.timestamp_ms = T0 + 99;
	snprintf(fx.last_reload.source, sizeof fx.last_reload.source, "SIGHUP");
	static char *errs[] = { "cluster b: bind: in use", NULL };
	fx.last_reload.errors = errs;
	fx.last_validation.valid = true;
	fx.last_validation.timestamp_ms = T0 + 7;
	fx.upgrade_results[SUP_UPGRADE_SUCCESS] = 2;
	fx.upgrade_results[SUP_UPGRADE_REJECTED] = 1;
	fx.clusters = fx_cp;
	fx.n_clusters = 2;
	for (int i = 0; i < 2; i++) {
		struct sup_cluster *c = &fx_c[i];
		fx_cp[i] = c;
		c->sup = &fx;
		snprintf(c->name, sizeof c->name, "%s", i ? "beta" : "alpha");
		snprintf(c->config_version, sizeof c->config_version, "sha256:%064d", i + 1);
		c->ccfg = &fx_cc[i];
		fx_cc[i].listeners = fx_l[i];
		fx_cc[i].n_listeners = 3;
		for (int k = 0; k < 3; k++)
			fx_l[i][k] = (struct sup_listener){ k ? SUP_LISTENER_BROKER : SUP_LISTENER_BOOTSTRAP,
				k ? k : -1, { "127.0.0.1", (uint16_t)(9000 + 10 * i + k) }, 100 + 10 * i + k };
		c->crash.times = fx_times;
		c->crash.cap = 8;
	}
	/* alpha: serving, crashes in the ring (wrapped), learned brokers, keys */
	struct sup_cluster *a = &fx_c[0], *b = &fx_c[1];
	a->st = FSM_C_ACTIVE;
	a->next_generation = 7;
	a->restarts = 3;
	fx_times[6] = T0 + 1;
	fx_times[7] = T0 + 2;
	fx_times[0] = T0 + 3;
	a->crash.head = 6;
	a->crash.n = 3;
	a->crash.backoff_ms = 800;
	a->crash.started_ms = 5555;
	a->crash.restarts = 3;
	a->crash.loops = 1;
	a->unresponsive_total = 2;
	a->upstream = SUP_UPSTREAM_REACHABLE;
	a->upstream_since_ms = T0 + 3;
	fx_nodes[0] = (struct nodemap_entry){ 1, 9092, "b1.kafka" };
	fx_nodes[1] = (struct nodemap_entry){ 2, 9093, "b2.kafka" };
	a->nodes.v = fx_nodes;
	a->nodes.n = 2;
	a->nodes.generation = 6;
	snprintf(a->nodes.upstream_key, sizeof a->nodes.upstream_key, "sha256:%064d", 9);
	a->tickets = &fx_keys;
	a->last_replacement.valid = true;
	a->last_replacement.from_generation = 5;
	a->last_replacement.to_generation = 6;
	a->last_replacement.handed_over = 21;
	metrics_unmap(fx_retired);
	a->retired = fx_retired = metrics_totals_new();
	cr_assert_not_null(a->retired);
	METRIC_ADD(a->retired, connections_accepted, 1000);
	METRIC_ADD(a->retired, requests, 77);
	metrics_mark_seen(a->retired, 3);
	atomic_fetch_add(&a->retired->api[3].requests, 77);
	atomic_fetch_add(&a->retired->api[3].responses, 76);
	atomic_fetch_add(&a->retired->api[3].bucket[2], 70);
	METRIC_ADD(a->retired, connections_active, 9);     /* a gauge: never carried */
	fx_g[0].cluster = a;
	fx_g[0].generation = 6;
	fx_g[0].st = FSM_G_ACCEPTING;
	fx_g[0].lc.state = LC_ACCEPTING;
	a->gens = &fx_g[0];
	/* beta: failed with its sockets released */
	b->st = FSM_C_FAILED;
	snprintf(b->fail_reason, sizeof b->fail_reason, "crash loop: 5 crashes");
	for (int k = 0; k < 3; k++)
		fx_l[1][k].fd = -1;
	b->unknown_nodes = fx_unknown;
	b->unknown_since_ms = fx_unknown_since;
	b->unknown_nodes[0] = (struct ipc_unknown_node){ 9, 9099, "x.kafka" };
	b->unknown_since_ms[0] = T0 + 4;
	b->n_unknown_nodes = 1;
	fx_g[1].cluster = b;
	fx_g[1].generation = 12;
	fx_g[1].st = FSM_G_FAILED;
	fx_g[1].lc.state = LC_FAILED;
	fx_g[1].lc.since_ms = T0 + 8;
	snprintf(fx_g[1].lc.reason, sizeof fx_g[1].lc.reason, "exited with status 78");
	b->gens = &fx_g[1];
}

TestSuite(staterec, .init = fx_setup);

static const struct staterec_io fx_io = {
	.notify_socket = "/run/systemd/notify",
	.ticket_rotation_next_mono = 123456,
	.control = true, .control_path = "/run/x.sock", .control_dev = 64, .control_ino = 99,
	.admin = true, .admin_addr = { "127.0.0.1", 9190 },
	.admin_counters = { 1, 2, 3, 4 },
};

static char *
encode(size_t *len)
{
	char *t = staterec_encode(&fx, &fx_io, 1, len);
	cr_assert_not_null(t);
	return t;
}

Test(staterec, round_trip)
{
	size_t len;
	char *t = encode(&len);
	struct staterec r;
	char err[256] = "";
	cr_assert_eq(staterec_decode(t, len, 1, &r, err, sizeof err), 0, "%s", err);
	cr_assert_eq(r.record, 1);
	cr_assert_str_eq(r.from_version, FERRY_VERSION);
	cr_assert_eq(r.from_pid, 4121);
	cr_assert_eq(r.from_started_ms, T0 + 5);
	cr_assert_str_eq(r.exec_path, "/usr/sbin/ferryd");
	cr_assert_str_eq(r.notify_socket, "/run/systemd/notify");
	cr_assert_str_eq(r.config_path, "/etc/ferry/ferry.ini");
	cr_assert_eq(r.config_len, strlen(fx_text));
	cr_assert_str_eq(r.config_text, fx_text);
	cr_assert_str_eq(r.config_version, fx.config_version);
	cr_assert_eq(r.applied_at_ms, T0 + 10);
	cr_assert_eq(r.service_started_ms, T0);
	cr_assert(r.hup_pending);
	cr_assert_eq(r.ticket_rotation_next_mono, 123456);
	cr_assert_eq(r.reload_stats.result[SUP_RELOAD_SUCCESS], 4);
	cr_assert_eq(r.reload_stats.bucket[3], 2);
	cr_assert_eq(r.reload_stats.sum_ms, 321);
	cr_assert_eq(r.last_reload.status, SUP_RELOAD_FAILED);
	cr_assert_str_eq(r.last_reload.source, "SIGHUP");
	cr_assert_str_eq(r.last_reload.errors[0], "cluster b: bind: in use");
	cr_assert_null(r.last_reload.errors[1]);
	cr_assert(r.last_validation.valid);
	cr_assert_eq(r.upgrade_results[SUP_UPGRADE_SUCCESS], 2);
	cr_assert_eq(r.upgrade_results[SUP_UPGRADE_REJECTED], 1);
	cr_assert_eq(r.admin_carried[3], 4);
	/* sockets: alpha's three listeners (beta released its own), then the
	 * control socket and admin_listen */
	cr_assert_eq(r.n_fds, 5);
	cr_assert_eq(r.fds[0].kind, STATEREC_FD_LISTENER);
	cr_assert_str_eq(r.fds[0].cluster, "alpha");
	cr_assert_eq(r.fds[0].node_id, -1);
	cr_assert_eq(r.fds[2].node_id, 2);
	cr_assert_eq(r.fds[2].addr.port, 9002);
	cr_assert_eq(r.fds[3].kind, STATEREC_FD_CONTROL);
	cr_assert_str_eq(r.fds[3].path, "/run/x.sock");
	cr_assert_eq(r.fds[3].ino, 99);
	cr_assert_eq(r.fds[4].kind, STATEREC_FD_ADMIN);
	cr_assert_eq(r.fds[4].addr.port, 9190);
	int fds[8];
	cr_assert_eq(staterec_listener_fds(&fx, fds, 8), 3);
	cr_assert_eq(fds[0], 100);
	cr_assert_eq(fds[2], 102);

	cr_assert_eq(r.n_clusters, 2);
	struct staterec_cluster *a = &r.clusters[0], *b = &r.clusters[1];
	cr_assert_str_eq(a->name, "alpha");
	cr_assert_eq(a->st, FSM_C_ACTIVE);
	cr_assert_eq(a->next_generation, 7);
	cr_assert_eq(a->restarts, 3);
	/* the ring, oldest first */
	cr_assert_eq(a->n_crash, 3);
	cr_assert_eq(a->crash_times[0], T0 + 1);
	cr_assert_eq(a->crash_times[2], T0 + 3);
	cr_assert_eq(a->crash_backoff_ms, 800);
	cr_assert_eq(a->crash_started_mono, 5555);
	cr_assert_eq(a->crash_loops, 1);
	cr_assert_eq(a->unresponsive_total, 2);
	cr_assert_eq(a->upstream, SUP_UPSTREAM_REACHABLE);
	cr_assert_eq(a->nodes.n, 2);
	cr_assert_str_eq(a->nodes.v[1].host, "b2.kafka");
	cr_assert_eq(a->nodes.v[1].port, 9093);
	cr_assert_str_eq(a->nodes.upstream_key, fx_c[0].nodes.upstream_key);
	cr_assert(a->tickets);
	cr_assert(a->replacement_valid);
	cr_assert_eq(a->rep_handed_over, 21);
	cr_assert(a->serving_valid);
	cr_assert_eq(a->serving_generation, 6);
	cr_assert_eq(METRIC_GET(&a->counters, connections_accepted), 1000);
	cr_assert_eq(METRIC_GET(&a->counters, requests), 77);
	cr_assert_eq(METRIC_GET(&a->counters, connections_active), 0, "gauges are not carried");
	cr_assert_eq(METRIC_GET(&a->counters.api[3], requests), 77);
	cr_assert_eq(METRIC_GET(&a->counters.api[3], bucket[2]), 70);
	cr_assert_str_eq(b->name, "beta");
	cr_assert_eq(b->st, FSM_C_FAILED);
	cr_assert_str_eq(b->fail_reason, "crash loop: 5 crashes");
	cr_assert_eq(b->n_unknown, 1);
	cr_assert_str_eq(b->unknown_nodes[0].host, "x.kafka");
	cr_assert_eq(b->serving_state, LC_FAILED);
	cr_assert_str_eq(b->serving_reason, "exited with status 78");
	cr_assert_not(b->tickets);
	staterec_free(&r);
	free(t);
}

/* Re-encode the record with one change made by fn to its JSON. */
static int
mutated(void (*fn)(json_t *), char *err, size_t errlen)
{
	size_t len;
	char *t = encode(&len);
	json_t *o = json_loadb(t, len, 0, NULL);
	free(t);
	fn(o);
	t = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	struct staterec r;
	int rc = staterec_decode(t, strlen(t), 1, &r, err, errlen);
	if (rc == 0)
		staterec_free(&r);
	free(t);
	return rc;
}

static void m_unknown_top(json_t *o) { json_object_set_new(o, "surprise", json_true()); }
static void m_missing(json_t *o) { json_object_del(json_object_get(o, "config"), "text"); }
static void m_type(json_t *o)
{
	json_object_set_new(json_array_get(json_object_get(o, "clusters"), 1), "restarts",
	    json_string("3"));
}
static void m_state(json_t *o)
{
	json_object_set_new(json_array_get(json_object_get(o, "clusters"), 0), "state",
	    json_string("leaving"));
}
static void m_crash_key(json_t *o)
{
	json_object_set_new(json_object_get(json_array_get(json_object_get(o, "clusters"), 0),
	    "crash"), "extra", json_integer(1));
}
static void m_fd_kind(json_t *o)
{
	json_object_set_new(json_array_get(json_object_get(o, "fds"), 0), "kind",
	    json_string("pipe"));
}
static void m_counters_unknown(json_t *o)
{
	/* counters by name: a name this build does not know is dropped */
	json_t *c = json_object_get(json_object_get(json_array_get(json_object_get(o,
	    "clusters"), 0), "counters"), "counters");
	json_object_set_new(c, "some_future_counter", json_integer(5));
}

Test(staterec, strict)
{
	char err[256];
	cr_assert_eq(mutated(m_unknown_top, err, sizeof err), -1);
	cr_assert(strstr(err, "unknown key 'surprise'"), "%s", err);
	cr_assert_eq(mutated(m_missing, err, sizeof err), -1);
	cr_assert(strstr(err, "config: missing key 'text'"), "%s", err);
	cr_assert_eq(mutated(m_type, err, sizeof err), -1);
	cr_assert(strstr(err, "clusters[1].restarts"), "%s", err);
	cr_assert_eq(mutated(m_state, err, sizeof err), -1);
	cr_assert(strstr(err, "clusters[0].state: unknown value 'leaving'"), "%s", err);
	cr_assert_eq(mutated(m_crash_key, err, sizeof err), -1);
	cr_assert(strstr(err, "clusters[0].crash: unknown key 'extra'"), "%s", err);
	cr_assert_eq(mutated(m_fd_kind, err, sizeof err), -1);
	cr_assert(strstr(err, "fds[0].kind"), "%s", err);
	cr_assert_eq(mutated(m_counters_unknown, err, sizeof err), 0, "%s", err);
}

Test(staterec, versions)
{
	size_t len;
	char *t = encode(&len), err[256];
	struct staterec r;
	/* a version this build does not read, or not the one agreed */
	cr_assert_eq(staterec_decode(t, len, 2, &r, err, sizeof err), -1);
	cr_assert(strstr(err, "version 2"), "%s", err);
	cr_assert_null(staterec_encode(&fx, &fx_io, 0, &len));
	cr_assert_null(staterec_encode(&fx, &fx_io, STATEREC_MAX + 1, &len));
	cr_assert_eq(staterec_decode("{\"record\":1", 11, 1, &r, err, sizeof err), -1);
	cr_assert(strstr(err, "not JSON"), "%s", err);
	cr_assert_eq(staterec_decode("[]", 2, 1, &r, err, sizeof err), -1);
	/* a duplicate key is refused, not silently taken */
	cr_assert_eq(staterec_decode("{\"record\":1,\"record\":1}", 23, 1, &r, err, sizeof err), -1);
	free(t);
}

Test(staterec, counters_by_name_and_bucket_folding)
{
	struct metrics m;
	char err[128];
	memset(&m, 0, sizeof m);
	json_t *j = json_pack("{s:{s:i, s:i}, s:{s:i}, s:{s:{s:i, s:i, s:i, s:{s:i, s:i, s:i, s:i}},"
	    " s:{s:i}, s:{s:i}}}",
	    "counters", "connections_accepted", 10, "renamed_in_the_future", 3,
	    "gauges", "connections_active", 4,
	    "api", "1", "requests", 5, "responses", 5, "latencySumUs", 900,
	    "buckets", "250", 1, "300", 2, "99999999", 1, "garbage", 7,
	    "other", "requests", 2, "notanumber", "requests", 9);
	cr_assert_eq(staterec_counters_read(j, &m, err, sizeof err), 0, "%s", err);
	cr_assert_eq(METRIC_GET(&m, connections_accepted), 10);
	cr_assert_eq(METRIC_GET(&m, connections_active), 4);
	cr_assert_eq(METRIC_GET(&m.api[1], requests), 5);
	cr_assert_eq(METRIC_GET(&m.api[1], latency_sum_us), 900);
	/* 250 is a bound here; 300 is not: the next larger (500); beyond the
	 * largest: only in the count */
	cr_assert_eq(METRIC_GET(&m.api[1], bucket[0]), 1);
	cr_assert_eq(METRIC_GET(&m.api[1], bucket[1]), 2);
	uint64_t finite = 0;
	for (int b = 0; b < METRICS_BUCKETS; b++)
		finite += METRIC_GET(&m.api[1], bucket[b]);
	cr_assert_eq(finite, 3);
	cr_assert_eq(METRIC_GET(&m.api[METRICS_APIS - 1], requests), 2);
	json_decref(j);
	j = json_string("x");
	cr_assert_eq(staterec_counters_read(j, &m, err, sizeof err), -1);
	json_decref(j);

	/* the message form (UPG_COUNTERS) carries gauges too */
	size_t len;
	char *t = staterec_counters_msg(&fx_c[0], &len), name[64];
	cr_assert_not_null(t);
	cr_assert_eq(staterec_counters_msg_read(t, len, name, sizeof name, &m, err, sizeof err), 0);
	cr_assert_str_eq(name, "alpha");
	cr_assert_eq(METRIC_GET(&m, requests), 77);
	free(t);
}

Test(staterec, carried_counters_stay_monotonic)
{
	/* a successor shows retired + carried: a predecessor's newer totals
	 * replace the carried ones, and its end folds them into retired */
	struct sup_cluster *a = &fx_c[0];
	size_t len;
	char *t = staterec_counters_msg(a, &len), name[64], err[128];
	struct metrics m;
	cr_assert_eq(staterec_counters_msg_read(t, len, name, sizeof name, &m, err, sizeof err), 0);
	free(t);
	struct sup_cluster s2;
	memset(&s2, 0, sizeof s2);
	s2.carried = metrics_totals_new();
	s2.retired = metrics_totals_new();
	cr_assert(s2.carried && s2.retired);
	memcpy(s2.carried, &m, sizeof m);
	METRIC_ADD(s2.retired, connections_accepted, 5);   /* its own, since */
	json_t *j = staterec_counters_json(&s2, false);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "counters"),
	    "connections_accepted")), 1005);
	json_decref(j);
	metrics_retire(s2.retired, s2.carried);
	metrics_unmap(s2.carried);
	s2.carried = NULL;
	j = staterec_counters_json(&s2, false);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "counters"),
	    "connections_accepted")), 1005);
	json_decref(j);
	metrics_unmap(s2.retired);
}
