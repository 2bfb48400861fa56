/*
 * Unit tests for supervisor/fsm: every (state, event) pair of the three
 * tables (generation, cluster, reload item) against an expectation written
 * here from the semantics of fsm.h, docs/design.md §3 (not copied from
 * fsm.c), plus properties that must hold whatever the table says:
 * lifecycle edges, terminal states, external events, faults that kill,
 * ENDED on entering a terminal state, and a small model of the deadlines
 * and the watchdog walked over every reachable state.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "supervisor/fsm.h"

/* ---- generation: expectation ---------------------------------------------- */

/* Short names for the action bits, local to this file. */
enum {
	DI = FSM_GA_DISARM_INIT,
	ACC = FSM_GA_SEND_ACCEPT,
	DRN = FSM_GA_SEND_DRAIN,
	STP = FSM_GA_SEND_STOP,
	ASTOP = FSM_GA_ARM_STOP,
	GRACE = FSM_GA_ARM_KILL_GRACE,
	DSTOP = FSM_GA_DISARM_STOP,
	KILL = FSM_GA_KILL,
	AWD = FSM_GA_ARM_WATCHDOG,
	DWD = FSM_GA_DISARM_WATCHDOG,
	UNR = FSM_GA_UNRESPONSIVE,
	RSP = FSM_GA_RESPONSIVE,
	HELDA = FSM_GA_HELD,
	END = FSM_GA_ENDED,
	CRASH = FSM_GA_CRASHED,
	KALL = FSM_GA_KILL_ALL,
	RESTART = FSM_GA_RESTART_PROC,
	ACCP = FSM_GA_ACCEPT_PROC,
	HAND = FSM_GA_SEND_HANDOVER,
};

struct gexp {
	enum fsm_gstate s;
	enum fsm_gevent e;
	enum fsm_gstate next;
	unsigned actions;
};

