/*
 * connlist — who is connected to a cluster: GET
 * /admin/clusters/NAME/connections and the client software counts of
 * /metrics, read from the connection tables the cluster's live workers
 * publish (common/conntab.h). No worker is asked anything: the tables are
 * shared memory, so a busy or hung worker costs the listing nothing, and
 * the answer is a snapshot (a connection that closes meanwhile may be
 * missing from a page).
 *
 * The listing (docs/design.md §7):
 *   ?limit=N       rows per page, 1..CONNLIST_LIMIT_MAX [CONNLIST_LIMIT_DEFAULT]
 *   ?offset=N      rows skipped, oldest connection first [0]
 *   ?client_id=S   only connections whose client_id is S (exactly)
 *   ?principal=S   only connections whose asserted SASL identity is S
 * Values are percent-decoded ('+' is a space); an unknown or repeated
 * parameter, a bad number or a value longer than a client id can be is a
 * 400. Rows are sorted by the connection's start (its first accept: a
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
 * Return conventions: the query parser 0 / -1 with a message; renderers
 * return a new JSON reference or NULL when out of memory.
 */
#ifndef FERRY_SUPERVISOR_CONNLIST_H
#define FERRY_SUPERVISOR_CONNLIST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/conntab.h"
#include "supervisor/admin_http.h"

#define CONNLIST_LIMIT_DEFAULT 100
#define CONNLIST_LIMIT_MAX 1000
#define CONNLIST_OFFSET_MAX 100000000
#define CONNLIST_SOFTWARE_SERIES 32

struct sup;
struct sup_cluster;

struct connlist_query {
	size_t limit, offset;
	bool by_client_id, by_principal;
	char client_id[CONNTAB_CLIENT_ID_MAX];
	char principal[CONNTAB_PRINCIPAL_MAX];
};

/* The query string (raw, without '?'; NULL: none) into q. */
int connlist_query_parse(const char *query, struct connlist_query *q, char *err,
			 size_t errlen);

/* Does entry e pass q's filters? */
bool connlist_match(const struct connlist_query *q, const struct conntab_entry *e);

/* One row as the API shows it. */
json_t *connlist_row_json(const struct conntab_entry *e, pid_t pid, unsigned worker,
			  uint64_t generation, uint64_t now_wall_ms);

/* The page q asks for of cluster c's connections. */
json_t *connlist_json(const struct sup_cluster *c, const struct connlist_query *q,
		      uint64_t now_wall_ms);

/* GET /admin/clusters/NAME/connections (admin_api.c's route table). */
enum admin_handler_result connlist_handler(struct admin_request *req,
					   struct admin_response *resp);

/* ferry_client_connections for every cluster of s, Prometheus text. */
void connlist_metrics(FILE *f, struct sup *s);

#endif
