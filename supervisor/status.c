/*
 * status — the serving-generation and readiness rules declared in
 * supervisor.h, and the JSON and Prometheus renderings of the process table
 * served by the admin API (see status.h).
 *
 * Metrics blocks are read with relaxed atomic loads: workers keep adding to
 * them while we sum, and a scrape only needs each counter to be monotonic.
 */
#include "supervisor/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/units.h"

/* --- the rules of supervisor.h ----------------------------------------- */

static const struct sup_worker *
status_serving(const struct sup_cluster *c)
{
	const struct sup_worker *w;

	for (w = c->workers; w != NULL; w = w->next)
		if (w->lc.state == LC_ACCEPTING || w->lc.state == LC_DRAINING)
			return w;
	return c->workers;
}

struct sup_worker *
sup_cluster_serving(struct sup_cluster *c)
{
	return (struct sup_worker *)status_serving(c);
}

/*
 * fail-fast: every cluster's serving generation is accepting.
 * best-effort: at least one is accepting and none is still initializing
 * (a failed cluster does not hold readiness back once the others are up).
 * A supervisor that is stopping is not ready; one without clusters is.
 */
bool
sup_ready(const struct sup *s)
{
	const struct sup_worker *w;
	size_t i, accepting = 0, initializing = 0;

	if (s->stopping)
		return false;
	size_t counted = 0;
	for (i = 0; i < s->n_clusters; i++) {
		/* Clusters being removed, or drained on purpose by an operator,
		 * do not make ferryd unready. */
		if (s->clusters[i]->removing || s->clusters[i]->parked)
			continue;
		counted++;
		w = status_serving(s->clusters[i]);
		if (w == NULL || w->lc.state == LC_INITIALIZING)
			initializing++;
		else if (w->lc.state == LC_ACCEPTING)
			accepting++;
	}
	if (counted == 0)
		return true;
	if (s->cfg.startup_policy == CFG_STARTUP_BEST_EFFORT)
		return accepting > 0 && initializing == 0;
	return accepting == counted;
}

struct sup_cluster *
sup_find_cluster(struct sup *s, const char *name)
{
	size_t i;

	struct sup_cluster *removing = NULL;

	/* A cluster being removed may share its name with its re-addition. */
	for (i = 0; i < s->n_clusters; i++)
		if (strcmp(s->clusters[i]->cfg.name, name) == 0) {
			if (!s->clusters[i]->removing)
				return s->clusters[i];
			removing = s->clusters[i];
		}
	return removing;
}

const char *
sup_listener_role_str(enum sup_listener_role r)
{
	switch (r) {
	case SUP_LISTENER_BOOTSTRAP:
		return "bootstrap";
	case SUP_LISTENER_BROKER:
		return "broker";
	}
	return "unknown";
}

const char *
sup_upstream_state_str(enum sup_upstream_state s)
{
	switch (s) {
	case SUP_UPSTREAM_UNKNOWN:
		return "unknown";
	case SUP_UPSTREAM_REACHABLE:
		return "reachable";
	case SUP_UPSTREAM_UNREACHABLE:
		return "unreachable";
	}
	return "unknown";
}

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
status_worker_json(const struct sup_worker *w)
{
	json_t *o = json_object();
	bool live = w->pid != 0 && w->metrics != NULL;

	if (o == NULL)
		return NULL;
	json_object_set_new(o, "pid", w->pid != 0 ? json_integer(w->pid) : json_null());
	json_object_set_new(o, "generation", json_integer((json_int_t)w->generation));
	json_object_set_new(o, "state", json_string(lc_state_str(w->lc.state)));
	json_object_set_new(o, "since", status_time(w->lc.since_ms));
	json_object_set_new(o, "connections", json_integer(live ?
	    status_gauge(METRIC_GET(w->metrics, connections_active)) : 0));
	json_object_set_new(o, "inFlight", json_integer(live ?
	    status_gauge(METRIC_GET(w->metrics, in_flight)) : 0));
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
	const struct sup_worker *serving = status_serving(c), *w;
	json_t *o, *up, *ls, *ws;
	size_t i;

	if ((o = json_object()) == NULL)
		return NULL;
	json_object_set_new(o, "name", json_string(c->cfg.name));
	if (serving != NULL) {
		json_object_set_new(o, "state", json_string(lc_state_str(serving->lc.state)));
		json_object_set_new(o, "since", status_time(serving->lc.since_ms));
		json_object_set_new(o, "reason", status_str_or_null(serving->lc.reason));
		json_object_set_new(o, "generation", json_integer((json_int_t)serving->generation));
	} else {
		/* configured, no generation started yet */
		json_object_set_new(o, "state", json_string(lc_state_str(LC_INITIALIZING)));
		json_object_set_new(o, "since", json_null());
		json_object_set_new(o, "reason", json_null());
		json_object_set_new(o, "generation", json_null());
	}
	json_object_set_new(o, "configVersion", status_str_or_null(c->config_version));

	up = json_object();
	json_object_set_new(up, "state", json_string(sup_upstream_state_str(c->upstream)));
	json_object_set_new(up, "since", status_time(c->upstream_since_ms));
	json_object_set_new(up, "lastError", status_str_or_null(c->upstream_error));
	json_object_set_new(o, "upstream", up);

	ls = json_array();
	for (i = 0; i < c->n_listeners; i++)
		json_array_append_new(ls, status_listener_json(&c->listeners[i]));
	json_object_set_new(o, "listeners", ls);

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

	ws = json_array();
	for (w = c->workers; w != NULL; w = w->next)
		if (w->pid != 0 || w == serving)
			json_array_append_new(ws, status_worker_json(w));
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

	return json_pack("{s:s, s:s, s:I, s:I}",
	    "status", "UP",
	    "version", FERRY_VERSION,
	    "uptimeSeconds", (json_int_t)up,
	    "clusters", (json_int_t)s->n_clusters);
}

