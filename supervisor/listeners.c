/*
 * listeners — TCP listening sockets; see listeners.h.
 */
#include "supervisor/listeners.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/units.h"

/* Called at start and, on the supervisor's loop, when a reload binds a new
 * address. socket/bind/listen do not block. getaddrinfo() does not touch
 * the resolver for a numeric host (0.0.0.0, ::, 127.0.0.1: the usual bind
 * addresses) and the service is numeric; a host *name* is resolved through
 * NSS (/etc/hosts, then DNS), which can wait for the resolver's timeout
 * times its attempts per server (resolv.conf defaults: 5 s x 2). That is
 * bounded but not short; see docs/operations.md. */
int
listeners_bind_tcp(const struct cfg_addr *a, char *err, size_t errlen)
{
	char as[CFG_HOST_MAX + 16], port[8];
	units_fmt_addr(a, as, sizeof as);
	snprintf(port, sizeof port, "%u", a->port);
	/* The config parser only accepts IP literals here (and stores
	 * "localhost" as 127.0.0.1), so AI_NUMERICHOST holds and getaddrinfo
	 * never turns into a DNS lookup on the supervisor's loop. */
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV | AI_NUMERICHOST };
	struct addrinfo *res = NULL;
	int r = getaddrinfo(a->host, port, &hints, &res);
	if (r != 0) {
		snprintf(err, errlen, "bind %s: %s", as, gai_strerror(r));
		return -1;
	}
	int fd = -1;
	snprintf(err, errlen, "bind %s: no usable address", as);
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd == -1) {
			snprintf(err, errlen, "bind %s: socket: %s", as, strerror(errno));
			continue;
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (ai->ai_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, LISTENERS_BACKLOG) == 0)
			break;
		snprintf(err, errlen, "bind %s: %s", as, strerror(errno));
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}
