/*
 * test_sni_gate — the ClientHello callback of the SNI gateway
 * (worker/sni_gate.c) on a real OpenSSL handshake between two TLS
 * transports over a socketpair, with a throwaway CA and a server
 * certificate for the bootstrap name and *.kafka.example.com made at test
 * time: the bootstrap name and broker names (any case, trailing dot) are
 * accepted and reported on the connection's pick during the handshake;
 * an unknown name and a ClientHello without SNI fail the handshake with the
 * alert unrecognized_name seen by the client, and are counted. A session
 * resumed (TLS 1.2 and 1.3, tickets) under another name is routed by the
 * name of the new ClientHello, not by the session's.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "common/tls.h"
#include "common/tlsctx.h"
#include "tls_fixtures.h"
#include "worker/sni_gate.h"

#define BOOT "kafka.example.com"
#define PAT "broker-$(nodeId).kafka.example.com"

static struct fx_cert ca, srv;
static SSL_CTX *sctx, *cctx;
static int sp[2];
static struct transport S, C;
static struct metrics *m;
static struct sni_gate gate;
static struct log_ratelimit rl;

#define PEM(f) ((struct tlsctx_pem){ (f).data, (f).len })

static void
setup(void)
{
	char err[256];
	fx_make(&ca, "ferry test CA", NULL, NULL, 30);
	fx_make(&srv, BOOT, &ca, "DNS:" BOOT ",DNS:*.kafka.example.com", 30);
	struct tlsctx_server_opts so = { .cert = PEM(srv.cert_pem), .key = PEM(srv.key_pem) };
	sctx = tlsctx_server_new(&so, err, sizeof err);
	cr_assert_not_null(sctx, "%s", err);
	struct tlsctx_client_opts co = { .ca = PEM(ca.cert_pem), .verify = true };
	cctx = tlsctx_client_new(&co, err, sizeof err);
	cr_assert_not_null(cctx, "%s", err);
	m = calloc(1, sizeof *m);
	cr_assert_not_null(m);
	memset(&rl, 0, sizeof rl);
	gate = (struct sni_gate){ BOOT, PAT, m, &rl };
	cr_assert_eq(sni_gate_install(sctx, &gate), 0);
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
	fx_free(&ca);
	fx_free(&srv);
	free(m);
}

TestSuite(sni_gate, .init = setup, .fini = teardown, .timeout = 20);

/* 0 when both handshakes completed; 's' / 'c' for the side that failed. */
static int
handshake(const char *sni, struct sni_pick *pick)
{
	cr_assert_eq(transport_tls_server_init(&S, sp[0], sctx), 0);
	cr_assert_eq(sni_gate_attach(transport_tls_ssl(&S), pick), 0);
	/* no name check by the client here: the name sent is what is tested */
	cr_assert_eq(transport_tls_client_init(&C, sp[1], cctx, NULL, false), 0);
	if (sni)
		cr_assert_eq(SSL_set_tlsext_host_name(transport_tls_ssl(&C), sni), 1);
	for (int turn = 0; turn < 50; turn++) {
		int rs = S.state == TRANSPORT_HANDSHAKE ? transport_handshake(&S) : 1;
		if (rs < 0)
			return 's';
		int rc = C.state == TRANSPORT_HANDSHAKE ? transport_handshake(&C) : 1;
		if (rc < 0)
			return 'c';
		if (rs == 1 && rc == 1)
			return 0;
		cr_assert(fx_wait_for(&S, rs == 1 ? 0 : transport_interest(&S, true, false),
		    &C, rc == 1 ? 0 : transport_interest(&C, true, false), 2000) > 0);
	}
	cr_assert_fail("handshake did not finish");
	return -1;
}

static void
accepted(const char *sni, enum sni_match want, int32_t id)
{
	struct sni_pick pick;
	int r = handshake(sni, &pick);
	cr_assert_eq(r, 0, "'%s' refused (side %c): %s / %s", sni, r, transport_tls_error(&S),
	    transport_tls_error(&C));
	cr_assert(pick.decided, "'%s': no pick", sni);
	cr_assert_not(pick.refused);
	cr_assert_eq(pick.match, want, "'%s': %s", sni, sni_match_str(pick.match));
	cr_assert_eq(pick.node_id, id);
	cr_assert_eq(METRIC_GET(m, sni_unknown), 0);
}

Test(sni_gate, bootstrap)
{
	accepted(BOOT, SNI_BOOTSTRAP, -1);
}

Test(sni_gate, bootstrap_any_case_trailing_dot)
{
	accepted("Kafka.Example.COM.", SNI_BOOTSTRAP, -1);
}

Test(sni_gate, broker)
{
	accepted("broker-3.kafka.example.com", SNI_BROKER, 3);
}

Test(sni_gate, broker_large_id)
{
	accepted("BROKER-2147483647.kafka.example.com", SNI_BROKER, 2147483647);
}

