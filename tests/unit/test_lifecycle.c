/*
 * Unit tests for common/lifecycle: every allowed and every forbidden edge of
 * the transition table, and what lc_set_state records.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "common/lifecycle.h"

/* The edges docs/design.md §3 and lifecycle.h allow; everything else is forbidden. */
static bool
expected_edge(enum lc_state from, enum lc_state to)
{
	switch (from) {
	case LC_INITIALIZING: return to == LC_ACCEPTING || to == LC_DRAINING || to == LC_FAILED ||
		    to == LC_STOPPED;
	case LC_ACCEPTING: return to == LC_DRAINING || to == LC_FAILED || to == LC_STOPPED;
	case LC_DRAINING: return to == LC_STOPPED;
	case LC_FAILED: return to == LC_INITIALIZING || to == LC_STOPPED;
	case LC_STOPPED: return false;
	default: return false;
	}
}

Test(lifecycle, every_edge_matches_the_table)
{
	int allowed = 0;
	for (int f = 0; f < LC_STATE_COUNT; f++)
		for (int t = 0; t < LC_STATE_COUNT; t++) {
			bool want = expected_edge(f, t);
			cr_expect_eq(lc_transition_allowed(f, t), want, "%s -> %s",
			    lc_state_str(f), lc_state_str(t));
			struct lc lc = { .state = f, .since_ms = 1, .reason = "old" };
			int r = lc_set_state(&lc, t, 42, "why");
			if (want) {
				allowed++;
				cr_expect_eq(r, 0);
				cr_expect_eq(lc.state, (enum lc_state)t);
				cr_expect_eq(lc.since_ms, 42);
				cr_expect_str_eq(lc.reason, "why");
			} else {
				cr_expect_eq(r, -1);
				cr_expect_eq(errno, EINVAL);
				cr_expect_eq(lc.state, (enum lc_state)f, "state untouched");
				cr_expect_eq(lc.since_ms, 1, "since untouched");
				cr_expect_str_eq(lc.reason, "old");
			}
		}
	cr_expect_eq(allowed, 10);
}

Test(lifecycle, self_edges_forbidden)
{
	for (int s = 0; s < LC_STATE_COUNT; s++)
		cr_expect_not(lc_transition_allowed(s, s), "%s -> itself", lc_state_str(s));
}

Test(lifecycle, names_are_contract)
{
	cr_expect_str_eq(lc_state_str(LC_INITIALIZING), "initializing");
	cr_expect_str_eq(lc_state_str(LC_ACCEPTING), "accepting");
	cr_expect_str_eq(lc_state_str(LC_DRAINING), "draining");
	cr_expect_str_eq(lc_state_str(LC_FAILED), "failed");
	cr_expect_str_eq(lc_state_str(LC_STOPPED), "stopped");
	cr_expect_str_eq(lc_state_str((enum lc_state)99), "unknown");
	cr_expect_not(lc_transition_allowed((enum lc_state)99, LC_STOPPED));
	cr_expect_not(lc_transition_allowed(LC_FAILED, (enum lc_state)-1));
}

Test(lifecycle, init_and_retry_path)
{
	struct lc lc;
	lc_init(&lc, 7, NULL);
	cr_expect_eq(lc.state, LC_INITIALIZING);
	cr_expect_eq(lc.since_ms, 7);
	cr_expect_str_eq(lc.reason, "");
	cr_assert_eq(lc_set_state(&lc, LC_FAILED, 8, "bind: in use"), 0);
	cr_assert_eq(lc_set_state(&lc, LC_INITIALIZING, 9, "retry"), 0);
	cr_assert_eq(lc_set_state(&lc, LC_ACCEPTING, 10, NULL), 0);
	cr_assert_eq(lc_set_state(&lc, LC_DRAINING, 11, "reload"), 0);
	cr_assert_eq(lc_set_state(&lc, LC_ACCEPTING, 12, NULL), -1);
	cr_assert_eq(lc_set_state(&lc, LC_STOPPED, 13, "drained"), 0);
	cr_assert_eq(lc_set_state(&lc, LC_INITIALIZING, 14, NULL), -1);
}
