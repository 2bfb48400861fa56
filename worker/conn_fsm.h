/*
 * conn_fsm — the lifecycle of one client connection as a table,
 * (state × event) → (next state, actions): pure data and lookups, no
 * sockets, no libev. worker/conn.c feeds the events and carries out the
 * actions (conn_event); the data path decides *when* an event happens
 * (a handshake done, nothing owed, a deadline), the table decides what it
 * means in each state. A forbidden pair is a programming error: logged,
 * counted (worker.conn_violations), never acted on. docs/state-machines.md
 * shows the table (generated from this code, checked by a unit test).
 *
 * A state has two parts:
 *   the upstream leg   new (nothing started), proxy-header (reading the
 *                      PROXY protocol header a load balancer sends before
 *                      the client's first byte), tls-handshake (the client's
 *                      handshake; the upstream waits for it), wait-metadata
 *                      (a broker port whose upstream address is not known
 *                      yet), connecting, open (both ways);
 *   how it leaves      serving (its generation is not ending), +spread
 *                      (served until a random time in drain_spread),
 *                      +draining (no new request after the boundary; closes
 *                      when nothing is owed), +expiring (the same, because
 *                      the connection outlived connection_max_age; a drain
 *                      or a reload finds it at its boundary already),
 *                      +handover (moves to the next
 *                      generation at the next request boundary), +held
 *                      (at the boundary, waiting for room in the handover
 *                      window);
 * plus handed (CONN_OUT sent: no I/O until CONN_DONE) and closed. The
 * upstream leg moves on whatever way the connection leaves (a drained
 * connection still connects, to serve what it received); only an open
 * connection spreads (one not open yet drains); a connection in a TLS
 * handshake never hands over (a TLS session cannot move), nor one reading
 * its PROXY header (the bytes read so far stay here). The header and the
 * TLS handshake share one deadline, armed when the header phase starts.
 *
 * Actions are bits, carried out in the order of their values.
 */
#ifndef FERRY_WORKER_CONN_FSM_H
#define FERRY_WORKER_CONN_FSM_H

#include <stdbool.h>

enum conn_state {
	CONN_NEW = 0,
	CONN_PROXY_HEADER,
	CONN_PROXY_HEADER_DRAINING,
	CONN_TLS_HANDSHAKE,
	CONN_TLS_HANDSHAKE_DRAINING,
	CONN_WAIT_METADATA,
	CONN_WAIT_METADATA_DRAINING,
	CONN_WAIT_METADATA_HANDOVER,
	CONN_WAIT_METADATA_HELD,
	CONN_CONNECTING,
	CONN_CONNECTING_DRAINING,
	CONN_CONNECTING_HANDOVER,
	CONN_CONNECTING_HELD,
	CONN_OPEN,
	CONN_OPEN_SPREAD,
	CONN_OPEN_EXPIRING,
	CONN_OPEN_DRAINING,
	CONN_OPEN_HANDOVER,
	CONN_OPEN_HELD,
	CONN_HANDED,
	CONN_CLOSED,         /* terminal: freed at once */
	CONN_STATE_COUNT,
};

enum conn_event {
	CONN_E_PROXY = 0,      /* accepted where a PROXY header is read first */
	CONN_E_TLS,            /* accepted on a TLS listener (or its PROXY header
	                          read): the handshake starts */
	CONN_E_TLS_DONE,       /* the client's TLS handshake completed */
	CONN_E_WAIT_METADATA,  /* the broker's upstream address is not known */
	CONN_E_CONNECT,        /* an upstream connect starts (the first, the next
	                          upstream server, or once metadata came) */
	CONN_E_CONNECTED,      /* the upstream connection is up */
	CONN_E_ADOPTED,        /* adopted with its upstream socket (CONN_IN) */
	CONN_E_SPREAD,         /* reload, cannot move: close within drain_spread */
	CONN_E_EXPIRE,         /* older than its connection_max_age: close at the
	                          next request boundary */
	CONN_E_DRAIN,          /* IPC_DRAIN, or a spread connection's turn */
	CONN_E_HANDOVER,       /* reload with handover: move at the next boundary */
	CONN_E_HOLD,           /* at the boundary, the handover window is full */
	CONN_E_RESUME,         /* the window has room again */
	CONN_E_HANDED,         /* CONN_OUT sent */
	CONN_E_NO_MOVE,        /* cannot move, or the channel refused it: drain */
	CONN_E_DONE,           /* CONN_DONE: the next generation took it or not */
	CONN_E_CLOSE,          /* closed: error, timeout, EOF, drained, deadline */
	CONN_E_COUNT,
};

enum conn_action {
	CONN_A_UNQUEUE = 1u << 0,        /* leaves the handover window's queue */
	CONN_A_QUEUE = 1u << 1,          /* joins it (worker.handover_waiting) */
	CONN_A_UNHANDED = 1u << 2,       /* no longer counted as handed out */
	CONN_A_HANDED = 1u << 3,         /* counted as handed out (worker.handover_out);
	                                    connect cancelled, no timer, no watcher,
	                                    buffers back to the pool */
	CONN_A_STOP_TIMER = 1u << 4,
	CONN_A_TOUCH = 1u << 5,          /* last_active = now */
	CONN_A_ARM_HANDSHAKE = 1u << 6,  /* the handshake (PROXY header and TLS
	                                    together) gets request_timeout */
	CONN_A_ARM_METADATA = 1u << 7,   /* the wait for addresses is bounded */
	CONN_A_FETCH_METADATA = 1u << 8, /* ask the upstream (or a sibling) */
	CONN_A_ARM_IDLE = 1u << 9,       /* idle_timeout from last_active */
	CONN_A_DRAIN_CREDIT = 1u << 10,  /* serve the requests received; a fresh
	                                    connection's first request gets a grace */
	CONN_A_NO_CREDIT = 1u << 11,     /* nothing more is parsed: what was read
	                                    travels with the record */
	CONN_A_UNPARSED_CREDIT = 1u << 12, /* serve what was read, no grace */
	CONN_A_ARM_SPREAD = 1u << 13,    /* its turn: a random time in drain_spread */
	CONN_A_ARM_AGE = 1u << 14,       /* connection_max_age (jittered) from its
	                                    start, when the cluster sets one */
};
#define CONN_A_COUNT 15

struct conn_fsm_step {
	bool allowed;
	enum conn_state next;
	unsigned actions;     /* enum conn_action bits */
};

const char *conn_fsm_state_str(enum conn_state s);
const char *conn_fsm_event_str(enum conn_event e);
const char *conn_fsm_action_str(unsigned one_bit);
struct conn_fsm_step conn_fsm_step(enum conn_state s, enum conn_event e);

/* The upstream leg of a state. */
enum conn_leg {
	CONN_LEG_NEW = 0,
	CONN_LEG_PROXY_HEADER,
	CONN_LEG_TLS_HANDSHAKE,
	CONN_LEG_WAIT_METADATA,
	CONN_LEG_CONNECTING,
	CONN_LEG_OPEN,
	CONN_LEG_NONE,        /* handed, closed: no I/O here */
};
enum conn_leg conn_fsm_leg(enum conn_state s);
/* Open both ways (whatever way it leaves). */
bool conn_fsm_open(enum conn_state s);
/* No new request after the boundary: draining, expiring, leaving by
 * handover, handed. */
bool conn_fsm_draining(enum conn_state s);
/* Leaving by handover and not handed yet: to the boundary, or held. */
bool conn_fsm_handover(enum conn_state s);
/* Held back by the handover window. */
bool conn_fsm_held(enum conn_state s);

#endif
