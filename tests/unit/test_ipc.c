/*
 * Unit tests for common/ipc: envelope encode/decode with exact size checks,
 * and a real SOCK_SEQPACKET round trip with file descriptors.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/ipc.h"

static uint8_t buf[sizeof(struct ipc_hdr) + IPC_MAX_PAYLOAD + 64];

Test(ipc, encode_decode_round_trip)
{
	struct ipc_drain d = { .deadline_ms = 30000 };
	ssize_t n = ipc_encode(buf, sizeof buf, IPC_DRAIN, 7, &d, sizeof d);
	cr_assert_eq(n, (ssize_t)(sizeof(struct ipc_hdr) + sizeof d));
	struct ipc_msg m = { 0 };
	char err[128];
	cr_assert_eq(ipc_decode(buf, (size_t)n, &m, err, sizeof err), 0, "%s", err);
	cr_expect_eq(m.hdr.type, IPC_DRAIN);
	cr_expect_eq(m.hdr.generation, 7);
	struct ipc_drain got;
	memcpy(&got, m.payload, sizeof got);
	cr_expect_eq(got.deadline_ms, 30000);
}

Test(ipc, short_header_rejected)
{
	struct ipc_msg m;
	char err[128] = "";
	cr_expect_eq(ipc_decode(buf, sizeof(struct ipc_hdr) - 1, &m, err, sizeof err), -1);
	cr_expect(strstr(err, "short") != NULL, "%s", err);
}

Test(ipc, unknown_type_rejected)
{
	ssize_t n = ipc_encode(buf, sizeof buf, IPC_ACCEPT, 1, NULL, 0);
	struct ipc_hdr h;
	memcpy(&h, buf, sizeof h);
	h.type = 999;
	memcpy(buf, &h, sizeof h);
	struct ipc_msg m;
	char err[128] = "";
	cr_expect_eq(ipc_decode(buf, (size_t)n, &m, err, sizeof err), -1);
	cr_expect(strstr(err, "unknown") != NULL, "%s", err);
	h.type = IPC_NONE;
	memcpy(buf, &h, sizeof h);
	cr_expect_eq(ipc_decode(buf, (size_t)n, &m, err, sizeof err), -1);
}

Test(ipc, length_must_match_datagram)
{
	struct ipc_drain d = { 1 };
	ssize_t n = ipc_encode(buf, sizeof buf, IPC_DRAIN, 1, &d, sizeof d);
	struct ipc_msg m;
	char err[128] = "";
	/* datagram one byte shorter / longer than the header claims */
	cr_expect_eq(ipc_decode(buf, (size_t)n - 1, &m, err, sizeof err), -1);
	cr_expect(strstr(err, "does not match") != NULL, "%s", err);
	cr_expect_eq(ipc_decode(buf, (size_t)n + 1, &m, err, sizeof err), -1);
}

Test(ipc, payload_size_checked_per_type)
{
	struct ipc_msg m;
	char err[128] = "";
	uint8_t junk[sizeof(struct ipc_upstream) + 1] = { 0 };
	/* fixed-size payloads: wrong sizes rejected */
	ssize_t n = ipc_encode(buf, sizeof buf, IPC_DRAIN, 1, junk, sizeof(struct ipc_drain) + 1);
	cr_expect_eq(ipc_decode(buf, (size_t)n, &m, err, sizeof err), -1);
	cr_expect(strstr(err, "bad payload size") != NULL, "%s", err);
	n = ipc_encode(buf, sizeof buf, IPC_UPSTREAM, 1, junk, sizeof(struct ipc_upstream) - 1);
	cr_expect_eq(ipc_decode(buf, (size_t)n, &m, err, sizeof err), -1);
	n = ipc_encode(buf, sizeof buf, IPC_LISTENERS, 1, junk, 3);
	cr_expect_eq(ipc_decode(buf, (size_t)n, &m, err, sizeof err), -1);
	n = ipc_encode(buf, sizeof buf, IPC_UNKNOWN_NODE, 1, junk, 8);
	cr_expect_eq(ipc_decode(buf, (size_t)n, &m, err, sizeof err), -1);
	struct ipc_unknown_node un = { .node_id = 4, .port = 9092 };
	n = ipc_encode(buf, sizeof buf, IPC_UNKNOWN_NODE, 1, &un, sizeof un);
	cr_expect_eq(ipc_decode(buf, (size_t)n, &m, err, sizeof err), 0, "%s", err);
	/* empty messages must be empty */
	n = ipc_encode(buf, sizeof buf, IPC_ACCEPT, 1, junk, 1);
	cr_expect_eq(ipc_decode(buf, (size_t)n, &m, err, sizeof err), -1);
	/* READY says which protocol the worker speaks, exactly */
	n = ipc_encode(buf, sizeof buf, IPC_READY, 1, NULL, 0);
	cr_expect_eq(ipc_decode(buf, (size_t)n, &m, err, sizeof err), -1);
	struct ipc_ready rd = { .ipc_version = IPC_PROTOCOL_VERSION };
	n = ipc_encode(buf, sizeof buf, IPC_READY, 1, &rd, sizeof rd);
	cr_expect_eq(ipc_decode(buf, (size_t)n, &m, err, sizeof err), 0, "%s", err);
	/* CONFIG needs text */
	n = ipc_encode(buf, sizeof buf, IPC_CONFIG, 1, NULL, 0);
	cr_expect_eq(ipc_decode(buf, (size_t)n, &m, err, sizeof err), -1);
	/* FAILED reason bounded */
	static uint8_t big[2048];
	n = ipc_encode(buf, sizeof buf, IPC_FAILED, 1, big, sizeof big);
	cr_expect_eq(ipc_decode(buf, (size_t)n, &m, err, sizeof err), -1);
}

