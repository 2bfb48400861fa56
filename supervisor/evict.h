/*
 * evict — which connection a full admin listener drops first, in O(1).
 * Pure data structure (no sockets, no clock); used by the admin process
 * (admin_accept.c, admin_http.c), unit-tested
 * in tests/unit/test_evict.c.
 *
 * Every evictable connection embeds one struct evict_node and sits in
 * exactly one FIFO queue of its listener's struct evict_set. A node is
 * appended when it enters a queue, so each queue is ordered by how long its
 * members have waited there. Queues, cheapest victim first:
 *   EVICT_Q_LINGERING      response sent, only draining input;
 *   EVICT_Q_READING + k    still reading its request, having received a
 *                          byte count of class k = evict_read_class(bytes):
 *                          0 for 0, 1 for 1, 2 for 2-3, 3 for 4-7, ... (the
 *                          bit length), capped at EVICT_READ_CLASSES - 1;
 *                          a node moves to the tail of the next class as
 *                          its count grows, and keeps its place otherwise;
 *   EVICT_Q_WRITING        response partly sent, the client not reading it.
 * The victim is the head of the first non-empty queue: the connection that
 * has sent least (by power-of-two class) and, among those, waited longest
 * at that level. Finding it looks at EVICT_Q_COUNT heads, a constant.
 * A node in EVICT_Q_NONE (a deferred request) is never a victim.
 */
#ifndef FERRY_SUPERVISOR_EVICT_H
#define FERRY_SUPERVISOR_EVICT_H

#include <stddef.h>

#define EVICT_READ_CLASSES 26           /* byte counts 0, 1, 2-3, ..., >= 2^24 */

enum evict_queue {
	EVICT_Q_NONE = -1,              /* not evictable */
	EVICT_Q_LINGERING = 0,
	EVICT_Q_READING,                /* + class */
	EVICT_Q_WRITING = EVICT_Q_READING + EVICT_READ_CLASSES,
	EVICT_Q_COUNT,
};

struct evict_node {
	struct evict_node *prev, *next;
	int queue;                      /* enum evict_queue */
};

struct evict_set {
	struct evict_node *head[EVICT_Q_COUNT];
	struct evict_node *tail[EVICT_Q_COUNT];
	size_t count;                   /* nodes in any queue */
};

void evict_set_init(struct evict_set *s);
void evict_node_init(struct evict_node *n);

/* The queue of a connection still reading, having received `bytes`. */
int evict_reading_queue(size_t bytes);

/* Move n to the tail of queue q (EVICT_Q_NONE: out of every queue). A node
 * already in q keeps its place. */
void evict_put(struct evict_set *s, struct evict_node *n, int q);

/* Take n out of its queue (no-op when in none). */
void evict_del(struct evict_set *s, struct evict_node *n);

/* The next victim, or NULL when nothing is evictable. Does not remove it. */
struct evict_node *evict_victim(const struct evict_set *s);

const char *evict_queue_str(int q);

#endif
