/*
 * Unit tests for worker/splice.c: which way the next bytes of a direction
 * go (splice_decide) over every combination that matters, how much one
 * splice may take (splice_amount), and the pipe pool (real pipes: sizes,
 * reuse, the limit of open pipes, the retry pause after a failure, the
 * gauges and counters it keeps). No sockets.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "worker/splice.h"

#define T 1000

static struct splice_view
view(uint64_t frame_left, size_t buffered, bool holding)
{
	return (struct splice_view){
		.enabled = true, .plain = true, .holding = holding,
		.frame_left = frame_left, .buffered = buffered, .threshold = T,
	};
}

Test(splice, way_names)
{
	cr_assert_str_eq(splice_way_str(SPLICE_COPY), "copy");
	cr_assert_str_eq(splice_way_str(SPLICE_WAIT), "wait");
	cr_assert_str_eq(splice_way_str(SPLICE_MOVE), "move");
	cr_assert_str_eq(splice_way_str((enum splice_way)42), "?");
}

Test(splice, boundary_and_small_rests_are_copied)
{
	struct splice_view v = view(0, 0, false);
	cr_assert_eq(splice_decide(&v), SPLICE_COPY, "a boundary: the parser reads");
	v = view(0, 0, true);
	cr_assert_eq(splice_decide(&v), SPLICE_COPY, "a pipe's tail does not skip the parser");
	v = view(T - 1, 0, false);
	cr_assert_eq(splice_decide(&v), SPLICE_COPY);
	v = view(T, 0, false);
	cr_assert_eq(splice_decide(&v), SPLICE_MOVE);
	v = view(1, 0, false);
	cr_assert_eq(splice_decide(&v), SPLICE_COPY);
}

Test(splice, buffered_bytes_leave_first)
{
	struct splice_view v = view(T, 1, false);
	cr_assert_eq(splice_decide(&v), SPLICE_WAIT);
	v = view(10 * T, 64 * 1024, false);
	cr_assert_eq(splice_decide(&v), SPLICE_WAIT);
	/* small rest with bytes buffered: copied behind them, no wait */
	v = view(T - 1, 5, false);
	cr_assert_eq(splice_decide(&v), SPLICE_COPY);
}

Test(splice, a_frame_in_the_pipe_stays_there)
{
	/* its rest shrank below the threshold: still spliced (order) */
	struct splice_view v = view(1, 0, true);
	cr_assert_eq(splice_decide(&v), SPLICE_MOVE);
	v = view(T - 1, 0, true);
	cr_assert_eq(splice_decide(&v), SPLICE_MOVE);
}

Test(splice, tls_or_off_always_copies)
{
	struct splice_view v = view(100 * T, 0, false);
	v.plain = false;
	cr_assert_eq(splice_decide(&v), SPLICE_COPY);
	v = view(100 * T, 0, false);
	v.enabled = false;
	cr_assert_eq(splice_decide(&v), SPLICE_COPY);
	v = view(100 * T, 7, false);
	v.plain = false;
	cr_assert_eq(splice_decide(&v), SPLICE_COPY, "no wait for a splice that cannot come");
}

Test(splice, amount)
{
	cr_assert_eq(splice_amount(10, 100, 0), 10);
	cr_assert_eq(splice_amount(1000, 100, 0), 100);
	cr_assert_eq(splice_amount(1000, 100, 60), 40);
	cr_assert_eq(splice_amount(1000, 100, 100), 0);
	cr_assert_eq(splice_amount(1000, 100, 150), 0);
	cr_assert_eq(splice_amount(0, 100, 0), 0);
	cr_assert_eq(splice_amount(1ULL << 40, 1 << 20, 0), 1 << 20);
}

/* ---- the pool ---------------------------------------------------------- */

static struct metrics *m;
static struct splice_pool pool;

static void
pool_setup(void)
{
	m = calloc(1, sizeof *m);
	cr_assert_not_null(m);
	splice_pool_init(&pool, m);
}

static void
pool_teardown(void)
{
	splice_pool_free(&pool);
	free(m);
}

TestSuite(splice_pool, .init = pool_setup, .fini = pool_teardown, .timeout = 10);

Test(splice_pool, get_gives_a_working_nonblocking_pipe)
{
	struct splice_pipe p;
	cr_assert_eq(splice_pool_get(&pool, 0, &p), 0);
	cr_assert_geq(p.cap, SPLICE_PIPE_MIN);
	cr_assert_eq((size_t)fcntl(p.wr, F_GETPIPE_SZ), p.cap);
	cr_assert(fcntl(p.rd, F_GETFL) & O_NONBLOCK);
	cr_assert(fcntl(p.wr, F_GETFD) & FD_CLOEXEC);
	cr_assert_eq(write(p.wr, "abc", 3), 3);
	char b[4];
	cr_assert_eq(read(p.rd, b, sizeof b), 3);
	cr_assert_eq(read(p.rd, b, sizeof b), -1, "empty and non-blocking");
	cr_assert_eq(METRIC_GET(m, splice_pipes), 1);
	cr_assert_eq(pool.n_open, 1);
	splice_pool_put(&pool, &p);
	cr_assert_eq(p.cap, 0);
	cr_assert_eq(p.rd, -1);
	cr_assert_eq(pool.n_idle, 1);
	cr_assert_eq(METRIC_GET(m, splice_pipes), 1, "an idle pipe is still open");
}

