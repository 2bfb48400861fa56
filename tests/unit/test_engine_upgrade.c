/*
 * test_engine_upgrade — an upgrade of ferryd itself (engine_upgrade*.c,
 * docs/design.md §11) between two engines in one process: the predecessor
 * and the successor are two struct sup driven with fake I/O, their channel
 * a queue of messages, the state record the real one (staterec_encode on
 * one side, staterec_decode and sup_upgrade_restore on the other), the
 * listening sockets a table of fake descriptors both see. No sockets, no
 * processes, no libev.
 *
 * Checked: a commit carries generation numbering, crash counters, a failed
 * cluster as it is, learned brokers and counters, and every old
 * generation is handed over and the predecessor exits only once they are
 * gone; a crash restart waits while the upgrade prepares and the
 * successor runs it; a successor whose workers fail, a cluster of the
 * predecessor that crashes, and a successor that never answers all roll
 * back with the serving generations untouched; reloads, drains and
 * restarts are refused meanwhile.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "supervisor/nodes.h"
#include "supervisor/promfam.h"
#include "supervisor/staterec.h"
#include "supervisor/supervisor.h"
#include "supervisor/upgproto.h"

#define W_FDS 512
#define W_PROCS 256
#define W_MSGS 512

struct w_proc {
	struct sup_proc *p;
	struct sup *s;
	pid_t pid;
	bool alive, reported, killed;
	bool got_accept, got_handover, got_stop;
	bool fail_start;          /* says FAILED instead of READY */
};

struct w_msg {
	struct sup *to;
	uint32_t type;
	uint8_t payload[4096];
	size_t len;
};

static struct {
	struct sup pred, succ;
	bool succ_started;
	uint64_t now;
	bool fd_open[W_FDS];
	int next_fd;
	struct w_proc procs[W_PROCS];
	size_t n_procs;
	pid_t next_pid;
	struct w_msg q[W_MSGS];
	size_t qh, qn;
	bool silent;              /* the successor never answers */
	bool succ_workers_fail;
	bool hold_succ;           /* the successor's workers are not READY yet */
	int exit_code[2];
	bool exited[2];
	size_t answers;
	enum sup_upgrade_status answered;
	unsigned notified_mainpid, notified_ready;
} W;

static int
w_side(const struct sup *s)
{
	return s == &W.succ;
}

/* ---- workers and sockets ---------------------------------------------------------- */

static int
w_spawn(struct sup *s, struct sup_proc *p, const struct sup_ccfg *cc, char *err, size_t errlen)
{
	(void)cc; (void)err; (void)errlen;
	cr_assert_lt(W.n_procs, W_PROCS);
	struct w_proc *wp = &W.procs[W.n_procs++];
	memset(wp, 0, sizeof *wp);
	wp->p = p;
	wp->s = s;
	wp->pid = ++W.next_pid;
	wp->alive = true;
	wp->fail_start = w_side(s) && W.succ_workers_fail;
	p->pid = wp->pid;
	p->chan = wp;
	return 0;
}

static int
w_send(struct sup *s, struct sup_proc *p, enum ipc_type type, const void *payload, size_t len)
{
	(void)s; (void)payload; (void)len;
	struct w_proc *wp = p->chan;
	if (type == IPC_ACCEPT)
		wp->got_accept = true;
	if (type == IPC_HANDOVER || type == IPC_DRAIN)
		wp->got_handover = true;
	if (type == IPC_STOP)
		wp->got_stop = true;
	return 0;
}

static int
w_send_fds(struct sup *s, struct sup_proc *p, enum ipc_type type, const void *payload,
	   size_t len, const int *fds, size_t nfds)
{
	(void)fds; (void)nfds;
	return w_send(s, p, type, payload, len);
}

static void
w_kill(struct sup *s, struct sup_proc *p, int sig)
{
	(void)s;
	struct w_proc *wp = p->chan;
	if (sig == SIGKILL && wp && wp->alive)
		wp->killed = true;
}

static void
w_proc_free(struct sup *s, struct sup_proc *p)
{
	(void)s;
	struct w_proc *wp = p->chan;
	if (wp)
		wp->p = NULL;
}

