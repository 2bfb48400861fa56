/*
 * ctlconn — ferryctl's connection to ferryd: the control socket, or the TCP
 * admin listener in plain HTTP or HTTPS (OpenSSL, blocking: ferryctl does
 * one request per run). Every step is bounded by one deadline (socket
 * timeouts re-armed before each blocking call).
 *
 * HTTPS verifies the server's certificate against --cacert (or the
 * system's trust store) and its name against the HOST of -a (an IP address
 * is checked against the certificate's IP addresses), and presents a client
 * certificate with --cert/--key. The three PEM files are read through
 * common/file.h (regular files only, bounded) and the context is built from
 * their bytes by common/tlsctx.h, as a worker builds its upstream context.
 * The bearer token (FERRY_TOKEN or
 * --token-file, see ctlconn_token) is sent by the caller on TCP only: the
 * control socket is authorised by its file permissions.
 *
 * Return conventions: 0 / -1 with a message in err (or errno for
 * read/write, as read(2)/write(2)).
 */
#ifndef FERRY_CTL_CTLCONN_H
#define FERRY_CTL_CTLCONN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct ctlconn_opts {
	const char *socket;      /* control socket path (used when address is NULL) */
	const char *address;     /* HOST:PORT of admin_listen, or NULL */
	bool tls;                /* HTTPS on address */
	const char *cacert;      /* PEM CA file to verify ferryd; NULL = system store */
	const char *cert;        /* client certificate (PEM, may hold the chain) */
	const char *key;         /* its private key (PEM) */
};

struct ctlconn {
	int fd;
	long deadline;           /* ctlconn_now_ms() clock */
	void *ssl_ctx;           /* SSL_CTX *, TLS only */
	void *ssl;               /* SSL * */
	char tls_err[256];       /* why a TLS write failed (an alert), or "" */
};

long ctlconn_now_ms(void);

/* "timed out" for the errno values a socket timeout surfaces as. */
const char *ctlconn_strerror(int e);

/* Split "host:port" or "[v6]:port"; -1 when malformed. */
int ctlconn_split_address(const char *a, char *host, size_t hostlen, char *port,
			  size_t portlen);

/* Connect (and for TLS, handshake and verify) by deadline. On failure err
 * says what went wrong; *tls_failed tells a TLS failure (handshake,
 * certificate) from a connection failure. */
int ctlconn_open(struct ctlconn *c, const struct ctlconn_opts *o, long deadline,
		 char *err, size_t errlen, bool *tls_failed);

/* -1 with errno; on TLS, c->tls_err may say why (the peer's alert). */
int ctlconn_write_all(struct ctlconn *c, const char *p, size_t n);

/* > 0 bytes, 0 at the end of the reply, -1 with errno (EPROTO for a TLS
 * error, its text in err). */
ssize_t ctlconn_read(struct ctlconn *c, char *buf, size_t n, char *err, size_t errlen);

void ctlconn_close(struct ctlconn *c);

/* The admin token: from file when not NULL, else $FERRY_TOKEN, else none
 * (*out = ""). One trailing newline (LF or CRLF) is dropped; an empty token,
 * a second line or a blank inside is an error. 0, or -1 with err. */
int ctlconn_token(const char *file, char *out, size_t outlen, char *err, size_t errlen);

#endif
