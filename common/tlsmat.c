/*
 * tlsmat — a cluster's TLS files: read, check, carry; see tlsmat.h.
 */
#include "common/tlsmat.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sodium.h>

#include "common/file.h"
#include "common/ipc.h"
#include "common/tlsctx.h"

_Static_assert(IPC_TLS_FILES == CFG_TLS_FILES, "IPC and config TLS file lists differ");
_Static_assert((int)TLSCTX_AUTH_REQUIRED == (int)CFG_TLS_AUTH_REQUIRED &&
    (int)TLSCTX_AUTH_REQUESTED == (int)CFG_TLS_AUTH_REQUESTED, "client auth values");
_Static_assert((int)TLSCTX_TLS_1_3 == (int)CFG_TLS_1_3, "version values");

static struct tlsctx_pem
tlsmat_pem(const struct cfg_tls_files *f, enum cfg_tls_file i)
{
	return (struct tlsctx_pem){ f ? f->data[i] : NULL, f ? f->len[i] : 0 };
}

int
tlsmat_contexts(const struct cfg_cluster *cl, const struct cfg_tls_files *f,
    SSL_CTX **server, SSL_CTX **client, char *err, size_t errlen)
{
	*server = *client = NULL;
	if (cl->tls) {
		struct tlsctx_server_opts so = {
			.cert = tlsmat_pem(f, CFG_TLS_F_CERT),
			.key = tlsmat_pem(f, CFG_TLS_F_KEY),
			.client_ca = tlsmat_pem(f, CFG_TLS_F_CLIENT_CA),
			.client_auth = (int)cl->tls_client_auth,
			.min_version = cl->tls_min_version,
			.ciphers = cl->tls_ciphers,
			.ciphersuites = cl->tls_ciphersuites,
		};
		if ((*server = tlsctx_server_new(&so, err, errlen)) == NULL)
			return -1;
	}
	if (cl->upstream_tls) {
		struct tlsctx_client_opts co = {
			.ca = tlsmat_pem(f, CFG_TLS_F_UPSTREAM_CA),
			.cert = tlsmat_pem(f, CFG_TLS_F_UPSTREAM_CERT),
			.key = tlsmat_pem(f, CFG_TLS_F_UPSTREAM_KEY),
			.verify = cl->upstream_tls_verify,
			.min_version = CFG_TLS_1_2,
		};
		if ((*client = tlsctx_client_new(&co, err, errlen)) == NULL) {
			SSL_CTX_free(*server);
			*server = NULL;
			return -1;
		}
	}
	return 0;
}

/* "KEY: message" -> the line of KEY in cl (its header when unknown). */
static int
tlsmat_err_line(const struct cfg_cluster *cl, const char *msg)
{
	char key[32];
	size_t n = strcspn(msg, ": ");

	if (n > 0 && n < sizeof key) {
		memcpy(key, msg, n);
		key[n] = '\0';
		int line = cfg_cluster_key_line(cl, key);
		if (line > 0)
			return line;
	}
	return cl->line;
}

size_t
tlsmat_size(const struct cfg_tls_files *f)
{
	size_t n = 0;
	for (int i = 0; f && i < CFG_TLS_FILES; i++)
		n += f->len[i];
	return n;
}

/* upstream_sasl_password_file: a secret's mode (checked before it is
 * read), one line, its line end dropped. NULL with the reason in err. */
static char *
tlsmat_read_password(const char *fp, size_t *len, char *err, size_t errlen)
{
	struct stat st;
	char why[160];

	if (stat(fp, &st) == 0 && S_ISREG(st.st_mode) &&
	    file_secret_mode_ok(st.st_mode, "the password", why, sizeof why) == -1) {
		snprintf(err, errlen, "%.*s: %s", (int)(errlen > 200 ? errlen - 200 : 0), fp, why);
		return NULL;
	}
	char *b = file_read_all(fp, CFG_SASL_PASSWORD_MAX + 2, len, err, errlen);
	if (b == NULL)
		return NULL;
	size_t n = *len;
	if (n > 0 && b[n - 1] == '\n')
		n--;
	if (n > 0 && b[n - 1] == '\r')
		n--;
	const char *bad = n == 0 ? "holds no password" : n > CFG_SASL_PASSWORD_MAX
	    ? "holds a password longer than 1024 bytes"
	    : memchr(b, '\n', n) || memchr(b, '\r', n) ? "holds more than one line (the "
	    "password is the first and only line)" : memchr(b, 0, n) ? "holds a NUL byte" : NULL;
	if (bad) {
		sodium_memzero(b, *len);
		free(b);
		snprintf(err, errlen, "%.*s: %s", (int)(errlen > 200 ? errlen - 200 : 0), fp, bad);
		return NULL;
	}
	sodium_memzero(b + n, *len - n);
	*len = n;
	return b;
}

