/*
 * SASL pass-through state (worker/kafka/sasl.c): handshake parsing, the
 * legacy raw token exchange of PLAIN and SCRAM, refusal of mechanisms not
 * relayed, when authentication is done (the pre-authentication limit),
 * re-authentication, and the handover encoding. No sockets.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "worker/kafka/codec.h"
#include "worker/kafka/sasl.h"

/* A request frame: header v1 (key, version, correlation id, client id
 * "t"), then body. Returns the frame length. */
static size_t
req_frame(uint8_t *out, int16_t key, int16_t ver, int32_t corr, const uint8_t *body, size_t blen)
{
	size_t n = 4;
	kc_put_i16(out + n, key); n += 2;
	kc_put_i16(out + n, ver); n += 2;
	kc_put_i32(out + n, corr); n += 4;
	kc_put_i16(out + n, 1); n += 2;
	out[n++] = 't';
	memcpy(out + n, body, blen);
	n += blen;
	kc_put_i32(out, (int32_t)(n - 4));
	return n;
}

static size_t
handshake_req(uint8_t *out, int16_t ver, const char *mech)
{
	uint8_t body[64];
	size_t l = strlen(mech);
	kc_put_i16(body, (int16_t)l);
	memcpy(body + 2, mech, l);
	return req_frame(out, KC_API_SASL_HANDSHAKE, ver, 7, body, 2 + l);
}

static void
parse(const uint8_t *buf, size_t n, struct kc_req_header *h)
{
	char err[128];
	cr_assert_eq(kc_parse_request_header(buf, n, 1 << 20, h, err, sizeof err), KC_OK, "%s", err);
}

/* Feed a request frame through sasl_on_request. */
static int
on_req(struct sasl *s, const uint8_t *buf, size_t n, char *err, size_t errlen)
{
	struct kc_req_header h;
	parse(buf, n, &h);
	return sasl_on_request(s, buf, n, &h, err, errlen);
}

static int
simple_req(struct sasl *s, int16_t key, int16_t ver)
{
	uint8_t buf[64];
	size_t n = req_frame(buf, key, ver, 1, (const uint8_t *)"\0\0\0\0", 4);
	return on_req(s, buf, n, NULL, 0);
}

/* A response: size, correlation id, [tags 0], error code, then 2 bytes. */
static size_t
resp_frame(uint8_t *out, bool flexible, int16_t code)
{
	size_t n = 4;
	kc_put_i32(out + n, 7); n += 4;
	if (flexible)
		out[n++] = 0;
	kc_put_i16(out + n, code); n += 2;
	out[n++] = 0;
	out[n++] = 0;
	kc_put_i32(out, (int32_t)(n - 4));
	return n;
}

static int
on_resp(struct sasl *s, int16_t key, int16_t ver, int16_t code)
{
	uint8_t buf[32];
	size_t n = resp_frame(buf, key == KC_API_SASL_AUTHENTICATE && ver >= 2, code);
	char err[128];
	return sasl_on_response(s, key, ver, buf, n, err, sizeof err);
}

static int
raw(struct sasl *s, bool from_client, int32_t len)
{
	uint8_t p[4];
	uint64_t frame = 0;
	kc_put_i32(p, len);
	int r = sasl_on_raw_token(s, from_client, p, 4, 1 << 20, &frame, NULL, 0);
	if (r == SASL_OK)
		cr_assert_eq(frame, 4 + (uint64_t)len);
	return r;
}

Test(sasl, mech_names)
{
	cr_assert_eq(sasl_mech_parse((const uint8_t *)"PLAIN", 5), SASL_MECH_PLAIN);
	cr_assert_eq(sasl_mech_parse((const uint8_t *)"SCRAM-SHA-512", 13), SASL_MECH_SCRAM_SHA_512);
	cr_assert_eq(sasl_mech_parse((const uint8_t *)"plain", 5), SASL_MECH_OTHER);
	cr_assert_eq(sasl_mech_parse((const uint8_t *)"PLAINX", 6), SASL_MECH_OTHER);
	cr_assert_str_eq(sasl_mech_str(SASL_MECH_GSSAPI), "GSSAPI");
	cr_assert_str_eq(sasl_phase_str(SASL_RAW_SERVER), "raw-server");
	cr_assert_str_eq(sasl_status_str(SASL_TOO_LARGE), "too-large");
}

