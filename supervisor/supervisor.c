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
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/ipc.h"
#include "common/log.h"
#include "common/units.h"
#include "supervisor/admin.h"
#include "supervisor/listeners.h"

#define SUP_RESTART_DELAY 0.2      /* s; crash-loop policy is separate work */
#define SUP_KEEP_STOPPED 3         /* stopped generations kept for status */
#define SUP_STOP_GRACE 5.0         /* s beyond drain_timeout before SIGKILL */

static void sup_start_worker(struct sup_cluster *c, const char *why);
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

static void
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

/* ---- worker events -------------------------------------------------------------- */

static void
sup_worker_ready(struct sup_worker *wk)
{
	struct sup_cluster *c = wk->cluster;
	struct sup *s = c->sup;
	ev_timer_stop(s->loop, &wk->init_timer);
	if (wk->lc.state != LC_INITIALIZING)
		return;
	if (s->stopping) {
		wk->stop_requested = true;
		sup_send(wk, IPC_STOP, NULL, 0, NULL, 0);
		return;
	}
	/* A newer generation replaces every older one still accepting. */
	sup_send(wk, IPC_ACCEPT, NULL, 0, NULL, 0);
	sup_worker_set_state(wk, LC_ACCEPTING, "ready");
	for (struct sup_worker *o = wk->next; o; o = o->next) {
		if (o->lc.state == LC_ACCEPTING && o->pid > 0) {
			struct ipc_drain d = { .deadline_ms = s->cfg.drain_timeout_ms };
			o->stop_requested = true;
			sup_send(o, IPC_DRAIN, &d, sizeof d, NULL, 0);
			sup_worker_set_state(o, LC_DRAINING, "replaced by a newer generation");
		}
	}
}

