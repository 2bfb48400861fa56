/*
 * test_metrics — unit tests for common/metrics.c: the shared counter block
 * is a sealed memfd (its size can never change, so a mapping of it cannot
 * SIGBUS), a worker-side mapping sees the supervisor's counters, and
 * metrics_map refuses a block without the seals, of the wrong size or with
 * the wrong magic; and the block's cost: a new block holds one page, the
 * per-API slots take pages only for the APIs counted, folding a process's
 * block into the cluster's totals touches only what was counted, and the
 * sandbox report a worker writes at lock-down is in the first page.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/metrics.h"
#include "shm_pages.h"

Test(metrics, created_block_is_sealed)
{
	struct metrics *m = NULL;
	int fd = metrics_create(7, &m);
	struct stat st;

	cr_assert_geq(fd, 0, "metrics_create: %s", strerror(errno));
	cr_assert_not_null(m);
	cr_assert_eq(m->magic, METRICS_MAGIC);
	cr_assert_eq(m->generation, 7);

	int seals = fcntl(fd, F_GET_SEALS);
	cr_assert_neq(seals, -1, "F_GET_SEALS: %s", strerror(errno));
	cr_expect(seals & F_SEAL_SHRINK);
	cr_expect(seals & F_SEAL_GROW);
	cr_expect(seals & F_SEAL_SEAL);
	cr_expect(!(seals & F_SEAL_WRITE), "counters must stay writable");
	cr_expect(fcntl(fd, F_GETFD) & FD_CLOEXEC);

	/* the size cannot change, either way */
	errno = 0;
	cr_expect_eq(ftruncate(fd, 0), -1);
	cr_expect_eq(errno, EPERM, "shrink: %s", strerror(errno));
	errno = 0;
	cr_expect_eq(ftruncate(fd, 2 * (off_t)sizeof(struct metrics)), -1);
	cr_expect_eq(errno, EPERM, "grow: %s", strerror(errno));
	errno = 0;
	cr_expect_eq(fallocate(fd, 0, 0, 1 << 20), -1);
	cr_expect_eq(errno, EPERM, "fallocate: %s", strerror(errno));
	/* and the seals cannot be removed or changed (F_SEAL_SEAL) */
	errno = 0;
	cr_expect_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
	cr_expect_eq(errno, EPERM, "add seal: %s", strerror(errno));
	cr_assert_eq(fstat(fd, &st), 0);
	cr_expect_eq((size_t)st.st_size, sizeof(struct metrics));

	metrics_unmap(m);
	close(fd);
}

Test(metrics, mapping_shares_counters)
{
	struct metrics *sup = NULL, *wk = NULL;
	int fd = metrics_create(3, &sup);

	cr_assert_geq(fd, 0);
	/* the worker maps the fd it received (here: a dup, as SCM_RIGHTS gives) */
	int wfd = dup(fd);
	cr_assert_geq(wfd, 0);
	cr_assert_eq(metrics_map(wfd, &wk), 0, "metrics_map: %s", strerror(errno));
	cr_assert_neq(wk, sup, "a second mapping");
	cr_assert_eq(wk->generation, 3);
	METRIC_ADD(wk, requests, 5);
	METRIC_ADD(wk, connections_active, 2);
	METRIC_SUB(wk, connections_active, 1);
	cr_expect_eq(METRIC_GET(sup, requests), 5);
	cr_expect_eq(METRIC_GET(sup, connections_active), 1);
	/* counters survive the worker's mapping (a crash) */
	metrics_unmap(wk);
	close(wfd);
	cr_expect_eq(METRIC_GET(sup, requests), 5);
	metrics_unmap(sup);
	close(fd);
}

/* A memfd the way metrics_create made it before sealing: right size, right
 * magic, but resizable. */
static int
unsealed_block(unsigned flags, size_t size)
{
	int fd = memfd_create("test-metrics", MFD_CLOEXEC | flags);
	struct metrics mm;

	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)size), 0);
	memset(&mm, 0, sizeof mm);
	mm.magic = METRICS_MAGIC;
	if (size >= sizeof mm)
		cr_assert_eq(pwrite(fd, &mm, sizeof mm, 0), (ssize_t)sizeof mm);
	return fd;
}

