/*
 * idleconn — idle TCP connections for scripts/bench.
 *
 *   idleconn sink [PORT]
 *       Listens on 127.0.0.1:PORT (0 or none: ephemeral) with a large backlog,
 *       prints "PORT=n", then accepts and holds every connection (reading and
 *       discarding anything sent) until SIGTERM/SIGINT. The upstream of the
 *       proxy under test in the idle-connection runs: unlike librdkafka's mock
 *       cluster (backlog 5, one poll() thread) it takes thousands of connects.
 *
 *   idleconn open HOST:PORT N [BATCH] [INTERVAL_MS] [HOLD_S]
 *       Opens N connections, BATCH (default 100) every INTERVAL_MS (10), waits
 *       until each is connected or failed, prints
 *         "READY opened=X failed=Y closed=Z first_error=..."
 *       holds them HOLD_S seconds (default 3; counts those the peer closes),
 *       prints "DONE open=X closed=Z" and exits, closing all of them.
 *
 * Raise `ulimit -n` first: N connections need N descriptors here and 2N in
 * the proxy. Loopback only.
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
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static void
on_sig(int s)
{
	(void)s;
	stop = 1;
}

static double
now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int
sink(int port)
{
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t sl = sizeof sin;
	if (bind(lfd, (struct sockaddr *)&sin, sizeof sin) == -1 || listen(lfd, 65535) == -1 ||
	    getsockname(lfd, (struct sockaddr *)&sin, &sl) == -1) {
		perror("idleconn sink");
		return 1;
	}
	printf("PORT=%d\n", ntohs(sin.sin_port));
	fflush(stdout);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = lfd };
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	struct epoll_event evs[256];
	char buf[65536];
	while (!stop) {
		int n = epoll_wait(ep, evs, 256, 500);
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			if (fd == lfd) {
				int c;
				while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
					struct epoll_event ce = { .events = EPOLLIN, .data.fd = c };
					epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
				}
				if (errno == EMFILE || errno == ENFILE) {
					fprintf(stderr, "idleconn sink: accept: %s\n", strerror(errno));
					struct timespec ts = { 0, 10000000 };
					nanosleep(&ts, NULL);
				}
				continue;
			}
			ssize_t r = read(fd, buf, sizeof buf);
			if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
				close(fd);  /* also drops it from the epoll set */
		}
	}
	return 0;
}

static int
open_conns(const char *target, int n, int batch, int interval_ms, double hold)
{
	char host[256];
	int port;
	const char *colon = strrchr(target, ':');
	if (!colon || (size_t)(colon - target) >= sizeof host) {
		fprintf(stderr, "idleconn: want HOST:PORT\n");
		return 2;
	}
	memcpy(host, target, (size_t)(colon - target));
	host[colon - target] = 0;
	port = atoi(colon + 1);
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, host, &sin.sin_addr) != 1) {
		fprintf(stderr, "idleconn: want a numeric IPv4 host\n");
		return 2;
	}
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int *fds = calloc((size_t)n, sizeof *fds);
	char *st = calloc((size_t)n, 1);  /* 0 connecting, 1 open, 2 failed, 3 closed */
	int started = 0, opened = 0, failed = 0, closed = 0, pending = 0;
	char first_err[128] = "none";
	struct epoll_event evs[512];
	double next = now();

	while (!stop && (started < n || pending > 0)) {
		if (started < n && now() >= next) {
			for (int k = 0; k < batch && started < n; k++, started++) {
				int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
				if (fd < 0) {
					if (!failed)
						snprintf(first_err, sizeof first_err, "socket:%s", strerror(errno));
					failed++;
					st[started] = 2;
					fds[started] = -1;
					continue;
				}
				fds[started] = fd;
				if (connect(fd, (struct sockaddr *)&sin, sizeof sin) == -1 &&
				    errno != EINPROGRESS) {
					if (!failed)
						snprintf(first_err, sizeof first_err, "connect:%s", strerror(errno));
					failed++;
					st[started] = 2;
					close(fd);
					fds[started] = -1;
					continue;
				}
				struct epoll_event ev = { .events = EPOLLOUT | EPOLLIN | EPOLLRDHUP,
							  .data.u32 = (uint32_t)started };
				epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
				pending++;
			}
			next += interval_ms / 1000.0;
		}
		int m = epoll_wait(ep, evs, 512, 5);
		for (int i = 0; i < m; i++) {
			int idx = (int)evs[i].data.u32;
			int fd = fds[idx];
			if (st[idx] == 0) {
				int e = 0;
				socklen_t el = sizeof e;
				getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
				pending--;
				if (e) {
					if (!failed)
						snprintf(first_err, sizeof first_err, "connect:%s", strerror(e));
					failed++;
					st[idx] = 2;
					epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
					continue;
				}
				st[idx] = 1;
				opened++;
				struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)idx };
				epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
			}
			if (st[idx] == 1 && (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
				char b[512];
				ssize_t r = read(fd, b, sizeof b);
				if (r == 0 || (r < 0 && errno != EAGAIN)) {
					st[idx] = 3;
					closed++;
					epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
				}
			}
		}
	}
	printf("READY opened=%d failed=%d closed=%d first_error=%s\n", opened, failed, closed,
	    first_err);
	fflush(stdout);
	double end = now() + hold;
	while (!stop && now() < end) {
		int m = epoll_wait(ep, evs, 512, 100);
		for (int i = 0; i < m; i++) {
			int idx = (int)evs[i].data.u32;
			char b[512];
			ssize_t r = read(fds[idx], b, sizeof b);
			if (st[idx] == 1 && (r == 0 || (r < 0 && errno != EAGAIN))) {
				st[idx] = 3;
				closed++;
				epoll_ctl(ep, EPOLL_CTL_DEL, fds[idx], NULL);
			}
		}
	}
	printf("DONE open=%d closed=%d\n", opened - closed, closed);
	fflush(stdout);
	return 0;
}

int
main(int argc, char **argv)
{
	signal(SIGINT, on_sig);
	signal(SIGTERM, on_sig);
	signal(SIGPIPE, SIG_IGN);
	if (argc >= 2 && !strcmp(argv[1], "sink"))
		return sink(argc > 2 ? atoi(argv[2]) : 0);
	if (argc >= 4 && !strcmp(argv[1], "open"))
		return open_conns(argv[2], atoi(argv[3]), argc > 4 ? atoi(argv[4]) : 100,
		    argc > 5 ? atoi(argv[5]) : 10, argc > 6 ? atof(argv[6]) : 3);
	fprintf(stderr, "usage: idleconn sink [PORT] | idleconn open HOST:PORT N [BATCH] "
			"[INTERVAL_MS] [HOLD_S]\n");
	return 2;
}
