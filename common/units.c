/*
 * units — parsers and printers for the small value types that appear in the
 * configuration: durations, byte sizes, host:port addresses, port ranges and
 * integer lists. The parsers are strict (no signs, no inner whitespace, every
 * overflow detected) and explain a rejection in a short phrase that quotes
 * the offending value; the config parser prefixes it with "file:line: key:".
 * The printers produce the normalised form the parsers read back unchanged.
 */
#include "common/units.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UNITS_INT_LIST_MAX 65536	/* more ids than ports could ever use */

static void units_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void
units_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static bool
units_isdigit(char c)
{
	return c >= '0' && c <= '9';
}

static bool
units_isspace(char c)
{
	return c == ' ' || c == '\t';
}

/* Bounds [*b, *e) of s with surrounding blanks removed. */
static void
units_trim(const char *s, const char **b, const char **e)
{
	const char *end = s + strlen(s);

	while (units_isspace(*s))
		s++;
	while (end > s && units_isspace(end[-1]))
		end--;
	*b = s;
	*e = end;
}

/*
 * Reads the decimal digits at *p (at least one) into *out and advances *p.
 * Returns 0, -1 when there is no digit, -2 on overflow.
 */
static int
units_digits(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int overflow = 0;

	if (s >= end || !units_isdigit(*s))
		return -1;
	for (; s < end && units_isdigit(*s); s++) {
		unsigned d = (unsigned)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			overflow = 1;
		else
			v = v * 10 + d;
	}
	*p = s;
	*out = v;
	return overflow ? -2 : 0;
}

/* Copies [b, e) into buf (truncating) for use in messages. */
static const char *
units_quote(const char *b, const char *e, char *buf, size_t len)
{
	size_t n = (size_t)(e - b);

	if (n >= len)
		n = len - 1;
	memcpy(buf, b, n);
	buf[n] = '\0';
	return buf;
}

int
units_parse_duration_ms(const char *s, uint64_t *out, char *err, size_t errlen)
{
	static const struct {
		const char *name;
		uint64_t ms;
	} units[] = {
		{ "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
	};
	const char *b, *e, *p;
	char q[208];
	uint64_t v;
	size_t i, ulen;
	int rc;

	units_trim(s, &b, &e);
	units_quote(b, e, q, sizeof q);
	if (b == e) {
		units_err(err, errlen, "empty duration");
		return -1;
	}
	p = b;
	rc = units_digits(&p, e, &v);
	if (rc == -1) {
		units_err(err, errlen,
		    "invalid duration '%s' (use e.g. 500ms, 30s, 10m, 1h)", q);
		return -1;
	}
	if (rc == -2) {
		units_err(err, errlen, "duration '%s' is too large", q);
		return -1;
	}
	if (p == e) {
		if (v == 0) {
			*out = 0;
			return 0;
		}
		units_err(err, errlen,
		    "invalid duration '%s': missing unit (ms, s, m or h)", q);
		return -1;
	}
	ulen = (size_t)(e - p);
	for (i = 0; i < sizeof units / sizeof units[0]; i++) {
		if (strlen(units[i].name) != ulen ||
		    memcmp(units[i].name, p, ulen) != 0)
			continue;
		if (v > UINT64_MAX / units[i].ms) {
			units_err(err, errlen, "duration '%s' is too large", q);
			return -1;
		}
		*out = v * units[i].ms;
		return 0;
	}
	units_err(err, errlen, "invalid duration '%s' (units: ms, s, m, h)", q);
	return -1;
}

int
units_parse_size(const char *s, uint64_t *out, char *err, size_t errlen)
{
	static const struct {
		const char *name;
		uint64_t mult;
	} units[] = {
		{ "B", 1 }, { "KiB", 1ULL << 10 }, { "MiB", 1ULL << 20 },
		{ "GiB", 1ULL << 30 },
	};
	static const char *const decimal[] = {
		"K", "k", "KB", "kB", "kb", "Kb", "M", "MB", "mb", "Mb",
		"G", "GB", "gb", "Gb",
	};
	const char *b, *e, *p;
	char q[208];
	uint64_t v;
	size_t i, ulen;
	int rc;

	units_trim(s, &b, &e);
	units_quote(b, e, q, sizeof q);
	if (b == e) {
		units_err(err, errlen, "empty size");
		return -1;
	}
	p = b;
	rc = units_digits(&p, e, &v);
	if (rc == -1) {
		units_err(err, errlen,
		    "invalid size '%s' (use B, KiB, MiB or GiB)", q);
		return -1;
	}
	if (rc == -2) {
		units_err(err, errlen, "size '%s' is too large", q);
		return -1;
	}
	if (p == e) {
		*out = v;
		return 0;
	}
	ulen = (size_t)(e - p);
	for (i = 0; i < sizeof units / sizeof units[0]; i++) {
		if (strlen(units[i].name) != ulen ||
		    memcmp(units[i].name, p, ulen) != 0)
			continue;
		if (v > UINT64_MAX / units[i].mult) {
			units_err(err, errlen, "size '%s' is too large", q);
			return -1;
		}
		*out = v * units[i].mult;
		return 0;
	}
	for (i = 0; i < sizeof decimal / sizeof decimal[0]; i++) {
		if (strlen(decimal[i]) == ulen &&
		    memcmp(decimal[i], p, ulen) == 0) {
			units_err(err, errlen,
			    "invalid size '%s' (use KiB/MiB/GiB, powers of 1024)",
			    q);
			return -1;
		}
	}
	units_err(err, errlen, "invalid size '%s' (use B, KiB, MiB or GiB)", q);
	return -1;
}

int
units_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out,
    char *err, size_t errlen)
{
	const char *b, *e, *p;
	char q[208];
	uint64_t v;
	int rc;

	units_trim(s, &b, &e);
	units_quote(b, e, q, sizeof q);
	p = b;
	rc = units_digits(&p, e, &v);
	if (rc == -1 || p != e) {
		units_err(err, errlen, "invalid number '%s'", q);
		return -1;
	}
	if (rc == -2 || v < min || v > max) {
		units_err(err, errlen, "%s out of range (%llu-%llu)", q,
		    (unsigned long long)min, (unsigned long long)max);
		return -1;
	}
	*out = v;
	return 0;
}

