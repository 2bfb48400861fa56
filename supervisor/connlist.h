/*
 * connlist — who is connected to a cluster: GET
 * /admin/clusters/NAME/connections and the client software counts of
 * /metrics, read from the connection tables the cluster's live workers
 * publish (common/conntab.h). No worker is asked anything: the tables are
 * shared memory, so a busy or hung worker costs the listing nothing, and
 * the answer is a snapshot (a connection that closes meanwhile may be
 * missing from a page).
 *
 * The listing (docs/design.md §7): the admin process reads the query
 * string (connquery.h) into the typed query ferryd receives (limit,
 * offset, client_id and principal filters, checked by
 * adminproto_request_check). Rows are sorted by the connection's start (its first accept: a
 * handed-over connection keeps it), then by worker and connection id, so
 * pages are stable while nothing connects or closes.
 *
 * Nothing a client sent reaches the output unchecked: every string of a
 * row is re-terminated and reduced to printable ASCII (conntab_read), and
 * what a row can hold is the client's own claims (client_id, software,
 * mechanism, asserted name): never a password or token, which no worker
 * keeps (worker/kafka/clientinfo.h).
 *
 * Software counts: ferry_client_connections{cluster,software,version}, the
 * open connections per (ClientSoftwareName, ClientSoftwareVersion) summed
 * over the cluster's live workers, the CONNLIST_SOFTWARE_SERIES largest
 * pairs by name, the rest as software="other"; connections that sent no
 * software (ApiVersions below v3, or none yet) as "unknown", ones whose
 * software breaks Kafka's rule as "invalid". A client id or principal is
 * never a label.
 *
 * Return conventions: renderers return a new JSON reference or NULL when
 * out of memory.
 */
#ifndef FERRY_SUPERVISOR_CONNLIST_H
#define FERRY_SUPERVISOR_CONNLIST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/conntab.h"
#include "supervisor/adminproto.h"

#define CONNLIST_SOFTWARE_SERIES 32

struct sup;
struct sup_cluster;

/* Does entry e pass q's filters? */
bool connlist_match(const struct adminproto_conn_query *q, const struct conntab_entry *e);

/* One row as the API shows it. */
json_t *connlist_row_json(const struct conntab_entry *e, pid_t pid, unsigned worker,
			  uint64_t generation, uint64_t now_wall_ms);

/* The page q asks for of cluster c's connections. */
json_t *connlist_json(const struct sup_cluster *c, const struct adminproto_conn_query *q,
		      uint64_t now_wall_ms);

/* ferry_client_connections for every cluster of s, Prometheus text. */
void connlist_metrics(FILE *f, struct sup *s);

#endif
