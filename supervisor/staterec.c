/*
 * staterec — the versioned state record of an upgrade; see staterec.h.
 *
 * One function per object writes it, one reads it; the reader names the
 * keys it accepts (rd_keys) so that an unknown or missing one is an error,
 * as in the config parser.
 */
#include "supervisor/staterec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buildinfo.h"
#include "supervisor/promfam.h"

/* ---- names ---------------------------------------------------------------------- */

static const char *const staterec_cstates[FSM_C_COUNT] = {
	[FSM_C_ACTIVE] = "active", [FSM_C_BACKOFF] = "backoff", [FSM_C_FAILED] = "failed",
	[FSM_C_PARKED] = "parked", [FSM_C_LEAVING] = "leaving", [FSM_C_GONE] = "gone",
};

static const char *const staterec_fd_kinds[] = { "listener", "control", "admin" };

/* ---- writing ---------------------------------------------------------------------- */

static json_t *
wr_u64(uint64_t v)
{
	return json_integer((json_int_t)(v > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : v));
}

static json_t *
wr_strv(char *const *v)
{
	json_t *a = json_array();
	for (; a && v && *v; v++) {
		json_t *m = json_string(*v);
		json_array_append_new(a, m ? m : json_string("(message is not valid UTF-8)"));
	}
	return a;
}

/* A string that may not be UTF-8 (an error echoing a client's bytes). */
static json_t *
wr_str(const char *v)
{
	json_t *j = json_string(v ? v : "");
	return j ? j : json_string("(not valid UTF-8)");
}