int
tlsmat_read_cluster(struct cfg_cluster *cl, const char *path, struct cfg_errors *errs)
{
	struct cfg_tls_files *f;
	bool any = false, failed = false;
	char err[512];

	cfg_tls_files_free(cl->files);
	cl->files = NULL;
	for (int i = 0; i < CFG_TLS_FILES; i++)
		any |= cfg_tls_file_path(cl, (enum cfg_tls_file)i)[0] != '\0';
	if (!any && !cl->tls && !cl->upstream_tls)
		return 0;
	if ((f = calloc(1, sizeof *f)) == NULL) {
		cfg_errors_add(errs, "%s:%d: out of memory", path, cl->line);
		return -1;
	}
	for (int i = 0; i < CFG_TLS_FILES; i++) {
		const char *fp = cfg_tls_file_path(cl, (enum cfg_tls_file)i);
		const char *key = cfg_tls_file_key((enum cfg_tls_file)i);
		if (fp[0] == '\0')
			continue;
		if (i == CFG_TLS_F_UPSTREAM_SASL_PASSWORD)
			f->data[i] = tlsmat_read_password(fp, &f->len[i], err, sizeof err);
		else
			f->data[i] = file_read_all(fp, CFG_TLS_FILE_MAX, &f->len[i], err, sizeof err);
		if (f->data[i] == NULL) {
			int line = cfg_cluster_key_line(cl, key);
			cfg_errors_add(errs, "%s:%d: %s: %s", path, line ? line : cl->line, key, err);
			failed = true;
		} else if (f->len[i] == 0) {
			int line = cfg_cluster_key_line(cl, key);
			cfg_errors_add(errs, "%s:%d: %s: %s: empty file", path,
			    line ? line : cl->line, key, fp);
			failed = true;
		}
	}
	if (!failed && tlsmat_size(f) + sizeof(struct ipc_tls_material) > IPC_MAX_PAYLOAD) {
		cfg_errors_add(errs, "%s:%d: TLS files of [cluster %s] total %zu bytes, more "
		    "than %zu", path, cl->line, cl->name, tlsmat_size(f),
		    (size_t)IPC_MAX_PAYLOAD - sizeof(struct ipc_tls_material));
		failed = true;
	}
	if (!failed) {
		SSL_CTX *s, *c;
		if (tlsmat_contexts(cl, f, &s, &c, err, sizeof err) != 0) {
			cfg_errors_add(errs, "%s:%d: %s", path, tlsmat_err_line(cl, err), err);
			failed = true;
		} else {
			SSL_CTX_free(s);
			SSL_CTX_free(c);
		}
	}
	if (failed) {
		cfg_tls_files_free(f);
		return -1;
	}
	cl->files = f;
	return 0;
}

int
tlsmat_read(struct cfg *cfg, struct cfg_errors *errs)
{
	int rc = 0;
	for (size_t i = 0; i < cfg->n_clusters; i++)
		if (tlsmat_read_cluster(&cfg->clusters[i], cfg->path ? cfg->path : "<config>",
		    errs) != 0)
			rc = -1;
	return rc;
}

struct cfg_tls_files *
tlsmat_dup(const struct cfg_tls_files *f)
{
	struct cfg_tls_files *d = calloc(1, sizeof *d);

	if (d == NULL)
		return NULL;
	for (int i = 0; i < CFG_TLS_FILES; i++) {
		if (f->data[i] == NULL)
			continue;
		if ((d->data[i] = malloc(f->len[i] + 1)) == NULL) {
			cfg_tls_files_free(d);
			return NULL;
		}
		memcpy(d->data[i], f->data[i], f->len[i]);
		d->data[i][f->len[i]] = '\0';
		d->len[i] = f->len[i];
	}
	return d;
}

int
tlsmat_encode(const struct cfg_tls_files *f, uint8_t **out, size_t *len)
{
	struct ipc_tls_material h = { .version = IPC_TLS_MATERIAL_VERSION };
	size_t total = sizeof h + tlsmat_size(f), off = sizeof h;
	uint8_t *b;

	if (total > IPC_MAX_PAYLOAD) {
		errno = EMSGSIZE;
		return -1;
	}
	if ((b = malloc(total)) == NULL)
		return -1;
	for (int i = 0; i < CFG_TLS_FILES; i++) {
		h.len[i] = (uint32_t)f->len[i];
		if (f->len[i]) {
			memcpy(b + off, f->data[i], f->len[i]);
			off += f->len[i];
		}
	}
	memcpy(b, &h, sizeof h);
	*out = b;
	*len = total;
	return 0;
}

int
tlsmat_decode(const uint8_t *payload, size_t len, struct cfg_tls_files *out,
    char *err, size_t errlen)
{
	struct ipc_tls_material h;
	size_t off = sizeof h;

	memset(out, 0, sizeof *out);
	if (ipc_tls_material_check(payload, len, &h, err, errlen) != 0)
		return -1;
	for (int i = 0; i < CFG_TLS_FILES; i++) {
		out->len[i] = h.len[i];
		out->data[i] = h.len[i] ? (char *)payload + off : NULL;
		off += h.len[i];
	}
	return 0;
}
