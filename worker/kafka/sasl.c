/*
 * sasl — SASL pass-through state of one connection; see sasl.h.
 *
 * Sources: apache/kafka SaslHandshakeRequest.json / SaslAuthenticate*.json
 * (versions, fields), SaslServerAuthenticator (legacy v0 raw tokens: the
 * broker answers every evaluated client token with a size-prefixed token,
 * PLAIN's being empty, and closes on failure), ScramSaslServer (two
 * rounds), PlainSaslServer (one round).
 */
#include "worker/kafka/sasl.h"

#include <stdio.h>
#include <string.h>

const char *
sasl_status_str(enum sasl_status s)
{
	switch (s) {
	case SASL_OK: return "ok";
	case SASL_NEED_MORE: return "need-more";
	case SASL_MALFORMED: return "malformed";
	case SASL_REFUSED: return "refused";
	case SASL_TOO_LARGE: return "too-large";
	}
	return "unknown";
}

static const char *const sasl_mech_names[SASL_MECH_COUNT] = {
	[SASL_MECH_NONE] = "none",
	[SASL_MECH_PLAIN] = "PLAIN",
	[SASL_MECH_SCRAM_SHA_256] = "SCRAM-SHA-256",
	[SASL_MECH_SCRAM_SHA_512] = "SCRAM-SHA-512",
	[SASL_MECH_OAUTHBEARER] = "OAUTHBEARER",
	[SASL_MECH_GSSAPI] = "GSSAPI",
	[SASL_MECH_OTHER] = "other",
};

const char *
sasl_mech_str(enum sasl_mech m)
{
	return (unsigned)m < SASL_MECH_COUNT ? sasl_mech_names[m] : "unknown";
}

enum sasl_mech
sasl_mech_parse(const uint8_t *name, size_t len)
{
	for (int m = SASL_MECH_PLAIN; m < SASL_MECH_OTHER; m++) {
		const char *n = sasl_mech_names[m];
		if (strlen(n) == len && memcmp(n, name, len) == 0)
			return (enum sasl_mech)m;
	}
	return SASL_MECH_OTHER;
}

const char *
sasl_phase_str(enum sasl_phase p)
{
	switch (p) {
	case SASL_KAFKA: return "kafka";
	case SASL_V0_WAIT: return "v0-wait";
	case SASL_RAW_CLIENT: return "raw-client";
	case SASL_RAW_SERVER: return "raw-server";
	case SASL_PHASE_COUNT: break;
	}
	return "unknown";
}

void
sasl_init(struct sasl *s)
{
	memset(s, 0, sizeof *s);
}

bool
sasl_preauth(const struct sasl *s)
{
	return !s->authenticated && !s->no_sasl;
}

/* The requests a client sends before (and while) authenticating. */
static bool
sasl_key_is_preauth(int16_t api_key)
{
	return api_key == KC_API_SASL_HANDSHAKE || api_key == KC_API_SASL_AUTHENTICATE ||
	       api_key == KC_API_API_VERSIONS;
}

/* Successful rounds that end an exchange, 0 = not known (the client says). */
static unsigned
sasl_mech_rounds(enum sasl_mech m)
{
	switch (m) {
	case SASL_MECH_PLAIN: return 1;
	case SASL_MECH_SCRAM_SHA_256:
	case SASL_MECH_SCRAM_SHA_512: return 2;
	default: return 0;
	}
}

/* Relayed in the legacy raw framing: the number of rounds is known. */
static bool
sasl_mech_raw_ok(enum sasl_mech m)
{
	return sasl_mech_rounds(m) > 0;
}

bool
sasl_frame_allowed(const struct sasl *s, int16_t api_key, uint64_t size, uint64_t limit)
{
	if (!sasl_preauth(s) || size <= limit)
		return true;
	/* The request that ends the limit is not held to it (sasl.h). */
	return !sasl_key_is_preauth(api_key) && (!s->started || s->ok_pending);
}

/* A reason into err (which may be NULL). */
#define SASL_ERR(err, errlen, ...) \
	do { \
		if ((err) != NULL && (errlen) > 0) \
			snprintf((err), (errlen), __VA_ARGS__); \
	} while (0)