/* Rows are the allowed pairs; a pair without a row must be forbidden. */
static const struct gexp gen_expect[] = {
	/* starting: processes run, the config was sent, no READY yet. The
	 * watchdog is not armed before ACCEPT: init_timeout bounds this phase. */
	{ FSM_G_STARTING, FSM_GE_READY, FSM_G_HELD, HELDA },          /* owner decides: commit or hold */
	{ FSM_G_STARTING, FSM_GE_FAILED, FSM_G_FAILED, DI | GRACE | END }, /* not viable: it exits by itself, killed if it lingers */
	{ FSM_G_STARTING, FSM_GE_EXITED, FSM_G_FAILED, DI | END | CRASH }, /* died before READY, nobody asked: a crash */
	{ FSM_G_STARTING, FSM_GE_MALFORMED, FSM_G_FAILED, DI | KALL | END },
	{ FSM_G_STARTING, FSM_GE_QUEUE_FULL, FSM_G_FAILED, DI | KALL | END },
	{ FSM_G_STARTING, FSM_GE_INIT_DEADLINE, FSM_G_FAILED, KALL | END }, /* the tick consumed the deadline */
	/* one of several processes died before READY: the generation failed */
	{ FSM_G_STARTING, FSM_GE_PROC_EXITED, FSM_G_FAILED, DI | KALL | END | CRASH },
	{ FSM_G_STARTING, FSM_GE_WD_LATE, FSM_G_STARTING, 0 },
	{ FSM_G_STARTING, FSM_GE_WD_DEAD, FSM_G_STARTING, 0 },
	{ FSM_G_STARTING, FSM_GE_WD_OK, FSM_G_STARTING, 0 },
	/* asked to go before ACCEPT: nothing to drain, so STOP; `draining`
	 * until it has exited; the init deadline stays as its kill deadline */
	{ FSM_G_STARTING, FSM_GE_DRAIN, FSM_G_DRAINING, STP },
	{ FSM_G_STARTING, FSM_GE_STOP, FSM_G_DRAINING, STP },
	{ FSM_G_STARTING, FSM_GE_HANDOVER, FSM_G_DRAINING, STP },   /* nothing to hand over */

	/* held: READY, waiting for COMMIT; keeps its init deadline until a reload
	 * says it is prepared (the engine disarms it then): asked to go, the
	 * stop deadline bounds its exit */
	{ FSM_G_HELD, FSM_GE_READY, FSM_G_FAILED, DI | KALL | END },   /* READY twice: protocol violation */
	{ FSM_G_HELD, FSM_GE_FAILED, FSM_G_FAILED, DI | GRACE | END },
	{ FSM_G_HELD, FSM_GE_EXITED, FSM_G_FAILED, DI | END | CRASH },
	{ FSM_G_HELD, FSM_GE_MALFORMED, FSM_G_FAILED, DI | KALL | END },
	{ FSM_G_HELD, FSM_GE_QUEUE_FULL, FSM_G_FAILED, DI | KALL | END },
	{ FSM_G_HELD, FSM_GE_INIT_DEADLINE, FSM_G_FAILED, KALL | END },
	{ FSM_G_HELD, FSM_GE_PROC_EXITED, FSM_G_FAILED, DI | KALL | END | CRASH },
	{ FSM_G_HELD, FSM_GE_WD_LATE, FSM_G_HELD, 0 },
	{ FSM_G_HELD, FSM_GE_WD_DEAD, FSM_G_HELD, 0 },
	{ FSM_G_HELD, FSM_GE_WD_OK, FSM_G_HELD, 0 },
	{ FSM_G_HELD, FSM_GE_COMMIT, FSM_G_ACCEPTING, DI | ACC | AWD },
	{ FSM_G_HELD, FSM_GE_DRAIN, FSM_G_DRAINING, STP | ASTOP },
	{ FSM_G_HELD, FSM_GE_STOP, FSM_G_DRAINING, STP | ASTOP },
	{ FSM_G_HELD, FSM_GE_HANDOVER, FSM_G_DRAINING, STP | ASTOP },

	/* accepting: every fault kills; the exit that follows is the crash */
	{ FSM_G_ACCEPTING, FSM_GE_READY, FSM_G_ACCEPTING, KILL },     /* protocol violation */
	{ FSM_G_ACCEPTING, FSM_GE_FAILED, FSM_G_ACCEPTING, KILL },    /* protocol violation */
	{ FSM_G_ACCEPTING, FSM_GE_EXITED, FSM_G_STOPPED, DWD | END | CRASH },
	{ FSM_G_ACCEPTING, FSM_GE_MALFORMED, FSM_G_ACCEPTING, KILL },
	{ FSM_G_ACCEPTING, FSM_GE_QUEUE_FULL, FSM_G_ACCEPTING, KILL },
	{ FSM_G_ACCEPTING, FSM_GE_WD_LATE, FSM_G_ACCEPTING, UNR },
	{ FSM_G_ACCEPTING, FSM_GE_WD_DEAD, FSM_G_ACCEPTING, KILL },
	{ FSM_G_ACCEPTING, FSM_GE_WD_OK, FSM_G_ACCEPTING, RSP },
	{ FSM_G_ACCEPTING, FSM_GE_DRAIN, FSM_G_DRAINING, DRN | ASTOP },
	{ FSM_G_ACCEPTING, FSM_GE_STOP, FSM_G_DRAINING, STP | ASTOP },
	{ FSM_G_ACCEPTING, FSM_GE_HANDOVER, FSM_G_DRAINING, HAND | ASTOP },
	/* several workers: one dies, it alone is replaced; its replacement
	 * is told to accept once ready */
	{ FSM_G_ACCEPTING, FSM_GE_PROC_EXITED, FSM_G_ACCEPTING, RESTART },
	{ FSM_G_ACCEPTING, FSM_GE_PROC_READY, FSM_G_ACCEPTING, ACCP },

	/* draining: asked to go; only its exit ends it, every deadline and
	 * fault kills; READY or FAILED may have been sent before it saw STOP */
	{ FSM_G_DRAINING, FSM_GE_READY, FSM_G_DRAINING, 0 },
	{ FSM_G_DRAINING, FSM_GE_FAILED, FSM_G_DRAINING, 0 },
	{ FSM_G_DRAINING, FSM_GE_EXITED, FSM_G_STOPPED, DI | DSTOP | DWD | END },
	{ FSM_G_DRAINING, FSM_GE_MALFORMED, FSM_G_DRAINING, KILL },
	{ FSM_G_DRAINING, FSM_GE_QUEUE_FULL, FSM_G_DRAINING, KILL },
	{ FSM_G_DRAINING, FSM_GE_INIT_DEADLINE, FSM_G_DRAINING, KALL }, /* stopped before ACCEPT */
	{ FSM_G_DRAINING, FSM_GE_STOP_DEADLINE, FSM_G_DRAINING, KALL },
	{ FSM_G_DRAINING, FSM_GE_WD_LATE, FSM_G_DRAINING, UNR },
	{ FSM_G_DRAINING, FSM_GE_WD_DEAD, FSM_G_DRAINING, KILL },
	{ FSM_G_DRAINING, FSM_GE_WD_OK, FSM_G_DRAINING, RSP },
	{ FSM_G_DRAINING, FSM_GE_DRAIN, FSM_G_DRAINING, 0 },
	{ FSM_G_DRAINING, FSM_GE_STOP, FSM_G_DRAINING, STP },         /* drain escalated to stop */
	{ FSM_G_DRAINING, FSM_GE_HANDOVER, FSM_G_DRAINING, 0 },
	{ FSM_G_DRAINING, FSM_GE_PROC_EXITED, FSM_G_DRAINING, 0 },
	{ FSM_G_DRAINING, FSM_GE_PROC_READY, FSM_G_DRAINING, KILL }, /* nothing to drain */

	/* stopped: nothing is alive, nothing can speak; our own requests to
	 * it (a rollback that finds it gone) are no-ops */
	{ FSM_G_STOPPED, FSM_GE_DRAIN, FSM_G_STOPPED, 0 },
	{ FSM_G_STOPPED, FSM_GE_STOP, FSM_G_STOPPED, 0 },
	{ FSM_G_STOPPED, FSM_GE_HANDOVER, FSM_G_STOPPED, 0 },

	/* failed: a process may still be on its way out */
	{ FSM_G_FAILED, FSM_GE_READY, FSM_G_FAILED, 0 },
	{ FSM_G_FAILED, FSM_GE_FAILED, FSM_G_FAILED, 0 },
	{ FSM_G_FAILED, FSM_GE_EXITED, FSM_G_FAILED, DI | DSTOP },
	{ FSM_G_FAILED, FSM_GE_MALFORMED, FSM_G_FAILED, KILL },
	{ FSM_G_FAILED, FSM_GE_QUEUE_FULL, FSM_G_FAILED, KILL },
	{ FSM_G_FAILED, FSM_GE_STOP_DEADLINE, FSM_G_FAILED, KALL },   /* lingered after FAILED */
	{ FSM_G_FAILED, FSM_GE_PROC_EXITED, FSM_G_FAILED, 0 },
	{ FSM_G_FAILED, FSM_GE_WD_LATE, FSM_G_FAILED, 0 },
	{ FSM_G_FAILED, FSM_GE_WD_DEAD, FSM_G_FAILED, 0 },
	{ FSM_G_FAILED, FSM_GE_WD_OK, FSM_G_FAILED, 0 },
	{ FSM_G_FAILED, FSM_GE_DRAIN, FSM_G_FAILED, KALL },           /* rolled back: make sure it goes */
	{ FSM_G_FAILED, FSM_GE_HANDOVER, FSM_G_FAILED, KALL },
	{ FSM_G_FAILED, FSM_GE_STOP, FSM_G_FAILED, KALL },
};

static const struct gexp *
gen_row(enum fsm_gstate s, enum fsm_gevent e)
{
	const struct gexp *found = NULL;
	for (size_t i = 0; i < sizeof gen_expect / sizeof gen_expect[0]; i++)
		if (gen_expect[i].s == s && gen_expect[i].e == e) {
			cr_assert_null(found, "two expectation rows for %s/%s", fsm_gstate_str(s),
			    fsm_gevent_str(e));
			found = &gen_expect[i];
		}
	return found;
}

static void
actions_str(unsigned a, const char *(*str)(unsigned), unsigned count, char *buf, size_t len)
{
	buf[0] = 0;
	size_t n = 0;
	for (unsigned i = 0; i < count; i++)
		if (a & (1u << i))
			n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s%s", n ? "|" : "",
			    str(1u << i));
	if (!n)
		snprintf(buf, len, "-");
}

