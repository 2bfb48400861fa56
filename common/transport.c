/*
 * transport — the plain TCP transport; see transport.h.
 */
#include "common/transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

const char *
transport_state_str(enum transport_state s)
{
	switch (s) {
	case TRANSPORT_CLOSED: return "closed";
	case TRANSPORT_HANDSHAKE: return "handshake";
	case TRANSPORT_OPEN: return "open";
	case TRANSPORT_SHUTDOWN: return "shutdown";
	}
	return "?";
}

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

/* splice(2) both ways, non-blocking on both ends; SPLICE_F_MOVE is a hint
 * (pages are moved rather than copied where the kernel can). A socket whose
 * peer is gone raises SIGPIPE here (splice has no MSG_NOSIGNAL): processes
 * using it ignore SIGPIPE. */
static ssize_t
plain_splice_in(struct transport *t, int pipe_wr, size_t len)
{
	ssize_t n;
	do
		n = splice(t->fd, NULL, pipe_wr, NULL, len, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	while (n == -1 && errno == EINTR);
	return n;
}

static ssize_t
plain_splice_out(struct transport *t, int pipe_rd, size_t len)
{
	ssize_t n;
	do
		n = splice(pipe_rd, NULL, t->fd, NULL, len, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	while (n == -1 && errno == EINTR);
	return n;
}

static int
plain_handshake(struct transport *t)
{
	t->state = TRANSPORT_OPEN;
	return 1;
}

static int
plain_shutdown(struct transport *t)
{
	if (t->state == TRANSPORT_SHUTDOWN)
		return 1;
	if (shutdown(t->fd, SHUT_WR) == -1)
		return -1;
	t->state = TRANSPORT_SHUTDOWN;
	t->hs_want = TRANSPORT_WANT_NONE;
	return 1;
}

static int
plain_peer(const struct transport *t, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	if (getpeername(t->fd, (struct sockaddr *)&ss, &sl) == -1)
		goto unknown;
	char ip[INET6_ADDRSTRLEN];
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)&ss;
		if (!inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof ip))
			goto unknown;
		snprintf(buf, len, "%s:%u", ip, ntohs(s4->sin_port));
		return 0;
	}
	if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&ss;
		if (!inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof ip))
			goto unknown;
		snprintf(buf, len, "[%s]:%u", ip, ntohs(s6->sin6_port));
		return 0;
	}
	if (ss.ss_family == AF_UNIX) {
		const struct sockaddr_un *su = (const struct sockaddr_un *)&ss;
		size_t plen = sl > offsetof(struct sockaddr_un, sun_path)
		    ? sl - offsetof(struct sockaddr_un, sun_path) : 0;
		if (plen == 0 || su->sun_path[0] == 0)
			snprintf(buf, len, "unix");
		else
			snprintf(buf, len, "unix:%.*s", (int)plen, su->sun_path);
		return 0;
	}
unknown:
	snprintf(buf, len, "?");
	return -1;
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
	.pending = NULL,         /* the kernel holds every byte: nothing here */
	.handshake = plain_handshake,
	.shutdown = plain_shutdown,
	.peer = plain_peer,
	.close = plain_close,
	.movable = true,
	.splice_in = plain_splice_in,
	.splice_out = plain_splice_out,
};

void
transport_plain_init(struct transport *t, int fd)
{
	t->ops = &plain_ops;
	t->fd = fd;
	t->state = fd >= 0 ? TRANSPORT_OPEN : TRANSPORT_CLOSED;
	t->rd_want = TRANSPORT_WANT_READ;
	t->wr_want = TRANSPORT_WANT_WRITE;
	t->hs_want = TRANSPORT_WANT_NONE;
	t->impl = NULL;
}

int
transport_peer(const struct transport *t, char *buf, size_t len)
{
	if (len == 0)
		return -1;
	if (!t->ops || t->fd < 0) {
		snprintf(buf, len, "?");
		return -1;
	}
	return t->ops->peer(t, buf, len);
}
