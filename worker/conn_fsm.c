/*
 * conn_fsm — the connection lifecycle table; see conn_fsm.h. A missing
 * entry is a forbidden pair.
 */
#include "worker/conn_fsm.h"

#define T(st, acts) { true, CONN_##st, (acts) }
#define UNQ CONN_A_UNQUEUE
#define Q CONN_A_QUEUE
#define UNH CONN_A_UNHANDED
#define HND CONN_A_HANDED
#define STOP CONN_A_STOP_TIMER
#define TOUCH CONN_A_TOUCH
#define AHS CONN_A_ARM_HANDSHAKE
#define AMD CONN_A_ARM_METADATA
#define FETCH CONN_A_FETCH_METADATA
#define AIDLE CONN_A_ARM_IDLE
#define DCR CONN_A_DRAIN_CREDIT
#define NCR CONN_A_NO_CREDIT
#define UCR CONN_A_UNPARSED_CREDIT
#define ASPR CONN_A_ARM_SPREAD
#define AAGE CONN_A_ARM_AGE

/* The upstream leg moves on, the way of leaving stays (X: the suffix). */
#define WAITS(X) [CONN_E_WAIT_METADATA] = T(WAIT_METADATA##X, AMD | FETCH)
#define CONNECTS(X) [CONN_E_CONNECT] = T(CONNECTING##X, 0)
#define CONNECTED(X) [CONN_E_CONNECTED] = T(OPEN##X, STOP | TOUCH | AIDLE)
#define METADATA_CAME(X) [CONN_E_CONNECT] = T(CONNECTING##X, STOP)
/* Leaving by handover, at the boundary (X: the upstream leg). */
#define TO_BOUNDARY(X) \
	[CONN_E_HOLD] = T(X##_HELD, Q), \
	[CONN_E_HANDED] = T(HANDED, HND), \
	[CONN_E_NO_MOVE] = T(X##_DRAINING, UCR), \
	[CONN_E_CLOSE] = T(CLOSED, 0)
#define HELD(X) \
	[CONN_E_RESUME] = T(X##_HANDOVER, UNQ), \
	[CONN_E_NO_MOVE] = T(X##_DRAINING, UNQ | UCR), \
	[CONN_E_CLOSE] = T(CLOSED, UNQ)

static const struct conn_fsm_step conn_table[CONN_STATE_COUNT][CONN_E_COUNT] = {
	[CONN_NEW] = {
		[CONN_E_PROXY] = T(PROXY_HEADER, AHS),
		[CONN_E_TLS] = T(TLS_HANDSHAKE, AHS),
		WAITS(),
		CONNECTS(),
		/* (last_active was set when it was created) */
		[CONN_E_ADOPTED] = T(OPEN, AIDLE | AAGE),
		[CONN_E_CLOSE] = T(CLOSED, 0),
	},

	/* The header read, the connection goes on as one without a header
	 * would; the TLS handshake keeps the deadline the header had. */
	[CONN_PROXY_HEADER] = {
		[CONN_E_TLS] = T(TLS_HANDSHAKE, 0),
		WAITS(),
		METADATA_CAME(),
		[CONN_E_DRAIN] = T(PROXY_HEADER_DRAINING, DCR),
		[CONN_E_CLOSE] = T(CLOSED, 0),
	},
	[CONN_PROXY_HEADER_DRAINING] = {
		[CONN_E_TLS] = T(TLS_HANDSHAKE_DRAINING, 0),
		WAITS(_DRAINING),
		METADATA_CAME(_DRAINING),
		[CONN_E_CLOSE] = T(CLOSED, 0),
	},

	[CONN_TLS_HANDSHAKE] = {
		[CONN_E_TLS_DONE] = T(CONNECTING, STOP | TOUCH),
		[CONN_E_DRAIN] = T(TLS_HANDSHAKE_DRAINING, DCR),
		[CONN_E_CLOSE] = T(CLOSED, 0),
	},
	[CONN_TLS_HANDSHAKE_DRAINING] = {
		/* the handshake completes, a first request on its way is served */
		[CONN_E_TLS_DONE] = T(CONNECTING_DRAINING, STOP | TOUCH),
		[CONN_E_CLOSE] = T(CLOSED, 0),
	},

	[CONN_WAIT_METADATA] = {
		METADATA_CAME(),
		[CONN_E_DRAIN] = T(WAIT_METADATA_DRAINING, DCR),
		[CONN_E_HANDOVER] = T(WAIT_METADATA_HANDOVER, NCR),
		[CONN_E_CLOSE] = T(CLOSED, 0),
	},
	[CONN_WAIT_METADATA_DRAINING] = {
		METADATA_CAME(_DRAINING),
		[CONN_E_CLOSE] = T(CLOSED, 0),
	},
	[CONN_WAIT_METADATA_HANDOVER] = {
		METADATA_CAME(_HANDOVER),
		TO_BOUNDARY(WAIT_METADATA),
	},
	[CONN_WAIT_METADATA_HELD] = {
		METADATA_CAME(_HELD),
		HELD(WAIT_METADATA),
	},

	[CONN_CONNECTING] = {
		WAITS(),
		CONNECTS(),
		/* serving: its age counts from its start (accept or adoption) */
		[CONN_E_CONNECTED] = T(OPEN, STOP | TOUCH | AIDLE | AAGE),
		[CONN_E_DRAIN] = T(CONNECTING_DRAINING, DCR),
		[CONN_E_HANDOVER] = T(CONNECTING_HANDOVER, NCR),
		[CONN_E_CLOSE] = T(CLOSED, 0),
	},
	[CONN_CONNECTING_DRAINING] = {
		WAITS(_DRAINING),
		CONNECTS(_DRAINING),
		CONNECTED(_DRAINING),
		[CONN_E_CLOSE] = T(CLOSED, 0),
	},
	[CONN_CONNECTING_HANDOVER] = {
		WAITS(_HANDOVER),
		CONNECTS(_HANDOVER),
		CONNECTED(_HANDOVER),
		TO_BOUNDARY(CONNECTING),
	},
	[CONN_CONNECTING_HELD] = {
		WAITS(_HELD),
		CONNECTS(_HELD),
		CONNECTED(_HELD),
		HELD(CONNECTING),
	},

	[CONN_OPEN] = {
		[CONN_E_SPREAD] = T(OPEN_SPREAD, ASPR),
		[CONN_E_EXPIRE] = T(OPEN_EXPIRING, DCR),
		[CONN_E_DRAIN] = T(OPEN_DRAINING, DCR),
		[CONN_E_HANDOVER] = T(OPEN_HANDOVER, NCR),
		[CONN_E_CLOSE] = T(CLOSED, 0),
	},
	[CONN_OPEN_SPREAD] = {
		[CONN_E_DRAIN] = T(OPEN_DRAINING, DCR),
		[CONN_E_CLOSE] = T(CLOSED, 0),
	},
	[CONN_OPEN_EXPIRING] = {
		/* already stopping at its boundary: a drain counts its close as
		 * drained; a reload leaves it to close on its own */
		[CONN_E_DRAIN] = T(OPEN_DRAINING, 0),
		[CONN_E_SPREAD] = T(OPEN_EXPIRING, 0),
		[CONN_E_HANDOVER] = T(OPEN_EXPIRING, 0),
		[CONN_E_CLOSE] = T(CLOSED, 0),
	},
	[CONN_OPEN_DRAINING] = {
		[CONN_E_CLOSE] = T(CLOSED, 0),
	},
	[CONN_OPEN_HANDOVER] = {
		TO_BOUNDARY(OPEN),
	},
	[CONN_OPEN_HELD] = {
		HELD(OPEN),
	},

	[CONN_HANDED] = {
		[CONN_E_DONE] = T(CLOSED, UNH),
		[CONN_E_CLOSE] = T(CLOSED, UNH),
	},
	[CONN_CLOSED] = { { 0 } },
};

#undef T
#undef UNQ
#undef Q
#undef UNH
#undef HND
#undef STOP
#undef TOUCH
#undef AHS
#undef AMD
#undef FETCH
#undef AIDLE
#undef DCR
#undef NCR
#undef UCR
#undef ASPR
#undef AAGE
#undef WAITS
#undef CONNECTS
#undef CONNECTED
#undef METADATA_CAME
#undef TO_BOUNDARY
#undef HELD

static const char *const conn_state_names[CONN_STATE_COUNT] = {
	[CONN_NEW] = "new",
	[CONN_PROXY_HEADER] = "proxy-header",
	[CONN_PROXY_HEADER_DRAINING] = "proxy-header+draining",
	[CONN_TLS_HANDSHAKE] = "tls-handshake",
	[CONN_TLS_HANDSHAKE_DRAINING] = "tls-handshake+draining",
	[CONN_WAIT_METADATA] = "wait-metadata",
	[CONN_WAIT_METADATA_DRAINING] = "wait-metadata+draining",
	[CONN_WAIT_METADATA_HANDOVER] = "wait-metadata+handover",
	[CONN_WAIT_METADATA_HELD] = "wait-metadata+held",
	[CONN_CONNECTING] = "connecting",
	[CONN_CONNECTING_DRAINING] = "connecting+draining",
	[CONN_CONNECTING_HANDOVER] = "connecting+handover",
	[CONN_CONNECTING_HELD] = "connecting+held",
	[CONN_OPEN] = "open",
	[CONN_OPEN_SPREAD] = "open+spread",
	[CONN_OPEN_EXPIRING] = "open+expiring",
	[CONN_OPEN_DRAINING] = "open+draining",
	[CONN_OPEN_HANDOVER] = "open+handover",
	[CONN_OPEN_HELD] = "open+held",
	[CONN_HANDED] = "handed",
	[CONN_CLOSED] = "closed",
};

static const char *const conn_event_names[CONN_E_COUNT] = {
	[CONN_E_PROXY] = "proxy",
	[CONN_E_TLS] = "tls",
	[CONN_E_TLS_DONE] = "tls-done",
	[CONN_E_WAIT_METADATA] = "wait-metadata",
	[CONN_E_CONNECT] = "connect",
	[CONN_E_CONNECTED] = "connected",
	[CONN_E_ADOPTED] = "adopted",
	[CONN_E_SPREAD] = "spread",
	[CONN_E_EXPIRE] = "expire",
	[CONN_E_DRAIN] = "drain",
	[CONN_E_HANDOVER] = "handover",
	[CONN_E_HOLD] = "hold",
	[CONN_E_RESUME] = "resume",
	[CONN_E_HANDED] = "handed",
	[CONN_E_NO_MOVE] = "no-move",
	[CONN_E_DONE] = "done",
	[CONN_E_CLOSE] = "close",
};

static const char *const conn_action_names[CONN_A_COUNT] = {
	"unqueue", "queue", "unhanded", "handed", "stop-timer", "touch", "arm-handshake",
	"arm-metadata", "fetch-metadata", "arm-idle", "drain-credit", "no-credit",
	"unparsed-credit", "arm-spread", "arm-age",
};

const char *
conn_fsm_state_str(enum conn_state s)
{
	return (unsigned)s < CONN_STATE_COUNT ? conn_state_names[s] : "unknown";
}

const char *
conn_fsm_event_str(enum conn_event e)
{
	return (unsigned)e < CONN_E_COUNT ? conn_event_names[e] : "unknown";
}

const char *
conn_fsm_action_str(unsigned one_bit)
{
	for (unsigned i = 0; i < CONN_A_COUNT; i++)
		if (one_bit == 1u << i)
			return conn_action_names[i];
	return "unknown";
}

struct conn_fsm_step
conn_fsm_step(enum conn_state s, enum conn_event e)
{
	if ((unsigned)s >= CONN_STATE_COUNT || (unsigned)e >= CONN_E_COUNT)
		return (struct conn_fsm_step){ false, s, 0 };
	struct conn_fsm_step st = conn_table[s][e];
	if (!st.allowed)
		st.next = s;
	return st;
}

enum conn_leg
conn_fsm_leg(enum conn_state s)
{
	switch (s) {
	case CONN_NEW:
		return CONN_LEG_NEW;
	case CONN_PROXY_HEADER:
	case CONN_PROXY_HEADER_DRAINING:
		return CONN_LEG_PROXY_HEADER;
	case CONN_TLS_HANDSHAKE:
	case CONN_TLS_HANDSHAKE_DRAINING:
		return CONN_LEG_TLS_HANDSHAKE;
	case CONN_WAIT_METADATA:
	case CONN_WAIT_METADATA_DRAINING:
	case CONN_WAIT_METADATA_HANDOVER:
	case CONN_WAIT_METADATA_HELD:
		return CONN_LEG_WAIT_METADATA;
	case CONN_CONNECTING:
	case CONN_CONNECTING_DRAINING:
	case CONN_CONNECTING_HANDOVER:
	case CONN_CONNECTING_HELD:
		return CONN_LEG_CONNECTING;
	case CONN_OPEN:
	case CONN_OPEN_SPREAD:
	case CONN_OPEN_EXPIRING:
	case CONN_OPEN_DRAINING:
	case CONN_OPEN_HANDOVER:
	case CONN_OPEN_HELD:
		return CONN_LEG_OPEN;
	default:
		return CONN_LEG_NONE;
	}
}

bool
conn_fsm_open(enum conn_state s)
{
	return conn_fsm_leg(s) == CONN_LEG_OPEN;
}

bool
conn_fsm_held(enum conn_state s)
{
	return s == CONN_WAIT_METADATA_HELD || s == CONN_CONNECTING_HELD || s == CONN_OPEN_HELD;
}

bool
conn_fsm_handover(enum conn_state s)
{
	return s == CONN_WAIT_METADATA_HANDOVER || s == CONN_CONNECTING_HANDOVER ||
	       s == CONN_OPEN_HANDOVER || conn_fsm_held(s);
}

bool
conn_fsm_draining(enum conn_state s)
{
	return s == CONN_PROXY_HEADER_DRAINING || s == CONN_TLS_HANDSHAKE_DRAINING ||
	       s == CONN_WAIT_METADATA_DRAINING || s == CONN_CONNECTING_DRAINING ||
	       s == CONN_OPEN_EXPIRING || s == CONN_OPEN_DRAINING ||
	       conn_fsm_handover(s) || s == CONN_HANDED;
}