Test(fsm_gen, every_pair_matches_the_expectation)
{
	unsigned allowed = 0;
	for (int s = 0; s < FSM_G_COUNT; s++)
		for (int e = 0; e < FSM_GE_COUNT; e++) {
			const struct gexp *x = gen_row(s, e);
			struct fsm_gstep st = fsm_gen_step(s, e);
			char got[256], want[256];
			actions_str(st.actions, fsm_gaction_str, FSM_GA_COUNT, got, sizeof got);
			if (!x) {
				cr_expect(!st.allowed, "%s + %s must be forbidden (table: -> %s %s)",
				    fsm_gstate_str(s), fsm_gevent_str(e), fsm_gstate_str(st.next), got);
				cr_expect_eq(st.next, (enum fsm_gstate)s, "forbidden keeps the state");
				cr_expect_eq(st.actions, 0, "forbidden has no actions");
				continue;
			}
			allowed++;
			actions_str(x->actions, fsm_gaction_str, FSM_GA_COUNT, want, sizeof want);
			cr_expect(st.allowed, "%s + %s must be allowed", fsm_gstate_str(s),
			    fsm_gevent_str(e));
			cr_expect_eq(st.next, x->next, "%s + %s: next %s, want %s", fsm_gstate_str(s),
			    fsm_gevent_str(e), fsm_gstate_str(st.next), fsm_gstate_str(x->next));
			cr_expect_eq(st.actions, x->actions, "%s + %s: actions %s, want %s",
			    fsm_gstate_str(s), fsm_gevent_str(e), got, want);
		}
	cr_expect_eq(allowed, sizeof gen_expect / sizeof gen_expect[0]);
}

Test(fsm_gen, out_of_range_is_forbidden)
{
	cr_expect(!fsm_gen_step(FSM_G_COUNT, FSM_GE_READY).allowed);
	cr_expect(!fsm_gen_step(FSM_G_STARTING, FSM_GE_COUNT).allowed);
	cr_expect(!fsm_gen_step((enum fsm_gstate)-1, FSM_GE_READY).allowed);
	cr_expect_eq(fsm_gen_step(FSM_G_COUNT, FSM_GE_READY).actions, 0);
}

Test(fsm_gen, lifecycle_names_and_terminal_states)
{
	cr_expect_eq(fsm_gen_lc(FSM_G_STARTING), LC_INITIALIZING);
	cr_expect_eq(fsm_gen_lc(FSM_G_HELD), LC_INITIALIZING);
	cr_expect_eq(fsm_gen_lc(FSM_G_ACCEPTING), LC_ACCEPTING);
	cr_expect_eq(fsm_gen_lc(FSM_G_DRAINING), LC_DRAINING);  /* never `stopped` while alive */
	cr_expect_eq(fsm_gen_lc(FSM_G_STOPPED), LC_STOPPED);
	cr_expect_eq(fsm_gen_lc(FSM_G_FAILED), LC_FAILED);
	for (int s = 0; s < FSM_G_COUNT; s++)
		cr_expect_eq(fsm_gen_terminal(s), s == FSM_G_STOPPED || s == FSM_G_FAILED, "%s",
		    fsm_gstate_str(s));
}

Test(fsm_gen, every_transition_is_a_lifecycle_edge)
{
	for (int s = 0; s < FSM_G_COUNT; s++)
		for (int e = 0; e < FSM_GE_COUNT; e++) {
			struct fsm_gstep st = fsm_gen_step(s, e);
			if (!st.allowed)
				continue;
			enum lc_state a = fsm_gen_lc(s), b = fsm_gen_lc(st.next);
			cr_expect(a == b || lc_transition_allowed(a, b), "%s + %s: %s -> %s is not a "
			    "lifecycle edge", fsm_gstate_str(s), fsm_gevent_str(e), lc_state_str(a),
			    lc_state_str(b));
		}
}

Test(fsm_gen, terminal_states_have_no_way_out)
{
	for (int s = 0; s < FSM_G_COUNT; s++) {
		if (!fsm_gen_terminal(s))
			continue;
		for (int e = 0; e < FSM_GE_COUNT; e++) {
			struct fsm_gstep st = fsm_gen_step(s, e);
			if (!st.allowed)
				continue;
			cr_expect_eq(st.next, (enum fsm_gstate)s, "%s + %s leaves a terminal state",
			    fsm_gstate_str(s), fsm_gevent_str(e));
			cr_expect(!(st.actions & (FSM_GA_ENDED | FSM_GA_CRASHED | FSM_GA_HELD |
			    FSM_GA_SEND_ACCEPT | FSM_GA_ARM_WATCHDOG | FSM_GA_ARM_STOP)),
			    "%s + %s: a terminal state ends, holds, accepts or re-arms again",
			    fsm_gstate_str(s), fsm_gevent_str(e));
		}
	}
}

/* What a worker (or its death) can produce at any moment. */
static const enum fsm_gevent external[] = {
	FSM_GE_READY, FSM_GE_FAILED, FSM_GE_EXITED, FSM_GE_MALFORMED, FSM_GE_QUEUE_FULL,
	FSM_GE_WD_LATE, FSM_GE_WD_DEAD, FSM_GE_WD_OK,
};

Test(fsm_gen, a_worker_can_say_anything_in_any_live_state)
{
	for (int s = 0; s < FSM_G_COUNT; s++) {
		/* failed is terminal but a process may still be exiting in it */
		bool may_be_alive = !fsm_gen_terminal(s) || s == FSM_G_FAILED;
		if (!may_be_alive)
			continue;
		for (size_t i = 0; i < sizeof external / sizeof external[0]; i++)
			cr_expect(fsm_gen_step(s, external[i]).allowed, "%s + %s must be allowed",
			    fsm_gstate_str(s), fsm_gevent_str(external[i]));
	}
	/* our own requests reach a generation in any state (DRAIN_ALL, a
	 * rollback's STOP) */
	for (int s = 0; s < FSM_G_COUNT; s++)
		cr_expect(fsm_gen_step(s, FSM_GE_STOP).allowed, "%s + stop", fsm_gstate_str(s));
	/* only a held generation is committed */
	for (int s = 0; s < FSM_G_COUNT; s++)
		cr_expect_eq(fsm_gen_step(s, FSM_GE_COMMIT).allowed, s == FSM_G_HELD, "%s + commit",
		    fsm_gstate_str(s));
}

