/*
 * fault — fault points for tests: in a build made with
 * -Dfault_injection=true, FERRY_FAULT=<point>[,<point>...] in a process's
 * environment makes the code at that point fail on purpose (exit, crash,
 * stop, refuse), so the integration tests can check that every failure of
 * an upgrade rolls back (docs/design.md §11 lists the points). In any other
 * build the points compile to nothing: fault_at() is false and
 * fault_value() NULL, whatever the environment says.
 */
#ifndef FERRY_COMMON_FAULT_H
#define FERRY_COMMON_FAULT_H

#include <stdbool.h>

#ifdef FERRY_FAULT_INJECTION
/* Is point (a name, or "name=" for one with a value) set in FERRY_FAULT? */
bool fault_at(const char *point);
/* The value of "name=value" in FERRY_FAULT, or NULL. */
const char *fault_value(const char *name);
#else
static inline bool
fault_at(const char *point)
{
	(void)point;
	return false;
}

static inline const char *
fault_value(const char *name)
{
	(void)name;
	return 0;
}
#endif

#endif