Test(splice_pool, idle_pipes_are_reused)
{
	struct splice_pipe p, q;
	cr_assert_eq(splice_pool_get(&pool, 0, &p), 0);
	int rd = p.rd;
	splice_pool_put(&pool, &p);
	cr_assert_eq(splice_pool_get(&pool, 0, &q), 0);
	cr_assert_eq(q.rd, rd);
	cr_assert_eq(pool.n_open, 1);
	splice_pool_put(&pool, &q);
}

Test(splice_pool, put_of_none_is_nothing)
{
	struct splice_pipe none = { .rd = -1, .wr = -1, .cap = 0 };
	splice_pool_put(&pool, &none);
	splice_pool_drop(&pool, &none);
	cr_assert_eq(pool.n_idle, 0);
	cr_assert_eq(pool.n_open, 0);
}

Test(splice_pool, drop_closes_a_pipe_with_bytes)
{
	struct splice_pipe p;
	cr_assert_eq(splice_pool_get(&pool, 0, &p), 0);
	int wr = p.wr;
	cr_assert_eq(write(p.wr, "abc", 3), 3);
	splice_pool_drop(&pool, &p);
	cr_assert_eq(p.cap, 0);
	cr_assert_eq(pool.n_idle, 0, "never back to the pool with bytes in it");
	cr_assert_eq(pool.n_open, 0);
	cr_assert_eq(METRIC_GET(m, splice_pipes), 0);
	cr_assert_eq(fcntl(wr, F_GETFD), -1, "closed");
}

Test(splice_pool, limit_of_open_pipes_then_copy)
{
	struct splice_pipe p[SPLICE_PIPES_MAX + 1];
	for (int i = 0; i < SPLICE_PIPES_MAX; i++)
		cr_assert_eq(splice_pool_get(&pool, 0, &p[i]), 0, "pipe %d", i);
	cr_assert_eq(splice_pool_get(&pool, 0, &p[SPLICE_PIPES_MAX]), -1);
	cr_assert_eq(METRIC_GET(m, splice_fallbacks), 1);
	cr_assert_eq(METRIC_GET(m, splice_pipes), SPLICE_PIPES_MAX);
	/* one given back: the next get has it at once (no pause: not a failure) */
	splice_pool_put(&pool, &p[0]);
	cr_assert_eq(splice_pool_get(&pool, 0, &p[0]), 0);
	/* all back: SPLICE_PIPES_IDLE stay open, the rest are closed */
	for (int i = 0; i < SPLICE_PIPES_MAX; i++)
		splice_pool_put(&pool, &p[i]);
	cr_assert_eq(pool.n_idle, SPLICE_PIPES_IDLE);
	cr_assert_eq(pool.n_open, SPLICE_PIPES_IDLE);
	cr_assert_eq(METRIC_GET(m, splice_pipes), SPLICE_PIPES_IDLE);
}

Test(splice_pool, a_failed_pipe2_pauses_new_pipes)
{
	/* no descriptor left (each test runs in its own process): pipe2
	 * fails with EMFILE, and for SPLICE_RETRY_S no pipe2 is tried */
	struct rlimit rl = { 64, 64 };
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	int fds[64], n = 0, fd;
	while (n < 64 && (fd = dup(0)) >= 0)
		fds[n++] = fd;
	cr_assert_geq(n, 2);
	struct splice_pipe p;
	cr_assert_eq(splice_pool_get(&pool, 5.0, &p), -1);
	cr_assert_eq(METRIC_GET(m, splice_fallbacks), 1);
	cr_assert_eq(pool.n_open, 0);
	close(fds[--n]);
	close(fds[--n]);
	cr_assert_eq(splice_pool_get(&pool, 5.0 + SPLICE_RETRY_S / 2, &p), -1, "paused");
	cr_assert_eq(METRIC_GET(m, splice_fallbacks), 2);
	cr_assert_eq(splice_pool_get(&pool, 5.0 + SPLICE_RETRY_S, &p), 0);
	splice_pool_put(&pool, &p);
	while (n)
		close(fds[--n]);
}

Test(splice_pool, free_closes_idle_pipes)
{
	struct splice_pipe p, q;
	cr_assert_eq(splice_pool_get(&pool, 0, &p), 0);
	cr_assert_eq(splice_pool_get(&pool, 0, &q), 0);
	int rd = p.rd;
	splice_pool_put(&pool, &p);
	splice_pool_put(&pool, &q);
	splice_pool_free(&pool);
	cr_assert_eq(pool.n_idle, 0);
	cr_assert_eq(pool.n_open, 0);
	cr_assert_eq(METRIC_GET(m, splice_pipes), 0);
	cr_assert_eq(fcntl(rd, F_GETFD), -1, "closed");
}
