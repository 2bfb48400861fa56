/*
 * sup_io — ferryd's I/O layer: the libev loop, worker processes and their
 * control channels, signals, the one deadline timer and the reaper (see
 * sup_io.h). It carries out what the engine (engine.c, reload.c) asks
 * through struct sup_ops and turns everything that happens into engine
 * events; it decides nothing.
 *
 * Event sources, all on the default libev loop: SIGTERM/SIGINT/SIGHUP
 * (ev_signal), each worker's exit (ev_child), each worker's control channel
 * (ev_io, read always, write while its queue is not empty), one ev_timer
 * set to the engine's earliest deadline, and the admin API. No work is done
 * in a signal handler. An ev_prepare watcher runs after every iteration's
 * callbacks, outside any event chain: it frees what ended (sup_reap) and
 * re-arms the deadline timer.
 *
 * Why nothing here blocks the loop: control channels are non-blocking and
 * queued (ipcq.h); waitpid runs inside libev's SIGCHLD handling for exited
 * children only (WNOHANG); workers are started paced (sup_spawn.c) and each
 * start is a clone(CLONE_VM|CLONE_VFORK) that copies no page table, whatever
 * the supervisor's size; binds use numeric addresses (no DNS: the config parser
 * requires IP literals for listeners); config files are read with
 * file_read_all() (common/file.h: regular files only, bounded); persisting a
 * posted config runs in a child process that the loop waits for at most
 * SUP_PERSIST_TIMEOUT_MS.
 */
#include "supervisor/sup_io.h"
#include "supervisor/sup_io_priv.h"

#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sodium.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/buildinfo.h"
#include "common/conntab.h"
#include "common/ipc.h"
#include "common/ipcq.h"
#include "common/log.h"
#include "supervisor/adminproc.h"
#include "supervisor/certs.h"
#include "supervisor/listeners.h"
#include "supervisor/nodes.h"
#include "supervisor/notify.h"
#include "supervisor/sandboxstatus.h"
#include "supervisor/status.h"
#include "supervisor/supervisor.h"
#include "supervisor/tickets.h"

#define SUP_PERSIST_TIMEOUT_MS 5000
#define SUP_BACKSTOP_S 10.0     /* beyond drain_timeout + grace: leave anyway */
void
sup_io_clock(struct sup *s)
{
	s->now_ms = clock_mono_ms();
	s->now_wall_ms = clock_wall_ms();
}

/* ---- control channels -------------------------------------------------------------- */

void
sup_io_chan_stop(struct sup_chan *ch)
{
	ev_io_stop(ch->io->loop, &ch->rio);
	ev_io_stop(ch->io->loop, &ch->wio);
}

/* Read every message waiting on the channel. Returns false when the
 * channel is finished (EOF, error, or a fault that killed the worker). */
