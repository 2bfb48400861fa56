/*
 * supervisor — the ferryd process table and worker lifecycle; see
 * supervisor.h.
 *
 * Event sources, all on the default libev loop: SIGTERM/SIGINT/SIGHUP
 * (ev_signal), each worker's exit (ev_child), each worker's control channel
 * (ev_io), init and restart timers (ev_timer), and the admin API. No work is
 * done in a signal handler.
 */
#include "supervisor/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/ipc.h"
#include "common/log.h"
#include "common/units.h"
#include "supervisor/admin.h"
#include "supervisor/listeners.h"
#include "supervisor/plan.h"
#include "supervisor/reload.h"

#define SUP_KEEP_STOPPED 3         /* stopped generations kept for status */
#define SUP_STOP_GRACE 5.0         /* s beyond drain_timeout before SIGKILL */

static void sup_check_done(struct sup *s);

/* ---- helpers ----------------------------------------------------------------- */

void
sup_hash_hex(const void *data, size_t len, char *out, size_t outlen)
{
	unsigned char h[crypto_hash_sha256_BYTES];
	crypto_hash_sha256(h, data, len);
	char hex[2 * crypto_hash_sha256_BYTES + 1];
	sodium_bin2hex(hex, sizeof hex, h, sizeof h);
	snprintf(out, outlen, "sha256:%s", hex);
}

void
sup_worker_set_state(struct sup_worker *wk, enum lc_state to, const char *reason)
{
	enum lc_state from = wk->lc.state;
	if (from == to)
		return;
	if (lc_set_state(&wk->lc, to, clock_wall_ms(), reason) == -1) {
		log_error("forbidden lifecycle transition", "cluster=%s gen=%llu from=%s to=%s",
		    wk->cluster->cfg.name, (unsigned long long)wk->generation,
		    lc_state_str(from), lc_state_str(to));
		return;
	}
	log_info("worker state", "cluster=%s gen=%llu pid=%d transition=\"%s -> %s\" reason=\"%s\"",
	    wk->cluster->cfg.name, (unsigned long long)wk->generation, (int)wk->pid,
	    lc_state_str(from), lc_state_str(to), reason ? reason : "");
}

static void
sup_worker_close_ipc(struct sup_worker *wk)
{
	struct ev_loop *loop = wk->cluster->sup->loop;
	ev_io_stop(loop, &wk->ipc_watcher);
	if (wk->ipc_fd >= 0)
		close(wk->ipc_fd);
	wk->ipc_fd = -1;
}

