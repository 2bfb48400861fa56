/*
 * fuzz_clientinfo — libFuzzer harness for worker/kafka/clientinfo.c: what a
 * client says it is (client_id, ApiVersions v3+ software, the identity in
 * its first SASL token).
 *
 * Input: byte 0 selects the mode.
 *   bit 7 clear: a connection's client bytes. The rest is read as
 *     consecutive request frames by their size prefixes (at most 32); each
 *     whose header parses goes to ci_on_request. Bit 6 set: after a
 *     SaslHandshake v0 the next frame is fed as a raw token
 *     (ci_on_raw_token) instead, as a v0 client sends it.
 *   bit 7 set: one SASL token. Bits 0-2 pick the mechanism (none, PLAIN,
 *     SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, GSSAPI, other), byte 1
 *     the output buffer size (1..256); the rest is the token.
 *
 * Oracles (besides ASan/UBSan, every buffer an exact-size copy):
 *   - statuses are CI_OK / CI_NEED_MORE / CI_MALFORMED, a MALFORMED one
 *     with a reason;
 *   - every string of the info is NUL-terminated inside its array and
 *     printable ASCII; principal_seen means a principal; software_valid
 *     means seen and uncut; a cut value fills its array;
 *   - prefixes: the same frame with fewer bytes present answers NEED_MORE
 *     (leaving the info as it was, but for the first client_id) or the same
 *     status and info as the whole frame;
 *   - tokens: the output is NUL-terminated within the size given, cut only
 *     when full; OAUTHBEARER/GSSAPI/others give "" and CI_OK; for PLAIN the
 *     result equals an independent model (authzid if any, else authcid,
 *     sanitised; malformed without two NULs or with an empty authcid) and
 *     the bytes after the second NUL are never looked at: the harness
 *     passes the token with every byte after that NUL changed and must get
 *     the same answer.
 */
#include <stdbool.h>
#include <string.h>

#include "tests/fuzz/fuzz_common.h"
#include "worker/kafka/clientinfo.h"
#include "worker/kafka/codec.h"

static void
check_str(const char *s, size_t cap, bool cut, const char *what)
{
	size_t n = strnlen(s, cap);

	FUZZ_CHECK(n < cap, "%s not NUL-terminated", what);
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK(s[i] >= 0x20 && s[i] <= 0x7e, "%s byte %zu is %02x", what, i,
		    (unsigned)(uint8_t)s[i]);
	if (cut)
		FUZZ_CHECK(n == cap - 1, "%s cut at %zu of %zu", what, n, cap - 1);
}

static void
check_info(const struct ci_info *ci)
{
	check_str(ci->client_id, sizeof ci->client_id, ci->client_id_cut, "client_id");
	check_str(ci->software_name, sizeof ci->software_name, false, "software_name");
	check_str(ci->software_version, sizeof ci->software_version, false, "software_version");
	check_str(ci->mech_name, sizeof ci->mech_name, false, "mech_name");
	check_str(ci->principal, sizeof ci->principal, ci->principal_cut, "principal");
	FUZZ_CHECK(!ci->client_id_null || ci->client_id[0] == '\0', "null client id with text");
	FUZZ_CHECK(!ci->principal_seen || ci->principal[0] != '\0', "seen without principal");
	FUZZ_CHECK(!ci->software_valid || (ci->software_seen && !ci->software_cut),
	    "valid software unseen or cut");
	FUZZ_CHECK((int)ci->mech >= 0 && ci->mech < SASL_MECH_COUNT, "mech %d", ci->mech);
}

static void
check_status(int rc, const char *err)
{
	FUZZ_CHECK(rc == CI_OK || rc == CI_NEED_MORE || rc == CI_MALFORMED, "status %d", rc);
	if (rc == CI_MALFORMED)
		FUZZ_CHECK(err[0] != '\0', "malformed without a reason");
}

/* One frame (buf at its size prefix, n bytes present, all of it). */
static void
one_frame(struct ci_info *ci, const uint8_t *buf, size_t n, bool raw)
{
	char err[128];
	struct kc_req_header h;
	struct ci_info whole = *ci, part;
	int rc;

	if (raw) {
		err[0] = '\0';
		rc = ci_on_raw_token(&whole, buf, n, err, sizeof err);
		check_status(rc, err);
		check_info(&whole);
		for (size_t k = 0; k < n; k += n / 64 + 1) {
			part = *ci;
			err[0] = '\0';
			int r = ci_on_raw_token(&part, buf, k, err, sizeof err);
			check_status(r, err);
			if (r == CI_NEED_MORE)
				FUZZ_CHECK(memcmp(&part, ci, sizeof part) == 0, "raw need-more changed the info");
			else
				FUZZ_CHECK(r == rc && memcmp(&part, &whole, sizeof part) == 0,
				    "raw prefix %zu answers %d, the whole %d", k, r, rc);
		}
		*ci = whole;
		return;
	}
	if (kc_parse_request_header(buf, n, UINT64_MAX, &h, err, sizeof err) != KC_OK)
		return;
	err[0] = '\0';
	rc = ci_on_request(&whole, buf, n, &h, err, sizeof err);
	check_status(rc, err);
	check_info(&whole);
	for (size_t k = h.header_len; k < n; k += (n - h.header_len) / 64 + 1) {
		part = *ci;
		err[0] = '\0';
		int r = ci_on_request(&part, buf, k, &h, err, sizeof err);
		check_status(r, err);
		check_info(&part);
		if (r == CI_NEED_MORE) {
			/* only the first header's client id may have been noted */
			struct ci_info a = part, b = *ci;
			memcpy(a.client_id, whole.client_id, sizeof a.client_id);
			a.client_id_seen = whole.client_id_seen;
			a.client_id_null = whole.client_id_null;
			a.client_id_cut = whole.client_id_cut;
			b.client_id_seen = whole.client_id_seen;
			b.client_id_null = whole.client_id_null;
			b.client_id_cut = whole.client_id_cut;
			memcpy(b.client_id, whole.client_id, sizeof b.client_id);
			FUZZ_CHECK(memcmp(&a, &b, sizeof a) == 0, "need-more changed the info");
		} else {
			FUZZ_CHECK(r == rc && memcmp(&part, &whole, sizeof part) == 0,
			    "prefix %zu of %zu answers %d, the whole %d", k, n, r, rc);
		}
	}
	*ci = whole;
}

