/*
 * conn — client connections and the Kafka-aware forwarding path; see conn.h.
 *
 * Buffer bookkeeping of one direction (struct dir):
 *
 *   buf: [ consumed | fwd: parsed, to write | unparsed ... | free ]
 *          0      start             start+fwd            end      cap
 *
 * frame_left counts bytes of the current pass-through frame that have not
 * reached the buffer yet; they join fwd as they arrive, so a large frame is
 * streamed and never needs to fit in the buffer. A rewritten frame is moved
 * into `acc`, rewritten into `out`, and written from there; the pass-through
 * bytes before it are flushed first so order is kept.
 */
#include "worker/conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "worker/handover.h"
#include "worker/sni_gate.h"
#include "worker/kafka/apiversions.h"
#include "worker/kafka/codec.h"
#include "worker/kafka/rewrite.h"
#include "worker/kafka/sasl.h"
#include "worker/kafka/sniff.h"
#include "common/sni.h"
#include "common/tls.h"
#include "common/transport.h"
#include "worker/upstream.h"

/* Transport wants go to ev_io_set unchanged (transport.h). */
_Static_assert((int)TRANSPORT_WANT_READ == (int)EV_READ && (int)TRANSPORT_WANT_WRITE == (int)EV_WRITE,
    "transport wants are libev events");

/* A peer identity in logs: an address, or (TLS) a certificate subject. */
#define CONN_PEER_MAX 256

enum conn_state {
	CONN_CONNECTING = 0,   /* resolving / connecting upstream */
	CONN_WAIT_METADATA,    /* broker port, upstream address unknown yet */
	CONN_OPEN,
	CONN_TLS_HANDSHAKE,    /* client TLS handshake; the upstream connect waits
	                          for it (connection order: see conn_tls_accepted) */
	CONN_STATE_COUNT,
};

static const char *
conn_state_str(enum conn_state s)
{
	switch (s) {
	case CONN_CONNECTING: return "connecting";
	case CONN_WAIT_METADATA: return "wait-metadata";
	case CONN_OPEN: return "open";
	case CONN_TLS_HANDSHAKE: return "tls-handshake";
	default: return "unknown";
	}
}

struct inflight {
	int32_t corr;
	int16_t key;
	int16_t ver;
	uint8_t synthetic;     /* answered by the proxy itself */
	ev_tstamp sent;        /* parsed for forwarding (loop time): latency start */
};

struct dir {
	uint8_t *buf;
	size_t start, end, fwd;
	uint64_t frame_left;   /* pass-through bytes not yet in the buffer */
	uint64_t skip_left;    /* bytes to drop (request answered locally) */
	uint8_t *acc;          /* whole frame being collected for rewrite */
	size_t acc_len, acc_need;
	int16_t acc_key, acc_ver;
	uint8_t *out;          /* rewritten/synthetic frame being written */
	size_t out_len, out_off;
	bool out_owned;        /* out is malloc'd (else points to small[]) */
	uint8_t small[64];
};

struct conn {
	struct worker *w;
	struct conn *prev, *next;
	struct transport cli, up;
	ev_io cli_io, up_io;
	ev_timer timer;
	enum conn_state state;
	int broker_index;
	/* [sni] gateway = sni: the ClientHello named broker sni_node_id; its
	 * slot (broker_index) is found once the upstream address is known */
	bool sni_broker;
	int32_t sni_node_id;
	struct sni_pick sni_pick;   /* written by the ClientHello callback */
	size_t upstream_try;
	struct upstream_connect *uc;
	struct dir req, resp;
	struct inflight *fifo;
	size_t fifo_cap, fifo_head, fifo_len;
	ev_tstamp last_active;  /* last read from either side */
	ev_tstamp timer_at;     /* when `timer` fires; 0 = not armed */
	ev_tstamp req_since;    /* first bytes of the request frame in progress; 0 = none */
	ev_tstamp cli_eof_at;   /* when the client half-closed */
	bool draining;
	size_t drain_credit;    /* request bytes received before the drain began,
	                           still to be served */
	ev_tstamp drain_grace_until; /* fresh connection: wait this long for the
	                           first request, which is on its way */
	bool waiting_metadata;
	bool seen_request;      /* a request header parsed (TLS sniffing is over) */
	bool seen_response;     /* a response from upstream matched its request */
	bool req_need_more;     /* bytes at a request boundary do not make a header yet */
	bool cli_eof;           /* client sent FIN: no more requests */
	bool up_eof;            /* upstream sent FIN: deliver what is whole, then close */
	bool inflight_paused;   /* a request waits: max_inflight reached (counted once) */
	bool quiet;             /* the pending close is a clean one (log at debug) */
	char why[160];          /* reason of the pending close */
	/* leaving the generation (see "Reload" in conn.h) */
	enum handover_exit exit;
	ev_tstamp close_at;     /* HANDOVER_EXIT_SPREAD: start draining then */
	bool handed;            /* CONN_OUT sent: no I/O; the fds stay open until
	                           CONN_DONE says who owns the connection */
	bool ho_waiting;        /* ready to move, held back by the window */
	uint64_t ho_id;         /* its record id in CONN_OUT / CONN_DONE */
	uint64_t requests;      /* request headers parsed (carried in the record) */
	struct sasl sasl;       /* SASL pass-through (worker/kafka/sasl.h; carried
	                           in the record) */
};

/* All pending bytes of a boundary fit a record. */
_Static_assert(WORKER_BUF_SIZE <= IPC_CONN_PENDING_MAX, "pending bytes must fit the record");

/* ---- FIFO of in-flight requests ---------------------------------------- */

static int
fifo_push(struct conn *c, int32_t corr, int16_t key, int16_t ver, bool synthetic)
{
	if (c->fifo_len == c->fifo_cap) {
		/* req_parse never pushes beyond max_inflight: grow up to it
		 * (also when it is not a power of two). */
		size_t max = c->w->cl->max_inflight;
		size_t ncap = c->fifo_cap ? c->fifo_cap * 2 : 16;
		if (ncap > max)
			ncap = max;
		if (ncap <= c->fifo_len)
			return -1;
		struct inflight *n = malloc(ncap * sizeof *n);
		if (!n)
			return -1;
		for (size_t i = 0; i < c->fifo_len; i++)
			n[i] = c->fifo[(c->fifo_head + i) % c->fifo_cap];
		free(c->fifo);
		c->fifo = n;
		c->fifo_cap = ncap;
		c->fifo_head = 0;
	}
	struct inflight *e = &c->fifo[(c->fifo_head + c->fifo_len) % c->fifo_cap];
	e->corr = corr;
	e->key = key;
	e->ver = ver;
	e->synthetic = synthetic;
	e->sent = ev_now(c->w->loop);
	c->fifo_len++;
	if (!synthetic)
		METRIC_ADD(c->w->m, in_flight, 1);
	return 0;
}

static struct inflight *
fifo_head(struct conn *c)
{
	return c->fifo_len ? &c->fifo[c->fifo_head] : NULL;
}

static void
fifo_pop(struct conn *c)
{
	if (!c->fifo[c->fifo_head].synthetic)
		METRIC_SUB(c->w->m, in_flight, 1);
	c->fifo_head = (c->fifo_head + 1) % c->fifo_cap;
	c->fifo_len--;
}

/* ---- helpers ------------------------------------------------------------ */

static int
conn_fail(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
conn_fail(struct conn *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof c->why, fmt, ap);
	va_end(ap);
	c->quiet = false;
	return -1;
}

/* Like conn_fail, for a clean close (logged at debug only). */
static int
conn_end(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
conn_end(struct conn *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof c->why, fmt, ap);
	va_end(ap);
	c->quiet = true;
	return -1;
}

static void
dir_release(struct worker *w, struct dir *d)
{
	if (d->buf)
		worker_buf_put(w, d->buf);
	d->buf = NULL;
	free(d->acc);
	d->acc = NULL;
	if (d->out_owned)
		free(d->out);
	d->out = NULL;
	d->out_owned = false;
}

static bool
dir_has_room(const struct dir *d)
{
	return !d->buf || d->end < WORKER_BUF_SIZE || d->start > 0;
}

static bool
conn_owes_nothing(const struct conn *c)
{
	return c->fifo_len == 0 && c->req.frame_left == 0 && c->req.fwd == 0 &&
	       c->req.skip_left == 0 && c->resp.fwd == 0 && c->resp.frame_left == 0 &&
	       !c->resp.acc && !c->resp.out &&
	       c->sasl.phase != SASL_RAW_SERVER;  /* the broker's raw token is owed */
}

/* Request bytes read from the client and not parsed yet. */
static size_t
req_unparsed(const struct conn *c)
{
	const struct dir *d = &c->req;
	return d->buf ? d->end - (d->start + d->fwd) : 0;
}

/*
 * Drain at a request boundary (DESIGN §4), made exact for requests that
 * were already sent when the drain began: complete requests already read
 * from the client are served (drain_credit), a frame whose header was
 * parsed is read to its end, and a request whose first bytes arrived (or a
 * connection accepted moments before the drain, whose first request is
 * almost certainly in flight) gets CONN_DRAIN_GRACE to arrive. Nothing
 * else is read from the client; what has not arrived by then is not owed.
 */
#define CONN_DRAIN_GRACE 0.5     /* s */
#define CONN_DRAIN_FRESH 2.0     /* s: connections younger than this get the grace */

static bool
conn_drain_grace(const struct conn *c)
{
	return c->drain_grace_until > 0 && ev_now(c->w->loop) < c->drain_grace_until;
}