static void
sup_worker_free(struct sup_worker *wk)
{
	struct sup_cluster *c = wk->cluster;
	struct ev_loop *loop = c->sup->loop;
	sup_worker_close_ipc(wk);
	ev_child_stop(loop, &wk->child_watcher);
	ev_timer_stop(loop, &wk->init_timer);
	if (wk->metrics) {
		/* Fold counters into the cluster's retired totals (gauges are
		 * meaningless once the process is gone). */
#define SUP_RETIRE(name, type, help) \
		if (strcmp(#type, "counter") == 0) \
			METRIC_ADD(&c->retired, name, METRIC_GET(wk->metrics, name));
		METRICS_FIELDS(SUP_RETIRE)
#undef SUP_RETIRE
		metrics_unmap(wk->metrics);
	}
	if (wk->metrics_fd >= 0)
		close(wk->metrics_fd);
	free(wk);
}

/* Keep only a few stopped generations around for status. */
static void
sup_prune(struct sup_cluster *c)
{
	unsigned kept = 0;
	struct sup_worker **pp = &c->workers, *wk;
	while ((wk = *pp)) {
		bool gone = wk->pid == 0 &&
			    (wk->lc.state == LC_STOPPED || wk->lc.state == LC_FAILED);
		if (gone && wk != c->workers && ++kept > SUP_KEEP_STOPPED) {
			*pp = wk->next;
			sup_worker_free(wk);
			continue;
		}
		pp = &wk->next;
	}
}

static void
sup_send(struct sup_worker *wk, enum ipc_type type, const void *payload, size_t len,
	 const int *fds, size_t nfds)
{
	if (wk->ipc_fd < 0)
		return;
	if (ipc_send(wk->ipc_fd, type, wk->generation, payload, len, fds, nfds) == -1)
		log_warn("cannot send to worker", "cluster=%s gen=%llu type=%s error=\"%s\"",
		    wk->cluster->cfg.name, (unsigned long long)wk->generation,
		    ipc_type_str(type), strerror(errno));
}

static void
sup_kill(struct sup_worker *wk, int sig)
{
	if (wk->pid > 0)
		kill(wk->pid, sig);
}

bool
sup_cluster_alive(const struct sup_cluster *c)
{
	for (const struct sup_worker *wk = c->workers; wk; wk = wk->next)
		if (wk->pid > 0)
			return true;
	return false;
}

/* A cluster whose serving generation ended in `failed` releases its
 * sockets (DESIGN §3: failed holds no resources), so clients are refused
 * instead of waiting in a backlog nobody accepts from. Not while another
 * generation still serves (a failed reload preparation). `ferryctl restart`
 * binds them again. */
static void
sup_cluster_release_if_failed(struct sup_cluster *c)
{
	for (const struct sup_worker *wk = c->workers; wk; wk = wk->next)
		if (wk->pid > 0 && (wk->lc.state == LC_ACCEPTING ||
		    (wk->lc.state == LC_INITIALIZING && !wk->held)))
			return;
	struct sup_worker *serving = sup_cluster_serving(c);
	if (serving && serving->lc.state == LC_FAILED && !serving->held) {
		sup_ccfg_release(c->ccfg);
		log_info("cluster sockets released", "cluster=%s reason=\"%s\"", c->cfg.name,
		    serving->lc.reason);
	}
}

/* ---- cluster configurations and listeners -------------------------------------- */

int
sup_ccfg_listen(struct sup_ccfg *cc, struct sup_ccfg *const *reuse, size_t n_reuse,
		char *err, size_t errlen)
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
					l->fd = fcntl(o->fd, F_DUPFD_CLOEXEC, 0);
					if (l->fd == -1) {
						snprintf(err, errlen, "dup listener: %s", strerror(errno));
						return -1;
					}
					break;
				}
			}
		}
		if (l->fd < 0) {
			l->fd = listeners_bind_tcp(&l->addr, err, errlen);
			if (l->fd == -1)
				return -1;
		}
	}
	return 0;
}

void
sup_ccfg_release(struct sup_ccfg *cc)
{
	if (!cc)
		return;
	for (size_t i = 0; i < cc->n_listeners; i++) {
		if (cc->listeners[i].fd >= 0)
			close(cc->listeners[i].fd);
		cc->listeners[i].fd = -1;
	}
}

void
sup_ccfg_free(struct sup_ccfg *cc)
{
	if (!cc)
		return;
	sup_ccfg_release(cc);
	free(cc->listeners);
	free(cc->canonical);
	cfg_free(&cc->own);
	free(cc);
}

/* Parse the cluster's canonical text into a configuration the supervisor
 * owns (independent of the file's struct cfg) and lay out its listeners. */
static struct sup_ccfg *
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
		free(cc->canonical);
		free(cc);
		return NULL;
	}
	cfg_errors_free(&errs);
	cc->cl = &cc->own.clusters[0];
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

struct sup_ccfg *
sup_ccfg_build(const struct cfg_cluster *cl, struct sup_ccfg *const *reuse, size_t n_reuse,
	       char *err, size_t errlen)
{
	struct sup_ccfg *cc = sup_ccfg_new(cl, err, errlen);
	if (!cc)
		return NULL;
	if (sup_ccfg_listen(cc, reuse, n_reuse, err, errlen) == -1) {
		sup_ccfg_free(cc);
		return NULL;
	}
	return cc;
}

void
sup_cluster_set_ccfg(struct sup_cluster *c, struct sup_ccfg *cc)
{
	c->ccfg = cc;
	c->cfg = *cc->cl;
	snprintf(c->config_version, sizeof c->config_version, "%s", cc->version);
	c->listeners = cc->listeners;
	c->n_listeners = cc->n_listeners;
}

static void sup_restart_cb(struct ev_loop *loop, ev_timer *t, int revents);

struct sup_cluster *
sup_cluster_new(struct sup *s, struct sup_ccfg *cc)
{
	struct sup_cluster *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->sup = s;
	struct crash_policy cp = { s->cfg.crash_loop_limit, s->cfg.crash_loop_window_ms };
	if (crash_init(&c->crash, &cp) == -1) {
		free(c);
		return NULL;
	}
	sup_cluster_set_ccfg(c, cc);
	ev_timer_init(&c->restart_timer, sup_restart_cb, 0., 0.);
	c->restart_timer.data = c;
	return c;
}

