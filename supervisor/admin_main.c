/*
 * admin_main — ferry-admin, the admin process (docs/design.md §2, §12): the
 * only process of ferry that parses what admin clients send. ferryd starts
 * it (adminproc.c) already under the workers' `user`, with no new
 * privileges, its control channel on fd 3; it gets the listening sockets
 * (control socket, admin_listen), the admin counters block and the
 * credentials over that channel, serves the admin API's HTTP and TLS
 * (admin_http.c) and passes every routed request to the supervisor as a
 * typed message (adminproto.h), rendering the supervisor's answers.
 *
 * A posted config (validate, reload) is parsed here first with the same
 * parser: text that does not parse never reaches the supervisor, only the
 * parser's errors do (the supervisor records the rejection); text that
 * parses goes on as a sealed memfd, and the supervisor parses it again.
 *
 * Once it has its sockets, credentials and loop, and before READY, it locks
 * itself down (admin_lockdown.h) unless ferryd says sandbox = off; it is
 * not dumpable from its start, before the credentials arrive.
 *
 * It holds no state worth keeping: when its channel ends (ferryd gone or
 * done with it) or the supervisor sends something malformed, it exits, and
 * ferryd starts another one if it still runs.
 *
 * STOP (ferryd leaving, or done with it) is a graceful end: nothing new is
 * read or submitted, waiting requests are answered 503, responses being
 * written are finished (within ADMIN_LEAVE_MS), then it exits.
 *
 * Exit statuses: 0 channel closed or STOP; 1 setup failed or the channel
 * broke; 2 usage; 78 the setup messages were not what this build expects.
 */
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "common/config.h"
#include "common/ipc.h"
#include "common/ipcq.h"
#include "common/log.h"
#include "common/sandbox.h"
#include "common/shmblock.h"
#ifdef FERRY_TEST_HOOKS
#include "common/testhook.h"
#endif
#include "supervisor/admin_http.h"
#include "supervisor/admin_lockdown.h"
#include "supervisor/adminauth.h"
#include "supervisor/adminproto.h"

#define ADMIN_CHAN_FD        3
#define ADMIN_SETUP_TIMEOUT_MS 10000
#define ADMIN_EXIT_SETUP     78
#define ADMIN_LEAVE_MS       900    /* STOP: responses being written get this long */

struct admin_proc {
	struct ev_loop *loop;
	int fd;                         /* the control channel */
	struct ipcq q;
	ev_io rio, wio;
	struct admin *http;
	struct adminproto_counters *counters;
	ev_timer leave;                 /* STOP: waits for the last responses */
	uint64_t leave_by_ms;
	int exit_code;
	bool sandbox;                   /* lock down (sandbox = on) */
	uint8_t buf[sizeof(struct ipc_hdr) + IPC_MAX_PAYLOAD];
};

static void
admin_quit(struct admin_proc *ap, int code)
{
	ap->exit_code = code;
	ev_break(ap->loop, EVBREAK_ALL);
}

static void
admin_leave_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct admin_proc *ap = w->data;

	(void)loop;
	(void)revents;
	if (!admin_http_busy(ap->http) || clock_mono_ms() >= ap->leave_by_ms)
		admin_quit(ap, 0);
}

/* STOP: no new request; what is being written is finished (an upgrade's
 * own answer, typically), for at most ADMIN_LEAVE_MS; then exit. */
static void
admin_leave(struct admin_proc *ap)
{
	admin_http_quiesce(ap->http);
	ev_io_stop(ap->loop, &ap->rio);
	ap->leave_by_ms = clock_mono_ms() + ADMIN_LEAVE_MS;
	ev_timer_init(&ap->leave, admin_leave_cb, 0., 0.01);
	ap->leave.data = ap;
	ev_timer_again(ap->loop, &ap->leave);
	admin_leave_cb(ap->loop, &ap->leave, 0);
}

/* ---- sending ------------------------------------------------------------------------ */

