/*
 * handover — the pure decisions of a connection whose generation ends
 * (reload), kept apart from conn.c so they are unit-tested without sockets.
 *
 * A connection of a worker told to leave goes one of three ways:
 *   drain     stop reading requests at a boundary, deliver what is owed,
 *             close (IPC_DRAIN; also the fallback of the other two);
 *   handover  stop at a boundary, deliver what is owed, then move its
 *             sockets and a record (ipc.h: struct ipc_conn_record) to the
 *             new generation (IPC_HANDOVER with handover = 1);
 *   spread    keep serving until a time drawn in the drain_spread window,
 *             then drain (IPC_HANDOVER with handover = 0: the upstream
 *             changed; and connections that cannot move, e.g. TLS).
 *
 * handover_decide() says, for a connection at the end of an event, whether
 * it may move now, must wait (a response or bytes still owed, a request
 * frame in progress), or cannot move and must finish as a drain.
 * handover_adopt_plan() checks a received record against the adopting
 * worker's cluster and says in which state the connection resumes.
 * The client part of a record (version 2) carries who the client is and
 * since when: handover_client_encode() fills it, handover_adopt_plan()
 * checks it and gives it back as the adopted connection's identity.
 */
#ifndef FERRY_WORKER_HANDOVER_H
#define FERRY_WORKER_HANDOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>

#include "common/ipc.h"
#include "worker/kafka/clientinfo.h"
#include "worker/kafka/sasl.h"

/* How a connection leaves its generation. */
enum handover_exit {
	HANDOVER_EXIT_NONE = 0,   /* serving, its generation is not ending */
	HANDOVER_EXIT_DRAIN,
	HANDOVER_EXIT_HANDOVER,
	HANDOVER_EXIT_SPREAD,
};
const char *handover_exit_str(enum handover_exit e);

/* What the decision needs to know of a connection. */
struct handover_view {
	bool upstream_open;   /* the upstream socket is connected */
	bool movable;         /* both transports can move to another process
	                         (plaintext: no userspace TLS session) */
	bool owes;            /* a response or bytes owed either way: in-flight
	                         FIFO not empty, a buffer not flushed, a rewrite
	                         in progress */
	bool frame_partial;   /* a request frame whose header was parsed is not
	                         completely read and forwarded */
	bool resp_unparsed;   /* upstream bytes nobody asked for */
	bool cli_eof;         /* the client half-closed (its FIN was consumed) */
	bool up_eof;
	size_t pending;       /* request bytes read and not parsed: they travel
	                         with the record */
};

enum handover_step {
	HANDOVER_WAIT = 0,    /* not at a boundary yet, or something is owed */
	HANDOVER_NOW,         /* send it (CONN_OUT) */
	HANDOVER_DRAIN,       /* cannot move: finish here as a drain */
};
const char *handover_step_str(enum handover_step s);

enum handover_step handover_decide(const struct handover_view *v);

/* The window (ms) over which connections that must close are spread:
 * spread_ms, bounded so that the last one still has a quarter of the
 * drain deadline to deliver what it owes. */
uint64_t handover_spread_window(uint64_t spread_ms, uint64_t deadline_ms);
/* One connection's close time in that window (ms from the start), from a
 * uniform random 32-bit value: uniform over [0, window_ms). */
uint64_t handover_spread_offset(uint64_t window_ms, uint32_t rnd);

/* The record a connection leaves with (pending bytes follow it); sasl is
 * sasl_encode() of its SASL state. */
void handover_record_init(struct ipc_conn_record *r, uint64_t id, int broker_index,
			  size_t upstream_try, bool has_upstream, uint64_t requests,
			  size_t pending, uint32_t sasl);

/* Who the client is and since when: what a record's client part holds. */
struct handover_client {
	struct sockaddr_storage addr; /* family 0: not known */
	bool proxied;                 /* addr came from a PROXY header */
	int64_t since_ms;             /* wall clock of its first accept */
	uint64_t age_ms;              /* how long it has been open */
	uint32_t age_rnd;             /* its draw in connection_max_age_jitter */
	struct ci_info ci;
};

/* The client part of r (which becomes version 2) from hc. */
void handover_client_encode(struct ipc_conn_record *r, struct ipc_conn_client *out,
			    const struct handover_client *hc);

/* How an adopted connection resumes. */
struct handover_adopt {
	struct ipc_conn_record rec;
	bool has_client;      /* a version 2 record: client holds its identity */
	struct handover_client client;
	bool open;            /* upstream socket given: resume open both ways;
	                         else connect as a fresh connection would */
	bool seen_request;    /* a request was parsed: TLS sniffing is over */
	struct sasl sasl;     /* its SASL state (e.g. authenticated: no
	                         pre-authentication limit) */
	const uint8_t *pending;  /* rec.pending_len bytes, inside the payload */
};

/* Check a CONN_IN payload and its fd count (ipc_conn_record_check), its
 * client part (ipc_conn_client_check, a known mechanism), its
 * SASL state (sasl_decode: never a raw exchange), that it fits this
 * worker's cluster (broker index below n_brokers, upstream
 * index below n_upstream) and that a connection may be added (n_conns
 * below max_conns). 0 with *out filled, or -1 with a reason. Pure. */
int handover_adopt_plan(const void *payload, size_t len, size_t nfds, size_t n_brokers,
			size_t n_upstream, uint64_t n_conns, uint64_t max_conns,
			struct handover_adopt *out, char *err, size_t errlen);

#endif
