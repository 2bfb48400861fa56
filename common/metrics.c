/*
 * metrics — create and map the shared counter block of a worker process.
 *
 * The block is a memfd sealed against resizing (F_SEAL_SHRINK, F_SEAL_GROW)
 * and against further seal changes (F_SEAL_SEAL) before it leaves the
 * supervisor, and metrics_map refuses a block without those seals: a
 * mapping of a file that a peer could truncate would SIGBUS on access.
 */
#include "common/metrics.h"
#include "common/shmblock.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int
metrics_create(uint64_t generation, struct metrics **out)
{
	void *p;
	int fd = shmblock_create("ferry-metrics", sizeof(struct metrics), &p);
	if (fd == -1)
		return -1;
	struct metrics *m = p;
	m->magic = METRICS_MAGIC;
	m->generation = generation;
	*out = m;
	return fd;
}

int
metrics_map(int fd, struct metrics **out)
{
	void *p;
	if (shmblock_map(fd, sizeof(struct metrics), &p) == -1)
		return -1;
	struct metrics *m = p;
	if (m->magic != METRICS_MAGIC) {
		munmap(p, sizeof(struct metrics));
		errno = EINVAL;
		return -1;
	}
	*out = m;
	return 0;
}

void
metrics_unmap(struct metrics *m)
{
	if (m)
		munmap(m, sizeof(struct metrics));
}

void
metrics_retire(struct metrics *dst, const struct metrics *src)
{
	struct metrics *m = (struct metrics *)src;  /* read with atomic loads only */
#define METRICS_RETIRE(name, type, help) \
	if (strcmp(#type, "counter") == 0) \
		METRIC_ADD(dst, name, METRIC_GET(m, name));
	METRICS_FIELDS(METRICS_RETIRE)
#undef METRICS_RETIRE
	for (unsigned a = 0; a < METRICS_APIS; a++) {
		struct metrics_api *x = &m->api[a], *y = &dst->api[a];
		METRIC_ADD(y, requests, METRIC_GET(x, requests));
		METRIC_ADD(y, responses, METRIC_GET(x, responses));
		METRIC_ADD(y, latency_sum_us, METRIC_GET(x, latency_sum_us));
		for (unsigned b = 0; b < METRICS_BUCKETS; b++)
			atomic_fetch_add_explicit(&y->bucket[b], atomic_load_explicit(&x->bucket[b],
			    memory_order_relaxed), memory_order_relaxed);
	}
}

const uint32_t metrics_latency_bounds_us[METRICS_BUCKETS] = {
	250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
	1000000, 2500000, 10000000,
};

/* The block of a process has one writer, that process: a relaxed load and
 * store is enough (no locked read-modify-write per response); readers see
 * each counter move forward. */
static inline void
metrics_bump(_Atomic uint64_t *c, uint64_t v)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
	    memory_order_relaxed);
}

void
metrics_observe(struct metrics *m, int api_key, uint64_t latency_us)
{
	struct metrics_api *a = &m->api[metrics_api_slot(api_key)];
	unsigned b = 0;
	while (b < METRICS_BUCKETS && latency_us > metrics_latency_bounds_us[b])
		b++;
	if (b < METRICS_BUCKETS)
		metrics_bump(&a->bucket[b], 1);
	metrics_bump(&a->responses, 1);
	metrics_bump(&a->latency_sum_us, latency_us);
}
