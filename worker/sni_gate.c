/*
 * sni_gate — the ClientHello callback of an SNI gateway; see sni_gate.h.
 */
#include "worker/sni_gate.h"

#include <string.h>

#include <openssl/ssl.h>
#include <openssl/tls1.h>

/* The ex_data slot of struct sni_pick on each SSL (one per process, set on
 * first use; the worker is single-threaded). */
static int sni_gate_idx = -1;

/*
 * Runs when the ClientHello has been read, before OpenSSL acts on it (and
 * again for the second ClientHello after a HelloRetryRequest). The name is
 * taken from this ClientHello's server_name extension itself: not from a
 * session being resumed (SSL_get_servername gives a TLS 1.2 session's
 * original name), so the name the client asks for now is the one routed.
 */
static int
sni_gate_cb(SSL *ssl, int *alert, void *arg)
{
	const struct sni_gate *g = arg;
	const unsigned char *ext = NULL;
	size_t ext_len = 0;
	const char *name = NULL;
	size_t len = 0;
	int32_t id = -1;
	enum sni_match m = SNI_UNKNOWN;
	bool sent = SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &ext, &ext_len) == 1;

	if (sent && sni_ext_host_name(ext, ext_len, &name, &len) == 0)
		m = sni_classify(g->bootstrap_host, g->pattern, name, len, &id);
	struct sni_pick *p = sni_gate_idx >= 0 ? SSL_get_ex_data(ssl, sni_gate_idx) : NULL;
	if (m == SNI_UNKNOWN) {
		uint64_t sup = 0;
		if (p) {
			p->refused = true;
			p->decided = false;
		}
		if (g->m)
			METRIC_ADD(g->m, sni_unknown, 1);
		if (g->rl == NULL || log_ratelimit_ok(g->rl, 10, 20, &sup)) {
			/* a name is at most 253 printable characters; anything else
			 * is cut and shown as sent (logfmt escapes it) */
			char shown[256];
			size_t k = 0;
			for (; name && k < len && k < sizeof shown - 1; k++)
				shown[k] = name[k] >= 0x20 && name[k] < 0x7f && name[k] != '"' &&
				    name[k] != '\\' ? name[k] : '?';
			shown[k] = '\0';
			log_warn("TLS server name refused", "server_name=\"%s\" reason=\"%s\" "
			    "suppressed=%llu", shown, !sent ? "no server name (SNI) in the "
			    "ClientHello" : name == NULL ? "malformed server_name extension" :
			    "neither sni_bootstrap_host nor a broker name of sni_broker_pattern",
			    (unsigned long long)sup);
		}
		*alert = SSL_AD_UNRECOGNIZED_NAME;
		return SSL_CLIENT_HELLO_ERROR;
	}
	if (p) {
		p->decided = true;
		p->refused = false;
		p->match = m;
		p->node_id = m == SNI_BROKER ? id : -1;
	}
	return SSL_CLIENT_HELLO_SUCCESS;
}

int
sni_gate_install(SSL_CTX *ctx, struct sni_gate *g)
{
	if (sni_gate_idx < 0 &&
	    (sni_gate_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL)) < 0)
		return -1;
	SSL_CTX_set_client_hello_cb(ctx, sni_gate_cb, g);
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