Test(sasl, v1_plain_authenticates_on_first_success)
{
	struct sasl s;
	sasl_init(&s);
	uint8_t buf[128];
	cr_assert(sasl_preauth(&s));
	cr_assert_eq(simple_req(&s, KC_API_API_VERSIONS, 3), SASL_OK);
	cr_assert(sasl_preauth(&s), "ApiVersions does not end the limit");
	size_t n = handshake_req(buf, 1, "PLAIN");
	cr_assert_eq(on_req(&s, buf, n, NULL, 0), SASL_OK);
	cr_assert_eq(s.phase, SASL_KAFKA, "v1: Kafka framing continues");
	cr_assert(sasl_client_parse_ok(&s));
	cr_assert_eq(on_resp(&s, KC_API_SASL_HANDSHAKE, 1, 0), SASL_OK);
	cr_assert_eq(simple_req(&s, KC_API_SASL_AUTHENTICATE, 2), SASL_OK);
	cr_assert(sasl_preauth(&s));
	cr_assert_eq(on_resp(&s, KC_API_SASL_AUTHENTICATE, 2, 0), SASL_OK);
	cr_assert(!sasl_preauth(&s));
	cr_assert(s.authenticated);
	cr_assert(sasl_movable(&s));
}

Test(sasl, v1_failed_authentication_keeps_the_limit)
{
	struct sasl s;
	sasl_init(&s);
	uint8_t buf[128];
	size_t n = handshake_req(buf, 1, "PLAIN");
	cr_assert_eq(on_req(&s, buf, n, NULL, 0), SASL_OK);
	cr_assert_eq(on_resp(&s, KC_API_SASL_AUTHENTICATE, 0, 58), SASL_OK);
	cr_assert(sasl_preauth(&s));
	/* a request after a failure is still limited */
	cr_assert(!sasl_frame_allowed(&s, KC_API_PRODUCE, 2 << 20, 512 << 10));
}

Test(sasl, v1_scram_needs_two_successes)
{
	struct sasl s;
	sasl_init(&s);
	uint8_t buf[128];
	size_t n = handshake_req(buf, 1, "SCRAM-SHA-256");
	cr_assert_eq(on_req(&s, buf, n, NULL, 0), SASL_OK);
	cr_assert_eq(on_resp(&s, KC_API_SASL_AUTHENTICATE, 1, 0), SASL_OK);
	cr_assert(sasl_preauth(&s), "server-first is not the end");
	cr_assert(!sasl_frame_allowed(&s, KC_API_PRODUCE, 600 << 10, 512 << 10));
	cr_assert_eq(on_resp(&s, KC_API_SASL_AUTHENTICATE, 1, 0), SASL_OK);
	cr_assert(!sasl_preauth(&s));
	cr_assert(sasl_frame_allowed(&s, KC_API_PRODUCE, 600 << 10, 512 << 10));
}

Test(sasl, v1_unknown_length_mechanism_ends_with_the_next_request)
{
	struct sasl s;
	sasl_init(&s);
	uint8_t buf[128];
	size_t n = handshake_req(buf, 1, "GSSAPI");
	cr_assert_eq(on_req(&s, buf, n, NULL, 0), SASL_OK, "v1 GSSAPI is forwarded");
	cr_assert_eq(on_resp(&s, KC_API_SASL_AUTHENTICATE, 1, 0), SASL_OK);
	cr_assert(sasl_preauth(&s));
	cr_assert_eq(simple_req(&s, KC_API_SASL_AUTHENTICATE, 1), SASL_OK);
	cr_assert(sasl_preauth(&s), "another round: still authenticating");
	cr_assert(!s.ok_pending);
	cr_assert_eq(on_resp(&s, KC_API_SASL_AUTHENTICATE, 1, 0), SASL_OK);
	/* the client goes on: its request is not limited, and ends the limit */
	cr_assert(sasl_frame_allowed(&s, KC_API_METADATA, 600 << 10, 512 << 10));
	cr_assert_eq(simple_req(&s, KC_API_METADATA, 12), SASL_OK);
	cr_assert(!sasl_preauth(&s));
}