static bool
sup_chan_read(struct sup_chan *ch)
{
	struct sup_io *io = ch->io;
	struct sup *s = io->s;
	struct sup_proc *p = ch->p;
	bool reset_seen = false;
	for (;;) {
		struct ipc_msg msg;
		char err[128] = "";
		sup_io_clock(s);
		int r = ipc_recv(ch->fd, io->buf, sizeof io->buf, &msg, err, sizeof err);
		if (r == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (r == -1 && errno == ECONNRESET && !reset_seen) {
			/* The worker died with our messages unread: the socket
			 * reports that once, before what the worker did send. */
			reset_seen = true;
			continue;
		}
		if (r == 0 || (r == -1 && errno == ECONNRESET)) {
			/* The worker closed its end (exiting, possibly right after a
			 * FAILED report): the exit arrives through ev_child. */
			sup_io_chan_stop(ch);
			return false;
		}
		if (r == -1 || msg.hdr.generation != p->gen->generation ||
		    (msg.nfds && msg.hdr.type != IPC_CONN_OUT)) {
			if (r == 1)
				ipc_close_fds(&msg);
			sup_io_chan_stop(ch);
			sup_on_malformed(s, p, r == -1 ? (err[0] ? err : strerror(errno)) :
			    "wrong generation or unexpected file descriptors");
			return false;
		}
		switch (msg.hdr.type) {
		case IPC_READY: {
			sup_spawn_ready(ch);
			struct ipc_ready rd;
			memcpy(&rd, msg.payload, sizeof rd);
			if (rd.ipc_version != IPC_PROTOCOL_VERSION) {
				char what[96];
				snprintf(what, sizeof what, "speaks IPC protocol %u, not %d",
				    rd.ipc_version, IPC_PROTOCOL_VERSION);
				sup_io_chan_stop(ch);
				sup_on_malformed(s, p, what);
				return false;
			}
			sup_on_ready(s, p);
			break;
		}
		case IPC_FAILED: {
			char reason[192];
			size_t n = msg.hdr.len < sizeof reason - 1 ? msg.hdr.len : sizeof reason - 1;
			memcpy(reason, msg.payload, n);
			reason[n] = 0;
			for (size_t i = 0; i < n; i++)
				if ((unsigned char)reason[i] < 0x20 || reason[i] == '"')
					reason[i] = '?';
			sup_on_failed(s, p, reason);
			break;
		}
		case IPC_UPSTREAM: {
			struct ipc_upstream u;
			memcpy(&u, msg.payload, sizeof u);
			u.error[sizeof u.error - 1] = 0;
			sup_on_upstream(s, p, &u);
			break;
		}
		case IPC_UNKNOWN_NODE: {
			struct ipc_unknown_node u;
			memcpy(&u, msg.payload, sizeof u);
			u.host[sizeof u.host - 1] = 0;
			sup_on_unknown_node(s, p, &u);
			break;
		}
		case IPC_PONG: {
			struct ipc_ping pong;
			memcpy(&pong, msg.payload, sizeof pong);
			sup_on_pong(s, p, pong.seq);
			break;
		}
		case IPC_CONN_OUT: {
			/* the engine closes the fds whatever it decides */
			size_t nfds = msg.nfds;
			ipc_msg_take_fds(&msg);
			sup_on_conn_out(s, p, msg.payload, msg.hdr.len, msg.fds, nfds);
			break;
		}
		case IPC_NODE_LEARNED:
			sup_on_node_learned(s, p, msg.payload, msg.hdr.len);
			break;
		case IPC_CONN_TAKEN: {
			struct ipc_conn_ack ack;
			memcpy(&ack, msg.payload, sizeof ack);
			sup_on_conn_taken(s, p, &ack);
			break;
		}
		default: {
			char what[64];
			snprintf(what, sizeof what, "unexpected message %s", ipc_type_str(msg.hdr.type));
			sup_io_chan_stop(ch);
			sup_on_malformed(s, p, what);
			return false;
		}
		}
	}
}

void
sup_io_chan_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	sup_chan_read(w->data);
}

void
sup_io_chan_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)revents;
	struct sup_chan *ch = w->data;
	int r = ipcq_flush(&ch->q, ch->fd);
	if (r != 0)
		ev_io_stop(loop, w);  /* empty, or broken: the exit follows */
}

void
sup_io_child_cb(struct ev_loop *loop, ev_child *w, int revents)
{
	(void)revents;
	struct sup_chan *ch = w->data;
	struct sup *s = ch->io->s;
	ev_child_stop(loop, w);
	sup_spawn_ready(ch);
	/* What it said before it died still counts (a FAILED report). */
	if (ev_is_active(&ch->rio))
		sup_chan_read(ch);
	sup_io_chan_stop(ch);
	ipcq_clear(&ch->q);
	sup_io_clock(s);
	sup_on_exit(s, ch->p, w->rstatus);
}

/* ---- ops ----------------------------------------------------------------------------- */

