/*
 * genshm — the block of shared memory of one worker generation, seen by
 * every worker process of it (several per cluster with `workers = N`).
 *
 * The supervisor creates it (a memfd sealed against resizing, like the
 * metrics block) and passes it to each worker of the generation with its
 * configuration. Workers use it for two things that need no message:
 *   - balance: each worker publishes its open connections and a heartbeat,
 *     so one that has more than its share lets a sibling accept first;
 *   - learned brokers: an upstream node address learned by one worker is
 *     published for the others (a client that connects straight to a broker
 *     port of any worker is served without a metadata fetch).
 * Every field is written with relaxed atomics or under a per-entry sequence
 * lock; a torn or stale read costs at most a less even accept or a metadata
 * fetch, never correctness.
 *
 * Cost: the block is sized for GENSHM_NODES brokers (~270 KiB) but holds
 * pages only where something was written (shmblock.h): the header with the
 * workers' entries and the written-map is the first page, and a broker
 * entry's page is touched only once that entry is published. Lookups read
 * the written-map before the entry, so a miss (the SNI scan over every
 * entry) touches no page. A generation with a few brokers costs one or two
 * pages in every process that maps it.
 */
#ifndef FERRY_COMMON_GENSHM_H
#define FERRY_COMMON_GENSHM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/config.h"

#define GENSHM_MAGIC 0x6665727279670002ULL /* "ferryg" v2: written-map */
#define GENSHM_NODES 1024                 /* brokers shared (by broker index) */

struct genshm_worker {
	_Atomic uint64_t connections;     /* open client connections */
	_Atomic uint64_t heartbeat_ms;    /* monotonic ms of its loop's last turn */
	_Atomic uint64_t accepted;        /* total accepted, for balance figures */
};

struct genshm_node {
	_Atomic uint32_t seq;             /* odd while being written */
	int32_t node_id;
	int32_t port;                     /* 0 = unknown */
	char host[CFG_HOST_MAX];
};

struct genshm {
	uint64_t magic;
	uint32_t n_workers;
	uint32_t pad;
	struct genshm_worker workers[CFG_MAX_WORKERS];
	/* bit i set once nodes[i] was published (release, after the entry):
	 * what a lookup reads before it touches nodes[i] */
	_Atomic uint64_t written[GENSHM_NODES / 64];
	struct genshm_node nodes[GENSHM_NODES];
};

/* Supervisor: create a sealed block for n workers. The fd (O_CLOEXEC), or
 * -1 with errno; *out maps it. */
int genshm_create(uint32_t n_workers, struct genshm **out);
/* Worker: map a block received over IPC; refuses one that is not sealed or
 * not of this layout (-1, errno EINVAL). */
int genshm_map(int fd, struct genshm **out);
void genshm_unmap(struct genshm *g);

/* Publish / look up the upstream address of broker index i. Lookup
 * returns false when nothing consistent is published. */
void genshm_node_put(struct genshm *g, size_t i, int32_t node_id, const char *host,
		     int32_t port);
bool genshm_node_get(struct genshm *g, size_t i, int32_t *node_id, char *host, size_t hostlen,
		     int32_t *port);

/* Balance: should worker `self` let a sibling accept first? True when some
 * sibling with a fresh heartbeat (within stale_ms of now_ms) has fewer
 * connections than self by more than a small slack. */
bool genshm_should_defer(struct genshm *g, uint32_t self, uint64_t now_ms, uint64_t stale_ms);

#endif
