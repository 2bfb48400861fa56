/*
 * file — reading a whole (small) configuration-like file into memory, the one
 * way every role does it: the supervisor's config file (at start, on SIGHUP,
 * for an empty validate/reload request), `ferryd -t`, a file ferryctl sends.
 *
 * The supervisor calls this from its event loop, so it must not block on
 * anything a hostile or broken file system entry can hold forever:
 *   - only regular files are read. The path is stat()ed first, so a FIFO,
 *     a device, a socket or a directory is refused without being opened
 *     (opening a FIFO for reading waits for a writer; opening a device can
 *     have side effects). The open itself uses O_NONBLOCK | O_NOCTTY and the
 *     descriptor is fstat()ed again, so an entry swapped in between is
 *     refused as well; the error names the path and its type:
 *     "/x/ferry.ini: is a FIFO, not a regular file";
 *   - the size is bounded by `max` before anything is allocated (st_size),
 *     and again while reading (a file that grows, or a /proc-like file that
 *     reports size 0);
 *   - time: on a local file system each read() of a regular file returns
 *     after at most a few disk I/Os; the buffer is sized from st_size, so a
 *     file is normally read with two read() calls (data, then EOF) and never
 *     with more than about log2(max) + 2.
 *     O_NONBLOCK has no effect on regular files, and no user-space deadline
 *     can interrupt one blocking stat()/open()/read(): a regular file on a
 *     hard-mounted network file system whose server is gone can still hang
 *     here. That cannot be bounded without moving the read off the loop
 *     (a thread or child); it is a documented limit, see docs/operations.md.
 */
#ifndef FERRY_COMMON_FILE_H
#define FERRY_COMMON_FILE_H

#include <stddef.h>
#include <sys/types.h>

/* Read all of path. Returns a malloc'd buffer, NUL-terminated (the NUL is
 * not counted in *len), or NULL with one line in err:
 *   "PATH: cannot read: REASON" (strerror; a dangling symbolic link adds
 *       " (dangling symbolic link)"),
 *   "PATH: is a TYPE, not a regular file",
 *   "PATH: larger than MAX bytes". */
char *file_read_all(const char *path, size_t max, size_t *len, char *err, size_t errlen);

/* A file holding a secret (a token, a password) may be readable by its
 * owner and group, writable by its owner only: 0, or -1 with "mode 0644
 * lets other users read or change WHAT; use chmod 0600 (...)". */
int file_secret_mode_ok(mode_t mode, const char *what, char *err, size_t errlen);

/* "a FIFO", "a directory", "a socket", "a character device", "a block
 * device", "a symbolic link", "a regular file" or "an unknown file type"
 * for a st_mode. */
const char *file_type_str(mode_t mode);

#endif