void
sup_cluster_free(struct sup_cluster *c)
{
	ev_timer_stop(c->sup->loop, &c->restart_timer);
	while (c->workers) {
		struct sup_worker *wk = c->workers;
		c->workers = wk->next;
		sup_kill(wk, SIGKILL);
		sup_worker_free(wk);
	}
	crash_free(&c->crash);
	sup_ccfg_free(c->ccfg);
	free(c);
}

/* ---- worker events -------------------------------------------------------------- */

void
sup_worker_stop(struct sup_worker *wk, const char *why)
{
	if (wk->pid <= 0)
		return;
	wk->stop_requested = true;
	sup_send(wk, IPC_STOP, NULL, 0, NULL, 0);
	if (wk->lc.state == LC_INITIALIZING || wk->lc.state == LC_ACCEPTING)
		sup_worker_set_state(wk, LC_STOPPED, why);
	ev_timer_stop(wk->cluster->sup->loop, &wk->init_timer);
}

void
sup_worker_drain(struct sup_worker *wk, const char *why)
{
	if (wk->pid <= 0)
		return;
	wk->stop_requested = true;
	if (wk->lc.state == LC_ACCEPTING) {
		struct ipc_drain d = { .deadline_ms = wk->cluster->sup->cfg.drain_timeout_ms };
		sup_send(wk, IPC_DRAIN, &d, sizeof d, NULL, 0);
		sup_worker_set_state(wk, LC_DRAINING, why);
	} else if (wk->lc.state == LC_INITIALIZING) {
		sup_worker_stop(wk, why);
	}
}

void
sup_worker_promote(struct sup_worker *wk)
{
	struct sup_cluster *c = wk->cluster;
	ev_timer_stop(c->sup->loop, &wk->init_timer);
	wk->held = false;
	sup_send(wk, IPC_ACCEPT, NULL, 0, NULL, 0);
	sup_worker_set_state(wk, LC_ACCEPTING, "ready");
	/* Older generations hand over: new connections go to this one. */
	for (struct sup_worker *o = wk->next; o; o = o->next)
		if (o->pid > 0 && (o->lc.state == LC_ACCEPTING || o->lc.state == LC_INITIALIZING))
			sup_worker_drain(o, "replaced by a newer generation");
}

static void
sup_fail_startup_check(struct sup *s)
{
	/* fail-fast: one cluster that cannot initialise stops the whole daemon
	 * while it is starting (before ferryd was ever ready). */
	if (s->cfg.startup_policy != CFG_STARTUP_FAIL_FAST || s->stopping || s->ever_ready)
		return;
	for (size_t i = 0; i < s->n_clusters; i++) {
		struct sup_worker *wk = sup_cluster_serving(s->clusters[i]);
		if (wk && wk->lc.state == LC_FAILED) {
			log_error("startup failed (startup_policy = fail-fast)",
			    "cluster=%s reason=\"%s\"", s->clusters[i]->cfg.name, wk->lc.reason);
			s->exit_code = 1;
			sup_stop(s, "startup failed");
			return;
		}
	}
}