static int
admin_send(struct admin_proc *ap, enum ipc_type type, const void *payload, size_t len,
	   const int *fds, size_t nfds)
{
	if (ipcq_send(&ap->q, ap->fd, type, 0, payload, len, fds, nfds) == -1) {
		log_error("cannot send to ferryd", "type=%s error=\"%s\"", ipc_type_str(type),
		    strerror(errno));
		return -1;
	}
	if (ipcq_pending(&ap->q))
		ev_io_start(ap->loop, &ap->wio);
	return 0;
}

static void
admin_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct admin_proc *ap = w->data;

	(void)revents;
	int r = ipcq_flush(&ap->q, ap->fd);
	if (r == 1)
		ev_io_stop(loop, w);
	else if (r == -1)
		admin_quit(ap, 1);
}

/* A posted config that does not parse: its version and the parser's
 * errors, instead of the text. */
static int
admin_submit_rejected(struct admin_proc *ap, struct adminproto_request *rq, const char *body,
		      size_t len, const struct cfg_errors *errs)
{
	unsigned char hash[crypto_hash_sha256_BYTES];
	size_t cap = sizeof *rq + ADMINPROTO_MAX_ERRORS * ADMINPROTO_ERROR_MAX, off = sizeof *rq;
	uint8_t *msg = malloc(cap);
	int rc;

	if (msg == NULL)
		return -1;
	crypto_hash_sha256(hash, (const unsigned char *)body, len);
	memcpy(rq->version, "sha256:", 7);
	sodium_bin2hex(rq->version + 7, sizeof rq->version - 7, hash, sizeof hash);
	rq->flags = ADMINPROTO_REQ_REJECTED;
	for (size_t i = 0; i < errs->n && rq->n_errors < ADMINPROTO_MAX_ERRORS; i++) {
		int n = snprintf((char *)msg + off, ADMINPROTO_ERROR_MAX, "%s", errs->msg[i]);

		off += (n >= ADMINPROTO_ERROR_MAX ? ADMINPROTO_ERROR_MAX - 1 : (size_t)n) + 1;
		rq->n_errors++;
	}
	if (rq->n_errors == 0) {
		memcpy(msg + off, "invalid configuration", sizeof "invalid configuration");
		off += sizeof "invalid configuration";
		rq->n_errors = 1;
	}
	memcpy(msg, rq, sizeof *rq);
	rc = admin_send(ap, IPC_ADMIN_REQUEST, msg, off, NULL, 0);
	free(msg);
	return rc;
}

/* admin_http's submit function: one typed request to the supervisor. */
static int
admin_submit(void *ctx, const struct admin_call *call)
{
	struct admin_proc *ap = ctx;
	struct adminproto_request rq;
	int rc;

	memset(&rq, 0, sizeof rq);
	rq.id = call->id;
	rq.route = (uint32_t)call->route->id;
	rq.caller = *call->caller;
	if (call->name != NULL)
		snprintf(rq.name, sizeof rq.name, "%s", call->name);
	if (call->query != NULL)
		rq.query = *call->query;
	if (call->list != NULL)
		rq.list = *call->list;
	if (call->had_body)
		rq.flags = ADMINPROTO_REQ_HAD_BODY;
	if (call->body_len == 0)
		return admin_send(ap, IPC_ADMIN_REQUEST, &rq, sizeof rq, NULL, 0);

	/* a config text: parsed here first, unprivileged */
	struct cfg cfg;
	struct cfg_errors errs;

	memset(&cfg, 0, sizeof cfg);
	cfg_errors_init(&errs);
	rc = cfg_parse_string("<request>", call->body, call->body_len, &cfg, &errs);
	cfg_free(&cfg);
	if (rc == -1) {
		rc = admin_submit_rejected(ap, &rq, call->body, call->body_len, &errs);
		cfg_errors_free(&errs);
		return rc;
	}
	cfg_errors_free(&errs);
	int fd = shmblock_seal_bytes("ferry-admin-body", call->body, call->body_len);
	if (fd == -1) {
		log_error("cannot pass a request body to ferryd", "error=\"%s\"", strerror(errno));
		return -1;
	}
	rq.flags = ADMINPROTO_REQ_BODY;
	rq.body_len = (uint32_t)call->body_len;
	rc = admin_send(ap, IPC_ADMIN_REQUEST, &rq, sizeof rq, &fd, 1);
	close(fd);
	return rc;
}