/* Draining, and requests received in time remain to be served. */
static bool
conn_drain_pending(const struct conn *c)
{
	return conn_drain_grace(c) ||
	       (c->drain_credit > 0 && req_unparsed(c) > 0 && !c->req_need_more);
}

/* A request of n bytes was taken while draining: it used up its share of
 * the credit (a frame longer than the credit is still read to its end). */
static void
conn_drain_consume(struct conn *c, uint64_t n)
{
	if (!c->draining)
		return;
	c->drain_credit = c->drain_credit > n ? c->drain_credit - (size_t)n : 0;
	c->drain_grace_until = 0;
}

/* A request frame has started and is not complete in the buffer. */
static bool
req_partial(const struct conn *c)
{
	return c->req.frame_left || c->req.skip_left || c->req_need_more;
}

/* Whether the client may be read now. A request frame that has started is
 * always read to its end (draining or not, FIFO full or not): the upstream
 * cannot answer half a request. */
static bool
conn_reads_client(const struct conn *c)
{
	if (c->cli_eof || c->up_eof || !dir_has_room(&c->req))
		return false;
	if (c->req.frame_left || c->req.skip_left)
		return true;
	if (c->draining)
		return conn_drain_grace(c);
	return c->fifo_len < c->w->cl->max_inflight;
}

/* ---- the connection timer (see conn.h) ----------------------------------- */

static void
conn_timer_arm(struct conn *c, ev_tstamp at)
{
	struct ev_loop *loop = c->w->loop;
	ev_tstamp after = at - ev_now(loop);
	ev_timer_stop(loop, &c->timer);
	ev_timer_set(&c->timer, after > 0 ? after : 0., 0.);
	ev_timer_start(loop, &c->timer);
	c->timer_at = at;
}

static void
conn_timer_stop(struct conn *c)
{
	ev_timer_stop(c->w->loop, &c->timer);
	c->timer_at = 0;
}

/* Make sure the timer fires no later than at (lazy: moved only when at is
 * earlier than what is armed, i.e. rarely). */
static void
conn_timer_due(struct conn *c, ev_tstamp at)
{
	if (!c->timer_at || c->timer_at > at)
		conn_timer_arm(c, at);
}

static ev_tstamp
conn_request_timeout(const struct conn *c)
{
	return (ev_tstamp)c->w->cl->request_timeout_ms / 1000.0;
}

static void
conn_free(struct conn *c)
{
	struct worker *w = c->w;
	ev_io_stop(w->loop, &c->cli_io);
	ev_io_stop(w->loop, &c->up_io);
	ev_timer_stop(w->loop, &c->timer);
	if (c->uc)
		upstream_connect_cancel(c->uc);
	if (c->handed)
		w->handover_out--;
	if (c->ho_waiting)
		w->handover_waiting--;
	transport_close(&c->cli);
	transport_close(&c->up);
	dir_release(w, &c->req);
	dir_release(w, &c->resp);
	/* Requests still owed a response are no longer in flight. */
	while (c->fifo_len)
		fifo_pop(c);
	free(c->fifo);
	if (c->prev)
		c->prev->next = c->next;
	else
		w->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	w->n_conns--;
	METRIC_SUB(w->m, connections_active, 1);
	free(c);
	worker_conns_changed(w);
	worker_conn_closed(w);
}

static void
conn_close(struct conn *c, enum log_level lvl, const char *what)
{
	struct worker *w = c->w;
	uint64_t sup = 0;
	if (lvl >= LOG_WARN) {
		if (log_ratelimit_ok(&w->rl_proto, 10, 20, &sup)) {
			char peer[CONN_PEER_MAX];
			transport_peer(&c->cli, peer, sizeof peer);
			log_msg(lvl, what,
			    "reason=\"%s\" client=%s listener=%s state=%s in_flight=%zu suppressed=%llu",
			    c->why, peer, c->broker_index < 0 && !c->sni_broker ? "bootstrap" : "broker",
			    conn_state_str(c->state), c->fifo_len, (unsigned long long)sup);
		}
	} else {
		log_debug(what, "reason=\"%s\"", c->why);
	}
	conn_free(c);
}

/* ---- upstream health ---------------------------------------------------- */

/*
 * The upstream broke the Kafka protocol on this connection: close it (the
 * reason is also c->why) and set the cluster's upstream condition to
 * unreachable with this protocol error, so the worker re-probes it until a
 * well-formed answer comes (worker_upstream_report). Before any response
 * matched a request on this connection the peer is "not a Kafka broker" as
 * far as ferry can tell. Returns -1 (close).
 */
static int
conn_upstream_broken(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
conn_upstream_broken(struct conn *c, const char *fmt, ...)
{
	char addr[CONN_PEER_MAX], msg[sizeof c->why];
	transport_peer(&c->up, addr, sizeof addr);
	int off = snprintf(msg, sizeof msg, c->seen_response ? "protocol error from %s: "
	    : "not a Kafka broker at %s: ", addr);
	if (off > 0 && (size_t)off < sizeof msg) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg + off, sizeof msg - (size_t)off, fmt, ap);
		va_end(ap);
	}
	worker_upstream_report(c->w, false, msg);
	return conn_fail(c, "%s", msg);
}

/* ---- writing ------------------------------------------------------------ */

/* A write failed with errno. A client that has closed (not just
 * half-closed) while responses were owed is a normal client, not an error. */
static int
write_failed(struct conn *c, bool to_upstream)
{
	if (!to_upstream && c->cli_eof && (errno == EPIPE || errno == ECONNRESET))
		return conn_end(c, "client closed the connection with %zu response(s) owed",
		    c->fifo_len);
	return conn_fail(c, "write to %s: %s", to_upstream ? "upstream" : "client",
	    upstream_transport_error(to_upstream ? &c->up : &c->cli, errno));
}

/* Write the parsed pass-through bytes of d to t. 1 progress, 0 blocked or
 * nothing to do, -1 error. */
static int
dir_flush(struct conn *c, struct dir *d, struct transport *t, bool to_upstream)
{
	int progress = 0;
	if (!transport_ready(t))
		return 0;  /* handshake first: transport_interest says what it waits for */
	while (d->fwd) {
		struct iovec iov = { d->buf + d->start, d->fwd };
		ssize_t n = transport_writev(t, &iov, 1);
		if (n == -1) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return progress;
			return write_failed(c, to_upstream);
		}
		d->start += (size_t)n;
		d->fwd -= (size_t)n;
		progress = 1;
		if (to_upstream)
			METRIC_ADD(c->w->m, bytes_client_to_upstream, n);
		else
			METRIC_ADD(c->w->m, bytes_upstream_to_client, n);
	}
	if (d->buf && d->start == d->end) {
		/* Idle connections hold no buffer (it goes back to the pool). */
		worker_buf_put(c->w, d->buf);
		d->buf = NULL;
		d->start = d->end = 0;
	}
	if (d->out && d->fwd == 0) {
		while (d->out_off < d->out_len) {
			struct iovec iov = { d->out + d->out_off, d->out_len - d->out_off };
			ssize_t n = transport_writev(t, &iov, 1);
			if (n == -1) {
				if (errno == EAGAIN || errno == EWOULDBLOCK)
					return progress;
				return write_failed(c, false);
			}
			d->out_off += (size_t)n;
			METRIC_ADD(c->w->m, bytes_upstream_to_client, n);
			progress = 1;
		}
		if (d->out_owned)
			free(d->out);
		d->out = NULL;
		d->out_owned = false;
		progress = 1;
	}
	return progress;
}

/* ---- reading ------------------------------------------------------------ */

/* 1 read bytes, 0 nothing (EAGAIN, no room, or EOF: cli_eof / up_eof set),
 * -1 error (why set). */
static int
dir_read(struct conn *c, struct dir *d, struct transport *t, bool from_client, bool *filled)
{
	*filled = false;
	if (t->state < TRANSPORT_OPEN)
		return 0;  /* handshake first (or closed) */
	if (!d->buf) {
		d->buf = worker_buf_get(c->w);
		if (!d->buf)
			return conn_fail(c, "out of memory");
		d->start = d->end = 0;
	}
	if (d->end == WORKER_BUF_SIZE) {
		if (d->start == 0)
			return 0;
		memmove(d->buf, d->buf + d->start, d->end - d->start);
		d->end -= d->start;
		d->start = 0;
	}
	size_t room = WORKER_BUF_SIZE - d->end;
	ssize_t n = transport_read(t, d->buf + d->end, room);
	if (n == -1) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		if (from_client && transport_tls_renegotiation(t)) {
			/* a handshake on an established connection, refused */
			METRIC_ADD(c->w->m, tls_handshake_failures, 1);
			return conn_fail(c, "read from client: %s", transport_tls_error(t));
		}
		return conn_fail(c, "read from %s: %s", from_client ? "client" : "upstream",
		    upstream_transport_error(t, errno));
	}
	if (n == 0) {
		/* Not closed yet: what is owed and whole is still delivered
		 * (conn_pump decides when to close). */
		if (from_client) {
			c->cli_eof = true;
			c->cli_eof_at = ev_now(c->w->loop);
		} else {
			c->up_eof = true;
		}
		return 0;
	}
	d->end += (size_t)n;
	*filled = (size_t)n == room;
	return 1;
}

/* ---- requests: client -> upstream -------------------------------------- */

/* Checks the 4-byte size prefix of a request (and, for the first bytes of a
 * connection, whether it is TLS). 1 fine, 0 need more, -1 close (why set). */
