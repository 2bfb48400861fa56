/*
 * adminauth — who may use the admin API: the decision the admin process
 * (ferry-admin) takes for every request before it is routed
 * (supervisor/admin_http.c asks), from the credentials the supervisor sent
 * it (adminproto_creds; the supervisor reads the files, admincreds.h).
 *
 * The model (docs/operations.md, "Securing the admin API"):
 *   - the control socket is trusted by its file permissions
 *     (control_socket_mode, control_socket_group): every request on it is
 *     allowed, and the caller's uid/gid/pid (SO_PEERCRED) goes with every
 *     request to the supervisor, which logs it for mutating calls;
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
 * Only the SHA-256 of the token is known here. A presented token is hashed
 * the same way and the two digests are compared with sodium_memcmp, so the
 * time taken depends neither on where the tokens differ nor on the length
 * of the secret.
 *
 * Return conventions: 0 / -1 with a message in err.
 */
#ifndef FERRY_SUPERVISOR_ADMINAUTH_H
#define FERRY_SUPERVISOR_ADMINAUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "common/config.h"
#include "supervisor/adminproto.h"

/* The credentials of admin_listen, built from an IPC_ADMIN_CREDS message. */
struct adminauth {
	bool token_set;
	unsigned char token_digest[ADMINPROTO_DIGEST_LEN];
	bool client_certs;               /* admin_tls_client_ca is set */
	char open_paths[CFG_OPEN_PATHS_MAX]; /* as in struct cfg */
	SSL_CTX *tls_ctx;                /* HTTPS (admin_tls_cert), or NULL; owned */
};

/* Build *a from a checked credentials message: the HTTPS context from the
 * PEM bytes (client certificates requested and verified against the CA
 * when there is one). On error *a is left cleared. */
int adminauth_from_creds(struct adminauth *a, const struct adminproto_creds_view *v, char *err,
			 size_t errlen);

/* Free the TLS context and wipe the digest. */
void adminauth_clear(struct adminauth *a);

/* Count a refusal r (MISSING, MALFORMED or WRONG; others are ignored) in
 * the counters block the supervisor shares. */
void adminauth_count(struct adminproto_counters *k, enum adminproto_auth r);

/* --- pure ---------------------------------------------------------------- */

/* Is path one of the comma-separated paths of list (exact match)? */
bool adminauth_path_open(const char *list, const char *path);

/* The token of an Authorization header value "Bearer TOKEN" (scheme case-
 * insensitive, blanks around the token ignored): 0 with *tok and *toklen, or
 * -1 when the value is not of that form. */
int adminauth_bearer(const char *authz, const char **tok, size_t *toklen);

/* The decision for one request. local: it came over the control socket.
 * authz: the Authorization header or NULL. cert_verified: the TLS peer
 * presented a client certificate that verified against admin_tls_client_ca. */
enum adminproto_auth adminauth_check(const struct adminauth *a, bool local, const char *path,
				     const char *authz, bool cert_verified);

/* The WWW-Authenticate header line ("Name: value\r\n") and the JSON error
 * message of a refusal. */
const char *adminauth_challenge(enum adminproto_auth r);
const char *adminauth_refusal_msg(const struct adminauth *a, enum adminproto_auth r);

/* --- the caller ---------------------------------------------------------- */

/* Fill c for an accepted socket: the listener, SO_PEERCRED on the control
 * socket (the kernel's record of the connecting process), the address on
 * TCP. The decision (c->auth) and a certificate's subject come later. */
void adminauth_identify(struct adminproto_caller *c, int fd, bool local);

#endif
