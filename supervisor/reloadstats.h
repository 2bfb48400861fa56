/*
 * reloadstats — what /metrics says about configuration reloads: a counter
 * per outcome and a histogram of their durations. The supervisor keeps one
 * struct in its model (struct sup) and reload_finish() observes every
 * finished reload; status.c renders it. Pure arithmetic, no I/O.
 */
#ifndef FERRY_SUPERVISOR_RELOADSTATS_H
#define FERRY_SUPERVISOR_RELOADSTATS_H

#include <stddef.h>
#include <stdint.h>

/* Upper bounds of the duration buckets in milliseconds, 1 ms .. 60 s
 * (reload_timeout is at most minutes; +Inf catches the rest). */
#define RELOAD_STATS_BUCKETS 15
extern const uint64_t reload_stats_bounds_ms[RELOAD_STATS_BUCKETS];

/* Outcome slots, indexed like enum sup_reload_status (1..4 used). */
#define RELOAD_STATS_RESULTS 5

struct reload_stats {
	uint64_t result[RELOAD_STATS_RESULTS];
	uint64_t bucket[RELOAD_STATS_BUCKETS]; /* non-cumulative: bounds[i-1] < d <= bounds[i] */
	uint64_t count;                        /* observations, also the +Inf bucket */
	uint64_t sum_ms;
};

/* Count one finished reload: result is an enum sup_reload_status value
 * (out-of-range values are only counted in the histogram). */
void reload_stats_observe(struct reload_stats *rs, unsigned result, uint64_t duration_ms);

/* Cumulative count of observations <= reload_stats_bounds_ms[i]. */
uint64_t reload_stats_cumulative(const struct reload_stats *rs, size_t i);

#endif
