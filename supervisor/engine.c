/*
 * engine — the core of the supervisor's decisions (see supervisor.h): the
 * event queue and its dispatch, the events from the I/O layer, deadlines,
 * the reaper, start and stop. The rest of the engine, sharing
 * engine_priv.h: the generations (engine_gen.c), the clusters and operator
 * requests (engine_cluster.c), the relay of handed-over connections
 * (engine_relay.c) and reloads (reload.c).
 *
 * Pure: every effect on the world goes through s->ops, every clock reading
 * is s->now_ms / s->now_wall_ms (set by the caller), so unit tests drive it
 * with fakes.
 *
 * One rule keeps lifetimes simple: an entry point queues events and runs
 * sup_dispatch(); actions never call back into an event handler, they
 * queue more events; objects are only marked, and sup_reap() frees them
 * after the chain.
 */
#include "supervisor/engine_priv.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "common/sandbox.h"
#include "supervisor/nodes.h"
#include "supervisor/tickets.h"

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

static void sup_start_batch(struct sup *s);

void
sup_post_upgrade(struct sup *s, int e, const char *why)
{
	if (s->upgrade)
		sup_post(s, SUP_EV_UPGRADE, s->upgrade, NULL, e, why);
}

/* ---- dispatch -------------------------------------------------------------------- */

static void
sup_sweep_one(struct sup *s, struct sup_cluster *c)
{
	if (c->st == FSM_C_LEAVING && !sup_cluster_alive(c))
		sup_post_cluster(s, c, FSM_CE_ALL_EXITED, "all workers exited");
}

/* Clusters that are leaving and have nothing alive are gone. Only a
 * cluster something happened to can have become so. */
static void
sup_sweep(struct sup *s)
{
	if (s->reap_all) {
		for (size_t i = 0; i < s->n_clusters; i++)
			sup_sweep_one(s, s->clusters[i]);
		for (size_t i = 0; i < s->n_limbo; i++)
			sup_sweep_one(s, s->limbo[i]);
		return;
	}
	for (size_t i = 0; i < s->n_reap; i++)
		sup_sweep_one(s, s->reap_list[i]);
}

void
sup_reap_mark(struct sup *s, struct sup_cluster *c)
{
	s->reap_pending = true;
	if (c->reap_dirty || s->reap_all)
		return;
	if (s->n_reap == s->cap_reap) {
		size_t cap = s->cap_reap ? 2 * s->cap_reap : 64;
		struct sup_cluster **l = realloc(s->reap_list, cap * sizeof *l);
		if (!l) {
			s->reap_all = true;  /* out of memory: the reaper looks at all */
			return;
		}
		s->reap_list = l;
		s->cap_reap = cap;
	}
	s->reap_list[s->n_reap++] = c;
	c->reap_dirty = true;
}

