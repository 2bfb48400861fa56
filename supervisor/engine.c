/*
 * engine — the supervisor's decisions: clusters, generations, deadlines, the
 * event queue and the reaper; see supervisor.h. Pure: every effect on the
 * world goes through s->ops, every clock reading is s->now_ms /
 * s->now_wall_ms (set by the caller), so unit tests drive it with fakes.
 *
 * One rule keeps lifetimes simple: an entry point queues events and runs
 * sup_dispatch(); actions never call back into an event handler, they
 * queue more events; objects are only marked, and sup_reap() frees them
 * after the chain.
 */
#include "supervisor/engine_priv.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/log.h"
#include "common/sandbox.h"
#include "common/tlsctx.h"
#include "common/tlsmat.h"
#include "common/units.h"
#include "supervisor/nodes.h"
#include "supervisor/tickets.h"

/* ---- small helpers --------------------------------------------------------- */

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

/* ---- event queue ------------------------------------------------------------- */

static void
sup_post(struct sup *s, enum sup_ev_kind kind, void *target, struct sup_proc *proc, int ev,
	 const char *why)
{
	if (s->evq_len == s->evq_cap) {
		size_t cap = s->evq_cap ? s->evq_cap * 2 : 64;
		struct sup_event *q = malloc(cap * sizeof *q);
		if (!q) {
			/* Out of memory with an event that must not be lost:
			 * the one thing left that is safe is to stop
			 * everything (the workers notice EOF and drain). */
			log_error("out of memory queueing an event; exiting", "%s", "");
			sup_kill_all(s);
			_exit(70);
		}
		for (size_t i = 0; i < s->evq_len; i++)
			q[i] = s->evq[(s->evq_head + i) % s->evq_cap];
		free(s->evq);
		s->evq = q;
		s->evq_cap = cap;
		s->evq_head = 0;
	}
	struct sup_event *e = &s->evq[(s->evq_head + s->evq_len) % s->evq_cap];
	s->evq_len++;
	e->kind = kind;
	e->target = target;
	e->proc = proc;
	e->ev = ev;
	snprintf(e->why, sizeof e->why, "%s", why ? why : "");
}

void
sup_post_gen(struct sup *s, struct sup_gen *g, enum fsm_gevent e, const char *why)
{
	sup_post(s, SUP_EV_GEN, g, NULL, (int)e, why);
}

void
sup_post_proc(struct sup *s, struct sup_proc *p, enum fsm_gevent e, const char *why)
{
	sup_post(s, SUP_EV_GEN, p->gen, p, (int)e, why);
}

void
sup_post_cluster(struct sup *s, struct sup_cluster *c, enum fsm_cevent e, const char *why)
{
	sup_post(s, SUP_EV_CLUSTER, c, NULL, (int)e, why);
}

void
sup_post_item(struct sup *s, struct sup_reload_item *it, enum fsm_ievent e, const char *why)
{
	sup_post(s, SUP_EV_ITEM, it, NULL, (int)e, why);
}

/* ---- listeners and cluster configurations ------------------------------------ */

