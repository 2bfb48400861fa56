/*
 * fsm — the supervisor's state machines as tables: pure data and lookups,
 * no sockets, no processes, no libev.
 *
 * Three machines, each a table (state × event) → (next state, actions):
 *
 *   generation  one worker generation of a cluster (a set of `workers`
 *               worker processes). Its states refine the contract
 *               lifecycle of docs/design.md §3: starting and held are both
 *               shown as `initializing` (fsm_gen_lc()).
 *   cluster     what the supervisor does for a cluster as a whole: serve,
 *               wait out a crash back-off, stay failed, stay parked after an
 *               operator drain, or leave (removed, or ferryd stopping).
 *   item        one cluster's part of a reload: pending (its new generation
 *               is preparing), ready (held), failed, committed, rolled back.
 *
 * The engine (engine.c) feeds events and carries out the actions; it makes
 * no lifecycle decision of its own. A lookup of a forbidden pair returns an
 * entry with allowed = false: for events the supervisor itself generates
 * that is a programming error (logged, never acted on), and the unit tests
 * walk every pair of every table. Events that come from outside (a worker's
 * message, a process exit, a timer) are allowed in every state where they
 * can arrive, as a no-op where they mean nothing.
 */
#ifndef FERRY_SUPERVISOR_FSM_H
#define FERRY_SUPERVISOR_FSM_H

#include <stdbool.h>
#include <stdint.h>

#include "common/lifecycle.h"

/* ---- generation --------------------------------------------------------- */

enum fsm_gstate {
	FSM_G_STARTING = 0, /* processes started, config sent, waiting for READY */
	FSM_G_HELD,         /* READY: waits for COMMIT (ACCEPT) */
	FSM_G_ACCEPTING,
	FSM_G_DRAINING,     /* asked to drain or stop: until every process exited */
	FSM_G_STOPPED,      /* terminal: exited (asked to, or crashed) */
	FSM_G_FAILED,       /* terminal: not viable, init deadline, malformed */
	FSM_G_COUNT,
};

enum fsm_gevent {
	FSM_GE_READY = 0,     /* every process reported READY */
	FSM_GE_FAILED,        /* a process reported FAILED (config not viable) */
	FSM_GE_EXITED,        /* every process has exited */
	FSM_GE_MALFORMED,     /* a process broke the IPC protocol */
	FSM_GE_QUEUE_FULL,    /* its outgoing IPC queue overflowed */
	FSM_GE_INIT_DEADLINE, /* not READY within init_timeout */
	FSM_GE_STOP_DEADLINE, /* not exited within drain_timeout + grace */
	FSM_GE_WD_LATE,       /* no answer to the watchdog for worker_watchdog */
	FSM_GE_WD_DEAD,       /* ... for twice that */
	FSM_GE_WD_OK,         /* answered again */
	FSM_GE_COMMIT,        /* start accepting */
	FSM_GE_DRAIN,         /* finish what is owed, then exit */
	FSM_GE_STOP,          /* exit now */
	FSM_GE_PROC_EXITED,   /* one process exited, others still run */
	FSM_GE_PROC_READY,    /* a replacement process reported READY */
	FSM_GE_HANDOVER,      /* like DRAIN, but its connections move to the newer
	                         generation where they can (live handover) */
	FSM_GE_COUNT,
};

/* Actions, in the order the engine carries them out. */
enum fsm_gaction {
	FSM_GA_DISARM_INIT = 1u << 0,
	FSM_GA_SEND_ACCEPT = 1u << 1,
	FSM_GA_SEND_DRAIN = 1u << 2,
	FSM_GA_SEND_STOP = 1u << 3,
	FSM_GA_ARM_STOP = 1u << 4,       /* SIGKILL at drain_timeout + grace */
	FSM_GA_ARM_KILL_GRACE = 1u << 5, /* SIGKILL after a short grace (it said FAILED) */
	FSM_GA_DISARM_STOP = 1u << 6,
	FSM_GA_KILL = 1u << 7,           /* SIGKILL the event's process (all when it
	                                    names none) */
	FSM_GA_ARM_WATCHDOG = 1u << 8,
	FSM_GA_DISARM_WATCHDOG = 1u << 9,
	FSM_GA_UNRESPONSIVE = 1u << 10,  /* mark it, count it */
	FSM_GA_RESPONSIVE = 1u << 11,    /* clear the mark */
	FSM_GA_HELD = 1u << 12,          /* tell its owner it is ready */
	FSM_GA_ENDED = 1u << 13,         /* reached a terminal state: tell its owner */
	FSM_GA_CRASHED = 1u << 14,       /* ... and nobody asked it to end */
	FSM_GA_KILL_ALL = 1u << 15,      /* SIGKILL every live process now */
	FSM_GA_RESTART_PROC = 1u << 16,  /* crash policy: replace the event's process */
	FSM_GA_ACCEPT_PROC = 1u << 17,   /* send ACCEPT to the event's process */
	FSM_GA_SEND_HANDOVER = 1u << 18,
};
#define FSM_GA_COUNT 19

