/*
 * upgrade_io — the I/O of an upgrade of ferryd itself (docs/design.md §11):
 * what engine_upgrade.c asks through struct sup_upgrade_ops, on either
 * side, and the channel to the other ferryd on the loop. It decides
 * nothing.
 *
 * Predecessor. The successor is the file ferryd was started from
 * (s->exec_path), checked first (buildinfo_exec_check: as root, nobody
 * else may be able to replace it), forked with the upgrade channel — a
 * SOCK_SEQPACKET socketpair in the envelope of ipc.h, framed by
 * ipc_recv_frame and checked by upg_decode — on its fd 3, and the
 * parent-death signal SIGKILL set before exec, so it never outlives us
 * before it commits. An exec that fails reports its errno through a
 * close-on-exec pipe. Everything else of ours is close-on-exec: the
 * successor gets exactly the sockets we pass. Its exit (ev_child) is the
 * news that it is gone; a channel EOF alone waits for that exit, which
 * says how it ended.
 *
 * The state record travels in a sealed memfd (F_SEAL_WRITE included, so we
 * cannot change it under the reader); the listening sockets in batches of
 * IPC_MAX_FDS, in the record's order; the ticket keys one cluster per
 * message, built in guarded memory (sodium_malloc) and sent directly, never
 * through the heap-allocated queue; the receiver reads every message of the
 * channel into guarded memory too and wipes the keys' bytes once copied.
 *
 * Successor: its start is successor_io.c's; from there the channel is one
 * more event source of its loop, here.
 */
#include "supervisor/sup_io.h"
#include "supervisor/sup_io_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/buildinfo.h"
#include "common/fault.h"
#include "common/ipcq.h"
#include "common/log.h"
#include "supervisor/adminproc.h"
#include "supervisor/certs.h"
#include "supervisor/notify.h"
#include "supervisor/staterec.h"
#include "supervisor/status.h"
#include "supervisor/upgproto.h"

#define UPG_EXIT_GRACE_MS 5000    /* leave at most this long after asked to */

static struct sup_io *
upg_sio(struct sup *s)
{
	return s->io;
}

struct upg_io *
upgrade_io_get(struct sup_io *io)
{
	if (io->upg)
		return io->upg;
	struct upg_io *u = calloc(1, sizeof *u);
	uint8_t *buf = sodium_malloc(UPG_BUF);
	if (!u || !buf) {
		free(u);
		if (buf)
			sodium_free(buf);
		return NULL;
	}
	u->io = io;
	u->fd = u->exec_pipe = -1;
	u->buf = buf;
	u->inherit.control_fd = u->inherit.tcp_fd = -1;
	ipcq_init(&u->q, 0, 0);
	io->upg = u;
	return u;
}

static void
upg_close_channel(struct upg_io *u)
{
	if (u->fd < 0)
		return;
	ev_io_stop(u->io->loop, &u->rio);
	ev_io_stop(u->io->loop, &u->wio);
	ipcq_clear(&u->q);
	close(u->fd);
	u->fd = -1;
}

void
upgrade_io_free(struct sup_io *io)
{
	struct upg_io *u = io->upg;
	if (!u)
		return;
	upg_close_channel(u);
	/* a successor still running is one that committed (a rollback killed
	 * it, a predecessor that dies kills it by its parent-death signal) */
	if (u->child > 0)
		ev_child_stop(io->loop, &u->cw);
	if (u->exec_pipe >= 0)
		close(u->exec_pipe);
	if (u->inherit.control_fd >= 0)
		close(u->inherit.control_fd);
	if (u->inherit.tcp_fd >= 0)
		close(u->inherit.tcp_fd);
	ev_timer_stop(io->loop, &u->exit_check);
	sodium_free(u->buf);
	free(u);
	io->upg = NULL;
}

/* ---- the channel on the loop ------------------------------------------------------- */

static void
upg_read(struct upg_io *u)
{
	struct sup *s = u->io->s;
	for (;;) {
		struct ipc_msg msg;
		char err[160] = "";
		sup_io_clock(s);
		int r = ipc_recv_frame(u->fd, u->buf, UPG_BUF, &msg, err, sizeof err);
		if (r == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (r == 1 && upg_decode(&msg, err, sizeof err) == -1) {
			ipc_close_fds(&msg);
			r = -1;
		}
		if (r != 1) {
			char why[256];
			snprintf(why, sizeof why, "upgrade channel: %s", r == 0 ? "closed by the other "
			    "ferryd" : err[0] ? err : strerror(errno));
			upg_close_channel(u);
			/* the successor's exit says how it ended: wait for it */
			if (u->child <= 0)
				sup_on_upgrade_gone(s, why);
			return;
		}
		sup_on_upgrade_msg(s, &msg);
		sodium_memzero(u->buf, sizeof(struct ipc_hdr) + msg.hdr.len);
		if (u->fd < 0)
			return;  /* the engine ended the upgrade meanwhile */
	}
}

static void
upg_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	upg_read(w->data);
}

