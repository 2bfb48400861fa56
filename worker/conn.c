/*
 * conn — client connections: accept, the byte pump between the two
 * sockets, the connection's timer, and the lifecycle table's actions
 * (conn_event); see conn.h. The Kafka framing of the bytes is
 * worker/frame.c's, how a connection gets open conn_setup.c's, how it
 * leaves its generation conn_handover.c's.
 */
#include "worker/conn_priv.h"

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
#include "worker/kafka/codec.h"
#include "worker/kafka/sasl.h"
#include "worker/kafka/sniff.h"
#include "common/sni.h"
#include "common/tls.h"
#include "common/transport.h"
#include "worker/upstream.h"

/* Transport wants go to ev_io_set unchanged (transport.h). */
_Static_assert((int)TRANSPORT_WANT_READ == (int)EV_READ && (int)TRANSPORT_WANT_WRITE == (int)EV_WRITE,
    "transport wants are libev events");

/* ---- helpers ------------------------------------------------------------ */

int
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
int
conn_end(struct conn *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof c->why, fmt, ap);
	va_end(ap);
	c->quiet = true;
	return -1;
}

void
conn_dir_release(struct worker *w, struct frame_dir *d)
{
	if (d->buf)
		worker_buf_put(w, d->buf);
	d->buf = NULL;
	frame_dir_free(d);
}

static bool
conn_drain_grace(const struct conn *c)
{
	return c->drain_grace_until > 0 && ev_now(c->w->loop) < c->drain_grace_until;
}

/* Draining, and requests received in time remain to be served. */
bool
conn_drain_pending(const struct conn *c)
{
	return conn_drain_grace(c) ||
	       (c->drain_credit > 0 && frame_req_unparsed(&c->fr) > 0 && !c->fr.req_need_more);
}

/* A request of n bytes was taken while draining: it used up its share of
 * the credit (a frame longer than the credit is still read to its end). */
static void
conn_drain_consume(struct conn *c, uint64_t n)
{
	if (!conn_fsm_draining(c->state))
		return;
	c->drain_credit = c->drain_credit > n ? c->drain_credit - (size_t)n : 0;
	c->drain_grace_until = 0;
}

/* A new request may start: not at a drain's boundary (draining, with no
 * credit and no grace left). */
static bool
conn_may_start(const struct conn *c)
{
	return !(conn_fsm_draining(c->state) && c->drain_credit == 0 && !conn_drain_grace(c));
}

/* Whether the client may be read now. A request frame that has started is
 * always read to its end (draining or not, FIFO full or not): the upstream
 * cannot answer half a request. */
static bool
conn_reads_client(const struct conn *c)
{
	if (c->cli_eof || c->up_eof || !conn_dir_room(c, &c->fr.req))
		return false;
	if (c->fr.req.frame_left || c->fr.req.skip_left)
		return true;
	if (conn_fsm_draining(c->state))
		return conn_drain_grace(c);
	return c->fr.fifo_len < c->w->cl->max_inflight;
}

/* ---- the connection timer (see conn.h) ----------------------------------- */

void
conn_timer_arm(struct conn *c, ev_tstamp at)
{
	struct ev_loop *loop = c->w->loop;
	ev_tstamp after = at - ev_now(loop);
	ev_timer_stop(loop, &c->timer);
	ev_timer_set(&c->timer, after > 0 ? after : 0., 0.);
	ev_timer_start(loop, &c->timer);
	c->timer_at = at;
}

void
conn_timer_stop(struct conn *c)
{
	ev_timer_stop(c->w->loop, &c->timer);
	c->timer_at = 0;
}

/* Make sure the timer fires no later than at (lazy: moved only when at is
 * earlier than what is armed, i.e. rarely). */
void
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

/* ---- the lifecycle table (conn_fsm.h) carried out ------------------------ */

static void
conn_set_state(struct conn *c, enum conn_state to, enum conn_event e)
{
	log_debug("connection state", "transition=\"%s -> %s (%s)\"",
	    conn_fsm_state_str(c->state), conn_fsm_state_str(to), conn_fsm_event_str(e));
	c->state = to;
	if (to != CONN_CLOSED)
		conn_peer_publish(c);  /* the listing shows its state */
}

