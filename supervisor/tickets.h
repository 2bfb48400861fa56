/*
 * tickets — the TLS session-ticket keys the supervisor owns, one set per
 * TLS cluster (struct tlskeys, common/tlskeys.h).
 *
 * Why per cluster and not one set per ferryd: a ticket issued on one
 * cluster's port can then never be resumed on another cluster's (each
 * cluster is its own TLS server with its own certificate), and a worker
 * holds only its own cluster's keys.
 *
 * Lifetime: created (libsodium randombytes_buf, in sodium_malloc'd guarded
 * memory) the first time a worker of a TLS cluster is started; kept across
 * worker restarts and reloads, so a session resumed after either resumes;
 * rotated every tls_ticket_rotation ([ferry], default 1h): a new key[0]
 * encrypts new tickets, the previous ones keep decrypting up to TLSKEYS_MAX
 * keys (so a ticket stays usable for at least (TLSKEYS_MAX - 1) periods —
 * two hours by default); wiped and
 * freed with the cluster (sodium_free), or at the next rotation once a
 * reload turned the cluster's TLS off.
 *
 * Every worker of a TLS cluster gets the keys at start (IPC_TICKET_KEYS
 * right after CONFIG, sup_io.c) and every live worker of the cluster
 * again at each rotation (sup_tickets_rotate, an engine entry point in
 * engine_cluster.c). The rotation timer is the I/O layer's (an ev_timer in
 * sup_io.c). This module only keeps the keys in the model: it calls
 * nothing of the engine.
 */
#ifndef FERRY_SUPERVISOR_TICKETS_H
#define FERRY_SUPERVISOR_TICKETS_H

#include <stdint.h>

#include "common/tlskeys.h"
#include "supervisor/supervisor.h"

/* The cluster's keys, created on first use. NULL when out of memory (the
 * worker then runs without tickets: full handshakes only). */
const struct tlskeys *tickets_of(struct sup_cluster *c);

/* Rotate in place: the keys move one down (the oldest beyond TLSKEYS_MAX
 * is wiped), a fresh random key becomes key[0], serial rises. Pure but for
 * the random bytes. */
void tickets_rotate(struct tlskeys *k);

/* Take over keys created by another process (an upgrade's predecessor,
 * docs/design.md §11) as the cluster's, into guarded memory: tickets they
 * issued keep decrypting. 0, or -1 when out of memory or k is not a valid
 * set (then the cluster creates new keys on first use). */
int tickets_import(struct sup_cluster *c, const struct tlskeys *k);

/* Wipe and free the cluster's keys. */
void tickets_free(struct sup_cluster *c);

#endif
