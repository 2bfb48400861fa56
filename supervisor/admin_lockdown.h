/*
 * admin_lockdown — the admin process's sandbox: what ferry-admin may still
 * do once it has its listening sockets, its counters block, its
 * credentials and its event loop (common/sandbox.h does the locking).
 *
 * It then only needs its event loop (epoll and timers; the descriptors
 * libev made at start), the sockets it accepts on the two listeners it was
 * given (reads, writes, shutdown, SO_PEERCRED and the peer's address of a
 * caller, TCP_NODELAY), its control channel to ferryd (sendmsg/recvmsg
 * with SCM_RIGHTS, duplicates of the descriptors of a message that waits
 * for a full channel), the memfds of adminproto (it creates, writes and
 * seals a posted config's; it checks the seals of and reads an answer's),
 * memory, randomness (OpenSSL, libsodium) and writes to stderr. One file:
 * /etc/hosts, which the config parser reads when a posted config names a
 * listening address by a hosts(5) name (common/config.c). Never: a socket
 * of its own, bind, listen, connect, exec, fork, a file opened for writing
 * or any other file read, a signal to another process, executable memory.
 * Landlock denies every TCP bind. A new HTTPS certificate after a reload
 * is built from the PEM bytes ferryd sends; OpenSSL's configuration, and
 * jansson's hash seed (/dev/urandom), are read before the lock.
 */
#ifndef FERRY_SUPERVISOR_ADMIN_LOCKDOWN_H
#define FERRY_SUPERVISOR_ADMIN_LOCKDOWN_H

#include <stdbool.h>
#include <stddef.h>

#include "common/sandbox.h"

/* The admin process's policy (static storage: the SIGSYS handler consults
 * it for the life of the process). */
const struct sandbox_policy *admin_lockdown_policy(void);

/* Lock the admin process down (on = false: sandbox = off, only recorded in
 * rep), recording what is in force in rep (its counters block). 0, or -1
 * with err. */
int admin_lockdown(bool on, struct sandbox_report *rep, char *err, size_t errlen);

#endif
