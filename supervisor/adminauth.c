/*
 * adminauth — the admin API's access decision and its credentials; the
 * model is in adminauth.h.
 */
#include "supervisor/adminauth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common/file.h"
#include "common/log.h"
#include "common/tlsctx.h"

const char *
adminauth_result_str(enum adminauth_result r)
{
	switch (r) {
	case ADMINAUTH_LOCAL:
		return "local";
	case ADMINAUTH_OPEN_PATH:
		return "open-path";
	case ADMINAUTH_UNPROTECTED:
		return "unprotected";
	case ADMINAUTH_TOKEN:
		return "token";
	case ADMINAUTH_CERT:
		return "certificate";
	case ADMINAUTH_MISSING:
		return "missing";
	case ADMINAUTH_MALFORMED:
		return "malformed";
	case ADMINAUTH_WRONG:
		return "wrong-token";
	}
	return "unknown";
}

void
adminauth_count(struct adminauth_counters *k, enum adminauth_result r)
{
	if (r >= ADMINAUTH_MISSING && r <= ADMINAUTH_WRONG)
		k->refused[r - ADMINAUTH_MISSING]++;
}

int
adminauth_metrics_text(const struct adminauth_counters *k, char *buf, size_t len)
{
	int n = snprintf(buf, len,
	    "# HELP ferry_admin_requests_refused_total Admin API requests on admin_listen "
	    "refused for want of credentials, by reason\n"
	    "# TYPE ferry_admin_requests_refused_total counter\n"
	    "ferry_admin_requests_refused_total{reason=\"%s\"} %llu\n"
	    "ferry_admin_requests_refused_total{reason=\"%s\"} %llu\n"
	    "ferry_admin_requests_refused_total{reason=\"%s\"} %llu\n"
	    "# HELP ferry_admin_tls_handshake_failures_total Failed TLS handshakes on an HTTPS "
	    "admin_listen (plain HTTP, untrusted client certificates, garbage)\n"
	    "# TYPE ferry_admin_tls_handshake_failures_total counter\n"
	    "ferry_admin_tls_handshake_failures_total %llu\n",
	    adminauth_result_str(ADMINAUTH_MISSING), (unsigned long long)k->refused[0],
	    adminauth_result_str(ADMINAUTH_MALFORMED), (unsigned long long)k->refused[1],
	    adminauth_result_str(ADMINAUTH_WRONG), (unsigned long long)k->refused[2],
	    (unsigned long long)k->tls_failures);

	return n < 0 || (size_t)n >= len ? -1 : n;
}

/* --- pure ---------------------------------------------------------------- */

int
adminauth_token_parse(const char *buf, size_t len, unsigned char digest[ADMINAUTH_DIGEST_LEN],
		      char *err, size_t errlen)
{
	size_t i;

	if (len > 0 && buf[len - 1] == '\n') {
		len--;
		if (len > 0 && buf[len - 1] == '\r')
			len--;
	}
	if (len == 0) {
		snprintf(err, errlen, "the token file is empty");
		return -1;
	}
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)buf[i];

		if (ch <= 0x20 || ch >= 0x7f) {
			snprintf(err, errlen, "the token has a %s at byte %zu (one line of "
			    "visible ASCII characters is expected, no spaces)",
			    ch == '\n' ? "second line" : "blank or non-ASCII character", i + 1);
			return -1;
		}
	}
	if (len < ADMINAUTH_TOKEN_MIN || len > ADMINAUTH_TOKEN_MAX) {
		snprintf(err, errlen, "the token is %zu characters long (%d to %d expected; "
		    "e.g. openssl rand -hex 32)", len, ADMINAUTH_TOKEN_MIN, ADMINAUTH_TOKEN_MAX);
		return -1;
	}
	crypto_hash_sha256(digest, (const unsigned char *)buf, len);
	return 0;
}

int
adminauth_token_mode_ok(mode_t mode, char *err, size_t errlen)
{
	return file_secret_mode_ok(mode, "the token", err, errlen);
}

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

