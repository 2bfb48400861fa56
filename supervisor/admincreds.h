/*
 * admincreds — the admin API's credentials as the supervisor reads them
 * from the files the [ferry] keys name: the bearer token of
 * admin_token_file (only its SHA-256 is kept) and the PEM bytes of
 * admin_tls_cert, admin_tls_key and admin_tls_client_ca. They are read and
 * checked at start, by `ferryd -t`, by POST /admin/config/validate and by
 * every reload; the supervisor sends them to the admin process
 * (admincreds_encode, IPC_ADMIN_CREDS), which decides access with them
 * (adminauth.h) and never opens a file itself.
 *
 * The token file: a regular file (not a FIFO, device, ...) of at most
 * ADMINCREDS_TOKEN_FILE_MAX bytes, not readable or writable by "other" and
 * not group-writable (mode & 0027 == 0); one token of ADMINCREDS_TOKEN_MIN
 * to ADMINCREDS_TOKEN_MAX visible ASCII characters (no spaces); one
 * trailing newline (LF or CRLF) is ignored. The file's bytes are wiped
 * (sodium_memzero) after hashing, the key's bytes when cleared.
 *
 * Return conventions: 0 / -1 with a message in err.
 */
#ifndef FERRY_SUPERVISOR_ADMINCREDS_H
#define FERRY_SUPERVISOR_ADMINCREDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "common/config.h"
#include "supervisor/adminproto.h"

#define ADMINCREDS_TOKEN_MIN      16
#define ADMINCREDS_TOKEN_MAX      1024
#define ADMINCREDS_TOKEN_FILE_MAX 4096

struct admincreds {
	bool token_set;
	unsigned char token_digest[ADMINPROTO_DIGEST_LEN];
	bool client_certs;               /* admin_tls_client_ca is set */
	char open_paths[CFG_OPEN_PATHS_MAX]; /* as in struct cfg */
	bool tls;                        /* HTTPS: admin_tls_cert and admin_tls_key */
	char *cert, *key, *ca;           /* PEM bytes (malloc'd), or NULL */
	size_t cert_len, key_len, ca_len;
	time_t tls_not_after;            /* of the certificate, for the log */
	char tls_subject[256];
};

/* --- pure ---------------------------------------------------------------- */

/* The token held in a token file's bytes: trims one trailing "\n" or
 * "\r\n", checks length and characters, and stores its SHA-256. */
int admincreds_token_parse(const char *buf, size_t len,
			   unsigned char digest[ADMINPROTO_DIGEST_LEN], char *err, size_t errlen);

/* Are a token file's permission bits acceptable (see above)? */
int admincreds_token_mode_ok(mode_t mode, char *err, size_t errlen);

/* --- loading ------------------------------------------------------------ */

/* Build *a from c: reads and checks admin_token_file and, with
 * admin_tls_cert, reads the certificate, key and client CA files (bounded
 * regular files) and builds an HTTPS context from them once, to refuse a
 * bad PEM or a key that does not match (common/tlsctx.h). On error *a is
 * left cleared, *key names the [ferry] key at fault and err holds "PATH:
 * reason". */
int admincreds_load(struct admincreds *a, const struct cfg *c, const char **key, char *err,
		    size_t errlen);

/* admincreds_load with the error placed at its key, as the config parser
 * places its own: "FILE:LINE: KEY: PATH: reason". */
int admincreds_load_cfg(struct admincreds *a, const struct cfg *c, char *err, size_t errlen);

/* The same, for validation: loads and drops the credentials; on error
 * appends the message to errs and returns -1. */
int admincreds_check_cfg(const struct cfg *c, struct cfg_errors *errs);

/* Do a and b grant the same access (token, client certificates, open
 * paths, whether HTTPS)? Not whether the certificate changed. */
bool admincreds_same(const struct admincreds *a, const struct admincreds *b);

/* Free the bytes (the key's wiped) and wipe the digest. */
void admincreds_clear(struct admincreds *a);

/* "token", "certificate", "token+certificate" or "none", for logs. */
const char *admincreds_summary(const struct admincreds *a);

/* Log the HTTPS certificate in use (subject, notAfter); a warning when it
 * expires within 14 days. Nothing without HTTPS. */
void admincreds_log_tls(const struct admincreds *a);

/* The IPC_ADMIN_CREDS payload for a (malloc'd, *len bytes; the caller
 * wipes and frees it). -1 with errno: ENOMEM, or EMSGSIZE when the HTTPS
 * files do not fit one message (refused at load already). */
int admincreds_encode(const struct admincreds *a, uint8_t **out, size_t *len);

/* control_socket_group as a gid: a numeric gid as is, a name looked up in
 * the group database; (gid_t)-1 when group is "". 0, or -1 with err. */
int admincreds_socket_gid(const char *group, gid_t *gid, char *err, size_t errlen);

#endif
