/*
 * handover_relay — a minimal stand-in for the supervisor's side of a live
 * handover, to test the worker side alone (tests/integration/
 * test_handover_worker.py). It is not ferryd: no reload engine, one worker
 * per generation, no privileges dropped.
 *
 *   handover_relay FERRYD CONFIG CLUSTER
 *
 * Binds the cluster's listening sockets, starts generation 1 (ferryd
 * --worker: CONFIG, LISTENERS, READY, ACCEPT) and prints "READY". Then
 * reads commands on stdin, one a line, each answered with one line:
 *   handover H DEADLINE_MS SPREAD_MS  start generation 2 (accepting), send
 *                     IPC_HANDOVER {deadline, spread, H} to generation 1 -> "OK"
 *   bad-in KIND       a CONN_IN generation 2 must refuse (fds, version,
 *                     pending, broker, notstream) -> "TAKEN adopted=0|1
 *                     closed=0|1 alive=0|1"
 *   kill-new          SIGKILL generation 2 (later CONN_OUTs get adopted=0) -> "OK"
 *   status            -> "old_alive=0|1 old_status=N pending=BYTES
 *                        with_upstream=N out=N in=N taken=N declined=N
 *                        handed_over=N drained=N forced=N adopted=N
 *                        old_active=N new_active=N" (metrics blocks)
 * and relays meanwhile: CONN_OUT from generation 1 becomes CONN_IN (relay
 * id) to generation 2; CONN_TAKEN from generation 2 becomes CONN_DONE to
 * generation 1; with generation 2 gone, CONN_DONE adopted=0 at once.
 * EOF on stdin: STOP to every worker, wait for them, exit 0.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/config.h"
#include "common/conntab.h"
#include "common/genshm.h"
#include "common/ipc.h"
#include "common/metrics.h"

#define MAX_RELAY 8192

struct gen {
	uint64_t generation;
	pid_t pid;
	int fd;                 /* IPC, -1 when gone */
	struct metrics *m;
	bool alive;
	int status;             /* exit code, 128 + signal; -1 while running */
};

static const char *ferryd;
static struct cfg cfg;
static struct cfg_cluster *cl;
static char *canonical;
static int *listeners;
static size_t n_listeners;
static uint8_t buf[sizeof(struct ipc_hdr) + IPC_MAX_PAYLOAD];
static uint64_t relay_old_id[MAX_RELAY];   /* relay id -> old worker's id */
static uint64_t n_relay, n_out, n_taken, n_declined, n_pending, n_with_up;

static void
die(const char *what)
{
	fprintf(stderr, "handover_relay: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int
bind_listener(const char *host, uint16_t port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *ai;
	char p[8];
	snprintf(p, sizeof p, "%u", port);
	if (getaddrinfo(host, p, &hints, &ai) != 0)
		die("getaddrinfo");
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) == -1 || listen(fd, 128) == -1)
		die("bind");
	freeaddrinfo(ai);
	return fd;
}

/* Blocking receive of one message of type want (others are ignored). */
static int
expect(struct gen *g, enum ipc_type want)
{
	for (;;) {
		struct ipc_msg msg;
		char err[128] = "";
		struct pollfd pfd = { .fd = g->fd, .events = POLLIN };
		if (poll(&pfd, 1, 15000) != 1)
			return -1;
		if (ipc_recv(g->fd, buf, sizeof buf, &msg, err, sizeof err) != 1)
			return -1;
		ipc_close_fds(&msg);
		if (msg.hdr.type == want)
			return 0;
		if (msg.hdr.type == IPC_FAILED)
			return -1;
	}
}

