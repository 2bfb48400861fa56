/*
 * Unit tests for worker/conn_fsm: every (state, event) pair of the
 * connection lifecycle table against an expectation written here from the
 * semantics of conn_fsm.h and conn.h (not copied from conn_fsm.c), plus
 * properties that must hold whatever the table says: every state is
 * reachable from new and can close, closed is terminal, the handover
 * window's two counters are moved exactly on entering and leaving held and
 * handed, a connection never goes back to serving nor its upstream leg
 * backwards from open, and the classifications the data path asks agree
 * with the states' names.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "worker/conn_fsm.h"

/* Short names, local to this file. */
enum {
	NEW = CONN_NEW,
	PH = CONN_PROXY_HEADER,
	PH_D = CONN_PROXY_HEADER_DRAINING,
	TLS = CONN_TLS_HANDSHAKE,
	TLS_D = CONN_TLS_HANDSHAKE_DRAINING,
	WM = CONN_WAIT_METADATA,
	WM_D = CONN_WAIT_METADATA_DRAINING,
	WM_V = CONN_WAIT_METADATA_HANDOVER,
	WM_H = CONN_WAIT_METADATA_HELD,
	C = CONN_CONNECTING,
	C_D = CONN_CONNECTING_DRAINING,
	C_V = CONN_CONNECTING_HANDOVER,
	C_H = CONN_CONNECTING_HELD,
	O = CONN_OPEN,
	O_P = CONN_OPEN_SPREAD,
	O_E = CONN_OPEN_EXPIRING,
	O_D = CONN_OPEN_DRAINING,
	O_V = CONN_OPEN_HANDOVER,
	O_H = CONN_OPEN_HELD,
	HANDED = CONN_HANDED,
	CLOSED = CONN_CLOSED,
};

enum {
	UNQ = CONN_A_UNQUEUE,
	Q = CONN_A_QUEUE,
	UNH = CONN_A_UNHANDED,
	HND = CONN_A_HANDED,
	STOP = CONN_A_STOP_TIMER,
	TOUCH = CONN_A_TOUCH,
	AHS = CONN_A_ARM_HANDSHAKE,
	AMD = CONN_A_ARM_METADATA,
	FETCH = CONN_A_FETCH_METADATA,
	AIDLE = CONN_A_ARM_IDLE,
	DCR = CONN_A_DRAIN_CREDIT,
	NCR = CONN_A_NO_CREDIT,
	UCR = CONN_A_UNPARSED_CREDIT,
	ASPR = CONN_A_ARM_SPREAD,
	AAGE = CONN_A_ARM_AGE,
};

struct exp {
	int s;
	enum conn_event e;
	int next;
	unsigned actions;
};

