/*
 * metrics — create and map the per-generation shared counter block.
 */
#include "common/metrics.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int
metrics_create(uint64_t generation, struct metrics **out)
{
	int fd = memfd_create("ferry-metrics", MFD_CLOEXEC);
	if (fd == -1)
		return -1;
	if (ftruncate(fd, sizeof(struct metrics)) == -1)
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