static void
sup_ipc_cb(struct ev_loop *loop, ev_io *io, int revents)
{
	(void)loop;
	(void)revents;
	struct sup_worker *wk = io->data;
	struct sup_cluster *c = wk->cluster;
	struct sup *s = c->sup;
	for (;;) {
		struct ipc_msg msg;
		char err[128] = "";
		int r = ipc_recv(wk->ipc_fd, s->ipc_buf, sizeof s->ipc_buf, &msg, err, sizeof err);
		if (r == -1 && errno == EAGAIN)
			return;
		if (r == 0 || (r == -1 && errno == ECONNRESET)) {
			/* The worker closed its end (exiting, possibly right after
			 * a FAILED report): the exit arrives through ev_child. */
			sup_worker_close_ipc(wk);
			return;
		}
		if (r == -1 || msg.hdr.generation != wk->generation || msg.nfds) {
			/* A sibling process speaking garbage is a bug: kill it. */
			log_error("malformed message from worker; killing it",
			    "cluster=%s gen=%llu pid=%d error=\"%s\"", c->cfg.name,
			    (unsigned long long)wk->generation, (int)wk->pid,
			    r == -1 ? (err[0] ? err : strerror(errno)) : "wrong generation or fds");
			if (r == 1)
				ipc_close_fds(&msg);
			sup_worker_close_ipc(wk);
			sup_kill(wk, SIGKILL);
			return;
		}
		switch (msg.hdr.type) {
		case IPC_READY:
			wk->ready = true;
			if (wk->lc.state != LC_INITIALIZING)
				break;
			if (s->stopping) {
				sup_worker_stop(wk, "ferryd is stopping");
				break;
			}
			if (!wk->held)
				sup_worker_promote(wk);
			reload_worker_event(s, wk);
			s->ever_ready = s->ever_ready || sup_ready(s);
			break;
		case IPC_UPSTREAM: {
			struct ipc_upstream u;
			memcpy(&u, msg.payload, sizeof u);
			u.error[sizeof u.error - 1] = 0;
			/* Only the serving generation speaks for the cluster. */
			if (sup_cluster_serving(c) != wk)
				break;
			enum sup_upstream_state st = u.reachable ? SUP_UPSTREAM_REACHABLE
								  : SUP_UPSTREAM_UNREACHABLE;
			if (st != c->upstream)
				c->upstream_since_ms = clock_wall_ms();
			c->upstream = st;
			snprintf(c->upstream_error, sizeof c->upstream_error, "%s", u.error);
			break;
		}
		case IPC_UNKNOWN_NODE: {
			struct ipc_unknown_node u;
			memcpy(&u, msg.payload, sizeof u);
			u.host[sizeof u.host - 1] = 0;
			size_t k = 0;
			while (k < c->n_unknown_nodes && c->unknown_nodes[k].node_id != u.node_id)
				k++;
			if (k == c->n_unknown_nodes) {
				if (k == sizeof c->unknown_nodes / sizeof c->unknown_nodes[0])
					break;
				c->n_unknown_nodes++;
				c->unknown_since_ms[k] = clock_wall_ms();
				log_warn("upstream node id has no broker port", "cluster=%s node_id=%d "
				    "upstream=%s:%d", c->cfg.name, u.node_id, u.host, u.port);
			}
			c->unknown_nodes[k] = u;  /* follows a move */
			break;
		}
		case IPC_FAILED: {
			char reason[sizeof wk->lc.reason];
			size_t n = msg.hdr.len < sizeof reason - 1 ? msg.hdr.len : sizeof reason - 1;
			memcpy(reason, msg.payload, n);
			reason[n] = 0;
			wk->stop_requested = true;  /* not a crash: config not viable */
			if (wk->lc.state == LC_INITIALIZING)
				sup_worker_set_state(wk, LC_FAILED, reason);
			reload_worker_event(s, wk);
			sup_fail_startup_check(s);
			break;
		}
		default:
			log_error("unexpected message from worker", "cluster=%s type=%s",
			    c->cfg.name, ipc_type_str(msg.hdr.type));
			break;
		}
	}
}

static void
sup_init_timeout_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct sup_worker *wk = t->data;
	if (wk->lc.state != LC_INITIALIZING)
		return;
	char reason[96];
	snprintf(reason, sizeof reason, "not ready within init_timeout (%llums)",
	    (unsigned long long)wk->cluster->sup->cfg.init_timeout_ms);
	wk->stop_requested = true;
	sup_worker_set_state(wk, LC_FAILED, reason);
	sup_kill(wk, SIGKILL);
	reload_worker_event(wk->cluster->sup, wk);
	sup_cluster_release_if_failed(wk->cluster);
	sup_fail_startup_check(wk->cluster->sup);
}

static void
sup_restart_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct sup_cluster *c = t->data;
	if (c->sup->stopping || c->removing || c->parked)
		return;
	sup_start_worker(c, NULL, "restart after crash", false);
}

bool
sup_worker_is_current(const struct sup_worker *wk)
{
	for (const struct sup_worker *o = wk->cluster->workers; o; o = o->next)
		if (!o->held)
			return o == wk;
	return false;
}