json_t *
staterec_counters_json(const struct sup_cluster *c, bool gauges)
{
	json_t *o = json_object(), *cn = json_object(), *ga = json_object(), *api = json_object();
	if (!o || !cn || !ga || !api)
		goto oom;
#define SR_FIELD(name, type, help) { \
		bool counter = strcmp(#type, "counter") == 0; \
		uint64_t v = promfam_field_sum(c, offsetof(struct metrics, name), counter); \
		if (v && v <= (uint64_t)INT64_MAX && (counter || gauges)) \
			json_object_set_new(counter ? cn : ga, #name, wr_u64(v)); \
	}
	METRICS_FIELDS(SR_FIELD)
#undef SR_FIELD
	uint64_t seen[METRICS_API_WORDS];
	promfam_api_seen(c, seen);
	for (unsigned slot = 0; slot < METRICS_APIS; slot++) {
		if (!((seen[slot / 64] >> (slot % 64)) & 1))
			continue;  /* never counted (reading it would allocate its pages) */
		struct promfam_api t = { 0 };
		promfam_api_add(c, slot, &t);
		if (!t.requests && !t.responses)
			continue;
		json_t *a = json_object(), *b = json_object();
		json_object_set_new(a, "requests", wr_u64(t.requests));
		json_object_set_new(a, "responses", wr_u64(t.responses));
		json_object_set_new(a, "latencySumUs", wr_u64(t.latency_sum_us));
		for (unsigned k = 0; k < METRICS_BUCKETS; k++) {
			char bound[16];
			snprintf(bound, sizeof bound, "%u", metrics_latency_bounds_us[k]);
			if (t.bucket[k])
				json_object_set_new(b, bound, wr_u64(t.bucket[k]));
		}
		json_object_set_new(a, "buckets", b);
		char key[16];
		if (slot == METRICS_APIS - 1)
			snprintf(key, sizeof key, "other");
		else
			snprintf(key, sizeof key, "%u", slot);
		json_object_set_new(api, key, a);
	}
	json_object_set_new(o, "counters", cn);
	json_object_set_new(o, "gauges", ga);
	json_object_set_new(o, "api", api);
	return o;
oom:
	json_decref(o);
	json_decref(cn);
	json_decref(ga);
	json_decref(api);
	return NULL;
}

static json_t *
wr_reload(const struct sup_reload_record *r)
{
	if (r->status == SUP_RELOAD_NONE)
		return json_null();
	json_t *o = json_object();
	json_object_set_new(o, "status", json_string(sup_reload_status_str(r->status)));
	json_object_set_new(o, "timestamp", wr_u64(r->timestamp_ms));
	json_object_set_new(o, "durationMs", wr_u64(r->duration_ms));
	json_object_set_new(o, "requestedVersion", wr_str(r->requested_version));
	json_object_set_new(o, "source", wr_str(r->source));
	json_object_set_new(o, "added", wr_strv(r->added));
	json_object_set_new(o, "modified", wr_strv(r->modified));
	json_object_set_new(o, "removed", wr_strv(r->removed));
	json_object_set_new(o, "errors", wr_strv(r->errors));
	json_object_set_new(o, "persisted", json_boolean(r->persisted));
	json_object_set_new(o, "persistError", wr_str(r->persist_error));
	json_object_set_new(o, "changed", json_boolean(r->changed));
	json_object_set_new(o, "posted", json_boolean(r->posted));
	return o;
}

static json_t *
wr_upgrade(const struct sup_upgrade_record *u)
{
	if (u->status == SUP_UPGRADE_NONE)
		return json_null();
	json_t *o = json_object();
	json_object_set_new(o, "status", json_string(sup_upgrade_status_str(u->status)));
	json_object_set_new(o, "timestamp", wr_u64(u->timestamp_ms));
	json_object_set_new(o, "durationMs", wr_u64(u->duration_ms));
	json_object_set_new(o, "completedAt", wr_u64(u->completed_ms));
	json_object_set_new(o, "source", wr_str(u->source));
	json_object_set_new(o, "phase", wr_str(u->phase));
	json_object_set_new(o, "fromVersion", wr_str(u->from_version));
	json_object_set_new(o, "toVersion", wr_str(u->to_version));
	json_object_set_new(o, "fromBuildId", wr_str(u->from_build));
	json_object_set_new(o, "toBuildId", wr_str(u->to_build));
	json_object_set_new(o, "fromPid", json_integer(u->from_pid));
	json_object_set_new(o, "toPid", json_integer(u->to_pid));
	json_object_set_new(o, "errors", wr_strv(u->errors));
	json_object_set_new(o, "connections", u->tail_valid ? json_pack("{s:o, s:o, s:o}",
	    "handedOver", wr_u64(u->handed_over), "closed", wr_u64(u->closed),
	    "forced", wr_u64(u->forced)) : json_null());
	return o;
}

static json_t *
wr_cluster(const struct sup_cluster *c)
{
	json_t *o = json_object();
	json_object_set_new(o, "name", json_string(c->name));
	json_object_set_new(o, "state", json_string(staterec_cstates[c->st]));
	json_object_set_new(o, "configVersion", json_string(c->config_version));
	json_object_set_new(o, "nextGeneration", wr_u64(c->next_generation));
	json_object_set_new(o, "restarts", wr_u64(c->restarts));
	json_object_set_new(o, "restartAtMono", wr_u64(c->restart_at));
	json_object_set_new(o, "restartDelayMs", wr_u64(c->restart_delay_ms));
	json_object_set_new(o, "failReason", wr_str(c->fail_reason));
	json_t *times = json_array();
	for (uint32_t i = 0; i < c->crash.n; i++)
		json_array_append_new(times, wr_u64(c->crash.times[(c->crash.head + i) %
		    c->crash.cap]));
	json_object_set_new(o, "crash", json_pack("{s:o, s:o, s:o, s:o, s:o}", "times", times,
	    "backoffMs", wr_u64(c->crash.backoff_ms), "startedMono", wr_u64(c->crash.started_ms),
	    "restarts", wr_u64(c->crash.restarts), "loops", wr_u64(c->crash.loops)));
	json_object_set_new(o, "unresponsiveTotal", wr_u64(c->unresponsive_total));
	json_object_set_new(o, "upstream", json_pack("{s:s, s:o, s:o}",
	    "state", sup_upstream_state_str(c->upstream), "since", wr_u64(c->upstream_since_ms),
	    "error", wr_str(c->upstream_error)));
	json_t *un = json_array();
	for (size_t i = 0; i < c->n_unknown_nodes; i++)
		json_array_append_new(un, json_pack("{s:i, s:o, s:i, s:o}",
		    "nodeId", (int)c->unknown_nodes[i].node_id,
		    "host", wr_str(c->unknown_nodes[i].host), "port", (int)c->unknown_nodes[i].port,
		    "since", wr_u64(c->unknown_since_ms[i])));
	json_object_set_new(o, "unknownNodes", un);
	json_t *ne = json_array();
	for (size_t i = 0; i < c->nodes.n; i++)
		json_array_append_new(ne, json_pack("{s:i, s:o, s:i}",
		    "nodeId", (int)c->nodes.v[i].node_id, "host", wr_str(c->nodes.v[i].host),
		    "port", (int)c->nodes.v[i].port));
	json_object_set_new(o, "nodes", json_pack("{s:s, s:o, s:o}",
	    "upstreamKey", c->nodes.upstream_key, "generation", wr_u64(c->nodes.generation),
	    "entries", ne));
	json_object_set_new(o, "lastReplacement", !c->last_replacement.valid ? json_null() :
	    json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}",
	    "fromGeneration", wr_u64(c->last_replacement.from_generation),
	    "toGeneration", wr_u64(c->last_replacement.to_generation),
	    "handedOver", wr_u64(c->last_replacement.handed_over),
	    "drained", wr_u64(c->last_replacement.drained),
	    "forced", wr_u64(c->last_replacement.forced),
	    "durationMs", wr_u64(c->last_replacement.duration_ms)));
	const struct sup_gen *g = sup_cluster_serving(c);
	json_object_set_new(o, "serving", !g ? json_null() : json_pack("{s:o, s:s, s:o, s:o}",
	    "generation", wr_u64(g->generation), "state", lc_state_str(g->lc.state),
	    "since", wr_u64(g->lc.since_ms), "reason", wr_str(g->lc.reason)));
	json_object_set_new(o, "tickets", json_boolean(c->tickets != NULL));
	json_object_set_new(o, "counters", staterec_counters_json(c, false));
	return o;
}

/* Every listed cluster's open listeners in order: each is handed to fn. */
static void
staterec_each_listener(const struct sup *s, void (*fn)(void *, const struct sup_cluster *,
		       const struct sup_listener *), void *arg)
{
	for (size_t i = 0; i < s->n_clusters; i++) {
		const struct sup_cluster *c = s->clusters[i];
		if (!c->ccfg)
			continue;
		for (size_t k = 0; k < c->ccfg->n_listeners; k++)
			if (c->ccfg->listeners[k].fd >= 0)
				fn(arg, c, &c->ccfg->listeners[k]);
	}
}

struct staterec_fdlist {
	int *fds;
	size_t n, max;
};

static void
staterec_add_fd(void *arg, const struct sup_cluster *c, const struct sup_listener *l)
{
	(void)c;
	struct staterec_fdlist *fl = arg;
	if (fl->n < fl->max)
		fl->fds[fl->n] = l->fd;
	fl->n++;
}

size_t
staterec_listener_fds(const struct sup *s, int *fds, size_t max)
{
	struct staterec_fdlist fl = { fds, 0, max };
	staterec_each_listener(s, staterec_add_fd, &fl);
	return fl.n < max ? fl.n : max;
}

static void
staterec_add_fd_json(void *arg, const struct sup_cluster *c, const struct sup_listener *l)
{
	json_array_append_new(arg, json_pack("{s:s, s:s, s:i, s:s, s:i}", "kind", "listener",
	    "cluster", c->name, "nodeId", (int)l->node_id, "host", l->addr.host,
	    "port", (int)l->addr.port));
}

