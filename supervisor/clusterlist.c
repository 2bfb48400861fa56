/*
 * clusterlist — the selection and order of GET /admin/clusters; see
 * clusterlist.h.
 */
#include "supervisor/clusterlist.h"

#include <fnmatch.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/promfam.h"
#include "supervisor/status.h"

/* ---- selection and order ---------------------------------------------------------- */

struct clusterlist_item {
	struct sup_cluster *c;
	size_t index;                 /* in the configuration */
	bool trouble;                 /* failed or unresponsive: listed first */
	int rank;                     /* state order: trouble first, accepting last */
	uint64_t connections;
	uint64_t since_ms;
	enum adminproto_list_sort sort;
};

static bool
clusterlist_name_ok(const char *globs, const char *name)
{
	char pat[512];

	if (globs[0] == '\0')
		return true;
	for (const char *p = globs;;) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);

		if (n < sizeof pat) {
			memcpy(pat, p, n);
			pat[n] = '\0';
			if (fnmatch(pat, name, 0) == 0)
				return true;
		}
		if (!comma)
			return false;
		p = comma + 1;
	}
}

static int
clusterlist_cmp(const void *x, const void *y)
{
	const struct clusterlist_item *a = x, *b = y;

	if (a->trouble != b->trouble)
		return a->trouble ? -1 : 1;
	switch (a->sort) {
	case ADMINPROTO_SORT_NAME: {
		int c = strcmp(a->c->name, b->c->name);
		if (c)
			return c;
		break;
	}
	case ADMINPROTO_SORT_CONNECTIONS:
		if (a->connections != b->connections)
			return a->connections > b->connections ? -1 : 1;
		break;
	case ADMINPROTO_SORT_STATE:
		if (a->rank != b->rank)
			return a->rank < b->rank ? -1 : 1;
		break;
	case ADMINPROTO_SORT_SINCE:
		if (a->since_ms != b->since_ms)
			return a->since_ms > b->since_ms ? -1 : 1;
		break;
	case ADMINPROTO_SORT_FILE:
	case ADMINPROTO_SORT_COUNT:
		break;
	}
	return a->index < b->index ? -1 : a->index > b->index;
}

/* failed first, then unresponsive, stopped, draining, initializing,
 * accepting */
static int
clusterlist_rank(enum lc_state st, bool unresponsive)
{
	if (st == LC_FAILED)
		return 0;
	if (unresponsive)
		return 1;
	switch (st) {
	case LC_STOPPED: return 2;
	case LC_DRAINING: return 3;
	case LC_INITIALIZING: return 4;
	default: return 5;
	}
}

_Static_assert(ADMINPROTO_LIST_UNRESPONSIVE == LC_STATE_COUNT,
    "a state bit per lifecycle state, then unresponsive");

json_t *
clusterlist_json(struct sup *s, const struct adminproto_list_query *l)
{
	struct clusterlist_item *v = calloc(s->n_clusters + 1, sizeof *v);
	json_t *o = json_object(), *a = json_array();
	size_t n = 0;

	if (v == NULL || o == NULL || a == NULL) {
		free(v);
		json_decref(o);
		json_decref(a);
		return NULL;
	}
	for (size_t i = 0; i < s->n_clusters; i++) {
		struct sup_cluster *c = s->clusters[i];
		const struct sup_gen *g = sup_cluster_serving(c);
		enum lc_state st = sup_cluster_state(c);
		bool unresp = g != NULL && g->unresponsive;

		if (!clusterlist_name_ok(l->names, c->name))
			continue;
		if (l->states && !(l->states & (1u << st)) &&
		    !(unresp && (l->states & (1u << ADMINPROTO_LIST_UNRESPONSIVE))))
			continue;
		v[n] = (struct clusterlist_item){ .c = c, .index = i,
			.sort = (enum adminproto_list_sort)l->sort,
			.trouble = st == LC_FAILED || unresp, .rank = clusterlist_rank(st, unresp),
			.since_ms = g ? (unresp ? g->unresponsive_since_ms : g->lc.since_ms) : 0 };
		if (l->sort == ADMINPROTO_SORT_CONNECTIONS) {
			/* a gauge summed while workers change it may dip below 0 */
			uint64_t conns = promfam_field_sum(c, offsetof(struct metrics,
			    connections_active), false);
			v[n].connections = conns > (uint64_t)INT64_MAX ? 0 : conns;
		}
		n++;
	}
	qsort(v, n, sizeof *v, clusterlist_cmp);
	size_t end = l->limit && (size_t)l->offset + l->limit < n ? (size_t)l->offset + l->limit : n;
	for (size_t i = l->offset; i < end; i++)
		json_array_append_new(a, status_cluster_json(v[i].c));
	json_object_set_new(o, "clusters", a);
	if (l->given) {
		json_object_set_new(o, "matched", json_integer((json_int_t)n));
		json_object_set_new(o, "total", json_integer((json_int_t)s->n_clusters));
	}
	free(v);
	return o;
}