struct fsm_gstep {
	bool allowed;
	enum fsm_gstate next;
	unsigned actions;     /* enum fsm_gaction bits */
};

const char *fsm_gstate_str(enum fsm_gstate s);
const char *fsm_gevent_str(enum fsm_gevent e);
const char *fsm_gaction_str(unsigned one_bit);
/* The contract lifecycle name of a generation state. */
enum lc_state fsm_gen_lc(enum fsm_gstate s);
bool fsm_gen_terminal(enum fsm_gstate s);
struct fsm_gstep fsm_gen_step(enum fsm_gstate s, enum fsm_gevent e);

/* ---- cluster ------------------------------------------------------------ */

enum fsm_cstate {
	FSM_C_ACTIVE = 0,  /* has a current generation (starting or serving) */
	FSM_C_BACKOFF,     /* its serving generation crashed: restart timer armed */
	FSM_C_FAILED,      /* crash loop, not viable or cannot bind: sockets released */
	FSM_C_PARKED,      /* drained by an operator: sockets released */
	FSM_C_LEAVING,     /* removed by a reload or ferryd stopping: draining */
	FSM_C_GONE,        /* terminal: nothing left, freed by the reaper */
	FSM_C_COUNT,
};

enum fsm_cevent {
	FSM_CE_CRASH_RESTART = 0, /* current generation crashed; policy: restart */
	FSM_CE_CRASH_LOOP,        /* ... policy: give up */
	FSM_CE_START_FAILED,      /* current generation failed and nothing else serves */
	FSM_CE_ROLL_FAILED,       /* a rolling restart failed; the old one still serves */
	FSM_CE_RESTART_TIMER,
	FSM_CE_OP_RESTART,        /* operator restart (sockets bound by then) */
	FSM_CE_OP_DRAIN,
	FSM_CE_COMMIT,            /* a reload committed a new generation for it */
	FSM_CE_REMOVE,            /* a reload removed it, or ferryd is stopping */
	FSM_CE_ALL_EXITED,        /* no process of it is alive */
	FSM_CE_COUNT,
};

enum fsm_caction {
	FSM_CA_START_GEN = 1u << 0,     /* start a new (unheld) generation */
	FSM_CA_ARM_RESTART = 1u << 1,
	FSM_CA_DISARM_RESTART = 1u << 2,
	FSM_CA_RESET_CRASH = 1u << 3,
	FSM_CA_DRAIN_ALL = 1u << 4,     /* DRAIN every live generation */
	FSM_CA_RELEASE = 1u << 5,       /* close its listening sockets */
	FSM_CA_REAP = 1u << 6,          /* free it after this event chain */
};
#define FSM_CA_COUNT 7

struct fsm_cstep {
	bool allowed;
	enum fsm_cstate next;
	unsigned actions;
};

const char *fsm_cstate_str(enum fsm_cstate s);
const char *fsm_cevent_str(enum fsm_cevent e);
const char *fsm_caction_str(unsigned one_bit);
struct fsm_cstep fsm_cluster_step(enum fsm_cstate s, enum fsm_cevent e);

/* ---- reload item -------------------------------------------------------- */

enum fsm_istate {
	FSM_I_PENDING = 0, /* new generation preparing */
	FSM_I_READY,       /* held (or nothing to prepare: keep, remove) */
	FSM_I_FAILED,      /* preparation failed: waiting for the verdict */
	FSM_I_COMMITTED,   /* terminal */
	FSM_I_ROLLED_BACK, /* terminal */
	FSM_I_COUNT,
};

enum fsm_ievent {
	FSM_IE_PREPARED = 0, /* its generation is held */
	FSM_IE_FAILED,       /* bind error, worker failed or exited, deadline */
	FSM_IE_COMMIT,
	FSM_IE_ROLLBACK,
	FSM_IE_COUNT,
};

enum fsm_iaction {
	FSM_IA_COMMIT = 1u << 0,   /* swap configuration, ACCEPT new, DRAIN old */
	FSM_IA_STOP_NEW = 1u << 1, /* STOP the prepared generation */
	FSM_IA_FREE_NEW = 1u << 2, /* close what was bound or dup'ed for it */
	FSM_IA_RECORD_ERROR = 1u << 3,
};
#define FSM_IA_COUNT 4

struct fsm_istep {
	bool allowed;
	enum fsm_istate next;
	unsigned actions;
};

const char *fsm_istate_str(enum fsm_istate s);
const char *fsm_ievent_str(enum fsm_ievent e);
struct fsm_istep fsm_item_step(enum fsm_istate s, enum fsm_ievent e);

#endif
