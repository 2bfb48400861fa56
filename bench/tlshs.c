/*
 * tlshs — TLS handshake load and idle TLS connections for scripts/bench.
 *
 *   tlshs hs HOST:PORT [-c CONC] [-d SECS] [-w WARMUP_SECS] [-r] [-p PID,...]
 *       CONC processes (default 4) each connect, complete a TLS handshake and
 *       close (close_notify, then close(2)), in a loop, for -w seconds of
 *       warm-up and -d seconds measured. Full handshakes by default; -r
 *       offers the newest session each process holds (a TLS 1.3 ticket, or
 *       a TLS 1.2 ticket or session id) and, after every handshake, waits up
 *       to 1 s for the server's next ticket before closing: resumed
 *       handshakes. Prints one line:
 *         mode=full|resumed conc=C handshakes=N resumed=R failed=F secs=S
 *         hs_per_s=X cpu_ms=M self_cpu_ms=M version=TLSv1.3 cipher=NAME
 *       cpu_ms is the utime+stime of the -p processes (the proxy) during the
 *       measured window, self_cpu_ms that of tlshs and its children.
 *       resumed counts the measured handshakes the server resumed
 *       (SSL_session_reused); with -r and resumed well below handshakes
 *       the server did not resume.
 *
 *   tlshs hold HOST:PORT N HOLD_S
 *       Opens N TLS connections one after the other (each handshake
 *       complete), prints "READY opened=X failed=Y first_error=...", holds
 *       them HOLD_S seconds, prints "DONE open=X closed=Z" (Z: closed by
 *       the peer meanwhile) and exits, closing all of them.
 *
 * The peer's certificate is not verified (the load is the server's, not
 * the client's); the protocol version and cipher are what the server
 * picks (scripts/bench pins them on the servers). Loopback only. Raise
 * `ulimit -n` first for large N.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PIDS 64
#define MAX_CONC 64

static int pids[MAX_PIDS];
static int n_pids;
static struct sockaddr_in target;

/* per-child counters, in a shared mapping */
struct slot {
	volatile unsigned long ok, resumed, failed;
	volatile int stop;
	char version[16], cipher[64], first_error[128];
};

static double
now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* utime+stime of n processes, ms */
static double
cpu_ms(const int *list, int n)
{
	double total = 0;
	long hz = sysconf(_SC_CLK_TCK);
	for (int i = 0; i < n; i++) {
		char path[64], buf[1024];
		snprintf(path, sizeof path, "/proc/%d/stat", list[i]);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t len = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		buf[len] = 0;
		char *p = strrchr(buf, ')');
		unsigned long ut = 0, st = 0;
		if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
			     &st) == 2)
			total += (double)(ut + st) * 1000.0 / (double)hz;
	}
	return total;
}

static int
parse_target(const char *s)
{
	char host[256];
	const char *colon = strrchr(s, ':');
	if (!colon || (size_t)(colon - s) >= sizeof host)
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = 0;
	target.sin_family = AF_INET;
	target.sin_port = htons((uint16_t)atoi(colon + 1));
	return inet_pton(AF_INET, host, &target.sin_addr) == 1 ? 0 : -1;
}

