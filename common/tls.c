/*
 * tls — the TLS transport over OpenSSL 3; see tls.h.
 */
#include "common/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "common/tlsctx.h"

/* Small iovecs are gathered into one record of up to this many bytes
 * (a Kafka response is several small iovecs; one record each would cost a
 * header, a MAC and a syscall apiece). */
#define TLS_GATHER 16384

struct tls_impl {
	SSL *ssl;
	bool server;
	bool sniffed;            /* server: first byte seen to be TLS */
	bool plaintext;          /* server: first byte was not TLS */
	bool renegotiation;      /* server: refused a client's renegotiation */
	int8_t deferred;         /* read: 1 EOF, -1 failure (deferred_errno) seen
	                            after bytes returned first; 0 none */
	int deferred_errno;
	bool starved;            /* the last read or handshake step blocked: what
	                            OpenSSL has read ahead is no whole record */
	char err[200];
	unsigned char *gather;   /* TLS_GATHER bytes, allocated on first use (a
	                            single-iovec writer never needs it: idle
	                            connections stay small) */
};

static const struct transport_ops tls_ops;

static struct tls_impl *
tls_x(const struct transport *t)
{
	return t->impl;
}

/* Records why a step failed: OpenSSL's queued reasons, the verification
 * result when the peer's certificate was refused, or errno. */
static void
tls_record(struct tls_impl *x, const char *what, int sslerr, int saved_errno)
{
	long vr = SSL_get_verify_result(x->ssl);

	snprintf(x->err, sizeof x->err, "%s", what);
	if (sslerr == SSL_ERROR_SSL && vr != X509_V_OK) {
		size_t n = strlen(x->err);
		snprintf(x->err + n, sizeof x->err - n, ": certificate verify failed: %s",
		    X509_verify_cert_error_string(vr));
		ERR_clear_error();
		return;
	}
	if (sslerr == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
		size_t n = strlen(x->err);
		snprintf(x->err + n, sizeof x->err - n, ": %s",
		    saved_errno ? strerror(saved_errno) : "connection closed");
		return;
	}
	tlsctx_errors(x->err, sizeof x->err);
}

/* An OpenSSL call answered r <= 0: 0 blocked (errno EAGAIN, *want set),
 * 1 the peer closed (close_notify, or EOF), -1 failed (errno). */
static int
tls_fail(struct tls_impl *x, int r, uint8_t *want, const char *what)
{
	int saved = errno;
	int e = SSL_get_error(x->ssl, r);

	switch (e) {
	case SSL_ERROR_WANT_READ:
		*want = TRANSPORT_WANT_READ;
		errno = EAGAIN;
		return 0;
	case SSL_ERROR_WANT_WRITE:
		*want = TRANSPORT_WANT_WRITE;
		errno = EAGAIN;
		return 0;
	case SSL_ERROR_ZERO_RETURN:
		return 1;
	case SSL_ERROR_SYSCALL:
		tls_record(x, what, e, saved);
		errno = saved ? saved : ECONNRESET;
		if (errno == EAGAIN)
			errno = ECONNRESET;
		return -1;
	default:
		tls_record(x, what, e, saved);
		errno = EPROTO;
		return -1;
	}
}

/* Server side: OpenSSL answers a client's renegotiation ClientHello
 * (refused by SSL_OP_NO_RENEGOTIATION) with a no_renegotiation warning
 * alert and reads on, leaving the connection open to a client that
 * ignores the warning. Seeing that alert go out marks the connection, and
 * the read step then fails it. */
static void
tls_info_cb(const SSL *ssl, int where, int ret)
{
	if ((where & SSL_CB_WRITE_ALERT) && (ret & 0xff) == SSL_AD_NO_RENEGOTIATION) {
		struct tls_impl *x = SSL_get_app_data(ssl);
		if (x != NULL)
			x->renegotiation = true;
	}
}

static ssize_t
tls_read(struct transport *t, void *buf, size_t len)
{
	struct tls_impl *x = tls_x(t);
	size_t total = 0, n = 0;
	int ok;

	if (x->deferred != 0) {
		int d = x->deferred;
		x->deferred = 0;
		if (d > 0)
			return 0;
		errno = x->deferred_errno;
		return -1;
	}
	/* One SSL_read returns one record at most, and a client writes
	 * records of whatever size its writes had (librdkafka: ~1-2 KiB):
	 * read on until len is filled or the socket has no more, so one
	 * read step moves what a plain read(2) would, and the Kafka layer
	 * forwards it in one write instead of one per record. */
	ERR_clear_error();
	while ((ok = SSL_read_ex(x->ssl, (char *)buf + total, len - total, &n)) == 1) {
		total += n;
		if (total == len || x->renegotiation)
			break;
	}
	if (x->renegotiation) {
		snprintf(x->err, sizeof x->err, "TLS read: client-initiated renegotiation refused");
		ERR_clear_error();
		errno = EPROTO;
		return -1;
	}
	if (ok == 1) {
		t->rd_want = TRANSPORT_WANT_READ;
		x->starved = false;  /* stopped with len filled: more may be there */
		return (ssize_t)total;
	}
	int r = tls_fail(x, 0, &t->rd_want, "TLS read");
	x->starved = r == 0;
	if (total > 0) {
		/* The bytes first; a close or failure is kept for the next
		 * read, which pending() asks for at once. */
		if (r != 0) {
			x->deferred = r == 1 ? 1 : -1;
			x->deferred_errno = errno;
			t->rd_want = TRANSPORT_WANT_READ;
		}
		ERR_clear_error();
		return (ssize_t)total;
	}
	switch (r) {
	case 1:
		return 0;
	default:
		return -1;
	}
}

