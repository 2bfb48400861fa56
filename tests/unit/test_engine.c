/*
 * Unit tests for the supervisor engine (engine*.c, reload.c) with fake I/O:
 * no sockets, no processes, no libev. A small simulated world answers the
 * engine's operations (fake pids, fake listening sockets with their
 * addresses, a clock) and delivers worker events.
 *
 * The generated test runs reloads (all-or-nothing and per-cluster; add,
 * modify, remove) and, at each phase (prepare, held, commit, draining),
 * delivers each worker event (READY, FAILED, EXITED by signal, watchdog
 * miss, deadline, queue full, malformed) to each generation involved, then
 * lets the world settle, checking after every step that:
 *   - the model is consistent (lifecycle view matches the machine state,
 *     no forbidden pair was ever met, live processes match the world),
 *   - the untouched cluster keeps its generation and pid, accepting,
 *   - no listening socket object belongs to two listed clusters and no
 *     address is served by two clusters,
 *   - every reload ends with exactly one recorded outcome,
 *   - at the end nothing is left: every process reaped, every socket closed.
 */
#include <criterion/criterion.h>
#include <sodium.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "supervisor/nodes.h"
#include "supervisor/supervisor.h"
#include "supervisor/tickets.h"

/* ---- the fake world -------------------------------------------------------- */

#define W_MAX_FDS 4096
#define W_MAX_PROCS 1024

struct w_sock {
	bool open;
	int object;               /* the socket object (dups share it) */
	struct cfg_addr addr;
};

struct w_proc {
	struct sup_proc *p;
	pid_t pid;
	bool alive;               /* the "process" runs */
	bool reported;            /* its exit was delivered */
	bool frozen;              /* SIGSTOPped: answers nothing */
	bool got_accept, got_drain, got_stop, killed;
	bool got_probe;           /* reload_upstream_check: answers when not frozen */
	unsigned got_tickets;     /* IPC_TICKET_KEYS received */
	uint64_t tickets_serial;  /* ... the last one's serial */
	bool auto_ready;
	bool queued;              /* spawn returned 1: not started yet */
};

static struct {
	struct sup s;
	uint64_t now;
	struct w_sock fds[W_MAX_FDS];
	int next_fd, next_object;
	struct w_proc procs[W_MAX_PROCS];
	size_t n_procs;
	pid_t next_pid;
	char held_addr[8][64];    /* host:port nobody may bind */
	size_t n_held;
	char fail_spawn[CFG_NAME_MAX];
	size_t reload_ends, reload_answers, op_answers;
	bool stopped;
	bool auto_ready;
	bool queue_spawn;         /* spawns are queued (as the real I/O layer's) */
	bool hold_queue;          /* ... and do not start until this is false */
} W;

static struct w_proc *
w_find(const struct sup_proc *p)
{
	for (size_t i = 0; i < W.n_procs; i++)
		if (W.procs[i].p == p && (W.procs[i].alive || !W.procs[i].reported))
			return &W.procs[i];
	return NULL;
}

static int
w_spawn(struct sup *s, struct sup_proc *p, const struct sup_ccfg *cc, char *err, size_t errlen)
{
	(void)s;
	(void)cc;
	if (W.fail_spawn[0] && strcmp(p->gen->cluster->name, W.fail_spawn) == 0) {
		snprintf(err, errlen, "fork: simulated failure");
		return -1;
	}
	cr_assert_lt(W.n_procs, W_MAX_PROCS);
	struct w_proc *wp = &W.procs[W.n_procs++];
	memset(wp, 0, sizeof *wp);
	wp->p = p;
	wp->pid = ++W.next_pid;
	wp->alive = true;
	wp->auto_ready = W.auto_ready;
	p->chan = wp;
	if (W.queue_spawn) {
		wp->queued = true;
		return 1;
	}
	p->pid = wp->pid;
	return 0;
}

static int
w_send(struct sup *s, struct sup_proc *p, enum ipc_type type, const void *payload, size_t len)
{
	(void)s;
	struct w_proc *wp = p->chan;
	cr_assert_not_null(wp, "send to a process without a channel");
	cr_assert(wp->alive || wp->reported == false, "send to a reaped process");
	cr_assert(!wp->queued || type == IPC_STOP || type == IPC_DRAIN || type == IPC_HANDOVER ||
	    type == IPC_LOG_LEVEL || type == IPC_TICKET_KEYS, "%s sent to a process not started",
	    ipc_type_str(type));
	if (type == IPC_ACCEPT)
		wp->got_accept = true;
	if (type == IPC_DRAIN || type == IPC_HANDOVER)
		wp->got_drain = true;
	if (type == IPC_STOP)
		wp->got_stop = true;
	if (type == IPC_PROBE)
		wp->got_probe = true;
	if (type == IPC_TICKET_KEYS) {
		struct tlskeys k;
		cr_assert_eq(len, sizeof k, "ticket keys: the struct exactly");
		memcpy(&k, payload, sizeof k);
		wp->got_tickets++;
		wp->tickets_serial = k.serial;
	}
	return 0;
}

static void
w_kill(struct sup *s, struct sup_proc *p, int sig)
{
	(void)s;
	struct w_proc *wp = p->chan;
	cr_assert_not_null(wp);
	if (sig == SIGKILL && wp->alive)
		wp->killed = true;
}

static size_t w_frees;

static void
w_proc_free(struct sup *s, struct sup_proc *p)
{
	(void)s;
	struct w_proc *wp = p->chan;
	if (wp) {
		cr_assert(!wp->alive, "a live process was freed");
		wp->p = NULL;
	}
	w_frees++;
}

static bool
w_addr_eq(const struct cfg_addr *a, const struct cfg_addr *b)
{
	return a->port == b->port && strcmp(a->host, b->host) == 0;
}

static int
w_bind(struct sup *s, const struct cfg_addr *a, char *err, size_t errlen)
{
	(void)s;
	char name[300];
	snprintf(name, sizeof name, "%s:%u", a->host, (unsigned)a->port);
	for (size_t i = 0; i < W.n_held; i++)
		if (strcmp(W.held_addr[i], name) == 0) {
			snprintf(err, errlen, "bind %s: Address already in use", name);
			return -1;
		}
	/* the kernel refuses a second bind of a bound address */
	for (int fd = 0; fd < W.next_fd; fd++)
		if (W.fds[fd].open && w_addr_eq(&W.fds[fd].addr, a)) {
			snprintf(err, errlen, "bind %s: Address already in use", name);
			return -1;
		}
	cr_assert_lt(W.next_fd, W_MAX_FDS);
	int fd = W.next_fd++;
	W.fds[fd] = (struct w_sock){ true, ++W.next_object, *a };
	return fd;
}

static int
w_dup(struct sup *s, int fd)
{
	(void)s;
	cr_assert(fd >= 0 && fd < W.next_fd && W.fds[fd].open, "dup of a closed fd %d", fd);
	int nfd = W.next_fd++;
	W.fds[nfd] = W.fds[fd];
	return nfd;
}

static void
w_close(struct sup *s, int fd)
{
	(void)s;
	cr_assert(fd >= 0 && fd < W.next_fd && W.fds[fd].open, "close of a closed fd %d", fd);
	W.fds[fd].open = false;
}

static void
w_answer_reload(struct sup *s, uint64_t waiter, const struct sup_reload_record *rec)
{
	(void)s;
	(void)waiter;
	(void)rec;
	W.reload_answers++;
}

static void
w_answer_op(struct sup *s, uint64_t waiter, const struct sup_answer *a)
{
	(void)s;
	(void)waiter;
	(void)a;
	W.op_answers++;
}

