/*
 * adminproc — the admin process from the supervisor's side; see
 * adminproc.h for its life and the checks on what it sends.
 *
 * Event sources, on the supervisor's loop: its exit (ev_child), its
 * control channel (ev_io, read while nothing waits to be sent to it, write
 * while something does), one timer for the state's deadline (READY, the
 * restart) and one for the watchdog. Nothing blocks: the channel is
 * non-blocking and queued (ipcq.h), answers above ADMINPROTO_INLINE_MAX go
 * as a sealed memfd, the only wait is adminproc_stop's, bounded, when
 * ferryd leaves.
 */
#include "supervisor/adminproc.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/ipc.h"
#include "common/ipcq.h"
#include "common/log.h"
#include "common/shmblock.h"
#include "common/units.h"
#include "supervisor/admin_listen.h"
#include "supervisor/admincreds.h"
#include "supervisor/supervisor.h"

#ifndef FERRY_LIBEXECDIR
#define FERRY_LIBEXECDIR "/usr/libexec/ferry"
#endif

#define ADMINPROC_STOP_GRACE_MS 1000

enum adminproc_state {
	ADMINPROC_STOPPED = 0,
	ADMINPROC_STARTING,
	ADMINPROC_RUNNING,
	ADMINPROC_BACKOFF,
};

static const char *
adminproc_state_str(enum adminproc_state st)
{
	switch (st) {
	case ADMINPROC_STOPPED:
		return "stopped";
	case ADMINPROC_STARTING:
		return "starting";
	case ADMINPROC_RUNNING:
		return "running";
	case ADMINPROC_BACKOFF:
		return "backoff";
	}
	return "unknown";
}

/* A request answered later by the engine: its waiter id and the admin
 * process's request id. */
struct adminproc_deferred {
	uint64_t waiter;
	uint64_t id;
};

struct adminproc {
	struct sup *s;
	struct ev_loop *loop;
	struct childproc_creds creds;
	char exe[PATH_MAX];
	int exe_fd;                     /* O_PATH: every start runs the same file */
	int control_fd, http_fd;        /* the listening sockets, kept for ferryd's life */
	char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	dev_t socket_dev;               /* to unlink only our own socket */
	ino_t socket_ino;
	int counters_fd;
	struct adminproto_counters *counters;
	struct admincreds creds_now;    /* sent to every admin process */
	struct admincreds pending;      /* of a reload, until it ends */
	bool have_pending;
	uint32_t log_level;
	bool log_json;

	/* the process */
	enum adminproc_state state;
	bool started;                   /* adminproc_start called, not stopped */
	enum adminproto_listen_state listen_state; /* what its accepting should be */
	pid_t pid;
	int chan;                       /* our end of its channel, -1 */
	struct ipcq q;
	ev_io rio, wio;
	ev_child child;
	ev_timer deadline;              /* READY, or the restart */
	ev_timer ping;
	uint64_t ping_seq;
	uint64_t last_pong_ms;          /* mono */
	uint64_t started_ms;            /* mono: last fork */
	uint64_t since_wall_ms;         /* of the state */
	uint64_t restarts;
	uint64_t backoff_ms;
	char last_exit[96];
	struct adminproto_session session;
	struct adminproc_deferred deferred[ADMINPROTO_MAX_INFLIGHT];
	uint64_t next_waiter;
	uint8_t buf[sizeof(struct ipc_hdr) + IPC_MAX_PAYLOAD];
};

static void adminproc_spawn(struct adminproc *ap);

static void
adminproc_set_state(struct adminproc *ap, enum adminproc_state st)
{
	ap->state = st;
	ap->since_wall_ms = clock_wall_ms();
}

/* ---- finding ferry-admin ---------------------------------------------------------------- */

/* An executable regular file? */
static bool
adminproc_exe_ok(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0;
}

/* ferry-admin next to ferryd's own executable (a build tree, or a package
 * that installs both in one place), else in FERRY_LIBEXECDIR. */
static int
adminproc_find_exe(char *out, size_t len, char *err, size_t errlen)
{
	char self[PATH_MAX], near[PATH_MAX + 32] = "";
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);

	if (n > 0) {
		self[n] = '\0';
		snprintf(near, sizeof near, "%s/%s", dirname(self), ADMINPROC_EXE_NAME);
		if (adminproc_exe_ok(near)) {
			snprintf(out, len, "%s", near);
			return 0;
		}
	}
	if (adminproc_exe_ok(FERRY_LIBEXECDIR "/" ADMINPROC_EXE_NAME)) {
		snprintf(out, len, "%s", FERRY_LIBEXECDIR "/" ADMINPROC_EXE_NAME);
		return 0;
	}
	snprintf(err, errlen, "%s not found: looked for %s and %s", ADMINPROC_EXE_NAME,
	    near[0] ? near : "(ferryd's own path unknown)", FERRY_LIBEXECDIR "/"
	    ADMINPROC_EXE_NAME);
	return -1;
}

