/*
 * listeners — binding the listening sockets the supervisor owns and hands
 * to workers. Sockets are bound with SO_REUSEADDR, a backlog of at least
 * 1024 and O_CLOEXEC, so only the worker they are passed to holds them.
 */
#ifndef FERRY_SUPERVISOR_LISTENERS_H
#define FERRY_SUPERVISOR_LISTENERS_H

#include <stddef.h>

#include "common/config.h"

#define LISTENERS_BACKLOG 4096

/* Bind and listen on a TCP address. The host must be an IP literal (the
 * config parser guarantees it for every listener); it is never looked up,
 * so this cannot block on DNS. Returns the fd, or -1 with a reason
 * ("bind 127.0.0.1:9192: Address already in use") in err. */
int listeners_bind_tcp(const struct cfg_addr *a, char *err, size_t errlen);

#endif