static int
w_persist(struct sup *s, const char *path, const char *text, size_t len, char *err, size_t el)
{
	(void)s; (void)path; (void)text; (void)len; (void)err; (void)el;
	return 0;
}

static void
w_stopped(struct sup *s)
{
	(void)s;
	W.stopped = true;
}

static void
w_reload_end(struct sup *s, const struct sup_reload_record *rec)
{
	(void)s;
	(void)rec;
	W.reload_ends++;
}

static int
w_send_fds(struct sup *s, struct sup_proc *p, enum ipc_type type, const void *payload,
	   size_t len, const int *fds, size_t nfds)
{
	(void)fds;
	(void)nfds;
	return w_send(s, p, type, payload, len);
}

static const struct sup_ops w_ops = {
	.spawn = w_spawn, .send = w_send, .send_fds = w_send_fds, .kill = w_kill, .proc_free = w_proc_free,
	.bind = w_bind, .dup = w_dup, .close = w_close, .answer_reload = w_answer_reload,
	.answer_op = w_answer_op, .persist = w_persist, .stopped = w_stopped,
	.reload_end = w_reload_end,
};

/* ---- configs ------------------------------------------------------------------ */

#define FERRY_HDR \
	"[ferry]\ncontrol_socket = /tmp/x.sock\nadmin_listen = off\n" \
	"drain_timeout = 2s\ninit_timeout = 1s\nworker_watchdog = 1s\n" \
	"crash_loop_limit = 1000\nlog_level = error\n"

static char *
w_cluster(char *buf, size_t len, const char *name, int port, const char *upstream)
{
	snprintf(buf, len, "[cluster %s]\nupstream = %s\nbootstrap = 127.0.0.1:%d\n"
	    "advertised_host = localhost\nbroker_ports = %d-%d\nnode_ids = 1-2\n",
	    name, upstream, port, port + 1, port + 2);
	return buf;
}

/* A configuration of two clusters, n1 and n2 (ports 20000 and 20010, one
 * upstream), with `ferry` added to the [ferry] section. */
static void
w_two_clusters(char *text, size_t len, const char *ferry, const char *n1, const char *n2)
{
	char a[512], b[512];
	snprintf(text, len, FERRY_HDR "%s%s%s", ferry,
	    w_cluster(a, sizeof a, n1, 20000, "127.0.0.1:9092"),
	    w_cluster(b, sizeof b, n2, 20010, "127.0.0.1:9092"));
}

static void
w_parse(const char *text, struct cfg *out)
{
	struct cfg_errors errs;
	cfg_errors_init(&errs);
	int rc = cfg_parse_string("test.ini", text, strlen(text), out, &errs);
	cr_assert_eq(rc, 0, "config does not parse: %s", errs.n ? errs.msg[0] : "?");
	cfg_errors_free(&errs);
}

static void
w_tick(uint64_t ms)
{
	W.now += ms;
	sup_set_clock(&W.s, W.now, 1700000000000ULL + W.now);
	sup_tick(&W.s);
	sup_reap(&W.s);
}

/* ---- invariants ---------------------------------------------------------------- */

static void
w_check(const char *where)
{
	struct sup *s = &W.s;
	cr_assert_eq(s->violations, 0, "%s: a forbidden pair was met", where);
	/* the engine's kept counts say what the rule says from scratch */
	cr_assert_eq(sup_ready_cached(s), sup_ready(s), "%s: readiness counts drifted", where);
	/* ... and so do its cached deadlines */
	uint64_t cached = sup_next_deadline(s);
	sup_deadline_touch_all(s);
	cr_assert_eq(sup_next_deadline(s), cached, "%s: a deadline changed unseen", where);
	/* lifecycle view matches, live processes match the world */
	struct sup_cluster **arrs[2] = { s->clusters, s->limbo };
	size_t ns[2] = { s->n_clusters, s->n_limbo };
	for (int a = 0; a < 2; a++)
		for (size_t i = 0; i < ns[a]; i++) {
			struct sup_cluster *c = arrs[a][i];
			for (struct sup_gen *g = c->gens; g; g = g->next) {
				cr_assert_eq(g->lc.state, fsm_gen_lc(g->st), "%s: %s gen %llu lc %s vs %s",
				    where, c->name, (unsigned long long)g->generation,
				    lc_state_str(g->lc.state), fsm_gstate_str(g->st));
				if (fsm_gen_terminal(g->st))
					cr_assert(g->init_at == 0 && g->watchdog_at == 0, "%s: deadline "
					    "armed on an ended generation", where);
				size_t queued = 0;
				for (size_t k = 0; k < g->n_procs; k++) {
					struct sup_proc *p = &g->procs[k];
					struct w_proc *wp = p->chan;
					if (p->alive)
						cr_assert(wp && !wp->reported, "%s: alive in the model, "
						    "gone in the world", where);
					if (p->queued) {
						queued++;
						cr_assert(p->alive && wp && wp->queued && p->pid == 0,
						    "%s: queued in the model, not in the world", where);
					}
				}
				cr_assert_eq(queued, g->n_queued, "%s: %s gen %llu counts %zu queued, "
				    "has %zu", where, c->name, (unsigned long long)g->generation,
				    g->n_queued, queued);
			}
		}
	/* no socket object in two listed clusters, no address twice */
	for (size_t i = 0; i < s->n_clusters; i++)
		for (size_t j = i + 1; j < s->n_clusters; j++) {
			struct sup_cluster *x = s->clusters[i], *y = s->clusters[j];
			for (size_t k = 0; k < x->n_listeners; k++)
				for (size_t m = 0; m < y->n_listeners; m++) {
					cr_assert(!w_addr_eq(&x->listeners[k].addr, &y->listeners[m].addr),
					    "%s: %s and %s both on %s:%u", where, x->name, y->name,
					    x->listeners[k].addr.host, x->listeners[k].addr.port);
					int fx = x->listeners[k].fd, fy = y->listeners[m].fd;
					if (fx >= 0 && fy >= 0)
						cr_assert_neq(W.fds[fx].object, W.fds[fy].object,
						    "%s: %s and %s share a socket", where, x->name, y->name);
				}
		}
}

/* The bystander keeps its generation, accepting. */
static void
w_check_keep(const char *where, uint64_t gen, pid_t pid)
{
	struct sup_cluster *k = sup_find_cluster(&W.s, "keep");
	cr_assert_not_null(k, "%s: keep is gone", where);
	struct sup_gen *g = sup_cluster_serving(k);
	cr_assert_not_null(g);
	cr_assert_eq(g->generation, gen, "%s: keep was restarted", where);
	cr_assert_eq(g->procs[0].pid, pid, "%s: keep's pid changed", where);
	cr_assert_eq(g->st, FSM_G_ACCEPTING, "%s: keep is %s", where, fsm_gstate_str(g->st));
}

/* ---- driving ------------------------------------------------------------------- */

static void
w_exit(struct w_proc *wp, int status)
{
	wp->alive = false;
	wp->reported = true;
	wp->queued = false;
	if (wp->p)
		sup_on_exit(&W.s, wp->p, status);
}

