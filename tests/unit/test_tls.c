/*
 * test_tls — the TLS transport (common/tls.c) over a non-blocking
 * socketpair, with keys and certificates made at test time: handshake
 * steps driven only by poll() on what transport_interest asks (a blocked
 * step never spins: every loop turn waits), read/writev (gathered small
 * iovecs, 1 MiB each way), pending bytes (also records read ahead),
 * close_notify, peer identity from a client certificate, a plaintext
 * Kafka frame on the server side, a name mismatch, a stalled handshake, and session tickets from
 * caller-owned keys (resumed across contexts, refused when the key is
 * gone, off with n == 0).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "common/tls.h"
#include "common/tlsctx.h"
#include "tls_fixtures.h"

static struct fx_cert ca, srv, cli;
static SSL_CTX *sctx, *cctx, *cctx_cert;
static int sp[2];
static struct transport S, C;

#define PEM(f) ((struct tlsctx_pem){ (f).data, (f).len })

static void
setup(void)
{
	char err[256];
	fx_make(&ca, "ferry test CA", NULL, NULL, 30);
	fx_make(&srv, "kafka.test", &ca, "DNS:kafka.test", 30);
	fx_make(&cli, "client one", &ca, NULL, 30);
	struct tlsctx_server_opts so = {
		.cert = PEM(srv.cert_pem), .key = PEM(srv.key_pem),
		.client_ca = PEM(ca.cert_pem), .client_auth = TLSCTX_AUTH_REQUESTED,
	};
	sctx = tlsctx_server_new(&so, err, sizeof err);
	cr_assert_not_null(sctx, "%s", err);
	struct tlsctx_client_opts co = { .ca = PEM(ca.cert_pem), .verify = true };
	cctx = tlsctx_client_new(&co, err, sizeof err);
	cr_assert_not_null(cctx, "%s", err);
	co.cert = PEM(cli.cert_pem);
	co.key = PEM(cli.key_pem);
	cctx_cert = tlsctx_client_new(&co, err, sizeof err);
	cr_assert_not_null(cctx_cert, "%s", err);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp), 0);
	memset(&S, 0, sizeof S);
	memset(&C, 0, sizeof C);
	S.fd = C.fd = -1;
}

static void
teardown(void)
{
	transport_close(&S);
	transport_close(&C);
	SSL_CTX_free(sctx);
	SSL_CTX_free(cctx);
	SSL_CTX_free(cctx_cert);
	fx_free(&ca);
	fx_free(&srv);
	fx_free(&cli);
}

TestSuite(tls, .init = setup, .fini = teardown, .timeout = 20);

/* Waits (poll, up to ms) for what each transport's interest asks. The
 * number of fds ready. */
/* Drives both handshakes; each turn steps a side, then waits for the
 * socket events the blocked sides asked for. Returns the turns taken, or
 * -1 when a side failed (*failed_side = 's' or 'c'). */
static int
handshake_pair(struct transport *s, struct transport *c, char *failed_side)
{
	for (int turn = 0; turn < 50; turn++) {
		int rs = s->state == TRANSPORT_HANDSHAKE ? transport_handshake(s) : 1;
		if (rs < 0) {
			*failed_side = 's';
			return -1;
		}
		int rc = c->state == TRANSPORT_HANDSHAKE ? transport_handshake(c) : 1;
		if (rc < 0) {
			*failed_side = 'c';
			return -1;
		}
		if (rs == 1 && rc == 1)
			return turn;
		cr_assert(rs == 1 || errno == EAGAIN || s->hs_want != 0);
		int w = fx_wait_for(s, rs == 1 ? 0 : transport_interest(s, true, false),
		    c, rc == 1 ? 0 : transport_interest(c, true, false), 2000);
		cr_assert(w > 0, "a blocked handshake waited 2 s for nothing (turn %d)", turn);
	}
	cr_assert_fail("handshake did not finish in 50 turns");
	return -1;
}

static void
connect_pair(SSL_CTX *client, const char *host)
{
	cr_assert_eq(transport_tls_server_init(&S, sp[0], sctx), 0);
	cr_assert_eq(transport_tls_client_init(&C, sp[1], client, host, true), 0);
	cr_assert_eq(S.state, TRANSPORT_HANDSHAKE);
	cr_assert_eq(S.hs_want, TRANSPORT_WANT_READ);
	char side = 0;
	int turns = handshake_pair(&S, &C, &side);
	cr_assert(turns >= 0, "side %c failed: %s / %s", side, transport_tls_error(&S),
	    transport_tls_error(&C));
}

