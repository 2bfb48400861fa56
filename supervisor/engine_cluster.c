/*
 * engine_cluster — the engine's clusters: their configurations and
 * listening sockets, the listed and limbo arrays, the cluster machine's
 * actions (fsm.h), the operator's requests (drain, restart) and the
 * rotation of the TLS clusters' session-ticket keys. Part of the engine
 * (engine_priv.h); pure like engine.c.
 */
#include "supervisor/engine_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/tlsctx.h"
#include "common/tlsmat.h"
#include "supervisor/tickets.h"

/* ---- listeners and cluster configurations ------------------------------------ */

struct sup_ccfg *
sup_ccfg_new(const struct sup *s, const struct cfg_cluster *cl, char *err, size_t errlen)
{
	struct sup_ccfg *cc = calloc(1, sizeof *cc);
	if (!cc) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	/* a worker is sent a number for max_connections = auto (a shallow
	 * copy, only read) */
	struct cfg_cluster sent = *cl;
	sent.max_connections = sup_max_connections(s, cl);
	cc->canonical = cfg_cluster_canonical(&sent);
	struct cfg_errors errs;
	struct cfg parsed;
	cfg_errors_init(&errs);
	memset(&parsed, 0, sizeof parsed);
	if (!cc->canonical ||
	    cfg_parse_string("<canonical>", cc->canonical, strlen(cc->canonical), &parsed,
	    &errs) == -1 || parsed.n_clusters != 1 ||
	    plan_cluster_version(cl, cc->version, sizeof cc->version) == -1) {
		snprintf(err, errlen, "canonical config does not parse: %s",
		    errs.n ? errs.msg[0] : "out of memory");
		cfg_errors_free(&errs);
		cfg_free(&parsed);
		free(cc->canonical);
		free(cc);
		return NULL;
	}
	cfg_errors_free(&errs);
	/* the cluster alone is kept, not the [ferry] defaults around it */
	cfg_cluster_take(&parsed, 0, &cc->own);
	cfg_free(&parsed);
	cc->cl = &cc->own;
	/* The TLS files read (and checked) with this configuration: what its
	 * version covers and what every worker of it gets, also after a crash
	 * restart. */
	if (cl->files && !(cc->own.files = tlsmat_dup(cl->files))) {
		snprintf(err, errlen, "out of memory");
		cfg_cluster_free(&cc->own);
		free(cc->canonical);
		free(cc);
		return NULL;
	}
	if (cc->cl->tls && cc->cl->files) {
		struct tlsctx_pem cert = { cc->cl->files->data[CFG_TLS_F_CERT],
			cc->cl->files->len[CFG_TLS_F_CERT] };
		time_t na = 0;
		char e[128];
		if (tlsctx_cert_not_after(cert, &na, e, sizeof e) == 0)
			cc->tls_not_after = (int64_t)na;
		tlsctx_cert_subject(cert, cc->tls_subject, sizeof cc->tls_subject);
	}
	cc->n_listeners = 1 + cc->cl->n_brokers;
	cc->listeners = calloc(cc->n_listeners, sizeof *cc->listeners);
	if (!cc->listeners) {
		snprintf(err, errlen, "out of memory");
		cfg_cluster_free(&cc->own);
		free(cc->canonical);
		free(cc);
		return NULL;
	}
	for (size_t i = 0; i < cc->n_listeners; i++) {
		struct sup_listener *l = &cc->listeners[i];
		l->fd = -1;
		l->addr = cc->cl->bootstrap;
		if (i == 0) {
			l->role = SUP_LISTENER_BOOTSTRAP;
			l->node_id = -1;
		} else {
			l->role = SUP_LISTENER_BROKER;
			l->node_id = cc->cl->node_ids[i - 1];
			l->addr.port = (uint16_t)(cc->cl->broker_port_first + (i - 1));
		}
	}
	return cc;
}

struct sup_listen_ref {
	uint16_t port;
	const char *host;
	int fd;
};

static int
sup_listen_ref_cmp(const void *x, const void *y)
{
	const struct sup_listen_ref *a = x, *b = y;
	if (a->port != b->port)
		return a->port < b->port ? -1 : 1;
	return strcmp(a->host, b->host);
}

