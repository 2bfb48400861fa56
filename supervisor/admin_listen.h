/*
 * admin_listen — the admin API's listening sockets: the control socket
 * (Unix) and admin_listen's TCP socket, bound by the supervisor once at
 * start, before the loop, and kept open for its whole life: the admin
 * process that accepts on them (adminproc.h) gets copies, so connections
 * wait in the backlog while it restarts.
 *
 * The control socket is created owner-only in a directory made on demand
 * (0755), then given control_socket_group and control_socket_mode before it
 * listens, so nobody else can connect before it is final. A socket file
 * left behind by a dead ferryd is replaced only when connecting to it is
 * refused; if something answers, we refuse to start rather than steal a
 * live daemon's socket.
 *
 * admin_listen is bound without a DNS lookup (numeric host and service).
 */
#ifndef FERRY_SUPERVISOR_ADMIN_LISTEN_H
#define FERRY_SUPERVISOR_ADMIN_LISTEN_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "common/config.h"

#define ADMIN_LISTEN_BACKLOG    SOMAXCONN

/* Bind and listen on the control socket at path with mode and group ("" =
 * the process's). Returns the non-blocking fd, the socket file's device and
 * inode (to unlink only our own socket later), or -1 with err. */
int admin_listen_control(const char *path, mode_t mode, const char *group, dev_t *dev,
			 ino_t *ino, char *err, size_t errlen)
	__attribute__((nonnull(1, 3, 4, 5)));

/* Bind and listen on admin_listen's address. The non-blocking fd, or -1
 * with err ("admin_listen 127.0.0.1:9300: bind: ..."). */
int admin_listen_tcp(const struct cfg_addr *addr, char *err, size_t errlen);

#endif