/* ---- receiving ---------------------------------------------------------------------- */

static int
admin_on_answer(struct admin_proc *ap, const struct ipc_msg *msg, char *err, size_t errlen)
{
	struct adminproto_answer ans;
	char *body = NULL;

	if (adminproto_answer_check(msg->payload, msg->hdr.len, msg->nfds, &ans, err, errlen) == -1)
		return -1;
	if (ans.body_len > 0 && (body = malloc(ans.body_len)) == NULL) {
		/* the client gets nothing better than a close */
		admin_http_answer(ap->http, ans.id, 500, adminproto_ctype_str(ADMINPROTO_CT_JSON),
		    NULL, 0);
		return 0;
	}
	if (ans.flags & ADMINPROTO_ANS_MEMFD) {
		if (shmblock_read_bytes(msg->fds[0], body, ans.body_len) == -1) {
			snprintf(err, errlen, "answer body memfd: %s", strerror(errno));
			free(body);
			return -1;
		}
	} else if (ans.body_len > 0) {
		memcpy(body, msg->payload + sizeof ans, ans.body_len);
	}
	admin_http_answer(ap->http, ans.id, (int)ans.status,
	    adminproto_ctype_str((enum adminproto_ctype)ans.ctype), body, ans.body_len);
	return 0;
}

static int
admin_on_creds(struct admin_proc *ap, const struct ipc_msg *msg, char *err, size_t errlen)
{
	struct adminproto_creds_view v;
	struct adminauth auth;
	int rc = adminproto_creds_check(msg->payload, msg->hdr.len, &v, err, errlen);

	if (rc == 0 && adminauth_from_creds(&auth, &v, err, errlen) == 0)
		admin_http_set_auth(ap->http, &auth);
	else if (rc == 0)
		/* the supervisor built a context from the same bytes: not expected */
		log_error("new admin credentials not applied", "error=\"%s\"", err);
	sodium_memzero(msg->payload, msg->hdr.len);  /* the key's bytes */
	return rc;
}

static void
admin_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct admin_proc *ap = w->data;

	(void)loop;
	(void)revents;
	for (;;) {
		struct ipc_msg msg;
		char err[256] = "";
		int r = ipc_recv(ap->fd, ap->buf, sizeof ap->buf, &msg, err, sizeof err), bad = 0;

		if (r == -1 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return;
		if (r == 0 || (r == -1 && errno == ECONNRESET)) {
			log_info("ferryd closed the control channel: exiting", "%s", "");
			admin_quit(ap, 0);
			return;
		}
		if (r == -1) {
			log_error("control channel broken", "error=\"%s\"", err[0] ? err :
			    strerror(errno));
			admin_quit(ap, 1);
			return;
		}
		if (msg.nfds && msg.hdr.type != IPC_ADMIN_ANSWER) {
			snprintf(err, sizeof err, "%s with file descriptors",
			    ipc_type_str(msg.hdr.type));
			bad = 1;
		} else {
			switch (msg.hdr.type) {
			case IPC_ADMIN_ANSWER:
				bad = admin_on_answer(ap, &msg, err, sizeof err) == -1;
				break;
			case IPC_ADMIN_CREDS:
				bad = admin_on_creds(ap, &msg, err, sizeof err) == -1;
				break;
			case IPC_PING:
				if (admin_send(ap, IPC_PONG, msg.payload, msg.hdr.len, NULL, 0) == -1) {
					admin_quit(ap, 1);
					return;
				}
				break;
			case IPC_LOG_LEVEL: {
				struct ipc_log_level ll;

				memcpy(&ll, msg.payload, sizeof ll);
				if (ll.level <= LOG_ERROR)
					log_set_level((enum log_level)ll.level);
				break;
			}
			case IPC_ADMIN_LISTEN: {
				struct adminproto_listen l;

				if ((bad = adminproto_listen_check(msg.payload, msg.hdr.len, &l, err,
				    sizeof err) == -1))
					break;
				if (l.state == ADMINPROTO_LISTEN_CLOSE)
					admin_http_close_listeners(ap->http);
				else
					admin_http_accepting(ap->http, l.state == ADMINPROTO_LISTEN_ACCEPT);
				break;
			}
			case IPC_STOP:
				admin_leave(ap);
				ipc_close_fds(&msg);
				return;
			default:
				snprintf(err, sizeof err, "unexpected message %s",
				    ipc_type_str(msg.hdr.type));
				bad = 1;
			}
		}
		ipc_close_fds(&msg);
		if (bad) {
			log_error("malformed message from ferryd: exiting", "error=\"%s\"", err);
			admin_quit(ap, 1);
			return;
		}
	}
}