char *
staterec_encode(const struct sup *s, const struct staterec_io *io, uint32_t version, size_t *len)
{
	if (version < STATEREC_MIN || version > STATEREC_MAX)
		return NULL;
	json_t *o = json_object();
	if (!o)
		return NULL;
	json_object_set_new(o, "record", json_integer(version));
	json_object_set_new(o, "from", json_pack("{s:s, s:s, s:i, s:o}",
	    "version", buildinfo_version(), "buildId", buildinfo_id(), "pid", (int)s->pid,
	    "startedAt", wr_u64(s->process_started_at_ms)));
	json_object_set_new(o, "execPath", wr_str(s->exec_path));
	json_object_set_new(o, "notifySocket", io->notify_socket && io->notify_socket[0] ?
	    wr_str(io->notify_socket) : json_null());
	json_object_set_new(o, "config", json_pack("{s:o, s:o, s:s, s:o}",
	    "path", wr_str(s->config_path), "text", json_stringn_nocheck(s->config_text ?
	    s->config_text : "", s->config_text ? s->config_len : 0),
	    "version", s->config_version, "appliedAt", wr_u64(s->applied_at_ms)));
	json_object_set_new(o, "serviceStartedAt", wr_u64(s->started_at_ms));
	json_object_set_new(o, "hupPending", json_boolean(s->hup_pending));
	json_object_set_new(o, "ticketRotationNextMono", wr_u64(io->ticket_rotation_next_mono));
	json_t *res = json_array(), *bk = json_array();
	for (size_t i = 0; i < RELOAD_STATS_RESULTS; i++)
		json_array_append_new(res, wr_u64(s->reload_stats.result[i]));
	for (size_t i = 0; i < RELOAD_STATS_BUCKETS; i++)
		json_array_append_new(bk, wr_u64(s->reload_stats.bucket[i]));
	json_object_set_new(o, "reloadStats", json_pack("{s:o, s:o, s:o, s:o}", "result", res,
	    "bucket", bk, "count", wr_u64(s->reload_stats.count),
	    "sumMs", wr_u64(s->reload_stats.sum_ms)));
	json_object_set_new(o, "lastReload", wr_reload(&s->last_reload));
	json_object_set_new(o, "lastValidation", s->last_validation.timestamp_ms == 0 ?
	    json_null() : json_pack("{s:b, s:o, s:s}", "valid", s->last_validation.valid,
	    "timestamp", wr_u64(s->last_validation.timestamp_ms),
	    "requestedVersion", s->last_validation.requested_version));
	json_object_set_new(o, "upgrades", json_pack("{s:o, s:o, s:o}",
	    "success", wr_u64(s->upgrade_results[SUP_UPGRADE_SUCCESS]),
	    "failed", wr_u64(s->upgrade_results[SUP_UPGRADE_FAILED]),
	    "rejected", wr_u64(s->upgrade_results[SUP_UPGRADE_REJECTED])));
	json_object_set_new(o, "lastUpgrade", wr_upgrade(&s->last_upgrade));
	json_object_set_new(o, "admin", json_pack("{s:o, s:o, s:o, s:o}",
	    "refusedMissing", wr_u64(io->admin_counters[0]),
	    "refusedMalformed", wr_u64(io->admin_counters[1]),
	    "refusedWrong", wr_u64(io->admin_counters[2]),
	    "tlsFailures", wr_u64(io->admin_counters[3])));
	json_t *fds = json_array();
	staterec_each_listener(s, staterec_add_fd_json, fds);
	if (io->control)
		json_array_append_new(fds, json_pack("{s:s, s:s, s:o, s:o}", "kind", "control",
		    "path", io->control_path, "dev", wr_u64(io->control_dev),
		    "ino", wr_u64(io->control_ino)));
	if (io->admin)
		json_array_append_new(fds, json_pack("{s:s, s:s, s:i}", "kind", "admin",
		    "host", io->admin_addr.host, "port", (int)io->admin_addr.port));
	json_object_set_new(o, "fds", fds);
	json_t *cl = json_array();
	for (size_t i = 0; i < s->n_clusters; i++)
		json_array_append_new(cl, wr_cluster(s->clusters[i]));
	json_object_set_new(o, "clusters", cl);
	char *text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (text)
		*len = strlen(text);
	return text;
}

/* ---- reading ---------------------------------------------------------------------- */

struct rd {
	char *err;
	size_t errlen;
	bool failed;
};

static void rd_fail(struct rd *r, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void
rd_fail(struct rd *r, const char *path, const char *fmt, ...)
{
	if (r->failed)
		return;
	r->failed = true;
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(r->err, r->errlen, "state record: %s: %s", path[0] ? path : "(top)", msg);
}

/* o is an object whose keys are exactly `keys` (NULL-terminated). */
static bool
rd_keys(struct rd *r, const json_t *o, const char *path, const char *const *keys)
{
	if (!json_is_object(o)) {
		rd_fail(r, path, "not an object");
		return false;
	}
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)o, k, v) {
		size_t i = 0;
		while (keys[i] && strcmp(keys[i], k) != 0)
			i++;
		if (!keys[i]) {
			rd_fail(r, path, "unknown key '%s'", k);
			return false;
		}
	}
	for (size_t i = 0; keys[i]; i++)
		if (!json_object_get(o, keys[i])) {
			rd_fail(r, path, "missing key '%s'", keys[i]);
			return false;
		}
	return true;
}

/* "path.key" for an error message; a path too long for buf ends in "..." */
static void
rd_path(char *buf, size_t len, const char *path, const char *key)
{
	/* a key path for an error message: cut when too long */
	if (snprintf(buf, len, "%s%s%s", path, path[0] ? "." : "", key) >= (int)len && len > 4)
		memcpy(buf + len - 4, "...", 4);
}