static int
sup_io_send_fds(struct sup *s, struct sup_proc *p, enum ipc_type type, const void *payload,
		size_t len, const int *fds, size_t nfds)
{
	struct sup_io *io = s->io;
	struct sup_chan *ch = p->chan;
	if (!ch || ch->fd < 0) {
		errno = EBADF;
		return -1;
	}
	if (ch->st == SUP_CHAN_QUEUED &&
	    (type == IPC_STOP || type == IPC_DRAIN || type == IPC_HANDOVER)) {
		sup_spawn_cancel(io, ch, 0);  /* asked to go before it ran: it never runs */
		return 0;
	}
	if (ch->st == SUP_CHAN_CANCELLED || ch->st == SUP_CHAN_NEVER)
		return 0;
	if (ipcq_send(&ch->q, ch->fd, type, p->gen->generation, payload, len, fds, nfds) == -1)
		return -1;
	if (ipcq_pending(&ch->q))
		ev_io_start(io->loop, &ch->wio);
	return 0;
}

static int
sup_io_send(struct sup *s, struct sup_proc *p, enum ipc_type type, const void *payload,
	    size_t len)
{
	if (sup_io_send_fds(s, p, type, payload, len, NULL, 0) == 0)
		return 0;
	/* a worker that is exiting: its exit is the news, not a fault */
	return errno == EPIPE || errno == ECONNRESET ? 0 : -1;
}

static void
sup_io_kill(struct sup *s, struct sup_proc *p, int sig)
{
	struct sup_chan *ch = p->chan;
	if (ch && ch->st == SUP_CHAN_QUEUED)
		sup_spawn_cancel(s->io, ch, sig);  /* reported as killed by sig */
	else if (p->alive && p->pid > 0)
		kill(p->pid, sig);
}

static void
sup_io_proc_free(struct sup *s, struct sup_proc *p)
{
	struct sup_io *io = s->io;
	struct sup_chan *ch = p->chan;
	if (ch) {
		sup_spawn_forget(io, ch);
		ev_io_stop(io->loop, &ch->rio);
		ev_io_stop(io->loop, &ch->wio);
		if (ch->st == SUP_CHAN_STARTED)
			ev_child_stop(io->loop, &ch->child);
		ipcq_clear(&ch->q);
		if (ch->fd >= 0)
			close(ch->fd);
		if (ch->child_fd >= 0)
			close(ch->child_fd);
		free(ch);
		p->chan = NULL;
	}
	if (p->metrics)
		metrics_unmap(p->metrics);
	p->metrics = NULL;
	conntab_unmap(p->conns, p->conns_rows);
	p->conns = NULL;
}

static int
sup_io_bind(struct sup *s, const struct cfg_addr *a, char *err, size_t errlen)
{
	(void)s;
	return listeners_bind_tcp(a, err, errlen);
}

static int
sup_io_dup(struct sup *s, int fd)
{
	(void)s;
	return fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

static void
sup_io_close(struct sup *s, int fd)
{
	(void)s;
	close(fd);
}

/* Write text to path atomically: temp file in the same directory, fsync,
 * rename, fsync the directory. In a child process. */
static int
sup_write_file(const char *path, const char *text, size_t len, char *err, size_t errlen)
{
	char tmp[4096], dirbuf[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
	snprintf(dirbuf, sizeof dirbuf, "%s", path);
	mode_t mode = 0644;
	struct stat st;
	if (stat(path, &st) == 0)
		mode = st.st_mode & 07777;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd == -1) {
		snprintf(err, errlen, "%.100s: %s", tmp, strerror(errno));
		return -1;
	}
	size_t off = 0;
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(err, errlen, "write %.100s: %s", tmp, strerror(errno));
			goto fail;
		}
		off += (size_t)n;
	}
	if (fsync(fd) == -1) {
		snprintf(err, errlen, "fsync %.100s: %s", tmp, strerror(errno));
		goto fail;
	}
	close(fd);
	fd = -1;
	if (rename(tmp, path) == -1) {
		snprintf(err, errlen, "rename to %.100s: %s", path, strerror(errno));
		goto fail;
	}
	int dfd = open(dirname(dirbuf), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return -1;
}

/* The write runs in a child so a slow or hung file system stretches the
 * loop by at most SUP_PERSIST_TIMEOUT_MS; the child reports its error text
 * through a pipe. A child still writing after that is left to finish (libev
 * reaps it) and the reload says so. */
