/*
 * metrics — create and map the per-generation shared counter block.
 *
 * The block is a memfd sealed against resizing (F_SEAL_SHRINK, F_SEAL_GROW)
 * and against further seal changes (F_SEAL_SEAL) before it leaves the
 * supervisor, and metrics_map refuses a block without those seals: a
 * mapping of a file that a peer could truncate would SIGBUS on access.
 */
#include "common/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int
metrics_create(uint64_t generation, struct metrics **out)
{
	int fd = memfd_create("ferry-metrics", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd == -1)
		return -1;
	if (ftruncate(fd, sizeof(struct metrics)) == -1 ||
	    fcntl(fd, F_ADD_SEALS, METRICS_SEALS) == -1)
		goto fail;
	void *p = mmap(NULL, sizeof(struct metrics), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		goto fail;
	memset(p, 0, sizeof(struct metrics));
	struct metrics *m = p;
	m->magic = METRICS_MAGIC;
	m->generation = generation;
	*out = m;
	return fd;
fail:;
	int e = errno;
	close(fd);
	errno = e;
	return -1;
}

int
metrics_map(int fd, struct metrics **out)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals == -1)
		return -1;	/* EINVAL: not a memfd (or sealing not allowed) */
	if ((seals & METRICS_SEALS) != METRICS_SEALS) {
		errno = EINVAL;
		return -1;
	}
	if (fstat(fd, &st) == -1)
		return -1;
	if ((size_t)st.st_size != sizeof(struct metrics)) {
		errno = EINVAL;
		return -1;
	}
	void *p = mmap(NULL, sizeof(struct metrics), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
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