static int
req_check_prefix(struct conn *c, const uint8_t *p, size_t avail)
{
	struct worker *w = c->w;
	if (avail < 4)
		return 0;
	/* A TLS record: content type handshake (22), version 3.x. As a size
	 * prefix that is 0x1603xxxx, ~370 MB: no Kafka client opens with it. */
	if (!c->seen_request && p[0] == 0x16 && p[1] == 0x03 && p[2] <= 0x04) {
		METRIC_ADD(w->m, tls_on_plaintext, 1);
		return conn_fail(c, "TLS ClientHello on a plaintext listener "
		    "(client configured for SSL, ferry listener is plain TCP)");
	}
	int32_t size = kc_get_i32(p);
	if (size < 0) {
		METRIC_ADD(w->m, malformed_requests, 1);
		return conn_fail(c, "malformed request: negative size %d", size);
	}
	if (size < 8) {
		METRIC_ADD(w->m, malformed_requests, 1);
		return conn_fail(c, "malformed request: size %d below 8", size);
	}
	if ((uint64_t)size > w->cl->max_frame_bytes) {
		METRIC_ADD(w->m, frame_too_large, 1);
		return conn_fail(c, "request of %d bytes exceeds max_frame_bytes (%llu)", size,
		    (unsigned long long)w->cl->max_frame_bytes);
	}
	return 1;
}

/* The pre-authentication limit in force: the smaller of the two. */
static uint64_t
conn_sasl_limit(const struct conn *c)
{
	const struct cfg_cluster *cl = c->w->cl;
	return cl->sasl_max_frame_bytes < cl->max_frame_bytes ? cl->sasl_max_frame_bytes
	    : cl->max_frame_bytes;
}

/* A client token of a legacy raw SASL exchange (no Kafka header, no
 * correlation id): streamed by its length prefix. Same returns as
 * req_parse. */
static int
req_raw_token(struct conn *c, const uint8_t *p, size_t avail)
{
	struct worker *w = c->w;
	uint64_t frame = 0;
	char err[160];
	int r = sasl_on_raw_token(&c->sasl, true, p, avail, conn_sasl_limit(c), &frame, err,
	    sizeof err);
	if (r == SASL_NEED_MORE) {
		c->req_need_more = true;
		return 0;
	}
	if (r == SASL_TOO_LARGE) {
		METRIC_ADD(w->m, sasl_frame_too_large, 1);
		return conn_fail(c, "%s: over sasl_max_frame_bytes before authentication "
		    "(%s exchange, legacy raw framing)", err, c->sasl.mech_name);
	}
	if (r != SASL_OK) {
		METRIC_ADD(w->m, malformed_requests, 1);
		return conn_fail(c, "malformed SASL exchange: %s", err);
	}
	c->req.frame_left = frame;
	conn_drain_consume(c, frame);
	return 1;
}

static int
req_parse(struct conn *c)
{
	struct worker *w = c->w;
	struct dir *d = &c->req;
	if (!d->buf) {
		c->req_need_more = false;
		return 0;
	}
	size_t at = d->start + d->fwd;
	size_t avail = d->end - at;
	if (d->frame_left) {
		size_t take = avail < d->frame_left ? avail : (size_t)d->frame_left;
		d->fwd += take;
		d->frame_left -= take;
		if (d->frame_left == 0)
			c->req_since = 0;   /* this frame is complete */
		return take > 0;
	}
	if (d->skip_left) {
		if (d->fwd)
			return 0;
		size_t take = avail < d->skip_left ? avail : (size_t)d->skip_left;
		d->start += take;
		d->skip_left -= take;
		if (d->skip_left == 0)
			c->req_since = 0;
		return take > 0;
	}
	c->req_need_more = false;
	if (avail == 0)
		return 0;
	if (c->draining && c->drain_credit == 0 && !conn_drain_grace(c))
		return 0;
	if (!sasl_client_parse_ok(&c->sasl))
		return 0;  /* the broker answers first (v0 handshake, raw token) */
	if (c->sasl.phase == SASL_RAW_CLIENT)
		return req_raw_token(c, d->buf + at, avail);
	if (c->fifo_len >= w->cl->max_inflight) {
		/* Backpressure, not an error: the next request waits (and the
		 * client is not read past it) until responses drain. */
		if (!c->inflight_paused) {
			c->inflight_paused = true;
			METRIC_ADD(w->m, inflight_paused, 1);
		}
		return 0;
	}
	c->inflight_paused = false;

	const uint8_t *p = d->buf + at;
	int r = req_check_prefix(c, p, avail);
	if (r < 0)
		return -1;
	if (r == 0 || avail < 6)
		goto need_more;
	/* Keys newer than the codec's table: their header layout is a guess
	 * and nothing in ferry has vetted what their responses carry. */
	int16_t key = kc_get_i16(p + 4);
	if (!c->seen_request && sasl_legacy_gssapi(p, avail)) {
		METRIC_ADD(w->m, sasl_refused, 1);
		return conn_fail(c, "a bare GSSAPI token with no SaslHandshake (a Kafka 0.9 "
		    "client) is not relayed: use a client with SaslHandshake v1");
	}
	if (key > KC_API_KEY_MAX_KNOWN) {
		METRIC_ADD(w->m, malformed_requests, 1);
		return conn_fail(c, "refused request with unknown API key %d", key);
	}
	struct kc_req_header h;
	char err[128];
	r = kc_parse_request_header(p, avail, w->cl->max_frame_bytes, &h, err, sizeof err);
	if (r == KC_NEED_MORE)
		goto need_more;
	if (r != KC_OK) {
		METRIC_ADD(w->m, malformed_requests, 1);
		return conn_fail(c, "malformed request: %s", err);
	}
	/* SASL pass-through: the pre-authentication limit, the mechanism of
	 * a handshake (a v0 one stops parsing until its answer). */
	if (!sasl_frame_allowed(&c->sasl, h.api_key, (uint64_t)h.size, conn_sasl_limit(c))) {
		METRIC_ADD(w->m, sasl_frame_too_large, 1);
		return conn_fail(c, "%s request of %d bytes before SASL authentication exceeds "
		    "sasl_max_frame_bytes (%llu)", kc_api_name(h.api_key), h.size,
		    (unsigned long long)conn_sasl_limit(c));
	}
	r = sasl_on_request(&c->sasl, p, avail, &h, err, sizeof err);
	if (r == SASL_NEED_MORE)
		goto need_more;
	if (r == SASL_REFUSED) {
		METRIC_ADD(w->m, sasl_refused, 1);
		return conn_fail(c, "%s", err);
	}
	if (r != SASL_OK) {
		METRIC_ADD(w->m, malformed_requests, 1);
		return conn_fail(c, "%s", err);
	}
	c->seen_request = true;
	c->requests++;
	if (h.api_key == 18 && !kc_request_allowed(18, h.api_version)) {
		/* Client ahead of the proxy: answer UNSUPPORTED_VERSION ourselves,
		 * in order, so it retries at a version we parse. */
		if (fifo_push(c, h.correlation_id, h.api_key, h.api_version, true) == -1)
			return conn_fail(c, "out of memory for the in-flight queue");
		d->skip_left = 4 + (uint64_t)h.size;
		conn_drain_consume(c, d->skip_left);
		return 1;
	}
	if (!kc_request_allowed(h.api_key, h.api_version)) {
		METRIC_ADD(w->m, malformed_requests, 1);
		return conn_fail(c, "refused request %s (key %d) v%d", kc_api_name(h.api_key),
		    h.api_key, h.api_version);
	}
	bool expects_response = true;
	if (h.api_key == 0) {
		int16_t acks;
		r = kc_produce_acks(p, avail, &h, &acks);
		if (r == KC_NEED_MORE)
			goto need_more;
		if (r != KC_OK) {
			METRIC_ADD(w->m, malformed_requests, 1);
			return conn_fail(c, "malformed Produce request");
		}
		expects_response = acks != 0;
	}
	if (expects_response &&
	    fifo_push(c, h.correlation_id, h.api_key, h.api_version, false) == -1)
		return conn_fail(c, "out of memory for the in-flight queue");
	METRIC_ADD(w->m, requests, 1);
	metrics_request(w->m, h.api_key);
	d->frame_left = 4 + (uint64_t)h.size;
	conn_drain_consume(c, d->frame_left);
	return 1;

need_more:
	/* The header must fit in one buffer; compaction happens in dir_read. */
	if (at == 0 && d->end == WORKER_BUF_SIZE) {
		METRIC_ADD(w->m, malformed_requests, 1);
		return conn_fail(c, "request header larger than %d bytes", WORKER_BUF_SIZE);
	}
	c->req_need_more = true;
	return 0;
}

/* ---- responses: upstream -> client ------------------------------------- */

static int
conn_map_broker(void *ctx, int32_t node_id, const char *up_host, size_t up_host_len,
		int32_t up_port, const char **host, size_t *host_len, int32_t *port)
{
	struct conn *c = ctx;
	struct worker *w = c->w;
	upstream_learn_node(w, node_id, up_host, up_host_len, up_port);
	if (w->cl->gateway == CFG_GATEWAY_SNI) {
		/* [sni] every broker on the one TLS port, by its server name */
		int n = worker_node_slot(w, node_id, false) < 0 ? -1 :
		    sni_format(w->cl->sni_broker_pattern, node_id, w->sni_host, sizeof w->sni_host);
		if (n < 0) {
			METRIC_ADD(w->m, unknown_node, 1);
			worker_unknown_node(w, node_id, up_host, up_host_len, up_port);
			return -1;
		}
		*host = w->sni_host;
		*host_len = (size_t)n;
		*port = w->cl->bootstrap.port;
		return 0;
	}
	int idx = cfg_node_index(w->cl, node_id);
	if (idx < 0) {
		/* Dropped from what the client sees (never an upstream address);
		 * counted, and reported on the cluster's status. */
		METRIC_ADD(w->m, unknown_node, 1);
		worker_unknown_node(w, node_id, up_host, up_host_len, up_port);
		return -1;
	}
	*host = w->cl->advertised_host;
	*host_len = strlen(w->cl->advertised_host);
	*port = (int32_t)w->cl->broker_port_first + idx;
	return 0;
}

