/*
 * childproc — what a child of ferryd does between fork() and exec(), the
 * same for workers and for the admin process: its control channel on fd 3
 * (everything else is close-on-exec), the signal mask reset, and, when
 * ferryd runs as root, the drop to the configured `user` (its primary
 * group only) with a check that it cannot be undone, then
 * PR_SET_NO_NEW_PRIVS. Privileges are gone before the child's own code
 * runs at all.
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

/* In the child: fd becomes fd 3, the signal mask is emptied, credentials
 * are dropped per cr, no new privileges. Returns only when all of that
 * worked; otherwise the child _exit()s with one of the statuses above. */
void childproc_prepare(int fd, const struct childproc_creds *cr);

#endif
