/*
 * ctlconn — ferryctl's connection to ferryd; see ctlconn.h.
 */
#include "ctlconn.h"

#include "common/file.h"
#include "common/tlsctx.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

/* a PEM file of --cacert, --cert or --key: the limit ferryd applies to its
 * own certificate and key files (CFG_TLS_FILE_MAX) */
#define CTLCONN_PEM_MAX (1u << 20)

long
ctlconn_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Let the next blocking call on fd wait at most until the deadline. */
static int
ctlconn_arm(int fd, long deadline)
{
	long left = deadline - ctlconn_now_ms();
	struct timeval tv;

	if (left <= 0) {
		errno = ETIMEDOUT;
		return -1;
	}
	tv.tv_sec = left / 1000;
	tv.tv_usec = (left % 1000) * 1000;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == -1 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == -1)
		return -1;
	return 0;
}

const char *
ctlconn_strerror(int e)
{
	/* a socket timeout surfaces as EAGAIN (or EINPROGRESS from connect) */
	if (e == EAGAIN || e == EWOULDBLOCK || e == EINPROGRESS || e == ETIMEDOUT)
		return "timed out";
	return strerror(e);
}

/* A refused connect to the control socket is retried for up to
 * CTL_CONNECT_RETRY_MS with doubling pauses (CTL_CONNECT_PAUSE_MS, then x2,
 * at most 200 ms): the socket may be about to appear (ferryd starting), its
 * backlog may be momentarily full (EAGAIN), or ferryd may be between
 * unlink and bind. Any other error, or the end of the window, gives up. */
#define CTL_CONNECT_RETRY_MS 1000
#define CTL_CONNECT_PAUSE_MS 20

static bool
ctlconn_retryable(int e)
{
	return e == ECONNREFUSED || e == EAGAIN || e == EWOULDBLOCK || e == ENOENT;
}

static int
ctlconn_connect_unix(const char *path, long deadline, char *err, size_t errlen)
{
	struct sockaddr_un sun;
	long give_up = ctlconn_now_ms() + CTL_CONNECT_RETRY_MS, pause = CTL_CONNECT_PAUSE_MS;
	struct timespec ts;
	int fd, e;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sun.sun_path) {
		snprintf(err, errlen, "control socket path too long: %s", path);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	for (;;) {
		if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) != -1 &&
		    ctlconn_arm(fd, deadline) == 0 &&
		    connect(fd, (struct sockaddr *)&sun, sizeof sun) == 0)
			return fd;
		e = errno;
		if (fd != -1)
			close(fd);
		if (e == EINTR || (ctlconn_retryable(e) && ctlconn_now_ms() + pause <= give_up &&
		    ctlconn_now_ms() + pause < deadline)) {
			ts.tv_sec = pause / 1000;
			ts.tv_nsec = (pause % 1000) * 1000000L;
			nanosleep(&ts, NULL);
			pause = pause * 2 > 200 ? 200 : pause * 2;
			continue;
		}
		snprintf(err, errlen, "cannot connect to %s: %s%s", path, ctlconn_strerror(e),
		    e == EACCES ? " (the control socket's mode and group decide who may use "
		    "it: control_socket_mode, control_socket_group)" : "");
		return -1;
	}
}

int
ctlconn_split_address(const char *a, char *host, size_t hostlen, char *port, size_t portlen)
{
	const char *colon, *h = a;
	size_t hl;
	char *end;
	long p;

	if (a[0] == '[') {
		const char *rb = strchr(a, ']');

		if (rb == NULL || rb[1] != ':')
			return -1;
		h = a + 1;
		hl = (size_t)(rb - h);
		colon = rb + 1;
	} else {
		if ((colon = strrchr(a, ':')) == NULL)
			return -1;
		hl = (size_t)(colon - a);
		if (memchr(a, ':', hl) != NULL)
			return -1;      /* bare IPv6 needs brackets */
	}
	errno = 0;
	p = strtol(colon + 1, &end, 10);
	if (hl == 0 || hl >= hostlen || colon[1] == '\0' || *end != '\0' ||
	    errno != 0 || p < 1 || p > 65535)
		return -1;
	memcpy(host, h, hl);
	host[hl] = '\0';
	snprintf(port, portlen, "%ld", p);
	return 0;
}

