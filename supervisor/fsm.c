/*
 * fsm — the tables; see fsm.h. A missing entry is a forbidden pair.
 */
#include "supervisor/fsm.h"

#include <stddef.h>

/* ---- generation --------------------------------------------------------- */

#define G(st, acts) { true, FSM_G_##st, (acts) }
#define DI FSM_GA_DISARM_INIT
#define ACC FSM_GA_SEND_ACCEPT
#define DRN FSM_GA_SEND_DRAIN
#define STP FSM_GA_SEND_STOP
#define ASTOP FSM_GA_ARM_STOP
#define GRACE FSM_GA_ARM_KILL_GRACE
#define DSTOP FSM_GA_DISARM_STOP
#define KILL FSM_GA_KILL
#define AWD FSM_GA_ARM_WATCHDOG
#define DWD FSM_GA_DISARM_WATCHDOG
#define UNR FSM_GA_UNRESPONSIVE
#define RSP FSM_GA_RESPONSIVE
#define HELD FSM_GA_HELD
#define END FSM_GA_ENDED
#define CRASH FSM_GA_CRASHED
#define KALL FSM_GA_KILL_ALL
#define RESTART FSM_GA_RESTART_PROC
#define ACCP FSM_GA_ACCEPT_PROC
#define HAND FSM_GA_SEND_HANDOVER

/* Before ACCEPT (starting and held): a worker that fails, exits, breaks the
 * protocol or misses its init deadline is failed; asked to go, it is
 * draining until it has exited (docs/design.md §3: not `stopped` while it
 * lives): while starting its init deadline is the moment it is killed,
 * once held (prepared: the init deadline met) the stop deadline. */
#define G_PREACCEPT_COMMON \
	[FSM_GE_FAILED] = G(FAILED, DI | GRACE | END), \
	[FSM_GE_EXITED] = G(FAILED, DI | END | CRASH), \
	[FSM_GE_PROC_EXITED] = G(FAILED, DI | KALL | END | CRASH), \
	[FSM_GE_MALFORMED] = G(FAILED, DI | KALL | END), \
	[FSM_GE_QUEUE_FULL] = G(FAILED, DI | KALL | END), \
	[FSM_GE_INIT_DEADLINE] = G(FAILED, KALL | END)

