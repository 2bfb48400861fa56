/*
 * admin_http — the HTTP servers of the admin API on the supervisor's libev
 * loop; see admin_http.h for the model. The routes and handlers are
 * admin_api.c's.
 *
 * Listeners are bound by admin_listen.c (the control socket's permissions,
 * a stale socket file, admin_listen's TCP socket).
 *
 * Access (adminauth.h) is decided before a request is routed; this file
 * only asks and logs. Connection I/O goes through the transport of
 * common/transport.h: plain TCP / Unix, or TLS (common/tls.h) on an
 * admin_listen with admin_tls_cert. The TLS handshake runs in the reading
 * state under the head deadline and in the same eviction queue as a client
 * that has sent nothing, so a stalled handshake is treated like a
 * slowloris; which socket events are watched comes from the transport
 * (admin_conn_rearm), never from the state alone. A TLS victim of eviction
 * gets no 503 (plain bytes would not be TLS).
 *
 * Connections move through reading -> (deferred) -> writing -> lingering:
 * after the response the write side is shut down and unread input is
 * drained for a moment before close(), so a client whose request we refused
 * early (413) still gets the response instead of a reset.
 *
 * Budgets and eviction (limits in admin_http.h). Each listener counts its
 * own connections, up to ADMIN_LISTEN_MAX_CONNS, or less when the
 * descriptor limit cannot hold two full listeners beside the workers'
 * descriptors (admin_listen_budget): then neither listener can use up the
 * descriptors the other needs. Every loop iteration in which both
 * listening sockets are readable accepts up to ADMIN_ACCEPT_BATCH from each,
 * so a flood on one never delays the other by more than one batch. A newly
 * accepted connection is read at once: a client that sent its request with
 * the connect is answered before anything else can happen to it.
 *
 * When a listener is full, accepting continues and each new connection
 * evicts one old connection of the same listener, chosen in O(1) by the
 * queues of evict.h: first one whose response is already sent, then the
 * reading connection that has sent least and waited longest, then one whose
 * client does not read its response. A reading victim is sent a best-effort
 * 503. Deferred connections are in no queue and are never evicted; if
 * nothing is evictable the new connection is answered 503 and closed.
 *
 * When accept() runs out of descriptors the listener stops watching and a
 * timer re-arms it, so the loop never spins on a readable listening socket.
 *
 * Nothing here blocks the loop: every socket is non-blocking; send() of the
 * small 100-continue and 503 messages uses MSG_DONTWAIT and is best effort.
 * getaddrinfo() runs once in admin_http_start, before the loop, and with a
 * numeric service.
 */
#include "supervisor/admin_http.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sodium.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "common/units.h"
#include "common/tls.h"
#include "common/transport.h"
#include "supervisor/admin_listen.h"
#include "supervisor/adminauth.h"
#include "supervisor/evict.h"
#include "supervisor/status.h"

#define ADMIN_LINGER_TIMEOUT 2.0    /* seconds to drain input after the response */
#define ADMIN_ACCEPT_BACKOFF 1.0    /* seconds to pause accept() after EMFILE */
#define ADMIN_ACCEPT_BATCH   64     /* per listener per loop iteration */
#define ADMIN_PARAM_MAX      256
#define ADMIN_EVICT_LOG_S    10     /* at most one eviction warning per this */

enum admin_conn_state {
	ADMIN_CONN_READING = 0,
	ADMIN_CONN_DEFERRED,
	ADMIN_CONN_WRITING,
	ADMIN_CONN_LINGERING,
};

struct admin_server {
	struct admin *admin;
	const char *kind;               /* "control" or "http", for logs */
	int fd;
	ev_io io;
	ev_timer backoff;
	bool backing_off;
	unsigned n_conns;
	unsigned max_conns;             /* admin_listen_budget() */
	size_t body_buffered;           /* bytes charged by large bodies */
	unsigned long long evicted;     /* connections evicted, ever */
	unsigned long long refused;     /* full with nothing evictable */
	uint64_t evict_logged_ms;       /* last eviction warning */
	struct log_ratelimit rl_body;   /* body-budget refusals */
	struct evict_set evict;         /* evictable connections (evict.h) */
};