static void
upg_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)revents;
	struct upg_io *u = w->data;
	int r = ipcq_flush(&u->q, u->fd);
	if (r != 0)
		ev_io_stop(loop, w);
}

void
upgrade_io_watch(struct upg_io *u, int fd)
{
	u->fd = fd;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	ev_io_init(&u->rio, upg_read_cb, fd, EV_READ);
	u->rio.data = u;
	ev_io_init(&u->wio, upg_write_cb, fd, EV_WRITE);
	u->wio.data = u;
	ev_io_start(u->io->loop, &u->rio);
}

static int
upg_queue(struct upg_io *u, uint32_t type, const void *payload, size_t len, const int *fds,
	  size_t nfds)
{
	if (!u || u->fd < 0) {
		errno = EPIPE;
		return -1;
	}
	if (ipcq_send(&u->q, u->fd, (enum ipc_type)type, 0, payload, len, fds, nfds) == -1)
		return -1;
	if (ipcq_pending(&u->q))
		ev_io_start(u->io->loop, &u->wio);
	return 0;
}

/* ---- predecessor: the successor process ------------------------------------------ */

static void
upg_child_cb(struct ev_loop *loop, ev_child *w, int revents)
{
	(void)revents;
	struct upg_io *u = w->data;
	struct sup *s = u->io->s;
	ev_child_stop(loop, w);
	int st = w->rstatus, e = 0;
	pid_t pid = u->child;
	char why[256];
	if (u->exec_pipe >= 0) {
		if (read(u->exec_pipe, &e, sizeof e) != (ssize_t)sizeof e)
			e = 0;
		close(u->exec_pipe);
		u->exec_pipe = -1;
	}
	if (e)
		snprintf(why, sizeof why, "cannot execute %s: %s", s->exec_path, strerror(e));
	else if (WIFEXITED(st))
		snprintf(why, sizeof why, "the new ferryd (pid %d) exited with status %d%s", (int)pid,
		    WEXITSTATUS(st), WEXITSTATUS(st) == 2 ? " (usage: a ferryd without upgrade "
		    "support?)" : "");
	else if (WIFSIGNALED(st))
		snprintf(why, sizeof why, "the new ferryd (pid %d) was killed by signal %d (%s)",
		    (int)pid, WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		snprintf(why, sizeof why, "the new ferryd (pid %d) ended (status 0x%x)", (int)pid, st);
	log_msg(sup_upgrade_phase(s) ? LOG_WARN : LOG_INFO, "new ferryd exited", "pid=%d "
	    "how=\"%s\"", (int)pid, why);
	/* what it said before it died still counts (COMMITTED above all);
	 * its EOF is not the news, this exit is */
	if (u->fd >= 0)
		upg_read(u);
	u->child = 0;
	upg_close_channel(u);
	sup_io_clock(s);
	sup_on_upgrade_gone(s, why);
}

static int
upg_spawn(struct sup *s, int32_t *pid_out, char *err, size_t errlen)
{
	struct sup_io *io = s->io;
	if (buildinfo_exec_check(s->exec_path, geteuid(), err, errlen) == -1)
		return -1;
	struct upg_io *u = upgrade_io_get(io);
	if (!u) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (u->child > 0 || u->fd >= 0) {
		snprintf(err, errlen, "a new ferryd (pid %d) is still running", (int)u->child);
		return -1;
	}
	int sv[2], ep[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
		snprintf(err, errlen, "socketpair: %s", strerror(errno));
		return -1;
	}
	if (pipe2(ep, O_CLOEXEC) == -1) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	int bufsz = 2 * (int)UPG_BUF;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &bufsz, sizeof bufsz);
	setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &bufsz, sizeof bufsz);
	setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &bufsz, sizeof bufsz);
	setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &bufsz, sizeof bufsz);
	pid_t ppid = getpid();
	char pp[24];
	snprintf(pp, sizeof pp, "%d", (int)ppid);
	pid_t pid = fork();
	if (pid == -1) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		close(ep[0]);
		close(ep[1]);
		return -1;
	}
	if (pid == 0) {
		/* In the child: it dies with us until it commits (it clears
		 * this then), and gets exactly the channel. */
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != ppid)
			_exit(1);
		if (sv[1] != UPG_FD) {
			if (dup2(sv[1], UPG_FD) == -1)
				_exit(126);
		} else {
			fcntl(UPG_FD, F_SETFD, 0);
		}
		char *argv[] = { s->exec_path, "--successor", "--ppid", pp, NULL };
		execv(s->exec_path, argv);
		int e = errno;
		if (write(ep[1], &e, sizeof e) < 0)
			_exit(127);
		_exit(127);
	}
	close(sv[1]);
	close(ep[1]);
	u->exec_pipe = ep[0];
	u->child = pid;
	ev_child_init(&u->cw, upg_child_cb, pid, 0);
	u->cw.data = u;
	ev_child_start(io->loop, &u->cw);
	upgrade_io_watch(u, sv[0]);
	*pid_out = pid;

	struct upg_offer o;
	memset(&o, 0, sizeof o);
	memcpy(o.magic, UPG_MAGIC, sizeof o.magic);
	o.hs_version = UPG_HS_VERSION;
	o.record_min = STATEREC_MIN;
	o.record_max = STATEREC_MAX;
	o.conn_record = IPC_CONN_RECORD_VERSION;
	o.ipc_version = IPC_PROTOCOL_VERSION;
	o.pid = (int32_t)ppid;
	o.init_timeout_ms = s->cfg.init_timeout_ms;
	o.log_level = (uint32_t)s->cfg.log_level;
	o.log_json = s->cfg.log_format == CFG_LOG_JSON;
	snprintf(o.version, sizeof o.version, "%s", buildinfo_version());
	snprintf(o.build_id, sizeof o.build_id, "%s", buildinfo_id());
	if (upg_queue(u, UPG_OFFER, &o, sizeof o, NULL, 0) == -1) {
		snprintf(err, errlen, "sending the offer: %s", strerror(errno));
		return -1;  /* the engine rolls back: end() kills it */
	}
	return 0;
}