static int
ctlconn_connect_tcp(const char *address, long deadline, char *err, size_t errlen)
{
	struct addrinfo hints, *res, *ai;
	char host[256], port[8];
	int fd = -1, gai, e = 0;

	if (ctlconn_split_address(address, host, sizeof host, port, sizeof port) == -1) {
		snprintf(err, errlen, "bad address '%s' (want HOST:PORT)", address);
		return -1;
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	if ((gai = getaddrinfo(host, port, &hints, &res)) != 0) {
		snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(gai));
		return -1;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd == -1) {
			e = errno;
			continue;
		}
		if (ctlconn_arm(fd, deadline) == 0 &&
		    connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		e = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd == -1)
		snprintf(err, errlen, "cannot connect to %s: %s", address, ctlconn_strerror(e));
	return fd;
}

/* --- TLS ---------------------------------------------------------------- */

/* The first queued OpenSSL error as text ("" when none). */
static void
ctlconn_ssl_error(char *buf, size_t len)
{
	unsigned long e = ERR_get_error();
	const char *reason;

	buf[0] = '\0';
	if (e == 0)
		return;
	reason = ERR_reason_error_string(e);
	snprintf(buf, len, "%s", reason ? reason : "TLS error");
	ERR_clear_error();
}

/* A PEM file named by --cacert, --cert or --key, read through the one
 * bounded, regular-files-only read (common/file.h). An empty file is an
 * error: to tlsctx an empty buffer means "absent". 0, or -1 with err. */
static int
ctlconn_pem(const char *opt, const char *path, struct tlsctx_pem *out, char *err,
	    size_t errlen)
{
	char why[1200];
	size_t len;
	char *buf;

	out->data = NULL;
	out->len = 0;
	if (path == NULL)
		return 0;
	if ((buf = file_read_all(path, CTLCONN_PEM_MAX, &len, why, sizeof why)) == NULL) {
		snprintf(err, errlen, "%s %s", opt, why);
		return -1;
	}
	if (len == 0) {
		free(buf);
		snprintf(err, errlen, "%s %s: the file is empty", opt, path);
		return -1;
	}
	out->data = buf;
	out->len = len;
	return 0;
}

static void
ctlconn_pem_free(struct tlsctx_pem *p)
{
	if (p->data != NULL) {
		/* the private key among them */
		OPENSSL_cleanse((void *)p->data, p->len);
		free((void *)p->data);
	}
	p->data = NULL;
	p->len = 0;
}

/* The client context, built by common/tlsctx from the files' bytes as the
 * workers build theirs: TLS 1.2 or later, the server verified against
 * --cacert or the system's trust store, --cert/--key presented. */
static int
ctlconn_tls_ctx(struct ctlconn *c, const struct ctlconn_opts *o, char *err, size_t errlen)
{
	char ca_name[320], cert_name[320], key_name[320];
	struct tlsctx_client_opts co = { .verify = true, .min_version = TLSCTX_TLS_1_2 };
	int rc = -1;

	snprintf(ca_name, sizeof ca_name, "--cacert%s%s", o->cacert ? " " : "",
	    o->cacert ? o->cacert : "");
	snprintf(cert_name, sizeof cert_name, "--cert %s", o->cert ? o->cert : "");
	snprintf(key_name, sizeof key_name, "--key %s", o->key ? o->key : "");
	co.ca_name = ca_name;
	co.cert_name = cert_name;
	co.key_name = key_name;
	if (ctlconn_pem("--cacert", o->cacert, &co.ca, err, errlen) == -1 ||
	    ctlconn_pem("--cert", o->cert, &co.cert, err, errlen) == -1 ||
	    ctlconn_pem("--key", o->key, &co.key, err, errlen) == -1)
		goto out;
	if ((c->ssl_ctx = tlsctx_client_new(&co, err, errlen)) != NULL)
		rc = 0;
out:
	ctlconn_pem_free(&co.ca);
	ctlconn_pem_free(&co.cert);
	ctlconn_pem_free(&co.key);
	return rc;
}