struct admin_conn {
	struct admin_server *srv;
	int fd;
	struct transport tp;            /* plain, or TLS on an HTTPS admin_listen */
	enum admin_conn_state state;
	ev_io io;
	ev_timer timer;
	struct http_parser parser;
	bool continue_sent;
	bool head_only;                 /* HEAD: headers without the body */
	uint64_t id;                    /* names a deferred request to the engine */
	bool in_body;                   /* head complete: body deadline armed */
	size_t body_charged;            /* bytes counted in srv->body_buffered */
	char *out;
	size_t out_len, out_off;
	struct adminauth_peer peer;     /* who is at the other end */
	struct admin_conn *prev, *next; /* all connections (admin->conns) */
	struct evict_node evict;        /* its place in srv->evict */
};

struct admin {
	struct sup *sup;                /* for the handlers (admin_request.sup) */
	struct ev_loop *loop;
	const struct admin_route *routes;
	size_t n_routes;
	uint64_t next_id;               /* names of requests (admin_request.id) */
	struct admin_server control;
	struct admin_server http;
	char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	dev_t socket_dev;               /* to unlink only our own socket */
	ino_t socket_ino;
	struct admin_conn *conns;
	struct adminauth auth;          /* admin_listen's credentials */
	struct adminauth pending;       /* of a reload, until it ends */
	bool have_pending;
	struct log_ratelimit rl_auth;   /* refusals */
	struct adminauth_counters counters; /* refusals, for /metrics */
	bool paused;                    /* not accepting (an upgrade commits) */
};

static void admin_conn_close(struct admin_conn *c);
static void admin_server_update(struct admin_server *srv);

static const char *
admin_conn_state_str(enum admin_conn_state s)
{
	switch (s) {
	case ADMIN_CONN_READING:
		return "reading";
	case ADMIN_CONN_DEFERRED:
		return "deferred";
	case ADMIN_CONN_WRITING:
		return "writing";
	case ADMIN_CONN_LINGERING:
		return "lingering";
	}
	return "unknown";
}

/* --- responses ---------------------------------------------------------- */

void
admin_response_json(struct admin_response *resp, int status, json_t *body)
{
	free(resp->body);
	resp->body = status_dump(body, &resp->body_len);
	json_decref(body);
	resp->status = status;
	resp->content_type = "application/json";
	if (resp->body == NULL) {
		static const char oom[] = "{\"error\":\"out of memory\"}\n";

		resp->status = 500;
		resp->body = strdup(oom);
		resp->body_len = resp->body ? sizeof oom - 1 : 0;
	}
}

void
admin_response_error(struct admin_response *resp, int status, const char *fmt, ...)
{
	char msg[512];
	json_t *j;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	/* json_string refuses invalid UTF-8 (e.g. echoed from a path) */
	if ((j = json_pack("{s:s}", "error", msg)) == NULL)
		j = json_pack("{s:s}", "error", http_status_reason(status));
	admin_response_json(resp, status, j);
}

/* --- routing ------------------------------------------------------------ */

/* Match path against pattern segment by segment; '*' matches one non-empty
 * segment, copied into param. */
static bool
admin_route_match(const char *pattern, const char *path, char *param, size_t plen)
{
	while (*pattern != '\0') {
		if (*pattern == '*') {
			size_t n = strcspn(path, "/");

			if (n == 0 || n >= plen)
				return false;
			memcpy(param, path, n);
			param[n] = '\0';
			path += n;
			pattern++;
			continue;
		}
		if (*pattern != *path)
			return false;
		pattern++;
		path++;
	}
	return *path == '\0';
}

/* Access decision (adminauth.h) and the record of mutating calls. false:
 * refused, resp holds the 401. */
static bool
admin_authorize(struct admin_conn *c, struct admin_response *resp)
{
	struct admin *a = c->srv->admin;
	const struct http_request *hr = &c->parser.req;
	enum adminauth_result r;
	char who[sizeof c->peer.subject + 96], path[128];
	uint64_t dropped = 0;

	r = adminauth_check(&a->auth, c->peer.local, hr->path,
	    http_request_header(hr, "Authorization"), c->peer.cert_verified);
	adminauth_peer_fields(&c->peer, who, sizeof who);
	adminauth_sanitize(hr->path, path, sizeof path);
	if (!adminauth_allowed(r)) {
		adminauth_count(&a->counters, r);
		if (log_ratelimit_ok(&a->rl_auth, 5, 10, &dropped))
			log_warn("admin request refused", "listener=%s method=%s path=\"%s\" "
			    "reason=%s %s suppressed=%llu", c->srv->kind, hr->method, path,
			    adminauth_result_str(r), who, (unsigned long long)dropped);
		admin_response_error(resp, 401, "%s", adminauth_refusal_msg(&a->auth, r));
		snprintf(resp->extra_headers, sizeof resp->extra_headers, "%s",
		    adminauth_challenge(r));
		return false;
	}
	/* every POST changes something (reload, drain, restart) or records
	 * something (validate): say who asked */
	if (strcmp(hr->method, "POST") == 0)
		log_info("admin call", "listener=%s method=%s path=\"%s\" auth=%s %s",
		    c->srv->kind, hr->method, path, adminauth_result_str(r), who);
	return true;
}

