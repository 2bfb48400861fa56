/*
 * admin_http — the HTTP servers of the admin API on the admin process's
 * libev loop; see admin_http.h for the model. The route table is
 * adminproto.c's, the answers the supervisor's.
 *
 * Access (adminauth.h) is decided before a request is submitted; this file
 * only asks and logs refusals (the supervisor logs the mutating calls it
 * receives, with the caller sent along). Connection I/O goes through the
 * transport of common/transport.h: plain TCP / Unix, or TLS (common/tls.h)
 * on an admin_listen with admin_tls_cert. The TLS handshake runs in the
 * reading state under the head deadline and in the same eviction queue as
 * a client that has sent nothing, so a stalled handshake is treated like a
 * slowloris; which socket events are watched comes from the transport
 * (admin_conn_rearm), never from the state alone. A TLS victim of eviction
 * gets no 503 (plain bytes would not be TLS).
 *
 * Connections move through reading -> queued -> waiting -> writing ->
 * lingering: queued while ADMINPROTO_MAX_INFLIGHT calls are unanswered,
 * waiting once submitted; after the response the write side is shut down
 * and unread input is drained for a moment before close(), so a client
 * whose request we refused early (413) still gets the response instead of
 * a reset.
 *
 * The listeners, budgets and eviction are admin_accept.c's; this file
 * keeps each connection's place in its listener's eviction queues up to
 * date (evict.h): by bytes received while reading, none once the request
 * is complete (queued and waiting connections are never evicted),
 * writing, lingering.
 *
 * Nothing here blocks the loop: every socket is non-blocking; send() of the
 * small 100-continue and 503 messages uses MSG_DONTWAIT and is best effort.
 */
#include "supervisor/admin_http_priv.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/tls.h"
#include "supervisor/clusterquery.h"
#include "supervisor/connquery.h"
#include "supervisor/statuspage.h"

#define ADMIN_LINGER_TIMEOUT 2.0    /* seconds to drain input after the response */

struct admin_response {
	int status;
	const char *content_type;       /* static string; NULL for none */
	char *body;                     /* malloc'd */
	size_t body_len;
	char extra_headers[256];        /* complete "Name: value\r\n" lines */
};

static void admin_pump(struct admin *a);

const char *
admin_conn_state_str(enum admin_conn_state s)
{
	switch (s) {
	case ADMIN_CONN_READING:
		return "reading";
	case ADMIN_CONN_QUEUED:
		return "queued";
	case ADMIN_CONN_WAITING:
		return "waiting";
	case ADMIN_CONN_WRITING:
		return "writing";
	case ADMIN_CONN_LINGERING:
		return "lingering";
	}
	return "unknown";
}

/* --- responses ---------------------------------------------------------- */

