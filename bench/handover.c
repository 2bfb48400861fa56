/*
 * handover — the load of scripts/bench's `handover` section: one ferry
 * cluster carrying idle and busy Kafka connections through a modifying
 * reload, as its clients see it.
 *
 *   handover -s CONTROL_SOCKET -c CLUSTER -f FERRYCTL (-r RELOAD_FILE | -U)
 *            -t HOST:PORT[,HOST:PORT...] [-i IDLE] [-b BUSY] [-I INTERVAL_MS]
 *            [-B BEFORE_S] [-A AFTER_S] [-T TIMEOUT_S]
 *
 * Opens IDLE connections (default 1,000; round-robin over the targets, at
 * most 64 being set up at a time), each sending one ApiVersions v0 and then
 * staying silent, and BUSY connections (default 50) that each send one
 * request every INTERVAL_MS (default 10; phases spread at random),
 * alternating ApiVersions v0 and Metadata v1 of topic "bench", one in flight
 * at a time. Every response's latency (request written -> last byte of the
 * response read) is recorded in the window in which it completes:
 *
 *   before   BEFORE_S seconds (default 5) after 1 s of warm-up;
 *   during   from the start of `FERRYCTL -s CONTROL_SOCKET reload RELOAD_FILE`
 *            until the cluster's status (GET /admin/clusters/CLUSTER on the
 *            control socket, polled every 10 ms) shows a lastReplacement
 *            from the generation that served before: the old generation is
 *            gone;
 *   after    AFTER_S seconds (default 2).
 *
 * With -U the event is an upgrade of ferryd itself instead of a reload
 * (`FERRYCTL -s CONTROL_SOCKET upgrade`, docs/design.md §11; whoever runs
 * this put the new executable in place first): "during" runs from its start
 * until the new ferryd reports the old one gone (GET /admin/config/status:
 * lastUpgradeAttempt.completedAt of the attempt whose predecessorPid is the
 * ferryd that served before); its counts (handed over, closed, forced) come
 * from there, reload_ms is the time to the commit and gone_ms to the end.
 *
 * A connection the peer closes or resets (EOF, ECONNRESET, a bad response)
 * counts as a client-visible disconnect; like a Kafka client it reconnects
 * at once: a busy one sends the request that was outstanding again (its
 * latency runs from its first send), an idle one sends its ApiVersions
 * again, so the load stays the same in both modes. After the `after`
 * window each idle connection sends one more ApiVersions: one not answered
 * within 10 s counts as a disconnect too.
 *
 * Prints one line of key=value pairs (scripts/bench's results.tsv fields):
 * the reload's timings, the lastReplacement counts, p50/p99/max latency
 * and request count per window, the median and maximum over the busy
 * connections of each one's slowest request during the reload (what one
 * client sees: the pause of its handover, or its reconnect), disconnects
 * per kind and window. Diagnostics
 * go to stderr, and so does ferryctl's output. Raises its own RLIMIT_NOFILE
 * soft limit to the hard limit. Loopback only.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum { W_SETUP, W_BEFORE, W_DURING, W_AFTER, W_CHECK, W_N };
static const char *const window_name[W_N] = { "setup", "before", "during", "after", "check" };

enum cstate {
	C_CONNECTING,   /* non-blocking connect in progress */
	C_WAIT,         /* a request written, its response not complete */
	C_READY,        /* nothing in flight */
	C_CLOSED,       /* gone (idle connections stay so) */
};

struct conn {
	int fd;
	int target;
	bool busy;
	enum cstate st;
	bool ever_ready;     /* its first ApiVersions was answered */
	bool retry;          /* busy: resend the outstanding request after reconnecting */
	bool reconnecting;   /* busy: connecting again after a disconnect */
	bool checked;        /* idle: the final ApiVersions was answered */
	int kind;            /* 0 ApiVersions v0, 1 Metadata v1 */
	int32_t corr;
	double sent_at;      /* first send of the outstanding request */
	double next_send;    /* busy: when to send the next one */
	double reconnect_at; /* busy: after a failed connect */
	/* response parsing */
	uint8_t hdr[10];     /* 4 length bytes, then corr (4) and error code (2) */
	size_t hdr_have;
	int64_t body_left;
	uint8_t out[96];
	size_t out_len, out_off;
};

struct samples {
	uint32_t *us;
	size_t n, cap;
};