Test(sasl, no_sasl_client_is_exempt_from_its_first_request)
{
	struct sasl s;
	sasl_init(&s);
	cr_assert(!sasl_frame_allowed(&s, KC_API_API_VERSIONS, 1 << 20, 512 << 10));
	cr_assert(sasl_frame_allowed(&s, KC_API_API_VERSIONS, 512 << 10, 512 << 10));
	cr_assert_eq(simple_req(&s, KC_API_API_VERSIONS, 3), SASL_OK);
	/* a 1 MiB Produce right after ApiVersions on a plaintext listener */
	cr_assert(sasl_frame_allowed(&s, KC_API_PRODUCE, 1 << 20, 512 << 10));
	cr_assert_eq(simple_req(&s, KC_API_PRODUCE, 9), SASL_OK);
	cr_assert(!sasl_preauth(&s));
	cr_assert(s.no_sasl);
	cr_assert(sasl_frame_allowed(&s, KC_API_SASL_AUTHENTICATE, 1 << 20, 512 << 10));
}

Test(sasl, after_a_handshake_every_frame_is_limited)
{
	struct sasl s;
	sasl_init(&s);
	uint8_t buf[128];
	size_t n = handshake_req(buf, 1, "PLAIN");
	cr_assert_eq(on_req(&s, buf, n, NULL, 0), SASL_OK);
	cr_assert(!sasl_frame_allowed(&s, KC_API_SASL_AUTHENTICATE, (512 << 10) + 1, 512 << 10));
	cr_assert(!sasl_frame_allowed(&s, KC_API_PRODUCE, 1 << 20, 512 << 10));
	cr_assert(sasl_frame_allowed(&s, KC_API_PRODUCE, 512 << 10, 512 << 10));
}

Test(sasl, v0_plain_raw_exchange)
{
	struct sasl s;
	sasl_init(&s);
	uint8_t buf[128];
	size_t n = handshake_req(buf, 0, "PLAIN");
	cr_assert_eq(on_req(&s, buf, n, NULL, 0), SASL_OK);
	cr_assert_eq(s.phase, SASL_V0_WAIT);
	cr_assert(!sasl_client_parse_ok(&s), "nothing parsed before the handshake answer");
	cr_assert(!sasl_movable(&s));
	cr_assert_eq(on_resp(&s, KC_API_SASL_HANDSHAKE, 0, 0), SASL_OK);
	cr_assert_eq(s.phase, SASL_RAW_CLIENT);
	cr_assert(sasl_client_parse_ok(&s));
	cr_assert_eq(raw(&s, false, 0), SASL_MALFORMED, "broker out of turn");
	cr_assert_eq(raw(&s, true, 20), SASL_OK);
	cr_assert_eq(s.phase, SASL_RAW_SERVER);
	cr_assert(!sasl_client_parse_ok(&s));
	cr_assert_eq(raw(&s, true, 20), SASL_MALFORMED, "client out of turn");
	cr_assert(sasl_preauth(&s));
	cr_assert_eq(raw(&s, false, 0), SASL_OK, "PLAIN: the empty success token");
	cr_assert_eq(s.phase, SASL_KAFKA);
	cr_assert(!sasl_preauth(&s));
	cr_assert(sasl_movable(&s));
}

Test(sasl, v0_scram_raw_exchange_is_two_rounds)
{
	struct sasl s;
	sasl_init(&s);
	uint8_t buf[128];
	size_t n = handshake_req(buf, 0, "SCRAM-SHA-512");
	cr_assert_eq(on_req(&s, buf, n, NULL, 0), SASL_OK);
	cr_assert_eq(on_resp(&s, KC_API_SASL_HANDSHAKE, 0, 0), SASL_OK);
	cr_assert_eq(raw(&s, true, 40), SASL_OK);   /* client-first */
	cr_assert_eq(raw(&s, false, 80), SASL_OK);  /* server-first */
	cr_assert_eq(s.phase, SASL_RAW_CLIENT);
	cr_assert(!sasl_movable(&s), "between rounds a raw exchange cannot move");
	cr_assert(sasl_preauth(&s));
	cr_assert_eq(raw(&s, true, 100), SASL_OK);  /* client-final */
	cr_assert_eq(raw(&s, false, 50), SASL_OK);  /* server-final */
	cr_assert_eq(s.phase, SASL_KAFKA);
	cr_assert(s.authenticated);
}