/* A blocking socket connected to the target, 5 s timeouts; -1 on error. */
static int
dial(char *err, size_t errlen)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket:%s", strerror(errno));
		return -1;
	}
	struct timeval tv = { 5, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (connect(fd, (struct sockaddr *)&target, sizeof target) == -1) {
		snprintf(err, errlen, "connect:%s", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static SSL_CTX *
client_ctx(void)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx)
		return NULL;
	SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	return ctx;
}

static void
ssl_err(char *err, size_t errlen, const char *what, SSL *ssl, int rc)
{
	unsigned long e = ERR_peek_last_error();
	char b[96] = "";
	if (e)
		ERR_error_string_n(e, b, sizeof b);
	snprintf(err, errlen, "%s:ssl_error=%d:%s", what, ssl ? SSL_get_error(ssl, rc) : 0,
	    e ? b : strerror(errno));
	for (char *p = err; *p; p++)
		if (*p == ' ')
			*p = '_';
	ERR_clear_error();
}

/* the newest session of this process (-r) */
static SSL_SESSION *newest;
static int got_new;

static int
new_session_cb(SSL *ssl, SSL_SESSION *sess)
{
	(void)ssl;
	if (newest)
		SSL_SESSION_free(newest);
	newest = sess;
	got_new = 1;
	return 1; /* we keep the reference */
}

/* One connection: handshake, then (resume) wait for the next ticket,
 * close_notify, close. 1 resumed, 0 full, -1 failed. */
static int
one_handshake(SSL_CTX *ctx, int resume, struct slot *s)
{
	int fd = dial(s->first_error, sizeof s->first_error);
	if (fd < 0)
		return -1;
	SSL *ssl = SSL_new(ctx);
	SSL_set_fd(ssl, fd);
	if (resume && newest)
		SSL_set_session(ssl, newest);
	got_new = 0;
	int rc = SSL_connect(ssl);
	if (rc != 1) {
		ssl_err(s->first_error, sizeof s->first_error, "handshake", ssl, rc);
		SSL_free(ssl);
		close(fd);
		return -1;
	}
	int reused = SSL_session_reused(ssl);
	if (!s->version[0]) {
		snprintf(s->version, sizeof s->version, "%s", SSL_get_version(ssl));
		snprintf(s->cipher, sizeof s->cipher, "%s", SSL_get_cipher_name(ssl));
	}
	if (resume && !got_new && SSL_version(ssl) >= TLS1_3_VERSION) {
		/* TLS 1.3 tickets come after the handshake: read until one did */
		SSL_clear_mode(ssl, SSL_MODE_AUTO_RETRY);
		double end = now() + 1.0;
		char b[256];
		while (!got_new && now() < end) {
			struct pollfd p = { .fd = fd, .events = POLLIN };
			if (poll(&p, 1, (int)((end - now()) * 1000) + 1) <= 0)
				break;
			int r = SSL_read(ssl, b, sizeof b);
			if (r <= 0 && SSL_get_error(ssl, r) != SSL_ERROR_WANT_READ)
				break;
		}
	}
	SSL_shutdown(ssl);
	SSL_free(ssl);
	close(fd);
	return reused;
}

static void
child(struct slot *s, int resume, int idx)
{
	SSL_CTX *ctx = client_ctx();
	if (!ctx)
		_exit(1);
	if (resume) {
		SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
		SSL_CTX_sess_set_new_cb(ctx, new_session_cb);
	} else {
		SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	}
	(void)idx;
	while (!s->stop) {
		int r = one_handshake(ctx, resume, s);
		if (r < 0) {
			s->failed++;
			struct timespec ts = { 0, 10000000 };
			nanosleep(&ts, NULL);
			continue;
		}
		s->ok++;
		if (r)
			s->resumed++;
	}
	_exit(0);
}

static void
sums(struct slot *sl, int n, unsigned long *ok, unsigned long *res, unsigned long *fail)
{
	*ok = *res = *fail = 0;
	for (int i = 0; i < n; i++) {
		*ok += sl[i].ok;
		*res += sl[i].resumed;
		*fail += sl[i].failed;
	}
}

static int
run_hs(int conc, double dur, double warm, int resume)
{
	struct slot *sl = mmap(NULL, sizeof *sl * (size_t)conc, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sl == MAP_FAILED) {
		perror("tlshs: mmap");
		return 1;
	}
	memset(sl, 0, sizeof *sl * (size_t)conc);
	int kids[MAX_CONC] = { 0 };
	for (int i = 0; i < conc; i++) {
		kids[i] = fork();
		if (kids[i] == 0)
			child(&sl[i], resume, i);
		if (kids[i] < 0) {
			perror("tlshs: fork");
			for (int k = 0; k < i; k++)
				sl[k].stop = 1;
			return 1;
		}
	}
	struct timespec ts = { (time_t)warm, (long)((warm - (double)(time_t)warm) * 1e9) };
	nanosleep(&ts, NULL);

	/* the window: the proxy's CPU and the children's, from /proc */
	unsigned long ok0, r0, f0, ok1, r1, f1;
	double c0 = cpu_ms(pids, n_pids), s0 = cpu_ms(kids, conc), t0 = now();
	sums(sl, conc, &ok0, &r0, &f0);
	ts.tv_sec = (time_t)dur;
	ts.tv_nsec = (long)((dur - (double)(time_t)dur) * 1e9);
	nanosleep(&ts, NULL);
	sums(sl, conc, &ok1, &r1, &f1);
	double t1 = now(), c1 = cpu_ms(pids, n_pids), s1 = cpu_ms(kids, conc);
	for (int i = 0; i < conc; i++)
		sl[i].stop = 1;
	for (int i = 0; i < conc; i++)
		waitpid(kids[i], NULL, 0);

	const char *first_error = "none";
	for (int i = 0; i < conc; i++)
		if (sl[i].first_error[0]) {
			first_error = sl[i].first_error;
			break;
		}
	const char *version = "none", *cipher = "none";
	for (int i = 0; i < conc; i++)
		if (sl[i].version[0]) {
			version = sl[i].version;
			cipher = sl[i].cipher;
			break;
		}
	double secs = t1 - t0;
	printf("mode=%s conc=%d handshakes=%lu resumed=%lu failed=%lu secs=%.3f hs_per_s=%.1f "
	       "cpu_ms=%.0f self_cpu_ms=%.0f version=%s cipher=%s first_error=%s\n",
	    resume ? "resumed" : "full", conc, ok1 - ok0, r1 - r0, f1 - f0, secs,
	    (double)(ok1 - ok0) / secs, c1 - c0, s1 - s0, version, cipher, first_error);
	return 0;
}

static int
run_hold(int n, double hold)
{
	SSL_CTX *ctx = client_ctx();
	if (!ctx)
		return 1;
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	int *fds = calloc((size_t)n, sizeof *fds);
	SSL **ssls = calloc((size_t)n, sizeof *ssls);
	int opened = 0, failed = 0;
	char first_error[128] = "none";
	for (int i = 0; i < n; i++) {
		char err[128];
		int fd = dial(err, sizeof err);
		fds[i] = -1;
		if (fd < 0) {
			if (!failed)
				snprintf(first_error, sizeof first_error, "%s", err);
			failed++;
			continue;
		}
		SSL *ssl = SSL_new(ctx);
		SSL_set_fd(ssl, fd);
		int rc = SSL_connect(ssl);
		if (rc != 1) {
			if (!failed)
				ssl_err(first_error, sizeof first_error, "handshake", ssl, rc);
			failed++;
			SSL_free(ssl);
			close(fd);
			continue;
		}
		fds[i] = fd;
		ssls[i] = ssl;
		opened++;
	}
	printf("READY opened=%d failed=%d first_error=%s\n", opened, failed, first_error);
	fflush(stdout);
	struct timespec ts = { (time_t)hold, (long)((hold - (double)(time_t)hold) * 1e9) };
	nanosleep(&ts, NULL);
	int closed = 0;
	for (int i = 0; i < n; i++) {
		if (fds[i] < 0)
			continue;
		struct pollfd p = { .fd = fds[i], .events = POLLRDHUP };
		if (poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
			closed++;
	}
	printf("DONE open=%d closed=%d\n", opened - closed, closed);
	fflush(stdout);
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0) {
			SSL_free(ssls[i]);
			close(fds[i]);
		}
	free(fds);
	free(ssls);
	SSL_CTX_free(ctx);
	return 0;
}

static void
usage(void)
{
	fprintf(stderr, "usage: tlshs hs HOST:PORT [-c CONC] [-d SECS] [-w SECS] [-r] [-p PID,...]\n"
			"       tlshs hold HOST:PORT N HOLD_S\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc < 3 || parse_target(argv[2]) != 0)
		usage();
	if (!strcmp(argv[1], "hold")) {
		if (argc != 5)
			usage();
		return run_hold(atoi(argv[3]), atof(argv[4]));
	}
	if (strcmp(argv[1], "hs"))
		usage();
	int conc = 4, resume = 0, opt;
	double dur = 5, warm = 1;
	optind = 3;
	while ((opt = getopt(argc, argv, "c:d:w:rp:")) != -1) {
		switch (opt) {
		case 'c': conc = atoi(optarg); break;
		case 'd': dur = atof(optarg); break;
		case 'w': warm = atof(optarg); break;
		case 'r': resume = 1; break;
		case 'p':
			for (char *s = strtok(optarg, ","); s && n_pids < MAX_PIDS; s = strtok(NULL, ","))
				pids[n_pids++] = atoi(s);
			break;
		default: usage();
		}
	}
	if (conc < 1 || conc > MAX_CONC || dur <= 0 || warm < 0)
		usage();
	return run_hs(conc, dur, warm, resume);
}