static int
ctlconn_tls_handshake(struct ctlconn *c, const struct ctlconn_opts *o, char *err,
		      size_t errlen)
{
	char host[256], port[8], why[256];
	unsigned char bin[16];
	SSL *ssl;
	long vr;
	int rc;

	if (ctlconn_tls_ctx(c, o, err, errlen) == -1)
		return -1;
	if ((ssl = SSL_new(c->ssl_ctx)) == NULL || SSL_set_fd(ssl, c->fd) != 1) {
		SSL_free(ssl);
		snprintf(err, errlen, "cannot set up TLS: out of memory");
		return -1;
	}
	c->ssl = ssl;
	ctlconn_split_address(o->address, host, sizeof host, port, sizeof port);
	/* the name checked is the one on the command line: an IP address
	 * against the certificate's IP SANs, a name against its DNS names
	 * (and sent as SNI) */
	if (inet_pton(AF_INET, host, bin) == 1 || inet_pton(AF_INET6, host, bin) == 1) {
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) != 1) {
			snprintf(err, errlen, "cannot set up TLS verification for %s", host);
			return -1;
		}
	} else if (SSL_set_tlsext_host_name(ssl, host) != 1 || SSL_set1_host(ssl, host) != 1) {
		snprintf(err, errlen, "cannot set up TLS verification for %s", host);
		return -1;
	}
	for (;;) {
		if (ctlconn_arm(c->fd, c->deadline) == -1) {
			snprintf(err, errlen, "TLS handshake with %s: %s", o->address,
			    ctlconn_strerror(errno));
			return -1;
		}
		errno = 0;
		if ((rc = SSL_connect(ssl)) == 1)
			return 0;
		int se = SSL_get_error(ssl, rc);

		if (se == SSL_ERROR_SYSCALL && errno == EINTR)
			continue;
		break;
	}
	vr = SSL_get_verify_result(ssl);
	if (vr != X509_V_OK) {
		snprintf(err, errlen, "TLS handshake with %s failed: the server's certificate "
		    "is not trusted: %s%s", o->address, X509_verify_cert_error_string(vr),
		    o->cacert ? "" : " (pass the CA that signed it with --cacert)");
		ERR_clear_error();
		return -1;
	}
	ctlconn_ssl_error(why, sizeof why);
	if (why[0] == '\0')
		snprintf(why, sizeof why, "%s", errno ? ctlconn_strerror(errno) :
		    "connection closed (is it an HTTPS listener?)");
	snprintf(err, errlen, "TLS handshake with %s failed: %s", o->address, why);
	return -1;
}

