/*
 * certs — served certificate expiry per TLS cluster; see certs.h.
 */
#include "supervisor/certs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/tlsctx.h"

int
certs_not_after(const char *pem, size_t len, int64_t *out, char *err, size_t errlen)
{
	time_t t;
	struct tlsctx_pem p = { .data = pem, .len = len };
	if (tlsctx_cert_not_after(p, &t, err, errlen) == -1)
		return -1;
	*out = (int64_t)t;
	return 0;
}

bool
certs_check(int64_t not_after, int64_t now, int64_t *days_left)
{
	int64_t left = not_after - now;
	/* whole days, rounded towards minus infinity (an hour past expiry is
	 * day -1, not 0) */
	*days_left = left >= 0 ? left / 86400 : -((-left + 86399) / 86400);
	return left < (int64_t)CERTS_WARN_DAYS * 86400;
}

/* The certificate bytes the cluster serves: those the supervisor read for
 * its serving configuration (common/tlsmat.h) and sent to its workers, not
 * whatever is on disk now. A malloc'd copy. */
static char *
certs_read(const struct sup_cluster *c, size_t *len, char *err, size_t errlen)
{
	const struct cfg_cluster *cl = c->ccfg ? c->ccfg->cl : NULL;
	const struct cfg_tls_files *f = cl ? cl->files : NULL;
	if (!f || !f->data[CFG_TLS_F_CERT] || !f->len[CFG_TLS_F_CERT]) {
		snprintf(err, errlen, "no certificate read for this configuration");
		return NULL;
	}
	char *p = malloc(f->len[CFG_TLS_F_CERT]);
	if (!p) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	memcpy(p, f->data[CFG_TLS_F_CERT], f->len[CFG_TLS_F_CERT]);
	*len = f->len[CFG_TLS_F_CERT];
	return p;
}

static void
certs_update_cluster(struct sup *s, struct sup_cluster *c, const char *why)
{
	const struct cfg_cluster *cl = &c->cfg;
	if (!cl->tls) {
		c->tls_not_after = 0;
		return;
	}
	char err[256];
	size_t len = 0;
	char *pem = certs_read(c, &len, err, sizeof err);
	int64_t na = 0;
	if (!pem || certs_not_after(pem, len, &na, err, sizeof err) == -1) {
		free(pem);
		log_warn("cannot read the TLS certificate's expiry", "cluster=%s tls_cert=%s "
		    "error=\"%s\"", c->name, cl->tls_cert, err);
		return;  /* keep what we knew */
	}
	free(pem);
	c->tls_not_after = na;
	int64_t days;
	char when[64];
	clock_fmt_rfc3339((uint64_t)na * 1000u, when, sizeof when);
	if (certs_check(na, (int64_t)(s->now_wall_ms / 1000u), &days))
		log_warn(days < 0 ? "TLS certificate has expired" : "TLS certificate expires soon",
		    "cluster=%s not_after=%s days_left=%lld tls_cert=%s why=%s hint=\"renew it, "
		    "then ferryctl reload\"", c->name, when, (long long)days, cl->tls_cert, why);
	else
		log_debug("TLS certificate", "cluster=%s not_after=%s days_left=%lld why=%s",
		    c->name, when, (long long)days, why);
}

void
certs_update(struct sup *s, const char *why)
{
	for (size_t i = 0; i < s->n_clusters; i++)
		certs_update_cluster(s, s->clusters[i], why);
}