static enum admin_handler_result
admin_dispatch(struct admin_conn *c, struct admin_response *resp)
{
	struct admin *a = c->srv->admin;
	const struct http_request *hr = &c->parser.req;
	struct admin_request req = { .sup = a->sup, .admin = a, .conn = c, .http = hr };
	const char *method = hr->method;
	char param[ADMIN_PARAM_MAX], allow[128] = "";
	size_t i;
	bool path_known = false;

	if (strcmp(method, "HEAD") == 0) {
		c->head_only = true;
		method = "GET";
	}
	if (!admin_authorize(c, resp))
		return ADMIN_RESPOND;
	req.id = c->id = ++a->next_id;
	for (i = 0; i < a->n_routes; i++) {
		const struct admin_route *r = &a->routes[i];

		if (!admin_route_match(r->pattern, hr->path, param, sizeof param))
			continue;
		if (strcmp(r->method, method) == 0) {
			req.param = strchr(r->pattern, '*') ? param : NULL;
			return r->handler(&req, resp);
		}
		if (strstr(allow, r->method) == NULL) {
			size_t n = strlen(allow);

			snprintf(allow + n, sizeof allow - n, "%s%s%s", n ? ", " : "",
			    r->method, strcmp(r->method, "GET") == 0 ? ", HEAD" : "");
		}
		path_known = true;
	}
	if (path_known) {
		admin_response_error(resp, 405, "method %s not allowed for %s", hr->method, hr->path);
		snprintf(resp->extra_headers, sizeof resp->extra_headers, "Allow: %s\r\n", allow);
		return ADMIN_RESPOND;
	}
	admin_response_error(resp, 404, "no such endpoint: %s", hr->path);
	return ADMIN_RESPOND;
}

/* --- eviction queues (evict.h) ----------------------------------------- */

static struct admin_conn *
admin_conn_of(struct evict_node *n)
{
	return (struct admin_conn *)(void *)((char *)n - offsetof(struct admin_conn, evict));
}

static void
admin_queue_put(struct admin_conn *c, int which)
{
	evict_put(&c->srv->evict, &c->evict, which);
}

/* Give back what c charged to its listener's body budget. */
static void
admin_conn_uncharge(struct admin_conn *c)
{
	c->srv->body_buffered -= c->body_charged;
	c->body_charged = 0;
}

/* --- connections -------------------------------------------------------- */

static void
admin_conn_close(struct admin_conn *c)
{
	struct admin_server *srv = c->srv;
	struct ev_loop *loop = srv->admin->loop;

	evict_del(&srv->evict, &c->evict);
	admin_conn_uncharge(c);
	ev_io_stop(loop, &c->io);
	ev_timer_stop(loop, &c->timer);
	transport_close(&c->tp);
	http_parser_free(&c->parser);
	free(c->out);
	if (c->prev)
		c->prev->next = c->next;
	else
		srv->admin->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	free(c);
	srv->n_conns--;
	admin_server_update(srv);
}

static void
admin_conn_set_timer(struct admin_conn *c, double seconds)
{
	struct ev_loop *loop = c->srv->admin->loop;

	ev_timer_stop(loop, &c->timer);
	if (seconds > 0) {
		ev_timer_set(&c->timer, seconds, 0.);
		ev_timer_start(loop, &c->timer);
	}
}

/* Watch the socket for what the transport waits for in c's state: a
 * blocked handshake or shutdown step, else reading (reading, lingering) or
 * writing. Nothing while deferred. */
static void
admin_conn_rearm(struct admin_conn *c)
{
	struct ev_loop *loop = c->srv->admin->loop;
	int ev;

	if (c->state == ADMIN_CONN_DEFERRED) {
		ev_io_stop(loop, &c->io);
		return;
	}
	ev = transport_interest(&c->tp, c->state != ADMIN_CONN_WRITING,
	    c->state == ADMIN_CONN_WRITING);
	if (ev == 0)
		ev = c->state == ADMIN_CONN_WRITING ? EV_WRITE : EV_READ;
	if (ev_is_active(&c->io) && (c->io.events & (EV_READ | EV_WRITE)) == ev)
		return;
	ev_io_stop(loop, &c->io);
	ev_io_set(&c->io, c->fd, ev);
	ev_io_start(loop, &c->io);
}

