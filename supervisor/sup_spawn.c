/*
 * sup_spawn — the I/O layer's worker starts (sup_io_priv.h): a spawn
 * prepares the worker's channel, shared blocks and setup messages at once
 * (sup_spawn_prepare, the engine's spawn operation), and the process itself
 * is started paced, from the loop (the engine hears sup_on_spawned then,
 * and counts init_timeout from there): at most SUP_SPAWN_PER_TURN per loop
 * turn, within SUP_SPAWN_SLICE_MS, and at most SUP_SPAWN_INFLIGHT_PER_CPU
 * per CPU started but not yet READY. So a
 * start or a reload of a thousand clusters never holds the loop (the admin
 * API answers between batches) and never has a thousand processes
 * initialising at once on a machine of a few cores. A queued start that is
 * stopped or killed before it ran is cancelled and reported as an exit,
 * from the loop, outside the event chain that asked.
 *
 * Each start is a clone(CLONE_VM|CLONE_VFORK): the child shares the
 * supervisor's memory until its exec and no page table is copied, so its
 * cost does not grow with the supervisor's size. Between the clone and the
 * exec the child runs childproc_prepare() (childproc.h: the same step as
 * the admin process's, in raw system calls for this reason) and execv.
 */
#include "supervisor/sup_io_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/conntab.h"
#include "common/genshm.h"
#include "common/log.h"
#include "common/tlsmat.h"
#include "supervisor/childproc.h"
#include "supervisor/nodes.h"
#include "supervisor/tickets.h"

#define SUP_SPAWN_PER_TURN 16   /* processes started per loop turn at most */
#define SUP_SPAWN_SLICE_MS 5    /* ... and for at most this long */
#define SUP_SPAWN_INFLIGHT_PER_CPU 4 /* started, not READY yet: this per CPU */
#define SUP_SPAWN_STACK (64u << 10) /* the start's stack (the child until exec) */

static void sup_pace_arm(struct sup_io *io);

/* What the child of a start needs, all prepared by the parent: the child
 * shares the parent's memory (the parent waits, CLONE_VFORK). */
struct sup_start {
	const char *exe;
	char *const *argv;
	int fd;                       /* the channel's worker end: becomes fd 3 */
	const struct childproc_creds *creds;
};

/* The child of a start, until execv (childproc.h; exit codes there). Not
 * instrumented by ASan: see childproc.c. */
__attribute__((no_sanitize_address)) static int
sup_start_child(void *arg)
{
	const struct sup_start *a = arg;

	childproc_prepare(a->fd, a->creds);
	execv(a->exe, a->argv);
	_exit(CHILDPROC_EXIT_EXEC);
}

/* Start the prepared process of ch now: clone + exec. Then the engine
 * hears of it. */
