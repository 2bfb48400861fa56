/*
 * childproc — what a child of ferryd does between its start and exec(),
 * the same for workers and for the admin process: the default action for
 * every signal the parent catches, its control channel on fd 3
 * (everything else is close-on-exec), and, when ferryd runs as root, the
 * drop to the configured `user` (its primary group only) with a check that
 * it cannot be undone, then PR_SET_NO_NEW_PRIVS and an empty signal mask.
 * Privileges are gone before the child's own code runs at all.
 *
 * The step runs in two kinds of child: a fork()ed one (the admin process)
 * and a clone(CLONE_VM|CLONE_VFORK) one (workers, started paced by the I/O
 * layer, sup_spawn.c), which shares the parent's memory until its exec.
 * So it touches no libc state and makes raw system calls: glibc's
 * setuid()/setgid()/setgroups() change the credentials of every thread of
 * the process through a signal to each (the setxid broadcast), and in a
 * child sharing the parent's memory that list is the parent's threads; the
 * raw calls change the calling task only, which in either child is all of
 * it. Handlers are reset before the mask is emptied because in the vfork
 * child a handler of the parent's would run on the parent's memory.
 */
#ifndef FERRY_SUPERVISOR_CHILDPROC_H
#define FERRY_SUPERVISOR_CHILDPROC_H

#include <stdbool.h>
#include <sys/types.h>

/* Exit statuses of a child that could not become what it should: fd 3
 * could not be set up (126), or the credentials not dropped (78, EX_CONFIG:
 * not worth restarting in a loop). The exec failing is 127. */
#define CHILDPROC_EXIT_FD    126
#define CHILDPROC_EXIT_CREDS 78
#define CHILDPROC_EXIT_EXEC  127

struct childproc_creds {
	bool drop;                      /* ferryd is root: become uid/gid */
	uid_t uid;
	gid_t gid;
};

/* In the child: handlers reset, fd becomes fd 3, credentials dropped per
 * cr, no new privileges, the signal mask emptied. Returns only when all of
 * that worked; otherwise the child _exit()s with one of the statuses
 * above. A parent that starts the child with clone(CLONE_VM) blocks every
 * signal around the clone (none may reach a handler before the reset). */
void childproc_prepare(int fd, const struct childproc_creds *cr);

#endif