static void
sup_child_cb(struct ev_loop *loop, ev_child *w, int revents)
{
	(void)revents;
	struct sup_worker *wk = w->data;
	struct sup_cluster *c = wk->cluster;
	struct sup *s = c->sup;
	int st = w->rstatus;
	ev_child_stop(loop, w);
	ev_timer_stop(loop, &wk->init_timer);
	sup_worker_close_ipc(wk);
	char how[96];
	if (WIFEXITED(st))
		snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(how, sizeof how, "killed by signal %d (%s)", WTERMSIG(st),
		    strsignal(WTERMSIG(st)));
	else
		snprintf(how, sizeof how, "ended (status 0x%x)", st);
	log_msg(wk->stop_requested ? LOG_INFO : LOG_WARN, "worker exited",
	    "cluster=%s gen=%llu pid=%d how=\"%s\" state=%s", c->cfg.name,
	    (unsigned long long)wk->generation, (int)wk->pid, how, lc_state_str(wk->lc.state));
	wk->pid = 0;
	bool config_failure = WIFEXITED(st) && WEXITSTATUS(st) == WORKER_EXIT_CONFIG;

	if (wk->lc.state == LC_FAILED || wk->lc.state == LC_STOPPED) {
		/* outcome already recorded */
	} else if (config_failure && wk->lc.state == LC_INITIALIZING) {
		sup_worker_set_state(wk, LC_FAILED, how);
	} else if (wk->stop_requested) {
		sup_worker_set_state(wk, LC_STOPPED, "stopped");
	} else if (wk->held || s->stopping || c->removing || c->parked ||
		   !sup_worker_is_current(wk)) {
		sup_worker_set_state(wk, LC_STOPPED, how);
	} else {
		/* A crash of the serving generation: restart with backoff, or
		 * give up on a crash loop. */
		struct crash_policy cp = { s->cfg.crash_loop_limit, s->cfg.crash_loop_window_ms };
		uint64_t delay = 0;
		uint32_t n = 0;
		if (crash_exited(&c->crash, &cp, clock_mono_ms(), &delay, &n) == CRASH_GIVE_UP) {
			char reason[192];
			snprintf(reason, sizeof reason,
			    "crash loop: %u crash%s within %llus, last %s", n, n == 1 ? "" : "es",
			    (unsigned long long)(cp.window_ms / 1000), how);
			sup_worker_set_state(wk, LC_FAILED, reason);
			log_error("cluster failed: crash loop", "cluster=%s crashes=%u hint=\"%s\"",
			    c->cfg.name, n, "ferryctl restart NAME after fixing the cause");
		} else {
			sup_worker_set_state(wk, LC_STOPPED, how);
			c->restarts++;
			log_info("restarting worker", "cluster=%s delay_ms=%llu crashes_in_window=%u",
			    c->cfg.name, (unsigned long long)delay, n);
			ev_timer_stop(loop, &c->restart_timer);
			ev_timer_set(&c->restart_timer, (ev_tstamp)delay / 1000.0, 0.);
			ev_timer_start(loop, &c->restart_timer);
		}
	}
	reload_worker_event(s, wk);
	sup_cluster_release_if_failed(c);
	sup_fail_startup_check(s);
	sup_prune(c);
	if (c->removing && !sup_cluster_alive(c))
		reload_cluster_reaped(s, c);
	sup_check_done(s);
}

/* ---- starting a worker ----------------------------------------------------------- */

static void
sup_child_exec(struct sup *s, struct sup_cluster *c, struct sup_worker *wk, int fd, pid_t ppid)
{
	/* In the child: fd 3 is the control channel, everything else is
	 * CLOEXEC. Reset the signal mask libev may have changed. */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (fd != 3) {
		if (dup2(fd, 3) == -1)
			_exit(126);
	} else {
		fcntl(3, F_SETFD, 0);
	}
	if (s->drop_privileges) {
		if (setgroups(1, &s->worker_gid) == -1 || setgid(s->worker_gid) == -1 ||
		    setuid(s->worker_uid) == -1)
			_exit(WORKER_EXIT_CONFIG);
		if (setuid(0) == 0)
			_exit(WORKER_EXIT_CONFIG);  /* privileges not really dropped */
	}
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	char gen[24], pp[24];
	snprintf(gen, sizeof gen, "%llu", (unsigned long long)wk->generation);
	snprintf(pp, sizeof pp, "%d", (int)ppid);
	char *argv[] = {
		"ferryd", "--worker", "--cluster", c->cfg.name, "--generation", gen, "--ppid", pp,
		"--log-level", (char *)log_level_str((enum log_level)s->cfg.log_level),
		s->cfg.log_format == CFG_LOG_JSON ? "--log-json" : NULL, NULL,
	};
	execv(s->self_exe, argv);
	_exit(127);
}

