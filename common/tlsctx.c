/*
 * tlsctx — SSL_CTX from in-memory PEM; see tlsctx.h.
 */
#include "common/tlsctx.h"

#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

void
tlsctx_errors(char *buf, size_t len)
{
	unsigned long e;
	size_t n = strlen(buf);
	bool first = true;

	while ((e = ERR_get_error()) != 0) {
		const char *r = ERR_reason_error_string(e);
		char tmp[64];
		if (r == NULL) {
			snprintf(tmp, sizeof tmp, "error %lx", e);
			r = tmp;
		}
		if (n + 4 < len) {
			int w = snprintf(buf + n, len - n, "%s%s", first ? ": " : "; ", r);
			if (w > 0)
				n += (size_t)w < len - n ? (size_t)w : len - n - 1;
		}
		first = false;
	}
}

static void
tlsctx_fail(char *err, size_t errlen, const char *what)
{
	snprintf(err, errlen, "%s", what);
	tlsctx_errors(err, errlen);
}

static BIO *
tlsctx_bio(struct tlsctx_pem pem)
{
	if (pem.len > (size_t)INT32_MAX)
		return NULL;
	return BIO_new_mem_buf(pem.data, (int)pem.len);
}

/* Certificate + chain and the key; the key must match. */
static int
tlsctx_use_cert_key(SSL_CTX *ctx, struct tlsctx_pem cert, struct tlsctx_pem key,
    const char *cert_key, const char *key_key, char *err, size_t errlen)
{
	BIO *b = tlsctx_bio(cert);
	X509 *x = NULL;
	EVP_PKEY *pk = NULL;
	int rc = -1;
	char what[512];

	if (b == NULL || (x = PEM_read_bio_X509_AUX(b, NULL, NULL, NULL)) == NULL) {
		snprintf(what, sizeof what, "%s: no PEM certificate", cert_key);
		tlsctx_fail(err, errlen, what);
		goto out;
	}
	if (SSL_CTX_use_certificate(ctx, x) != 1) {
		snprintf(what, sizeof what, "%s: certificate not usable", cert_key);
		tlsctx_fail(err, errlen, what);
		goto out;
	}
	SSL_CTX_clear_chain_certs(ctx);
	for (;;) {
		X509 *ca = PEM_read_bio_X509(b, NULL, NULL, NULL);
		if (ca == NULL) {
			unsigned long e = ERR_peek_last_error();
			if (ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE) {
				ERR_clear_error();  /* end of the chain */
				break;
			}
			snprintf(what, sizeof what, "%s: bad certificate in the chain", cert_key);
			tlsctx_fail(err, errlen, what);
			goto out;
		}
		if (SSL_CTX_add0_chain_cert(ctx, ca) != 1) {
			X509_free(ca);
			snprintf(what, sizeof what, "%s: chain certificate not usable", cert_key);
			tlsctx_fail(err, errlen, what);
			goto out;
		}
	}
	BIO_free(b);
	b = tlsctx_bio(key);
	if (b == NULL || (pk = PEM_read_bio_PrivateKey(b, NULL, NULL, (void *)"")) == NULL) {
		snprintf(what, sizeof what, "%s: no PEM private key (or it is encrypted)", key_key);
		tlsctx_fail(err, errlen, what);
		goto out;
	}
	if (SSL_CTX_use_PrivateKey(ctx, pk) != 1) {
		ERR_clear_error();
		snprintf(err, errlen, "%s: key does not match the certificate of %s",
		    key_key, cert_key);
		goto out;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		ERR_clear_error();
		snprintf(err, errlen, "%s: key does not match the certificate of %s",
		    key_key, cert_key);
		goto out;
	}
	rc = 0;
out:
	BIO_free(b);
	X509_free(x);
	EVP_PKEY_free(pk);
	return rc;
}

/* Every certificate of pem into store (and, when names != NULL, their
 * subjects into names). The number added, or -1. */