/* One round of the world reacting to what the engine asked. */
static bool
w_react(void)
{
	bool any = false;
	for (size_t i = 0; i < W.n_procs; i++) {
		struct w_proc *wp = &W.procs[i];
		if (!wp->alive || !wp->p)
			continue;
		if (wp->queued && !wp->killed && !wp->got_stop && !wp->got_drain) {
			if (W.hold_queue)
				continue;
			/* the I/O layer's paced start: one per round */
			wp->queued = false;
			wp->p->pid = wp->pid;
			sup_on_spawned(&W.s, wp->p);
			sup_reap(&W.s);
			return true;
		}
		if (wp->killed) {
			w_exit(wp, SIGKILL);
			any = true;
		} else if (wp->frozen) {
			continue;
		} else if (wp->got_stop || wp->got_drain) {
			w_exit(wp, 0);
			any = true;
		} else if (wp->auto_ready && !wp->p->ready) {
			sup_on_ready(&W.s, wp->p);
			any = true;
		} else if (wp->got_probe && wp->auto_ready) {
			wp->got_probe = false;
			struct ipc_upstream u = { .reachable = 1 };
			sup_on_upstream(&W.s, wp->p, &u);
			any = true;
		} else if (wp->p->ping_seq) {
			sup_on_pong(&W.s, wp->p, wp->p->ping_seq);
		}
		sup_reap(&W.s);
	}
	return any;
}

/* Let everything run its course (timers included) for up to ms. */
static void
w_settle(uint64_t ms, const char *where, uint64_t keep_gen, pid_t keep_pid)
{
	for (uint64_t t = 0; t < ms; t += 50) {
		while (w_react()) {
			w_check(where);
			if (keep_gen)
				w_check_keep(where, keep_gen, keep_pid);
		}
		w_tick(50);
		w_check(where);
		if (keep_gen)
			w_check_keep(where, keep_gen, keep_pid);
	}
}

/* A fresh world running text, started (held_starts: every start queued by
 * the fake I/O layer until W.hold_queue is cleared), nothing settled yet. */
static void
w_begin(const char *text, bool held_starts)
{
	memset(&W, 0, sizeof W);
	W.now = 1000;  /* a monotonic clock is never 0 (0 = "not armed") */
	W.auto_ready = true;
	W.queue_spawn = W.hold_queue = held_starts;
	log_init("test", NULL, LOG_ERROR, false);
	struct cfg cfg;
	w_parse(text, &cfg);
	sup_set_clock(&W.s, W.now, 1700000000000ULL + W.now);
	cr_assert_eq(sup_init(&W.s, &w_ops, &cfg, "test.ini", text, strlen(text)), 0);
	cr_assert_eq(sup_start(&W.s), 0);
}

static void
w_start(const char *text)
{
	w_begin(text, false);
	w_settle(200, "start", 0, 0);
}

static void
w_finish(void)
{
	sup_stop(&W.s, "test over");
	for (size_t i = 0; i < 200 && !W.stopped; i++)
		w_settle(50, "stop", 0, 0);
	cr_assert(W.stopped, "ferryd never finished stopping");
	sup_free(&W.s);
	for (size_t i = 0; i < W.n_procs; i++)
		cr_assert(!W.procs[i].alive, "process %d left behind", (int)W.procs[i].pid);
	for (int fd = 0; fd < W.next_fd; fd++)
		cr_assert(!W.fds[fd].open, "listening socket fd %d left open", fd);
}

/* ---- basic behaviour -------------------------------------------------------------- */

Test(engine, start_serves_and_stop_reaps_everything)
{
	char text[2048];
	w_two_clusters(text, sizeof text, "", "keep", "other");
	w_start(text);
	cr_assert_eq(W.s.n_clusters, 2);
	for (size_t i = 0; i < 2; i++)
		cr_assert_eq(sup_cluster_serving(W.s.clusters[i])->st, FSM_G_ACCEPTING);
	cr_assert(sup_ready(&W.s));
	w_finish();
}

Test(engine, crash_restarts_with_backoff_and_crash_loop_fails)
{
	char a[512], text[2048];
	snprintf(text, sizeof text, "[ferry]\ncontrol_socket = /tmp/x.sock\nadmin_listen = off\n"
	    "crash_loop_limit = 3\ncrash_loop_window = 1m\nstartup_policy = best-effort\n%s",
	    w_cluster(a, sizeof a, "c", 20000, "127.0.0.1:9092"));
	w_start(text);
	struct sup_cluster *c = W.s.clusters[0];
	for (int crash = 0; crash < 3; crash++) {
		struct sup_gen *g = sup_cluster_serving(c);
		cr_assert_eq(g->st, FSM_G_ACCEPTING, "crash %d: %s", crash, fsm_gstate_str(g->st));
		struct w_proc *wp = w_find(&g->procs[0]);
		w_exit(wp, SIGKILL);
		sup_reap(&W.s);
		w_check("crash");
		if (crash < 2)
			w_settle(2000, "restart", 0, 0);
	}
	cr_assert_eq(c->st, FSM_C_FAILED);
	cr_assert_not_null(strstr(c->fail_reason, "crash loop"));
	/* sockets released */
	for (size_t i = 0; i < c->n_listeners; i++)
		cr_assert_eq(c->listeners[i].fd, -1);
	struct sup_answer ans;
	cr_assert_eq(sup_cluster_restart(&W.s, "c", 7, &ans), SUP_DEFERRED);
	w_settle(200, "operator restart", 0, 0);
	cr_assert_eq(c->st, FSM_C_ACTIVE);
	cr_assert_eq(sup_cluster_serving(c)->st, FSM_G_ACCEPTING);
	cr_assert_eq(W.op_answers, 1);
	w_finish();
}

Test(engine, stopped_worker_is_unresponsive_then_killed_and_restarted)
{
	char text[2048];
	w_two_clusters(text, sizeof text, "", "keep", "hung");
	w_start(text);
	struct sup_cluster *k = sup_find_cluster(&W.s, "keep");
	uint64_t kg = sup_cluster_serving(k)->generation;
	pid_t kp = sup_cluster_serving(k)->procs[0].pid;
	struct sup_cluster *h = sup_find_cluster(&W.s, "hung");
	struct sup_gen *g = sup_cluster_serving(h);
	uint64_t gen = g->generation;
	w_find(&g->procs[0])->frozen = true;
	w_settle(1200, "late", kg, kp);
	cr_assert(g->unresponsive, "not reported unresponsive after worker_watchdog");
	cr_assert_not(sup_ready(&W.s));
	cr_assert_eq(h->unresponsive_total, 1);
	w_settle(1500, "dead", kg, kp);
	struct sup_gen *n = sup_cluster_serving(h);
	cr_assert_gt(n->generation, gen, "not restarted");
	cr_assert_eq(n->st, FSM_G_ACCEPTING);
	cr_assert(sup_ready(&W.s));
	w_finish();
}

/* A reload of more clusters than SUP_PREPARE_BATCH prepares them over
 * several loop turns, and of more than SUP_COMMIT_BATCH commits them over
 * several, SUP_COMMIT_PACE_MS apart; a held generation that ends before its commit's turn rolls its
 * cluster back (named in the record), the others commit. */
static size_t
w_held_count(size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += W.s.clusters[i]->gens->owner == SUP_OWNER_RELOAD;
	return k;
}

