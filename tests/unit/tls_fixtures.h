/*
 * tls_fixtures — throwaway keys and certificates made at test time with
 * OpenSSL's APIs (nothing is shipped): a CA, a server certificate for a
 * DNS name signed by it, a client certificate, and PEM text of each.
 * Header-only, for the unit suites that need TLS (tlsctx, tls).
 */
#ifndef FERRY_TESTS_TLS_FIXTURES_H
#define FERRY_TESTS_TLS_FIXTURES_H

#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include <poll.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/transport.h"

struct fx_pem {
	char *data;
	size_t len;
};

struct fx_cert {
	EVP_PKEY *key;
	X509 *cert;
	struct fx_pem key_pem, cert_pem;
};

/* Waits (poll, up to ms) for what each transport's interest asks. The
 * number of fds ready. */
static inline int
fx_wait_for(struct transport *a, int ea, struct transport *b, int eb, int ms)
{
	struct pollfd p[2];
	int n = 0;
	if (a && ea)
		p[n++] = (struct pollfd){ a->fd, (short)((ea & 1 ? POLLIN : 0) | (ea & 2 ? POLLOUT : 0)), 0 };
	if (b && eb)
		p[n++] = (struct pollfd){ b->fd, (short)((eb & 1 ? POLLIN : 0) | (eb & 2 ? POLLOUT : 0)), 0 };
	if (n == 0)
		return 0;
	return poll(p, (nfds_t)n, ms);
}

static inline struct fx_pem
fx_bio_text(BIO *b)
{
	char *p;
	long n = BIO_get_mem_data(b, &p);
	struct fx_pem out = { malloc((size_t)n + 1), (size_t)n };

	cr_assert_not_null(out.data);
	memcpy(out.data, p, (size_t)n);
	out.data[n] = '\0';
	BIO_free(b);
	return out;
}

static inline void
fx_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX c;
	X509V3_set_ctx_nodb(&c);
	X509V3_set_ctx(&c, issuer, x, NULL, NULL, 0);
	X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &c, nid, value);
	cr_assert_not_null(e, "extension %d=%s", nid, value);
	cr_assert_eq(X509_add_ext(x, e, -1), 1);
	X509_EXTENSION_free(e);
}

/* A P-256 key and a certificate with CN=cn signed by issuer (self-signed
 * when issuer is NULL, then a CA). san: "DNS:x,IP:y" or NULL. days may be
 * negative (an expired certificate). */
static inline void
fx_make(struct fx_cert *out, const char *cn, const struct fx_cert *issuer,
    const char *san, long days)
{
	static long serial = 1;
	out->key = EVP_EC_gen("P-256");
	cr_assert_not_null(out->key);
	X509 *x = X509_new();
	cr_assert_not_null(x);
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
	X509_gmtime_adj(X509_getm_notBefore(x), days < 0 ? days * 86400L * 2 : -3600);
	X509_gmtime_adj(X509_getm_notAfter(x), days * 86400L);
	X509_set_pubkey(x, out->key);
	X509_NAME *nm = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	X509 *iss = issuer ? issuer->cert : x;
	X509_set_issuer_name(x, X509_get_subject_name(iss));
	if (issuer == NULL) {
		fx_ext(x, x, NID_basic_constraints, "critical,CA:TRUE");
		fx_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign");
	} else {
		fx_ext(x, iss, NID_basic_constraints, "CA:FALSE");
		if (san)
			fx_ext(x, iss, NID_subject_alt_name, san);
	}
	cr_assert(X509_sign(x, issuer ? issuer->key : out->key, EVP_sha256()) > 0);
	out->cert = x;
	BIO *b = BIO_new(BIO_s_mem());
	cr_assert_eq(PEM_write_bio_X509(b, x), 1);
	out->cert_pem = fx_bio_text(b);
	b = BIO_new(BIO_s_mem());
	cr_assert_eq(PEM_write_bio_PrivateKey(b, out->key, NULL, NULL, 0, NULL, NULL), 1);
	out->key_pem = fx_bio_text(b);
}

static inline void
fx_free(struct fx_cert *c)
{
	EVP_PKEY_free(c->key);
	X509_free(c->cert);
	free(c->key_pem.data);
	free(c->cert_pem.data);
	memset(c, 0, sizeof *c);
}

#endif