/* Reads exactly len bytes from t, waiting on poll between blocked reads. */
static void
read_all(struct transport *t, char *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = transport_read(t, buf + got, len - got);
		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		cr_assert_eq(n, -1, "unexpected EOF after %zu bytes", got);
		cr_assert_eq(errno, EAGAIN);
		cr_assert_eq(transport_pending(t), 0);
		cr_assert(fx_wait_for(t, transport_interest(t, true, false), NULL, 0, 2000) > 0);
	}
}

Test(tls, handshake_read_write_and_identity)
{
	connect_pair(cctx, "kafka.test");
	cr_assert_str_eq(transport_name(&S), "tls");
	cr_assert(transport_is_tls(&S));
	cr_assert_not(transport_movable(&S));
	cr_assert_not(transport_movable(&C));
	/* the socket carries records, not the stream: no zero copy */
	cr_assert_not(transport_can_splice(&S));
	cr_assert_not(transport_can_splice(&C));
	cr_assert(transport_ready(&S) && transport_ready(&C));
	cr_assert_str_eq(SSL_get_servername(transport_tls_ssl(&S), TLSEXT_NAMETYPE_host_name),
	    "kafka.test");
	char peer[256];
	/* no client certificate: the socket address */
	cr_assert_eq(transport_peer(&S, peer, sizeof peer), 0);
	cr_assert_str_eq(peer, "unix");
	cr_assert_eq(transport_peer(&C, peer, sizeof peer), 0);
	cr_assert_str_eq(peer, "CN=kafka.test");

	/* many small iovecs: gathered */
	struct iovec iov[4] = { { "\0\0\0\x0b", 4 }, { "hello", 5 }, { " ", 1 }, { "world", 5 } };
	cr_assert_eq(transport_writev(&C, iov, 4), 15);
	char buf[64];
	read_all(&S, buf, 15);
	cr_assert_eq(memcmp(buf + 4, "hello world", 11), 0);

	/* pending: a record read in part leaves the rest inside TLS */
	char rec[4000];
	memset(rec, 'r', sizeof rec);
	cr_assert_eq(transport_write(&S, rec, sizeof rec), (ssize_t)sizeof rec);
	read_all(&C, buf, 10);
	cr_assert_eq(transport_pending(&C), sizeof rec - 10);
	/* the rest is read without the socket being readable */
	struct pollfd p = { C.fd, POLLIN, 0 };
	cr_assert_eq(poll(&p, 1, 0), 0);
	char big[4000];
	cr_assert_eq(transport_read(&C, big, sizeof big), (ssize_t)(sizeof rec - 10));
	cr_assert_eq(transport_pending(&C), 0);
}

/* A client writing one small record per write (librdkafka: ~1 KiB each):
 * one read step takes every record the socket holds with one read(2)
 * (read-ahead, not a 5-byte header and a body per record), and the
 * records read ahead but not yet decrypted count as pending, so a caller
 * that reads less than all of them comes back for the rest without the
 * socket becoming readable again (else: a stall until the next bytes). */
Test(tls, small_records_read_ahead_count_as_pending)
{
	connect_pair(cctx, "kafka.test");
	char rec[1000], buf[8 * sizeof rec];
	for (int i = 0; i < 8; i++) {
		memset(rec, 'a' + i, sizeof rec);
		cr_assert_eq(transport_write(&C, rec, sizeof rec), (ssize_t)sizeof rec);
	}
	struct pollfd p = { S.fd, POLLIN, 0 };
	cr_assert_eq(poll(&p, 1, 2000), 1);
	/* one record's worth: the caller's buffer is full after the first */
	cr_assert_eq(transport_read(&S, buf, sizeof rec), (ssize_t)sizeof rec);
	cr_assert_eq(poll(&p, 1, 0), 0, "the other records are still in the socket: "
	    "read one at a time, not read ahead");
	cr_assert_gt(transport_pending(&S), 0, "records read ahead do not count as "
	    "pending: the caller would wait for a socket event that never comes");
	size_t got = sizeof rec;
	while (transport_pending(&S) > 0) {
		ssize_t n = transport_read(&S, buf + got, sizeof rec / 3);
		cr_assert_gt(n, 0);
		got += (size_t)n;
	}
	cr_assert_eq(got, sizeof buf);
	for (size_t i = 0; i < sizeof buf; i++)
		cr_assert_eq(buf[i], 'a' + (int)(i / sizeof rec), "byte %zu", i);
	cr_assert_eq(transport_read(&S, buf, sizeof buf), -1);
	cr_assert_eq(errno, EAGAIN);
	cr_assert_eq(transport_pending(&S), 0);
}

