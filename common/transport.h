/*
 * transport — how a connection moves bytes, behind a table of function
 * pointers so the Kafka layer (worker/conn.c, worker/upstream.c) never knows
 * whether it talks plain TCP or TLS. Plain TCP is here; the TLS transport
 * (common/tls.h, OpenSSL) fills the same table and the same state fields,
 * and its callers do not change.
 *
 * The steps of a connection: init (accepted or connected socket) ->
 * handshake until it answers 1 (plain: at once) -> read/writev -> optional
 * shutdown (our write side; TLS: close_notify) -> close.
 *
 * Conventions (as read(2)/writev(2)): > 0 bytes moved; 0 from read = peer
 * closed its write side; -1 with errno. errno EAGAIN means "blocked": the
 * step waits for the socket readiness the transport recorded in
 * `rd_want` (after read), `wr_want` (after writev) or `hs_want` (after
 * handshake/shutdown) — TRANSPORT_WANT_READ or TRANSPORT_WANT_WRITE. For
 * plain TCP a read waits for readable and a write for writable; a TLS read
 * may need the socket writable (and a write readable). Callers never
 * guess: they ask transport_interest() which events to watch.
 *
 * transport_pending() is the number of bytes already inside the transport
 * (decrypted, not yet returned by read): while it is non-zero the caller
 * must read again without waiting for the socket, which may never become
 * readable for them. Plain TCP buffers nothing and answers 0.
 *
 * The hot path (read, writev, interest, pending) costs what raw
 * recv/sendmsg cost plus one indirect call: the wrappers are inline, the
 * state is plain fields, nothing is allocated per call.
 *
 * Zero copy: a transport whose socket carries the stream's bytes as they
 * are (plain TCP: no record layer in this process) also moves them
 * between its socket and a pipe with splice(2), never through user space
 * (transport_splice_in/out, same conventions as read/writev; EAGAIN means
 * the socket blocked, or the pipe: the caller knows which from what it put
 * in the pipe). TLS has no such path (no kernel TLS here): its ops are
 * NULL and transport_can_splice() says no.
 */
#ifndef FERRY_COMMON_TRANSPORT_H
#define FERRY_COMMON_TRANSPORT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Socket readiness a blocked step waits for. The values are libev's EV_READ
 * and EV_WRITE (conn.c asserts it) so they go to ev_io_set unchanged. */
enum transport_want {
	TRANSPORT_WANT_NONE = 0,
	TRANSPORT_WANT_READ = 1,
	TRANSPORT_WANT_WRITE = 2,
};

enum transport_state {
	TRANSPORT_CLOSED = 0,    /* no socket */
	TRANSPORT_HANDSHAKE,     /* handshake() must answer 1 before read/write */
	TRANSPORT_OPEN,          /* bytes flow */
	TRANSPORT_SHUTDOWN,      /* our write side closed (or closing: hs_want) */
};

const char *transport_state_str(enum transport_state s);

struct transport;

struct transport_ops {
	const char *name;        /* "tcp", "tls" */
	ssize_t (*read)(struct transport *t, void *buf, size_t len);
	ssize_t (*writev)(struct transport *t, const struct iovec *iov, int iovcnt);
	/* bytes buffered inside the transport; NULL = never any (plain) */
	size_t (*pending)(const struct transport *t);
	/* 1 done (state OPEN), 0 blocked (errno EAGAIN, hs_want set), -1 error */
	int (*handshake)(struct transport *t);
	/* 1 done, 0 blocked (hs_want set), -1 error: closes our write side */
	int (*shutdown)(struct transport *t);
	/* peer identity into buf (always NUL-terminated); 0, or -1 unknown */
	int (*peer)(const struct transport *t, char *buf, size_t len);
	void (*close)(struct transport *t);
	/* the connection can continue in another process from its socket
	 * alone (live handover): no state lives in this process */
	bool movable;
	/* up to len bytes from the socket into the pipe's write end, and from
	 * the pipe's read end into the socket (splice(2), non-blocking);
	 * NULL = not possible (the bytes on the socket are not the stream's) */
	ssize_t (*splice_in)(struct transport *t, int pipe_wr, size_t len);
	ssize_t (*splice_out)(struct transport *t, int pipe_rd, size_t len);
};

struct transport {
	const struct transport_ops *ops;
	int fd;                  /* -1 when closed */
	uint8_t state;           /* enum transport_state */
	uint8_t rd_want;         /* what a blocked read waits for */
	uint8_t wr_want;         /* what a blocked write waits for */
	uint8_t hs_want;         /* what a blocked handshake/shutdown waits for */
	void *impl;              /* per-transport state (TLS session) */
};