Test(metrics, unsealed_block_is_refused)
{
	struct metrics *m = NULL;
	int fd;

	/* sealing allowed but no seals added */
	fd = unsealed_block(MFD_ALLOW_SEALING, sizeof(struct metrics));
	errno = 0;
	cr_expect_eq(metrics_map(fd, &m), -1);
	cr_expect_eq(errno, EINVAL);
	cr_expect_null(m);
	/* only some of the seals */
	cr_assert_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	errno = 0;
	cr_expect_eq(metrics_map(fd, &m), -1);
	cr_expect_eq(errno, EINVAL);
	/* all of them: accepted */
	cr_assert_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SEAL), 0);
	cr_expect_eq(metrics_map(fd, &m), 0, "%s", strerror(errno));
	metrics_unmap(m);
	close(fd);

	/* a memfd that cannot be sealed at all (F_SEAL_SEAL preset) */
	m = NULL;
	fd = unsealed_block(0, sizeof(struct metrics));
	errno = 0;
	cr_expect_eq(metrics_map(fd, &m), -1);
	cr_expect_eq(errno, EINVAL);
	cr_expect_null(m);
	close(fd);

	/* not a memfd */
	int p[2];
	cr_assert_eq(pipe(p), 0);
	errno = 0;
	cr_expect_eq(metrics_map(p[0], &m), -1);
	cr_expect_eq(errno, EINVAL);
	close(p[0]);
	close(p[1]);
}

Test(metrics, sealed_block_of_wrong_size_or_magic_is_refused)
{
	struct metrics *m = NULL;
	int fd;

	fd = unsealed_block(MFD_ALLOW_SEALING, sizeof(struct metrics) / 2);
	cr_assert_eq(fcntl(fd, F_ADD_SEALS, METRICS_SEALS), 0);
	errno = 0;
	cr_expect_eq(metrics_map(fd, &m), -1);
	cr_expect_eq(errno, EINVAL);
	close(fd);

	fd = unsealed_block(MFD_ALLOW_SEALING, sizeof(struct metrics));
	uint64_t bad = METRICS_MAGIC + 1;
	cr_assert_eq(pwrite(fd, &bad, sizeof bad, 0), (ssize_t)sizeof bad);
	cr_assert_eq(fcntl(fd, F_ADD_SEALS, METRICS_SEALS), 0);
	errno = 0;
	cr_expect_eq(metrics_map(fd, &m), -1);
	cr_expect_eq(errno, EINVAL);
	cr_expect_null(m);
	close(fd);
}

/* An API key whose slot lies beyond the first page (Fetch and Metadata are
 * in it). */
static int
far_api(void)
{
	for (int k = 0; k < METRICS_APIS - 1; k++)
		if (shm_page_of(offsetof(struct metrics, api) + (size_t)k * sizeof(struct metrics_api)) >= 2)
			return k;
	cr_assert_fail("no API slot beyond page 1");
	return -1;
}

Test(metrics, a_new_block_holds_only_its_first_page)
{
	struct metrics *sup = NULL, *wk = NULL;
	struct stat st;
	int fd = metrics_create(1, &sup);

	cr_assert_geq(fd, 0);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq((size_t)st.st_size, sizeof(struct metrics));
	cr_assert_leq(offsetof(struct metrics, api), shm_page_size(),
	    "header, api_seen and the counters share the first page");
	cr_assert_eq(shm_pages_resident(sup, sizeof *sup), 1, "no page but the header at creation");

	int wfd = dup(fd);
	cr_assert_eq(metrics_map(wfd, &wk), 0);
	METRIC_ADD(wk, connections_accepted, 1);
	METRIC_ADD(wk, bytes_client_to_upstream, 100);
	metrics_request(wk, 3);                     /* Metadata: slot in the first page */
	metrics_observe(wk, 3, 700);
	cr_assert_eq(shm_pages_resident(sup, sizeof *sup), 1);
	for (unsigned a = 0; a < METRICS_APIS; a++)
		cr_assert_eq(metrics_api_seen(sup, a), a == 3, "slot %u", a);

	/* an API further on: its slot's page, no other */
	int k = far_api();
	metrics_request(wk, k);
	cr_assert(metrics_api_seen(sup, (unsigned)k));
	cr_assert_eq(METRIC_GET(&sup->api[k], requests), 1);
	cr_assert_eq(shm_pages_resident(sup, sizeof *sup), 2);
	/* keys beyond the table share the last slot */
	metrics_request(wk, 30000);
	cr_assert(metrics_api_seen(sup, METRICS_APIS - 1));
	cr_assert_not(metrics_api_seen(sup, METRICS_APIS), "out of range");
	metrics_unmap(wk);
	close(wfd);
	metrics_unmap(sup);
	close(fd);
}