/* fd moved to 4 or above (closed either way); -1 with errno. */
static int
adminproc_fd_above3(int fd)
{
	int nfd = fcntl(fd, F_DUPFD_CLOEXEC, 4), e = errno;

	close(fd);
	errno = e;
	return nfd;
}

/* ---- the process's end --------------------------------------------------------------- */

static void
adminproc_chan_close(struct adminproc *ap)
{
	ev_io_stop(ap->loop, &ap->rio);
	ev_io_stop(ap->loop, &ap->wio);
	ev_timer_stop(ap->loop, &ap->ping);
	ipcq_clear(&ap->q);
	if (ap->chan >= 0)
		close(ap->chan);
	ap->chan = -1;
	/* its requests died with it: a later engine answer finds no waiter */
	memset(ap->deferred, 0, sizeof ap->deferred);
	memset(&ap->session, 0, sizeof ap->session);
}

/* Kill it (once; its exit comes through ev_child) and read nothing more. */
static void
adminproc_kill(struct adminproc *ap, const char *why)
{
	if (ap->pid <= 0)
		return;
	log_error("killing the admin process", "pid=%d reason=\"%s\"", (int)ap->pid, why);
	kill(ap->pid, SIGKILL);
	ev_io_stop(ap->loop, &ap->rio);
	ev_io_stop(ap->loop, &ap->wio);
	ev_timer_stop(ap->loop, &ap->ping);
}

static void
adminproc_exit_text(int status, char *buf, size_t len)
{
	if (WIFSIGNALED(status))
		snprintf(buf, len, "signal %d", WTERMSIG(status));
	else
		snprintf(buf, len, "exit %d", WEXITSTATUS(status));
}

static void
adminproc_child_cb(struct ev_loop *loop, ev_child *w, int revents)
{
	struct adminproc *ap = w->data;
	uint64_t ran = clock_mono_ms() - ap->started_ms;

	(void)revents;
	ev_child_stop(loop, w);
	ev_timer_stop(loop, &ap->deadline);
	adminproc_chan_close(ap);
	adminproc_exit_text(w->rstatus, ap->last_exit, sizeof ap->last_exit);
	ap->pid = 0;
	if (!ap->started) {
		adminproc_set_state(ap, ADMINPROC_STOPPED);
		return;
	}
	/* unexpected: restart after a backoff that a long run resets */
	ap->restarts++;
	if (ran >= ADMINPROC_STABLE_MS || ap->backoff_ms == 0)
		ap->backoff_ms = ADMINPROC_BACKOFF_MIN_MS;
	else if ((ap->backoff_ms *= 2) > ADMINPROC_BACKOFF_MAX_MS)
		ap->backoff_ms = ADMINPROC_BACKOFF_MAX_MS;
	log_warn("admin process exited; restarting it", "pid=%d status=\"%s\" ran_ms=%llu "
	    "restarts=%llu restart_in_ms=%llu%s", (int)w->rpid, ap->last_exit,
	    (unsigned long long)ran, (unsigned long long)ap->restarts,
	    (unsigned long long)ap->backoff_ms,
	    WIFEXITED(w->rstatus) && WEXITSTATUS(w->rstatus) == CHILDPROC_EXIT_EXEC ?
	    " hint=\"cannot execute ferry-admin as the workers' user\"" : "");
	adminproc_set_state(ap, ADMINPROC_BACKOFF);
	ev_timer_set(&ap->deadline, (double)ap->backoff_ms / 1000.0, 0.);
	ev_timer_start(loop, &ap->deadline);
}

static void
adminproc_deadline_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct adminproc *ap = w->data;

	(void)loop;
	(void)revents;
	if (ap->state == ADMINPROC_BACKOFF)
		adminproc_spawn(ap);
	else if (ap->state == ADMINPROC_STARTING)
		adminproc_kill(ap, "not ready in time");
}

static void
adminproc_ping_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct adminproc *ap = w->data;
	uint64_t now = clock_mono_ms();
	struct ipc_ping ping = { .seq = ++ap->ping_seq };

	(void)loop;
	(void)revents;
	if (now - ap->last_pong_ms > ADMINPROC_WATCHDOG_MS) {
		adminproc_kill(ap, "unresponsive: no answer to the watchdog");
		return;
	}
	if (ipcq_send(&ap->q, ap->chan, IPC_PING, 0, &ping, sizeof ping, NULL, 0) == -1 &&
	    errno != EPIPE && errno != ECONNRESET) {
		adminproc_kill(ap, "control channel full");
		return;
	}
	if (ipcq_pending(&ap->q))
		ev_io_start(ap->loop, &ap->wio);
}

/* ---- answers ------------------------------------------------------------------------------ */

/* Send one answer (its body freed here). -1: the channel cannot take it
 * (the admin process is killed). */
