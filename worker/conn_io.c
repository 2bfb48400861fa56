/*
 * conn_io — one direction of a connection moving its bytes: reading into
 * the direction's buffer, or for the rest of a pass-through frame into its
 * pipe (zero copy, worker/splice.h), and flushing what is owed to the other
 * side, in order (the buffer before the pipe, the pipe before any later
 * buffered byte). The decisions of which way the bytes go are pure
 * (splice_decide); this file carries them out over the transports. Part of
 * the connection module (conn_priv.h); conn.c's pump drives it.
 */
#include "worker/conn_priv.h"

#include <errno.h>


#include "common/tls.h"
#include "common/transport.h"
#include "worker/upstream.h"

/* ---- zero copy (worker/splice.h) ------------------------------------------ */

static struct conn_splice *
conn_sp(struct conn *c, const struct frame_dir *d)
{
	return &c->sp[d == &c->fr.resp];
}

void
conn_pipes_release(struct conn *c)
{
	struct frame_dir *dirs[2] = { &c->fr.req, &c->fr.resp };
	for (int i = 0; i < 2; i++) {
		if (dirs[i]->piped)
			splice_pool_drop(&c->w->splice, &c->sp[i].pipe);
		else
			splice_pool_put(&c->w->splice, &c->sp[i].pipe);
		dirs[i]->piped = 0;
	}
}

/* Which way the next bytes of d go: copied through its buffer, spliced,
 * or neither until the buffer is written (splice_decide). */
static enum splice_way
conn_splice_way(const struct conn *c, const struct frame_dir *d)
{
	bool req = d == &c->fr.req;
	const struct conn_splice *sp = &c->sp[!req];
	if (d->frame_left == 0 || sp->refused == d->frames)
		return SPLICE_COPY;
	struct splice_view v = {
		.enabled = c->w->cl->splice,
		.plain = transport_can_splice(&c->cli) && transport_can_splice(&c->up),
		.holding = sp->pipe.cap && sp->frame == d->frames,
		.frame_left = d->frame_left,
		.buffered = (d->buf ? d->end - d->start : 0) + (d->out ? d->out_len - d->out_off : 0),
		.threshold = SPLICE_THRESHOLD,
	};
	return splice_decide(&v);
}

/* Whether d can take bytes from its source now: room in its pipe when its
 * frame is spliced, none while its buffer must be written before a splice,
 * else room in its buffer. */
bool
conn_dir_room(const struct conn *c, const struct frame_dir *d)
{
	switch (conn_splice_way(c, d)) {
	case SPLICE_MOVE: {
		const struct splice_pipe *p = &c->sp[d == &c->fr.resp].pipe;
		/* (no pipe yet: one is taken, or the frame is copied) */
		return !p->cap || (!p->full && d->piped < p->cap);
	}
	case SPLICE_WAIT:
		return false;
	case SPLICE_COPY:
		break;
	}
	return frame_dir_has_room(&c->fr, d);
}

/* ---- writing ------------------------------------------------------------ */

/* A write failed with errno. A client that has closed (not just
 * half-closed) while responses were owed is a normal client, not an error. */
static int
write_failed(struct conn *c, bool to_upstream)
{
	if (!to_upstream && c->cli_eof && (errno == EPIPE || errno == ECONNRESET))
		return conn_end(c, "client closed the connection with %zu response(s) owed",
		    c->fr.fifo_len);
	return conn_fail(c, "write to %s: %s", to_upstream ? "upstream" : "client",
	    upstream_transport_error(to_upstream ? &c->up : &c->cli, errno));
}

/* Write the parsed pass-through bytes of d to t, then a rewritten frame.
 * 0 (*moved: anything was written), or -1 to close (why set). */
int
conn_dir_flush(struct conn *c, struct frame_dir *d, struct transport *t, bool to_upstream,
	       bool *moved)
{
	*moved = false;
	if (!transport_ready(t))
		return 0;  /* handshake first: transport_interest says what it waits for */
	/* The pipe first: its bytes came before anything in the buffer. */
	struct conn_splice *sp = conn_sp(c, d);
	while (d->piped) {
		ssize_t n = transport_splice_out(t, sp->pipe.rd, d->piped);
		if (n == -1) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return write_failed(c, to_upstream);
		}
		d->piped -= (size_t)n;
		sp->pipe.full = false;
		*moved = true;
		METRIC_ADD(c->w->m, bytes_spliced, n);
		if (to_upstream)
			METRIC_ADD(c->w->m, bytes_client_to_upstream, n);
		else
			METRIC_ADD(c->w->m, bytes_upstream_to_client, n);
	}
	if (sp->pipe.cap && (d->frame_left == 0 || sp->frame != d->frames))
		splice_pool_put(&c->w->splice, &sp->pipe);  /* its frame has left */
	while (d->fwd) {
		struct iovec iov = { d->buf + d->start, d->fwd };
		ssize_t n = transport_writev(t, &iov, 1);
		if (n == -1) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return write_failed(c, to_upstream);
		}
		d->start += (size_t)n;
		d->fwd -= (size_t)n;
		*moved = true;
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
					return 0;
				return write_failed(c, false);
			}
			d->out_off += (size_t)n;
			METRIC_ADD(c->w->m, bytes_upstream_to_client, n);
		}
		if (d->out_owned)
			free(d->out);
		d->out = NULL;
		d->out_owned = false;
		*moved = true;
	}
	return 0;
}