static void
sup_after_chain(struct sup *s)
{
	bool ready = sup_ready_cached(s);
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
	    !s->reload && !upgrade_holds_exit(s)) {
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
			case SUP_EV_UPGRADE:
				upgrade_event(s, e.target, e.ev, e.why);
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
	if (p->queued) {  /* its start was cancelled before it happened */
		p->queued = false;
		g->n_queued--;
		sup_deadline_touch(g->cluster);
	}
	bool asked = g->st == FSM_G_DRAINING || fsm_gen_terminal(g->st);
	log_msg(asked ? LOG_INFO : LOG_WARN, "worker exited", "cluster=%s gen=%llu pid=%d "
	    "how=\"%s\" state=%s", g->cluster->name, (unsigned long long)g->generation,
	    (int)p->pid, how, fsm_gstate_str(g->st));
	if (!asked)
		sup_last_crash(g->cluster, p, how, s->now_wall_ms);
	p->alive = false;
	sup_reap_mark(s, g->cluster);
	sup_relays_proc_gone(s, p);
	if (WIFEXITED(st) && WEXITSTATUS(st) == WORKER_EXIT_CONFIG && !g->accepted)
		sup_post_proc(s, p, FSM_GE_FAILED, how);
	if (!sup_gen_alive(g))
		sup_post_proc(s, p, FSM_GE_EXITED, how);
	else
		sup_post_proc(s, p, FSM_GE_PROC_EXITED, how);
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
	/* an answer to the last PING answers every one before it; to an
	 * older one, the last is still outstanding (since it was sent) */
	p->unanswered_since_ms = seq == p->ping_seq ? 0 : p->last_ping_ms;
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

int
sup_unknown_nodes_alloc(struct sup_cluster *c)
{
	if (c->unknown_nodes)
		return 0;
	c->unknown_nodes = calloc(SUP_UNKNOWN_NODES, sizeof *c->unknown_nodes);
	c->unknown_since_ms = calloc(SUP_UNKNOWN_NODES, sizeof *c->unknown_since_ms);
	if (c->unknown_nodes && c->unknown_since_ms)
		return 0;
	free(c->unknown_nodes);
	free(c->unknown_since_ms);
	c->unknown_nodes = NULL;
	c->unknown_since_ms = NULL;
	return -1;
}

void
sup_on_unknown_node(struct sup *s, struct sup_proc *p, const struct ipc_unknown_node *u)
{
	struct sup_cluster *c = p->gen->cluster;
	size_t k = 0;
	while (k < c->n_unknown_nodes && c->unknown_nodes[k].node_id != u->node_id)
		k++;
	if (k == c->n_unknown_nodes) {
		if (k == SUP_UNKNOWN_NODES)
			return;
		if (sup_unknown_nodes_alloc(c) == -1)
			return;  /* out of memory: not shown, logged by the worker */
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
	/* a crash restart waits while an upgrade prepares (engine_upgrade.c) */
	uint64_t d = upgrade_frozen(c->sup) ? 0 : c->restart_at;
	for (const struct sup_gen *g = c->gens; g; g = g->next) {
		if (!g->n_queued)  /* counts from the last start (sup_on_spawned) */
			d = sup_min_deadline(d, g->init_at);
		d = sup_min_deadline(d, g->stop_at);
		d = sup_min_deadline(d, g->watchdog_at);
		for (size_t i = 0; i < g->n_procs; i++)
			d = sup_min_deadline(d, g->procs[i].restart_at);
	}
	return d;
}

/* ---- the deadline heap ---- */

static void
sup_dl_set(struct sup *s, size_t i, struct sup_cluster *c)
{
	s->dl_heap[i] = c;
	c->dl_index = i;
}

static void
sup_dl_up(struct sup *s, size_t i)
{
	struct sup_cluster *c = s->dl_heap[i];
	while (i > 0) {
		size_t parent = (i - 1) / 2;
		if (s->dl_heap[parent]->deadline <= c->deadline)
			break;
		sup_dl_set(s, i, s->dl_heap[parent]);
		i = parent;
	}
	sup_dl_set(s, i, c);
}

static void
sup_dl_down(struct sup *s, size_t i)
{
	struct sup_cluster *c = s->dl_heap[i];
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		uint64_t best = c->deadline;
		if (l < s->n_dl_heap && s->dl_heap[l]->deadline < best)
			best = s->dl_heap[m = l]->deadline;
		if (l + 1 < s->n_dl_heap && s->dl_heap[l + 1]->deadline < best)
			m = l + 1;
		if (m == i)
			break;
		sup_dl_set(s, i, s->dl_heap[m]);
		i = m;
	}
	sup_dl_set(s, i, c);
}

static void
sup_dl_remove(struct sup *s, struct sup_cluster *c)
{
	size_t i = c->dl_index;
	if (i == SIZE_MAX)
		return;
	c->dl_index = SIZE_MAX;
	struct sup_cluster *last = s->dl_heap[--s->n_dl_heap];
	if (last == c)
		return;
	sup_dl_set(s, i, last);
	sup_dl_up(s, i);
	sup_dl_down(s, last->dl_index);
}

/* c's earliest deadline computed again, its place in the heap with it */
static void
sup_dl_update(struct sup *s, struct sup_cluster *c)
{
	c->deadline = sup_cluster_deadline(c);
	c->deadline_dirty = false;
	if (!c->deadline) {
		sup_dl_remove(s, c);
	} else if (c->dl_index == SIZE_MAX) {
		sup_dl_set(s, s->n_dl_heap++, c);  /* room was reserved */
		sup_dl_up(s, c->dl_index);
	} else {
		sup_dl_up(s, c->dl_index);
		sup_dl_down(s, c->dl_index);
	}
}

static void
sup_dl_flush(struct sup *s)
{
	/* crash restarts wait while an upgrade prepares: every cluster's
	 * earliest changes when that starts or ends */
	bool frozen = upgrade_frozen(s);
	if (frozen != s->dl_frozen) {
		s->dl_frozen = frozen;
		sup_deadline_touch_all(s);
	}
	for (size_t i = 0; i < s->n_dl_dirty; i++)
		sup_dl_update(s, s->dl_dirty[i]);
	s->n_dl_dirty = 0;
}

void
sup_deadline_touch(struct sup_cluster *c)
{
	struct sup *s = c->sup;
	if (c->deadline_dirty)
		return;
	c->deadline_dirty = true;
	s->dl_dirty[s->n_dl_dirty++] = c;  /* room was reserved */
}

void
sup_deadline_touch_all(struct sup *s)
{
	for (size_t i = 0; i < s->n_clusters; i++)
		sup_deadline_touch(s->clusters[i]);
	for (size_t i = 0; i < s->n_limbo; i++)
		sup_deadline_touch(s->limbo[i]);
}

int
sup_deadline_reserve(struct sup *s, size_t n)
{
	if (n <= s->cap_dl)
		return 0;
	size_t cap = s->cap_dl ? s->cap_dl : 64;
	while (cap < n)
		cap *= 2;
	struct sup_cluster **h = realloc(s->dl_heap, cap * sizeof *h);
	if (!h)
		return -1;
	s->dl_heap = h;
	struct sup_cluster **d = realloc(s->dl_dirty, cap * sizeof *d);
	if (!d)
		return -1;
	s->dl_dirty = d;
	struct sup_cluster **u = realloc(s->dl_due, cap * sizeof *u);
	if (!u)
		return -1;
	s->dl_due = u;
	s->cap_dl = cap;
	return 0;
}

void
sup_deadline_forget(struct sup *s, struct sup_cluster *c)
{
	sup_dl_remove(s, c);
	if (!c->deadline_dirty)
		return;
	for (size_t i = 0; i < s->n_dl_dirty; i++)
		if (s->dl_dirty[i] == c) {
			s->dl_dirty[i] = s->dl_dirty[--s->n_dl_dirty];
			break;
		}
	c->deadline_dirty = false;
}

uint64_t
sup_next_deadline(struct sup *s)
{
	uint64_t d = sup_min_deadline(s->hup_at, reload_next_deadline(s));
	d = sup_min_deadline(d, s->start_at);
	d = sup_min_deadline(d, upgrade_deadline(s));
	for (size_t i = 0; i < s->n_relays; i++)
		d = sup_min_deadline(d, s->relays[i].deadline_ms);
	sup_dl_flush(s);
	if (s->n_dl_heap)
		d = sup_min_deadline(d, s->dl_heap[0]->deadline);
	return d;
}

void
sup_tick(struct sup *s)
{
	/* the clusters with something due: taken out of the heap first (the
	 * ticks touch them: they go back with their next deadline) */
	size_t n_due = 0;
	sup_dl_flush(s);
	while (s->n_dl_heap && s->dl_heap[0]->deadline <= s->now_ms) {
		struct sup_cluster *c = s->dl_heap[0];
		sup_dl_remove(s, c);
		s->dl_due[n_due++] = c;
	}
	for (size_t i = 0; i < n_due; i++) {
		struct sup_cluster *c = s->dl_due[i];
		sup_deadline_touch(c);
		for (struct sup_gen *g = c->gens; g; g = g->next)
			sup_gen_tick(s, g);
		if (c->restart_at && s->now_ms >= c->restart_at && !upgrade_frozen(s)) {
			c->restart_at = 0;
			sup_post_cluster(s, c, FSM_CE_RESTART_TIMER, "restart after crash");
		}
	}
	if (s->start_at && s->now_ms >= s->start_at)
		sup_start_batch(s);
	sup_relays_tick(s);
	reload_tick(s);
	upgrade_tick(s);
	sup_dispatch(s);
}

/* ---- reaper ------------------------------------------------------------------------- */

static void sup_proc_reap(struct sup *s, struct sup_cluster *c, struct sup_proc *p);

static void
sup_gen_free(struct sup *s, struct sup_cluster *c, struct sup_gen *g)
{
	for (size_t i = 0; i < g->n_procs; i++)
		sup_proc_reap(s, c, &g->procs[i]);
	if (s->ops->gen_free)
		s->ops->gen_free(s, g);
	free(g->procs);
	free(g);
}

/* A process that ended keeps nothing: its counters fold into the
 * cluster's retired totals (gauges mean nothing once it is gone), its
 * channel and block are released. */
static void
sup_proc_reap(struct sup *s, struct sup_cluster *c, struct sup_proc *p)
{
	if (p->metrics) {
		if (!c->retired)
			c->retired = metrics_totals_new();
		if (c->retired)
			metrics_retire(c->retired, p->metrics);
		else
			log_error("out of memory keeping the counters of an ended worker; they are "
			    "lost", "cluster=%s pid=%d", c->name, (int)p->pid);
	}
	s->ops->proc_free(s, p);
	p->metrics = NULL;
	p->chan = NULL;
}

/* Free what ended: every dead process's channel and block (a generation
 * whose workers are gone keeps only what its status shows), and the
 * oldest of the ended generations beyond SUP_KEEP_ENDED. */
static void
sup_cluster_reap_gens(struct sup *s, struct sup_cluster *c, bool all)
{
	unsigned kept = 0;
	bool freed = false;
	for (struct sup_gen *g = c->gens; g; g = g->next) {
		for (size_t i = 0; i < g->n_procs; i++)
			if (!g->procs[i].alive && (g->procs[i].chan || g->procs[i].metrics))
				sup_proc_reap(s, c, &g->procs[i]);
		if (g->shared && fsm_gen_terminal(g->st) && !sup_gen_alive(g) && s->ops->gen_free)
			s->ops->gen_free(s, g);
	}
	struct sup_gen **pp = &c->gens, *g;
	while ((g = *pp)) {
		bool ended = fsm_gen_terminal(g->st) && !sup_gen_alive(g);
		if (ended && g->owner != SUP_OWNER_RELOAD &&
		    (all || (g != c->gens && ++kept > SUP_KEEP_ENDED))) {
			*pp = g->next;
			sup_gen_free(s, c, g);
			freed = true;
			continue;
		}
		pp = &g->next;
	}
	if (freed)
		sup_ready_touch(s, c);  /* the serving generation may be another now */
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
	sup_deadline_forget(s, c);
	crash_free(&c->crash);
	metrics_unmap(c->retired);
	metrics_unmap(c->carried);
	free(c->unknown_nodes);
	free(c->unknown_since_ms);
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

/* One cluster something happened to: gone (out of its array, freed), or
 * what ended of it freed. */
static void
sup_reap_one(struct sup *s, struct sup_cluster *c)
{
	if (c->st != FSM_C_GONE) {
		sup_cluster_reap_gens(s, c, false);
		return;
	}
	struct sup_cluster **arr = c->listed ? s->clusters : s->limbo;
	size_t *n = c->listed ? &s->n_clusters : &s->n_limbo;
	for (size_t i = 0; i < *n; i++)
		if (arr[i] == c) {
			memmove(&arr[i], &arr[i + 1], (*n - i - 1) * sizeof *arr);
			(*n)--;
			break;
		}
	sup_cluster_free(s, c);
}

void
sup_reap(struct sup *s)
{
	if (s->dispatching || !s->reap_pending)
		return;
	s->reap_pending = false;
	reload_reap(s);
	upgrade_reap(s);
	if (s->reap_all) {
		for (size_t i = 0; i < s->n_reap; i++)
			s->reap_list[i]->reap_dirty = false;  /* before any is freed */
		sup_reap_array(s, s->clusters, &s->n_clusters);
		sup_reap_array(s, s->limbo, &s->n_limbo);
	} else {
		for (size_t i = 0; i < s->n_reap; i++) {
			struct sup_cluster *c = s->reap_list[i];
			c->reap_dirty = false;
			sup_reap_one(s, c);
		}
	}
	s->n_reap = 0;
	s->reap_all = false;
	upgrade_reaped(s);
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
	s->started_at_ms = s->applied_at_ms = s->process_started_at_ms = s->now_wall_ms;
	sup_hash_hex(config_bytes, config_len, s->config_version, sizeof s->config_version);
	s->config_text = malloc(config_len + 1);
	if (!s->config_text)
		return -1;
	memcpy(s->config_text, config_bytes, config_len);
	s->config_text[config_len] = 0;
	s->config_len = config_len;
	return 0;
}

int
sup_start(struct sup *s)
{
	char err[256];
	bool any_bound = false;
	for (size_t i = 0; i < s->cfg.n_clusters; i++) {
		const struct cfg_cluster *cl = &s->cfg.clusters[i];
		struct sup_ccfg *cc = sup_ccfg_new(s, cl, err, sizeof err);
		if (!cc) {
			log_error("cannot prepare cluster", "cluster=%s error=\"%s\"", cl->name, err);
			return -1;
		}
		struct sup_cluster *c = sup_cluster_new(s, cc, true);
		if (!c) {
			sup_ccfg_free(s, cc);
			return -1;
		}
		if (sup_ccfg_listen(s, cc, NULL, err, sizeof err) == -1) {
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
		c->start_pending = true;
	}
	if (!any_bound && s->n_clusters) {
		log_error("no cluster could bind its listeners", "%s", "");
		return -1;
	}
	/* each cluster keeps its configuration in its ccfg: the running
	 * config keeps the [ferry] settings only */
	cfg_drop_clusters(&s->cfg);
	sup_start_batch(s);
	sup_dispatch(s);
	return 0;
}

/* The first generations of the clusters sup_start bound, SUP_START_BATCH
 * a turn (a thousand at once would hold the loop before it ever ran); a
 * cluster that got a generation otherwise meanwhile (a reload, a restart)
 * or is leaving is skipped. */
static void
sup_start_batch(struct sup *s)
{
	size_t done = 0;
	s->start_at = 0;
	for (size_t i = 0; i < s->n_clusters; i++) {
		struct sup_cluster *c = s->clusters[i];
		if (!c->start_pending)
			continue;
		if (done++ == SUP_START_BATCH) {
			s->start_at = s->now_ms;  /* the next turn, after the loop's I/O */
			return;
		}
		c->start_pending = false;
		if (c->st == FSM_C_ACTIVE && !s->stopping)
			sup_gen_start(s, c, c->ccfg, SUP_OWNER_CLUSTER, NULL, s->cfg.init_timeout_ms,
			    "start");
	}
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
	/* an upgrade in progress rolls back, or finishes (engine_upgrade.c) */
	if (!upgrade_on_stop(s, why))
		return;
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
	upgrade_free(s);
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
	free(s->reap_list);
	free(s->dl_heap);
	free(s->dl_dirty);
	free(s->dl_due);
	free(s->evq);
	cfg_free(&s->cfg);
	free(s->config_path);
	free(s->config_text);
	free(s->exec_path);
	sup_upgrade_record_clear(&s->last_upgrade);
}
