/*
 * upstream — everything the worker does towards the upstream Kafka cluster
 * besides forwarding bytes: non-blocking name resolution (c-ares on the
 * worker's libev loop), non-blocking connects with a timeout over every
 * resolved address, and the worker's own metadata fetch that learns the
 * upstream address of each broker (needed when a client connects straight
 * to a broker port before any Metadata response has passed through, e.g.
 * right after a worker restart) and serves as the health probe. With
 * upstream_sasl_* the fetch authenticates first (worker/kafka/sasl_client.h);
 * without, an upstream that answers ApiVersions and closes on Metadata
 * requires SASL: reachable, nothing learned.
 */
#ifndef FERRY_WORKER_UPSTREAM_H
#define FERRY_WORKER_UPSTREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "common/transport.h"
#include "worker/context.h"

struct upstream_connect;

/* Called exactly once per started connect (never after cancel): fd >= 0 is a
 * connected non-blocking socket now owned by the callee; fd == -1 means
 * failure with a reason in err. local: the failure is this process's
 * (out of descriptors, memory or local ports) and says nothing about the
 * upstream. */
typedef void (*upstream_connect_cb)(void *arg, int fd, const char *err, bool local);

/* Resolve host (literal addresses skip DNS) and connect to port, trying every
 * address, within timeout_ms. NULL only on allocation failure. */
struct upstream_connect *upstream_connect_start(struct worker *w, const char *host,
						uint16_t port, uint64_t timeout_ms,
						upstream_connect_cb cb, void *arg);
void upstream_connect_cancel(struct upstream_connect *uc);

/* The transport of a connected upstream socket fd: TLS when the cluster has
 * upstream_tls (SNI and, with upstream_tls_verify, the certificate name =
 * host: the broker's configured or advertised host, never the dial-map
 * target), else plain TCP. The TLS session cached for this broker (its
 * name and the address dialled: worker tls_sessions) is offered, so the
 * handshake resumes when the broker still accepts it. 0, or -1 with errno
 * (fd closed). */
int upstream_transport_init(struct worker *w, struct transport *t, int fd, const char *host);

/* The upstream handshake of t ended (ok or failed); nothing for plain TCP.
 * ok: counted (upstream_tls_handshakes, upstream_tls_resumed when it
 * resumed a cached session). Failed: the cached session of that broker is
 * dropped (the next connection makes a full handshake). */
void upstream_tls_handshake_end(struct worker *w, const struct transport *t, bool ok);

/* Why a transport step failed (either side): the TLS reason when there is
 * one (certificate verify failed: hostname mismatch, ...), else
 * strerror(err). */
const char *upstream_transport_error(const struct transport *t, int err);

/* Start a metadata fetch unless one is running; when it ends every
 * connection waiting for broker addresses is resumed (worker_metadata_ready). */
void upstream_fetch_metadata(struct worker *w);
/* End a running fetch without a result (the worker is going away): its
 * connect cancelled, its socket closed, its credentials wiped. */
void upstream_fetch_discard(struct worker *w);

/* Report the upstream condition to the supervisor when it changes: a
 * well-formed Kafka answer makes it reachable, a failed connect or a
 * protocol error unreachable (with the reason), and then re-probes it
 * (below) until it answers again. */
void upstream_report(struct worker *w, bool reachable, const char *error);

/* The upstream was found unreachable: re-probe it (a metadata fetch) after
 * a delay that doubles from WORKER_PROBE_MIN_MS to WORKER_PROBE_MAX_MS, until
 * it is reachable again. No-op while a probe is pending or when draining. */
void upstream_probe_schedule(struct worker *w);
/* Reachable again (or draining): no more probes, next delay back to min. */
void upstream_probe_stop(struct worker *w);

/* Record what a Metadata response says about node_id (learned addresses). */
void upstream_learn_node(struct worker *w, int32_t node_id, const char *host, size_t host_len,
			 int32_t port);

/* Take broker index idx's address from what a sibling worker of the
 * generation published (genshm.h); true when it is known now. */
bool upstream_node_from_siblings(struct worker *w, int idx);
/* gateway = sni: the slot of node_id in w->nodes when its upstream
 * address is known here or to a sibling worker (then copied here), else
 * -1. */
int upstream_node_find(struct worker *w, int32_t node_id);

/* c-ares on libev. */
int upstream_dns_init(struct worker *w, char *err, size_t errlen);
void upstream_dns_free(struct worker *w);

#endif
