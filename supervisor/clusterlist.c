/*
 * clusterlist — the selection and order of GET /admin/clusters; see
 * clusterlist.h.
 */
#include "supervisor/clusterlist.h"

#include <errno.h>
#include <fnmatch.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/http.h"
#include "supervisor/promfam.h"
#include "supervisor/status.h"

static const char *const clusterlist_sort_names[] = {
	[CLUSTERLIST_SORT_FILE] = "file", [CLUSTERLIST_SORT_NAME] = "name",
	[CLUSTERLIST_SORT_CONNECTIONS] = "connections", [CLUSTERLIST_SORT_STATE] = "state",
	[CLUSTERLIST_SORT_SINCE] = "since",
};

const char *
clusterlist_sort_str(enum clusterlist_sort k)
{
	return (unsigned)k < sizeof clusterlist_sort_names / sizeof clusterlist_sort_names[0] ?
	    clusterlist_sort_names[k] : "unknown";
}

void
clusterlist_free(struct clusterlist *l)
{
	free(l->names);
	memset(l, 0, sizeof *l);
}

/* state=S[,S...] into a bit set; -1 with err for an unknown state. */
static int
clusterlist_states(const char *v, unsigned *out, char *err, size_t errlen)
{
	const char *p = v;

	*out = 0;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		int st = -1;

		for (int k = 0; k < LC_STATE_COUNT; k++)
			if (strlen(lc_state_str((enum lc_state)k)) == n &&
			    strncmp(p, lc_state_str((enum lc_state)k), n) == 0)
				st = k;
		if (n == strlen("unresponsive") && strncmp(p, "unresponsive", n) == 0)
			st = CLUSTERLIST_UNRESPONSIVE;
		if (st < 0) {
			snprintf(err, errlen, "state: unknown state '%.*s' (initializing, accepting, "
			    "draining, failed, stopped or unresponsive, comma-separated)",
			    (int)(n > 64 ? 64 : n), p);
			return -1;
		}
		*out |= 1u << st;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

static int
clusterlist_number(const char *key, const char *v, size_t min, size_t max, size_t *out,
		   char *err, size_t errlen)
{
	char *end;
	unsigned long long n;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno != 0 || n < min || n > max) {
		snprintf(err, errlen, "%s: '%.32s' is not a number from %zu to %zu", key, v, min,
		    max);
		return -1;
	}
	*out = (size_t)n;
	return 0;
}

static int
clusterlist_param(struct clusterlist *l, const char *key, const char *v, unsigned *seen,
		  char *err, size_t errlen)
{
	static const char *const keys[] = { "name", "state", "sort", "limit", "offset" };
	unsigned k;

	for (k = 0; k < sizeof keys / sizeof keys[0]; k++)
		if (strcmp(key, keys[k]) == 0)
			break;
	if (k == sizeof keys / sizeof keys[0]) {
		snprintf(err, errlen, "unknown query parameter '%.64s' (name, state, sort, limit, "
		    "offset)", key);
		return -1;
	}
	if (*seen & (1u << k)) {
		snprintf(err, errlen, "query parameter '%s' given twice", key);
		return -1;
	}
	*seen |= 1u << k;
	switch (k) {
	case 0:
		if (v[0] == '\0' || strstr(v, ",,") || v[0] == ',' || v[strlen(v) - 1] == ',') {
			snprintf(err, errlen, "name: an empty pattern (want GLOB[,GLOB...])");
			return -1;
		}
		if ((l->names = strdup(v)) == NULL) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		return 0;
	case 1:
		return clusterlist_states(v, &l->states, err, errlen);
	case 2:
		for (unsigned i = 0; i < sizeof clusterlist_sort_names / sizeof clusterlist_sort_names[0];
		    i++)
			if (strcmp(v, clusterlist_sort_names[i]) == 0) {
				l->sort = (enum clusterlist_sort)i;
				return 0;
			}
		snprintf(err, errlen, "sort: unknown key '%.32s' (file, name, connections, state or "
		    "since)", v);
		return -1;
	case 3:
		return clusterlist_number("limit", v, 1, CLUSTERLIST_MAX_LIMIT, &l->limit, err, errlen);
	default:
		return clusterlist_number("offset", v, 0, (size_t)1 << 31, &l->offset, err, errlen);
	}
}

int
clusterlist_parse(const char *query, struct clusterlist *l, char *err, size_t errlen)
{
	size_t pos = 0;
	unsigned seen = 0;
	char *key, *v;
	int r;

	memset(l, 0, sizeof *l);
	while ((r = http_query_next(query, &pos, &key, &v)) == 1) {
		int rc = clusterlist_param(l, key, v, &seen, err, errlen);

		free(key);
		free(v);
		if (rc == -1) {
			clusterlist_free(l);
			return -1;
		}
		l->any = true;
	}
	if (r == -1) {
		snprintf(err, errlen, "malformed query string (a bad %%-escape or an empty name)");
		clusterlist_free(l);
		return -1;
	}
	return 0;
}

/* ---- selection and order ---------------------------------------------------------- */

struct clusterlist_item {
	struct sup_cluster *c;
	size_t index;                 /* in the configuration */
	bool trouble;                 /* failed or unresponsive: listed first */
	int rank;                     /* state order: trouble first, accepting last */
	uint64_t connections;
	uint64_t since_ms;
	enum clusterlist_sort sort;
};

static bool
clusterlist_name_ok(const char *globs, const char *name)
{
	char pat[512];

	if (globs == NULL)
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
	case CLUSTERLIST_SORT_NAME: {
		int c = strcmp(a->c->name, b->c->name);
		if (c)
			return c;
		break;
	}
	case CLUSTERLIST_SORT_CONNECTIONS:
		if (a->connections != b->connections)
			return a->connections > b->connections ? -1 : 1;
		break;
	case CLUSTERLIST_SORT_STATE:
		if (a->rank != b->rank)
			return a->rank < b->rank ? -1 : 1;
		break;
	case CLUSTERLIST_SORT_SINCE:
		if (a->since_ms != b->since_ms)
			return a->since_ms > b->since_ms ? -1 : 1;
		break;
	case CLUSTERLIST_SORT_FILE:
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

json_t *
clusterlist_json(struct sup *s, const struct clusterlist *l)
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
		    !(unresp && (l->states & (1u << CLUSTERLIST_UNRESPONSIVE))))
			continue;
		v[n] = (struct clusterlist_item){ .c = c, .index = i, .sort = l->sort,
			.trouble = st == LC_FAILED || unresp, .rank = clusterlist_rank(st, unresp),
			.since_ms = g ? (unresp ? g->unresponsive_since_ms : g->lc.since_ms) : 0 };
		if (l->sort == CLUSTERLIST_SORT_CONNECTIONS) {
			/* a gauge summed while workers change it may dip below 0 */
			uint64_t conns = promfam_field_sum(c, offsetof(struct metrics,
			    connections_active), false);
			v[n].connections = conns > (uint64_t)INT64_MAX ? 0 : conns;
		}
		n++;
	}
	qsort(v, n, sizeof *v, clusterlist_cmp);
	size_t end = l->limit && l->offset + l->limit < n ? l->offset + l->limit : n;
	for (size_t i = l->offset; i < end; i++)
		json_array_append_new(a, status_cluster_json(v[i].c));
	json_object_set_new(o, "clusters", a);
	if (l->any) {
		json_object_set_new(o, "matched", json_integer((json_int_t)n));
		json_object_set_new(o, "total", json_integer((json_int_t)s->n_clusters));
	}
	free(v);
	return o;
}