/* Part of a record read ahead is not pending (reading it blocks until the
 * rest comes: a caller told otherwise would spin); once the rest arrives
 * the socket is readable again and the record reads whole. The client's
 * records go through a relay (a second socketpair) that passes them on in
 * two pieces. */
Test(tls, part_of_a_record_is_not_pending)
{
	int relay[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, relay), 0);
	connect_pair(cctx, "kafka.test");
	char rec[1000], raw[2000], buf[sizeof rec];
	memset(rec, 'p', sizeof rec);
	cr_assert_eq(transport_write(&C, rec, sizeof rec), (ssize_t)sizeof rec);
	ssize_t n = read(sp[0], raw, sizeof raw);  /* the whole record, encrypted */
	cr_assert_gt(n, 100);
	/* the server now reads from the relay's far end */
	cr_assert_eq(dup2(relay[0], S.fd), S.fd);
	close(relay[0]);
	cr_assert_eq(write(relay[1], raw, 100), 100);
	cr_assert_eq(transport_read(&S, buf, sizeof buf), -1);
	cr_assert_eq(errno, EAGAIN);
	cr_assert_eq(transport_pending(&S), 0, "part of a record counted as pending");
	cr_assert_eq(write(relay[1], raw + 100, (size_t)n - 100), n - 100);
	cr_assert_eq(fx_wait_for(&S, transport_interest(&S, true, false), NULL, 0, 2000), 1);
	cr_assert_eq(transport_read(&S, buf, sizeof buf), (ssize_t)sizeof rec);
	cr_assert_eq(memcmp(buf, rec, sizeof rec), 0);
	close(relay[1]);
}

Test(tls, one_mebibyte_each_way_nonblocking)
{
	connect_pair(cctx, "kafka.test");
	enum { N = 1 << 20 };
	char *out = malloc(N), *in = malloc(N);
	for (size_t i = 0; i < N; i++)
		out[i] = (char)(i * 7 + i / 1000);
	struct transport *w = &C, *r = &S;
	for (int dir = 0; dir < 2; dir++) {
		size_t sent = 0, got = 0;
		int turns = 0;
		while (got < N) {
			cr_assert(++turns < 100000);
			if (sent < N) {
				/* three iovecs: a header, a small piece, the rest */
				size_t rest = N - sent, a = rest < 4 ? rest : 4;
				size_t b = rest - a < 100 ? rest - a : 100;
				struct iovec iov[3] = { { out + sent, a }, { out + sent + a, b },
					{ out + sent + a + b, rest - a - b } };
				ssize_t n = transport_writev(w, iov, 3);
				if (n > 0)
					sent += (size_t)n;
				else
					cr_assert_eq(errno, EAGAIN);
			}
			ssize_t n;
			while ((n = transport_read(r, in + got, N - got)) > 0)
				got += (size_t)n;
			if (got < N) {
				cr_assert_eq(n, -1);
				cr_assert_eq(errno, EAGAIN);
				int we = sent < N ? transport_interest(w, false, true) : 0;
				cr_assert(fx_wait_for(r, transport_interest(r, true, false), w, we, 2000) > 0);
			}
		}
		cr_assert_eq(memcmp(in, out, N), 0);
		w = &S;
		r = &C;
	}
	free(out);
	free(in);
}

Test(tls, close_notify_reads_as_eof)
{
	connect_pair(cctx, "kafka.test");
	int r;
	while ((r = transport_shutdown(&C)) == 0)
		cr_assert(fx_wait_for(&C, C.hs_want, NULL, 0, 2000) > 0);
	cr_assert_eq(r, 1);
	cr_assert_eq(C.state, TRANSPORT_SHUTDOWN);
	char buf[8];
	ssize_t n;
	while ((n = transport_read(&S, buf, sizeof buf)) == -1 && errno == EAGAIN)
		cr_assert(fx_wait_for(&S, S.rd_want, NULL, 0, 2000) > 0);
	cr_assert_eq(n, 0);
	/* the other direction still works after a half close */
	cr_assert_eq(transport_write(&S, "late", 4), 4);
	read_all(&C, buf, 4);
	cr_assert_eq(memcmp(buf, "late", 4), 0);
}