int
sasl_on_request(struct sasl *s, const uint8_t *buf, size_t avail, const struct kc_req_header *h,
		char *err, size_t errlen)
{
	if (h->api_key == KC_API_SASL_HANDSHAKE) {
		struct kc_reader r;
		const uint8_t *name = NULL;
		kc_rd_init_partial(&r, buf, 4 + (size_t)h->size, avail);
		kc_rd_skip(&r, h->header_len);
		int32_t n = kc_rd_string(&r, false, false, &name);
		if (r.status == KC_NEED_MORE)
			return SASL_NEED_MORE;
		if (!kc_rd_ok(&r)) {
			SASL_ERR(err, errlen, "malformed SaslHandshake request: %s",
			    r.err ? r.err : "bad mechanism");
			return SASL_MALFORMED;
		}
		enum sasl_mech m = sasl_mech_parse(name, (size_t)n);
		char shown[sizeof s->mech_name];
		size_t k = (size_t)n < sizeof shown - 1 ? (size_t)n : sizeof shown - 1;
		for (size_t i = 0; i < k; i++)
			shown[i] = name[i] >= 0x20 && name[i] < 0x7f ? (char)name[i] : '?';
		shown[k] = '\0';
		if (h->api_version == 0 && !sasl_mech_raw_ok(m)) {
			SASL_ERR(err, errlen, "SASL mechanism '%s' is not relayed in legacy "
			    "SaslHandshake v0 raw framing (PLAIN and SCRAM are; use "
			    "SaslHandshake v1)", shown);
			return SASL_REFUSED;
		}
		s->mech = m;
		memcpy(s->mech_name, shown, k + 1);
		s->started = true;
		s->rounds = 0;
		s->ok_pending = false;
		if (h->api_version == 0)
			s->phase = SASL_V0_WAIT;
		return SASL_OK;
	}
	if (h->api_key == KC_API_SASL_AUTHENTICATE) {
		s->ok_pending = false;  /* another round: not done yet */
		return SASL_OK;
	}
	if (sasl_key_is_preauth(h->api_key))
		return SASL_OK;
	/* Any other request: the client's SASL client is done, or it never
	 * started one (sasl.h). */
	if (s->ok_pending) {
		s->authenticated = true;
		s->ok_pending = false;
	} else if (!s->started && !s->authenticated) {
		s->no_sasl = true;
	}
	return SASL_OK;
}

bool
sasl_client_parse_ok(const struct sasl *s)
{
	return s->phase != SASL_V0_WAIT && s->phase != SASL_RAW_SERVER;
}

int
sasl_on_response(struct sasl *s, int16_t api_key, int16_t api_version, const uint8_t *buf,
		 size_t avail, char *err, size_t errlen)
{
	if (api_key != KC_API_SASL_HANDSHAKE && api_key != KC_API_SASL_AUTHENTICATE)
		return SASL_OK;
	if (avail < 4)
		return SASL_NEED_MORE;
	int32_t size = kc_get_i32(buf);
	if (size < 6) {
		SASL_ERR(err, errlen, "%s response too short for its error code",
		    kc_api_name(api_key));
		return SASL_MALFORMED;
	}
	struct kc_reader r;
	kc_rd_init_partial(&r, buf, 4 + (size_t)size, avail);
	kc_rd_skip(&r, 8);  /* size, correlation id */
	if (kc_response_header_version(api_key, api_version) >= 1)
		kc_rd_tags(&r);
	int16_t code = kc_rd_i16(&r);
	if (r.status == KC_NEED_MORE)
		return SASL_NEED_MORE;
	if (!kc_rd_ok(&r)) {
		SASL_ERR(err, errlen, "malformed SASL response header: %s",
		    r.err ? r.err : "?");
		return SASL_MALFORMED;
	}
	if (api_key == KC_API_SASL_HANDSHAKE) {
		if (s->phase == SASL_V0_WAIT)
			s->phase = code == 0 ? SASL_RAW_CLIENT : SASL_KAFKA;
		return SASL_OK;
	}
	/* SaslAuthenticate */
	if (code != 0) {
		/* The broker closes the connection after it (a failed
		 * re-authentication too); nothing to undo. */
		s->ok_pending = false;
		return SASL_OK;
	}
	if (s->rounds < 255)
		s->rounds++;
	unsigned need = sasl_mech_rounds(s->mech);
	if (need == 0)
		s->ok_pending = true;
	else if (s->rounds >= need)
		s->authenticated = true;
	return SASL_OK;
}