Test(fsm_gen, every_fault_in_a_live_state_kills)
{
	/* faults that can arrive in the state; the watchdog is armed from
	 * ACCEPT on, the init deadline before it, the stop deadline after DRAIN
	 * or STOP (see the model test below for which is armed where) */
	static const struct { enum fsm_gstate s; enum fsm_gevent e; } faults[] = {
		{ FSM_G_STARTING, FSM_GE_MALFORMED }, { FSM_G_STARTING, FSM_GE_QUEUE_FULL },
		{ FSM_G_STARTING, FSM_GE_INIT_DEADLINE },
		{ FSM_G_HELD, FSM_GE_MALFORMED }, { FSM_G_HELD, FSM_GE_QUEUE_FULL },
		{ FSM_G_HELD, FSM_GE_INIT_DEADLINE }, { FSM_G_HELD, FSM_GE_READY },
		{ FSM_G_ACCEPTING, FSM_GE_MALFORMED }, { FSM_G_ACCEPTING, FSM_GE_QUEUE_FULL },
		{ FSM_G_ACCEPTING, FSM_GE_WD_DEAD }, { FSM_G_ACCEPTING, FSM_GE_READY },
		{ FSM_G_ACCEPTING, FSM_GE_FAILED },
		{ FSM_G_DRAINING, FSM_GE_MALFORMED }, { FSM_G_DRAINING, FSM_GE_QUEUE_FULL },
		{ FSM_G_DRAINING, FSM_GE_INIT_DEADLINE }, { FSM_G_DRAINING, FSM_GE_STOP_DEADLINE },
		{ FSM_G_DRAINING, FSM_GE_WD_DEAD },
		{ FSM_G_FAILED, FSM_GE_MALFORMED }, { FSM_G_FAILED, FSM_GE_QUEUE_FULL },
		{ FSM_G_FAILED, FSM_GE_STOP_DEADLINE },
	};
	for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
		struct fsm_gstep st = fsm_gen_step(faults[i].s, faults[i].e);
		cr_expect(st.allowed && (st.actions & (FSM_GA_KILL | FSM_GA_KILL_ALL)), "%s + %s must kill",
		    fsm_gstate_str(faults[i].s), fsm_gevent_str(faults[i].e));
	}
	/* a FAILED report before ACCEPT is no fault: it exits by itself, with
	 * a kill deadline in case it lingers */
	for (int s = FSM_G_STARTING; s <= FSM_G_HELD; s++) {
		struct fsm_gstep st = fsm_gen_step(s, FSM_GE_FAILED);
		cr_expect(st.allowed && (st.actions & FSM_GA_ARM_KILL_GRACE) &&
		    !(st.actions & (FSM_GA_KILL | FSM_GA_KILL_ALL)), "%s + failed", fsm_gstate_str(s));
	}
}

Test(fsm_gen, ended_exactly_on_entering_a_terminal_state)
{
	for (int s = 0; s < FSM_G_COUNT; s++)
		for (int e = 0; e < FSM_GE_COUNT; e++) {
			struct fsm_gstep st = fsm_gen_step(s, e);
			if (!st.allowed)
				continue;
			bool entering = !fsm_gen_terminal(s) && fsm_gen_terminal(st.next);
			cr_expect_eq((st.actions & FSM_GA_ENDED) != 0, entering, "%s + %s -> %s",
			    fsm_gstate_str(s), fsm_gevent_str(e), fsm_gstate_str(st.next));
			if (st.actions & FSM_GA_CRASHED)
				cr_expect(st.actions & FSM_GA_ENDED, "crashed without ended");
			/* HELD is said once, on becoming held */
			cr_expect_eq((st.actions & FSM_GA_HELD) != 0,
			    s != FSM_G_HELD && st.next == FSM_G_HELD, "%s + %s", fsm_gstate_str(s),
			    fsm_gevent_str(e));
			/* ACCEPT is sent once, on becoming accepting */
			cr_expect_eq((st.actions & FSM_GA_SEND_ACCEPT) != 0,
			    s != FSM_G_ACCEPTING && st.next == FSM_G_ACCEPTING, "%s + %s",
			    fsm_gstate_str(s), fsm_gevent_str(e));
		}
}

/*
 * A model of one generation with the deadlines and the watchdog as the
 * engine runs them (engine_gen.c: sup_gen_event, sup_gen_tick): every event
 * that can arrive in a model state is delivered, every reachable model
 * state is visited once, and these hold everywhere:
 *   - an event that can arrive is allowed (no armed timer fires into a
 *     forbidden pair, no worker message is refused);
 *   - before ACCEPT a live generation has its init deadline;
 *   - an accepting generation has its watchdog;
 *   - a live generation that was asked to go, or failed, has a kill
 *     deadline armed or was killed: nothing holds a cluster name forever;
 *   - stopped means no process and nothing armed;
 *   - ENDED is said once on every path, CRASHED only when nobody asked.
 */
struct gmodel {
	uint8_t st;
	bool init, stop, wd, alive, killed, asked, ended, accepted;
};

#define GMODEL_MAX 4096

static unsigned
gmodel_key(const struct gmodel *m)
{
	return (unsigned)m->st | (unsigned)m->init << 3 | (unsigned)m->stop << 4 |
	    (unsigned)m->wd << 5 | (unsigned)m->alive << 6 | (unsigned)m->killed << 7 |
	    (unsigned)m->asked << 8 | (unsigned)m->ended << 9 | (unsigned)m->accepted << 10;
}

static bool
gmodel_can_arrive(const struct gmodel *m, enum fsm_gevent e)
{
	switch (e) {
	case FSM_GE_READY: case FSM_GE_FAILED: case FSM_GE_MALFORMED: case FSM_GE_QUEUE_FULL:
	case FSM_GE_EXITED:
		return m->alive;
	case FSM_GE_INIT_DEADLINE: return m->init;
	case FSM_GE_STOP_DEADLINE: return m->stop;
	case FSM_GE_WD_LATE: case FSM_GE_WD_DEAD: case FSM_GE_WD_OK: return m->wd && m->alive;
	case FSM_GE_COMMIT: return m->st == FSM_G_HELD;  /* owner commits what is held */
	case FSM_GE_DRAIN: return !fsm_gen_terminal(m->st);  /* DRAIN_ALL skips ended ones */
	case FSM_GE_HANDOVER: return m->st == FSM_G_ACCEPTING; /* a newer one accepts */
	/* one of several processes: only where the engine replaces them */
	case FSM_GE_PROC_EXITED: return m->alive;
	case FSM_GE_PROC_READY: return m->alive && (m->st == FSM_G_ACCEPTING ||
					   m->st == FSM_G_DRAINING);
	case FSM_GE_STOP: return true;                     /* a rollback finds it anywhere */
	case FSM_GE_COUNT: break;
	}
	return false;
}

