/*
 * connquery — the query string of GET /admin/clusters/NAME/connections,
 * read by the admin process (ferry-admin) into the typed query it passes
 * to ferryd (adminproto.h); ferryd never sees the string.
 *
 *   ?limit=N       rows per page, 1..ADMINPROTO_CONN_LIMIT_MAX
 *                  [ADMINPROTO_CONN_LIMIT_DEFAULT]
 *   ?offset=N      rows skipped, oldest connection first [0]
 *   ?client_id=S   only connections whose client_id is S (exactly)
 *   ?principal=S   only connections whose asserted SASL identity is S
 * Values are percent-decoded ('+' is a space); an unknown or repeated
 * parameter, a bad number or a value longer than a client id can be is
 * refused (the admin process answers 400 with the message).
 *
 * Return convention: 0, or -1 with a message in err.
 */
#ifndef FERRY_SUPERVISOR_CONNQUERY_H
#define FERRY_SUPERVISOR_CONNQUERY_H

#include <stddef.h>

#include "supervisor/adminproto.h"

/* The query string (raw, without '?'; NULL: none) into q. */
int connquery_parse(const char *query, struct adminproto_conn_query *q, char *err,
		    size_t errlen);

#endif
