/*
 * vgexec — LD_PRELOAD shim for bench/reqcost: runs ferry's workers under
 * valgrind.
 *
 * The supervisor starts a worker with execv("/proc/self/exe", argv). Under
 * valgrind that path names valgrind's own tool binary, so valgrind cannot
 * follow it (--trace-children fails in the loader); and a native ferryd
 * cannot be told to start a worker under a tool. With this library
 * preloaded into a native ferryd, that execv instead runs
 *
 *   valgrind $FERRY_VG_ARGS <the real ferryd> argv[1..]
 *
 * in the same process (same pid, same inherited descriptors: the worker's
 * control channel survives), with LD_PRELOAD removed from the environment.
 * Any other execv is passed through. FERRY_VG_ARGS: valgrind's options,
 * separated by spaces (no quoting); FERRY_VG (default /usr/bin/valgrind).
 *
 *   gcc -shared -fPIC -O2 -o vgexec.so bench/vgexec.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ARGS 256

int
execv(const char *path, char *const argv[])
{
	static int (*real_execv)(const char *, char *const[]);
	if (!real_execv)
		real_execv = (int (*)(const char *, char *const[]))dlsym(RTLD_NEXT, "execv");
	if (!real_execv) {
		errno = ENOSYS;
		return -1;
	}
	if (strcmp(path, "/proc/self/exe") != 0)
		return real_execv(path, argv);

	static char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return real_execv(path, argv);
	exe[n] = '\0';

	static char opts[4096];
	const char *o = getenv("FERRY_VG_ARGS");
	snprintf(opts, sizeof opts, "%s", o ? o : "--tool=callgrind");
	const char *vg = getenv("FERRY_VG");
	if (!vg || !*vg)
		vg = "/usr/bin/valgrind";

	static char *nargv[MAX_ARGS];
	int k = 0;
	nargv[k++] = (char *)vg;
	for (char *save = NULL, *t = strtok_r(opts, " ", &save); t && k < MAX_ARGS / 2;
	    t = strtok_r(NULL, " ", &save))
		nargv[k++] = t;
	nargv[k++] = exe;
	for (int i = 1; argv[i] && k < MAX_ARGS - 1; i++)
		nargv[k++] = argv[i];
	nargv[k] = NULL;
	unsetenv("LD_PRELOAD");
	return real_execv(vg, nargv);
}