static int
adminproc_send_answer(struct adminproc *ap, uint64_t id, struct admin_answer *a)
{
	struct adminproto_answer h = {
		.id = id, .status = (uint32_t)a->status, .ctype = (uint32_t)a->ctype,
		.body_len = (uint32_t)a->body_len,
	};
	int rc, fd = -1;

	if (a->body_len > ADMINPROTO_BODY_MAX) {
		/* not expected: status of a million clusters */
		free(a->body);
		a->body = adminproto_error_json("answer too large", "error", &a->body_len);
		a->status = 500;
		a->ctype = ADMINPROTO_CT_JSON;
		h.status = 500;
		h.ctype = ADMINPROTO_CT_JSON;
		h.body_len = a->body ? (uint32_t)a->body_len : 0;
	}
	if (a->body == NULL)
		h.body_len = 0;
	if (h.body_len <= ADMINPROTO_INLINE_MAX) {
		uint8_t *msg = malloc(sizeof h + h.body_len);

		if (msg == NULL) {
			rc = -1;
			errno = ENOMEM;
		} else {
			memcpy(msg, &h, sizeof h);
			if (h.body_len)
				memcpy(msg + sizeof h, a->body, h.body_len);
			rc = ipcq_send(&ap->q, ap->chan, IPC_ADMIN_ANSWER, 0, msg, sizeof h + h.body_len,
			    NULL, 0);
			free(msg);
		}
	} else if ((fd = shmblock_seal_bytes("ferry-answer", a->body, h.body_len)) == -1) {
		rc = -1;
	} else {
		h.flags = ADMINPROTO_ANS_MEMFD;
		rc = ipcq_send(&ap->q, ap->chan, IPC_ADMIN_ANSWER, 0, &h, sizeof h, &fd, 1);
		close(fd);
	}
	free(a->body);
	a->body = NULL;
	adminproto_session_done(&ap->session);
	if (rc == -1) {
		char why[96];

		snprintf(why, sizeof why, "cannot send an answer: %s", strerror(errno));
		if (errno != EPIPE && errno != ECONNRESET)
			adminproc_kill(ap, why);
		return -1;
	}
	if (ipcq_pending(&ap->q)) {
		/* nothing more is read from it until it has taken this */
		ev_io_stop(ap->loop, &ap->rio);
		ev_io_start(ap->loop, &ap->wio);
	}
	return 0;
}

/* The admin process's request id of the deferred request the engine calls
 * waiter, forgotten from now on; false when its admin process has gone
 * since (nobody waits for the answer any more). */
static bool
adminproc_deferred_take(struct adminproc *ap, uint64_t waiter, uint64_t *id)
{
	if (ap == NULL || waiter == 0)
		return false;
	for (size_t i = 0; i < ADMINPROTO_MAX_INFLIGHT; i++)
		if (ap->deferred[i].waiter == waiter) {
			*id = ap->deferred[i].id;
			memset(&ap->deferred[i], 0, sizeof ap->deferred[i]);
			return true;
		}
	return false;
}

void
adminproc_answer_reload(struct adminproc *ap, uint64_t waiter, const struct sup_reload_record *rec)
{
	struct admin_answer a = { 0 };
	uint64_t id;

	if (!adminproc_deferred_take(ap, waiter, &id))
		return;
	admin_api_reload_answer(ap->s, rec, &a);
	adminproc_send_answer(ap, id, &a);
}

void
adminproc_answer_op(struct adminproc *ap, uint64_t waiter, const struct sup_answer *ans)
{
	struct admin_answer a = { 0 };
	uint64_t id;

	if (!adminproc_deferred_take(ap, waiter, &id))
		return;
	admin_api_op_answer(ans, &a);
	adminproc_send_answer(ap, id, &a);
}

void
adminproc_answer_upgrade(struct adminproc *ap, uint64_t waiter, const struct sup_upgrade_record *rec)
{
	struct admin_answer a = { 0 };
	uint64_t id;

	if (!adminproc_deferred_take(ap, waiter, &id))
		return;
	admin_api_upgrade_answer(ap->s, rec, &a);
	adminproc_send_answer(ap, id, &a);
}

/* ---- requests ----------------------------------------------------------------------------- */

void
adminproc_info(const struct adminproc *ap, struct admin_api_proc *out)
{
	out->counters = ap->counters;
	out->pid = ap->state == ADMINPROC_RUNNING || ap->state == ADMINPROC_STARTING ? ap->pid : 0;
	out->state = adminproc_state_str(ap->state);
	out->since_wall_ms = ap->since_wall_ms;
	out->restarts = ap->restarts;
	out->last_exit = ap->last_exit;
}