static void
sup_fail_startup_check(struct sup *s)
{
	/* fail-fast: one cluster that cannot initialise stops the whole daemon
	 * while it is starting (no cluster has ever been ready). */
	if (s->cfg.startup_policy != CFG_STARTUP_FAIL_FAST || s->stopping || s->ever_ready)
		return;
	for (size_t i = 0; i < s->n_clusters; i++) {
		struct sup_worker *wk = sup_cluster_serving(&s->clusters[i]);
		if (wk && wk->lc.state == LC_FAILED) {
			log_error("startup failed (startup_policy = fail-fast)",
			    "cluster=%s reason=\"%s\"", s->clusters[i].cfg.name, wk->lc.reason);
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
		if (r == 0) {
			sup_worker_close_ipc(wk);  /* the exit arrives through ev_child */
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
			sup_worker_ready(wk);
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
		case IPC_FAILED: {
			char reason[sizeof wk->lc.reason];
			size_t n = msg.hdr.len < sizeof reason - 1 ? msg.hdr.len : sizeof reason - 1;
			memcpy(reason, msg.payload, n);
			reason[n] = 0;
			wk->stop_requested = true;  /* not a crash: config not viable */
			if (wk->lc.state == LC_INITIALIZING)
				sup_worker_set_state(wk, LC_FAILED, reason);
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
	sup_fail_startup_check(wk->cluster->sup);
}

static void
sup_restart_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct sup_cluster *c = t->data;
	if (c->sup->stopping)
		return;
	sup_start_worker(c, "restart after crash");
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

	if (wk->lc.state == LC_FAILED) {
		/* stays failed: reason already recorded */
	} else if (config_failure && wk->lc.state == LC_INITIALIZING) {
		sup_worker_set_state(wk, LC_FAILED, how);
	} else {
		bool crash = !wk->stop_requested;
		sup_worker_set_state(wk, LC_STOPPED, crash ? how : "stopped");
		if (crash && !s->stopping && wk == c->workers) {
			c->restarts++;
			ev_timer_set(&c->restart_timer, SUP_RESTART_DELAY, 0.);
			ev_timer_start(loop, &c->restart_timer);
		}
	}
	sup_fail_startup_check(s);
	sup_prune(c);
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

static void
sup_start_worker(struct sup_cluster *c, const char *why)
{
	struct sup *s = c->sup;
	struct sup_worker *wk = calloc(1, sizeof *wk);
	if (!wk) {
		log_error("out of memory starting worker", "cluster=%s", c->cfg.name);
		return;
	}
	wk->cluster = c;
	wk->generation = ++c->next_generation;
	wk->ipc_fd = -1;
	wk->metrics_fd = -1;
	lc_init(&wk->lc, clock_wall_ms(), why);
	wk->next = c->workers;
	c->workers = wk;
	ev_timer_init(&wk->init_timer, sup_init_timeout_cb,
	    (ev_tstamp)s->cfg.init_timeout_ms / 1000.0, 0.);
	wk->init_timer.data = wk;

	char reason[160];
	int sv[2] = { -1, -1 };
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
	ev_child_init(&wk->child_watcher, sup_child_cb, pid, 0);
	wk->child_watcher.data = wk;
	ev_child_start(s->loop, &wk->child_watcher);

	/* Config text + metrics block, then the listening sockets. The
	 * socketpair is fresh and its buffer sized for the largest message,
	 * so these blocking sends cannot stall the loop. */
	sup_send(wk, IPC_CONFIG, c->canonical, strlen(c->canonical), &wk->metrics_fd, 1);
	int fds[IPC_MAX_FDS];
	for (size_t i = 0; i < c->n_listeners; i++)
		fds[i] = c->listeners[i].fd;
	struct ipc_listeners li = { .count = (uint32_t)c->n_listeners };
	sup_send(wk, IPC_LISTENERS, &li, sizeof li, fds, c->n_listeners);

	fcntl(wk->ipc_fd, F_SETFL, fcntl(wk->ipc_fd, F_GETFL) | O_NONBLOCK);
	ev_io_init(&wk->ipc_watcher, sup_ipc_cb, wk->ipc_fd, EV_READ);
	wk->ipc_watcher.data = wk;
	ev_io_start(s->loop, &wk->ipc_watcher);
	ev_timer_start(s->loop, &wk->init_timer);
	log_info("worker started", "cluster=%s gen=%llu pid=%d why=\"%s\"", c->cfg.name,
	    (unsigned long long)wk->generation, (int)pid, why);
	return;
fail:
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	log_error("cannot start worker", "cluster=%s reason=\"%s\"", c->cfg.name, reason);
	sup_worker_set_state(wk, LC_FAILED, reason);
	sup_fail_startup_check(s);
}

/* ---- clusters and listeners -------------------------------------------------------- */

static int
sup_cluster_bind(struct sup_cluster *c, char *err, size_t errlen)
{
	const struct cfg_cluster *cl = &c->cfg;
	c->n_listeners = 1 + cl->n_brokers;
	c->listeners = calloc(c->n_listeners, sizeof *c->listeners);
	if (!c->listeners) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < c->n_listeners; i++) {
		struct sup_listener *l = &c->listeners[i];
		l->fd = -1;
		l->addr = cl->bootstrap;
		if (i == 0) {
			l->role = SUP_LISTENER_BOOTSTRAP;
			l->node_id = -1;
		} else {
			l->role = SUP_LISTENER_BROKER;
			l->node_id = cl->node_ids[i - 1];
			l->addr.port = (uint16_t)(cl->broker_port_first + (i - 1));
		}
	}
	for (size_t i = 0; i < c->n_listeners; i++) {
		c->listeners[i].fd = listeners_bind_tcp(&c->listeners[i].addr, err, errlen);
		if (c->listeners[i].fd == -1)
			return -1;
	}
	return 0;
}

static void
sup_cluster_release(struct sup_cluster *c)
{
	for (size_t i = 0; i < c->n_listeners; i++)
		if (c->listeners[i].fd >= 0)
			close(c->listeners[i].fd);
	free(c->listeners);
	c->listeners = NULL;
	c->n_listeners = 0;
}

/* ---- stopping ------------------------------------------------------------------------ */

static void
sup_check_done(struct sup *s)
{
	if (!s->stopping)
		return;
	for (size_t i = 0; i < s->n_clusters; i++)
		for (struct sup_worker *wk = s->clusters[i].workers; wk; wk = wk->next)
			if (wk->pid > 0)
				return;
	ev_break(s->loop, EVBREAK_ALL);
}

static void
sup_stop_timeout_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct sup *s = t->data;
	log_warn("workers did not stop in time; killing them", "%s", "");
	for (size_t i = 0; i < s->n_clusters; i++)
		for (struct sup_worker *wk = s->clusters[i].workers; wk; wk = wk->next)
			sup_kill(wk, SIGKILL);
}

void
sup_stop(struct sup *s, const char *why)
{
	if (s->stopping)
		return;
	s->stopping = true;
	log_info("stopping", "why=\"%s\" drain_timeout_ms=%llu", why,
	    (unsigned long long)s->cfg.drain_timeout_ms);
	struct ipc_drain d = { .deadline_ms = s->cfg.drain_timeout_ms };
	for (size_t i = 0; i < s->n_clusters; i++) {
		struct sup_cluster *c = &s->clusters[i];
		ev_timer_stop(s->loop, &c->restart_timer);
		for (struct sup_worker *wk = c->workers; wk; wk = wk->next) {
			if (wk->pid <= 0)
				continue;
			wk->stop_requested = true;
			if (wk->lc.state == LC_ACCEPTING) {
				sup_send(wk, IPC_DRAIN, &d, sizeof d, NULL, 0);
				sup_worker_set_state(wk, LC_DRAINING, why);
			} else if (wk->lc.state == LC_INITIALIZING) {
				sup_send(wk, IPC_STOP, NULL, 0, NULL, 0);
			}
		}
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
		log_warn("SIGHUP received: live reload is not available in this build; "
		    "restart ferryd to apply a new configuration", "%s", "");
		return;
	}
	if (s->stopping) {
		log_warn("second stop signal: exiting now", "signal=%d", w->signum);
		for (size_t i = 0; i < s->n_clusters; i++)
			for (struct sup_worker *wk = s->clusters[i].workers; wk; wk = wk->next)
				sup_kill(wk, SIGKILL);
		ev_break(loop, EVBREAK_ALL);
		return;
	}
	sup_stop(s, w->signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* ---- run ---------------------------------------------------------------------------- */

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
	if (sup_resolve_user(s) == -1)
		goto out;

	s->n_clusters = s->cfg.n_clusters;
	s->clusters = calloc(s->n_clusters, sizeof *s->clusters);
	if (!s->clusters)
		goto out;
	bool any_bound = false;
	for (size_t i = 0; i < s->n_clusters; i++) {
		struct sup_cluster *c = &s->clusters[i];
		c->sup = s;
		c->cfg = s->cfg.clusters[i];  /* shallow: s->cfg owns the arrays */
		c->canonical = cfg_cluster_canonical(&c->cfg);
		sup_hash_hex(c->canonical, strlen(c->canonical), c->config_version,
		    sizeof c->config_version);
		ev_timer_init(&c->restart_timer, sup_restart_cb, SUP_RESTART_DELAY, 0.);
		c->restart_timer.data = c;
		if (sup_cluster_bind(c, err, sizeof err) == -1) {
			log_error("cannot bind cluster listener", "cluster=%s error=\"%s\"", c->cfg.name, err);
			sup_cluster_release(c);
			if (s->cfg.startup_policy == CFG_STARTUP_FAIL_FAST)
				goto out;
			/* best-effort: the cluster is reported failed, the others serve */
			struct sup_worker *wk = calloc(1, sizeof *wk);
			if (wk) {
				wk->cluster = c;
				wk->generation = ++c->next_generation;
				wk->ipc_fd = wk->metrics_fd = -1;
				lc_init(&wk->lc, clock_wall_ms(), "start");
				ev_init(&wk->child_watcher, sup_child_cb);
				ev_init(&wk->ipc_watcher, sup_ipc_cb);
				ev_init(&wk->init_timer, sup_init_timeout_cb);
				sup_worker_set_state(wk, LC_FAILED, err);
				c->workers = wk;
			}
			continue;
		}
		any_bound = true;
	}
	if (!any_bound) {
		log_error("no cluster could bind its listeners", "%s", "");
		goto out;
	}
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
		if (s->clusters[i].listeners)
			sup_start_worker(&s->clusters[i], "start");

	ev_run(s->loop, 0);
	rc = s->exit_code;
	log_info("ferryd stopped", "exit_code=%d", rc);
	admin_stop(s);
out:
	for (size_t i = 0; i < s->n_clusters; i++) {
		struct sup_cluster *c = &s->clusters[i];
		ev_timer_stop(s->loop, &c->restart_timer);
		while (c->workers) {
			struct sup_worker *wk = c->workers;
			c->workers = wk->next;
			sup_kill(wk, SIGKILL);
			sup_worker_free(wk);
		}
		sup_cluster_release(c);
		free(c->canonical);
	}
	free(s->clusters);
	cfg_free(&s->cfg);
	free(s->config_path);
	free(s->self_exe);
	free(s);
	return rc;
}
