/*
 * metrics — the shared-memory counter block of one worker process.
 *
 * The supervisor creates one block per worker process (memfd + mmap, sealed
 * so its size can never change), passes the memfd to the worker with its
 * configuration (IPC_CONFIG), and reads it for /metrics and cluster status
 * without any message round trip. Counters survive a worker crash because
 * the supervisor keeps its mapping, and metrics_retire() folds an ended
 * process's counters into its cluster's totals. Workers only ever add
 * (atomic, relaxed); gauges are add/sub pairs.
 *
 * The layout is versioned by METRICS_MAGIC; both sides are the same binary.
 *
 * Cost: the block holds pages only where something was written (see
 * shmblock.h). The header, the api_seen map, the METRICS_FIELDS
 * counters and the sandbox report are the first page; the per-API slots
 * (96 of them, ~13 KiB) take pages only for the APIs a worker has seen. Readers that go over
 * the API slots ask metrics_api_seen() first, or they would allocate
 * every page of every block they read (a read allocates too).
 */
#ifndef FERRY_COMMON_METRICS_H
#define FERRY_COMMON_METRICS_H

#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/sandbox.h"
#include "common/shmblock.h"

#define METRICS_MAGIC 0x66657272790009ULL /* "ferry" v9: PROXY protocol, max-age, sandbox report, splice, leader hints */