/* Plain TCP over an already connected (or accepted) non-blocking fd: no
 * handshake (state OPEN at once). Both sides of a connection use it. */
void transport_plain_init(struct transport *t, int fd);

/* Whether the connection can continue in another process from its socket
 * alone (live handover on reload): true for plain TCP and for a transport
 * without a socket; a userspace TLS session cannot move. */
static inline bool
transport_movable(const struct transport *t)
{
	return t->fd < 0 || !t->ops || t->ops->movable;
}

/* Whether bytes can move between this transport's socket and a pipe
 * without passing through user space (plain TCP, handshake done). */
static inline bool
transport_can_splice(const struct transport *t)
{
	/* (SHUTDOWN: our write side is closed, the socket still reads and
	 * its peer's bytes are still the stream's) */
	return t->fd >= 0 && t->ops && t->ops->splice_in &&
	    (t->state == TRANSPORT_OPEN || t->state == TRANSPORT_SHUTDOWN);
}

/* Up to len bytes from the socket into pipe_wr: > 0 moved, 0 the peer
 * closed its write side, -1 with errno (EAGAIN: the socket has nothing,
 * or the pipe is full; rd_want is set). Only when transport_can_splice. */
static inline ssize_t
transport_splice_in(struct transport *t, int pipe_wr, size_t len)
{
	return t->ops->splice_in(t, pipe_wr, len);
}

/* Up to len bytes from pipe_rd into the socket: > 0 moved, -1 with errno
 * (EAGAIN: the socket's send buffer is full; wr_want is set). */
static inline ssize_t
transport_splice_out(struct transport *t, int pipe_rd, size_t len)
{
	return t->ops->splice_out(t, pipe_rd, len);
}

static inline const char *
transport_name(const struct transport *t)
{
	return t->ops ? t->ops->name : "none";
}

/* Handshake done: read and writev may be called. */
static inline bool
transport_ready(const struct transport *t)
{
	return t->state == TRANSPORT_OPEN;
}

static inline ssize_t
transport_read(struct transport *t, void *buf, size_t len)
{
	return t->ops->read(t, buf, len);
}

static inline ssize_t
transport_writev(struct transport *t, const struct iovec *iov, int iovcnt)
{
	return t->ops->writev(t, iov, iovcnt);
}

static inline ssize_t
transport_write(struct transport *t, const void *buf, size_t len)
{
	struct iovec iov = { (void *)buf, len };
	return t->ops->writev(t, &iov, 1);
}

static inline size_t
transport_pending(const struct transport *t)
{
	return t->ops && t->ops->pending ? t->ops->pending(t) : 0;
}

/* One handshake step: 1 done (or nothing to do), 0 blocked (wait for
 * transport_interest), -1 error (errno). */
static inline int
transport_handshake(struct transport *t)
{
	if (t->state != TRANSPORT_HANDSHAKE) {
		if (t->state == TRANSPORT_OPEN)
			return 1;
		errno = EBADF;
		return -1;
	}
	return t->ops->handshake(t);
}

/* One step of closing our write side (the peer reads EOF; TLS sends
 * close_notify): 1 done, 0 blocked, -1 error (errno). */
static inline int
transport_shutdown(struct transport *t)
{
	if (t->state == TRANSPORT_CLOSED) {
		errno = EBADF;
		return -1;
	}
	return t->ops->shutdown(t);
}

/* The socket events to watch, given whether the caller wants to read (it
 * has room) and to write (it has bytes). While a handshake or shutdown
 * step is blocked, that step's want; else the wants of the blocked read
 * and write. */
static inline int
transport_interest(const struct transport *t, bool reading, bool writing)
{
	if (t->fd < 0)
		return 0;
	if (t->state != TRANSPORT_OPEN)
		return t->hs_want | (reading && t->state == TRANSPORT_SHUTDOWN ? t->rd_want : 0);
	return (reading ? t->rd_want : 0) | (writing ? t->wr_want : 0);
}

/* Who is at the other end: "ADDR:PORT" for TCP ("[ADDR]:PORT" for IPv6,
 * "unix" for an unnamed local socket); a TLS transport answers the
 * certificate subject when the peer sent one. -1 when unknown (buf says
 * "?"). Not for the hot path (a getpeername). */
int transport_peer(const struct transport *t, char *buf, size_t len);

static inline void
transport_close(struct transport *t)
{
	if (t->ops && t->fd >= 0)
		t->ops->close(t);
	t->fd = -1;
	t->state = TRANSPORT_CLOSED;
}

#endif
