/*
 * admincreds — reading the admin API's credentials in the supervisor; see
 * admincreds.h.
 */
#include "supervisor/admincreds.h"

#include <errno.h>
#include <grp.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/file.h"
#include "common/ipc.h"
#include "common/log.h"
#include "common/tlsctx.h"
#include "common/units.h"

/* --- pure ---------------------------------------------------------------- */

int
admincreds_token_parse(const char *buf, size_t len, unsigned char digest[ADMINPROTO_DIGEST_LEN],
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
	if (len < ADMINCREDS_TOKEN_MIN || len > ADMINCREDS_TOKEN_MAX) {
		snprintf(err, errlen, "the token is %zu characters long (%d to %d expected; "
		    "e.g. openssl rand -hex 32)", len, ADMINCREDS_TOKEN_MIN, ADMINCREDS_TOKEN_MAX);
		return -1;
	}
	crypto_hash_sha256(digest, (const unsigned char *)buf, len);
	return 0;
}

int
admincreds_token_mode_ok(mode_t mode, char *err, size_t errlen)
{
	return file_secret_mode_ok(mode, "the token", err, errlen);
}

/* --- loading ------------------------------------------------------------ */

static int
admincreds_load_token(struct admincreds *a, const char *path, char *err, size_t errlen)
{
	struct stat st;
	char why[CFG_PATH_MAX + 256];
	char *buf;
	size_t len = 0;
	int rc;

	/* the mode is checked first: a token others can read is refused
	 * before it is even read */
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	    admincreds_token_mode_ok(st.st_mode, why, sizeof why) == -1) {
		snprintf(err, errlen, "%s: %s", path, why);
		return -1;
	}
	if ((buf = file_read_all(path, ADMINCREDS_TOKEN_FILE_MAX, &len, why, sizeof why)) == NULL) {
		snprintf(err, errlen, "%s", why);
		return -1;
	}
	rc = admincreds_token_parse(buf, len, a->token_digest, why, sizeof why);
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
admincreds_read_pem(const char *path, size_t *len, char *err, size_t errlen)
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
admincreds_tls_error(const struct cfg *c, const char *why, const char **key, char *err,
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

/* The HTTPS files: read, kept as bytes for the admin process, and made
 * into a context once here (then dropped) so that a bad PEM or a key that
 * does not match its certificate refuses the config, not the admin
 * process's start. */
static int
admincreds_load_tls(struct admincreds *a, const struct cfg *c, const char **key, char *err,
		    size_t errlen)
{
	struct tlsctx_server_opts o;
	SSL_CTX *ctx;
	char why[512];

	memset(&o, 0, sizeof o);
	*key = "admin_tls_cert";
	if ((a->cert = admincreds_read_pem(c->admin_tls_cert, &a->cert_len, err, errlen)) == NULL)
		return -1;
	*key = "admin_tls_key";
	if ((a->key = admincreds_read_pem(c->admin_tls_key, &a->key_len, err, errlen)) == NULL)
		return -1;
	*key = "admin_tls_client_ca";
	if (c->admin_tls_client_ca[0] != '\0' &&
	    (a->ca = admincreds_read_pem(c->admin_tls_client_ca, &a->ca_len, err, errlen)) == NULL)
		return -1;
	if (sizeof(struct adminproto_creds) + a->cert_len + a->key_len + a->ca_len >
	    IPC_MAX_PAYLOAD) {
		*key = "admin_tls_cert";
		snprintf(err, errlen, "%s: the admin HTTPS certificate, key and client CA take "
		    "%zu bytes together, at most %zu", c->admin_tls_cert,
		    a->cert_len + a->key_len + a->ca_len,
		    (size_t)IPC_MAX_PAYLOAD - sizeof(struct adminproto_creds));
		return -1;
	}
	o.cert = (struct tlsctx_pem){ a->cert, a->cert_len };
	o.key = (struct tlsctx_pem){ a->key, a->key_len };
	o.client_ca = (struct tlsctx_pem){ a->ca, a->ca_len };
	o.client_auth = a->ca != NULL ? TLSCTX_AUTH_REQUESTED : TLSCTX_AUTH_NONE;
	o.min_version = TLSCTX_TLS_1_2;
	if ((ctx = tlsctx_server_new(&o, why, sizeof why)) == NULL) {
		admincreds_tls_error(c, why, key, err, errlen);
		return -1;
	}
	SSL_CTX_free(ctx);
	a->tls = true;
	if (tlsctx_cert_not_after(o.cert, &a->tls_not_after, why, sizeof why) == -1)
		a->tls_not_after = 0;
	if (tlsctx_cert_subject(o.cert, a->tls_subject, sizeof a->tls_subject) == -1)
		a->tls_subject[0] = '\0';
	return 0;
}

int
admincreds_load(struct admincreds *a, const struct cfg *c, const char **key, char *err,
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
	    admincreds_load_token(a, c->admin_token_file, err, errlen) == -1) {
		admincreds_clear(a);
		return -1;
	}
	if (c->admin_tls_cert[0] != '\0' && admincreds_load_tls(a, c, key, err, errlen) == -1) {
		admincreds_clear(a);
		return -1;
	}
	return 0;
}