static int
resp_finish_rewrite(struct conn *c)
{
	struct worker *w = c->w;
	struct dir *d = &c->resp;
	struct kc_broker_map map = { .map = conn_map_broker, .ctx = c };
	uint8_t *out = NULL;
	size_t out_len = 0;
	char err[128];
	int r = kc_rewrite_response(d->acc_key, d->acc_ver, d->acc, d->acc_len, &map, &out,
	    &out_len, err, sizeof err);
	free(d->acc);
	d->acc = NULL;
	if (r != KC_OK) {
		METRIC_ADD(w->m, malformed_responses, 1);
		return conn_upstream_broken(c, "malformed %s v%d response: %s",
		    kc_api_name(d->acc_key), d->acc_ver, err);
	}
	/* A well-formed Kafka answer: what "reachable" means (conn_connected
	 * does not claim it on a bare TCP connect). */
	if (d->acc_key == KC_API_API_VERSIONS || d->acc_key == KC_API_METADATA)
		worker_upstream_report(w, true, NULL);
	d->out = out;
	d->out_len = out_len;
	d->out_off = 0;
	d->out_owned = true;
	METRIC_ADD(w->m, responses_rewritten, 1);
	if (map.trailing) {
		/* librdkafka's mock writes Metadata's final tag byte twice */
		METRIC_ADD(w->m, responses_trailing_bytes, 1);
		log_debug("dropped bytes after a complete response", "api=%s version=%d bytes=%zu",
		    kc_api_name(d->acc_key), d->acc_ver, map.trailing);
	}
	return 1;
}

static int
resp_parse(struct conn *c)
{
	struct worker *w = c->w;
	struct dir *d = &c->resp;
	if (d->out)
		return 0;
	size_t avail = d->buf ? d->end - (d->start + d->fwd) : 0;
	if (d->frame_left) {
		size_t take = avail < d->frame_left ? avail : (size_t)d->frame_left;
		d->fwd += take;
		d->frame_left -= take;
		return take > 0;
	}
	if (d->acc) {
		if (avail == 0)
			return 0;   /* (d->buf may be NULL) */
		size_t take = d->acc_need - d->acc_len;
		if (take > avail)
			take = avail;
		memcpy(d->acc + d->acc_len, d->buf + d->start, take);
		d->acc_len += take;
		d->start += take;
		if (d->acc_len == d->acc_need)
			return resp_finish_rewrite(c);
		return take > 0;
	}
	if (c->sasl.phase == SASL_RAW_SERVER) {
		/* The broker's token of a legacy raw SASL exchange. */
		if (avail == 0)
			return 0;
		uint64_t frame = 0;
		char err[160];
		int r = sasl_on_raw_token(&c->sasl, false, d->buf + d->start + d->fwd, avail,
		    w->cl->max_frame_bytes, &frame, err, sizeof err);
		if (r == SASL_NEED_MORE)
			return 0;
		if (r != SASL_OK) {
			if (r == SASL_TOO_LARGE)
				METRIC_ADD(w->m, frame_too_large, 1);
			else
				METRIC_ADD(w->m, malformed_responses, 1);
			return conn_upstream_broken(c, "%s", err);
		}
		d->frame_left = frame;
		if (c->sasl.authenticated && c->sasl.phase == SASL_KAFKA)
			log_debug("SASL raw exchange relayed", "mechanism=%s", c->sasl.mech_name);
		return 1;
	}
	struct inflight *head = fifo_head(c);
	if (head && head->synthetic) {
		if (d->fwd)
			return 0;
		size_t n = kc_build_apiversions_unsupported(d->small, sizeof d->small, head->corr);
		d->out = d->small;
		d->out_len = n;
		d->out_off = 0;
		d->out_owned = false;
		fifo_pop(c);
		METRIC_ADD(w->m, responses, 1);
		return 1;
	}
	if (avail == 0)
		return 0;
	const uint8_t *p = d->buf + d->start + d->fwd;
	int32_t size = 0, corr = 0;
	char err[128];
	int r = kc_parse_response_prefix(p, avail, w->cl->max_frame_bytes, &size, &corr, err,
	    sizeof err);
	if (r == KC_NEED_MORE)
		return 0;
	if (r != KC_OK) {
		/* (size is not set on failure; avail >= 4 here) */
		int32_t raw = kc_get_i32(p);
		if (raw > 0 && (uint64_t)raw > w->cl->max_frame_bytes)
			METRIC_ADD(w->m, frame_too_large, 1);
		else
			METRIC_ADD(w->m, malformed_responses, 1);
		if (!c->seen_response) {
			/* Say what the peer speaks instead (TLS, HTTP, ...). */
			char what[200];
			enum kc_sniff v = kc_sniff_response(p, avail, w->cl->max_frame_bytes);
			if (v != KC_SNIFF_KAFKA && v != KC_SNIFF_NEED_MORE)
				return conn_upstream_broken(c, "%s", kc_sniff_describe(v, p, avail,
				    w->cl->max_frame_bytes, what, sizeof what));
		}
		return conn_upstream_broken(c, "malformed response: %s", err);
	}
	if (!head) {
		METRIC_ADD(w->m, correlation_mismatch, 1);
		return conn_upstream_broken(c, "a response (correlation id %d) nobody asked for",
		    corr);
	}
	if (corr != head->corr) {
		METRIC_ADD(w->m, correlation_mismatch, 1);
		return conn_upstream_broken(c, "response correlation id %d does not match request "
		    "%d (%s)", corr, head->corr, kc_api_name(head->key));
	}
	c->seen_response = true;
	if (head->key == KC_API_SASL_HANDSHAKE || head->key == KC_API_SASL_AUTHENTICATE) {
		/* Its error code moves the SASL state on (sasl.h). */
		r = sasl_on_response(&c->sasl, head->key, head->ver, p, avail, err, sizeof err);
		if (r == SASL_NEED_MORE) {
			if (d->start + d->fwd == 0 && d->end == WORKER_BUF_SIZE) {
				METRIC_ADD(w->m, malformed_responses, 1);
				return conn_upstream_broken(c, "%s response header larger than %d "
				    "bytes", kc_api_name(head->key), WORKER_BUF_SIZE);
			}
			return 0;
		}
		if (r != SASL_OK) {
			METRIC_ADD(w->m, malformed_responses, 1);
			return conn_upstream_broken(c, "%s", err);
		}
	}
	if (kc_response_needs_rewrite(head->key, head->ver)) {
		if (d->fwd)
			return 0;  /* flush what precedes it first */
		d->acc_need = 4 + (size_t)size;
		d->acc = malloc(d->acc_need);
		if (!d->acc)
			return conn_fail(c, "out of memory for a %zu byte response", d->acc_need);
		d->acc_len = 0;
		d->acc_key = head->key;
		d->acc_ver = head->ver;
	} else {
		d->frame_left = 4 + (uint64_t)size;
	}
	/* the upstream latency of this API (loop time: no clock call) */
	ev_tstamp lat = ev_now(w->loop) - head->sent;
	metrics_observe(w->m, head->key, lat > 0 ? (uint64_t)(lat * 1e6) : 0);
	fifo_pop(c);
	METRIC_ADD(w->m, responses, 1);
	return 1;
}

/* ---- the driver ---------------------------------------------------------- */

static void conn_update_watchers(struct conn *c);

/* Parse and write both directions once. -1 close, else 1 on progress. */
static int
conn_forward(struct conn *c)
{
	int progress = 0, r;
	if (!c->up_eof) {
		/* (after an upstream EOF nothing more is forwarded to it) */
		while ((r = req_parse(c)) > 0)
			progress = 1;
		if (r < 0)
			return -1;
		if ((r = dir_flush(c, &c->req, &c->up, true)) < 0)
			return -1;
		progress |= r;
	}
	while ((r = resp_parse(c)) > 0)
		progress = 1;
	if (r < 0)
		return -1;
	if ((r = dir_flush(c, &c->resp, &c->cli, false)) < 0)
		return -1;
	return progress | r;
}

/* Start the request_timeout clock when a request frame is in progress and
 * it is not running yet; stop it at a request boundary. Once per event. */
static void
conn_request_clock(struct conn *c)
{
	if (!req_partial(c)) {
		c->req_since = 0;
		return;
	}
	if (c->req_since)
		return;
	c->req_since = ev_now(c->w->loop);
	conn_timer_due(c, c->req_since + conn_request_timeout(c));
}

static int conn_handover_try(struct conn *c);

/* One handshake step on each side still in one (plain TCP never is: two
 * byte compares). -1 close (why set). */
