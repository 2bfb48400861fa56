/*
 * admin_http_priv — what the two files of the admin HTTP server share:
 * admin_http.c (connections: reading, routing, the calls to the
 * supervisor, answering) and admin_accept.c (the listeners: accepting,
 * budgets, eviction). See admin_http.h for the model.
 */
#ifndef FERRY_SUPERVISOR_ADMIN_HTTP_PRIV_H
#define FERRY_SUPERVISOR_ADMIN_HTTP_PRIV_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/http.h"
#include "common/log.h"
#include "common/transport.h"
#include "supervisor/admin_http.h"
#include "supervisor/evict.h"

#define ADMIN_PARAM_MAX      256

enum admin_conn_state {
	ADMIN_CONN_READING = 0,
	ADMIN_CONN_QUEUED,              /* complete, waiting for an in-flight slot */
	ADMIN_CONN_WAITING,             /* submitted, waiting for the answer */
	ADMIN_CONN_WRITING,
	ADMIN_CONN_LINGERING,
};

struct admin_server {
	struct admin *admin;
	enum adminproto_listener kind;
	int fd;
	ev_io io;
	ev_timer backoff;
	bool backing_off;
	unsigned n_conns;
	unsigned max_conns;             /* admin_http_budget() */
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
	bool in_body;                   /* head complete: body deadline armed */
	size_t body_charged;            /* bytes counted in srv->body_buffered */
	const struct adminproto_route_def *route; /* the matched route, once complete */
	char param[ADMIN_PARAM_MAX];    /* the '*' segment of the route */
	struct adminproto_conn_query query; /* RF_QUERY routes: the query string, read */
	struct adminproto_list_query list;  /* RF_LIST routes: the query string, read */
	uint64_t id;                    /* names the call to the supervisor */
	char *out;
	size_t out_len, out_off;
	struct adminproto_caller caller; /* who is at the other end */
	bool cert_verified;             /* TLS: a client certificate verified */
	struct admin_conn *prev, *next; /* all connections (admin->conns) */
	struct admin_conn *qnext;       /* queued: the next in line */
	struct evict_node evict;        /* its place in srv->evict */
};

struct admin {
	struct ev_loop *loop;
	admin_submit_fn submit;
	void *submit_ctx;
	uint64_t next_id;               /* names of calls (admin_call.id) */
	unsigned inflight;              /* calls submitted and not answered */
	struct admin_conn *waiting[ADMINPROTO_MAX_INFLIGHT]; /* those calls' connections */
	struct admin_conn *queue, *queue_tail; /* complete, waiting for a slot */
	struct admin_server control;
	struct admin_server http;
	struct admin_conn *conns;
	struct adminauth auth;          /* admin_listen's credentials */
	struct adminproto_counters *counters; /* shared with the supervisor */
	struct log_ratelimit rl_auth;   /* refusals */
	bool paused;                    /* not accepting (an upgrade moves the sockets) */
};

/* admin_http.c */
const char *admin_conn_state_str(enum admin_conn_state s);
/* A connection for the accepted socket fd of srv, read at once (a request
 * sent with the connect is routed now). false when it could not be set
 * up (fd closed); it may also be closed already when this returns. */
bool admin_conn_new(struct admin_server *srv, int fd);
void admin_conn_close(struct admin_conn *c);
struct admin_conn *admin_conn_of(struct evict_node *n);

/* admin_accept.c */
void admin_server_init(struct admin *a, struct admin_server *srv, enum adminproto_listener kind,
		       unsigned max_conns);
void admin_server_start(struct admin_server *srv, int fd);
void admin_server_close(struct admin_server *srv);
/* Watch the listening socket unless accept() is backing off. */
void admin_server_update(struct admin_server *srv);
/* Does srv speak HTTPS (admin_listen with admin_tls_cert)? */
bool admin_server_tls(const struct admin_server *srv);
/* Best-effort one-shot answers on a plain socket about to be closed: a
 * whole response (JSON body, "Connection: close"), and the 503 of a full
 * listener. */
void admin_send_raw(int fd, const char *status_line, const char *extra_headers,
		    const char *body);
void admin_send_busy(int fd);
/* Connections per listener under the descriptor limit. */
unsigned admin_http_budget(void);

#endif
