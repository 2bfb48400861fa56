/*
 * conn_handover — how a connection leaves its generation (drain, spread,
 * handover) and how the next generation adopts one; see conn.h ("Reload")
 * and worker/handover.h for the pure decisions this file carries out.
 */
#include "worker/conn_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "worker/upstream.h"

/* All pending bytes of a boundary fit a record. */
_Static_assert(WORKER_BUF_SIZE <= IPC_CONN_PENDING_MAX, "pending bytes must fit the record");

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

/* The drain of one connection (IPC_DRAIN, or a spread connection's turn):
 * stop at the next request boundary, serve the requests already received,
 * give a fresh connection's first request CONN_DRAIN_GRACE to arrive
 * (conn_event: drain-credit), then close. May free c. */
void
conn_drain_one(struct conn *c)
{
	struct worker *w = c->w;
	if (!conn_event(c, CONN_E_DRAIN))
		return;
	if (!conn_fsm_open(c->state)) {
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
		if (forced && c->state == CONN_HANDED) {
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
	struct handover_view v = {
		.upstream_open = conn_fsm_open(c->state),
		/* (a raw SASL exchange cannot continue elsewhere) */
		.movable = conn_movable(c) && sasl_movable(&c->fr.sasl),
		.owes = !frame_owes_nothing(&c->fr),
		.frame_partial = c->fr.req.frame_left > 0 || c->fr.req.skip_left > 0,
		.resp_unparsed = frame_resp_unparsed(&c->fr) > 0,
		.cli_eof = c->cli_eof,
		.up_eof = c->up_eof,
		.pending = frame_req_unparsed(&c->fr),
	};
	return v;
}

/* Send c to the new generation: CONN_OUT with its record, the request
 * bytes read and not parsed, and its sockets. 1 sent (c is silent from now
 * on), 0 not now (the window is full: c waits), -1 not sent. */
static int
conn_handover_send(struct conn *c)
{
	struct worker *w = c->w;
	if (w->handover_out >= WORKER_HANDOVER_WINDOW) {
		if (!conn_fsm_held(c->state))
			conn_event(c, CONN_E_HOLD);
		return 0;
	}
	bool up = conn_fsm_open(c->state);
	size_t pending = frame_req_unparsed(&c->fr);
	struct ipc_conn_record rec;
	struct ipc_conn_client cc;
	size_t head = sizeof rec + sizeof cc;
	uint8_t *msg = malloc(head + pending);
	if (!msg)
		return -1;
	handover_record_init(&rec, w->handover_seq + 1, c->broker_index, c->upstream_try, up,
	    c->fr.requests, pending, sasl_encode(&c->fr.sasl));
	/* who it is and since when: the next worker keeps its real address,
	 * its age (connection_max_age) and what it said of itself */
	struct handover_client hc = {
		.addr = c->peer, .proxied = c->proxied, .since_ms = c->born_wall_ms,
		.age_ms = (uint64_t)((ev_now(w->loop) - c->born) * 1000.0),
		.age_rnd = c->age_rnd, .ci = c->fr.ci,
	};
	handover_client_encode(&rec, &cc, &hc);
	memcpy(msg, &rec, sizeof rec);
	memcpy(msg + sizeof rec, &cc, sizeof cc);
	if (pending)
		memcpy(msg + head, c->fr.req.buf + c->fr.req.start + c->fr.req.fwd, pending);
	int fds[2] = { c->cli.fd, c->up.fd };
	int r = worker_ipc_send_fds(w, IPC_CONN_OUT, msg, head + pending, fds, up ? 2 : 1);
	int err = errno;
	/* the pending bytes may hold a SASL token: no copy is left behind */
	sodium_memzero(msg, head + pending);
	free(msg);
	if (r == -1) {
		log_debug("connection not handed over", "error=\"%s\"", strerror(err));
		return -1;
	}
	c->ho_id = ++w->handover_seq;
	conn_event(c, CONN_E_HANDED);  /* silent from now on (conn_fsm.h: handed) */
	log_debug("connection handed over", "id=%llu upstream=%s pending=%zu requests=%llu",
	    (unsigned long long)c->ho_id, up ? "open" : "none", pending,
	    (unsigned long long)c->fr.requests);
	return 1;
}

/* At the end of an event of a connection leaving by handover: move it if it
 * is at a boundary with nothing owed. 0 waiting (continue), 1 handed over
 * or finished as a drain (the drain ran), -1 close (why set). */
int
conn_handover_try(struct conn *c)
{
	if (c->state == CONN_HANDED || conn_fsm_held(c->state))
		return c->state == CONN_HANDED ? 1 : 0;
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
	conn_event(c, CONN_E_NO_MOVE);
	return conn_pump(c, false, false) < 0 ? -1 : 1;
}

/* A connection that leaves by closing (its upstream changed, handover =
 * off, or it cannot move: TLS): open ones are served until a random time
 * in the drain_spread window, then close at a request boundary; one not
 * open yet (connecting upstream, or a TLS handshake, which cutting would
 * fail) finishes like a drained connection: the handshake completes, a
 * first request on its way is served, then it closes at a boundary. */
static void
conn_spread_one(struct conn *c)
{
	if (!conn_fsm_open(c->state)) {
		conn_drain_one(c);
		return;
	}
	conn_event(c, CONN_E_SPREAD);
}

void
conn_handover_all(struct worker *w)
{
	struct conn *c = w->conns, *next;
	for (; c; c = next) {
		next = c->next;
		if (!conn_movable(c) || conn_fsm_leg(c->state) == CONN_LEG_PROXY_HEADER) {
			/* a TLS session stays in this process, and so do the
			 * bytes of a PROXY header read so far */
			conn_spread_one(c);
			continue;
		}
		/* Stop at the next request boundary (conn_event: no-credit). */
		conn_event(c, CONN_E_HANDOVER);
		conn_step(c, false, false);
	}
}

void
conn_spread_all(struct worker *w)
{
	struct conn *c = w->conns, *next;
	for (; c; c = next) {
		next = c->next;
		conn_spread_one(c);
	}
}

/* Connections held back by the window, while there is room. */
static void
conn_handover_resume(struct worker *w)
{
	struct conn *c = w->conns, *next;
	for (; c && w->handover_waiting && w->handover_out < WORKER_HANDOVER_WINDOW; c = next) {
		next = c->next;
		if (!conn_fsm_held(c->state))
			continue;
		conn_event(c, CONN_E_RESUME);
		conn_step(c, false, false);
	}
}

void
conn_handover_done(struct worker *w, const struct ipc_conn_ack *ack)
{
	struct conn *c = w->conns;
	while (c && !(c->state == CONN_HANDED && c->ho_id == ack->id))
		c = c->next;
	if (!c) {
		log_debug("handover outcome for no connection here", "id=%llu adopted=%u",
		    (unsigned long long)ack->id, ack->adopted);
		return;
	}
	conn_event(c, CONN_E_DONE);
	if (ack->adopted == IPC_ADOPT_YES) {
		/* The new generation owns it: close our copies only. */
		METRIC_ADD(w->m, connections_handed_over, 1);
		snprintf(c->why, sizeof c->why, "handed over");
	} else if (ack->adopted != IPC_ADOPT_NO) {
		/* Nobody knows (no answer in time): a late adopter may be serving
		 * it, so never shut it down under it; close our copies only. If
		 * nobody took it, this last close ends it cleanly (nothing owed). */
		METRIC_ADD(w->m, connections_drained, 1);
		snprintf(c->why, sizeof c->why, "handover outcome unknown");
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
		if (c->state == CONN_HANDED) {
			/* No answer can come. Whoever holds its sockets now (the
			 * new worker, if it adopted it) keeps serving it; if
			 * nobody does, this close is the clean one. */
			METRIC_ADD(w->m, connections_drained, 1);
			snprintf(c->why, sizeof c->why, "control channel closed during handover");
			conn_close(c, LOG_DEBUG, "connection closed");
		} else if (conn_fsm_handover(c->state)) {
			conn_event(c, CONN_E_NO_MOVE);
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
	else if (a.rec.pending_len && !(c->fr.req.buf = worker_buf_get(w)))
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
	c->fr.requests = a.rec.requests;
	c->fr.seen_request = a.seen_request;
	c->fr.sasl = a.sasl;
	if (a.has_client)
		conn_peer_adopted(c, &a.client);
	if (a.rec.pending_len) {
		/* Read by the old worker, not forwarded: first in line. */
		memcpy(c->fr.req.buf, a.pending, a.rec.pending_len);
		c->fr.req.start = 0;
		c->fr.req.end = a.rec.pending_len;
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
	conn_event(c, CONN_E_ADOPTED);
	conn_step(c, false, false);
}