static void
sup_chan_start(struct sup_io *io, struct sup_chan *ch)
{
	struct sup *s = io->s;
	struct sup_proc *p = ch->p;
	char gen[24], pp[24], idx[16], ipc[16], err[160];
	snprintf(ipc, sizeof ipc, "%d", IPC_PROTOCOL_VERSION);
	snprintf(gen, sizeof gen, "%llu", (unsigned long long)p->gen->generation);
	snprintf(pp, sizeof pp, "%d", (int)getpid());
	snprintf(idx, sizeof idx, "%u", p->index);
	char *argv[] = {
		"ferryd", "--worker", "--cluster", p->gen->cluster->name, "--generation", gen,
		"--ppid", pp, "--index", idx, "--ipc", ipc,
		"--log-level", (char *)log_level_str((enum log_level)s->cfg.log_level),
		"--sandbox", s->cfg.sandbox ? "on" : "off",
		s->cfg.log_format == CFG_LOG_JSON ? "--log-json" : NULL, NULL,
	};
	struct sup_start a = { .exe = io->self_exe, .argv = argv, .fd = ch->child_fd,
			       .creds = &io->creds };
	pid_t pid = -1;
	if (!io->stack) {
		void *st = mmap(NULL, SUP_SPAWN_STACK, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
		io->stack = st == MAP_FAILED ? NULL : st;
	}
	if (io->stack) {
		/* No handler of ours may run in the child: every signal is blocked
		 * around the clone (the child resets them before unblocking). */
		sigset_t all, old;
		sigfillset(&all);
		sigprocmask(SIG_SETMASK, &all, &old);
		pid = clone(sup_start_child, (char *)io->stack + SUP_SPAWN_STACK,
		    CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
		int e = errno;
		sigprocmask(SIG_SETMASK, &old, NULL);
		errno = e;
	}
	close(ch->child_fd);
	ch->child_fd = -1;
	if (pid == -1) {
		snprintf(err, sizeof err, "clone: %s", io->stack ? strerror(errno) :
		    "no stack for the start");
		ch->st = SUP_CHAN_NEVER;  /* in no queue; the engine ends it */
		sup_io_clock(s);
		sup_on_spawn_failed(s, p, err);
		return;
	}
	ch->st = SUP_CHAN_STARTED;
	ch->inflight = true;
	io->inflight++;
	p->pid = pid;
	ev_child_init(&ch->child, sup_io_child_cb, pid, 0);
	ch->child.data = ch;
	ev_child_start(io->loop, &ch->child);
	sup_io_clock(s);
	sup_on_spawned(s, p);
}

/* The pace timer: report cancelled starts, then start what waits, within
 * the turn's budget. */
static void
sup_pace_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct sup_io *io = t->data;
	struct sup *s = io->s;
	struct sup_chan *ch;
	while ((ch = TAILQ_FIRST(&io->cancelled)) != NULL) {
		TAILQ_REMOVE(&io->cancelled, ch, link);
		ch->st = SUP_CHAN_NEVER;  /* its exit is reported: never started */
		sup_io_chan_stop(ch);
		sup_io_clock(s);
		sup_on_exit(s, ch->p, ch->cancel_status);
	}
	uint64_t until = clock_mono_ms() + SUP_SPAWN_SLICE_MS;
	for (unsigned n = 0; n < SUP_SPAWN_PER_TURN && io->inflight < io->inflight_max &&
	    (ch = TAILQ_FIRST(&io->spawnq)) != NULL; n++) {
		TAILQ_REMOVE(&io->spawnq, ch, link);
		sup_chan_start(io, ch);
		if (clock_mono_ms() >= until)
			break;
	}
	sup_pace_arm(io);
}

/* Run the pace timer on the next loop turn when there is something for it. */
static void
sup_pace_arm(struct sup_io *io)
{
	if (ev_is_active(&io->pace) || ev_is_pending(&io->pace))
		return;
	if (TAILQ_EMPTY(&io->cancelled) &&
	    (TAILQ_EMPTY(&io->spawnq) || io->inflight >= io->inflight_max))
		return;
	ev_timer_set(&io->pace, 0., 0.);
	ev_timer_start(io->loop, &io->pace);
}

/* What the I/O layer keeps per generation: its shared block (genshm.h),
 * passed to every worker of the generation. The supervisor never reads the
 * block: it keeps no mapping, and keeps the descriptor only while a worker
 * of the generation may still be started (several workers: a crashed one
 * is replaced in its generation). */
struct sup_genio {
	int fd;
};

static struct sup_genio *
sup_genio(struct sup_gen *g, char *err, size_t errlen)
{
	if (g->shared)
		return g->shared;
	struct sup_genio *gi = calloc(1, sizeof *gi);
	if (!gi) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	struct genshm *map;
	gi->fd = genshm_create((uint32_t)g->n_procs, &map);
	if (gi->fd == -1) {
		snprintf(err, errlen, "generation block: %s", strerror(errno));
		free(gi);
		return NULL;
	}
	genshm_unmap(map);
	g->shared = gi;
	return gi;
}

void
sup_spawn_gen_free(struct sup *s, struct sup_gen *g)
{
	(void)s;
	struct sup_genio *gi = g->shared;
	if (!gi)
		return;
	if (gi->fd >= 0)
		close(gi->fd);
	free(gi);
	g->shared = NULL;
}

/* Prepare process p of its generation: its channel, metrics block and
 * setup messages (queued in the channel for the process to read once it
 * runs), and queue its start (sup_pace_cb). Returns 1 (queued), or -1 with
 * err when nothing could be prepared. */
int
sup_spawn_prepare(struct sup *s, struct sup_proc *p, const struct sup_ccfg *cc, char *err,
	     size_t errlen)
{
	struct sup_io *io = s->io;
	struct sup_genio *gi = sup_genio(p->gen, err, errlen);
	if (!gi)
		return -1;
	if (gi->fd < 0) {
		snprintf(err, errlen, "generation block: released");
		return -1;
	}
	struct sup_chan *ch = calloc(1, sizeof *ch);
	if (!ch) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	ch->io = io;
	ch->p = p;
	ch->fd = ch->child_fd = -1;
	ch->conns_fd = -1;
	ipcq_init(&ch->q, 0, 0);
	int sv[2] = { -1, -1 };
	ch->metrics_fd = metrics_create(p->gen->generation, &p->metrics);
	if (ch->metrics_fd == -1) {
		snprintf(err, errlen, "metrics block: %s", strerror(errno));
		goto fail;
	}
	p->conns_rows = conntab_rows(cc->cl->max_connections);
	ch->conns_fd = conntab_create(p->conns_rows, &p->conns);
	if (ch->conns_fd == -1) {
		snprintf(err, errlen, "connection table: %s", strerror(errno));
		goto fail;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
		snprintf(err, errlen, "socketpair: %s", strerror(errno));
		goto fail;
	}
	int bufsz = 2 * (int)(sizeof(struct ipc_hdr) + IPC_MAX_PAYLOAD);
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &bufsz, sizeof bufsz);
	setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &bufsz, sizeof bufsz);
	fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
	ch->fd = sv[0];
	ch->child_fd = sv[1];

	/* Config text + metrics block, then the listening sockets, queued in
	 * order like every other message. */
	uint64_t g = p->gen->generation;
	int cfds[3] = { ch->metrics_fd, gi->fd, ch->conns_fd };
	int rc = ipcq_send(&ch->q, ch->fd, IPC_CONFIG, g, cc->canonical, strlen(cc->canonical),
	    cfds, 3);
	close(ch->metrics_fd);  /* the mapping keeps the block; the worker gets its fd */
	ch->metrics_fd = -1;
	close(ch->conns_fd);
	ch->conns_fd = -1;
	if (rc == 0 && p->gen->n_procs == 1) {
		/* the only worker of its generation has the block's fd: a
		 * replacement of it is a new generation with a new block */
		close(gi->fd);
		gi->fd = -1;
	}
	/* The TLS files' bytes (the worker never opens them), wiped here once
	 * sent or queued (a queued copy is wiped when it leaves the queue). */
	if (rc == 0 && cc->cl->files) {
		uint8_t *tm = NULL;
		size_t tmlen = 0;
		rc = tlsmat_encode(cc->cl->files, &tm, &tmlen);
		if (rc == 0) {
			rc = ipcq_send(&ch->q, ch->fd, IPC_TLS_MATERIAL, g, tm, tmlen, NULL, 0);
			sodium_memzero(tm, tmlen);
			free(tm);
		}
	}
	/* learned brokers: what earlier generations learned (nodes.h) */
	for (size_t from = 0; rc == 0;) {
		size_t n = sup_nodes_payload(p->gen->cluster, p->gen, cc->cl, &from,
		    io->nodes_buf, sizeof io->nodes_buf);
		if (!n)
			break;
		rc = ipcq_send(&ch->q, ch->fd, IPC_NODES, g, io->nodes_buf, n, NULL, 0);
	}
	/* TLS clusters: the session-ticket keys (tickets.h) */
	if (rc == 0 && cc->cl->tls) {
		const struct tlskeys *k = tickets_of(p->gen->cluster);
		if (k)
			rc = ipcq_send(&ch->q, ch->fd, IPC_TICKET_KEYS, g, k, sizeof *k, NULL, 0);
	}
	for (size_t first = 0; rc == 0 && first < cc->n_listeners; first += IPC_MAX_FDS) {
		int fds[IPC_MAX_FDS];
		size_t nfds = cc->n_listeners - first;
		if (nfds > IPC_MAX_FDS)
			nfds = IPC_MAX_FDS;
		for (size_t i = 0; i < nfds; i++)
			fds[i] = cc->listeners[first + i].fd;
		struct ipc_listeners li = { .count = (uint32_t)nfds, .first = (uint32_t)first,
					    .total = (uint32_t)cc->n_listeners };
		rc = ipcq_send(&ch->q, ch->fd, IPC_LISTENERS, g, &li, sizeof li, fds, nfds);
	}
	if (rc == -1) {
		snprintf(err, errlen, "sending configuration: %s", strerror(errno));
		goto fail;
	}
	ev_io_init(&ch->rio, sup_io_chan_read_cb, ch->fd, EV_READ);
	ch->rio.data = ch;
	ev_io_init(&ch->wio, sup_io_chan_write_cb, ch->fd, EV_WRITE);
	ch->wio.data = ch;
	ev_io_start(io->loop, &ch->rio);
	if (ipcq_pending(&ch->q))
		ev_io_start(io->loop, &ch->wio);
	p->chan = ch;
	ch->st = SUP_CHAN_QUEUED;
	TAILQ_INSERT_TAIL(&io->spawnq, ch, link);
	sup_pace_arm(io);
	return 1;
