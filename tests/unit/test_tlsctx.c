/*
 * test_tlsctx — common/tlsctx.c: contexts from in-memory PEM made at test
 * time (tls_fixtures.h), every refusal with its message (bad PEM, key of
 * another certificate, unknown ciphers, client auth without a CA), and
 * handshakes between the contexts over memory BIOs (no sockets): chain and
 * name verification, client certificates required / requested, minimum
 * version, renegotiation refused.
 */
#include <criterion/criterion.h>

#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "common/tlsctx.h"
#include "tls_fixtures.h"

static struct fx_cert ca, srv, cli, other_ca, other;

static void
setup(void)
{
	fx_make(&ca, "ferry test CA", NULL, NULL, 30);
	fx_make(&srv, "kafka.test", &ca, "DNS:kafka.test,IP:127.0.0.1", 30);
	fx_make(&cli, "client one", &ca, NULL, 30);
	fx_make(&other_ca, "other CA", NULL, NULL, 30);
	fx_make(&other, "kafka.test", &other_ca, "DNS:kafka.test", 30);
}

static void
teardown(void)
{
	fx_free(&ca);
	fx_free(&srv);
	fx_free(&cli);
	fx_free(&other_ca);
	fx_free(&other);
}

#define PEM(f) ((struct tlsctx_pem){ (f).data, (f).len })

static struct tlsctx_server_opts
server_opts(void)
{
	return (struct tlsctx_server_opts){
		.cert = PEM(srv.cert_pem), .key = PEM(srv.key_pem),
	};
}

static struct tlsctx_client_opts
client_opts(void)
{
	return (struct tlsctx_client_opts){ .ca = PEM(ca.cert_pem), .verify = true };
}

/* Runs a handshake between two fresh SSLs over memory BIOs. 1 when both
 * sides finished, 0 when one failed. */
static int
handshake(SSL_CTX *sctx, SSL_CTX *cctx, const char *host, long *verify_result,
    SSL **keep_s, SSL **keep_c)
{
	SSL *s = SSL_new(sctx), *c = SSL_new(cctx);
	BIO *s_in = BIO_new(BIO_s_mem()), *s_out = BIO_new(BIO_s_mem());
	BIO *c_in = BIO_new(BIO_s_mem()), *c_out = BIO_new(BIO_s_mem());
	int sdone = 0, cdone = 0, failed = 0;
	char buf[16384];

	cr_assert(s && c && s_in && s_out && c_in && c_out);
	BIO_set_mem_eof_return(s_in, -1);
	BIO_set_mem_eof_return(c_in, -1);
	SSL_set_bio(s, s_in, s_out);
	SSL_set_bio(c, c_in, c_out);
	SSL_set_accept_state(s);
	SSL_set_connect_state(c);
	if (host) {
		SSL_set_tlsext_host_name(c, host);
		SSL_set1_host(c, host);
	}
	for (int i = 0; i < 20 && !failed && !(sdone && cdone); i++) {
		int r;
		if (!cdone) {
			r = SSL_do_handshake(c);
			if (r == 1)
				cdone = 1;
			else if (SSL_get_error(c, r) != SSL_ERROR_WANT_READ)
				failed = 1;
		}
		int n;
		while ((n = BIO_read(c_out, buf, sizeof buf)) > 0)
			BIO_write(s_in, buf, n);
		if (!sdone && !failed) {
			r = SSL_do_handshake(s);
			if (r == 1)
				sdone = 1;
			else if (SSL_get_error(s, r) != SSL_ERROR_WANT_READ)
				failed = 1;
		}
		while ((n = BIO_read(s_out, buf, sizeof buf)) > 0)
			BIO_write(c_in, buf, n);
	}
	/* TLS 1.3: the server's verdict on the client certificate reaches
	 * the client with its first read */
	if (!failed && sdone && cdone) {
		int r = SSL_read(c, buf, sizeof buf);
		if (r <= 0 && SSL_get_error(c, r) != SSL_ERROR_WANT_READ)
			failed = 1;
	}
	if (verify_result)
		*verify_result = SSL_get_verify_result(c);
	ERR_clear_error();
	if (keep_s && keep_c && !failed) {
		*keep_s = s;
		*keep_c = c;
	} else {
		SSL_free(s);
		SSL_free(c);
	}
	return !failed && sdone && cdone;
}