enum adminauth_result
adminauth_check(const struct adminauth *a, bool local, const char *path, const char *authz,
		bool cert_verified)
{
	unsigned char d[ADMINAUTH_DIGEST_LEN];
	const char *tok;
	size_t toklen;
	int same;

	if (local)
		return ADMINAUTH_LOCAL;
	if (path != NULL && adminauth_path_open(a->open_paths, path))
		return ADMINAUTH_OPEN_PATH;
	if (!a->token_set && !a->client_certs)
		return ADMINAUTH_UNPROTECTED;
	if (cert_verified && a->client_certs)
		return ADMINAUTH_CERT;
	if (authz == NULL)
		return ADMINAUTH_MISSING;
	if (adminauth_bearer(authz, &tok, &toklen) == -1)
		return ADMINAUTH_MALFORMED;
	if (!a->token_set)
		return ADMINAUTH_WRONG;
	/* hash first: the compare sees two fixed-length digests, so neither
	 * the position of a difference nor the token's length shows in time */
	crypto_hash_sha256(d, (const unsigned char *)tok, toklen);
	same = sodium_memcmp(d, a->token_digest, sizeof d) == 0;
	sodium_memzero(d, sizeof d);
	return same ? ADMINAUTH_TOKEN : ADMINAUTH_WRONG;
}

const char *
adminauth_challenge(enum adminauth_result r)
{
	if (r == ADMINAUTH_WRONG)
		return "WWW-Authenticate: Bearer realm=\"ferry\", error=\"invalid_token\"\r\n";
	if (r == ADMINAUTH_MALFORMED)
		return "WWW-Authenticate: Bearer realm=\"ferry\", error=\"invalid_request\"\r\n";
	return "WWW-Authenticate: Bearer realm=\"ferry\"\r\n";
}