struct sup_ccfg *
sup_ccfg_new(const struct cfg_cluster *cl, char *err, size_t errlen)
{
	struct sup_ccfg *cc = calloc(1, sizeof *cc);
	if (!cc) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	cc->canonical = cfg_cluster_canonical(cl);
	struct cfg_errors errs;
	cfg_errors_init(&errs);
	if (!cc->canonical ||
	    cfg_parse_string("<canonical>", cc->canonical, strlen(cc->canonical), &cc->own,
	    &errs) == -1 || cc->own.n_clusters != 1 ||
	    plan_cluster_version(cl, cc->version, sizeof cc->version) == -1) {
		snprintf(err, errlen, "canonical config does not parse: %s",
		    errs.n ? errs.msg[0] : "out of memory");
		cfg_errors_free(&errs);
		cfg_free(&cc->own);
		free(cc->canonical);
		free(cc);
		return NULL;
	}
	cfg_errors_free(&errs);
	cc->cl = &cc->own.clusters[0];
	/* The TLS files read (and checked) with this configuration: what its
	 * version covers and what every worker of it gets, also after a crash
	 * restart. */
	if (cl->files && !(cc->own.clusters[0].files = tlsmat_dup(cl->files))) {
		snprintf(err, errlen, "out of memory");
		cfg_free(&cc->own);
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
		cfg_free(&cc->own);
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

int
sup_ccfg_listen(struct sup *s, struct sup_ccfg *cc, struct sup_ccfg *const *reuse,
		size_t n_reuse, char *err, size_t errlen)
{
	for (size_t i = 0; i < cc->n_listeners; i++) {
		struct sup_listener *l = &cc->listeners[i];
		if (l->fd >= 0)
			continue;
		/* The same address in a configuration that is serving: share the
		 * socket object, never bind it twice. */
		for (size_t r = 0; r < n_reuse && l->fd < 0; r++) {
			if (!reuse[r])
				continue;
			for (size_t k = 0; k < reuse[r]->n_listeners; k++) {
				const struct sup_listener *o = &reuse[r]->listeners[k];
				if (o->fd >= 0 && o->addr.port == l->addr.port &&
				    strcmp(o->addr.host, l->addr.host) == 0) {
					l->fd = s->ops->dup(s, o->fd);
					if (l->fd == -1) {
						snprintf(err, errlen, "dup listener: %s", strerror(errno));
						return -1;
					}
					break;
				}
			}
		}
		if (l->fd < 0) {
			l->fd = s->ops->bind(s, &l->addr, err, errlen);
			if (l->fd == -1)
				return -1;
		}
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
	cfg_free(&cc->own);
	free(cc);
}

void
sup_cluster_set_ccfg(struct sup_cluster *c, struct sup_ccfg *cc)
{
	c->ccfg = cc;
	c->cfg = *cc->cl;
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
	struct sup_cluster *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->sup = s;
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
}

struct sup_cluster *
sup_find_cluster(struct sup *s, const char *name)
{
	for (size_t i = 0; i < s->n_clusters; i++)
		if (strcmp(s->clusters[i]->name, name) == 0)
			return s->clusters[i];
	return NULL;
}

/* ---- generations ---------------------------------------------------------------- */

static uint64_t
sup_watchdog_period(const struct sup *s)
{
	uint64_t p = s->cfg.worker_watchdog_ms / 4;
	return p < 25 ? 25 : p;
}

/* workers = N, or auto: the CPUs ferryd may run on. */
static size_t
sup_workers_of(const struct cfg_cluster *cl)
{
	size_t n = cl->workers;
	if (n == 0) {
		cpu_set_t set;
		n = sched_getaffinity(0, sizeof set, &set) == 0 ? (size_t)CPU_COUNT(&set) : 1;
	}
	if (n < 1)
		n = 1;
	return n > SUP_MAX_PROCS ? SUP_MAX_PROCS : n;
}

static void sup_relays_proc_gone(struct sup *s, struct sup_proc *p);
static void sup_relays_tick(struct sup *s);

static void
sup_gen_fail_now(struct sup *s, struct sup_gen *g, const char *why)
{
	/* Could not start: a FAILED report and an exit, as if it had said so. */
	sup_post_gen(s, g, FSM_GE_FAILED, why);
	if (!sup_gen_alive(g))
		sup_post_gen(s, g, FSM_GE_EXITED, why);
}

/* Start process p of its generation with cc (a first start, or the
 * replacement of a crashed sibling in the same slot). 0, or -1 with the
 * reason in err. */
static int
sup_proc_spawn(struct sup *s, struct sup_proc *p, const struct sup_ccfg *cc, char *err,
	       size_t errlen)
{
	struct sup_cluster *c = p->gen->cluster;
	p->restart_at = 0;
	p->ready = p->late = p->dead = false;
	p->ping_seq = 0;
	p->pid = 0;
	p->last_answer_ms = s->now_ms;
	p->starts++;
	char perr[160];
	if (s->ops->spawn(s, p, cc, perr, sizeof perr) == -1) {
		snprintf(err, errlen, "cannot start worker: %s", perr);
		log_error("cannot start worker", "cluster=%s gen=%llu index=%u reason=\"%s\"", c->name,
		    (unsigned long long)p->gen->generation, p->index, perr);
		return -1;
	}
	p->alive = true;
	if (p->gen->owner == SUP_OWNER_CLUSTER)
		crash_started(&c->crash, s->now_ms);
	return 0;
}

/* A generation of c with cc, not started yet (its init deadline runs). */
static struct sup_gen *
sup_gen_new(struct sup *s, struct sup_cluster *c, const struct sup_ccfg *cc, enum sup_owner owner,
	    struct sup_reload_item *it, uint64_t init_timeout_ms, const char *why)
{
	struct sup_gen *g = calloc(1, sizeof *g);
	if (!g) {
		log_error("out of memory starting a generation", "cluster=%s", c->name);
		return NULL;
	}
	g->cluster = c;
	g->generation = ++c->next_generation;
	g->st = FSM_G_STARTING;
	g->owner = owner;
	g->item = it;
	plan_upstream_key(cc->cl, g->upstream_key, sizeof g->upstream_key);
	lc_init(&g->lc, s->now_wall_ms, why);
	g->n_procs = sup_workers_of(cc->cl);
	for (size_t i = 0; i < g->n_procs; i++) {
		g->procs[i].gen = g;
		g->procs[i].index = (unsigned)i;
	}
	g->init_at = s->now_ms + init_timeout_ms;
	g->next = c->gens;
	c->gens = g;
	return g;
}

struct sup_gen *
sup_gen_start(struct sup *s, struct sup_cluster *c, const struct sup_ccfg *cc,
	      enum sup_owner owner, struct sup_reload_item *it, uint64_t init_timeout_ms,
	      const char *why)
{
	struct sup_gen *g = sup_gen_new(s, c, cc, owner, it, init_timeout_ms, why);
	if (!g)
		return NULL;
	char err[256];
	for (size_t i = 0; i < cc->n_listeners; i++) {
		if (cc->listeners[i].fd < 0) {
			snprintf(err, sizeof err, "listener %.100s:%u is not bound",
			    cc->listeners[i].addr.host, cc->listeners[i].addr.port);
			log_error("cannot start worker", "cluster=%s gen=%llu reason=\"%s\"", c->name,
			    (unsigned long long)g->generation, err);
			sup_gen_fail_now(s, g, err);
			return g;
		}
	}
	for (size_t i = 0; i < g->n_procs; i++) {
		struct sup_proc *p = &g->procs[i];
		if (sup_proc_spawn(s, p, cc, err, sizeof err) == -1) {
			sup_gen_fail_now(s, g, err);
			return g;
		}
		log_info("worker started", "cluster=%s gen=%llu index=%u pid=%d why=\"%s\"%s", c->name,
		    (unsigned long long)g->generation, p->index, (int)p->pid, why,
		    owner == SUP_OWNER_RELOAD ? " held=true" : "");
	}
	return g;
}

void
sup_gen_send(struct sup *s, struct sup_gen *g, enum ipc_type type, const void *payload,
	     size_t len)
{
	for (size_t i = 0; i < g->n_procs; i++) {
		struct sup_proc *p = &g->procs[i];
		if (!p->alive)
			continue;
		if (s->ops->send(s, p, type, payload, len) == -1) {
			log_error("control channel to worker is full or gone", "cluster=%s gen=%llu "
			    "pid=%d type=%s", g->cluster->name, (unsigned long long)g->generation,
			    (int)p->pid, ipc_type_str(type));
			sup_post_gen(s, g, FSM_GE_QUEUE_FULL, "control channel full");
		}
	}
}

size_t
sup_cluster_send(struct sup *s, struct sup_cluster *c, enum ipc_type type, const void *payload,
		 size_t len)
{
	size_t n = 0;
	for (struct sup_gen *g = c->gens; g; g = g->next) {
		if (!sup_gen_alive(g))
			continue;
		for (size_t i = 0; i < g->n_procs; i++)
			n += g->procs[i].alive;
		sup_gen_send(s, g, type, payload, len);
	}
	sup_dispatch(s);
	return n;
}

static void
sup_gen_kill(struct sup *s, struct sup_gen *g)
{
	for (size_t i = 0; i < g->n_procs; i++)
		if (g->procs[i].alive)
			s->ops->kill(s, &g->procs[i], SIGKILL);
}

/* A worker of c crashed: the crash policy says after what delay it is
 * restarted, or (true) that c is in a crash loop: then c is failed. */
static bool
sup_crash_policy(struct sup *s, struct sup_cluster *c, const char *why, uint64_t *delay,
		 uint32_t *n)
{
	struct crash_policy cp = { s->cfg.crash_loop_limit, s->cfg.crash_loop_window_ms };
	if (crash_exited(&c->crash, &cp, s->now_ms, delay, n) != CRASH_GIVE_UP)
		return false;
	char reason[320];
	snprintf(reason, sizeof reason, "crash loop: %u crash%s within %llus, last %s", *n,
	    *n == 1 ? "" : "es", (unsigned long long)(cp.window_ms / 1000), why);
	log_error("cluster failed: crash loop", "cluster=%s crashes=%u hint=\"%s\"", c->name, *n,
	    "ferryctl restart NAME after fixing the cause");
	if (c->st == FSM_C_ACTIVE)
		sup_post_cluster(s, c, FSM_CE_CRASH_LOOP, reason);
	return true;
}

/* One of several processes crashed: the crash policy of the cluster says
 * when to replace it, or that the cluster is in a crash loop. */
static void
sup_proc_crashed(struct sup *s, struct sup_proc *p, const char *why)
{
	struct sup_cluster *c = p->gen->cluster;
	uint64_t delay = 0;
	uint32_t n = 0;
	if (sup_crash_policy(s, c, why, &delay, &n))
		return;
	c->restarts++;
	p->restart_at = s->now_ms + (delay ? delay : 1);
	log_info("restarting worker", "cluster=%s gen=%llu index=%u delay_ms=%llu "
	    "crashes_in_window=%u", c->name, (unsigned long long)p->gen->generation, p->index,
	    (unsigned long long)delay, n);
}

/* Start the replacement of process p of g (its slot was reaped). */
static void
sup_proc_respawn(struct sup *s, struct sup_proc *p)
{
	struct sup_gen *g = p->gen;
	char err[256];
	if (sup_proc_spawn(s, p, g->cluster->ccfg, err, sizeof err) == -1) {
		sup_post_proc(s, p, FSM_GE_PROC_EXITED, err);
		return;
	}
	log_info("worker started", "cluster=%s gen=%llu index=%u pid=%d why=\"replaces a crashed "
	    "worker\"", g->cluster->name, (unsigned long long)g->generation, p->index, (int)p->pid);
}

static void
sup_cluster_gen_ended(struct sup *s, struct sup_gen *g, bool crashed, const char *why);
static void
sup_cluster_gen_accepting(struct sup *s, struct sup_gen *g);

static void
sup_gen_event(struct sup *s, struct sup_gen *g, struct sup_proc *ep, enum fsm_gevent e,
	      const char *why)
{
	struct sup_cluster *c = g->cluster;
	struct fsm_gstep st = fsm_gen_step(g->st, e);
	if (!st.allowed) {
		s->violations++;
		log_error("forbidden generation event (bug)", "cluster=%s gen=%llu state=%s "
		    "event=%s", c->name, (unsigned long long)g->generation, fsm_gstate_str(g->st),
		    fsm_gevent_str(e));
		return;
	}
	enum fsm_gstate from = g->st;
	g->st = st.next;
	enum lc_state lfrom = g->lc.state, lto = fsm_gen_lc(st.next);
	if (lfrom != lto) {
		if (lc_set_state(&g->lc, lto, s->now_wall_ms, why) == -1) {
			s->violations++;
			log_error("forbidden lifecycle transition (bug)", "cluster=%s gen=%llu "
			    "from=%s to=%s", c->name, (unsigned long long)g->generation,
			    lc_state_str(lfrom), lc_state_str(lto));
		} else {
			log_info("worker state", "cluster=%s gen=%llu pid=%d transition=\"%s -> %s\" "
			    "reason=\"%s\"", c->name, (unsigned long long)g->generation,
			    (int)g->procs[0].pid, lc_state_str(lfrom), lc_state_str(lto), why);
		}
	} else if (from != st.next) {
		log_debug("generation state", "cluster=%s gen=%llu transition=\"%s -> %s\"",
		    c->name, (unsigned long long)g->generation, fsm_gstate_str(from),
		    fsm_gstate_str(st.next));
	}

	unsigned a = st.actions;
	if (a & FSM_GA_DISARM_INIT)
		g->init_at = 0;
	if (a & FSM_GA_SEND_ACCEPT) {
		g->accepted = true;
		sup_gen_send(s, g, IPC_ACCEPT, NULL, 0);
	}
	if (a & FSM_GA_SEND_DRAIN) {
		struct ipc_drain d = { .deadline_ms = s->cfg.drain_timeout_ms };
		sup_gen_send(s, g, IPC_DRAIN, &d, sizeof d);
	}
	if (a & FSM_GA_SEND_STOP)
		sup_gen_send(s, g, IPC_STOP, NULL, 0);
	if (a & FSM_GA_SEND_HANDOVER) {
		struct ipc_handover h = { .deadline_ms = s->cfg.drain_timeout_ms,
					  .handover = g->handover_keep ? 1 : 0 };
		h.spread_ms = s->cfg.drain_spread_ms < s->cfg.drain_timeout_ms ?
		    s->cfg.drain_spread_ms : s->cfg.drain_timeout_ms;
		sup_gen_send(s, g, IPC_HANDOVER, &h, sizeof h);
		log_info("handing over connections", "cluster=%s gen=%llu mode=%s spread_ms=%llu",
		    c->name, (unsigned long long)g->generation,
		    h.handover ? "move" : "close-spread", (unsigned long long)h.spread_ms);
	}
	if (a & FSM_GA_ARM_STOP)
		g->stop_at = s->now_ms + s->cfg.drain_timeout_ms + SUP_STOP_GRACE_MS;
	if (a & FSM_GA_ARM_KILL_GRACE)
		g->stop_at = s->now_ms + SUP_KILL_GRACE_MS;
	if (a & FSM_GA_DISARM_STOP)
		g->stop_at = 0;
	if (a & (FSM_GA_KILL | FSM_GA_KILL_ALL)) {
		snprintf(g->end_note, sizeof g->end_note, "%.*s", (int)sizeof g->end_note - 1, why);
		if (ep && !(a & FSM_GA_KILL_ALL)) {
			log_warn("killing worker", "cluster=%s gen=%llu index=%u pid=%d why=\"%s\"",
			    c->name, (unsigned long long)g->generation, ep->index, (int)ep->pid, why);
			if (ep->alive)
				s->ops->kill(s, ep, SIGKILL);
		} else {
			log_warn("killing workers", "cluster=%s gen=%llu pid=%d why=\"%s\"", c->name,
			    (unsigned long long)g->generation, (int)g->procs[0].pid, why);
			sup_gen_kill(s, g);
		}
	}
	if ((a & FSM_GA_RESTART_PROC) && ep)
		sup_proc_crashed(s, ep, why);
	if ((a & FSM_GA_ACCEPT_PROC) && ep && ep->alive) {
		if (s->ops->send(s, ep, IPC_ACCEPT, NULL, 0) == -1)
			sup_post_proc(s, ep, FSM_GE_QUEUE_FULL, "control channel full");
		log_info("worker accepting", "cluster=%s gen=%llu index=%u pid=%d", c->name,
		    (unsigned long long)g->generation, ep->index, (int)ep->pid);
	}
	if ((a & FSM_GA_ARM_WATCHDOG) && s->cfg.worker_watchdog_ms) {
		g->watchdog_at = s->now_ms + sup_watchdog_period(s);
		for (size_t i = 0; i < g->n_procs; i++)
			g->procs[i].last_answer_ms = s->now_ms;
	}
	if (a & FSM_GA_DISARM_WATCHDOG)
		g->watchdog_at = 0;
	if ((a & FSM_GA_UNRESPONSIVE) && !g->unresponsive) {
		g->unresponsive = true;
		g->unresponsive_since_ms = s->now_wall_ms;
		c->unresponsive_total++;
		log_warn("worker unresponsive", "cluster=%s gen=%llu pid=%d reason=\"%s\"", c->name,
		    (unsigned long long)g->generation, (int)g->procs[0].pid, why);
	}
	if ((a & FSM_GA_RESPONSIVE) && g->unresponsive) {
		g->unresponsive = false;
		log_info("worker responsive again", "cluster=%s gen=%llu pid=%d", c->name,
		    (unsigned long long)g->generation, (int)g->procs[0].pid);
	}
	if (a & FSM_GA_HELD) {
		if (g->owner == SUP_OWNER_RELOAD)
			reload_gen_held(s, g);
		else if (s->stopping || g->owner == SUP_OWNER_NONE)
			sup_post_gen(s, g, FSM_GE_STOP, "ferryd is stopping");
		else
			sup_post_gen(s, g, FSM_GE_COMMIT, "ready");
	}
	if ((a & FSM_GA_SEND_ACCEPT) && g->owner == SUP_OWNER_CLUSTER)
		sup_cluster_gen_accepting(s, g);
	if ((a & FSM_GA_ENDED) && g->replaced) {
		c->last_replacement.valid = true;
		c->last_replacement.from_generation = g->generation;
		struct sup_gen *cur = sup_cluster_serving(c);
		c->last_replacement.to_generation = cur ? cur->generation : 0;
		c->last_replacement.handed_over = c->last_replacement.drained =
		    c->last_replacement.forced = 0;
		for (size_t i = 0; i < g->n_procs; i++) {
			struct metrics *m = g->procs[i].metrics;
			if (!m)
				continue;
			c->last_replacement.handed_over += METRIC_GET(m, connections_handed_over);
			c->last_replacement.drained += METRIC_GET(m, connections_drained);
			c->last_replacement.forced += METRIC_GET(m, connections_forced);
		}
		c->last_replacement.duration_ms = s->now_ms - g->replaced_at_ms;
		log_info("replaced generation gone", "cluster=%s gen=%llu handed_over=%llu "
		    "drained=%llu forced=%llu duration_ms=%llu", c->name,
		    (unsigned long long)g->generation,
		    (unsigned long long)c->last_replacement.handed_over,
		    (unsigned long long)c->last_replacement.drained,
		    (unsigned long long)c->last_replacement.forced,
		    (unsigned long long)c->last_replacement.duration_ms);
	}
	if (a & FSM_GA_ENDED) {
		if (g->owner == SUP_OWNER_RELOAD)
			reload_gen_ended(s, g, why);
		else if (g->owner == SUP_OWNER_CLUSTER)
			sup_cluster_gen_ended(s, g, (a & FSM_GA_CRASHED) != 0, why);
	}
	s->reap_pending = true;
}

/* ---- cluster machine --------------------------------------------------------------- */

static void
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
	/* REAP is the reaper's business (c->st == GONE). */
	s->reap_pending = true;
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
static void
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

static void
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
	 * back-off, or give up on a crash loop. */
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

/* ---- dispatch -------------------------------------------------------------------- */

bool sup_ready(const struct sup *s);

static void
sup_sweep(struct sup *s)
{
	/* Clusters that are leaving and have nothing alive are gone. */
	for (size_t i = 0; i < s->n_clusters; i++)
		if (s->clusters[i]->st == FSM_C_LEAVING && !sup_cluster_alive(s->clusters[i]))
			sup_post_cluster(s, s->clusters[i], FSM_CE_ALL_EXITED, "all workers exited");
	for (size_t i = 0; i < s->n_limbo; i++)
		if (s->limbo[i]->st == FSM_C_LEAVING && !sup_cluster_alive(s->limbo[i]))
			sup_post_cluster(s, s->limbo[i], FSM_CE_ALL_EXITED, "all workers exited");
}

static void
sup_after_chain(struct sup *s)
{
	bool ready = sup_ready(s);
	if (ready && !s->ever_ready)
		s->ever_ready = true;
	if (ready != s->last_ready) {
		s->last_ready = ready;
		if (s->ops->ready_changed)
			s->ops->ready_changed(s, ready);
	}
	/* fail-fast: a cluster that cannot start stops ferryd while it is
	 * starting (before it was ever ready). */
	if (s->cfg.startup_policy == CFG_STARTUP_FAIL_FAST && !s->stopping && !s->ever_ready) {
		for (size_t i = 0; i < s->n_clusters; i++) {
			struct sup_cluster *c = s->clusters[i];
			if (c->st == FSM_C_FAILED) {
				struct sup_gen *g = sup_cluster_serving(c);
				log_error("startup failed (startup_policy = fail-fast)",
				    "cluster=%s reason=\"%s\"", c->name, g ? g->lc.reason : "");
				s->exit_code = 1;
				sup_stop(s, "startup failed");
				return;
			}
		}
	}
	if (s->stopping && !s->stopped_reported && s->n_clusters == 0 && s->n_limbo == 0 &&
	    !s->reload) {
		s->stopped_reported = true;
		if (s->ops->stopped)
			s->ops->stopped(s);
	}
}

void
sup_dispatch(struct sup *s)
{
	if (s->dispatching)
		return;
	s->dispatching = true;
	for (;;) {
		while (s->evq_len) {
			struct sup_event e = s->evq[s->evq_head];
			s->evq_head = (s->evq_head + 1) % s->evq_cap;
			s->evq_len--;
			switch (e.kind) {
			case SUP_EV_GEN:
				sup_gen_event(s, e.target, e.proc, (enum fsm_gevent)e.ev, e.why);
				break;
			case SUP_EV_CLUSTER:
				sup_cluster_event(s, e.target, (enum fsm_cevent)e.ev, e.why);
				break;
			case SUP_EV_ITEM:
				reload_item_event(s, e.target, (enum fsm_ievent)e.ev, e.why);
				break;
			}
		}
		sup_sweep(s);
		if (!s->evq_len)
			reload_settle(s);
		if (!s->evq_len)
			break;
	}
	s->dispatching = false;
	sup_after_chain(s);
	/* sup_stop() from sup_after_chain queues more */
	if (s->evq_len)
		sup_dispatch(s);
}

/* ---- events from the I/O layer -------------------------------------------------------- */

static bool
sup_gen_all_ready(const struct sup_gen *g)
{
	for (size_t i = 0; i < g->n_procs; i++)
		if (!g->procs[i].ready)
			return false;
	return true;
}

void
sup_on_ready(struct sup *s, struct sup_proc *p)
{
	struct sup_gen *g = p->gen;
	if (p->ready) {
		sup_post_proc(s, p, FSM_GE_MALFORMED, "READY sent twice");
	} else if (g->st == FSM_G_STARTING) {
		p->ready = true;
		if (sup_gen_all_ready(g))
			sup_post_gen(s, g, FSM_GE_READY, "ready");
	} else if (p->starts > 1 && (g->st == FSM_G_ACCEPTING || g->st == FSM_G_DRAINING)) {
		p->ready = true;  /* a replacement of a crashed sibling */
		sup_post_proc(s, p, FSM_GE_PROC_READY, "ready");
	} else {
		p->ready = true;
		sup_post_proc(s, p, FSM_GE_READY, "ready");
	}
	sup_dispatch(s);
}

void
sup_on_failed(struct sup *s, struct sup_proc *p, const char *reason)
{
	sup_post_proc(s, p, FSM_GE_FAILED, reason);
	sup_dispatch(s);
}

void
sup_on_malformed(struct sup *s, struct sup_proc *p, const char *what)
{
	char why[192];
	snprintf(why, sizeof why, "malformed message from worker: %s", what);
	sup_post_proc(s, p, FSM_GE_MALFORMED, why);
	sup_dispatch(s);
}

void
sup_on_queue_full(struct sup *s, struct sup_proc *p)
{
	sup_post_proc(s, p, FSM_GE_QUEUE_FULL, "control channel full");
	sup_dispatch(s);
}

/* What status shows of the last unexpected exit of a worker of c (a crash
 * restart replaces the generation's reason; workers > 1 keep it). */
static void
sup_last_crash(struct sup_cluster *c, const struct sup_proc *p, const char *how, uint64_t now)
{
	c->last_crash.at_ms = now;
	c->last_crash.generation = p->gen->generation;
	c->last_crash.index = p->index;
	c->last_crash.pid = p->pid;
	snprintf(c->last_crash.reason, sizeof c->last_crash.reason, "%s", how);
}

void
sup_on_exit(struct sup *s, struct sup_proc *p, int st)
{
	struct sup_gen *g = p->gen;
	char how[192];
	if (WIFEXITED(st))
		snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS && p->metrics &&
	    sandbox_exit_reason(&p->metrics->sandbox, how, sizeof how)) {
		char path[160];
		sandbox_violation_path(&p->metrics->sandbox, path, sizeof path);
		log_error("sandbox violation", "cluster=%s gen=%llu pid=%d reason=\"%s\" path=\"%s\"",
		    g->cluster->name, (unsigned long long)g->generation, (int)p->pid, how, path);
	}
	else if (WIFSIGNALED(st))
		snprintf(how, sizeof how, "killed by signal %d (%s)", WTERMSIG(st),
		    strsignal(WTERMSIG(st)));
	else
		snprintf(how, sizeof how, "ended (status 0x%x)", st);
	if (g->end_note[0]) {
		size_t n = strlen(how);
		snprintf(how + n, sizeof how - n, " after: %s", g->end_note);
	}
	bool asked = g->st == FSM_G_DRAINING || fsm_gen_terminal(g->st);
	log_msg(asked ? LOG_INFO : LOG_WARN, "worker exited", "cluster=%s gen=%llu pid=%d "
	    "how=\"%s\" state=%s", g->cluster->name, (unsigned long long)g->generation,
	    (int)p->pid, how, fsm_gstate_str(g->st));
	if (!asked)
		sup_last_crash(g->cluster, p, how, s->now_wall_ms);
	p->alive = false;
	sup_relays_proc_gone(s, p);
	if (WIFEXITED(st) && WEXITSTATUS(st) == WORKER_EXIT_CONFIG && !g->accepted)
		sup_post_proc(s, p, FSM_GE_FAILED, how);
	if (!sup_gen_alive(g))
		sup_post_proc(s, p, FSM_GE_EXITED, how);
	else
		sup_post_proc(s, p, FSM_GE_PROC_EXITED, how);
	s->reap_pending = true;
	sup_dispatch(s);
}

void
sup_on_pong(struct sup *s, struct sup_proc *p, uint64_t seq)
{
	struct sup_gen *g = p->gen;
	if (seq > p->ping_seq) {
		sup_on_malformed(s, p, "PONG for a PING never sent");
		return;
	}
	p->last_answer_ms = s->now_ms;
	bool was = p->late;
	p->late = p->dead = false;
	if (was) {
		bool any = false;
		for (size_t i = 0; i < g->n_procs; i++)
			any = any || (g->procs[i].alive && g->procs[i].late);
		if (!any)
			sup_post_gen(s, g, FSM_GE_WD_OK, "answering again");
	}
	sup_dispatch(s);
}

void
sup_on_upstream(struct sup *s, struct sup_proc *p, const struct ipc_upstream *u)
{
	struct sup_gen *g = p->gen;
	struct sup_cluster *c = g->cluster;
	if (g->need_probe && !g->upstream_ok) {
		/* reload_upstream_check: the reload waits for this answer */
		if (u->reachable) {
			g->upstream_ok = true;
			reload_gen_held(s, g);
			sup_dispatch(s);
		} else {
			snprintf(g->probe_error, sizeof g->probe_error, "%.*s", (int)sizeof u->error,
			    u->error);
		}
		return;
	}
	/* Only the serving generation speaks for the cluster. */
	if (sup_cluster_serving(c) != g)
		return;
	enum sup_upstream_state st = u->reachable ? SUP_UPSTREAM_REACHABLE : SUP_UPSTREAM_UNREACHABLE;
	if (st != c->upstream)
		c->upstream_since_ms = s->now_wall_ms;
	c->upstream = st;
	snprintf(c->upstream_error, sizeof c->upstream_error, "%.*s", (int)sizeof u->error,
	    u->error);
}

void
sup_on_unknown_node(struct sup *s, struct sup_proc *p, const struct ipc_unknown_node *u)
{
	struct sup_cluster *c = p->gen->cluster;
	size_t k = 0;
	while (k < c->n_unknown_nodes && c->unknown_nodes[k].node_id != u->node_id)
		k++;
	if (k == c->n_unknown_nodes) {
		if (k == sizeof c->unknown_nodes / sizeof c->unknown_nodes[0])
			return;
		c->n_unknown_nodes++;
		c->unknown_since_ms[k] = s->now_wall_ms;
		log_warn("upstream node id has no broker port", "cluster=%s node_id=%d "
		    "upstream=%.*s:%d", c->name, u->node_id, (int)sizeof u->host, u->host, u->port);
	}
	c->unknown_nodes[k] = *u;  /* follows a move */
	c->unknown_nodes[k].host[sizeof u->host - 1] = 0;
}

/* ---- deadlines ----------------------------------------------------------------------- */

static uint64_t
sup_min_deadline(uint64_t a, uint64_t b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	return a < b ? a : b;
}

static uint64_t
sup_cluster_deadline(const struct sup_cluster *c)
{
	uint64_t d = c->restart_at;
	for (const struct sup_gen *g = c->gens; g; g = g->next) {
		d = sup_min_deadline(d, g->init_at);
		d = sup_min_deadline(d, g->stop_at);
		d = sup_min_deadline(d, g->watchdog_at);
		for (size_t i = 0; i < g->n_procs; i++)
			d = sup_min_deadline(d, g->procs[i].restart_at);
	}
	return d;
}

uint64_t
sup_next_deadline(const struct sup *s)
{
	uint64_t d = s->hup_at;
	for (size_t i = 0; i < s->n_relays; i++)
		d = sup_min_deadline(d, s->relays[i].deadline_ms);
	for (size_t i = 0; i < s->n_clusters; i++)
		d = sup_min_deadline(d, sup_cluster_deadline(s->clusters[i]));
	for (size_t i = 0; i < s->n_limbo; i++)
		d = sup_min_deadline(d, sup_cluster_deadline(s->limbo[i]));
	return d;
}

static void
sup_gen_tick(struct sup *s, struct sup_gen *g)
{
	uint64_t now = s->now_ms;
	for (size_t i = 0; i < g->n_procs; i++) {
		struct sup_proc *p = &g->procs[i];
		if (!p->restart_at || now < p->restart_at)
			continue;
		if (g->st != FSM_G_ACCEPTING || s->stopping || g->cluster->st != FSM_C_ACTIVE) {
			p->restart_at = 0;  /* the generation is going away */
			continue;
		}
		if (p->chan || p->metrics)
			continue;  /* its slot is freed by the reaper first */
		sup_proc_respawn(s, p);
	}
	if (g->init_at && now >= g->init_at) {
		g->init_at = 0;
		char why[320];
		if (g->need_probe && !g->upstream_ok && g->st == FSM_G_HELD)
			snprintf(why, sizeof why, "new upstream did not answer metadata within "
			    "init_timeout (%llums): %s", (unsigned long long)s->cfg.init_timeout_ms,
			    g->probe_error[0] ? g->probe_error : "no answer");
		else
			snprintf(why, sizeof why, "not ready within init_timeout (%llums)",
			    (unsigned long long)s->cfg.init_timeout_ms);
		sup_post_gen(s, g, FSM_GE_INIT_DEADLINE, why);
	}
	if (g->stop_at && now >= g->stop_at) {
		g->stop_at = 0;
		sup_post_gen(s, g, FSM_GE_STOP_DEADLINE, g->st == FSM_G_FAILED ?
		    "did not exit after reporting failure" :
		    "did not exit within drain_timeout plus grace");
	}
	if (g->watchdog_at && now >= g->watchdog_at) {
		uint64_t w = s->cfg.worker_watchdog_ms;
		if (!w) {
			g->watchdog_at = 0;  /* turned off by a reload */
			return;
		}
		for (size_t i = 0; i < g->n_procs; i++) {
			struct sup_proc *p = &g->procs[i];
			if (!p->alive)
				continue;
			uint64_t age = now - p->last_answer_ms;
			char why[128];
			if (age >= 2 * w && !p->dead) {
				p->dead = p->late = true;
				snprintf(why, sizeof why, "unresponsive: no answer to the watchdog for "
				    "%llums", (unsigned long long)age);
				sup_post_proc(s, p, FSM_GE_WD_DEAD, why);
			} else if (age >= w && !p->late) {
				p->late = true;
				snprintf(why, sizeof why, "unresponsive: no answer to the watchdog for "
				    "%llums (worker_watchdog %llums)", (unsigned long long)age,
				    (unsigned long long)w);
				sup_post_proc(s, p, FSM_GE_WD_LATE, why);
			}
			if (!p->ready)
				continue;  /* a replacement still starting: its init is short */
			struct ipc_ping ping = { .seq = ++p->ping_seq };
			if (s->ops->send(s, p, IPC_PING, &ping, sizeof ping) == -1)
				sup_post_proc(s, p, FSM_GE_QUEUE_FULL, "control channel full");
		}
		/* next ping, or the moment a process becomes late or dead,
		 * whichever comes first: the report is on time, not a period late */
		uint64_t next = now + sup_watchdog_period(s);
		for (size_t i = 0; i < g->n_procs; i++) {
			struct sup_proc *p = &g->procs[i];
			if (!p->alive || !p->ready || p->dead)
				continue;
			uint64_t due = p->last_answer_ms + (p->late ? 2 * w : w);
			if (due > now && due < next)
				next = due;
		}
		g->watchdog_at = next;
	}
}

void
sup_tick(struct sup *s)
{
	for (size_t pass = 0; pass < 2; pass++) {
		struct sup_cluster **arr = pass ? s->limbo : s->clusters;
		size_t n = pass ? s->n_limbo : s->n_clusters;
		for (size_t i = 0; i < n; i++) {
			struct sup_cluster *c = arr[i];
			for (struct sup_gen *g = c->gens; g; g = g->next)
				sup_gen_tick(s, g);
			if (c->restart_at && s->now_ms >= c->restart_at) {
				c->restart_at = 0;
				sup_post_cluster(s, c, FSM_CE_RESTART_TIMER, "restart after crash");
			}
		}
	}
	sup_relays_tick(s);
	reload_tick(s);
	sup_dispatch(s);
}

/* ---- reaper ------------------------------------------------------------------------- */

static void sup_proc_reap(struct sup *s, struct sup_cluster *c, struct sup_proc *p);

/* Counters of the processes fold into the cluster's retired totals (gauges
 * mean nothing once a process is gone). */
static void
sup_gen_free(struct sup *s, struct sup_cluster *c, struct sup_gen *g)
{
	for (size_t i = 0; i < g->n_procs; i++)
		sup_proc_reap(s, c, &g->procs[i]);
	if (s->ops->gen_free)
		s->ops->gen_free(s, g);
	free(g);
}

static void
sup_proc_reap(struct sup *s, struct sup_cluster *c, struct sup_proc *p)
{
	if (p->metrics)
		metrics_retire(&c->retired, p->metrics);
	s->ops->proc_free(s, p);
	p->metrics = NULL;
	p->chan = NULL;
}

static void
sup_cluster_reap_gens(struct sup *s, struct sup_cluster *c, bool all)
{
	unsigned kept = 0;
	/* dead processes of generations that live on (replaced siblings) */
	for (struct sup_gen *g = c->gens; g; g = g->next)
		if (sup_gen_alive(g))
			for (size_t i = 0; i < g->n_procs; i++)
				if (!g->procs[i].alive && (g->procs[i].chan || g->procs[i].metrics))
					sup_proc_reap(s, c, &g->procs[i]);
	struct sup_gen **pp = &c->gens, *g;
	while ((g = *pp)) {
		bool ended = fsm_gen_terminal(g->st) && !sup_gen_alive(g);
		if (ended && g->owner != SUP_OWNER_RELOAD &&
		    (all || (g != c->gens && ++kept > SUP_KEEP_ENDED))) {
			*pp = g->next;
			sup_gen_free(s, c, g);
			continue;
		}
		pp = &g->next;
	}
}

static void
sup_cluster_free(struct sup *s, struct sup_cluster *c)
{
	while (c->gens) {
		struct sup_gen *g = c->gens;
		c->gens = g->next;
		sup_gen_kill(s, g);
		sup_gen_free(s, c, g);
	}
	crash_free(&c->crash);
	sup_ccfg_free(s, c->ccfg);
	sup_nodes_free(&c->nodes);
	tickets_free(c);
	free(c);
}

static void
sup_reap_array(struct sup *s, struct sup_cluster **arr, size_t *n)
{
	for (size_t i = 0; i < *n;) {
		struct sup_cluster *c = arr[i];
		if (c->st == FSM_C_GONE) {
			memmove(&arr[i], &arr[i + 1], (*n - i - 1) * sizeof *arr);
			(*n)--;
			sup_cluster_free(s, c);
			continue;
		}
		sup_cluster_reap_gens(s, c, false);
		i++;
	}
}

void
sup_reap(struct sup *s)
{
	if (s->dispatching || !s->reap_pending)
		return;
	s->reap_pending = false;
	reload_reap(s);
	sup_reap_array(s, s->clusters, &s->n_clusters);
	sup_reap_array(s, s->limbo, &s->n_limbo);
	if (s->stopping)
		sup_after_chain(s);
}

/* ---- start and stop ------------------------------------------------------------------- */

int
sup_init(struct sup *s, const struct sup_ops *ops, struct cfg *cfg, const char *config_path,
	 const char *config_bytes, size_t config_len)
{
	s->ops = ops;
	s->cfg = *cfg;
	memset(cfg, 0, sizeof *cfg);
	s->config_path = strdup(config_path ? config_path : "");
	if (!s->config_path)
		return -1;
	s->started_at_ms = s->applied_at_ms = s->now_wall_ms;
	sup_hash_hex(config_bytes, config_len, s->config_version, sizeof s->config_version);
	return 0;
}

int
sup_start(struct sup *s)
{
	char err[256];
	bool any_bound = false;
	for (size_t i = 0; i < s->cfg.n_clusters; i++) {
		const struct cfg_cluster *cl = &s->cfg.clusters[i];
		struct sup_ccfg *cc = sup_ccfg_new(cl, err, sizeof err);
		if (!cc) {
			log_error("cannot prepare cluster", "cluster=%s error=\"%s\"", cl->name, err);
			return -1;
		}
		struct sup_cluster *c = sup_cluster_new(s, cc, true);
		if (!c) {
			sup_ccfg_free(s, cc);
			return -1;
		}
		if (sup_ccfg_listen(s, cc, NULL, 0, err, sizeof err) == -1) {
			log_error("cannot bind cluster listener", "cluster=%s error=\"%s\"", cl->name, err);
			sup_ccfg_release(s, cc);
			if (s->cfg.startup_policy == CFG_STARTUP_FAIL_FAST)
				return -1;
			/* best-effort: shown failed with the bind error, the others
			 * serve; `ferryctl restart` retries the bind. */
			struct sup_gen *g = sup_gen_new(s, c, cc, SUP_OWNER_CLUSTER, NULL,
			    s->cfg.init_timeout_ms, "start");
			if (g)
				sup_gen_fail_now(s, g, err);
			continue;
		}
		any_bound = true;
		sup_gen_start(s, c, cc, SUP_OWNER_CLUSTER, NULL, s->cfg.init_timeout_ms, "start");
	}
	if (!any_bound && s->n_clusters) {
		log_error("no cluster could bind its listeners", "%s", "");
		return -1;
	}
	sup_dispatch(s);
	return 0;
}

void
sup_kill_all(struct sup *s)
{
	for (size_t i = 0; i < s->n_clusters; i++)
		for (struct sup_gen *g = s->clusters[i]->gens; g; g = g->next)
			sup_gen_kill(s, g);
	for (size_t i = 0; i < s->n_limbo; i++)
		for (struct sup_gen *g = s->limbo[i]->gens; g; g = g->next)
			sup_gen_kill(s, g);
}

void
sup_stop(struct sup *s, const char *why)
{
	if (s->stopping) {
		log_warn("second stop: killing every worker", "why=\"%s\"", why);
		sup_kill_all(s);
		return;
	}
	s->stopping = true;
	s->hup_pending = false;
	s->hup_at = 0;
	if (s->ops->stopping)
		s->ops->stopping(s, why);
	log_info("stopping", "why=\"%s\" drain_timeout_ms=%llu", why,
	    (unsigned long long)s->cfg.drain_timeout_ms);
	reload_abort(s, "ferryd is stopping");
	for (size_t i = 0; i < s->n_clusters; i++)
		if (s->clusters[i]->st != FSM_C_LEAVING && s->clusters[i]->st != FSM_C_GONE)
			sup_post_cluster(s, s->clusters[i], FSM_CE_REMOVE, why);
	for (size_t i = 0; i < s->n_limbo; i++)
		if (s->limbo[i]->st != FSM_C_LEAVING && s->limbo[i]->st != FSM_C_GONE)
			sup_post_cluster(s, s->limbo[i], FSM_CE_REMOVE, why);
	sup_dispatch(s);
}

void
sup_free(struct sup *s)
{
	reload_abort(s, "ferryd stopped");
	s->reap_pending = true;
	reload_reap(s);
	for (size_t i = 0; i < s->n_clusters; i++)
		sup_cluster_free(s, s->clusters[i]);
	for (size_t i = 0; i < s->n_limbo; i++)
		sup_cluster_free(s, s->limbo[i]);
	free(s->clusters);
	free(s->limbo);
	s->clusters = s->limbo = NULL;
	s->n_clusters = s->n_limbo = 0;
	sup_record_clear(&s->last_reload);
	free(s->relays);
	free(s->evq);
	cfg_free(&s->cfg);
	free(s->config_path);
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
	if (sup_ccfg_listen(s, c->ccfg, NULL, 0, err, sizeof err) == -1) {
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

/* ---- live handover: relaying connections between generations ------------------------ */

static void
sup_relay_done(struct sup *s, struct sup_proc *from, uint64_t from_id, bool adopted)
{
	if (!from || !from->alive)
		return;
	struct ipc_conn_ack ack = { .id = from_id, .adopted = adopted ? 1 : 0 };
	if (s->ops->send(s, from, IPC_CONN_DONE, &ack, sizeof ack) == -1)
		sup_post_proc(s, from, FSM_GE_QUEUE_FULL, "control channel full");
}

static void
sup_relay_del(struct sup *s, size_t i)
{
	s->relays[i] = s->relays[--s->n_relays];
}

/* The newest accepting generation of c other than `not`, and its process
 * with the fewest connections. */
static struct sup_proc *
sup_handover_target(struct sup_cluster *c, const struct sup_gen *not)
{
	for (struct sup_gen *g = c->gens; g; g = g->next) {
		if (g == not || g->st != FSM_G_ACCEPTING || g->owner != SUP_OWNER_CLUSTER)
			continue;
		struct sup_proc *best = NULL;
		uint64_t least = UINT64_MAX;
		for (size_t i = 0; i < g->n_procs; i++) {
			struct sup_proc *p = &g->procs[i];
			if (!p->alive || !p->ready || p->late)
				continue;
			uint64_t n = p->metrics ? METRIC_GET(p->metrics, connections_active) : 0;
			if (n < least) {
				least = n;
				best = p;
			}
		}
		return best;
	}
	return NULL;
}

void
sup_on_conn_out(struct sup *s, struct sup_proc *p, const void *payload, size_t len,
		const int *fds, size_t nfds)
{
	struct sup_gen *g = p->gen;
	struct ipc_conn_record rec;
	char err[160];
	if (ipc_conn_record_check(payload, len, nfds, &rec, err, sizeof err) == -1) {
		for (size_t i = 0; i < nfds; i++)
			s->ops->close(s, fds[i]);
		sup_on_malformed(s, p, err);
		return;
	}
	struct sup_proc *to = g->st == FSM_G_DRAINING && g->handover_keep ?
	    sup_handover_target(g->cluster, g) : NULL;
	bool sent = false;
	if (to) {
		if (s->n_relays == s->cap_relays) {
			size_t cap = s->cap_relays ? s->cap_relays * 2 : 64;
			struct sup_relay *r = realloc(s->relays, cap * sizeof *r);
			if (r) {
				s->relays = r;
				s->cap_relays = cap;
			}
		}
		if (s->n_relays < s->cap_relays) {
			uint8_t buf[sizeof rec + IPC_CONN_PENDING_MAX];
			memcpy(buf, payload, len);
			struct ipc_conn_record *out = (struct ipc_conn_record *)buf;
			out->id = ++s->next_relay;
			if (s->ops->send_fds(s, to, IPC_CONN_IN, buf, len, fds, nfds) == 0) {
				s->relays[s->n_relays++] = (struct sup_relay){
					.id = out->id, .from = p, .to = to, .from_id = rec.id,
					.deadline_ms = s->now_ms + SUP_RELAY_TIMEOUT_MS,
				};
				sent = true;
			} else {
				sup_post_proc(s, to, FSM_GE_QUEUE_FULL, "control channel full");
			}
		}
	}
	/* Our copies go now: the new worker holds its own (or nobody). */
	for (size_t i = 0; i < nfds; i++)
		s->ops->close(s, fds[i]);
	if (!sent)
		sup_relay_done(s, p, rec.id, false);
	sup_dispatch(s);
}

void
sup_on_conn_taken(struct sup *s, struct sup_proc *p, const struct ipc_conn_ack *ack)
{
	for (size_t i = 0; i < s->n_relays; i++) {
		struct sup_relay *r = &s->relays[i];
		if (r->id != ack->id || r->to != p)
			continue;
		sup_relay_done(s, r->from, r->from_id, ack->adopted != 0);
		sup_relay_del(s, i);
		break;
	}
	/* an answer for a relay that timed out: the old worker has closed it */
	sup_dispatch(s);
}

/* A process exited: relays it was part of end now. */
static void
sup_relays_proc_gone(struct sup *s, struct sup_proc *p)
{
	for (size_t i = 0; i < s->n_relays;) {
		struct sup_relay *r = &s->relays[i];
		if (r->to == p) {
			sup_relay_done(s, r->from, r->from_id, false);
			sup_relay_del(s, i);
		} else if (r->from == p) {
			sup_relay_del(s, i);  /* the new worker has it, or nobody */
		} else {
			i++;
		}
	}
}

static void
sup_relays_tick(struct sup *s)
{
	for (size_t i = 0; i < s->n_relays;) {
		struct sup_relay *r = &s->relays[i];
		if (s->now_ms < r->deadline_ms) {
			i++;
			continue;
		}
		log_warn("handed-over connection not adopted in time; closing it",
		    "cluster=%s timeout_ms=%d", r->from->gen->cluster->name, SUP_RELAY_TIMEOUT_MS);
		sup_relay_done(s, r->from, r->from_id, false);
		sup_relay_del(s, i);
	}
}
