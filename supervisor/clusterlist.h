/*
 * clusterlist — which clusters GET /admin/clusters lists, and in what
 * order (docs/design.md §7): the list a typed query (struct
 * adminproto_list_query, read from the query string by the admin process,
 * clusterquery.h) selects, rendered with status.h. Pure over the model
 * (supervisor.h): no I/O, no clock, no query string.
 *
 * Whatever the sort, failed and unresponsive clusters come first: the ones
 * an operator looks for are at the top of a list of a thousand.
 */
#ifndef FERRY_SUPERVISOR_CLUSTERLIST_H
#define FERRY_SUPERVISOR_CLUSTERLIST_H

#include <jansson.h>

#include "supervisor/adminproto.h"
#include "supervisor/supervisor.h"

/* {"clusters":[CLUSTER,...]} of the listed clusters selected by q (checked
 * by adminproto_request_check), plus "matched" (before the page) and
 * "total" when q->given. NULL when out of memory. */
json_t *clusterlist_json(struct sup *s, const struct adminproto_list_query *q);

#endif
