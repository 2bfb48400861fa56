/*
 * adminauth — who may use the admin API: the decision taken for every
 * request before it is routed (supervisor/admin_http.c asks), and the
 * credentials that decision needs, loaded from the [ferry] keys.
 *
 * The model (docs/operations.md, "Securing the admin API"):
 *   - the control socket is trusted by its file permissions
 *     (control_socket_mode, control_socket_group): every request on it is
 *     allowed, and the caller's uid/pid (SO_PEERCRED) is logged for
 *     mutating calls;
 *   - on admin_listen, the paths of admin_open_paths (exact match; by
 *     default /admin/health, /admin/ready, /metrics) are open to anyone;
 *   - everything else on admin_listen needs a credential when one is
 *     configured: a bearer token (`Authorization: Bearer TOKEN`, the
 *     content of admin_token_file) or a client certificate verified against
 *     admin_tls_client_ca in the TLS handshake. Either one is enough;
 *   - an admin_listen with no credential configured at all is open (the
 *     config parser refuses that on a non-loopback address unless
 *     admin_insecure = on).
 * Every refusal is a 401 with a JSON error and `WWW-Authenticate: Bearer
 * realm="ferry"` (error="invalid_token" when a token was sent and is wrong,
 * RFC 6750 §3.1). There is no 403: one credential grants everything.
 *
 * The token file: a regular file (not a FIFO, device, ...) of at most
 * ADMINAUTH_TOKEN_FILE_MAX bytes, not readable or writable by "other" and
 * not group-writable (mode & 0027 == 0); one token of ADMINAUTH_TOKEN_MIN to
 * ADMINAUTH_TOKEN_MAX visible ASCII characters (no spaces); one trailing
 * newline (LF or CRLF) is ignored. Only the SHA-256 of the token is kept;
 * the file's bytes are wiped (sodium_memzero) after hashing. A presented
 * token is hashed the same way and the two digests are compared with
 * sodium_memcmp, so the time taken depends neither on where the tokens
 * differ nor on the length of the secret.
 *
 * Return conventions: 0 / -1 with a message in err.
 */
#ifndef FERRY_SUPERVISOR_ADMINAUTH_H
#define FERRY_SUPERVISOR_ADMINAUTH_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include <openssl/ssl.h>

#include "common/config.h"

#define ADMINAUTH_TOKEN_MIN      16
#define ADMINAUTH_TOKEN_MAX      1024
#define ADMINAUTH_TOKEN_FILE_MAX 4096
#define ADMINAUTH_DIGEST_LEN     32   /* SHA-256 */

/* The credentials of admin_listen, built from a struct cfg. */
struct adminauth {
	bool token_set;
	unsigned char token_digest[ADMINAUTH_DIGEST_LEN];
	bool client_certs;               /* admin_tls_client_ca is set */
	char open_paths[CFG_OPEN_PATHS_MAX]; /* as in struct cfg */
	SSL_CTX *tls_ctx;                /* HTTPS (admin_tls_cert), or NULL; owned */
	time_t tls_not_after;            /* of the certificate, for the log */
	char tls_subject[256];
};

/* What was decided for one request, and on what grounds. */
enum adminauth_result {
	ADMINAUTH_LOCAL = 0,     /* control socket: its permissions decide */
	ADMINAUTH_OPEN_PATH,     /* admin_open_paths */
	ADMINAUTH_UNPROTECTED,   /* admin_listen has no credential configured */
	ADMINAUTH_TOKEN,         /* the right bearer token */
	ADMINAUTH_CERT,          /* a verified client certificate */
	ADMINAUTH_MISSING,       /* refused: no credential */
	ADMINAUTH_MALFORMED,     /* refused: Authorization is not "Bearer TOKEN" */
	ADMINAUTH_WRONG,         /* refused: a token that does not match */
};

const char *adminauth_result_str(enum adminauth_result r);

static inline bool
adminauth_allowed(enum adminauth_result r)
{
	return r <= ADMINAUTH_CERT;
}

/* Refusals since start, for /metrics (ferry_admin_requests_refused_total,
 * ferry_admin_tls_handshake_failures_total). */
struct adminauth_counters {
	uint64_t refused[3];             /* missing, malformed, wrong-token */
	uint64_t tls_failures;           /* admin HTTPS handshakes that failed */
};

/* Count a refusal r (MISSING, MALFORMED or WRONG; others are ignored). */
/* A client-supplied string (path, user agent, certificate subject) made
 * safe for a quoted logfmt value: control bytes, quotes, backslashes and
 * non-ASCII become '?'. out is always NUL-terminated. */
void adminauth_sanitize(const char *in, char *out, size_t len);

