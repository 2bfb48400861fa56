/*
 * testhook — sandbox probes for the integration tests; see testhook.h.
 */
#include "common/testhook.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef FERRY_SANITIZER
#include <sanitizer/lsan_interface.h>
#endif
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"

static const char *const testhook_names[TESTHOOK_SIGNALS] = {
	"open /etc/passwd", "execve", "fork", "bind", "leak", "heap overflow",
};

#define TESTHOOK_SCRAMBLE 0x5a5a5a5a5a5a5a5aull
static volatile uintptr_t testhook_hidden[8];

static ev_signal testhook_sig[TESTHOOK_SIGNALS];

/* The attempt: returns what happened (the sandbox kills before it returns). */
static const char *
testhook_try(int k, char *buf, size_t len)
{
	switch (k) {
	case 0: {
		int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			close(fd);
		snprintf(buf, len, "%s", fd >= 0 ? "opened" : strerror(errno));
		break;
	}
	case 1: {
		char *const argv[] = { "ferry-testhook", NULL };
		execve("/nonexistent/ferry-testhook", argv, argv + 1);
		snprintf(buf, len, "%s", strerror(errno));
		break;
	}
	case 2: {
		pid_t pid = fork();
		if (pid == 0)
			_exit(0);
		if (pid > 0)
			waitpid(pid, NULL, 0);
		snprintf(buf, len, "%s", pid > 0 ? "forked" : strerror(errno));
		break;
	}
	case 4:
		/* only a scrambled copy of each pointer is kept: nothing the
		 * conservative leak check scans refers to the blocks */
		for (int i = 0; i < 8; i++)
			testhook_hidden[i] = (uintptr_t)malloc(4242) ^ TESTHOOK_SCRAMBLE;
#ifdef FERRY_SANITIZER
		/* report now, from inside the sandbox, and go on */
		snprintf(buf, len, "leaked 8 blocks of 4242 bytes, leak check: %d",
		    __lsan_do_recoverable_leak_check());
#else
		snprintf(buf, len, "leaked 8 blocks of 4242 bytes, no leak check in this build");
#endif
		break;
	case 5: {
		static volatile size_t past = 16;  /* opaque to the compiler */
		volatile char *p = malloc(16);
		char c = p[past];  /* AddressSanitizer: heap-buffer-overflow */
		free((void *)p);
		snprintf(buf, len, "read %d past the block", c);
		break;
	}
	case 3: {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in a = { .sin_family = AF_INET };
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		int r = fd >= 0 ? bind(fd, (struct sockaddr *)&a, sizeof a) : -1;
		snprintf(buf, len, "%s", r == 0 ? "bound" : strerror(errno));
		if (fd >= 0)
			close(fd);
		break;
	}
	default:
		snprintf(buf, len, "no such probe");
		break;
	}
	return buf;
}

static void
testhook_cb(struct ev_loop *loop, ev_signal *s, int revents)
{
	(void)loop;
	(void)revents;
	int k = (int)(s - testhook_sig);
	char out[128];
	log_warn("test hook: sandbox probe", "probe=\"%s\"", testhook_names[k]);
	testhook_try(k, out, sizeof out);
	log_warn("test hook: sandbox probe survived", "probe=\"%s\" outcome=\"%s\"",
	    testhook_names[k], out);
}

void
testhook_start(struct ev_loop *loop)
{
#ifdef FERRY_SANITIZER
	int n = TESTHOOK_SIGNALS;
#else
	int n = 4;  /* the sanitizer probes need a sanitizer */
#endif
	for (int k = 0; k < n; k++) {
		ev_signal_init(&testhook_sig[k], testhook_cb, SIGRTMIN + 1 + k);
		ev_signal_start(loop, &testhook_sig[k]);
	}
}
