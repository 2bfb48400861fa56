/*
 * test_tlscache — the client-side session cache (common/tlscache.c): keys
 * (name and dialled address, v4 and v6), put / get / replace / drop, the
 * bound (least recently used replaced), expired and unresumable sessions
 * dropped on lookup; then real handshakes over a socketpair (keys and
 * certificates made at test time): the first connection learns a ticket
 * through the new-session callback, the next one offers it and resumes
 * (also after the first was freed without close_notify), another name
 * is not offered the session, and a failed handshake (the broker's
 * certificate no longer matches) drops it.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "common/tls.h"
#include "common/tlscache.h"
#include "common/tlsctx.h"
#include "tls_fixtures.h"

#define PEM(f) ((struct tlsctx_pem){ (f).data, (f).len })

static struct sockaddr_in
v4(const char *a, unsigned port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	cr_assert_eq(inet_pton(AF_INET, a, &s.sin_addr), 1);
	return s;
}

/* A resumable session whose id is id (one byte), made at now + age. */
static SSL_SESSION *
sess(unsigned char id, long age, long timeout)
{
	SSL_SESSION *s = SSL_SESSION_new();
	cr_assert_not_null(s);
	cr_assert_eq(SSL_SESSION_set1_id(s, &id, 1), 1);
	SSL_SESSION_set_time(s, (long)time(NULL) + age);
	SSL_SESSION_set_timeout(s, timeout);
	return s;
}

static unsigned char
sess_id(const SSL_SESSION *s)
{
	unsigned int len = 0;
	const unsigned char *id = SSL_SESSION_get_id(s, &len);
	cr_assert_eq(len, 1);
	return id[0];
}

