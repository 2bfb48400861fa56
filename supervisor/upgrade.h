/*
 * upgrade — the two state machines of an upgrade of ferryd itself
 * (docs/design.md §11) as tables, in the style of fsm.h: pure data and
 * lookups, (state × event) → (next state, actions). The engine
 * (engine_upgrade.c) feeds events and carries out the actions; the unit
 * tests walk every pair, and docs/state-machines.md is generated from the
 * tables.
 *
 *   out  the running ferryd (the predecessor): starts the successor from
 *        the file it was started from, hands it the state, the listening
 *        sockets and the ticket keys, lets it prepare a held generation of
 *        every cluster, commits — or rolls back, which before the commit
 *        point leaves everything as it was — then hands its connections
 *        over through the successor and exits when its last worker is gone.
 *   in   the successor: the same conversation from the other side, until
 *        it serves alone.
 *
 * The commit point is the predecessor receiving COMMITTED. Before it, every
 * failure (the successor will not start, crashes, hangs, refuses, its
 * workers fail, a cluster of the predecessor crashes, a stop) is a rollback
 * that kills the successor; after it there is none: a failure of one
 * connection's move ends as a close at a request boundary.
 */
#ifndef FERRY_SUPERVISOR_UPGRADE_H
#define FERRY_SUPERVISOR_UPGRADE_H

#include <stdbool.h>

/* ---- predecessor ("out") ---------------------------------------------- */

enum upg_ostate {
	UPG_O_IDLE = 0,
	UPG_O_SPAWNING,     /* successor started, OFFER sent: waiting for HELLO */
	UPG_O_TRANSFER,     /* record, sockets and keys sent: waiting for VALID */
	UPG_O_PREPARING,    /* the successor's held generations start */
	UPG_O_COMMITTING,   /* COMMIT sent: waiting for COMMITTED */
	UPG_O_HANDING_OVER, /* committed: connections move, the old workers go */
	UPG_O_DONE,         /* terminal: every process of ours gone; exit */
	UPG_O_ROLLED_BACK,  /* terminal: the successor is gone, we serve on */
	UPG_O_COUNT,
};

enum upg_oevent {
	UPG_OE_START = 0,   /* SIGUSR2 or POST /admin/upgrade (checks passed) */
	UPG_OE_HELLO,       /* the successor accepts the offer */
	UPG_OE_REFUSED,     /* it refuses (HELLO) or finds the record invalid */
	UPG_OE_VALID,
	UPG_OE_PREPARED,    /* every cluster's held generation is ready */
	UPG_OE_FAILED,      /* it exited, broke the channel, its workers failed; a
	                       cluster of ours crashed; ferryd stops */
	UPG_OE_DEADLINE,    /* the phase's deadline passed */
	UPG_OE_COMMITTED,
	UPG_OE_PEER_GONE,   /* the successor went away after the commit */
	UPG_OE_HURRY,       /* finish now (the successor stops, or SIGTERM) */
	UPG_OE_TAIL_DONE,   /* our last worker exited, no connection in transit */
	UPG_OE_COUNT,
};

enum upg_oaction {
	UPG_OA_SPAWN = 1u << 0,         /* freeze, RELOADING=1, start it, send OFFER */
	UPG_OA_SEND_STATE = 1u << 1,    /* record, listening sockets, ticket keys */
	UPG_OA_ARM_PHASE = 1u << 2,     /* deadline: init_timeout from now */
	UPG_OA_ARM_PREPARE = 1u << 3,   /* deadline: init_timeout + grace */
	UPG_OA_SEND_COMMIT = 1u << 4,   /* pause the admin API, counters, COMMIT */
	UPG_OA_ARM_COMMIT = 1u << 5,    /* deadline: UPG_COMMIT_MS */
	UPG_OA_COMMIT = 1u << 6,        /* MAINPID=, MAIN, close our admin and cluster
	                                   sockets, hand every generation over,
	                                   record SUCCESS, answer */
	UPG_OA_ROLLBACK = 1u << 7,      /* kill it, resume, record FAILED, answer */
	UPG_OA_REJECT = 1u << 8,        /* ... record REJECTED instead */
	UPG_OA_DISARM = 1u << 9,
	UPG_OA_PEER_GONE = 1u << 10,    /* connections in transit: outcome unknown */
	UPG_OA_HURRY = 1u << 11,        /* bring our generations' deadlines forward */
	UPG_OA_BYE = 1u << 12,          /* final counters and the tail's outcome; exit */
};
#define UPG_OA_COUNT 13

