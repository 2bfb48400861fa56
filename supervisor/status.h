/*
 * status — read-only views of the supervisor's process table for the admin
 * API: JSON documents (docs/design.md §7) built with jansson and the
 * Prometheus text exposition of the shared-memory counters. Pure functions
 * over the model in supervisor.h: no I/O, no clock reads (callers pass
 * `now`), so the unit tests can build a fake table in memory.
 *
 * Each builder returns a new reference (json_decref it) or a malloc'd string,
 * NULL only when out of memory.
 */
#ifndef FERRY_SUPERVISOR_STATUS_H
#define FERRY_SUPERVISOR_STATUS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "supervisor/supervisor.h"

/* CLUSTER: {"name","state","since","reason","generation","configVersion",
 * "upstream":{"state","since","lastError"},"listeners":[...],"workers":[...]}.
 * state/since/reason/generation are those of the serving generation; an
 * empty reason, an unset time or an absent generation is null. */
json_t *status_cluster_json(struct sup_cluster *c);

/* {"clusters":[CLUSTER,...]} in configuration order. */
json_t *status_clusters_json(struct sup *s);

/* {"status":"UP","version","buildId","pid","execPath","uptimeSeconds",
 * "startedAt","processStartedAt","clusters":N}; now_ms and the start times
 * are wall-clock milliseconds (startedAt and uptime: the service's, which an
 * upgrade carries; processStartedAt: this process's). */
json_t *status_health_json(const struct sup *s, uint64_t now_ms);

/* {"ready":bool,"startupPolicy","clusters":{"NAME":"state",...}}. */
json_t *status_ready_json(struct sup *s);

/* Prometheus text format 0.0.4: every METRICS_FIELDS entry per cluster
 * (ferry_<name>_total for counters, ferry_<name> for gauges), then
 * ferry_cluster_state, ferry_worker_restarts_total, ferry_crash_loops_total,
 * ferry_worker_connections, ferry_worker_unresponsive_total,
 * ferry_cluster_generation, ferry_config_reload_total{result},
 * the ferry_config_reload_duration_seconds histogram (s->reload_stats),
 * ferry_config_version_info{version} and ferry_up. Counters
 * sum c->retired and every still-mapped worker block; gauges sum the live
 * workers only. Returns a malloc'd NUL-terminated text, its length in *len. */
char *status_metrics_text(struct sup *s, size_t *len);

/* The answer to POST /admin/upgrade for an upgrade that committed or rolled
 * back: {"success","status","phase","fromVersion","toVersion","fromBuildId",
 * "toBuildId","previousPid","pid","durationMs","errors","clusters"}; at the
 * commit, clusters names each served cluster's generation and the one the
 * successor starts (docs/design.md §11). */
json_t *status_upgrade_reply_json(const struct sup *s, const struct sup_upgrade_record *rec);

/* The answer to POST /admin/config/reload for a finished reload. */
json_t *status_reload_reply_json(const struct sup *s, const struct sup_reload_record *rec);

/* GET /admin/config/status: {"currentConfigVersion","appliedAt",
 * "reloadInProgress","inProgressSince"?,"reloadTimeoutMs",
 * "lastReloadAttempt":{...}|null,"lastValidationAttempt":{...}|null}. */
json_t *status_config_json(const struct sup *s);

/* One-line summaries for systemd's STATUS= (supervisor/notify.h), written
 * into buf (truncated to len, always terminated):
 *   status_summary_text: "2 clusters: 1 accepting, 1 failed" -- the state
 *     of each cluster's serving generation (clusters being removed left
 *     out), states in lifecycle order, zero counts omitted; "no clusters".
 *   status_reload_text: the last reload's outcome, then the summary:
 *     "reload SUCCESS sha256:0123456789ab (0 added, 1 modified, 0 removed);
 *      2 clusters: 2 accepting", "reload FAILED: <first error>; ...",
 *     "reload REJECTED: <first error>; ...", "reload UNCHANGED; ...". */
void status_summary_text(struct sup *s, char *buf, size_t len);
void status_reload_text(struct sup *s, char *buf, size_t len);

/* Compact JSON dump followed by "\n" (what every admin response carries).
 * malloc'd; NULL when out of memory. */
char *status_dump(const json_t *j, size_t *len);

#endif