/* One step of closing our write side (TLS: close_notify); then the
 * remaining input is drained until EOF or ADMIN_LINGER_TIMEOUT. */
static void
admin_conn_shutdown_step(struct admin_conn *c)
{
	int r = transport_shutdown(&c->tp);

	if (r == -1) {
		admin_conn_close(c);
		return;
	}
	admin_conn_rearm(c);
}

static void
admin_conn_linger(struct admin_conn *c)
{
	c->state = ADMIN_CONN_LINGERING;
	admin_queue_put(c, EVICT_Q_LINGERING);
	admin_conn_set_timer(c, ADMIN_LINGER_TIMEOUT);
	admin_conn_shutdown_step(c);
}

static void
admin_conn_write(struct admin_conn *c)
{
	ssize_t n;

	while (c->out_off < c->out_len) {
		n = transport_write(&c->tp, c->out + c->out_off, c->out_len - c->out_off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			admin_conn_rearm(c);
			return;
		}
		if (n == -1) {
			log_debug("admin client write failed", "listener=%s error=\"%s\"",
			    c->srv->kind, strerror(errno));
			admin_conn_close(c);
			return;
		}
		c->out_off += (size_t)n;
	}
	admin_conn_linger(c);
}

/* Format resp and start sending it; takes over resp->body. */
static void
admin_conn_send(struct admin_conn *c, struct admin_response *resp)
{
	char path[128];

	adminauth_sanitize(c->parser.req.path ? c->parser.req.path : "-", path, sizeof path);
	log_debug("admin request", "listener=%s method=%s path=\"%s\" status=%d",
	    c->srv->kind, c->parser.req.method[0] ? c->parser.req.method : "-",
	    path, resp->status);
	free(c->out);
	c->out = http_format_response(resp->status, resp->content_type,
	    resp->extra_headers[0] ? resp->extra_headers : NULL,
	    resp->body, resp->body_len, c->head_only, &c->out_len);
	free(resp->body);
	resp->body = NULL;
	if (c->out == NULL) {
		admin_conn_close(c);
		return;
	}
	c->out_off = 0;
	c->state = ADMIN_CONN_WRITING;
	admin_conn_uncharge(c);
	admin_queue_put(c, EVICT_Q_WRITING);
	admin_conn_rearm(c);
	admin_conn_set_timer(c, ADMIN_WRITE_TIMEOUT);
	admin_conn_write(c);
}

void
admin_conn_respond(struct admin_conn *c, struct admin_response *resp)
{
	if (c->state != ADMIN_CONN_DEFERRED) {
		free(resp->body);
		resp->body = NULL;
		return;
	}
	admin_conn_send(c, resp);
}

static void
admin_conn_request(struct admin_conn *c)
{
	struct ev_loop *loop = c->srv->admin->loop;
	struct admin_response resp;

	memset(&resp, 0, sizeof resp);
	if (admin_dispatch(c, &resp) == ADMIN_DEFERRED) {
		/* deferred: wait for admin_conn_respond(), read no further */
		c->state = ADMIN_CONN_DEFERRED;
		admin_queue_put(c, EVICT_Q_NONE);
		ev_io_stop(loop, &c->io);
		admin_conn_set_timer(c, 0);
		free(resp.body);
		return;
	}
	admin_conn_send(c, &resp);
}

static void
admin_conn_fail(struct admin_conn *c, int status, const char *msg)
{
	struct admin_response resp;

	memset(&resp, 0, sizeof resp);
	admin_response_error(&resp, status, "%s", msg);
	admin_conn_send(c, &resp);
}

/* Best effort, to a client that spoke plain HTTP to the HTTPS listener:
 * say so in plain HTTP rather than just closing. */
