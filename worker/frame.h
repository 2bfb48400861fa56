/*
 * frame — the Kafka framing of one proxied connection: where each request
 * and response starts and ends in the byte stream, which request every
 * response answers, what is forwarded as it arrives and what is collected
 * whole to be rewritten. Pure: it works on the two buffers the caller reads
 * into and writes from, with the caller's clock; no sockets, no event loop.
 * worker/conn.c owns the buffers and the I/O; tests/unit/test_frame.c feeds
 * it hostile and boundary frames.
 *
 * Buffer bookkeeping of one direction (struct frame_dir):
 *
 *   buf: [ consumed | fwd: parsed, to write | unparsed ... | free ]
 *          0      start             start+fwd            end      cap
 *
 * The caller appends what it reads at end (moving [start, end) to the front
 * when end reaches cap) and writes the fwd bytes from start, then out.
 * frame_left counts bytes of the current pass-through frame that have not
 * reached the buffer yet; they join fwd as they arrive, so a large frame is
 * streamed and never needs to fit in the buffer. A rewritten frame is moved
 * into `acc`, rewritten into `out`, and written from there; the pass-through
 * bytes before it are flushed first so order is kept. skip_left counts the
 * bytes of a request the proxy answers itself, dropped as they arrive.
 *
 * The caller may move the rest of a pass-through frame without its buffer
 * (worker/splice.h: socket -> pipe -> socket): frame_dir_bypass() takes
 * those bytes off frame_left, and `piped` counts the ones still in the
 * pipe, owed like fwd bytes (they are written before anything in buf).
 *
 * Requests (client -> upstream): a FIFO of in-flight requests {correlation
 * id, api key, version} matches every response to its request; acks=0
 * Produce requests owe none. An ApiVersions request above the version the
 * codec parses is answered here (UNSUPPORTED_VERSION) and never forwarded.
 * Refused, closing the connection: a size prefix < 8, negative or above
 * max_frame_bytes, a header the codec rejects or that does not fit the
 * buffer, an API key above KC_API_KEY_MAX_KNOWN or refused by the codec's
 * table, a TLS ClientHello as the first bytes, a client frame above
 * sasl_max_frame_bytes before SASL authentication, a bare GSSAPI token,
 * a SaslHandshake v0 whose mechanism is not relayed.
 *
 * Responses (upstream -> client): a response out of FIFO order, one nobody
 * asked for, one whose prefix is malformed or above max_frame_bytes, or a
 * rewritten one that does not parse closes the connection, and the fault
 * is the upstream's (FRAME_UPSTREAM). Metadata, FindCoordinator,
 * DescribeCluster, ApiVersions and KIP-951 NodeEndpoints responses are
 * rewritten through the broker map the caller gives (worker/kafka/rewrite.h).
 *
 * A Fetch v16+ response larger than the buffer is streamed, not collected
 * (worker/kafka/fetchwalk.h): its parsed parts join fwd as they are, its
 * record sets pass as frame_left spans (one `frames` each, so the caller
 * may splice them), and only its top-level tagged fields (at most
 * FRAME_TAIL_MAX bytes, else the response is malformed) are collected in
 * acc and rewritten to the same length: a NodeEndpoints that cannot be is
 * replaced by padding, counted leader_hints_dropped. A piece of it that
 * does not fit the buffer closes the connection (FRAME_UPSTREAM).
 *
 * SASL pass-through (worker/kafka/sasl.h holds the state and the rules):
 * SaslHandshake and SaslAuthenticate go through the FIFO like any request;
 * their responses' error codes are read on the way (never rewritten). A
 * SaslHandshake v0 stops the request parser until its response; then the
 * legacy raw tokens ([int32 length][token], no header, no FIFO entry) are
 * streamed by their length prefix, client and broker in turn.
 *
 * Who the client says it is (worker/kafka/clientinfo.h) is read on the way,
 * after the SASL handling of every request header parsed and of the first
 * raw token: its client_id, software and asserted identity land in f->ci,
 * and f->ci_changed tells the caller to publish them. A field that does
 * not fit the buffer is not learned; it never closes the connection.
 *
 * Return convention (the same as worker/kafka/codec.h and sasl.h): enum
 * frame_status, FRAME_OK = 0 (a step was made: call again), FRAME_NEED_MORE
 * = 1 (nothing more can be done with the bytes present: read more, or
 * write what is parsed, or wait for a response), negative = close the
 * connection, with the reason in f->why.
 */
#ifndef FERRY_WORKER_FRAME_H
#define FERRY_WORKER_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/metrics.h"
#include "worker/kafka/clientinfo.h"
#include "worker/kafka/codec.h"
#include "worker/kafka/fetchwalk.h"
#include "worker/kafka/rewrite.h"
#include "worker/kafka/sasl.h"

enum frame_status {
	FRAME_OK = KC_OK,
	FRAME_NEED_MORE = KC_NEED_MORE,
	FRAME_MALFORMED = KC_MALFORMED, /* the client broke the protocol or a limit */
	FRAME_UPSTREAM = -2,            /* the upstream broke the protocol: its
	                                   condition is reported as unreachable */
	FRAME_NO_MEMORY = -3,
};
const char *frame_status_str(enum frame_status s);

struct frame_inflight {
	int32_t corr;
	int16_t key;
	int16_t ver;
	uint8_t synthetic;     /* answered by the proxy itself */
	double sent;           /* parsed for forwarding (caller's clock, s): latency start */
};