static uint64_t
rd_u64(struct rd *r, const json_t *o, const char *path, const char *key)
{
	const json_t *v = json_object_get(o, key);
	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		char p[160];
		rd_path(p, sizeof p, path, key);
		rd_fail(r, p, "not a non-negative integer");
		return 0;
	}
	return (uint64_t)json_integer_value(v);
}

static int64_t
rd_int(struct rd *r, const json_t *o, const char *path, const char *key, int64_t min, int64_t max)
{
	const json_t *v = json_object_get(o, key);
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
		char p[160];
		rd_path(p, sizeof p, path, key);
		rd_fail(r, p, "not an integer in %lld..%lld", (long long)min, (long long)max);
		return min;
	}
	return json_integer_value(v);
}

static bool
rd_bool(struct rd *r, const json_t *o, const char *path, const char *key)
{
	const json_t *v = json_object_get(o, key);
	if (!json_is_boolean(v)) {
		char p[160];
		rd_path(p, sizeof p, path, key);
		rd_fail(r, p, "not a boolean");
		return false;
	}
	return json_is_true(v);
}

/* A string that must fit buf (NUL included). */
static void
rd_str(struct rd *r, const json_t *o, const char *path, const char *key, char *buf, size_t len)
{
	const json_t *v = json_object_get(o, key);
	char p[160];
	buf[0] = 0;
	if (!json_is_string(v)) {
		rd_path(p, sizeof p, path, key);
		rd_fail(r, p, "not a string");
		return;
	}
	if (json_string_length(v) >= len || strlen(json_string_value(v)) != json_string_length(v)) {
		rd_path(p, sizeof p, path, key);
		rd_fail(r, p, "longer than %zu bytes or not text", len - 1);
		return;
	}
	memcpy(buf, json_string_value(v), json_string_length(v) + 1);
}

static char *
rd_strdup(struct rd *r, const json_t *o, const char *path, const char *key, size_t *len)
{
	const json_t *v = json_object_get(o, key);
	if (!json_is_string(v)) {
		char p[160];
		rd_path(p, sizeof p, path, key);
		rd_fail(r, p, "not a string");
		return NULL;
	}
	size_t n = json_string_length(v);
	char *d = malloc(n + 1);
	if (!d) {
		rd_fail(r, path, "out of memory");
		return NULL;
	}
	memcpy(d, json_string_value(v), n + 1);
	if (len)
		*len = n;
	return d;
}

static char **
rd_strv(struct rd *r, const json_t *o, const char *path, const char *key)
{
	const json_t *a = json_object_get(o, key), *v;
	char p[160];
	rd_path(p, sizeof p, path, key);
	if (!json_is_array(a)) {
		rd_fail(r, p, "not an array");
		return NULL;
	}
	size_t n = json_array_size(a), i;
	if (n == 0)
		return NULL;
	char **out = calloc(n + 1, sizeof *out);
	if (!out) {
		rd_fail(r, p, "out of memory");
		return NULL;
	}
	json_array_foreach(a, i, v) {
		if (!json_is_string(v) || !(out[i] = strdup(json_string_value(v)))) {
			rd_fail(r, p, "not an array of strings");
			break;
		}
	}
	return out;
}

/* The value of an enum by its name in names[0..n). */
static int
rd_enum(struct rd *r, const json_t *o, const char *path, const char *key,
	const char *(*name)(int), int n)
{
	char buf[64];
	rd_str(r, o, path, key, buf, sizeof buf);
	if (r->failed)
		return 0;
	for (int i = 0; i < n; i++)
		if (name(i) && strcmp(name(i), buf) == 0)
			return i;
	char p[160];
	rd_path(p, sizeof p, path, key);
	rd_fail(r, p, "unknown value '%s'", buf);
	return 0;
}

static const char *
sr_cstate_name(int i)
{
	/* only these four carry over: leaving and gone clusters stay behind */
	return i <= FSM_C_PARKED ? staterec_cstates[i] : NULL;
}

static const char *
sr_upstream_name(int i)
{
	return sup_upstream_state_str((enum sup_upstream_state)i);
}

static const char *
sr_lc_name(int i)
{
	return lc_state_str((enum lc_state)i);
}

static const char *
sr_reload_name(int i)
{
	return i == SUP_RELOAD_NONE ? NULL : sup_reload_status_str((enum sup_reload_status)i);
}

static const char *
sr_upgrade_name(int i)
{
	return i == SUP_UPGRADE_NONE ? NULL : sup_upgrade_status_str((enum sup_upgrade_status)i);
}

static const char *
sr_fd_name(int i)
{
	return staterec_fd_kinds[i];
}