/* The actions of one transition, in the order of their bits. */
static void
conn_do(struct conn *c, unsigned a)
{
	struct worker *w = c->w;
	ev_tstamp now = ev_now(w->loop);
	if (a & CONN_A_UNQUEUE)
		w->handover_waiting--;
	if (a & CONN_A_QUEUE)
		w->handover_waiting++;
	if (a & CONN_A_UNHANDED)
		w->handover_out--;
	if (a & CONN_A_HANDED) {
		w->handover_out++;
		if (c->uc) {
			/* Not connected yet: the new worker connects itself. */
			upstream_connect_cancel(c->uc);
			c->uc = NULL;
		}
		conn_timer_stop(c);
		ev_io_stop(w->loop, &c->cli_io);
		ev_io_stop(w->loop, &c->up_io);
		/* The pending bytes travel with the record; buffers go back. */
		conn_dir_release(w, &c->fr.req);
		conn_dir_release(w, &c->fr.resp);
		conn_pipes_release(c);   /* empty: a boundary */
		c->fr.req.start = c->fr.req.end = 0;
		/* listed by the next generation from now on, not twice */
		conn_peer_release(c);
	}
	if (a & CONN_A_STOP_TIMER)
		conn_timer_stop(c);
	if (a & CONN_A_TOUCH)
		c->last_active = now;
	if (a & CONN_A_ARM_HANDSHAKE)
		conn_timer_arm(c, now + conn_request_timeout(c));
	if (a & CONN_A_ARM_METADATA)
		conn_timer_arm(c, now + WORKER_METADATA_TIMEOUT_MS / 1000.0 + 1);
	if (a & CONN_A_FETCH_METADATA)
		upstream_fetch_metadata(w);
	if ((a & CONN_A_ARM_IDLE) && w->cl->idle_timeout_ms)
		conn_timer_arm(c, c->last_active + (ev_tstamp)w->cl->idle_timeout_ms / 1000.0);
	if (a & CONN_A_DRAIN_CREDIT) {
		/* The requests already received are served; a request on its
		 * way (a frame begun, or a connection accepted moments ago
		 * that has sent nothing yet) gets CONN_DRAIN_GRACE. */
		c->drain_credit = frame_req_unparsed(&c->fr);
		if (c->fr.req_need_more ||
		    (!c->fr.seen_request && c->drain_credit == 0 &&
		     now - c->last_active < CONN_DRAIN_FRESH)) {
			c->drain_grace_until = now + CONN_DRAIN_GRACE;
			c->drain_credit = SIZE_MAX / 2;  /* the one in flight */
		}
	}
	if (a & CONN_A_NO_CREDIT) {
		/* Stop at the next request boundary (a frame in progress is
		 * finished); no grace: what is read and not parsed moves with
		 * the connection. */
		c->drain_credit = 0;
		c->drain_grace_until = 0;
	}
	if (a & CONN_A_UNPARSED_CREDIT) {
		/* From a boundary reached while handing over: the bytes already
		 * read (which would have travelled with the record) are
		 * served, nothing more is read. */
		c->drain_credit = frame_req_unparsed(&c->fr);
		c->drain_grace_until = 0;
	}
	if (a & CONN_A_ARM_SPREAD) {
		c->close_at = now + (ev_tstamp)handover_spread_offset(w->spread_window_ms,
		    arc4random()) / 1000.0;
		conn_timer_due(c, c->close_at);
	}
	if (a & CONN_A_ARM_AGE)
		conn_age_arm(c);
}

bool
conn_event(struct conn *c, enum conn_event e)
{
	struct conn_fsm_step st = conn_fsm_step(c->state, e);
	if (!st.allowed) {
		c->w->conn_violations++;
		log_error("forbidden connection event (bug)", "state=%s event=%s",
		    conn_fsm_state_str(c->state), conn_fsm_event_str(e));
		return false;
	}
	conn_set_state(c, st.next, e);
	conn_do(c, st.actions);
	return true;
}

