/*
 * promfam — labelled metric families; see promfam.h.
 */
#include "supervisor/promfam.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/kafka_api.h"
#include "supervisor/connlist.h"

void
promfam_label(FILE *f, const char *v)
{
	for (; *v != '\0'; v++) {
		if (*v == '\\')
			fputs("\\\\", f);
		else if (*v == '"')
			fputs("\\\"", f);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

uint64_t
promfam_field_sum(const struct sup_cluster *c, size_t off, bool counter)
{
	uint64_t v = counter && c->retired ? atomic_load_explicit(
	    (_Atomic uint64_t *)((char *)c->retired + off), memory_order_relaxed) : 0;
	/* an upgrade's predecessor: its counters, its gauges while it lives */
	if (c->carried && (counter || c->carried_gauges))
		v += atomic_load_explicit((_Atomic uint64_t *)((char *)c->carried + off),
		    memory_order_relaxed);
	for (const struct sup_gen *g = c->gens; g != NULL; g = g->next)
		for (size_t k = 0; k < g->n_procs; k++) {
			const struct sup_proc *p = &g->procs[k];
			if (p->metrics != NULL && (counter || p->alive))
				v += atomic_load_explicit((_Atomic uint64_t *)((char *)p->metrics + off),
				    memory_order_relaxed);
		}
	return v;
}

/* Every block that holds a cluster's counters: its retired totals, an
 * upgrade's predecessor's, and the block of every process still mapped (a
 * dead process's too, until it is folded). */
#define PROMFAM_FOREACH_BLOCK(c, m, body) do { \
	if ((c)->retired != NULL) { \
		const struct metrics *m = (c)->retired; \
		body; \
	} \
	if ((c)->carried != NULL) { \
		const struct metrics *m = (c)->carried; \
		body; \
	} \
	for (const struct sup_gen *g_ = (c)->gens; g_ != NULL; g_ = g_->next) \
		for (size_t k_ = 0; k_ < g_->n_procs; k_++) \
			if (g_->procs[k_].metrics != NULL) { \
				const struct metrics *m = g_->procs[k_].metrics; \
				body; \
			} \
} while (0)

void
promfam_api_seen(const struct sup_cluster *c, uint64_t *seen)
{
	memset(seen, 0, METRICS_API_WORDS * sizeof *seen);
	PROMFAM_FOREACH_BLOCK(c, m, metrics_api_seen_or(m, seen));
}

static uint64_t
promfam_get(const _Atomic uint64_t *v)
{
	return atomic_load_explicit((_Atomic uint64_t *)v, memory_order_relaxed);
}

void
promfam_api_add(const struct sup_cluster *c, unsigned slot, struct promfam_api *t)
{
	PROMFAM_FOREACH_BLOCK(c, m, {
		const struct metrics_api *a = &m->api[slot];
		t->requests += promfam_get(&a->requests);
		t->responses += promfam_get(&a->responses);
		t->latency_sum_us += promfam_get(&a->latency_sum_us);
		for (unsigned b = 0; b < METRICS_BUCKETS; b++)
			t->bucket[b] += promfam_get(&a->bucket[b]);
	});
}

static void
promfam_api_name(unsigned slot, char *buf, size_t len)
{
	if (slot == METRICS_APIS - 1)
		snprintf(buf, len, "other");
	else
		snprintf(buf, len, "%s", kafka_api_name((int16_t)slot));
}

static bool
promfam_bit(const uint64_t *seen, unsigned slot)
{
	return (seen[slot / 64] >> (slot % 64)) & 1;
}

static void
promfam_head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
promfam_cluster_label(FILE *f, const char *name, const struct sup_cluster *c)
{
	fprintf(f, "%s{cluster=\"", name);
	promfam_label(f, c->name);
	fputc('"', f);
}

/* notAfter (unix s) of the certificate a TLS cluster's serving
 * configuration serves; 0 for plaintext clusters. */
static int64_t
promfam_not_after(const struct sup_cluster *c)
{
	return c->ccfg && c->ccfg->cl && c->ccfg->cl->tls ? c->ccfg->tls_not_after : 0;
}

void
promfam_write(FILE *f, struct sup *s)
{
	char api[64];

	/* Per API: only the APIs a cluster has seen. The latency histogram
	 * per cluster and API, per cluster, or not at all (metrics_latency). */
	enum cfg_metrics_latency lat = s->cfg.metrics_latency;
	uint64_t (*seen)[METRICS_API_WORDS] = calloc(s->n_clusters + 1, sizeof *seen);
	if (seen == NULL) {
		fputs("# out of memory\n", f);
		return;
	}
	for (size_t i = 0; i < s->n_clusters; i++)
		promfam_api_seen(s->clusters[i], seen[i]);
	promfam_head(f, "ferry_requests_total", "counter", "Requests forwarded upstream, by API");
	for (size_t i = 0; i < s->n_clusters; i++) {
		const struct sup_cluster *c = s->clusters[i];
		for (unsigned a = 0; a < METRICS_APIS; a++) {
			if (!promfam_bit(seen[i], a))
				continue;
			struct promfam_api t = { 0 };
			promfam_api_add(c, a, &t);
			if (t.requests == 0)
				continue;
			promfam_api_name(a, api, sizeof api);
			promfam_cluster_label(f, "ferry_requests_total", c);
			fprintf(f, ",api=\"%s\"} %llu\n", api, (unsigned long long)t.requests);
		}
	}

	if (lat != CFG_LATENCY_OFF)
		promfam_head(f, "ferry_request_duration_seconds", "histogram",
		    lat == CFG_LATENCY_API ? "Upstream latency seen by the proxy: from forwarding a "
		    "request to its response" : "Upstream latency seen by the proxy: from "
		    "forwarding a request to its response (every API together)");
	for (size_t i = 0; i < s->n_clusters && lat != CFG_LATENCY_OFF; i++) {
		const struct sup_cluster *c = s->clusters[i];
		struct promfam_api all = { 0 };
		for (unsigned a = 0; a <= METRICS_APIS; a++) {
			struct promfam_api one = { 0 }, *t = &one;
			if (a == METRICS_APIS) {
				if (lat != CFG_LATENCY_CLUSTER)
					break;
				t = &all;        /* the cluster's line: every API summed */
				api[0] = '\0';
			} else {
				if (!promfam_bit(seen[i], a))
					continue;
				promfam_api_add(c, a, lat == CFG_LATENCY_API ? &one : &all);
				if (lat != CFG_LATENCY_API)
					continue;
				snprintf(api, sizeof api, ",api=\"");
				promfam_api_name(a, api + 6, sizeof api - 7);
				strcat(api, "\"");
			}
			if (t->responses == 0)
				continue;
			uint64_t cum = 0;
			for (unsigned b = 0; b < METRICS_BUCKETS; b++) {
				cum += t->bucket[b];
				promfam_cluster_label(f, "ferry_request_duration_seconds_bucket", c);
				fprintf(f, "%s,le=\"%g\"} %llu\n", api,
				    metrics_latency_bounds_us[b] / 1e6, (unsigned long long)cum);
			}
			promfam_cluster_label(f, "ferry_request_duration_seconds_bucket", c);
			fprintf(f, "%s,le=\"+Inf\"} %llu\n", api, (unsigned long long)t->responses);
			promfam_cluster_label(f, "ferry_request_duration_seconds_sum", c);
			fprintf(f, "%s} %.6f\n", api, t->latency_sum_us / 1e6);
			promfam_cluster_label(f, "ferry_request_duration_seconds_count", c);
			fprintf(f, "%s} %llu\n", api, (unsigned long long)t->responses);
		}
	}
	free(seen);

	/* Families that split a cluster's counters by one label: one line per
	 * (cluster, label value), each summed from one shared-block field. */
	static const struct promfam_split {
		const char *name, *help, *label;
		struct { const char *value; size_t off; } v[12];
		size_t n;
	} splits[] = {
		{ "ferry_bytes_total", "Bytes forwarded, by direction", "direction", {
			{ "client_to_upstream", offsetof(struct metrics, bytes_client_to_upstream) },
			{ "upstream_to_client", offsetof(struct metrics, bytes_upstream_to_client) },
		}, 2 },
		{ "ferry_connections_rejected_total", "Client connections closed at once, by reason",
		  "reason", {
			{ "max_connections", offsetof(struct metrics, connections_rejected) },
			{ "tls_on_plaintext", offsetof(struct metrics, tls_on_plaintext) },
			{ "plaintext_on_tls", offsetof(struct metrics, plaintext_on_tls) },
			{ "tls_handshake", offsetof(struct metrics, tls_handshake_failures) },
			/* SNI gateway: a name that matches no broker */
			{ "sni_unknown", offsetof(struct metrics, sni_unknown) },
			/* PROXY protocol (proxy_protocol, proxy_protocol_from) */
			{ "proxy_untrusted_source", offsetof(struct metrics, proxy_untrusted_source) },
			{ "proxy_header_missing", offsetof(struct metrics, proxy_header_missing) },
			{ "proxy_header_malformed", offsetof(struct metrics, proxy_header_malformed) },
			{ "proxy_header_truncated", offsetof(struct metrics, proxy_header_truncated) },
			{ "proxy_header_timeout", offsetof(struct metrics, proxy_header_timeout) },
		}, 10 },
		{ "ferry_frames_rejected_total",
		  "Connections closed for a frame ferry refused, by reason", "reason", {
			{ "malformed_request", offsetof(struct metrics, malformed_requests) },
			{ "malformed_response", offsetof(struct metrics, malformed_responses) },
			{ "too_large", offsetof(struct metrics, frame_too_large) },
			{ "correlation_mismatch", offsetof(struct metrics, correlation_mismatch) },
			{ "request_timeout", offsetof(struct metrics, request_timeouts) },
			/* SASL frames before authentication */
			{ "sasl_frame_too_large", offsetof(struct metrics, sasl_frame_too_large) },
			{ "sasl_mechanism_refused", offsetof(struct metrics, sasl_refused) },
		}, 7 },
		{ "ferry_proxy_headers_total", "PROXY protocol headers read, by version",
		  "version", {
			{ "1", offsetof(struct metrics, proxy_headers_v1) },
			{ "2", offsetof(struct metrics, proxy_headers_v2) },
		}, 2 },
		{ "ferry_drain_closes_total",
		  "Client connections closed while a generation drained, by outcome", "outcome", {
			{ "drained", offsetof(struct metrics, connections_drained) },
			{ "forced", offsetof(struct metrics, connections_forced) },
		}, 2 },
	};
	/* certificate expiry: TLS clusters whose certificate's notAfter is known
	 * (certs.h) */
	promfam_head(f, "ferry_tls_cert_not_after_seconds", "gauge",
	    "notAfter of the certificate a TLS cluster serves, unix seconds");
	for (size_t i = 0; i < s->n_clusters; i++)
		if (promfam_not_after(s->clusters[i]) > 0) {
			promfam_cluster_label(f, "ferry_tls_cert_not_after_seconds", s->clusters[i]);
			fprintf(f, "} %lld\n", (long long)promfam_not_after(s->clusters[i]));
		}
	for (size_t k = 0; k < sizeof splits / sizeof splits[0]; k++) {
		const struct promfam_split *sp = &splits[k];
		promfam_head(f, sp->name, "counter", sp->help);
		for (size_t i = 0; i < s->n_clusters; i++)
			for (size_t j = 0; j < sp->n; j++) {
				promfam_cluster_label(f, sp->name, s->clusters[i]);
				fprintf(f, ",%s=\"%s\"} %llu\n", sp->label, sp->v[j].value,
				    (unsigned long long)promfam_field_sum(s->clusters[i], sp->v[j].off, true));
			}
	}
	/* who is connected: open connections by client software (connlist.h) */
	connlist_metrics(f, s);
}
