/*
 * splicerelay — the floor of a TCP relay on this machine, for scripts/bench:
 * accept, connect upstream, move bytes both ways, nothing else (no framing,
 * no parsing, no timers). What ferry costs per MB above it is the price of
 * being a Kafka proxy.
 *
 *   splicerelay [-m splice|copy] [-P PIPE_BYTES] LISTEN_PORT=UPSTREAM_PORT ...
 *
 * Every pair listens on 127.0.0.1:LISTEN_PORT and relays each connection to
 * 127.0.0.1:UPSTREAM_PORT. -m splice (default) moves every byte with
 * splice(2) through one pipe per direction (socket -> pipe -> socket,
 * SPLICE_F_MOVE|SPLICE_F_NONBLOCK; the pipe sized to -P bytes, default
 * 1 MiB, with F_SETPIPE_SZ); -m copy reads into a 64 KiB buffer per
 * direction and writes it out (the plain user-space relay, for reference).
 * One thread, level-triggered epoll, non-blocking sockets, TCP_NODELAY. It
 * prints READY once listening and runs until killed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_PAIRS 16
#define COPY_BUF (64 * 1024)

static bool use_splice = true;
static int pipe_bytes = 1 << 20;
static int ep;
static struct relay *dead;   /* closed during this batch of events */

struct dir {
	int src, dst;
	int pipe[2];          /* splice mode */
	char *buf;            /* copy mode */
	size_t off, len;      /* copy: bytes [off, len) to write; splice: len in pipe */
	bool eof;             /* src said EOF and dst was shut down once empty */
	bool rd_blocked, wr_blocked;
};

struct relay {
	int kind;             /* 0 listener, 1 connection, 2 closed (freed after the batch) */
	struct relay *next_dead;
	int fd[2];            /* client, upstream */
	struct dir d[2];      /* client -> upstream, upstream -> client */
	uint32_t ev[2];       /* what is watched on fd[i] */
	int up_port;
};

static void
die(const char *what)
{
	perror(what);
	exit(1);
}

static void
watch(struct relay *r, int i, uint32_t ev)
{
	if (r->ev[i] == ev)
		return;
	struct epoll_event e = { .events = ev, .data.ptr = r };
	if (epoll_ctl(ep, EPOLL_CTL_MOD, r->fd[i], &e) == -1)
		die("epoll_ctl mod");
	r->ev[i] = ev;
}

static void
relay_close(struct relay *r)
{
	for (int i = 0; i < 2; i++) {
		close(r->fd[i]);
		if (use_splice) {
			close(r->d[i].pipe[0]);
			close(r->d[i].pipe[1]);
		}
		free(r->d[i].buf);
	}
	r->kind = 2;
	r->next_dead = dead;
	dead = r;
}

