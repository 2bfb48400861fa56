/*
 * adminauth — the admin API's access decision in the admin process; the
 * model is in adminauth.h.
 */
#include "supervisor/adminauth.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "common/tlsctx.h"

void
adminauth_count(struct adminproto_counters *k, enum adminproto_auth r)
{
	if (r >= ADMINPROTO_AUTH_MISSING && r <= ADMINPROTO_AUTH_WRONG)
		atomic_fetch_add_explicit(&k->refused[r - ADMINPROTO_AUTH_MISSING], 1,
		    memory_order_relaxed);
}

/* --- pure ---------------------------------------------------------------- */

bool
adminauth_path_open(const char *list, const char *path)
{
	size_t n = strlen(path);
	const char *s = list, *comma;

	if (n == 0)
		return false;
	while (*s != '\0') {
		comma = strchr(s, ',');
		size_t ilen = comma ? (size_t)(comma - s) : strlen(s);

		if (ilen == n && memcmp(s, path, n) == 0)
			return true;
		if (comma == NULL)
			break;
		s = comma + 1;
	}
	return false;
}

int
adminauth_bearer(const char *authz, const char **tok, size_t *toklen)
{
	const char *t;
	size_t n;

	if (authz == NULL || strncasecmp(authz, "Bearer", 6) != 0 ||
	    (authz[6] != ' ' && authz[6] != '\t'))
		return -1;
	for (t = authz + 6; *t == ' ' || *t == '\t'; t++)
		;
	n = strlen(t);
	while (n > 0 && (t[n - 1] == ' ' || t[n - 1] == '\t'))
		n--;
	if (n == 0 || memchr(t, ' ', n) != NULL || memchr(t, '\t', n) != NULL)
		return -1;
	*tok = t;
	*toklen = n;
	return 0;
}

enum adminproto_auth
adminauth_check(const struct adminauth *a, bool local, const char *path, const char *authz,
		bool cert_verified)
{
	unsigned char d[ADMINPROTO_DIGEST_LEN];
	const char *tok;
	size_t toklen;
	int same;

	if (local)
		return ADMINPROTO_AUTH_LOCAL;
	if (path != NULL && adminauth_path_open(a->open_paths, path))
		return ADMINPROTO_AUTH_OPEN_PATH;
	if (!a->token_set && !a->client_certs)
		return ADMINPROTO_AUTH_UNPROTECTED;
	if (cert_verified && a->client_certs)
		return ADMINPROTO_AUTH_CERT;
	if (authz == NULL)
		return ADMINPROTO_AUTH_MISSING;
	if (adminauth_bearer(authz, &tok, &toklen) == -1)
		return ADMINPROTO_AUTH_MALFORMED;
	if (!a->token_set)
		return ADMINPROTO_AUTH_WRONG;
	/* hash first: the compare sees two fixed-length digests, so neither
	 * the position of a difference nor the token's length shows in time */
	crypto_hash_sha256(d, (const unsigned char *)tok, toklen);
	same = sodium_memcmp(d, a->token_digest, sizeof d) == 0;
	sodium_memzero(d, sizeof d);
	return same ? ADMINPROTO_AUTH_TOKEN : ADMINPROTO_AUTH_WRONG;
}

const char *
adminauth_challenge(enum adminproto_auth r)
{
	if (r == ADMINPROTO_AUTH_WRONG)
		return "WWW-Authenticate: Bearer realm=\"ferry\", error=\"invalid_token\"\r\n";
	if (r == ADMINPROTO_AUTH_MALFORMED)
		return "WWW-Authenticate: Bearer realm=\"ferry\", error=\"invalid_request\"\r\n";
	return "WWW-Authenticate: Bearer realm=\"ferry\"\r\n";
}

const char *
adminauth_refusal_msg(const struct adminauth *a, enum adminproto_auth r)
{
	switch (r) {
	case ADMINPROTO_AUTH_WRONG:
		return a->token_set ? "invalid token" :
		    "tokens are not accepted here: a client certificate is required";
	case ADMINPROTO_AUTH_MALFORMED:
		return "malformed Authorization header (expected 'Bearer TOKEN')";
	default:
		break;
	}
	if (a->token_set && a->client_certs)
		return "authentication required: send 'Authorization: Bearer TOKEN' or a "
		    "client certificate";
	if (a->client_certs)
		return "authentication required: a client certificate is required";
	return "authentication required: send 'Authorization: Bearer TOKEN'";
}

/* --- credentials ---------------------------------------------------------- */

int
adminauth_from_creds(struct adminauth *a, const struct adminproto_creds_view *v, char *err,
		     size_t errlen)
{
	const struct adminproto_creds *c = &v->c;

	memset(a, 0, sizeof *a);
	a->token_set = (c->flags & ADMINPROTO_CREDS_TOKEN) != 0;
	memcpy(a->token_digest, c->token_digest, sizeof a->token_digest);
	a->client_certs = (c->flags & ADMINPROTO_CREDS_CLIENT_CERTS) != 0;
	snprintf(a->open_paths, sizeof a->open_paths, "%s", c->open_paths);
	if (c->flags & ADMINPROTO_CREDS_TLS) {
		struct tlsctx_server_opts o;

		memset(&o, 0, sizeof o);
		o.cert = (struct tlsctx_pem){ v->cert, c->cert_len };
		o.key = (struct tlsctx_pem){ v->key, c->key_len };
		o.client_ca = (struct tlsctx_pem){ v->ca, c->ca_len };
		/* requested, not required: a client without a certificate may
		 * still present the token; one whose certificate does not
		 * verify fails the handshake */
		o.client_auth = v->ca != NULL ? TLSCTX_AUTH_REQUESTED : TLSCTX_AUTH_NONE;
		o.min_version = TLSCTX_TLS_1_2;
		if ((a->tls_ctx = tlsctx_server_new(&o, err, errlen)) == NULL) {
			adminauth_clear(a);
			return -1;
		}
	}
	return 0;
}

void
adminauth_clear(struct adminauth *a)
{
	if (a->tls_ctx != NULL)
		SSL_CTX_free(a->tls_ctx);
	sodium_memzero(a, sizeof *a);
}

/* --- the caller ---------------------------------------------------------- */

void
adminauth_identify(struct adminproto_caller *c, int fd, bool local)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	memset(c, 0, sizeof *c);
	if (local) {
		struct ucred cred;
		socklen_t cl = sizeof cred;

		c->listener = ADMINPROTO_L_CONTROL;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 && cl == sizeof cred) {
			c->have_cred = 1;
			c->uid = cred.uid;
			c->gid = cred.gid;
			c->pid = cred.pid;
		}
		return;
	}
	c->listener = ADMINPROTO_L_HTTP;
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET) {
			const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;

			inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
			port = ntohs(in->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;

			inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
			port = ntohs(in6->sin6_port);
		}
	}
	snprintf(c->addr, sizeof c->addr, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
}
