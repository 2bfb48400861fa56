/*
 * transport — how a connection moves bytes, behind a struct of function
 * pointers so the Kafka layer never knows whether it talks plain TCP or
 * (later) TLS. Plain TCP is the only implementation today.
 *
 * Conventions (as read(2)/writev(2)): > 0 bytes moved; 0 from read = peer
 * closed; -1 with errno (EAGAIN = try again when the fd is ready for
 * t->want, which a TLS transport may set to the opposite direction).
 */
#ifndef FERRY_WORKER_TRANSPORT_H
#define FERRY_WORKER_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

struct transport;

struct transport_ops {
	const char *name;
	ssize_t (*read)(struct transport *t, void *buf, size_t len);
	ssize_t (*writev)(struct transport *t, const struct iovec *iov, int iovcnt);
	void (*close)(struct transport *t);
};

struct transport {
	const struct transport_ops *ops;
	int fd;          /* -1 when closed */
	void *impl;      /* per-transport state (TLS session) */
};

/* Plain TCP over an already connected (or connecting) non-blocking fd. */
void transport_plain_init(struct transport *t, int fd);

/* Whether the connection can continue in another process from its socket
 * alone (live handover on reload): true for plain TCP and for a transport
 * without a socket; a userspace TLS session cannot move. */
bool transport_movable(const struct transport *t);

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

static inline void
transport_close(struct transport *t)
{
	if (t->ops && t->fd >= 0)
		t->ops->close(t);
	t->fd = -1;
}

#endif
