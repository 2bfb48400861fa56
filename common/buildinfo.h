/*
 * buildinfo — what this executable is and where it was started from: its
 * version (FERRY_VERSION, the project version plus the build's
 * version_suffix), its build id (the GNU build-id note the linker puts in
 * the executable, read from the running image's memory: it names the code
 * that runs even after the file on disk was replaced), and the path it was
 * started from (what an upgrade executes, docs/design.md §11).
 *
 * Role-free. The build id is read once and kept (a small process context).
 * Return convention: 0 / -1 with a message in err.
 */
#ifndef FERRY_COMMON_BUILDINFO_H
#define FERRY_COMMON_BUILDINFO_H

#include <stddef.h>
#include <sys/types.h>

#define BUILDINFO_ID_MAX 41      /* 20 bytes of SHA-1 as hex, NUL */

const char *buildinfo_version(void);

/* Lower-case hex of the build-id note, or "unknown" without one. */
const char *buildinfo_id(void);

/* The path this process was executed as (the kernel's AT_EXECFN, which is
 * the path given to execve: a symlink stays a symlink, so a package that
 * repoints /usr/sbin/ferryd is followed), made absolute with the current
 * directory. Call it before anything changes the directory. */
int buildinfo_exec_path(char *out, size_t len, char *err, size_t errlen);

/*
 * May a process running as euid execute path? It must be a regular,
 * executable file. As root (euid 0) also: neither the file nor its
 * directory (nor, for a symlink, the target's directory) may be writable by
 * group or others, and each must belong to root or to euid — a file
 * somebody else could replace is never run with root's privileges.
 * Reads the file system (stat); no other effect.
 */
int buildinfo_exec_check(const char *path, uid_t euid, char *err, size_t errlen);

#endif
