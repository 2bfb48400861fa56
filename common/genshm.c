/*
 * genshm — the per-generation shared block; see genshm.h.
 */
#include "common/genshm.h"
#include "common/shmblock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The header (workers' entries and the written-map) is the first page: a
 * generation whose workers publish nothing costs that page alone. */
_Static_assert(offsetof(struct genshm, nodes) <= 4096, "genshm header beyond its first page");

int
genshm_create(uint32_t n_workers, struct genshm **out)
{
	void *p;
	int fd = shmblock_create("ferry-generation", sizeof(struct genshm), &p);
	if (fd == -1)
		return -1;
	struct genshm *g = p;
	g->magic = GENSHM_MAGIC;
	g->n_workers = n_workers;
	*out = g;
	return fd;
}

int
genshm_map(int fd, struct genshm **out)
{
	void *p;
	if (shmblock_map(fd, sizeof(struct genshm), &p) == -1) {
		errno = EINVAL;
		return -1;
	}
	struct genshm *g = p;
	if (g->magic != GENSHM_MAGIC || g->n_workers == 0 || g->n_workers > CFG_MAX_WORKERS) {
		munmap(p, sizeof(struct genshm));
		errno = EINVAL;
		return -1;
	}
	*out = g;
	return 0;
}

void
genshm_unmap(struct genshm *g)
{
	if (g)
		munmap(g, sizeof(struct genshm));
}

void
genshm_node_put(struct genshm *g, size_t i, int32_t node_id, const char *host, int32_t port)
{
	if (!g || i >= GENSHM_NODES)
		return;
	struct genshm_node *n = &g->nodes[i];
	uint32_t s = atomic_load_explicit(&n->seq, memory_order_relaxed);
	/* one writer at a time: another worker writing the same entry has
	 * the same news, let it */
	if ((s & 1) || !atomic_compare_exchange_strong_explicit(&n->seq, &s, s + 1,
	    memory_order_acquire, memory_order_relaxed))
		return;
	n->node_id = node_id;
	n->port = port;
	snprintf(n->host, sizeof n->host, "%s", host);
	atomic_store_explicit(&n->seq, s + 2, memory_order_release);
	atomic_fetch_or_explicit(&g->written[i / 64], 1ULL << (i % 64), memory_order_release);
}

bool
genshm_node_get(struct genshm *g, size_t i, int32_t *node_id, char *host, size_t hostlen,
		int32_t *port)
{
	if (!g || i >= GENSHM_NODES)
		return false;
	/* never published: do not read the entry (a read would allocate its
	 * page in every process that looks) */
	if (!(atomic_load_explicit(&g->written[i / 64], memory_order_acquire) &
	    (1ULL << (i % 64))))
		return false;
	struct genshm_node *n = &g->nodes[i];
	for (int tries = 0; tries < 4; tries++) {
		uint32_t a = atomic_load_explicit(&n->seq, memory_order_acquire);
		if (a == 0)
			return false;  /* never written */
		if (a & 1)
			continue;
		int32_t id = n->node_id, p = n->port;
		char h[CFG_HOST_MAX];
		memcpy(h, n->host, sizeof h);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&n->seq, memory_order_relaxed) != a)
			continue;
		h[sizeof h - 1] = 0;
		if (p <= 0 || !h[0])
			return false;
		*node_id = id;
		*port = p;
		snprintf(host, hostlen, "%s", h);
		return true;
	}
	return false;
}

bool
genshm_should_defer(struct genshm *g, uint32_t self, uint64_t now_ms, uint64_t stale_ms)
{
	if (!g || g->n_workers < 2 || self >= g->n_workers)
		return false;
	uint64_t mine = atomic_load_explicit(&g->workers[self].connections, memory_order_relaxed);
	for (uint32_t i = 0; i < g->n_workers; i++) {
		if (i == self)
			continue;
		uint64_t hb = atomic_load_explicit(&g->workers[i].heartbeat_ms, memory_order_relaxed);
		if (!hb || now_ms > hb + stale_ms)
			continue;  /* not running, or its loop does not turn */
		uint64_t theirs = atomic_load_explicit(&g->workers[i].connections,
		    memory_order_relaxed);
		/* slack: one connection, or a sixteenth of mine */
		if (theirs + 1 + mine / 16 < mine)
			return true;
	}
	return false;
}
