/*
 * promfam — the labelled Prometheus families of /metrics that split a
 * cluster's counters by API, direction, reason or outcome, and the
 * upstream latency histogram; rendered from the per-process shared blocks
 * (live ones, plus the cluster's retired totals for counters). Pure over
 * the model: no I/O. Called by status_metrics_text().
 */
#ifndef FERRY_SUPERVISOR_PROMFAM_H
#define FERRY_SUPERVISOR_PROMFAM_H

#include <stdio.h>

#include "supervisor/supervisor.h"

/* ferry_requests_total{cluster,api}, ferry_request_duration_seconds{cluster,api}
 * (histogram), ferry_bytes_total{cluster,direction},
 * ferry_connections_rejected_total{cluster,reason},
 * ferry_frames_rejected_total{cluster,reason},
 * ferry_drain_closes_total{cluster,outcome}. */
void promfam_write(FILE *f, struct sup *s);

/* The cluster-wide value of the shared-block field at offset off: for a
 * counter the retired totals plus every mapped block (a dead process's
 * block too, until it is folded), for a gauge the live processes only;
 * plus, after an upgrade, the predecessor's (c->carried; its gauges while
 * it hands over). */
uint64_t promfam_field_sum(const struct sup_cluster *c, size_t off, bool counter);

/* The API slots anything of c counted (bit s of seen[METRICS_API_WORDS]:
 * slot s): only those are read (a read of a slot never written would
 * allocate its page) and rendered. */
void promfam_api_seen(const struct sup_cluster *c, uint64_t *seen);

/* One API slot's counters, cluster-wide (the blocks promfam_field_sum
 * reads for a counter). */
struct promfam_api {
	uint64_t requests, responses, latency_sum_us;
	uint64_t bucket[METRICS_BUCKETS];
};
/* Add slot's counters of c into *t. */
void promfam_api_add(const struct sup_cluster *c, unsigned slot, struct promfam_api *t);

/* Write v as a Prometheus label value (backslash, quote, newline escaped). */
void promfam_label(FILE *f, const char *v);

#endif