static ssize_t
tls_writev(struct transport *t, const struct iovec *iov, int iovcnt)
{
	struct tls_impl *x = tls_x(t);
	size_t total = 0, off = 0;
	int i = 0;

	while (i < iovcnt) {
		const void *p;
		size_t n, w = 0;

		if (iov[i].iov_len - off == 0) {
			i++;
			off = 0;
			continue;
		}
		if (!x->gather && iov[i].iov_len - off < TLS_GATHER / 2 && i + 1 < iovcnt)
			x->gather = malloc(TLS_GATHER);  /* NULL: write them one by one */
		if (iov[i].iov_len - off >= TLS_GATHER / 2 || i + 1 == iovcnt || !x->gather) {
			p = (const char *)iov[i].iov_base + off;
			n = iov[i].iov_len - off;
		} else {
			/* deterministic for a given iov layout: a retry after
			 * WANT_WRITE gathers the same bytes (or more) */
			size_t k = off;
			n = 0;
			for (int j = i; j < iovcnt && n < TLS_GATHER; j++, k = 0) {
				size_t c = iov[j].iov_len - k;
				if (c > TLS_GATHER - n)
					c = TLS_GATHER - n;
				memcpy(x->gather + n, (const char *)iov[j].iov_base + k, c);
				n += c;
			}
			p = x->gather;
		}
		ERR_clear_error();
		if (SSL_write_ex(x->ssl, p, n, &w) != 1) {
			int r = tls_fail(x, 0, &t->wr_want, "TLS write");
			if (total > 0 && r == 0)
				return (ssize_t)total;  /* the rest waits for wr_want */
			if (r == 1) {
				errno = EPIPE;
				return -1;
			}
			return -1;
		}
		t->wr_want = TRANSPORT_WANT_WRITE;
		total += w;
		/* advance (i, off) by w */
		while (w > 0 && i < iovcnt) {
			size_t c = iov[i].iov_len - off;
			if (w < c) {
				off += w;
				w = 0;
			} else {
				w -= c;
				i++;
				off = 0;
			}
		}
		if (total > (size_t)SSIZE_MAX / 2)
			break;
	}
	return (ssize_t)total;
}

static size_t
tls_pending(const struct transport *t)
{
	struct tls_impl *x = tls_x(t);
	int n = SSL_pending(x->ssl);

	if (x->deferred != 0)
		return 1;  /* a close or failure to report: read again */
	if (n > 0)
		return (size_t)n;
	/* Read-ahead: records already read from the socket but not yet
	 * decrypted count too (SSL_pending counts a decrypted one only).
	 * SSL_has_pending is also true for part of a record, which cannot
	 * be read before more comes: after a step that blocked, only the
	 * socket can bring it (else the caller would spin). */
	return !x->starved && SSL_has_pending(x->ssl) ? 1 : 0;
}

/* Server: the first byte must start a TLS handshake record. 1 it does,
 * 0 not there yet (hs_want READ), -1 not TLS or closed. */
static int
tls_sniff(struct transport *t, struct tls_impl *x)
{
	unsigned char b;
	ssize_t n;

	do
		n = recv(t->fd, &b, 1, MSG_PEEK);
	while (n == -1 && errno == EINTR);
	if (n == 1) {
		if (b == 0x16) {
			x->sniffed = true;
			return 1;
		}
		x->plaintext = true;
		snprintf(x->err, sizeof x->err, "not TLS: first byte 0x%02x is not a "
		    "handshake record (a plaintext Kafka client on a TLS port?)", b);
		errno = EPROTO;
		return -1;
	}
	if (n == 0) {
		snprintf(x->err, sizeof x->err, "peer closed before the handshake");
		errno = ECONNRESET;
		return -1;
	}
	if (errno == EAGAIN || errno == EWOULDBLOCK) {
		t->hs_want = TRANSPORT_WANT_READ;
		return 0;
	}
	snprintf(x->err, sizeof x->err, "TLS handshake: %s", strerror(errno));
	return -1;
}

