/*
 * sup_io_priv — what the I/O layer's files share: sup_io.c (the loop,
 * workers' channels, signals, timers, the admin process), sup_spawn.c
 * (worker starts, paced) and upgrade_io.c with successor_io.c (the upgrade channel to the
 * other ferryd, the successor's start). Nothing else includes it.
 */
#ifndef FERRY_SUPERVISOR_SUP_IO_PRIV_H
#define FERRY_SUPERVISOR_SUP_IO_PRIV_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "common/config.h"
#include "common/ipc.h"
#include "common/ipcq.h"
#include "supervisor/adminproc.h"
#include "supervisor/childproc.h"
#include "supervisor/supervisor.h"

struct upg_io;
struct sup_chan;
TAILQ_HEAD(sup_chanq, sup_chan);

struct sup_io {
	struct sup *s;
	struct ev_loop *loop;
	struct adminproc *admin;      /* the admin process and its sockets (adminproc.h) */
	char *self_exe;
	struct childproc_creds creds; /* workers' and admin process's user */
	ev_signal sig_term, sig_int, sig_hup, sig_usr2;
	ev_timer deadline;
	ev_timer backstop;
	ev_timer tickets;             /* session-ticket key rotation */
	ev_timer certs;               /* daily certificate expiry check */
	ev_prepare prepare;
	bool notified_ready;          /* READY=1 sent once serving */
	bool trim_pending;            /* a reload ended: give freed heap back */
	char last_status[256];        /* last STATUS= sent */
	struct upg_io *upg;           /* an upgrade's channel (upgrade_io.c), or NULL */
	uint8_t buf[sizeof(struct ipc_hdr) + IPC_MAX_PAYLOAD];
	uint8_t nodes_buf[IPC_MAX_PAYLOAD]; /* IPC_NODES being encoded (buf may
	                                       hold the message being handled) */
	/* paced starts (sup_spawn.c) */
	struct sup_chanq spawnq;      /* prepared, waiting for their start */
	struct sup_chanq cancelled;   /* stopped before they started: exit to report */
	ev_timer pace;                /* the next batch, after the loop's I/O */
	size_t inflight;              /* started, not READY (nor exited) yet */
	size_t inflight_max;
	void *stack;                  /* SUP_SPAWN_STACK for the start's child */
};

/* One worker process's control channel and exit watcher (sup_io.c), and
 * its start (sup_spawn.c). */
struct sup_chan {
	struct sup_io *io;
	struct sup_proc *p;
	int fd;
	int child_fd;                 /* the worker's end until it is started; -1 */
	ev_io rio, wio;
	ev_child child;
	struct ipcq q;
	int metrics_fd;
	int conns_fd;
	enum { SUP_CHAN_QUEUED, SUP_CHAN_CANCELLED, SUP_CHAN_STARTED, SUP_CHAN_NEVER } st;
	int cancel_status;            /* the exit reported for a cancelled start */
	bool inflight;                /* counted in io->inflight */
	TAILQ_ENTRY(sup_chan) link;   /* in spawnq or cancelled */
};

/* sup_io.c, for the starts: the channel's read and write callbacks, stop
 * watching it; a started worker's exit. */
void sup_io_chan_read_cb(struct ev_loop *loop, ev_io *w, int revents);
void sup_io_chan_write_cb(struct ev_loop *loop, ev_io *w, int revents);
void sup_io_chan_stop(struct sup_chan *ch);
void sup_io_child_cb(struct ev_loop *loop, ev_child *w, int revents);

/* Worker starts (sup_spawn.c). prepare and gen_free: the engine's spawn
 * and gen_free operations (struct sup_ops). init/free: the queues, the
 * pace timer and the start's stack. cancel: a queued start will not
 * happen; its exit (wstatus) is reported from the loop. ready: a started
 * worker is no longer initialising (READY, or gone): another start may
 * run. forget: ch is being freed; it leaves every queue and count. */
int sup_spawn_prepare(struct sup *s, struct sup_proc *p, const struct sup_ccfg *cc, char *err,
		      size_t errlen);
void sup_spawn_gen_free(struct sup *s, struct sup_gen *g);
void sup_spawn_init(struct sup_io *io);
void sup_spawn_free(struct sup_io *io);
void sup_spawn_cancel(struct sup_io *io, struct sup_chan *ch, int wstatus);
void sup_spawn_ready(struct sup_chan *ch);
void sup_spawn_forget(struct sup_io *io, struct sup_chan *ch);

/* The engine's clock from the system's. */
void sup_io_clock(struct sup *s);

/* sup_run() in steps, shared with the successor's start:
 * sup_io_new() allocates the model and the I/O state; sup_io_init() sets
 * up the engine with cfg (taken over), notifications (from notify_address,
 * or $NOTIFY_SOCKET when NULL), limits, the worker user, timers and
 * signals — 0 or -1 (logged); sup_io_run() runs the loop until ferryd
 * stops, then sup_io_finish() kills what is left and frees everything,
 * returning the exit code. */
struct sup_io *sup_io_new(void);
int sup_io_init(struct sup_io *io, struct cfg *cfg, const char *config_path,
		const char *config_bytes, size_t config_len, const char *self_exe,
		const char *notify_address);
int sup_io_run(struct sup_io *io);
int sup_io_finish(struct sup_io *io, int rc);

/* The ticket rotation timer: next rotation after `after` seconds, then
 * every tls_ticket_rotation. */
void sup_io_tickets_arm(struct sup_io *io, double after);

/* The upgrade channel to the other ferryd (upgrade_io.c, successor_io.c). */
#define UPG_BUF (sizeof(struct ipc_hdr) + 128u * 1024u) /* the largest: a connection */

struct upg_io {
	struct sup_io *io;
	int fd;                       /* the channel; -1 closed */
	ev_io rio, wio;
	struct ipcq q;
	pid_t child;                  /* predecessor: the successor, 0 none */
	ev_child cw;
	int exec_pipe;                /* predecessor: the successor's exec error */
	bool exiting;
	int exit_code;
	uint64_t exit_by_ms;
	ev_timer exit_check;
	struct admin_listeners inherit; /* successor: the admin API's sockets */
	uint64_t rotation_next_mono;  /* successor: the predecessor's next rotation */
	uint8_t *buf;                 /* guarded: ticket keys pass through it */
};

/* The channel's state, made on first use (NULL when out of memory). */
struct upg_io *upgrade_io_get(struct sup_io *io);
/* Watch fd as the channel on the loop. */
void upgrade_io_watch(struct upg_io *u, int fd);
/* Fault point stop-at=PHASE of test builds (common/fault.h): SIGSTOP. */
void upgrade_io_fault_stop(const char *phase);

/* The upgrade's operations (upgrade_io.c) and its end of the channel. */
extern const struct sup_upgrade_ops upgrade_io_ops;
void upgrade_io_free(struct sup_io *io);
/* Run after every loop iteration: leaves the loop once an exit the
 * upgrade asked for can happen. */
void upgrade_io_prepare(struct sup_io *io);

#endif
