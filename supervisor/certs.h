/*
 * certs — warnings about the expiry of the certificate each TLS cluster
 * serves.
 *
 * The notAfter itself is read when a configuration is prepared, from the
 * bytes the supervisor read and sends to the workers (sup_ccfg_new:
 * sup_ccfg.tls_not_after / tls_subject), so what status (`tls.notAfter`)
 * and /metrics (`ferry_tls_cert_not_after_seconds{cluster}`) show is what
 * the serving workers serve. This module decides and logs the warning: at
 * start, after every reload and once a day (the I/O layer's timer), every
 * TLS cluster whose certificate expires within CERTS_WARN_DAYS days (or has
 * expired) gets one warning line.
 *
 * certs_check() is the pure rule, unit-tested; certs_update() logs.
 */
#ifndef FERRY_SUPERVISOR_CERTS_H
#define FERRY_SUPERVISOR_CERTS_H

#include <stdbool.h>
#include <stdint.h>

#include "supervisor/supervisor.h"

#define CERTS_WARN_DAYS 14
#define CERTS_CHECK_MS (24u * 3600u * 1000u)  /* the daily check */

/* Does a certificate with not_after (unix s) need the warning at now (unix
 * s)? *days_left: whole days left (negative once expired). Pure. */
bool certs_check(int64_t not_after, int64_t now, int64_t *days_left);

/* Warn about every listed TLS cluster whose certificate is close to its
 * notAfter; `why`: "start", "reload", "daily" (logged). */
void certs_update(struct sup *s, const char *why);

#endif