/* Rows are the allowed pairs; a pair without a row must be forbidden. */
static const struct exp expect[] = {
	/* new: created by an accept or an adoption; the first event says how
	 * it starts */
	{ NEW, CONN_E_PROXY, PH, AHS },                /* the header and the TLS handshake
	                                                  share one deadline */
	{ NEW, CONN_E_TLS, TLS, AHS },                 /* the handshake gets request_timeout */
	{ NEW, CONN_E_WAIT_METADATA, WM, AMD | FETCH },
	{ NEW, CONN_E_CONNECT, C, 0 },
	{ NEW, CONN_E_ADOPTED, O, AIDLE | AAGE },      /* open both ways at once, its age kept */
	{ NEW, CONN_E_CLOSE, CLOSED, 0 },              /* accepted while draining, or refused */

	/* the PROXY header: once read, on as a connection without one would
	 * start, except that TLS keeps the deadline already running */
	{ PH, CONN_E_TLS, TLS, 0 },
	{ PH, CONN_E_WAIT_METADATA, WM, AMD | FETCH },
	{ PH, CONN_E_CONNECT, C, STOP },
	{ PH, CONN_E_DRAIN, PH_D, DCR },               /* its first request is on its way */
	{ PH, CONN_E_CLOSE, CLOSED, 0 },
	{ PH_D, CONN_E_TLS, TLS_D, 0 },
	{ PH_D, CONN_E_WAIT_METADATA, WM_D, AMD | FETCH },
	{ PH_D, CONN_E_CONNECT, C_D, STOP },
	{ PH_D, CONN_E_CLOSE, CLOSED, 0 },

	/* the client's TLS handshake: the upstream waits; a drain lets it
	 * finish (cutting it would fail the client), TLS never hands over */
	{ TLS, CONN_E_TLS_DONE, C, STOP | TOUCH },
	{ TLS, CONN_E_DRAIN, TLS_D, DCR },
	{ TLS, CONN_E_CLOSE, CLOSED, 0 },
	{ TLS_D, CONN_E_TLS_DONE, C_D, STOP | TOUCH },
	{ TLS_D, CONN_E_CLOSE, CLOSED, 0 },

	/* waiting for the broker's address: metadata came, connect (the wait
	 * timer stops) whatever way it is leaving */
	{ WM, CONN_E_CONNECT, C, STOP },
	{ WM, CONN_E_DRAIN, WM_D, DCR },
	{ WM, CONN_E_HANDOVER, WM_V, NCR },
	{ WM, CONN_E_CLOSE, CLOSED, 0 },
	{ WM_D, CONN_E_CONNECT, C_D, STOP },
	{ WM_D, CONN_E_CLOSE, CLOSED, 0 },
	{ WM_V, CONN_E_CONNECT, C_V, STOP },
	{ WM_V, CONN_E_HOLD, WM_H, Q },
	{ WM_V, CONN_E_HANDED, HANDED, HND },          /* client only: the next one connects */
	{ WM_V, CONN_E_NO_MOVE, WM_D, UCR },
	{ WM_V, CONN_E_CLOSE, CLOSED, 0 },
	{ WM_H, CONN_E_CONNECT, C_H, STOP },
	{ WM_H, CONN_E_RESUME, WM_V, UNQ },
	{ WM_H, CONN_E_NO_MOVE, WM_D, UNQ | UCR },
	{ WM_H, CONN_E_CLOSE, CLOSED, UNQ },

	/* connecting: may learn it must wait for metadata first (after a TLS
	 * handshake), retries the next upstream server, opens */
	{ C, CONN_E_WAIT_METADATA, WM, AMD | FETCH },
	{ C, CONN_E_CONNECT, C, 0 },
	{ C, CONN_E_CONNECTED, O, STOP | TOUCH | AIDLE | AAGE },
	{ C, CONN_E_DRAIN, C_D, DCR },                 /* requests already sent are served */
	{ C, CONN_E_HANDOVER, C_V, NCR },
	{ C, CONN_E_CLOSE, CLOSED, 0 },
	{ C_D, CONN_E_WAIT_METADATA, WM_D, AMD | FETCH },
	{ C_D, CONN_E_CONNECT, C_D, 0 },
	{ C_D, CONN_E_CONNECTED, O_D, STOP | TOUCH | AIDLE },
	{ C_D, CONN_E_CLOSE, CLOSED, 0 },
	{ C_V, CONN_E_WAIT_METADATA, WM_V, AMD | FETCH },
	{ C_V, CONN_E_CONNECT, C_V, 0 },
	{ C_V, CONN_E_CONNECTED, O_V, STOP | TOUCH | AIDLE },
	{ C_V, CONN_E_HOLD, C_H, Q },
	{ C_V, CONN_E_HANDED, HANDED, HND },
	{ C_V, CONN_E_NO_MOVE, C_D, UCR },
	{ C_V, CONN_E_CLOSE, CLOSED, 0 },
	{ C_H, CONN_E_WAIT_METADATA, WM_H, AMD | FETCH },
	{ C_H, CONN_E_CONNECT, C_H, 0 },
	{ C_H, CONN_E_CONNECTED, O_H, STOP | TOUCH | AIDLE },
	{ C_H, CONN_E_RESUME, C_V, UNQ },
	{ C_H, CONN_E_NO_MOVE, C_D, UNQ | UCR },
	{ C_H, CONN_E_CLOSE, CLOSED, UNQ },

	/* open: the only place a reload spreads; a spread connection's turn
	 * is a drain */
	{ O, CONN_E_SPREAD, O_P, ASPR },
	{ O, CONN_E_EXPIRE, O_E, DCR },                /* max-age: the drain path, alone */
	{ O, CONN_E_DRAIN, O_D, DCR },
	{ O, CONN_E_HANDOVER, O_V, NCR },
	{ O, CONN_E_CLOSE, CLOSED, 0 },
	{ O_P, CONN_E_DRAIN, O_D, DCR },
	{ O_P, CONN_E_CLOSE, CLOSED, 0 },
	{ O_D, CONN_E_CLOSE, CLOSED, 0 },
	/* expiring: already stopping at its boundary; a drain takes it over
	 * (counted drained), a reload leaves it alone */
	{ O_E, CONN_E_DRAIN, O_D, 0 },
	{ O_E, CONN_E_SPREAD, O_E, 0 },
	{ O_E, CONN_E_HANDOVER, O_E, 0 },
	{ O_E, CONN_E_CLOSE, CLOSED, 0 },
	{ O_V, CONN_E_HOLD, O_H, Q },
	{ O_V, CONN_E_HANDED, HANDED, HND },
	{ O_V, CONN_E_NO_MOVE, O_D, UCR },
	{ O_V, CONN_E_CLOSE, CLOSED, 0 },
	{ O_H, CONN_E_RESUME, O_V, UNQ },
	{ O_H, CONN_E_NO_MOVE, O_D, UNQ | UCR },
	{ O_H, CONN_E_CLOSE, CLOSED, UNQ },

	/* handed: only CONN_DONE or a close (deadline, channel gone) */
	{ HANDED, CONN_E_DONE, CLOSED, UNH },
	{ HANDED, CONN_E_CLOSE, CLOSED, UNH },
};