/* One answered request of a busy connection: first send, completion. */
struct span {
	double sent, done;
	int conn;
};

/* --- shared between the event loop and the orchestrating thread ---------------- */
static atomic_int cur_window;
static double win_start[W_N + 1];  /* set by the orchestrator; read after it is joined */
static atomic_bool setup_done, setup_failed, check_wanted, check_done, stop_loop;
static volatile sig_atomic_t interrupted;

static struct {
	int reload_rc;
	double reload_ms;        /* ferryctl reload returned */
	double gone_ms;          /* lastReplacement from the old generation seen */
	long long old_gen, from_gen, to_gen, handed_over, drained, forced, duration_ms;
	bool got_replacement;
	char error[200];
} res;

static struct {
	const char *sock, *cluster, *ferryctl, *reload_file;
	bool upgrade;            /* -U: ferryctl upgrade instead of a reload */
	double before_s, after_s, timeout_s;
} opt;

static double
now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
sleep_s(double s)
{
	double end = now() + s;
	while (!interrupted && now() < end) {
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

static void
on_sig(int s)
{
	(void)s;
	interrupted = 1;
}

/* --- the admin API over the control socket ------------------------------------------ */

/* GET PATH on the control socket; returns the parsed JSON body of a 200, or NULL. */
static json_t *
admin_get(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", opt.sock);
	struct timeval tv = { 2, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) == -1) {
		close(fd);
		return NULL;
	}
	char req[512];
	int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: ferry\r\nConnection: close\r\n\r\n",
	    path);
	if (write(fd, req, (size_t)n) != n) {
		close(fd);
		return NULL;
	}
	size_t cap = 65536, len = 0;
	char *buf = malloc(cap);
	for (;;) {
		if (len + 1 >= cap)
			buf = realloc(buf, cap *= 2);
		ssize_t r = read(fd, buf + len, cap - len - 1);
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	buf[len] = 0;
	json_t *j = NULL;
	char *body = strstr(buf, "\r\n\r\n");
	if (len > 12 && !strncmp(buf + 9, "200", 3) && body)
		j = json_loads(body + 4, 0, NULL);
	free(buf);
	return j;
}

static long long
jint(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* --- the orchestrating thread: windows, reload, replacement ------------------------- */

static void *
orchestrate(void *arg)
{
	(void)arg;
	char path[300];
	snprintf(path, sizeof path, "/admin/clusters/%s", opt.cluster);
	while (!atomic_load(&setup_done) && !atomic_load(&setup_failed) && !interrupted)
		sleep_s(0.01);
	if (!atomic_load(&setup_done) || interrupted)
		goto out;
	sleep_s(1.0);  /* warm-up */
	json_t *j = admin_get(path);
	if (!j) {
		snprintf(res.error, sizeof res.error, "status_unavailable");
		goto out;
	}
	res.old_gen = jint(j, "generation");
	json_decref(j);
	long long old_pid = -1;
	if (opt.upgrade && (j = admin_get("/admin/health")) != NULL) {
		old_pid = jint(j, "pid");
		json_decref(j);
	}

	win_start[W_BEFORE] = now();
	atomic_store(&cur_window, W_BEFORE);
	sleep_s(opt.before_s);

	win_start[W_DURING] = now();
	atomic_store(&cur_window, W_DURING);
	double t0 = now();
	pid_t pid;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, 2, 1);
	char *argv[] = { (char *)opt.ferryctl, "-s", (char *)opt.sock,
		opt.upgrade ? "upgrade" : "reload", (char *)opt.reload_file, NULL };
	int e = posix_spawn(&pid, opt.ferryctl, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (e) {
		snprintf(res.error, sizeof res.error, "spawn_ferryctl:%s", strerror(e));
		goto out;
	}
	int status = 0;
	while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
		;
	res.reload_rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	res.reload_ms = (now() - t0) * 1000;
	if (res.reload_rc != 0) {
		snprintf(res.error, sizeof res.error, "%s_failed", opt.upgrade ? "upgrade" : "reload");
	} else if (opt.upgrade) {
		/* the old ferryd is gone once the new one says so */
		while (!interrupted && now() - t0 < opt.timeout_s) {
			j = admin_get("/admin/config/status");
			json_t *lu = j ? json_object_get(j, "lastUpgradeAttempt") : NULL;
			json_t *cn = lu ? json_object_get(lu, "connections") : NULL;
			if (lu && jint(lu, "predecessorPid") == old_pid &&
			    json_is_string(json_object_get(lu, "completedAt")) && json_is_object(cn)) {
				res.gone_ms = (now() - t0) * 1000;
				res.got_replacement = true;
				res.from_gen = res.old_gen;
				res.handed_over = jint(cn, "handedOver");
				res.drained = jint(cn, "closed");
				res.forced = jint(cn, "forced");
				res.duration_ms = jint(lu, "durationMs");
			}
			json_decref(j);
			if (res.got_replacement)
				break;
			sleep_s(0.01);
		}
		if (res.got_replacement && (j = admin_get(path)) != NULL) {
			res.to_gen = jint(j, "generation");
			json_decref(j);
		}
		if (!res.got_replacement)
			snprintf(res.error, sizeof res.error, "old_ferryd_not_gone");
	} else {
		while (!interrupted && now() - t0 < opt.timeout_s) {
			j = admin_get(path);
			json_t *lr = j ? json_object_get(j, "lastReplacement") : NULL;
			if (lr && jint(lr, "fromGeneration") == res.old_gen) {
				res.gone_ms = (now() - t0) * 1000;
				res.got_replacement = true;
				res.from_gen = jint(lr, "fromGeneration");
				res.to_gen = jint(lr, "toGeneration");
				res.handed_over = jint(lr, "handedOver");
				res.drained = jint(lr, "drained");
				res.forced = jint(lr, "forced");
				res.duration_ms = jint(lr, "durationMs");
			}
			json_decref(j);
			if (res.got_replacement)
				break;
			sleep_s(0.01);
		}
		if (!res.got_replacement)
			snprintf(res.error, sizeof res.error, "old_generation_not_gone");
	}
	win_start[W_AFTER] = now();
	atomic_store(&cur_window, W_AFTER);
	sleep_s(opt.after_s);
out:
	win_start[W_CHECK] = now();
	atomic_store(&cur_window, W_CHECK);
	atomic_store(&check_wanted, true);
	double t1 = now();
	while (!atomic_load(&check_done) && !interrupted && now() - t1 < 15)
		sleep_s(0.01);
	atomic_store(&stop_loop, true);
	return NULL;
}

/* --- connections ------------------------------------------------------------------ */

static struct sockaddr_in *targets;
static int ntargets;
static struct conn *conns;
static int nconns, nidle;
static int ep;
static struct samples win[W_N];
static struct span *spans;
static size_t nspans, capspans;
static long disc_busy[W_N], disc_idle[W_N];
static long reconnects, connect_failures, bad_responses, setup_errors;
static long down;  /* connections waiting to reconnect */
static long check_ok, check_failed;
static int32_t next_corr = 1;

static void
sample_add(struct samples *s, double us)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 65536;
		s->us = realloc(s->us, s->cap * sizeof *s->us);
	}
	s->us[s->n++] = us < 0 ? 0 : us > 4e9 ? 4000000000u : (uint32_t)us;
}

