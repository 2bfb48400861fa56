/*
 * sni_gate — the TLS side of an SNI gateway (gateway = sni): a ClientHello
 * callback (SSL_CTX_set_client_hello_cb) on the worker's server SSL_CTX that
 * reads the server name of the ClientHello itself (its server_name
 * extension, common/sni.h's sni_ext_host_name) as soon as it arrives,
 * before any upstream connection exists,
 * and tells the connection which upstream to dial: the bootstrap servers
 * (sni_bootstrap_host) or one broker (sni_broker_pattern with its node id),
 * using the pure mapping of common/sni.h.
 *
 * A ClientHello with no server name, or a name that is neither, fails the
 * handshake with the fatal alert unrecognized_name (RFC 6066, 112), is
 * counted (metrics sni_unknown, ferry_connections_rejected_total{reason=
 * "sni_unknown"}) and logged at a bounded rate. The client never reaches an
 * upstream.
 *
 * The context carries the gate (struct sni_gate, owned by the caller, must
 * outlive the context); each connection attaches its own struct sni_pick to
 * its SSL before the handshake, and finds the choice there when the
 * handshake completes. A connection without a pick is still checked (refused
 * when unknown) but told nothing.
 *
 * Return convention: 0, or -1 (OpenSSL could not allocate).
 */
#ifndef FERRY_WORKER_SNI_GATE_H
#define FERRY_WORKER_SNI_GATE_H

#include <stdbool.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "common/log.h"
#include "common/metrics.h"
#include "common/sni.h"

struct sni_gate {
	const char *bootstrap_host;       /* cl->sni_bootstrap_host */
	const char *pattern;              /* cl->sni_broker_pattern */
	struct metrics *m;                /* sni_unknown is counted here; may be NULL */
	struct log_ratelimit *rl;         /* refused names logged through it; may be NULL */
};

/* What the ClientHello asked for; written during the handshake. */
struct sni_pick {
	bool decided;                     /* the callback ran and accepted the name */
	bool refused;                     /* the callback refused the name (counted) */
	enum sni_match match;             /* SNI_BOOTSTRAP or SNI_BROKER when decided */
	int32_t node_id;                  /* SNI_BROKER */
};

/* Install the ClientHello callback on a server context (it replaces any
 * other ClientHello callback of ctx). */
int sni_gate_install(SSL_CTX *ctx, struct sni_gate *g);

/* Let the callback write this connection's choice into *p (zeroed here). */
int sni_gate_attach(SSL *ssl, struct sni_pick *p);

#endif