/* Move what can move in one direction: -1 on error or when both are done. */
static int
dir_pump(struct dir *d)
{
	for (int rounds = 0; rounds < 16; rounds++) {
		d->rd_blocked = d->wr_blocked = false;
		ssize_t n;
		if (d->len > d->off) {
			if (use_splice)
				n = splice(d->pipe[0], NULL, d->dst, NULL, d->len,
				    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			else
				n = write(d->dst, d->buf + d->off, d->len - d->off);
			if (n == -1) {
				if (errno == EAGAIN) {
					d->wr_blocked = true;
					return 0;
				}
				return -1;
			}
			if (use_splice)
				d->len -= (size_t)n;
			else
				d->off += (size_t)n;
			continue;
		}
		d->off = d->len = 0;
		if (d->eof)
			return 0;
		if (use_splice)
			n = splice(d->src, NULL, d->pipe[1], NULL, (size_t)pipe_bytes,
			    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		else
			n = read(d->src, d->buf, COPY_BUF);
		if (n == -1) {
			if (errno == EAGAIN) {
				d->rd_blocked = true;
				return 0;
			}
			return -1;
		}
		if (n == 0) {
			d->eof = true;
			shutdown(d->dst, SHUT_WR);
			return 0;
		}
		d->len = (size_t)n;
	}
	/* enough for now: come back (level-triggered) */
	d->rd_blocked = d->len == 0;
	d->wr_blocked = d->len != 0;
	return 0;
}

static void
relay_step(struct relay *r)
{
	for (int i = 0; i < 2; i++)
		if (dir_pump(&r->d[i]) == -1) {
			relay_close(r);
			return;
		}
	if (r->d[0].eof && r->d[1].eof && !r->d[0].len && !r->d[1].len) {
		relay_close(r);
		return;
	}
	/* fd[0] (client): read for d[0], write for d[1]; fd[1] the reverse */
	for (int i = 0; i < 2; i++) {
		uint32_t ev = 0;
		if (r->d[i].rd_blocked && !r->d[i].eof)
			ev |= EPOLLIN;
		if (r->d[1 - i].wr_blocked)
			ev |= EPOLLOUT;
		watch(r, i, ev);
	}
}

static void
relay_accept(struct relay *l)
{
	for (;;) {
		int c = accept4(l->fd[0], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (c == -1) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				return;
			perror("accept");
			return;
		}
		int u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)l->up_port),
			.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		if (u == -1 || connect(u, (struct sockaddr *)&a, sizeof a) == -1) {
			perror("connect upstream");
			if (u != -1)
				close(u);
			close(c);
			continue;
		}
		fcntl(u, F_SETFL, O_NONBLOCK);
		int one = 1;
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		struct relay *r = calloc(1, sizeof *r);
		if (!r)
			die("calloc");
		r->kind = 1;
		r->fd[0] = c;
		r->fd[1] = u;
		for (int i = 0; i < 2; i++) {
			struct dir *d = &r->d[i];
			d->src = r->fd[i];
			d->dst = r->fd[1 - i];
			if (use_splice) {
				if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) == -1)
					die("pipe2");
				/* best effort: a smaller pipe only costs more calls */
				fcntl(d->pipe[1], F_SETPIPE_SZ, pipe_bytes);
				int sz = fcntl(d->pipe[1], F_GETPIPE_SZ);
				if (sz > 0 && sz < pipe_bytes)
					pipe_bytes = sz;
			} else {
				d->buf = malloc(COPY_BUF);
				if (!d->buf)
					die("malloc");
			}
			struct epoll_event e = { .events = EPOLLIN, .data.ptr = r };
			if (epoll_ctl(ep, EPOLL_CTL_ADD, r->fd[i], &e) == -1)
				die("epoll_ctl add");
			r->ev[i] = EPOLLIN;
		}
	}
}

int
main(int argc, char **argv)
{
	int opt;
	while ((opt = getopt(argc, argv, "m:P:")) != -1) {
		if (opt == 'm' && (!strcmp(optarg, "splice") || !strcmp(optarg, "copy")))
			use_splice = !strcmp(optarg, "splice");
		else if (opt == 'P' && atoi(optarg) > 0)
			pipe_bytes = atoi(optarg);
		else
			goto usage;
	}
	if (optind >= argc || argc - optind > MAX_PAIRS)
		goto usage;
	/* splice(2) into a socket whose peer is gone raises SIGPIPE */
	signal(SIGPIPE, SIG_IGN);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep == -1)
		die("epoll_create1");
	for (int i = optind; i < argc; i++) {
		int lp, up;
		if (sscanf(argv[i], "%d=%d", &lp, &up) != 2)
			goto usage;
		int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		int one = 1;
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)lp),
			.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		if (bind(s, (struct sockaddr *)&a, sizeof a) == -1 || listen(s, 128) == -1)
			die("bind/listen");
		struct relay *l = calloc(1, sizeof *l);
		if (!l)
			die("calloc");
		l->fd[0] = s;
		l->up_port = up;
		struct epoll_event e = { .events = EPOLLIN, .data.ptr = l };
		if (epoll_ctl(ep, EPOLL_CTL_ADD, s, &e) == -1)
			die("epoll_ctl");
	}
	printf("READY mode=%s pipe=%d\n", use_splice ? "splice" : "copy", use_splice ? pipe_bytes : 0);
	fflush(stdout);
	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(ep, evs, 64, -1);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		for (int i = 0; i < n; i++) {
			struct relay *r = evs[i].data.ptr;
			if (r->kind == 0)
				relay_accept(r);
			else if (r->kind == 1)
				relay_step(r);
		}
		while (dead) {
			struct relay *r = dead;
			dead = r->next_dead;
			free(r);
		}
	}
usage:
	fprintf(stderr, "usage: splicerelay [-m splice|copy] [-P PIPE_BYTES] LISTEN_PORT=UPSTREAM_PORT ...\n");
	return 2;
}