const char *
adminauth_refusal_msg(const struct adminauth *a, enum adminauth_result r)
{
	switch (r) {
	case ADMINAUTH_WRONG:
		return a->token_set ? "invalid token" :
		    "tokens are not accepted here: a client certificate is required";
	case ADMINAUTH_MALFORMED:
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

/* --- loading ------------------------------------------------------------ */

static int
adminauth_load_token(struct adminauth *a, const char *path, char *err, size_t errlen)
{
	struct stat st;
	char why[CFG_PATH_MAX + 256];
	char *buf;
	size_t len = 0;
	int rc;

	/* the mode is checked first: a token others can read is refused
	 * before it is even read */
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	    adminauth_token_mode_ok(st.st_mode, why, sizeof why) == -1) {
		snprintf(err, errlen, "%s: %s", path, why);
		return -1;
	}
	if ((buf = file_read_all(path, ADMINAUTH_TOKEN_FILE_MAX, &len, why, sizeof why)) == NULL) {
		snprintf(err, errlen, "%s", why);
		return -1;
	}
	rc = adminauth_token_parse(buf, len, a->token_digest, why, sizeof why);
	sodium_memzero(buf, len);
	free(buf);
	if (rc == -1) {
		snprintf(err, errlen, "%s: %s", path, why);
		return -1;
	}
	a->token_set = true;
	return 0;
}

/* Read one TLS file named by key (bounded, regular). */
static char *
adminauth_read_pem(const char *path, size_t *len, char *err, size_t errlen)
{
	char why[CFG_PATH_MAX + 256];
	char *buf = file_read_all(path, CFG_TLS_FILE_MAX, len, why, sizeof why);

	if (buf == NULL)
		snprintf(err, errlen, "%s", why);
	return buf;
}

/* tlsctx names the cluster keys ("tls_key: key does not match the
 * certificate of tls_cert"): say which admin key and file instead. */
static void
adminauth_tls_error(const struct cfg *c, const char *why, const char **key, char *err,
		    size_t errlen)
{
	static const struct { const char *prefix, *key; } map[] = {
		{ "tls_client_ca: ", "admin_tls_client_ca" },
		{ "tls_key: ", "admin_tls_key" },
		{ "tls_cert: ", "admin_tls_cert" },
	};
	const char *msg = why, *path = c->admin_tls_cert, *of;
	size_t i;

	*key = "admin_tls_cert";
	for (i = 0; i < sizeof map / sizeof map[0]; i++)
		if (strncmp(why, map[i].prefix, strlen(map[i].prefix)) == 0) {
			msg = why + strlen(map[i].prefix);
			*key = map[i].key;
			path = i == 0 ? c->admin_tls_client_ca : i == 1 ? c->admin_tls_key :
			    c->admin_tls_cert;
			break;
		}
	if ((of = strstr(msg, " of tls_cert")) != NULL)
		snprintf(err, errlen, "%s: %.*s (%s)%s", path, (int)(of - msg), msg,
		    c->admin_tls_cert, of + strlen(" of tls_cert"));
	else
		snprintf(err, errlen, "%s: %s", path, msg);
}

static int
adminauth_load_tls(struct adminauth *a, const struct cfg *c, const char **key, char *err,
		   size_t errlen)
{
	struct tlsctx_server_opts o;
	char *cert = NULL, *pkey = NULL, *ca = NULL, why[512];
	size_t cert_len = 0, key_len = 0, ca_len = 0;
	int rc = -1;

	memset(&o, 0, sizeof o);
	*key = "admin_tls_cert";
	if ((cert = adminauth_read_pem(c->admin_tls_cert, &cert_len, err, errlen)) == NULL)
		goto out;
	*key = "admin_tls_key";
	if ((pkey = adminauth_read_pem(c->admin_tls_key, &key_len, err, errlen)) == NULL)
		goto out;
	*key = "admin_tls_client_ca";
	if (c->admin_tls_client_ca[0] != '\0' &&
	    (ca = adminauth_read_pem(c->admin_tls_client_ca, &ca_len, err, errlen)) == NULL)
		goto out;
	o.cert = (struct tlsctx_pem){ cert, cert_len };
	o.key = (struct tlsctx_pem){ pkey, key_len };
	o.client_ca = (struct tlsctx_pem){ ca, ca_len };
	/* requested, not required: a client without a certificate may still
	 * present the token; one whose certificate does not verify fails the
	 * handshake */
	o.client_auth = ca != NULL ? TLSCTX_AUTH_REQUESTED : TLSCTX_AUTH_NONE;
	o.min_version = TLSCTX_TLS_1_2;
	if ((a->tls_ctx = tlsctx_server_new(&o, why, sizeof why)) == NULL) {
		adminauth_tls_error(c, why, key, err, errlen);
		goto out;
	}
	if (tlsctx_cert_not_after(o.cert, &a->tls_not_after, why, sizeof why) == -1)
		a->tls_not_after = 0;
	if (tlsctx_cert_subject(o.cert, a->tls_subject, sizeof a->tls_subject) == -1)
		a->tls_subject[0] = '\0';
	rc = 0;
out:
	if (pkey != NULL) {
		sodium_memzero(pkey, key_len);
		free(pkey);
	}
	free(cert);
	free(ca);
	return rc;
}

int
adminauth_load(struct adminauth *a, const struct cfg *c, const char **key, char *err,
	       size_t errlen)
{
	memset(a, 0, sizeof *a);
	*key = "admin_token_file";
	if (sodium_init() == -1) {
		snprintf(err, errlen, "libsodium initialisation failed");
		return -1;
	}
	snprintf(a->open_paths, sizeof a->open_paths, "%s", c->admin_open_paths);
	a->client_certs = c->admin_tls_client_ca[0] != '\0';
	if (c->admin_token_file[0] != '\0' &&
	    adminauth_load_token(a, c->admin_token_file, err, errlen) == -1) {
		adminauth_clear(a);
		return -1;
	}
	if (c->admin_tls_cert[0] != '\0' && adminauth_load_tls(a, c, key, err, errlen) == -1) {
		adminauth_clear(a);
		return -1;
	}
	return 0;
}

bool
adminauth_same(const struct adminauth *a, const struct adminauth *b)
{
	return a->token_set == b->token_set &&
	    sodium_memcmp(a->token_digest, b->token_digest, sizeof a->token_digest) == 0 &&
	    a->client_certs == b->client_certs && strcmp(a->open_paths, b->open_paths) == 0 &&
	    (a->tls_ctx != NULL) == (b->tls_ctx != NULL);
}

void
adminauth_clear(struct adminauth *a)
{
	if (a->tls_ctx != NULL)
		SSL_CTX_free(a->tls_ctx);
	sodium_memzero(a, sizeof *a);
}

int
adminauth_load_cfg(struct adminauth *a, const struct cfg *c, char *err, size_t errlen)
{
	char why[2560];
	const char *key = "admin_token_file";

	if (adminauth_load(a, c, &key, why, sizeof why) == 0)
		return 0;
	snprintf(err, errlen, "%s:%d: %s: %s", c->path, cfg_ferry_key_line(c, key), key, why);
	return -1;
}

int
adminauth_check_cfg(const struct cfg *c, struct cfg_errors *errs)
{
	struct adminauth a;
	char err[3072];

	if (adminauth_load_cfg(&a, c, err, sizeof err) == -1) {
		cfg_errors_add(errs, "%s", err);
		return -1;
	}
	adminauth_clear(&a);
	return 0;
}

const char *
adminauth_summary(const struct adminauth *a)
{
	if (a->token_set && a->client_certs)
		return "token+certificate";
	return a->token_set ? "token" : a->client_certs ? "certificate" : "none";
}

void
adminauth_log_tls(const struct adminauth *a)
{
	char when[40] = "?";
	time_t now = time(NULL);

	if (a->tls_ctx == NULL)
		return;
	if (a->tls_not_after > 0)
		clock_fmt_rfc3339((uint64_t)a->tls_not_after * 1000, when, sizeof when);
	if (a->tls_not_after > 0 && a->tls_not_after - now < 14 * 86400)
		log_warn("admin HTTPS certificate expires soon", "subject=\"%s\" not_after=%s",
		    a->tls_subject, when);
	else
		log_info("admin HTTPS certificate", "subject=\"%s\" not_after=%s",
		    a->tls_subject, when);
}

/* --- the caller ---------------------------------------------------------- */

void
adminauth_peer_identify(struct adminauth_peer *p, int fd, bool local)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	memset(p, 0, sizeof *p);
	p->local = local;
	if (local) {
		socklen_t cl = sizeof p->cred;

		p->have_cred = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &p->cred, &cl) == 0 &&
		    cl == sizeof p->cred;
		return;
	}
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
	snprintf(p->addr, sizeof p->addr, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
}

