/*
 * admin_http — the HTTP server that carries ferryd's admin API
 * (admin_api.h), served identically on the control socket (Unix, mode
 * control_socket_mode, default 0600) and on `admin_listen` (TCP), except
 * for who may call it: adminauth.h decides per request (the socket's
 * permissions, or a token / client certificate on admin_listen), and every
 * mutating call (POST) is logged with its caller (uid and pid from
 * SO_PEERCRED on the socket; address, and certificate subject when there
 * is one, on TCP).
 *
 * Each connection carries one request: it is read with a deadline, routed
 * through the table of {method, path pattern, handler} given to
 * admin_http_start() (the API module's), answered with "Connection: close"
 * and closed. Everything a client can do wrong costs it only its own
 * connection. A path that matches a route under another method is answered
 * 405 with Allow, one that matches none 404.
 *
 * A handler either fills the response and returns ADMIN_RESPOND, or
 * returns ADMIN_DEFERRED and the connection waits, read no further, until
 * admin_conn_respond() completes it; req->id names it (admin_http_deferred)
 * and req->conn is it. A deferred connection is neither timed out nor
 * evicted; admin_http_stop() closes it, so whoever holds it must forget it
 * before (or when) the admin stops.
 */
#ifndef FERRY_SUPERVISOR_ADMIN_HTTP_H
#define FERRY_SUPERVISOR_ADMIN_HTTP_H

#include <ev.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "common/config.h"
#include "common/http.h"
#include "supervisor/adminauth.h"

struct sup;
struct admin;        /* the servers: listeners, connections, credentials */
struct admin_conn;

/*
 * Limits. Each listener (control socket, admin_listen) has its own budget of
 * connections (ADMIN_LISTEN_MAX_CONNS or less, admin_listen.h), so neither
 * can starve the other; both listen with a SOMAXCONN backlog and are
 * accepted in equal batches per loop iteration.
 *
 * A connection must send its request head within ADMIN_HEAD_TIMEOUT of being
 * accepted and then its body within ADMIN_BODY_TIMEOUT; otherwise it gets a
 * 408 (or is closed when it sent nothing). When a listener is full, a new
 * connection is taken anyway and one existing connection is evicted, cheapest
 * first (evict.h): one whose response has already been sent, then
 * the reading connection that has sent the fewest bytes (by power-of-two
 * class) and, among those, has waited longest in that class, then the oldest
 * one still being written to. Deferred connections (a reload or restart in
 * progress) are never evicted. A well-behaved client, which sends its whole
 * request right after connecting, is read and answered at accept time, so
 * slow or idle connections cannot keep it out.
 *
 * Request bodies larger than HTTP_MAX_HEAD count against a per-listener
 * budget of ADMIN_MAX_BODY_BUFFERED bytes; a body that would exceed it is
 * answered 503 (memory stays bounded however many uploads are in flight).
 */
#define ADMIN_HEAD_TIMEOUT      2.5     /* seconds from accept to a complete head */
#define ADMIN_BODY_TIMEOUT      10.0    /* seconds from the head to a complete body */
#define ADMIN_WRITE_TIMEOUT     10.0    /* seconds to send the response */
#define ADMIN_MAX_BODY_BUFFERED (64u * 1024 * 1024) /* per listener, see above */

struct admin_request {
	struct sup *sup;                /* what admin_http_start was given for handlers */
	struct admin *admin;            /* the servers (admin_http_counters) */
	struct admin_conn *conn;        /* for ADMIN_DEFERRED */
	uint64_t id;                    /* names the request once deferred */
	const struct http_request *http;
	const char *param;              /* the segment matched by '*', or NULL */
};

struct admin_response {
	int status;
	const char *content_type;       /* static string; NULL for none */
	char *body;                     /* malloc'd, owned by the admin */
	size_t body_len;
	char extra_headers[256];        /* complete "Name: value\r\n" lines */
};

enum admin_handler_result {
	ADMIN_RESPOND = 0,
	ADMIN_DEFERRED,
};

typedef enum admin_handler_result (*admin_handler_fn)(struct admin_request *req,
						      struct admin_response *resp);

struct admin_route {
	const char *method;
	const char *pattern;            /* '*' matches one non-empty path segment */
	admin_handler_fn handler;
};

/* The listening sockets of the servers, as an upgrade hands them to the
 * successor (docs/design.md §11); -1 where there is none. */
struct admin_listeners {
	int control_fd;
	dev_t control_dev;              /* the socket file's, to unlink only ours */
	ino_t control_ino;
	int tcp_fd;
};

/* Bind the control socket and, when enabled, the TCP admin listener of cfg
 * (read at start only; credentials change through admin_http_reload_*),
 * or take over those of `inherit` (an upgrade; NULL: bind), and start
 * serving on loop: requests go to routes[0..n_routes) (kept by the
 * caller), each handler seeing sup as req->sup. Returns the servers, or
 * NULL with a message in err (nothing left bound or allocated). */
struct admin *admin_http_start(const struct cfg *cfg, struct sup *sup, struct ev_loop *loop,
			       const struct admin_route *routes, size_t n_routes,
			       const struct admin_listeners *inherit, char *err, size_t errlen);

/* Upgrades: the listening sockets (not dup'ed); stop (false) or resume
 * accepting on them, connections in progress going on; close them without
 * unlinking the control socket (its file is the successor's); whether a
 * connection is still open. */
void admin_http_listeners(const struct admin *a, struct admin_listeners *out);
void admin_http_accepting(struct admin *a, bool on);
void admin_http_close_listeners(struct admin *a);
bool admin_http_busy(const struct admin *a);

/* Close every listener and connection, unlink the control socket and free
 * a. NULL is allowed. */
void admin_http_stop(struct admin *a);

/* Set a JSON response: compact dump of body plus "\n". Steals the body
 * reference; a NULL body (allocation failed) becomes a 500. */
void admin_response_json(struct admin_response *resp, int status, json_t *body);

/* Set {"error":"..."} as the response. */
void admin_response_error(struct admin_response *resp, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The deferred request named id (admin_request.id), or NULL when its
 * client went away meanwhile. */
struct admin_conn *admin_http_deferred(struct admin *a, uint64_t id);

/* Complete a deferred request: takes over resp->body and starts writing. */
void admin_conn_respond(struct admin_conn *c, struct admin_response *resp);

/* Reload of the access settings (sup_ops.admin_prepare / reload_end, see
 * supervisor.h): prepare reads the credentials of next into a pending set;
 * end applies it (apply) or drops it. a == NULL: nothing to do. */
int admin_http_reload_prepare(struct admin *a, const struct cfg *next, char *err,
			      size_t errlen);
void admin_http_reload_end(struct admin *a, bool apply);

/* Requests refused and TLS handshakes failed, for /metrics (adminauth.h). */
const struct adminauth_counters *admin_http_counters(const struct admin *a);

#endif