static int
sup_io_persist(struct sup *s, const char *path, const char *text, size_t len, char *err,
	       size_t errlen)
{
	(void)s;
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) == -1) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid == -1) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	if (pid == 0) {
		char e[160] = "";
		int rc = sup_write_file(path, text, len, e, sizeof e);
		if (rc == -1 && write(pfd[1], e, strlen(e)) < 0)
			_exit(2);
		_exit(rc == 0 ? 0 : 1);
	}
	close(pfd[1]);
	struct pollfd pl = { .fd = pfd[0], .events = POLLIN };
	uint64_t until = clock_mono_ms() + SUP_PERSIST_TIMEOUT_MS;
	char e[160];
	ssize_t n = -1;
	for (;;) {
		uint64_t now = clock_mono_ms();
		int r = now >= until ? 0 : poll(&pl, 1, (int)(until - now));
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n = read(pfd[0], e, sizeof e - 1);
		break;
	}
	close(pfd[0]);
	if (n == -1) {
		snprintf(err, errlen, "writing %s did not finish within %dms", path,
		    SUP_PERSIST_TIMEOUT_MS);
		return -1;
	}
	if (n > 0) {
		e[n] = 0;
		snprintf(err, errlen, "%s", e);
		return -1;
	}
	return 0;  /* EOF without a message: the child succeeded */
}

static void
sup_io_stopped(struct sup *s)
{
	struct sup_io *io = s->io;
	ev_break(io->loop, EVBREAK_ALL);
}

static void
sup_io_answer_reload(struct sup *s, uint64_t waiter, const struct sup_reload_record *rec)
{
	struct sup_io *io = s->io;
	adminproc_answer_reload(io->admin, waiter, rec);
}

static void
sup_io_answer_op(struct sup *s, uint64_t waiter, const struct sup_answer *a)
{
	struct sup_io *io = s->io;
	adminproc_answer_op(io->admin, waiter, a);
}

static int
sup_io_admin_prepare(struct sup *s, const struct cfg *next, char *err, size_t errlen)
{
	struct sup_io *io = s->io;
	return adminproc_reload_prepare(io->admin, next, err, errlen);
}

/* ---- systemd notify (supervisor/notify.h; no-ops without NOTIFY_SOCKET) ---- */

static void
sup_io_ready_changed(struct sup *s, bool ready)
{
	struct sup_io *io = s->io;
	if (!ready || io->notified_ready || s->stopping)
		return;
	status_summary_text(s, io->last_status, sizeof io->last_status);
	notify_ready(io->last_status);
	io->notified_ready = true;
}

/* STATUS= follows the clusters' states (after every chain, when changed). */
static void
sup_io_status_update(struct sup *s)
{
	struct sup_io *io = s->io;
	char buf[sizeof io->last_status];
	if (!notify_enabled() || s->reload || !sup_upgrade_may_notify(s))
		return;
	status_summary_text(s, buf, sizeof buf);
	if (strcmp(buf, io->last_status) == 0)
		return;
	memcpy(io->last_status, buf, sizeof buf);
	notify_status("%s", buf);
}

static void
sup_io_stopping(struct sup *s, const char *why)
{
	if (!sup_upgrade_may_notify(s))
		return;  /* an upgrade's predecessor: the successor is the service */
	notify_stopping();
	notify_status("stopping: %s", why);
}

static void
sup_io_reload_begin(struct sup *s)
{
	(void)s;
	notify_reloading();
}

static void
sup_io_reload_end(struct sup *s, const struct sup_reload_record *rec)
{
	struct sup_io *io = s->io;
	if (!s->stopping)
		certs_update(s, "reload");  /* certificate expiry: renewed, or a warning */
	/* tls_ticket_rotation changed: the next rotation one new period from now */
	double period = (double)s->cfg.tls_ticket_rotation_ms / 1000.0;
	if (period != io->tickets.repeat)
		sup_io_tickets_arm(io, period);
	io->trim_pending = true;
	char buf[sizeof io->last_status];
	adminproc_reload_end(io->admin, rec->status == SUP_RELOAD_SUCCESS ||
	    rec->status == SUP_RELOAD_UNCHANGED, s->cfg.log_level);
	status_reload_text(s, buf, sizeof buf);
	if (s->stopping)
		notify_status("%s", buf);
	else
		notify_ready(buf);  /* systemd waits for READY=1 after RELOADING=1 */
	status_summary_text(s, io->last_status, sizeof io->last_status);
}