static void
start_gen(struct gen *g, uint64_t generation)
{
	struct genshm *gs;
	int sv[2];
	g->generation = generation;
	struct conntab *ct;
	int mfd = metrics_create(generation, &g->m);
	int gfd = genshm_create(1, &gs);
	int cfd = conntab_create(conntab_rows(cl->max_connections), &ct);
	if (mfd < 0 || gfd < 0 || cfd < 0)
		die("shared blocks");
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1)
		die("socketpair");
	char gs_[24];
	snprintf(gs_, sizeof gs_, "%llu", (unsigned long long)generation);
	pid_t pid = fork();
	if (pid == 0) {
		if (dup2(sv[1], 3) == -1)
			_exit(127);
		char ipc[16];
		snprintf(ipc, sizeof ipc, "%d", IPC_PROTOCOL_VERSION);
		char *argv[] = { "ferryd", "--worker", "--cluster", cl->name, "--generation", gs_,
				 "--index", "0", "--log-level", "debug", "--ipc", ipc, NULL };
		execv(ferryd, argv);
		_exit(127);
	}
	close(sv[1]);
	g->pid = pid;
	g->fd = sv[0];
	g->alive = true;
	g->status = -1;
	int cfds[3] = { mfd, gfd, cfd };
	if (ipc_send(g->fd, IPC_CONFIG, generation, canonical, strlen(canonical), cfds, 3) == -1)
		die("send config");
	close(mfd);
	close(gfd);
	close(cfd);
	conntab_unmap(ct, conntab_rows(cl->max_connections));
	struct ipc_listeners li = { .count = (uint32_t)n_listeners, .first = 0,
				    .total = (uint32_t)n_listeners };
	if (ipc_send(g->fd, IPC_LISTENERS, generation, &li, sizeof li, listeners, n_listeners) == -1)
		die("send listeners");
	if (expect(g, IPC_READY) == -1) {
		fprintf(stderr, "handover_relay: generation %llu not ready\n",
		    (unsigned long long)generation);
		exit(1);
	}
	if (ipc_send(g->fd, IPC_ACCEPT, generation, NULL, 0, NULL, 0) == -1)
		die("send accept");
}

static void
gone(struct gen *g)
{
	if (g->fd >= 0)
		close(g->fd);
	g->fd = -1;
	if (g->alive) {
		int st;
		waitpid(g->pid, &st, 0);
		g->alive = false;
		g->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	}
}

static void
done(struct gen *old, uint64_t id, uint32_t adopted)
{
	struct ipc_conn_ack a = { .id = id, .adopted = adopted };
	if (!adopted)
		n_declined++;
	if (old->fd >= 0)
		ipc_send(old->fd, IPC_CONN_DONE, old->generation, &a, sizeof a, NULL, 0);
}

/* One message from generation 1 (old) or 2 (new). -1: that one is gone. */
static int
relay_one(struct gen *from, struct gen *old, struct gen *neu)
{
	struct ipc_msg msg;
	char err[128] = "";
	int r = ipc_recv(from->fd, buf, sizeof buf, &msg, err, sizeof err);
	if (r == -1 && errno == EAGAIN)
		return 0;
	if (r <= 0)
		return -1;
	if (from == old && msg.hdr.type == IPC_CONN_OUT) {
		struct ipc_conn_record rec;
		n_out++;
		if (ipc_conn_record_check(msg.payload, msg.hdr.len, msg.nfds, &rec, err,
		    sizeof err) == -1) {
			fprintf(stderr, "handover_relay: bad CONN_OUT: %s\n", err);
			exit(1);
		}
		n_pending += rec.pending_len;
		if (rec.flags & IPC_CONN_F_UPSTREAM)
			n_with_up++;
		if (neu->fd < 0 || n_relay == MAX_RELAY) {
			done(old, rec.id, 0);
		} else {
			relay_old_id[n_relay] = rec.id;
			uint64_t rid = n_relay++;
			memcpy(msg.payload, &rid, sizeof rid);  /* id is the first field */
			if (ipc_send(neu->fd, IPC_CONN_IN, neu->generation, msg.payload, msg.hdr.len,
			    msg.fds, msg.nfds) == -1)
				done(old, rec.id, 0);
		}
	} else if (from == neu && msg.hdr.type == IPC_CONN_TAKEN) {
		struct ipc_conn_ack a;
		memcpy(&a, msg.payload, sizeof a);
		if (a.id < n_relay) {
			if (a.adopted)
				n_taken++;
			done(old, relay_old_id[a.id], a.adopted);
		}
	}
	ipc_close_fds(&msg);
	return 0;
}

