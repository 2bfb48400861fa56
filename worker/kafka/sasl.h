/*
 * sasl — what ferry must know of a client's SASL exchange to pass it
 * through: where the legacy raw token framing starts and ends, when the
 * client has authenticated (the end of the pre-authentication frame limit),
 * and whether a connection may move to another worker. Pure: a small state
 * struct and functions over byte buffers; no sockets, no logging.
 *
 * ferry authenticates nobody: SaslHandshake (key 17, v0-1) and
 * SaslAuthenticate (key 36, v0-2) are forwarded like any request and their
 * responses matched through the in-flight FIFO. Three things need a look
 * inside them:
 *
 * 1. Legacy raw framing. After a SaslHandshake v0 answered with error 0 the
 *    client and broker exchange bare tokens, [int32 length][token], with no
 *    API key and no correlation id; only after the exchange do Kafka
 *    frames resume. ferry therefore stops parsing client bytes after a v0
 *    handshake until its response (SASL_V0_WAIT), then relays tokens by
 *    their length prefix, alternating client / server: PLAIN is one client
 *    token and one server token (the broker answers an empty token on
 *    success and closes on failure); SCRAM-SHA-256/512 are two of each
 *    (client-first, server-first, client-final, server-final). Any other
 *    mechanism (GSSAPI, OAUTHBEARER, unknown) has a number of rounds ferry
 *    cannot know without parsing its tokens: its v0 handshake is refused
 *    (SASL_REFUSED) and the connection closed, before anything is forwarded.
 *
 * 2. Authentication done. The pre-authentication frame limit
 *    (sasl_max_frame_bytes) holds until one of:
 *    - a SaslAuthenticate response with error_code 0 that ends the
 *      exchange: the 1st for PLAIN (and OAUTHBEARER with an empty token),
 *      the 2nd for SCRAM; for other mechanisms (GSSAPI, unknown) the
 *      number of rounds is not known, so the client says it: after a
 *      successful SaslAuthenticate, a request that is not SASL means its
 *      SASL client is complete (brokers close a connection that sends one
 *      too early);
 *    - the last server token of a raw exchange (PLAIN: 1st, SCRAM: 2nd);
 *    - the client's first request other than ApiVersions / SaslHandshake /
 *      SaslAuthenticate, with no SaslHandshake before it: this connection
 *      does not use SASL (its broker listener is plaintext, or closes such
 *      a connection itself, as Kafka's SASL listeners do before reading
 *      the frame). That request is not limited: a producer's first request
 *      on a new broker connection, right after ApiVersions, may be a
 *      Produce of up to max.request.size (1 MiB by default).
 *    Until then every client frame (Kafka frame or raw token) above the
 *    limit closes the connection. Re-authentication (KIP-368: SaslHandshake
 *    + SaslAuthenticate again on an authenticated connection) is forwarded
 *    and does not bring the limit back.
 *
 * 3. Moving. A connection may move to another worker at a request boundary
 *    unless a raw exchange is in progress (sasl_movable); its state travels
 *    in ipc_conn_record.sasl (sasl_encode / sasl_decode), so the new worker
 *    knows the client authenticated.
 *
 * Return conventions: the sasl_on_* functions return enum sasl_status, the
 * parsers' convention of codec.h (and worker/frame.h): SASL_OK = 0,
 * SASL_NEED_MORE = 1 when the bytes present do not cover what must be read
 * (the caller waits; nothing changed), negative for a failure:
 * SASL_MALFORMED = -1 and the SASL-specific SASL_REFUSED / SASL_TOO_LARGE,
 * which put a reason in err (which may be NULL) and change nothing.
 */
#ifndef FERRY_WORKER_KAFKA_SASL_H
#define FERRY_WORKER_KAFKA_SASL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "worker/kafka/codec.h"

enum sasl_status {
	SASL_OK = KC_OK,
	SASL_NEED_MORE = KC_NEED_MORE,
	SASL_MALFORMED = KC_MALFORMED,
	SASL_REFUSED = -2,       /* a v0 handshake for a mechanism not relayed */
	SASL_TOO_LARGE = -3,     /* a raw token above the limit given */
};
const char *sasl_status_str(enum sasl_status s);

enum sasl_mech {
	SASL_MECH_NONE = 0,      /* no SaslHandshake seen */
	SASL_MECH_PLAIN,
	SASL_MECH_SCRAM_SHA_256,
	SASL_MECH_SCRAM_SHA_512,
	SASL_MECH_OAUTHBEARER,
	SASL_MECH_GSSAPI,
	SASL_MECH_OTHER,
	SASL_MECH_COUNT,
};
/* "none", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER",
 * "GSSAPI", "other". */
