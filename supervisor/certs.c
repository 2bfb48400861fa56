/*
 * certs — served certificate expiry warnings per TLS cluster; see certs.h.
 */
#include "supervisor/certs.h"

#include "common/log.h"

bool
certs_check(int64_t not_after, int64_t now, int64_t *days_left)
{
	int64_t left = not_after - now;
	/* whole days, rounded towards minus infinity (an hour past expiry is
	 * day -1, not 0) */
	*days_left = left >= 0 ? left / 86400 : -((-left + 86399) / 86400);
	return left < (int64_t)CERTS_WARN_DAYS * 86400;
}

void
certs_update(struct sup *s, const char *why)
{
	for (size_t i = 0; i < s->n_clusters; i++) {
		const struct sup_cluster *c = s->clusters[i];
		const struct sup_ccfg *cc = c->ccfg;
		if (!cc || !cc->cl || !cc->cl->tls || cc->tls_not_after <= 0)
			continue;
		int64_t days;
		char when[64];
		clock_fmt_rfc3339((uint64_t)cc->tls_not_after * 1000u, when, sizeof when);
		if (certs_check(cc->tls_not_after, (int64_t)(s->now_wall_ms / 1000u), &days))
			log_warn(days < 0 ? "TLS certificate has expired" :
			    "TLS certificate expires soon", "cluster=%s not_after=%s days_left=%lld "
			    "subject=\"%s\" why=%s hint=\"renew it, then ferryctl reload\"", c->name,
			    when, (long long)days, cc->tls_subject, why);
		else
			log_debug("TLS certificate", "cluster=%s not_after=%s days_left=%lld why=%s",
			    c->name, when, (long long)days, why);
	}
}