static void
gmodel_check(const struct gmodel *m, const char *path)
{
	enum fsm_gstate s = m->st;
	if (m->alive && (s == FSM_G_STARTING || s == FSM_G_HELD))
		cr_expect(m->init, "%s: %s without an init deadline", path, fsm_gstate_str(s));
	if (m->alive && s == FSM_G_ACCEPTING)
		cr_expect(m->wd, "%s: accepting without a watchdog", path);
	if (m->alive && (s == FSM_G_DRAINING || s == FSM_G_FAILED))
		cr_expect(m->killed || m->init || m->stop, "%s: %s, alive, no kill deadline", path,
		    fsm_gstate_str(s));
	if (s == FSM_G_STOPPED)
		cr_expect(!m->alive && !m->init && !m->stop && !m->wd,
		    "%s: stopped with a process or a timer", path);
	if (fsm_gen_terminal(s))
		cr_expect(m->ended, "%s: terminal without ENDED", path);
	else
		cr_expect(!m->ended, "%s: ENDED before terminal", path);
	if (!m->alive)
		cr_expect(fsm_gen_terminal(s), "%s: every process exited but %s", path,
		    fsm_gstate_str(s));
}

Test(fsm_gen, model_of_deadlines_and_watchdog)
{
	static struct gmodel queue[GMODEL_MAX];
	static char paths[GMODEL_MAX][160];
	static bool seen[1u << 11];
	size_t head = 0, tail = 0;
	queue[tail] = (struct gmodel){ .st = FSM_G_STARTING, .init = true, .alive = true };
	snprintf(paths[tail], sizeof paths[tail], "starting");
	seen[gmodel_key(&queue[tail])] = true;
	tail++;
	size_t visited = 0;
	while (head < tail) {
		struct gmodel m = queue[head];
		const char *path = paths[head];
		head++;
		visited++;
		gmodel_check(&m, path);
		for (int e = 0; e < FSM_GE_COUNT; e++) {
			if (!gmodel_can_arrive(&m, e))
				continue;
			struct fsm_gstep st = fsm_gen_step(m.st, e);
			cr_expect(st.allowed, "%s + %s can arrive but is forbidden", path,
			    fsm_gevent_str(e));
			if (!st.allowed)
				continue;
			struct gmodel n = m;
			unsigned a = st.actions;
			/* the tick disarms a deadline before it posts it */
			if (e == FSM_GE_INIT_DEADLINE)
				n.init = false;
			if (e == FSM_GE_STOP_DEADLINE)
				n.stop = false;
			if (e == FSM_GE_EXITED)
				n.alive = false;
			if (e == FSM_GE_DRAIN || e == FSM_GE_STOP || e == FSM_GE_HANDOVER)
				n.asked = true;
			if (a & FSM_GA_DISARM_INIT)
				n.init = false;
			if (a & (FSM_GA_ARM_STOP | FSM_GA_ARM_KILL_GRACE))
				n.stop = true;
			if (a & FSM_GA_DISARM_STOP)
				n.stop = false;
			if (a & FSM_GA_ARM_WATCHDOG)
				n.wd = true;
			if (a & FSM_GA_DISARM_WATCHDOG)
				n.wd = false;
			if ((a & (FSM_GA_KILL | FSM_GA_KILL_ALL)) && n.alive)
				n.killed = true;
			if (a & FSM_GA_SEND_ACCEPT) {
				cr_expect(!m.accepted, "%s + %s: ACCEPT sent twice", path,
				    fsm_gevent_str(e));
				n.accepted = true;
			}
			if (a & FSM_GA_ENDED) {
				cr_expect(!m.ended, "%s + %s: ENDED twice", path, fsm_gevent_str(e));
				n.ended = true;
				/* an unexpected death is a crash; an asked-for or a
				 * diagnosed end (failed, malformed, deadline) is not */
				bool crash = (a & FSM_GA_CRASHED) != 0;
				if (m.asked)
					cr_expect(!crash, "%s + %s: crash after it was asked to go", path,
					    fsm_gevent_str(e));
				else if (e == FSM_GE_EXITED && !m.killed)
					cr_expect(crash, "%s + exited: unexpected death is no crash", path);
			}
			n.st = (uint8_t)st.next;
			unsigned k = gmodel_key(&n);
			if (seen[k])
				continue;
			seen[k] = true;
			cr_assert_lt(tail, GMODEL_MAX);
			queue[tail] = n;
			snprintf(paths[tail], sizeof paths[tail], "%.100s > %s", path, fsm_gevent_str(e));
			tail++;
		}
	}
	/* the walk reached every state of the machine */
	bool reached[FSM_G_COUNT] = { 0 };
	for (size_t i = 0; i < tail; i++)
		reached[queue[i].st] = true;
	for (int s = 0; s < FSM_G_COUNT; s++)
		cr_expect(reached[s], "%s never reached", fsm_gstate_str(s));
	cr_expect_gt(visited, 20);
}

/* ---- cluster: expectation ------------------------------------------------------- */

enum {
	START = FSM_CA_START_GEN,
	ARM = FSM_CA_ARM_RESTART,
	DISARM = FSM_CA_DISARM_RESTART,
	RESET = FSM_CA_RESET_CRASH,
	DRAINALL = FSM_CA_DRAIN_ALL,
	RELEASE = FSM_CA_RELEASE,
	REAP = FSM_CA_REAP,
};

struct cexp {
	enum fsm_cstate s;
	enum fsm_cevent e;
	enum fsm_cstate next;
	unsigned actions;
};

