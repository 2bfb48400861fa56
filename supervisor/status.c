/*
 * status — the JSON and Prometheus renderings of the process table served
 * by the admin API (see status.h). The rules it renders (which generation
 * serves, what state a cluster shows, readiness) are the model's
 * (supervisor.c).
 *
 * Metrics blocks are read with relaxed atomic loads: workers keep adding to
 * them while we sum, and a scrape only needs each counter to be monotonic.
 */
#include "supervisor/status.h"
#include "supervisor/promfam.h"
#include "supervisor/adminproto.h"
#include "supervisor/sandboxstatus.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buildinfo.h"
#include "common/log.h"
#include "common/units.h"

/* --- JSON --------------------------------------------------------------- */

static json_t *
status_time(uint64_t wall_ms)
{
	char buf[64];

	if (wall_ms == 0)
		return json_null();
	clock_fmt_rfc3339(wall_ms, buf, sizeof buf);
	return json_string(buf);
}

static json_t *
status_str_or_null(const char *s)
{
	if (s == NULL || *s == '\0')
		return json_null();
	return json_string(s);
}

/* Gauges go up and down in another process; a torn read order can make a
 * sum look negative for an instant. Never report that. */
static json_int_t
status_gauge(uint64_t v)
{
	return v > (uint64_t)INT64_MAX ? 0 : (json_int_t)v;
}

static json_t *
status_worker_json(const struct sup_gen *g, const struct sup_proc *p)
{
	json_t *o = json_object();
	bool live = p->alive && p->metrics != NULL;

	if (o == NULL)
		return NULL;
	json_object_set_new(o, "pid", p->alive && p->pid != 0 ? json_integer(p->pid) : json_null());
	json_object_set_new(o, "index", json_integer(p->index));
	json_object_set_new(o, "generation", json_integer((json_int_t)g->generation));
	json_object_set_new(o, "state", json_string(lc_state_str(g->lc.state)));
	json_object_set_new(o, "since", status_time(g->lc.since_ms));
	json_object_set_new(o, "liveness", json_string(p->alive && p->late ? "unresponsive" : "ok"));
	json_object_set_new(o, "connections", json_integer(live ?
	    status_gauge(METRIC_GET(p->metrics, connections_active)) : 0));
	json_object_set_new(o, "inFlight", json_integer(live ?
	    status_gauge(METRIC_GET(p->metrics, in_flight)) : 0));
	return o;
}

static json_t *
status_listener_json(const struct sup_listener *l)
{
	json_t *o = json_object();
	char addr[CFG_HOST_MAX + 16];

	if (o == NULL)
		return NULL;
	units_fmt_addr(&l->addr, addr, sizeof addr);
	json_object_set_new(o, "role", json_string(sup_listener_role_str(l->role)));
	json_object_set_new(o, "nodeId", l->role == SUP_LISTENER_BOOTSTRAP ?
	    json_null() : json_integer(l->node_id));
	json_object_set_new(o, "address", json_string(addr));
	return o;
}

