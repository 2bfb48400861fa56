/*
 * upgrade — the tables; see upgrade.h. A missing entry is a forbidden pair:
 * for an event the engine makes itself that is a programming error (logged,
 * never acted on); events from outside (a message, an exit, a deadline) are
 * allowed wherever they can arrive, as no-ops where they mean nothing.
 */
#include "supervisor/upgrade.h"

#include <stddef.h>

/* ---- predecessor ------------------------------------------------------- */

#define O(st, acts) { true, UPG_O_##st, (acts) }
#define SPAWN UPG_OA_SPAWN
#define STATE UPG_OA_SEND_STATE
#define PHASE UPG_OA_ARM_PHASE
#define PREP UPG_OA_ARM_PREPARE
#define SCOMMIT UPG_OA_SEND_COMMIT
#define ACOMMIT UPG_OA_ARM_COMMIT
#define COMMIT UPG_OA_COMMIT
#define RB UPG_OA_ROLLBACK
#define REJ UPG_OA_REJECT
#define DIS UPG_OA_DISARM
#define GONE UPG_OA_PEER_GONE
#define HURRY UPG_OA_HURRY
#define BYE UPG_OA_BYE

/* Before the commit point any failure rolls back; a late answer of the
 * successor (it is being killed) means nothing. */
#define O_PRECOMMIT_COMMON \
	[UPG_OE_REFUSED] = O(ROLLED_BACK, DIS | RB | REJ), \
	[UPG_OE_FAILED] = O(ROLLED_BACK, DIS | RB), \
	[UPG_OE_DEADLINE] = O(ROLLED_BACK, DIS | RB), \
	[UPG_OE_HURRY] = O(ROLLED_BACK, DIS | RB)

static const struct upg_ostep upg_otable[UPG_O_COUNT][UPG_OE_COUNT] = {
	[UPG_O_IDLE] = {
		[UPG_OE_START] = O(SPAWNING, SPAWN | PHASE),
		/* a cluster crash or a stop while no upgrade runs */
		[UPG_OE_FAILED] = O(IDLE, 0),
		[UPG_OE_HURRY] = O(IDLE, 0),
	},
	[UPG_O_SPAWNING] = {
		O_PRECOMMIT_COMMON,
		[UPG_OE_HELLO] = O(TRANSFER, STATE | PHASE),
	},
	[UPG_O_TRANSFER] = {
		O_PRECOMMIT_COMMON,
		[UPG_OE_VALID] = O(PREPARING, PREP),
	},
	[UPG_O_PREPARING] = {
		O_PRECOMMIT_COMMON,
		[UPG_OE_PREPARED] = O(COMMITTING, SCOMMIT | ACOMMIT),
	},
	[UPG_O_COMMITTING] = {
		O_PRECOMMIT_COMMON,
		[UPG_OE_COMMITTED] = O(HANDING_OVER, DIS | COMMIT),
	},
	[UPG_O_HANDING_OVER] = {
		/* the successor serves: nothing rolls back any more */
		[UPG_OE_FAILED] = O(HANDING_OVER, 0),
		[UPG_OE_DEADLINE] = O(HANDING_OVER, 0),
		[UPG_OE_PEER_GONE] = O(HANDING_OVER, GONE),
		[UPG_OE_HURRY] = O(HANDING_OVER, HURRY),
		[UPG_OE_TAIL_DONE] = O(DONE, BYE),
	},
	[UPG_O_DONE] = {
		[UPG_OE_FAILED] = O(DONE, 0),
		[UPG_OE_PEER_GONE] = O(DONE, 0),
		[UPG_OE_HURRY] = O(DONE, 0),
		[UPG_OE_TAIL_DONE] = O(DONE, 0),
	},
	[UPG_O_ROLLED_BACK] = {
		[UPG_OE_REFUSED] = O(ROLLED_BACK, 0),
		[UPG_OE_FAILED] = O(ROLLED_BACK, 0),
		[UPG_OE_DEADLINE] = O(ROLLED_BACK, 0),
		[UPG_OE_PEER_GONE] = O(ROLLED_BACK, 0),
		[UPG_OE_HURRY] = O(ROLLED_BACK, 0),
	},
};

#undef SPAWN
#undef STATE
#undef PHASE
#undef PREP
#undef SCOMMIT
#undef ACOMMIT
#undef COMMIT
#undef RB
#undef REJ
#undef DIS
#undef GONE
#undef HURRY
#undef BYE

static const char *const upg_ostate_names[UPG_O_COUNT] = {
	[UPG_O_IDLE] = "idle", [UPG_O_SPAWNING] = "spawning", [UPG_O_TRANSFER] = "transfer",
	[UPG_O_PREPARING] = "preparing", [UPG_O_COMMITTING] = "committing",
	[UPG_O_HANDING_OVER] = "handing-over", [UPG_O_DONE] = "done",
	[UPG_O_ROLLED_BACK] = "rolled-back",
};

