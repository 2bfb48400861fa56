/*
 * transport — the plain TCP transport; see transport.h.
 */
#include "worker/transport.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

static ssize_t
plain_read(struct transport *t, void *buf, size_t len)
{
	ssize_t n;
	do
		n = recv(t->fd, buf, len, 0);
	while (n == -1 && errno == EINTR);
	return n;
}

static ssize_t
plain_writev(struct transport *t, const struct iovec *iov, int iovcnt)
{
	struct msghdr mh = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
	ssize_t n;
	do
		n = sendmsg(t->fd, &mh, MSG_NOSIGNAL);
	while (n == -1 && errno == EINTR);
	return n;
}

static void
plain_close(struct transport *t)
{
	close(t->fd);
	t->fd = -1;
}

static const struct transport_ops plain_ops = {
	.name = "tcp",
	.read = plain_read,
	.writev = plain_writev,
	.close = plain_close,
};

void
transport_plain_init(struct transport *t, int fd)
{
	t->ops = &plain_ops;
	t->fd = fd;
	t->impl = NULL;
}

bool
transport_movable(const struct transport *t)
{
	return t->fd < 0 || t->ops == &plain_ops;
}