static int
w_bind(struct sup *s, const struct cfg_addr *a, char *err, size_t errlen)
{
	(void)s; (void)a; (void)err; (void)errlen;
	cr_assert_lt(W.next_fd, W_FDS);
	W.fd_open[W.next_fd] = true;
	return W.next_fd++;
}

static int
w_dup(struct sup *s, int fd)
{
	(void)s;
	cr_assert(W.fd_open[fd], "dup of closed fd %d", fd);
	W.fd_open[W.next_fd] = true;
	return W.next_fd++;
}

static void
w_close(struct sup *s, int fd)
{
	(void)s;
	cr_assert(fd >= 0 && fd < W.next_fd && W.fd_open[fd], "close of closed fd %d", fd);
	W.fd_open[fd] = false;
}

static int
w_persist(struct sup *s, const char *path, const char *text, size_t len, char *err, size_t el)
{
	(void)s; (void)path; (void)text; (void)len; (void)err; (void)el;
	return 0;
}

/* ---- the channel ------------------------------------------------------------------ */

static void
w_queue(struct sup *to, uint32_t type, const void *payload, size_t len)
{
	cr_assert_lt(W.qn, W_MSGS);
	cr_assert_leq(len, sizeof W.q[0].payload);
	struct w_msg *m = &W.q[(W.qh + W.qn++) % W_MSGS];
	m->to = to;
	m->type = type;
	m->len = len;
	if (len)
		memcpy(m->payload, payload, len);
}

static struct sup *
w_peer(struct sup *s)
{
	return s == &W.pred ? &W.succ : &W.pred;
}

static int
u_spawn(struct sup *s, int32_t *pid, char *err, size_t errlen)
{
	(void)s; (void)err; (void)errlen;
	*pid = 4242;
	if (!W.silent) {
		struct upg_hello h;
		memset(&h, 0, sizeof h);
		memcpy(h.magic, UPG_MAGIC, 8);
		h.hs_version = UPG_HS_VERSION;
		h.accept = 1;
		h.record = STATEREC_MAX;
		h.conn_min = h.conn_max = IPC_CONN_RECORD_VERSION;
		snprintf(h.version, sizeof h.version, "9.9.9");
		snprintf(h.build_id, sizeof h.build_id, "beef");
		w_queue(&W.pred, UPG_HELLO, &h, sizeof h);
	}
	return 0;
}

static const struct sup_ops w_ops;

/* The successor's start: what successor_io.c does, without I/O. */
static int
u_send_state(struct sup *s, uint32_t record, char *err, size_t errlen)
{
	(void)err; (void)errlen;
	struct staterec_io io = { .notify_socket = "" };
	size_t len;
	char *text = staterec_encode(s, &io, record, &len);
	cr_assert_not_null(text);
	struct staterec rec;
	char e[256];
	cr_assert_eq(staterec_decode(text, len, record, &rec, e, sizeof e), 0, "%s", e);
	free(text);
	int fds[64];
	size_t n = staterec_listener_fds(s, fds, 64);
	cr_assert_eq(n, rec.n_fds);
	for (size_t i = 0; i < n; i++)
		fds[i] = w_dup(s, fds[i]);   /* SCM_RIGHTS: the same socket object */
	struct cfg cfg;
	struct cfg_errors ce;
	cfg_errors_init(&ce);
	cr_assert_eq(cfg_parse_string(rec.config_path, rec.config_text, rec.config_len, &cfg, &ce), 0);
	cfg_errors_free(&ce);
	memset(&W.succ, 0, sizeof W.succ);
	sup_set_clock(&W.succ, W.now, 1700000000000ULL + W.now);
	W.succ.pid = 4242;
	cr_assert_eq(sup_init(&W.succ, &w_ops, &cfg, rec.config_path, rec.config_text,
	    rec.config_len), 0);
	W.succ_started = true;
	w_queue(&W.pred, UPG_VALID, NULL, 0);
	cr_assert_eq(sup_upgrade_restore(&W.succ, &rec, fds, n, NULL, 0, e, sizeof e), 0, "%s", e);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(fds[i], -1, "socket %zu not taken", i);
	staterec_free(&rec);
	return 0;
}

