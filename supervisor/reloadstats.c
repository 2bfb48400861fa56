/*
 * reloadstats — outcome counters and the duration histogram of reloads
 * (see reloadstats.h).
 */
#include "supervisor/reloadstats.h"

const uint64_t reload_stats_bounds_ms[RELOAD_STATS_BUCKETS] = {
	1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 20000, 30000, 60000,
};

void
reload_stats_observe(struct reload_stats *rs, unsigned result, uint64_t duration_ms)
{
	if (result < RELOAD_STATS_RESULTS)
		rs->result[result]++;
	for (size_t i = 0; i < RELOAD_STATS_BUCKETS; i++)
		if (duration_ms <= reload_stats_bounds_ms[i]) {
			rs->bucket[i]++;
			break;
		}
	rs->count++;
	rs->sum_ms += duration_ms;
}

uint64_t
reload_stats_cumulative(const struct reload_stats *rs, size_t i)
{
	uint64_t n = 0;

	for (size_t k = 0; k <= i && k < RELOAD_STATS_BUCKETS; k++)
		n += rs->bucket[k];
	return n;
}