int
sup_listen_index_build(struct sup *s, struct sup_listen_index *ix)
{
	size_t n = 0;
	ix->v = NULL;
	ix->n = 0;
	for (size_t i = 0; i < s->n_clusters; i++)
		n += s->clusters[i]->ccfg->n_listeners;
	if ((ix->v = calloc(n + 1, sizeof *ix->v)) == NULL)
		return -1;
	for (size_t i = 0; i < s->n_clusters; i++) {
		const struct sup_ccfg *cc = s->clusters[i]->ccfg;
		for (size_t k = 0; k < cc->n_listeners; k++)
			if (cc->listeners[k].fd >= 0)
				ix->v[ix->n++] = (struct sup_listen_ref){ cc->listeners[k].addr.port,
					cc->listeners[k].addr.host, cc->listeners[k].fd };
	}
	qsort(ix->v, ix->n, sizeof *ix->v, sup_listen_ref_cmp);
	return 0;
}

void
sup_listen_index_free(struct sup_listen_index *ix)
{
	free(ix->v);
	ix->v = NULL;
	ix->n = 0;
}

int
sup_ccfg_listen(struct sup *s, struct sup_ccfg *cc, const struct sup_listen_index *reuse,
		char *err, size_t errlen)
{
	for (size_t i = 0; i < cc->n_listeners; i++) {
		struct sup_listener *l = &cc->listeners[i];
		if (l->fd >= 0)
			continue;
		/* The same address in a configuration that is serving: share the
		 * socket object, never bind it twice. */
		struct sup_listen_ref key = { l->addr.port, l->addr.host, -1 };
		const struct sup_listen_ref *o = reuse && reuse->n ? bsearch(&key, reuse->v,
		    reuse->n, sizeof *reuse->v, sup_listen_ref_cmp) : NULL;
		if (o) {
			l->fd = s->ops->dup(s, o->fd);
			if (l->fd == -1) {
				snprintf(err, errlen, "dup listener: %s", strerror(errno));
				return -1;
			}
			continue;
		}
		l->fd = s->ops->bind(s, &l->addr, err, errlen);
		if (l->fd == -1)
			return -1;
	}
	return 0;
}

void
sup_ccfg_release(struct sup *s, struct sup_ccfg *cc)
{
	if (!cc)
		return;
	for (size_t i = 0; i < cc->n_listeners; i++) {
		if (cc->listeners[i].fd >= 0)
			s->ops->close(s, cc->listeners[i].fd);
		cc->listeners[i].fd = -1;
	}
}

void
sup_ccfg_free(struct sup *s, struct sup_ccfg *cc)
{
	if (!cc)
		return;
	sup_ccfg_release(s, cc);
	free(cc->listeners);
	free(cc->canonical);
	cfg_cluster_free(&cc->own);
	free(cc);
}

void
sup_cluster_set_ccfg(struct sup_cluster *c, struct sup_ccfg *cc)
{
	c->ccfg = cc;
	snprintf(c->name, sizeof c->name, "%s", cc->cl->name);
	snprintf(c->config_version, sizeof c->config_version, "%s", cc->version);
	c->listeners = cc->listeners;
	c->n_listeners = cc->n_listeners;
}

/* ---- clusters ------------------------------------------------------------------ */

static int
sup_array_add(struct sup_cluster ***arr, size_t *n, struct sup_cluster *c)
{
	struct sup_cluster **a = realloc(*arr, (*n + 1) * sizeof *a);
	if (!a)
		return -1;
	a[(*n)++] = c;
	*arr = a;
	return 0;
}

static void
sup_array_del(struct sup_cluster **arr, size_t *n, struct sup_cluster *c)
{
	for (size_t i = 0; i < *n; i++)
		if (arr[i] == c) {
			memmove(&arr[i], &arr[i + 1], (*n - i - 1) * sizeof *arr);
			(*n)--;
			return;
		}
}