static const struct fsm_gstep fsm_gtable[FSM_G_COUNT][FSM_GE_COUNT] = {
	[FSM_G_STARTING] = {
		G_PREACCEPT_COMMON,
		[FSM_GE_DRAIN] = G(DRAINING, STP),
		[FSM_GE_HANDOVER] = G(DRAINING, STP),
		[FSM_GE_STOP] = G(DRAINING, STP),
		[FSM_GE_READY] = G(HELD, HELD),
		/* the watchdog starts at ACCEPT; init_timeout covers the rest */
		[FSM_GE_WD_LATE] = G(STARTING, 0),
		[FSM_GE_WD_DEAD] = G(STARTING, 0),
		[FSM_GE_WD_OK] = G(STARTING, 0),
	},
	[FSM_G_HELD] = {
		G_PREACCEPT_COMMON,
		/* asked to go once prepared (a reload rolled back): its init
		 * deadline was met, so the stop deadline bounds its exit */
		[FSM_GE_DRAIN] = G(DRAINING, STP | ASTOP),
		[FSM_GE_HANDOVER] = G(DRAINING, STP | ASTOP),
		[FSM_GE_STOP] = G(DRAINING, STP | ASTOP),
		/* READY twice is a protocol violation */
		[FSM_GE_READY] = G(FAILED, DI | KALL | END),
		[FSM_GE_WD_LATE] = G(HELD, 0),
		[FSM_GE_WD_DEAD] = G(HELD, 0),
		[FSM_GE_WD_OK] = G(HELD, 0),
		[FSM_GE_COMMIT] = G(ACCEPTING, DI | ACC | AWD),
	},
	[FSM_G_ACCEPTING] = {
		/* READY or FAILED after ACCEPT is a protocol violation: kill;
		 * the exit that follows is a crash. */
		[FSM_GE_READY] = G(ACCEPTING, KILL),
		[FSM_GE_FAILED] = G(ACCEPTING, KILL),
		[FSM_GE_EXITED] = G(STOPPED, DWD | END | CRASH),
		[FSM_GE_MALFORMED] = G(ACCEPTING, KILL),
		[FSM_GE_QUEUE_FULL] = G(ACCEPTING, KILL),
		[FSM_GE_WD_LATE] = G(ACCEPTING, UNR),
		[FSM_GE_WD_DEAD] = G(ACCEPTING, KILL),
		[FSM_GE_WD_OK] = G(ACCEPTING, RSP),
		[FSM_GE_DRAIN] = G(DRAINING, DRN | ASTOP),
		[FSM_GE_HANDOVER] = G(DRAINING, HAND | ASTOP),
		[FSM_GE_STOP] = G(DRAINING, STP | ASTOP),
		/* one of several: replace it alone, its siblings serve on */
		[FSM_GE_PROC_EXITED] = G(ACCEPTING, RESTART),
		[FSM_GE_PROC_READY] = G(ACCEPTING, ACCP),
	},
	[FSM_G_DRAINING] = {
		[FSM_GE_READY] = G(DRAINING, 0),   /* sent before it saw STOP */
		[FSM_GE_FAILED] = G(DRAINING, 0),
		[FSM_GE_EXITED] = G(STOPPED, DI | DSTOP | DWD | END),
		[FSM_GE_MALFORMED] = G(DRAINING, KILL),
		[FSM_GE_QUEUE_FULL] = G(DRAINING, KILL),
		[FSM_GE_INIT_DEADLINE] = G(DRAINING, KALL), /* asked to stop before ACCEPT */
		[FSM_GE_STOP_DEADLINE] = G(DRAINING, KALL),
		[FSM_GE_WD_LATE] = G(DRAINING, UNR),
		[FSM_GE_WD_DEAD] = G(DRAINING, KILL),
		[FSM_GE_WD_OK] = G(DRAINING, RSP),
		[FSM_GE_DRAIN] = G(DRAINING, 0),
		[FSM_GE_HANDOVER] = G(DRAINING, 0),
		[FSM_GE_STOP] = G(DRAINING, STP),
		[FSM_GE_PROC_EXITED] = G(DRAINING, 0),
		/* a replacement that came up after the drain began: it has
		 * nothing to drain */
		[FSM_GE_PROC_READY] = G(DRAINING, KILL),
	},
	[FSM_G_STOPPED] = {
		/* every process is gone: nothing can arrive but our own requests */
		[FSM_GE_DRAIN] = G(STOPPED, 0),
		[FSM_GE_HANDOVER] = G(STOPPED, 0),
		[FSM_GE_STOP] = G(STOPPED, 0),
	},
	[FSM_G_FAILED] = {
		/* a process may still be on its way out (killed, or exiting
		 * after FAILED): what it says no longer matters */
		[FSM_GE_READY] = G(FAILED, 0),
		[FSM_GE_FAILED] = G(FAILED, 0),
		[FSM_GE_EXITED] = G(FAILED, DI | DSTOP),
		[FSM_GE_PROC_EXITED] = G(FAILED, 0),
		[FSM_GE_MALFORMED] = G(FAILED, KILL),
		[FSM_GE_QUEUE_FULL] = G(FAILED, KILL),
		[FSM_GE_STOP_DEADLINE] = G(FAILED, KALL),
		[FSM_GE_WD_LATE] = G(FAILED, 0),
		[FSM_GE_WD_DEAD] = G(FAILED, 0),
		[FSM_GE_WD_OK] = G(FAILED, 0),
		[FSM_GE_DRAIN] = G(FAILED, KALL),
		[FSM_GE_HANDOVER] = G(FAILED, KALL),
		[FSM_GE_STOP] = G(FAILED, KALL),
	},
};

