/*
 * evict: the order in which a full admin listener drops connections.
 */
#include <criterion/criterion.h>

#include "supervisor/evict.h"

static struct evict_set set;
static struct evict_node n[8];

static void
setup(void)
{
	evict_set_init(&set);
	for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
		evict_node_init(&n[i]);
}

TestSuite(evict, .init = setup);

Test(evict, byte_classes)
{
	cr_assert_eq(evict_reading_queue(0), EVICT_Q_READING);
	cr_assert_eq(evict_reading_queue(1), EVICT_Q_READING + 1);
	cr_assert_eq(evict_reading_queue(2), EVICT_Q_READING + 2);
	cr_assert_eq(evict_reading_queue(3), EVICT_Q_READING + 2);
	cr_assert_eq(evict_reading_queue(4), EVICT_Q_READING + 3);
	cr_assert_eq(evict_reading_queue(16384), EVICT_Q_READING + 15);
	cr_assert_eq(evict_reading_queue((size_t)1 << 40), EVICT_Q_WRITING - 1);
	cr_assert_str_eq(evict_queue_str(EVICT_Q_READING + 3), "reading");
	cr_assert_str_eq(evict_queue_str(EVICT_Q_LINGERING), "lingering");
	cr_assert_str_eq(evict_queue_str(EVICT_Q_NONE), "none");
}

Test(evict, empty_and_none)
{
	cr_assert_null(evict_victim(&set));
	evict_put(&set, &n[0], EVICT_Q_NONE);
	cr_assert_null(evict_victim(&set));
	evict_del(&set, &n[0]);         /* no-op */
	cr_assert_eq(set.count, 0);
}

/* Fewest bytes first; among equals, the one that waited longest. */
Test(evict, least_sent_then_longest_waiting)
{
	evict_put(&set, &n[0], evict_reading_queue(10));        /* old, 10 bytes */
	evict_put(&set, &n[1], evict_reading_queue(0));         /* silent */
	evict_put(&set, &n[2], evict_reading_queue(1));
	evict_put(&set, &n[3], evict_reading_queue(0));         /* silent, newer */
	cr_assert_eq(evict_victim(&set), &n[1]);
	evict_del(&set, &n[1]);
	cr_assert_eq(evict_victim(&set), &n[3]);
	evict_del(&set, &n[3]);
	cr_assert_eq(evict_victim(&set), &n[2]);
	evict_del(&set, &n[2]);
	cr_assert_eq(evict_victim(&set), &n[0]);
	evict_del(&set, &n[0]);
	cr_assert_null(evict_victim(&set));
	cr_assert_eq(set.count, 0);
}

/* A node whose count grows moves to the tail of its new class; staying in
 * its class keeps its place. */
Test(evict, progress_moves_to_the_tail)
{
	evict_put(&set, &n[0], evict_reading_queue(2));
	evict_put(&set, &n[1], evict_reading_queue(3));
	evict_put(&set, &n[0], evict_reading_queue(3));         /* same class */
	cr_assert_eq(evict_victim(&set), &n[0]);
	evict_put(&set, &n[0], evict_reading_queue(4));         /* next class */
	cr_assert_eq(evict_victim(&set), &n[1]);
	evict_put(&set, &n[1], evict_reading_queue(5));         /* n1 joins behind n0 */
	cr_assert_eq(evict_victim(&set), &n[0]);
}

/* Lingering before reading before writing; deferred never. */
Test(evict, state_order)
{
	evict_put(&set, &n[0], EVICT_Q_WRITING);
	evict_put(&set, &n[1], evict_reading_queue(1000));
	evict_put(&set, &n[2], EVICT_Q_NONE);
	evict_put(&set, &n[3], EVICT_Q_LINGERING);
	cr_assert_eq(set.count, 3);
	cr_assert_eq(evict_victim(&set), &n[3]);
	evict_del(&set, &n[3]);
	cr_assert_eq(evict_victim(&set), &n[1]);
	evict_put(&set, &n[1], EVICT_Q_NONE);                  /* deferred */
	cr_assert_eq(evict_victim(&set), &n[0]);
	evict_del(&set, &n[0]);
	cr_assert_null(evict_victim(&set));
	cr_assert_eq(set.count, 0);
	cr_assert_eq(n[1].queue, EVICT_Q_NONE);
}

/* Removing from the middle and the ends keeps the list intact. */
Test(evict, unlink_anywhere)
{
	for (int i = 0; i < 5; i++)
		evict_put(&set, &n[i], EVICT_Q_LINGERING);
	evict_del(&set, &n[2]);
	evict_del(&set, &n[4]);
	evict_del(&set, &n[0]);
	cr_assert_eq(evict_victim(&set), &n[1]);
	evict_del(&set, &n[1]);
	cr_assert_eq(evict_victim(&set), &n[3]);
	cr_assert_null(n[3].next);
	cr_assert_null(n[3].prev);
	evict_del(&set, &n[3]);
	cr_assert_null(evict_victim(&set));
}