static const char *const upg_oevent_names[UPG_OE_COUNT] = {
	[UPG_OE_START] = "start", [UPG_OE_HELLO] = "hello", [UPG_OE_REFUSED] = "refused",
	[UPG_OE_VALID] = "valid", [UPG_OE_PREPARED] = "prepared", [UPG_OE_FAILED] = "failed",
	[UPG_OE_DEADLINE] = "deadline", [UPG_OE_COMMITTED] = "committed",
	[UPG_OE_PEER_GONE] = "peer-gone", [UPG_OE_HURRY] = "hurry",
	[UPG_OE_TAIL_DONE] = "tail-done",
};

static const char *const upg_oaction_names[UPG_OA_COUNT] = {
	"spawn", "send-state", "arm-phase", "arm-prepare", "send-commit", "arm-commit",
	"commit", "rollback", "reject", "disarm", "peer-gone", "hurry", "bye",
};

static const char *
upg_bit_str(const char *const *names, unsigned count, unsigned bit)
{
	for (unsigned i = 0; i < count; i++)
		if (bit == 1u << i)
			return names[i];
	return "unknown";
}

const char *
upg_ostate_str(enum upg_ostate s)
{
	return (unsigned)s < UPG_O_COUNT ? upg_ostate_names[s] : "unknown";
}

const char *
upg_oevent_str(enum upg_oevent e)
{
	return (unsigned)e < UPG_OE_COUNT ? upg_oevent_names[e] : "unknown";
}

const char *
upg_oaction_str(unsigned one_bit)
{
	return upg_bit_str(upg_oaction_names, UPG_OA_COUNT, one_bit);
}

bool
upg_ostate_precommit(enum upg_ostate s)
{
	return s == UPG_O_SPAWNING || s == UPG_O_TRANSFER || s == UPG_O_PREPARING ||
	       s == UPG_O_COMMITTING;
}

struct upg_ostep
upg_out_step(enum upg_ostate s, enum upg_oevent e)
{
	struct upg_ostep none = { false, s, 0 };
	if ((unsigned)s >= UPG_O_COUNT || (unsigned)e >= UPG_OE_COUNT)
		return none;
	struct upg_ostep st = upg_otable[s][e];
	return st.allowed ? st : none;
}

/* ---- successor ---------------------------------------------------------- */

#define I(st, acts) { true, UPG_I_##st, (acts) }
#define HELLO UPG_IA_HELLO
#define REFUSE UPG_IA_REFUSE
#define PREPARE UPG_IA_PREPARE
#define INVALID UPG_IA_INVALID
#define ARM UPG_IA_ARM
#define SPREP UPG_IA_SEND_PREPARED
#define ABORT UPG_IA_ABORT
#define CARRY UPG_IA_CARRY
#define COMMIT UPG_IA_COMMIT
#define READY UPG_IA_READY
#define FOLD UPG_IA_FOLD
#define SSTOP UPG_IA_SEND_STOP
#define DIS UPG_IA_DISARM

/* Before COMMIT the predecessor serves: whatever goes wrong here, we go
 * (our held workers never accepted a connection). */
#define I_PRECOMMIT_COMMON \
	[UPG_IE_GEN_FAILED] = I(ABORTED, DIS | ABORT), \
	[UPG_IE_PEER_GONE] = I(ABORTED, DIS | ABORT), \
	[UPG_IE_DEADLINE] = I(ABORTED, DIS | ABORT), \
	[UPG_IE_STOP] = I(ABORTED, DIS | ABORT)