struct sup_cluster *
sup_cluster_new(struct sup *s, struct sup_ccfg *cc, bool listed)
{
	if (sup_deadline_reserve(s, s->n_clusters + s->n_limbo + 1) == -1)
		return NULL;
	struct sup_cluster *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->sup = s;
	c->dl_index = SIZE_MAX;
	c->st = FSM_C_ACTIVE;
	struct crash_policy cp = { s->cfg.crash_loop_limit, s->cfg.crash_loop_window_ms };
	if (crash_init(&c->crash, &cp) == -1) {
		free(c);
		return NULL;
	}
	sup_cluster_set_ccfg(c, cc);
	if (sup_array_add(listed ? &s->clusters : &s->limbo, listed ? &s->n_clusters : &s->n_limbo,
	    c) == -1) {
		crash_free(&c->crash);
		free(c);
		return NULL;
	}
	c->listed = listed;
	sup_ready_touch(s, c);
	sup_deadline_touch(c);
	return c;
}

void
sup_cluster_unlist(struct sup *s, struct sup_cluster *c)
{
	if (!c->listed)
		return;
	/* limbo first: on OOM it stays listed (shown as leaving), never lost */
	if (sup_array_add(&s->limbo, &s->n_limbo, c) == -1)
		return;
	sup_array_del(s->clusters, &s->n_clusters, c);
	c->listed = false;
	sup_ready_touch(s, c);
}

void
sup_cluster_list(struct sup *s, struct sup_cluster *c)
{
	if (c->listed)
		return;
	if (sup_array_add(&s->clusters, &s->n_clusters, c) == -1)
		return;
	sup_array_del(s->limbo, &s->n_limbo, c);
	c->listed = true;
	sup_ready_touch(s, c);
}

/* ---- cluster machine --------------------------------------------------------------- */

void
sup_cluster_event(struct sup *s, struct sup_cluster *c, enum fsm_cevent e, const char *why)
{
	struct fsm_cstep st = fsm_cluster_step(c->st, e);
	if (!st.allowed) {
		s->violations++;
		log_error("forbidden cluster event (bug)", "cluster=%s state=%s event=%s", c->name,
		    fsm_cstate_str(c->st), fsm_cevent_str(e));
		return;
	}
	if (c->st != st.next)
		log_info("cluster state", "cluster=%s transition=\"%s -> %s\" reason=\"%s\"", c->name,
		    fsm_cstate_str(c->st), fsm_cstate_str(st.next), why);
	c->st = st.next;
	if (st.next == FSM_C_FAILED)
		snprintf(c->fail_reason, sizeof c->fail_reason, "%s", why);
	unsigned a = st.actions;
	if (a & FSM_CA_DISARM_RESTART)
		c->restart_at = 0;
	if (a & FSM_CA_ARM_RESTART)
		c->restart_at = s->now_ms + (c->restart_delay_ms ? c->restart_delay_ms : 1);
	if (a & FSM_CA_RESET_CRASH)
		crash_reset(&c->crash);
	if (a & FSM_CA_DRAIN_ALL)
		for (struct sup_gen *g = c->gens; g; g = g->next)
			if (!fsm_gen_terminal(g->st))
				sup_post_gen(s, g, FSM_GE_DRAIN, why);
	if (a & FSM_CA_RELEASE) {
		sup_ccfg_release(s, c->ccfg);
		log_info("cluster sockets released", "cluster=%s reason=\"%s\"", c->name, why);
	}
	if (a & FSM_CA_START_GEN)
		sup_gen_start(s, c, c->ccfg, SUP_OWNER_CLUSTER, NULL, s->cfg.init_timeout_ms, why);
	sup_ready_touch(s, c);
	sup_deadline_touch(c);
	/* REAP is the reaper's business (c->st == GONE). */
	sup_reap_mark(s, c);
}

static void
sup_answer_restart(struct sup *s, struct sup_cluster *c, struct sup_gen *g, bool ok,
		   const char *why)
{
	if (!c->restart_waiter || c->restart_gen != g->generation)
		return;
	struct sup_answer ans = { .result = ok ? SUP_OK : SUP_FAILED, .generation = g->generation,
				  .state = g->lc.state };
	snprintf(ans.name, sizeof ans.name, "%s", c->name);
	snprintf(ans.error, sizeof ans.error, "%s", ok ? "" : why);
	uint64_t w = c->restart_waiter;
	c->restart_waiter = 0;
	if (s->ops->answer_op)
		s->ops->answer_op(s, w, &ans);
}