struct sup_worker *
sup_start_worker(struct sup_cluster *c, struct sup_ccfg *cc, const char *why, bool held)
{
	struct sup *s = c->sup;
	if (!cc)
		cc = c->ccfg;
	struct sup_worker *wk = calloc(1, sizeof *wk);
	if (!wk) {
		log_error("out of memory starting worker", "cluster=%s", c->cfg.name);
		return NULL;
	}
	wk->cluster = c;
	wk->generation = ++c->next_generation;
	wk->ipc_fd = -1;
	wk->metrics_fd = -1;
	wk->held = held;
	snprintf(wk->config_version, sizeof wk->config_version, "%s", cc->version);
	lc_init(&wk->lc, clock_wall_ms(), why);
	wk->next = c->workers;
	c->workers = wk;
	ev_init(&wk->ipc_watcher, sup_ipc_cb);
	ev_init(&wk->child_watcher, sup_child_cb);
	ev_timer_init(&wk->init_timer, sup_init_timeout_cb,
	    (ev_tstamp)s->cfg.init_timeout_ms / 1000.0, 0.);
	wk->init_timer.data = wk;

	char reason[160];
	int sv[2] = { -1, -1 };
	for (size_t i = 0; i < cc->n_listeners; i++) {
		if (cc->listeners[i].fd < 0) {
			snprintf(reason, sizeof reason, "listener %.100s:%u is not bound",
			    cc->listeners[i].addr.host, cc->listeners[i].addr.port);
			goto fail;
		}
	}
	wk->metrics_fd = metrics_create(wk->generation, &wk->metrics);
	if (wk->metrics_fd == -1) {
		snprintf(reason, sizeof reason, "metrics block: %s", strerror(errno));
		goto fail;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
		snprintf(reason, sizeof reason, "socketpair: %s", strerror(errno));
		goto fail;
	}
	int bufsz = 2 * (int)(sizeof(struct ipc_hdr) + IPC_MAX_PAYLOAD);
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &bufsz, sizeof bufsz);
	setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &bufsz, sizeof bufsz);

	pid_t ppid = getpid();
	pid_t pid = fork();
	if (pid == -1) {
		snprintf(reason, sizeof reason, "fork: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0)
		sup_child_exec(s, c, wk, sv[1], ppid);
	close(sv[1]);
	wk->pid = pid;
	wk->ipc_fd = sv[0];
	ev_child_set(&wk->child_watcher, pid, 0);
	wk->child_watcher.data = wk;
	ev_child_start(s->loop, &wk->child_watcher);
	crash_started(&c->crash, clock_mono_ms());

	/* Config text + metrics block, then the listening sockets. The
	 * socketpair is fresh and its buffer sized for the largest message,
	 * so these blocking sends cannot stall the loop. */
	sup_send(wk, IPC_CONFIG, cc->canonical, strlen(cc->canonical), &wk->metrics_fd, 1);
	close(wk->metrics_fd);  /* the mapping keeps the block; the worker has its fd */
	wk->metrics_fd = -1;
	for (size_t first = 0; first < cc->n_listeners; first += IPC_MAX_FDS) {
		int fds[IPC_MAX_FDS];
		size_t nfds = cc->n_listeners - first;
		if (nfds > IPC_MAX_FDS)
			nfds = IPC_MAX_FDS;
		for (size_t i = 0; i < nfds; i++)
			fds[i] = cc->listeners[first + i].fd;
		struct ipc_listeners li = { .count = (uint32_t)nfds, .first = (uint32_t)first,
					    .total = (uint32_t)cc->n_listeners };
		sup_send(wk, IPC_LISTENERS, &li, sizeof li, fds, nfds);
	}

	fcntl(wk->ipc_fd, F_SETFL, fcntl(wk->ipc_fd, F_GETFL) | O_NONBLOCK);
	ev_io_set(&wk->ipc_watcher, wk->ipc_fd, EV_READ);
	wk->ipc_watcher.data = wk;
	ev_io_start(s->loop, &wk->ipc_watcher);
	ev_timer_start(s->loop, &wk->init_timer);
	log_info("worker started", "cluster=%s gen=%llu pid=%d why=\"%s\"%s", c->cfg.name,
	    (unsigned long long)wk->generation, (int)pid, why, held ? " held=true" : "");
	return wk;
fail:
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	log_error("cannot start worker", "cluster=%s reason=\"%s\"", c->cfg.name, reason);
	sup_worker_set_state(wk, LC_FAILED, reason);
	sup_fail_startup_check(s);
	return wk;
}

/* ---- stopping ------------------------------------------------------------------------ */

static void
sup_check_done(struct sup *s)
{
	if (!s->stopping)
		return;
	for (size_t i = 0; i < s->n_clusters; i++)
		if (sup_cluster_alive(s->clusters[i]))
			return;
	for (size_t i = 0; i < s->n_graveyard; i++)
		if (sup_cluster_alive(s->graveyard[i]))
			return;
	ev_break(s->loop, EVBREAK_ALL);
}

/* SIGKILL every worker of every cluster, listed or being reaped. */
static void
sup_kill_all(struct sup *s)
{
	for (size_t i = 0; i < s->n_clusters; i++)
		for (struct sup_worker *wk = s->clusters[i]->workers; wk; wk = wk->next)
			sup_kill(wk, SIGKILL);
	for (size_t i = 0; i < s->n_graveyard; i++)
		for (struct sup_worker *wk = s->graveyard[i]->workers; wk; wk = wk->next)
			sup_kill(wk, SIGKILL);
}

static void
sup_stop_timeout_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct sup *s = t->data;
	log_warn("workers did not stop in time; killing them", "%s", "");
	sup_kill_all(s);
}