static const struct exp *
find(int s, int e)
{
	for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
		if (expect[i].s == s && (int)expect[i].e == e)
			return &expect[i];
	return NULL;
}

static char *
acts(unsigned a, char *buf, size_t len)
{
	size_t off = 0;
	buf[0] = 0;
	for (unsigned i = 0; i < CONN_A_COUNT; i++)
		if (a & (1u << i))
			off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? "," : "",
			    conn_fsm_action_str(1u << i));
	return buf;
}

Test(conn_fsm, every_pair_as_expected)
{
	char a[256], b[256];
	for (int s = 0; s < CONN_STATE_COUNT; s++)
		for (int e = 0; e < CONN_E_COUNT; e++) {
			struct conn_fsm_step st = conn_fsm_step(s, e);
			const struct exp *x = find(s, e);
			const char *sn = conn_fsm_state_str(s), *en = conn_fsm_event_str(e);
			if (!x) {
				cr_expect(!st.allowed, "%s × %s must be forbidden", sn, en);
				cr_expect_eq(st.next, s, "%s × %s forbidden: state kept", sn, en);
				cr_expect_eq(st.actions, 0, "%s × %s forbidden: no action", sn, en);
				continue;
			}
			cr_expect(st.allowed, "%s × %s must be allowed", sn, en);
			cr_expect_eq(st.next, x->next, "%s × %s -> %s, expected %s", sn, en,
			    conn_fsm_state_str(st.next), conn_fsm_state_str(x->next));
			cr_expect_eq(st.actions, x->actions, "%s × %s actions %s, expected %s", sn,
			    en, acts(st.actions, a, sizeof a), acts(x->actions, b, sizeof b));
		}
}

