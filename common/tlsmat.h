/*
 * tlsmat — a cluster's TLS material: the files its TLS keys name (and the
 * password of upstream_sasl_password_file, ferry's own upstream SASL
 * secret, which travels the same way), read by the privileged supervisor, checked by building the contexts they make,
 * carried to the worker as bytes (IPC_TLS_MATERIAL) and turned into the
 * worker's SSL_CTXs there. Workers never open a key file.
 *
 * The supervisor reads at start, on every reload and in `ferryd -t` /
 * validate (tlsmat_read): an unreadable file, a bad PEM, a key of another
 * certificate, an unknown cipher is a "file:line: key: message" error before
 * anything serving is touched. A worker restarted after a crash gets the
 * bytes of its generation (the ones the cluster's version was computed
 * over), not whatever is on disk now: a renewed certificate is taken by a
 * reload, which sees a modified cluster.
 *
 * Return convention: 0, or -1 with errors appended / a reason in err.
 */
#ifndef FERRY_COMMON_TLSMAT_H
#define FERRY_COMMON_TLSMAT_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "common/config.h"

/* Reads the TLS files of every cluster of cfg into cl->files and checks
 * them (tlsmat_contexts). A cluster without TLS keys gets no files. The
 * password file must not be readable by others nor writable by its group
 * (like admin_token_file) and hold one line of 1-1024 bytes (its line end
 * is dropped). Errors:
 * "CFGPATH:LINE: KEY: PATH: cannot read: REASON", "CFGPATH:LINE: tls_key:
 * key does not match the certificate of tls_cert", ... (LINE of the key). */
int tlsmat_read(struct cfg *cfg, struct cfg_errors *errs);

/* Same for one cluster; path names the config file in messages. */
int tlsmat_read_cluster(struct cfg_cluster *cl, const char *path, struct cfg_errors *errs);

/* The contexts the cluster's TLS settings and files make: *server when
 * cl->tls (else NULL), *client when cl->upstream_tls (else NULL). On
 * failure nothing is returned and err starts with the key at fault
 * ("tls_key: ..."). */
int tlsmat_contexts(const struct cfg_cluster *cl, const struct cfg_tls_files *f,
    SSL_CTX **server, SSL_CTX **client, char *err, size_t errlen);

/* A deep copy (for the configuration a generation keeps); NULL on OOM. */
struct cfg_tls_files *tlsmat_dup(const struct cfg_tls_files *f);

/* Total bytes of the files. */
size_t tlsmat_size(const struct cfg_tls_files *f);

/* IPC_TLS_MATERIAL payload: struct ipc_tls_material then the files in
 * order. *out is malloc'd (wipe with sodium_memzero before free). */
int tlsmat_encode(const struct cfg_tls_files *f, uint8_t **out, size_t *len);

/* The files of a received payload, pointing into it (no copy); -1 with a
 * reason when the lengths do not add up. */
int tlsmat_decode(const uint8_t *payload, size_t len, struct cfg_tls_files *out,
    char *err, size_t errlen);

#endif