/* ---- setup -------------------------------------------------------------------------- */

/* One message of type want from the channel, waiting at most until
 * deadline (mono ms). */
static int
admin_recv_setup(struct admin_proc *ap, enum ipc_type want, uint64_t deadline,
		 struct ipc_msg *msg)
{
	char err[256] = "";

	for (;;) {
		uint64_t now = clock_mono_ms();
		struct pollfd p = { .fd = ap->fd, .events = POLLIN };
		int r = now >= deadline ? 0 : poll(&p, 1, (int)(deadline - now));

		if (r == -1 && errno == EINTR)
			continue;
		if (r == 0) {
			log_error("no setup from ferryd in time", "waiting_for=%s", ipc_type_str(want));
			return -1;
		}
		r = ipc_recv(ap->fd, ap->buf, sizeof ap->buf, msg, err, sizeof err);
		if (r == -1 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r != 1) {
			log_error("setup from ferryd failed", "waiting_for=%s error=\"%s\"",
			    ipc_type_str(want), r == 0 ? "channel closed" : err[0] ? err :
			    strerror(errno));
			return -1;
		}
		if (msg->hdr.type != want) {
			log_error("unexpected setup message", "got=%s want=%s",
			    ipc_type_str(msg->hdr.type), ipc_type_str(want));
			ipc_close_fds(msg);
			return -1;
		}
		return 0;
	}
}

