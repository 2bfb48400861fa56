/*
 * crash — restart backoff and crash-loop detection; see crash.h.
 */
#include "supervisor/crash.h"

#include <stdlib.h>
#include <string.h>

const char *
crash_decision_str(enum crash_decision d)
{
	return d == CRASH_RESTART ? "restart" : "give-up";
}

int
crash_init(struct crash_state *st, const struct crash_policy *p)
{
	memset(st, 0, sizeof *st);
	st->cap = p->limit ? p->limit : 1;
	if (st->cap > CRASH_MAX_LIMIT)
		st->cap = CRASH_MAX_LIMIT;
	st->times = calloc(st->cap, sizeof *st->times);
	st->backoff_ms = CRASH_BACKOFF_BASE_MS;
	return st->times ? 0 : -1;
}

void
crash_free(struct crash_state *st)
{
	free(st->times);
	st->times = NULL;
}

void
crash_started(struct crash_state *st, uint64_t now_ms)
{
	st->started_ms = now_ms;
}

void
crash_reset(struct crash_state *st)
{
	st->n = st->head = 0;
	st->backoff_ms = CRASH_BACKOFF_BASE_MS;
}

enum crash_decision
crash_exited(struct crash_state *st, const struct crash_policy *p, uint64_t now_ms,
	     uint64_t *delay_ms, uint32_t *count_in_window)
{
	/* A worker that ran stably earns a fresh backoff. */
	if (now_ms >= st->started_ms && now_ms - st->started_ms >= CRASH_STABLE_MS)
		st->backoff_ms = CRASH_BACKOFF_BASE_MS;

	/* Record this crash in the ring (the oldest falls out). */
	st->times[(st->head + st->n) % st->cap] = now_ms;
	if (st->n < st->cap)
		st->n++;
	else
		st->head = (st->head + 1) % st->cap;

	uint32_t in_window = 0;
	for (uint32_t i = 0; i < st->n; i++) {
		uint64_t t = st->times[(st->head + i) % st->cap];
		if (now_ms - t < p->window_ms)
			in_window++;
	}
	if (count_in_window)
		*count_in_window = in_window;
	if (in_window >= p->limit) {
		st->loops++;
		return CRASH_GIVE_UP;
	}
	*delay_ms = st->backoff_ms;
	st->backoff_ms *= 2;
	if (st->backoff_ms > CRASH_BACKOFF_MAX_MS)
		st->backoff_ms = CRASH_BACKOFF_MAX_MS;
	st->restarts++;
	return CRASH_RESTART;
}
