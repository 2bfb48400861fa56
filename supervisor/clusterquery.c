/*
 * clusterquery — the cluster list's query string; see clusterquery.h.
 */
#include "supervisor/clusterquery.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/http.h"

/* state=S[,S...] into a bit set; -1 with err for an unknown state. */
static int
clusterquery_states(const char *v, uint32_t *out, char *err, size_t errlen)
{
	const char *p = v;

	*out = 0;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		int st = -1;

		for (unsigned k = 0; k <= ADMINPROTO_LIST_UNRESPONSIVE; k++) {
			const char *name = adminproto_list_state_str(k);

			if (strlen(name) == n && strncmp(p, name, n) == 0)
				st = (int)k;
		}
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
clusterquery_number(const char *key, const char *v, uint32_t min, uint32_t max, uint32_t *out,
		    char *err, size_t errlen)
{
	char *end;
	unsigned long long n;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno != 0 || n < min || n > max) {
		snprintf(err, errlen, "%s: '%.32s' is not a number from %u to %u", key, v, min, max);
		return -1;
	}
	*out = (uint32_t)n;
	return 0;
}

static int
clusterquery_param(struct adminproto_list_query *q, const char *key, const char *v,
		   unsigned *seen, char *err, size_t errlen)
{
	static const char *const keys[] = { "name", "state", "sort", "limit", "offset" };
	unsigned k;

	for (k = 0; k < sizeof keys / sizeof keys[0]; k++)
		if (strcmp(key, keys[k]) == 0)
			break;
	if (k == sizeof keys / sizeof keys[0]) {
		char shown[65];

		/* (the name goes into an error message: printable only) */
		adminproto_sanitize(key, shown, sizeof shown);
		snprintf(err, errlen, "unknown query parameter '%s' (name, state, sort, limit, "
		    "offset)", shown);
		return -1;
	}
	if (*seen & (1u << k)) {
		snprintf(err, errlen, "query parameter '%s' given twice", key);
		return -1;
	}
	*seen |= 1u << k;
	switch (k) {
	case 0: {
		size_t n = strlen(v);

		if (n == 0 || strstr(v, ",,") || v[0] == ',' || v[n - 1] == ',') {
			snprintf(err, errlen, "name: an empty pattern (want GLOB[,GLOB...])");
			return -1;
		}
		if (n >= sizeof q->names) {
			snprintf(err, errlen, "name: %zu bytes of patterns, at most %zu", n,
			    sizeof q->names - 1);
			return -1;
		}
		memcpy(q->names, v, n);
		return 0;
	}
	case 1:
		return clusterquery_states(v, &q->states, err, errlen);
	case 2:
		for (unsigned i = 0; i < ADMINPROTO_SORT_COUNT; i++)
			if (strcmp(v, adminproto_list_sort_str((enum adminproto_list_sort)i)) == 0) {
				q->sort = i;
				return 0;
			}
		snprintf(err, errlen, "sort: unknown key '%.32s' (file, name, connections, state or "
		    "since)", v);
		return -1;
	case 3:
		return clusterquery_number("limit", v, 1, ADMINPROTO_LIST_LIMIT_MAX, &q->limit, err,
		    errlen);
	default:
		return clusterquery_number("offset", v, 0, ADMINPROTO_LIST_OFFSET_MAX, &q->offset,
		    err, errlen);
	}
}

int
clusterquery_parse(const char *query, struct adminproto_list_query *q, char *err, size_t errlen)
{
	size_t pos = 0;
	unsigned seen = 0;
	char *key, *v;
	int r;

	memset(q, 0, sizeof *q);
	while ((r = http_query_next(query, &pos, &key, &v)) == 1) {
		int rc = clusterquery_param(q, key, v, &seen, err, errlen);

		free(key);
		free(v);
		if (rc == -1) {
			memset(q, 0, sizeof *q);
			return -1;
		}
		q->given = 1;
	}
	if (r == -1) {
		snprintf(err, errlen, "malformed query string (a bad %%-escape or an empty name)");
		memset(q, 0, sizeof *q);
		return -1;
	}
	return 0;
}
