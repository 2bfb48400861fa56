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
 * Per connection, a FIFO of in-flight requests {correlation id, api key,
 * version} matches every response to its request; acks=0 Produce requests
 * owe none. Anything malformed closes this connection only and is counted.
 * Backpressure: a side is read only while its buffer has room and the FIFO
 * is below its bound.
 *
 * Drain: stop parsing new requests at the next request boundary, deliver
 * every owed response, then close; force-close at the deadline.
 */
#ifndef FERRY_WORKER_CONN_H
#define FERRY_WORKER_CONN_H

#include "worker/worker.h"

/* Take ownership of an accepted client fd (non-blocking). broker_index -1
 * for the bootstrap listener. */
void conn_accept(struct worker *w, int fd, int broker_index);

/* Drain: stop new requests on every connection; close those owing nothing. */
void conn_drain_all(struct worker *w);
/* Close every connection now (drain deadline); counted as forced. */
void conn_close_all(struct worker *w, bool forced);

/* The metadata fetch ended: resume connections waiting for broker addresses. */
void conn_metadata_ready(struct worker *w);

#endif