static int
tls_handshake(struct transport *t)
{
	struct tls_impl *x = tls_x(t);
	int r;

	if (x->server && !x->sniffed && (r = tls_sniff(t, x)) != 1)
		return r;
	ERR_clear_error();
	r = SSL_do_handshake(x->ssl);
	if (r == 1) {
		x->starved = false;  /* a client's first request may be read ahead */
		t->state = TRANSPORT_OPEN;
		t->hs_want = TRANSPORT_WANT_NONE;
		t->rd_want = TRANSPORT_WANT_READ;
		t->wr_want = TRANSPORT_WANT_WRITE;
		return 1;
	}
	switch (tls_fail(x, r, &t->hs_want, "TLS handshake")) {
	case 0:
		x->starved = true;
		return 0;
	case 1:
		snprintf(x->err, sizeof x->err, "peer closed during the handshake");
		errno = ECONNRESET;
		return -1;
	default:
		return -1;
	}
}

static int
tls_shutdown(struct transport *t)
{
	struct tls_impl *x = tls_x(t);
	int r;

	if (t->state == TRANSPORT_SHUTDOWN && t->hs_want == TRANSPORT_WANT_NONE)
		return 1;
	if (t->state == TRANSPORT_HANDSHAKE || SSL_in_init(x->ssl)) {
		/* no session to close: the socket's write side only */
		if (shutdown(t->fd, SHUT_WR) == -1)
			return -1;
		t->state = TRANSPORT_SHUTDOWN;
		t->hs_want = TRANSPORT_WANT_NONE;
		return 1;
	}
	ERR_clear_error();
	r = SSL_shutdown(x->ssl);
	if (r >= 0) {                   /* close_notify sent */
		t->state = TRANSPORT_SHUTDOWN;
		t->hs_want = TRANSPORT_WANT_NONE;
		return 1;
	}
	t->state = TRANSPORT_SHUTDOWN;
	switch (tls_fail(x, r, &t->hs_want, "TLS shutdown")) {
	case 0:
		return 0;
	case 1:
		t->hs_want = TRANSPORT_WANT_NONE;
		return 1;
	default:
		t->hs_want = TRANSPORT_WANT_NONE;
		return -1;
	}
}

static int
tls_peer(const struct transport *t, char *buf, size_t len)
{
	struct tls_impl *x = tls_x(t);
	X509 *cert = x ? SSL_get0_peer_certificate(x->ssl) : NULL;

	if (cert != NULL) {
		BIO *b = BIO_new(BIO_s_mem());
		if (b != NULL && X509_NAME_print_ex(b, X509_get_subject_name(cert), 0,
		    XN_FLAG_RFC2253) >= 0) {
			int n = BIO_read(b, buf, (int)(len - 1));
			BIO_free(b);
			if (n > 0) {
				buf[n] = '\0';
				return 0;
			}
		} else {
			BIO_free(b);
		}
		ERR_clear_error();
	}
	struct transport plain;
	transport_plain_init(&plain, t->fd);
	return transport_peer(&plain, buf, len);
}

static void
tls_close(struct transport *t)
{
	struct tls_impl *x = tls_x(t);

	if (x != NULL) {
		SSL_free(x->ssl);
		free(x->gather);
		free(x);
	}
	t->impl = NULL;
	close(t->fd);
	t->fd = -1;
}

static const struct transport_ops tls_ops = {
	.name = "tls",
	.read = tls_read,
	.writev = tls_writev,
	.pending = tls_pending,
	.handshake = tls_handshake,
	.shutdown = tls_shutdown,
	.peer = tls_peer,
	.close = tls_close,
	.movable = false,
};

static int
tls_init(struct transport *t, int fd, SSL_CTX *ctx, bool server)
{
	struct tls_impl *x = calloc(1, sizeof *x);

	if (x == NULL) {
		errno = ENOMEM;
		return -1;
	}
	ERR_clear_error();
	if ((x->ssl = SSL_new(ctx)) == NULL || SSL_set_fd(x->ssl, fd) != 1) {
		ERR_clear_error();
		SSL_free(x->ssl);
		free(x);
		errno = ENOMEM;
		return -1;
	}
	x->server = server;
	/* Read what the socket has (up to a record's worth of buffer) in one
	 * read(2), not a 5-byte header and then the body of each record: a
	 * client writing ~1 KiB records cost two syscalls per KiB.
	 * tls_pending() counts what is read ahead. */
	SSL_set_read_ahead(x->ssl, 1);
	if (server) {
		SSL_set_accept_state(x->ssl);
		SSL_set_app_data(x->ssl, x);
		SSL_set_info_callback(x->ssl, tls_info_cb);
	} else
		SSL_set_connect_state(x->ssl);
	t->ops = &tls_ops;
	t->fd = fd;
	t->state = TRANSPORT_HANDSHAKE;
	t->rd_want = TRANSPORT_WANT_READ;
	t->wr_want = TRANSPORT_WANT_WRITE;
	/* a server waits for the ClientHello; a client writes its own (and
	 * its socket may still be connecting) */
	t->hs_want = server ? TRANSPORT_WANT_READ : TRANSPORT_WANT_WRITE;
	t->impl = x;
	return 0;
}

