/*
 * file_read_all: only bounded regular files are read; everything else is
 * refused without blocking, with the path and its type in the message.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config.h"
#include "common/file.h"

static char dir[] = "/tmp/ferry-test-file-XXXXXX";

static void
setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
}

static void
teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(file, .init = setup, .fini = teardown, .timeout = 10);

static char *
path_in(const char *name)
{
	static char p[256];

	snprintf(p, sizeof p, "%s/%s", dir, name);
	return p;
}

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
}

/* Expect failure with exactly "PATH" + suffix in err. */
static void
expect_error(const char *path, size_t max, const char *suffix)
{
	char err[512], want[512];
	size_t len = 12345;
	char *buf = file_read_all(path, max, &len, err, sizeof err);

	cr_assert_null(buf);
	cr_assert_eq(len, 12345, "len untouched on failure");
	snprintf(want, sizeof want, "%s%s", path, suffix);
	cr_assert_str_eq(err, want);
}

Test(file, regular)
{
	char *p = path_in("ok.ini"), err[256];
	size_t len = 0;
	char *buf;

	write_file(p, "[ferry]\n");
	buf = file_read_all(p, 64, &len, err, sizeof err);
	cr_assert_not_null(buf, "%s", err);
	cr_assert_eq(len, 8);
	cr_assert_str_eq(buf, "[ferry]\n");
	free(buf);

	write_file(p, "");
	buf = file_read_all(p, 64, &len, err, sizeof err);
	cr_assert_not_null(buf, "%s", err);
	cr_assert_eq(len, 0);
	cr_assert_str_eq(buf, "");
	free(buf);
}

Test(file, symlink_to_regular_is_followed)
{
	char target[256], err[256];
	size_t len = 0;
	char *buf;

	snprintf(target, sizeof target, "%s", path_in("real.ini"));
	write_file(target, "x = 1\n");
	cr_assert_eq(symlink(target, path_in("link.ini")), 0);
	buf = file_read_all(path_in("link.ini"), 64, &len, err, sizeof err);
	cr_assert_not_null(buf, "%s", err);
	cr_assert_eq(len, 6);
	free(buf);
}

/* Opening a FIFO for reading would wait for a writer; the test's timeout
 * catches a regression instead of hanging. */
Test(file, fifo_refused_without_blocking)
{
	char *p = path_in("fifo.ini");

	cr_assert_eq(mkfifo(p, 0600), 0);
	expect_error(p, 64, ": is a FIFO, not a regular file");
}

Test(file, directory_refused)
{
	char *p = path_in("d.ini");

	cr_assert_eq(mkdir(p, 0700), 0);
	expect_error(p, 64, ": is a directory, not a regular file");
}

Test(file, character_device_refused)
{
	expect_error("/dev/null", 64, ": is a character device, not a regular file");
}

Test(file, missing_and_dangling)
{
	char *p = path_in("missing.ini"), target[256];

	expect_error(p, 64, ": cannot read: No such file or directory");
	snprintf(target, sizeof target, "%s", path_in("nowhere"));
	cr_assert_eq(symlink(target, path_in("dangling.ini")), 0);
	expect_error(path_in("dangling.ini"), 64,
	    ": cannot read: No such file or directory (dangling symbolic link)");
}

Test(file, size_bounded)
{
	char *p = path_in("big.ini"), want[64];
	int fd;

	/* sparse: refused from st_size, nothing allocated or read */
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	cr_assert_neq(fd, -1);
	cr_assert_eq(ftruncate(fd, 20 * 1024 * 1024), 0);
	close(fd);
	snprintf(want, sizeof want, ": larger than %u bytes", CFG_MAX_FILE_BYTES);
	expect_error(p, CFG_MAX_FILE_BYTES, want);

	/* exactly max is fine, one more is not */
	write_file(p, "12345678");
	{
		char err[128];
		size_t len;
		char *buf = file_read_all(p, 8, &len, err, sizeof err);

		cr_assert_not_null(buf, "%s", err);
		cr_assert_eq(len, 8);
		free(buf);
	}
	expect_error(p, 7, ": larger than 7 bytes");
}

/* A file whose st_size says 0 but which has content (procfs) is still read,
 * and still bounded while reading. */
Test(file, size_zero_files_bounded_while_reading)
{
	char err[256];
	size_t len = 0;
	char *buf = file_read_all("/proc/self/status", 1 << 20, &len, err, sizeof err);

	cr_assert_not_null(buf, "%s", err);
	cr_assert_gt(len, 0);
	cr_assert(strstr(buf, "Name:") != NULL);
	free(buf);
	expect_error("/proc/self/status", 16, ": larger than 16 bytes");
}

Test(file, type_names)
{
	cr_assert_str_eq(file_type_str(S_IFIFO), "a FIFO");
	cr_assert_str_eq(file_type_str(S_IFSOCK), "a socket");
	cr_assert_str_eq(file_type_str(S_IFBLK), "a block device");
	cr_assert_str_eq(file_type_str(S_IFREG), "a regular file");
}
