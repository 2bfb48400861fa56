/*
 * adminproc — the admin process (ferry-admin) as the supervisor runs it:
 * the admin API's listening sockets, bound here once and kept open for
 * ferryd's whole life; the process that serves them, started unprivileged
 * (childproc.h), watched and restarted; and its control channel, on which
 * typed requests arrive (adminproto.h) and are answered through the
 * handlers of admin_api.h. Part of the I/O layer (sup_io.c): it decides
 * nothing about clusters.
 *
 * The process's life, as /admin/health shows it (state names):
 *   starting  forked, setup sent, READY not yet received (10 s at most);
 *   running   READY received: requests are served;
 *   backoff   it exited without being asked: a restart follows after
 *             100 ms, doubling per exit that follows a short run, up to
 *             5 s; a run of 10 s resets the delay. It never gives up;
 *   stopped   adminproc_stop() (ferryd exiting, or a handover) or not
 *             started yet.
 * While it is down the listening sockets stay open here, so connections
 * wait in the backlog and are served when it is back. A crash of it never
 * touches a cluster; a reload it asked for runs to its end and is recorded
 * (GET /admin/config/status after the restart shows it), only the answer
 * is lost with the connection that waited for it.
 *
 * Everything it sends is checked (adminproto_request_check, the session's
 * id order and bound of ADMINPROTO_MAX_INFLIGHT outstanding requests, the
 * body memfd's seals and size); a message that fails, or a full outgoing
 * queue, kills it as a malformed peer (logged), like a worker. A watchdog
 * pings it every ADMINPROC_PING_MS; no answer within ADMINPROC_WATCHDOG_MS
 * kills it too. While its outgoing queue holds answers, no new request is
 * read from it: a client that reads slowly slows only the admin process.
 *
 * The API an upgrade uses is small on purpose: the old ferryd pauses its
 * admin process's accepting, passes adminproc_listeners() to the new one,
 * which takes them over (adminproc_new with inherit) and starts its own
 * admin process; the old one closes its copies, answers the upgrade
 * request and leaves, its admin process finishing that answer first.
 */
#ifndef FERRY_SUPERVISOR_ADMINPROC_H
#define FERRY_SUPERVISOR_ADMINPROC_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "supervisor/admin_api.h"
#include "supervisor/childproc.h"

struct sup;
struct cfg;
struct sup_reload_record;
struct sup_answer;
struct adminproc;

#define ADMINPROC_START_TIMEOUT_MS 10000  /* fork to READY */
#define ADMINPROC_PING_MS          2000
#define ADMINPROC_WATCHDOG_MS      10000  /* no PONG for this long: killed */
#define ADMINPROC_BACKOFF_MIN_MS   100
#define ADMINPROC_BACKOFF_MAX_MS   5000
#define ADMINPROC_STABLE_MS        10000  /* a run this long resets the backoff */
#define ADMINPROC_EXE_NAME         "ferry-admin"

/* The admin API's listening sockets as an upgrade hands them to the
 * successor (docs/design.md §11); -1 where there is none. */
struct admin_listeners {
	int control_fd;
	dev_t control_dev;              /* the socket file's, to unlink only ours */
	ino_t control_ino;
	int tcp_fd;
};

/* Set up the admin process of s (its configuration s->cfg): read the admin
 * credentials, bind the control socket and admin_listen (or take over
 * inherit's: an upgrade; they are ap's once this succeeds), create the
 * counters block and find ferry-admin: next to ferryd's own executable
 * first (a build tree), then in FERRY_LIBEXECDIR. Nothing is started yet.
 * NULL with a message in err. */
struct adminproc *adminproc_new(struct sup *s, struct ev_loop *loop,
				const struct childproc_creds *creds,
				const struct admin_listeners *inherit, char *err, size_t errlen);

/* Start the process (and restart it whenever it exits, until
 * adminproc_stop). With wait (ferryd's start, before its loop runs), wait
 * up to ADMINPROC_START_TIMEOUT_MS for READY: a ferry-admin that cannot
 * run fails ferryd's start with the reason. 0, or -1 with err (nothing
 * left running). */
int adminproc_start(struct adminproc *ap, bool wait, char *err, size_t errlen);

/* Stop the process: STOP (it finishes writing the responses it has, an
 * upgrade's own answer included), SIGKILL if it is not gone after
 * ADMINPROC_STOP_GRACE_MS; reaped before this returns. Requests not yet
 * answered are dropped. The sockets stay. */
void adminproc_stop(struct adminproc *ap);

/* The listening sockets (still owned here). */
void adminproc_listeners(const struct adminproc *ap, struct admin_listeners *out);

/* An upgrade: stop (false) or resume the admin process's accepting, its
 * connections going on; close the sockets for good, here and there,
 * without removing the control socket file (the successor's now); whether
 * requests are still unanswered. */
void adminproc_accepting(struct adminproc *ap, bool on);
void adminproc_close_listeners(struct adminproc *ap);
bool adminproc_busy(const struct adminproc *ap);

/* The admin API's counts (refused missing, malformed, wrong-token; TLS
 * handshake failures) with those earlier ferryds carried over (an
 * upgrade). ap may be NULL. */
void adminproc_counters(const struct adminproc *ap, const struct sup *s, uint64_t out[4]);

/* Stop it, close the sockets, remove the control socket file, free ap.
 * NULL is allowed. */
void adminproc_free(struct adminproc *ap);

/* The engine answers a deferred request (sup_ops.answer_reload/answer_op);
 * a request whose admin process has gone since is not answered. */
void adminproc_answer_reload(struct adminproc *ap, uint64_t waiter,
			     const struct sup_reload_record *rec);
void adminproc_answer_op(struct adminproc *ap, uint64_t waiter, const struct sup_answer *ans);
struct sup_upgrade_record;
void adminproc_answer_upgrade(struct adminproc *ap, uint64_t waiter,
			      const struct sup_upgrade_record *rec);

/* A reload's admin credentials (sup_ops.admin_prepare / reload_end): read
 * and checked into a pending set; applied (sent to the admin process, and
 * kept for its restarts) or dropped when the reload ends. The log level
 * goes with them. */
int adminproc_reload_prepare(struct adminproc *ap, const struct cfg *next, char *err,
			     size_t errlen);
void adminproc_reload_end(struct adminproc *ap, bool apply, int log_level);

/* What /admin/health and /metrics show of it. */
void adminproc_info(const struct adminproc *ap, struct admin_api_proc *out);

#endif