#undef DI
#undef ACC
#undef DRN
#undef STP
#undef ASTOP
#undef GRACE
#undef DSTOP
#undef KILL
#undef AWD
#undef DWD
#undef UNR
#undef RSP
#undef HELD
#undef END
#undef CRASH
#undef KALL
#undef RESTART
#undef ACCP
#undef HAND

static const char *const fsm_gstate_names[FSM_G_COUNT] = {
	[FSM_G_STARTING] = "starting", [FSM_G_HELD] = "held",
	[FSM_G_ACCEPTING] = "accepting", [FSM_G_DRAINING] = "draining",
	[FSM_G_STOPPED] = "stopped", [FSM_G_FAILED] = "failed",
};

static const char *const fsm_gevent_names[FSM_GE_COUNT] = {
	[FSM_GE_READY] = "ready", [FSM_GE_FAILED] = "failed", [FSM_GE_EXITED] = "exited",
	[FSM_GE_MALFORMED] = "malformed", [FSM_GE_QUEUE_FULL] = "queue-full",
	[FSM_GE_INIT_DEADLINE] = "init-deadline", [FSM_GE_STOP_DEADLINE] = "stop-deadline",
	[FSM_GE_WD_LATE] = "watchdog-late", [FSM_GE_WD_DEAD] = "watchdog-dead",
	[FSM_GE_WD_OK] = "watchdog-ok", [FSM_GE_COMMIT] = "commit", [FSM_GE_DRAIN] = "drain",
	[FSM_GE_STOP] = "stop", [FSM_GE_PROC_EXITED] = "process-exited",
	[FSM_GE_PROC_READY] = "process-ready", [FSM_GE_HANDOVER] = "handover",
};

static const char *const fsm_gaction_names[FSM_GA_COUNT] = {
	"disarm-init", "send-accept", "send-drain", "send-stop", "arm-stop", "arm-kill-grace",
	"disarm-stop", "kill", "arm-watchdog", "disarm-watchdog", "unresponsive",
	"responsive", "held", "ended", "crashed", "kill-all", "restart-process",
	"accept-process", "send-handover",
};

const char *
fsm_gstate_str(enum fsm_gstate s)
{
	return (unsigned)s < FSM_G_COUNT ? fsm_gstate_names[s] : "unknown";
}

const char *
fsm_gevent_str(enum fsm_gevent e)
{
	return (unsigned)e < FSM_GE_COUNT ? fsm_gevent_names[e] : "unknown";
}

static const char *
fsm_bit_str(const char *const *names, unsigned count, unsigned bit)
{
	for (unsigned i = 0; i < count; i++)
		if (bit == 1u << i)
			return names[i];
	return "unknown";
}

const char *
fsm_gaction_str(unsigned one_bit)
{
	return fsm_bit_str(fsm_gaction_names, FSM_GA_COUNT, one_bit);
}

enum lc_state
fsm_gen_lc(enum fsm_gstate s)
{
	switch (s) {
	case FSM_G_STARTING:
	case FSM_G_HELD:
		return LC_INITIALIZING;
	case FSM_G_ACCEPTING:
		return LC_ACCEPTING;
	case FSM_G_DRAINING:
		return LC_DRAINING;
	case FSM_G_FAILED:
		return LC_FAILED;
	case FSM_G_STOPPED:
	case FSM_G_COUNT:
		break;
	}
	return LC_STOPPED;
}

bool
fsm_gen_terminal(enum fsm_gstate s)
{
	return s == FSM_G_STOPPED || s == FSM_G_FAILED;
}

struct fsm_gstep
fsm_gen_step(enum fsm_gstate s, enum fsm_gevent e)
{
	struct fsm_gstep none = { false, s, 0 };
	if ((unsigned)s >= FSM_G_COUNT || (unsigned)e >= FSM_GE_COUNT)
		return none;
	struct fsm_gstep st = fsm_gtable[s][e];
	return st.allowed ? st : none;
}

/* ---- cluster ------------------------------------------------------------ */

