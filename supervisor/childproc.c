/*
 * childproc — a child of ferryd between fork and exec; see childproc.h.
 * Only async-signal-safe calls: the parent has a libev loop (and, under
 * ASan, threads of its own).
 */
#include "supervisor/childproc.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

void
childproc_prepare(int fd, const struct childproc_creds *cr)
{
	sigset_t none;

	/* libev may have blocked signals in the parent */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (fd != 3) {
		if (dup2(fd, 3) == -1)
			_exit(CHILDPROC_EXIT_FD);
	} else if (fcntl(3, F_SETFD, 0) == -1) {
		_exit(CHILDPROC_EXIT_FD);
	}
	if (cr->drop) {
		if (setgroups(1, &cr->gid) == -1 || setgid(cr->gid) == -1 || setuid(cr->uid) == -1)
			_exit(CHILDPROC_EXIT_CREDS);
		if (setuid(0) == 0)
			_exit(CHILDPROC_EXIT_CREDS);  /* privileges not really dropped */
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		_exit(CHILDPROC_EXIT_CREDS);
}