void
adminauth_sanitize(const char *in, char *out, size_t len)
{
	size_t i;

	for (i = 0; in[i] != '\0' && i + 1 < len; i++) {
		unsigned char ch = (unsigned char)in[i];

		out[i] = (ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\') ? '?' : (char)ch;
	}
	out[i] = '\0';
}

void
adminauth_peer_fields(const struct adminauth_peer *p, char *buf, size_t len)
{
	char subj[sizeof p->subject];

	if (p->local && p->have_cred)
		snprintf(buf, len, "uid=%u gid=%u pid=%d", (unsigned)p->cred.uid,
		    (unsigned)p->cred.gid, (int)p->cred.pid);
	else if (p->local)
		snprintf(buf, len, "uid=? pid=?");
	else if (p->subject[0] != '\0') {
		adminauth_sanitize(p->subject, subj, sizeof subj);
		snprintf(buf, len, "peer=%s subject=\"%s\"", p->addr, subj);
	} else
		snprintf(buf, len, "peer=%s", p->addr);
}

/* control_socket_group as a gid: a numeric gid as is, a name looked up in
 * the group database. (gid_t)-1 when unset. */
int
adminauth_socket_gid(const char *group, gid_t *gid, char *err, size_t errlen)
{
	struct group gr, *res = NULL;
	char buf[16384], *end;
	unsigned long n;
	int e;

	*gid = (gid_t)-1;
	if (group[0] == '\0')
		return 0;
	errno = 0;
	n = strtoul(group, &end, 10);
	if (*end == '\0' && errno == 0 && n < (unsigned long)(gid_t)-1) {
		*gid = (gid_t)n;
		return 0;
	}
	if ((e = getgrnam_r(group, &gr, buf, sizeof buf, &res)) != 0 || res == NULL) {
		snprintf(err, errlen, "control_socket_group '%s': %s", group,
		    e ? strerror(e) : "no such group");
		return -1;
	}
	*gid = gr.gr_gid;
	return 0;
}