json_t *
status_cluster_json(struct sup_cluster *c)
{
	const struct sup_gen *serving = sup_cluster_serving(c), *g;
	json_t *o, *up, *ls, *ws;
	size_t i;

	if ((o = json_object()) == NULL)
		return NULL;
	json_object_set_new(o, "name", json_string(c->name));
	json_object_set_new(o, "state", json_string(lc_state_str(sup_cluster_state(c))));
	if (serving != NULL) {
		char reason[300];
		const char *r = serving->lc.reason;

		if (c->st == FSM_C_FAILED && serving->lc.state != LC_ACCEPTING && c->fail_reason[0])
			r = c->fail_reason;
		if (serving->unresponsive) {
			snprintf(reason, sizeof reason, "unresponsive: no answer to the watchdog "
			    "(worker_watchdog %llums)",
			    (unsigned long long)c->sup->cfg.worker_watchdog_ms);
			r = reason;
		}
		json_object_set_new(o, "since", status_time(serving->lc.since_ms));
		json_object_set_new(o, "reason", status_str_or_null(r));
		json_object_set_new(o, "generation", json_integer((json_int_t)serving->generation));
		json_object_set_new(o, "liveness", json_string(serving->unresponsive ?
		    "unresponsive" : "ok"));
		json_object_set_new(o, "livenessSince", serving->unresponsive ?
		    status_time(serving->unresponsive_since_ms) : json_null());
	} else {
		/* configured, no generation started yet */
		json_object_set_new(o, "since", json_null());
		json_object_set_new(o, "reason", json_null());
		json_object_set_new(o, "generation", json_null());
		json_object_set_new(o, "liveness", json_string("ok"));
		json_object_set_new(o, "livenessSince", json_null());
	}
	json_object_set_new(o, "configVersion", status_str_or_null(c->config_version));

	up = json_object();
	json_object_set_new(up, "state", json_string(sup_upstream_state_str(c->upstream)));
	json_object_set_new(up, "since", status_time(c->upstream_since_ms));
	json_object_set_new(up, "lastError", status_str_or_null(c->upstream_error));
	json_object_set_new(o, "upstream", up);

	/* TLS clusters: the served certificate (of the serving configuration:
	 * the bytes its workers were sent); absent for plaintext clusters */
	if (c->ccfg && c->ccfg->cl && c->ccfg->cl->tls)
		json_object_set_new(o, "tls", json_pack("{s:o, s:o}", "notAfter",
		    c->ccfg->tls_not_after > 0 ?
		    status_time((uint64_t)c->ccfg->tls_not_after * 1000u) : json_null(),
		    "subject", status_str_or_null(c->ccfg->tls_subject)));

	ls = json_array();
	for (i = 0; i < c->n_listeners; i++)
		json_array_append_new(ls, status_listener_json(&c->listeners[i]));
	json_object_set_new(o, "listeners", ls);
	/* how clients reach the brokers: a port per broker, or SNI names */
	const struct cfg_cluster *cl = c->ccfg ? c->ccfg->cl : NULL;
	enum cfg_gateway gw = cl ? cl->gateway : CFG_GATEWAY_PORTS;
	json_object_set_new(o, "gateway", json_string(cfg_gateway_str(gw)));
	if (gw == CFG_GATEWAY_SNI)
		json_object_set_new(o, "sni", json_pack("{s:s, s:s}",
		    "bootstrapHost", cl->sni_bootstrap_host,
		    "brokerPattern", cl->sni_broker_pattern));

	/* Upstream brokers whose node id has no broker port: clients cannot
	 * reach them through ferry until node_ids/broker_ports cover them. */
	json_t *un = json_array();
	for (i = 0; i < c->n_unknown_nodes; i++) {
		char addr[300];
		snprintf(addr, sizeof addr, "%s:%d", c->unknown_nodes[i].host,
		    c->unknown_nodes[i].port);
		json_array_append_new(un, json_pack("{s:i, s:s, s:o}", "nodeId",
		    (int)c->unknown_nodes[i].node_id, "upstream", addr,
		    "since", status_time(c->unknown_since_ms[i])));
	}
	json_object_set_new(o, "unknownNodes", un);

	/* Learned brokers: upstream brokers learned by the workers and handed
	 * to every new generation (nodes.h): a broker port is served at once
	 * after a restart or reload, with no metadata fetch. */
	json_t *kb = json_array();
	for (i = 0; i < c->nodes.n; i++) {
		char addr[300];
		snprintf(addr, sizeof addr, strchr(c->nodes.v[i].host, ':') ? "[%s]:%d" : "%s:%d",
		    c->nodes.v[i].host, c->nodes.v[i].port);
		json_array_append_new(kb, json_pack("{s:i, s:s}", "nodeId",
		    (int)c->nodes.v[i].node_id, "upstream", addr));
	}
	json_object_set_new(o, "knownBrokers", kb);

	/* why the last worker that exited unasked did (a crash restart
	 * replaces the generation, and with it its reason) */
	if (c->last_crash.at_ms)
		json_object_set_new(o, "lastCrash", json_pack("{s:o, s:I, s:I, s:I, s:s}",
		    "time", status_time(c->last_crash.at_ms),
		    "generation", (json_int_t)c->last_crash.generation,
		    "index", (json_int_t)c->last_crash.index,
		    "pid", (json_int_t)c->last_crash.pid,
		    "reason", c->last_crash.reason));

	if (c->last_replacement.valid)
		json_object_set_new(o, "lastReplacement", json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}",
		    "fromGeneration", (json_int_t)c->last_replacement.from_generation,
		    "toGeneration", (json_int_t)c->last_replacement.to_generation,
		    "handedOver", (json_int_t)c->last_replacement.handed_over,
		    "drained", (json_int_t)c->last_replacement.drained,
		    "forced", (json_int_t)c->last_replacement.forced,
		    "durationMs", (json_int_t)c->last_replacement.duration_ms));
	ws = json_array();
	for (g = c->gens; g != NULL; g = g->next)
		if (sup_gen_alive(g) || g == serving)
			for (i = 0; i < g->n_procs; i++)
				if (g->procs[i].alive || g == serving)
					json_array_append_new(ws, status_worker_json(g, &g->procs[i]));
	json_object_set_new(o, "workers", ws);
	return o;
}