struct frame_dir {
	uint8_t *buf;
	size_t start, end, fwd;
	uint64_t frame_left;   /* pass-through bytes not yet in the buffer */
	uint64_t skip_left;    /* bytes to drop (request answered locally) */
	uint32_t frames;       /* pass-through frames begun: tells the caller
	                          one frame_left from the next */
	size_t piped;          /* bytes of this direction in its splice pipe,
	                          to be written before buf (the caller's) */
	uint8_t *acc;          /* whole frame being collected for rewrite, or
	                          the tail of a streamed Fetch response */
	size_t acc_len, acc_need;
	int16_t acc_key, acc_ver;
	bool acc_tail;         /* acc holds a streamed Fetch response's tail */
	bool walking;          /* a large Fetch v16+ response is streamed: fw
	                          says what its next bytes are */
	struct kc_fw fw;
	uint8_t *out;          /* rewritten/synthetic frame being written */
	size_t out_len, out_off;
	bool out_owned;        /* out is malloc'd (else points to small[]) */
	uint8_t small[64];
};

/* The top-level tagged fields of a streamed Fetch response, at most. */
#define FRAME_TAIL_MAX (64 * 1024)

struct frame_limits {
	uint64_t max_frame_bytes;
	uint64_t sasl_max_frame_bytes;
	size_t max_inflight;   /* requests owed a response, at most */
	size_t buf_size;       /* cap of each direction's buf */
};

struct frame {
	struct frame_limits lim;
	struct metrics *m;     /* counters: malformed_requests, responses, ... */
	struct kc_broker_map map;  /* the addresses clients see (rewrites) */
	struct frame_dir req, resp;
	struct frame_inflight *fifo;
	size_t fifo_cap, fifo_head, fifo_len;
	struct sasl sasl;      /* SASL pass-through (carried in a handover record) */
	struct ci_info ci;     /* who the client says it is (carried too) */
	bool ci_changed;       /* ci may have changed: the caller publishes it and
	                          clears this */
	uint64_t requests;     /* request headers parsed (carried in the record) */
	double req_since;      /* first bytes of the request frame in progress:
	                          set by the caller's clock, cleared here when
	                          the frame is complete; 0 = none */
	bool seen_request;     /* a request header parsed (TLS sniffing is over) */
	bool seen_response;    /* a response from upstream matched its request */
	bool req_need_more;    /* bytes at a request boundary do not make a header yet */
	bool inflight_paused;  /* a request waits: max_inflight reached (counted once) */
	bool upstream_answered;/* a well-formed ApiVersions or Metadata answer was
	                          rewritten: the caller reports the upstream
	                          reachable and clears it */
	char why[160];         /* reason of a negative status */
};

/* A fresh connection's framing (buffers not allocated). map is copied. */
void frame_init(struct frame *f, const struct frame_limits *lim, struct metrics *m,
		const struct kc_broker_map *map);
/* Free what framing allocated (collected and rewritten frames, the FIFO;
 * requests still owed a response leave the in_flight gauge). The read
 * buffers are the caller's. */
void frame_free(struct frame *f);
/* Free a direction's collected and rewritten frames (not buf). */
void frame_dir_free(struct frame_dir *d);

/*
 * One step over the client's bytes: continue the frame in progress, or
 * parse the next request header. may_start: a new request may begin (not
 * at a drain's boundary). *started gets the length of a frame begun in
 * this step (0 when none). FRAME_OK, FRAME_NEED_MORE, FRAME_MALFORMED or
 * FRAME_NO_MEMORY.
 */
int frame_req_step(struct frame *f, double now, bool may_start, uint64_t *started);
/*
 * One step over the upstream's bytes: continue the response in progress,
 * or match the next response to the head of the FIFO; a rewritten or
 * synthetic response is left in resp.out. FRAME_OK, FRAME_NEED_MORE,
 * FRAME_UPSTREAM or FRAME_NO_MEMORY.
 */
int frame_resp_step(struct frame *f, double now);
/*
 * The 4-byte size prefix of a request at p (and, before any request was
 * parsed, whether it is a TLS record): FRAME_OK, FRAME_NEED_MORE (fewer
 * than 4 bytes) or FRAME_MALFORMED.
 */
int frame_check_prefix(struct frame *f, const uint8_t *p, size_t avail);

/* n bytes of d's current pass-through frame (n <= d->frame_left) were
 * moved by the caller without the buffer (spliced): frame_left goes down
 * by n, and a request frame that is complete stops the request clock. The
 * caller adds them to d->piped until they are written. */
void frame_dir_bypass(struct frame *f, struct frame_dir *d, uint64_t n);

/* The oldest request owed a response, or NULL. */
const struct frame_inflight *frame_fifo_head(const struct frame *f);
/* Nothing owed either way: no request in flight, every buffer and pipe
 * flushed, no rewrite in progress, no raw SASL token awaited from the
 * broker. */
bool frame_owes_nothing(const struct frame *f);
/* Request bytes read from the client and not parsed yet. */
size_t frame_req_unparsed(const struct frame *f);
/* A request frame has started and is not complete in the buffer. */
bool frame_req_partial(const struct frame *f);
/* Response bytes read from the upstream and not parsed yet. */
size_t frame_resp_unparsed(const struct frame *f);
/* d can take more bytes (no buffer yet, or room at its end or front). */
bool frame_dir_has_room(const struct frame *f, const struct frame_dir *d);
/* Room at the end of d->buf (allocated) for the next read, the bytes
 * [start, end) moved to the front when the end is reached; 0 when full.
 * The caller reads into buf + end and adds what it read to end. */
size_t frame_dir_room(const struct frame *f, struct frame_dir *d);
/* The pre-authentication limit in force: the smaller of
 * sasl_max_frame_bytes and max_frame_bytes. */
uint64_t frame_sasl_limit(const struct frame *f);

#endif
