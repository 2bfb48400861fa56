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
 *   idleconn kopen HOST:PORT N [BATCH] [INTERVAL_MS] [HOLD_S]
 *       The same, each connection an idle Kafka client's: it sends one
 *       ApiVersions v3 request (what a Java client sends first) as soon as
 *       it is connected and counts as opened only once the whole response
 *       (no error) arrived; a bad or missing answer counts as failed. Through
 *       a proxy this makes the proxy open its upstream connection and pass
 *       one request and response each way, however lazily it connects.
 *
 *   idleconn churn HOST:PORT CONC SECONDS
 *       Connection set-up rate with a Kafka handshake: CONC connections at a
 *       time, each one connect, ApiVersions v3 request, whole response,
 *       close, then the next, for SECONDS; prints
 *         "conns=N rate=R failed=F p50_ms=A p99_ms=B first_error=..."
 *       (R per second; latency from connect() to the last byte of the
 *       response).
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

/* ApiVersions v3 (request header v2): what the Java client sends first on
 * every connection. Returns its length. */
static size_t
apiversions_req(unsigned char *b, int32_t corr)
{
	static const char cid[] = "idleconn", sw[] = "ferry-bench", ver[] = "1";
	size_t n = 4;
	b[n++] = 0, b[n++] = 18;              /* api_key ApiVersions */
	b[n++] = 0, b[n++] = 3;               /* api_version */
	b[n++] = (unsigned char)(corr >> 24), b[n++] = (unsigned char)(corr >> 16);
	b[n++] = (unsigned char)(corr >> 8), b[n++] = (unsigned char)corr;
	b[n++] = 0, b[n++] = (unsigned char)(sizeof cid - 1);
	memcpy(b + n, cid, sizeof cid - 1), n += sizeof cid - 1;
	b[n++] = 0;                           /* header tagged fields */
	b[n++] = (unsigned char)sizeof sw;    /* compact string: length + 1 */
	memcpy(b + n, sw, sizeof sw - 1), n += sizeof sw - 1;
	b[n++] = (unsigned char)sizeof ver;
	memcpy(b + n, ver, sizeof ver - 1), n += sizeof ver - 1;
	b[n++] = 0;                           /* body tagged fields */
	uint32_t len = (uint32_t)(n - 4);
	b[0] = (unsigned char)(len >> 24), b[1] = (unsigned char)(len >> 16);
	b[2] = (unsigned char)(len >> 8), b[3] = (unsigned char)len;
	return n;
}

/* A response being read: the 4-byte size, then the body. */
struct resp {
	unsigned char head[10];   /* size, correlation id, error code */
	uint32_t got, want;       /* bytes read; 4 + size once the size is in */
};

/* Reads what fd has of the response. 1: complete and well-formed (the
 * correlation id matches, error code 0), 0: need more, -1: EOF, error or a
 * bad response (why says which). */
static int
resp_read(int fd, struct resp *r, int32_t corr, const char **why)
{
	unsigned char buf[4096];
	for (;;) {
		ssize_t k = read(fd, buf, sizeof buf);
		if (k == 0) {
			*why = "eof";
			return -1;
		}
		if (k < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			*why = strerror(errno);
			return -1;
		}
		for (ssize_t i = 0; i < k; i++, r->got++)
			if (r->got < sizeof r->head)
				r->head[r->got] = buf[i];
		if (!r->want && r->got >= 4) {
			uint32_t size = (uint32_t)r->head[0] << 24 | (uint32_t)r->head[1] << 16 |
			    (uint32_t)r->head[2] << 8 | r->head[3];
			if (size < 6 || size > (1u << 20)) {
				*why = "bad-size";
				return -1;
			}
			r->want = 4 + size;
		}
		if (r->want && r->got > r->want) {
			*why = "extra-bytes";
			return -1;
		}
		if (r->want && r->got == r->want) {
			int32_t c = (int32_t)((uint32_t)r->head[4] << 24 | (uint32_t)r->head[5] << 16 |
			    (uint32_t)r->head[6] << 8 | r->head[7]);
			if (c != corr) {
				*why = "bad-correlation-id";
				return -1;
			}
			if (r->head[8] || r->head[9]) {
				*why = "error-code";
				return -1;
			}
			return 1;
		}
	}
}