json_t *
status_clusters_json(struct sup *s)
{
	json_t *o = json_object(), *a = json_array();
	size_t i;

	if (o == NULL || a == NULL) {
		json_decref(o);
		json_decref(a);
		return NULL;
	}
	for (i = 0; i < s->n_clusters; i++)
		json_array_append_new(a, status_cluster_json(s->clusters[i]));
	json_object_set_new(o, "clusters", a);
	return o;
}

json_t *
status_health_json(const struct sup *s, uint64_t now_ms)
{
	uint64_t up = now_ms > s->started_at_ms ? (now_ms - s->started_at_ms) / 1000 : 0;

	return json_pack("{s:s, s:s, s:s, s:i, s:o, s:I, s:o, s:o, s:I, s:o}",
	    "status", "UP",
	    "version", buildinfo_version(),
	    "buildId", buildinfo_id(),
	    "pid", (int)s->pid,
	    "execPath", status_str_or_null(s->exec_path),
	    "uptimeSeconds", (json_int_t)up,
	    "startedAt", status_time(s->started_at_ms),
	    "processStartedAt", status_time(s->process_started_at_ms),
	    "clusters", (json_int_t)s->n_clusters,
	    "sandbox", sandboxstatus_json(s));
}

json_t *
status_ready_json(struct sup *s)
{
	json_t *o = json_object(), *cl = json_object();
	const struct sup_gen *w;
	size_t i;

	if (o == NULL || cl == NULL) {
		json_decref(o);
		json_decref(cl);
		return NULL;
	}
	json_object_set_new(o, "ready", json_boolean(sup_ready(s)));
	json_object_set_new(o, "startupPolicy",
	    json_string(cfg_policy_startup_str(s->cfg.startup_policy)));
	for (i = 0; i < s->n_clusters; i++) {
		w = sup_cluster_serving(s->clusters[i]);
		json_object_set_new(cl, s->clusters[i]->name, json_string(w && w->unresponsive ?
		    "unresponsive" : lc_state_str(sup_cluster_state(s->clusters[i]))));
	}
	json_object_set_new(o, "clusters", cl);
	return o;
}

char *
status_dump(const json_t *j, size_t *len)
{
	return adminproto_json_dump(j, len);
}

/* --- Prometheus --------------------------------------------------------- */

enum status_field {
#define STATUS_ENUM(name, type, help) STATUS_F_##name,
	METRICS_FIELDS(STATUS_ENUM)
#undef STATUS_ENUM
	STATUS_F_COUNT,
};

struct status_field_info {
	const char *name;
	const char *type;
	const char *help;
	size_t off;                     /* in struct metrics */
};