int
ctlconn_open(struct ctlconn *c, const struct ctlconn_opts *o, long deadline, char *err,
	     size_t errlen, bool *tls_failed)
{
	memset(c, 0, sizeof *c);
	c->deadline = deadline;
	*tls_failed = false;
	if (o->address != NULL)
		c->fd = ctlconn_connect_tcp(o->address, deadline, err, errlen);
	else
		c->fd = ctlconn_connect_unix(o->socket, deadline, err, errlen);
	if (c->fd == -1)
		return -1;
	if (o->address != NULL && o->tls) {
		int one = 1;

		/* the request follows the handshake's last flight: do not let
		 * Nagle hold it for the server's delayed ACK */
		(void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	}
	if (o->address != NULL && o->tls && ctlconn_tls_handshake(c, o, err, errlen) == -1) {
		*tls_failed = true;
		ctlconn_close(c);
		return -1;
	}
	return 0;
}

int
ctlconn_write_all(struct ctlconn *c, const char *p, size_t n)
{
	ssize_t w;

	while (n > 0) {
		if (ctlconn_arm(c->fd, c->deadline) == -1)
			return -1;
		if (c->ssl != NULL) {
			size_t done = 0;

			errno = 0;
			if (SSL_write_ex(c->ssl, p, n, &done) != 1) {
				int e = errno;
				char b[256];

				if (e == EINTR)
					continue;
				/* TLS 1.3: a server that refuses our certificate
				 * says so in an alert after our handshake ended;
				 * read it to name the reason */
				ctlconn_ssl_error(c->tls_err, sizeof c->tls_err);
				if (c->tls_err[0] == '\0' && SSL_read_ex(c->ssl, b, sizeof b, &done) != 1)
					ctlconn_ssl_error(c->tls_err, sizeof c->tls_err);
				ERR_clear_error();
				errno = e ? e : EPROTO;
				return -1;
			}
			w = (ssize_t)done;
		} else {
			w = send(c->fd, p, n, MSG_NOSIGNAL);
			if (w == -1 && errno == EINTR)
				continue;
			if (w == -1)
				return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

ssize_t
ctlconn_read(struct ctlconn *c, char *buf, size_t n, char *err, size_t errlen)
{
	size_t got = 0;
	ssize_t r;
	int se;

	err[0] = '\0';
	for (;;) {
		if (ctlconn_arm(c->fd, c->deadline) == -1)
			return -1;
		if (c->ssl == NULL) {
			r = recv(c->fd, buf, n, 0);
			if (r == -1 && errno == EINTR)
				continue;
			return r;
		}
		errno = 0;
		if (SSL_read_ex(c->ssl, buf, n, &got) == 1)
			return (ssize_t)got;
		se = SSL_get_error(c->ssl, 0);
		if (se == SSL_ERROR_ZERO_RETURN)
			return 0;
		if (se == SSL_ERROR_SYSCALL && errno == EINTR)
			continue;
		if (se == SSL_ERROR_SYSCALL && errno == 0)
			return 0;       /* EOF without close_notify (ignored, see above) */
		if (se == SSL_ERROR_SSL) {
			ctlconn_ssl_error(err, errlen);
			errno = EPROTO;
		} else if (errno == 0) {
			errno = EPROTO;
		}
		ERR_clear_error();
		return -1;
	}
}

void
ctlconn_close(struct ctlconn *c)
{
	if (c->ssl != NULL) {
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->ssl_ctx != NULL) {
		SSL_CTX_free(c->ssl_ctx);
		c->ssl_ctx = NULL;
	}
	if (c->fd != -1)
		close(c->fd);
	c->fd = -1;
}

/* --- token ------------------------------------------------------------- */

static int
ctlconn_token_check(char *t, size_t len, const char *from, char *err, size_t errlen)
{
	size_t i;

	if (len > 0 && t[len - 1] == '\n') {
		t[--len] = '\0';
		if (len > 0 && t[len - 1] == '\r')
			t[--len] = '\0';
	}
	if (len == 0) {
		snprintf(err, errlen, "%s: the token is empty", from);
		return -1;
	}
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)t[i];

		if (ch <= 0x20 || ch >= 0x7f) {
			snprintf(err, errlen, "%s: the token must be one line of visible ASCII "
			    "characters (found a blank, a second line or a non-ASCII byte)", from);
			return -1;
		}
	}
	return 0;
}

int
ctlconn_token(const char *file, char *out, size_t outlen, char *err, size_t errlen)
{
	const char *env = getenv("FERRY_TOKEN");
	char from[1100], why[1200];
	size_t len;
	char *buf;

	out[0] = '\0';
	if (file == NULL) {
		if (env == NULL || env[0] == '\0')
			return 0;
		if (strlen(env) >= outlen) {
			snprintf(err, errlen, "FERRY_TOKEN: the token is too long");
			return -1;
		}
		snprintf(out, outlen, "%s", env);
		return ctlconn_token_check(out, strlen(out), "FERRY_TOKEN", err, errlen);
	}
	snprintf(from, sizeof from, "--token-file %s", file);
	/* the one bounded, regular-files-only read (common/file.h); what fits
	 * out with room for a trailing newline to drop and the NUL */
	if ((buf = file_read_all(file, outlen - 2, &len, why, sizeof why)) == NULL) {
		snprintf(err, errlen, "--token-file %s", why);
		return -1;
	}
	if (memchr(buf, '\0', len) != NULL) {
		free(buf);
		snprintf(err, errlen, "%s: the token has a NUL byte", from);
		return -1;
	}
	memcpy(out, buf, len + 1);
	free(buf);
	return ctlconn_token_check(out, len, from, err, errlen);
}