static int
parse_target(const char *target, struct sockaddr_in *sin)
{
	char host[256];
	const char *colon = strrchr(target, ':');
	if (!colon || (size_t)(colon - target) >= sizeof host) {
		fprintf(stderr, "idleconn: want HOST:PORT\n");
		return -1;
	}
	memcpy(host, target, (size_t)(colon - target));
	host[colon - target] = 0;
	*sin = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1)) };
	if (inet_pton(AF_INET, host, &sin->sin_addr) != 1) {
		fprintf(stderr, "idleconn: want a numeric IPv4 host\n");
		return -1;
	}
	return 0;
}

static int
open_conns(const char *target, int n, int batch, int interval_ms, double hold, int kafka)
{
	struct sockaddr_in sin;
	if (parse_target(target, &sin) != 0)
		return 2;
	unsigned char req[64];
	size_t reqlen = apiversions_req(req, 1);
	struct resp *rs = kafka ? calloc((size_t)n, sizeof *rs) : NULL;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int *fds = calloc((size_t)n, sizeof *fds);
	/* 0 connecting, 1 open, 2 failed, 3 closed, 4 waiting for ApiVersions */
	char *st = calloc((size_t)n, 1);
	int started = 0, opened = 0, failed = 0, closed = 0, pending = 0;
	char first_err[128] = "none";
	struct epoll_event evs[512];
	double next = now(), progress = now();
	int last_done = 0;

	while (!stop && (started < n || pending > 0)) {
		/* a peer that never answers: give up on those still pending
		 * after 20 s without progress */
		if (opened + failed != last_done) {
			last_done = opened + failed;
			progress = now();
		} else if (started == n && now() - progress > 20) {
			if (!failed)
				snprintf(first_err, sizeof first_err, "timeout");
			failed += pending;
			pending = 0;
			break;
		}
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
				struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)idx };
				epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
				if (!kafka) {
					st[idx] = 1;
					opened++;
				} else if (write(fd, req, reqlen) != (ssize_t)reqlen) {
					if (!failed)
						snprintf(first_err, sizeof first_err, "write:%s", strerror(errno));
					failed++;
					st[idx] = 2;
					epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
					continue;
				} else {
					st[idx] = 4;   /* waiting for the ApiVersions response */
					pending++;
					continue;
				}
			}
			if (st[idx] == 4) {
				const char *why = "";
				int r = resp_read(fd, &rs[idx], 1, &why);
				if (r == 0)
					continue;
				pending--;
				if (r < 0) {
					if (!failed)
						snprintf(first_err, sizeof first_err, "apiversions:%s", why);
					failed++;
					st[idx] = 2;
					epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
					continue;
				}
				st[idx] = 1;
				opened++;
				continue;
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

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* churn: CONC slots, each a loop of connect, ApiVersions, response, close. */
static int
churn(const char *target, int conc, double secs)
{
	struct sockaddr_in sin;
	if (parse_target(target, &sin) != 0 || conc < 1 || conc > 1024 || secs <= 0)
		return 2;
	struct slot {
		int fd;
		int state;        /* 0 connecting, 1 waiting for the response */
		double t0;
		struct resp r;
	} *sl = calloc((size_t)conc, sizeof *sl);
	size_t cap = 1 << 16, nlat = 0;
	double *lat = malloc(cap * sizeof *lat);
	unsigned char req[64];
	size_t reqlen = apiversions_req(req, 7);
	long done = 0, failed = 0;
	char first_err[128] = "none";
	int ep = epoll_create1(EPOLL_CLOEXEC);
	double end = now() + secs;

#define CHURN_FAIL(what, detail)                                                           \
	do {                                                                               \
		if (!failed)                                                               \
			snprintf(first_err, sizeof first_err, "%s:%s", what, detail);      \
		failed++;                                                                  \
	} while (0)

	/* (re)starts slot i; a failed socket() or connect() is counted and
	 * retried at the next turn of the loop */
	int need_start = conc;
	for (int i = 0; i < conc; i++)
		sl[i].fd = -1;
	while (!stop) {
		double t = now();
		if (t >= end)
			break;
		for (int i = 0; need_start > 0 && i < conc; i++) {
			if (sl[i].fd >= 0)
				continue;
			int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
			if (fd < 0) {
				CHURN_FAIL("socket", strerror(errno));
				continue;
			}
			sl[i] = (struct slot){ .fd = fd, .state = 0, .t0 = now() };
			if (connect(fd, (struct sockaddr *)&sin, sizeof sin) == -1 && errno != EINPROGRESS) {
				CHURN_FAIL("connect", strerror(errno));
				close(fd);
				sl[i].fd = -1;
				continue;
			}
			struct epoll_event ev = { .events = EPOLLOUT | EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)i };
			epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
			need_start--;
		}
		struct epoll_event evs[1024];
		int m = epoll_wait(ep, evs, conc, 5);
		for (int k = 0; k < m; k++) {
			int i = (int)evs[k].data.u32;
			struct slot *s = &sl[i];
			const char *why = "";
			int bad = 0, fin = 0;
			if (s->state == 0) {
				int e = 0;
				socklen_t el = sizeof e;
				getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &e, &el);
				if (e) {
					CHURN_FAIL("connect", strerror(e));
					bad = 1;
				} else if (write(s->fd, req, reqlen) != (ssize_t)reqlen) {
					CHURN_FAIL("write", strerror(errno));
					bad = 1;
				} else {
					s->state = 1;
					struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)i };
					epoll_ctl(ep, EPOLL_CTL_MOD, s->fd, &ev);
				}
			} else {
				int r = resp_read(s->fd, &s->r, 7, &why);
				if (r < 0) {
					CHURN_FAIL("apiversions", why);
					bad = 1;
				} else if (r > 0) {
					fin = 1;
				}
			}
			if (fin) {
				if (nlat == cap) {
					cap *= 2;
					lat = realloc(lat, cap * sizeof *lat);
				}
				lat[nlat++] = (now() - s->t0) * 1e3;
				done++;
			}
			if (bad || fin) {
				close(s->fd);   /* also leaves the epoll set */
				s->fd = -1;
				need_start++;
			}
		}
	}
