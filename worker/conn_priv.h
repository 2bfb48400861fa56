/*
 * conn_priv — what the files of the connection module share: conn.c (the
 * data path, the timer, the lifecycle table's actions), conn_setup.c (the
 * way to open: TLS, metadata, upstream connect) and conn_handover.c (how a
 * connection leaves its generation and how the next one adopts it). Not
 * for use outside worker/conn*.c.
 */
#ifndef FERRY_WORKER_CONN_PRIV_H
#define FERRY_WORKER_CONN_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/sni.h"
#include "common/transport.h"
#include "worker/conn.h"
#include "worker/conn_fsm.h"
#include "worker/frame.h"
#include "worker/handover.h"

/* A peer identity in logs: an address, or (TLS) a certificate subject. */
#define CONN_PEER_MAX 256

struct conn {
	struct worker *w;
	struct conn *prev, *next;
	struct transport cli, up;
	ev_io cli_io, up_io;
	ev_timer timer;
	enum conn_state state;  /* its lifecycle (conn_fsm.h); set by conn_event only */
	int broker_index;
	/* gateway = sni: the ClientHello named broker sni_node_id; its
	 * slot (broker_index) is found once the upstream address is known */
	bool sni_broker;
	int32_t sni_node_id;
	struct sni_pick sni_pick;   /* written by the ClientHello callback */
	size_t upstream_try;
	struct upstream_connect *uc;
	struct frame fr;        /* Kafka framing of both directions (frame.h) */
	ev_tstamp last_active;  /* last read from either side */
	ev_tstamp timer_at;     /* when `timer` fires; 0 = not armed */
	ev_tstamp cli_eof_at;   /* when the client half-closed */
	size_t drain_credit;    /* request bytes received before the drain began,
	                           still to be served */
	ev_tstamp drain_grace_until; /* fresh connection: wait this long for the
	                           first request, which is on its way */
	bool cli_eof;           /* client sent FIN: no more requests */
	bool up_eof;            /* upstream sent FIN: deliver what is whole, then close */
	bool quiet;             /* the pending close is a clean one (log at debug) */
	char why[160];          /* reason of the pending close */
	ev_tstamp close_at;     /* open+spread: start draining then */
	uint64_t ho_id;         /* handed: its record id in CONN_OUT / CONN_DONE */
};

/*
 * Drain at a request boundary (docs/design.md §4), made exact for requests
 * that were already sent when the drain began: complete requests already read
 * from the client are served (drain_credit), a frame whose header was
 * parsed is read to its end, and a request whose first bytes arrived (or a
 * connection accepted moments before the drain, whose first request is
 * almost certainly in flight) gets CONN_DRAIN_GRACE to arrive. Nothing
 * else is read from the client; what has not arrived by then is not owed.
 */
#define CONN_DRAIN_GRACE 0.5     /* s */
#define CONN_DRAIN_FRESH 2.0     /* s: connections younger than this get the grace */

/* ---- conn.c ---------------------------------------------------------------- */

/* Return conventions: the I/O steps (conn.c, conn_handover.c) return 0, or
 * -1 when the connection must close (reason in c->why; c not freed unless
 * said), and say through a bool *moved whether bytes moved; the framing
 * they call returns enum frame_status (frame.h: 0 OK, 1 NEED_MORE,
 * negative to close), the codec's convention. */

/* A connection on client socket fd, not connected upstream yet, in the
 * worker's list. NULL (fd not closed) when out of memory. */
struct conn *conn_new(struct worker *w, int fd, int broker_index);
/* Feed event e to c's lifecycle table (conn_fsm.h): the state changes
 * (logged at debug, old -> new (event)) and the actions are carried out.
 * false for a forbidden pair (a bug: logged, counted, nothing done). */
bool conn_event(struct conn *c, enum conn_event e);

/* Close c (the close event, unless it is closed already), unlink and free
 * it, its sockets closed; no log. */
void conn_free(struct conn *c);
/* Log the reason in c->why at lvl (rate-limited from LOG_WARN on), free c. */
void conn_close(struct conn *c, enum log_level lvl, const char *what);
/* Put the close reason in c->why; -1. conn_end: a clean close (logged at
 * debug only). */
int conn_fail(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int conn_end(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Give a direction's buffers back (the read buffer to the pool). */
void conn_dir_release(struct worker *w, struct frame_dir *d);
/* Draining, and requests received in time remain to be served. */
bool conn_drain_pending(const struct conn *c);

void conn_timer_arm(struct conn *c, ev_tstamp at);
void conn_timer_stop(struct conn *c);
/* Make sure the timer fires no later than at. */
void conn_timer_due(struct conn *c, ev_tstamp at);

/* Move bytes both ways until nothing progresses; -1 when c must close
 * (reason in c->why; c not freed). */
int conn_pump(struct conn *c, bool cli_readable, bool up_readable);
/* conn_pump, then close c or update its watchers. May free c. */
void conn_step(struct conn *c, bool cli_readable, bool up_readable);
void conn_update_watchers(struct conn *c);

/* ---- conn_setup.c ------------------------------------------------------------ */

/* Start (or wait for) the upstream connection; -1 if c was closed. */
int conn_connect_next(struct conn *c);
/* One step of the client's TLS handshake (upstream leg tls-handshake);
 * once done, the upstream connect starts. 0, or -1 to close (why set). */
int conn_tls_step(struct conn *c);
/* One handshake step on each side still in one (plain TCP never is). 0,
 * or -1 to close (why set). */
int conn_handshake(struct conn *c);

/* ---- conn_handover.c ------------------------------------------------------- */

/* At the end of an event of a connection leaving by handover: move it if it
 * is at a boundary with nothing owed. 0 waiting (continue), 1 handed over
 * or finished as a drain (the drain ran), -1 close (why set). */
int conn_handover_try(struct conn *c);
/* Stop at the next request boundary, serve what was received, close. May
 * free c. */
void conn_drain_one(struct conn *c);

#endif