void adminauth_count(struct adminauth_counters *k, enum adminauth_result r);

/* The two families in Prometheus text format into buf (NUL-terminated);
 * the length, or -1 when buf is too small. */
int adminauth_metrics_text(const struct adminauth_counters *k, char *buf, size_t len);

/* --- pure ---------------------------------------------------------------- */

/* The token held in a token file's bytes: trims one trailing "\n" or
 * "\r\n", checks length and characters, and stores its SHA-256. */
int adminauth_token_parse(const char *buf, size_t len,
			  unsigned char digest[ADMINAUTH_DIGEST_LEN], char *err, size_t errlen);

/* Are a token file's permission bits acceptable (see above)? */
int adminauth_token_mode_ok(mode_t mode, char *err, size_t errlen);

/* Is path one of the comma-separated paths of list (exact match)? */
bool adminauth_path_open(const char *list, const char *path);

/* The token of an Authorization header value "Bearer TOKEN" (scheme case-
 * insensitive, blanks around the token ignored): 0 with *tok and *toklen, or
 * -1 when the value is not of that form. */
int adminauth_bearer(const char *authz, const char **tok, size_t *toklen);

/* The decision for one request. local: it came over the control socket.
 * authz: the Authorization header or NULL. cert_verified: the TLS peer
 * presented a client certificate that verified against admin_tls_client_ca. */
enum adminauth_result adminauth_check(const struct adminauth *a, bool local, const char *path,
				      const char *authz, bool cert_verified);

/* The WWW-Authenticate header line ("Name: value\r\n") and the JSON error
 * message of a refusal. */
const char *adminauth_challenge(enum adminauth_result r);
const char *adminauth_refusal_msg(const struct adminauth *a, enum adminauth_result r);

/* --- loading ------------------------------------------------------------ */

/* Build *a from c: reads and checks admin_token_file (see above) and, with
 * admin_tls_cert, reads the certificate, key and client CA files (bounded
 * regular files; the key's bytes are wiped after use) and builds the HTTPS
 * context (common/tlsctx.h; client certificates requested and verified
 * against admin_tls_client_ca when it is set). On error *a is left cleared,
 * *key names the [ferry] key at fault and err holds "PATH: reason". */
int adminauth_load(struct adminauth *a, const struct cfg *c, const char **key, char *err,
		   size_t errlen);

/* Do a and b grant the same access (token, client certificates, open
 * paths, whether HTTPS)? Not whether the certificate changed. */
bool adminauth_same(const struct adminauth *a, const struct adminauth *b);

/* Free the TLS context and wipe the digest. */
void adminauth_clear(struct adminauth *a);

/* adminauth_load with the error placed at its key, as the config parser
 * places its own: "FILE:LINE: KEY: PATH: reason". */
int adminauth_load_cfg(struct adminauth *a, const struct cfg *c, char *err, size_t errlen);

/* The same, for validation: loads and drops the credentials; on error
 * appends the message to errs and returns -1. */
int adminauth_check_cfg(const struct cfg *c, struct cfg_errors *errs);

/* "token", "certificate", "token+certificate" or "none", for logs. */
const char *adminauth_summary(const struct adminauth *a);

/* Log the HTTPS certificate in use (subject, notAfter); a warning when it
 * expires within 14 days. Nothing without HTTPS. */
void adminauth_log_tls(const struct adminauth *a);

/* control_socket_group as a gid: a numeric gid as is, a name looked up in
 * the group database; (gid_t)-1 when group is "". 0, or -1 with err. */
int adminauth_socket_gid(const char *group, gid_t *gid, char *err, size_t errlen);

/* --- the caller ---------------------------------------------------------- */

/* Who is at the other end of an admin connection, for the decision and the
 * log of mutating calls. */
struct adminauth_peer {
	bool local;                     /* control socket */
	bool have_cred;                 /* SO_PEERCRED answered */
	struct ucred cred;              /* uid, gid, pid of the connecting process */
	char addr[INET6_ADDRSTRLEN + 8]; /* TCP: "ADDR:PORT" / "[ADDR]:PORT" */
	bool cert_verified;             /* TLS: a client certificate verified */
	char subject[256];              /* its subject (RFC 2253), or "" */
};

/* Fill p for an accepted socket: SO_PEERCRED on the control socket (the
 * kernel's record of the connecting process), the address on TCP. */
void adminauth_peer_identify(struct adminauth_peer *p, int fd, bool local);

/* The caller as logfmt fields: "uid=U gid=G pid=P" on the control socket,
 * "peer=ADDR" (and subject="..." with a client certificate) on TCP. */
void adminauth_peer_fields(const struct adminauth_peer *p, char *buf, size_t len);

#endif