static const struct cexp cluster_expect[] = {
	/* active: crash handling happens only here (the engine asks the
	 * crash policy only for the current generation of an active cluster) */
	{ FSM_C_ACTIVE, FSM_CE_CRASH_RESTART, FSM_C_BACKOFF, ARM },
	{ FSM_C_ACTIVE, FSM_CE_CRASH_LOOP, FSM_C_FAILED, DRAINALL | RELEASE }, /* siblings of a crash-looping worker drain */
	{ FSM_C_ACTIVE, FSM_CE_START_FAILED, FSM_C_FAILED, RELEASE },
	{ FSM_C_ACTIVE, FSM_CE_ROLL_FAILED, FSM_C_ACTIVE, 0 },         /* the old one serves on */
	{ FSM_C_ACTIVE, FSM_CE_OP_RESTART, FSM_C_ACTIVE, RESET | START }, /* rolling */
	{ FSM_C_ACTIVE, FSM_CE_OP_DRAIN, FSM_C_PARKED, DRAINALL | RELEASE },
	{ FSM_C_ACTIVE, FSM_CE_COMMIT, FSM_C_ACTIVE, RESET },           /* new config, new history */
	{ FSM_C_ACTIVE, FSM_CE_REMOVE, FSM_C_LEAVING, DRAINALL | RELEASE },
	{ FSM_C_ACTIVE, FSM_CE_ALL_EXITED, FSM_C_ACTIVE, 0 },

	/* backoff: a restart timer is armed; every way out but the timer
	 * itself disarms it */
	{ FSM_C_BACKOFF, FSM_CE_RESTART_TIMER, FSM_C_ACTIVE, START },
	{ FSM_C_BACKOFF, FSM_CE_OP_RESTART, FSM_C_ACTIVE, DISARM | RESET | START },
	{ FSM_C_BACKOFF, FSM_CE_COMMIT, FSM_C_ACTIVE, DISARM | RESET }, /* the reload's generation serves */
	{ FSM_C_BACKOFF, FSM_CE_REMOVE, FSM_C_LEAVING, DISARM | DRAINALL | RELEASE },
	{ FSM_C_BACKOFF, FSM_CE_ALL_EXITED, FSM_C_BACKOFF, 0 },

	/* failed: sockets released; an operator restart or a reload revives */
	{ FSM_C_FAILED, FSM_CE_OP_RESTART, FSM_C_ACTIVE, RESET | START },
	{ FSM_C_FAILED, FSM_CE_COMMIT, FSM_C_ACTIVE, RESET },
	{ FSM_C_FAILED, FSM_CE_REMOVE, FSM_C_LEAVING, DRAINALL | RELEASE },
	{ FSM_C_FAILED, FSM_CE_ALL_EXITED, FSM_C_FAILED, 0 },

	/* parked: drained by an operator, same ways out as failed */
	{ FSM_C_PARKED, FSM_CE_OP_RESTART, FSM_C_ACTIVE, RESET | START },
	{ FSM_C_PARKED, FSM_CE_COMMIT, FSM_C_ACTIVE, RESET },
	{ FSM_C_PARKED, FSM_CE_REMOVE, FSM_C_LEAVING, DRAINALL | RELEASE },
	{ FSM_C_PARKED, FSM_CE_ALL_EXITED, FSM_C_PARKED, 0 },

	/* leaving: waits for the last process, then gone */
	{ FSM_C_LEAVING, FSM_CE_REMOVE, FSM_C_LEAVING, DRAINALL },
	{ FSM_C_LEAVING, FSM_CE_ALL_EXITED, FSM_C_GONE, REAP },
	/* gone: nothing */
};

Test(fsm_cluster, every_pair_matches_the_expectation)
{
	unsigned allowed = 0;
	for (int s = 0; s < FSM_C_COUNT; s++)
		for (int e = 0; e < FSM_CE_COUNT; e++) {
			const struct cexp *x = NULL;
			for (size_t i = 0; i < sizeof cluster_expect / sizeof cluster_expect[0]; i++)
				if ((int)cluster_expect[i].s == s && (int)cluster_expect[i].e == e) {
					cr_assert_null(x, "two rows for %s/%s", fsm_cstate_str(s),
					    fsm_cevent_str(e));
					x = &cluster_expect[i];
				}
			struct fsm_cstep st = fsm_cluster_step(s, e);
			char got[256], want[256];
			actions_str(st.actions, fsm_caction_str, FSM_CA_COUNT, got, sizeof got);
			if (!x) {
				cr_expect(!st.allowed, "%s + %s must be forbidden (table: -> %s %s)",
				    fsm_cstate_str(s), fsm_cevent_str(e), fsm_cstate_str(st.next), got);
				cr_expect_eq(st.next, (enum fsm_cstate)s);
				cr_expect_eq(st.actions, 0);
				continue;
			}
			allowed++;
			actions_str(x->actions, fsm_caction_str, FSM_CA_COUNT, want, sizeof want);
			cr_expect(st.allowed, "%s + %s must be allowed", fsm_cstate_str(s),
			    fsm_cevent_str(e));
			cr_expect_eq(st.next, x->next, "%s + %s: next %s, want %s", fsm_cstate_str(s),
			    fsm_cevent_str(e), fsm_cstate_str(st.next), fsm_cstate_str(x->next));
			cr_expect_eq(st.actions, x->actions, "%s + %s: actions %s, want %s",
			    fsm_cstate_str(s), fsm_cevent_str(e), got, want);
		}
	cr_expect_eq(allowed, sizeof cluster_expect / sizeof cluster_expect[0]);
	cr_expect(!fsm_cluster_step(FSM_C_COUNT, FSM_CE_REMOVE).allowed);
	cr_expect(!fsm_cluster_step(FSM_C_ACTIVE, FSM_CE_COUNT).allowed);
}

