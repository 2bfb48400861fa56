/*
 * file — see file.h.
 */
#include "common/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_CHUNK 8192

const char *
file_type_str(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return "a regular file";
	case S_IFDIR:
		return "a directory";
	case S_IFIFO:
		return "a FIFO";
	case S_IFSOCK:
		return "a socket";
	case S_IFCHR:
		return "a character device";
	case S_IFBLK:
		return "a block device";
	case S_IFLNK:
		return "a symbolic link";
	}
	return "an unknown file type";
}

int
file_secret_mode_ok(mode_t mode, const char *what, char *err, size_t errlen)
{
	if ((mode & 0027) == 0)
		return 0;
	snprintf(err, errlen, "mode %04o lets %s %s; use chmod 0600 (or 0640 for "
	    "a group that may read it)", (unsigned)(mode & 07777),
	    (mode & 0007) ? "other users read or change" : "its group change", what);
	return -1;
}

static void
file_err_errno(const char *path, int e, char *err, size_t errlen)
{
	struct stat lst;

	if (e == ENOENT && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode))
		snprintf(err, errlen, "%s: cannot read: %s (dangling symbolic link)", path,
		    strerror(e));
	else
		snprintf(err, errlen, "%s: cannot read: %s", path, strerror(e));
}

/* 0 when st is a regular file no larger than max, else -1 with err set. */
static int
file_check(const char *path, const struct stat *st, size_t max, char *err, size_t errlen)
{
	if (!S_ISREG(st->st_mode)) {
		snprintf(err, errlen, "%s: is %s, not a regular file", path,
		    file_type_str(st->st_mode));
		return -1;
	}
	if (st->st_size < 0 || (unsigned long long)st->st_size > max) {
		snprintf(err, errlen, "%s: larger than %zu bytes", path, max);
		return -1;
	}
	return 0;
}

char *
file_read_all(const char *path, size_t max, size_t *len, char *err, size_t errlen)
{
	struct stat st;
	char *buf = NULL, *nb;
	size_t n = 0, cap;
	ssize_t r;
	int fd;

	/* Refuse what is not a regular file before opening it: see file.h. */
	if (stat(path, &st) == -1) {
		file_err_errno(path, errno, err, errlen);
		return NULL;
	}
	if (file_check(path, &st, max, err, errlen) == -1)
		return NULL;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)) == -1) {
		file_err_errno(path, errno, err, errlen);
		return NULL;
	}
	/* the entry may have been replaced since stat(): check what we opened */
	if (fstat(fd, &st) == -1) {
		snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
		goto fail;
	}
	if (file_check(path, &st, max, err, errlen) == -1)
		goto fail;

	/* st_size + 1 spare byte, so a file of the announced size ends with one
	 * short read; a file that grows or lies about its size (0 in /proc)
	 * grows the buffer, never past max + 1. */
	cap = (size_t)st.st_size + 1;
	if ((buf = malloc(cap + 1)) == NULL) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	for (;;) {
		if (n == cap) {
			if (n > max) {
				snprintf(err, errlen, "%s: larger than %zu bytes", path, max);
				goto fail;
			}
			cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
			if (cap < FILE_CHUNK && max + 1 >= FILE_CHUNK)
				cap = FILE_CHUNK;
			if ((nb = realloc(buf, cap + 1)) == NULL) {
				snprintf(err, errlen, "%s: out of memory", path);
				goto fail;
			}
			buf = nb;
		}
		r = read(fd, buf + n, cap - n);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
			goto fail;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > max) {
		snprintf(err, errlen, "%s: larger than %zu bytes", path, max);
		goto fail;
	}
	close(fd);
	buf[n] = 0;
	*len = n;
	return buf;
fail:
	close(fd);
	free(buf);
	return NULL;
}