int
staterec_counters_read(const json_t *j, struct metrics *m, char *err, size_t errlen)
{
	const json_t *cn = json_object_get(j, "counters"), *ga = json_object_get(j, "gauges");
	const json_t *api = json_object_get(j, "api");
	if (!json_is_object(j) || !json_is_object(cn) || !json_is_object(ga) ||
	    !json_is_object(api)) {
		snprintf(err, errlen, "counters: not an object of counters, gauges and api");
		return -1;
	}
	const json_t *v;
#define SR_READ(name, type, help) \
	v = json_object_get(strcmp(#type, "counter") == 0 ? cn : ga, #name); \
	if (json_is_integer(v) && json_integer_value(v) > 0) \
		METRIC_ADD(m, name, (uint64_t)json_integer_value(v));
	METRICS_FIELDS(SR_READ)
#undef SR_READ
	const char *key;
	json_t *a;
	json_object_foreach((json_t *)api, key, a) {
		char *end;
		unsigned long k = strtoul(key, &end, 10);
		unsigned slot = strcmp(key, "other") == 0 ? METRICS_APIS - 1 :
		    *end || end == key ? METRICS_APIS : metrics_api_slot(k > 32767 ? -1 : (int)k);
		if (slot >= METRICS_APIS || !json_is_object(a))
			continue;  /* a key this build does not know: dropped */
		struct metrics_api *x = &m->api[slot];
		json_t *n;
		metrics_mark_seen(m, slot);
		if (json_is_integer(n = json_object_get(a, "requests")) && json_integer_value(n) > 0)
			METRIC_ADD(x, requests, (uint64_t)json_integer_value(n));
		if (json_is_integer(n = json_object_get(a, "responses")) && json_integer_value(n) > 0)
			METRIC_ADD(x, responses, (uint64_t)json_integer_value(n));
		if (json_is_integer(n = json_object_get(a, "latencySumUs")) &&
		    json_integer_value(n) > 0)
			METRIC_ADD(x, latency_sum_us, (uint64_t)json_integer_value(n));
		const char *bk;
		json_object_foreach(json_object_get(a, "buckets"), bk, n) {
			unsigned long bound = strtoul(bk, &end, 10);
			if (*end || end == bk || !json_is_integer(n) || json_integer_value(n) <= 0)
				continue;
			/* its bound here, or the next larger one; none: only in
			 * the count (+Inf), which responses already is */
			unsigned b = 0;
			while (b < METRICS_BUCKETS && metrics_latency_bounds_us[b] < bound)
				b++;
			if (b < METRICS_BUCKETS)
				atomic_fetch_add_explicit(&x->bucket[b], (uint64_t)json_integer_value(n),
				    memory_order_relaxed);
		}
	}
	return 0;
}

static void
rd_reload(struct rd *r, const json_t *o, const char *path, struct sup_reload_record *rec)
{
	static const char *const keys[] = { "status", "timestamp", "durationMs", "requestedVersion",
		"source", "added", "modified", "removed", "errors", "persisted", "persistError",
		"changed", "posted", NULL };
	memset(rec, 0, sizeof *rec);
	if (json_is_null(o) || !rd_keys(r, o, path, keys))
		return;
	rec->status = (enum sup_reload_status)rd_enum(r, o, path, "status", sr_reload_name,
	    SUP_RELOAD_UNCHANGED + 1);
	rec->timestamp_ms = rd_u64(r, o, path, "timestamp");
	rec->duration_ms = rd_u64(r, o, path, "durationMs");
	rd_str(r, o, path, "requestedVersion", rec->requested_version,
	    sizeof rec->requested_version);
	rd_str(r, o, path, "source", rec->source, sizeof rec->source);
	rec->added = rd_strv(r, o, path, "added");
	rec->modified = rd_strv(r, o, path, "modified");
	rec->removed = rd_strv(r, o, path, "removed");
	rec->errors = rd_strv(r, o, path, "errors");
	rec->persisted = rd_bool(r, o, path, "persisted");
	rd_str(r, o, path, "persistError", rec->persist_error, sizeof rec->persist_error);
	rec->changed = rd_bool(r, o, path, "changed");
	rec->posted = rd_bool(r, o, path, "posted");
}

static void
rd_upgrade(struct rd *r, const json_t *o, const char *path, struct sup_upgrade_record *u)
{
	static const char *const keys[] = { "status", "timestamp", "durationMs", "completedAt",
		"source", "phase", "fromVersion", "toVersion", "fromBuildId", "toBuildId",
		"fromPid", "toPid", "errors", "connections", NULL };
	memset(u, 0, sizeof *u);
	if (json_is_null(o) || !rd_keys(r, o, path, keys))
		return;
	u->status = (enum sup_upgrade_status)rd_enum(r, o, path, "status", sr_upgrade_name,
	    SUP_UPGRADE_RESULTS);
	u->timestamp_ms = rd_u64(r, o, path, "timestamp");
	u->duration_ms = rd_u64(r, o, path, "durationMs");
	u->completed_ms = rd_u64(r, o, path, "completedAt");
	rd_str(r, o, path, "source", u->source, sizeof u->source);
	rd_str(r, o, path, "phase", u->phase, sizeof u->phase);
	rd_str(r, o, path, "fromVersion", u->from_version, sizeof u->from_version);
	rd_str(r, o, path, "toVersion", u->to_version, sizeof u->to_version);
	rd_str(r, o, path, "fromBuildId", u->from_build, sizeof u->from_build);
	rd_str(r, o, path, "toBuildId", u->to_build, sizeof u->to_build);
	u->from_pid = (int32_t)rd_int(r, o, path, "fromPid", 0, INT32_MAX);
	u->to_pid = (int32_t)rd_int(r, o, path, "toPid", 0, INT32_MAX);
	u->errors = rd_strv(r, o, path, "errors");
	const json_t *c = json_object_get(o, "connections");
	if (!json_is_null(c)) {
		static const char *const ck[] = { "handedOver", "closed", "forced", NULL };
		char p[160];
		rd_path(p, sizeof p, path, "connections");
		if (rd_keys(r, c, p, ck)) {
			u->tail_valid = true;
			u->handed_over = rd_u64(r, c, p, "handedOver");
			u->closed = rd_u64(r, c, p, "closed");
			u->forced = rd_u64(r, c, p, "forced");
		}
	}
}

static void
rd_cluster(struct rd *r, const json_t *o, const char *path, struct staterec_cluster *c)
{
	static const char *const keys[] = { "name", "state", "configVersion", "nextGeneration",
		"restarts", "restartAtMono", "restartDelayMs", "failReason", "crash",
		"unresponsiveTotal", "upstream", "unknownNodes", "nodes", "lastReplacement",
		"serving", "tickets", "counters", NULL };
	char p[160];
	if (!rd_keys(r, o, path, keys))
		return;
	rd_str(r, o, path, "name", c->name, sizeof c->name);
	c->st = (enum fsm_cstate)rd_enum(r, o, path, "state", sr_cstate_name, FSM_C_PARKED + 1);
	rd_str(r, o, path, "configVersion", c->config_version, sizeof c->config_version);
	c->next_generation = rd_u64(r, o, path, "nextGeneration");
	c->restarts = (uint32_t)rd_int(r, o, path, "restarts", 0, UINT32_MAX);
	c->restart_at_mono = rd_u64(r, o, path, "restartAtMono");
	c->restart_delay_ms = rd_u64(r, o, path, "restartDelayMs");
	rd_str(r, o, path, "failReason", c->fail_reason, sizeof c->fail_reason);

	static const char *const crk[] = { "times", "backoffMs", "startedMono", "restarts",
		"loops", NULL };
	const json_t *cr = json_object_get(o, "crash"), *v;
	rd_path(p, sizeof p, path, "crash");
	if (rd_keys(r, cr, p, crk)) {
		const json_t *t = json_object_get(cr, "times");
		size_t i;
		if (!json_is_array(t) || json_array_size(t) > CRASH_MAX_LIMIT) {
			rd_fail(r, p, "times: not an array of at most %d", CRASH_MAX_LIMIT);
		} else if (json_array_size(t)) {
			c->crash_times = calloc(json_array_size(t), sizeof *c->crash_times);
			if (!c->crash_times)
				rd_fail(r, p, "out of memory");
			json_array_foreach(t, i, v) {
				if (!c->crash_times || !json_is_integer(v) || json_integer_value(v) < 0) {
					rd_fail(r, p, "times: not an array of times");
					break;
				}
				c->crash_times[c->n_crash++] = (uint64_t)json_integer_value(v);
			}
		}
		c->crash_backoff_ms = rd_u64(r, cr, p, "backoffMs");
		c->crash_started_mono = rd_u64(r, cr, p, "startedMono");
		c->crash_restarts = rd_u64(r, cr, p, "restarts");
		c->crash_loops = rd_u64(r, cr, p, "loops");
	}
	c->unresponsive_total = rd_u64(r, o, path, "unresponsiveTotal");

	static const char *const upk[] = { "state", "since", "error", NULL };
	const json_t *up = json_object_get(o, "upstream");
	rd_path(p, sizeof p, path, "upstream");
	if (rd_keys(r, up, p, upk)) {
		c->upstream = (enum sup_upstream_state)rd_enum(r, up, p, "state", sr_upstream_name,
		    SUP_UPSTREAM_UNREACHABLE + 1);
		c->upstream_since_ms = rd_u64(r, up, p, "since");
		rd_str(r, up, p, "error", c->upstream_error, sizeof c->upstream_error);
	}

	static const char *const unk[] = { "nodeId", "host", "port", "since", NULL };
	const json_t *un = json_object_get(o, "unknownNodes");
	rd_path(p, sizeof p, path, "unknownNodes");
	if (!json_is_array(un) || json_array_size(un) > STATEREC_UNKNOWN_NODES) {
		rd_fail(r, p, "not an array of at most %d", STATEREC_UNKNOWN_NODES);
	} else {
		size_t i;
		json_array_foreach(un, i, v) {
			if (!rd_keys(r, v, p, unk))
				break;
			struct ipc_unknown_node *u = &c->unknown_nodes[c->n_unknown];
			u->node_id = (int32_t)rd_int(r, v, p, "nodeId", INT32_MIN, INT32_MAX);
			u->port = (int32_t)rd_int(r, v, p, "port", 0, 65535);
			rd_str(r, v, p, "host", u->host, sizeof u->host);
			c->unknown_since_ms[c->n_unknown++] = rd_u64(r, v, p, "since");
		}
	}

	static const char *const nk[] = { "upstreamKey", "generation", "entries", NULL };
	static const char *const ek[] = { "nodeId", "host", "port", NULL };
	const json_t *nd = json_object_get(o, "nodes");
	rd_path(p, sizeof p, path, "nodes");
	if (rd_keys(r, nd, p, nk)) {
		rd_str(r, nd, p, "upstreamKey", c->nodes.upstream_key, sizeof c->nodes.upstream_key);
		c->nodes.generation = rd_u64(r, nd, p, "generation");
		const json_t *en = json_object_get(nd, "entries");
		if (!json_is_array(en) || json_array_size(en) > 65536) {
			rd_fail(r, p, "entries: not an array");
		} else if (json_array_size(en)) {
			c->nodes.v = calloc(json_array_size(en), sizeof *c->nodes.v);
			c->nodes.cap = json_array_size(en);
			if (!c->nodes.v)
				rd_fail(r, p, "out of memory");
			size_t i;
			json_array_foreach(en, i, v) {
				if (!c->nodes.v || !rd_keys(r, v, p, ek))
					break;
				struct nodemap_entry *e = &c->nodes.v[c->nodes.n++];
				e->node_id = (int32_t)rd_int(r, v, p, "nodeId", INT32_MIN, INT32_MAX);
				e->port = (int32_t)rd_int(r, v, p, "port", 1, 65535);
				rd_str(r, v, p, "host", e->host, sizeof e->host);
				if (!r->failed && !e->host[0])
					rd_fail(r, p, "entries: empty host");
			}
		}
	}

	static const char *const rk[] = { "fromGeneration", "toGeneration", "handedOver",
		"drained", "forced", "durationMs", NULL };
	const json_t *rep = json_object_get(o, "lastReplacement");
	rd_path(p, sizeof p, path, "lastReplacement");
	if (!json_is_null(rep) && rd_keys(r, rep, p, rk)) {
		c->replacement_valid = true;
		c->rep_from = rd_u64(r, rep, p, "fromGeneration");
		c->rep_to = rd_u64(r, rep, p, "toGeneration");
		c->rep_handed_over = rd_u64(r, rep, p, "handedOver");
		c->rep_drained = rd_u64(r, rep, p, "drained");
		c->rep_forced = rd_u64(r, rep, p, "forced");
		c->rep_duration_ms = rd_u64(r, rep, p, "durationMs");
	}

	static const char *const sk[] = { "generation", "state", "since", "reason", NULL };
	const json_t *sv = json_object_get(o, "serving");
	rd_path(p, sizeof p, path, "serving");
	if (!json_is_null(sv) && rd_keys(r, sv, p, sk)) {
		c->serving_valid = true;
		c->serving_generation = rd_u64(r, sv, p, "generation");
		c->serving_state = (enum lc_state)rd_enum(r, sv, p, "state", sr_lc_name,
		    LC_STATE_COUNT);
		c->serving_since_ms = rd_u64(r, sv, p, "since");
		rd_str(r, sv, p, "reason", c->serving_reason, sizeof c->serving_reason);
	}
	c->tickets = rd_bool(r, o, path, "tickets");
	rd_path(p, sizeof p, path, "counters");
	char cerr[160];
	if (!r->failed && staterec_counters_read(json_object_get(o, "counters"), &c->counters, cerr,
	    sizeof cerr) == -1)
		rd_fail(r, p, "%s", cerr);
}

static void
rd_fd(struct rd *r, const json_t *o, const char *path, struct staterec_fd *f)
{
	static const char *const lk[] = { "kind", "cluster", "nodeId", "host", "port", NULL };
	static const char *const ck[] = { "kind", "path", "dev", "ino", NULL };
	static const char *const ak[] = { "kind", "host", "port", NULL };
	if (!json_is_object(o)) {
		rd_fail(r, path, "not an object");
		return;
	}
	f->kind = (enum staterec_fd_kind)rd_enum(r, o, path, "kind", sr_fd_name, 3);
	if (r->failed)
		return;
	switch (f->kind) {
	case STATEREC_FD_LISTENER:
		if (!rd_keys(r, o, path, lk))
			return;
		rd_str(r, o, path, "cluster", f->cluster, sizeof f->cluster);
		f->node_id = (int32_t)rd_int(r, o, path, "nodeId", -1, INT32_MAX);
		break;
	case STATEREC_FD_CONTROL:
		if (!rd_keys(r, o, path, ck))
			return;
		rd_str(r, o, path, "path", f->path, sizeof f->path);
		f->dev = rd_u64(r, o, path, "dev");
		f->ino = rd_u64(r, o, path, "ino");
		return;
	case STATEREC_FD_ADMIN:
		if (!rd_keys(r, o, path, ak))
			return;
		break;
	}
	rd_str(r, o, path, "host", f->addr.host, sizeof f->addr.host);
	f->addr.port = (uint16_t)rd_int(r, o, path, "port", 0, 65535);
}

int
staterec_decode(const char *text, size_t len, uint32_t version, struct staterec *out,
		char *err, size_t errlen)
{
	struct rd r = { err, errlen, false };
	json_error_t je;
	memset(out, 0, sizeof *out);
	if (version < STATEREC_MIN || version > STATEREC_MAX) {
		snprintf(err, errlen, "state record version %u: this ferryd reads %d..%d", version,
		    STATEREC_MIN, STATEREC_MAX);
		return -1;
	}
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!o) {
		snprintf(err, errlen, "state record: not JSON: %s (at byte %d)", je.text,
		    je.position);
		return -1;
	}
	static const char *const keys[] = { "record", "from", "execPath", "notifySocket", "config",
		"serviceStartedAt", "hupPending", "ticketRotationNextMono", "reloadStats",
		"lastReload", "lastValidation", "upgrades", "lastUpgrade", "admin", "fds",
		"clusters", NULL };
	if (!rd_keys(&r, o, "", keys))
		goto out;
	if ((uint32_t)rd_int(&r, o, "", "record", 0, UINT32_MAX) != version) {
		rd_fail(&r, "record", "is not version %u, which was agreed", version);
		goto out;
	}
	static const char *const fk[] = { "version", "buildId", "pid", "startedAt", NULL };
	const json_t *from = json_object_get(o, "from");
	if (rd_keys(&r, from, "from", fk)) {
		rd_str(&r, from, "from", "version", out->from_version, sizeof out->from_version);
		rd_str(&r, from, "from", "buildId", out->from_build, sizeof out->from_build);
		out->from_pid = (int32_t)rd_int(&r, from, "from", "pid", 1, INT32_MAX);
		out->from_started_ms = rd_u64(&r, from, "from", "startedAt");
	}
	out->exec_path = rd_strdup(&r, o, "", "execPath", NULL);
	if (!json_is_null(json_object_get(o, "notifySocket")))
		rd_str(&r, o, "", "notifySocket", out->notify_socket, sizeof out->notify_socket);
	static const char *const ck[] = { "path", "text", "version", "appliedAt", NULL };
	const json_t *cfg = json_object_get(o, "config");
	if (rd_keys(&r, cfg, "config", ck)) {
		out->config_path = rd_strdup(&r, cfg, "config", "path", NULL);
		out->config_text = rd_strdup(&r, cfg, "config", "text", &out->config_len);
		rd_str(&r, cfg, "config", "version", out->config_version,
		    sizeof out->config_version);
		out->applied_at_ms = rd_u64(&r, cfg, "config", "appliedAt");
	}
	out->service_started_ms = rd_u64(&r, o, "", "serviceStartedAt");
	out->hup_pending = rd_bool(&r, o, "", "hupPending");
	out->ticket_rotation_next_mono = rd_u64(&r, o, "", "ticketRotationNextMono");
	static const char *const rk[] = { "result", "bucket", "count", "sumMs", NULL };
	const json_t *rs = json_object_get(o, "reloadStats");
	if (rd_keys(&r, rs, "reloadStats", rk)) {
		const json_t *res = json_object_get(rs, "result"), *bk = json_object_get(rs, "bucket");
		if (json_array_size(res) != RELOAD_STATS_RESULTS ||
		    json_array_size(bk) != RELOAD_STATS_BUCKETS) {
			rd_fail(&r, "reloadStats", "result or bucket of another length");
		} else {
			for (size_t i = 0; i < RELOAD_STATS_RESULTS; i++)
				out->reload_stats.result[i] = (uint64_t)json_integer_value(
				    json_array_get(res, i));
			for (size_t i = 0; i < RELOAD_STATS_BUCKETS; i++)
				out->reload_stats.bucket[i] = (uint64_t)json_integer_value(
				    json_array_get(bk, i));
		}
		out->reload_stats.count = rd_u64(&r, rs, "reloadStats", "count");
		out->reload_stats.sum_ms = rd_u64(&r, rs, "reloadStats", "sumMs");
	}
	rd_reload(&r, json_object_get(o, "lastReload"), "lastReload", &out->last_reload);
	const json_t *lv = json_object_get(o, "lastValidation");
	static const char *const vk[] = { "valid", "timestamp", "requestedVersion", NULL };
	if (!json_is_null(lv) && rd_keys(&r, lv, "lastValidation", vk)) {
		out->last_validation.valid = rd_bool(&r, lv, "lastValidation", "valid");
		out->last_validation.timestamp_ms = rd_u64(&r, lv, "lastValidation", "timestamp");
		rd_str(&r, lv, "lastValidation", "requestedVersion",
		    out->last_validation.requested_version,
		    sizeof out->last_validation.requested_version);
	}
	static const char *const uk[] = { "success", "failed", "rejected", NULL };
	const json_t *up = json_object_get(o, "upgrades");
	if (rd_keys(&r, up, "upgrades", uk)) {
		out->upgrade_results[SUP_UPGRADE_SUCCESS] = rd_u64(&r, up, "upgrades", "success");
		out->upgrade_results[SUP_UPGRADE_FAILED] = rd_u64(&r, up, "upgrades", "failed");
		out->upgrade_results[SUP_UPGRADE_REJECTED] = rd_u64(&r, up, "upgrades", "rejected");
	}
	rd_upgrade(&r, json_object_get(o, "lastUpgrade"), "lastUpgrade", &out->last_upgrade);
	static const char *const ak[] = { "refusedMissing", "refusedMalformed", "refusedWrong",
		"tlsFailures", NULL };
	const json_t *ad = json_object_get(o, "admin");
	if (rd_keys(&r, ad, "admin", ak)) {
		for (size_t i = 0; ak[i]; i++)
			out->admin_carried[i] = rd_u64(&r, ad, "admin", ak[i]);
	}
	const json_t *fds = json_object_get(o, "fds"), *v;
	size_t i;
	if (!json_is_array(fds) || json_array_size(fds) > 65536) {
		rd_fail(&r, "fds", "not an array");
	} else if (json_array_size(fds)) {
		if (!(out->fds = calloc(json_array_size(fds), sizeof *out->fds)))
			rd_fail(&r, "fds", "out of memory");
		json_array_foreach(fds, i, v) {
			if (r.failed)
				break;
			char p[32];
			snprintf(p, sizeof p, "fds[%zu]", i);
			rd_fd(&r, v, p, &out->fds[out->n_fds++]);
		}
	}
	const json_t *cl = json_object_get(o, "clusters");
	if (!json_is_array(cl) || json_array_size(cl) > 65536) {
		rd_fail(&r, "clusters", "not an array");
	} else if (json_array_size(cl)) {
		if (!(out->clusters = calloc(json_array_size(cl), sizeof *out->clusters)))
			rd_fail(&r, "clusters", "out of memory");
		json_array_foreach(cl, i, v) {
			if (r.failed)
				break;
			char p[32];
			snprintf(p, sizeof p, "clusters[%zu]", i);
			rd_cluster(&r, v, p, &out->clusters[out->n_clusters++]);
		}
	}
	out->record = version;
out:
	json_decref(o);
	if (r.failed) {
		staterec_free(out);
		return -1;
	}
	return 0;
}

void
staterec_free(struct staterec *r)
{
	free(r->exec_path);
	free(r->config_path);
	free(r->config_text);
	sup_strv_free(r->last_reload.added);
	sup_strv_free(r->last_reload.modified);
	sup_strv_free(r->last_reload.removed);
	sup_strv_free(r->last_reload.errors);
	sup_strv_free(r->last_upgrade.errors);
	free(r->fds);
	for (size_t i = 0; i < r->n_clusters; i++) {
		free(r->clusters[i].crash_times);
		free(r->clusters[i].nodes.v);
	}
	free(r->clusters);
	memset(r, 0, sizeof *r);
}

/* ---- UPG_COUNTERS ---------------------------------------------------------------- */

char *
staterec_counters_msg(const struct sup_cluster *c, size_t *len)
{
	json_t *o = json_pack("{s:s, s:o}", "cluster", c->name, "counters",
	    staterec_counters_json(c, true));
	if (!o)
		return NULL;
	char *text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (text)
		*len = strlen(text);
	return text;
}

int
staterec_counters_msg_read(const char *text, size_t len, char *name, size_t namelen,
			   struct metrics *m, char *err, size_t errlen)
{
	json_error_t je;
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	const json_t *n = json_object_get(o, "cluster");
	int rc = -1;
	memset(m, 0, sizeof *m);
	if (!json_is_string(n) || json_string_length(n) >= namelen) {
		snprintf(err, errlen, "counters: no cluster name");
		goto out;
	}
	snprintf(name, namelen, "%s", json_string_value(n));
	rc = staterec_counters_read(json_object_get(o, "counters"), m, err, errlen);
out:
	json_decref(o);
	return rc;
}
