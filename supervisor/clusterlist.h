/*
 * clusterlist — which clusters GET /admin/clusters lists, and in what
 * order (docs/design.md §7): its query parameters parsed into a struct
 * clusterlist, and the list they select rendered with status.h. Pure over
 * the model (supervisor.h): no I/O, no clock.
 *
 * Parameters (each at most once; anything else is an error):
 *   name=GLOB[,GLOB...]   clusters whose name matches one of the shell
 *                         globs (fnmatch: * ? [...]); names have no comma
 *   state=S[,S...]        whose state is one of S: a lifecycle state
 *                         (initializing, accepting, draining, failed,
 *                         stopped) or unresponsive (its watchdog)
 *   sort=KEY              file (configuration order, the default), name,
 *                         connections (most first), state (failed and
 *                         unresponsive first, accepting last), since
 *                         (the most recent change first)
 *   limit=N, offset=M     a page: M clusters skipped, N at most listed
 * Whatever the sort, failed and unresponsive clusters come first: the ones
 * an operator looks for are at the top of a list of a thousand.
 *
 * Return convention: clusterlist_parse 0, or -1 with a message for a 400
 * in err.
 */
#ifndef FERRY_SUPERVISOR_CLUSTERLIST_H
#define FERRY_SUPERVISOR_CLUSTERLIST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "supervisor/supervisor.h"

enum clusterlist_sort {
	CLUSTERLIST_SORT_FILE = 0, CLUSTERLIST_SORT_NAME, CLUSTERLIST_SORT_CONNECTIONS,
	CLUSTERLIST_SORT_STATE, CLUSTERLIST_SORT_SINCE,
};
const char *clusterlist_sort_str(enum clusterlist_sort k);

#define CLUSTERLIST_UNRESPONSIVE LC_STATE_COUNT  /* a bit of `states` beside the lifecycle's */
#define CLUSTERLIST_MAX_LIMIT 100000

struct clusterlist {
	bool any;                     /* a parameter was given: the answer adds
	                                 "matched" and "total" */
	char *names;                  /* comma-separated globs; NULL = every name */
	unsigned states;              /* bit per lc_state and CLUSTERLIST_UNRESPONSIVE;
	                                 0 = every state */
	enum clusterlist_sort sort;
	size_t offset, limit;         /* limit 0: no limit */
};

/* Parse a raw query string (NULL: none) into *l (zeroed first; free with
 * clusterlist_free). */
int clusterlist_parse(const char *query, struct clusterlist *l, char *err, size_t errlen);
void clusterlist_free(struct clusterlist *l);

/* {"clusters":[CLUSTER,...]} of the listed clusters selected by l, plus
 * "matched" (before the page) and "total" when l->any. NULL when out of
 * memory. */
json_t *clusterlist_json(struct sup *s, const struct clusterlist *l);

#endif