const char *sasl_mech_str(enum sasl_mech m);
/* The mechanism a SaslHandshake names (case-sensitive, as Kafka is). */
enum sasl_mech sasl_mech_parse(const uint8_t *name, size_t len);

enum sasl_phase {
	SASL_KAFKA = 0,          /* Kafka frames (before, between, after exchanges) */
	SASL_V0_WAIT,            /* SaslHandshake v0 forwarded: no client byte is
	                            parsed until its response */
	SASL_RAW_CLIENT,         /* raw exchange: the client's token is next */
	SASL_RAW_SERVER,         /* raw exchange: the broker's token is next */
	SASL_PHASE_COUNT,
};
const char *sasl_phase_str(enum sasl_phase p);

struct sasl {
	enum sasl_phase phase;
	enum sasl_mech mech;     /* of the latest SaslHandshake */
	uint8_t rounds;          /* successful rounds of the current exchange
	                            (SaslAuthenticate answers or server tokens) */
	bool started;            /* a SaslHandshake was seen on this connection */
	bool authenticated;      /* an exchange completed */
	bool no_sasl;            /* the client went on without SASL */
	bool ok_pending;         /* unknown-length mechanism: the last
	                            SaslAuthenticate succeeded, completion is
	                            the client's next non-SASL request */
	char mech_name[24];      /* the name as sent (for logs), cut */
};

/* A fresh connection's state (all zero). */
void sasl_init(struct sasl *s);

/* Whether the pre-authentication limit still applies to this connection. */
bool sasl_preauth(const struct sasl *s);

/* Whether a Kafka request frame whose size prefix says `size` (bytes after
 * the prefix, as max_frame_bytes counts) with this api_key may pass, against
 * limit (sasl_max_frame_bytes). Call before sasl_on_request for the same
 * frame: the request that ends the limit is not held to it. */
bool sasl_frame_allowed(const struct sasl *s, int16_t api_key, uint64_t size, uint64_t limit);

/*
 * A Kafka request header was parsed (phase SASL_KAFKA). buf points at the
 * size prefix, avail bytes present, h from kc_parse_request_header. For
 * SaslHandshake the mechanism string must be present (SASL_NEED_MORE
 * otherwise). SASL_REFUSED for a v0 handshake of a mechanism not relayed
 * (err says which); SASL_MALFORMED for a handshake whose body does not
 * parse.
 */
int sasl_on_request(struct sasl *s, const uint8_t *buf, size_t avail,
		    const struct kc_req_header *h, char *err, size_t errlen);

/* Whether client bytes may be parsed now (not while a v0 handshake's
 * response or the broker's raw token is awaited). */
bool sasl_client_parse_ok(const struct sasl *s);

/*
 * The response to a SaslHandshake or SaslAuthenticate request (api_key,
 * api_version of the request) matched its request: buf points at its size
 * prefix, avail bytes present. Reads its error code (the first body field)
 * and moves the state on. SASL_NEED_MORE when the error code is not in the
 * avail bytes yet; SASL_MALFORMED for a frame too short or bad header tags.
 * Other keys: SASL_OK, nothing changes.
 */
int sasl_on_response(struct sasl *s, int16_t api_key, int16_t api_version, const uint8_t *buf,
		     size_t avail, char *err, size_t errlen);

/*
 * A raw token's length prefix, from the client (phase SASL_RAW_CLIENT) or
 * the broker (SASL_RAW_SERVER): buf holds avail bytes (SASL_NEED_MORE
 * below 4). *frame gets the whole frame's length (4 + token).
 * SASL_MALFORMED for a negative length, SASL_TOO_LARGE for one above max
 * (the pre-authentication limit for the client, max_frame_bytes for the
 * broker), or a token from the side whose turn it is not. On SASL_OK the
 * phase moves on: client -> server; server -> client, or after the
 * exchange's last token SASL_KAFKA with authenticated set.
 */
int sasl_on_raw_token(struct sasl *s, bool from_client, const uint8_t *buf, size_t avail,
		      uint64_t max, uint64_t *frame, char *err, size_t errlen);

/* Whether a connection's first frame (buf at its size prefix, avail bytes)
 * is a bare GSSAPI token, as Kafka 0.9 clients send without any
 * SaslHandshake: an ASN.1 application tag 0x60 where the API key's high
 * byte would be (no API key that large exists). Never relayed. */
bool sasl_legacy_gssapi(const uint8_t *buf, size_t avail);

/* Whether the connection may continue in another worker (no raw exchange
 * in progress). */
bool sasl_movable(const struct sasl *s);

/* The state for ipc_conn_record.sasl, and back. sasl_decode refuses bits it
 * does not know and a raw exchange in progress (never sent): -1 with err. */
uint32_t sasl_encode(const struct sasl *s);
int sasl_decode(uint32_t v, struct sasl *out, char *err, size_t errlen);

#endif
