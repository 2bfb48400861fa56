/*
 * srcbind — an LD_PRELOAD shim for the integration tests: every IPv4 TCP
 * socket a client program connects is first bound to the address in
 * $FERRY_SRCBIND, so that a client that has no option for it (kcat,
 * librdkafka, kafka-python) comes from 127.0.0.2 instead of 127.0.0.1 and
 * a test can tell its real address from a load balancer's.
 *
 * Built by the tests themselves (tests/integration/srcbind.py) without the
 * sanitizers, which must not be preloaded into programs built without
 * them. Never shipped.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int connect(int fd, const struct sockaddr *sa, socklen_t len);

int
connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	static int (*real)(int, const struct sockaddr *, socklen_t);
	const char *want = getenv("FERRY_SRCBIND");
	int type = 0;
	socklen_t tl = sizeof type;

	if (real == NULL)
		real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
	if (want != NULL && sa != NULL && sa->sa_family == AF_INET &&
	    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_STREAM) {
		struct sockaddr_in b;
		struct sockaddr_in cur;
		socklen_t cl = sizeof cur;

		memset(&b, 0, sizeof b);
		b.sin_family = AF_INET;
		/* (a socket already bound keeps its address) */
		if (inet_pton(AF_INET, want, &b.sin_addr) == 1 &&
		    getsockname(fd, (struct sockaddr *)&cur, &cl) == 0 && cur.sin_port == 0) {
			int saved = errno;

			(void)bind(fd, (struct sockaddr *)&b, sizeof b);
			errno = saved;
		}
	}
	return real(fd, sa, len);
}