int
sasl_on_raw_token(struct sasl *s, bool from_client, const uint8_t *buf, size_t avail,
		  uint64_t max, uint64_t *frame, char *err, size_t errlen)
{
	enum sasl_phase want = from_client ? SASL_RAW_CLIENT : SASL_RAW_SERVER;
	if (s->phase != want) {
		SASL_ERR(err, errlen, "%s sent a SASL token out of turn",
		    from_client ? "client" : "broker");
		return SASL_MALFORMED;
	}
	if (avail < 4)
		return SASL_NEED_MORE;
	int32_t len = kc_get_i32(buf);
	if (len < 0) {
		SASL_ERR(err, errlen, "negative SASL token length from the %s",
		    from_client ? "client" : "broker");
		return SASL_MALFORMED;
	}
	*frame = 4 + (uint64_t)len;
	if ((uint64_t)len > max) {
		if (err && errlen)
			snprintf(err, errlen, "SASL token of %d bytes from the %s above %llu", len,
			    from_client ? "client" : "broker", (unsigned long long)max);
		return SASL_TOO_LARGE;
	}
	if (from_client) {
		s->phase = SASL_RAW_SERVER;
		return SASL_OK;
	}
	if (s->rounds < 255)
		s->rounds++;
	if (s->rounds >= sasl_mech_rounds(s->mech)) {
		s->phase = SASL_KAFKA;
		s->authenticated = true;
	} else {
		s->phase = SASL_RAW_CLIENT;
	}
	return SASL_OK;
}

bool
sasl_legacy_gssapi(const uint8_t *buf, size_t avail)
{
	return avail >= 5 && buf[4] == 0x60;
}

bool
sasl_movable(const struct sasl *s)
{
	return s->phase == SASL_KAFKA;
}

/* ipc_conn_record.sasl layout: bits 0-2 phase (always SASL_KAFKA when
 * sent), 3-5 mechanism, 6 started, 7 authenticated, 8 no_sasl,
 * 9 ok_pending, 16-23 rounds. The name shown in logs does not travel. */
#define SASL_ENC_PHASE(v)  ((v) & 0x7u)
#define SASL_ENC_MECH(v)   (((v) >> 3) & 0x7u)
#define SASL_ENC_STARTED   (1u << 6)
#define SASL_ENC_AUTH      (1u << 7)
#define SASL_ENC_NO_SASL   (1u << 8)
#define SASL_ENC_OK_PEND   (1u << 9)
#define SASL_ENC_ROUNDS(v) (((v) >> 16) & 0xffu)
#define SASL_ENC_KNOWN     (0x3fu | SASL_ENC_STARTED | SASL_ENC_AUTH | SASL_ENC_NO_SASL | \
			    SASL_ENC_OK_PEND | (0xffu << 16))

uint32_t
sasl_encode(const struct sasl *s)
{
	uint32_t v = (uint32_t)s->phase & 0x7u;
	v |= ((uint32_t)s->mech & 0x7u) << 3;
	if (s->started)
		v |= SASL_ENC_STARTED;
	if (s->authenticated)
		v |= SASL_ENC_AUTH;
	if (s->no_sasl)
		v |= SASL_ENC_NO_SASL;
	if (s->ok_pending)
		v |= SASL_ENC_OK_PEND;
	v |= (uint32_t)s->rounds << 16;
	return v;
}

int
sasl_decode(uint32_t v, struct sasl *out, char *err, size_t errlen)
{
	sasl_init(out);
	if (v & ~SASL_ENC_KNOWN) {
		if (err && errlen)
			snprintf(err, errlen, "SASL state 0x%x: unknown bits", v);
		return -1;
	}
	if (SASL_ENC_PHASE(v) != SASL_KAFKA) {
		if (err && errlen)
			snprintf(err, errlen, "SASL state 0x%x: a raw exchange in progress", v);
		return -1;
	}
	if (SASL_ENC_MECH(v) >= SASL_MECH_COUNT) {
		if (err && errlen)
			snprintf(err, errlen, "SASL state 0x%x: mechanism %u", v, SASL_ENC_MECH(v));
		return -1;
	}
	out->phase = SASL_KAFKA;
	out->mech = (enum sasl_mech)SASL_ENC_MECH(v);
	out->started = (v & SASL_ENC_STARTED) != 0;
	out->authenticated = (v & SASL_ENC_AUTH) != 0;
	out->no_sasl = (v & SASL_ENC_NO_SASL) != 0;
	out->ok_pending = (v & SASL_ENC_OK_PEND) != 0;
	out->rounds = (uint8_t)SASL_ENC_ROUNDS(v);
	snprintf(out->mech_name, sizeof out->mech_name, "%s", sasl_mech_str(out->mech));
	return 0;
}
