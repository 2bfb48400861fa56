/*
 * sup_spawn — the I/O layer's paced worker starts (sup_io_priv.h): a spawn
 * (sup_io.c) prepares the worker's channel and queues its setup messages
 * at once, and the process itself is started from the loop here (the
 * engine hears sup_on_spawned then, and counts init_timeout from there): at
 * most SUP_SPAWN_PER_TURN per loop turn, within SUP_SPAWN_SLICE_MS, and at
 * most SUP_SPAWN_INFLIGHT_PER_CPU per CPU started but not yet READY. So a
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
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "supervisor/childproc.h"

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
sup_spawn_queue(struct sup_io *io, struct sup_chan *ch)
{
	ch->st = SUP_CHAN_QUEUED;
	TAILQ_INSERT_TAIL(&io->spawnq, ch, link);
	sup_pace_arm(io);
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
