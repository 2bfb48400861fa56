/*
 * Unit tests for the plain TCP transport (common/transport.c) over a local
 * socketpair, and one loopback TCP pair for the peer identity: read and
 * write, what a blocked step waits for (transport_interest), pending bytes
 * (none for plain), handshake and shutdown steps, EOF and half-close,
 * movability for live handover.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/transport.h"

static int sp[2];
static struct transport a, b;

static void
setup(void)
{
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp), 0);
	transport_plain_init(&a, sp[0]);
	transport_plain_init(&b, sp[1]);
}

static void
teardown(void)
{
	transport_close(&a);
	transport_close(&b);
}

TestSuite(transport, .init = setup, .fini = teardown, .timeout = 10);

Test(transport, plain_is_open_at_once)
{
	cr_assert_str_eq(transport_name(&a), "tcp");
	cr_assert_eq(a.state, TRANSPORT_OPEN);
	cr_assert(transport_ready(&a));
	cr_assert_eq(transport_handshake(&a), 1);
	cr_assert_eq(a.state, TRANSPORT_OPEN);
	cr_assert_str_eq(transport_state_str(TRANSPORT_HANDSHAKE), "handshake");
}

Test(transport, read_write_round_trip)
{
	struct iovec iov[2] = { { "hello ", 6 }, { "world", 5 } };
	cr_assert_eq(transport_writev(&a, iov, 2), 11);
	char buf[32];
	cr_assert_eq(transport_read(&b, buf, sizeof buf), 11);
	cr_assert_eq(memcmp(buf, "hello world", 11), 0);
	cr_assert_eq(transport_write(&b, "x", 1), 1);
	cr_assert_eq(transport_read(&a, buf, 1), 1);
	cr_assert_eq(buf[0], 'x');
}

Test(transport, read_blocks_on_readable)
{
	char buf[8];
	errno = 0;
	cr_assert_eq(transport_read(&a, buf, sizeof buf), -1);
	cr_assert(errno == EAGAIN || errno == EWOULDBLOCK);
	cr_assert_eq(a.rd_want, TRANSPORT_WANT_READ);
	cr_assert_eq(transport_interest(&a, true, false), TRANSPORT_WANT_READ);
	cr_assert_eq(transport_interest(&a, false, false), 0);
	cr_assert_eq(transport_interest(&a, true, true), TRANSPORT_WANT_READ | TRANSPORT_WANT_WRITE);
}

Test(transport, write_blocks_on_writable)
{
	static char chunk[65536];
	ssize_t n;
	size_t total = 0;
	while ((n = transport_write(&a, chunk, sizeof chunk)) > 0)
		total += (size_t)n;
	cr_assert_eq(n, -1);
	cr_assert(errno == EAGAIN || errno == EWOULDBLOCK);
	cr_assert_gt(total, 0);
	cr_assert_eq(a.wr_want, TRANSPORT_WANT_WRITE);
	cr_assert_eq(transport_interest(&a, false, true), TRANSPORT_WANT_WRITE);
	/* the peer drains: writing works again */
	size_t got = 0;
	while ((n = transport_read(&b, chunk, sizeof chunk)) > 0)
		got += (size_t)n;
	cr_assert_eq(got, total);
	cr_assert_gt(transport_write(&a, "y", 1), 0);
}

Test(transport, plain_holds_nothing_pending)
{
	cr_assert_eq(transport_write(&a, "abcdef", 6), 6);
	cr_assert_eq(transport_pending(&b), 0);
	char buf[2];
	cr_assert_eq(transport_read(&b, buf, 2), 2);
	/* the rest is in the kernel, not the transport */
	cr_assert_eq(transport_pending(&b), 0);
	char rest[8];
	cr_assert_eq(transport_read(&b, rest, sizeof rest), 4);
	cr_assert_eq(memcmp(rest, "cdef", 4), 0);
}

Test(transport, eof_after_close)
{
	cr_assert_eq(transport_write(&a, "zz", 2), 2);
	transport_close(&a);
	cr_assert_eq(a.fd, -1);
	cr_assert_eq(a.state, TRANSPORT_CLOSED);
	cr_assert_eq(transport_interest(&a, true, true), 0);
	char buf[8];
	cr_assert_eq(transport_read(&b, buf, sizeof buf), 2);
	cr_assert_eq(transport_read(&b, buf, sizeof buf), 0);
	/* writing to a closed peer fails with an error, not a signal */
	ssize_t n = transport_write(&b, "q", 1);
	cr_assert_eq(n, -1);
	cr_assert(errno == EPIPE || errno == ECONNRESET);
}

Test(transport, half_close)
{
	cr_assert_eq(transport_write(&a, "req", 3), 3);
	cr_assert_eq(transport_shutdown(&a), 1);
	cr_assert_eq(a.state, TRANSPORT_SHUTDOWN);
	cr_assert_eq(transport_shutdown(&a), 1);  /* again: nothing to do */
	cr_assert(!transport_ready(&a));
	/* still reading: the peer answers after our FIN */
	cr_assert_eq(transport_interest(&a, true, true), TRANSPORT_WANT_READ);
	char buf[8];
	cr_assert_eq(transport_read(&b, buf, sizeof buf), 3);
	cr_assert_eq(transport_read(&b, buf, sizeof buf), 0);   /* EOF seen */
	cr_assert_eq(transport_write(&b, "resp", 4), 4);
	cr_assert_eq(transport_read(&a, buf, sizeof buf), 4);
	cr_assert_eq(memcmp(buf, "resp", 4), 0);
	cr_assert_eq(transport_shutdown(&b), 1);
	cr_assert_eq(transport_read(&a, buf, sizeof buf), 0);
}