static int
tlsctx_load_cas(X509_STORE *store, STACK_OF(X509_NAME) *names, struct tlsctx_pem pem,
    const char *key, char *err, size_t errlen)
{
	BIO *b = tlsctx_bio(pem);
	int n = 0;
	char what[512];

	if (b == NULL) {
		snprintf(err, errlen, "%s: out of memory", key);
		return -1;
	}
	for (;;) {
		X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
		if (x == NULL) {
			unsigned long e = ERR_peek_last_error();
			if (n > 0 && ERR_GET_LIB(e) == ERR_LIB_PEM &&
			    ERR_GET_REASON(e) == PEM_R_NO_START_LINE) {
				ERR_clear_error();
				break;
			}
			snprintf(what, sizeof what, n ? "%s: bad certificate after the first %d"
			    : "%s: no PEM certificate", key, n);
			tlsctx_fail(err, errlen, what);
			BIO_free(b);
			return -1;
		}
		if (X509_STORE_add_cert(store, x) != 1) {
			/* the same CA twice in a bundle is harmless */
			unsigned long e = ERR_peek_last_error();
			if (ERR_GET_REASON(e) != X509_R_CERT_ALREADY_IN_HASH_TABLE) {
				X509_free(x);
				snprintf(what, sizeof what, "%s: CA certificate not usable", key);
				tlsctx_fail(err, errlen, what);
				BIO_free(b);
				return -1;
			}
			ERR_clear_error();
		}
		if (names != NULL) {
			X509_NAME *nm = X509_NAME_dup(X509_get_subject_name(x));
			if (nm == NULL || !sk_X509_NAME_push(names, nm)) {
				X509_NAME_free(nm);
				X509_free(x);
				snprintf(err, errlen, "%s: out of memory", key);
				BIO_free(b);
				return -1;
			}
		}
		X509_free(x);
		n++;
	}
	BIO_free(b);
	return n;
}