Test(engine, commits_are_paced_and_a_late_failure_is_recorded)
{
	enum { NCL = 70 };
	static char text[NCL * 200 + 512], text2[NCL * 240 + 512];
	char one[512];
	size_t at = (size_t)snprintf(text, sizeof text, FERRY_HDR);
	size_t at2 = (size_t)snprintf(text2, sizeof text2, FERRY_HDR);
	for (int i = 0; i < NCL; i++) {
		char name[16];
		snprintf(name, sizeof name, "c%02d", i);
		w_cluster(one, sizeof one, name, 20000 + 10 * i, "127.0.0.1:9092");
		at += (size_t)snprintf(text + at, sizeof text - at, "%s", one);
		at2 += (size_t)snprintf(text2 + at2, sizeof text2 - at2, "%sidle_timeout = 9m\n", one);
	}
	w_start(text);
	W.auto_ready = false;
	const struct sup_reload_record *rec;
	cr_assert_eq(sup_reload_start(&W.s, text2, strlen(text2), "api", 1, &rec), SUP_DEFERRED);
	cr_assert_eq(w_held_count(NCL), SUP_PREPARE_BATCH, "prepared in the first turn");
	for (int k = 0; k < 5 && w_held_count(NCL) < NCL; k++)
		w_tick(1);
	cr_assert_eq(w_held_count(NCL), NCL, "the rest not prepared in the next turn");
	struct sup_gen *held[NCL];
	for (int i = 0; i < NCL; i++)
		held[i] = W.s.clusters[i]->gens;
	for (int i = 0; i < NCL; i++)
		sup_on_ready(&W.s, &held[i]->procs[0]);   /* the last one resolves */
	size_t committed = 0;
	for (int i = 0; i < NCL; i++)
		committed += sup_cluster_serving(W.s.clusters[i]) == held[i];
	cr_assert_eq(committed, SUP_COMMIT_BATCH, "%zu committed in the first turn", committed);
	cr_assert_not_null(W.s.reload, "the reload ended before its last commits");
	cr_assert_neq(sup_next_deadline(&W.s), 0, "no turn asked for the next batch");
	/* the next batch waits for its pace, then comes */
	w_tick(SUP_COMMIT_PACE_MS - 1);
	committed = 0;
	for (int i = 0; i < NCL; i++)
		committed += sup_cluster_serving(W.s.clusters[i]) == held[i];
	cr_assert_eq(committed, SUP_COMMIT_BATCH, "%zu committed before the pace", committed);
	w_tick(1);
	committed = 0;
	for (int i = 0; i < NCL; i++)
		committed += sup_cluster_serving(W.s.clusters[i]) == held[i];
	cr_assert_eq(committed, 2 * SUP_COMMIT_BATCH, "%zu committed after the pace", committed);
	/* the last cluster's held worker dies before its turn */
	w_exit(w_find(&held[NCL - 1]->procs[0]), SIGKILL);
	sup_reap(&W.s);
	for (size_t i = 0; i < W.n_procs; i++)
		W.procs[i].auto_ready = true;
	W.auto_ready = true;
	w_settle(300, "paced commits", 0, 0);
	cr_assert_null(W.s.reload);
	cr_assert_eq(W.s.last_reload.status, SUP_RELOAD_FAILED);
	size_t nmod = 0;
	for (char **m = W.s.last_reload.modified; m && *m; m++)
		nmod++;
	cr_assert_eq(nmod, NCL - 1);
	cr_assert_not_null(W.s.last_reload.errors);
	cr_assert_not_null(strstr(W.s.last_reload.errors[0], "c69"), "%s", W.s.last_reload.errors[0]);
	for (int i = 0; i < NCL - 1; i++)
		cr_assert_eq(sup_cluster_serving(W.s.clusters[i]), held[i], "c%02d not committed", i);
	cr_assert_neq(sup_cluster_serving(W.s.clusters[NCL - 1]), held[NCL - 1]);
	cr_assert_eq(sup_cluster_serving(W.s.clusters[NCL - 1])->st, FSM_G_ACCEPTING,
	    "the rolled-back cluster does not serve its old generation");
	w_finish();
}

/* Thousands of clusters start over several loop turns: SUP_START_BATCH
 * first generations per turn; a stop before a cluster's turn starts
 * nothing for it. */
static size_t
w_started(void)
{
	size_t k = 0;
	for (size_t i = 0; i < W.s.n_clusters; i++)
		k += W.s.clusters[i]->gens != NULL;
	return k;
}

Test(engine, start_is_paced_and_a_stop_before_a_turn_starts_nothing)
{
	enum { NCL = 150 };
	static char text[NCL * 200 + 512];
	char one[512];
	size_t at = (size_t)snprintf(text, sizeof text, FERRY_HDR);
	for (int i = 0; i < NCL; i++) {
		char name[16];
		snprintf(name, sizeof name, "c%03d", i);
		w_cluster(one, sizeof one, name, 20000 + 10 * i, "127.0.0.1:9092");
		at += (size_t)snprintf(text + at, sizeof text - at, "%s", one);
	}
	memset(&W, 0, sizeof W);
	W.now = 1000;
	W.auto_ready = true;
	log_init("test", NULL, LOG_ERROR, false);
	struct cfg cfg;
	w_parse(text, &cfg);
	sup_set_clock(&W.s, W.now, 1700000000000ULL + W.now);
	cr_assert_eq(sup_init(&W.s, &w_ops, &cfg, "test.ini", text, strlen(text)), 0);
	cr_assert_eq(sup_start(&W.s), 0);
	cr_assert_eq(w_started(), SUP_START_BATCH, "%zu started in the first turn", w_started());
	cr_assert_eq(sup_next_deadline(&W.s), W.now, "the next batch is not due at once");
	w_tick(1);
	cr_assert_eq(w_started(), 2 * SUP_START_BATCH);
	cr_assert_not(sup_ready(&W.s), "ready with clusters not started");
	sup_stop(&W.s, "test over");   /* before the last ones' turn */
	for (size_t i = 0; i < 200 && !W.stopped; i++)
		w_settle(50, "stop", 0, 0);
	cr_assert(W.stopped);
	cr_assert_eq(W.n_procs, 2 * SUP_START_BATCH, "a worker started after the stop");
	sup_free(&W.s);
}

/* max_connections = auto (the default) reaches a worker as the number the
 * descriptor limit allows; an explicit value as written. */
Test(engine, max_connections_auto_is_a_number_for_the_worker)
{
	char a[512], b[600], text[2048];
	w_cluster(a, sizeof a, "auto", 20000, "127.0.0.1:9092");
	w_cluster(b, sizeof b, "set", 20010, "127.0.0.1:9092");
	strncat(b, "max_connections = 700\n", sizeof b - strlen(b) - 1);
	snprintf(text, sizeof text, FERRY_HDR "%s%s", a, b);
	memset(&W, 0, sizeof W);
	W.now = 1000;
	W.auto_ready = true;
	log_init("test", NULL, LOG_ERROR, false);
	struct cfg cfg;
	w_parse(text, &cfg);
	sup_set_clock(&W.s, W.now, 1700000000000ULL + W.now);
	cr_assert_eq(sup_init(&W.s, &w_ops, &cfg, "test.ini", text, strlen(text)), 0);
	W.s.fd_limit = 2000;
	cr_assert_eq(sup_start(&W.s), 0);
	struct sup_cluster *ca = sup_find_cluster(&W.s, "auto"), *cs = sup_find_cluster(&W.s, "set");
	/* (2000 - 64 - 2 brokers) / 2 */
	cr_assert_eq(ca->ccfg->cl->max_connections, 967);
	cr_assert_not_null(strstr(ca->ccfg->canonical, "\nmax_connections = 967\n"));
	cr_assert_eq(cs->ccfg->cl->max_connections, 700);
	/* no limit known: the default's ceiling */
	struct cfg_cluster one = *ca->ccfg->cl;
	one.max_connections = 0;
	W.s.fd_limit = 0;
	cr_assert_eq(sup_max_connections(&W.s, &one), CFG_MAX_CONNECTIONS_AUTO);
	W.s.fd_limit = 1u << 20;
	cr_assert_eq(sup_max_connections(&W.s, &one), CFG_MAX_CONNECTIONS_AUTO);
	W.s.fd_limit = 50;
	cr_assert_eq(sup_max_connections(&W.s, &one), 1, "never 0 (a worker would refuse all)");
	w_finish();
}