static const struct sup_ops sup_io_ops = {
	.spawn = sup_spawn_prepare,
	.send = sup_io_send,
	.send_fds = sup_io_send_fds,
	.kill = sup_io_kill,
	.proc_free = sup_io_proc_free,
	.gen_free = sup_spawn_gen_free,
	.bind = sup_io_bind,
	.dup = sup_io_dup,
	.close = sup_io_close,
	.answer_reload = sup_io_answer_reload,
	.answer_op = sup_io_answer_op,
	.persist = sup_io_persist,
	.stopped = sup_io_stopped,
	.stopping = sup_io_stopping,
	.reload_begin = sup_io_reload_begin,
	.admin_prepare = sup_io_admin_prepare,
	.reload_end = sup_io_reload_end,
	.ready_changed = sup_io_ready_changed,
	.clock = sup_io_clock,
	.upgrade = &upgrade_io_ops,
};

/* ---- loop plumbing ---------------------------------------------------------------------- */

static void
sup_deadline_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct sup_io *io = t->data;
	sup_io_clock(io->s);
	sup_tick(io->s);
}

/* After every iteration's callbacks, outside any event chain. */
static void
sup_prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	(void)revents;
	struct sup_io *io = w->data;
	struct sup *s = io->s;
	sup_io_clock(s);
	sup_reap(s);
	if (io->trim_pending && !s->reload) {
		/* A reload parsed and prepared a whole configuration and freed
		 * the old one: return the freed heap to the system rather than
		 * keep it resident until the next reload reuses it. */
		io->trim_pending = false;
		malloc_trim(0);
	}
	sup_io_status_update(s);
	upgrade_io_prepare(io);
	ev_timer_stop(loop, &io->deadline);
	uint64_t d = sup_next_deadline(s);
	if (d) {
		double after = d > s->now_ms ? (double)(d - s->now_ms) / 1000.0 : 0.0;
		ev_timer_set(&io->deadline, after, 0.);
		ev_timer_start(loop, &io->deadline);
	}
}

/* Every tls_ticket_rotation: new session-ticket keys for every TLS
 * cluster, sent to all its live workers. */
static void
sup_tickets_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct sup_io *io = t->data;
	sup_io_clock(io->s);
	if (!io->s->stopping)
		sup_tickets_rotate(io->s);
}

/* Once a day: certificate expiry of every TLS cluster (certs.h) */
static void
sup_certs_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct sup_io *io = t->data;
	sup_io_clock(io->s);
	certs_update(io->s, "daily");
}

static void
sup_backstop_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)revents;
	struct sup_io *io = t->data;
	log_warn("workers did not stop in time; killing them and exiting", "%s", "");
	sup_kill_all(io->s);
	ev_break(loop, EVBREAK_ALL);
}

static void
sup_signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)revents;
	struct sup_io *io = w->data;
	struct sup *s = io->s;
	sup_io_clock(s);
	if (w->signum == SIGHUP) {
		if (!s->stopping)
			sup_reload_signal(s);
		return;
	}
	if (w->signum == SIGUSR2) {
		const struct sup_upgrade_record *rec;
		char err[256];
		enum sup_result r = sup_upgrade_start(s, "SIGUSR2", 0, &rec, err, sizeof err);
		if (r == SUP_CONFLICT || r == SUP_UNAVAILABLE)
			log_warn("upgrade refused", "source=SIGUSR2 error=\"%s\"", err);
		return;
	}
	if (s->stopping) {
		log_warn("second stop signal: exiting now", "signal=%d", w->signum);
		sup_kill_all(s);
		ev_break(loop, EVBREAK_ALL);
		return;
	}
	sup_stop(s, w->signum == SIGTERM ? "SIGTERM" : "SIGINT");
	if (!ev_is_active(&io->backstop)) {
		ev_timer_set(&io->backstop, (double)(s->cfg.drain_timeout_ms + SUP_STOP_GRACE_MS) /
		    1000.0 + SUP_BACKSTOP_S, 0.);
		ev_timer_start(loop, &io->backstop);
	}
}