#undef CHURN_FAIL
	for (int i = 0; i < conc; i++)
		if (sl[i].fd >= 0)
			close(sl[i].fd);
	qsort(lat, nlat, sizeof *lat, cmp_double);
	double p50 = nlat ? lat[(size_t)(0.5 * (double)(nlat - 1))] : -1;
	double p99 = nlat ? lat[(size_t)(0.99 * (double)(nlat - 1))] : -1;
	printf("conns=%ld rate=%.0f failed=%ld p50_ms=%.3f p99_ms=%.3f first_error=%s\n", done,
	    (double)done / secs, failed, p50, p99, first_err);
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
	if (argc >= 4 && (!strcmp(argv[1], "open") || !strcmp(argv[1], "kopen")))
		return open_conns(argv[2], atoi(argv[3]), argc > 4 ? atoi(argv[4]) : 100,
		    argc > 5 ? atoi(argv[5]) : 10, argc > 6 ? atof(argv[6]) : 3, argv[1][0] == 'k');
	if (argc == 5 && !strcmp(argv[1], "churn"))
		return churn(argv[2], atoi(argv[3]), atof(argv[4]));
	fprintf(stderr, "usage: idleconn sink [PORT] | idleconn open|kopen HOST:PORT N [BATCH] "
			"[INTERVAL_MS] [HOLD_S] | idleconn churn HOST:PORT CONC SECONDS\n");
	return 2;
}