Test(fsm_cluster, properties)
{
	for (int s = 0; s < FSM_C_COUNT; s++) {
		/* nothing holds a name forever: every live cluster can be
		 * removed, and leaving ends in gone once nothing is alive */
		struct fsm_cstep rm = fsm_cluster_step(s, FSM_CE_REMOVE);
		cr_expect_eq(rm.allowed, s != FSM_C_GONE, "%s + remove", fsm_cstate_str(s));
		if (rm.allowed)
			cr_expect_eq(rm.next, FSM_C_LEAVING);
		for (int e = 0; e < FSM_CE_COUNT; e++) {
			struct fsm_cstep st = fsm_cluster_step(s, e);
			if (!st.allowed)
				continue;
			cr_expect(s != FSM_C_GONE, "gone is final");
			/* sockets are released whenever it stops serving */
			if ((int)st.next != s && (st.next == FSM_C_FAILED || st.next == FSM_C_PARKED ||
			    st.next == FSM_C_LEAVING))
				cr_expect(st.actions & FSM_CA_RELEASE, "%s + %s: sockets kept",
				    fsm_cstate_str(s), fsm_cevent_str(e));
			/* workers start only on the way into active */
			if (st.actions & FSM_CA_START_GEN)
				cr_expect_eq(st.next, FSM_C_ACTIVE, "%s + %s", fsm_cstate_str(s),
				    fsm_cevent_str(e));
			/* coming back to active brings a generation: started here, or
			 * the committed one of a reload */
			if (s != FSM_C_ACTIVE && st.next == FSM_C_ACTIVE)
				cr_expect((st.actions & FSM_CA_START_GEN) || e == FSM_CE_COMMIT,
				    "%s + %s: active with nothing starting", fsm_cstate_str(s),
				    fsm_cevent_str(e));
			/* an operator or a reload forgives past crashes */
			if (e == FSM_CE_OP_RESTART || e == FSM_CE_COMMIT)
				cr_expect(st.actions & FSM_CA_RESET_CRASH, "%s + %s", fsm_cstate_str(s),
				    fsm_cevent_str(e));
			cr_expect_eq((st.actions & FSM_CA_REAP) != 0, st.next == FSM_C_GONE,
			    "%s + %s: reap exactly on entering gone", fsm_cstate_str(s),
			    fsm_cevent_str(e));
		}
	}
}

/* The restart timer as the engine runs it: armed with CRASH_RESTART,
 * disarmed by DISARM_RESTART, consumed when it fires. An armed timer must
 * never fire into a state that forbids RESTART_TIMER, and a cluster in
 * backoff always has it armed. */
Test(fsm_cluster, restart_timer_model)
{
	bool seen[FSM_C_COUNT][2] = { { false } };
	struct { enum fsm_cstate s; bool armed; } q[64];
	size_t head = 0, tail = 0;
	q[tail].s = FSM_C_ACTIVE;
	q[tail++].armed = false;
	seen[FSM_C_ACTIVE][0] = true;
	while (head < tail) {
		enum fsm_cstate s = q[head].s;
		bool armed = q[head].armed;
		head++;
		if (armed)
			cr_expect(fsm_cluster_step(s, FSM_CE_RESTART_TIMER).allowed,
			    "restart timer armed in %s, where it is forbidden", fsm_cstate_str(s));
		cr_expect_eq(armed, s == FSM_C_BACKOFF, "%s with the restart timer %s",
		    fsm_cstate_str(s), armed ? "armed" : "not armed");
		for (int e = 0; e < FSM_CE_COUNT; e++) {
			if (e == FSM_CE_RESTART_TIMER && !armed)
				continue;
			struct fsm_cstep st = fsm_cluster_step(s, e);
			if (!st.allowed)
				continue;
			bool a = armed;
			if (e == FSM_CE_RESTART_TIMER)
				a = false;
			if (st.actions & FSM_CA_ARM_RESTART)
				a = true;
			if (st.actions & FSM_CA_DISARM_RESTART)
				a = false;
			if (seen[st.next][a])
				continue;
			seen[st.next][a] = true;
			cr_assert_lt(tail, 64);
			q[tail].s = st.next;
			q[tail++].armed = a;
		}
	}
	for (int s = 0; s < FSM_C_COUNT; s++)
		cr_expect(seen[s][0] || seen[s][1], "%s unreachable", fsm_cstate_str(s));
}

/* ---- reload item: expectation ----------------------------------------------------- */

struct iexp {
	enum fsm_istate s;
	enum fsm_ievent e;
	enum fsm_istate next;
	unsigned actions;
};

#define IA_ROLLBACK (FSM_IA_STOP_NEW | FSM_IA_FREE_NEW)

static const struct iexp item_expect[] = {
	/* pending: its generation is preparing; an all-or-nothing reload may
	 * be rolled back while it still prepares (another item failed) */
	{ FSM_I_PENDING, FSM_IE_PREPARED, FSM_I_READY, 0 },
	{ FSM_I_PENDING, FSM_IE_FAILED, FSM_I_FAILED, FSM_IA_RECORD_ERROR },
	{ FSM_I_PENDING, FSM_IE_ROLLBACK, FSM_I_ROLLED_BACK, IA_ROLLBACK },
	/* ready: held; it can still die while the others prepare */
	{ FSM_I_READY, FSM_IE_FAILED, FSM_I_FAILED, FSM_IA_RECORD_ERROR },
	{ FSM_I_READY, FSM_IE_COMMIT, FSM_I_COMMITTED, FSM_IA_COMMIT },
	{ FSM_I_READY, FSM_IE_ROLLBACK, FSM_I_ROLLED_BACK, IA_ROLLBACK },
	/* failed: waits for the verdict, which is a rollback; the first error
	 * is the one recorded */
	{ FSM_I_FAILED, FSM_IE_FAILED, FSM_I_FAILED, 0 },
	{ FSM_I_FAILED, FSM_IE_ROLLBACK, FSM_I_ROLLED_BACK, IA_ROLLBACK },
	/* terminal: a late failure report changes nothing */
	{ FSM_I_COMMITTED, FSM_IE_FAILED, FSM_I_COMMITTED, 0 },
	{ FSM_I_ROLLED_BACK, FSM_IE_FAILED, FSM_I_ROLLED_BACK, 0 },
};

static const char *
iaction_name(unsigned bit)
{
	switch (bit) {
	case FSM_IA_COMMIT: return "commit";
	case FSM_IA_STOP_NEW: return "stop-new";
	case FSM_IA_FREE_NEW: return "free-new";
	case FSM_IA_RECORD_ERROR: return "record-error";
	}
	return "?";
}

static bool
item_terminal(enum fsm_istate s)
{
	return s == FSM_I_COMMITTED || s == FSM_I_ROLLED_BACK;
}

