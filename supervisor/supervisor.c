/*
 * supervisor — the model's rules and names (see supervisor.h): which
 * generation serves a cluster, what state a cluster shows, when ferryd is
 * ready, and the names of the model's enums. Pure functions over the model;
 * the engine (engine*.c, reload.c), the renderers (status.c) and the admin
 * API all ask here, and nothing here calls any of them.
 */
#include "supervisor/supervisor.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- names ----------------------------------------------------------------- */

void
sup_hash_hex(const void *data, size_t len, char *out, size_t outlen)
{
	unsigned char h[crypto_hash_sha256_BYTES];
	crypto_hash_sha256(h, data, len);
	char hex[2 * crypto_hash_sha256_BYTES + 1];
	sodium_bin2hex(hex, sizeof hex, h, sizeof h);
	snprintf(out, outlen, "sha256:%s", hex);
}

const char *
sup_result_str(enum sup_result r)
{
	switch (r) {
	case SUP_OK: return "ok";
	case SUP_DEFERRED: return "deferred";
	case SUP_NOT_FOUND: return "not-found";
	case SUP_CONFLICT: return "conflict";
	case SUP_UNAVAILABLE: return "unavailable";
	case SUP_FAILED: return "failed";
	case SUP_INVALID: return "invalid";
	}
	return "unknown";
}

const char *
sup_reload_status_str(enum sup_reload_status st)
{
	switch (st) {
	case SUP_RELOAD_SUCCESS: return "SUCCESS";
	case SUP_RELOAD_FAILED: return "FAILED";
	case SUP_RELOAD_REJECTED: return "REJECTED";
	case SUP_RELOAD_UNCHANGED: return "UNCHANGED";
	case SUP_RELOAD_NONE: break;
	}
	return "NONE";
}

const char *
sup_upgrade_status_str(enum sup_upgrade_status st)
{
	switch (st) {
	case SUP_UPGRADE_SUCCESS: return "SUCCESS";
	case SUP_UPGRADE_FAILED: return "FAILED";
	case SUP_UPGRADE_REJECTED: return "REJECTED";
	case SUP_UPGRADE_NONE: break;
	}
	return "NONE";
}

void
sup_strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

char **
sup_strv_add(char **v, const char *s)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	char *d = strdup(s);
	char **nv = d ? realloc(v, (n + 2) * sizeof *nv) : NULL;
	if (!nv) {
		free(d);
		return v;  /* out of memory: the record lacks one line, nothing worse */
	}
	nv[n] = d;
	nv[n + 1] = NULL;
	return nv;
}