json_t *
status_ready_json(struct sup *s)
{
	json_t *o = json_object(), *cl = json_object();
	const struct sup_worker *w;
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
		w = status_serving(s->clusters[i]);
		json_object_set_new(cl, s->clusters[i]->cfg.name,
		    json_string(lc_state_str(w ? w->lc.state : LC_INITIALIZING)));
	}
	json_object_set_new(o, "clusters", cl);
	return o;
}

char *
status_dump(const json_t *j, size_t *len)
{
	char *s, *out;
	size_t n;

	if (j == NULL || (s = json_dumps(j, JSON_COMPACT)) == NULL)
		return NULL;
	n = strlen(s);
	if ((out = realloc(s, n + 2)) == NULL) {
		free(s);
		return NULL;
	}
	out[n] = '\n';
	out[n + 1] = '\0';
	*len = n + 1;
	return out;
}

/* --- Prometheus --------------------------------------------------------- */

/* Label values escape backslash, double quote and newline. */
static void
status_label(FILE *f, const char *v)
{
	for (; *v != '\0'; v++) {
		if (*v == '\\')
			fputs("\\\\", f);
		else if (*v == '"')
			fputs("\\\"", f);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

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
};

static const struct status_field_info status_fields[STATUS_F_COUNT] = {
#define STATUS_INFO(name, type, help) [STATUS_F_##name] = { #name, #type, help },
	METRICS_FIELDS(STATUS_INFO)
#undef STATUS_INFO
};

static uint64_t
status_field_get(struct metrics *m, enum status_field f)
{
	switch (f) {
#define STATUS_GET(name, type, help) case STATUS_F_##name: return METRIC_GET(m, name);
	METRICS_FIELDS(STATUS_GET)
#undef STATUS_GET
	case STATUS_F_COUNT:
		break;
	}
	return 0;
}

static uint64_t
status_cluster_sum(struct sup_cluster *c, enum status_field f, bool counter)
{
	struct sup_worker *w;
	uint64_t sum = counter ? status_field_get(&c->retired, f) : 0;

	for (w = c->workers; w != NULL; w = w->next) {
		if (w->metrics == NULL)
			continue;
		if (counter || w->pid != 0)
			sum += status_field_get(w->metrics, f);
	}
	return sum;
}

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

		fprintf(f, "# HELP ferry_%s%s %s\n", info->name, suffix, info->help);
		fprintf(f, "# TYPE ferry_%s%s %s\n", info->name, suffix, info->type);
		for (i = 0; i < s->n_clusters; i++) {
			struct sup_cluster *c = s->clusters[i];
			uint64_t v = status_cluster_sum(c, (enum status_field)fi, counter);

			fprintf(f, "ferry_%s%s{cluster=\"", info->name, suffix);
			status_label(f, c->cfg.name);
			fprintf(f, "\"} %llu\n", (unsigned long long)(counter ? v :
			    (uint64_t)status_gauge(v)));
		}
	}

	fputs("# HELP ferry_cluster_state Lifecycle state of the serving generation (1 = current)\n"
	    "# TYPE ferry_cluster_state gauge\n", f);
	for (i = 0; i < s->n_clusters; i++) {
		const struct sup_worker *w = status_serving(s->clusters[i]);
		enum lc_state cur = w ? w->lc.state : LC_INITIALIZING;

		for (st = 0; st < LC_STATE_COUNT; st++) {
			fputs("ferry_cluster_state{cluster=\"", f);
			status_label(f, s->clusters[i]->cfg.name);
			fprintf(f, "\",state=\"%s\"} %d\n", lc_state_str((enum lc_state)st),
			    (enum lc_state)st == cur);
		}
	}

	fputs("# HELP ferry_worker_restarts_total Worker restarts after a crash\n"
	    "# TYPE ferry_worker_restarts_total counter\n", f);
	for (i = 0; i < s->n_clusters; i++) {
		fputs("ferry_worker_restarts_total{cluster=\"", f);
		status_label(f, s->clusters[i]->cfg.name);
		fprintf(f, "\"} %u\n", s->clusters[i]->restarts);
	}

	fputs("# HELP ferry_crash_loops_total Times a cluster was marked failed for a crash loop\n"
	    "# TYPE ferry_crash_loops_total counter\n", f);
	for (i = 0; i < s->n_clusters; i++) {
		fputs("ferry_crash_loops_total{cluster=\"", f);
		status_label(f, s->clusters[i]->cfg.name);
		fprintf(f, "\"} %llu\n", (unsigned long long)s->clusters[i]->crash.loops);
	}

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
		if (s->clusters[i]->removing)
			continue;
		total++;
		const struct sup_worker *w = status_serving(s->clusters[i]);
		if (w == NULL)
			none++;
		else
			counts[w->lc.state]++;
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