static void
put16(uint8_t *p, int v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void
put32(uint8_t *p, int32_t v)
{
	p[0] = (uint8_t)((uint32_t)v >> 24);
	p[1] = (uint8_t)((uint32_t)v >> 16);
	p[2] = (uint8_t)((uint32_t)v >> 8);
	p[3] = (uint8_t)v;
}

static int32_t
get32(const uint8_t *p)
{
	return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

/* A request frame with a v1 header: ApiVersions v0, or Metadata v1 of "bench". */
static size_t
build_request(uint8_t *b, int kind, int32_t corr)
{
	static const char cid[] = "ferry-bench";
	static const char topic[] = "bench";
	size_t n = 4;
	put16(b + n, kind ? 3 : 18), n += 2;
	put16(b + n, kind ? 1 : 0), n += 2;
	put32(b + n, corr), n += 4;
	put16(b + n, (int)sizeof cid - 1), n += 2;
	memcpy(b + n, cid, sizeof cid - 1), n += sizeof cid - 1;
	if (kind) {
		put32(b + n, 1), n += 4;
		put16(b + n, (int)sizeof topic - 1), n += 2;
		memcpy(b + n, topic, sizeof topic - 1), n += sizeof topic - 1;
	}
	put32(b, (int32_t)(n - 4));
	return n;
}

static void
arm(struct conn *c, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.u32 = (uint32_t)(c - conns) };
	epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static int
start_connect(struct conn *c)
{
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -1;
	int one = 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (connect(c->fd, (struct sockaddr *)&targets[c->target], sizeof targets[c->target]) == -1 &&
	    errno != EINPROGRESS) {
		close(c->fd);
		c->fd = -1;
		return -1;
	}
	c->st = C_CONNECTING;
	c->hdr_have = 0;
	c->body_left = -1;
	c->out_len = c->out_off = 0;
	struct epoll_event ev = { .events = EPOLLOUT | EPOLLIN | EPOLLRDHUP,
				  .data.u32 = (uint32_t)(c - conns) };
	epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
	return 0;
}

static void conn_lost(struct conn *c, double t);

/* Write what is queued; 0 done, 1 more to write, -1 error. */
static int
flush_out(struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR) {
				arm(c, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
				return 1;
			}
			return -1;
		}
		c->out_off += (size_t)w;
	}
	arm(c, EPOLLIN | EPOLLRDHUP);
	return 0;
}

