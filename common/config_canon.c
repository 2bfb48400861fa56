/*
 * config_canon — the canonical text of one cluster (cfg_cluster_canonical):
 * every key of its section in a fixed order, defaults written out, values
 * in one spelling. Its hash says whether a reload modifies the cluster, and
 * it is what the supervisor sends a worker, which parses it with the same
 * parser. See config.h.
 */
#include "common/config.h"
#include "common/config_priv.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/units.h"

/*
 * A growable string for the canonical text (malloc/realloc, so running out
 * of memory is seen here and not hidden inside stdio). After a failed
 * append the builder is marked failed and ignores further appends.
 */
struct cfgp_sb {
	char *s;
	size_t len, cap;
	bool failed;
};

static void cfgp_sb_printf(struct cfgp_sb *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void
cfgp_sb_printf(struct cfgp_sb *b, const char *fmt, ...)
{
	va_list ap;
	size_t need, ncap;
	char *ns;
	int n;

	if (b->failed)
		return;
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->failed = true;
		return;
	}
	need = b->len + (size_t)n + 1;
	if (need > b->cap) {
		for (ncap = b->cap ? b->cap : 512; ncap < need; ncap *= 2)
			;
		if ((ns = realloc(b->s, ncap)) == NULL) {
			b->failed = true;
			return;
		}
		b->s = ns;
		b->cap = ncap;
	}
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* Writes ids as a comma list, runs of three or more as "a-b". */
static void
cfgp_fmt_ids(struct cfgp_sb *b, const int32_t *ids, size_t n)
{
	size_t i = 0, j;

	while (i < n) {
		for (j = i; j + 1 < n && (int64_t)ids[j + 1] == (int64_t)ids[j] + 1; j++)
			;
		if (j - i >= 2) {
			cfgp_sb_printf(b, "%s%ld-%ld", i ? "," : "", (long)ids[i],
			    (long)ids[j]);
			i = j + 1;
		} else {
			cfgp_sb_printf(b, "%s%ld", i ? "," : "", (long)ids[i]);
			i++;
		}
	}
}

char *
cfg_cluster_canonical(const struct cfg_cluster *cl)
{
	char buf[CFG_HOST_MAX + 16];
	struct cfgp_sb b = { 0 };
	size_t i;

	cfgp_sb_printf(&b, "[cluster %s]\n", cl->name);
	cfgp_sb_printf(&b, "upstream = ");
	for (i = 0; i < cl->n_upstream; i++) {
		units_fmt_addr(&cl->upstream[i], buf, sizeof buf);
		cfgp_sb_printf(&b, "%s%s", i ? "," : "", buf);
	}
	units_fmt_addr(&cl->bootstrap, buf, sizeof buf);
	cfgp_sb_printf(&b, "\nbootstrap = %s\n", buf);
	if (cl->gateway == CFG_GATEWAY_PORTS) {
		cfgp_sb_printf(&b, "advertised_host = %s\n", cl->advertised_host);
		if (cl->broker_port_first == cl->broker_port_last)
			cfgp_sb_printf(&b, "broker_ports = %u\n",
			    (unsigned)cl->broker_port_first);
		else
			cfgp_sb_printf(&b, "broker_ports = %u-%u\n",
			    (unsigned)cl->broker_port_first,
			    (unsigned)cl->broker_port_last);
		cfgp_sb_printf(&b, "node_ids = ");
		cfgp_fmt_ids(&b, cl->node_ids, cl->n_brokers);
		cfgp_sb_printf(&b, "\n");
	}
	if (cl->max_connections == 0)
		cfgp_sb_printf(&b, "max_connections = auto\n");
	else
		cfgp_sb_printf(&b, "max_connections = %lu\n",
		    (unsigned long)cl->max_connections);
	units_fmt_size(cl->max_frame_bytes, buf, sizeof buf);
	cfgp_sb_printf(&b, "max_frame_bytes = %s\n", buf);
	units_fmt_duration(cl->idle_timeout_ms, buf, sizeof buf);
	cfgp_sb_printf(&b, "idle_timeout = %s\n", buf);
	units_fmt_duration(cl->request_timeout_ms, buf, sizeof buf);
	cfgp_sb_printf(&b, "request_timeout = %s\n", buf);
	cfgp_sb_printf(&b, "max_inflight_per_connection = %u\n", cl->max_inflight);
	cfgp_sb_printf(&b, "handover = %s\n", cl->handover ? "on" : "off");
	cfgp_sb_printf(&b, "splice = %s\n", cl->splice ? "on" : "off");
	if (cl->workers == 0)
		cfgp_sb_printf(&b, "workers = auto\n");
	else
		cfgp_sb_printf(&b, "workers = %u\n", cl->workers);
	units_fmt_size(cl->sasl_max_frame_bytes, buf, sizeof buf);
	cfgp_sb_printf(&b, "sasl_max_frame_bytes = %s\n", buf);
	/* TLS: client-facing keys only when TLS is on, upstream ones only
	 * with upstream_tls (each needs the other), paths as given. */
	if (cl->tls) {
		cfgp_sb_printf(&b, "tls_cert = %s\n", cl->tls_cert);
		cfgp_sb_printf(&b, "tls_key = %s\n", cl->tls_key);
		cfgp_sb_printf(&b, "tls_min_version = %s\n",
		    cfg_tls_version_str((enum cfg_tls_version)cl->tls_min_version));
		if (cl->tls_ciphers[0])
			cfgp_sb_printf(&b, "tls_ciphers = %s\n", cl->tls_ciphers);
		if (cl->tls_ciphersuites[0])
			cfgp_sb_printf(&b, "tls_ciphersuites = %s\n", cl->tls_ciphersuites);
		if (cl->tls_client_ca[0])
			cfgp_sb_printf(&b, "tls_client_ca = %s\n", cl->tls_client_ca);
		cfgp_sb_printf(&b, "tls_client_auth = %s\n",
		    cfg_tls_client_auth_str(cl->tls_client_auth));
	}
	cfgp_sb_printf(&b, "upstream_tls = %s\n", cl->upstream_tls ? "on" : "off");
	if (cl->upstream_tls) {
		if (cl->upstream_ca[0])
			cfgp_sb_printf(&b, "upstream_ca = %s\n", cl->upstream_ca);
		if (cl->upstream_cert[0]) {
			cfgp_sb_printf(&b, "upstream_cert = %s\n", cl->upstream_cert);
			cfgp_sb_printf(&b, "upstream_key = %s\n", cl->upstream_key);
		}
		cfgp_sb_printf(&b, "upstream_tls_verify = %s\n",
		    cl->upstream_tls_verify ? "on" : "off");
	}
	if (cl->upstream_sasl_mechanism != CFG_SASL_NONE)
		cfgp_sb_printf(&b, "upstream_sasl_mechanism = %s\nupstream_sasl_username = %s\n"
		    "upstream_sasl_password_file = %s\n",
		    cfg_sasl_mech_str(cl->upstream_sasl_mechanism), cl->upstream_sasl_username,
		    cl->upstream_sasl_password_file);
	if (cl->n_dial_map) {
		cfgp_sb_printf(&b, "upstream_dial_map = ");
		for (i = 0; i < cl->n_dial_map; i++) {
			char to[CFG_HOST_MAX + 16];
			units_fmt_addr(&cl->dial_map[i].from, buf, sizeof buf);
			units_fmt_addr(&cl->dial_map[i].to, to, sizeof to);
			cfgp_sb_printf(&b, "%s%s=%s", i ? "," : "", buf, to);
		}
		cfgp_sb_printf(&b, "\n");
	}
	/* behind a load balancer */
	cfgp_sb_printf(&b, "proxy_protocol = %s\n", cfg_proxy_protocol_str(cl->proxy_protocol));
	if (cl->proxy_protocol != CFG_PROXY_OFF) {
		char from[CIDR_LIST_MAX * (CIDR_TEXT_MAX + 2)];

		if (cidr_list_format(&cl->proxy_from, from, sizeof from) < 0)
			b.failed = true;
		else
			cfgp_sb_printf(&b, "proxy_protocol_from = %s\n", from);
	}
	units_fmt_duration(cl->max_age_ms, buf, sizeof buf);
	cfgp_sb_printf(&b, "connection_max_age = %s\n", buf);
	if (cl->max_age_ms) {
		units_fmt_duration(cl->max_age_jitter_ms, buf, sizeof buf);
		cfgp_sb_printf(&b, "connection_max_age_jitter = %s\n", buf);
	}
	/* the gateway, and its names for gateway = sni */
	cfgp_sb_printf(&b, "gateway = %s\n", cfg_gateway_str(cl->gateway));
	if (cl->gateway == CFG_GATEWAY_SNI)
		cfgp_sb_printf(&b, "sni_bootstrap_host = %s\nsni_broker_pattern = %s\n",
		    cl->sni_bootstrap_host, cl->sni_broker_pattern);
	if (b.failed) {
		free(b.s);
		return NULL;
	}
	return b.s;
}