Test(metrics, the_sandbox_report_shares_the_first_page)
{
	struct metrics *sup = NULL, *wk = NULL;
	int fd = metrics_create(1, &sup);

	cr_assert_geq(fd, 0);
	cr_assert_leq(offsetof(struct metrics, sandbox) + sizeof(struct sandbox_report),
	    shm_page_size(), "the sandbox report is in the first page");
	cr_assert_leq(offsetof(struct metrics, sandbox), offsetof(struct metrics, api));
	int wfd = dup(fd);
	cr_assert_eq(metrics_map(wfd, &wk), 0);
	/* what a worker writes when it locks down and when it is killed */
	atomic_store(&wk->sandbox.flags, SANDBOX_F_LOCKED | SANDBOX_F_SECCOMP);
	atomic_store(&wk->sandbox.syscall_nr, 59);
	atomic_store(&wk->sandbox.violated, 1);
	memcpy(wk->sandbox.path, "/etc/passwd", 12);
	cr_assert_eq(atomic_load(&sup->sandbox.flags), SANDBOX_F_LOCKED | SANDBOX_F_SECCOMP);
	cr_assert_eq(atomic_load(&sup->sandbox.syscall_nr), 59);
	cr_assert_str_eq(sup->sandbox.path, "/etc/passwd");
	cr_assert_eq(shm_pages_resident(sup, sizeof *sup), 1, "no page beyond the first");
	metrics_unmap(wk);
	close(wfd);
	metrics_unmap(sup);
	close(fd);
}

Test(metrics, retiring_a_block_touches_only_what_was_counted)
{
	struct metrics *totals = NULL, *gone = NULL;
	int tfd = metrics_create(0, &totals), gfd = metrics_create(2, &gone);
	int k = far_api();

	cr_assert_geq(tfd, 0);
	cr_assert_geq(gfd, 0);
	/* nothing counted: the totals' pages stay as they were */
	metrics_retire(totals, gone);
	cr_assert_eq(shm_pages_resident(totals, sizeof *totals), 1);
	for (unsigned a = 0; a < METRICS_APIS; a++)
		cr_assert_not(metrics_api_seen(totals, a));

	METRIC_ADD(gone, connections_accepted, 4);
	METRIC_ADD(gone, connections_active, 2);     /* a gauge: not folded */
	metrics_request(gone, 1);
	metrics_observe(gone, 1, 300);
	/* a writer that counted without marking the slot seen loses nothing */
	atomic_fetch_add(&gone->api[k].requests, 2);
	metrics_retire(totals, gone);
	cr_assert_eq(METRIC_GET(totals, connections_accepted), 4);
	cr_assert_eq(METRIC_GET(totals, connections_active), 0);
	cr_assert_eq(METRIC_GET(&totals->api[1], requests), 1);
	cr_assert_eq(METRIC_GET(&totals->api[1], responses), 1);
	cr_assert_eq(METRIC_GET(&totals->api[1], bucket[1]), 1, "300 µs: the 500 µs bucket");
	cr_assert_eq(METRIC_GET(&totals->api[k], requests), 2);
	cr_assert(metrics_api_seen(totals, 1));
	cr_assert(metrics_api_seen(totals, (unsigned)k));
	cr_assert_eq(shm_pages_resident(totals, sizeof *totals), 2,
	    "the first page and the far slot's");
	metrics_unmap(gone);
	close(gfd);
	metrics_unmap(totals);
	close(tfd);
}

/* A cluster's totals of ended workers (metrics_totals_new): private, and
 * like a shared block they hold a page only where something was counted. */
Test(metrics, totals_hold_pages_only_for_what_was_counted)
{
	struct metrics *totals = metrics_totals_new(), *gone = NULL;
	int gfd = metrics_create(2, &gone);
	int k = far_api();

	cr_assert_not_null(totals);
	cr_assert_geq(gfd, 0);
	cr_assert_eq(shm_pages_resident(totals, sizeof *totals), 1, "the first page only");
	metrics_retire(totals, gone);     /* nothing counted */
	cr_assert_eq(shm_pages_resident(totals, sizeof *totals), 1);
	metrics_request(gone, k);
	metrics_retire(totals, gone);
	cr_assert_eq(METRIC_GET(&totals->api[k], requests), 1);
	cr_assert_eq(shm_pages_resident(totals, sizeof *totals), 2, "the far slot's page");
	metrics_unmap(gone);
	close(gfd);
	metrics_unmap(totals);
}