/* Queue and write a request; sent_at is kept when it is a retry. */
static void
send_request(struct conn *c, double t, bool keep_sent_at)
{
	c->corr = next_corr++;
	c->hdr_have = 0;
	c->body_left = -1;
	c->out_len = build_request(c->out, c->kind, c->corr);
	c->out_off = 0;
	if (!keep_sent_at)
		c->sent_at = t;
	c->st = C_WAIT;
	if (flush_out(c) < 0)
		conn_lost(c, t);
}

static void
conn_lost(struct conn *c, double t)
{
	int w = atomic_load(&cur_window);
	if (c->fd >= 0) {
		epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->fd = -1;
	}
	if (!c->ever_ready) {
		/* never got its first answer: a set-up failure */
		setup_errors++;
		c->st = C_CLOSED;
		return;
	}
	/* Like a Kafka client: reconnect at once (after a failed connect: in
	 * 10 ms); a busy connection sends its outstanding request again, if
	 * any, an idle one its ApiVersions. */
	if (c->reconnecting) {
		connect_failures++;
		c->reconnect_at = t + 0.01;
	} else {
		if (c->busy)
			disc_busy[w]++;
		else
			disc_idle[w]++;
		c->retry = !c->busy || c->st == C_WAIT;
		c->reconnect_at = t;
	}
	c->reconnecting = true;
	c->st = C_CLOSED;
	down++;
}

static void
on_response(struct conn *c, double t)
{
	int w = atomic_load(&cur_window);
	int32_t corr = get32(c->hdr + 4);
	int err = c->kind == 0 && c->hdr_have >= 10 ? (c->hdr[8] << 8 | c->hdr[9]) : 0;
	if (corr != c->corr || err != 0) {
		bad_responses++;
		conn_lost(c, t);
		return;
	}
	c->st = C_READY;
	c->retry = false;
	if (!c->ever_ready) {
		c->ever_ready = true;
		if (c->busy)
			c->next_send = t + (double)rand() / RAND_MAX * 0.01;
		return;
	}
	if (!c->busy) {
		if (w == W_CHECK && !c->checked) {
			c->checked = true;
			check_ok++;
		}
		return;
	}
	if (nspans == capspans) {
		capspans = capspans ? capspans * 2 : 65536;
		spans = realloc(spans, capspans * sizeof *spans);
	}
	spans[nspans++] = (struct span){ c->sent_at, t, (int)(c - conns) };
	c->kind ^= 1;
}

static void
on_readable(struct conn *c, double t)
{
	uint8_t buf[65536];
	for (;;) {
		ssize_t r = recv(c->fd, buf, sizeof buf, 0);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
			conn_lost(c, t);
			return;
		}
		if (r < 0)
			return;
		size_t off = 0;
		while (off < (size_t)r) {
			if (c->st != C_WAIT) {  /* bytes nobody asked for */
				bad_responses++;
				conn_lost(c, t);
				return;
			}
			size_t got = (size_t)r - off;
			if (c->hdr_have < 4) {  /* the frame's length */
				size_t k = 4 - c->hdr_have < got ? 4 - c->hdr_have : got;
				memcpy(c->hdr + c->hdr_have, buf + off, k);
				c->hdr_have += k;
				off += k;
				if (c->hdr_have == 4) {
					c->body_left = get32(c->hdr);
					if (c->body_left < 4 || c->body_left > (1 << 24)) {
						bad_responses++;
						conn_lost(c, t);
						return;
					}
				}
				continue;
			}
			size_t k = (int64_t)got < c->body_left ? got : (size_t)c->body_left;
			if (c->hdr_have < sizeof c->hdr) {  /* correlation id, error code */
				size_t h = sizeof c->hdr - c->hdr_have < k ? sizeof c->hdr - c->hdr_have : k;
				memcpy(c->hdr + c->hdr_have, buf + off, h);
				c->hdr_have += h;
			}
			c->body_left -= (int64_t)k;
			off += k;
			if (c->body_left == 0) {
				on_response(c, t);
				if (c->fd < 0)
					return;
			}
		}
	}
}

