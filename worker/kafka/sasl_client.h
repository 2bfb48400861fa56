/*
 * sasl_client — ferry authenticating itself to an upstream broker, for its
 * own requests only (the worker's metadata fetch, which is also its health
 * probe; worker/upstream.c): the PLAIN and SCRAM-SHA-256/512 client
 * exchanges and the Kafka frames that carry them, SaslHandshake v1 and
 * SaslAuthenticate v0-2. Clients' own SASL exchanges are passed through
 * untouched (sasl.h); nothing here is used on a client connection.
 *
 * Pure: no sockets, no clock, no randomness, no logging. The caller gives
 * the client nonce (the worker takes it from libsodium's randombytes), so
 * the RFC 7677 test vectors run as they are. The cryptography is OpenSSL's
 * (PKCS5_PBKDF2_HMAC, HMAC, EVP digests), base64 libsodium's.
 *
 * The exchanges, one SaslAuthenticate round per client token:
 *   PLAIN          client: "\0user\0password"; the broker answers error 0
 *                  (an empty token) or SASL_AUTHENTICATION_FAILED.
 *   SCRAM-SHA-*    RFC 5802 without channel binding (gs2 header "n,,"):
 *                  client-first "n,,n=USER,r=CNONCE"; server-first
 *                  "r=CNONCE+SNONCE,s=SALT,i=ITERATIONS"; client-final
 *                  "c=biws,r=NONCE,p=PROOF"; server-final "v=SIGNATURE",
 *                  which is checked (constant time): a broker that cannot
 *                  prove it knows the password is refused like a wrong
 *                  password. The password is used as its bytes, without
 *                  SASLprep, as Kafka's ScramFormatter does. Iterations
 *                  outside [SASL_CLIENT_MIN_ITERATIONS,
 *                  SASL_CLIENT_MAX_ITERATIONS] are refused: below, a
 *                  downgrade (Kafka's own minimum is 4096); above, a broker
 *                  could make the worker's loop spin in PBKDF2.
 *
 * The password is borrowed (the caller keeps it in guarded memory); every
 * derived key lives on the stack of one call and is wiped before it
 * returns; sasl_client_wipe() clears the state.
 *
 * Return conventions: the exchange functions return 0, or -1 with a reason
 * in err (never containing the password or anything derived from it). The
 * frame parsers follow codec.h: KC_OK, or KC_MALFORMED with a static
 * reason (a whole frame is always given, so never KC_NEED_MORE). Builders
 * return the frame length, 0 when it does not fit.
 */
#ifndef FERRY_WORKER_KAFKA_SASL_CLIENT_H
#define FERRY_WORKER_KAFKA_SASL_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "worker/kafka/sasl.h"

#define SASL_CLIENT_USER_MAX 255          /* bytes of a user name */
#define SASL_CLIENT_PASSWORD_MAX 1024     /* bytes of a password */
#define SASL_CLIENT_NONCE_MAX 64          /* characters of the client nonce */
#define SASL_CLIENT_SERVER_FIRST_MAX 1024 /* a longer server-first is refused */
#define SASL_CLIENT_TOKEN_MAX 2048        /* any token the client sends fits */
#define SASL_CLIENT_MIN_ITERATIONS 4096
#define SASL_CLIENT_MAX_ITERATIONS 65536

/* Kafka error codes the worker tells apart. */
#define SASL_CLIENT_ERR_ILLEGAL_SASL_STATE 34
#define SASL_CLIENT_ERR_UNSUPPORTED_MECHANISM 33
#define SASL_CLIENT_ERR_AUTHENTICATION_FAILED 58

enum sasl_client_state {
	SASL_CLIENT_START = 0,    /* nothing sent */
	SASL_CLIENT_FIRST_SENT,   /* PLAIN: the token; SCRAM: client-first */
	SASL_CLIENT_FINAL_SENT,   /* SCRAM: client-final, server-final awaited */
	SASL_CLIENT_DONE,         /* authenticated (SCRAM: the broker proved itself) */
	SASL_CLIENT_FAILED,
	SASL_CLIENT_STATE_COUNT,
};
const char *sasl_client_state_str(enum sasl_client_state s);

