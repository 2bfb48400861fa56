/*
 * conn — one proxied client connection and its Kafka-aware data path.
 *
 * Each direction streams through one fixed-size buffer from the pool:
 * frames are parsed only as far as their headers, and bytes of frames that
 * are not rewritten are written from the read buffer straight to the other
 * side (one copy: kernel -> buffer -> kernel). Responses that carry broker
 * addresses (Metadata, FindCoordinator) and ApiVersions are accumulated
 * whole, rewritten by worker/kafka and written from the rewritten copy.
 *
 * The framing (worker/frame.h) decides where each request and response
 * starts and ends, matches responses to requests through a FIFO, and says
 * what is malformed: anything malformed closes this connection only, is
 * counted by reason and logged at a bounded rate. SASL is passed through
 * (frame.h, worker/kafka/sasl.h); while the broker's raw token of a legacy
 * SASL exchange is awaited the connection owes it (no idle close, no drain
 * close).
 *
 * TLS (cluster tls_cert): accept -> the client's TLS handshake, bounded by
 * request_timeout -> conn_tls_accepted() -> only then the upstream
 * connect, over TLS too when upstream_tls (upstream_transport_init: SNI and
 * the certificate name are the broker's own host, whatever address the
 * dial map dials). A TLS connection is not movable: on a reload it closes
 * at a request boundary within drain_spread.
 *
 * SNI gateway (gateway = sni): every connection arrives on the bootstrap
 * listener; the ClientHello callback (worker/sni_gate.c) refuses unknown
 * server names during the handshake and leaves a pick on the connection,
 * which conn_tls_accepted() turns into the route: the upstream bootstrap
 * servers, or the broker of that node id (its address learned from
 * metadata, a sibling, or a fetch), before the upstream connect. Metadata
 * advertises sni_broker_pattern with each node id on the bootstrap port.
 *
 * Backpressure: a side is read only while its buffer has room; the client
 * is not read past a request boundary while max_inflight_per_connection
 * requests are in flight (the frame in progress is always finished, so
 * the upstream can answer it).
 *
 * Timer: one ev_timer per connection, armed lazily. During a client TLS
 * handshake it is the handshake deadline; while connecting to a
 * broker port whose address is unknown it bounds the wait for metadata;
 * once open it checks, whichever comes first: request_timeout (a request
 * frame whose first bytes were read must be read completely within it;
 * time the upstream does not take our bytes is not held against the
 * client), idle_timeout (nothing owed either way, nothing read), and the
 * half-close deadline below. The data path only stores timestamps; the
 * timer is moved only when a deadline comes earlier than the armed one.
 *
 * EOF ordering: when the upstream closes, the responses already received
 * whole are still delivered to the client, then the client is closed.
 * When the client half-closes (shutdown(SHUT_WR)) after sending complete
 * requests, those requests are still forwarded and their responses
 * delivered (TCP half-close semantics; scripted probes rely on it), within
 * request_timeout of the EOF; then the connection closes. A client EOF in
 * the middle of a request closes at once (the upstream would wait for the
 * rest forever).
 *
 * Drain: stop parsing new requests at the next request boundary (a request
 * frame in progress is still read to its end), deliver every owed
 * response, then close; force-close at the deadline.
 *
 * Lifecycle: a table (worker/conn_fsm.h; docs/state-machines.md shows it),
 * fed by conn_event() only. On a reload a connection leaves its generation
 * one of three ways (the pure decisions: worker/handover.h):
 *   draining   (IPC_DRAIN) as above, then closed (drained);
 *   +handover  (IPC_HANDOVER, handover = 1) nothing more is parsed (no
 *              grace: what was read and not parsed travels as pending
 *              bytes); the frame in progress is read and forwarded, every
 *              response owed is delivered, both buffers flushed; then
 *              handover_decide() says: move now -> CONN_OUT {record,
 *              pending, [client, upstream]} -> handed (no watcher, no
 *              timer, fds kept; at most WORKER_HANDOVER_WINDOW handed at
 *              once, the rest are +held), and CONN_DONE closes our copies
 *              (adopted) or shuts the connection down cleanly (declined);
 *              the drain deadline shuts it down (forced); a lost channel
 *              closes our copies. Or it cannot move (client half-closed,
 *              upstream closed, TLS, a raw SASL exchange in progress, the
 *              channel refused it): no-move -> +draining, serving the bytes
 *              read. A connection not open yet moves at once, client only.
 *   +spread    (IPC_HANDOVER, handover = 0, or a TLS connection) served as
 *              usual until a random time in the drain_spread window, then
 *              +draining; one not open yet drains at once.
 * The new worker (CONN_IN): a good record -> adopted, open both ways (or
 * connecting, as a fresh connection), pending bytes first in the client
 * buffer, SASL state from the record (an authenticated client stays
 * authenticated), CONN_TAKEN adopted=1; a bad record or a full worker:
 * fds closed, CONN_TAKEN adopted=0.
 */
#ifndef FERRY_WORKER_CONN_H
#define FERRY_WORKER_CONN_H

#include "worker/context.h"

/* Take ownership of an accepted client fd (non-blocking). broker_index -1
 * for the bootstrap listener. */
void conn_accept(struct worker *w, int fd, int broker_index);

/* Drain: stop new requests on every connection; close those owing nothing. */
void conn_drain_all(struct worker *w);
/* Close every connection now (drain deadline); counted as forced. */
void conn_close_all(struct worker *w, bool forced);

/* Reload, upstream kept (IPC_HANDOVER, handover = 1): every connection
 * stops at its next request boundary, delivers what it owes and moves to
 * the new generation (CONN_OUT); one that cannot move finishes as a
 * drain, or (TLS) is spread like conn_spread_all. */
void conn_handover_all(struct worker *w);
/* Reload, upstream changed (handover = 0): each connection keeps being
 * served until a random time in w->spread_window_ms, then drains. */
void conn_spread_all(struct worker *w);
/* CONN_DONE: the new generation adopted the connection (close our copies
 * of its sockets) or did not (close it cleanly). */
void conn_handover_done(struct worker *w, const struct ipc_conn_ack *ack);
/* The control channel is gone: connections waiting for CONN_DONE are
 * closed (without shutdown: an adopter keeps them), those waiting to move
 * finish as drains. Deferred to the next loop turn. */
void conn_handover_abort(struct worker *w);
/* CONN_IN: adopt a connection of the old generation (takes the message's
 * fds) and answer CONN_TAKEN. A bad record or a full worker: the fds are
 * closed, the answer is adopted = 0. */
void conn_adopt(struct worker *w, struct ipc_msg *msg);

/* The metadata fetch ended: resume connections waiting for broker addresses. */
void conn_metadata_ready(struct worker *w);

#endif