#define C(st, acts) { true, FSM_C_##st, (acts) }
#define START FSM_CA_START_GEN
#define ARM FSM_CA_ARM_RESTART
#define DISARM FSM_CA_DISARM_RESTART
#define RESET FSM_CA_RESET_CRASH
#define DRAINALL FSM_CA_DRAIN_ALL
#define RELEASE FSM_CA_RELEASE
#define REAP FSM_CA_REAP

static const struct fsm_cstep fsm_ctable[FSM_C_COUNT][FSM_CE_COUNT] = {
	[FSM_C_ACTIVE] = {
		[FSM_CE_CRASH_RESTART] = C(BACKOFF, ARM),
		[FSM_CE_CRASH_LOOP] = C(FAILED, DRAINALL | RELEASE),
		[FSM_CE_START_FAILED] = C(FAILED, RELEASE),
		[FSM_CE_ROLL_FAILED] = C(ACTIVE, 0),
		[FSM_CE_OP_RESTART] = C(ACTIVE, RESET | START),
		[FSM_CE_OP_DRAIN] = C(PARKED, DRAINALL | RELEASE),
		[FSM_CE_COMMIT] = C(ACTIVE, RESET),
		[FSM_CE_REMOVE] = C(LEAVING, DRAINALL | RELEASE),
		[FSM_CE_ALL_EXITED] = C(ACTIVE, 0),
	},
	[FSM_C_BACKOFF] = {
		[FSM_CE_RESTART_TIMER] = C(ACTIVE, START),
		[FSM_CE_OP_RESTART] = C(ACTIVE, DISARM | RESET | START),
		[FSM_CE_COMMIT] = C(ACTIVE, DISARM | RESET),
		[FSM_CE_REMOVE] = C(LEAVING, DISARM | DRAINALL | RELEASE),
		[FSM_CE_ALL_EXITED] = C(BACKOFF, 0),
	},
	[FSM_C_FAILED] = {
		[FSM_CE_OP_RESTART] = C(ACTIVE, RESET | START),
		[FSM_CE_COMMIT] = C(ACTIVE, RESET),
		[FSM_CE_REMOVE] = C(LEAVING, DRAINALL | RELEASE),
		[FSM_CE_ALL_EXITED] = C(FAILED, 0),
	},
	[FSM_C_PARKED] = {
		[FSM_CE_OP_RESTART] = C(ACTIVE, RESET | START),
		[FSM_CE_COMMIT] = C(ACTIVE, RESET),
		[FSM_CE_REMOVE] = C(LEAVING, DRAINALL | RELEASE),
		[FSM_CE_ALL_EXITED] = C(PARKED, 0),
	},
	[FSM_C_LEAVING] = {
		[FSM_CE_REMOVE] = C(LEAVING, DRAINALL),
		[FSM_CE_ALL_EXITED] = C(GONE, REAP),
	},
	[FSM_C_GONE] = { { 0 } },
};

#undef START
#undef ARM
#undef DISARM
#undef RESET
#undef DRAINALL
#undef RELEASE
#undef REAP

static const char *const fsm_cstate_names[FSM_C_COUNT] = {
	[FSM_C_ACTIVE] = "active", [FSM_C_BACKOFF] = "backoff", [FSM_C_FAILED] = "failed",
	[FSM_C_PARKED] = "parked", [FSM_C_LEAVING] = "leaving", [FSM_C_GONE] = "gone",
};

static const char *const fsm_cevent_names[FSM_CE_COUNT] = {
	[FSM_CE_CRASH_RESTART] = "crash-restart", [FSM_CE_CRASH_LOOP] = "crash-loop",
	[FSM_CE_START_FAILED] = "start-failed", [FSM_CE_ROLL_FAILED] = "roll-failed",
	[FSM_CE_RESTART_TIMER] = "restart-timer", [FSM_CE_OP_RESTART] = "operator-restart",
	[FSM_CE_OP_DRAIN] = "operator-drain", [FSM_CE_COMMIT] = "commit",
	[FSM_CE_REMOVE] = "remove", [FSM_CE_ALL_EXITED] = "all-exited",
};

