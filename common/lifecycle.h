/*
 * lifecycle — the state machine of one worker generation (docs/design.md §3).
 *
 *   initializing ──► accepting ──► draining ──► stopped
 *         │              │                         ▲
 *         └──► failed ───┼──(retry)──► initializing │
 *                 └──────┴─────────────────────────┘
 *
 * The state names are contract (they appear in the admin API). All changes go
 * through lc_set_state(), which validates the edge against one table, stamps
 * `since` and keeps the reason; the caller logs "old -> new (reason)".
 *
 * Edges beyond the diagram, and why:
 *   initializing -> draining  asked to stop before it accepted: draining until
 *                             it has exited (never `stopped` while it lives)
 *   initializing -> stopped   the worker exited before READY
 *   accepting    -> stopped   the worker died (crash) or an immediate stop
 *   accepting    -> failed    crash loop detected while serving
 *   draining     -> failed    (not allowed: a draining generation only stops)
 */
#ifndef FERRY_COMMON_LIFECYCLE_H
#define FERRY_COMMON_LIFECYCLE_H

#include <stdbool.h>
#include <stdint.h>

enum lc_state {
	LC_INITIALIZING = 0,
	LC_ACCEPTING,
	LC_DRAINING,
	LC_FAILED,
	LC_STOPPED,
	LC_STATE_COUNT,
};

struct lc {
	enum lc_state state;
	uint64_t since_ms;     /* wall clock, ms */
	char reason[192];
};

const char *lc_state_str(enum lc_state s);
bool lc_transition_allowed(enum lc_state from, enum lc_state to);
/* Initialise to LC_INITIALIZING at now_ms. */
void lc_init(struct lc *lc, uint64_t now_ms, const char *reason);
/* 0 on success; -1 (errno EINVAL, state untouched) for a forbidden edge.
 * reason may be NULL (kept empty). */
int lc_set_state(struct lc *lc, enum lc_state to, uint64_t now_ms, const char *reason);

#endif
