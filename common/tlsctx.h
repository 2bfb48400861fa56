/*
 * tlsctx — OpenSSL 3 contexts (SSL_CTX) built from PEM bytes in memory.
 *
 * Nothing here opens a file: the supervisor (privileged) reads certificate
 * and key files and passes their bytes; a worker builds its contexts from
 * what it was sent (IPC_TLS_MATERIAL), and validation (`ferryd -t`, reload)
 * builds the same contexts to find a bad PEM, a key that does not match its
 * certificate or an unknown cipher before anything serving is touched. The
 * admin API's HTTPS uses the server side too, ferryctl's HTTPS the client
 * side (with the files it read through common/file.h). Role-free: no
 * config, no log, no I/O.
 *
 * Every context refuses renegotiation (SSL_OP_NO_RENEGOTIATION) and
 * compression, accepts TLS 1.2 or later (tls_min_version may raise it to
 * 1.3), allows partial writes and a moving write buffer (the transport's
 * writev retries with the same bytes from wherever they are), and releases
 * its buffers while idle (memory per idle connection).
 *
 * Return convention: a new SSL_CTX (caller frees with SSL_CTX_free), or NULL
 * with a one-line reason in err ("tls_key: key does not match the
 * certificate", OpenSSL's reason appended). Pass lengths exactly; the PEM
 * need not be NUL-terminated.
 */
#ifndef FERRY_COMMON_TLSCTX_H
#define FERRY_COMMON_TLSCTX_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <openssl/ssl.h>

/* A PEM buffer; len 0 = absent. */
struct tlsctx_pem {
	const char *data;
	size_t len;
};

enum tlsctx_client_auth {
	TLSCTX_AUTH_NONE = 0,    /* values equal enum cfg_tls_client_auth */
	TLSCTX_AUTH_REQUESTED,
	TLSCTX_AUTH_REQUIRED,
};

enum tlsctx_version {
	TLSCTX_TLS_1_2 = 0,      /* values equal enum cfg_tls_version */
	TLSCTX_TLS_1_3,
};

/* The server's TLS 1.2 cipher list when tls_ciphers is not set: forward
 * secrecy and AEAD only (Mozilla's "intermediate" list, which every Kafka
 * client of the last decade speaks). OpenSSL's own default also offers
 * CBC suites, which testssl.sh reports as potentially vulnerable to
 * LUCKY13. TLS 1.3 suites are all AEAD: OpenSSL's default stays. */
#define TLSCTX_SERVER_CIPHERS \
	"ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:" \
	"ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:" \
	"ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:" \
	"DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305"

struct tlsctx_server_opts {
	struct tlsctx_pem cert;          /* certificate, then its chain */
	struct tlsctx_pem key;           /* private key (any type OpenSSL reads) */
	struct tlsctx_pem client_ca;     /* CAs for client certificates; needed
	                                    when client_auth != NONE */
	int client_auth;                 /* enum tlsctx_client_auth */
	int min_version;                 /* enum tlsctx_version */
	const char *ciphers;             /* TLS <= 1.2 list; NULL/"" =
	                                    TLSCTX_SERVER_CIPHERS */
	const char *ciphersuites;        /* TLS 1.3 suites; NULL/"" = default */
};

struct tlsctx_client_opts {
	struct tlsctx_pem ca;            /* trust anchors; absent = system store */
	struct tlsctx_pem cert;          /* client certificate (+chain); optional */
	struct tlsctx_pem key;           /* its key; with cert */
	bool verify;                     /* verify the server's chain (the name is
	                                    set per connection: tls.h) */
	int min_version;                 /* enum tlsctx_version */
	/* how errors name ca, cert and key; NULL = the config keys
	 * upstream_ca, upstream_cert, upstream_key (ferryctl passes its
	 * options: "--cacert FILE") */
	const char *ca_name, *cert_name, *key_name;
};

SSL_CTX *tlsctx_server_new(const struct tlsctx_server_opts *o, char *err, size_t errlen);
SSL_CTX *tlsctx_client_new(const struct tlsctx_client_opts *o, char *err, size_t errlen);

/* notAfter of the first certificate in pem, as time_t (UTC). 0, or -1
 * with err. */
int tlsctx_cert_not_after(struct tlsctx_pem pem, time_t *out, char *err, size_t errlen);

/* The first certificate's subject, one line (RFC 2253), into buf. 0/-1. */
int tlsctx_cert_subject(struct tlsctx_pem pem, char *buf, size_t len);

/* Appends OpenSSL's queued error reasons (": reason; reason") to buf, which
 * already holds a message, and empties the queue. */
void tlsctx_errors(char *buf, size_t len);

/* Read now what OpenSSL would otherwise read lazily, from files, at its
 * first use of TLS or of an algorithm: its configuration file, and what a
 * first context's creation loads. For a process about to lock itself out
 * of the file system (common/sandbox.h). 0, or -1 with err. */
int tlsctx_preload(char *err, size_t errlen);

#endif
