/*
 * certs — when the certificate each TLS cluster serves expires.
 *
 * For every cluster with `tls_cert`, the supervisor reads the notAfter of
 * the certificate (the first one of the PEM file: the server's own, before
 * its chain) at start, after every reload and once a day, keeps it in the
 * model (sup_cluster.tls_not_after) for the status (`tls.notAfter`) and
 * /metrics (`ferry_tls_cert_not_after_seconds{cluster}`), and logs a
 * warning each of those times for a certificate that expires within
 * CERTS_WARN_DAYS days (or has expired).
 *
 * The certificate is the one the cluster's serving configuration holds (the
 * bytes the supervisor read and sent to the workers: common/tlsmat.h), so
 * what is shown is what is served. certs_check() is the pure decision,
 * unit-tested.
 */
#ifndef FERRY_SUPERVISOR_CERTS_H
#define FERRY_SUPERVISOR_CERTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "supervisor/supervisor.h"

#define CERTS_WARN_DAYS 14
#define CERTS_CHECK_MS (24u * 3600u * 1000u)  /* the daily check */

/* notAfter (unix seconds) of the first certificate of pem. 0, or -1 with
 * the reason in err. Pure. */
int certs_not_after(const char *pem, size_t len, int64_t *out, char *err, size_t errlen);

/* Does a certificate with not_after (unix s) need the warning at now (unix
 * s)? *days_left: whole days left (negative once expired). Pure. */
bool certs_check(int64_t not_after, int64_t now, int64_t *days_left);

/* Read the certificate of every TLS cluster, store its notAfter and warn
 * when it is close; `why`: "start", "reload", "daily" (logged). */
void certs_update(struct sup *s, const char *why);

#endif
