/*
 * shmblock — sealed shared memory blocks; see shmblock.h.
 */
#include "common/shmblock.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int
shmblock_create(const char *name, size_t size, void **out)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd == -1)
		return -1;
	if (ftruncate(fd, (off_t)size) == -1 || fcntl(fd, F_ADD_SEALS, SHMBLOCK_SEALS) == -1)
		goto fail;
	/* A new memfd reads as zeros and holds no page until one is
	 * touched: no memset (it would make every page of every block
	 * resident in the supervisor for as long as it keeps the block). */
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		goto fail;
	*out = p;
	return fd;
fail:;
	int e = errno;
	close(fd);
	errno = e;
	return -1;
}

int
shmblock_map(int fd, size_t size, void **out)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals == -1)
		return -1;	/* EINVAL: not a memfd (or sealing not allowed) */
	if ((seals & SHMBLOCK_SEALS) != SHMBLOCK_SEALS) {
		errno = EINVAL;
		return -1;
	}
	if (fstat(fd, &st) == -1)
		return -1;
	if ((size_t)st.st_size != size) {
		errno = EINVAL;
		return -1;
	}
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -1;
	*out = p;
	return 0;
}

int
shmblock_seal_bytes(const char *name, const void *data, size_t len)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd == -1)
		return -1;
	size_t off = 0;
	while (off < len) {
		ssize_t n = write(fd, (const char *)data + off, len - off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			goto fail;
		}
		off += (size_t)n;
	}
	if (fcntl(fd, F_ADD_SEALS, SHMBLOCK_BYTES_SEALS) == -1)
		goto fail;
	return fd;
fail:;
	int e = errno;
	close(fd);
	errno = e;
	return -1;
}

int
shmblock_read_bytes(int fd, void *out, size_t len)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals == -1)
		return -1;
	if ((seals & SHMBLOCK_BYTES_SEALS) != SHMBLOCK_BYTES_SEALS || fstat(fd, &st) == -1 ||
	    !S_ISREG(st.st_mode) || (size_t)st.st_size != len) {
		errno = EINVAL;
		return -1;
	}
	size_t off = 0;
	while (off < len) {
		ssize_t n = pread(fd, (char *)out + off, len - off, (off_t)off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EINVAL;
			return -1;
		}
		off += (size_t)n;
	}
	return 0;
}