void
sup_stop(struct sup *s, const char *why)
{
	if (s->stopping)
		return;
	s->stopping = true;
	log_info("stopping", "why=\"%s\" drain_timeout_ms=%llu", why,
	    (unsigned long long)s->cfg.drain_timeout_ms);
	reload_abort(s, "ferryd is stopping");
	for (size_t i = 0; i < s->n_clusters; i++) {
		struct sup_cluster *c = s->clusters[i];
		ev_timer_stop(s->loop, &c->restart_timer);
		for (struct sup_worker *wk = c->workers; wk; wk = wk->next)
			sup_worker_drain(wk, why);
	}
	ev_timer_init(&s->stop_timer, sup_stop_timeout_cb,
	    (ev_tstamp)s->cfg.drain_timeout_ms / 1000.0 + SUP_STOP_GRACE, 0.);
	s->stop_timer.data = s;
	ev_timer_start(s->loop, &s->stop_timer);
	sup_check_done(s);
}

static void
sup_signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)revents;
	struct sup *s = w->data;
	if (w->signum == SIGHUP) {
		if (!s->stopping)
			reload_from_signal(s);
		return;
	}
	if (s->stopping) {
		log_warn("second stop signal: exiting now", "signal=%d", w->signum);
		sup_kill_all(s);
		ev_break(loop, EVBREAK_ALL);
		return;
	}
	sup_stop(s, w->signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* ---- run ---------------------------------------------------------------------------- */

/* Workers inherit the limit: 2 descriptors per proxied connection. Raise
 * the soft limit to the hard one and say what max_connections it allows. */
static void
sup_raise_nofile(struct sup *s)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t was = rl.rlim_cur;
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
			rl.rlim_cur = was;
	}
	for (size_t i = 0; i < s->cfg.n_clusters; i++) {
		const struct cfg_cluster *cl = &s->cfg.clusters[i];
		uint64_t need = 2ull * cl->max_connections + cl->n_brokers + 64;
		if (rl.rlim_cur != RLIM_INFINITY && need > rl.rlim_cur)
			log_warn("file descriptor limit below max_connections", "cluster=%s "
			    "max_connections=%u needs=%llu limit=%llu hint=\"raise LimitNOFILE "
			    "(ulimit -n) or lower max_connections; beyond the limit accepting pauses\"",
			    cl->name, cl->max_connections, (unsigned long long)need,
			    (unsigned long long)rl.rlim_cur);
	}
}

static int
sup_resolve_user(struct sup *s)
{
	if (geteuid() != 0) {
		log_warn("not running as root: workers keep the current user", "user=%s uid=%d",
		    s->cfg.user, (int)geteuid());
		return 0;
	}
	struct passwd *pw = getpwnam(s->cfg.user);
	if (!pw) {
		log_error("worker user does not exist", "user=%s hint=\"create it or set user = in [ferry]\"",
		    s->cfg.user);
		return -1;
	}
	if (pw->pw_uid == 0) {
		log_error("worker user must not be root", "user=%s", s->cfg.user);
		return -1;
	}
	s->worker_uid = pw->pw_uid;
	s->worker_gid = pw->pw_gid;
	s->drop_privileges = true;
	return 0;
}

