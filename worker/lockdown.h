/*
 * lockdown — the worker's sandbox: what a worker may still do once it has
 * its configuration, TLS material, shared blocks and listening sockets
 * (common/sandbox.h does the locking).
 *
 * A worker then only needs its event loop (epoll, timers, signals through
 * the descriptors libev made at start), TCP and UDP sockets it creates to
 * connect (upstream brokers, the DNS servers c-ares asks), the sockets it
 * accepts or adopts (recvmsg with SCM_RIGHTS over its control channel),
 * memory, randomness (OpenSSL, libsodium) and writes to stderr. Files:
 * /etc/hosts (c-ares reads it at every lookup; /etc/resolv.conf and the
 * others are read once, before the lock) and, for a cluster that verifies
 * its upstream against the system trust store, the trust store's hashed
 * directory (OpenSSL looks an unknown issuer up there during a handshake).
 * Never: exec, fork, bind, listen, a socket other than IPv4/IPv6, a file
 * opened for writing, executable memory. What a library would read lazily
 * later (OpenSSL's configuration) is read before the lock.
 */
#ifndef FERRY_WORKER_LOCKDOWN_H
#define FERRY_WORKER_LOCKDOWN_H

#include <stdbool.h>
#include <stddef.h>

#include "common/config.h"
#include "common/sandbox.h"

struct worker;

/* The worker's policy for cluster cl (static storage: the SIGSYS handler
 * consults it for the life of the process). */
const struct sandbox_policy *lockdown_policy(const struct cfg_cluster *cl);

/* Whether cluster cl uses OpenSSL at all once running: TLS towards clients
 * or the upstream, or a SCRAM exchange of ferry's own metadata fetch. A
 * cluster that does not never initialises it: OpenSSL's start (its
 * configuration, the default provider's tables) was 2.7 of an idle plaintext
 * worker's 7.3 MiB RSS. */
bool lockdown_needs_openssl(const struct cfg_cluster *cl);

/* Read now what the worker would otherwise read lazily once locked down:
 * OpenSSL's configuration file, which OpenSSL loads at its first use of an
 * algorithm (a plaintext cluster's first SCRAM exchange of its own metadata
 * fetch, long after the lock). Nothing for a cluster that does not use
 * OpenSSL (lockdown_needs_openssl). 0, or -1 with err. */
int lockdown_preload(const struct cfg_cluster *cl, char *err, size_t errlen);

/* Lock the worker down (on = false: sandbox = off, only recorded), and
 * record what is in force in its shared block. 0, or -1 with err. */
int lockdown_worker(struct worker *w, bool on, char *err, size_t errlen);

#endif