Test(transport, peer_of_a_socketpair)
{
	char buf[64];
	cr_assert_eq(transport_peer(&a, buf, sizeof buf), 0);
	cr_assert_str_eq(buf, "unix");
	transport_close(&a);
	cr_assert_eq(transport_peer(&a, buf, sizeof buf), -1);
	cr_assert_str_eq(buf, "?");
	/* no step on a closed transport */
	cr_assert_eq(transport_handshake(&a), -1);
	cr_assert_eq(errno, EBADF);
	cr_assert_eq(transport_shutdown(&a), -1);
	cr_assert_eq(errno, EBADF);
}

Test(transport, movable)
{
	cr_assert(transport_movable(&a));
	struct transport none = { .fd = -1 };
	cr_assert(transport_movable(&none));
	/* a transport keeping state in this process cannot move */
	static const struct transport_ops stateful = { .name = "tls", .movable = false };
	struct transport t = { .ops = &stateful, .fd = 7, .state = TRANSPORT_OPEN };
	cr_assert(!transport_movable(&t));
}

/* A transport in handshake waits for what its handshake step wants,
 * whatever the caller wants to move. */
Test(transport, interest_follows_the_transport)
{
	struct transport t = a;
	t.state = TRANSPORT_HANDSHAKE;
	t.hs_want = TRANSPORT_WANT_WRITE;
	cr_assert_eq(transport_interest(&t, true, false), TRANSPORT_WANT_WRITE);
	t.state = TRANSPORT_OPEN;
	t.rd_want = TRANSPORT_WANT_WRITE;   /* a TLS read that must write first */
	cr_assert_eq(transport_interest(&t, true, false), TRANSPORT_WANT_WRITE);
	cr_assert_eq(transport_interest(&t, false, false), 0);
}

Test(transport, peer_of_loopback_tcp)
{
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(l, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof sa;
	cr_assert_eq(bind(l, (struct sockaddr *)&sa, sizeof sa), 0);
	cr_assert_eq(listen(l, 1), 0);
	cr_assert_eq(getsockname(l, (struct sockaddr *)&sa, &sl), 0);
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_eq(connect(c, (struct sockaddr *)&sa, sizeof sa), 0);
	int s = accept(l, NULL, NULL);
	cr_assert_geq(s, 0);
	close(l);
	struct transport tc, ts;
	transport_plain_init(&tc, c);
	transport_plain_init(&ts, s);
	char want[64], got[64];
	snprintf(want, sizeof want, "127.0.0.1:%u", ntohs(sa.sin_port));
	cr_assert_eq(transport_peer(&tc, got, sizeof got), 0);
	cr_assert_str_eq(got, want);
	cr_assert_eq(transport_peer(&ts, got, sizeof got), 0);
	cr_assert(strncmp(got, "127.0.0.1:", 10) == 0, "%s", got);
	transport_close(&tc);
	transport_close(&ts);
}

/* Zero copy: bytes move socket -> pipe -> socket without a buffer; an
 * empty socket and a full pipe say EAGAIN; EOF is 0. */
Test(transport, splice_through_a_pipe)
{
	int p[2];
	cr_assert_eq(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	cr_assert(transport_can_splice(&a));
	cr_assert_eq(transport_write(&a, "hello", 5), 5);
	cr_assert_eq(transport_splice_in(&b, p[1], 100), 5);
	errno = 0;
	cr_assert_eq(transport_splice_in(&b, p[1], 100), -1);
	cr_assert_eq(errno, EAGAIN, "an empty socket");
	/* back the other way: b's bytes into a */
	cr_assert_eq(transport_splice_out(&b, p[0], 5), 5);
	char buf[8];
	cr_assert_eq(transport_read(&a, buf, sizeof buf), 5);
	cr_assert_eq(memcmp(buf, "hello", 5), 0);
	/* the pipe full: EAGAIN with bytes on the socket */
	int cap = fcntl(p[1], F_GETPIPE_SZ);
	char *big = calloc(1, (size_t)cap);
	cr_assert_eq(write(p[1], big, (size_t)cap), cap);
	cr_assert_eq(transport_write(&a, "x", 1), 1);
	errno = 0;
	cr_assert_eq(transport_splice_in(&b, p[1], 1), -1);
	cr_assert_eq(errno, EAGAIN, "a full pipe");
	free(big);
	/* EOF */
	char sink[4096];
	while (read(p[0], sink, sizeof sink) > 0)
		;
	cr_assert_eq(transport_splice_in(&b, p[1], 1), 1);
	shutdown(sp[0], SHUT_WR);
	cr_assert_eq(transport_splice_in(&b, p[1], 1), 0);
	/* closed: no splice */
	transport_close(&b);
	cr_assert_not(transport_can_splice(&b));
	close(p[0]);
	close(p[1]);
}