/* The supervisor's own loop is held for longer than worker_watchdog (its
 * workers' answers wait unread): nobody is marked late for it; a worker
 * that really stopped answering still is. */
Test(engine, a_busy_supervisor_does_not_blame_its_workers)
{
	char text[2048];
	w_two_clusters(text, sizeof text, "", "keep", "hung");
	w_start(text);
	struct sup_cluster *k = sup_find_cluster(&W.s, "keep"), *h = sup_find_cluster(&W.s, "hung");
	struct sup_gen *gk = sup_cluster_serving(k), *gh = sup_cluster_serving(h);
	w_settle(600, "pinging", 0, 0);
	w_find(&gh->procs[0])->frozen = true;
	/* a PING goes out, its answer comes but is not read: the loop is held
	 * 3 s (worker_watchdog 1 s) */
	for (int i = 0; i < 40 && !gk->procs[0].unanswered_since_ms; i++)
		w_tick(25);
	cr_assert_neq(gk->procs[0].unanswered_since_ms, 0, "no PING went out");
	w_tick(3000);
	cr_assert(!gk->procs[0].late && !gk->procs[0].dead && !gk->unresponsive,
	    "blamed for the supervisor's own stall");
	cr_assert(!gh->procs[0].late && !gh->procs[0].dead, "judged before the answers were read");
	w_settle(400, "after the stall", 0, 0);
	cr_assert_eq(sup_cluster_serving(k), gk, "a worker that answered was replaced");
	cr_assert(!gk->procs[0].late && !gk->unresponsive, "a worker that answered is late");
	cr_assert_eq(k->unresponsive_total, 0);
	/* the hung one did not answer the PING sent before the stall: dead */
	cr_assert(gh->procs[0].dead || gh->unresponsive, "a worker that stopped answering "
	    "is not reported");
	w_finish();
}

Test(engine, removal_of_a_stopped_worker_ends_by_deadline_and_name_is_free)
{
	char a[512], b[512], text[2048], text2[2048];
	w_cluster(a, sizeof a, "keep", 20000, "127.0.0.1:9092");
	w_cluster(b, sizeof b, "gone", 20010, "127.0.0.1:9092");
	snprintf(text, sizeof text, FERRY_HDR "worker_watchdog = 0\n%s%s", a, b);
	/* worker_watchdog twice is a duplicate key: use a header without it */
	snprintf(text, sizeof text, "[ferry]\ncontrol_socket = /tmp/x.sock\nadmin_listen = off\n"
	    "drain_timeout = 2s\ninit_timeout = 1s\nworker_watchdog = 0\n%s%s", a, b);
	w_start(text);
	struct sup_gen *g = sup_cluster_serving(sup_find_cluster(&W.s, "gone"));
	struct w_proc *wp = w_find(&g->procs[0]);
	wp->frozen = true;
	snprintf(text2, sizeof text2, "[ferry]\ncontrol_socket = /tmp/x.sock\nadmin_listen = off\n"
	    "drain_timeout = 2s\ninit_timeout = 1s\nworker_watchdog = 0\n%s", a);
	const struct sup_reload_record *rec;
	cr_assert_eq(sup_reload_start(&W.s, text2, strlen(text2), "api", 1, &rec), SUP_OK);
	cr_assert_eq(rec->status, SUP_RELOAD_SUCCESS);
	cr_assert_null(sup_find_cluster(&W.s, "gone"), "the removed name is still listed");
	/* drain_timeout 2s + 2s grace: killed by then */
	w_settle(4100, "removal", 0, 0);
	cr_assert(!wp->alive, "a stopped worker outlived drain_timeout + grace");
	/* re-add on the same ports */
	cr_assert_eq(sup_reload_start(&W.s, text, strlen(text), "api", 2, &rec), SUP_DEFERRED);
	w_settle(300, "re-add", 0, 0);
	cr_assert_eq(W.s.last_reload.status, SUP_RELOAD_SUCCESS);
	cr_assert_eq(sup_cluster_serving(sup_find_cluster(&W.s, "gone"))->st, FSM_G_ACCEPTING);
	w_finish();
}

/* x takes y's ports, y moves to ports held by someone else: together. */
Test(engine, per_cluster_swap_with_a_failed_bind_rolls_back_both)
{
	char x[512], y[512], keep[512], text[4096], text2[4096];
	w_cluster(keep, sizeof keep, "keep", 20000, "127.0.0.1:9092");
	w_cluster(x, sizeof x, "x", 20010, "127.0.0.1:9001");
	w_cluster(y, sizeof y, "y", 20020, "127.0.0.1:9002");
	snprintf(text, sizeof text, FERRY_HDR "reload_policy = per-cluster\n%s%s%s", keep, x, y);
	w_start(text);
	struct sup_cluster *cx = sup_find_cluster(&W.s, "x"), *cy = sup_find_cluster(&W.s, "y");
	uint64_t gx = sup_cluster_serving(cx)->generation, gy = sup_cluster_serving(cy)->generation;
	w_cluster(x, sizeof x, "x", 20020, "127.0.0.1:9001");
	w_cluster(y, sizeof y, "y", 20030, "127.0.0.1:9002");
	snprintf(W.held_addr[W.n_held++], 64, "127.0.0.1:20030");
	snprintf(text2, sizeof text2, FERRY_HDR "reload_policy = per-cluster\n%s%s%s", keep, x, y);
	const struct sup_reload_record *rec;
	enum sup_result r = sup_reload_start(&W.s, text2, strlen(text2), "api", 1, &rec);
	if (r == SUP_DEFERRED)
		w_settle(500, "swap", 0, 0);
	cr_assert_eq(W.s.last_reload.status, SUP_RELOAD_FAILED);
	cr_assert_null(W.s.last_reload.modified, "something was committed");
	cr_assert_eq(sup_cluster_serving(cx)->generation, gx);
	cr_assert_eq(sup_cluster_serving(cy)->generation, gy);
	cr_assert_eq(cx->listeners[0].addr.port, 20010);
	cr_assert_eq(cy->listeners[0].addr.port, 20020);
	w_check("after swap");
	w_finish();
}

Test(engine, per_cluster_swap_commits_both)
{
	char x[512], y[512], text[4096], text2[4096];
	w_cluster(x, sizeof x, "x", 20010, "127.0.0.1:9001");
	w_cluster(y, sizeof y, "y", 20020, "127.0.0.1:9002");
	snprintf(text, sizeof text, FERRY_HDR "reload_policy = per-cluster\n%s%s", x, y);
	w_start(text);
	w_cluster(x, sizeof x, "x", 20020, "127.0.0.1:9001");
	w_cluster(y, sizeof y, "y", 20010, "127.0.0.1:9002");
	snprintf(text2, sizeof text2, FERRY_HDR "reload_policy = per-cluster\n%s%s", x, y);
	const struct sup_reload_record *rec;
	if (sup_reload_start(&W.s, text2, strlen(text2), "api", 1, &rec) == SUP_DEFERRED)
		w_settle(500, "swap", 0, 0);
	cr_assert_eq(W.s.last_reload.status, SUP_RELOAD_SUCCESS);
	cr_assert_eq(sup_find_cluster(&W.s, "x")->listeners[0].addr.port, 20020);
	cr_assert_eq(sup_find_cluster(&W.s, "y")->listeners[0].addr.port, 20010);
	w_check("after swap");
	w_finish();
}

/* ---- the generated test ------------------------------------------------------------ */

enum w_phase { PH_PREPARE, PH_HELD, PH_COMMIT, PH_DRAINING, PH_COUNT };
enum w_event { EV_READY, EV_FAILED, EV_SIGKILL, EV_WATCHDOG, EV_DEADLINE, EV_QUEUE_FULL,
	       EV_MALFORMED, EV_COUNT };