struct sasl_client {
	enum sasl_mech mech;      /* PLAIN, SCRAM_SHA_256 or SCRAM_SHA_512 */
	enum sasl_client_state state;
	const uint8_t *password;  /* borrowed */
	size_t password_len;
	char user[SASL_CLIENT_USER_MAX + 1];
	/* SCRAM: client-first-message-bare (for the AuthMessage) and the
	 * ServerSignature the server-final must carry */
	char first_bare[3 * SASL_CLIENT_USER_MAX + SASL_CLIENT_NONCE_MAX + 16];
	size_t nonce_len;         /* the client nonce's length (in first_bare) */
	uint8_t server_signature[64];
	size_t digest_len;        /* 32 or 64 */
};

/* Whether ferry can authenticate itself with mechanism m. */
bool sasl_client_mech_ok(enum sasl_mech m);

/* Set up an exchange. nonce: the client nonce, 1..SASL_CLIENT_NONCE_MAX
 * printable ASCII characters other than ',' (SCRAM; ignored for PLAIN).
 * -1 for a mechanism ferry does not speak, an empty or too long user or
 * password, a NUL in either (PLAIN), or a bad nonce. */
int sasl_client_init(struct sasl_client *c, enum sasl_mech mech, const char *user,
		     const uint8_t *password, size_t password_len, const char *nonce,
		     char *err, size_t errlen);

/* The first client token into out (cap >= SASL_CLIENT_TOKEN_MAX suffices). */
int sasl_client_first(struct sasl_client *c, uint8_t *out, size_t cap, size_t *len,
		      char *err, size_t errlen);

/* The broker's token of the last round (a SaslAuthenticate answered with
 * error 0): *len > 0 is the next client token (SCRAM client-final),
 * *len == 0 with sasl_client_done() the end. -1 (state FAILED) for a
 * server-first that does not parse, does not extend the client nonce, or
 * asks for iterations out of range; a server-final with an error ("e=") or
 * a signature that does not verify; a token in a state that expects none. */
int sasl_client_step(struct sasl_client *c, const uint8_t *in, size_t inlen, uint8_t *out,
		     size_t cap, size_t *len, char *err, size_t errlen);

bool sasl_client_done(const struct sasl_client *c);

/* Forget everything (the password pointer too). */
void sasl_client_wipe(struct sasl_client *c);

/* ---- the Kafka frames ---- */

/* SaslHandshake v1 (header v1) naming mechanism; frame length or 0. */
size_t sasl_client_handshake_request(uint8_t *buf, size_t cap, int32_t corr,
				     const char *client_id, const char *mechanism);

/* A SaslHandshake v0/v1 response frame (size prefix included): its error
 * code, and the broker's enabled mechanisms as "A, B, C" into mechs (cut
 * to fit, non-printable bytes shown as '?'). */
int sasl_client_handshake_response(const uint8_t *frame, size_t len, int16_t *error,
				   char *mechs, size_t mechs_len, char *err, size_t errlen);

/* SaslAuthenticate v0-2 (v2 flexible) carrying token; frame length or 0. */
size_t sasl_client_authenticate_request(uint8_t *buf, size_t cap, int16_t version,
					int32_t corr, const char *client_id,
					const uint8_t *token, size_t token_len);

/* A SaslAuthenticate response frame of the request's version: its error
 * code, error message (null: "", printable only, cut to fit) and
 * auth_bytes (*token points into frame). */
int sasl_client_authenticate_response(const uint8_t *frame, size_t len, int16_t version,
				      int16_t *error, char *msg, size_t msg_len,
				      const uint8_t **token, size_t *token_len,
				      char *err, size_t errlen);

#endif