static int
conn_handshake(struct conn *c)
{
	if (c->cli.state == TRANSPORT_HANDSHAKE && c->state != CONN_TLS_HANDSHAKE &&
	    transport_handshake(&c->cli) < 0)
		return conn_fail(c, "%s handshake with client: %s", transport_name(&c->cli),
		    strerror(errno));
	int up_hs = c->up.state == TRANSPORT_HANDSHAKE ? transport_handshake(&c->up) : 0;
	if (up_hs != 0)
		upstream_tls_handshake_end(c->w, &c->up, up_hs > 0);
	if (up_hs < 0) {
		int e = errno;
		char addr[CONN_PEER_MAX], msg[CONN_PEER_MAX + 300];
		METRIC_ADD(c->w->m, upstream_closed, 1);
		transport_peer(&c->up, addr, sizeof addr);
		snprintf(msg, sizeof msg, "%s handshake with upstream %s: %s", transport_name(&c->up),
		    addr, upstream_transport_error(&c->up, e));
		if (transport_is_tls(&c->up)) {
			/* a certificate or name the upstream cannot prove is the
			 * upstream's condition, as a refused connect is */
			METRIC_ADD(c->w->m, upstream_tls_failures, 1);
			worker_upstream_report(c->w, false, msg);
		}
		return conn_fail(c, "%s", msg);
	}
	return 0;
}

static int conn_connect_begin(struct conn *c);

/* The client's TLS handshake is done: only now is the upstream connected
 * (the order issue 11 asks for: a server name from the ClientHello can
 * still choose the broker here, before any upstream connection). -1 when
 * the connection must close (why set). */
static int
conn_tls_accepted(struct conn *c)
{
	struct worker *w = c->w;
	SSL *ssl = transport_tls_ssl(&c->cli);
	METRIC_ADD(w->m, tls_handshakes, 1);
	if (ssl && SSL_session_reused(ssl))
		METRIC_ADD(w->m, tls_resumed, 1);
	conn_timer_stop(c);
	if (log_enabled(LOG_DEBUG)) {
		char peer[CONN_PEER_MAX];
		transport_peer(&c->cli, peer, sizeof peer);
		log_debug("TLS handshake done", "client=\"%s\" version=%s resumed=%s", peer,
		    ssl ? SSL_get_version(ssl) : "?", ssl && SSL_session_reused(ssl) ? "true" : "false");
	}
	c->state = CONN_CONNECTING;
	c->last_active = ev_now(w->loop);
	if (w->cl->gateway == CFG_GATEWAY_SNI) {
		/* [sni] the ClientHello's server name chose the upstream */
		if (!c->sni_pick.decided)
			return conn_fail(c, "no server name decision after the TLS handshake");
		c->sni_broker = c->sni_pick.match == SNI_BROKER;
		c->sni_node_id = c->sni_pick.node_id;
		log_debug("TLS server name", "route=%s node_id=%d",
		    sni_match_str(c->sni_pick.match), (int)c->sni_node_id);
	}
	return conn_connect_begin(c);
}

/* One step of the client's TLS handshake (state CONN_TLS_HANDSHAKE). 0
 * blocked or done, -1 close (why set). A client that sent plaintext (a
 * Kafka frame) is counted apart from one whose handshake failed. */
static int
conn_tls_step(struct conn *c)
{
	struct worker *w = c->w;
	int r = transport_handshake(&c->cli);
	if (r == 0)
		return 0;
	if (r < 0) {
		if (transport_tls_plaintext(&c->cli)) {
			METRIC_ADD(w->m, plaintext_on_tls, 1);
			return conn_fail(c, "plaintext on a TLS listener: %s",
			    transport_tls_error(&c->cli));
		}
		if (c->sni_pick.refused)  /* [sni] counted (sni_unknown) and logged */
			return conn_end(c, "TLS server name refused (unrecognized_name)");
		METRIC_ADD(w->m, tls_handshake_failures, 1);
		return conn_fail(c, "TLS handshake with client: %s",
		    transport_tls_error(&c->cli)[0] ? transport_tls_error(&c->cli) : strerror(errno));
	}
	return conn_tls_accepted(c);
}

/* Move bytes both ways until nothing progresses. Returns -1 when the
 * connection must close (reason in c->why). */
static int
conn_pump(struct conn *c, bool cli_readable, bool up_readable)
{
	struct worker *w = c->w;
	if (c->state == CONN_TLS_HANDSHAKE && conn_tls_step(c) < 0)
		return -1;
	bool open = c->state == CONN_OPEN;
	if (conn_handshake(c) < 0)
		return -1;
	for (int rounds = 0;; rounds++) {
		int progress = 0, r;
		bool filled;
		if (rounds == 64) {
			/* Enough for this connection now; parse what the last
			 * round read so the watchers ask for what it needs (bytes
			 * left unparsed would wait for the next read event, which
			 * may never come). */
			while (open && (r = conn_forward(c)) > 0)
				;
			if (open && r < 0)
				return -1;
			break;
		}
		if (open) {
			if ((r = conn_forward(c)) < 0)
				return -1;
			progress |= r;
		}
		/* Bytes held inside a transport are read without waiting for
		 * the socket (transport_pending; never any for plain TCP). */
		if ((cli_readable || transport_pending(&c->cli)) && conn_reads_client(c)) {
			r = dir_read(c, &c->req, &c->cli, true, &filled);
			if (r < 0)
				return -1;
			progress |= r;
			cli_readable = filled;
			if (r)
				c->last_active = ev_now(w->loop);
		}
		if (open && (up_readable || transport_pending(&c->up)) && !c->up_eof &&
		    dir_has_room(&c->resp)) {
			r = dir_read(c, &c->resp, &c->up, false, &filled);
			if (r < 0) {
				METRIC_ADD(w->m, upstream_closed, 1);
				return -1;
			}
			progress |= r;
			up_readable = filled;
			if (r)
				c->last_active = ev_now(w->loop);
		}
		if (!progress)
			break;
	}

	if (!open) {
		/* Garbage need not wait for the upstream connection. */
		if (!c->seen_request && c->req.buf &&
		    req_check_prefix(c, c->req.buf + c->req.start, c->req.end - c->req.start) < 0)
			return -1;
		if (c->cli_eof && req_unparsed(c) == 0)
			return conn_end(c, "client closed the connection");
		if (c->exit == HANDOVER_EXIT_HANDOVER)
			return conn_handover_try(c) < 0 ? -1 : 0;
		if (c->draining && !conn_drain_pending(c)) {
			METRIC_ADD(w->m, connections_drained, 1);
			return conn_end(c, "drained");
		}
		return 0;
	}
	if (c->up_eof && !c->resp.fwd && !c->resp.out) {
		/* Every whole response received has been delivered. */
		METRIC_ADD(w->m, upstream_closed, 1);
		if (c->sasl.phase == SASL_RAW_SERVER && !c->resp.frame_left)
			return conn_end(c, "upstream closed the connection instead of answering "
			    "a %s token (legacy raw SASL): authentication refused",
			    c->sasl.mech_name);
		if (c->fifo_len == 0 && !c->resp.frame_left && !c->resp.acc)
			return conn_end(c, "upstream closed the connection");
		struct inflight *head = fifo_head(c);
		if (!c->seen_response && head && !head->synthetic &&
		    head->key == KC_API_API_VERSIONS && !c->resp.frame_left && !c->resp.acc) {
			/* Every Kafka broker answers ApiVersions (v0 with an error
			 * code when it is too new); TLS servers and most other
			 * services just hang up on it. */
			if (c->resp.buf && c->resp.end > c->resp.start) {
				char what[200];
				return conn_upstream_broken(c, "%s", kc_sniff_describe(
				    KC_SNIFF_NEED_MORE, c->resp.buf + c->resp.start,
				    c->resp.end - c->resp.start, w->cl->max_frame_bytes, what,
				    sizeof what));
			}
			return conn_upstream_broken(c, "closed the connection without answering "
			    "ApiVersions (a TLS port, or not Kafka?)");
		}
		return conn_fail(c, "upstream closed the connection with %zu request(s) in flight",
		    c->fifo_len);
	}
	if (c->cli_eof) {
		if (req_partial(c))
			return conn_end(c, "client closed the connection in the middle of a request");
		if (conn_owes_nothing(c) && (c->draining || req_unparsed(c) == 0))
			return conn_end(c, "client closed the connection");
		/* Half-closed: deliver what is owed (bounded by the timer). */
		conn_timer_due(c, c->cli_eof_at + conn_request_timeout(c));
	}
	if (c->exit == HANDOVER_EXIT_HANDOVER) {
		int r = conn_handover_try(c);
		if (r != 0)
			return r < 0 ? -1 : 0;
	} else if (c->draining && conn_owes_nothing(c)) {
		if (conn_drain_pending(c)) {
			if (conn_drain_grace(c))
				conn_timer_due(c, c->drain_grace_until);
		} else {
			METRIC_ADD(w->m, connections_drained, 1);
			return conn_end(c, "drained");
		}
	}
	conn_request_clock(c);
	return 0;
}

static void
conn_step(struct conn *c, bool cli_readable, bool up_readable)
{
	if (conn_pump(c, cli_readable, up_readable) == -1) {
		conn_close(c, c->quiet ? LOG_DEBUG : LOG_WARN, "connection closed");
		return;
	}
	conn_update_watchers(c);
}

static void
conn_set_io(struct conn *c, ev_io *io, int fd, int events)
{
	struct ev_loop *loop = c->w->loop;
	if (fd < 0 || events == 0) {
		ev_io_stop(loop, io);
		return;
	}
	if (ev_is_active(io) && (io->events & (EV_READ | EV_WRITE)) == events)
		return;
	ev_io_stop(loop, io);
	ev_io_set(io, fd, events);
	ev_io_start(loop, io);
}