/* One IPC_ADMIN_REQUEST. -1 with err: malformed (the caller kills it). */
static int
adminproc_on_request(struct adminproc *ap, const struct ipc_msg *msg, char *err, size_t errlen)
{
	struct adminproto_request_view v;
	struct admin_api_proc info;
	struct admin_answer a;
	char *body = NULL;
	uint64_t waiter;
	size_t slot;

	if (adminproto_request_check(msg->payload, msg->hdr.len, msg->nfds, &v, err, errlen) == -1 ||
	    adminproto_session_accept(&ap->session, v.rq.id, err, errlen) == -1)
		return -1;
	if (v.rq.flags & ADMINPROTO_REQ_BODY) {
		if ((body = malloc(v.rq.body_len)) == NULL) {
			/* memory is short here, not a fault of the admin process */
			memset(&a, 0, sizeof a);
			a.status = 503;
			a.body = adminproto_error_json("ferryd is out of memory", "error", &a.body_len);
			adminproc_send_answer(ap, v.rq.id, &a);
			return 0;
		}
		if (shmblock_read_bytes(msg->fds[0], body, v.rq.body_len) == -1) {
			snprintf(err, errlen, "request body memfd: %s", strerror(errno));
			free(body);
			return -1;
		}
	}
	for (slot = 0; slot < ADMINPROTO_MAX_INFLIGHT && ap->deferred[slot].waiter != 0; slot++)
		;
	/* the session's bound keeps a slot free for every outstanding request */
	waiter = ++ap->next_waiter;
	adminproc_info(ap, &info);
	memset(&a, 0, sizeof a);
	if (admin_api_handle(ap->s, &v, body, body ? v.rq.body_len : 0, waiter, &info, &a) ==
	    ADMIN_API_DEFERRED && slot < ADMINPROTO_MAX_INFLIGHT) {
		ap->deferred[slot].waiter = waiter;
		ap->deferred[slot].id = v.rq.id;
	} else {
		adminproc_send_answer(ap, v.rq.id, &a);
	}
	free(body);
	return 0;
}

/* A READY of this protocol's version (ipc_decode checked its size). */
static bool
adminproc_ready_ok(const struct ipc_msg *msg, char *err, size_t errlen)
{
	struct ipc_ready r;

	memcpy(&r, msg->payload, sizeof r);
	if (r.ipc_version == IPC_PROTOCOL_VERSION)
		return true;
	snprintf(err, errlen, "READY of protocol version %u, not %d", r.ipc_version,
	    IPC_PROTOCOL_VERSION);
	return false;
}

static void
adminproc_ready(struct adminproc *ap)
{
	ev_timer_stop(ap->loop, &ap->deadline);
	adminproc_set_state(ap, ADMINPROC_RUNNING);
	ap->last_pong_ms = clock_mono_ms();
	ev_timer_again(ap->loop, &ap->ping);
	log_info("admin process ready", "pid=%d user_uid=%d", (int)ap->pid,
	    ap->creds.drop ? (int)ap->creds.uid : (int)geteuid());
}

static void
adminproc_read(struct adminproc *ap)
{
	struct sup *s = ap->s;

	while (ap->chan >= 0 && !ipcq_pending(&ap->q)) {
		struct ipc_msg msg;
		char err[256] = "";
		int r, bad = 0;

		sup_set_clock(s, clock_mono_ms(), clock_wall_ms());
		r = ipc_recv(ap->chan, ap->buf, sizeof ap->buf, &msg, err, sizeof err);
		if (r == -1 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return;
		if (r == 0 || (r == -1 && errno == ECONNRESET)) {
			/* it is exiting: ev_child tells */
			ev_io_stop(ap->loop, &ap->rio);
			return;
		}
		if (r == -1) {
			adminproc_kill(ap, err[0] ? err : strerror(errno));
			return;
		}
		if (msg.hdr.generation != 0) {
			snprintf(err, sizeof err, "%s with generation %llu", ipc_type_str(msg.hdr.type),
			    (unsigned long long)msg.hdr.generation);
			bad = 1;
		} else if (msg.nfds && msg.hdr.type != IPC_ADMIN_REQUEST) {
			snprintf(err, sizeof err, "%s with file descriptors", ipc_type_str(msg.hdr.type));
			bad = 1;
		} else if (msg.hdr.type == IPC_ADMIN_REQUEST) {
			if (ap->state != ADMINPROC_RUNNING) {
				snprintf(err, sizeof err, "a request before READY");
				bad = 1;
			} else {
				bad = adminproc_on_request(ap, &msg, err, sizeof err) == -1;
			}
		} else if (msg.hdr.type == IPC_READY && ap->state == ADMINPROC_STARTING) {
			if (adminproc_ready_ok(&msg, err, sizeof err))
				adminproc_ready(ap);
			else
				bad = 1;
		} else if (msg.hdr.type == IPC_PONG) {
			ap->last_pong_ms = clock_mono_ms();
		} else {
			snprintf(err, sizeof err, "unexpected message %s", ipc_type_str(msg.hdr.type));
			bad = 1;
		}
		ipc_close_fds(&msg);
		if (bad) {
			char why[300];

			snprintf(why, sizeof why, "malformed message: %s", err);
			adminproc_kill(ap, why);
			return;
		}
	}
}

static void
adminproc_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	adminproc_read(w->data);
}

static void
adminproc_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct adminproc *ap = w->data;
	int r = ipcq_flush(&ap->q, ap->chan);

	(void)revents;
	if (r == 0)
		return;
	ev_io_stop(loop, w);
	if (r == 1 && ap->pid > 0) {
		/* its answers are out: read its requests again */
		ev_io_start(loop, &ap->rio);
		adminproc_read(ap);
	}
}

/* ---- starting ------------------------------------------------------------------------------- */

/* The setup it reads first: SETUP with the counters block and the
 * listening sockets, then its credentials. */