/* Add every cluster of the config at start. -1: fail-fast start-up error. */
static int
sup_add_initial_clusters(struct sup *s)
{
	char err[256];
	bool any_bound = false;
	s->clusters = calloc(s->cfg.n_clusters, sizeof *s->clusters);
	if (!s->clusters)
		return -1;
	for (size_t i = 0; i < s->cfg.n_clusters; i++) {
		const struct cfg_cluster *cl = &s->cfg.clusters[i];
		struct sup_ccfg *cc = sup_ccfg_new(cl, err, sizeof err);
		if (!cc) {
			log_error("cannot prepare cluster", "cluster=%s error=\"%s\"", cl->name, err);
			return -1;
		}
		struct sup_cluster *c = sup_cluster_new(s, cc);
		if (!c) {
			sup_ccfg_free(cc);
			return -1;
		}
		s->clusters[s->n_clusters++] = c;
		if (sup_ccfg_listen(cc, NULL, 0, err, sizeof err) == -1) {
			log_error("cannot bind cluster listener", "cluster=%s error=\"%s\"", cl->name, err);
			sup_ccfg_release(cc);
			if (s->cfg.startup_policy == CFG_STARTUP_FAIL_FAST)
				return -1;
			/* best-effort: reported failed with the reason, the others
			 * serve; `ferryctl restart` retries the bind. */
			struct sup_worker *wk = calloc(1, sizeof *wk);
			if (!wk)
				return -1;
			wk->cluster = c;
			wk->generation = ++c->next_generation;
			wk->ipc_fd = wk->metrics_fd = -1;
			lc_init(&wk->lc, clock_wall_ms(), "start");
			ev_init(&wk->ipc_watcher, sup_ipc_cb);
			ev_init(&wk->child_watcher, sup_child_cb);
			ev_init(&wk->init_timer, sup_init_timeout_cb);
			snprintf(wk->config_version, sizeof wk->config_version, "%s", cc->version);
			c->workers = wk;
			sup_worker_set_state(wk, LC_FAILED, err);
			continue;
		}
		any_bound = true;
	}
	if (!any_bound && s->n_clusters) {
		log_error("no cluster could bind its listeners", "%s", "");
		return -1;
	}
	return 0;
}

int
sup_run(struct cfg *cfg, const char *config_path, const char *config_bytes,
	size_t config_len, const char *self_exe)
{
	struct sup *s = calloc(1, sizeof *s);
	if (!s || sodium_init() < 0) {
		fprintf(stderr, "ferryd: cannot initialise\n");
		free(s);
		return 1;
	}
	s->cfg = *cfg;
	memset(cfg, 0, sizeof *cfg);
	s->config_path = strdup(config_path);
	s->self_exe = strdup(self_exe);
	s->started_at_ms = s->applied_at_ms = clock_wall_ms();
	sup_hash_hex(config_bytes, config_len, s->config_version, sizeof s->config_version);
	s->loop = ev_default_loop(EVFLAG_AUTO);
	signal(SIGPIPE, SIG_IGN);

	int rc = 1;
	char err[256];
	sup_raise_nofile(s);
	if (sup_resolve_user(s) == -1)
		goto out;
	if (sup_add_initial_clusters(s) == -1)
		goto out;
	if (admin_start(s, err, sizeof err) == -1) {
		log_error("cannot start admin API", "error=\"%s\"", err);
		goto out;
	}

	ev_signal_init(&s->sig_term, sup_signal_cb, SIGTERM);
	ev_signal_init(&s->sig_int, sup_signal_cb, SIGINT);
	ev_signal_init(&s->sig_hup, sup_signal_cb, SIGHUP);
	s->sig_term.data = s->sig_int.data = s->sig_hup.data = s;
	ev_signal_start(s->loop, &s->sig_term);
	ev_signal_start(s->loop, &s->sig_int);
	ev_signal_start(s->loop, &s->sig_hup);

	log_info("ferryd starting", "version=%s clusters=%zu config=%s config_version=%s",
	    FERRY_VERSION, s->n_clusters, s->config_path, s->config_version);
	for (size_t i = 0; i < s->n_clusters; i++)
		if (!s->clusters[i]->workers)
			sup_start_worker(s->clusters[i], NULL, "start", false);

	ev_run(s->loop, 0);
	rc = s->exit_code;
	log_info("ferryd stopped", "exit_code=%d", rc);
	reload_abort(s, "ferryd stopped");
	admin_stop(s);
out:
	for (size_t i = 0; i < s->n_clusters; i++)
		sup_cluster_free(s->clusters[i]);
	for (size_t i = 0; i < s->n_graveyard; i++)
		sup_cluster_free(s->graveyard[i]);
	free(s->clusters);
	free(s->graveyard);
	reload_free_records(s);
	cfg_free(&s->cfg);
	free(s->config_path);
	free(s->self_exe);
	free(s);
	return rc;
}