static void
refused(const char *sni)
{
	struct sni_pick pick;
	int r = handshake(sni, &pick);
	cr_assert_neq(r, 0, "'%s' accepted", sni ? sni : "(no SNI)");
	cr_assert_not(pick.decided);
	cr_assert(pick.refused);
	cr_assert_eq(METRIC_GET(m, sni_unknown), 1);
	/* the client sees the alert: drive it until it fails too */
	for (int turn = 0; turn < 20 && C.state == TRANSPORT_HANDSHAKE; turn++) {
		if (transport_handshake(&C) < 0)
			break;
		fx_wait_for(&C, transport_interest(&C, true, false), NULL, 0, 500);
	}
	cr_assert(strstr(transport_tls_error(&C), "unrecognized name") != NULL ||
	    strstr(transport_tls_error(&C), "unrecognized_name") != NULL,
	    "client error: '%s'", transport_tls_error(&C));
}

Test(sni_gate, unknown_name_alert_unrecognized_name)
{
	refused("nope.kafka.example.com");
}

Test(sni_gate, leading_zero_refused)
{
	refused("broker-03.kafka.example.com");
}

Test(sni_gate, overflow_refused)
{
	refused("broker-2147483648.kafka.example.com");
}

Test(sni_gate, no_sni_refused)
{
	refused(NULL);
}

/* ---- resumption: the name of this ClientHello routes, not the session's ---- */

static struct tlskeys keys;

/* One full connection on a fresh socketpair (the suite's S/C stay unused):
 * handshake with `sni` at most TLS version `maxv`, resuming `resume` when
 * given, one byte each way so TLS 1.3 tickets arrive; the client session. */
static SSL_SESSION *
session_with(const char *sni, int maxv, SSL_SESSION *resume, struct sni_pick *pick,
	     bool *reused)
{
	int p[2];
	struct transport s, c;
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, p), 0);
	cr_assert_eq(transport_tls_server_init(&s, p[0], sctx), 0);
	cr_assert_eq(sni_gate_attach(transport_tls_ssl(&s), pick), 0);
	cr_assert_eq(transport_tls_client_init(&c, p[1], cctx, NULL, false), 0);
	SSL *cs = transport_tls_ssl(&c);
	cr_assert_eq(SSL_set_tlsext_host_name(cs, sni), 1);
	cr_assert_eq(SSL_set_max_proto_version(cs, maxv), 1);
	if (resume)
		cr_assert_eq(SSL_set_session(cs, resume), 1);
	for (int turn = 0; s.state == TRANSPORT_HANDSHAKE || c.state == TRANSPORT_HANDSHAKE; turn++) {
		cr_assert_lt(turn, 50);
		int rs = s.state == TRANSPORT_HANDSHAKE ? transport_handshake(&s) : 1;
		int rc = c.state == TRANSPORT_HANDSHAKE ? transport_handshake(&c) : 1;
		cr_assert(rs >= 0 && rc >= 0, "%s / %s", transport_tls_error(&s),
		    transport_tls_error(&c));
		if (rs == 0 || rc == 0)
			fx_wait_for(&s, rs == 1 ? 0 : transport_interest(&s, true, false), &c,
			    rc == 1 ? 0 : transport_interest(&c, true, false), 2000);
	}
	cr_assert_eq(transport_write(&s, "x", 1), 1);
	char b = 0;
	for (int turn = 0; transport_read(&c, &b, 1) != 1; turn++) {
		cr_assert_lt(turn, 50);
		fx_wait_for(&c, transport_interest(&c, true, false), NULL, 0, 2000);
	}
	*reused = SSL_session_reused(cs);
	SSL_SESSION *sess = SSL_get1_session(cs);
	cr_assert_eq(transport_shutdown(&c), 1);
	transport_close(&s);
	transport_close(&c);
	return sess;
}

static void
resumed_routes_by_new_name(int maxv)
{
	memset(&keys, 0, sizeof keys);
	keys.n = 1;
	memset(keys.key[0].name, 0x11, sizeof keys.key[0].name);
	memset(keys.key[0].aes, 0x22, sizeof keys.key[0].aes);
	memset(keys.key[0].hmac, 0x33, sizeof keys.key[0].hmac);
	cr_assert_eq(tls_ticket_keys_install(sctx, &keys), 0);
	struct sni_pick pick;
	bool reused;
	SSL_SESSION *s1 = session_with(BOOT, maxv, NULL, &pick, &reused);
	cr_assert_not(reused);
	cr_assert_eq(pick.match, SNI_BOOTSTRAP);
	SSL_SESSION *s2 = session_with("broker-2.kafka.example.com", maxv, s1, &pick, &reused);
	cr_assert(reused, "the session was not resumed");
	cr_assert(pick.decided);
	cr_assert_eq(pick.match, SNI_BROKER, "routed by the session's name");
	cr_assert_eq(pick.node_id, 2);
	SSL_SESSION_free(s1);
	SSL_SESSION_free(s2);
}

Test(sni_gate, resumed_tls12_session_routes_by_the_new_name)
{
	resumed_routes_by_new_name(TLS1_2_VERSION);
}

Test(sni_gate, resumed_tls13_session_routes_by_the_new_name)
{
	resumed_routes_by_new_name(TLS1_3_VERSION);
}
