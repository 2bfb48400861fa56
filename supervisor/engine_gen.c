/*
 * engine_gen — the engine's generations: starting their worker processes,
 * sending to them, the generation machine's actions (fsm.h), crash
 * restarts of one process among several, and the watchdog. Part of the
 * engine (engine_priv.h); pure like engine.c.
 */
#include "supervisor/engine_priv.h"

#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

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

void
sup_gen_fail_now(struct sup *s, struct sup_gen *g, const char *why)
{
	/* Could not start: a FAILED report and an exit, as if it had said so. */
	sup_post_gen(s, g, FSM_GE_FAILED, why);
	if (!sup_gen_alive(g))
		sup_post_gen(s, g, FSM_GE_EXITED, why);
}

/* Process p runs now (started at once, or its queued start happened):
 * its watchdog and crash-loop clocks start here. */
static void
sup_proc_started(struct sup *s, struct sup_proc *p)
{
	struct sup_gen *g = p->gen;
	struct sup_cluster *c = g->cluster;
	p->last_answer_ms = s->now_ms;
	if (g->owner == SUP_OWNER_CLUSTER)
		crash_started(&c->crash, s->now_ms);
	log_info("worker started", "cluster=%s gen=%llu index=%u pid=%d why=\"%s\"%s", c->name,
	    (unsigned long long)g->generation, p->index, (int)p->pid,
	    p->starts > 1 ? "replaces a crashed worker" : g->start_why,
	    g->owner == SUP_OWNER_RELOAD ? " held=true" : "");
}

/* Start process p of its generation with cc (a first start, or the
 * replacement of a crashed sibling in the same slot): at once, or queued
 * by the I/O layer (then sup_on_spawned says when it ran). 0, or -1 with
 * the reason in err. */
static int
sup_proc_spawn(struct sup *s, struct sup_proc *p, const struct sup_ccfg *cc, char *err,
	       size_t errlen)
{
	struct sup_cluster *c = p->gen->cluster;
	p->restart_at = 0;
	p->ready = p->late = p->dead = false;
	p->ping_seq = 0;
	p->unanswered_since_ms = p->last_ping_ms = 0;
	p->pid = 0;
	p->last_answer_ms = s->now_ms;
	p->starts++;
	char perr[160];
	int rc = s->ops->spawn(s, p, cc, perr, sizeof perr);
	if (rc == -1) {
		snprintf(err, errlen, "cannot start worker: %s", perr);
		log_error("cannot start worker", "cluster=%s gen=%llu index=%u reason=\"%s\"", c->name,
		    (unsigned long long)p->gen->generation, p->index, perr);
		return -1;
	}
	p->alive = true;
	if (rc == 1) {
		p->queued = true;
		p->gen->n_queued++;
		return 0;
	}
	sup_proc_started(s, p);
	return 0;
}

void
sup_on_spawned(struct sup *s, struct sup_proc *p)
{
	struct sup_gen *g = p->gen;
	if (!p->queued)
		return;
	p->queued = false;
	g->n_queued--;
	sup_proc_started(s, p);
	/* init_timeout counts from the start of the last process, not from
	 * when the start was asked for (a paced start may wait its turn) */
	if (g->init_at && !g->n_queued)
		g->init_at = s->now_ms + g->init_timeout_ms;
	sup_deadline_touch(g->cluster);
}

void
sup_on_spawn_failed(struct sup *s, struct sup_proc *p, const char *err)
{
	struct sup_gen *g = p->gen;
	char why[256];
	snprintf(why, sizeof why, "cannot start worker: %s", err);
	log_error("cannot start worker", "cluster=%s gen=%llu index=%u reason=\"%s\"",
	    g->cluster->name, (unsigned long long)g->generation, p->index, err);
	if (p->queued) {
		p->queued = false;
		g->n_queued--;
	}
	sup_deadline_touch(g->cluster);
	p->alive = false;
	/* as if it had said FAILED and exited: a generation not yet accepting
	 * fails, a replacement among serving siblings is one more crash */
	if (!g->accepted)
		sup_post_proc(s, p, FSM_GE_FAILED, why);
	sup_post_proc(s, p, sup_gen_alive(g) ? FSM_GE_PROC_EXITED : FSM_GE_EXITED, why);
	sup_reap_mark(s, g->cluster);
	sup_dispatch(s);
}