static const struct status_field_info status_fields[STATUS_F_COUNT] = {
#define STATUS_INFO(name, type, help) \
	[STATUS_F_##name] = { #name, #type, help, offsetof(struct metrics, name) },
	METRICS_FIELDS(STATUS_INFO)
#undef STATUS_INFO
};

char *
status_metrics_text(struct sup *s, size_t *len)
{
	char *buf = NULL;
	size_t n = 0, i;
	FILE *f;
	int fi, st;

	if ((f = open_memstream(&buf, &n)) == NULL)
		return NULL;
	for (fi = 0; fi < STATUS_F_COUNT; fi++) {
		const struct status_field_info *info = &status_fields[fi];
		bool counter = strcmp(info->type, "counter") == 0;
		const char *suffix = counter ? "_total" : "";

		/* rendered with labels (api, reason) by promfam_write() */
		if (fi == STATUS_F_requests || fi == STATUS_F_connections_rejected)
			continue;

		fprintf(f, "# HELP ferry_%s%s %s\n", info->name, suffix, info->help);
		fprintf(f, "# TYPE ferry_%s%s %s\n", info->name, suffix, info->type);
		for (i = 0; i < s->n_clusters; i++) {
			struct sup_cluster *c = s->clusters[i];
			uint64_t v = promfam_field_sum(c, info->off, counter);

			fprintf(f, "ferry_%s%s{cluster=\"", info->name, suffix);
			promfam_label(f, c->name);
			fprintf(f, "\"} %llu\n", (unsigned long long)(counter ? v :
			    (uint64_t)status_gauge(v)));
		}
	}

	fputs("# HELP ferry_cluster_state Lifecycle state of the serving generation (1 = current)\n"
	    "# TYPE ferry_cluster_state gauge\n", f);
	for (i = 0; i < s->n_clusters; i++) {
		enum lc_state cur = sup_cluster_state(s->clusters[i]);

		for (st = 0; st < LC_STATE_COUNT; st++) {
			fputs("ferry_cluster_state{cluster=\"", f);
			promfam_label(f, s->clusters[i]->name);
			fprintf(f, "\",state=\"%s\"} %d\n", lc_state_str((enum lc_state)st),
			    (enum lc_state)st == cur);
		}
	}

	fputs("# HELP ferry_worker_restarts_total Worker restarts after a crash\n"
	    "# TYPE ferry_worker_restarts_total counter\n", f);
	for (i = 0; i < s->n_clusters; i++) {
		fputs("ferry_worker_restarts_total{cluster=\"", f);
		promfam_label(f, s->clusters[i]->name);
		fprintf(f, "\"} %u\n", s->clusters[i]->restarts);
	}

	fputs("# HELP ferry_crash_loops_total Times a cluster was marked failed for a crash loop\n"
	    "# TYPE ferry_crash_loops_total counter\n", f);
	for (i = 0; i < s->n_clusters; i++) {
		fputs("ferry_crash_loops_total{cluster=\"", f);
		promfam_label(f, s->clusters[i]->name);
		fprintf(f, "\"} %llu\n", (unsigned long long)s->clusters[i]->crash.loops);
	}

	fputs("# HELP ferry_worker_connections Client connections open per worker (index in its generation)\n"
	    "# TYPE ferry_worker_connections gauge\n", f);
	for (i = 0; i < s->n_clusters; i++) {
		uint64_t per[SUP_MAX_PROCS] = { 0 };
		size_t nw = 0;

		for (const struct sup_gen *g = s->clusters[i]->gens; g != NULL; g = g->next)
			for (size_t k = 0; k < g->n_procs; k++) {
				const struct sup_proc *p = &g->procs[k];

				if (!p->alive || p->metrics == NULL)
					continue;
				per[k] += METRIC_GET(p->metrics, connections_active);
				if (k + 1 > nw)
					nw = k + 1;
			}
		for (size_t k = 0; k < nw; k++) {
			fputs("ferry_worker_connections{cluster=\"", f);
			promfam_label(f, s->clusters[i]->name);
			fprintf(f, "\",worker=\"%zu\"} %lld\n", k, (long long)status_gauge(per[k]));
		}
	}

	fputs("# HELP ferry_worker_unresponsive_total Times a worker missed its watchdog\n"
	    "# TYPE ferry_worker_unresponsive_total counter\n", f);
	for (i = 0; i < s->n_clusters; i++) {
		fputs("ferry_worker_unresponsive_total{cluster=\"", f);
		promfam_label(f, s->clusters[i]->name);
		fprintf(f, "\"} %llu\n", (unsigned long long)s->clusters[i]->unresponsive_total);
	}

	promfam_write(f, s);

	fputs("# HELP ferry_cluster_generation Generation number of the serving worker generation\n"
	    "# TYPE ferry_cluster_generation gauge\n", f);
	for (i = 0; i < s->n_clusters; i++) {
		const struct sup_gen *g = sup_cluster_serving(s->clusters[i]);

		fputs("ferry_cluster_generation{cluster=\"", f);
		promfam_label(f, s->clusters[i]->name);
		fprintf(f, "\"} %llu\n", (unsigned long long)(g ? g->generation : 0));
	}

	fputs("# HELP ferry_config_reload_total Configuration reloads finished, by outcome\n"
	    "# TYPE ferry_config_reload_total counter\n", f);
	for (st = SUP_RELOAD_SUCCESS; st <= SUP_RELOAD_UNCHANGED; st++)
		fprintf(f, "ferry_config_reload_total{result=\"%s\"} %llu\n",
		    sup_reload_status_str((enum sup_reload_status)st),
		    (unsigned long long)s->reload_stats.result[st]);

	fputs("# HELP ferry_config_reload_duration_seconds Time from the start of a reload to its outcome\n"
	    "# TYPE ferry_config_reload_duration_seconds histogram\n", f);
	for (size_t b = 0; b < RELOAD_STATS_BUCKETS; b++) {
		uint64_t ms = reload_stats_bounds_ms[b];

		fprintf(f, "ferry_config_reload_duration_seconds_bucket{le=\"%g\"} %llu\n",
		    (double)ms / 1000.0,
		    (unsigned long long)reload_stats_cumulative(&s->reload_stats, b));
	}
	fprintf(f, "ferry_config_reload_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
	    "ferry_config_reload_duration_seconds_sum %llu.%03llu\n"
	    "ferry_config_reload_duration_seconds_count %llu\n",
	    (unsigned long long)s->reload_stats.count,
	    (unsigned long long)(s->reload_stats.sum_ms / 1000),
	    (unsigned long long)(s->reload_stats.sum_ms % 1000),
	    (unsigned long long)s->reload_stats.count);

	fputs("# HELP ferry_config_version_info Checksum of the running configuration file\n"
	    "# TYPE ferry_config_version_info gauge\n"
	    "ferry_config_version_info{version=\"", f);
	promfam_label(f, s->config_version);
	fputs("\"} 1\n", f);

	fputs("# HELP ferry_upgrades_total Upgrades of ferryd itself finished, by outcome\n"
	    "# TYPE ferry_upgrades_total counter\n", f);
	for (st = SUP_UPGRADE_SUCCESS; st < SUP_UPGRADE_RESULTS; st++)
		fprintf(f, "ferry_upgrades_total{result=\"%s\"} %llu\n",
		    sup_upgrade_status_str((enum sup_upgrade_status)st),
		    (unsigned long long)s->upgrade_results[st]);

	fputs("# HELP ferry_build_info The running ferryd's version and build id\n"
	    "# TYPE ferry_build_info gauge\n"
	    "ferry_build_info{version=\"", f);
	promfam_label(f, buildinfo_version());
	fputs("\",build_id=\"", f);
	promfam_label(f, buildinfo_id());
	fputs("\"} 1\n", f);

	fputs("# HELP ferry_up Whether the ferry supervisor is running\n"
	    "# TYPE ferry_up gauge\n"
	    "ferry_up 1\n", f);

	if (ferror(f)) {
		fclose(f);
		free(buf);
		return NULL;
	}
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	*len = n;
	return buf;
}

/* --- reload records ----------------------------------------------------- */

static json_t *
status_strv(char *const *v)
{
	json_t *a = json_array();

	for (; v && *v; v++) {
		json_t *m = json_string(*v);

		json_array_append_new(a, m ? m : json_string("(message is not valid UTF-8)"));
	}
	return a;
}

json_t *
status_reload_reply_json(const struct sup *s, const struct sup_reload_record *rec)
{
	bool ok = rec->status == SUP_RELOAD_SUCCESS || rec->status == SUP_RELOAD_UNCHANGED;
	json_t *o = json_object();

	if (o == NULL)
		return NULL;
	json_object_set_new(o, "success", json_boolean(ok));
	json_object_set_new(o, "changed", json_boolean(rec->changed));
	json_object_set_new(o, "status", json_string(sup_reload_status_str(rec->status)));
	json_object_set_new(o, "configVersion", json_string(ok ? s->config_version :
	    rec->requested_version));
	json_object_set_new(o, "clustersAdded", status_strv(rec->added));
	json_object_set_new(o, "clustersModified", status_strv(rec->modified));
	json_object_set_new(o, "clustersRemoved", status_strv(rec->removed));
	json_object_set_new(o, "durationMs", json_integer((json_int_t)rec->duration_ms));
	if (!ok || rec->errors)
		json_object_set_new(o, "errors", status_strv(rec->errors));
	if (rec->posted) {
		json_object_set_new(o, "persisted", json_boolean(rec->persisted));
		if (rec->persist_error[0])
			json_object_set_new(o, "persistError", json_string(rec->persist_error));
	}
	return o;
}

json_t *
status_upgrade_reply_json(const struct sup *s, const struct sup_upgrade_record *rec)
{
	bool ok = rec->status == SUP_UPGRADE_SUCCESS;
	json_t *o = json_object(), *cl = json_array();

	if (o == NULL || cl == NULL) {
		json_decref(o);
		json_decref(cl);
		return NULL;
	}
	json_object_set_new(o, "success", json_boolean(ok));
	json_object_set_new(o, "status", json_string(sup_upgrade_status_str(rec->status)));
	json_object_set_new(o, "phase", json_string(rec->phase));
	json_object_set_new(o, "fromVersion", json_string(rec->from_version));
	json_object_set_new(o, "toVersion", status_str_or_null(rec->to_version));
	json_object_set_new(o, "fromBuildId", json_string(rec->from_build));
	json_object_set_new(o, "toBuildId", status_str_or_null(rec->to_build));
	json_object_set_new(o, "previousPid", json_integer(rec->from_pid));
	json_object_set_new(o, "pid", ok ? json_integer(rec->to_pid) : json_integer(rec->from_pid));
	json_object_set_new(o, "successorPid", rec->to_pid ? json_integer(rec->to_pid) :
	    json_null());
	json_object_set_new(o, "durationMs", json_integer((json_int_t)rec->duration_ms));
	json_object_set_new(o, "errors", status_strv(rec->errors));
	/* the successor numbers its first generation of a cluster on from
	 * ours (the record carries nextGeneration) */
	for (size_t i = 0; ok && i < s->n_clusters; i++) {
		const struct sup_cluster *c = s->clusters[i];
		const struct sup_gen *g = sup_cluster_serving(c);

		json_array_append_new(cl, json_pack("{s:s, s:o, s:o}", "name", c->name,
		    "fromGeneration", g ? json_integer((json_int_t)g->generation) : json_null(),
		    "toGeneration", g && g->replaced ?
		    json_integer((json_int_t)(c->next_generation + 1)) : json_null()));
	}
	json_object_set_new(o, "clusters", cl);
	return o;
}

static json_t *
status_upgrade_record_json(const struct sup_upgrade_record *u)
{
	if (u->status == SUP_UPGRADE_NONE)
		return json_null();
	json_t *o = json_object();

	json_object_set_new(o, "timestamp", status_time(u->timestamp_ms));
	json_object_set_new(o, "status", json_string(sup_upgrade_status_str(u->status)));
	json_object_set_new(o, "source", json_string(u->source));
	json_object_set_new(o, "phase", json_string(u->phase));
	json_object_set_new(o, "fromVersion", json_string(u->from_version));
	json_object_set_new(o, "toVersion", status_str_or_null(u->to_version));
	json_object_set_new(o, "fromBuildId", json_string(u->from_build));
	json_object_set_new(o, "toBuildId", status_str_or_null(u->to_build));
	json_object_set_new(o, "predecessorPid", json_integer(u->from_pid));
	json_object_set_new(o, "successorPid", u->to_pid ? json_integer(u->to_pid) : json_null());
	json_object_set_new(o, "durationMs", json_integer((json_int_t)u->duration_ms));
	json_object_set_new(o, "errors", status_strv(u->errors));
	json_object_set_new(o, "connections", u->tail_valid ? json_pack("{s:I, s:I, s:I}",
	    "handedOver", (json_int_t)u->handed_over, "closed", (json_int_t)u->closed,
	    "forced", (json_int_t)u->forced) : json_null());
	json_object_set_new(o, "completedAt", status_time(u->completed_ms));
	return o;
}

json_t *
status_config_json(const struct sup *s)
{
	json_t *o = json_object();

	if (o == NULL)
		return NULL;
	json_object_set_new(o, "currentConfigVersion", json_string(s->config_version));
	json_object_set_new(o, "appliedAt", status_time(s->applied_at_ms));
	json_object_set_new(o, "reloadInProgress", json_boolean(s->reload != NULL));
	if (s->reload)
		json_object_set_new(o, "inProgressSince", status_time(sup_reload_since(s)));
	/* how long a reload can take: ferryctl waits that long */
	json_object_set_new(o, "reloadTimeoutMs", json_integer((json_int_t)
	    sup_reload_timeout_ms(s)));
	/* upgrades of ferryd itself: the one running, the last outcome, how
	 * long one may take to commit or roll back (ferryctl waits that long)
	 * and to finish (the old process's connections: drain_timeout) */
	json_object_set_new(o, "upgradeInProgress", json_boolean(s->upgrade != NULL));
	if (s->upgrade)
		json_object_set_new(o, "upgrade", json_pack("{s:o, s:s, s:s, s:o}",
		    "since", status_time(sup_upgrade_since(s)), "phase", sup_upgrade_phase(s),
		    "role", sup_upgrade_is_successor(s) ? "successor" : "predecessor",
		    sup_upgrade_is_successor(s) ? "predecessorPid" : "successorPid",
		    sup_upgrade_peer(s) ? json_integer(sup_upgrade_peer(s)) : json_null()));
	json_object_set_new(o, "upgradeTimeoutMs", json_integer((json_int_t)
	    (3 * s->cfg.init_timeout_ms + SUP_STOP_GRACE_MS + SUP_UPGRADE_COMMIT_MS +
	    2 * sup_start_pace_ms(s))));
	json_object_set_new(o, "upgradeTailTimeoutMs", json_integer((json_int_t)
	    (s->cfg.drain_timeout_ms + SUP_STOP_GRACE_MS + SUP_UPGRADE_RELAY_MS)));
	json_object_set_new(o, "lastUpgradeAttempt", status_upgrade_record_json(&s->last_upgrade));
	const struct sup_reload_record *rec = &s->last_reload;
	if (rec->status == SUP_RELOAD_NONE) {
		json_object_set_new(o, "lastReloadAttempt", json_null());
	} else {
		json_t *r = json_object();

		json_object_set_new(r, "timestamp", status_time(rec->timestamp_ms));
		json_object_set_new(r, "status", json_string(sup_reload_status_str(rec->status)));
		json_object_set_new(r, "requestedVersion", status_str_or_null(rec->requested_version));
		json_object_set_new(r, "source", json_string(rec->source));
		json_object_set_new(r, "durationMs", json_integer((json_int_t)rec->duration_ms));
		json_object_set_new(r, "clustersAdded", status_strv(rec->added));
		json_object_set_new(r, "clustersModified", status_strv(rec->modified));
		json_object_set_new(r, "clustersRemoved", status_strv(rec->removed));
		json_object_set_new(r, "errors", status_strv(rec->errors));
		json_object_set_new(r, "persisted", json_boolean(rec->persisted));
		if (rec->persist_error[0])
			json_object_set_new(r, "persistError", json_string(rec->persist_error));
		json_object_set_new(o, "lastReloadAttempt", r);
	}
	if (s->last_validation.timestamp_ms == 0) {
		json_object_set_new(o, "lastValidationAttempt", json_null());
	} else {
		json_object_set_new(o, "lastValidationAttempt", json_pack("{s:o, s:s, s:s}",
		    "timestamp", status_time(s->last_validation.timestamp_ms),
		    "status", s->last_validation.valid ? "VALID" : "INVALID",
		    "requestedVersion", s->last_validation.requested_version));
	}
	return o;
}

/* ---- one-line summaries (systemd STATUS=) ------------------------------------------- */

static void
status_appendf(char *buf, size_t len, size_t *at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void
status_appendf(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (len == 0 || *at >= len - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *at, len - *at, fmt, ap);
	va_end(ap);
	if (n > 0)
		*at = *at + (size_t)n < len - 1 ? *at + (size_t)n : len - 1;
}

static void
status_summary_append(struct sup *s, char *buf, size_t len, size_t *at)
{
	size_t counts[LC_STATE_COUNT] = { 0 }, total = 0, none = 0;
	bool first = true;

	for (size_t i = 0; i < s->n_clusters; i++) {
		if (s->clusters[i]->st == FSM_C_LEAVING || s->clusters[i]->st == FSM_C_GONE)
			continue;
		total++;
		if (sup_cluster_serving(s->clusters[i]) == NULL)
			none++;
		else
			counts[sup_cluster_state(s->clusters[i])]++;
	}
	if (total == 0) {
		status_appendf(buf, len, at, "no clusters");
		return;
	}
	status_appendf(buf, len, at, "%zu cluster%s:", total, total == 1 ? "" : "s");
	for (int st = 0; st < LC_STATE_COUNT; st++) {
		size_t n = counts[st] + (st == LC_INITIALIZING ? none : 0);
		if (n == 0)
			continue;
		status_appendf(buf, len, at, "%s %zu %s", first ? "" : ",", n,
		    lc_state_str((enum lc_state)st));
		first = false;
	}
}

void
status_summary_text(struct sup *s, char *buf, size_t len)
{
	size_t at = 0;

	if (len == 0)
		return;
	buf[0] = '\0';
	status_summary_append(s, buf, len, &at);
}

static size_t
status_strv_len(char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

void
status_reload_text(struct sup *s, char *buf, size_t len)
{
	const struct sup_reload_record *rec = &s->last_reload;
	size_t at = 0;

	if (len == 0)
		return;
	buf[0] = '\0';
	status_appendf(buf, len, &at, "reload %s", sup_reload_status_str(rec->status));
	if (rec->status == SUP_RELOAD_SUCCESS)
		/* sha256: and the first 12 hex digits, as short as a git id */
		status_appendf(buf, len, &at, " %.19s (%zu added, %zu modified, %zu removed)",
		    rec->requested_version, status_strv_len(rec->added),
		    status_strv_len(rec->modified), status_strv_len(rec->removed));
	else if (rec->errors && rec->errors[0])
		status_appendf(buf, len, &at, ": %s", rec->errors[0]);
	status_appendf(buf, len, &at, "; ");
	status_summary_append(s, buf, len, &at);
}