void
sup_upgrade_record_clear(struct sup_upgrade_record *rec)
{
	sup_strv_free(rec->errors);
	memset(rec, 0, sizeof *rec);
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

/* ---- rules ----------------------------------------------------------------- */

bool
sup_gen_alive(const struct sup_gen *g)
{
	for (size_t i = 0; i < g->n_procs; i++)
		if (g->procs[i].alive)
			return true;
	return false;
}

bool
sup_cluster_alive(const struct sup_cluster *c)
{
	for (const struct sup_gen *g = c->gens; g; g = g->next)
		if (sup_gen_alive(g))
			return true;
	return false;
}

struct sup_gen *
sup_cluster_current(struct sup_cluster *c)
{
	for (struct sup_gen *g = c->gens; g; g = g->next)
		if (g->owner == SUP_OWNER_CLUSTER)
			return g;
	return NULL;
}

struct sup_gen *
sup_cluster_serving(const struct sup_cluster *c)
{
	struct sup_gen *g;

	for (g = c->gens; g != NULL; g = g->next)
		if (g->lc.state == LC_ACCEPTING || g->lc.state == LC_DRAINING)
			return g;
	/* else the newest, not counting generations a reload rolled back */
	for (g = c->gens; g != NULL; g = g->next)
		if (g->owner != SUP_OWNER_NONE)
			return g;
	return c->gens;
}

/* The state a cluster shows: its serving generation's, except that a
 * cluster the supervisor gave up on (crash loop, cannot start) is failed. */
enum lc_state
sup_cluster_state(const struct sup_cluster *c)
{
	const struct sup_gen *g = sup_cluster_serving(c);

	if (c->st == FSM_C_FAILED && (g == NULL || g->lc.state != LC_ACCEPTING))
		return LC_FAILED;
	return g ? g->lc.state : LC_INITIALIZING;
}

/* What a listed cluster counts for in readiness: clusters drained on
 * purpose by an operator, or leaving, do not make ferryd unready. */
static enum sup_ready_class
sup_ready_class(const struct sup_cluster *c)
{
	if (c->st == FSM_C_PARKED || c->st == FSM_C_LEAVING || c->st == FSM_C_GONE)
		return SUP_READY_NONE;
	const struct sup_gen *g = sup_cluster_serving(c);
	enum lc_state st = sup_cluster_state(c);
	if (st == LC_INITIALIZING || c->st == FSM_C_BACKOFF)
		return SUP_READY_INIT;
	if (st == LC_ACCEPTING && g != NULL && !g->unresponsive)
		return SUP_READY_ACCEPTING;
	return SUP_READY_OTHER;
}

/*
 * fail-fast: every cluster's serving generation is accepting and answers
 * its watchdog.
 * best-effort: at least one is and none is still initializing (a failed
 * cluster does not hold readiness back once the others are up).
 * A supervisor that is stopping is not ready; one without clusters is.
 */
static bool
sup_ready_of(const struct sup *s, const size_t *count)
{
	size_t counted = count[SUP_READY_OTHER] + count[SUP_READY_INIT] +
	    count[SUP_READY_ACCEPTING];
	if (s->stopping)
		return false;
	if (counted == 0)
		return true;
	if (s->cfg.startup_policy == CFG_STARTUP_BEST_EFFORT)
		return count[SUP_READY_ACCEPTING] > 0 && count[SUP_READY_INIT] == 0;
	return count[SUP_READY_ACCEPTING] == counted;
}

bool
sup_ready(const struct sup *s)
{
	size_t count[4] = { 0 };
	for (size_t i = 0; i < s->n_clusters; i++)
		count[sup_ready_class(s->clusters[i])]++;
	return sup_ready_of(s, count);
}

bool
sup_ready_cached(const struct sup *s)
{
	return sup_ready_of(s, s->ready_count);
}

void
sup_ready_touch(struct sup *s, struct sup_cluster *c)
{
	/* only listed clusters count (limbo holds additions not committed
	 * and removals still draining) */
	enum sup_ready_class k = c->listed ? sup_ready_class(c) : SUP_READY_NONE;
	if (k == c->ready_class)
		return;
	if (c->ready_class != SUP_READY_NONE)
		s->ready_count[c->ready_class]--;
	if (k != SUP_READY_NONE)
		s->ready_count[k]++;
	c->ready_class = (uint8_t)k;
}

uint32_t
sup_max_connections(const struct sup *s, const struct cfg_cluster *cl)
{
	if (cl->max_connections)
		return cl->max_connections;
	return cfg_max_connections_auto(s->fd_limit, cl->n_brokers);
}

uint64_t
sup_start_pace_ms(const struct sup *s)
{
	uint64_t workers = 0;
	for (size_t i = 0; i < s->n_clusters; i++) {
		const struct sup_gen *g = sup_cluster_serving(s->clusters[i]);
		workers += g ? g->n_procs : 1;
	}
	return workers * SUP_START_PACE_MS;
}

uint64_t
sup_reload_timeout_ms(const struct sup *s)
{
	return s->cfg.init_timeout_ms + SUP_STOP_GRACE_MS + sup_start_pace_ms(s);
}

struct sup_cluster *
sup_find_cluster(struct sup *s, const char *name)
{
	for (size_t i = 0; i < s->n_clusters; i++)
		if (strcmp(s->clusters[i]->name, name) == 0)
			return s->clusters[i];
	return NULL;
}