static void
admin_send_plain_refusal(int fd)
{
	static const char body[] = "{\"error\":\"this admin listener speaks HTTPS: use "
	    "https:// (ferryctl -a https://HOST:PORT --cacert FILE)\"}\n";
	char msg[512], sink[4096];
	int n;

	/* what the client sent is unread: taking it first keeps the close
	 * from turning into a reset that could discard our answer */
	for (int i = 0; i < 4 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
		;
	n = snprintf(msg, sizeof msg, "HTTP/1.1 400 Bad Request\r\n"
	    "Content-Type: application/json\r\nContent-Length: %zu\r\n"
	    "Connection: close\r\n\r\n%s", sizeof body - 1, body);
	if (n > 0 && (size_t)n < sizeof msg)
		(void)send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* The TLS handshake of an HTTPS connection, one step; it runs under the
 * head deadline and in the eviction queues like a client that has sent
 * nothing yet, so a stalled handshake costs what a slowloris costs.
 * true once bytes may flow (c may be closed otherwise). */
static bool
admin_conn_handshake(struct admin_conn *c)
{
	struct admin *a = c->srv->admin;
	SSL *ssl;
	int r = transport_handshake(&c->tp);
	uint64_t dropped = 0;

	if (r == 0) {
		admin_conn_rearm(c);
		return false;
	}
	if (r == -1) {
		a->counters.tls_failures++;
		if (log_ratelimit_ok(&a->rl_auth, 5, 10, &dropped))
			log_info("admin TLS handshake failed", "listener=%s peer=%s error=\"%s\" "
			    "suppressed=%llu", c->srv->kind, c->peer.addr,
			    transport_tls_error(&c->tp), (unsigned long long)dropped);
		if (transport_tls_plaintext(&c->tp))
			admin_send_plain_refusal(c->fd);
		admin_conn_close(c);
		return false;
	}
	/* a client certificate that did not verify has failed the handshake
	 * already (requested + verify); one that is here verified */
	if ((ssl = transport_tls_ssl(&c->tp)) != NULL &&
	    SSL_get0_peer_certificate(ssl) != NULL &&
	    SSL_get_verify_result(ssl) == X509_V_OK) {
		c->peer.cert_verified = true;
		if (transport_peer(&c->tp, c->peer.subject, sizeof c->peer.subject) == -1)
			c->peer.subject[0] = '\0';
	}
	admin_conn_rearm(c);
	return true;
}

/* Send "100 Continue" once, best effort. On TLS the bytes go through the
 * session: a write that blocks there cannot be abandoned (the record must
 * be finished with the same bytes), so such a connection is closed
 * (it has 2 KiB of socket buffer at least: it does not happen). */
static bool
admin_conn_continue(struct admin_conn *c)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	ssize_t n;

	c->continue_sent = true;
	if (!transport_is_tls(&c->tp)) {
		(void)send(c->fd, cont, sizeof cont - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		return true;
	}
	n = transport_write(&c->tp, cont, sizeof cont - 1);
	if (n == (ssize_t)(sizeof cont - 1))
		return true;
	admin_conn_close(c);
	return false;
}

/* Read what there is (TLS: including what the session already holds,
 * transport_pending) and parse it. c may be closed on return. */
static void
admin_conn_readable(struct admin_conn *c)
{
	char buf[16384];
	ssize_t n;
	enum http_result rc;

	if (c->tp.state == TRANSPORT_HANDSHAKE && !admin_conn_handshake(c))
		return;
	if (c->state == ADMIN_CONN_LINGERING && c->tp.hs_want != TRANSPORT_WANT_NONE) {
		/* our close_notify is still blocked: finish it first */
		admin_conn_shutdown_step(c);
		return;
	}
again:
	n = transport_read(&c->tp, buf, sizeof buf);
	if (n == -1 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
		admin_conn_rearm(c);
		return;
	}
	if (n <= 0) {
		/* EOF or error; in lingering this is the normal end */
		admin_conn_close(c);
		return;
	}
	if (c->state == ADMIN_CONN_LINGERING) {
		if (transport_pending(&c->tp) > 0)
			goto again;
		admin_conn_rearm(c);
		return;         /* discard */
	}

	rc = http_parser_feed(&c->parser, buf, (size_t)n);
	if (rc == HTTP_ERROR) {
		admin_conn_fail(c, c->parser.status, c->parser.error);
		return;
	}
	if (rc == HTTP_DONE) {
		admin_conn_request(c);
		return;
	}
	/* still reading: its byte class decides its eviction order */
	admin_queue_put(c, evict_reading_queue(c->parser.len));
	if (!c->in_body && c->parser.state == HTTP_PARSER_BODY) {
		/* head complete: the body gets its own deadline */
		c->in_body = true;
		admin_conn_set_timer(c, ADMIN_BODY_TIMEOUT);
	}
	if (c->parser.len > HTTP_MAX_HEAD) {
		struct admin_server *srv = c->srv;

		srv->body_buffered += c->parser.len - c->body_charged;
		c->body_charged = c->parser.len;
		if (srv->body_buffered > ADMIN_MAX_BODY_BUFFERED) {
			uint64_t dropped = 0;

			if (log_ratelimit_ok(&srv->rl_body, 1, 5, &dropped))
				log_warn("admin request refused: too much request data buffered",
				    "listener=%s buffered=%zu limit=%u suppressed=%llu", srv->kind,
				    srv->body_buffered, ADMIN_MAX_BODY_BUFFERED,
				    (unsigned long long)dropped);
			admin_conn_fail(c, 503, "admin API busy: too many large requests in "
			    "progress, retry later");
			return;
		}
	}
	/* best effort: a client that misses it sends the body anyway */
	if (!c->continue_sent && http_parser_wants_continue(&c->parser) &&
	    !admin_conn_continue(c))
		return;
	/* bytes decrypted but not returned yet: the socket may never signal
	 * them */
	if (transport_pending(&c->tp) > 0)
		goto again;
	admin_conn_rearm(c);
}

static void
admin_conn_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct admin_conn *c = w->data;

	(void)loop;
	(void)revents;  /* the transport knows what each step waits for */
	if (c->state == ADMIN_CONN_WRITING)
		admin_conn_write(c);
	else if (c->state != ADMIN_CONN_DEFERRED)
		admin_conn_readable(c);
}

static void
admin_conn_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct admin_conn *c = w->data;

	(void)loop;
	(void)revents;
	log_debug("admin client timed out", "listener=%s state=%s", c->srv->kind,
	    admin_conn_state_str(c->state));
	if (c->state == ADMIN_CONN_READING && c->parser.len > 0) {
		admin_conn_fail(c, 408, c->in_body ? "request body not received in time" :
		    "request head not received in time");
		return;
	}
	admin_conn_close(c);
}