static SSL_CTX *
tlsctx_common(const SSL_METHOD *m, int min_version, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(m);

	if (ctx == NULL) {
		tlsctx_fail(err, errlen, "cannot create a TLS context");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, min_version == TLSCTX_TLS_1_3
	    ? TLS1_3_VERSION : TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
	    SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
	return ctx;
}

SSL_CTX *
tlsctx_server_new(const struct tlsctx_server_opts *o, char *err, size_t errlen)
{
	SSL_CTX *ctx;
	STACK_OF(X509_NAME) *names = NULL;

	err[0] = '\0';
	ERR_clear_error();
	if (o->cert.len == 0 || o->key.len == 0) {
		snprintf(err, errlen, "tls_cert and tls_key are required");
		return NULL;
	}
	if ((ctx = tlsctx_common(TLS_server_method(), o->min_version, err, errlen)) == NULL)
		return NULL;
	SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
	/* resumption with client certificates needs a session id context
	 * (else OpenSSL fails the resumed handshake) */
	SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"ferry", 5);
	if (SSL_CTX_set_cipher_list(ctx, o->ciphers && o->ciphers[0] ? o->ciphers
	    : TLSCTX_SERVER_CIPHERS) != 1) {
		tlsctx_fail(err, errlen, "tls_ciphers: no cipher of the list is known");
		goto fail;
	}
	if (o->ciphersuites && o->ciphersuites[0] &&
	    SSL_CTX_set_ciphersuites(ctx, o->ciphersuites) != 1) {
		tlsctx_fail(err, errlen, "tls_ciphersuites: not a valid TLS 1.3 suite list");
		goto fail;
	}
	if (tlsctx_use_cert_key(ctx, o->cert, o->key, "tls_cert", "tls_key", err, errlen) != 0)
		goto fail;
	if (o->client_auth != TLSCTX_AUTH_NONE) {
		if (o->client_ca.len == 0) {
			snprintf(err, errlen, "tls_client_auth needs tls_client_ca");
			goto fail;
		}
		if ((names = sk_X509_NAME_new_null()) == NULL) {
			snprintf(err, errlen, "tls_client_ca: out of memory");
			goto fail;
		}
		if (tlsctx_load_cas(SSL_CTX_get_cert_store(ctx), names, o->client_ca,
		    "tls_client_ca", err, errlen) < 0) {
			sk_X509_NAME_pop_free(names, X509_NAME_free);
			goto fail;
		}
		SSL_CTX_set_client_CA_list(ctx, names);  /* takes names */
		SSL_CTX_set_verify(ctx, o->client_auth == TLSCTX_AUTH_REQUIRED
		    ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT : SSL_VERIFY_PEER, NULL);
	}
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

SSL_CTX *
tlsctx_client_new(const struct tlsctx_client_opts *o, char *err, size_t errlen)
{
	SSL_CTX *ctx;

	err[0] = '\0';
	ERR_clear_error();
	if ((ctx = tlsctx_common(TLS_client_method(), o->min_version, err, errlen)) == NULL)
		return NULL;
	const char *ca_name = o->ca_name ? o->ca_name : "upstream_ca";
	if (o->ca.len) {
		if (tlsctx_load_cas(SSL_CTX_get_cert_store(ctx), NULL, o->ca, ca_name,
		    err, errlen) < 0)
			goto fail;
	} else if (o->verify && SSL_CTX_set_default_verify_paths(ctx) != 1) {
		char what[512];

		snprintf(what, sizeof what, "%s: cannot load the system trust store", ca_name);
		tlsctx_fail(err, errlen, what);
		goto fail;
	}
	if (o->cert.len || o->key.len) {
		if (tlsctx_use_cert_key(ctx, o->cert, o->key,
		    o->cert_name ? o->cert_name : "upstream_cert",
		    o->key_name ? o->key_name : "upstream_key", err, errlen) != 0)
			goto fail;
	}
	SSL_CTX_set_verify(ctx, o->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

static X509 *
tlsctx_first_cert(struct tlsctx_pem pem)
{
	BIO *b = tlsctx_bio(pem);
	X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;

	BIO_free(b);
	return x;
}

int
tlsctx_cert_not_after(struct tlsctx_pem pem, time_t *out, char *err, size_t errlen)
{
	X509 *x;
	struct tm tm;

	ERR_clear_error();
	if ((x = tlsctx_first_cert(pem)) == NULL) {
		tlsctx_fail(err, errlen, "no PEM certificate");
		return -1;
	}
	if (ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) != 1) {
		X509_free(x);
		tlsctx_fail(err, errlen, "bad notAfter");
		return -1;
	}
	X509_free(x);
	*out = timegm(&tm);
	return 0;
}

int
tlsctx_cert_subject(struct tlsctx_pem pem, char *buf, size_t len)
{
	X509 *x;
	BIO *b;
	int rc = -1;

	if (len == 0)
		return -1;
	ERR_clear_error();
	x = tlsctx_first_cert(pem);
	buf[0] = '\0';
	if (x == NULL)
		return -1;
	if ((b = BIO_new(BIO_s_mem())) != NULL &&
	    X509_NAME_print_ex(b, X509_get_subject_name(x), 0, XN_FLAG_RFC2253) >= 0) {
		int n = BIO_read(b, buf, (int)(len - 1));
		buf[n > 0 ? n : 0] = '\0';
		rc = 0;
	}
	BIO_free(b);
	X509_free(x);
	return rc;
}

int
tlsctx_preload(char *err, size_t errlen)
{
	if (OPENSSL_init_ssl(OPENSSL_INIT_LOAD_CONFIG, NULL) != 1) {
		snprintf(err, errlen, "cannot load OpenSSL's configuration");
		tlsctx_errors(err, errlen);
		return -1;
	}
	/* the algorithms a handshake fetches from the default provider */
	SSL_CTX *ctx = SSL_CTX_new(TLS_method());
	if (ctx == NULL) {
		snprintf(err, errlen, "cannot create a TLS context");
		tlsctx_errors(err, errlen);
		return -1;
	}
	SSL_CTX_free(ctx);
	return 0;
}
