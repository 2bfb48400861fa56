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

#include <sys/socket.h>

#include "common/conntab.h"
#include "common/sni.h"
#include "common/transport.h"
#include "worker/conn.h"
#include "worker/conn_fsm.h"
#include "worker/frame.h"
#include "worker/handover.h"
#include "worker/splice.h"

/* A peer identity in logs: an address, or (TLS) a certificate subject. */
#define CONN_PEER_MAX 256

#define CONN_ROW_GONE (-2)

/* The zero-copy state of one direction (worker/splice.h): its pipe while
 * it splices a frame's rest or still holds its tail, and the frame the
 * pool refused a pipe (copied). Frames are told apart by frame_dir.frames
 * (0 = none). */
struct conn_splice {
	struct splice_pipe pipe;   /* cap 0: none */
	uint32_t frame;            /* the frame the pipe carries */
	uint32_t refused;          /* the frame that found no pipe */
};

/* How a connection's first bytes are read (proxy_protocol). */
enum conn_pp {
	CONN_PP_NONE = 0,      /* no header is read (proxy_protocol = off) */
	CONN_PP_REQUIRED,      /* a header must come (required, trusted peer) */
	CONN_PP_OPTIONAL,      /* a header may come (optional, trusted peer) */
	CONN_PP_UNTRUSTED,     /* optional, peer not trusted: a header is refused */
};

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
	struct conn_splice sp[2]; /* zero copy: [0] requests, [1] responses */
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

	/* Who it is and since when (conn_peer.c): the client's address as
	 * the socket says, or as its PROXY header says (the socket's is then
	 * the balancer's, `via`); what the client says of itself is in
	 * fr.ci (worker/kafka/clientinfo.h). */
	struct sockaddr_storage peer;
	bool proxied;
	char addr[CONNTAB_ADDR_MAX];
	char via[CONNTAB_ADDR_MAX];
	uint64_t id;            /* its serial in this worker */
	ev_tstamp born;         /* its first accept (kept across a handover) */
	int64_t born_wall_ms;   /* the same, wall clock */
	uint32_t age_rnd;       /* its place in connection_max_age_jitter */
	ev_tstamp expire_at;    /* open: its max-age deadline; 0 = none */
	int row;                /* its row in the connection table; -1: none
	                           (counted unlisted), CONN_ROW_GONE: released */
	int soft;               /* its client software bucket (conntab.h) */
	unsigned said;          /* what of fr.ci was logged (conn_peer.c) */
	/* the PROXY header (conn_setup.c): how it is read, and the bytes of
	 * it consumed so far (allocated only while it arrives in pieces) */
	enum conn_pp pp;
	uint8_t *pp_buf;
	size_t pp_have;
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
/* Give both directions' pipes back (empty ones to the worker's pool; one
 * still holding bytes is closed: its connection closes). */
void conn_pipes_release(struct conn *c);

/* conn_io.c: one direction moving its bytes. */
/* Whether d can take bytes from its source now: room in its pipe when its
 * frame is spliced, none while its buffer must be written before a splice,
 * else room in its buffer. */
bool conn_dir_room(const struct conn *c, const struct frame_dir *d);
/* Read what t has for d, the way splice_decide says: spliced into its pipe
 * or into its buffer. 0 (*moved: bytes were read; *filled: the read filled
 * the room; nothing on EAGAIN, no room, or EOF: cli_eof / up_eof set), or
 * -1 to close (why set). */
int conn_dir_in(struct conn *c, struct frame_dir *d, struct transport *t, bool from_client,
		bool *moved, bool *filled);
/* Write the parsed pass-through bytes of d to t, then a rewritten frame.
 * 0 (*moved: anything was written), or -1 to close (why set). */
int conn_dir_flush(struct conn *c, struct frame_dir *d, struct transport *t, bool to_upstream,
		   bool *moved);
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

/* A new connection's way to open, once its PROXY header (if any) is read:
 * the client's TLS handshake, or the upstream connect; with step, its first
 * step too (else the caller, inside conn_step, goes on to the pump). 0, or
 * -1 when c was closed (and freed). */
int conn_start(struct conn *c, bool step);
/* Accepted on a cluster with proxy_protocol: decide how its first bytes
 * are read (its peer against proxy_protocol_from) and start the header
 * phase (proxy-header, under the handshake deadline). 0 when the header
 * phase runs, 1 when there is none to read (go on: conn_start), -1 to
 * close (why set). */
int conn_proxy_begin(struct conn *c);
/* Read what of the PROXY header has arrived (MSG_PEEK: nothing after the
 * header is ever consumed). 1 still waiting, 0 done and the connection
 * went on (conn_start), -1 close (why set), -2 c was closed and freed. */
int conn_proxy_step(struct conn *c);

/* Start (or wait for) the upstream connection; -1 if c was closed. */
int conn_connect_next(struct conn *c);
/* One step of the client's TLS handshake (upstream leg tls-handshake);
 * once done, the upstream connect starts. 0, or -1 to close (why set). */
int conn_tls_step(struct conn *c);
/* One handshake step on each side still in one (plain TCP never is). 0,
 * or -1 to close (why set). */
int conn_handshake(struct conn *c);

/* ---- conn_peer.c ------------------------------------------------------------ */

/* A new connection's identity: its socket's peer, serial, start, row in
 * the connection table and software bucket (unknown). */
void conn_peer_init(struct conn *c);
/* The client's address is the one a PROXY header gave. */
void conn_peer_set(struct conn *c, const struct sockaddr *sa);
/* Adopted (a version 2 record): its real address, start, jitter draw and
 * client info as the old worker had them; its row rewritten. */
void conn_peer_adopted(struct conn *c, const struct handover_client *hc);
/* (Re)write its row: state, address, client info. */
void conn_peer_publish(struct conn *c);
/* What the client said of itself changed (frame.c set fr.ci_changed):
 * its software bucket and its row. */
void conn_peer_client_info(struct conn *c);
/* Its row and software count go (handed over, or freed); once. */
void conn_peer_release(struct conn *c);
/* "client=ADDR [via=BALANCER] [subject=...]" for log lines. */
void conn_peer_desc(const struct conn *c, char *buf, size_t len);
/* connection_max_age: its deadline from its start and its jitter draw,
 * armed on the timer (CONN_A_ARM_AGE); 0 when the cluster has none. */
void conn_age_arm(struct conn *c);
/* Its age is up (the timer saw expire_at pass while open): stop at the
 * next request boundary, serve what is owed, close. May free c. */
void conn_age_expire(struct conn *c);
/* A drain or an expiry reached its boundary with nothing owed: count it
 * (drained or expired) and say why. -1 (close). */
int conn_drained(struct conn *c);

/* ---- conn_handover.c ------------------------------------------------------- */

/* At the end of an event of a connection leaving by handover: move it if it
 * is at a boundary with nothing owed. 0 waiting (continue), 1 handed over
 * or finished as a drain (the drain ran), -1 close (why set). */
int conn_handover_try(struct conn *c);
/* Stop at the next request boundary, serve what was received, close. May
 * free c. */
void conn_drain_one(struct conn *c);

#endif
