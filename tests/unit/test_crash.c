/*
 * Unit tests for supervisor/crash: backoff and crash-loop policy driven by a
 * fake clock (plain numbers), no sleeping.
 */
#include <criterion/criterion.h>

#include "supervisor/crash.h"

static const struct crash_policy P = { .limit = 5, .window_ms = 60000 };

Test(crash, backoff_doubles_to_the_cap)
{
	struct crash_state st;
	struct crash_policy p = { .limit = 1000, .window_ms = 1 };  /* never a loop */
	cr_assert_eq(crash_init(&st, &p), 0);
	uint64_t now = 1000000, d = 0;
	uint64_t want[] = { 100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000 };
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		crash_started(&st, now);
		now += 10;  /* crashes right away */
		cr_assert_eq(crash_exited(&st, &p, now, &d, NULL), CRASH_RESTART);
		cr_expect_eq(d, want[i], "crash %zu: delay %llu", i, (unsigned long long)d);
		now += d;
	}
	cr_expect_eq(st.restarts, sizeof want / sizeof want[0]);
	crash_free(&st);
}

Test(crash, stable_run_resets_backoff)
{
	struct crash_state st;
	struct crash_policy p = { .limit = 1000, .window_ms = 1 };
	cr_assert_eq(crash_init(&st, &p), 0);
	uint64_t d;
	crash_started(&st, 0);
	crash_exited(&st, &p, 10, &d, NULL);
	crash_started(&st, 110);
	crash_exited(&st, &p, 120, &d, NULL);
	cr_expect_eq(d, 200);
	crash_started(&st, 320);
	/* ran 59.999 s: not stable yet */
	crash_exited(&st, &p, 320 + 59999, &d, NULL);
	cr_expect_eq(d, 400);
	crash_started(&st, 100000);
	crash_exited(&st, &p, 100000 + 60000, &d, NULL);
	cr_expect_eq(d, 100, "a 60 s run starts the backoff over");
	crash_free(&st);
}

Test(crash, loop_after_limit_within_window)
{
	struct crash_state st;
	cr_assert_eq(crash_init(&st, &P), 0);
	uint64_t d;
	uint32_t n;
	uint64_t now = 5000;
	for (int i = 1; i <= 4; i++) {
		crash_started(&st, now);
		now += 1000;
		cr_assert_eq(crash_exited(&st, &P, now, &d, &n), CRASH_RESTART, "crash %d", i);
		cr_expect_eq(n, (uint32_t)i);
	}
	crash_started(&st, now);
	now += 1000;
	cr_expect_eq(crash_exited(&st, &P, now, &d, &n), CRASH_GIVE_UP);
	cr_expect_eq(n, 5);
	cr_expect_eq(st.loops, 1);
	crash_free(&st);
}

Test(crash, old_crashes_leave_the_window)
{
	struct crash_state st;
	cr_assert_eq(crash_init(&st, &P), 0);
	uint64_t d;
	uint32_t n;
	/* 4 crashes, then a quiet minute, then 4 more: never 5 in 60 s */
	uint64_t now = 0;
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 4; i++) {
			crash_started(&st, now);
			now += 100;
			cr_assert_eq(crash_exited(&st, &P, now, &d, &n), CRASH_RESTART);
		}
		now += 60000;
	}
	cr_expect_eq(n, 4);
	/* a 5th one soon after the last four is a loop */
	crash_started(&st, now);
	cr_expect_eq(crash_exited(&st, &P, now - 59000, &d, &n), CRASH_GIVE_UP);
	crash_free(&st);
}

Test(crash, reset_forgets_history_and_backoff)
{
	struct crash_state st;
	cr_assert_eq(crash_init(&st, &P), 0);
	uint64_t d;
	uint32_t n;
	for (int i = 0; i < 4; i++)
		crash_exited(&st, &P, 100 + i, &d, &n);
	crash_reset(&st);
	cr_expect_eq(crash_exited(&st, &P, 200, &d, &n), CRASH_RESTART);
	cr_expect_eq(n, 1);
	cr_expect_eq(d, 100);
	cr_expect_eq(st.restarts, 5, "totals survive a reset");
	crash_free(&st);
}

Test(crash, limit_of_one_gives_up_at_once)
{
	struct crash_state st;
	struct crash_policy p = { .limit = 1, .window_ms = 1000 };
	cr_assert_eq(crash_init(&st, &p), 0);
	uint64_t d;
	cr_expect_eq(crash_exited(&st, &p, 50, &d, NULL), CRASH_GIVE_UP);
	crash_free(&st);
}
