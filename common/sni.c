/*
 * sni — server names of the SNI gateway; see sni.h.
 */
#include "common/sni.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define SNI_PH_LEN (sizeof SNI_PLACEHOLDER - 1)

const char *
sni_match_str(enum sni_match m)
{
	switch (m) {
	case SNI_BOOTSTRAP:
		return "bootstrap";
	case SNI_BROKER:
		return "broker";
	case SNI_UNKNOWN:
		break;
	}
	return "unknown";
}

static bool
sni_label_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-';
}

int
sni_host_check(const char *name, size_t len, char *err, size_t errlen)
{
	size_t i, start = 0;

	if (len == 0) {
		snprintf(err, errlen, "empty host name");
		return -1;
	}
	if (len > SNI_NAME_MAX) {
		snprintf(err, errlen, "host name longer than %d characters", SNI_NAME_MAX);
		return -1;
	}
	for (i = 0; i <= len; i++) {
		if (i < len && name[i] != '.') {
			if (!sni_label_char(name[i])) {
				snprintf(err, errlen, "invalid character '%c' in host name "
				    "(letters, digits, '-' and '.' only)", name[i]);
				return -1;
			}
			continue;
		}
		/* a label ends at i */
		if (i == start) {
			snprintf(err, errlen, "empty label in host name");
			return -1;
		}
		if (i - start > 63) {
			snprintf(err, errlen, "label longer than 63 characters in host name");
			return -1;
		}
		if (name[start] == '-' || name[i - 1] == '-') {
			snprintf(err, errlen, "a label of a host name cannot start or end "
			    "with '-'");
			return -1;
		}
		start = i + 1;
	}
	return 0;
}

int
sni_format(const char *pattern, int32_t node_id, char *out, size_t outlen)
{
	const char *ph = strstr(pattern, SNI_PLACEHOLDER);
	if (node_id < 0 || ph == NULL)
		return -1;
	int n = snprintf(out, outlen, "%.*s%ld%s", (int)(ph - pattern), pattern, (long)node_id,
	    ph + SNI_PH_LEN);
	if (n < 0 || (size_t)n >= outlen)
		return -1;
	return n;
}

int
sni_pattern_check(const char *pattern, char *err, size_t errlen)
{
	const char *ph = strstr(pattern, SNI_PLACEHOLDER);
	char name[SNI_NAME_MAX + 64], why[160];
	static const int32_t probe[] = { 0, INT32_MAX };

	if (ph == NULL) {
		snprintf(err, errlen, "'%s' has no %s (where the node id goes)", pattern,
		    SNI_PLACEHOLDER);
		return -1;
	}
	if (strstr(ph + 1, SNI_PLACEHOLDER) != NULL) {
		snprintf(err, errlen, "'%s' has %s more than once", pattern, SNI_PLACEHOLDER);
		return -1;
	}
	for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++) {
		int n = sni_format(pattern, probe[i], name, sizeof name);
		if (n < 0 || sni_host_check(name, (size_t)n, why, sizeof why) != 0) {
			snprintf(err, errlen, "'%s' is not a host name for node id %ld: %s",
			    pattern, (long)probe[i], n < 0 ? "too long" : why);
			return -1;
		}
	}
	return 0;
}

int
sni_ext_host_name(const unsigned char *ext, size_t len, const char **name, size_t *name_len)
{
	const char *found = NULL;
	size_t found_len = 0;

	if (ext == NULL || len < 2 || (size_t)((ext[0] << 8) | ext[1]) != len - 2)
		return -1;
	for (size_t off = 2; off < len;) {
		if (len - off < 3)
			return -1;
		unsigned type = ext[off];
		size_t n = (size_t)((ext[off + 1] << 8) | ext[off + 2]);
		off += 3;
		if (n > len - off)
			return -1;
		if (type == 0) {
			if (found != NULL || n == 0)
				return -1;  /* RFC 6066: one name of each type */
			found = (const char *)ext + off;
			found_len = n;
		}
		off += n;
	}
	if (found == NULL)
		return -1;
	*name = found;
	*name_len = found_len;
	return 0;
}

/* Strip one trailing dot. */
static size_t
sni_trim(const char *s, size_t len)
{
	return len > 0 && s[len - 1] == '.' ? len - 1 : len;
}

enum sni_match
sni_classify(const char *bootstrap_host, const char *pattern, const char *name, size_t len,
	     int32_t *node_id)
{
	if (name == NULL || len == 0)
		return SNI_UNKNOWN;
	len = sni_trim(name, len);
	if (len == 0 || memchr(name, '\0', len) != NULL)
		return SNI_UNKNOWN;

	size_t blen = sni_trim(bootstrap_host, strlen(bootstrap_host));
	if (blen == len && strncasecmp(bootstrap_host, name, len) == 0)
		return SNI_BOOTSTRAP;

	const char *ph = strstr(pattern, SNI_PLACEHOLDER);
	if (ph == NULL)
		return SNI_UNKNOWN;
	size_t pre = (size_t)(ph - pattern);
	const char *suffix = ph + SNI_PH_LEN;
	size_t suf = sni_trim(suffix, strlen(suffix));
	if (len < pre + suf + 1 || strncasecmp(name, pattern, pre) != 0 ||
	    strncasecmp(name + len - suf, suffix, suf) != 0)
		return SNI_UNKNOWN;

	const char *d = name + pre;
	size_t nd = len - pre - suf;
	if (nd > 1 && d[0] == '0')
		return SNI_UNKNOWN;  /* never advertised */
	int64_t v = 0;
	for (size_t i = 0; i < nd; i++) {
		if (d[i] < '0' || d[i] > '9')
			return SNI_UNKNOWN;
		v = v * 10 + (d[i] - '0');
		if (v > INT32_MAX)
			return SNI_UNKNOWN;
	}
	*node_id = (int32_t)v;
	return SNI_BROKER;
}