/* A generation the cluster started now accepts: older ones hand over. */
void
sup_cluster_gen_accepting(struct sup *s, struct sup_gen *g)
{
	struct sup_cluster *c = g->cluster;
	/* A generation a reload holds is the reload's to decide on (a crash
	 * restart may accept while a reload prepares the same cluster). */
	for (struct sup_gen *o = g->next; o; o = o->next) {
		if (fsm_gen_terminal(o->st) || o->st == FSM_G_DRAINING ||
		    o->owner == SUP_OWNER_RELOAD)
			continue;
		/* Its connections move to the new generation when the upstream
		 * they are connected to stays valid (handover = on); otherwise
		 * they close at request boundaries spread over drain_spread. */
		o->replaced = true;
		o->replaced_at_ms = s->now_ms;
		o->handover_keep = c->ccfg->cl->handover &&
		    strcmp(o->upstream_key, g->upstream_key) == 0;
		sup_post_gen(s, o, FSM_GE_HANDOVER, "replaced by a newer generation");
	}
	sup_answer_restart(s, c, g, true, "");
}

void
sup_cluster_gen_ended(struct sup *s, struct sup_gen *g, bool crashed, const char *why)
{
	struct sup_cluster *c = g->cluster;
	sup_answer_restart(s, c, g, false, why);
	if (c->st != FSM_C_ACTIVE || s->stopping || sup_cluster_current(c) != g)
		return;  /* an older generation, or the cluster is leaving */
	if (!crashed) {
		bool other = false;
		for (struct sup_gen *o = g->next; o; o = o->next)
			if (o->st == FSM_G_ACCEPTING)
				other = true;
		sup_post_cluster(s, c, other ? FSM_CE_ROLL_FAILED : FSM_CE_START_FAILED, why);
		return;
	}
	/* A crash of the serving (or starting) generation: restart with
	 * back-off, or give up on a crash loop. An upgrade preparing meanwhile
	 * rolls back first. */
	upgrade_cluster_crashed(s, c, why);
	uint64_t delay = 0;
	uint32_t n = 0;
	if (sup_crash_policy(s, c, why, &delay, &n))
		return;
	c->restarts++;
	c->restart_delay_ms = delay;
	log_info("restarting worker", "cluster=%s delay_ms=%llu crashes_in_window=%u", c->name,
	    (unsigned long long)delay, n);
	sup_post_cluster(s, c, FSM_CE_CRASH_RESTART, why);
}

/* ---- operator requests --------------------------------------------------------------- */

static struct sup_cluster *
sup_op_lookup(struct sup *s, const char *name, struct sup_answer *a)
{
	memset(a, 0, sizeof *a);
	snprintf(a->name, sizeof a->name, "%s", name);
	struct sup_cluster *c = sup_find_cluster(s, name);
	if (!c || c->st == FSM_C_LEAVING || c->st == FSM_C_GONE) {
		a->result = SUP_NOT_FOUND;
		snprintf(a->error, sizeof a->error, "no cluster named '%s'", name);
		return NULL;
	}
	if (s->reload) {
		a->result = SUP_CONFLICT;
		snprintf(a->error, sizeof a->error, "a reload is in progress");
		return NULL;
	}
	if (upgrade_busy(s)) {
		a->result = SUP_CONFLICT;
		snprintf(a->error, sizeof a->error, "an upgrade of ferryd is in progress");
		return NULL;
	}
	if (s->stopping) {
		a->result = SUP_UNAVAILABLE;
		snprintf(a->error, sizeof a->error, "ferryd is stopping");
		return NULL;
	}
	return c;
}

enum sup_result
sup_cluster_drain(struct sup *s, const char *name, struct sup_answer *a)
{
	struct sup_cluster *c = sup_op_lookup(s, name, a);
	if (!c)
		return a->result;
	struct sup_gen *serving = sup_cluster_serving(c);
	if (!fsm_cluster_step(c->st, FSM_CE_OP_DRAIN).allowed || !serving ||
	    serving->st != FSM_G_ACCEPTING) {
		a->result = SUP_CONFLICT;
		snprintf(a->error, sizeof a->error, "cluster '%s' is %s, not accepting", name,
		    serving ? lc_state_str(serving->lc.state) : "not running");
		return a->result;
	}
	sup_post_cluster(s, c, FSM_CE_OP_DRAIN, "drained by operator");
	sup_dispatch(s);
	log_info("cluster drained by operator", "cluster=%s gen=%llu", name,
	    (unsigned long long)serving->generation);
	a->result = SUP_OK;
	a->generation = serving->generation;
	a->state = serving->lc.state;
	return SUP_OK;
}