int
transport_tls_server_init(struct transport *t, int fd, SSL_CTX *ctx)
{
	return tls_init(t, fd, ctx, true);
}

int
transport_tls_client_init(struct transport *t, int fd, SSL_CTX *ctx,
    const char *host, bool verify_host)
{
	unsigned char bin[16];

	if (tls_init(t, fd, ctx, false) != 0)
		return -1;
	if (host == NULL || host[0] == '\0')
		return 0;
	struct tls_impl *x = tls_x(t);
	bool ip = inet_pton(AF_INET, host, bin) == 1 || inet_pton(AF_INET6, host, bin) == 1;
	int ok = 1;
	if (!ip)
		ok = SSL_set_tlsext_host_name(x->ssl, host);
	if (ok == 1 && verify_host) {
		X509_VERIFY_PARAM *vp = SSL_get0_param(x->ssl);
		ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, host)
		    : X509_VERIFY_PARAM_set1_host(vp, host, 0);
	}
	if (ok != 1) {
		ERR_clear_error();
		SSL_free(x->ssl);
		free(x);
		t->impl = NULL;
		t->ops = NULL;
		t->fd = -1;
		t->state = TRANSPORT_CLOSED;
		errno = EINVAL;
		return -1;
	}
	return 0;
}

bool
transport_is_tls(const struct transport *t)
{
	return t->ops == &tls_ops && t->impl != NULL;
}

SSL *
transport_tls_ssl(const struct transport *t)
{
	return transport_is_tls(t) ? tls_x(t)->ssl : NULL;
}

const char *
transport_tls_error(const struct transport *t)
{
	return transport_is_tls(t) ? tls_x(t)->err : "";
}

bool
transport_tls_plaintext(const struct transport *t)
{
	return transport_is_tls(t) && tls_x(t)->plaintext;
}

bool
transport_tls_renegotiation(const struct transport *t)
{
	return transport_is_tls(t) && tls_x(t)->renegotiation;
}

/* ---- session tickets ---- */

static int tls_ticket_idx = -1;

static int
tls_ticket_cb(SSL *s, unsigned char *key_name, unsigned char *iv,
    EVP_CIPHER_CTX *cctx, EVP_MAC_CTX *hctx, int enc)
{
	const struct tlskeys *k = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(s), tls_ticket_idx);
	uint32_t i;

	if (k == NULL || k->n == 0)
		return 0;  /* no ticket issued / full handshake */
	if (enc) {
		i = 0;
		memcpy(key_name, k->key[0].name, sizeof k->key[0].name);
		if (RAND_bytes(iv, 16) != 1)
			return -1;
	} else {
		uint32_t n = k->n < TLSKEYS_MAX ? k->n : TLSKEYS_MAX;
		for (i = 0; i < n; i++)
			if (memcmp(key_name, k->key[i].name, sizeof k->key[i].name) == 0)
				break;
		if (i == n)
			return 0;  /* unknown key: a full handshake */
	}
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY,
		    (void *)k->key[i].hmac, sizeof k->key[i].hmac),
		OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
		OSSL_PARAM_construct_end(),
	};
	if (EVP_MAC_CTX_set_params(hctx, params) != 1)
		return -1;
	if (enc) {
		if (EVP_EncryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, k->key[i].aes, iv) != 1)
			return -1;
		return 1;
	}
	if (EVP_DecryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, k->key[i].aes, iv) != 1)
		return -1;
	/* 2: valid, and issue a new ticket. Always in TLS 1.3: OpenSSL sends
	 * a new ticket after a resumption only when asked to renew, and an
	 * OpenSSL client (librdkafka) uses each TLS 1.3 ticket once, so
	 * without it every other reconnect would be a full handshake. In
	 * TLS 1.2 only when the ticket was made with an older key. */
	return i == 0 && SSL_version(s) < TLS1_3_VERSION ? 1 : 2;
}

int
tls_ticket_keys_install(SSL_CTX *ctx, const struct tlskeys *keys)
{
	if (tls_ticket_idx < 0 &&
	    (tls_ticket_idx = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL)) < 0)
		return -1;
	if (SSL_CTX_set_ex_data(ctx, tls_ticket_idx, (void *)keys) != 1)
		return -1;
	if (SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, tls_ticket_cb) != 1)
		return -1;
	return 0;
}