/* --- listeners ---------------------------------------------------------- */

/* Watch the listening socket unless accept() is backing off. A full
 * listener keeps accepting: each new connection evicts an old one. */
static void
admin_server_update(struct admin_server *srv)
{
	struct ev_loop *loop = srv->admin->loop;

	if (srv->fd == -1)
		return;
	if (!srv->backing_off && !srv->admin->paused)
		ev_io_start(loop, &srv->io);
	else
		ev_io_stop(loop, &srv->io);
}

/* Best-effort one-shot answer on a socket we are about to close. */
static void
admin_send_busy(int fd)
{
	static const char body[] = "{\"error\":\"admin API busy: too many connections\"}\n";
	char msg[256];
	int n;

	n = snprintf(msg, sizeof msg, "HTTP/1.1 503 Service Unavailable\r\n"
	    "Content-Type: application/json\r\nContent-Length: %zu\r\n"
	    "Retry-After: 1\r\nConnection: close\r\n\r\n%s", sizeof body - 1, body);
	if (n > 0 && (size_t)n < sizeof msg)
		(void)send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void
admin_server_log_evictions(struct admin_server *srv)
{
	uint64_t now = clock_mono_ms();

	if (srv->evict_logged_ms != 0 && now - srv->evict_logged_ms < ADMIN_EVICT_LOG_S * 1000)
		return;
	srv->evict_logged_ms = now;
	log_warn("admin listener full, dropping the slowest connections", "listener=%s "
	    "max_connections=%u evicted_total=%llu refused_total=%llu", srv->kind,
	    srv->max_conns, srv->evicted, srv->refused);
}

/* Make room for one connection: close the cheapest victim (see the header
 * comment). Returns false when nothing can be evicted. */
static bool
admin_server_evict(struct admin_server *srv)
{
	struct evict_node *n = evict_victim(&srv->evict);
	struct admin_conn *victim;

	if (n == NULL)
		return false;
	victim = admin_conn_of(n);
	log_debug("admin connection evicted", "listener=%s state=%s bytes=%zu",
	    srv->kind, admin_conn_state_str(victim->state), victim->parser.len);
	if (victim->state == ADMIN_CONN_READING && !transport_is_tls(&victim->tp))
		admin_send_busy(victim->fd);
	admin_conn_close(victim);
	srv->evicted++;
	return true;
}

static void
admin_backoff_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct admin_server *srv = w->data;

	(void)loop;
	(void)revents;
	srv->backing_off = false;
	admin_server_update(srv);
}

/* Does srv speak HTTPS (admin_listen with admin_tls_cert)? */
static bool
admin_server_tls(const struct admin_server *srv)
{
	return srv == &srv->admin->http && srv->admin->auth.tls_ctx != NULL;
}