static int
adminproc_send_setup(struct adminproc *ap)
{
	struct adminproto_setup su = {
		.version = ADMINPROTO_VERSION,
		.flags = ap->http_fd != -1 ? ADMINPROTO_SETUP_HTTP : 0,
		.log_level = ap->log_level,
		.log_json = ap->log_json,
	};
	int fds[3] = { ap->counters_fd, ap->control_fd, ap->http_fd };
	uint8_t *creds = NULL;
	size_t len = 0;
	int rc;

	rc = ipcq_send(&ap->q, ap->chan, IPC_ADMIN_SETUP, 0, &su, sizeof su, fds,
	    ap->http_fd != -1 ? 3 : 2);
	if (rc == 0 && (rc = admincreds_encode(&ap->creds_now, &creds, &len)) == 0) {
		rc = ipcq_send(&ap->q, ap->chan, IPC_ADMIN_CREDS, 0, creds, len, NULL, 0);
		sodium_memzero(creds, len);  /* a queued copy is wiped as it leaves */
		free(creds);
	}
	/* paused meanwhile (an upgrade commits) */
	if (rc == 0 && ap->listen_state != ADMINPROTO_LISTEN_ACCEPT) {
		struct adminproto_listen l = { .state = (uint32_t)ap->listen_state };

		rc = ipcq_send(&ap->q, ap->chan, IPC_ADMIN_LISTEN, 0, &l, sizeof l, NULL, 0);
	}
	if (ipcq_pending(&ap->q))
		ev_io_start(ap->loop, &ap->wio);
	return rc;
}

static void
adminproc_spawn(struct adminproc *ap)
{
	int sv[2], bufsz = 2 * (int)(sizeof(struct ipc_hdr) + IPC_MAX_PAYLOAD);
	pid_t ppid = getpid(), pid;

	if (ap->control_fd < 0) {
		/* its sockets went to another ferryd: nothing to serve */
		adminproc_set_state(ap, ADMINPROC_STOPPED);
		return;
	}

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1)
		goto retry;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &bufsz, sizeof bufsz);
	setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &bufsz, sizeof bufsz);
	fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
	if ((pid = fork()) == -1) {
		close(sv[0]);
		close(sv[1]);
		goto retry;
	}
	if (pid == 0) {
		char pp[24];
		char *argv[] = { ADMINPROC_EXE_NAME, "--ppid", pp, NULL };
		extern char **environ;

		snprintf(pp, sizeof pp, "%d", (int)ppid);
		childproc_prepare(sv[1], &ap->creds);
		/* kept open across exec: an interpreter needs /dev/fd/N; the
		 * admin process closes it */
		fcntl(ap->exe_fd, F_SETFD, 0);
		fexecve(ap->exe_fd, argv, environ);
		_exit(CHILDPROC_EXIT_EXEC);
	}
	close(sv[1]);
	ap->pid = pid;
	ap->chan = sv[0];
	ap->started_ms = clock_mono_ms();
	adminproc_set_state(ap, ADMINPROC_STARTING);
	ev_child_set(&ap->child, pid, 0);
	ev_child_start(ap->loop, &ap->child);
	ev_io_set(&ap->rio, ap->chan, EV_READ);
	ev_io_set(&ap->wio, ap->chan, EV_WRITE);
	ev_io_start(ap->loop, &ap->rio);
	ev_timer_set(&ap->deadline, ADMINPROC_START_TIMEOUT_MS / 1000.0, 0.);
	ev_timer_start(ap->loop, &ap->deadline);
	if (adminproc_send_setup(ap) == -1)
		adminproc_kill(ap, "cannot send its setup");
	log_debug("admin process started", "pid=%d exe=%s", (int)pid, ap->exe);
	return;
retry:
	/* like an exit: try again after the backoff */
	log_error("cannot start the admin process", "error=\"%s\"", strerror(errno));
	ap->started_ms = clock_mono_ms();
	ap->backoff_ms = ap->backoff_ms ? ap->backoff_ms : ADMINPROC_BACKOFF_MIN_MS;
	adminproc_set_state(ap, ADMINPROC_BACKOFF);
	ev_timer_set(&ap->deadline, (double)ap->backoff_ms / 1000.0, 0.);
	ev_timer_start(ap->loop, &ap->deadline);
}

/* The first start, before the loop runs: wait for READY here, so that a
 * missing or broken ferry-admin (not executable as `user`, of another
 * build) stops ferryd with the reason instead of a restart loop. Blocking
 * is fine: nothing else is served yet. 0, or -1 with err (the process is
 * gone). */
