/*
 * admin_http — the HTTP server that carries ferryd's admin API, run by the
 * admin process (ferry-admin, admin_main.c), never by the supervisor. It
 * is served identically on the control socket (Unix, mode
 * control_socket_mode, default 0600) and on `admin_listen` (TCP, HTTP or
 * HTTPS), except for who may call it: adminauth.h decides per request (the
 * socket's permissions, or a token / client certificate on admin_listen).
 * The listening sockets are the supervisor's, handed over at start.
 *
 * Each connection carries one request: it is read with a deadline, matched
 * against the route table of adminproto.h, checked for access and then
 * handed to the supervisor as a typed call (struct admin_call, sent by the
 * submit function admin_main.c gives): the connection waits, read no
 * further, until admin_http_answer() brings the answer, which is written
 * with "Connection: close" before the close. Everything a client can do
 * wrong costs it only its own connection. A path that matches a route
 * under another method is answered 405 with Allow, one that matches none
 * 404; a cluster name that breaks the name rule 404 without asking; the
 * status page is answered here.
 *
 * At most ADMINPROTO_MAX_INFLIGHT calls are unanswered at once; further
 * complete requests queue here in arrival order. A call that may finish
 * later (reload, restart: ADMINPROTO_RF_WAITS) waits as long as the
 * supervisor takes; any other gets a 503 when no answer came within
 * ADMIN_ANSWER_TIMEOUT (a late answer is dropped).
 */
#ifndef FERRY_SUPERVISOR_ADMIN_HTTP_H
#define FERRY_SUPERVISOR_ADMIN_HTTP_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "supervisor/adminauth.h"
#include "supervisor/adminproto.h"

struct admin;        /* the servers: listeners, connections, credentials */

/*
 * Limits. Each listener (control socket, admin_listen) has its own budget of
 * connections (ADMIN_LISTEN_MAX_CONNS or less under a low descriptor
 * limit), so neither can starve the other; both listen with a SOMAXCONN
 * backlog and are accepted in equal batches per loop iteration.
 *
 * A connection must send its request head within ADMIN_HEAD_TIMEOUT of being
 * accepted and then its body within ADMIN_BODY_TIMEOUT; otherwise it gets a
 * 408 (or is closed when it sent nothing). When a listener is full, a new
 * connection is taken anyway and one existing connection is evicted, cheapest
 * first (evict.h): one whose response has already been sent, then
 * the reading connection that has sent the fewest bytes (by power-of-two
 * class) and, among those, has waited longest in that class, then the oldest
 * one still being written to. Connections whose request is complete (queued
 * or waiting for the supervisor) are never evicted. A well-behaved client,
 * which sends its whole request right after connecting, is read and
 * submitted at accept time, so slow or idle connections cannot keep it out.
 *
 * Request bodies larger than HTTP_MAX_HEAD count against a per-listener
 * budget of ADMIN_MAX_BODY_BUFFERED bytes; a body that would exceed it is
 * answered 503 (memory stays bounded however many uploads are in flight).
 */
#define ADMIN_LISTEN_MAX_CONNS  1024    /* per listener; less under a low fd limit */
#define ADMIN_HEAD_TIMEOUT      2.5     /* seconds from accept to a complete head */
#define ADMIN_BODY_TIMEOUT      10.0    /* seconds from the head to a complete body */
#define ADMIN_WRITE_TIMEOUT     10.0    /* seconds to send the response */
#define ADMIN_ANSWER_TIMEOUT    10.0    /* seconds for the supervisor's answer (not RF_WAITS) */
#define ADMIN_MAX_BODY_BUFFERED (64u * 1024 * 1024) /* per listener, see above */

/* One routed, authorised request for the supervisor. */
struct admin_call {
	uint64_t id;                    /* grows strictly; the answer names it */
	const struct adminproto_route_def *route;
	const char *name;               /* RF_NAME routes: the cluster; else NULL */
	const char *body;               /* RF_BODY routes: the request body */
	size_t body_len;
	bool had_body;                  /* another route was sent a body (not passed) */
	const struct adminproto_conn_query *query; /* RF_QUERY routes; else NULL */
	const struct adminproto_list_query *list;  /* RF_LIST routes; else NULL */
	const struct adminproto_caller *caller;
};

/* Send a call to the supervisor: 0, or -1 when it cannot go (the request
 * is answered 503). */
typedef int (*admin_submit_fn)(void *ctx, const struct admin_call *call);

/* Serve on the listening sockets control_fd and http_fd (-1: admin_listen
 * is off) with the credentials *auth (taken over; cleared in the caller),
 * counting refusals in counters. Returns the servers, or NULL with a
 * message in err. */
struct admin *admin_http_start(struct ev_loop *loop, int control_fd, int http_fd,
			       struct adminauth *auth, struct adminproto_counters *counters,
			       admin_submit_fn submit, void *ctx, char *err, size_t errlen);

/* Close every listener and connection and free a. NULL is allowed. */
void admin_http_stop(struct admin *a);

/* The supervisor's answer to call id: status, Content-Type and the body
 * (malloc'd, taken over). An id nobody waits for any more is dropped. */
void admin_http_answer(struct admin *a, uint64_t id, int status, const char *content_type,
		       char *body, size_t body_len);

/* New credentials (a reload applied): *auth is taken over. Connections in
 * progress keep their TLS session; new ones use the new certificate. */
void admin_http_set_auth(struct admin *a, struct adminauth *auth);

/* The listening sockets, as an upgrade moves them to another ferryd: stop
 * (false) or resume accepting on them, connections in progress going on;
 * close them for good. */
void admin_http_accepting(struct admin *a, bool on);
void admin_http_close_listeners(struct admin *a);

/* Leaving (ferryd stops, or stops this process): the listeners close,
 * requests still being read are dropped, those waiting for ferryd are
 * answered 503; responses being written go on. admin_http_busy() says
 * whether a connection is left. */
void admin_http_quiesce(struct admin *a);
bool admin_http_busy(const struct admin *a);

#endif
