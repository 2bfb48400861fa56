/*
 * promfam — labelled metric families; see promfam.h.
 */
#include "supervisor/promfam.h"

#include <stddef.h>
#include <string.h>

#include "worker/kafka/codec.h"

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

/* The sources of one cluster's sums: retired totals (counters only) and
 * every mapped block (live ones only for gauges). */
#define PROMFAM_EACH_BLOCK(c, m, body) \
	do { \
		for (const struct sup_gen *g_ = (c)->gens; g_ != NULL; g_ = g_->next) \
			for (size_t k_ = 0; k_ < g_->n_procs; k_++) { \
				const struct metrics *m = g_->procs[k_].metrics; \
				if (m == NULL) \
					continue; \
				body; \
			} \
	} while (0)

static uint64_t
promfam_api_sum(const struct sup_cluster *c, unsigned slot, size_t off)
{
	uint64_t v = *(const uint64_t *)((const char *)&c->retired.api[slot] + off);
	PROMFAM_EACH_BLOCK(c, m, v += atomic_load_explicit(
	    (_Atomic uint64_t *)((char *)&((struct metrics *)m)->api[slot] + off),
	    memory_order_relaxed));
	return v;
}

static uint64_t
promfam_field_sum(const struct sup_cluster *c, size_t off)
{
	uint64_t v = atomic_load_explicit((_Atomic uint64_t *)((char *)&c->retired + off),
	    memory_order_relaxed);
	PROMFAM_EACH_BLOCK(c, m, v += atomic_load_explicit(
	    (_Atomic uint64_t *)((char *)m + off), memory_order_relaxed));
	return v;
}

#define PROMFAM_FIELD_SUM(c, field) promfam_field_sum((c), offsetof(struct metrics, field))

