/*
 * evict — see evict.h.
 */
#include "supervisor/evict.h"

#include <string.h>

void
evict_set_init(struct evict_set *s)
{
	memset(s, 0, sizeof *s);
}

void
evict_node_init(struct evict_node *n)
{
	n->prev = n->next = NULL;
	n->queue = EVICT_Q_NONE;
}

int
evict_reading_queue(size_t bytes)
{
	int k = 0;

	while (bytes > 0 && k + 1 < EVICT_READ_CLASSES) {
		bytes >>= 1;
		k++;
	}
	return EVICT_Q_READING + k;
}

void
evict_del(struct evict_set *s, struct evict_node *n)
{
	if (n->queue == EVICT_Q_NONE)
		return;
	if (n->prev)
		n->prev->next = n->next;
	else
		s->head[n->queue] = n->next;
	if (n->next)
		n->next->prev = n->prev;
	else
		s->tail[n->queue] = n->prev;
	n->prev = n->next = NULL;
	n->queue = EVICT_Q_NONE;
	s->count--;
}

void
evict_put(struct evict_set *s, struct evict_node *n, int q)
{
	if (n->queue == q)
		return;
	evict_del(s, n);
	if (q < 0 || q >= EVICT_Q_COUNT)
		return;
	n->queue = q;
	n->prev = s->tail[q];
	n->next = NULL;
	if (s->tail[q])
		s->tail[q]->next = n;
	else
		s->head[q] = n;
	s->tail[q] = n;
	s->count++;
}

struct evict_node *
evict_victim(const struct evict_set *s)
{
	int q;

	if (s->count == 0)
		return NULL;
	for (q = 0; q < EVICT_Q_COUNT; q++)
		if (s->head[q] != NULL)
			return s->head[q];
	return NULL;
}

const char *
evict_queue_str(int q)
{
	if (q == EVICT_Q_NONE)
		return "none";
	if (q == EVICT_Q_LINGERING)
		return "lingering";
	if (q == EVICT_Q_WRITING)
		return "writing";
	if (q >= EVICT_Q_READING && q < EVICT_Q_WRITING)
		return "reading";
	return "unknown";
}