static const struct upg_istep upg_itable[UPG_I_COUNT][UPG_IE_COUNT] = {
	[UPG_I_HELLO] = {
		[UPG_IE_OFFER_OK] = I(RECEIVING, HELLO | ARM),
		[UPG_IE_OFFER_BAD] = I(ABORTED, REFUSE),
		[UPG_IE_PEER_GONE] = I(ABORTED, DIS | ABORT),
		[UPG_IE_DEADLINE] = I(ABORTED, DIS | ABORT),
		[UPG_IE_STOP] = I(ABORTED, DIS | ABORT),
	},
	[UPG_I_RECEIVING] = {
		[UPG_IE_RECEIVED] = I(PREPARING, PREPARE | ARM),
		[UPG_IE_INVALID] = I(ABORTED, DIS | INVALID),
		[UPG_IE_PEER_GONE] = I(ABORTED, DIS | ABORT),
		[UPG_IE_DEADLINE] = I(ABORTED, DIS | ABORT),
		[UPG_IE_STOP] = I(ABORTED, DIS | ABORT),
	},
	[UPG_I_PREPARING] = {
		I_PRECOMMIT_COMMON,
		[UPG_IE_ALL_HELD] = I(PREPARED, SPREP | ARM),
		[UPG_IE_COUNTERS] = I(PREPARING, CARRY),
	},
	[UPG_I_PREPARED] = {
		I_PRECOMMIT_COMMON,
		[UPG_IE_COUNTERS] = I(PREPARED, CARRY),
		[UPG_IE_COMMIT] = I(COMMITTED, DIS | COMMIT),
	},
	[UPG_I_COMMITTED] = {
		/* our workers accept: from here on we never step back. The
		 * predecessor gone before MAIN: we serve alone (under systemd
		 * it was still the main process: the unit restarts). */
		[UPG_IE_GEN_FAILED] = I(COMMITTED, 0),
		[UPG_IE_COUNTERS] = I(COMMITTED, CARRY),
		[UPG_IE_MAIN] = I(TAIL, READY),
		[UPG_IE_PEER_GONE] = I(SERVING, FOLD | READY),
		[UPG_IE_DEADLINE] = I(COMMITTED, 0),
		[UPG_IE_STOP] = I(COMMITTED, SSTOP),
	},
	[UPG_I_TAIL] = {
		[UPG_IE_GEN_FAILED] = I(TAIL, 0),
		[UPG_IE_COUNTERS] = I(TAIL, CARRY),
		[UPG_IE_BYE] = I(SERVING, FOLD),
		[UPG_IE_PEER_GONE] = I(SERVING, FOLD),
		[UPG_IE_DEADLINE] = I(TAIL, 0),
		[UPG_IE_STOP] = I(TAIL, SSTOP),
	},
	[UPG_I_SERVING] = {
		[UPG_IE_GEN_FAILED] = I(SERVING, 0),
		[UPG_IE_PEER_GONE] = I(SERVING, 0),
		[UPG_IE_DEADLINE] = I(SERVING, 0),
		[UPG_IE_STOP] = I(SERVING, 0),
	},
	[UPG_I_ABORTED] = {
		[UPG_IE_GEN_FAILED] = I(ABORTED, 0),
		[UPG_IE_PEER_GONE] = I(ABORTED, 0),
		[UPG_IE_DEADLINE] = I(ABORTED, 0),
		[UPG_IE_STOP] = I(ABORTED, 0),
	},
};

#undef HELLO
#undef REFUSE
#undef PREPARE
#undef INVALID
#undef ARM
#undef SPREP
#undef ABORT
#undef CARRY
#undef COMMIT
#undef READY
#undef FOLD
#undef SSTOP
#undef DIS

static const char *const upg_istate_names[UPG_I_COUNT] = {
	[UPG_I_HELLO] = "hello", [UPG_I_RECEIVING] = "receiving",
	[UPG_I_PREPARING] = "preparing", [UPG_I_PREPARED] = "prepared",
	[UPG_I_COMMITTED] = "committed", [UPG_I_TAIL] = "tail", [UPG_I_SERVING] = "serving",
	[UPG_I_ABORTED] = "aborted",
};

static const char *const upg_ievent_names[UPG_IE_COUNT] = {
	[UPG_IE_OFFER_OK] = "offer-ok", [UPG_IE_OFFER_BAD] = "offer-bad",
	[UPG_IE_RECEIVED] = "received", [UPG_IE_INVALID] = "invalid",
	[UPG_IE_ALL_HELD] = "all-held", [UPG_IE_GEN_FAILED] = "generation-failed",
	[UPG_IE_COUNTERS] = "counters", [UPG_IE_COMMIT] = "commit", [UPG_IE_MAIN] = "main",
	[UPG_IE_BYE] = "bye", [UPG_IE_PEER_GONE] = "peer-gone", [UPG_IE_DEADLINE] = "deadline",
	[UPG_IE_STOP] = "stop",
};

static const char *const upg_iaction_names[UPG_IA_COUNT] = {
	"hello", "refuse", "prepare", "invalid", "arm", "send-prepared", "abort", "carry",
	"commit", "ready", "fold", "send-stop", "disarm",
};

const char *
upg_istate_str(enum upg_istate s)
{
	return (unsigned)s < UPG_I_COUNT ? upg_istate_names[s] : "unknown";
}

const char *
upg_ievent_str(enum upg_ievent e)
{
	return (unsigned)e < UPG_IE_COUNT ? upg_ievent_names[e] : "unknown";
}

const char *
upg_iaction_str(unsigned one_bit)
{
	return upg_bit_str(upg_iaction_names, UPG_IA_COUNT, one_bit);
}

struct upg_istep
upg_in_step(enum upg_istate s, enum upg_ievent e)
{
	struct upg_istep none = { false, s, 0 };
	if ((unsigned)s >= UPG_I_COUNT || (unsigned)e >= UPG_IE_COUNT)
		return none;
	struct upg_istep st = upg_itable[s][e];
	return st.allowed ? st : none;
}