Test(conn_fsm, out_of_range_is_forbidden)
{
	struct conn_fsm_step st = conn_fsm_step(CONN_STATE_COUNT, CONN_E_CLOSE);
	cr_expect(!st.allowed);
	st = conn_fsm_step(CONN_OPEN, CONN_E_COUNT);
	cr_expect(!st.allowed);
	cr_expect_eq(st.next, CONN_OPEN);
}

Test(conn_fsm, names_unique_and_known)
{
	for (int s = 0; s < CONN_STATE_COUNT; s++) {
		cr_expect_str_neq(conn_fsm_state_str(s), "unknown");
		for (int t = 0; t < s; t++)
			cr_expect_str_neq(conn_fsm_state_str(s), conn_fsm_state_str(t));
	}
	for (int e = 0; e < CONN_E_COUNT; e++) {
		cr_expect_str_neq(conn_fsm_event_str(e), "unknown");
		for (int f = 0; f < e; f++)
			cr_expect_str_neq(conn_fsm_event_str(e), conn_fsm_event_str(f));
	}
	for (unsigned i = 0; i < CONN_A_COUNT; i++) {
		cr_expect_str_neq(conn_fsm_action_str(1u << i), "unknown");
		for (unsigned j = 0; j < i; j++)
			cr_expect_str_neq(conn_fsm_action_str(1u << i), conn_fsm_action_str(1u << j));
	}
	cr_expect_str_eq(conn_fsm_state_str(CONN_STATE_COUNT), "unknown");
	cr_expect_str_eq(conn_fsm_event_str(CONN_E_COUNT), "unknown");
	cr_expect_str_eq(conn_fsm_action_str(3), "unknown");
	cr_expect_str_eq(conn_fsm_state_str(CONN_OPEN_HELD), "open+held");
	cr_expect_str_eq(conn_fsm_event_str(CONN_E_NO_MOVE), "no-move");
}

Test(conn_fsm, every_state_reachable_and_closable)
{
	bool seen[CONN_STATE_COUNT] = { [CONN_NEW] = true };
	for (bool grew = true; grew;) {
		grew = false;
		for (int s = 0; s < CONN_STATE_COUNT; s++)
			for (int e = 0; seen[s] && e < CONN_E_COUNT; e++) {
				struct conn_fsm_step st = conn_fsm_step(s, e);
				if (st.allowed && !seen[st.next])
					seen[st.next] = grew = true;
			}
	}
	for (int s = 0; s < CONN_STATE_COUNT; s++) {
		cr_expect(seen[s], "%s unreachable from new", conn_fsm_state_str(s));
		struct conn_fsm_step st = conn_fsm_step(s, CONN_E_CLOSE);
		if (s == CONN_CLOSED) {
			for (int e = 0; e < CONN_E_COUNT; e++)
				cr_expect(!conn_fsm_step(s, e).allowed, "closed is terminal");
			continue;
		}
		cr_expect(st.allowed && st.next == CONN_CLOSED, "%s cannot close",
		    conn_fsm_state_str(s));
	}
}

/* The handover window counts held connections (handover_waiting) and
 * handed ones (handover_out): every transition in or out of them moves
 * the count once, and no other does. */
Test(conn_fsm, window_counters_balance)
{
	for (int s = 0; s < CONN_STATE_COUNT; s++)
		for (int e = 0; e < CONN_E_COUNT; e++) {
			struct conn_fsm_step st = conn_fsm_step(s, e);
			if (!st.allowed)
				continue;
			bool h0 = conn_fsm_held(s), h1 = conn_fsm_held(st.next);
			bool d0 = s == CONN_HANDED, d1 = st.next == CONN_HANDED;
			const char *sn = conn_fsm_state_str(s), *en = conn_fsm_event_str(e);
			cr_expect_eq(!!(st.actions & CONN_A_QUEUE), !h0 && h1, "%s × %s queue", sn, en);
			cr_expect_eq(!!(st.actions & CONN_A_UNQUEUE), h0 && !h1, "%s × %s unqueue", sn,
			    en);
			cr_expect_eq(!!(st.actions & CONN_A_HANDED), !d0 && d1, "%s × %s handed", sn, en);
			cr_expect_eq(!!(st.actions & CONN_A_UNHANDED), d0 && !d1, "%s × %s unhanded",
			    sn, en);
		}
}