Test(tlscache, keys)
{
	char k[TLSCACHE_KEY_MAX];
	struct sockaddr_in a = v4("10.0.0.7", 9093);
	cr_assert_eq(tlscache_key(k, sizeof k, "kafka-1.example", (struct sockaddr *)&a), 0);
	cr_assert_str_eq(k, "kafka-1.example|10.0.0.7:9093");
	cr_assert_eq(tlscache_key(k, sizeof k, NULL, (struct sockaddr *)&a), 0);
	cr_assert_str_eq(k, "|10.0.0.7:9093");

	struct sockaddr_in6 b = { .sin6_family = AF_INET6, .sin6_port = htons(9094) };
	cr_assert_eq(inet_pton(AF_INET6, "2001:db8::1", &b.sin6_addr), 1);
	cr_assert_eq(tlscache_key(k, sizeof k, "kafka-1.example", (struct sockaddr *)&b), 0);
	cr_assert_str_eq(k, "kafka-1.example|[2001:db8::1]:9094");

	/* not an IP socket, a name too long, a buffer too small */
	struct sockaddr u = { .sa_family = AF_UNIX };
	errno = 0;
	cr_assert_eq(tlscache_key(k, sizeof k, "x", &u), -1);
	cr_assert_eq(errno, EINVAL);
	char longname[400];
	memset(longname, 'a', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	cr_assert_eq(tlscache_key(k, sizeof k, longname, (struct sockaddr *)&a), -1);
	char small[8];
	cr_assert_eq(tlscache_key(small, sizeof small, "kafka", (struct sockaddr *)&a), -1);
	cr_assert_str_eq(small, "");
}

Test(tlscache, put_get_replace_drop)
{
	struct tlscache *c = tlscache_new(8);
	cr_assert_not_null(c);
	cr_assert_null(tlscache_get(c, "a|1.1.1.1:1"));
	SSL_SESSION *s1 = sess(1, 0, 300), *s2 = sess(2, 0, 300);

	cr_assert_eq(tlscache_put(c, "a|1.1.1.1:1", s1), 0);
	SSL_SESSION *got = tlscache_get(c, "a|1.1.1.1:1");
	cr_assert_not_null(got);
	cr_assert_neq(got, s1, "the cache keeps a copy, not the caller's session");
	cr_assert_eq(sess_id(got), 1);
	/* the same name at another address, another name at the same one */
	cr_assert_null(tlscache_get(c, "a|1.1.1.1:2"));
	cr_assert_null(tlscache_get(c, "b|1.1.1.1:1"));

	/* newest session per key */
	cr_assert_eq(tlscache_put(c, "a|1.1.1.1:1", s2), 0);
	cr_assert_eq(tlscache_count(c), 1);
	cr_assert_eq(sess_id(tlscache_get(c, "a|1.1.1.1:1")), 2);

	cr_assert(tlscache_drop(c, "a|1.1.1.1:1"));
	cr_assert_not(tlscache_drop(c, "a|1.1.1.1:1"));
	cr_assert_eq(tlscache_count(c), 0);
	cr_assert_null(tlscache_get(c, "a|1.1.1.1:1"));
	SSL_SESSION_free(s1);
	SSL_SESSION_free(s2);
	tlscache_free(c);
	tlscache_free(NULL);
	errno = 0;
	cr_assert_null(tlscache_new(0));
	cr_assert_eq(errno, EINVAL);
}

Test(tlscache, bounded_least_recently_used_replaced)
{
	struct tlscache *c = tlscache_new(3);
	SSL_SESSION *s[5];
	for (int i = 0; i < 5; i++)
		s[i] = sess((unsigned char)(i + 1), 0, 300);
	cr_assert_eq(tlscache_put(c, "a", s[0]), 0);
	cr_assert_eq(tlscache_put(c, "b", s[1]), 0);
	cr_assert_eq(tlscache_put(c, "c", s[2]), 0);
	cr_assert_not_null(tlscache_get(c, "a"));   /* a used: b is the oldest */
	cr_assert_eq(tlscache_put(c, "d", s[3]), 0);
	cr_assert_eq(tlscache_count(c), 3);
	cr_assert_null(tlscache_get(c, "b"), "the least recently used key stayed");
	cr_assert_eq(sess_id(tlscache_get(c, "a")), 1);
	cr_assert_eq(sess_id(tlscache_get(c, "c")), 3);
	cr_assert_eq(sess_id(tlscache_get(c, "d")), 4);
	/* replacing an existing key never evicts another */
	cr_assert_eq(tlscache_put(c, "c", s[4]), 0);
	cr_assert_eq(tlscache_count(c), 3);
	cr_assert_not_null(tlscache_get(c, "a"));
	cr_assert_not_null(tlscache_get(c, "d"));
	for (int i = 0; i < 5; i++)
		SSL_SESSION_free(s[i]);
	tlscache_free(c);  /* ASan: every copy freed */
}

Test(tlscache, expired_and_unresumable_dropped)
{
	struct tlscache *c = tlscache_new(4);
	SSL_SESSION *old = sess(1, -100, 60);       /* made 100 s ago, 60 s life */
	SSL_SESSION *noid = SSL_SESSION_new();      /* no id, no ticket */
	SSL_SESSION_set_time(noid, (long)time(NULL));
	SSL_SESSION_set_timeout(noid, 300);
	cr_assert_eq(tlscache_put(c, "old", old), 0);
	cr_assert_eq(tlscache_put(c, "noid", noid), 0);
	cr_assert_eq(tlscache_count(c), 2);
	cr_assert_null(tlscache_get(c, "old"));
	cr_assert_null(tlscache_get(c, "noid"));
	cr_assert_eq(tlscache_count(c), 0);
	SSL_SESSION_free(old);
	SSL_SESSION_free(noid);
	tlscache_free(c);
}

/* ---- real handshakes ---- */

static struct fx_cert ca, srv, other;
static SSL_CTX *sctx, *sctx_other, *cctx;
static struct tlscache *cache;

static void
setup(void)
{
	char err[256];
	fx_make(&ca, "ferry test CA", NULL, NULL, 30);
	fx_make(&srv, "kafka.test", &ca, "DNS:kafka.test", 30);
	fx_make(&other, "other.test", &ca, "DNS:other.test", 30);
	struct tlsctx_server_opts so = { .cert = PEM(srv.cert_pem), .key = PEM(srv.key_pem) };
	sctx = tlsctx_server_new(&so, err, sizeof err);
	cr_assert_not_null(sctx, "%s", err);
	so.cert = PEM(other.cert_pem);
	so.key = PEM(other.key_pem);
	sctx_other = tlsctx_server_new(&so, err, sizeof err);
	cr_assert_not_null(sctx_other, "%s", err);
	struct tlsctx_client_opts co = { .ca = PEM(ca.cert_pem), .verify = true };
	cctx = tlsctx_client_new(&co, err, sizeof err);
	cr_assert_not_null(cctx, "%s", err);
	cache = tlscache_new(16);
	cr_assert_not_null(cache);
	cr_assert_eq(tlscache_attach(cache, cctx), 0);
}

static void
teardown(void)
{
	SSL_CTX_free(sctx);
	SSL_CTX_free(sctx_other);
	SSL_CTX_free(cctx);
	tlscache_free(cache);
	fx_free(&ca);
	fx_free(&srv);
	fx_free(&other);
}

/* One connection to server as name, keyed as key: handshake, one byte
 * server -> client (TLS 1.3 tickets come with it), then closed (with or
 * without close_notify). 1 resumed, 0 full handshake, -1 failed. *offered:
 * what tlscache_use answered. */
static int
dial(SSL_CTX *server, const char *name, const char *key, bool notify, int *offered)
{
	int p[2];
	struct transport s, c;
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, p), 0);
	cr_assert_eq(transport_tls_server_init(&s, p[0], server), 0);
	cr_assert_eq(transport_tls_client_init(&c, p[1], cctx, name, true), 0);
	*offered = tlscache_use(cache, transport_tls_ssl(&c), key);
	cr_assert_geq(*offered, 0);
	int rc = -2;
	for (int turn = 0; turn < 50 && rc == -2; turn++) {
		int rs = s.state == TRANSPORT_HANDSHAKE ? transport_handshake(&s) : 1;
		int r = c.state == TRANSPORT_HANDSHAKE ? transport_handshake(&c) : 1;
		if (r < 0) {
			tlscache_forget(transport_tls_ssl(&c));  /* what the worker does */
			rc = -1;
		} else if (rs < 0) {
			rc = -1;
		} else if (rs == 1 && r == 1) {
			rc = SSL_session_reused(transport_tls_ssl(&c)) ? 1 : 0;
		} else {
			fx_wait_for(&s, rs == 1 ? 0 : transport_interest(&s, true, false),
			    &c, r == 1 ? 0 : transport_interest(&c, true, false), 2000);
		}
	}
	cr_assert_neq(rc, -2, "handshake did not finish");
	if (rc >= 0) {
		cr_assert_eq(transport_write(&s, "x", 1), 1);
		char b;
		ssize_t n;
		while ((n = transport_read(&c, &b, 1)) != 1) {
			cr_assert(n == -1 && errno == EAGAIN);
			cr_assert(fx_wait_for(&c, transport_interest(&c, true, false), NULL, 0, 2000) > 0);
		}
		if (notify)
			cr_assert_eq(transport_shutdown(&c), 1);
	}
	transport_close(&s);
	transport_close(&c);
	return rc;
}