static int
u_send(struct sup *s, uint32_t type, const void *payload, size_t len)
{
	if (s == &W.pred && (!W.succ_started || W.exited[1]))
		return 0;  /* nobody reads */
	w_queue(w_peer(s), type, payload, len);
	return 0;
}

static int
u_send_conn(struct sup *s, const void *payload, size_t len, const int *fds, size_t nfds)
{
	(void)fds; (void)nfds;
	return u_send(s, UPG_CONN, payload, len);
}

static void
u_end(struct sup *s)
{
	/* the successor closes its end after BYE: nothing to kill */
	if (s == &W.pred && W.succ_started && !W.exited[1]) {
		sup_kill_all(&W.succ);
		W.exited[1] = true;
		W.exit_code[1] = 137;
	}
}

static void
u_admin(struct sup *s, enum sup_upgrade_admin how)
{
	(void)s; (void)how;
}

static void
u_notify(struct sup *s, enum sup_upgrade_notify what, int32_t pid, const char *status)
{
	(void)s; (void)pid; (void)status;
	if (what == SUP_UPG_NOTIFY_MAINPID)
		W.notified_mainpid++;
	if (what == SUP_UPG_NOTIFY_READY)
		W.notified_ready++;
}

static void
u_answer(struct sup *s, uint64_t waiter, const struct sup_upgrade_record *rec)
{
	(void)s; (void)waiter;
	W.answers++;
	W.answered = rec->status;
}

static void
u_nothing(struct sup *s)
{
	(void)s;
}

static void
u_exit(struct sup *s, int code)
{
	W.exited[w_side(s)] = true;
	W.exit_code[w_side(s)] = code;
}

static const struct sup_upgrade_ops u_ops = {
	.spawn = u_spawn, .send_state = u_send_state, .send = u_send, .send_conn = u_send_conn,
	.end = u_end, .admin = u_admin, .notify = u_notify, .answer = u_answer,
	.commit = u_nothing, .ready = u_nothing, .exit = u_exit,
};

static const struct sup_ops w_ops = {
	.spawn = w_spawn, .send = w_send, .send_fds = w_send_fds, .kill = w_kill,
	.proc_free = w_proc_free, .bind = w_bind, .dup = w_dup, .close = w_close,
	.persist = w_persist, .upgrade = &u_ops,
};

/* ---- driving -------------------------------------------------------------------- */

static bool
w_live(int side)
{
	return side ? W.succ_started && !W.exited[1] : !W.exited[0];
}

/* Messages, then workers: one round. */
static bool
w_react(void)
{
	bool any = false;
	while (W.qn) {
		struct w_msg m = W.q[W.qh];
		W.qh = (W.qh + 1) % W_MSGS;
		W.qn--;
		if (!w_live(w_side(m.to)))
			continue;
		struct ipc_msg msg;
		memset(&msg, 0, sizeof msg);
		msg.hdr.type = m.type;
		msg.hdr.len = (uint32_t)m.len;
		msg.payload = m.payload;
		char err[128];
		cr_assert_eq(upg_decode(&msg, err, sizeof err), 0, "%s: %s", upg_type_str(m.type), err);
		sup_on_upgrade_msg(m.to, &msg);
		sup_reap(m.to);
		any = true;
	}
	for (size_t i = 0; i < W.n_procs; i++) {
		struct w_proc *wp = &W.procs[i];
		if (!wp->alive || !wp->p || !w_live(w_side(wp->s)))
			continue;
		if (wp->killed || wp->got_stop || wp->got_handover) {
			wp->alive = false;
			wp->reported = true;
			sup_on_exit(wp->s, wp->p, wp->killed ? SIGKILL : 0);
			any = true;
		} else if (!wp->p->ready) {
			if (w_side(wp->s) && W.hold_succ)
				continue;
			if (wp->fail_start) {
				sup_on_failed(wp->s, wp->p, "TLS: no certificate");
				wp->killed = true;
			} else {
				sup_on_ready(wp->s, wp->p);
			}
			any = true;
		}
		sup_reap(wp->s);
	}
	return any;
}

