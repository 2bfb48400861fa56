/*
 * connections — `ferryctl connections NAME`: who is connected to a
 * cluster (GET /admin/clusters/NAME/connections), as a table, oldest
 * first: the client's address (after a PROXY header), client_id, client
 * software, SASL mechanism and asserted name, how long it has been
 * connected, and where (listener, worker).
 *
 * --client-id ID and --principal NAME filter (exact match, as the API
 * does); the table fetches page after page (CTL_CONN_PAGE rows each) until
 * the end or --limit rows. --json prints one page of the API unchanged
 * (--limit rows, default the API's, from --offset).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_priv.h"

#define CTL_CONN_PAGE 1000
#define CTL_CONN_COLS 7
#define CTL_CONN_WIDTH 64       /* a cell is cut beyond this, with '~' */

static const char *const ctl_conn_heads[CTL_CONN_COLS] = {
	"ADDRESS", "CLIENT_ID", "SOFTWARE", "SASL", "PRINCIPAL", "AGE", "LISTENER",
};

/* The request path of one page. */
static void
ctl_conn_path(const struct ctl_opts *o, const char *name, long limit, long offset, char *path,
	      size_t len)
{
	char enc[768];
	int n;

	ctl_pct_encode(name, enc, sizeof enc);
	n = snprintf(path, len, "/admin/clusters/%s/connections?limit=%ld&offset=%ld", enc, limit,
	    offset);
	if (o->conn_client_id && n > 0 && (size_t)n < len) {
		ctl_pct_encode(o->conn_client_id, enc, sizeof enc);
		n += snprintf(path + n, len - (size_t)n, "&client_id=%s", enc);
	}
	if (o->conn_principal && n > 0 && (size_t)n < len) {
		ctl_pct_encode(o->conn_principal, enc, sizeof enc);
		snprintf(path + n, len - (size_t)n, "&principal=%s", enc);
	}
}

/* One row's cells (each malloc'd). */
static void
ctl_conn_cells(const json_t *row, char *cells[CTL_CONN_COLS])
{
	const char *v;
	char buf[256], age[32];

	v = json_string_value(json_object_get(row, "address"));
	cells[0] = strdup(v ? v : "?");
	v = json_string_value(json_object_get(row, "clientId"));
	cells[1] = strdup(v ? v : "-");
	if (json_is_string(json_object_get(row, "clientSoftwareName"))) {
		snprintf(buf, sizeof buf, "%s/%s",
		    json_string_value(json_object_get(row, "clientSoftwareName")),
		    json_string_value(json_object_get(row, "clientSoftwareVersion")) ?: "?");
		cells[2] = strdup(buf);
	} else {
		cells[2] = strdup("-");
	}
	v = json_string_value(json_object_get(row, "saslMechanism"));
	cells[3] = strdup(v ? v : "-");
	v = json_string_value(json_object_get(row, "principal"));
	cells[4] = strdup(v ? v : "-");
	ctl_fmt_age(json_integer_value(json_object_get(row, "ageSeconds")), age, sizeof age);
	cells[5] = strdup(age);
	if (json_is_integer(json_object_get(row, "nodeId")))
		snprintf(buf, sizeof buf, "broker %lld",
		    (long long)json_integer_value(json_object_get(row, "nodeId")));
	else
		snprintf(buf, sizeof buf, "bootstrap");
	cells[6] = strdup(buf);
	for (int i = 0; i < CTL_CONN_COLS; i++) {
		if (cells[i] && strlen(cells[i]) > CTL_CONN_WIDTH) {
			cells[i][CTL_CONN_WIDTH - 1] = '~';
			cells[i][CTL_CONN_WIDTH] = '\0';
		}
	}
}