static const char *const fsm_caction_names[FSM_CA_COUNT] = {
	"start-generation", "arm-restart", "disarm-restart", "reset-crash", "drain-all",
	"release", "reap",
};

const char *
fsm_cstate_str(enum fsm_cstate s)
{
	return (unsigned)s < FSM_C_COUNT ? fsm_cstate_names[s] : "unknown";
}

const char *
fsm_cevent_str(enum fsm_cevent e)
{
	return (unsigned)e < FSM_CE_COUNT ? fsm_cevent_names[e] : "unknown";
}

const char *
fsm_caction_str(unsigned one_bit)
{
	return fsm_bit_str(fsm_caction_names, FSM_CA_COUNT, one_bit);
}

struct fsm_cstep
fsm_cluster_step(enum fsm_cstate s, enum fsm_cevent e)
{
	struct fsm_cstep none = { false, s, 0 };
	if ((unsigned)s >= FSM_C_COUNT || (unsigned)e >= FSM_CE_COUNT)
		return none;
	struct fsm_cstep st = fsm_ctable[s][e];
	return st.allowed ? st : none;
}

/* ---- reload item -------------------------------------------------------- */

#define I(st, acts) { true, FSM_I_##st, (acts) }

static const struct fsm_istep fsm_itable[FSM_I_COUNT][FSM_IE_COUNT] = {
	[FSM_I_PENDING] = {
		[FSM_IE_PREPARED] = I(READY, 0),
		[FSM_IE_FAILED] = I(FAILED, FSM_IA_RECORD_ERROR),
		[FSM_IE_ROLLBACK] = I(ROLLED_BACK, FSM_IA_STOP_NEW | FSM_IA_FREE_NEW),
	},
	[FSM_I_READY] = {
		/* a held generation can still die while the others prepare */
		[FSM_IE_FAILED] = I(FAILED, FSM_IA_RECORD_ERROR),
		[FSM_IE_COMMIT] = I(COMMITTED, FSM_IA_COMMIT),
		[FSM_IE_ROLLBACK] = I(ROLLED_BACK, FSM_IA_STOP_NEW | FSM_IA_FREE_NEW),
	},
	[FSM_I_FAILED] = {
		[FSM_IE_FAILED] = I(FAILED, 0),
		[FSM_IE_ROLLBACK] = I(ROLLED_BACK, FSM_IA_STOP_NEW | FSM_IA_FREE_NEW),
	},
	[FSM_I_COMMITTED] = {
		/* after commit its generation belongs to the cluster */
		[FSM_IE_FAILED] = I(COMMITTED, 0),
	},
	[FSM_I_ROLLED_BACK] = {
		[FSM_IE_FAILED] = I(ROLLED_BACK, 0),
	},
};

static const char *const fsm_istate_names[FSM_I_COUNT] = {
	[FSM_I_PENDING] = "pending", [FSM_I_READY] = "ready", [FSM_I_FAILED] = "failed",
	[FSM_I_COMMITTED] = "committed", [FSM_I_ROLLED_BACK] = "rolled-back",
};

static const char *const fsm_ievent_names[FSM_IE_COUNT] = {
	[FSM_IE_PREPARED] = "prepared", [FSM_IE_FAILED] = "failed",
	[FSM_IE_COMMIT] = "commit", [FSM_IE_ROLLBACK] = "rollback",
};

const char *
fsm_istate_str(enum fsm_istate s)
{
	return (unsigned)s < FSM_I_COUNT ? fsm_istate_names[s] : "unknown";
}

const char *
fsm_ievent_str(enum fsm_ievent e)
{
	return (unsigned)e < FSM_IE_COUNT ? fsm_ievent_names[e] : "unknown";
}

struct fsm_istep
fsm_item_step(enum fsm_istate s, enum fsm_ievent e)
{
	struct fsm_istep none = { false, s, 0 };
	if ((unsigned)s >= FSM_I_COUNT || (unsigned)e >= FSM_IE_COUNT)
		return none;
	struct fsm_istep st = fsm_itable[s][e];
	return st.allowed ? st : none;
}