static bool
units_host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    units_isdigit(c) || c == '.' || c == '-' || c == '_' || c == ':';
}

/* Parses a port number in [b, e); 0 only when allow_zero. */
static int
units_port(const char *b, const char *e, int allow_zero, uint16_t *out)
{
	const char *p = b;
	uint64_t v;

	if (units_digits(&p, e, &v) != 0 || p != e)
		return -1;
	if (v > 65535 || (v == 0 && !allow_zero))
		return -1;
	*out = (uint16_t)v;
	return 0;
}

int
units_parse_addr(const char *s, struct cfg_addr *out, int allow_zero,
    char *err, size_t errlen)
{
	const char *b, *e, *hb, *he, *colon, *p;
	char q[208];
	size_t hlen;

	units_trim(s, &b, &e);
	units_quote(b, e, q, sizeof q);
	if (b == e) {
		units_err(err, errlen, "empty address");
		return -1;
	}
	if (*b == '[') {
		hb = b + 1;
		he = memchr(hb, ']', (size_t)(e - hb));
		if (he == NULL || he + 1 >= e || he[1] != ':') {
			units_err(err, errlen,
			    "invalid address '%s' (expected [ipv6]:port)", q);
			return -1;
		}
		colon = he + 1;
		if (memchr(hb, ':', (size_t)(he - hb)) == NULL) {
			units_err(err, errlen, "invalid address '%s' "
			    "(brackets are only for IPv6 addresses)", q);
			return -1;
		}
	} else {
		hb = b;
		colon = NULL;
		for (p = b; p < e; p++)
			if (*p == ':')
				colon = p;
		if (colon == NULL) {
			units_err(err, errlen,
			    "invalid address '%s' (expected host:port)", q);
			return -1;
		}
		he = colon;
		if (memchr(hb, ':', (size_t)(he - hb)) != NULL) {
			units_err(err, errlen, "invalid address '%s' "
			    "(write IPv6 addresses as [addr]:port)", q);
			return -1;
		}
	}
	hlen = (size_t)(he - hb);
	if (hlen == 0) {
		units_err(err, errlen, "invalid address '%s': empty host", q);
		return -1;
	}
	if (hlen >= CFG_HOST_MAX) {
		units_err(err, errlen, "invalid address: host longer than %d "
		    "characters", CFG_HOST_MAX - 1);
		return -1;
	}
	for (p = hb; p < he; p++) {
		if (!units_host_char(*p)) {
			units_err(err, errlen, "invalid address '%s': bad "
			    "character in host", q);
			return -1;
		}
	}
	if (units_port(colon + 1, e, allow_zero, &out->port) != 0) {
		units_err(err, errlen, "invalid address '%s': port must be "
		    "%d-65535", q, allow_zero ? 0 : 1);
		return -1;
	}
	memcpy(out->host, hb, hlen);
	out->host[hlen] = '\0';
	return 0;
}

int
units_parse_port_range(const char *s, uint16_t *first, uint16_t *last,
    char *err, size_t errlen)
{
	const char *b, *e, *dash;
	char q[208];
	uint16_t lo, hi;

	units_trim(s, &b, &e);
	units_quote(b, e, q, sizeof q);
	if (b == e) {
		units_err(err, errlen, "empty port range");
		return -1;
	}
	dash = memchr(b, '-', (size_t)(e - b));
	if (dash == NULL)
		dash = e;
	if (units_port(b, dash, 0, &lo) != 0 ||
	    (dash != e && units_port(dash + 1, e, 0, &hi) != 0)) {
		units_err(err, errlen, "invalid port range '%s' (expected "
		    "first-last, ports 1-65535)", q);
		return -1;
	}
	if (dash == e)
		hi = lo;
	if (lo > hi) {
		units_err(err, errlen, "invalid port range '%s' (first port "
		    "greater than last)", q);
		return -1;
	}
	*first = lo;
	*last = hi;
	return 0;
}