static void
conn_update_watchers(struct conn *c)
{
	int ce = 0, ue = 0;
	if (c->handed) {
		/* Another process may be using the sockets now. */
		ev_io_stop(c->w->loop, &c->cli_io);
		ev_io_stop(c->w->loop, &c->up_io);
		return;
	}
	/* What each side's transport waits for, given what the connection
	 * wants from it: read when there is room, write when bytes are owed
	 * (a TLS transport may turn either around, or wait on a handshake). */
	bool cli_rd = conn_reads_client(c), up_rd = false;
	ce = transport_interest(&c->cli, cli_rd, c->resp.fwd || c->resp.out);
	if (c->state == CONN_OPEN && !c->up_eof) {
		up_rd = dir_has_room(&c->resp);
		ue = transport_interest(&c->up, up_rd, c->req.fwd);
	}
	conn_set_io(c, &c->cli_io, c->cli.fd, ce);
	conn_set_io(c, &c->up_io, c->up.fd, ue);
	/* Bytes already inside a transport will not make its socket ready:
	 * come back from the loop for them (the 64-round cap, a full buffer
	 * just drained). Plain TCP never holds any. */
	if (cli_rd && transport_pending(&c->cli))
		ev_feed_event(c->w->loop, &c->cli_io, EV_READ);
	if (up_rd && transport_pending(&c->up))
		ev_feed_event(c->w->loop, &c->up_io, EV_READ);
}

static void
conn_cli_cb(struct ev_loop *loop, ev_io *io, int revents)
{
	(void)loop;
	struct conn *c = io->data;
	/* readable = the readiness a blocked read waited for (plain: EV_READ;
	 * TLS may wait for writable); a fed event (pending bytes) too */
	conn_step(c, revents & (c->cli.rd_want | EV_READ), false);
}

static void
conn_up_cb(struct ev_loop *loop, ev_io *io, int revents)
{
	(void)loop;
	struct conn *c = io->data;
	conn_step(c, false, revents & (c->up.rd_want | EV_READ));
}

/* Nothing owed either way and no request in progress. */
static bool
conn_is_idle(const struct conn *c)
{
	return conn_owes_nothing(c) && !req_partial(c) && !c->cli_eof;
}

static void conn_drain_one(struct conn *c);

/* Metadata wait while connecting; request_timeout, half-close deadline and
 * idle_timeout once open (see conn.h). Deadlines are recomputed from the
 * timestamps the data path keeps; the timer is re-armed for the next one. */
static void
conn_timer_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)revents;
	struct conn *c = t->data;
	struct worker *w = c->w;
	c->timer_at = 0;
	if (c->handed)
		return;  /* (its timer is stopped; nothing of it runs here) */
	if (c->state == CONN_WAIT_METADATA) {
		snprintf(c->why, sizeof c->why, "timed out waiting for broker addresses");
		conn_close(c, LOG_WARN, "connection closed");
		return;
	}
	if (c->state == CONN_TLS_HANDSHAKE) {
		/* A stalled handshake holds a descriptor and a session: it
		 * gets request_timeout, like a stalled request frame. */
		METRIC_ADD(w->m, tls_handshake_failures, 1);
		snprintf(c->why, sizeof c->why, "TLS handshake not complete within "
		    "request_timeout (%llu ms)", (unsigned long long)w->cl->request_timeout_ms);
		conn_close(c, LOG_INFO, "connection closed");
		return;
	}
	if (c->state != CONN_OPEN)
		return;
	ev_tstamp now = ev_now(loop), rt = conn_request_timeout(c), next = 0;
	if (c->draining && c->drain_grace_until && now >= c->drain_grace_until) {
		/* The fresh connection's grace is over: re-evaluate the drain. */
		c->drain_grace_until = 0;
		conn_step(c, false, false);
		return;
	}
	if (c->exit == HANDOVER_EXIT_SPREAD && !c->draining) {
		if (now >= c->close_at) {
			/* Its turn in drain_spread: close at the next boundary. */
			conn_drain_one(c);
			return;
		}
		next = c->close_at;
	}
	if (c->req_since) {
		ev_tstamp due = c->req_since + rt;
		if (due <= now && c->req.fwd) {
			/* The upstream is not taking the bytes we have: that
			 * time is not the client's. Give it a fresh period. */
			c->req_since = now;
			due = now + rt;
		}
		if (due <= now) {
			METRIC_ADD(w->m, request_timeouts, 1);
			conn_fail(c, "request not complete within request_timeout (%llu ms)",
			    (unsigned long long)w->cl->request_timeout_ms);
			conn_close(c, LOG_WARN, "connection closed");
			return;
		}
		if (!next || due < next)
			next = due;
	}
	if (c->cli_eof) {
		ev_tstamp due = c->cli_eof_at + rt;
		if (due <= now) {
			conn_fail(c, "client half-closed; %zu response(s) still owed after request_timeout",
			    c->fifo_len);
			conn_close(c, LOG_INFO, "connection closed");
			return;
		}
		if (!next || due < next)
			next = due;
	}
	if (w->cl->idle_timeout_ms) {
		ev_tstamp idle = (ev_tstamp)w->cl->idle_timeout_ms / 1000.0;
		ev_tstamp due = c->last_active + idle;
		if (due <= now) {
			if (conn_is_idle(c)) {
				METRIC_ADD(w->m, connections_idle_closed, 1);
				conn_end(c, "idle for %llus",
				    (unsigned long long)(w->cl->idle_timeout_ms / 1000));
				conn_close(c, LOG_DEBUG, "connection closed");
				return;
			}
			due = now + idle;
		}
		if (!next || due < next)
			next = due;
	}
	if (next)
		conn_timer_arm(c, next);
}

/* ---- upstream connection ------------------------------------------------ */

static int conn_connect_next(struct conn *c);

static void
conn_connected(void *arg, int fd, const char *err, bool local)
{
	struct conn *c = arg;
	struct worker *w = c->w;
	c->uc = NULL;
	if (fd < 0) {
		METRIC_ADD(w->m, upstream_connect_errors, 1);
		uint64_t sup = 0;
		if (log_ratelimit_ok(&w->rl_upstream, 5, 10, &sup))
			log_warn("upstream connect failed", "error=\"%s\" suppressed=%llu", err,
			    (unsigned long long)sup);
		if (local) {
			/* Out of descriptors or memory here: says nothing about
			 * the upstream, and the next address would fail too. */
			snprintf(c->why, sizeof c->why, "cannot open an upstream connection: %s", err);
			conn_close(c, LOG_DEBUG, "connection closed");
			return;
		}
		if (c->broker_index < 0 && c->upstream_try + 1 < w->cl->n_upstream) {
			c->upstream_try++;
			if (conn_connect_next(c) == 0)
				conn_update_watchers(c);
			return;
		}
		worker_upstream_report(w, false, err);
		snprintf(c->why, sizeof c->why, "no upstream reachable: %s", err);
		METRIC_ADD(w->m, upstream_closed, 1);
		conn_close(c, LOG_DEBUG, "connection closed");
		return;
	}
	/* A TCP connect is not Kafka health: the condition becomes reachable on
	 * a well-formed ApiVersions or Metadata answer (resp_finish_rewrite). */
	/* TLS to the upstream: SNI and the certificate name are the broker's
	 * own host (configured or advertised), also when the dial map made
	 * the connection to another address. */
	const char *host = c->broker_index < 0 ? w->cl->upstream[c->upstream_try].host
	    : w->nodes[c->broker_index].host;
	if (upstream_transport_init(w, &c->up, fd, host) != 0) {
		snprintf(c->why, sizeof c->why, "cannot start TLS to the upstream: %s",
		    strerror(errno));
		conn_close(c, LOG_WARN, "connection closed");
		return;
	}
	c->state = CONN_OPEN;
	c->last_active = ev_now(w->loop);
	conn_timer_stop(c);
	if (w->cl->idle_timeout_ms)
		conn_timer_arm(c, c->last_active + (ev_tstamp)w->cl->idle_timeout_ms / 1000.0);
	conn_step(c, false, false);
}

/* Start (or wait for) the upstream connection. -1 when it could not
 * start (out of memory; why set, c not closed). */

/* The broker's address is not known yet: wait for metadata (ours or a
 * sibling's), bounded by WORKER_METADATA_TIMEOUT_MS. */
static void
conn_wait_metadata(struct conn *c)
{
	struct worker *w = c->w;

	c->state = CONN_WAIT_METADATA;
	if (!c->waiting_metadata) {
		c->waiting_metadata = true;
		conn_timer_arm(c, ev_now(w->loop) + WORKER_METADATA_TIMEOUT_MS / 1000.0 + 1);
	}
	upstream_fetch_metadata(w);
}

static int
conn_connect_begin(struct conn *c)
{
	struct worker *w = c->w;
	const char *host;
	uint16_t port;
	if (c->sni_broker && c->broker_index < 0) {
		/* [sni] the broker the server name asked for */
		int idx = upstream_node_find(w, c->sni_node_id);
		if (idx < 0) {
			conn_wait_metadata(c);
			return 0;
		}
		c->broker_index = idx;
	}
	if (c->broker_index < 0) {
		host = w->cl->upstream[c->upstream_try].host;
		port = w->cl->upstream[c->upstream_try].port;
	} else {
		struct worker_node *n = &w->nodes[c->broker_index];
		if (!n->known)
			upstream_node_from_siblings(w, c->broker_index);
		if (!n->known) {
			conn_wait_metadata(c);
			return 0;
		}
		host = n->host;
		port = (uint16_t)n->port;
	}
	c->state = CONN_CONNECTING;
	c->uc = upstream_connect_start(w, host, port, WORKER_CONNECT_TIMEOUT_MS, conn_connected, c);
	if (!c->uc)
		return conn_fail(c, "out of memory");
	return 0;
}