/* X-macro: name, type ("counter"/"gauge"), help. Order is ABI. */
#define METRICS_FIELDS(X) \
	X(connections_accepted, counter, "Client connections accepted") \
	X(connections_active, gauge, "Client connections open") \
	X(connections_rejected, counter, "Client connections closed at once because max_connections was reached") \
	X(connections_idle_closed, counter, "Client connections closed by idle_timeout") \
	X(connections_drained, counter, "Client connections closed cleanly during drain") \
	X(connections_forced, counter, "Client connections force-closed at drain_timeout") \
	X(connections_handed_over, counter, "Client connections handed over to a newer generation") \
	X(connections_adopted, counter, "Client connections adopted from an older generation") \
	X(requests, counter, "Requests forwarded upstream") \
	X(responses, counter, "Responses delivered to clients") \
	X(in_flight, gauge, "Requests forwarded that still owe a response") \
	X(bytes_client_to_upstream, counter, "Bytes forwarded from clients to upstream") \
	X(bytes_upstream_to_client, counter, "Bytes forwarded from upstream to clients") \
	X(responses_rewritten, counter, "Responses whose broker addresses were rewritten") \
	X(malformed_requests, counter, "Connections closed for a malformed or refused request") \
	X(malformed_responses, counter, "Connections closed for a malformed upstream response") \
	X(correlation_mismatch, counter, "Connections closed for an upstream response out of order") \
	X(frame_too_large, counter, "Connections closed for a frame above max_frame_bytes") \
	X(unknown_node, counter, "Broker entries whose node id has no broker port (dropped)") \
	X(upstream_connect_errors, counter, "Upstream connection attempts that failed") \
	X(upstream_closed, counter, "Client connections closed because upstream closed or failed") \
	X(metadata_fetches, counter, "Metadata requests made by the worker itself to learn broker addresses") \
	X(tls_on_plaintext, counter, "Client connections closed because they opened with a TLS ClientHello on a plaintext listener") \
	X(request_timeouts, counter, "Client connections closed because a request frame did not arrive completely within request_timeout") \
	X(inflight_paused, counter, "Times a client request had to wait because max_inflight_per_connection requests were in flight (backpressure: the client is not read meanwhile)") \
	X(accept_paused, counter, "Times accepting paused for 100 ms because the worker ran out of file descriptors or memory") \
	X(responses_trailing_bytes, counter, "Rewritten upstream responses that carried bytes after the complete message (dropped; clients ignore them too)") \
	/* SASL, TLS and SNI at the client edge; upstream TLS failures */ \
	X(sasl_frame_too_large, counter, "Client connections closed for a frame above sasl_max_frame_bytes before SASL authentication") \
	X(sasl_refused, counter, "Client connections closed for a legacy SaslHandshake v0 whose mechanism ferry does not relay (GSSAPI, OAUTHBEARER, unknown)") \
	X(plaintext_on_tls, counter, "Client connections closed because they sent plaintext (a Kafka frame, not a TLS record) to a TLS listener") \
	X(tls_handshake_failures, counter, "Client connections closed because their TLS handshake failed, did not complete within request_timeout, or was attempted again (renegotiation, refused)") \
	X(tls_handshakes, counter, "TLS handshakes completed with clients") \
	X(tls_resumed, counter, "TLS handshakes with clients that resumed a session (ticket)") \
	X(upstream_tls_failures, counter, "TLS handshakes with the upstream that failed (certificate, name, protocol)") \
	X(sni_unknown, counter, "Client TLS handshakes refused on a gateway = sni port because the ClientHello named no server or one that is neither sni_bootstrap_host nor a broker name of sni_broker_pattern (alert unrecognized_name)") \
	/* upstream TLS handshakes and their session resumption */ \
	X(upstream_tls_handshakes, counter, "TLS handshakes completed with the upstream (client connections' and the worker's own metadata fetches)") \
	X(upstream_tls_resumed, counter, "TLS handshakes with the upstream that resumed a cached session (no certificate exchange)") \
	/* behind a load balancer: PROXY protocol headers, connection max-age */ \
	X(proxy_headers_v1, counter, "PROXY protocol v1 headers read from trusted sources") \
	X(proxy_headers_v2, counter, "PROXY protocol v2 headers read from trusted sources") \
	X(proxy_untrusted_source, counter, "Client connections refused because proxy_protocol = required and the peer is not in proxy_protocol_from") \
	X(proxy_header_missing, counter, "Client connections closed because proxy_protocol = required and their first bytes are not a PROXY protocol header") \
	X(proxy_header_malformed, counter, "Client connections closed for a malformed or oversized PROXY protocol header") \
	X(proxy_header_truncated, counter, "Client connections that closed in the middle of their PROXY protocol header") \
	X(proxy_header_timeout, counter, "Client connections closed because their PROXY protocol header did not arrive within request_timeout") \
	X(connections_expired, counter, "Client connections closed at a request boundary because they outlived connection_max_age") \
	/* zero copy: frame bodies spliced socket -> pipe -> socket (worker/splice.h) */ \
	X(bytes_spliced, counter, "Bytes forwarded (either direction, part of ferry_bytes_total) with splice(2), never copied through the worker's memory") \
	X(splice_pipes, gauge, "Pipes the workers hold open for splice(2), two file descriptors each") \
	X(splice_fallbacks, counter, "Frame rests above the splice threshold copied through a buffer because no pipe could be had (limit of open pipes, descriptors, pipe-user-pages-soft)") \
	/* streamed Fetch v16+ responses (worker/kafka/fetchwalk.h) */ \
	X(leader_hints_dropped, counter, "KIP-951 leader hints (NodeEndpoints) of streamed Fetch responses replaced by padding because, rewritten, they did not fit the response's length: the client refreshes its metadata instead")

/* Per Kafka API key (0..METRICS_APIS-2; the last slot takes any other):
 * requests forwarded and the upstream latency of their responses, from the
 * moment the request was parsed for forwarding to the moment its response
 * was matched (the latency the proxy sees upstream), as a histogram with
 * the upper bounds of metrics_latency_bounds_us (plus +Inf = count). */
#define METRICS_APIS 96
#define METRICS_BUCKETS 14
extern const uint32_t metrics_latency_bounds_us[METRICS_BUCKETS];

struct metrics_api {
	_Atomic uint64_t requests;
	_Atomic uint64_t responses;              /* latency observations (count) */
	_Atomic uint64_t latency_sum_us;
	_Atomic uint64_t bucket[METRICS_BUCKETS]; /* observations <= bound (not cumulative) */
};