static void
admin_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct admin_server *srv = w->data;
	struct admin *a = srv->admin;
	struct admin_conn *c;
	int fd, i;

	(void)revents;
	for (i = 0; i < ADMIN_ACCEPT_BATCH && !srv->backing_off; i++) {
		fd = accept4(srv->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd == -1) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				log_warn("admin accept paused", "listener=%s error=\"%s\" retry_s=%g",
				    srv->kind, strerror(errno), ADMIN_ACCEPT_BACKOFF);
				srv->backing_off = true;
				ev_timer_set(&srv->backoff, ADMIN_ACCEPT_BACKOFF, 0.);
				ev_timer_start(loop, &srv->backoff);
				break;
			}
			log_warn("admin accept failed", "listener=%s error=\"%s\"", srv->kind,
			    strerror(errno));
			break;
		}
		if (srv->n_conns >= srv->max_conns) {
			bool room = admin_server_evict(srv);

			if (!room)
				srv->refused++;
			admin_server_log_evictions(srv);
			if (!room) {
				if (!admin_server_tls(srv))
					admin_send_busy(fd);
				close(fd);
				continue;
			}
		}
		if ((c = calloc(1, sizeof *c)) == NULL) {
			if (!admin_server_tls(srv))
				admin_send_busy(fd);
			close(fd);
			break;
		}
		c->srv = srv;
		c->fd = fd;
		c->state = ADMIN_CONN_READING;
		if (admin_server_tls(srv)) {
			int one = 1;

			/* the response and the close_notify after it are two
			 * small writes: without this, Nagle holds the second
			 * until the client's delayed ACK (40 ms a request) */
			(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
			if (transport_tls_server_init(&c->tp, fd, a->auth.tls_ctx) == -1) {
				close(fd);
				free(c);
				break;
			}
		} else {
			transport_plain_init(&c->tp, fd);
		}
		adminauth_peer_identify(&c->peer, fd, srv == &a->control);
		evict_node_init(&c->evict);
		http_parser_init(&c->parser);
		ev_io_init(&c->io, admin_conn_io_cb, fd, EV_READ);
		c->io.data = c;
		ev_timer_init(&c->timer, admin_conn_timer_cb, ADMIN_HEAD_TIMEOUT, 0.);
		c->timer.data = c;
		ev_io_start(loop, &c->io);
		ev_timer_start(loop, &c->timer);
		c->next = a->conns;
		if (a->conns)
			a->conns->prev = c;
		a->conns = c;
		srv->n_conns++;
		admin_queue_put(c, evict_reading_queue(0));
		/* a request sent with the connect is answered now (may close c) */
		admin_conn_readable(c);
	}
	admin_server_update(srv);
}

static void
admin_server_init(struct admin *a, struct admin_server *srv, const char *kind)
{
	evict_set_init(&srv->evict);
	srv->admin = a;
	srv->kind = kind;
	srv->fd = -1;
	ev_timer_init(&srv->backoff, admin_backoff_cb, ADMIN_ACCEPT_BACKOFF, 0.);
	srv->backoff.data = srv;
}

static void
admin_server_start(struct admin_server *srv, int fd)
{
	srv->fd = fd;
	ev_io_init(&srv->io, admin_accept_cb, fd, EV_READ);
	srv->io.data = srv;
	admin_server_update(srv);
}

int
admin_http_reload_prepare(struct admin *a, const struct cfg *next, char *err, size_t errlen)
{
	if (a == NULL)
		return 0;
	adminauth_clear(&a->pending);
	a->have_pending = false;
	if (adminauth_load_cfg(&a->pending, next, err, errlen) == -1)
		return -1;
	a->have_pending = true;
	return 0;
}

void
admin_http_reload_end(struct admin *a, bool apply)
{
	bool changed;

	if (a == NULL || !a->have_pending)
		return;
	a->have_pending = false;
	if (!apply) {
		adminauth_clear(&a->pending);
		return;
	}
	changed = !adminauth_same(&a->auth, &a->pending);
	/* connections in progress keep their own reference to the old TLS
	 * context (SSL_new takes one); new ones use the new certificate */
	adminauth_clear(&a->auth);
	a->auth = a->pending;
	memset(&a->pending, 0, sizeof a->pending);  /* moved, not cleared */
	if (changed)
		log_info("admin access settings applied", "auth=%s https=%s open_paths=\"%s\"",
		    adminauth_summary(&a->auth), a->auth.tls_ctx ? "on" : "off",
		    a->auth.open_paths);
	adminauth_log_tls(&a->auth);
}