enum sup_result
sup_cluster_restart(struct sup *s, const char *name, uint64_t waiter, struct sup_answer *a)
{
	struct sup_cluster *c = sup_op_lookup(s, name, a);
	if (!c)
		return a->result;
	if (c->restart_waiter) {
		a->result = SUP_CONFLICT;
		snprintf(a->error, sizeof a->error, "a restart of '%s' is in progress", name);
		return a->result;
	}
	for (struct sup_gen *g = c->gens; g; g = g->next)
		if (g->st == FSM_G_STARTING || g->st == FSM_G_HELD) {
			a->result = SUP_CONFLICT;
			snprintf(a->error, sizeof a->error, "cluster '%s' is already starting "
			    "(generation %llu)", name, (unsigned long long)g->generation);
			return a->result;
		}
	/* Sockets released by a drain, a failure or a failed bind: bind them
	 * again (the ones still open stay). */
	char err[256];
	if (sup_ccfg_listen(s, c->ccfg, NULL, err, sizeof err) == -1) {
		if (c->st != FSM_C_ACTIVE)
			sup_ccfg_release(s, c->ccfg);
		a->result = SUP_FAILED;
		snprintf(a->error, sizeof a->error, "%s", err);
		return a->result;
	}
	struct sup_gen *serving = sup_cluster_serving(c);
	bool roll = serving && serving->st == FSM_G_ACCEPTING;
	sup_post_cluster(s, c, FSM_CE_OP_RESTART, roll ? "restart (rolling)" : "restart");
	sup_dispatch(s);
	struct sup_gen *g = sup_cluster_current(c);
	if (!g) {
		a->result = SUP_FAILED;
		snprintf(a->error, sizeof a->error, "out of memory");
		return a->result;
	}
	log_info("cluster restart by operator", "cluster=%s gen=%llu rolling=%s", name,
	    (unsigned long long)g->generation, roll ? "true" : "false");
	a->generation = g->generation;
	a->state = g->lc.state;
	if (fsm_gen_terminal(g->st)) {
		a->result = SUP_FAILED;
		snprintf(a->error, sizeof a->error, "%s", g->lc.reason);
		return a->result;
	}
	if (g->st == FSM_G_ACCEPTING || !waiter) {
		a->result = SUP_OK;
		return SUP_OK;
	}
	c->restart_waiter = waiter;
	c->restart_gen = g->generation;
	a->result = SUP_DEFERRED;
	return SUP_DEFERRED;
}

/* ---- session-ticket key rotation (tickets.h) ------------------------------------- */

static void
sup_tickets_rotate_cluster(struct sup *s, struct sup_cluster *c)
{
	if (!c->tickets)
		return;
	if (!c->ccfg || !c->ccfg->cl || !c->ccfg->cl->tls) {
		/* a reload turned TLS off: its workers need no keys any more */
		tickets_free(c);
		log_info("session-ticket keys wiped: the cluster has no TLS now", "cluster=%s",
		    c->name);
		return;
	}
	tickets_rotate(c->tickets);
	size_t workers = sup_cluster_send(s, c, IPC_TICKET_KEYS, c->tickets, sizeof *c->tickets);
	log_info("session-ticket keys rotated", "cluster=%s serial=%llu keys=%u workers=%zu",
	    c->name, (unsigned long long)c->tickets->serial, c->tickets->n, workers);
}

void
sup_tickets_rotate(struct sup *s)
{
	/* not while an upgrade carries the keys over (the successor's timer
	 * goes on from the predecessor's), nor in a predecessor that handed
	 * over (its old workers' tickets must stay the successor's) */
	if (upgrade_frozen(s) || (upgrade_busy(s) && !sup_upgrade_is_successor(s)))
		return;
	for (size_t i = 0; i < s->n_clusters; i++)
		sup_tickets_rotate_cluster(s, s->clusters[i]);
	for (size_t i = 0; i < s->n_limbo; i++)
		sup_tickets_rotate_cluster(s, s->limbo[i]);
}