/* The same; -1 if c was closed. */
static int
conn_connect_next(struct conn *c)
{
	if (conn_connect_begin(c) < 0) {
		conn_close(c, LOG_ERROR, "connection closed");
		return -1;
	}
	return 0;
}

void
conn_metadata_ready(struct worker *w)
{
	struct conn *c = w->conns, *next;
	for (; c; c = next) {
		next = c->next;
		if (!c->waiting_metadata)
			continue;
		c->waiting_metadata = false;
		conn_timer_stop(c);
		if (c->sni_broker && c->broker_index < 0)
			c->broker_index = upstream_node_find(w, c->sni_node_id);
		if (c->broker_index < 0 || !w->nodes[c->broker_index].known) {
			snprintf(c->why, sizeof c->why,
			    "upstream metadata has no broker with node id %d",
			    c->sni_broker ? c->sni_node_id : w->nodes[c->broker_index].node_id);
			METRIC_ADD(w->m, upstream_closed, 1);
			conn_close(c, LOG_WARN, "connection closed");
			continue;
		}
		if (conn_connect_next(c) == 0)
			conn_update_watchers(c);
	}
}

/* ---- lifecycle ------------------------------------------------------------ */

/* A connection on client socket fd, not connected upstream yet, in the
 * worker's list. NULL (fd not closed) when out of memory. */
static struct conn *
conn_new(struct worker *w, int fd, int broker_index)
{
	struct conn *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	c->w = w;
	c->broker_index = broker_index;
	transport_plain_init(&c->cli, fd);
	c->up.fd = -1;
	ev_io_init(&c->cli_io, conn_cli_cb, fd, EV_READ);
	c->cli_io.data = c;
	ev_io_init(&c->up_io, conn_up_cb, 0, EV_READ);
	c->up_io.data = c;
	ev_timer_init(&c->timer, conn_timer_cb, 0., 0.);
	c->timer.data = c;
	c->next = w->conns;
	if (w->conns)
		w->conns->prev = c;
	w->conns = c;
	w->n_conns++;
	METRIC_ADD(w->m, connections_active, 1);
	worker_conns_changed(w);
	c->last_active = ev_now(w->loop);
	return c;
}

void
conn_accept(struct worker *w, int fd, int broker_index)
{
	if (w->n_conns >= w->cl->max_connections) {
		METRIC_ADD(w->m, connections_rejected, 1);
		uint64_t sup = 0;
		if (log_ratelimit_ok(&w->rl_accept, 1, 5, &sup))
			log_warn("connection rejected: max_connections reached",
			    "max_connections=%u suppressed=%llu", w->cl->max_connections,
			    (unsigned long long)sup);
		close(fd);
		return;
	}
	struct conn *c = conn_new(w, fd, broker_index);
	if (!c) {
		close(fd);
		return;
	}
	METRIC_ADD(w->m, connections_accepted, 1);
	if (w->draining) {
		/* Accepted just before the listener closed: nothing owed. */
		c->draining = true;
		snprintf(c->why, sizeof c->why, "drained");
		METRIC_ADD(w->m, connections_drained, 1);
		conn_free(c);
		return;
	}
	if (w->tls_server) {
		/* TLS first; the upstream is connected once it is done
		 * (conn_tls_accepted), within request_timeout. */
		if (transport_tls_server_init(&c->cli, fd, w->tls_server) != 0 ||
		    (w->cl->gateway == CFG_GATEWAY_SNI &&   /* [sni] */
		    sni_gate_attach(transport_tls_ssl(&c->cli), &c->sni_pick) != 0)) {
			snprintf(c->why, sizeof c->why, "cannot start TLS: %s", strerror(errno));
			conn_close(c, LOG_WARN, "connection closed");
			return;
		}
		c->state = CONN_TLS_HANDSHAKE;
		conn_timer_arm(c, ev_now(w->loop) + conn_request_timeout(c));
		conn_step(c, true, false);  /* the ClientHello may be there already */
		return;
	}
	if (conn_connect_next(c) == 0)
		conn_update_watchers(c);
}

/* Close both sockets for everyone holding a copy (the supervisor, a new
 * worker that did not adopt them): the client sees the close. */
static void
conn_shutdown(struct conn *c)
{
	if (c->cli.fd >= 0)
		shutdown(c->cli.fd, SHUT_RDWR);
	if (c->up.fd >= 0)
		shutdown(c->up.fd, SHUT_RDWR);
}

/* Today's drain for one connection (IPC_DRAIN, or a spread connection's
 * turn): stop at the next request boundary, serve the requests already
 * received, give a fresh connection's first request CONN_DRAIN_GRACE to
 * arrive, then close. May free c. */
static void
conn_drain_one(struct conn *c)
{
	struct worker *w = c->w;
	c->exit = HANDOVER_EXIT_DRAIN;
	c->draining = true;
	c->drain_credit = req_unparsed(c);
	if (c->req_need_more ||
	    (!c->seen_request && c->drain_credit == 0 &&
	     ev_now(w->loop) - c->last_active < CONN_DRAIN_FRESH)) {
		/* A request is on its way: give it a moment. */
		c->drain_grace_until = ev_now(w->loop) + CONN_DRAIN_GRACE;
		c->drain_credit = SIZE_MAX / 2;  /* the one in flight */
	}
	if (c->state != CONN_OPEN) {
		if (!conn_drain_pending(c)) {
			/* Not connected upstream, nothing received: nothing owed. */
			METRIC_ADD(w->m, connections_drained, 1);
			snprintf(c->why, sizeof c->why, "drained");
			conn_close(c, LOG_DEBUG, "connection closed");
			return;
		}
		/* Requests already sent: serve them once connected. */
		conn_update_watchers(c);
		return;
	}
	conn_step(c, false, false);
}

void
conn_drain_all(struct worker *w)
{
	struct conn *c = w->conns, *next;
	for (; c; c = next) {
		next = c->next;
		conn_drain_one(c);
	}
}

void
conn_close_all(struct worker *w, bool forced)
{
	while (w->conns) {
		struct conn *c = w->conns;
		if (forced)
			METRIC_ADD(w->m, connections_forced, 1);
		if (forced && c->handed) {
			/* CONN_DONE never came: the client must see a close
			 * whoever else holds a copy of its socket. */
			conn_shutdown(c);
		}
		snprintf(c->why, sizeof c->why, forced ? "drain deadline" : "shutdown");
		conn_close(c, forced ? LOG_INFO : LOG_DEBUG, "connection closed");
	}
}

/* ---- reload: handover and spread (see conn.h) -------------------------------- */

/* Both sides plaintext: the connection can continue from its sockets
 * alone. (The one place to say so; TLS transports will answer no.) */
static bool
conn_movable(const struct conn *c)
{
	return transport_movable(&c->cli) && transport_movable(&c->up);
}

static struct handover_view
conn_handover_view(const struct conn *c)
{
	const struct dir *r = &c->resp;
	struct handover_view v = {
		.upstream_open = c->state == CONN_OPEN,
		/* (a raw SASL exchange cannot continue elsewhere) */
		.movable = conn_movable(c) && sasl_movable(&c->sasl),
		.owes = !conn_owes_nothing(c),
		.frame_partial = c->req.frame_left > 0 || c->req.skip_left > 0,
		.resp_unparsed = r->buf && r->end > r->start + r->fwd,
		.cli_eof = c->cli_eof,
		.up_eof = c->up_eof,
		.pending = req_unparsed(c),
	};
	return v;
}

/* Finish here as a drain, from a request boundary reached while handing
 * over: the bytes already read (which would have travelled with the
 * record) are served, nothing more is read. */
static void
conn_exit_drain(struct conn *c)
{
	c->exit = HANDOVER_EXIT_DRAIN;
	c->draining = true;
	c->drain_credit = req_unparsed(c);
	c->drain_grace_until = 0;
	if (c->ho_waiting) {
		c->ho_waiting = false;
		c->w->handover_waiting--;
	}
}

/* Send c to the new generation: CONN_OUT with its record, the request
 * bytes read and not parsed, and its sockets. 1 sent (c is silent from now
 * on), 0 not now (the window is full: c waits), -1 not sent. */
static int
conn_handover_send(struct conn *c)
{
	struct worker *w = c->w;
	if (w->handover_out >= WORKER_HANDOVER_WINDOW) {
		if (!c->ho_waiting) {
			c->ho_waiting = true;
			w->handover_waiting++;
		}
		return 0;
	}
	bool up = c->state == CONN_OPEN;
	size_t pending = req_unparsed(c);
	struct ipc_conn_record rec;
	uint8_t *msg = malloc(sizeof rec + pending);
	if (!msg)
		return -1;
	handover_record_init(&rec, w->handover_seq + 1, c->broker_index, c->upstream_try, up,
	    c->requests, pending, sasl_encode(&c->sasl));
	memcpy(msg, &rec, sizeof rec);
	if (pending)
		memcpy(msg + sizeof rec, c->req.buf + c->req.start + c->req.fwd, pending);
	int fds[2] = { c->cli.fd, c->up.fd };
	int r = worker_ipc_send_fds(w, IPC_CONN_OUT, msg, sizeof rec + pending, fds, up ? 2 : 1);
	int err = errno;
	free(msg);
	if (r == -1) {
		log_debug("connection not handed over", "error=\"%s\"", strerror(err));
		return -1;
	}
	c->ho_id = ++w->handover_seq;
	c->handed = true;
	w->handover_out++;
	if (c->ho_waiting) {
		c->ho_waiting = false;
		w->handover_waiting--;
	}
	if (c->uc) {
		/* Not connected yet: the new worker connects itself. */
		upstream_connect_cancel(c->uc);
		c->uc = NULL;
	}
	c->waiting_metadata = false;
	conn_timer_stop(c);
	ev_io_stop(w->loop, &c->cli_io);
	ev_io_stop(w->loop, &c->up_io);
	/* The pending bytes travel with the record; buffers go back. */
	dir_release(w, &c->req);
	dir_release(w, &c->resp);
	c->req.start = c->req.end = 0;
	log_debug("connection handed over", "id=%llu upstream=%s pending=%zu requests=%llu",
	    (unsigned long long)c->ho_id, up ? "open" : "none", pending,
	    (unsigned long long)c->requests);
	return 1;
}

