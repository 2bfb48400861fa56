/*
 * buildinfo — version, build id and start path of this executable; see
 * buildinfo.h.
 */
#include "common/buildinfo.h"

#include <elf.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

static char buildinfo_hex[BUILDINFO_ID_MAX];

const char *
buildinfo_version(void)
{
	return FERRY_VERSION;
}

/* The NT_GNU_BUILD_ID note of the main program (the first object
 * dl_iterate_phdr reports). */
static int
buildinfo_phdr_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	char *hex = data;
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
		size_t left = ph->p_memsz;
		while (left >= sizeof(ElfW(Nhdr))) {
			ElfW(Nhdr) nh;
			memcpy(&nh, p, sizeof nh);
			size_t name = (nh.n_namesz + 3u) & ~3u, desc = (nh.n_descsz + 3u) & ~3u;
			size_t total = sizeof nh + name + desc;
			if (total > left)
				break;
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    memcmp(p + sizeof nh, "GNU", 4) == 0 && nh.n_descsz > 0) {
				const unsigned char *id = p + sizeof nh + name;
				size_t n = nh.n_descsz < (BUILDINFO_ID_MAX - 1) / 2 ? nh.n_descsz :
				    (BUILDINFO_ID_MAX - 1) / 2;
				for (size_t k = 0; k < n; k++)
					snprintf(hex + 2 * k, 3, "%02x", id[k]);
				return 1;
			}
			p += total;
			left -= total;
		}
	}
	return 1;  /* only the main program */
}

const char *
buildinfo_id(void)
{
	if (!buildinfo_hex[0]) {
		dl_iterate_phdr(buildinfo_phdr_cb, buildinfo_hex);
		if (!buildinfo_hex[0])
			snprintf(buildinfo_hex, sizeof buildinfo_hex, "unknown");
	}
	return buildinfo_hex;
}

int
buildinfo_exec_path(char *out, size_t len, char *err, size_t errlen)
{
	const char *fn = (const char *)getauxval(AT_EXECFN);
	if (!fn || !fn[0]) {
		snprintf(err, errlen, "the path this process was started from is unknown");
		return -1;
	}
	if (fn[0] == '/') {
		if ((size_t)snprintf(out, len, "%s", fn) >= len)
			goto toolong;
		return 0;
	}
	char cwd[PATH_MAX];
	if (!getcwd(cwd, sizeof cwd)) {
		snprintf(err, errlen, "getcwd: %s", strerror(errno));
		return -1;
	}
	if (fn[0] == '.' && fn[1] == '/')
		fn += 2;
	if ((size_t)snprintf(out, len, "%s/%s", strcmp(cwd, "/") == 0 ? "" : cwd, fn) >= len)
		goto toolong;
	return 0;
toolong:
	snprintf(err, errlen, "the path this process was started from is too long");
	return -1;
}

static int
buildinfo_safe(const char *what, const char *path, const struct stat *st, uid_t euid,
	       char *err, size_t errlen)
{
	if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(err, errlen, "refusing to execute as root: %s %s is writable by %s", what,
		    path, st->st_mode & S_IWOTH ? "others" : "its group");
		return -1;
	}
	if (st->st_uid != 0 && st->st_uid != euid) {
		snprintf(err, errlen, "refusing to execute as root: %s %s belongs to uid %u", what,
		    path, (unsigned)st->st_uid);
		return -1;
	}
	return 0;
}

static int
buildinfo_dir_safe(const char *path, uid_t euid, char *err, size_t errlen)
{
	char buf[PATH_MAX];
	struct stat st;
	snprintf(buf, sizeof buf, "%s", path);
	const char *dir = dirname(buf);
	if (stat(dir, &st) == -1) {
		snprintf(err, errlen, "cannot execute %s: %s: %s", path, dir, strerror(errno));
		return -1;
	}
	return buildinfo_safe("directory", dir, &st, euid, err, errlen);
}

int
buildinfo_exec_check(const char *path, uid_t euid, char *err, size_t errlen)
{
	struct stat st;
	if (stat(path, &st) == -1) {
		snprintf(err, errlen, "cannot execute %s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "cannot execute %s: not a regular file", path);
		return -1;
	}
	if (access(path, X_OK) == -1) {
		snprintf(err, errlen, "cannot execute %s: %s", path, strerror(errno));
		return -1;
	}
	if (euid != 0)
		return 0;
	if (buildinfo_safe("file", path, &st, euid, err, errlen) == -1 ||
	    buildinfo_dir_safe(path, euid, err, errlen) == -1)
		return -1;
	char real[PATH_MAX];
	if (!realpath(path, real)) {
		snprintf(err, errlen, "cannot execute %s: %s", path, strerror(errno));
		return -1;
	}
	if (strcmp(real, path) != 0 && buildinfo_dir_safe(real, euid, err, errlen) == -1)
		return -1;
	return 0;
}