Test(sasl, v0_handshake_error_stays_kafka)
{
	struct sasl s;
	sasl_init(&s);
	uint8_t buf[128];
	size_t n = handshake_req(buf, 0, "SCRAM-SHA-256");
	cr_assert_eq(on_req(&s, buf, n, NULL, 0), SASL_OK);
	cr_assert_eq(on_resp(&s, KC_API_SASL_HANDSHAKE, 0, 33), SASL_OK);
	cr_assert_eq(s.phase, SASL_KAFKA);
	cr_assert(sasl_preauth(&s));
}

Test(sasl, v0_mechanisms_not_relayed_are_refused)
{
	const char *mechs[] = { "GSSAPI", "OAUTHBEARER", "DIGEST-MD5", "" };
	for (size_t i = 0; i < sizeof mechs / sizeof mechs[0]; i++) {
		struct sasl s;
		sasl_init(&s);
		uint8_t buf[128];
		char err[256] = "";
		size_t n = handshake_req(buf, 0, mechs[i]);
		cr_assert_eq(on_req(&s, buf, n, err, sizeof err), SASL_REFUSED, "%s", mechs[i]);
		cr_assert(strstr(err, "not relayed"), "%s", err);
		cr_assert(strstr(err, mechs[i]), "%s", err);
		cr_assert_eq(s.phase, SASL_KAFKA, "state untouched");
		cr_assert(!s.started);
	}
}

Test(sasl, handshake_needs_its_mechanism_bytes)
{
	struct sasl s;
	sasl_init(&s);
	uint8_t buf[128];
	size_t n = handshake_req(buf, 0, "SCRAM-SHA-256");
	struct kc_req_header h;
	parse(buf, n, &h);
	for (size_t k = h.header_len; k < n; k++)
		cr_assert_eq(sasl_on_request(&s, buf, k, &h, NULL, 0), SASL_NEED_MORE, "%zu", k);
	cr_assert_eq(s.phase, SASL_KAFKA);
	cr_assert_eq(sasl_on_request(&s, buf, n, &h, NULL, 0), SASL_OK);
	cr_assert_eq(s.phase, SASL_V0_WAIT);
	cr_assert_str_eq(s.mech_name, "SCRAM-SHA-256");
	/* a mechanism string past the frame's end */
	sasl_init(&s);
	kc_put_i16(buf + h.header_len, 200);
	cr_assert_eq(sasl_on_request(&s, buf, n, &h, NULL, 0), SASL_MALFORMED);
}

Test(sasl, response_error_code_needs_its_bytes)
{
	struct sasl s;
	sasl_init(&s);
	uint8_t buf[128];
	size_t n = handshake_req(buf, 1, "PLAIN");
	cr_assert_eq(on_req(&s, buf, n, NULL, 0), SASL_OK);
	uint8_t r[32];
	size_t rn = resp_frame(r, true, 0);  /* v2: flexible header */
	for (size_t k = 0; k < 11; k++)
		cr_assert_eq(sasl_on_response(&s, KC_API_SASL_AUTHENTICATE, 2, r, k, NULL, 0),
		    SASL_NEED_MORE, "%zu", k);
	cr_assert(sasl_preauth(&s));
	cr_assert_eq(sasl_on_response(&s, KC_API_SASL_AUTHENTICATE, 2, r, rn, NULL, 0), SASL_OK);
	cr_assert(!sasl_preauth(&s));
	/* too short for an error code */
	uint8_t tiny[8] = { 0, 0, 0, 4, 0, 0, 0, 7 };
	cr_assert_eq(sasl_on_response(&s, KC_API_SASL_AUTHENTICATE, 0, tiny, 8, NULL, 0),
	    SASL_MALFORMED);
	/* other keys are none of its business */
	cr_assert_eq(sasl_on_response(&s, KC_API_METADATA, 0, tiny, 8, NULL, 0), SASL_OK);
}

