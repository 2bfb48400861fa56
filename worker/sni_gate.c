/*
 * sni_gate — the servername callback of an SNI gateway; see sni_gate.h.
 */
#include "worker/sni_gate.h"

#include <string.h>

#include <openssl/ssl.h>
#include <openssl/tls1.h>

/* The ex_data slot of struct sni_pick on each SSL (one per process, set on
 * first use; the worker is single-threaded). */
static int sni_gate_idx = -1;

static int
sni_gate_cb(SSL *ssl, int *alert, void *arg)
{
	const struct sni_gate *g = arg;
	const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	size_t len = name ? strlen(name) : 0;
	int32_t id = -1;
	enum sni_match m = sni_classify(g->bootstrap_host, g->pattern, name, len, &id);

	struct sni_pick *p = sni_gate_idx >= 0 ? SSL_get_ex_data(ssl, sni_gate_idx) : NULL;
	if (m == SNI_UNKNOWN) {
		uint64_t sup = 0;
		if (p)
			p->refused = true;
		if (g->m)
			METRIC_ADD(g->m, sni_unknown, 1);
		if (g->rl == NULL || log_ratelimit_ok(g->rl, 10, 20, &sup))
			log_warn("TLS server name refused", "server_name=\"%.*s\" reason=\"%s\" "
			    "suppressed=%llu", (int)(len > 253 ? 253 : len), name ? name : "",
			    name ? "neither sni_bootstrap_host nor a broker name of "
			    "sni_broker_pattern" : "no server name (SNI) in the ClientHello",
			    (unsigned long long)sup);
		*alert = SSL_AD_UNRECOGNIZED_NAME;
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	}
	if (p) {
		p->decided = true;
		p->match = m;
		p->node_id = m == SNI_BROKER ? id : -1;
	}
	return SSL_TLSEXT_ERR_OK;
}

int
sni_gate_install(SSL_CTX *ctx, struct sni_gate *g)
{
	if (sni_gate_idx < 0 &&
	    (sni_gate_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL)) < 0)
		return -1;
	if (SSL_CTX_set_tlsext_servername_callback(ctx, sni_gate_cb) != 1 ||
	    SSL_CTX_set_tlsext_servername_arg(ctx, g) != 1)
		return -1;
	return 0;
}

int
sni_gate_attach(SSL *ssl, struct sni_pick *p)
{
	memset(p, 0, sizeof *p);
	p->node_id = -1;
	if (sni_gate_idx < 0 &&
	    (sni_gate_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL)) < 0)
		return -1;
	return SSL_set_ex_data(ssl, sni_gate_idx, p) == 1 ? 0 : -1;
}
