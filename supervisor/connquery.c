/*
 * connquery — the connections listing's query string; see connquery.h.
 */
#include "supervisor/connquery.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/conntab.h"
#include "common/http.h"

static int
parse_count(const char *v, uint32_t min, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long long n;

	if (*v < '0' || *v > '9')
		return -1;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || *end != '\0' || n < min || n > max)
		return -1;
	*out = (uint32_t)n;
	return 0;
}

/* A filter's value: once only. */
static int
take_filter(const char *name, uint32_t *seen, char *dst, size_t dstlen, const char *val, char *err,
	    size_t errlen)
{
	if (*seen) {
		snprintf(err, errlen, "%s: given twice", name);
		return -1;
	}
	*seen = 1;
	snprintf(dst, dstlen, "%s", val);
	return 0;
}

int
connquery_parse(const char *query, struct adminproto_conn_query *q, char *err, size_t errlen)
{
	bool seen_limit = false, seen_offset = false;

	memset(q, 0, sizeof *q);
	q->limit = ADMINPROTO_CONN_LIMIT_DEFAULT;
	if (query == NULL)
		return 0;
	for (const char *p = query; *p != '\0';) {
		const char *amp = strchr(p, '&'), *end = amp ? amp : p + strlen(p);
		const char *eq = memchr(p, '=', (size_t)(end - p));
		size_t klen = (size_t)((eq ? eq : end) - p);
		char key[32], val[ADMINPROTO_CONN_VALUE_MAX];

		if (klen == 0 && end == p) {  /* an empty pair ("a=1&&b=2") */
			p = amp ? amp + 1 : end;
			continue;
		}
		if (http_pct_decode_into(p, klen, true, key, sizeof key) == -1) {
			snprintf(err, errlen, "bad query parameter name");
			return -1;
		}
		/* (the name goes into error messages: printable only) */
		conntab_sanitize(key, sizeof key, key, sizeof key);
		if (!eq || http_pct_decode_into(eq + 1, (size_t)(end - eq - 1), true, val,
		    sizeof val) == -1) {
			snprintf(err, errlen, "parameter '%s': %s", key, eq ? "a bad or too long "
			    "value (percent-encoded, at most 255 bytes, no NUL)" : "no value");
			return -1;
		}
		if (strcmp(key, "limit") == 0) {
			if (seen_limit || parse_count(val, 1, ADMINPROTO_CONN_LIMIT_MAX, &q->limit) == -1) {
				snprintf(err, errlen, "limit: %s", seen_limit ? "given twice" :
				    "a number from 1 to 1000");
				return -1;
			}
			seen_limit = true;
		} else if (strcmp(key, "offset") == 0) {
			if (seen_offset || parse_count(val, 0, ADMINPROTO_CONN_OFFSET_MAX, &q->offset) == -1) {
				snprintf(err, errlen, "offset: %s", seen_offset ? "given twice" :
				    "a number from 0 to 100000000");
				return -1;
			}
			seen_offset = true;
		} else if (strcmp(key, "client_id") == 0) {
			if (take_filter("client_id", &q->by_client_id, q->client_id,
			    sizeof q->client_id, val, err, errlen) == -1)
				return -1;
		} else if (strcmp(key, "principal") == 0) {
			if (take_filter("principal", &q->by_principal, q->principal,
			    sizeof q->principal, val, err, errlen) == -1)
				return -1;
		} else {
			snprintf(err, errlen, "unknown parameter '%s' (limit, offset, client_id, "
			    "principal)", key);
			return -1;
		}
		p = amp ? amp + 1 : end;
	}
	return 0;
}