Test(tls, client_certificate_is_the_peer)
{
	connect_pair(cctx_cert, "kafka.test");
	char peer[256];
	cr_assert_eq(transport_peer(&S, peer, sizeof peer), 0);
	cr_assert_str_eq(peer, "CN=client one");
}

Test(tls, plaintext_kafka_frame_refused)
{
	cr_assert_eq(transport_tls_server_init(&S, sp[0], sctx), 0);
	/* ApiVersions v0 request frame, as a plaintext client sends it */
	static const char frame[] = "\x00\x00\x00\x0e\x00\x12\x00\x00\x00\x00\x00\x01\x00\x04test";
	cr_assert_eq(write(sp[1], frame, sizeof frame - 1), (ssize_t)sizeof frame - 1);
	cr_assert_eq(transport_handshake(&S), -1);
	cr_assert(transport_tls_plaintext(&S));
	cr_assert(strstr(transport_tls_error(&S), "not TLS"), "%s", transport_tls_error(&S));
	close(sp[1]);
}

Test(tls, hostname_mismatch_fails_with_reason)
{
	cr_assert_eq(transport_tls_server_init(&S, sp[0], sctx), 0);
	cr_assert_eq(transport_tls_client_init(&C, sp[1], cctx, "other.test", true), 0);
	char side = 0;
	cr_assert_eq(handshake_pair(&S, &C, &side), -1);
	cr_assert_eq(side, 'c');
	cr_assert(strstr(transport_tls_error(&C), "hostname mismatch"), "%s",
	    transport_tls_error(&C));
	cr_assert_not(transport_tls_plaintext(&S));
}

Test(tls, stalled_handshake_waits_without_spinning)
{
	cr_assert_eq(transport_tls_server_init(&S, sp[0], sctx), 0);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(transport_handshake(&S), 0);
		cr_assert_eq(errno, EAGAIN);
		cr_assert_eq(transport_interest(&S, true, true), TRANSPORT_WANT_READ);
		/* nothing arrives: the socket is not readable */
		cr_assert_eq(fx_wait_for(&S, TRANSPORT_WANT_READ, NULL, 0, 50), 0);
	}
	/* half a ClientHello: still blocked, still waiting to read */
	cr_assert_eq(write(sp[1], "\x16\x03\x01\x02\x00\x01", 6), 6);
	cr_assert_eq(transport_handshake(&S), 0);
	cr_assert_eq(S.hs_want, TRANSPORT_WANT_READ);
	cr_assert_eq(fx_wait_for(&S, TRANSPORT_WANT_READ, NULL, 0, 50), 0);
	/* the half record it read ahead is nothing to read yet: a caller
	 * told "pending" would step again at once, forever */
	cr_assert_eq(transport_pending(&S), 0);
	/* then the peer goes away */
	close(sp[1]);
	cr_assert_eq(transport_handshake(&S), -1);
	cr_assert(transport_tls_error(&S)[0] != '\0');
}

/* ---- session tickets ---- */

static struct tlskeys keys;

static SSL_SESSION *
connect_and_get_session(SSL_CTX *server, SSL_SESSION *resume, bool *reused)
{
	int p[2];
	struct transport s, c;
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, p), 0);
	cr_assert_eq(transport_tls_server_init(&s, p[0], server), 0);
	cr_assert_eq(transport_tls_client_init(&c, p[1], cctx, "kafka.test", true), 0);
	if (resume)
		SSL_set_session(transport_tls_ssl(&c), resume);
	char side = 0;
	cr_assert(handshake_pair(&s, &c, &side) >= 0, "%c", side);
	/* TLS 1.3 tickets arrive after the handshake: one round trip */
	cr_assert_eq(transport_write(&s, "x", 1), 1);
	char b;
	read_all(&c, &b, 1);
	*reused = SSL_session_reused(transport_tls_ssl(&c));
	SSL_SESSION *sess = SSL_get1_session(transport_tls_ssl(&c));
	/* a session closed without close_notify is dropped by OpenSSL */
	cr_assert_eq(transport_shutdown(&c), 1);
	transport_close(&s);
	transport_close(&c);
	return sess;
}