static void
on_event(struct conn *c, uint32_t events, double t)
{
	if (c->fd < 0)
		return;
	if (c->st == C_CONNECTING) {
		int e = 0;
		socklen_t el = sizeof e;
		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &el);
		if (e || (events & (EPOLLERR | EPOLLHUP))) {
			conn_lost(c, t);
			return;
		}
		if (!(events & EPOLLOUT))
			return;
		/* connected: the first ApiVersions, or the request to retry */
		c->reconnecting = false;
		if (!c->ever_ready) {
			c->kind = 0;
			send_request(c, t, false);
		} else if (c->retry) {
			if (!c->busy)
				c->kind = 0;
			send_request(c, t, c->busy);
		} else {
			c->st = C_READY;
			arm(c, EPOLLIN | EPOLLRDHUP);
		}
		return;
	}
	if ((events & EPOLLOUT) && c->out_off < c->out_len && flush_out(c) < 0) {
		conn_lost(c, t);
		return;
	}
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		on_readable(c, t);
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static double
pct(const struct samples *s, double p)
{
	if (!s->n)
		return -1;
	size_t i = (size_t)(p / 100.0 * (double)(s->n - 1) + 0.5);
	return s->us[i];
}

static int
parse_targets(char *list)
{
	int cap = 8;
	targets = calloc((size_t)cap, sizeof *targets);
	for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
		char *colon = strrchr(tok, ':');
		if (!colon)
			return -1;
		*colon = 0;
		if (ntargets == cap)
			targets = realloc(targets, (size_t)(cap *= 2) * sizeof *targets);
		struct sockaddr_in *s = &targets[ntargets++];
		memset(s, 0, sizeof *s);
		s->sin_family = AF_INET;
		s->sin_port = htons((uint16_t)atoi(colon + 1));
		if (inet_pton(AF_INET, tok, &s->sin_addr) != 1)
			return -1;
	}
	return ntargets ? 0 : -1;
}

