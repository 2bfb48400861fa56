/*
 * apiversions — which API versions ferry lets through, and the ApiVersions
 * (key 18) messages that enforce it: intersection of upstream ApiVersions
 * responses with the proxy's caps, the synthetic v0 UNSUPPORTED_VERSION reply
 * for clients ahead of the proxy, and the ApiVersions / Metadata requests the
 * worker builds for its own metadata fetch.
 *
 * Policy: one table in apiversions.c (kc_api_policy()), a row per API that
 * ferry caps or refuses, each with the reason, shown in docs/operations.md:
 *  - Parsed APIs are capped to the versions ferry parses (Produce, Fetch,
 *    Metadata, FindCoordinator, DescribeCluster, ShareFetch,
 *    ShareAcknowledge: rewritten; ApiVersions: intersected; SaslHandshake,
 *    SaslAuthenticate: read).
 *  - Refused APIs are dropped from ApiVersions and kc_request_allowed() is
 *    false for them: inter-broker, broker-to-controller and quorum APIs, the
 *    controller-quorum APIs (ferry fronts brokers and does not expose the
 *    controllers), and APIs whose responses carry addresses ferry does not
 *    rewrite.  UpdateFeatures (57) and UnregisterBroker (64) are
 *    Admin-client APIs served by brokers and carry no addresses: forwarded,
 *    and so are the group APIs whose responses carry no broker address
 *    (checked against the schemas): ConsumerGroupHeartbeat and
 *    ConsumerGroupDescribe (68, 69; KIP-848), ShareGroupHeartbeat and
 *    ShareGroupDescribe (76, 77) and the share-group offset APIs (90-92).
 *    Their member ClientHost is the client's address as the broker saw it
 *    (the proxy's), not a broker's.
 *  - Keys above KC_API_KEY_MAX_KNOWN (newer than the codec's table) are
 *    refused and dropped too: nothing has vetted what their responses carry.
 *  - Every other key is forwarded with the broker's range.
 */
#ifndef FERRY_WORKER_KAFKA_APIVERSIONS_H
#define FERRY_WORKER_KAFKA_APIVERSIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum kc_policy_kind { KC_POLICY_CAP, KC_POLICY_REFUSED };

/* A row of the version policy. */
struct kc_api_policy {
	int16_t key;
	enum kc_policy_kind kind;
	int16_t min, max;	/* KC_POLICY_CAP: the versions let through */
	const char *why;	/* why the API is capped or refused */
	const char *held;	/* KC_POLICY_CAP: why versions above max that Kafka
				 * defines are not let through; NULL: max is the
				 * newest version known */
};

/* The policy rows, in key order; *n gets their count. */
const struct kc_api_policy *kc_api_policy(size_t *n);

/* kc_apiversions_find: the key is not in the response. */
#define KC_APIVERSIONS_ABSENT		(-2)
/* UNSUPPORTED_VERSION */
#define KC_ERR_UNSUPPORTED_VERSION	35

/*
 * false: refused key, negative key or version, or a version outside the cap
 * of a parsed API.  For key 18 above its cap the worker answers with
 * kc_build_apiversions_unsupported() instead of refusing.
 */
bool kc_request_allowed(int16_t api_key, int16_t api_version);
/* true for the refused keys listed above. */
bool kc_api_refused(int16_t api_key);
/* true and [*min,*max] (either may be NULL) when the proxy caps this key. */
bool kc_api_cap(int16_t api_key, int16_t *min, int16_t *max);

/*
 * Intersects an ApiVersions response frame (size prefix included, response
 * header v0) to a request of version request_version: refused keys are
 * dropped, capped keys get [max(min,cap_min), min(max,cap_max)] and are
 * dropped when that is empty, other keys are kept as they are.  Entry tags
 * (v3+), throttle_time_ms and the top-level tagged fields (SupportedFeatures,
 * FinalizedFeatures, ...) are copied byte for byte; the array count is
 * re-encoded (its varint may get narrower) and the size prefix recomputed.
 * A response whose body does not parse at request_version is accepted as a
 * v0 body when it carries error 35 (the broker's answer to a version it does
 * not support, KIP-511); request versions above 5 are accepted only that way.
 * Bytes left after a complete message are accepted (clients ignore them) and
 * dropped from the output; an error response (error_code != 0) is relayed
 * unparsed, byte for byte, trailing bytes and all.
 * The output is never longer than the input: out_cap >= len always suffices
 * (out must not overlap frame).  KC_OK with *out_len, or KC_MALFORMED.
 */
int kc_apiversions_intersect(const uint8_t *frame, size_t len, int16_t request_version,
			     uint8_t *out, size_t out_cap, size_t *out_len,
			     char *err, size_t errlen);

/* ApiVersions v0 request (header v1, empty body); client_id NULL = null.
 * Returns the frame length incl. size prefix, 0 if cap is too small. */
size_t kc_build_apiversions_request(uint8_t *buf, size_t cap, int32_t corr, const char *client_id);

/*
 * Parses an ApiVersions response frame of any version (same parsing, v0
 * fallback and tolerance of trailing bytes as kc_apiversions_intersect) and
 * finds api_key: KC_OK with the broker's raw *min,*max (not capped),
 * KC_APIVERSIONS_ABSENT (-2) when the key is not listed, KC_MALFORMED.
 */
int kc_apiversions_find(const uint8_t *frame, size_t len, int16_t request_version,
			int16_t api_key, int16_t *min, int16_t *max);

/*
 * Metadata request with an empty topic list (brokers only), versions 1-13
 * (v0 would mean all topics), header v1 or v2 as the version requires,
 * allow_auto_topic_creation and the authorized-operations flags false.
 * client_id NULL = null.  Returns the frame length, 0 if cap is too small or
 * the version is out of range.
 */
size_t kc_build_metadata_request(uint8_t *buf, size_t cap, int16_t version, int32_t corr,
				 const char *client_id);

/* The v0-body UNSUPPORTED_VERSION reply to an ApiVersions request ahead of
 * the proxy: header v0 corr, error 35, api_keys [{18, 0, cap max}] (20 bytes). */
size_t kc_build_apiversions_unsupported(uint8_t *buf, size_t cap, int32_t corr);

#endif
