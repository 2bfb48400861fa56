/*
 * test_metrics — unit tests for common/metrics.c: the shared counter block
 * is a sealed memfd (its size can never change, so a mapping of it cannot
 * SIGBUS), a worker-side mapping sees the supervisor's counters, and
 * metrics_map refuses a block without the seals, of the wrong size or with
 * the wrong magic.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/metrics.h"

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