/* ---- reading ------------------------------------------------------------ */

/* The client or the upstream sent its FIN. Not closed yet: what is owed
 * and whole is still delivered (conn_pump decides when to close). */
static void
dir_eof(struct conn *c, bool from_client)
{
	if (from_client) {
		c->cli_eof = true;
		c->cli_eof_at = ev_now(c->w->loop);
	} else {
		c->up_eof = true;
	}
}

/* Read what t has into d: 0 (*moved: bytes were read; nothing on EAGAIN,
 * no room, or EOF: cli_eof / up_eof set; *filled: the read filled the
 * room), or -1 to close (why set). */
static int
dir_read(struct conn *c, struct frame_dir *d, struct transport *t, bool from_client,
	 bool *moved, bool *filled)
{
	*moved = *filled = false;
	if (t->state < TRANSPORT_OPEN)
		return 0;  /* handshake first (or closed) */
	if (!d->buf) {
		d->buf = worker_buf_get(c->w);
		if (!d->buf)
			return conn_fail(c, "out of memory");
		d->start = d->end = 0;
	}
	size_t room = frame_dir_room(&c->fr, d);
	if (!room)
		return 0;
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
		dir_eof(c, from_client);
		return 0;
	}
	d->end += (size_t)n;
	*filled = (size_t)n == room;
	*moved = true;
	return 0;
}

/* Splice what t has of d's current frame into d's pipe: the same
 * returns as dir_read. */
static int
dir_splice_in(struct conn *c, struct frame_dir *d, struct transport *t, bool from_client,
	      bool *moved, bool *filled)
{
	struct splice_pipe *p = &conn_sp(c, d)->pipe;
	*moved = *filled = false;
	size_t want = splice_amount(d->frame_left, p->cap, d->piped);
	if (!want || p->full) {
		*filled = true;   /* not tried: the socket may hold bytes */
		return 0;
	}
	ssize_t n = transport_splice_in(t, p->wr, want);
	if (n == -1) {
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			/* The socket is empty, or the pipe has no slot left
			 * (pipes count pages): with bytes in it, read again
			 * once some were written (the writer waits on them). */
			if (d->piped)
				p->full = true;
			return 0;
		}
		return conn_fail(c, "read from %s: %s", from_client ? "client" : "upstream",
		    upstream_transport_error(t, errno));
	}
	if (n == 0) {
		dir_eof(c, from_client);
		return 0;
	}
	d->piped += (size_t)n;
	frame_dir_bypass(&c->fr, d, (uint64_t)n);
	*moved = true;
	*filled = (size_t)n == want;
	return 0;
}

/* Read what t has for d, the way splice_decide says: spliced into its pipe
 * (taken from the worker's pool for a frame's rest), or into its buffer
 * (also when no pipe can be had). The same returns as dir_read. */
int
conn_dir_in(struct conn *c, struct frame_dir *d, struct transport *t, bool from_client, bool *moved,
	    bool *filled)
{
	switch (conn_splice_way(c, d)) {
	case SPLICE_WAIT:
		/* nothing read: the socket may still hold bytes once the
		 * buffer is written (the caller's loop comes back) */
		*moved = false;
		*filled = true;
		return 0;
	case SPLICE_MOVE: {
		struct conn_splice *sp = conn_sp(c, d);
		if (sp->pipe.cap || splice_pool_get(&c->w->splice, ev_now(c->w->loop),
		    &sp->pipe) == 0) {
			sp->frame = d->frames;
			return dir_splice_in(c, d, t, from_client, moved, filled);
		}
		sp->refused = d->frames;   /* copied, counted splice_fallbacks */
		break;
	}
	case SPLICE_COPY:
		break;
	}
	return dir_read(c, d, t, from_client, moved, filled);
}