/* A generation of c with cc, not started yet (its init deadline runs). */
struct sup_gen *
sup_gen_new(struct sup *s, struct sup_cluster *c, const struct sup_ccfg *cc, enum sup_owner owner,
	    struct sup_reload_item *it, uint64_t init_timeout_ms, const char *why)
{
	struct sup_gen *g = calloc(1, sizeof *g);
	if (!g) {
		log_error("out of memory starting a generation", "cluster=%s", c->name);
		return NULL;
	}
	g->n_procs = sup_workers_of(cc->cl);
	g->procs = calloc(g->n_procs, sizeof *g->procs);
	if (!g->procs) {
		free(g);
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
	snprintf(g->start_why, sizeof g->start_why, "%s", why);
	for (size_t i = 0; i < g->n_procs; i++) {
		g->procs[i].gen = g;
		g->procs[i].index = (unsigned)i;
	}
	g->init_timeout_ms = init_timeout_ms;
	g->init_at = s->now_ms + init_timeout_ms;
	g->next = c->gens;
	c->gens = g;
	sup_ready_touch(s, c);
	sup_deadline_touch(c);
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
	if (owner == SUP_OWNER_CLUSTER)
		c->start_pending = false;  /* it has its generation */
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

void
sup_gen_kill(struct sup *s, struct sup_gen *g)
{
	for (size_t i = 0; i < g->n_procs; i++)
		if (g->procs[i].alive)
			s->ops->kill(s, &g->procs[i], SIGKILL);
}

/* A worker of c crashed: the crash policy says after what delay it is
 * restarted, or (true) that c is in a crash loop: then c is failed. */
bool
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
	if (sup_proc_spawn(s, p, g->cluster->ccfg, err, sizeof err) == -1)
		sup_post_proc(s, p, FSM_GE_PROC_EXITED, err);
}

void
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
		else if (g->owner == SUP_OWNER_UPGRADE)
			upgrade_gen_held(s, g);
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
		upgrade_gen_gone(s, c->last_replacement.handed_over, c->last_replacement.drained,
		    c->last_replacement.forced);
	}
	if (a & FSM_GA_ENDED) {
		if (g->owner == SUP_OWNER_RELOAD)
			reload_gen_ended(s, g, why);
		else if (g->owner == SUP_OWNER_UPGRADE)
			upgrade_gen_ended(s, g, why);
		else if (g->owner == SUP_OWNER_CLUSTER)
			sup_cluster_gen_ended(s, g, (a & FSM_GA_CRASHED) != 0, why);
	}
	sup_ready_touch(s, c);
	sup_deadline_touch(c);
	sup_reap_mark(s, c);
}

void
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
	if (g->init_at && now >= g->init_at && !g->n_queued) {
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
		/* This check comes late: the supervisor's own loop was held (its
		 * workers' answers may be waiting, unread, in their channels).
		 * Nobody is judged on that: ping, read, judge a moment later. */
		bool busy = now - g->watchdog_at > SUP_WD_LAG_MS;
		for (size_t i = 0; i < g->n_procs; i++) {
			struct sup_proc *p = &g->procs[i];
			if (!p->alive || p->queued)
				continue;
			/* a ready worker is late from its oldest unanswered PING; a
			 * replacement still starting (no init deadline) from its start */
			uint64_t since = p->ready ? p->unanswered_since_ms : p->last_answer_ms;
			uint64_t age = since && !busy ? now - since : 0;
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
			p->last_ping_ms = now;
			if (!p->unanswered_since_ms)
				p->unanswered_since_ms = now;
		}
		/* next ping, or the moment a process becomes late or dead,
		 * whichever comes first: the report is on time, not a period late */
		uint64_t next = now + (busy ? SUP_WD_RECHECK_MS : sup_watchdog_period(s));
		for (size_t i = 0; i < g->n_procs; i++) {
			struct sup_proc *p = &g->procs[i];
			if (!p->alive || p->queued || p->dead)
				continue;
			uint64_t since = p->ready ? p->unanswered_since_ms : p->last_answer_ms;
			if (!since)
				continue;
			uint64_t due = since + (p->late ? 2 * w : w);
			if (due > now && due < next)
				next = due;
		}
		g->watchdog_at = next;
	}
}
