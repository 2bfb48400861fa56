/*
 * rewrite — replaces upstream broker addresses in Kafka responses with the
 * addresses the client must see (Metadata v0-13 brokers, FindCoordinator
 * v0-6 coordinators, DescribeCluster v0-2 brokers, the KIP-951 NodeEndpoints
 * of Produce v10-13 and Fetch v16-18 responses, the KIP-932 NodeEndpoints of
 * ShareFetch and ShareAcknowledge v1-2 responses) and applies the ApiVersions
 * intersection (key 18 v0-5).
 *
 * A response is validated completely before anything is emitted or any
 * callback runs: every field of every version is walked, lengths are checked
 * against the frame end, and unknown tagged fields anywhere are copied byte
 * for byte.  Bytes left in the frame after a complete, valid message
 * (librdkafka's mock cluster writes the final empty tag section of Metadata
 * v9+ twice) are accepted, as librdkafka and the Java client accept them,
 * and dropped: the output is exactly the parsed message, and
 * kc_broker_map.trailing reports how many bytes went.  The only allocation
 * is the output frame.
 */
#ifndef FERRY_WORKER_KAFKA_REWRITE_H
#define FERRY_WORKER_KAFKA_REWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kc_broker_map {
	/*
	 * Called once for every broker (Metadata, DescribeCluster) /
	 * coordinator (FindCoordinator) / NodeEndpoints (Produce, Fetch,
	 * ShareFetch, ShareAcknowledge) entry
	 * with node_id >= 0, only after the whole frame validated.  Return 0 and
	 * set *host,*host_len,*port to the address the client must see (host
	 * need only stay valid until the next call; host_len <= 0x7fff); return
	 * -1 when the node has no proxy address: the Metadata, DescribeCluster
	 * or NodeEndpoints entry is then DROPPED from its array; a
	 * FindCoordinator entry gets error_code 15 (COORDINATOR_NOT_AVAILABLE),
	 * node_id -1, host "", port -1 (and error_message null where the
	 * version has one).  Entries with node_id < 0 are left as they are in
	 * Metadata and FindCoordinator, and dropped from DescribeCluster and
	 * NodeEndpoints; a DescribeCluster response listing controllers
	 * (EndpointType != 1) loses all its entries; neither calls the map.
	 */
	int (*map)(void *ctx, int32_t node_id, const char *up_host, size_t up_host_len,
		   int32_t up_port, const char **host, size_t *host_len, int32_t *port);
	void *ctx;
	/*
	 * OUTPUT: set by kc_rewrite_response to the number of trailing bytes
	 * dropped (0 normally; 0 too when it fails); the caller counts it.
	 */
	size_t trailing;
};

/*
 * true exactly for the responses that can carry broker addresses (or need
 * the ApiVersions intersection), within the versions this codec parses:
 * Produce 10-13, Fetch 16-18, Metadata 0-13, FindCoordinator 0-6,
 * ApiVersions 0-5, DescribeCluster 0-2, ShareFetch 1-2, ShareAcknowledge
 * 1-2.  The worker must accumulate these
 * whole and pass them to kc_rewrite_response (or, for a Fetch v16+ response,
 * stream it with worker/kafka/fetchwalk.h and rewrite only its tail).  Versions above these never
 * reach the worker's response path: kc_request_allowed refuses them.
 */
bool kc_response_needs_rewrite(int16_t api_key, int16_t api_version);

/*
 * frame = whole response including the size prefix (len bytes); version =
 * the REQUEST's api_version.  On KC_OK *out is a malloc'd new frame (with a
 * recomputed size prefix), *out_len its length.  For ApiVersions it applies
 * kc_apiversions_intersect (map unused but for trailing, may be NULL).
 * Besides the pairs of kc_response_needs_rewrite it accepts Produce 0-9 and
 * Fetch 0-15, which are validated and copied unchanged (they carry no
 * addresses); a Produce or Fetch response without NodeEndpoints is copied
 * byte for byte too.  Trailing bytes after a complete message are accepted
 * and left out of the output, always (the copies above end at the parsed
 * end); when map != NULL, map->trailing gets their number (0 normally).
 * KC_MALFORMED (err set) on anything that does not parse completely within
 * the frame (truncated, a length past the frame end, ...), on a (key,
 * version) with no schema here (except that an ApiVersions response to a v5+
 * request is accepted when it is the v0 UNSUPPORTED_VERSION body), on a size
 * prefix that is not len - 4, on a mapped host longer than 0x7fff, and on
 * allocation failure ("out of memory").
 */
int kc_rewrite_response(int16_t api_key, int16_t api_version, const uint8_t *frame, size_t len,
			struct kc_broker_map *map, uint8_t **out, size_t *out_len,
			char *err, size_t errlen);

/* Called by kc_metadata_walk for every broker entry, whatever its node id. */
typedef void (*kc_broker_fn)(void *ctx, int32_t node_id, const char *host, size_t host_len,
			     int32_t port);

/*
 * Learns upstream addresses without producing output: validates a whole
 * Metadata response frame (version = the request's, 0-13) exactly like
 * kc_rewrite_response (so trailing bytes after a complete message are
 * accepted and ignored) and, only if it is valid, calls fn for each broker.
 * *controller_id (may be NULL) gets controller_id (-1 for v0).
 * KC_OK or KC_MALFORMED (err set).
 */
int kc_metadata_walk(int16_t version, const uint8_t *frame, size_t len, kc_broker_fn fn,
		     void *ctx, int32_t *controller_id, char *err, size_t errlen);

#endif