/* The rows collected, as a table with columns as wide as their cells. */
static int
ctl_conn_table(const json_t *rows, long total, long unlisted)
{
	size_t n = json_array_size(rows), w[CTL_CONN_COLS];
	char *(*cells)[CTL_CONN_COLS] = calloc(n ? n : 1, sizeof *cells);

	if (cells == NULL) {
		ctl_err("out of memory");
		return CTL_EXIT_FAILED;
	}
	for (int c = 0; c < CTL_CONN_COLS; c++)
		w[c] = strlen(ctl_conn_heads[c]);
	for (size_t i = 0; i < n; i++) {
		ctl_conn_cells(json_array_get(rows, i), cells[i]);
		for (int c = 0; c < CTL_CONN_COLS; c++)
			if (cells[i][c] && strlen(cells[i][c]) > w[c])
				w[c] = strlen(cells[i][c]);
	}
	for (int c = 0; c < CTL_CONN_COLS; c++)
		ctl_paint(CTL_BOLD, ctl_conn_heads[c], c + 1 < CTL_CONN_COLS ? w[c] + 2 : 0);
	printf("\n");
	for (size_t i = 0; i < n; i++) {
		for (int c = 0; c < CTL_CONN_COLS; c++)
			printf("%-*s", c + 1 < CTL_CONN_COLS ? (int)w[c] + 2 : 0,
			    cells[i][c] ? cells[i][c] : "?");
		printf("\n");
		for (int c = 0; c < CTL_CONN_COLS; c++)
			free(cells[i][c]);
	}
	free(cells);
	printf("%ld connection%s", total, total == 1 ? "" : "s");
	if ((long)n < total)
		printf(", %zu shown", n);
	if (unlisted > 0)
		printf(" (and %ld not listed: the worker's connection table is full)", unlisted);
	printf("\n");
	return CTL_EXIT_OK;
}

/* One page: 0 with *j (the body), or an exit code (reported). */
static int
ctl_conn_page(const struct ctl_opts *o, const char *path, struct ctl_reply *reply, json_t **j)
{
	char err[512];

	*j = NULL;
	if (ctl_request(o, "GET", path, NULL, 0, reply, err, sizeof err) == -1) {
		ctl_err("%s", err);
		return CTL_EXIT_UNREACHABLE;
	}
	if (reply->status == 401) {
		ctl_unauthorized(o, reply, err, sizeof err);
		ctl_err("%s", err);
		return CTL_EXIT_FAILED;
	}
	/* --json prints ferryd's answer as it is, an error too */
	if (reply->status != 200 && !o->json)
		return ctl_http_failure(reply);
	if ((*j = ctl_body_json(reply)) == NULL)
		return CTL_EXIT_UNREACHABLE;
	if (!json_is_object(*j) ||
	    (reply->status == 200 && !json_is_array(json_object_get(*j, "connections")))) {
		/* every page of ferryd's listing has its array, empty or not */
		ctl_err("garbled reply from ferryd (HTTP %d): not a page of connections",
		    reply->status);
		json_decref(*j);
		*j = NULL;
		return CTL_EXIT_UNREACHABLE;
	}
	return 0;
}

int
ctl_connections(const struct ctl_opts *o, const char *name)
{
	char path[2048];
	struct ctl_reply reply;
	json_t *page = NULL, *all = json_array();
	long offset = o->conn_offset, want = o->conn_limit, total = 0, unlisted = 0;
	int rc = CTL_EXIT_OK;

	if (all == NULL) {
		ctl_err("out of memory");
		return CTL_EXIT_FAILED;
	}
	if (o->json) {
		/* one page of the API, unchanged */
		ctl_conn_path(o, name, want ? want : 100, offset, path, sizeof path);
		memset(&reply, 0, sizeof reply);
		rc = ctl_conn_page(o, path, &reply, &page);
		if (rc == 0) {
			fwrite(reply.body, 1, reply.body_len, stdout);
			rc = ctl_exit_for(reply.status);
		}
		free(reply.raw);
		json_decref(page);
		json_decref(all);
		return rc;
	}
	for (;;) {
		long n = CTL_CONN_PAGE;

		if (want && want - (long)json_array_size(all) < n)
			n = want - (long)json_array_size(all);
		ctl_conn_path(o, name, n, offset, path, sizeof path);
		memset(&reply, 0, sizeof reply);
		rc = ctl_conn_page(o, path, &reply, &page);
		free(reply.raw);
		if (rc != 0)
			break;
		total = (long)json_integer_value(json_object_get(page, "total"));
		unlisted = (long)json_integer_value(json_object_get(page, "unlisted"));
		json_array_extend(all, json_object_get(page, "connections"));
		json_t *next = json_object_get(page, "nextOffset");
		bool more = json_is_integer(next) && (!want || (long)json_array_size(all) < want);
		if (more)
			offset = (long)json_integer_value(next);
		json_decref(page);
		page = NULL;
		if (!more)
			break;
	}
	if (rc == 0)
		rc = ctl_conn_table(all, total, unlisted);
	json_decref(all);
	return rc;
}