/* At the end of an event of a connection leaving by handover: move it if it
 * is at a boundary with nothing owed. 0 waiting (continue), 1 handed over
 * or finished as a drain (the drain ran), -1 close (why set). */
static int
conn_handover_try(struct conn *c)
{
	if (c->handed || c->ho_waiting)
		return c->handed ? 1 : 0;
	struct handover_view v = conn_handover_view(c);
	enum handover_step step = handover_decide(&v);
	if (step == HANDOVER_WAIT)
		return 0;
	if (step == HANDOVER_NOW) {
		int r = conn_handover_send(c);
		if (r == 1)
			return 1;
		if (r == 0)
			return 0;
	}
	/* It cannot move (or the channel refused it): a drain, from here. */
	conn_exit_drain(c);
	return conn_pump(c, false, false) < 0 ? -1 : 1;
}

/* A connection that leaves by closing (its upstream changed, handover =
 * off, or it cannot move: TLS): open ones are served until a random time
 * in the drain_spread window, then close at a request boundary; one not
 * open yet (connecting upstream, or a TLS handshake, which cutting would
 * fail) finishes like a drained connection: the handshake completes, a
 * first request on its way is served, then it closes at a boundary. */
static void
conn_spread_one(struct conn *c, ev_tstamp now)
{
	if (c->state != CONN_OPEN) {
		conn_drain_one(c);
		return;
	}
	c->exit = HANDOVER_EXIT_SPREAD;
	c->close_at = now + (ev_tstamp)handover_spread_offset(c->w->spread_window_ms,
	    arc4random()) / 1000.0;
	conn_timer_due(c, c->close_at);
}

void
conn_handover_all(struct worker *w)
{
	struct conn *c = w->conns, *next;
	ev_tstamp now = ev_now(w->loop);
	for (; c; c = next) {
		next = c->next;
		if (!conn_movable(c)) {
			/* a TLS session stays in this process */
			conn_spread_one(c, now);
			continue;
		}
		/* Stop at the next request boundary (a frame in progress is
		 * finished); no grace: what is read and not parsed moves with
		 * the connection. */
		c->exit = HANDOVER_EXIT_HANDOVER;
		c->draining = true;
		c->drain_credit = 0;
		c->drain_grace_until = 0;
		conn_step(c, false, false);
	}
}

void
conn_spread_all(struct worker *w)
{
	struct conn *c = w->conns, *next;
	ev_tstamp now = ev_now(w->loop);
	for (; c; c = next) {
		next = c->next;
		conn_spread_one(c, now);
	}
}

/* Connections held back by the window, while there is room. */
static void
conn_handover_resume(struct worker *w)
{
	struct conn *c = w->conns, *next;
	for (; c && w->handover_waiting && w->handover_out < WORKER_HANDOVER_WINDOW; c = next) {
		next = c->next;
		if (!c->ho_waiting)
			continue;
		c->ho_waiting = false;
		w->handover_waiting--;
		conn_step(c, false, false);
	}
}

void
conn_handover_done(struct worker *w, const struct ipc_conn_ack *ack)
{
	struct conn *c = w->conns;
	while (c && !(c->handed && c->ho_id == ack->id))
		c = c->next;
	if (!c) {
		log_debug("handover outcome for no connection here", "id=%llu adopted=%u",
		    (unsigned long long)ack->id, ack->adopted);
		return;
	}
	if (ack->adopted) {
		/* The new generation owns it: close our copies only. */
		METRIC_ADD(w->m, connections_handed_over, 1);
		snprintf(c->why, sizeof c->why, "handed over");
	} else {
		/* Nobody took it: a clean close at the boundary (nothing owed). */
		conn_shutdown(c);
		METRIC_ADD(w->m, connections_drained, 1);
		snprintf(c->why, sizeof c->why, "drained (handover declined)");
	}
	conn_close(c, LOG_DEBUG, "connection closed");
	conn_handover_resume(w);
}

static void
conn_handover_abort_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct worker *w = t->data;
	struct conn *c = w->conns, *next;
	for (; c; c = next) {
		next = c->next;
		if (c->handed) {
			/* No answer can come. Whoever holds its sockets now (the
			 * new worker, if it adopted it) keeps serving it; if
			 * nobody does, this close is the clean one. */
			METRIC_ADD(w->m, connections_drained, 1);
			snprintf(c->why, sizeof c->why, "control channel closed during handover");
			conn_close(c, LOG_DEBUG, "connection closed");
		} else if (c->exit == HANDOVER_EXIT_HANDOVER) {
			conn_exit_drain(c);
			conn_step(c, false, false);
		}
	}
}

void
conn_handover_abort(struct worker *w)
{
	if (!w->handover_out && !w->handover_waiting)
		return;  /* (new handovers fail to send and fall back by themselves) */
	if (ev_is_active(&w->handover_abort))
		return;
	/* Deferred: this may run inside another connection's event. */
	ev_timer_init(&w->handover_abort, conn_handover_abort_cb, 0., 0.);
	w->handover_abort.data = w;
	ev_timer_start(w->loop, &w->handover_abort);
}

/* ---- adoption (the new worker) ------------------------------------------------- */

static bool
conn_fd_is_stream(int fd)
{
	int type = 0;
	socklen_t len = sizeof type;
	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
}

void
conn_adopt(struct worker *w, struct ipc_msg *msg)
{
	struct ipc_conn_ack ack = { 0 };
	struct handover_adopt a;
	char err[160] = "";
	size_t nfds = msg->nfds;
	int fds[IPC_MAX_FDS];
	memcpy(fds, msg->fds, nfds * sizeof fds[0]);
	ipc_msg_take_fds(msg);
	if (msg->hdr.len >= sizeof(struct ipc_conn_record))
		memcpy(&ack.id, msg->payload + offsetof(struct ipc_conn_record, id), sizeof ack.id);

	struct conn *c = NULL;
	if (w->draining)
		snprintf(err, sizeof err, "this worker is draining");
	else if (w->tls_server || w->tls_client)
		/* handed-over connections are plaintext (TLS ones never move);
		 * a generation that speaks TLS does not continue them */
		snprintf(err, sizeof err, "this generation speaks TLS; the connection is plaintext");
	else if (handover_adopt_plan(msg->payload, msg->hdr.len, nfds, w->cl->n_brokers,
	    w->cl->n_upstream, w->n_conns, w->cl->max_connections, &a, err, sizeof err) == -1)
		;
	else if (!conn_fd_is_stream(fds[0]) || (a.open && !conn_fd_is_stream(fds[1])))
		snprintf(err, sizeof err, "a descriptor is not a stream socket");
	else if (!(c = conn_new(w, fds[0], a.rec.broker_index)))
		snprintf(err, sizeof err, "out of memory");
	else if (a.rec.pending_len && !(c->req.buf = worker_buf_get(w)))
		snprintf(err, sizeof err, "out of memory");
	if (err[0]) {
		if (c) {
			c->cli.fd = -1;  /* closed below with the others */
			c->cli.state = TRANSPORT_CLOSED;
			conn_free(c);
		}
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		log_warn("connection not adopted", "id=%llu reason=\"%s\"",
		    (unsigned long long)ack.id, err);
		worker_ipc_send(w, IPC_CONN_TAKEN, &ack, sizeof ack);
		return;
	}
	METRIC_ADD(w->m, connections_adopted, 1);
	for (size_t i = 0; i < nfds; i++)
		fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
	c->upstream_try = (size_t)a.rec.upstream_try;
	c->requests = a.rec.requests;
	c->seen_request = a.seen_request;
	c->sasl = a.sasl;
	if (a.rec.pending_len) {
		/* Read by the old worker, not forwarded: first in line. */
		memcpy(c->req.buf, a.pending, a.rec.pending_len);
		c->req.start = 0;
		c->req.end = a.rec.pending_len;
	}
	ack.adopted = 1;
	worker_ipc_send(w, IPC_CONN_TAKEN, &ack, sizeof ack);
	log_debug("connection adopted", "id=%llu upstream=%s pending=%u requests=%llu",
	    (unsigned long long)ack.id, a.open ? "open" : "none", a.rec.pending_len,
	    (unsigned long long)a.rec.requests);
	if (!a.open) {
		/* Nothing was forwarded on it: connect as a fresh one would. */
		if (conn_connect_next(c) == 0)
			conn_update_watchers(c);
		return;
	}
	transport_plain_init(&c->up, fds[1]);
	c->state = CONN_OPEN;
	if (w->cl->idle_timeout_ms)
		conn_timer_arm(c, c->last_active + (ev_tstamp)w->cl->idle_timeout_ms / 1000.0);
	conn_step(c, false, false);
}