Test(fsm_item, every_pair_matches_the_expectation)
{
	unsigned allowed = 0;
	for (int s = 0; s < FSM_I_COUNT; s++)
		for (int e = 0; e < FSM_IE_COUNT; e++) {
			const struct iexp *x = NULL;
			for (size_t i = 0; i < sizeof item_expect / sizeof item_expect[0]; i++)
				if ((int)item_expect[i].s == s && (int)item_expect[i].e == e) {
					cr_assert_null(x);
					x = &item_expect[i];
				}
			struct fsm_istep st = fsm_item_step(s, e);
			char got[128], want[128];
			actions_str(st.actions, iaction_name, FSM_IA_COUNT, got, sizeof got);
			if (!x) {
				cr_expect(!st.allowed, "%s + %s must be forbidden (table: -> %s %s)",
				    fsm_istate_str(s), fsm_ievent_str(e), fsm_istate_str(st.next), got);
				cr_expect_eq(st.next, (enum fsm_istate)s);
				cr_expect_eq(st.actions, 0);
				continue;
			}
			allowed++;
			actions_str(x->actions, iaction_name, FSM_IA_COUNT, want, sizeof want);
			cr_expect(st.allowed, "%s + %s must be allowed", fsm_istate_str(s),
			    fsm_ievent_str(e));
			cr_expect_eq(st.next, x->next, "%s + %s: next %s, want %s", fsm_istate_str(s),
			    fsm_ievent_str(e), fsm_istate_str(st.next), fsm_istate_str(x->next));
			cr_expect_eq(st.actions, x->actions, "%s + %s: actions %s, want %s",
			    fsm_istate_str(s), fsm_ievent_str(e), got, want);
		}
	cr_expect_eq(allowed, sizeof item_expect / sizeof item_expect[0]);
	cr_expect(!fsm_item_step(FSM_I_COUNT, FSM_IE_FAILED).allowed);
	cr_expect(!fsm_item_step(FSM_I_PENDING, FSM_IE_COUNT).allowed);
}

Test(fsm_item, properties)
{
	for (int s = 0; s < FSM_I_COUNT; s++) {
		/* a generation can die at any moment */
		cr_expect(fsm_item_step(s, FSM_IE_FAILED).allowed, "%s + failed", fsm_istate_str(s));
		/* every undecided item can be rolled back (abort, all-or-nothing) */
		struct fsm_istep rb = fsm_item_step(s, FSM_IE_ROLLBACK);
		cr_expect_eq(rb.allowed, !item_terminal(s), "%s + rollback", fsm_istate_str(s));
		if (rb.allowed)
			cr_expect_eq(rb.actions & IA_ROLLBACK, IA_ROLLBACK,
			    "%s: rollback stops and frees what was prepared", fsm_istate_str(s));
		/* only a prepared item commits */
		cr_expect_eq(fsm_item_step(s, FSM_IE_COMMIT).allowed, s == FSM_I_READY, "%s + commit",
		    fsm_istate_str(s));
		for (int e = 0; e < FSM_IE_COUNT; e++) {
			struct fsm_istep st = fsm_item_step(s, e);
			if (!st.allowed)
				continue;
			if (item_terminal(s))
				cr_expect((int)st.next == s && st.actions == 0, "%s + %s leaves a terminal "
				    "state or acts", fsm_istate_str(s), fsm_ievent_str(e));
			cr_expect_eq((st.actions & FSM_IA_RECORD_ERROR) != 0,
			    s != FSM_I_FAILED && st.next == FSM_I_FAILED, "%s + %s: record the error "
			    "once, on failing", fsm_istate_str(s), fsm_ievent_str(e));
			cr_expect_eq((st.actions & FSM_IA_COMMIT) != 0, st.next == FSM_I_COMMITTED &&
			    s != FSM_I_COMMITTED, "%s + %s", fsm_istate_str(s), fsm_ievent_str(e));
		}
	}
}

/* ---- names ---------------------------------------------------------------------- */

static void
expect_names(const char *what, unsigned n, const char *(*name)(unsigned))
{
	for (unsigned i = 0; i < n; i++) {
		const char *a = name(i);
		cr_expect(a && a[0] && strcmp(a, "unknown") != 0, "%s %u has no name", what, i);
		for (unsigned j = 0; j < i; j++)
			cr_expect(strcmp(a, name(j)) != 0, "%s %u and %u are both '%s'", what, i, j, a);
	}
}

static const char *gs(unsigned i) { return fsm_gstate_str((enum fsm_gstate)i); }
static const char *ge(unsigned i) { return fsm_gevent_str((enum fsm_gevent)i); }
static const char *ga(unsigned i) { return fsm_gaction_str(1u << i); }
static const char *cs(unsigned i) { return fsm_cstate_str((enum fsm_cstate)i); }
static const char *ce(unsigned i) { return fsm_cevent_str((enum fsm_cevent)i); }
static const char *ca(unsigned i) { return fsm_caction_str(1u << i); }
static const char *is(unsigned i) { return fsm_istate_str((enum fsm_istate)i); }
static const char *ie(unsigned i) { return fsm_ievent_str((enum fsm_ievent)i); }

Test(fsm_names, every_value_has_a_unique_name)
{
	expect_names("generation state", FSM_G_COUNT, gs);
	expect_names("generation event", FSM_GE_COUNT, ge);
	expect_names("generation action", FSM_GA_COUNT, ga);
	expect_names("cluster state", FSM_C_COUNT, cs);
	expect_names("cluster event", FSM_CE_COUNT, ce);
	expect_names("cluster action", FSM_CA_COUNT, ca);
	expect_names("item state", FSM_I_COUNT, is);
	expect_names("item event", FSM_IE_COUNT, ie);
	/* the action counts cover exactly the declared bits */
	cr_expect_str_eq(fsm_gaction_str(FSM_GA_CRASHED), "crashed");
	cr_expect_str_eq(fsm_gaction_str(1u << FSM_GA_COUNT), "unknown");
	cr_expect_str_eq(fsm_caction_str(FSM_CA_REAP), "reap");
	cr_expect_str_eq(fsm_caction_str(1u << FSM_CA_COUNT), "unknown");
	cr_expect_str_eq(fsm_gaction_str(FSM_GA_KILL | FSM_GA_ENDED), "unknown");
	cr_expect_str_eq(fsm_gaction_str(0), "unknown");
	cr_expect_str_eq(fsm_gstate_str(FSM_G_COUNT), "unknown");
	cr_expect_str_eq(fsm_gevent_str(FSM_GE_COUNT), "unknown");
	cr_expect_str_eq(fsm_cstate_str(FSM_C_COUNT), "unknown");
	cr_expect_str_eq(fsm_cevent_str(FSM_CE_COUNT), "unknown");
	cr_expect_str_eq(fsm_istate_str(FSM_I_COUNT), "unknown");
	cr_expect_str_eq(fsm_ievent_str(FSM_IE_COUNT), "unknown");
}