/* ---- run ----------------------------------------------------------------------------- */

/* Workers inherit the limit: 2 descriptors per proxied connection. Raise
 * the soft limit to the hard one; max_connections = auto (the default)
 * becomes what it allows (sup_max_connections); an explicit
 * max_connections beyond it is warned about. */
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
	s->fd_limit = rl.rlim_cur == RLIM_INFINITY ? 0 : (uint64_t)rl.rlim_cur;
	size_t n_auto = 0;
	uint32_t auto_min = 0;
	for (size_t i = 0; i < s->cfg.n_clusters; i++) {
		const struct cfg_cluster *cl = &s->cfg.clusters[i];
		if (!cl->max_connections) {
			uint32_t m = sup_max_connections(s, cl);
			auto_min = n_auto++ == 0 || m < auto_min ? m : auto_min;
			continue;
		}
		uint64_t need = 2ull * cl->max_connections + cl->n_brokers + 64;
		if (s->fd_limit && need > s->fd_limit)
			log_warn("file descriptor limit below max_connections", "cluster=%s "
			    "max_connections=%u needs=%llu limit=%llu hint=\"raise LimitNOFILE "
			    "(ulimit -n) or lower max_connections; beyond the limit accepting pauses\"",
			    cl->name, cl->max_connections, (unsigned long long)need,
			    (unsigned long long)s->fd_limit);
	}
	if (n_auto)
		log_info("max_connections = auto", "clusters=%zu max_connections=%u "
		    "descriptor_limit=%llu", n_auto, auto_min, (unsigned long long)s->fd_limit);
}

static int
sup_resolve_user(struct sup_io *io, const char *user)
{
	if (geteuid() != 0) {
		log_warn("not running as root: workers keep the current user", "user=%s uid=%d",
		    user, (int)geteuid());
		return 0;
	}
	/* getpwnam may consult NSS; this runs once, before the loop. */
	struct passwd *pw = getpwnam(user);
	if (!pw) {
		log_error("worker user does not exist", "user=%s hint=\"create it or set user = in "
		    "[ferry]\"", user);
		return -1;
	}
	if (pw->pw_uid == 0) {
		log_error("worker user must not be root", "user=%s", user);
		return -1;
	}
	io->creds.uid = pw->pw_uid;
	io->creds.gid = pw->pw_gid;
	io->creds.drop = true;
	return 0;
}

void
sup_io_tickets_arm(struct sup_io *io, double after)
{
	double period = (double)io->s->cfg.tls_ticket_rotation_ms / 1000.0;
	ev_timer_stop(io->loop, &io->tickets);
	ev_timer_set(&io->tickets, after > 0 ? after : 0.001, period);
	ev_timer_start(io->loop, &io->tickets);
}

struct sup_io *
sup_io_new(void)
{
	struct sup *s = calloc(1, sizeof *s);
	struct sup_io *io = calloc(1, sizeof *io);
	if (!s || !io || sodium_init() < 0) {
		fprintf(stderr, "ferryd: cannot initialise\n");
		free(s);
		free(io);
		return NULL;
	}
	io->s = s;
	s->io = io;
	io->loop = ev_default_loop(EVFLAG_AUTO);
	sup_spawn_init(io);
	signal(SIGPIPE, SIG_IGN);
	return io;
}