bool
admincreds_same(const struct admincreds *a, const struct admincreds *b)
{
	return a->token_set == b->token_set &&
	    sodium_memcmp(a->token_digest, b->token_digest, sizeof a->token_digest) == 0 &&
	    a->client_certs == b->client_certs && strcmp(a->open_paths, b->open_paths) == 0 &&
	    a->tls == b->tls;
}

void
admincreds_clear(struct admincreds *a)
{
	if (a->key != NULL) {
		sodium_memzero(a->key, a->key_len);
		free(a->key);
	}
	free(a->cert);
	free(a->ca);
	sodium_memzero(a, sizeof *a);
}

int
admincreds_encode(const struct admincreds *a, uint8_t **out, size_t *len)
{
	struct adminproto_creds h;
	size_t n = sizeof h + a->cert_len + a->key_len + a->ca_len;
	uint8_t *buf;

	if (n > IPC_MAX_PAYLOAD) {
		errno = EMSGSIZE;
		return -1;
	}
	if ((buf = malloc(n)) == NULL)
		return -1;
	memset(&h, 0, sizeof h);
	h.version = ADMINPROTO_VERSION;
	if (a->token_set) {
		h.flags |= ADMINPROTO_CREDS_TOKEN;
		memcpy(h.token_digest, a->token_digest, sizeof h.token_digest);
	}
	if (a->tls) {
		h.flags |= ADMINPROTO_CREDS_TLS;
		h.cert_len = (uint32_t)a->cert_len;
		h.key_len = (uint32_t)a->key_len;
		if (a->ca != NULL) {
			h.flags |= ADMINPROTO_CREDS_CLIENT_CERTS;
			h.ca_len = (uint32_t)a->ca_len;
		}
	}
	snprintf(h.open_paths, sizeof h.open_paths, "%s", a->open_paths);
	memcpy(buf, &h, sizeof h);
	if (a->tls) {
		memcpy(buf + sizeof h, a->cert, a->cert_len);
		memcpy(buf + sizeof h + a->cert_len, a->key, a->key_len);
		if (a->ca != NULL)
			memcpy(buf + sizeof h + a->cert_len + a->key_len, a->ca, a->ca_len);
	}
	sodium_memzero(&h, sizeof h);
	*out = buf;
	*len = n;
	return 0;
}

int
admincreds_load_cfg(struct admincreds *a, const struct cfg *c, char *err, size_t errlen)
{
	char why[2560];
	const char *key = "admin_token_file";

	if (admincreds_load(a, c, &key, why, sizeof why) == 0)
		return 0;
	snprintf(err, errlen, "%s:%d: %s: %s", c->path, cfg_ferry_key_line(c, key), key, why);
	return -1;
}

int
admincreds_check_cfg(const struct cfg *c, struct cfg_errors *errs)
{
	struct admincreds a;
	char err[3072];

	if (admincreds_load_cfg(&a, c, err, sizeof err) == -1) {
		cfg_errors_add(errs, "%s", err);
		return -1;
	}
	admincreds_clear(&a);
	return 0;
}

const char *
admincreds_summary(const struct admincreds *a)
{
	if (a->token_set && a->client_certs)
		return "token+certificate";
	return a->token_set ? "token" : a->client_certs ? "certificate" : "none";
}

void
admincreds_log_tls(const struct admincreds *a)
{
	char when[40] = "?";
	time_t now = time(NULL);

	if (!a->tls)
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

/* control_socket_group as a gid: a numeric gid as is, a name looked up in
 * the group database. (gid_t)-1 when unset. */
int
admincreds_socket_gid(const char *group, gid_t *gid, char *err, size_t errlen)
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
