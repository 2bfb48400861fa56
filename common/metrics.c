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

struct metrics *
metrics_totals_new(void)
{
	void *p = mmap(NULL, sizeof(struct metrics), PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	struct metrics *m = p;
	m->magic = METRICS_MAGIC;
	return m;
}

/* The block's first page: what every process that maps it holds anyway. */
_Static_assert(offsetof(struct metrics, api) <= 4096, "metrics header beyond its first page");

void
metrics_mark_seen(struct metrics *m, unsigned slot)
{
	_Atomic uint64_t *w = &m->api_seen[slot / 64];
	uint64_t bit = 1ULL << (slot % 64);
	if (!(atomic_load_explicit(w, memory_order_relaxed) & bit))
		atomic_fetch_or_explicit(w, bit, memory_order_relaxed);
}

bool
metrics_api_seen(const struct metrics *m, unsigned slot)
{
	if (slot >= METRICS_APIS)
		return false;
	struct metrics *mm = (struct metrics *)m;  /* read with an atomic load only */
	return (atomic_load_explicit(&mm->api_seen[slot / 64], memory_order_relaxed) >>
	    (slot % 64)) & 1;
}

void
metrics_api_seen_or(const struct metrics *m, uint64_t *seen)
{
	struct metrics *mm = (struct metrics *)m;  /* read with atomic loads only */
	for (unsigned w = 0; w < METRICS_API_WORDS; w++)
		seen[w] |= atomic_load_explicit(&mm->api_seen[w], memory_order_relaxed);
}

/* dst += v when v is not zero: an add of zero would still write (and
 * allocate) dst's page. */
static bool
metrics_fold(_Atomic uint64_t *dst, _Atomic uint64_t *src)
{
	uint64_t v = atomic_load_explicit(src, memory_order_relaxed);
	if (v)
		atomic_fetch_add_explicit(dst, v, memory_order_relaxed);
	return v != 0;
}

void
metrics_retire(struct metrics *dst, const struct metrics *src)
{
	struct metrics *m = (struct metrics *)src;  /* read with atomic loads only */
#define METRICS_RETIRE(name, type, help) \
	if (strcmp(#type, "counter") == 0) \
		metrics_fold(&dst->name, &m->name);
	METRICS_FIELDS(METRICS_RETIRE)
#undef METRICS_RETIRE
	/* Every slot of src, not only those marked seen: a writer that
	 * counted without marking loses nothing here. */
	for (unsigned a = 0; a < METRICS_APIS; a++) {
		struct metrics_api *x = &m->api[a], *y = &dst->api[a];
		bool any = metrics_fold(&y->requests, &x->requests);
		any |= metrics_fold(&y->responses, &x->responses);
		any |= metrics_fold(&y->latency_sum_us, &x->latency_sum_us);
		for (unsigned b = 0; b < METRICS_BUCKETS; b++)
			any |= metrics_fold(&y->bucket[b], &x->bucket[b]);
		if (any || metrics_api_seen(m, a))
			metrics_mark_seen(dst, a);
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
metrics_request(struct metrics *m, int api_key)
{
	unsigned slot = metrics_api_slot(api_key);
	metrics_mark_seen(m, slot);
	metrics_bump(&m->api[slot].requests, 1);
}

void
metrics_observe(struct metrics *m, int api_key, uint64_t latency_us)
{
	unsigned slot = metrics_api_slot(api_key);
	metrics_mark_seen(m, slot);
	struct metrics_api *a = &m->api[slot];
	unsigned b = 0;
	while (b < METRICS_BUCKETS && latency_us > metrics_latency_bounds_us[b])
		b++;
	if (b < METRICS_BUCKETS)
		metrics_bump(&a->bucket[b], 1);
	metrics_bump(&a->responses, 1);
	metrics_bump(&a->latency_sum_us, latency_us);
}