static const char *const w_phase_names[] = { "prepare", "held", "commit", "draining" };
static const char *const w_event_names[] = { "ready", "failed", "sigkill", "watchdog",
	"deadline", "queue-full", "malformed" };

static void
w_deliver(struct w_proc *wp, enum w_event e)
{
	struct sup_proc *p = wp->p;
	if (!p || !wp->alive)
		return;
	switch (e) {
	case EV_READY:
		sup_on_ready(&W.s, p);
		break;
	case EV_FAILED:
		sup_on_failed(&W.s, p, "simulated failure");
		break;
	case EV_SIGKILL:
		w_exit(wp, SIGKILL);
		break;
	case EV_WATCHDOG:
	case EV_DEADLINE:
		/* it stops answering anything; time does the rest */
		wp->frozen = true;
		break;
	case EV_QUEUE_FULL:
		sup_on_queue_full(&W.s, p);
		break;
	case EV_MALFORMED:
		sup_on_malformed(&W.s, p, "simulated garbage");
		break;
	case EV_COUNT:
		break;
	}
	sup_reap(&W.s);
}

static void
w_generated(bool per_cluster, enum w_phase ph, enum w_event ev, int target_new, bool queued)
{
	char keep[512], mod[512], del[512], add[512], text[4096], text2[4096];
	char where[160];
	snprintf(where, sizeof where, "%s %s %s %s", per_cluster ? "per-cluster" : "all-or-nothing",
	    w_phase_names[ph], w_event_names[ev], target_new ? "new" : "old");
	w_cluster(keep, sizeof keep, "keep", 20000, "127.0.0.1:9092");
	w_cluster(mod, sizeof mod, "mod", 20010, "127.0.0.1:9093");
	w_cluster(del, sizeof del, "del", 20020, "127.0.0.1:9094");
	/* a deadline alone must end a hung worker: no watchdog then */
	const char *hdr = ev == EV_DEADLINE ? "[ferry]\ncontrol_socket = /tmp/x.sock\n"
	    "admin_listen = off\ndrain_timeout = 2s\ninit_timeout = 1s\nworker_watchdog = 0\n"
	    "crash_loop_limit = 1000\nlog_level = error\n" : FERRY_HDR;
	snprintf(text, sizeof text, "%sreload_policy = %s\n%s%s%s", hdr,
	    per_cluster ? "per-cluster" : "all-or-nothing", keep, mod, del);
	w_start(text);
	W.queue_spawn = queued;
	struct sup_gen *kg = sup_cluster_serving(sup_find_cluster(&W.s, "keep"));
	uint64_t keep_gen = kg->generation;
	pid_t keep_pid = kg->procs[0].pid;
	struct sup_gen *old_mod = sup_cluster_serving(sup_find_cluster(&W.s, "mod"));

	/* modify mod (new upstream), remove del, add add (on del's ports) */
	w_cluster(mod, sizeof mod, "mod", 20010, "127.0.0.1:9093");
	strncat(mod, "max_connections = 999\n", sizeof mod - strlen(mod) - 1);
	w_cluster(add, sizeof add, "add", 20020, "127.0.0.1:9096");
	snprintf(text2, sizeof text2, "%sreload_policy = %s\n%s%s%s", hdr,
	    per_cluster ? "per-cluster" : "all-or-nothing", keep, mod, add);
	W.auto_ready = false;
	size_t ends_before = W.reload_ends;
	const struct sup_reload_record *rec;
	enum sup_result r = sup_reload_start(&W.s, text2, strlen(text2), "api", 1, &rec);
	cr_assert_eq(r, SUP_DEFERRED, "%s: reload did not wait for workers", where);
	w_check(where);
	while (queued && w_react())  /* the paced starts happen */
		w_check(where);
	/* the new generations: mod's and add's */
	struct sup_gen *new_mod = sup_find_cluster(&W.s, "mod")->gens;
	cr_assert_neq(new_mod, old_mod);
	struct w_proc *nm = w_find(&new_mod->procs[0]);
	struct w_proc *na = NULL;
	for (size_t i = 0; i < W.s.n_limbo; i++)
		if (strcmp(W.s.limbo[i]->name, "add") == 0)
			na = w_find(&W.s.limbo[i]->gens->procs[0]);
	cr_assert_not_null(nm);
	cr_assert_not_null(na);
	struct w_proc *om = w_find(&old_mod->procs[0]);

	struct w_proc *target = target_new ? nm : om;
	switch (ph) {
	case PH_PREPARE:
		break;
	case PH_HELD:
		sup_on_ready(&W.s, nm->p);  /* mod held, add still preparing */
		break;
	case PH_COMMIT:
	case PH_DRAINING:
		sup_on_ready(&W.s, nm->p);
		sup_on_ready(&W.s, na->p);  /* commits now */
		if (ph == PH_DRAINING && om->alive)
			cr_assert(om->got_drain || om->got_stop, "%s: old generation not drained",
			    where);
		break;
	case PH_COUNT:
		break;
	}
	sup_reap(&W.s);
	w_check(where);
	w_check_keep(where, keep_gen, keep_pid);
	if (ph == PH_DRAINING)
		om->frozen = ev == EV_WATCHDOG || ev == EV_DEADLINE;  /* old one hangs draining */
	w_deliver(target, ev);
	w_check(where);
	w_check_keep(where, keep_gen, keep_pid);
	/* everyone else behaves from now on */
	for (size_t i = 0; i < W.n_procs; i++)
		if (&W.procs[i] != target)
			W.procs[i].auto_ready = true;
	nm->auto_ready = na->auto_ready = target != nm && target != na;
	w_settle(6000, where, keep_gen, keep_pid);
	cr_assert_null(W.s.reload, "%s: the reload never ended", where);
	cr_assert_eq(W.reload_ends - ends_before, 1, "%s: %zu outcomes recorded", where,
	    W.reload_ends - ends_before);
	cr_assert_eq(W.reload_answers, 1, "%s: answered %zu times", where, W.reload_answers);
	/* what runs matches the outcome */
	const struct sup_reload_record *out = &W.s.last_reload;
	struct sup_cluster *m = sup_find_cluster(&W.s, "mod");
	cr_assert_not_null(m);
	if (out->status == SUP_RELOAD_SUCCESS) {
		cr_assert_not_null(sup_find_cluster(&W.s, "add"), "%s", where);
		cr_assert_null(sup_find_cluster(&W.s, "del"), "%s", where);
		cr_assert_str_eq(m->ccfg->cl->upstream[0].host, "127.0.0.1");
		cr_assert_eq(m->ccfg->cl->max_connections, 999, "%s", where);
	} else if (!per_cluster) {
		cr_assert_null(sup_find_cluster(&W.s, "add"), "%s: rolled back yet added", where);
		cr_assert_not_null(sup_find_cluster(&W.s, "del"), "%s: rolled back yet removed", where);
		cr_assert_neq(m->ccfg->cl->max_connections, 999, "%s", where);
	}
	/* no process hangs around: frozen ones were killed by a deadline (an
	 * accepting one without a watchdog has none: ferryd's stop ends it) */
	w_settle(5000, where, keep_gen, keep_pid);
	for (size_t i = 0; i < W.n_procs; i++)
		if (W.procs[i].alive && W.procs[i].frozen &&
		    !(W.procs[i].p && W.procs[i].p->gen->st == FSM_G_ACCEPTING && ev == EV_DEADLINE))
			cr_assert(false, "%s: a frozen worker (pid %d) was never killed", where,
			    (int)W.procs[i].pid);
	w_finish();
}