static int
admin_setup(struct admin_proc *ap, int *control_fd, int *http_fd, struct adminauth *auth)
{
	uint64_t deadline = clock_mono_ms() + ADMIN_SETUP_TIMEOUT_MS;
	struct adminproto_setup su;
	struct adminproto_creds_view v;
	struct ipc_msg msg;
	char err[256];
	int rc;

	if (admin_recv_setup(ap, IPC_ADMIN_SETUP, deadline, &msg) == -1)
		return 1;
	if (adminproto_setup_check(msg.payload, msg.hdr.len, msg.nfds, &su, err, sizeof err) == -1 ||
	    shmblock_map(msg.fds[0], sizeof *ap->counters, (void **)&ap->counters) == -1 ||
	    ap->counters->magic != ADMINPROTO_COUNTERS_MAGIC) {
		log_error("bad setup from ferryd", "error=\"%s\"", msg.nfds ? err : "no descriptors");
		ipc_close_fds(&msg);
		return ADMIN_EXIT_SETUP;
	}
	close(msg.fds[0]);
	ap->sandbox = (su.flags & ADMINPROTO_SETUP_SANDBOX) != 0;
	*control_fd = msg.fds[1];
	*http_fd = (su.flags & ADMINPROTO_SETUP_HTTP) ? msg.fds[2] : -1;
	log_init("admin", NULL, (enum log_level)su.log_level, su.log_json != 0);

	if (admin_recv_setup(ap, IPC_ADMIN_CREDS, deadline, &msg) == -1)
		return 1;
	rc = adminproto_creds_check(msg.payload, msg.hdr.len, &v, err, sizeof err);
	if (rc == 0)
		rc = adminauth_from_creds(auth, &v, err, sizeof err);
	sodium_memzero(msg.payload, msg.hdr.len);
	if (rc == -1) {
		log_error("bad admin credentials from ferryd", "error=\"%s\"", err);
		return ADMIN_EXIT_SETUP;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	static struct admin_proc proc;
	struct admin_proc *ap = &proc;
	static const struct option opts[] = {
		{ "ppid", required_argument, NULL, 'p' },
		{ 0, 0, 0, 0 },
	};
	struct adminauth auth;
	pid_t ppid = 0;
	int c, control_fd = -1, http_fd = -1, rc;
	char err[256];

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c != 'p') {
			fprintf(stderr, "ferry-admin is started by ferryd itself\n");
			return 2;
		}
		ppid = (pid_t)strtol(optarg, NULL, 10);
	}
	if (ppid <= 0 || optind != argc || fcntl(ADMIN_CHAN_FD, F_GETFD) == -1) {
		fprintf(stderr, "ferry-admin is started by ferryd itself\n");
		return 2;
	}
	/* nothing but fd 0-2 and the channel: ferryd may have left the file
	 * it executed open (an interpreter would need it) */
	close_range(ADMIN_CHAN_FD + 1, ~0u, 0);
	log_init("admin", NULL, LOG_INFO, false);
	/* the credential change happened before exec; PDEATHSIG survives it */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	prctl(PR_SET_NAME, "ferry-admin", 0, 0, 0);
	/* no core dump, no ptrace by its user: the HTTPS key and the bytes
	 * callers send (tokens) live here; before any of them arrives */
	if (sandbox_not_dumpable() == -1) {
		log_error("cannot make the admin process not dumpable", "error=\"%s\"",
		    strerror(errno));
		return 1;
	}
	if (getppid() != ppid) {
		log_error("supervisor already gone", "%s", "");
		return 1;
	}
	fcntl(ADMIN_CHAN_FD, F_SETFD, FD_CLOEXEC);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);        /* reloads are the supervisor's */
	if (sodium_init() == -1) {
		log_error("libsodium initialisation failed", "%s", "");
		return 1;
	}
	ap->fd = ADMIN_CHAN_FD;
	ipcq_init(&ap->q, 0, 0);
	memset(&auth, 0, sizeof auth);
	if ((rc = admin_setup(ap, &control_fd, &http_fd, &auth)) != 0)
		return rc;

	ap->loop = ev_default_loop(EVFLAG_AUTO);
	ap->http = admin_http_start(ap->loop, control_fd, http_fd, &auth, ap->counters,
	    admin_submit, ap, err, sizeof err);
	if (ap->http == NULL) {
		log_error("cannot serve the admin API", "error=\"%s\"", err);
		adminauth_clear(&auth);
		return 1;
	}
	fcntl(ap->fd, F_SETFL, fcntl(ap->fd, F_GETFL) | O_NONBLOCK);
	ev_io_init(&ap->rio, admin_read_cb, ap->fd, EV_READ);
	ap->rio.data = ap;
	ev_io_start(ap->loop, &ap->rio);
	ev_io_init(&ap->wio, admin_write_cb, ap->fd, EV_WRITE);
	ap->wio.data = ap;
#ifdef FERRY_TEST_HOOKS
	testhook_start(ap->loop);
#endif
	/* everything from outside is in: lock down before serving */
	if (admin_lockdown(ap->sandbox, &ap->counters->sandbox, err, sizeof err) == -1) {
		log_error("cannot lock the admin process down", "error=\"%s\" "
		    "hint=\"sandbox = off in [ferry] runs without\"", err);
		admin_http_stop(ap->http);
		close(ap->fd);
		return 1;
	}
	struct ipc_ready ready = { .ipc_version = IPC_PROTOCOL_VERSION };

	if (admin_send(ap, IPC_READY, &ready, sizeof ready, NULL, 0) == 0) {
		log_debug("admin process ready", "ppid=%d https=%s", (int)ppid,
		    http_fd != -1 ? "maybe" : "off");
		ev_run(ap->loop, 0);
	} else {
		ap->exit_code = 1;
	}
	ev_timer_stop(ap->loop, &ap->leave);
	admin_http_stop(ap->http);
	ipcq_clear(&ap->q);
	close(ap->fd);
	return ap->exit_code;
}