static SSL_CTX *
server_with_keys(void)
{
	char err[256];
	struct tlsctx_server_opts so = { .cert = PEM(srv.cert_pem), .key = PEM(srv.key_pem) };
	SSL_CTX *s = tlsctx_server_new(&so, err, sizeof err);
	cr_assert_not_null(s, "%s", err);
	cr_assert_eq(tls_ticket_keys_install(s, &keys), 0);
	return s;
}

Test(tls, tickets_from_caller_keys)
{
	memset(&keys, 0, sizeof keys);
	keys.n = 1;
	for (int i = 0; i < 16; i++)
		keys.key[0].name[i] = (uint8_t)i;
	memset(keys.key[0].aes, 0xa1, sizeof keys.key[0].aes);
	memset(keys.key[0].hmac, 0xb2, sizeof keys.key[0].hmac);
	SSL_CTX *gen1 = server_with_keys(), *gen2 = server_with_keys();
	bool reused;

	SSL_SESSION *s1 = connect_and_get_session(gen1, NULL, &reused);
	cr_assert_not(reused);
	cr_assert(SSL_SESSION_has_ticket(s1));
	SSL_SESSION *s0 = connect_and_get_session(gen1, s1, &reused);
	cr_assert(reused, "not resumed on the same context");
	SSL_SESSION_free(s0);
	/* another context (a new generation) with the same keys resumes */
	SSL_SESSION *s2 = connect_and_get_session(gen2, s1, &reused);
	cr_assert(reused, "not resumed across contexts");
	SSL_SESSION_free(s2);

	/* rotation: the old key decrypts as key[1] */
	keys.key[1] = keys.key[0];
	memset(keys.key[0].name, 0x77, sizeof keys.key[0].name);
	memset(keys.key[0].aes, 0x33, sizeof keys.key[0].aes);
	keys.n = 2;
	s2 = connect_and_get_session(gen1, s1, &reused);
	cr_assert(reused, "not resumed with the previous key");
	SSL_SESSION_free(s2);

	/* the old key dropped: a full handshake */
	keys.n = 1;
	s2 = connect_and_get_session(gen2, s1, &reused);
	cr_assert_not(reused);
	SSL_SESSION_free(s2);

	/* n == 0: no ticket issued */
	keys.n = 0;
	s2 = connect_and_get_session(gen1, NULL, &reused);
	cr_assert_not(SSL_SESSION_has_ticket(s2));
	SSL_SESSION_free(s2);
	SSL_SESSION_free(s1);
	SSL_CTX_free(gen1);
	SSL_CTX_free(gen2);
}

/* An OpenSSL client (librdkafka) uses a TLS 1.3 ticket once: every
 * resumption must bring a new ticket, or every other reconnect is a full
 * handshake. */
Test(tls, resumption_issues_a_new_ticket)
{
	memset(&keys, 0, sizeof keys);
	keys.n = 1;
	memset(keys.key[0].name, 0x42, sizeof keys.key[0].name);
	memset(keys.key[0].aes, 0xa1, sizeof keys.key[0].aes);
	memset(keys.key[0].hmac, 0xb2, sizeof keys.key[0].hmac);
	SSL_CTX *gen = server_with_keys();
	bool reused;

	SSL_SESSION *s = connect_and_get_session(gen, NULL, &reused);
	cr_assert_not(reused);
	for (int i = 0; i < 3; i++) {
		const unsigned char *t0, *t1;
		size_t l0, l1;
		SSL_SESSION *next = connect_and_get_session(gen, s, &reused);
		cr_assert(reused, "resumption %d: full handshake", i + 1);
		SSL_SESSION_get0_ticket(s, &t0, &l0);
		SSL_SESSION_get0_ticket(next, &t1, &l1);
		cr_assert(l1 > 0 && (l0 != l1 || memcmp(t0, t1, l0) != 0),
		    "resumption %d: no new ticket", i + 1);
		SSL_SESSION_free(s);
		s = next;
	}
	SSL_SESSION_free(s);
	SSL_CTX_free(gen);
}