TestSuite(tlscache_tls, .init = setup, .fini = teardown, .timeout = 20);

Test(tlscache_tls, resumes_per_key_and_forgets_on_failure)
{
	char k1[TLSCACHE_KEY_MAX], k2[TLSCACHE_KEY_MAX];
	struct sockaddr_in a = v4("127.0.0.1", 9093);
	cr_assert_eq(tlscache_key(k1, sizeof k1, "kafka.test", (struct sockaddr *)&a), 0);
	cr_assert_eq(tlscache_key(k2, sizeof k2, "other.test", (struct sockaddr *)&a), 0);
	int offered;

	/* first: full handshake, the ticket learnt through the callback */
	cr_assert_eq(dial(sctx, "kafka.test", k1, false, &offered), 0);
	cr_assert_eq(offered, 0);
	cr_assert_eq(tlscache_count(cache), 1, "no session learnt");
	/* next ones resume, although the first closed without close_notify,
	 * and each learns the ticket it was given */
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(dial(sctx, "kafka.test", k1, i % 2 == 0, &offered), 1,
		    "connection %d: full handshake", i + 2);
		cr_assert_eq(offered, 1);
	}
	cr_assert_eq(tlscache_count(cache), 1);

	/* another name (same address) is not offered kafka.test's session */
	cr_assert_eq(dial(sctx_other, "other.test", k2, true, &offered), 0);
	cr_assert_eq(offered, 0);
	cr_assert_eq(tlscache_count(cache), 2);

	/* the broker at kafka.test's address now shows a certificate for
	 * another name: the ticket is not accepted (another server), the full
	 * handshake fails verification, and the session is dropped */
	cr_assert_eq(dial(sctx_other, "kafka.test", k1, true, &offered), -1);
	cr_assert_eq(offered, 1);
	cr_assert_null(tlscache_get(cache, k1), "a failed handshake kept its session");
	cr_assert_eq(tlscache_count(cache), 1);
	cr_assert_eq(dial(sctx, "kafka.test", k1, true, &offered), 0);
	cr_assert_eq(offered, 0);
}

/* A connection that used the cache but whose key is replaced (a second
 * tlscache_use) keeps no stale key: nothing leaks (ASan). */
Test(tlscache_tls, use_twice_on_one_connection)
{
	SSL *ssl = SSL_new(cctx);
	cr_assert_not_null(ssl);
	cr_assert_eq(tlscache_use(cache, ssl, "a|1.1.1.1:1"), 0);
	cr_assert_eq(tlscache_use(cache, ssl, "b|1.1.1.1:1"), 0);
	tlscache_forget(ssl);
	SSL_free(ssl);
}