TestSuite(tlsctx, .init = setup, .fini = teardown);

Test(tlsctx, server_and_client_handshake)
{
	char err[256];
	struct tlsctx_server_opts so = server_opts();
	SSL_CTX *s = tlsctx_server_new(&so, err, sizeof err);
	cr_assert_not_null(s, "%s", err);
	struct tlsctx_client_opts co = client_opts();
	SSL_CTX *c = tlsctx_client_new(&co, err, sizeof err);
	cr_assert_not_null(c, "%s", err);
	long vr;
	cr_assert_eq(handshake(s, c, "kafka.test", &vr, NULL, NULL), 1);
	cr_assert_eq(vr, X509_V_OK);
	/* the name is checked: another name fails */
	cr_assert_eq(handshake(s, c, "other.test", &vr, NULL, NULL), 0);
	cr_assert_eq(vr, X509_V_ERR_HOSTNAME_MISMATCH);
	SSL_CTX_free(s);
	SSL_CTX_free(c);
}

Test(tlsctx, chain_in_cert_file)
{
	/* leaf + CA in one file: the CA goes out as the chain */
	size_t n = srv.cert_pem.len + ca.cert_pem.len;
	char *both = malloc(n + 1);
	memcpy(both, srv.cert_pem.data, srv.cert_pem.len);
	memcpy(both + srv.cert_pem.len, ca.cert_pem.data, ca.cert_pem.len + 1);
	struct tlsctx_server_opts so = server_opts();
	so.cert = (struct tlsctx_pem){ both, n };
	char err[256];
	SSL_CTX *s = tlsctx_server_new(&so, err, sizeof err);
	cr_assert_not_null(s, "%s", err);
	STACK_OF(X509) *chain = NULL;
	cr_assert_eq(SSL_CTX_get0_chain_certs(s, &chain), 1);
	cr_assert_eq(sk_X509_num(chain), 1);
	SSL_CTX_free(s);
	/* garbage after the leaf is refused, not skipped */
	char *bad = malloc(srv.cert_pem.len + 64);
	memcpy(bad, srv.cert_pem.data, srv.cert_pem.len);
	strcpy(bad + srv.cert_pem.len, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
	so.cert = (struct tlsctx_pem){ bad, strlen(bad) };
	cr_assert_null(tlsctx_server_new(&so, err, sizeof err));
	cr_assert(strncmp(err, "tls_cert: bad certificate in the chain", 38) == 0, "%s", err);
	free(bad);
	free(both);
}

Test(tlsctx, refusals)
{
	char err[256];
	struct tlsctx_server_opts so = server_opts();

	so.key = PEM(other.key_pem);
	cr_assert_null(tlsctx_server_new(&so, err, sizeof err));
	cr_assert_str_eq(err, "tls_key: key does not match the certificate of tls_cert");

	so = server_opts();
	so.cert = (struct tlsctx_pem){ "not a pem\n", 10 };
	cr_assert_null(tlsctx_server_new(&so, err, sizeof err));
	cr_assert(strncmp(err, "tls_cert: no PEM certificate: ", 30) == 0, "%s", err);

	so = server_opts();
	so.key = PEM(srv.cert_pem);
	cr_assert_null(tlsctx_server_new(&so, err, sizeof err));
	cr_assert(strncmp(err, "tls_key: no PEM private key", 27) == 0, "%s", err);

	so = server_opts();
	so.ciphers = "NOPE-NOTHING";
	cr_assert_null(tlsctx_server_new(&so, err, sizeof err));
	cr_assert(strncmp(err, "tls_ciphers: no cipher of the list is known", 43) == 0, "%s", err);

	so = server_opts();
	so.ciphersuites = "TLS_NOPE";
	cr_assert_null(tlsctx_server_new(&so, err, sizeof err));
	cr_assert(strncmp(err, "tls_ciphersuites: ", 18) == 0, "%s", err);

	so = server_opts();
	so.client_auth = TLSCTX_AUTH_REQUIRED;
	cr_assert_null(tlsctx_server_new(&so, err, sizeof err));
	cr_assert_str_eq(err, "tls_client_auth needs tls_client_ca");

	so.client_ca = (struct tlsctx_pem){ "junk", 4 };
	cr_assert_null(tlsctx_server_new(&so, err, sizeof err));
	cr_assert(strncmp(err, "tls_client_ca: no PEM certificate", 33) == 0, "%s", err);

	struct tlsctx_client_opts co = client_opts();
	co.ca = (struct tlsctx_pem){ "junk", 4 };
	cr_assert_null(tlsctx_client_new(&co, err, sizeof err));
	cr_assert(strncmp(err, "upstream_ca: no PEM certificate", 31) == 0, "%s", err);

	co = client_opts();
	co.cert = PEM(cli.cert_pem);
	co.key = PEM(srv.key_pem);
	cr_assert_null(tlsctx_client_new(&co, err, sizeof err));
	cr_assert_str_eq(err, "upstream_key: key does not match the certificate of upstream_cert");
	cr_assert_eq(ERR_peek_error(), 0, "error queue left non-empty");
}

Test(tlsctx, client_certificates)
{
	char err[256];
	struct tlsctx_server_opts so = server_opts();
	so.client_ca = PEM(ca.cert_pem);
	so.client_auth = TLSCTX_AUTH_REQUIRED;
	SSL_CTX *req = tlsctx_server_new(&so, err, sizeof err);
	cr_assert_not_null(req, "%s", err);
	so.client_auth = TLSCTX_AUTH_REQUESTED;
	SSL_CTX *opt = tlsctx_server_new(&so, err, sizeof err);
	cr_assert_not_null(opt, "%s", err);

	struct tlsctx_client_opts co = client_opts();
	SSL_CTX *anon = tlsctx_client_new(&co, err, sizeof err);
	cr_assert_not_null(anon, "%s", err);
	co.cert = PEM(cli.cert_pem);
	co.key = PEM(cli.key_pem);
	SSL_CTX *withcert = tlsctx_client_new(&co, err, sizeof err);
	cr_assert_not_null(withcert, "%s", err);
	co.cert = PEM(other.cert_pem);
	co.key = PEM(other.key_pem);
	SSL_CTX *wrongca = tlsctx_client_new(&co, err, sizeof err);
	cr_assert_not_null(wrongca, "%s", err);

	cr_assert_eq(handshake(req, anon, "kafka.test", NULL, NULL, NULL), 0);
	cr_assert_eq(handshake(req, wrongca, "kafka.test", NULL, NULL, NULL), 0);
	SSL *s = NULL, *c = NULL;
	cr_assert_eq(handshake(req, withcert, "kafka.test", NULL, &s, &c), 1);
	X509 *peer = SSL_get1_peer_certificate(s);
	cr_assert_not_null(peer);
	X509_free(peer);
	SSL_free(s);
	SSL_free(c);
	cr_assert_eq(handshake(opt, anon, "kafka.test", NULL, NULL, NULL), 1);
	cr_assert_eq(handshake(opt, withcert, "kafka.test", NULL, NULL, NULL), 1);
	SSL_CTX_free(req);
	SSL_CTX_free(opt);
	SSL_CTX_free(anon);
	SSL_CTX_free(withcert);
	SSL_CTX_free(wrongca);
}

Test(tlsctx, versions_and_verify_off)
{
	char err[256];
	struct tlsctx_server_opts so = server_opts();
	so.min_version = TLSCTX_TLS_1_3;
	SSL_CTX *s13 = tlsctx_server_new(&so, err, sizeof err);
	cr_assert_not_null(s13, "%s", err);
	struct tlsctx_client_opts co = client_opts();
	SSL_CTX *c12 = tlsctx_client_new(&co, err, sizeof err);
	cr_assert_not_null(c12);
	SSL_CTX_set_max_proto_version(c12, TLS1_2_VERSION);
	cr_assert_eq(handshake(s13, c12, "kafka.test", NULL, NULL, NULL), 0);
	so.min_version = TLSCTX_TLS_1_2;
	SSL_CTX *s12 = tlsctx_server_new(&so, err, sizeof err);
	cr_assert_eq(handshake(s12, c12, "kafka.test", NULL, NULL, NULL), 1);
	/* TLS 1.1 is never spoken */
	SSL_CTX *c11 = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_security_level(c11, 0);
	SSL_CTX_set_min_proto_version(c11, TLS1_VERSION);
	SSL_CTX_set_max_proto_version(c11, TLS1_1_VERSION);
	SSL_CTX_set_verify(c11, SSL_VERIFY_NONE, NULL);
	cr_assert_eq(handshake(s12, c11, NULL, NULL, NULL, NULL), 0);

	/* verify off: a certificate of an unknown CA is accepted */
	co.ca = (struct tlsctx_pem){ 0 };
	co.verify = false;
	SSL_CTX *noverify = tlsctx_client_new(&co, err, sizeof err);
	cr_assert_not_null(noverify, "%s", err);
	so.cert = PEM(other.cert_pem);
	so.key = PEM(other.key_pem);
	SSL_CTX *sother = tlsctx_server_new(&so, err, sizeof err);
	cr_assert_not_null(sother, "%s", err);
	cr_assert_eq(handshake(sother, noverify, NULL, NULL, NULL, NULL), 1);
	cr_assert_eq(handshake(sother, c12, "kafka.test", NULL, NULL, NULL), 0);
	SSL_CTX_free(s13);
	SSL_CTX_free(s12);
	SSL_CTX_free(c12);
	SSL_CTX_free(c11);
	SSL_CTX_free(noverify);
	SSL_CTX_free(sother);
}

Test(tlsctx, renegotiation_refused)
{
	char err[256];
	struct tlsctx_server_opts so = server_opts();
	SSL_CTX *s = tlsctx_server_new(&so, err, sizeof err);
	cr_assert(SSL_CTX_get_options(s) & SSL_OP_NO_RENEGOTIATION);
	struct tlsctx_client_opts co = client_opts();
	SSL_CTX *c = tlsctx_client_new(&co, err, sizeof err);
	cr_assert(SSL_CTX_get_options(c) & SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_max_proto_version(c, TLS1_2_VERSION);
	SSL *ss = NULL, *cs = NULL;
	cr_assert_eq(handshake(s, c, "kafka.test", NULL, &ss, &cs), 1);
	/* the client may not even ask */
	cr_assert_eq(SSL_renegotiate(cs), 0);
	ERR_clear_error();
	SSL_free(ss);
	SSL_free(cs);
	SSL_CTX_free(s);
	SSL_CTX_free(c);
}

Test(tlsctx, cert_facts)
{
	time_t na, now = time(NULL);
	char err[128], subj[256];
	cr_assert_eq(tlsctx_cert_not_after(PEM(srv.cert_pem), &na, err, sizeof err), 0);
	cr_assert(na > now + 29 * 86400 && na <= now + 30 * 86400 + 5, "%ld", (long)(na - now));
	cr_assert_eq(tlsctx_cert_not_after((struct tlsctx_pem){ "x", 1 }, &na, err, sizeof err), -1);
	cr_assert_eq(tlsctx_cert_subject(PEM(cli.cert_pem), subj, sizeof subj), 0);
	cr_assert_str_eq(subj, "CN=client one");
}