static void admin_response_error(struct admin_response *resp, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Set {"error":"..."} as the response. */
static void
admin_response_error(struct admin_response *resp, int status, const char *fmt, ...)
{
	static const char oom[] = "{\"error\":\"out of memory\"}\n";
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	free(resp->body);
	resp->status = status;
	resp->content_type = "application/json";
	resp->body = adminproto_error_json(msg, http_status_reason(status), &resp->body_len);
	if (resp->body == NULL) {
		resp->status = 500;
		resp->body = strdup(oom);
		resp->body_len = resp->body ? sizeof oom - 1 : 0;
	}
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

/* Access decision (adminauth.h). false: refused, resp holds the 401. */
static bool
admin_authorize(struct admin_conn *c, struct admin_response *resp)
{
	struct admin *a = c->srv->admin;
	const struct http_request *hr = &c->parser.req;
	enum adminproto_auth r;
	char who[sizeof c->caller.subject + 96], path[128];
	uint64_t dropped = 0;

	r = adminauth_check(&a->auth, c->srv->kind == ADMINPROTO_L_CONTROL, hr->path,
	    http_request_header(hr, "Authorization"), c->cert_verified);
	c->caller.auth = (uint32_t)r;
	if (adminproto_auth_allowed(r))
		return true;
	adminauth_count(a->counters, r);
	adminproto_caller_fields(&c->caller, who, sizeof who);
	adminproto_sanitize(hr->path, path, sizeof path);
	if (log_ratelimit_ok(&a->rl_auth, 5, 10, &dropped))
		log_warn("admin request refused", "listener=%s method=%s path=\"%s\" "
		    "reason=%s %s suppressed=%llu", adminproto_listener_str(c->srv->kind),
		    hr->method, path, adminproto_auth_str(r), who, (unsigned long long)dropped);
	admin_response_error(resp, 401, "%s", adminauth_refusal_msg(&a->auth, r));
	snprintf(resp->extra_headers, sizeof resp->extra_headers, "%s", adminauth_challenge(r));
	return false;
}

/* The status page, answered here: it is the same for everyone. */
static void
admin_page(struct admin_response *resp)
{
	size_t len;
	const char *page = statuspage_text(&len);

	if ((resp->body = malloc(len)) == NULL) {
		admin_response_error(resp, 500, "out of memory");
		return;
	}
	memcpy(resp->body, page, len);
	resp->body_len = len;
	resp->status = 200;
	resp->content_type = "text/html; charset=utf-8";
	snprintf(resp->extra_headers, sizeof resp->extra_headers, "%s", STATUSPAGE_HEADERS);
}

/* Route c's complete request: true when it is for the supervisor (c->route
 * set), false when resp holds the answer (404, 405, 401, the page). */
static bool
admin_dispatch(struct admin_conn *c, struct admin_response *resp)
{
	const struct http_request *hr = &c->parser.req;
	const char *method = hr->method;
	char allow[128] = "", err[256];
	bool path_known = false;
	size_t i;

	if (strcmp(method, "HEAD") == 0) {
		c->head_only = true;
		method = "GET";
	}
	if (!admin_authorize(c, resp))
		return false;
	for (i = 0; i < adminproto_n_routes; i++) {
		const struct adminproto_route_def *r = &adminproto_routes[i];

		if (!admin_route_match(r->pattern, hr->path, c->param, sizeof c->param))
			continue;
		if (strcmp(r->method, method) == 0) {
			if (r->flags & ADMINPROTO_RF_LOCAL) {
				admin_page(resp);
				return false;
			}
			if ((r->flags & ADMINPROTO_RF_NAME) && !cfg_cluster_name_ok(c->param)) {
				/* no cluster can have it: nothing to ask */
				admin_response_error(resp, 404, "no cluster named '%s'", c->param);
				return false;
			}
			if ((r->flags & ADMINPROTO_RF_QUERY) &&
			    connquery_parse(hr->query, &c->query, err, sizeof err) == -1) {
				admin_response_error(resp, 400, "%s", err);
				return false;
			}
			if ((r->flags & ADMINPROTO_RF_LIST) &&
			    clusterquery_parse(hr->query, &c->list, err, sizeof err) == -1) {
				admin_response_error(resp, 400, "%s", err);
				return false;
			}
			c->route = r;
			return true;
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
		return false;
	}
	admin_response_error(resp, 404, "no such endpoint: %s", hr->path);
	return false;
}

/* --- eviction queues (evict.h) ----------------------------------------- */

struct admin_conn *
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

/* Take c out of the line of queued requests. */
static void
admin_unqueue(struct admin_conn *c)
{
	struct admin *a = c->srv->admin;
	struct admin_conn **pp, *prev = NULL;

	for (pp = &a->queue; *pp != NULL; prev = *pp, pp = &(*pp)->qnext)
		if (*pp == c) {
			*pp = c->qnext;
			if (a->queue_tail == c)
				a->queue_tail = prev;
			c->qnext = NULL;
			return;
		}
}

/* c no longer waits for an answer: its slot is free for the next in line. */
static void
admin_conn_settle(struct admin_conn *c)
{
	struct admin *a = c->srv->admin;

	if (c->state == ADMIN_CONN_QUEUED)
		admin_unqueue(c);
	if (c->state != ADMIN_CONN_WAITING)
		return;
	for (size_t i = 0; i < ADMINPROTO_MAX_INFLIGHT; i++)
		if (a->waiting[i] == c) {
			a->waiting[i] = NULL;
			a->inflight--;
			break;
		}
}

void
admin_conn_close(struct admin_conn *c)
{
	struct admin_server *srv = c->srv;
	struct ev_loop *loop = srv->admin->loop;

	admin_conn_settle(c);
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
 * writing. Nothing while the request waits for its answer. */
static void
admin_conn_rearm(struct admin_conn *c)
{
	struct ev_loop *loop = c->srv->admin->loop;
	int ev;

	if (c->state == ADMIN_CONN_QUEUED || c->state == ADMIN_CONN_WAITING) {
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
			    adminproto_listener_str(c->srv->kind), strerror(errno));
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

	adminproto_sanitize(c->parser.req.path ? c->parser.req.path : "-", path, sizeof path);
	log_debug("admin request", "listener=%s method=%s path=\"%s\" status=%d",
	    adminproto_listener_str(c->srv->kind),
	    c->parser.req.method[0] ? c->parser.req.method : "-", path, resp->status);
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
	admin_conn_settle(c);
	c->out_off = 0;
	c->state = ADMIN_CONN_WRITING;
	admin_conn_uncharge(c);
	admin_queue_put(c, EVICT_Q_WRITING);
	admin_conn_rearm(c);
	admin_conn_set_timer(c, ADMIN_WRITE_TIMEOUT);
	admin_conn_write(c);
}

static void
admin_conn_fail(struct admin_conn *c, int status, const char *msg)
{
	struct admin_response resp;

	memset(&resp, 0, sizeof resp);
	admin_response_error(&resp, status, "%s", msg);
	admin_conn_send(c, &resp);
}

/* Hand c's routed request to the supervisor; c waits for the answer (with a
 * deadline unless the route may take long). false: c was answered 503. */
static bool
admin_conn_submit(struct admin_conn *c)
{
	struct admin *a = c->srv->admin;
	const struct http_request *hr = &c->parser.req;
	struct admin_call call = {
		.id = ++a->next_id,
		.route = c->route,
		.name = (c->route->flags & ADMINPROTO_RF_NAME) ? c->param : NULL,
		.body = (c->route->flags & ADMINPROTO_RF_BODY) ? hr->body : NULL,
		.body_len = (c->route->flags & ADMINPROTO_RF_BODY) ? hr->body_len : 0,
		.had_body = !(c->route->flags & ADMINPROTO_RF_BODY) && hr->body_len > 0,
		.query = (c->route->flags & ADMINPROTO_RF_QUERY) ? &c->query : NULL,
		.list = (c->route->flags & ADMINPROTO_RF_LIST) ? &c->list : NULL,
		.caller = &c->caller,
	};

	size_t slot;

	for (slot = 0; slot < ADMINPROTO_MAX_INFLIGHT && a->waiting[slot] != NULL; slot++)
		;
	if (slot == ADMINPROTO_MAX_INFLIGHT || a->submit(a->submit_ctx, &call) == -1) {
		admin_conn_fail(c, 503, "ferryd is not taking requests, retry later");
		return false;
	}
	c->id = call.id;
	c->state = ADMIN_CONN_WAITING;
	a->waiting[slot] = c;
	a->inflight++;
	admin_conn_set_timer(c, (c->route->flags & ADMINPROTO_RF_WAITS) ? 0 :
	    ADMIN_ANSWER_TIMEOUT);
	return true;
}

/* Submit queued requests while slots are free. */
static void
admin_pump(struct admin *a)
{
	while (a->queue != NULL && a->inflight < ADMINPROTO_MAX_INFLIGHT) {
		struct admin_conn *c = a->queue;

		a->queue = c->qnext;
		if (a->queue == NULL)
			a->queue_tail = NULL;
		c->qnext = NULL;
		c->state = ADMIN_CONN_READING;  /* out of the line, not yet waiting */
		admin_conn_submit(c);
	}
}

/* A complete request: answered here, or queued for the supervisor. */
static void
admin_conn_request(struct admin_conn *c)
{
	struct admin *a = c->srv->admin;
	struct admin_response resp;

	memset(&resp, 0, sizeof resp);
	if (!admin_dispatch(c, &resp)) {
		admin_conn_send(c, &resp);
		return;
	}
	/* read no further: not evictable, not watched, until answered */
	admin_queue_put(c, EVICT_Q_NONE);
	c->state = ADMIN_CONN_QUEUED;
	admin_conn_rearm(c);
	admin_conn_set_timer(c, (c->route->flags & ADMINPROTO_RF_WAITS) ? 0 :
	    ADMIN_ANSWER_TIMEOUT);
	if (a->queue_tail != NULL)
		a->queue_tail->qnext = c;
	else
		a->queue = c;
	a->queue_tail = c;
	admin_pump(a);
}

void
admin_http_answer(struct admin *a, uint64_t id, int status, const char *content_type,
		  char *body, size_t body_len)
{
	struct admin_response resp = { .status = status, .content_type = content_type,
				       .body = body, .body_len = body_len };

	for (size_t i = 0; i < ADMINPROTO_MAX_INFLIGHT; i++) {
		struct admin_conn *c = a->waiting[i];

		if (c != NULL && c->id == id) {
			admin_conn_send(c, &resp);
			admin_pump(a);
			return;
		}
	}
	free(body);  /* its client went away, or it timed out meanwhile */
}

/* Best effort, to a client that spoke plain HTTP to the HTTPS listener:
 * say so in plain HTTP rather than just closing. */
static void
admin_send_plain_refusal(int fd)
{
	char sink[4096];

	/* what the client sent is unread: taking it first keeps the close
	 * from turning into a reset that could discard our answer */
	for (int i = 0; i < 4 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
		;
	admin_send_raw(fd, "400 Bad Request", "", "{\"error\":\"this admin listener speaks "
	    "HTTPS: use https:// (ferryctl -a https://HOST:PORT --cacert FILE)\"}\n");
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
		atomic_fetch_add_explicit(&a->counters->tls_failures, 1, memory_order_relaxed);
		if (log_ratelimit_ok(&a->rl_auth, 5, 10, &dropped))
			log_info("admin TLS handshake failed", "listener=%s peer=%s error=\"%s\" "
			    "suppressed=%llu", adminproto_listener_str(c->srv->kind), c->caller.addr,
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
		c->cert_verified = true;
		if (transport_peer(&c->tp, c->caller.subject, sizeof c->caller.subject) == -1)
			c->caller.subject[0] = '\0';
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
				    "listener=%s buffered=%zu limit=%u suppressed=%llu",
				    adminproto_listener_str(srv->kind), srv->body_buffered,
				    ADMIN_MAX_BODY_BUFFERED, (unsigned long long)dropped);
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
	else if (c->state == ADMIN_CONN_READING || c->state == ADMIN_CONN_LINGERING)
		admin_conn_readable(c);
}

static void
admin_conn_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct admin_conn *c = w->data;

	(void)loop;
	(void)revents;
	log_debug("admin client timed out", "listener=%s state=%s",
	    adminproto_listener_str(c->srv->kind), admin_conn_state_str(c->state));
	if (c->state == ADMIN_CONN_QUEUED || c->state == ADMIN_CONN_WAITING) {
		struct admin *a = c->srv->admin;

		log_warn("ferryd did not answer an admin request in time", "listener=%s "
		    "route=%s state=%s waited_s=%g", adminproto_listener_str(c->srv->kind),
		    adminproto_route_str(c->route->id), admin_conn_state_str(c->state),
		    ADMIN_ANSWER_TIMEOUT);
		admin_conn_fail(c, 503, "ferryd did not answer in time, retry later");
		admin_pump(a);
		return;
	}
	if (c->state == ADMIN_CONN_READING && c->parser.len > 0) {
		admin_conn_fail(c, 408, c->in_body ? "request body not received in time" :
		    "request head not received in time");
		return;
	}
	admin_conn_close(c);
}

/* --- the servers ----------------------------------------------------------- */

bool
admin_conn_new(struct admin_server *srv, int fd)
{
	struct admin *a = srv->admin;
	struct ev_loop *loop = a->loop;
	struct admin_conn *c;

	if ((c = calloc(1, sizeof *c)) == NULL) {
		if (!admin_server_tls(srv))
			admin_send_busy(fd);
		close(fd);
		return false;
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
			return false;
		}
	} else {
		transport_plain_init(&c->tp, fd);
	}
	adminauth_identify(&c->caller, fd, srv->kind == ADMINPROTO_L_CONTROL);
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
	/* a request sent with the connect is submitted now (may close c) */
	admin_conn_readable(c);
	return true;
}

void
admin_http_set_auth(struct admin *a, struct adminauth *auth)
{
	/* connections in progress keep their own reference to the old TLS
	 * context (SSL_new takes one); new ones use the new certificate */
	adminauth_clear(&a->auth);
	a->auth = *auth;
	memset(auth, 0, sizeof *auth);  /* moved, not cleared */
}

struct admin *
admin_http_start(struct ev_loop *loop, int control_fd, int http_fd, struct adminauth *auth,
		 struct adminproto_counters *counters, admin_submit_fn submit, void *ctx,
		 char *err, size_t errlen)
{
	struct admin *a;
	unsigned budget;

	if ((a = calloc(1, sizeof *a)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	a->loop = loop;
	a->submit = submit;
	a->submit_ctx = ctx;
	a->counters = counters;
	budget = admin_http_budget();
	admin_server_init(a, &a->control, ADMINPROTO_L_CONTROL, budget);
	admin_server_init(a, &a->http, ADMINPROTO_L_HTTP, budget);
	admin_http_set_auth(a, auth);
	admin_server_start(&a->control, control_fd);
	if (http_fd != -1)
		admin_server_start(&a->http, http_fd);
	return a;
}

void
admin_http_stop(struct admin *a)
{
	if (a == NULL)
		return;
	admin_server_close(&a->control);
	admin_server_close(&a->http);
	while (a->conns != NULL)
		admin_conn_close(a->conns);
	adminauth_clear(&a->auth);
	free(a);
}

void
admin_http_accepting(struct admin *a, bool on)
{
	a->paused = !on;
	if (on) {
		admin_server_update(&a->control);
		admin_server_update(&a->http);
		return;
	}
	if (a->control.fd != -1)
		ev_io_stop(a->loop, &a->control.io);
	if (a->http.fd != -1)
		ev_io_stop(a->loop, &a->http.io);
}

void
admin_http_close_listeners(struct admin *a)
{
	admin_server_close(&a->control);
	admin_server_close(&a->http);
}

void
admin_http_quiesce(struct admin *a)
{
	struct admin_conn *c, *next;

	admin_http_close_listeners(a);
	/* nothing new is submitted: the line goes first */
	while (a->queue != NULL)
		admin_conn_fail(a->queue, 503, "ferryd is stopping");
	for (c = a->conns; c != NULL; c = next) {
		next = c->next;
		if (c->state == ADMIN_CONN_WAITING)
			admin_conn_fail(c, 503, "ferryd is stopping");
		else if (c->state == ADMIN_CONN_READING)
			admin_conn_close(c);
	}
}

bool
admin_http_busy(const struct admin *a)
{
	return a->conns != NULL;
}