static void
w_settle(uint64_t ms)
{
	for (uint64_t t = 0; t < ms; t += 50) {
		while (w_react())
			;
		W.now += 50;
		for (int side = 0; side < 2; side++) {
			struct sup *s = side ? &W.succ : &W.pred;
			if (!w_live(side))
				continue;
			sup_set_clock(s, W.now, 1700000000000ULL + W.now);
			sup_tick(s);
			sup_reap(s);
		}
		cr_assert_eq(W.pred.violations, 0, "the predecessor met a forbidden pair");
		cr_assert_eq(W.succ.violations, 0, "the successor met a forbidden pair");
	}
}

#define HDR "[ferry]\ncontrol_socket = /tmp/x.sock\nadmin_listen = off\ndrain_timeout = 2s\n" \
	"init_timeout = 1s\nworker_watchdog = 0\ncrash_loop_limit = 2\ncrash_loop_window = 1m\n" \
	"startup_policy = best-effort\nlog_level = error\n"

static const char *
w_config(void)
{
	static char text[2048];
	snprintf(text, sizeof text, HDR
	    "[cluster a]\nupstream = 127.0.0.1:9092\nbootstrap = 127.0.0.1:20000\n"
	    "advertised_host = localhost\nbroker_ports = 20001-20002\nnode_ids = 1-2\n"
	    "[cluster f]\nupstream = 127.0.0.1:9092\nbootstrap = 127.0.0.1:20010\n"
	    "advertised_host = localhost\nbroker_ports = 20011-20012\nnode_ids = 1-2\n");
	return text;
}

static void
w_start(void)
{
	memset(&W, 0, sizeof W);
	W.now = 1000;
	log_init("test", NULL, LOG_ERROR, false);
	const char *text = w_config();
	struct cfg cfg;
	struct cfg_errors ce;
	cfg_errors_init(&ce);
	cr_assert_eq(cfg_parse_string("test.ini", text, strlen(text), &cfg, &ce), 0);
	cfg_errors_free(&ce);
	sup_set_clock(&W.pred, W.now, 1700000000000ULL + W.now);
	W.pred.pid = 4100;
	cr_assert_eq(sup_init(&W.pred, &w_ops, &cfg, "test.ini", text, strlen(text)), 0);
	W.pred.exec_path = strdup("/usr/sbin/ferryd");
	cr_assert_eq(sup_start(&W.pred), 0);
	w_settle(200);
}

static struct w_proc *
w_serving(struct sup *s, const char *name)
{
	struct sup_gen *g = sup_cluster_serving(sup_find_cluster(s, name));
	cr_assert_not_null(g);
	return g->procs[0].chan;
}

/* Crash f twice (crash_loop_limit = 2): it is failed. */
static void
w_crash_loop_f(void)
{
	for (int i = 0; i < 2; i++) {
		struct w_proc *wp = w_serving(&W.pred, "f");
		wp->killed = true;
		w_settle(1000);
	}
	cr_assert_eq(sup_find_cluster(&W.pred, "f")->st, FSM_C_FAILED);
}

static void
w_free_both(void)
{
	if (W.succ_started)
		sup_free(&W.succ);
	sup_free(&W.pred);
}

/* ---- tests ---------------------------------------------------------------------- */