static int
adminproc_wait_ready(struct adminproc *ap, char *err, size_t errlen)
{
	uint64_t until = clock_mono_ms() + ADMINPROC_START_TIMEOUT_MS;
	bool eof = false;
	int status;

	for (;;) {
		uint64_t now = clock_mono_ms();
		struct pollfd p = { .fd = ap->chan, .events = POLLIN };
		struct ipc_msg msg;
		char why[160] = "";
		int r;

		if (now >= until) {
			snprintf(err, errlen, "%s did not start within %d ms", ap->exe,
			    ADMINPROC_START_TIMEOUT_MS);
			kill(ap->pid, SIGKILL);
			break;
		}
		if (ipcq_pending(&ap->q) && ipcq_flush(&ap->q, ap->chan) == -1)
			eof = true;
		if (ipcq_pending(&ap->q))
			p.events |= POLLOUT;
		if (!eof && poll(&p, 1, (int)(until - now < 20 ? until - now : 20)) > 0 &&
		    (p.revents & (POLLIN | POLLHUP | POLLERR))) {
			r = ipc_recv(ap->chan, ap->buf, sizeof ap->buf, &msg, why, sizeof why);
			if (r == 1) {
				bool ready = msg.hdr.type == IPC_READY && msg.nfds == 0 &&
				    msg.hdr.generation == 0 && adminproc_ready_ok(&msg, why,
				    sizeof why);

				ipc_close_fds(&msg);
				if (ready) {
					ev_io_start(ap->loop, &ap->rio);
					if (ipcq_pending(&ap->q))
						ev_io_start(ap->loop, &ap->wio);
					adminproc_ready(ap);
					return 0;
				}
				if (msg.hdr.type == IPC_READY)
					snprintf(err, errlen, "%s: %s", ap->exe, why);
				else
					snprintf(err, errlen, "%s sent %s before READY", ap->exe,
					    ipc_type_str(msg.hdr.type));
				kill(ap->pid, SIGKILL);
				break;
			}
			if (r == 0 || (errno != EAGAIN && errno != EINTR))
				eof = true;
		}
		if (eof) {
			/* its end of the channel closed: it is exiting; say why */
			if (waitpid(ap->pid, &status, WNOHANG) == ap->pid) {
				char how[64];

				adminproc_exit_text(status, how, sizeof how);
				snprintf(err, errlen, "%s exited before it was ready (%s)%s", ap->exe, how,
				    WIFEXITED(status) && WEXITSTATUS(status) == CHILDPROC_EXIT_EXEC ?
				    ": it cannot be executed as the workers' user" :
				    WIFEXITED(status) && WEXITSTATUS(status) == CHILDPROC_EXIT_CREDS ?
				    ": bad setup or credentials (see its log line above)" : "");
				ap->pid = 0;
				break;
			}
			struct timespec ts = { .tv_sec = 0, .tv_nsec = 5 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
	/* reaped here, not by the loop */
	ev_child_stop(ap->loop, &ap->child);
	if (ap->pid > 0)
		waitpid(ap->pid, &status, 0);
	ap->pid = 0;
	adminproc_chan_close(ap);
	return -1;
}

int
adminproc_start(struct adminproc *ap, bool wait, char *err, size_t errlen)
{
	ap->started = true;
	adminproc_spawn(ap);
	if (ap->pid > 0 && wait) {
		ev_io_stop(ap->loop, &ap->rio);
		ev_io_stop(ap->loop, &ap->wio);
		if (adminproc_wait_ready(ap, err, errlen) == -1)
			goto fail;
	}
	if (ap->pid <= 0 && wait) {
		/* later starts retry after the backoff (adminproc_spawn) */
		snprintf(err, errlen, "cannot start the admin process: %s", strerror(errno));
		goto fail;
	}
	return 0;
fail:
	ap->started = false;
	ev_timer_stop(ap->loop, &ap->deadline);
	adminproc_set_state(ap, ADMINPROC_STOPPED);
	return -1;
}

void
adminproc_stop(struct adminproc *ap)
{
	uint64_t until;
	int status;

	ap->started = false;
	ev_timer_stop(ap->loop, &ap->deadline);
	if (ap->pid <= 0) {
		adminproc_set_state(ap, ADMINPROC_STOPPED);
		return;
	}
	/* reaped here, not by the loop; what is queued for it (an answer)
	 * goes first, then STOP: it finishes writing and exits */
	ev_child_stop(ap->loop, &ap->child);
	if (ap->chan >= 0 && ipcq_send(&ap->q, ap->chan, IPC_STOP, 0, NULL, 0, NULL, 0) == -1)
		kill(ap->pid, SIGTERM);
	until = clock_mono_ms() + ADMINPROC_STOP_GRACE_MS;
	while (waitpid(ap->pid, &status, WNOHANG) == 0) {
		uint64_t now = clock_mono_ms();

		if (now >= until) {
			kill(ap->pid, SIGKILL);
			waitpid(ap->pid, &status, 0);
			break;
		}
		if (ap->chan >= 0 && ipcq_pending(&ap->q)) {
			struct pollfd p = { .fd = ap->chan, .events = POLLOUT };

			if (poll(&p, 1, 5) > 0 && ipcq_flush(&ap->q, ap->chan) == -1)
				adminproc_chan_close(ap);
			continue;
		}
		struct timespec ts = { .tv_sec = 0, .tv_nsec = 5 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	adminproc_chan_close(ap);
	ap->pid = 0;
	adminproc_set_state(ap, ADMINPROC_STOPPED);
}

/* ---- credentials ------------------------------------------------------------------------- */

static void
adminproc_send_creds(struct adminproc *ap)
{
	uint8_t *creds = NULL;
	size_t len = 0;

	if (ap->chan < 0)
		return;  /* the next one gets them with its setup */
	if (admincreds_encode(&ap->creds_now, &creds, &len) == -1 ||
	    ipcq_send(&ap->q, ap->chan, IPC_ADMIN_CREDS, 0, creds, len, NULL, 0) == -1) {
		if (errno != EPIPE && errno != ECONNRESET)
			adminproc_kill(ap, "cannot send the new credentials");
	} else if (ipcq_pending(&ap->q)) {
		ev_io_stop(ap->loop, &ap->rio);
		ev_io_start(ap->loop, &ap->wio);
	}
	if (creds != NULL) {
		sodium_memzero(creds, len);
		free(creds);
	}
}

int
adminproc_reload_prepare(struct adminproc *ap, const struct cfg *next, char *err, size_t errlen)
{
	if (ap == NULL)
		return 0;
	admincreds_clear(&ap->pending);
	ap->have_pending = false;
	if (admincreds_load_cfg(&ap->pending, next, err, errlen) == -1)
		return -1;
	ap->have_pending = true;
	return 0;
}

void
adminproc_reload_end(struct adminproc *ap, bool apply, int log_level)
{
	bool changed;

	if (ap == NULL)
		return;
	if ((uint32_t)log_level != ap->log_level && ap->chan >= 0) {
		struct ipc_log_level ll = { .level = (uint32_t)log_level };

		if (ipcq_send(&ap->q, ap->chan, IPC_LOG_LEVEL, 0, &ll, sizeof ll, NULL, 0) == 0 &&
		    ipcq_pending(&ap->q)) {
			ev_io_stop(ap->loop, &ap->rio);
			ev_io_start(ap->loop, &ap->wio);
		}
	}
	ap->log_level = (uint32_t)log_level;
	if (!ap->have_pending)
		return;
	ap->have_pending = false;
	if (!apply) {
		admincreds_clear(&ap->pending);
		return;
	}
	changed = !admincreds_same(&ap->creds_now, &ap->pending);
	admincreds_clear(&ap->creds_now);
	ap->creds_now = ap->pending;
	memset(&ap->pending, 0, sizeof ap->pending);  /* moved, not cleared */
	if (changed)
		log_info("admin access settings applied", "auth=%s https=%s open_paths=\"%s\"",
		    admincreds_summary(&ap->creds_now), ap->creds_now.tls ? "on" : "off",
		    ap->creds_now.open_paths);
	admincreds_log_tls(&ap->creds_now);
	/* the certificate may be new even when nothing else is */
	adminproc_send_creds(ap);
}

/* ---- setting up ---------------------------------------------------------------------------- */

void
adminproc_listeners(const struct adminproc *ap, struct admin_listeners *out)
{
	out->control_fd = ap->control_fd;
	out->control_dev = ap->socket_dev;
	out->control_ino = ap->socket_ino;
	out->tcp_fd = ap->http_fd;
}

/* Tell the admin process what to do with its listening sockets. */
static void
adminproc_send_listen(struct adminproc *ap, enum adminproto_listen_state st)
{
	struct adminproto_listen l = { .state = (uint32_t)st };

	ap->listen_state = st;
	if (ap->chan < 0)
		return;  /* the next one is told with its setup */
	if (ipcq_send(&ap->q, ap->chan, IPC_ADMIN_LISTEN, 0, &l, sizeof l, NULL, 0) == -1) {
		if (errno != EPIPE && errno != ECONNRESET)
			adminproc_kill(ap, "cannot send to it");
	} else if (ipcq_pending(&ap->q)) {
		ev_io_stop(ap->loop, &ap->rio);
		ev_io_start(ap->loop, &ap->wio);
	}
}

void
adminproc_accepting(struct adminproc *ap, bool on)
{
	if (ap->listen_state != ADMINPROTO_LISTEN_CLOSE)
		adminproc_send_listen(ap, on ? ADMINPROTO_LISTEN_ACCEPT : ADMINPROTO_LISTEN_PAUSE);
}

void
adminproc_close_listeners(struct adminproc *ap)
{
	adminproc_send_listen(ap, ADMINPROTO_LISTEN_CLOSE);
	if (ap->control_fd >= 0)
		close(ap->control_fd);
	if (ap->http_fd >= 0)
		close(ap->http_fd);
	ap->control_fd = ap->http_fd = -1;
	ap->socket_path[0] = '\0';  /* the file is the successor's now */
}

bool
adminproc_busy(const struct adminproc *ap)
{
	return ap->chan >= 0 && (ap->session.outstanding > 0 || ipcq_pending(&ap->q));
}

void
adminproc_counters(const struct adminproc *ap, const struct sup *s, uint64_t out[4])
{
	admin_api_counters(ap ? ap->counters : NULL, s, out);
}

struct adminproc *
adminproc_new(struct sup *s, struct ev_loop *loop, const struct childproc_creds *creds,
	      const struct admin_listeners *inherit, char *err, size_t errlen)
{
	const struct cfg *cfg = &s->cfg;
	struct adminproc *ap = calloc(1, sizeof *ap);
	char name[CFG_HOST_MAX + 16];

	if (ap == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	ap->s = s;
	ap->loop = loop;
	ap->creds = *creds;
	ap->exe_fd = ap->control_fd = ap->http_fd = ap->counters_fd = ap->chan = -1;
	ap->log_level = (uint32_t)cfg->log_level;
	ap->listen_state = ADMINPROTO_LISTEN_ACCEPT;
	ap->log_json = cfg->log_format == CFG_LOG_JSON;
	ipcq_init(&ap->q, 0, 0);
	ev_child_init(&ap->child, adminproc_child_cb, 0, 0);
	ap->child.data = ap;
	ev_io_init(&ap->rio, adminproc_read_cb, 0, EV_READ);
	ap->rio.data = ap;
	ev_io_init(&ap->wio, adminproc_write_cb, 0, EV_WRITE);
	ap->wio.data = ap;
	ev_timer_init(&ap->deadline, adminproc_deadline_cb, 0., 0.);
	ap->deadline.data = ap;
	ev_timer_init(&ap->ping, adminproc_ping_cb, 0., ADMINPROC_PING_MS / 1000.0);
	ap->ping.data = ap;
	adminproc_set_state(ap, ADMINPROC_STOPPED);

	if (adminproc_find_exe(ap->exe, sizeof ap->exe, err, errlen) == -1)
		goto fail;
	/* above fd 3, which a child's channel takes before the exec */
	if ((ap->exe_fd = open(ap->exe, O_PATH | O_CLOEXEC)) == -1 ||
	    (ap->exe_fd < 4 && (ap->exe_fd = adminproc_fd_above3(ap->exe_fd)) == -1)) {
		snprintf(err, errlen, "%s: %s", ap->exe, strerror(errno));
		goto fail;
	}
	if (admincreds_load_cfg(&ap->creds_now, cfg, err, errlen) == -1)
		goto fail;
	ap->counters_fd = shmblock_create("ferry-admin-counters", sizeof *ap->counters,
	    (void **)&ap->counters);
	if (ap->counters_fd == -1) {
		snprintf(err, errlen, "admin counters block: %s", strerror(errno));
		goto fail;
	}
	ap->counters->magic = ADMINPROTO_COUNTERS_MAGIC;
	snprintf(ap->socket_path, sizeof ap->socket_path, "%s", cfg->control_socket);
	if (inherit != NULL) {
		/* an upgrade: the predecessor's sockets, never bound again */
		ap->control_fd = inherit->control_fd;
		ap->socket_dev = inherit->control_dev;
		ap->socket_ino = inherit->control_ino;
		ap->http_fd = inherit->tcp_fd;
		return ap;
	}
	if ((ap->control_fd = admin_listen_control(cfg->control_socket,
	    (mode_t)cfg->control_socket_mode, cfg->control_socket_group, &ap->socket_dev,
	    &ap->socket_ino, err, errlen)) == -1)
		goto fail;
	log_info("control socket listening", "path=\"%s\" mode=%04o group=%s",
	    cfg->control_socket, cfg->control_socket_mode,
	    cfg->control_socket_group[0] ? cfg->control_socket_group : "-");
	if (cfg->admin_enabled) {
		if ((ap->http_fd = admin_listen_tcp(&cfg->admin_listen, err, errlen)) == -1)
			goto fail;
		units_fmt_addr(&cfg->admin_listen, name, sizeof name);
		log_info("admin API listening", "address=%s auth=%s https=%s", name,
		    admincreds_summary(&ap->creds_now), ap->creds_now.tls ? "on" : "off");
		admincreds_log_tls(&ap->creds_now);
		if (!ap->creds_now.token_set && !ap->creds_now.client_certs &&
		    !cfg_addr_is_loopback(cfg->admin_listen.host))
			log_warn("admin API open to the network without credentials",
			    "address=%s reason=\"admin_insecure = on\"", name);
	}
	return ap;
fail:
	adminproc_free(ap);
	return NULL;
}

void
adminproc_free(struct adminproc *ap)
{
	struct stat st;

	if (ap == NULL)
		return;
	adminproc_stop(ap);
	ev_timer_stop(ap->loop, &ap->ping);
	if (ap->control_fd >= 0)
		close(ap->control_fd);
	if (ap->http_fd >= 0)
		close(ap->http_fd);
	if (ap->socket_path[0] != '\0' && lstat(ap->socket_path, &st) == 0 &&
	    st.st_dev == ap->socket_dev && st.st_ino == ap->socket_ino)
		unlink(ap->socket_path);
	if (ap->exe_fd >= 0)
		close(ap->exe_fd);
	if (ap->counters != NULL)
		munmap(ap->counters, sizeof *ap->counters);
	if (ap->counters_fd >= 0)
		close(ap->counters_fd);
	admincreds_clear(&ap->creds_now);
	admincreds_clear(&ap->pending);
	free(ap);
}