static int
units_cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return (x > y) - (x < y);
}

/* Appends v to the growing list; -1 when the list would grow too long, -2
 * when out of memory. */
static int
units_list_push(int32_t **v, size_t *n, size_t *cap, int32_t x)
{
	int32_t *nv;
	size_t ncap;

	if (*n >= UNITS_INT_LIST_MAX)
		return -1;
	if (*n == *cap) {
		ncap = *cap ? *cap * 2 : 8;
		nv = realloc(*v, ncap * sizeof **v);
		if (nv == NULL)
			return -2;
		*v = nv;
		*cap = ncap;
	}
	(*v)[(*n)++] = x;
	return 0;
}

/* Reads one non-negative int32 from [*p, e) (blanks around it allowed). */
static int
units_list_int(const char **p, const char *e, int32_t *out)
{
	uint64_t v;

	while (*p < e && units_isspace(**p))
		(*p)++;
	if (units_digits(p, e, &v) != 0 || v > INT32_MAX)
		return -1;
	while (*p < e && units_isspace(**p))
		(*p)++;
	*out = (int32_t)v;
	return 0;
}

int
units_parse_int_list(const char *s, int32_t **out, size_t *n,
    char *err, size_t errlen)
{
	const char *b, *e, *p;
	char q[208];
	int32_t *v = NULL, *sorted, lo, hi, x;
	size_t nv = 0, cap = 0, i;

	units_trim(s, &b, &e);
	units_quote(b, e, q, sizeof q);
	if (b == e) {
		units_err(err, errlen, "empty list");
		return -1;
	}
	p = b;
	for (;;) {
		if (units_list_int(&p, e, &lo) != 0)
			goto bad;
		hi = lo;
		if (p < e && *p == '-') {
			p++;
			if (units_list_int(&p, e, &hi) != 0)
				goto bad;
			if (lo > hi) {
				units_err(err, errlen, "invalid range in '%s' "
				    "(first greater than last)", q);
				goto fail;
			}
		}
		for (x = lo;; x++) {
			int pr = units_list_push(&v, &nv, &cap, x);

			if (pr == -2)
				goto oom;
			if (pr != 0) {
				units_err(err, errlen, "list '%s' has more "
				    "than %d entries", q, UNITS_INT_LIST_MAX);
				goto fail;
			}
			if (x == hi)
				break;
		}
		if (p == e)
			break;
		if (*p != ',')
			goto bad;
		p++;
	}
	sorted = malloc(nv * sizeof *sorted);
	if (sorted == NULL)
		goto oom;
	memcpy(sorted, v, nv * sizeof *sorted);
	qsort(sorted, nv, sizeof *sorted, units_cmp_i32);
	for (i = 1; i < nv; i++) {
		if (sorted[i] == sorted[i - 1]) {
			units_err(err, errlen, "duplicate id %ld in '%s'",
			    (long)sorted[i], q);
			free(sorted);
			goto fail;
		}
	}
	free(sorted);
	*out = v;
	*n = nv;
	return 0;
bad:
	units_err(err, errlen, "invalid list '%s' (expected non-negative "
	    "integers like 1-3 or 1,2,5)", q);
	goto fail;
oom:
	units_err(err, errlen, CFG_ERR_OOM);
fail:
	free(v);
	return -1;
}

void
units_fmt_duration(uint64_t ms, char *buf, size_t len)
{
	if (ms == 0)
		snprintf(buf, len, "0");
	else if (ms % 3600000 == 0)
		snprintf(buf, len, "%lluh", (unsigned long long)(ms / 3600000));
	else if (ms % 60000 == 0)
		snprintf(buf, len, "%llum", (unsigned long long)(ms / 60000));
	else if (ms % 1000 == 0)
		snprintf(buf, len, "%llus", (unsigned long long)(ms / 1000));
	else
		snprintf(buf, len, "%llums", (unsigned long long)ms);
}

void
units_fmt_size(uint64_t bytes, char *buf, size_t len)
{
	static const struct {
		const char *name;
		unsigned shift;
	} units[] = { { "GiB", 30 }, { "MiB", 20 }, { "KiB", 10 } };
	size_t i;

	for (i = 0; bytes != 0 && i < sizeof units / sizeof units[0]; i++) {
		uint64_t m = 1ULL << units[i].shift;

		if (bytes % m == 0) {
			snprintf(buf, len, "%llu%s",
			    (unsigned long long)(bytes >> units[i].shift),
			    units[i].name);
			return;
		}
	}
	snprintf(buf, len, "%lluB", (unsigned long long)bytes);
}

void
units_fmt_addr(const struct cfg_addr *a, char *buf, size_t len)
{
	if (strchr(a->host, ':') != NULL)
		snprintf(buf, len, "[%s]:%u", a->host, (unsigned)a->port);
	else
		snprintf(buf, len, "%s:%u", a->host, (unsigned)a->port);
}
