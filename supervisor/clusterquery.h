/*
 * clusterquery — the query string of GET /admin/clusters, read by the
 * admin process (ferry-admin) into the typed query it passes to ferryd
 * (struct adminproto_list_query); ferryd never sees the string, and
 * applies the query with clusterlist.h.
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
 *   limit=N, offset=M     a page: M clusters skipped (at most
 *                         ADMINPROTO_LIST_OFFSET_MAX), N at most listed
 *                         (1..ADMINPROTO_LIST_LIMIT_MAX)
 * Values are percent-decoded ('+' is a space). The admin process answers
 * 400 with the message of a query that is refused.
 *
 * Return convention: 0, or -1 with a message in err.
 */
#ifndef FERRY_SUPERVISOR_CLUSTERQUERY_H
#define FERRY_SUPERVISOR_CLUSTERQUERY_H

#include <stddef.h>

#include "supervisor/adminproto.h"

/* The query string (raw, without '?'; NULL: none) into q. */
int clusterquery_parse(const char *query, struct adminproto_list_query *q, char *err,
		       size_t errlen);

#endif