/* The record in a sealed memfd: nobody can change it once sent. */
static int
upg_memfd(const char *text, size_t len, char *err, size_t errlen)
{
	int fd = memfd_create("ferry-upgrade-state", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd == -1) {
		snprintf(err, errlen, "memfd_create: %s", strerror(errno));
		return -1;
	}
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, text + off, len - off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(err, errlen, "writing the state record: %s", strerror(errno));
			close(fd);
			return -1;
		}
		off += (size_t)n;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) == -1) {
		snprintf(err, errlen, "sealing the state record: %s", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Ticket keys go straight out of guarded memory, never through the queue:
 * the queue must be empty first so that they stay in order. */
static int
upg_send_secrets(struct sup *s, struct upg_io *u, char *err, size_t errlen)
{
	if (ipcq_pending(&u->q) && ipcq_flush(&u->q, u->fd) != 1) {
		snprintf(err, errlen, "the upgrade channel is full");
		return -1;
	}
	struct upg_secret *k = sodium_malloc(sizeof *k);
	if (!k) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int rc = 0;
	for (size_t i = 0; i < s->n_clusters && rc == 0; i++) {
		const struct sup_cluster *c = s->clusters[i];
		if (!c->tickets)
			continue;
		sodium_memzero(k, sizeof *k);
		snprintf(k->cluster, sizeof k->cluster, "%s", c->name);
		memcpy(&k->keys, c->tickets, sizeof k->keys);
		if (ipc_send(u->fd, (enum ipc_type)UPG_SECRET, 0, k, sizeof *k, NULL, 0) == -1) {
			snprintf(err, errlen, "sending ticket keys: %s", strerror(errno));
			rc = -1;
		}
	}
	sodium_free(k);  /* (wipes it) */
	return rc;
}

static int
upg_send_state(struct sup *s, uint32_t record, char *err, size_t errlen)
{
	struct sup_io *io = s->io;
	struct upg_io *u = io->upg;
	if (!u || u->fd < 0) {
		snprintf(err, errlen, "the upgrade channel is closed");
		return -1;
	}
	struct staterec_io sio;
	memset(&sio, 0, sizeof sio);
	sio.notify_socket = notify_address();
	if (ev_is_active(&io->tickets))
		sio.ticket_rotation_next_mono = s->now_ms +
		    (uint64_t)(ev_timer_remaining(io->loop, &io->tickets) * 1000.0);
	struct admin_listeners al = { -1, 0, 0, -1 };
	if (io->admin)
		adminproc_listeners(io->admin, &al);
	sio.control = al.control_fd >= 0;
	sio.control_path = s->cfg.control_socket;
	sio.control_dev = (uint64_t)al.control_dev;
	sio.control_ino = (uint64_t)al.control_ino;
	sio.admin = al.tcp_fd >= 0;
	sio.admin_addr = s->cfg.admin_listen;
	adminproc_counters(io->admin, s, sio.admin_counters);

	size_t len;
	char *text = staterec_encode(s, &sio, record, &len);
	if (!text) {
		snprintf(err, errlen, "encoding the state record: out of memory");
		return -1;
	}
	int mfd = upg_memfd(text, len, err, errlen);
	free(text);
	if (mfd == -1)
		return -1;
	struct upg_state_hdr h = { .record = record, .size = len };
	int rc = upg_queue(u, UPG_STATE, &h, sizeof h, &mfd, 1);
	close(mfd);
	if (rc == -1) {
		snprintf(err, errlen, "sending the state record: %s", strerror(errno));
		return -1;
	}

	size_t max = 2;
	for (size_t i = 0; i < s->n_clusters; i++)
		max += s->clusters[i]->ccfg ? s->clusters[i]->ccfg->n_listeners : 0;
	int *fds = calloc(max, sizeof *fds);
	if (!fds) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	size_t n = staterec_listener_fds(s, fds, max);
	if (sio.control)
		fds[n++] = al.control_fd;
	if (sio.admin)
		fds[n++] = al.tcp_fd;
	for (size_t first = 0; rc == 0 && first < n; first += IPC_MAX_FDS) {
		size_t cnt = n - first < IPC_MAX_FDS ? n - first : IPC_MAX_FDS;
		struct ipc_listeners li = { .count = (uint32_t)cnt, .first = (uint32_t)first,
					    .total = (uint32_t)n };
		rc = upg_queue(u, UPG_FDS, &li, sizeof li, fds + first, cnt);
	}
	free(fds);
	if (rc == -1) {
		snprintf(err, errlen, "sending the listening sockets: %s", strerror(errno));
		return -1;
	}
	if (upg_send_secrets(s, u, err, errlen) == -1)
		return -1;
	if (upg_queue(u, UPG_SENT, NULL, 0, NULL, 0) == -1) {
		snprintf(err, errlen, "upgrade channel: %s", strerror(errno));
		return -1;
	}
	log_info("upgrade: state handed to the new ferryd", "record=%u bytes=%zu sockets=%zu",
	    record, len, n);
	return 0;
}

/* ---- the operations both sides use ----------------------------------------------- */

void
upgrade_io_fault_stop(const char *phase)
{
	const char *at = fault_value("stop-at");
	size_t n = strlen(phase);
	if (at && strncmp(at, phase, n) == 0 && (at[n] == 0 || at[n] == ','))
		raise(SIGSTOP);
}

static int
upg_send(struct sup *s, uint32_t type, const void *payload, size_t len)
{
	struct upg_io *u = upg_sio(s)->upg;
	int rc = upg_queue(u, type, payload, len, NULL, 0);
	if (type == UPG_PREPARED) {
		upgrade_io_fault_stop("prepared");
		if (fault_at("crash-after-prepared")) {
			if (u)
				ipcq_flush(&u->q, u->fd);
			signal(SIGSEGV, SIG_DFL);
			raise(SIGSEGV);
		}
	}
	if (type == UPG_COMMITTED)
		upgrade_io_fault_stop("committed");
	return rc;
}

static int
upg_send_conn(struct sup *s, const void *payload, size_t len, const int *fds, size_t nfds)
{
	return upg_queue(upg_sio(s)->upg, UPG_CONN, payload, len, fds, nfds);
}

static void
upg_end(struct sup *s)
{
	struct upg_io *u = upg_sio(s)->upg;
	if (!u)
		return;
	/* its exit is reaped by the child watcher, which finds no upgrade */
	if (u->child > 0)
		kill(u->child, SIGKILL);
	upg_close_channel(u);
}

static void
upg_admin(struct sup *s, enum sup_upgrade_admin how)
{
	struct adminproc *a = upg_sio(s)->admin;
	if (!a)
		return;
	switch (how) {
	case SUP_UPG_ADMIN_PAUSE:
		adminproc_accepting(a, false);
		break;
	case SUP_UPG_ADMIN_RESUME:
		adminproc_accepting(a, true);
		break;
	case SUP_UPG_ADMIN_CLOSE:
		adminproc_close_listeners(a);
		break;
	}
}

static void
upg_notify(struct sup *s, enum sup_upgrade_notify what, int32_t pid, const char *status)
{
	char buf[256];
	switch (what) {
	case SUP_UPG_NOTIFY_RELOADING:
		notify_reloading();
		break;
	case SUP_UPG_NOTIFY_READY:
		if (!status) {
			status_summary_text(s, buf, sizeof buf);
			status = buf;
		}
		notify_ready(status);
		break;
	case SUP_UPG_NOTIFY_MAINPID:
		notify_mainpid(pid, status);
		break;
	}
}

static void
upg_answer(struct sup *s, uint64_t waiter, const struct sup_upgrade_record *rec)
{
	adminproc_answer_upgrade(upg_sio(s)->admin, waiter, rec);
}

static void
upg_commit(struct sup *s)
{
	struct sup_io *io = s->io;
	struct upg_io *u = io->upg;
	char err[256];
	/* we outlive the predecessor from now on */
	prctl(PR_SET_PDEATHSIG, 0);
	if (!u || io->admin)
		return;
	io->admin = adminproc_new(s, io->loop, &io->creds, &u->inherit, err, sizeof err);
	if (io->admin) {
		/* the admin process's sockets now; it starts without waiting (the
		 * loop runs), restarted like any admin process if it fails */
		u->inherit.control_fd = u->inherit.tcp_fd = -1;
		adminproc_start(io->admin, false, err, sizeof err);
	} else {
		log_error("upgrade: cannot serve the admin API on the inherited sockets",
		    "error=\"%s\"", err);
	}
}

static void
upg_ready(struct sup *s)
{
	struct sup_io *io = s->io;
	struct upg_io *u = io->upg;
	status_summary_text(s, io->last_status, sizeof io->last_status);
	notify_ready(io->last_status);
	io->notified_ready = true;
	/* the rotation goes on where the predecessor's was: a moment that
	 * passed during the upgrade comes at once */
	double after = (double)s->cfg.tls_ticket_rotation_ms / 1000.0;
	if (u && u->rotation_next_mono)
		after = u->rotation_next_mono > s->now_ms ?
		    (double)(u->rotation_next_mono - s->now_ms) / 1000.0 : 0.001;
	sup_io_tickets_arm(io, after);
	certs_update(s, "upgrade");  /* expiry warnings and metrics, as at a start */
	upgrade_io_fault_stop("tail");
}

static void
upg_exit_check_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct upg_io *u = t->data;
	upgrade_io_prepare(u->io);
}

static void
upg_exit(struct sup *s, int code)
{
	struct sup_io *io = s->io;
	struct upg_io *u = upgrade_io_get(io);
	if (!u) {
		ev_break(io->loop, EVBREAK_ALL);
		return;
	}
	u->exiting = true;
	u->exit_code = code;
	s->exit_code = code;
	u->exit_by_ms = clock_mono_ms() + (code == 0 ? UPG_EXIT_GRACE_MS : 0);
	ev_timer_init(&u->exit_check, upg_exit_check_cb, 0.05, 0.05);
	u->exit_check.data = u;
	ev_timer_start(io->loop, &u->exit_check);
}

void
upgrade_io_prepare(struct sup_io *io)
{
	struct upg_io *u = io->upg;
	if (!u || !u->exiting)
		return;
	if (u->fd >= 0 && ipcq_pending(&u->q) && ipcq_flush(&u->q, u->fd) == 0 &&
	    clock_mono_ms() < u->exit_by_ms)
		return;
	if (io->admin && adminproc_busy(io->admin) && clock_mono_ms() < u->exit_by_ms)
		return;  /* an answer not yet with the admin process (which, when
		            stopped, finishes writing it) */
	io->s->exit_code = u->exit_code;
	ev_break(io->loop, EVBREAK_ALL);
}

const struct sup_upgrade_ops upgrade_io_ops = {
	.spawn = upg_spawn,
	.send_state = upg_send_state,
	.send = upg_send,
	.send_conn = upg_send_conn,
	.end = upg_end,
	.admin = upg_admin,
	.notify = upg_notify,
	.answer = upg_answer,
	.commit = upg_commit,
	.ready = upg_ready,
	.exit = upg_exit,
};