/* Send generation 2 a CONN_IN that must be refused (kind: fds, version,
 * pending, broker, notstream); answer whether it said adopted=0 and closed
 * the descriptor it got. */
static void
bad_in(struct gen *neu, const char *kind)
{
	int sv[2];
	bool dgram = strcmp(kind, "notstream") == 0;
	if (neu->fd < 0 || socketpair(AF_UNIX, (dgram ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC, 0,
	    sv) == -1) {
		printf("ERR no new generation\n");
		return;
	}
	struct { struct ipc_conn_record r; uint8_t pending[8]; } m;
	memset(&m, 0, sizeof m);
	m.r.id = UINT64_MAX - 1;
	m.r.broker_index = -1;
	m.r.version = IPC_CONN_RECORD_VERSION;
	size_t len = sizeof m.r;
	if (strcmp(kind, "fds") == 0)
		m.r.flags = IPC_CONN_F_UPSTREAM;     /* one fd only */
	else if (strcmp(kind, "version") == 0)
		m.r.version = 99;
	else if (strcmp(kind, "pending") == 0)
		m.r.pending_len = 5, len += 3;       /* 3 bytes follow, 5 announced */
	else if (strcmp(kind, "broker") == 0)
		m.r.broker_index = 99;
	ipc_send(neu->fd, IPC_CONN_IN, neu->generation, &m, len, &sv[1], 1);
	close(sv[1]);
	int adopted = -1;
	for (int i = 0; i < 50 && adopted < 0; i++) {
		struct pollfd pfd = { .fd = neu->fd, .events = POLLIN };
		if (poll(&pfd, 1, 100) != 1)
			continue;
		struct ipc_msg msg;
		char err[128];
		if (ipc_recv(neu->fd, buf, sizeof buf, &msg, err, sizeof err) != 1)
			break;
		if (msg.hdr.type == IPC_CONN_TAKEN) {
			struct ipc_conn_ack a;
			memcpy(&a, msg.payload, sizeof a);
			if (a.id == UINT64_MAX - 1)
				adopted = (int)a.adopted;
		}
		ipc_close_fds(&msg);
	}
	/* Our end sees the worker's copy closed: EOF (stream) or ECONNREFUSED
	 * on send (datagram peer gone). */
	int closed = 0;
	if (dgram) {
		closed = send(sv[0], "x", 1, MSG_DONTWAIT) == -1 && errno == ECONNREFUSED;
	} else {
		struct pollfd pfd = { .fd = sv[0], .events = POLLIN };
		char c;
		closed = poll(&pfd, 1, 2000) == 1 && read(sv[0], &c, 1) == 0;
	}
	close(sv[0]);
	printf("TAKEN adopted=%d closed=%d alive=%d\n", adopted, closed,
	    kill(neu->pid, 0) == 0);
}

#define GET(g, f) ((g)->m ? (unsigned long long)METRIC_GET((g)->m, f) : 0ull)

int
main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: handover_relay FERRYD CONFIG CLUSTER\n");
		return 2;
	}
	ferryd = argv[1];
	signal(SIGPIPE, SIG_IGN);
	struct cfg_errors errs;
	cfg_errors_init(&errs);
	if (cfg_parse_file(argv[2], &cfg, &errs) == -1) {
		fprintf(stderr, "handover_relay: %s\n", errs.n ? errs.msg[0] : "bad config");
		return 1;
	}
	for (size_t i = 0; i < cfg.n_clusters; i++)
		if (strcmp(cfg.clusters[i].name, argv[3]) == 0)
			cl = &cfg.clusters[i];
	/* like ferryd: max_connections = auto becomes a number before the
	 * worker and its connection table get it */
	if (cl && !cl->max_connections) {
		struct rlimit rl;
		cl->max_connections = cfg_max_connections_auto(getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
		    rl.rlim_cur != RLIM_INFINITY ? (uint64_t)rl.rlim_cur : 0, cl->n_brokers);
	}
	if (!cl || !(canonical = cfg_cluster_canonical(cl))) {
		fprintf(stderr, "handover_relay: no cluster %s\n", argv[3]);
		return 1;
	}
	n_listeners = 1 + cl->n_brokers;
	if (n_listeners > IPC_MAX_FDS || !(listeners = calloc(n_listeners, sizeof *listeners)))
		return 1;
	listeners[0] = bind_listener(cl->bootstrap.host, cl->bootstrap.port);
	for (size_t i = 0; i < cl->n_brokers; i++)
		listeners[1 + i] = bind_listener(cl->bootstrap.host,
		    (uint16_t)(cl->broker_port_first + i));

	struct gen old = { .fd = -1 }, neu = { .fd = -1 };
	start_gen(&old, 1);
	printf("READY\n");
	fflush(stdout);

	char line[256];
	size_t ll = 0;
	for (;;) {
		struct pollfd p[3] = {
			{ .fd = 0, .events = POLLIN },
			{ .fd = old.fd, .events = POLLIN },
			{ .fd = neu.fd, .events = POLLIN },
		};
		if (poll(p, 3, -1) == -1) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		if (p[1].revents && relay_one(&old, &old, &neu) == -1)
			gone(&old);
		if (p[2].revents && relay_one(&neu, &old, &neu) == -1)
			gone(&neu);
		if (!p[0].revents)
			continue;
		ssize_t n = read(0, line + ll, sizeof line - 1 - ll);
		if (n <= 0)
			break;
		ll += (size_t)n;
		char *nl;
		while ((nl = memchr(line, '\n', ll))) {
			*nl = 0;
			unsigned h = 0;
			unsigned long long dl = 0, sp = 0;
			if (sscanf(line, "handover %u %llu %llu", &h, &dl, &sp) == 3) {
				start_gen(&neu, 2);
				struct ipc_handover ho = { .deadline_ms = dl, .spread_ms = sp, .handover = h };
				if (ipc_send(old.fd, IPC_HANDOVER, old.generation, &ho, sizeof ho, NULL,
				    0) == -1)
					die("send handover");
				printf("OK\n");
			} else if (strncmp(line, "bad-in ", 7) == 0) {
				bad_in(&neu, line + 7);
			} else if (strcmp(line, "kill-new") == 0) {
				if (neu.alive)
					kill(neu.pid, SIGKILL);
				gone(&neu);
				printf("OK\n");
			} else if (strcmp(line, "status") == 0) {
				/* (the old one has exited once its channel is gone) */
				printf("old_alive=%d old_status=%d pending=%llu with_upstream=%llu out=%llu in=%llu taken=%llu declined=%llu "
				    "handed_over=%llu drained=%llu forced=%llu adopted=%llu "
				    "old_active=%llu new_active=%llu\n", old.fd >= 0, old.status,
				    (unsigned long long)n_pending, (unsigned long long)n_with_up,
				    (unsigned long long)n_out, (unsigned long long)n_relay,
				    (unsigned long long)n_taken, (unsigned long long)n_declined,
				    GET(&old, connections_handed_over), GET(&old, connections_drained),
				    GET(&old, connections_forced), GET(&neu, connections_adopted),
				    GET(&old, connections_active), GET(&neu, connections_active));
			} else {
				printf("ERR %s\n", line);
			}
			fflush(stdout);
			size_t used = (size_t)(nl + 1 - line);
			memmove(line, nl + 1, ll - used);
			ll -= used;
		}
		if (ll == sizeof line - 1)
			ll = 0;
	}
	struct gen *gs[2] = { &old, &neu };
	for (int i = 0; i < 2; i++)
		if (gs[i]->fd >= 0)
			ipc_send(gs[i]->fd, IPC_STOP, gs[i]->generation, NULL, 0, NULL, 0);
	for (int i = 0; i < 2; i++)
		gone(gs[i]);
	return 0;
}