int
sup_io_init(struct sup_io *io, struct cfg *cfg, const char *config_path, const char *config_bytes,
	    size_t config_len, const char *self_exe, const char *notify_address)
{
	struct sup *s = io->s;
	io->self_exe = strdup(self_exe);
	/* before any worker is forked: they must not inherit it */
	if (notify_address)
		notify_init_address(notify_address);
	else
		notify_init();
	sup_io_clock(s);
	s->pid = (int32_t)getpid();
	if (sup_init(s, &sup_io_ops, cfg, config_path, config_bytes, config_len) == -1 ||
	    !io->self_exe)
		return -1;
	sup_raise_nofile(s);
	if (sup_resolve_user(io, s->cfg.user) == -1)
		return -1;

	ev_timer_init(&io->deadline, sup_deadline_cb, 0., 0.);
	io->deadline.data = io;
	ev_timer_init(&io->backstop, sup_backstop_cb, 0., 0.);
	io->backstop.data = io;
	ev_timer_init(&io->tickets, sup_tickets_cb, s->cfg.tls_ticket_rotation_ms / 1000.0,
	    s->cfg.tls_ticket_rotation_ms / 1000.0);
	io->tickets.data = io;
	ev_timer_start(io->loop, &io->tickets);
	ev_timer_init(&io->certs, sup_certs_cb, CERTS_CHECK_MS / 1000.0, CERTS_CHECK_MS / 1000.0);
	io->certs.data = io;
	ev_timer_start(io->loop, &io->certs);
	ev_prepare_init(&io->prepare, sup_prepare_cb);
	io->prepare.data = io;
	ev_prepare_start(io->loop, &io->prepare);
	ev_signal_init(&io->sig_term, sup_signal_cb, SIGTERM);
	ev_signal_init(&io->sig_int, sup_signal_cb, SIGINT);
	ev_signal_init(&io->sig_hup, sup_signal_cb, SIGHUP);
	ev_signal_init(&io->sig_usr2, sup_signal_cb, SIGUSR2);
	io->sig_term.data = io->sig_int.data = io->sig_hup.data = io->sig_usr2.data = io;
	ev_signal_start(io->loop, &io->sig_term);
	ev_signal_start(io->loop, &io->sig_int);
	ev_signal_start(io->loop, &io->sig_hup);
	ev_signal_start(io->loop, &io->sig_usr2);
	return 0;
}

int
sup_io_finish(struct sup_io *io, int rc)
{
	struct sup *s = io->s;
	adminproc_free(io->admin);
	io->admin = NULL;
	sup_kill_all(s);
	sup_free(s);
	upgrade_io_free(io);
	ev_prepare_stop(io->loop, &io->prepare);
	ev_timer_stop(io->loop, &io->deadline);
	ev_timer_stop(io->loop, &io->backstop);
	ev_timer_stop(io->loop, &io->tickets);
	ev_timer_stop(io->loop, &io->certs);
	sup_spawn_free(io);
	free(io->self_exe);
	free(io);
	free(s);
	notify_close();
	return rc;
}

int
sup_io_run(struct sup_io *io)
{
	ev_run(io->loop, 0);
	int rc = io->s->exit_code;
	log_info("ferryd stopped", "exit_code=%d", rc);
	return sup_io_finish(io, rc);
}

int
sup_run(struct cfg *cfg, const char *config_path, const char *config_bytes,
	size_t config_len, const char *self_exe, const char *exec_path)
{
	struct sup_io *io = sup_io_new();
	if (!io)
		return 1;
	struct sup *s = io->s;
	char err[256];
	if (sup_io_init(io, cfg, config_path, config_bytes, config_len, self_exe, NULL) == -1)
		return sup_io_finish(io, 1);
	s->exec_path = exec_path ? strdup(exec_path) : NULL;
	log_info("ferryd starting", "version=%s build=%s clusters=%zu config=%s config_version=%s",
	    FERRY_VERSION, buildinfo_id(), s->cfg.n_clusters, s->config_path, s->config_version);
	sandboxstatus_start(s);
	io->admin = adminproc_new(s, io->loop, &io->creds, NULL, err, sizeof err);
	if (!io->admin || adminproc_start(io->admin, true, err, sizeof err) == -1) {
		log_error("cannot start admin API", "error=\"%s\"", err);
		return sup_io_finish(io, 1);
	}
	if (sup_start(s) == -1)
		return sup_io_finish(io, 1);
	certs_update(s, "start");
	malloc_trim(0);  /* the parse of the whole file is freed (each cluster has its copy) */
	return sup_io_run(io);
}