Test(engine_upgrade, commit_carries_everything_and_the_old_side_drains_out)
{
	w_start();
	struct sup_cluster *a = sup_find_cluster(&W.pred, "a");
	/* a crash of a, restarted: numbering and counters to carry */
	w_serving(&W.pred, "a")->killed = true;
	w_settle(1000);
	w_crash_loop_f();
	uint64_t next = a->next_generation, restarts = a->restarts;
	if (!a->retired)
		a->retired = metrics_totals_new();
	cr_assert_not_null(a->retired);
	METRIC_ADD(a->retired, connections_accepted, 500);
	uint64_t accepted = promfam_field_sum(a, offsetof(struct metrics, connections_accepted),
	    true);
	struct nodemap_entry e = { 1, 9092, "b1.kafka" };
	sup_nodes_learn(a, sup_cluster_serving(a), &e);
	struct w_proc *old = w_serving(&W.pred, "a");

	const struct sup_upgrade_record *rec;
	char err[256];
	cr_assert_eq(sup_upgrade_start(&W.pred, "api", 7, &rec, err, sizeof err), SUP_DEFERRED, "%s",
	    err);
	/* one at a time, and nothing else meanwhile */
	cr_assert_eq(sup_upgrade_start(&W.pred, "api", 8, &rec, err, sizeof err), SUP_CONFLICT);
	const struct sup_reload_record *rr;
	cr_assert_eq(sup_reload_start(&W.pred, NULL, 0, "api", 9, &rr), SUP_CONFLICT);
	struct sup_answer ans;
	cr_assert_eq(sup_cluster_drain(&W.pred, "a", &ans), SUP_CONFLICT);
	w_settle(500);

	cr_assert_eq(W.answers, 1);
	cr_assert_eq(W.answered, SUP_UPGRADE_SUCCESS);
	cr_assert_eq(W.notified_mainpid, 1);
	cr_assert(old->got_handover, "the old generation was not handed over");
	/* the successor: a accepting with the next number, f failed as it was */
	struct sup_cluster *sa = sup_find_cluster(&W.succ, "a"), *sf = sup_find_cluster(&W.succ, "f");
	struct sup_gen *g = sup_cluster_serving(sa);
	cr_assert_eq(g->st, FSM_G_ACCEPTING);
	cr_assert_eq(g->generation, next + 1);
	cr_assert(((struct w_proc *)g->procs[0].chan)->got_accept);
	cr_assert_eq(sa->restarts, restarts);
	cr_assert_eq(sf->st, FSM_C_FAILED);
	cr_assert_eq(sup_cluster_state(sf), LC_FAILED);
	cr_assert_eq(sf->crash.loops, 1);
	cr_assert_eq(sa->nodes.n, 1);
	cr_assert_str_eq(sa->nodes.v[0].host, "b1.kafka");
	/* the old side drained to nothing and left; its counters are ours */
	cr_assert(W.exited[0] && W.exit_code[0] == 0, "the predecessor did not exit");
	cr_assert_null(W.succ.upgrade, "the successor still waits for its predecessor");
	cr_assert_geq(promfam_field_sum(sa, offsetof(struct metrics, connections_accepted), true),
	    accepted);
	cr_assert_eq(W.succ.last_upgrade.status, SUP_UPGRADE_SUCCESS);
	cr_assert(W.succ.last_upgrade.completed_ms > 0);
	cr_assert_eq(W.succ.upgrade_results[SUP_UPGRADE_SUCCESS], 1);
	/* every socket of the predecessor's is closed; the successor's open */
	for (size_t i = 0; i < sa->n_listeners; i++)
		cr_assert(W.fd_open[sa->listeners[i].fd]);
	w_free_both();
}

Test(engine_upgrade, a_cluster_crash_before_the_commit_rolls_back)
{
	w_start();
	struct sup_cluster *a = sup_find_cluster(&W.pred, "a");
	W.silent = true;  /* the upgrade sits in spawning while a crashes */
	const struct sup_upgrade_record *rec;
	char err[256];
	cr_assert_eq(sup_upgrade_start(&W.pred, "SIGUSR2", 0, &rec, err, sizeof err), SUP_DEFERRED);
	uint64_t gen = sup_cluster_serving(a)->generation;
	w_serving(&W.pred, "a")->killed = true;
	w_react();
	cr_assert_null(W.pred.upgrade);
	cr_assert_eq(W.pred.last_upgrade.status, SUP_UPGRADE_FAILED);
	cr_assert(strstr(W.pred.last_upgrade.errors[0], "cluster a crashed during the upgrade"),
	    "%s", W.pred.last_upgrade.errors[0]);
	w_settle(1000);
	cr_assert_gt(sup_cluster_serving(a)->generation, gen, "restarted after the rollback");
	w_free_both();
}

