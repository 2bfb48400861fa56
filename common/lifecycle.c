/*
 * lifecycle — transition table and set-state function; see lifecycle.h.
 */
#include "common/lifecycle.h"

#include <errno.h>
#include <stdio.h>

static const char *const lc_names[LC_STATE_COUNT] = {
	[LC_INITIALIZING] = "initializing",
	[LC_ACCEPTING] = "accepting",
	[LC_DRAINING] = "draining",
	[LC_FAILED] = "failed",
	[LC_STOPPED] = "stopped",
};

/* lc_edges[from][to] */
static const bool lc_edges[LC_STATE_COUNT][LC_STATE_COUNT] = {
	[LC_INITIALIZING] = { [LC_ACCEPTING] = true, [LC_DRAINING] = true, [LC_FAILED] = true,
			       [LC_STOPPED] = true },
	[LC_ACCEPTING] = { [LC_DRAINING] = true, [LC_FAILED] = true, [LC_STOPPED] = true },
	[LC_DRAINING] = { [LC_STOPPED] = true },
	[LC_FAILED] = { [LC_INITIALIZING] = true, [LC_STOPPED] = true },
	[LC_STOPPED] = { 0 },
};

const char *
lc_state_str(enum lc_state s)
{
	if ((unsigned)s >= LC_STATE_COUNT)
		return "unknown";
	return lc_names[s];
}

bool
lc_transition_allowed(enum lc_state from, enum lc_state to)
{
	if ((unsigned)from >= LC_STATE_COUNT || (unsigned)to >= LC_STATE_COUNT)
		return false;
	return lc_edges[from][to];
}

void
lc_init(struct lc *lc, uint64_t now_ms, const char *reason)
{
	lc->state = LC_INITIALIZING;
	lc->since_ms = now_ms;
	snprintf(lc->reason, sizeof lc->reason, "%s", reason ? reason : "");
}

int
lc_set_state(struct lc *lc, enum lc_state to, uint64_t now_ms, const char *reason)
{
	if (!lc_transition_allowed(lc->state, to)) {
		errno = EINVAL;
		return -1;
	}
	lc->state = to;
	lc->since_ms = now_ms;
	snprintf(lc->reason, sizeof lc->reason, "%s", reason ? reason : "");
	return 0;
}
