/*
 * acceptq — how the kernel spreads connections over N processes that accept
 * on one port, for scripts/bench (the `workers` section): the measurements
 * behind ferry's choice of one shared accept queue (docs/operations.md,
 * "Several workers per cluster").
 *
 *   acceptq MODE N CONNS [PACE_US]
 *
 * Forks N processes that accept on 127.0.0.1 and hold what they accept,
 * then opens CONNS connections (one every PACE_US µs, default 1000; 0 = as
 * fast as possible) and prints one line:
 *
 *   mode=MODE n=N conns=CONNS counts=A/B/...      (accepted per process)
 *   ... lost=L                                    (the *-kill modes)
 *
 * MODE:
 *   shared       one listening socket shared by all (what ferry does), each
 *                process waiting in its own epoll (level-triggered, the
 *                default libev uses) and accepting until EAGAIN;
 *   exclusive    the same with EPOLLEXCLUSIVE (wake one waiter);
 *   reuseport    one SO_REUSEPORT socket per process (the kernel hashes each
 *                connection to one socket);
 *   shared-kill, reuseport-kill
 *                process 1 does not accept (a worker that is hung or dead)
 *                while the connections arrive, then exits; process 0 accepts
 *                what it can. lost = connections reset by the kernel
 *                (queued on a socket that was closed), counted on the client
 *                side; with one shared queue process 0 serves them instead.
 *
 * Loopback only; every process it forks exits before it does.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 16

static void
die(const char *what)
{
	fprintf(stderr, "acceptq: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int
listener(int reuseport, uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd == -1)
		die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) == -1)
		die("SO_REUSEPORT");
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sin, sizeof sin) == -1 || listen(fd, 4096) == -1)
		die("bind/listen");
	return fd;
}

static uint16_t
port_of(int fd)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof sin;
	if (getsockname(fd, (struct sockaddr *)&sin, &sl) == -1)
		die("getsockname");
	return ntohs(sin.sin_port);
}

/* A child: accept on lfd until told to stop (a byte on ctl), then write its
 * count to res. Holds what it accepts (the descriptors stay open). */
static void
child(int lfd, int exclusive, int idle, int ctl, int res)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN | (exclusive ? EPOLLEXCLUSIVE : 0) };
	ev.data.fd = lfd;
	if (!idle && epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) == -1)
		die("epoll_ctl");
	struct epoll_event cev = { .events = EPOLLIN, .data.fd = ctl };
	epoll_ctl(ep, EPOLL_CTL_ADD, ctl, &cev);
	int count = 0;
	for (;;) {
		struct epoll_event got[4];
		int n = epoll_wait(ep, got, 4, -1);
		for (int i = 0; i < n; i++) {
			if (got[i].data.fd == ctl) {
				if (write(res, &count, sizeof count) != sizeof count)
					_exit(1);
				_exit(0);
			}
			int c;
			while ((c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) != -1)
				count++;
		}
	}
}

int
main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: acceptq shared|exclusive|reuseport|shared-kill|reuseport-kill "
				"N CONNS [PACE_US]\n");
		return 2;
	}
	const char *mode = argv[1];
	int n = atoi(argv[2]), conns = atoi(argv[3]), pace = argc > 4 ? atoi(argv[4]) : 1000;
	int reuse = strncmp(mode, "reuseport", 9) == 0;
	int excl = strcmp(mode, "exclusive") == 0;
	int kill1 = strstr(mode, "-kill") != NULL;
	if (n < 1 || n > MAX_PROCS || conns < 1 || (kill1 && n < 2) ||
	    (!reuse && !excl && strncmp(mode, "shared", 6) != 0)) {
		fprintf(stderr, "acceptq: bad arguments\n");
		return 2;
	}
	int *cfd = calloc((size_t)conns, sizeof *cfd);
	if (!cfd)
		die("calloc");
	int lfd[MAX_PROCS];
	lfd[0] = listener(reuse, 0);
	uint16_t port = port_of(lfd[0]);
	for (int i = 1; i < n; i++)
		lfd[i] = reuse ? listener(1, port) : lfd[0];
	int ctl[MAX_PROCS][2], res[MAX_PROCS][2];
	pid_t pid[MAX_PROCS];
	for (int i = 0; i < n; i++) {
		if (pipe(ctl[i]) == -1 || pipe(res[i]) == -1)
			die("pipe");
		pid[i] = fork();
		if (pid[i] == -1)
			die("fork");
		if (pid[i] == 0) {
			for (int k = 0; k < n; k++)
				if (reuse && k != i)
					close(lfd[k]);
			child(lfd[i], excl, kill1 && i == 1, ctl[i][0], res[i][1]);
		}
	}
	if (reuse)
		for (int i = 0; i < n; i++)
			close(lfd[i]);  /* only the children hold them */
	else
		close(lfd[0]);
	struct timespec gap = { 0, (long)pace * 1000 };
	usleep(100000);  /* children in epoll_wait */
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int failed = 0;
	for (int i = 0; i < conns; i++) {
		cfd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (cfd[i] == -1 || connect(cfd[i], (struct sockaddr *)&sin, sizeof sin) == -1)
			failed++;
		if (pace)
			nanosleep(&gap, NULL);
	}
	usleep(200000);
	int lost = 0;
	int counts[MAX_PROCS] = { 0 };
	if (kill1) {
		/* process 1 goes away with whatever is queued on its socket */
		if (write(ctl[1][1], "x", 1) != 1 || read(res[1][0], &counts[1], sizeof counts[1]) < 0)
			die("stop process 1");
		waitpid(pid[1], NULL, 0);
		usleep(300000);  /* process 0 accepts what it can */
		for (int i = 0; i < conns; i++) {
			char b;
			if (cfd[i] != -1 && recv(cfd[i], &b, 1, MSG_DONTWAIT) == -1 && errno == ECONNRESET)
				lost++;
		}
	}
	for (int i = 0; i < n; i++) {
		if (kill1 && i == 1)
			continue;
		if (write(ctl[i][1], "x", 1) != 1 || read(res[i][0], &counts[i], sizeof counts[i]) < 0)
			die("collect");
		waitpid(pid[i], NULL, 0);
	}
	printf("mode=%s n=%d conns=%d pace_us=%d failed=%d counts=", mode, n, conns, pace, failed);
	for (int i = 0; i < n; i++)
		printf("%s%d", i ? "/" : "", counts[i]);
	if (kill1)
		printf(" lost=%d", lost);
	printf("\n");
	for (int i = 0; i < conns; i++)
		if (cfd[i] != -1)
			close(cfd[i]);
	free(cfd);
	return 0;
}