void
conn_free(struct conn *c)
{
	struct worker *w = c->w;
	if (c->state != CONN_CLOSED)
		conn_event(c, CONN_E_CLOSE);
	ev_io_stop(w->loop, &c->cli_io);
	ev_io_stop(w->loop, &c->up_io);
	ev_timer_stop(w->loop, &c->timer);
	if (c->uc)
		upstream_connect_cancel(c->uc);
	transport_close(&c->cli);
	transport_close(&c->up);
	conn_dir_release(w, &c->fr.req);
	conn_dir_release(w, &c->fr.resp);
	conn_pipes_release(c);
	frame_free(&c->fr);
	conn_peer_release(c);
	free(c->pp_buf);
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

void
conn_close(struct conn *c, enum log_level lvl, const char *what)
{
	struct worker *w = c->w;
	uint64_t sup = 0;
	if (lvl >= LOG_WARN) {
		if (log_ratelimit_ok(&w->rl_proto, 10, 20, &sup)) {
			char peer[2 * CONNTAB_ADDR_MAX + CONN_PEER_MAX];
			conn_peer_desc(c, peer, sizeof peer);
			log_msg(lvl, what,
			    "reason=\"%s\" %s listener=%s state=%s in_flight=%zu suppressed=%llu",
			    c->why, peer, c->broker_index < 0 && !c->sni_broker ? "bootstrap" : "broker",
			    conn_fsm_state_str(c->state), c->fr.fifo_len, (unsigned long long)sup);
		}
	} else {
		log_debug(what, "reason=\"%s\" client=%s", c->why, c->addr);
	}
	conn_free(c);
}

/* ---- upstream health ---------------------------------------------------- */

/*
 * The upstream broke the Kafka protocol on this connection: close it (the
 * reason is also c->why) and set the cluster's upstream condition to
 * unreachable with this protocol error, so the worker re-probes it until a
 * well-formed answer comes (upstream_report). Before any response
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
	int off = snprintf(msg, sizeof msg, c->fr.seen_response ? "protocol error from %s: "
	    : "not a Kafka broker at %s: ", addr);
	if (off > 0 && (size_t)off < sizeof msg) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg + off, sizeof msg - (size_t)off, fmt, ap);
		va_end(ap);
	}
	upstream_report(c->w, false, msg);
	return conn_fail(c, "%s", msg);
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
		/* gateway = sni: every broker on the one TLS port, by its server name */
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

/* ---- the driver ---------------------------------------------------------- */

/* A framing step failed (worker/frame.h): its reason becomes the close
 * reason; an upstream that broke the protocol is reported. -1. */
static int
conn_frame_failed(struct conn *c, int status)
{
	if (status == FRAME_UPSTREAM)
		return conn_upstream_broken(c, "%s", c->fr.why);
	return conn_fail(c, "%s", c->fr.why);
}

/* Parse and write both directions once: 0 (*moved: a frame step was made
 * or bytes were written), or -1 to close (why set). */
static int
conn_forward(struct conn *c, bool *moved)
{
	ev_tstamp now = ev_now(c->w->loop);
	bool wrote;
	int r;
	*moved = false;
	if (!c->up_eof) {
		/* (after an upstream EOF nothing more is forwarded to it) */
		uint64_t started;
		while ((r = frame_req_step(&c->fr, now, conn_may_start(c), &started)) == FRAME_OK) {
			if (started)
				conn_drain_consume(c, started);
			*moved = true;
		}
		if (r < 0)
			return conn_frame_failed(c, r);
		if (conn_dir_flush(c, &c->fr.req, &c->up, true, &wrote) < 0)
			return -1;
		*moved |= wrote;
	}
	while ((r = frame_resp_step(&c->fr, now)) == FRAME_OK) {
		if (c->fr.upstream_answered) {
			c->fr.upstream_answered = false;
			upstream_report(c->w, true, NULL);
		}
		*moved = true;
	}
	if (r < 0)
		return conn_frame_failed(c, r);
	if (conn_dir_flush(c, &c->fr.resp, &c->cli, false, &wrote) < 0)
		return -1;
	*moved |= wrote;
	return 0;
}

/* Start the request_timeout clock when a request frame is in progress and
 * it is not running yet; stop it at a request boundary. Once per event. */
static void
conn_request_clock(struct conn *c)
{
	if (!frame_req_partial(&c->fr)) {
		c->fr.req_since = 0;
		return;
	}
	if (c->fr.req_since)
		return;
	c->fr.req_since = ev_now(c->w->loop);
	conn_timer_due(c, c->fr.req_since + conn_request_timeout(c));
}

/* Move bytes both ways until nothing progresses. Returns -1 when the
 * connection must close (reason in c->why). */
int
conn_pump(struct conn *c, bool cli_readable, bool up_readable)
{
	struct worker *w = c->w;
	if (conn_fsm_leg(c->state) == CONN_LEG_TLS_HANDSHAKE && conn_tls_step(c) < 0)
		return -1;
	bool open = conn_fsm_open(c->state);
	if (conn_handshake(c) < 0)
		return -1;
	for (int rounds = 0;; rounds++) {
		bool progress = false, moved, filled;
		if (rounds == 64) {
			/* Enough for this connection now; parse what the last
			 * round read so the watchers ask for what it needs (bytes
			 * left unparsed would wait for the next read event, which
			 * may never come). */
			for (moved = open; moved;)
				if (conn_forward(c, &moved) < 0)
					return -1;
			break;
		}
		if (open) {
			if (conn_forward(c, &moved) < 0)
				return -1;
			progress |= moved;
		}
		/* Bytes held inside a transport are read without waiting for
		 * the socket (transport_pending; never any for plain TCP). */
		if ((cli_readable || transport_pending(&c->cli)) && conn_reads_client(c)) {
			if (conn_dir_in(c, &c->fr.req, &c->cli, true, &moved, &filled) < 0)
				return -1;
			progress |= moved;
			cli_readable = filled;
			if (moved)
				c->last_active = ev_now(w->loop);
		}
		if (open && (up_readable || transport_pending(&c->up)) && !c->up_eof &&
		    conn_dir_room(c, &c->fr.resp)) {
			if (conn_dir_in(c, &c->fr.resp, &c->up, false, &moved, &filled) < 0) {
				METRIC_ADD(w->m, upstream_closed, 1);
				return -1;
			}
			progress |= moved;
			up_readable = filled;
			if (moved)
				c->last_active = ev_now(w->loop);
		}
		if (!progress)
			break;
	}

	if (!open) {
		/* Garbage need not wait for the upstream connection. */
		if (!c->fr.seen_request && c->fr.req.buf &&
		    frame_check_prefix(&c->fr, c->fr.req.buf + c->fr.req.start,
		    c->fr.req.end - c->fr.req.start) < 0)
			return conn_fail(c, "%s", c->fr.why);
		if (c->cli_eof && frame_req_unparsed(&c->fr) == 0)
			return conn_end(c, "client closed the connection");
		if (conn_fsm_handover(c->state))
			return conn_handover_try(c) < 0 ? -1 : 0;
		if (conn_fsm_draining(c->state) && !conn_drain_pending(c))
			return conn_drained(c);
		return 0;
	}
	if (c->up_eof && !c->fr.resp.fwd && !c->fr.resp.out && !c->fr.resp.piped) {
		/* Every whole response received has been delivered. */
		METRIC_ADD(w->m, upstream_closed, 1);
		if (c->fr.sasl.phase == SASL_RAW_SERVER && !c->fr.resp.frame_left)
			return conn_end(c, "upstream closed the connection instead of answering "
			    "a %s token (legacy raw SASL): authentication refused",
			    c->fr.sasl.mech_name);
		if (c->fr.fifo_len == 0 && !c->fr.resp.frame_left && !c->fr.resp.acc &&
		    !c->fr.resp.walking)
			return conn_end(c, "upstream closed the connection");
		const struct frame_inflight *head = frame_fifo_head(&c->fr);
		if (!c->fr.seen_response && head && !head->synthetic &&
		    head->key == KC_API_API_VERSIONS && !c->fr.resp.frame_left && !c->fr.resp.acc) {
			/* Every Kafka broker answers ApiVersions (v0 with an error
			 * code when it is too new); TLS servers and most other
			 * services just hang up on it. */
			if (c->fr.resp.buf && c->fr.resp.end > c->fr.resp.start) {
				char what[200];
				return conn_upstream_broken(c, "%s", kc_sniff_describe(
				    KC_SNIFF_NEED_MORE, c->fr.resp.buf + c->fr.resp.start,
				    c->fr.resp.end - c->fr.resp.start, w->cl->max_frame_bytes, what,
				    sizeof what));
			}
			return conn_upstream_broken(c, "closed the connection without answering "
			    "ApiVersions (a TLS port, or not Kafka?)");
		}
		return conn_fail(c, "upstream closed the connection with %zu request(s) in flight",
		    c->fr.fifo_len);
	}
	if (c->cli_eof) {
		if (frame_req_partial(&c->fr))
			return conn_end(c, "client closed the connection in the middle of a request");
		if (frame_owes_nothing(&c->fr) &&
		    (conn_fsm_draining(c->state) || frame_req_unparsed(&c->fr) == 0))
			return conn_end(c, "client closed the connection");
		/* Half-closed: deliver what is owed (bounded by the timer). */
		conn_timer_due(c, c->cli_eof_at + conn_request_timeout(c));
	}
	if (conn_fsm_handover(c->state)) {
		int r = conn_handover_try(c);
		if (r != 0)
			return r < 0 ? -1 : 0;
	} else if (conn_fsm_draining(c->state) && frame_owes_nothing(&c->fr)) {
		if (conn_drain_pending(c)) {
			if (conn_drain_grace(c))
				conn_timer_due(c, c->drain_grace_until);
		} else {
			return conn_drained(c);
		}
	}
	conn_request_clock(c);
	return 0;
}

void
conn_step(struct conn *c, bool cli_readable, bool up_readable)
{
	if (conn_fsm_leg(c->state) == CONN_LEG_PROXY_HEADER) {
		/* the PROXY header first (conn_setup.c); once read, on as if
		 * the client's first bytes had just arrived */
		int r = conn_proxy_step(c);
		if (r == -2)
			return;
		if (r != 0) {
			if (r < 0)
				conn_close(c, c->quiet ? LOG_DEBUG : LOG_WARN, "connection closed");
			else
				conn_update_watchers(c);
			return;
		}
		cli_readable = true;
	}
	if (conn_pump(c, cli_readable, up_readable) == -1) {
		conn_close(c, c->quiet ? LOG_DEBUG : LOG_WARN, "connection closed");
		return;
	}
	if (c->fr.ci_changed)
		conn_peer_client_info(c);  /* who the client says it is: its row */
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

void
conn_update_watchers(struct conn *c)
{
	int ce = 0, ue = 0;
	if (c->state == CONN_HANDED) {
		/* Another process may be using the sockets now. */
		ev_io_stop(c->w->loop, &c->cli_io);
		ev_io_stop(c->w->loop, &c->up_io);
		return;
	}
	/* What each side's transport waits for, given what the connection
	 * wants from it: read when there is room, write when bytes are owed
	 * (a TLS transport may turn either around, or wait on a handshake). */
	bool cli_rd = conn_reads_client(c), up_rd = false;
	ce = transport_interest(&c->cli, cli_rd,
	    c->fr.resp.fwd || c->fr.resp.out || c->fr.resp.piped);
	if (conn_fsm_open(c->state) && !c->up_eof) {
		up_rd = conn_dir_room(c, &c->fr.resp);
		ue = transport_interest(&c->up, up_rd, c->fr.req.fwd || c->fr.req.piped);
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
	return frame_owes_nothing(&c->fr) && !frame_req_partial(&c->fr) && !c->cli_eof;
}

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
	enum conn_leg leg = conn_fsm_leg(c->state);
	if (c->state == CONN_HANDED)
		return;  /* (its timer is stopped; nothing of it runs here) */
	if (leg == CONN_LEG_WAIT_METADATA) {
		snprintf(c->why, sizeof c->why, "timed out waiting for broker addresses");
		conn_close(c, LOG_WARN, "connection closed");
		return;
	}
	if (leg == CONN_LEG_PROXY_HEADER) {
		/* The header and the TLS handshake after it share this one
		 * deadline (a slow header leaves less for the handshake). */
		METRIC_ADD(w->m, proxy_header_timeout, 1);
		snprintf(c->why, sizeof c->why, "PROXY protocol header not complete within "
		    "request_timeout (%llu ms, %zu bytes of it read)",
		    (unsigned long long)w->cl->request_timeout_ms, c->pp_have);
		conn_close(c, LOG_INFO, "connection closed");
		return;
	}
	if (leg == CONN_LEG_TLS_HANDSHAKE) {
		/* A stalled handshake holds a descriptor and a session: it
		 * gets request_timeout, like a stalled request frame. */
		METRIC_ADD(w->m, tls_handshake_failures, 1);
		snprintf(c->why, sizeof c->why, "TLS handshake not complete within "
		    "request_timeout (%llu ms)", (unsigned long long)w->cl->request_timeout_ms);
		conn_close(c, LOG_INFO, "connection closed");
		return;
	}
	if (leg != CONN_LEG_OPEN)
		return;
	ev_tstamp now = ev_now(loop), rt = conn_request_timeout(c), next = 0;
	if (conn_fsm_draining(c->state) && c->drain_grace_until && now >= c->drain_grace_until) {
		/* The fresh connection's grace is over: re-evaluate the drain. */
		c->drain_grace_until = 0;
		conn_step(c, false, false);
		return;
	}
	if (c->state == CONN_OPEN_SPREAD) {
		if (now >= c->close_at) {
			/* Its turn in drain_spread: close at the next boundary. */
			conn_drain_one(c);
			return;
		}
		next = c->close_at;
	}
	if (c->state == CONN_OPEN && c->expire_at) {
		if (now >= c->expire_at) {
			/* connection_max_age: close at the next request boundary */
			conn_age_expire(c);
			return;
		}
		if (!next || c->expire_at < next)
			next = c->expire_at;
	}
	if (c->fr.req_since) {
		ev_tstamp due = c->fr.req_since + rt;
		if (due <= now && (c->fr.req.fwd || c->fr.req.piped)) {
			/* The upstream is not taking the bytes we have: that
			 * time is not the client's. Give it a fresh period. */
			c->fr.req_since = now;
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
			    c->fr.fifo_len);
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

/* ---- lifecycle ------------------------------------------------------------ */

/* A connection on client socket fd, not connected upstream yet, in the
 * worker's list. NULL (fd not closed) when out of memory. */
struct conn *
conn_new(struct worker *w, int fd, int broker_index)
{
	struct conn *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	c->w = w;
	c->broker_index = broker_index;
	const struct frame_limits lim = {
		.max_frame_bytes = w->cl->max_frame_bytes,
		.sasl_max_frame_bytes = w->cl->sasl_max_frame_bytes,
		.max_inflight = w->cl->max_inflight,
		.buf_size = WORKER_BUF_SIZE,
	};
	const struct kc_broker_map map = { .map = conn_map_broker, .ctx = c };
	frame_init(&c->fr, &lim, w->m, &map);
	transport_plain_init(&c->cli, fd);
	c->up.fd = -1;
	ev_io_init(&c->cli_io, conn_cli_cb, fd, EV_READ);
	c->cli_io.data = c;
	ev_io_init(&c->up_io, conn_up_cb, 0, EV_READ);
	c->up_io.data = c;
	ev_timer_init(&c->timer, conn_timer_cb, 0., 0.);
	c->timer.data = c;
	c->row = CONN_ROW_GONE;
	c->soft = CONNTAB_B_NONE;
	c->next = w->conns;
	if (w->conns)
		w->conns->prev = c;
	w->conns = c;
	w->n_conns++;
	METRIC_ADD(w->m, connections_active, 1);
	worker_conns_changed(w);
	c->last_active = ev_now(w->loop);
	conn_peer_init(c);
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
		snprintf(c->why, sizeof c->why, "drained");
		METRIC_ADD(w->m, connections_drained, 1);
		conn_free(c);
		return;
	}
	if (w->cl->proxy_protocol != CFG_PROXY_OFF) {
		/* a PROXY header first, from a trusted balancer (conn_setup.c) */
		int r = conn_proxy_begin(c);
		if (r < 0) {
			conn_close(c, c->quiet ? LOG_DEBUG : LOG_WARN, "connection closed");
			return;
		}
		if (r == 0) {
			conn_step(c, true, false);  /* the header may be there already */
			return;
		}
	}
	conn_start(c, true);
}