struct admin *
admin_http_start(const struct cfg *cfg, struct sup *sup, struct ev_loop *loop,
		 const struct admin_route *routes, size_t n_routes,
		 const struct admin_listeners *inherit, char *err, size_t errlen)
{
	struct admin *a;
	char name[CFG_HOST_MAX + 16];
	int fd;

	if (sodium_init() == -1) {
		snprintf(err, errlen, "libsodium initialisation failed");
		return NULL;
	}
	if ((a = calloc(1, sizeof *a)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	a->sup = sup;
	a->loop = loop;
	a->routes = routes;
	a->n_routes = n_routes;
	admin_server_init(a, &a->control, "control");
	admin_server_init(a, &a->http, "http");
	a->control.max_conns = a->http.max_conns = admin_listen_budget(cfg);
	if (adminauth_load_cfg(&a->auth, cfg, err, errlen) == -1)
		goto fail;
	if (inherit) {
		/* an upgrade: the predecessor's sockets, never bound again */
		fd = inherit->control_fd;
		a->socket_dev = inherit->control_dev;
		a->socket_ino = inherit->control_ino;
	} else if ((fd = admin_listen_control(cfg->control_socket,
	    (mode_t)cfg->control_socket_mode, cfg->control_socket_group, &a->socket_dev,
	    &a->socket_ino, err, errlen)) == -1) {
		goto fail;
	}
	memcpy(a->socket_path, cfg->control_socket, strlen(cfg->control_socket) + 1);
	admin_server_start(&a->control, fd);
	log_info("control socket listening", "path=\"%s\" mode=%04o group=%s",
	    cfg->control_socket, cfg->control_socket_mode,
	    cfg->control_socket_group[0] ? cfg->control_socket_group : "-");
	if (cfg->admin_enabled) {
		if (inherit)
			fd = inherit->tcp_fd;
		else if ((fd = admin_listen_tcp(&cfg->admin_listen, err, errlen)) == -1)
			goto fail;
		admin_server_start(&a->http, fd);
		units_fmt_addr(&cfg->admin_listen, name, sizeof name);
		log_info("admin API listening", "address=%s auth=%s https=%s", name,
		    adminauth_summary(&a->auth), a->auth.tls_ctx ? "on" : "off");
		adminauth_log_tls(&a->auth);
		if (!a->auth.token_set && !a->auth.client_certs &&
		    !cfg_addr_is_loopback(cfg->admin_listen.host))
			log_warn("admin API open to the network without credentials",
			    "address=%s reason=\"admin_insecure = on\"", name);
	}
	return a;
fail:
	admin_http_stop(a);
	return NULL;
}

static void
admin_server_close(struct admin_server *srv)
{
	struct ev_loop *loop = srv->admin->loop;

	ev_timer_stop(loop, &srv->backoff);
	if (srv->fd == -1)
		return;
	ev_io_stop(loop, &srv->io);
	close(srv->fd);
	srv->fd = -1;
}

void
admin_http_stop(struct admin *a)
{
	struct stat st;

	if (a == NULL)
		return;
	admin_server_close(&a->control);
	admin_server_close(&a->http);
	while (a->conns != NULL)
		admin_conn_close(a->conns);
	if (a->socket_path[0] != '\0' && lstat(a->socket_path, &st) == 0 &&
	    st.st_dev == a->socket_dev && st.st_ino == a->socket_ino)
		unlink(a->socket_path);
	adminauth_clear(&a->auth);
	adminauth_clear(&a->pending);
	free(a);
}

void
admin_http_listeners(const struct admin *a, struct admin_listeners *out)
{
	out->control_fd = a->control.fd;
	out->control_dev = a->socket_dev;
	out->control_ino = a->socket_ino;
	out->tcp_fd = a->http.fd;
}

void
admin_http_accepting(struct admin *a, bool on)
{
	a->paused = !on;
	if (on) {
		admin_server_update(&a->control);
		admin_server_update(&a->http);
	} else {
		if (a->control.fd != -1)
			ev_io_stop(a->loop, &a->control.io);
		if (a->http.fd != -1)
			ev_io_stop(a->loop, &a->http.io);
	}
}

void
admin_http_close_listeners(struct admin *a)
{
	admin_server_close(&a->control);
	admin_server_close(&a->http);
	a->socket_path[0] = '\0';  /* the file is the successor's now */
}

bool
admin_http_busy(const struct admin *a)
{
	return a->conns != NULL;
}

struct admin_conn *
admin_http_deferred(struct admin *a, uint64_t id)
{
	for (struct admin_conn *c = a->conns; c != NULL; c = c->next)
		if (c->id == id && c->state == ADMIN_CONN_DEFERRED)
			return c;
	return NULL;
}

const struct adminauth_counters *
admin_http_counters(const struct admin *a)
{
	return &a->counters;
}