Test(sasl, reauthentication_is_forwarded_and_keeps_the_client_authenticated)
{
	struct sasl s;
	sasl_init(&s);
	uint8_t buf[128];
	size_t n = handshake_req(buf, 1, "PLAIN");
	cr_assert_eq(on_req(&s, buf, n, NULL, 0), SASL_OK);
	cr_assert_eq(on_resp(&s, KC_API_SASL_AUTHENTICATE, 2, 0), SASL_OK);
	cr_assert_eq(simple_req(&s, KC_API_PRODUCE, 9), SASL_OK);
	/* KIP-368: handshake + authenticate again, after traffic */
	cr_assert_eq(on_req(&s, buf, n, NULL, 0), SASL_OK);
	cr_assert_eq(s.rounds, 0);
	cr_assert(!sasl_preauth(&s));
	cr_assert(sasl_frame_allowed(&s, KC_API_SASL_AUTHENTICATE, 1 << 20, 512 << 10));
	cr_assert_eq(on_resp(&s, KC_API_SASL_AUTHENTICATE, 2, 0), SASL_OK);
	cr_assert(s.authenticated);
}

Test(sasl, raw_token_limits)
{
	struct sasl s;
	sasl_init(&s);
	s.phase = SASL_RAW_CLIENT;
	s.mech = SASL_MECH_PLAIN;
	uint8_t p[4];
	uint64_t frame = 0;
	char err[128] = "";
	kc_put_i32(p, (512 << 10) + 1);
	cr_assert_eq(sasl_on_raw_token(&s, true, p, 4, 512 << 10, &frame, err, sizeof err),
	    SASL_TOO_LARGE);
	cr_assert(strstr(err, "524289"), "%s", err);
	cr_assert_eq(s.phase, SASL_RAW_CLIENT);
	kc_put_i32(p, -1);
	cr_assert_eq(sasl_on_raw_token(&s, true, p, 4, 512 << 10, &frame, NULL, 0), SASL_MALFORMED);
	cr_assert_eq(sasl_on_raw_token(&s, true, p, 3, 512 << 10, &frame, NULL, 0), SASL_NEED_MORE);
	kc_put_i32(p, 0);
	cr_assert_eq(sasl_on_raw_token(&s, true, p, 4, 512 << 10, &frame, NULL, 0), SASL_OK);
	cr_assert_eq(frame, 4);
}

Test(sasl, encode_decode_round_trip)
{
	struct sasl s, t;
	char err[128];
	sasl_init(&s);
	cr_assert_eq(sasl_encode(&s), 0, "a fresh connection encodes as 0");
	cr_assert_eq(sasl_decode(0, &t, err, sizeof err), 0);
	cr_assert(sasl_preauth(&t));
	s.mech = SASL_MECH_SCRAM_SHA_512;
	s.started = true;
	s.authenticated = true;
	s.rounds = 2;
	cr_assert_eq(sasl_decode(sasl_encode(&s), &t, err, sizeof err), 0, "%s", err);
	cr_assert_eq(t.mech, SASL_MECH_SCRAM_SHA_512);
	cr_assert(t.started && t.authenticated && !t.no_sasl && !t.ok_pending);
	cr_assert_eq(t.rounds, 2);
	cr_assert(!sasl_preauth(&t));
	s.authenticated = false;
	s.ok_pending = true;
	s.no_sasl = true;
	cr_assert_eq(sasl_decode(sasl_encode(&s), &t, err, sizeof err), 0);
	cr_assert(t.ok_pending && t.no_sasl && !t.authenticated);
	/* raw exchanges never travel */
	s.phase = SASL_RAW_CLIENT;
	cr_assert_eq(sasl_decode(sasl_encode(&s), &t, err, sizeof err), -1);
	cr_assert(strstr(err, "raw"), "%s", err);
	cr_assert_eq(sasl_decode(1u << 12, &t, err, sizeof err), -1);
	cr_assert_eq(sasl_decode(7u << 3, &t, err, sizeof err), -1);
}

Test(sasl, legacy_gssapi_first_token)
{
	uint8_t tok[8] = { 0, 0, 0, 4, 0x60, 0x82, 0x01, 0x00 };
	cr_assert(sasl_legacy_gssapi(tok, 8));
	cr_assert(!sasl_legacy_gssapi(tok, 4), "needs the first body byte");
	uint8_t kafka[8] = { 0, 0, 0, 4, 0x00, 0x12, 0x00, 0x03 };  /* ApiVersions v3 */
	cr_assert(!sasl_legacy_gssapi(kafka, 8));
}