Test(ipc, encode_refuses_oversize)
{
	static uint8_t big[IPC_MAX_PAYLOAD + 1];
	cr_expect_eq(ipc_encode(buf, sizeof buf, IPC_CONFIG, 1, big, sizeof big), -1);
	cr_expect_eq(errno, EMSGSIZE);
	uint8_t small[8];
	cr_expect_eq(ipc_encode(small, sizeof small, IPC_READY, 1, NULL, 0), -1);
}

Test(ipc, seqpacket_round_trip_with_fds)
{
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	int p[2];
	cr_assert_eq(pipe(p), 0);
	const char *text = "[cluster a]\nupstream = 127.0.0.1:9092\n";
	cr_assert_eq(ipc_send(sv[0], IPC_CONFIG, 3, text, strlen(text), &p[1], 1), 0);
	struct ipc_msg m;
	char err[128] = "";
	cr_assert_eq(ipc_recv(sv[1], buf, sizeof buf, &m, err, sizeof err), 1, "%s", err);
	cr_expect_eq(m.hdr.type, IPC_CONFIG);
	cr_expect_eq(m.hdr.generation, 3);
	cr_expect_eq(m.hdr.len, strlen(text));
	cr_expect_eq(memcmp(m.payload, text, strlen(text)), 0);
	cr_assert_eq(m.nfds, 1);
	cr_expect(fcntl(m.fds[0], F_GETFD) & FD_CLOEXEC, "received fds are CLOEXEC");
	/* the passed fd is the pipe's write end */
	cr_assert_eq(write(m.fds[0], "x", 1), 1);
	char c;
	cr_assert_eq(read(p[0], &c, 1), 1);
	cr_expect_eq(c, 'x');
	ipc_close_fds(&m);
	/* EOF */
	close(sv[0]);
	cr_expect_eq(ipc_recv(sv[1], buf, sizeof buf, &m, err, sizeof err), 0);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
}

Test(ipc, truncated_datagram_is_an_error_and_fds_closed)
{
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	int p[2];
	cr_assert_eq(pipe(p), 0);
	struct ipc_upstream u = { .reachable = 1 };
	cr_assert_eq(ipc_send(sv[0], IPC_UPSTREAM, 1, &u, sizeof u, &p[1], 1), 0);
	struct ipc_msg m;
	char err[128] = "";
	uint8_t small[sizeof(struct ipc_hdr) + 8];
	cr_expect_eq(ipc_recv(sv[1], small, sizeof small, &m, err, sizeof err), -1);
	cr_expect_eq(errno, EBADMSG);
	cr_expect(strstr(err, "truncated") != NULL, "%s", err);
	cr_expect_eq(m.nfds, 0, "fds of a bad message are closed");
	/* the only remaining write end is ours: closing it gives EOF */
	close(p[1]);
	char c;
	cr_expect_eq(read(p[0], &c, 1), 0);
	close(p[0]);
	close(sv[0]);
	close(sv[1]);
}