int
main(int argc, char **argv)
{
	int nbusy = 50, interval_ms = 10;
	nidle = 1000;
	opt.before_s = 5;
	opt.after_s = 2;
	opt.timeout_s = 60;
	char *tlist = NULL;
	int o;
	while ((o = getopt(argc, argv, "s:c:f:r:Ut:i:b:I:B:A:T:")) != -1) {
		switch (o) {
		case 's': opt.sock = optarg; break;
		case 'c': opt.cluster = optarg; break;
		case 'f': opt.ferryctl = optarg; break;
		case 'r': opt.reload_file = optarg; break;
		case 'U': opt.upgrade = true; break;
		case 't': tlist = optarg; break;
		case 'i': nidle = atoi(optarg); break;
		case 'b': nbusy = atoi(optarg); break;
		case 'I': interval_ms = atoi(optarg); break;
		case 'B': opt.before_s = atof(optarg); break;
		case 'A': opt.after_s = atof(optarg); break;
		case 'T': opt.timeout_s = atof(optarg); break;
		default: goto usage;
		}
	}
	if (!opt.sock || !opt.cluster || !opt.ferryctl || !(opt.reload_file || opt.upgrade) ||
	    (opt.reload_file && opt.upgrade) || !tlist ||
	    parse_targets(tlist) == -1 || nidle < 0 || nbusy < 1 || interval_ms < 1) {
usage:
		fprintf(stderr, "usage: handover -s SOCK -c CLUSTER -f FERRYCTL (-r RELOAD_FILE | -U) "
				"-t HOST:PORT[,...] [-i IDLE] [-b BUSY] [-I INTERVAL_MS] [-B BEFORE_S] "
				"[-A AFTER_S] [-T TIMEOUT_S]\n");
		return 2;
	}
	signal(SIGINT, on_sig);
	signal(SIGTERM, on_sig);
	signal(SIGPIPE, SIG_IGN);
	srand((unsigned)getpid());

	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < (rlim_t)(nidle + nbusy + 64)) {
		fprintf(stderr, "handover: RLIMIT_NOFILE %llu is too small for %d connections\n",
		    (unsigned long long)rl.rlim_cur, nidle + nbusy);
		return 1;
	}

	nconns = nidle + nbusy;
	conns = calloc((size_t)nconns, sizeof *conns);
	for (int i = 0; i < nconns; i++) {
		conns[i].fd = -1;
		conns[i].busy = i >= nidle;
		conns[i].target = i % ntargets;
		conns[i].st = C_CLOSED;
	}
	ep = epoll_create1(EPOLL_CLOEXEC);
	pthread_t th;
	pthread_create(&th, NULL, orchestrate, NULL);

	struct epoll_event evs[512];
	int started = 0;
	double t_start = now(), setup_ms = -1;
	bool checks_sent = false;
	double check_deadline = 0;
	while (!atomic_load(&stop_loop) && !interrupted) {
		double t = now();
		/* set-up: at most 64 connections being opened at a time */
		if (started < nconns) {
			int inflight = 0;
			for (int i = 0; i < started; i++)
				if (!conns[i].ever_ready && conns[i].st != C_CLOSED)
					inflight++;
			while (started < nconns && inflight < 64) {
				if (start_connect(&conns[started]) == -1)
					setup_errors++;
				else
					inflight++;
				started++;
			}
		} else if (setup_ms < 0) {
			bool all = true;
			for (int i = 0; i < nconns && all; i++)
				if (!conns[i].ever_ready && conns[i].st != C_CLOSED)
					all = false;
			if (all) {
				setup_ms = (t - t_start) * 1000;
				if (setup_errors)
					atomic_store(&setup_failed, true);
				else
					atomic_store(&setup_done, true);
			} else if (t - t_start > 60) {
				atomic_store(&setup_failed, true);
				setup_ms = (t - t_start) * 1000;
			}
		}
		/* reconnects (idle ones only looked at while some are down),
		 * then the busy connections' due sends */
		double next = t + 0.01;
		for (int i = down ? 0 : nidle; i < nconns; i++) {
			struct conn *c = &conns[i];
			if (!c->ever_ready)
				continue;
			if (c->st == C_CLOSED) {
				if (t >= c->reconnect_at) {
					reconnects++;
					down--;
					if (start_connect(c) == -1)
						conn_lost(c, t);
				} else if (c->reconnect_at < next) {
					next = c->reconnect_at;
				}
				continue;
			}
			if (!c->busy)
				continue;
			if (c->st != C_READY)
				continue;
			if (t >= c->next_send) {
				c->next_send += interval_ms / 1000.0;
				if (c->next_send < t)
					c->next_send = t;  /* late: do not burst to catch up */
				send_request(c, t, false);
			}
			if (c->st == C_READY && c->next_send < next)
				next = c->next_send;
		}
		/* the final check of the idle connections */
		if (atomic_load(&check_wanted) && !checks_sent) {
			checks_sent = true;
			check_deadline = t + 10;
			for (int i = 0; i < nidle; i++) {
				struct conn *c = &conns[i];
				if (c->ever_ready && c->st == C_READY) {
					c->kind = 0;
					send_request(c, t, false);
				}
			}
		}
		if (checks_sent && !atomic_load(&check_done)) {
			long pending = 0;
			for (int i = 0; i < nidle; i++)
				if (conns[i].ever_ready && !conns[i].checked && conns[i].st == C_WAIT)
					pending++;
			if (!pending || t >= check_deadline)
				atomic_store(&check_done, true);
		}
		int timeout = (int)((next - t) * 1000);
		if (timeout < 0)
			timeout = 0;
		if (timeout > 10)
			timeout = 10;
		int m = epoll_wait(ep, evs, 512, timeout);
		t = now();
		for (int k = 0; k < m; k++)
			on_event(&conns[evs[k].data.u32], evs[k].events, t);
	}
	pthread_join(th, NULL);

	/* idle connections: disconnected before the check, or not answering it */
	long idle_ready = 0, idle_unanswered = 0;
	for (int i = 0; i < nidle; i++) {
		if (!conns[i].ever_ready)
			continue;
		idle_ready++;
		if (!conns[i].checked && conns[i].st != C_CLOSED)
			idle_unanswered++;
	}
	check_failed = idle_ready - check_ok;
	long idle_disc = 0, busy_disc = 0;
	for (int w = 0; w < W_N; w++)
		idle_disc += disc_idle[w], busy_disc += disc_busy[w];

	printf("idle=%d busy=%d interval_ms=%d setup_ms=%.0f setup_errors=%ld idle_ready=%ld "
	       "reload_rc=%d reload_ms=%.0f gone_ms=%.0f old_gen=%lld to_gen=%lld handed_over=%lld "
	       "drained=%lld forced=%lld duration_ms=%lld",
	    nidle, nbusy, interval_ms, setup_ms, setup_errors, idle_ready, res.reload_rc,
	    res.reload_ms, res.got_replacement ? res.gone_ms : -1, res.old_gen,
	    res.got_replacement ? res.to_gen : -1, res.got_replacement ? res.handed_over : -1,
	    res.got_replacement ? res.drained : -1, res.got_replacement ? res.forced : -1,
	    res.got_replacement ? res.duration_ms : -1);
	/* Each request's latency goes to the window it lies in; "during" takes
	 * every request in flight at any moment of the reload window. */
	win_start[W_N] = now();
	struct samples worst = { 0 };  /* per busy connection: its slowest request during */
	uint32_t *cw = calloc((size_t)nconns, sizeof *cw);
	for (size_t i = 0; i < nspans; i++) {
		const struct span *sp = &spans[i];
		int w = -1;
		if (!win_start[W_BEFORE])
			continue;
		if (sp->sent >= win_start[W_BEFORE] && win_start[W_DURING] && sp->done < win_start[W_DURING])
			w = W_BEFORE;
		else if (win_start[W_DURING] && sp->done >= win_start[W_DURING] &&
		    (!win_start[W_AFTER] || sp->sent < win_start[W_AFTER]))
			w = W_DURING;
		else if (win_start[W_AFTER] && sp->sent >= win_start[W_AFTER] &&
		    sp->done < win_start[W_CHECK])
			w = W_AFTER;
		if (w < 0)
			continue;
		double us = (sp->done - sp->sent) * 1e6;
		sample_add(&win[w], us);
		if (w == W_DURING && us > cw[sp->conn])
			cw[sp->conn] = (uint32_t)us;
	}
	for (int i = nidle; i < nconns; i++)
		if (cw[i])
			sample_add(&worst, cw[i]);
	qsort(worst.us, worst.n, sizeof *worst.us, cmp_u32);
	for (int w = W_BEFORE; w <= W_AFTER; w++) {
		struct samples *s = &win[w];
		qsort(s->us, s->n, sizeof *s->us, cmp_u32);
		printf(" %s_n=%zu %s_p50_us=%.0f %s_p99_us=%.0f %s_max_us=%.0f", window_name[w], s->n,
		    window_name[w], pct(s, 50), window_name[w], pct(s, 99), window_name[w],
		    s->n ? (double)s->us[s->n - 1] : -1.0);
	}
	printf(" during_conn_worst_p50_us=%.0f during_conn_worst_max_us=%.0f", pct(&worst, 50),
	    worst.n ? (double)worst.us[worst.n - 1] : -1.0);
	for (int w = W_BEFORE; w <= W_AFTER; w++)
		printf(" %s_window_ms=%.0f", window_name[w],
		    win_start[w] && win_start[w + 1] ? (win_start[w + 1] - win_start[w]) * 1000 : -1.0);
	printf(" busy_disconnects=%ld busy_disconnects_during=%ld idle_disconnects=%ld "
	       "idle_disconnects_during=%ld idle_check_ok=%ld idle_check_failed=%ld "
	       "idle_check_unanswered=%ld reconnects=%ld connect_failures=%ld bad_responses=%ld "
	       "client_disconnects=%ld%s%s\n",
	    busy_disc, disc_busy[W_DURING], idle_disc, disc_idle[W_DURING], check_ok, check_failed,
	    idle_unanswered, reconnects, connect_failures, bad_responses,
	    busy_disc + idle_disc + idle_unanswered, res.error[0] ? " error=" : "", res.error);
	fflush(stdout);
	return res.error[0] || setup_errors ? 1 : 0;
}