Test(engine, generated_events_at_every_reload_phase, .timeout = 120)
{
	for (int pc = 0; pc < 2; pc++)
		for (int ph = 0; ph < PH_COUNT; ph++)
			for (int ev = 0; ev < EV_COUNT; ev++)
				for (int tn = 0; tn < 2; tn++) {
					/* the old generation is only involved once it drains */
					if (!tn && ph != PH_DRAINING && ph != PH_PREPARE)
						continue;
					w_generated(pc, ph, ev, tn, false);
				}
}

/* The same with every start queued by the I/O layer (as ferryd's paced
 * starts are): started one by one, reported by sup_on_spawned. */
Test(engine, generated_events_with_queued_starts, .timeout = 120)
{
	for (int pc = 0; pc < 2; pc++)
		for (int ph = 0; ph < PH_COUNT; ph++)
			for (int ev = 0; ev < EV_COUNT; ev++)
				for (int tn = 0; tn < 2; tn++) {
					if (!tn && ph != PH_DRAINING && ph != PH_PREPARE)
						continue;
					w_generated(pc, ph, ev, tn, true);
				}
}

/* A start that waits its turn longer than init_timeout is not late: the
 * deadline counts from the start itself. */
Test(engine, init_timeout_counts_from_the_start_not_the_request)
{
	char text[2048];
	w_two_clusters(text, sizeof text, "startup_policy = best-effort\n", "a", "b");
	w_begin(text, true);
	struct sup_gen *ga = W.s.clusters[0]->gens, *gb = W.s.clusters[1]->gens;
	cr_assert_eq(ga->n_queued, 1);
	cr_assert_eq(ga->procs[0].pid, 0);
	cr_assert_eq(sup_next_deadline(&W.s), 0, "a deadline runs for queued starts");
	w_settle(3000, "queued", 0, 0);  /* init_timeout is 1s */
	cr_assert_eq(ga->st, FSM_G_STARTING, "failed while its start was queued: %s",
	    fsm_gstate_str(ga->st));
	/* a starts now; b stays queued */
	ga->procs[0].pid = 4242;
	w_find(&ga->procs[0])->queued = false;
	sup_on_spawned(&W.s, &ga->procs[0]);
	cr_assert_eq(ga->init_at, W.now + 1000, "init_timeout from the start");
	w_find(&ga->procs[0])->auto_ready = false;   /* a never answers */
	w_settle(900, "a starting", 0, 0);
	cr_assert_eq(ga->st, FSM_G_STARTING);
	w_settle(200, "a late", 0, 0);
	cr_assert_eq(ga->st, FSM_G_FAILED, "not failed at init_timeout after its start");
	cr_assert_eq(gb->st, FSM_G_STARTING);
	W.hold_queue = false;
	w_settle(300, "b", 0, 0);
	cr_assert_eq(gb->st, FSM_G_ACCEPTING);
	w_finish();
}

/* A queued start that cannot happen fails its generation like a worker
 * that said FAILED; a queued start stopped (ferryd stopping) never runs. */
Test(engine, queued_start_fails_or_is_cancelled)
{
	char text[2048];
	w_two_clusters(text, sizeof text, "startup_policy = best-effort\n", "a", "b");
	w_begin(text, true);
	struct sup_cluster *ca = W.s.clusters[0];
	struct sup_gen *ga = ca->gens;
	struct w_proc *wa = w_find(&ga->procs[0]);
	wa->alive = false;
	wa->reported = true;
	wa->queued = false;
	sup_on_spawn_failed(&W.s, &ga->procs[0], "clone: Resource temporarily unavailable");
	sup_reap(&W.s);
	w_check("spawn failed");
	cr_assert_eq(ga->st, FSM_G_FAILED);
	cr_assert_not_null(strstr(ga->lc.reason, "clone"), "%s", ga->lc.reason);
	cr_assert_eq(ga->n_queued, 0);
	/* b is still queued when ferryd stops: cancelled, never started */
	struct sup_proc *pb = &W.s.clusters[1]->gens->procs[0];
	struct w_proc *wb = w_find(pb);
	cr_assert(wb->queued);
	cr_assert_eq(pb->pid, 0);
	sup_stop(&W.s, "test over");
	for (size_t i = 0; i < 50 && !W.stopped; i++)
		w_settle(50, "stop", 0, 0);
	cr_assert(W.stopped);
	cr_assert(!wb->alive && wb->reported, "a cancelled start was never reported");
	sup_free(&W.s);
}

/* The serving generation of a cluster crashes while a reload prepares a
 * change of that cluster and waits for another one: the crash restart
 * (old configuration) accepts meanwhile; at commit the reload's generation
 * serves the new configuration and the restarted one drains. */
Test(engine, crash_restart_during_a_reload_does_not_win_over_the_commit)
{
	char a[512], b[512], text[4096], text2[4096];
	w_cluster(a, sizeof a, "a", 20010, "127.0.0.1:9001");
	w_cluster(b, sizeof b, "b", 20020, "127.0.0.1:9002");
	snprintf(text, sizeof text, FERRY_HDR "%s%s", a, b);
	w_start(text);
	struct sup_cluster *ca = sup_find_cluster(&W.s, "a"), *cb = sup_find_cluster(&W.s, "b");
	struct sup_gen *old_a = sup_cluster_serving(ca);
	w_cluster(a, sizeof a, "a", 20010, "127.0.0.1:9001");
	strncat(a, "max_connections = 999\n", sizeof a - strlen(a) - 1);
	w_cluster(b, sizeof b, "b", 20020, "127.0.0.1:9002");
	strncat(b, "max_connections = 999\n", sizeof b - strlen(b) - 1);
	snprintf(text2, sizeof text2, FERRY_HDR "%s%s", a, b);
	W.auto_ready = false;
	const struct sup_reload_record *rec;
	cr_assert_eq(sup_reload_start(&W.s, text2, strlen(text2), "api", 1, &rec), SUP_DEFERRED);
	struct sup_gen *new_a = ca->gens, *new_b = cb->gens;
	sup_on_ready(&W.s, &new_a->procs[0]);                                 /* a held */
	w_exit(w_find(&old_a->procs[0]), SIGKILL);                            /* a crashes */
	sup_reap(&W.s);
	for (size_t i = 0; i < W.n_procs; i++)
		W.procs[i].auto_ready = W.procs[i].p != &new_b->procs[0];  /* b stays slow */
	W.auto_ready = true;  /* the crash restart comes up */
	w_settle(400, "restart", 0, 0);  /* init_timeout is 1s */
	struct sup_gen *restarted = sup_cluster_serving(ca);
	cr_assert(restarted != old_a && restarted != new_a, "no crash restart happened");
	cr_assert_eq(restarted->st, FSM_G_ACCEPTING);
	cr_assert_eq(new_a->st, FSM_G_HELD, "the restart touched the reload's generation: %s",
	    fsm_gstate_str(new_a->st));
	sup_on_ready(&W.s, &new_b->procs[0]);                                 /* b ready: commit */
	w_settle(500, "commit", 0, 0);
	cr_assert_eq(W.s.last_reload.status, SUP_RELOAD_SUCCESS, "%s",
	    W.s.last_reload.errors ? W.s.last_reload.errors[0] : "?");
	cr_assert_eq(sup_cluster_serving(ca), new_a, "a serves the restarted old configuration");
	cr_assert_eq(new_a->st, FSM_G_ACCEPTING);
	cr_assert_eq(ca->ccfg->cl->max_connections, 999);
	cr_assert(restarted->st == FSM_G_DRAINING || restarted->st == FSM_G_STOPPED);
	cr_assert_eq(W.s.violations, 0);
	w_finish();
}

