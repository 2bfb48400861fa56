/*
 * childproc — a child of ferryd between its start and exec; see
 * childproc.h. Raw system calls only: the child may share the parent's
 * memory (CLONE_VM), and the parent has a libev loop (and, under ASan,
 * threads of its own). Not instrumented by ASan either: in a CLONE_VM
 * child its stack poisoning would land in the parent's shadow memory.
 */
#include "supervisor/childproc.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((no_sanitize_address)) void
childproc_prepare(int fd, const struct childproc_creds *cr)
{
	sigset_t none;

	/* the parent's handlers must not run here: the default for each
	 * signal it catches, before the mask is emptied */
	for (int sig = 1; sig < _NSIG; sig++) {
		struct sigaction sa;

		if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa) == -1 ||
		    sa.sa_handler == SIG_IGN || sa.sa_handler == SIG_DFL)
			continue;
		sa.sa_handler = SIG_DFL;
		sa.sa_flags = 0;
		sigaction(sig, &sa, NULL);
	}
	if (fd != 3) {
		if (syscall(SYS_dup3, fd, 3, 0) == -1)
			_exit(CHILDPROC_EXIT_FD);
	} else if (syscall(SYS_fcntl, 3, F_SETFD, 0) == -1) {
		_exit(CHILDPROC_EXIT_FD);
	}
	if (cr->drop) {
		if (syscall(SYS_setgroups, 1, &cr->gid) == -1 || syscall(SYS_setgid, cr->gid) == -1 ||
		    syscall(SYS_setuid, cr->uid) == -1)
			_exit(CHILDPROC_EXIT_CREDS);
		if (syscall(SYS_setuid, 0) == 0)
			_exit(CHILDPROC_EXIT_CREDS);  /* privileges not really dropped */
	}
	if (syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		_exit(CHILDPROC_EXIT_CREDS);
	/* libev may have blocked signals in the parent; the kernel's mask is
	 * 8 bytes, not libc's sigset_t */
	sigemptyset(&none);
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, (size_t)(_NSIG / 8));
}
