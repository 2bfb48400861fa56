/*
 * fault — fault points of test builds; see fault.h. Compiled empty unless
 * FERRY_FAULT_INJECTION is defined.
 */
#include "common/fault.h"

#ifdef FERRY_FAULT_INJECTION
#include <stdlib.h>
#include <string.h>

/* The entry of FERRY_FAULT that starts with name (exactly name, or name
 * followed by '='); its start, or NULL. */
static const char *
fault_find(const char *name)
{
	const char *env = getenv("FERRY_FAULT");
	size_t n = strlen(name);
	for (const char *p = env; p && *p;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len >= n && strncmp(p, name, n) == 0 && (len == n || p[n] == '='))
			return p;
		p = end ? end + 1 : NULL;
	}
	return NULL;
}

bool
fault_at(const char *point)
{
	return fault_find(point) != NULL;
}

const char *
fault_value(const char *name)
{
	const char *p = fault_find(name);
	if (!p || p[strlen(name)] != '=')
		return NULL;
	return p + strlen(name) + 1;
}
#else
/* ISO C wants a translation unit to declare something. */
typedef int fault_unused;
#endif