/* reload_upstream_check: a modified cluster whose upstream changed commits
 * only once its new generation answered the probe; without an answer the
 * reload fails at init_timeout, naming it, and the old generation serves on. */
Test(engine, changed_upstream_must_answer_before_commit)
{
	char a[512], text[2048], text2[2048];
	w_cluster(a, sizeof a, "a", 20010, "127.0.0.1:9001");
	snprintf(text, sizeof text, FERRY_HDR "%s", a);
	w_start(text);
	struct sup_cluster *ca = sup_find_cluster(&W.s, "a");
	struct sup_gen *old = sup_cluster_serving(ca);
	w_cluster(a, sizeof a, "a", 20010, "127.0.0.1:9011");
	snprintf(text2, sizeof text2, FERRY_HDR "%s", a);
	/* 1: the new generation becomes ready but its upstream never answers */
	W.auto_ready = true;
	const struct sup_reload_record *rec;
	cr_assert_eq(sup_reload_start(&W.s, text2, strlen(text2), "api", 1, &rec), SUP_DEFERRED);
	struct sup_gen *g = ca->gens;
	struct w_proc *wp = NULL;
	w_react();
	wp = w_find(&g->procs[0]);
	cr_assert(g->need_probe && wp->got_probe, "no probe sent for a changed upstream");
	wp->auto_ready = false;   /* keeps quiet about the probe */
	w_settle(1500, "probe", 0, 0);
	cr_assert_eq(W.s.last_reload.status, SUP_RELOAD_FAILED);
	cr_assert_not_null(strstr(W.s.last_reload.errors[0], "new upstream"), "%s",
	    W.s.last_reload.errors[0]);
	cr_assert_eq(sup_cluster_serving(ca), old);
	cr_assert_eq(ca->ccfg->cl->upstream[0].port, 9001);
	/* 2: it answers: committed */
	cr_assert_eq(sup_reload_start(&W.s, text2, strlen(text2), "api", 2, &rec), SUP_DEFERRED);
	w_settle(300, "probe ok", 0, 0);
	cr_assert_eq(W.s.last_reload.status, SUP_RELOAD_SUCCESS);
	cr_assert_eq(ca->ccfg->cl->upstream[0].port, 9011);
	cr_assert_neq(sup_cluster_serving(ca), old);
	w_finish();
}

/* ---- learned brokers and ticket keys: what is kept across generations --------- */

static size_t
w_learn(struct sup_proc *p, int32_t id, const char *host, int32_t port)
{
	uint8_t buf[512];
	struct nodemap_writer wr;
	nodemap_writer_init(&wr, buf, sizeof buf, 0);
	struct nodemap_entry e = { .node_id = id, .port = port };
	snprintf(e.host, sizeof e.host, "%s", host);
	cr_assert(nodemap_writer_add(&wr, &e));
	size_t len = nodemap_writer_finish(&wr);
	sup_on_node_learned(&W.s, p, buf, len);
	return len;
}

static size_t
w_nodes_for(struct sup_cluster *c, struct sup_gen *g)
{
	uint8_t buf[4096];
	size_t from = 0, n = 0, len;
	while ((len = sup_nodes_payload(c, g, c->ccfg->cl, &from, buf, sizeof buf)) > 0) {
		struct nodemap_reader r;
		char err[128];
		cr_assert_eq(nodemap_reader_init(&r, buf, len, 16, err, sizeof err), 0, "%s", err);
		n += r.count;
	}
	return n;
}

Test(engine, ticket_keys_and_learned_brokers_outlive_generations)
{
	char a[512], b[512], text[2048];
	w_cluster(a, sizeof a, "t", 20000, "127.0.0.1:9092");
	w_cluster(b, sizeof b, "p", 20010, "127.0.0.1:9092");
	snprintf(text, sizeof text, FERRY_HDR "%s%s", a, b);
	cr_assert_geq(sodium_init(), 0);
	w_start(text);
	struct sup_cluster *t = sup_find_cluster(&W.s, "t"), *pl = sup_find_cluster(&W.s, "p");
	const struct tlskeys *k = tickets_of(t);  /* as a TLS cluster's first spawn does */
	/* (the fake world has no certificates: t is plaintext, so a rotation
	 * would wipe its keys; say it is TLS for the model) */
	t->ccfg->cl->tls = true;
	cr_assert_not_null(k);
	struct sup_gen *g1 = sup_cluster_serving(t);
	w_learn(&g1->procs[0], 1, "broker-1.up", 9093);
	w_learn(&g1->procs[0], 7, "no-port.up", 9099);  /* no broker port: ignored */
	cr_assert_eq(t->nodes.n, 1);

	/* a reload that keeps the upstream: the same keys, the same map */
	char a2[600], text2[2048];
	snprintf(a2, sizeof a2, "%sidle_timeout = 9m\n", a);
	snprintf(text2, sizeof text2, FERRY_HDR "%s%s", a2, b);
	const struct sup_reload_record *rec;
	sup_reload_start(&W.s, text2, strlen(text2), "api", 1, &rec);
	w_settle(300, "reload", 0, 0);
	cr_assert_eq(W.s.last_reload.status, SUP_RELOAD_SUCCESS);
	cr_assert_eq(sup_find_cluster(&W.s, "t"), t);
	struct sup_gen *g2 = sup_cluster_serving(t);
	cr_assert_gt(g2->generation, g1->generation);
	cr_assert_eq(t->tickets, k, "keys kept across the reload");
	cr_assert_eq(k->serial, 1);
	cr_assert_eq(w_nodes_for(t, g2), 1, "the new generation gets the learned broker");

	/* rotation: every live worker of t, none of p */
	t->ccfg->cl->tls = true;  /* (the reloaded configuration, as above) */
	sup_tickets_rotate(&W.s);
	cr_assert_eq(k->serial, 2);
	struct w_proc *wt = w_find(&g2->procs[0]), *wp = w_find(&sup_cluster_serving(pl)->procs[0]);
	cr_assert_eq(wt->got_tickets, 1);
	cr_assert_eq(wt->tickets_serial, 2);
	cr_assert_eq(wp->got_tickets, 0, "a cluster without keys gets none");

	/* a reload to another upstream: the map is not carried over */
	char a3[600], text3[2048];
	w_cluster(a3, sizeof a3, "t", 20000, "127.0.0.1:9192");
	snprintf(text3, sizeof text3, FERRY_HDR "reload_upstream_check = off\n%s%s", a3, b);
	sup_reload_start(&W.s, text3, strlen(text3), "api", 2, &rec);
	w_settle(300, "reload upstream", 0, 0);
	cr_assert_eq(W.s.last_reload.status, SUP_RELOAD_SUCCESS);
	struct sup_gen *g3 = sup_cluster_serving(t);
	cr_assert_gt(g3->generation, g2->generation);
	cr_assert_eq(w_nodes_for(t, g3), 0, "another upstream gets nothing");
	/* the draining old generation cannot put its upstream's brokers back */
	w_learn(&g3->procs[0], 2, "new-2.up", 9094);
	if (sup_gen_alive(g2))
		w_learn(&g2->procs[0], 1, "broker-1.up", 9093);
	cr_assert_eq(w_nodes_for(t, g3), 1);
	cr_assert_str_eq(t->nodes.v[0].host, "new-2.up");
	cr_assert_eq(t->tickets, k, "keys kept");
	/* this configuration has no TLS: the next rotation wipes the keys */
	sup_tickets_rotate(&W.s);
	cr_assert_null(t->tickets);
	w_finish();
}