static void
fuzz_frames(const uint8_t *data, size_t size, bool raw_after_v0)
{
	struct ci_info ci;
	size_t off = 0;
	bool next_raw = false;

	ci_init(&ci);
	for (int i = 0; i < 32 && size - off >= 4; i++) {
		int32_t len = kc_get_i32(data + off);
		size_t fl = len < 0 || (size_t)len > size - off - 4 ? size - off : 4 + (size_t)len;
		uint8_t *f = fuzz_dup(data + off, fl);
		struct kc_req_header h;
		char err[64];
		bool v0 = false;

		if (!next_raw && kc_parse_request_header(f, fl, UINT64_MAX, &h, err, sizeof err) == KC_OK)
			v0 = h.api_key == KC_API_SASL_HANDSHAKE && h.api_version == 0;
		one_frame(&ci, f, fl, next_raw);
		next_raw = raw_after_v0 && v0;
		free(f);
		off += fl;
	}
}

/* The PLAIN model: authzid NUL authcid NUL rest. */
static int
plain_model(const uint8_t *t, size_t n, char *out, size_t cap, bool *cut, size_t *pw_at)
{
	const uint8_t *z1 = memchr(t, 0, n), *z2;

	*pw_at = n;
	if (z1 == NULL)
		return CI_MALFORMED;
	z2 = memchr(z1 + 1, 0, n - (size_t)(z1 + 1 - t));
	if (z2 == NULL || z2 == z1 + 1)
		return CI_MALFORMED;
	*pw_at = (size_t)(z2 + 1 - t);
	if (z1 > t)
		*cut = ci_printable(out, cap, t, (size_t)(z1 - t));
	else
		*cut = ci_printable(out, cap, z1 + 1, (size_t)(z2 - z1 - 1));
	return CI_OK;
}

static void
fuzz_token(uint8_t sel, uint8_t cap_byte, const uint8_t *tok_in, size_t n)
{
	static const enum sasl_mech mechs[8] = {
		SASL_MECH_NONE, SASL_MECH_PLAIN, SASL_MECH_SCRAM_SHA_256, SASL_MECH_SCRAM_SHA_512,
		SASL_MECH_OAUTHBEARER, SASL_MECH_GSSAPI, SASL_MECH_OTHER, SASL_MECH_PLAIN,
	};
	enum sasl_mech m = mechs[sel & 7];
	size_t cap = (size_t)cap_byte + 1;
	char *out = malloc(cap), err[128] = "";
	uint8_t *tok = fuzz_dup(tok_in, n);
	bool cut = false;
	int rc = ci_sasl_identity(m, tok, n, out, cap, &cut, err, sizeof err);

	check_status(rc, err);
	FUZZ_CHECK(rc != CI_NEED_MORE, "a whole token needs more");
	check_str(out, cap, cut, "identity");
	if (m != SASL_MECH_PLAIN && m != SASL_MECH_SCRAM_SHA_256 && m != SASL_MECH_SCRAM_SHA_512)
		FUZZ_CHECK(rc == CI_OK && out[0] == '\0' && !cut, "mechanism-only gave an identity");
	if (rc == CI_MALFORMED)
		FUZZ_CHECK(out[0] == '\0' && !cut, "malformed with an identity");
	if (m == SASL_MECH_PLAIN) {
		char *model = malloc(cap);
		bool mcut = false;
		size_t pw_at;
		int mrc = plain_model(tok, n, model, cap, &mcut, &pw_at);

		FUZZ_CHECK(mrc == rc, "PLAIN: %d, model %d", rc, mrc);
		if (rc == CI_OK)
			FUZZ_CHECK(strcmp(out, model) == 0 && cut == mcut, "PLAIN: '%s', model '%s'", out,
			    model);
		/* the password changed: the same answer */
		for (size_t i = pw_at; i < n; i++)
			tok[i] ^= 0xA5;
		char *again = malloc(cap);
		bool acut = false;
		int arc = ci_sasl_identity(m, tok, n, again, cap, &acut, err, sizeof err);
		FUZZ_CHECK(arc == rc && strcmp(again, out) == 0 && acut == cut,
		    "PLAIN depends on the password");
		free(again);
		free(model);
	}
	free(tok);
	free(out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	if (data[0] & 0x80)
		fuzz_token(data[0], data[1], data + 2, size - 2);
	else
		fuzz_frames(data + 1, size - 1, (data[0] & 0x40) != 0);
	return 0;
}