struct upg_ostep {
	bool allowed;
	enum upg_ostate next;
	unsigned actions;
};

const char *upg_ostate_str(enum upg_ostate s);
const char *upg_oevent_str(enum upg_oevent e);
const char *upg_oaction_str(unsigned one_bit);
bool upg_ostate_precommit(enum upg_ostate s);
struct upg_ostep upg_out_step(enum upg_ostate s, enum upg_oevent e);

/* ---- successor ("in") -------------------------------------------------- */

enum upg_istate {
	UPG_I_HELLO = 0,    /* started: waiting for OFFER */
	UPG_I_RECEIVING,    /* record, sockets and keys arriving */
	UPG_I_PREPARING,    /* held generations starting */
	UPG_I_PREPARED,     /* all held: waiting for COMMIT */
	UPG_I_COMMITTED,    /* accepting; waiting for MAIN */
	UPG_I_TAIL,         /* the main process; relaying the predecessor's
	                       connections until it is gone */
	UPG_I_SERVING,      /* terminal: alone */
	UPG_I_ABORTED,      /* terminal: exits, the predecessor serves on */
	UPG_I_COUNT,
};

enum upg_ievent {
	UPG_IE_OFFER_OK = 0,
	UPG_IE_OFFER_BAD,   /* incompatible handshake or record version */
	UPG_IE_RECEIVED,    /* everything arrived and is valid */
	UPG_IE_INVALID,     /* the record, a socket or the configuration is not */
	UPG_IE_ALL_HELD,
	UPG_IE_GEN_FAILED,  /* a held generation failed */
	UPG_IE_COUNTERS,
	UPG_IE_COMMIT,
	UPG_IE_MAIN,
	UPG_IE_BYE,
	UPG_IE_PEER_GONE,   /* channel EOF or broken */
	UPG_IE_DEADLINE,
	UPG_IE_STOP,        /* SIGTERM */
	UPG_IE_COUNT,
};

enum upg_iaction {
	UPG_IA_HELLO = 1u << 0,         /* accept the offer */
	UPG_IA_REFUSE = 1u << 1,        /* refuse it, exit 78 */
	UPG_IA_PREPARE = 1u << 2,       /* VALID, start a held generation per cluster */
	UPG_IA_INVALID = 1u << 3,       /* INVALID with the errors, exit */
	UPG_IA_ARM = 1u << 4,           /* deadline for the predecessor's next step */
	UPG_IA_SEND_PREPARED = 1u << 5,
	UPG_IA_ABORT = 1u << 6,         /* PREPARE_FAILED if it can, stop our
	                                   workers, exit 1 */
	UPG_IA_CARRY = 1u << 7,         /* take the predecessor's counters */
	UPG_IA_COMMIT = 1u << 8,        /* ACCEPT, admin API on the inherited sockets,
	                                   outlive the predecessor, COMMITTED */
	UPG_IA_READY = 1u << 9,         /* READY=1, ticket rotation, a pending SIGHUP */
	UPG_IA_FOLD = 1u << 10,         /* fold the predecessor's counters, record the end */
	UPG_IA_SEND_STOP = 1u << 11,    /* ask the predecessor to finish now */
	UPG_IA_DISARM = 1u << 12,
};
#define UPG_IA_COUNT 13

struct upg_istep {
	bool allowed;
	enum upg_istate next;
	unsigned actions;
};

const char *upg_istate_str(enum upg_istate s);
const char *upg_ievent_str(enum upg_ievent e);
const char *upg_iaction_str(unsigned one_bit);
struct upg_istep upg_in_step(enum upg_istate s, enum upg_ievent e);

#endif
