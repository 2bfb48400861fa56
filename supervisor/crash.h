/*
 * crash — the restart policy for workers that die unexpectedly.
 *
 * Pure and clock-free: every call takes `now_ms`, so the policy is tested
 * with a fake clock and no sleeping. A crashed worker is restarted after a
 * backoff that starts at 100 ms and doubles per consecutive crash up to
 * 30 s; a worker that ran for at least 60 s before crashing starts the
 * backoff over. `limit` crashes within `window_ms` is a crash loop: the
 * cluster goes to `failed` and is not restarted until an operator restarts
 * it or a reload modifies it (crash_reset).
 */
#ifndef FERRY_SUPERVISOR_CRASH_H
#define FERRY_SUPERVISOR_CRASH_H

#include <stdbool.h>
#include <stdint.h>

#define CRASH_BACKOFF_BASE_MS 100
#define CRASH_BACKOFF_MAX_MS 30000
#define CRASH_STABLE_MS 60000
#define CRASH_MAX_LIMIT 1000

struct crash_policy {
	uint32_t limit;        /* crash_loop_limit */
	uint64_t window_ms;    /* crash_loop_window */
};

struct crash_state {
	uint64_t *times;       /* ring of the last `limit` crash times */
	uint32_t cap, n, head;
	uint64_t backoff_ms;   /* next delay */
	uint64_t started_ms;   /* last start of a worker */
	uint64_t restarts;     /* restarts scheduled, ever */
	uint64_t loops;        /* times a crash loop was declared, ever */
};

enum crash_decision { CRASH_RESTART = 0, CRASH_GIVE_UP };
const char *crash_decision_str(enum crash_decision d);

/* 0, or -1 on allocation failure. */
int crash_init(struct crash_state *st, const struct crash_policy *p);
void crash_free(struct crash_state *st);
/* A worker of the cluster was started now. */
void crash_started(struct crash_state *st, uint64_t now_ms);
/* A worker died unexpectedly now: restart after *delay_ms, or give up.
 * *count_in_window gets the number of crashes within the window. */
enum crash_decision crash_exited(struct crash_state *st, const struct crash_policy *p,
				 uint64_t now_ms, uint64_t *delay_ms, uint32_t *count_in_window);
/* Forget the crash history (operator restart, reload). Keeps the totals. */
void crash_reset(struct crash_state *st);

#endif