fail:
	ipcq_clear(&ch->q);
	if (ch->fd >= 0)
		close(ch->fd);
	if (ch->child_fd >= 0)
		close(ch->child_fd);
	if (ch->metrics_fd >= 0)
		close(ch->metrics_fd);
	if (ch->conns_fd >= 0)
		close(ch->conns_fd);
	if (p->metrics) {
		metrics_unmap(p->metrics);
		p->metrics = NULL;
	}
	conntab_unmap(p->conns, p->conns_rows);
	p->conns = NULL;
	free(ch);
	return -1;
}

void
sup_spawn_init(struct sup_io *io)
{
	cpu_set_t cpus;

	TAILQ_INIT(&io->spawnq);
	TAILQ_INIT(&io->cancelled);
	io->inflight_max = SUP_SPAWN_INFLIGHT_PER_CPU * (size_t)(sched_getaffinity(0, sizeof cpus,
	    &cpus) == 0 && CPU_COUNT(&cpus) > 0 ? CPU_COUNT(&cpus) : 1);
	ev_timer_init(&io->pace, sup_pace_cb, 0., 0.);
	io->pace.data = io;
}

void
sup_spawn_free(struct sup_io *io)
{
	ev_timer_stop(io->loop, &io->pace);
	if (io->stack)
		munmap(io->stack, SUP_SPAWN_STACK);
	io->stack = NULL;
}

void
sup_spawn_cancel(struct sup_io *io, struct sup_chan *ch, int wstatus)
{
	if (ch->st != SUP_CHAN_QUEUED)
		return;
	TAILQ_REMOVE(&io->spawnq, ch, link);
	ch->st = SUP_CHAN_CANCELLED;
	ch->cancel_status = wstatus;
	TAILQ_INSERT_TAIL(&io->cancelled, ch, link);
	sup_pace_arm(io);
}

void
sup_spawn_ready(struct sup_chan *ch)
{
	if (!ch->inflight)
		return;
	ch->inflight = false;
	ch->io->inflight--;
	sup_pace_arm(ch->io);
}

void
sup_spawn_forget(struct sup_io *io, struct sup_chan *ch)
{
	if (ch->st == SUP_CHAN_QUEUED)
		TAILQ_REMOVE(&io->spawnq, ch, link);
	else if (ch->st == SUP_CHAN_CANCELLED)
		TAILQ_REMOVE(&io->cancelled, ch, link);
	sup_spawn_ready(ch);
}