Test(engine_upgrade, a_crash_restart_waits_and_the_successor_runs_it)
{
	w_start();
	struct sup_cluster *a = sup_find_cluster(&W.pred, "a");
	/* a crashed just before: in back-off, its restart 100 ms away */
	w_serving(&W.pred, "a")->killed = true;
	w_react();
	cr_assert_eq(a->st, FSM_C_BACKOFF);
	uint64_t next = a->next_generation;
	unsigned restarts = a->restarts;
	W.hold_succ = true;   /* the successor prepares slowly */
	const struct sup_upgrade_record *rec;
	char err[256];
	cr_assert_eq(sup_upgrade_start(&W.pred, "api", 7, &rec, err, sizeof err), SUP_DEFERRED);
	w_settle(500);
	cr_assert_eq(a->next_generation, next, "a generation started while the upgrade prepares");
	cr_assert_eq(a->st, FSM_C_BACKOFF);
	cr_assert_not_null(W.pred.upgrade);
	struct sup_cluster *sa = sup_find_cluster(&W.succ, "a");
	cr_assert_eq(sa->st, FSM_C_BACKOFF, "the back-off is carried");
	W.hold_succ = false;
	w_settle(500);
	cr_assert_eq(W.answered, SUP_UPGRADE_SUCCESS);
	struct sup_gen *g = sup_cluster_serving(sa);
	cr_assert_eq(sa->st, FSM_C_ACTIVE);
	cr_assert_eq(g->st, FSM_G_ACCEPTING, "the successor ran the restart");
	cr_assert_gt(g->generation, next);
	cr_assert_eq(sa->restarts, restarts);   /* (a is gone with its process) */
	w_free_both();
}

Test(engine_upgrade, failed_workers_of_the_successor_roll_back_untouched)
{
	w_start();
	struct w_proc *old = w_serving(&W.pred, "a");
	W.succ_workers_fail = true;
	const struct sup_upgrade_record *rec;
	char err[256];
	cr_assert_eq(sup_upgrade_start(&W.pred, "api", 7, &rec, err, sizeof err), SUP_DEFERRED);
	w_settle(500);
	cr_assert_eq(W.answers, 1);
	cr_assert_eq(W.answered, SUP_UPGRADE_FAILED);
	cr_assert_str_eq(W.pred.last_upgrade.phase, "preparing");
	cr_assert(strstr(W.pred.last_upgrade.errors[0], "TLS: no certificate"), "%s",
	    W.pred.last_upgrade.errors[0]);
	cr_assert(W.exited[1], "the successor is still there");
	cr_assert_not(old->got_handover || old->killed, "the serving worker was touched");
	cr_assert(old->alive);
	cr_assert_eq(W.notified_ready, 1);
	cr_assert_eq(W.pred.upgrade_results[SUP_UPGRADE_FAILED], 1);
	/* the next one works */
	W.succ_workers_fail = false;
	sup_free(&W.succ);
	W.succ_started = false;
	W.exited[1] = false;
	cr_assert_eq(sup_upgrade_start(&W.pred, "api", 8, &rec, err, sizeof err), SUP_DEFERRED);
	w_settle(500);
	cr_assert_eq(W.answered, SUP_UPGRADE_SUCCESS);
	w_free_both();
}

Test(engine_upgrade, a_silent_successor_rolls_back_at_init_timeout)
{
	w_start();
	W.silent = true;
	const struct sup_upgrade_record *rec;
	char err[256];
	cr_assert_eq(sup_upgrade_start(&W.pred, "api", 7, &rec, err, sizeof err), SUP_DEFERRED);
	w_settle(900);
	cr_assert_not_null(W.pred.upgrade, "rolled back before init_timeout");
	w_settle(300);
	cr_assert_null(W.pred.upgrade);
	cr_assert_eq(W.answered, SUP_UPGRADE_FAILED);
	cr_assert(strstr(W.pred.last_upgrade.errors[0], "did not answer within 1000ms"), "%s",
	    W.pred.last_upgrade.errors[0]);
	/* SIGHUP during it waited; PID 1 refuses */
	W.pred.pid = 1;
	cr_assert_eq(sup_upgrade_start(&W.pred, "api", 8, &rec, err, sizeof err), SUP_CONFLICT);
	cr_assert(strstr(err, "PID 1"), "%s", err);
	w_free_both();
}
