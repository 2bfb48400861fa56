/*
 * Unit tests for common/genshm: the block shared by a generation's workers
 * (sealed, refused when not), learned broker addresses published by one
 * worker and read by another (a second mapping of the same memfd, as a
 * sibling process has), the accept balance rule, and the block's cost: no
 * page is allocated beyond the header until a broker entry is published,
 * and lookups of entries never published allocate none.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/genshm.h"
#include "shm_pages.h"

Test(genshm, a_new_block_holds_only_its_header_page)
{
	struct genshm *sup, *w;
	struct stat st;
	int fd = genshm_create(4, &sup);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq((size_t)st.st_size, sizeof(struct genshm), "the block is the struct");
	cr_assert_eq(sizeof(struct genshm), offsetof(struct genshm, nodes) +
	    GENSHM_NODES * sizeof(struct genshm_node));
	cr_assert_leq(offsetof(struct genshm, nodes), shm_page_size(),
	    "magic, workers and the written-map share the first page");
	/* created: the header written, nothing else (a memset would have
	 * allocated all ~70 pages) */
	cr_assert_eq(shm_pages_resident(sup, sizeof *sup), 1);

	/* a worker maps it, heartbeats, and looks up every broker entry (the
	 * SNI miss path): nothing more */
	cr_assert_eq(genshm_map(fd, &w), 0);
	atomic_store(&w->workers[3].heartbeat_ms, 1);
	atomic_store(&w->workers[3].connections, 1);
	int32_t id, port;
	char host[CFG_HOST_MAX];
	for (size_t i = 0; i < GENSHM_NODES; i++)
		cr_assert_not(genshm_node_get(w, i, &id, host, sizeof host, &port));
	cr_assert_eq(shm_pages_resident(sup, sizeof *sup), 1, "lookups allocated pages");

	/* publishing entry i allocates the page(s) of entry i only */
	size_t far = GENSHM_NODES - 1;
	genshm_node_put(w, far, 5, "broker-5", 9092);
	size_t off = offsetof(struct genshm, nodes) + far * sizeof(struct genshm_node);
	size_t pages = 1 + shm_page_of(off + sizeof(struct genshm_node) - 1) - shm_page_of(off);
	cr_assert_eq(shm_pages_resident(sup, sizeof *sup), 1 + pages);
	cr_assert(genshm_node_get(sup, far, &id, host, sizeof host, &port));
	cr_assert_eq(id, 5);
	cr_assert_str_eq(host, "broker-5");
	genshm_unmap(w);
	genshm_unmap(sup);
	close(fd);
}

Test(genshm, a_sibling_sees_learned_brokers)
{
	struct genshm *a, *b;
	int fd = genshm_create(3, &a);
	cr_assert_geq(fd, 0);
	cr_assert_eq(genshm_map(fd, &b), 0, "a sibling maps the same block");
	cr_assert_eq(b->n_workers, 3);

	int32_t id, port;
	char host[CFG_HOST_MAX];
	cr_assert_not(genshm_node_get(b, 2, &id, host, sizeof host, &port), "nothing published");
	genshm_node_put(a, 2, 7, "broker-7.upstream", 9092);
	cr_assert(genshm_node_get(b, 2, &id, host, sizeof host, &port));
	cr_assert_eq(id, 7);
	cr_assert_eq(port, 9092);
	cr_assert_str_eq(host, "broker-7.upstream");
	/* a move is published too */
	genshm_node_put(b, 2, 7, "10.1.1.1", 9093);
	cr_assert(genshm_node_get(a, 2, &id, host, sizeof host, &port));
	cr_assert_str_eq(host, "10.1.1.1");
	cr_assert_eq(port, 9093);
	/* out of range: ignored, never written */
	genshm_node_put(a, GENSHM_NODES, 1, "x", 1);
	cr_assert_not(genshm_node_get(a, GENSHM_NODES, &id, host, sizeof host, &port));
	/* an entry being written is not read */
	atomic_fetch_add(&a->nodes[2].seq, 1);
	cr_assert_not(genshm_node_get(b, 2, &id, host, sizeof host, &port));
	genshm_unmap(a);
	genshm_unmap(b);
	close(fd);
}

Test(genshm, an_unsealed_or_foreign_block_is_refused)
{
	struct genshm *g;
	int fd = memfd_create("x", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, sizeof(struct genshm)), 0);
	cr_assert_eq(genshm_map(fd, &g), -1, "unsealed");
	cr_assert_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
	cr_assert_eq(genshm_map(fd, &g), -1, "sealed, but no magic");
	close(fd);
}

Test(genshm, the_busier_worker_lets_a_live_sibling_go_first)
{
	struct genshm *g;
	int fd = genshm_create(2, &g);
	cr_assert_geq(fd, 0);
	uint64_t now = 100000;
	atomic_store(&g->workers[0].heartbeat_ms, now);
	atomic_store(&g->workers[1].heartbeat_ms, now);
	atomic_store(&g->workers[0].connections, 10);
	atomic_store(&g->workers[1].connections, 10);
	cr_assert_not(genshm_should_defer(g, 0, now, 500), "even: nobody steps back");
	atomic_store(&g->workers[0].connections, 12);
	cr_assert(genshm_should_defer(g, 0, now, 500), "two more than the sibling");
	cr_assert_not(genshm_should_defer(g, 1, now, 500), "the sibling accepts");
	/* a sibling whose loop stopped (stale heartbeat) is not waited for */
	atomic_store(&g->workers[1].heartbeat_ms, now - 600);
	cr_assert_not(genshm_should_defer(g, 0, now, 500));
	/* one worker: never */
	g->n_workers = 1;
	cr_assert_not(genshm_should_defer(g, 0, now, 500));
	genshm_unmap(g);
	close(fd);
}