static void
promfam_api_name(unsigned slot, char *buf, size_t len)
{
	if (slot == METRICS_APIS - 1)
		snprintf(buf, len, "other");
	else
		snprintf(buf, len, "%s", kc_api_name((int16_t)slot));
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

void
promfam_write(FILE *f, struct sup *s)
{
	char api[64];

	promfam_head(f, "ferry_requests_total", "counter", "Requests forwarded upstream, by API");
	for (size_t i = 0; i < s->n_clusters; i++) {
		const struct sup_cluster *c = s->clusters[i];
		for (unsigned a = 0; a < METRICS_APIS; a++) {
			uint64_t n = promfam_api_sum(c, a, offsetof(struct metrics_api, requests));
			if (n == 0)
				continue;
			promfam_api_name(a, api, sizeof api);
			promfam_cluster_label(f, "ferry_requests_total", c);
			fprintf(f, ",api=\"%s\"} %llu\n", api, (unsigned long long)n);
		}
	}

	promfam_head(f, "ferry_request_duration_seconds", "histogram",
	    "Upstream latency seen by the proxy: from forwarding a request to its response");
	for (size_t i = 0; i < s->n_clusters; i++) {
		const struct sup_cluster *c = s->clusters[i];
		for (unsigned a = 0; a < METRICS_APIS; a++) {
			uint64_t count = promfam_api_sum(c, a, offsetof(struct metrics_api, responses));
			if (count == 0)
				continue;
			promfam_api_name(a, api, sizeof api);
			uint64_t cum = 0;
			for (unsigned b = 0; b < METRICS_BUCKETS; b++) {
				cum += promfam_api_sum(c, a, offsetof(struct metrics_api, bucket) +
				    b * sizeof(uint64_t));
				promfam_cluster_label(f, "ferry_request_duration_seconds_bucket", c);
				fprintf(f, ",api=\"%s\",le=\"%g\"} %llu\n", api,
				    metrics_latency_bounds_us[b] / 1e6, (unsigned long long)cum);
			}
			promfam_cluster_label(f, "ferry_request_duration_seconds_bucket", c);
			fprintf(f, ",api=\"%s\",le=\"+Inf\"} %llu\n", api, (unsigned long long)count);
			uint64_t sum = promfam_api_sum(c, a, offsetof(struct metrics_api, latency_sum_us));
			promfam_cluster_label(f, "ferry_request_duration_seconds_sum", c);
			fprintf(f, ",api=\"%s\"} %.6f\n", api, sum / 1e6);
			promfam_cluster_label(f, "ferry_request_duration_seconds_count", c);
			fprintf(f, ",api=\"%s\"} %llu\n", api, (unsigned long long)count);
		}
	}

	promfam_head(f, "ferry_bytes_total", "counter", "Bytes forwarded, by direction");
	for (size_t i = 0; i < s->n_clusters; i++) {
		const struct sup_cluster *c = s->clusters[i];
		promfam_cluster_label(f, "ferry_bytes_total", c);
		fprintf(f, ",direction=\"client_to_upstream\"} %llu\n",
		    (unsigned long long)PROMFAM_FIELD_SUM(c, bytes_client_to_upstream));
		promfam_cluster_label(f, "ferry_bytes_total", c);
		fprintf(f, ",direction=\"upstream_to_client\"} %llu\n",
		    (unsigned long long)PROMFAM_FIELD_SUM(c, bytes_upstream_to_client));
	}

	promfam_head(f, "ferry_connections_rejected_total", "counter",
	    "Client connections closed at once, by reason");
	for (size_t i = 0; i < s->n_clusters; i++) {
		const struct sup_cluster *c = s->clusters[i];
		promfam_cluster_label(f, "ferry_connections_rejected_total", c);
		fprintf(f, ",reason=\"max_connections\"} %llu\n",
		    (unsigned long long)PROMFAM_FIELD_SUM(c, connections_rejected));
		promfam_cluster_label(f, "ferry_connections_rejected_total", c);
		fprintf(f, ",reason=\"tls_on_plaintext\"} %llu\n",
		    (unsigned long long)PROMFAM_FIELD_SUM(c, tls_on_plaintext));
	}

	promfam_head(f, "ferry_frames_rejected_total", "counter",
	    "Connections closed for a frame ferry refused, by reason");
	static const char *const reasons[] = { "malformed_request", "malformed_response",
		"too_large", "correlation_mismatch", "request_timeout" };
	for (size_t i = 0; i < s->n_clusters; i++) {
		const struct sup_cluster *c = s->clusters[i];
		uint64_t v[5] = {
			PROMFAM_FIELD_SUM(c, malformed_requests), PROMFAM_FIELD_SUM(c, malformed_responses),
			PROMFAM_FIELD_SUM(c, frame_too_large), PROMFAM_FIELD_SUM(c, correlation_mismatch),
			PROMFAM_FIELD_SUM(c, request_timeouts),
		};
		for (size_t r = 0; r < 5; r++) {
			promfam_cluster_label(f, "ferry_frames_rejected_total", c);
			fprintf(f, ",reason=\"%s\"} %llu\n", reasons[r], (unsigned long long)v[r]);
		}
	}

	promfam_head(f, "ferry_drain_closes_total", "counter",
	    "Client connections closed while a generation drained, by outcome");
	for (size_t i = 0; i < s->n_clusters; i++) {
		const struct sup_cluster *c = s->clusters[i];
		promfam_cluster_label(f, "ferry_drain_closes_total", c);
		fprintf(f, ",outcome=\"drained\"} %llu\n",
		    (unsigned long long)PROMFAM_FIELD_SUM(c, connections_drained));
		promfam_cluster_label(f, "ferry_drain_closes_total", c);
		fprintf(f, ",outcome=\"forced\"} %llu\n",
		    (unsigned long long)PROMFAM_FIELD_SUM(c, connections_forced));
	}
}

void
promfam_retire(struct metrics *dst, const struct metrics *src)
{
	for (unsigned a = 0; a < METRICS_APIS; a++) {
		const struct metrics_api *x = &src->api[a];
		struct metrics_api *y = &dst->api[a];
		atomic_fetch_add_explicit(&y->requests, atomic_load(&((struct metrics_api *)x)->requests),
		    memory_order_relaxed);
		atomic_fetch_add_explicit(&y->responses,
		    atomic_load(&((struct metrics_api *)x)->responses), memory_order_relaxed);
		atomic_fetch_add_explicit(&y->latency_sum_us,
		    atomic_load(&((struct metrics_api *)x)->latency_sum_us), memory_order_relaxed);
		for (unsigned b = 0; b < METRICS_BUCKETS; b++)
			atomic_fetch_add_explicit(&y->bucket[b],
			    atomic_load(&((struct metrics_api *)x)->bucket[b]), memory_order_relaxed);
	}
}