/* Once a connection leaves, it never serves again; once open, its
 * upstream leg never goes back. */
Test(conn_fsm, no_way_back)
{
	static const bool serving[CONN_STATE_COUNT] = {
		[CONN_NEW] = true, [CONN_PROXY_HEADER] = true, [CONN_TLS_HANDSHAKE] = true,
		[CONN_WAIT_METADATA] = true,
		[CONN_CONNECTING] = true, [CONN_OPEN] = true,
	};
	for (int s = 0; s < CONN_STATE_COUNT; s++)
		for (int e = 0; e < CONN_E_COUNT; e++) {
			struct conn_fsm_step st = conn_fsm_step(s, e);
			if (!st.allowed)
				continue;
			if (!serving[s])
				cr_expect(!serving[st.next], "%s × %s serves again",
				    conn_fsm_state_str(s), conn_fsm_event_str(e));
			if (conn_fsm_open(s))
				cr_expect(conn_fsm_open(st.next) || st.next == CONN_HANDED ||
				    st.next == CONN_CLOSED, "%s × %s leaves open",
				    conn_fsm_state_str(s), conn_fsm_event_str(e));
		}
}

/* What the data path asks of a state, written from the names. */
Test(conn_fsm, classifications)
{
	static const struct {
		int s;
		enum conn_leg leg;
		bool draining, handover, held;
	} want[] = {
		{ NEW, CONN_LEG_NEW, false, false, false },
		{ PH, CONN_LEG_PROXY_HEADER, false, false, false },
		{ PH_D, CONN_LEG_PROXY_HEADER, true, false, false },
		{ TLS, CONN_LEG_TLS_HANDSHAKE, false, false, false },
		{ TLS_D, CONN_LEG_TLS_HANDSHAKE, true, false, false },
		{ WM, CONN_LEG_WAIT_METADATA, false, false, false },
		{ WM_D, CONN_LEG_WAIT_METADATA, true, false, false },
		{ WM_V, CONN_LEG_WAIT_METADATA, true, true, false },
		{ WM_H, CONN_LEG_WAIT_METADATA, true, true, true },
		{ C, CONN_LEG_CONNECTING, false, false, false },
		{ C_D, CONN_LEG_CONNECTING, true, false, false },
		{ C_V, CONN_LEG_CONNECTING, true, true, false },
		{ C_H, CONN_LEG_CONNECTING, true, true, true },
		{ O, CONN_LEG_OPEN, false, false, false },
		{ O_P, CONN_LEG_OPEN, false, false, false },  /* served until its turn */
		{ O_E, CONN_LEG_OPEN, true, false, false },
		{ O_D, CONN_LEG_OPEN, true, false, false },
		{ O_V, CONN_LEG_OPEN, true, true, false },
		{ O_H, CONN_LEG_OPEN, true, true, true },
		{ HANDED, CONN_LEG_NONE, true, false, false },
		{ CLOSED, CONN_LEG_NONE, false, false, false },
	};
	cr_assert_eq(sizeof want / sizeof want[0], CONN_STATE_COUNT);
	for (size_t i = 0; i < CONN_STATE_COUNT; i++) {
		const char *sn = conn_fsm_state_str(want[i].s);
		cr_expect_eq(conn_fsm_leg(want[i].s), want[i].leg, "%s leg", sn);
		cr_expect_eq(conn_fsm_open(want[i].s), want[i].leg == CONN_LEG_OPEN, "%s open", sn);
		cr_expect_eq(conn_fsm_draining(want[i].s), want[i].draining, "%s draining", sn);
		cr_expect_eq(conn_fsm_handover(want[i].s), want[i].handover, "%s handover", sn);
		cr_expect_eq(conn_fsm_held(want[i].s), want[i].held, "%s held", sn);
	}
}