#define METRICS_API_WORDS ((METRICS_APIS + 63) / 64)

struct metrics {
	uint64_t magic;
	uint64_t generation;
	/* bit s set once api[s] was first counted (metrics_request,
	 * metrics_observe): readers skip the slots of APIs never seen */
	_Atomic uint64_t api_seen[METRICS_API_WORDS];
#define METRICS_DECL(name, type, help) _Atomic uint64_t name;
	METRICS_FIELDS(METRICS_DECL)
#undef METRICS_DECL
	/* Not a counter: the process's sandbox as it reports it (what is in
	 * force, the system call of a violation), read by the supervisor for
	 * /admin/health and the exit reason (common/sandbox.h). In the first
	 * page, before the API slots: every worker writes it once it has
	 * locked down, and /admin/health reads it from every live block. */
	struct sandbox_report sandbox;
	struct metrics_api api[METRICS_APIS];
};

/* The slot of an API key. */
static inline unsigned
metrics_api_slot(int api_key)
{
	return api_key >= 0 && api_key < METRICS_APIS - 1 ? (unsigned)api_key : METRICS_APIS - 1;
}

/* Count one request forwarded for api_key (requests of its slot; marks the
 * slot seen). The block's one writer is its process: relaxed, no lock. */
void metrics_request(struct metrics *m, int api_key);
/* Count one response's upstream latency (µs) for api_key: cheap (a short
 * scan of 14 bounds and three relaxed adds), made per response; marks the
 * slot seen. */
void metrics_observe(struct metrics *m, int api_key, uint64_t latency_us);
/* Was anything counted in slot (metrics_api_slot) of m? Reads only the
 * first page. */
bool metrics_api_seen(const struct metrics *m, unsigned slot);
/* Mark slot (metrics_api_slot) of m seen: for a writer that fills slots
 * other than by metrics_request / metrics_observe. */
void metrics_mark_seen(struct metrics *m, unsigned slot);
/* OR m's map of slots seen into seen[METRICS_API_WORDS] (bit s: slot s). */
void metrics_api_seen_or(const struct metrics *m, uint64_t *seen);

/* Seals every block carries: its size can never change (a mapping of a
 * truncated file faults with SIGBUS), nor can its seals. */
#define METRICS_SEALS SHMBLOCK_SEALS

/* Create an anonymous shared block (a memfd of sizeof(struct metrics),
 * close-on-exec, sealed with METRICS_SEALS); returns the memfd and maps it
 * at *out. -1 on error (errno). */
int metrics_create(uint64_t generation, struct metrics **out);
/* Map a block received over IPC. -1 on error; errno EINVAL when the fd is
 * not a memfd carrying METRICS_SEALS, or has the wrong size or magic. */
int metrics_map(int fd, struct metrics **out);
void metrics_unmap(struct metrics *m);
/* A private block of zeros for totals kept by one process (a cluster's
 * counters of ended workers), with the cost of a shared one: anonymous
 * pages, none held until written (metrics_retire writes only what was
 * counted). NULL when out of memory. Freed with metrics_unmap. */
struct metrics *metrics_totals_new(void);
/* Add src's counters (the METRICS_FIELDS counters and every per-API
 * counter and bucket) into dst: what a process counted stays in its
 * cluster's totals after the process is gone. Gauges are not folded. Only
 * non-zero values are added (a slot src never counted leaves dst's pages
 * untouched) and their slots are marked seen in dst. src is read whole:
 * it is the block of a process that has exited, about to be unmapped. */
void metrics_retire(struct metrics *dst, const struct metrics *src);

#define METRIC_ADD(m, f, v) atomic_fetch_add_explicit(&(m)->f, (uint64_t)(v), memory_order_relaxed)
#define METRIC_SUB(m, f, v) atomic_fetch_sub_explicit(&(m)->f, (uint64_t)(v), memory_order_relaxed)
#define METRIC_GET(m, f) atomic_load_explicit(&(m)->f, memory_order_relaxed)

#endif
