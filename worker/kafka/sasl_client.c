/*
 * sasl_client — ferry's own SASL client (PLAIN, SCRAM-SHA-256/512) and the
 * SaslHandshake / SaslAuthenticate frames it uses; see sasl_client.h.
 *
 * Sources: RFC 5802 (SCRAM), RFC 7677 (SCRAM-SHA-256 and its test vector),
 * RFC 4616 (PLAIN), apache/kafka SaslHandshake*.json and
 * SaslAuthenticate*.json (fields, versions), ScramSaslServer and
 * ScramFormatter (no SASLprep, user names escaped "=2C" / "=3D").
 */
#include "worker/kafka/sasl_client.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sodium.h>

#include "worker/kafka/codec.h"

#define SC_ERR(err, errlen, ...) do { if (err) snprintf(err, errlen, __VA_ARGS__); } while (0)
#define SC_B64(n) sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL)

const char *
sasl_client_state_str(enum sasl_client_state s)
{
	switch (s) {
	case SASL_CLIENT_START: return "start";
	case SASL_CLIENT_FIRST_SENT: return "first-sent";
	case SASL_CLIENT_FINAL_SENT: return "final-sent";
	case SASL_CLIENT_DONE: return "done";
	case SASL_CLIENT_FAILED: return "failed";
	case SASL_CLIENT_STATE_COUNT: break;
	}
	return "unknown";
}

bool
sasl_client_mech_ok(enum sasl_mech m)
{
	return m == SASL_MECH_PLAIN || m == SASL_MECH_SCRAM_SHA_256 || m == SASL_MECH_SCRAM_SHA_512;
}

static const EVP_MD *
sc_md(enum sasl_mech m)
{
	return m == SASL_MECH_SCRAM_SHA_512 ? EVP_sha512() : EVP_sha256();
}

static bool
sc_scram(const struct sasl_client *c)
{
	return c->mech == SASL_MECH_SCRAM_SHA_256 || c->mech == SASL_MECH_SCRAM_SHA_512;
}

/* A nonce character (RFC 5802 "printable": %x21-2B / %x2D-7E). */
static bool
sc_nonce_char(uint8_t ch)
{
	return ch >= 0x21 && ch <= 0x7e && ch != ',';
}

static int
sc_fail(struct sasl_client *c, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
sc_fail(struct sasl_client *c, char *err, size_t errlen, const char *fmt, ...)
{
	c->state = SASL_CLIENT_FAILED;
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

int
sasl_client_init(struct sasl_client *c, enum sasl_mech mech, const char *user,
		 const uint8_t *password, size_t password_len, const char *nonce,
		 char *err, size_t errlen)
{
	memset(c, 0, sizeof *c);
	c->mech = mech;
	if (!sasl_client_mech_ok(mech))
		return sc_fail(c, err, errlen, "SASL mechanism %s: ferry authenticates with PLAIN, "
		    "SCRAM-SHA-256 or SCRAM-SHA-512", sasl_mech_str(mech));
	size_t ulen = user ? strlen(user) : 0;
	if (ulen == 0 || ulen > SASL_CLIENT_USER_MAX)
		return sc_fail(c, err, errlen, "user name of %zu bytes (1-%d)", ulen,
		    SASL_CLIENT_USER_MAX);
	if (password_len == 0 || password_len > SASL_CLIENT_PASSWORD_MAX)
		return sc_fail(c, err, errlen, "password of %zu bytes (1-%d)", password_len,
		    SASL_CLIENT_PASSWORD_MAX);
	if (mech == SASL_MECH_PLAIN && memchr(password, 0, password_len))
		return sc_fail(c, err, errlen, "PLAIN: the password holds a NUL byte");
	memcpy(c->user, user, ulen + 1);
	c->password = password;
	c->password_len = password_len;
	if (mech == SASL_MECH_PLAIN)
		return 0;
	size_t nlen = nonce ? strlen(nonce) : 0;
	if (nlen == 0 || nlen > SASL_CLIENT_NONCE_MAX)
		return sc_fail(c, err, errlen, "client nonce of %zu characters (1-%d)", nlen,
		    SASL_CLIENT_NONCE_MAX);
	for (size_t i = 0; i < nlen; i++)
		if (!sc_nonce_char((uint8_t)nonce[i]))
			return sc_fail(c, err, errlen, "client nonce: character %zu is not printable "
			    "or is ','", i);
	/* client-first-message-bare: n=saslname,r=c-nonce, with ',' and '='
	 * of the name escaped */
	size_t o = 0;
	o += (size_t)snprintf(c->first_bare, sizeof c->first_bare, "n=");
	for (size_t i = 0; i < ulen; i++) {
		const char *esc = user[i] == ',' ? "=2C" : user[i] == '=' ? "=3D" : NULL;
		if (esc) {
			memcpy(c->first_bare + o, esc, 3);
			o += 3;
		} else {
			c->first_bare[o++] = user[i];
		}
	}
	snprintf(c->first_bare + o, sizeof c->first_bare - o, ",r=%s", nonce);
	c->nonce_len = nlen;
	c->digest_len = (size_t)EVP_MD_get_size(sc_md(mech));
	return 0;
}

int
sasl_client_first(struct sasl_client *c, uint8_t *out, size_t cap, size_t *len, char *err,
		  size_t errlen)
{
	if (c->state != SASL_CLIENT_START)
		return sc_fail(c, err, errlen, "first token asked in state %s",
		    sasl_client_state_str(c->state));
	if (c->mech == SASL_MECH_PLAIN) {
		/* authzid (empty) NUL authcid NUL passwd */
		size_t ulen = strlen(c->user), n = 2 + ulen + c->password_len;
		if (n > cap)
			return sc_fail(c, err, errlen, "PLAIN token of %zu bytes does not fit", n);
		out[0] = 0;
		memcpy(out + 1, c->user, ulen);
		out[1 + ulen] = 0;
		memcpy(out + 2 + ulen, c->password, c->password_len);
		*len = n;
	} else {
		size_t n = 3 + strlen(c->first_bare);
		if (n > cap)
			return sc_fail(c, err, errlen, "client-first of %zu bytes does not fit", n);
		memcpy(out, "n,,", 3);
		memcpy(out + 3, c->first_bare, n - 3);
		*len = n;
	}
	c->state = SASL_CLIENT_FIRST_SENT;
	return 0;
}

/* Printable text of a broker's token for a message (cut). */
static void
sc_show(const uint8_t *in, size_t inlen, char *out, size_t outlen)
{
	size_t k = inlen < outlen - 1 ? inlen : outlen - 1;
	for (size_t i = 0; i < k; i++)
		out[i] = in[i] >= 0x20 && in[i] < 0x7f ? (char)in[i] : '?';
	out[k] = 0;
}

/* The value of attribute `name` at *p in [*p, end): "X=value" up to ',' or
 * the end; *p moves past the comma. false when the attribute is not next. */
static bool
sc_attr(const uint8_t **p, const uint8_t *end, char name, const uint8_t **v, size_t *vlen)
{
	const uint8_t *s = *p;
	if (end - s < 2 || s[0] != (uint8_t)name || s[1] != '=')
		return false;
	s += 2;
	const uint8_t *comma = memchr(s, ',', (size_t)(end - s));
	*v = s;
	*vlen = (size_t)((comma ? comma : end) - s);
	*p = comma ? comma + 1 : end;
	return true;
}

/* HMAC(key, data) into out (the digest's length). */
static bool
sc_hmac(const EVP_MD *md, const uint8_t *key, size_t klen, const void *data, size_t dlen,
	uint8_t *out)
{
	unsigned int n = 0;
	return HMAC(md, key, (int)klen, data, dlen, out, &n) != NULL;
}

/* server-first -> client-final; the ServerSignature kept for the end. */
static int
sc_server_first(struct sasl_client *c, const uint8_t *in, size_t inlen, uint8_t *out,
		size_t cap, size_t *len, char *err, size_t errlen)
{
	char shown[80];
	const uint8_t *p = in, *end = in + inlen, *nonce, *salt64, *iter;
	size_t nonce_len, salt64_len, iter_len;

	if (inlen > SASL_CLIENT_SERVER_FIRST_MAX)
		return sc_fail(c, err, errlen, "SCRAM server-first of %zu bytes (at most %d)",
		    inlen, SASL_CLIENT_SERVER_FIRST_MAX);
	for (size_t i = 0; i < inlen; i++)
		if (in[i] < 0x20 || in[i] > 0x7e)
			return sc_fail(c, err, errlen, "SCRAM server-first: byte %zu is not "
			    "printable", i);
	sc_show(in, inlen, shown, sizeof shown);
	if (inlen >= 2 && in[0] == 'm' && in[1] == '=')
		return sc_fail(c, err, errlen, "SCRAM server-first asks for a mandatory "
		    "extension: '%s'", shown);
	if (inlen >= 2 && in[0] == 'e' && in[1] == '=')
		return sc_fail(c, err, errlen, "SCRAM: the broker says '%s'", shown);
	if (!sc_attr(&p, end, 'r', &nonce, &nonce_len) ||
	    !sc_attr(&p, end, 's', &salt64, &salt64_len) ||
	    !sc_attr(&p, end, 'i', &iter, &iter_len))
		return sc_fail(c, err, errlen, "SCRAM server-first is not r=...,s=...,i=...: '%s'",
		    shown);
	const char *cnonce = c->first_bare + strlen(c->first_bare) - c->nonce_len;
	if (nonce_len <= c->nonce_len || memcmp(nonce, cnonce, c->nonce_len) != 0)
		return sc_fail(c, err, errlen, "SCRAM server-first: the nonce does not extend "
		    "ferry's");
	for (size_t i = 0; i < nonce_len; i++)
		if (!sc_nonce_char(nonce[i]))
			return sc_fail(c, err, errlen, "SCRAM server-first: bad nonce character");
	uint64_t iterations = 0;
	if (iter_len == 0 || iter_len > 9)
		iterations = UINT64_MAX;
	for (size_t i = 0; i < iter_len && iterations != UINT64_MAX; i++) {
		if (iter[i] < '0' || iter[i] > '9')
			iterations = UINT64_MAX;
		else
			iterations = iterations * 10 + (uint64_t)(iter[i] - '0');
	}
	if (iterations == UINT64_MAX)
		return sc_fail(c, err, errlen, "SCRAM server-first: iteration count is not a "
		    "number: '%s'", shown);
	if (iterations < SASL_CLIENT_MIN_ITERATIONS || iterations > SASL_CLIENT_MAX_ITERATIONS)
		return sc_fail(c, err, errlen, "SCRAM server-first asks for %llu iterations "
		    "(ferry accepts %d-%d)", (unsigned long long)iterations,
		    SASL_CLIENT_MIN_ITERATIONS, SASL_CLIENT_MAX_ITERATIONS);
	uint8_t salt[128];
	size_t salt_len = 0;
	const char *b64end = NULL;
	if (salt64_len == 0 || sodium_base642bin(salt, sizeof salt, (const char *)salt64,
	    salt64_len, NULL, &salt_len, &b64end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
	    b64end != (const char *)salt64 + salt64_len || salt_len == 0)
		return sc_fail(c, err, errlen, "SCRAM server-first: the salt is not base64 of "
		    "1-%zu bytes", sizeof salt);

	/* client-final-message-without-proof: c=base64("n,,"),r=nonce */
	char without_proof[SASL_CLIENT_SERVER_FIRST_MAX + 16];
	int wl = snprintf(without_proof, sizeof without_proof, "c=biws,r=%.*s", (int)nonce_len,
	    (const char *)nonce);
	size_t bare_len = strlen(c->first_bare);
	size_t am_len = bare_len + 1 + inlen + 1 + (size_t)wl;
	char auth_message[sizeof c->first_bare + SASL_CLIENT_SERVER_FIRST_MAX +
	    sizeof without_proof + 2];
	memcpy(auth_message, c->first_bare, bare_len);
	auth_message[bare_len] = ',';
	memcpy(auth_message + bare_len + 1, in, inlen);
	auth_message[bare_len + 1 + inlen] = ',';
	memcpy(auth_message + bare_len + 2 + inlen, without_proof, (size_t)wl);

	const EVP_MD *md = sc_md(c->mech);
	size_t dl = c->digest_len;
	uint8_t salted[64], client_key[64], stored_key[64], server_key[64], client_sig[64],
	    proof[64];
	unsigned int sl = 0;
	bool ok = PKCS5_PBKDF2_HMAC((const char *)c->password, (int)c->password_len, salt,
	    (int)salt_len, (int)iterations, md, (int)dl, salted) == 1 &&
	    sc_hmac(md, salted, dl, "Client Key", 10, client_key) &&
	    EVP_Digest(client_key, dl, stored_key, &sl, md, NULL) == 1 &&
	    sc_hmac(md, salted, dl, "Server Key", 10, server_key) &&
	    sc_hmac(md, stored_key, dl, auth_message, am_len, client_sig) &&
	    sc_hmac(md, server_key, dl, auth_message, am_len, c->server_signature);
	for (size_t i = 0; i < dl; i++)
		proof[i] = client_key[i] ^ client_sig[i];
	char proof64[SC_B64(64)];
	sodium_bin2base64(proof64, sizeof proof64, proof, dl, sodium_base64_VARIANT_ORIGINAL);
	sodium_memzero(salted, sizeof salted);
	sodium_memzero(client_key, sizeof client_key);
	sodium_memzero(stored_key, sizeof stored_key);
	sodium_memzero(server_key, sizeof server_key);
	sodium_memzero(client_sig, sizeof client_sig);
	sodium_memzero(proof, sizeof proof);
	sodium_memzero(auth_message, sizeof auth_message);
	if (!ok) {
		sodium_memzero(proof64, sizeof proof64);
		return sc_fail(c, err, errlen, "SCRAM: the OpenSSL computation failed");
	}
	size_t n = (size_t)wl + 3 + strlen(proof64);
	if (n > cap) {
		sodium_memzero(proof64, sizeof proof64);
		return sc_fail(c, err, errlen, "client-final of %zu bytes does not fit", n);
	}
	memcpy(out, without_proof, (size_t)wl);
	memcpy(out + wl, ",p=", 3);
	memcpy(out + wl + 3, proof64, strlen(proof64));
	sodium_memzero(proof64, sizeof proof64);
	*len = n;
	c->state = SASL_CLIENT_FINAL_SENT;
	return 0;
}

/* server-final: "v=ServerSignature" (checked) or "e=error". */
static int
sc_server_final(struct sasl_client *c, const uint8_t *in, size_t inlen, char *err,
		size_t errlen)
{
	char shown[80];
	const uint8_t *p = in, *end = in + inlen, *v;
	size_t vlen;
	uint8_t sig[64];
	size_t sig_len = 0;
	const char *b64end = NULL;

	sc_show(in, inlen, shown, sizeof shown);
	if (sc_attr(&p, end, 'e', &v, &vlen))
		return sc_fail(c, err, errlen, "SCRAM: the broker says '%s'", shown);
	if (!sc_attr(&p, end, 'v', &v, &vlen))
		return sc_fail(c, err, errlen, "SCRAM server-final is not v=...: '%s'", shown);
	if (sodium_base642bin(sig, sizeof sig, (const char *)v, vlen, NULL, &sig_len, &b64end,
	    sodium_base64_VARIANT_ORIGINAL) != 0 || b64end != (const char *)v + vlen ||
	    sig_len != c->digest_len || CRYPTO_memcmp(sig, c->server_signature, sig_len) != 0)
		return sc_fail(c, err, errlen, "SCRAM: the broker's server signature does not "
		    "verify (it does not know the password: not the broker configured?)");
	sodium_memzero(c->server_signature, sizeof c->server_signature);
	c->state = SASL_CLIENT_DONE;
	return 0;
}

int
sasl_client_step(struct sasl_client *c, const uint8_t *in, size_t inlen, uint8_t *out,
		 size_t cap, size_t *len, char *err, size_t errlen)
{
	*len = 0;
	switch (c->state) {
	case SASL_CLIENT_FIRST_SENT:
		if (!sc_scram(c)) {
			/* PLAIN: one round; the broker's token (empty) ends it */
			c->state = SASL_CLIENT_DONE;
			return 0;
		}
		return sc_server_first(c, in, inlen, out, cap, len, err, errlen);
	case SASL_CLIENT_FINAL_SENT:
		return sc_server_final(c, in, inlen, err, errlen);
	default:
		return sc_fail(c, err, errlen, "a broker token in state %s",
		    sasl_client_state_str(c->state));
	}
}

bool
sasl_client_done(const struct sasl_client *c)
{
	return c->state == SASL_CLIENT_DONE;
}

void
sasl_client_wipe(struct sasl_client *c)
{
	sodium_memzero(c, sizeof *c);
}

/* ---- frames ---- */

size_t
sasl_client_handshake_request(uint8_t *buf, size_t cap, int32_t corr, const char *client_id,
			      const char *mechanism)
{
	struct kc_writer w;

	kc_wr_init(&w, buf, cap);
	kc_wr_request_header(&w, KC_API_SASL_HANDSHAKE, 1, corr, client_id);
	kc_wr_string(&w, false, mechanism, strlen(mechanism));
	return kc_wr_frame_end(&w, buf);
}

/* Appends s (n bytes, shown printable) to out at *o, cut to fit. */
static void
sc_append(char *out, size_t cap, size_t *o, const char *sep, const uint8_t *s, size_t n)
{
	for (const char *q = sep; *q && *o + 1 < cap; q++)
		out[(*o)++] = *q;
	for (size_t i = 0; i < n && *o + 1 < cap; i++)
		out[(*o)++] = s[i] >= 0x20 && s[i] < 0x7f ? (char)s[i] : '?';
	out[*o] = 0;
}

static int
sc_rd_end(const struct kc_reader *r, char *err, size_t errlen)
{
	if (kc_rd_ok(r))
		return KC_OK;
	/* the whole frame is given: running out of it is malformed */
	kc_set_err(err, errlen, r->err ? r->err : "truncated");
	return KC_MALFORMED;
}

int
sasl_client_handshake_response(const uint8_t *frame, size_t len, int16_t *error, char *mechs,
			       size_t mechs_len, char *err, size_t errlen)
{
	struct kc_reader r;
	size_t o = 0;

	if (mechs_len)
		mechs[0] = 0;
	kc_rd_init(&r, frame, len);
	kc_rd_skip(&r, 8);            /* size, correlation id (header v0) */
	*error = kc_rd_i16(&r);
	int32_t n = kc_rd_array(&r, false, false, 2);
	for (int32_t i = 0; i < n && kc_rd_ok(&r); i++) {
		const uint8_t *s = NULL;
		int32_t sl = kc_rd_string(&r, false, false, &s);
		if (kc_rd_ok(&r) && mechs_len)
			sc_append(mechs, mechs_len, &o, i ? ", " : "", s, (size_t)sl);
	}
	return sc_rd_end(&r, err, errlen);
}

size_t
sasl_client_authenticate_request(uint8_t *buf, size_t cap, int16_t version, int32_t corr,
				 const char *client_id, const uint8_t *token, size_t token_len)
{
	struct kc_writer w;
	bool flex = version >= 2;

	if (version < 0 || version > 2 || token_len > INT32_MAX - 1)
		return 0;
	kc_wr_init(&w, buf, cap);
	kc_wr_request_header(&w, KC_API_SASL_AUTHENTICATE, version, corr, client_id);
	if (flex)
		kc_wr_uvarint(&w, (uint32_t)token_len + 1);
	else
		kc_wr_i32(&w, (int32_t)token_len);
	kc_wr_bytes(&w, token, token_len);
	if (flex)
		kc_wr_uvarint(&w, 0);	/* tags */
	return kc_wr_frame_end(&w, buf);
}

int
sasl_client_authenticate_response(const uint8_t *frame, size_t len, int16_t version,
				  int16_t *error, char *msg, size_t msg_len,
				  const uint8_t **token, size_t *token_len, char *err,
				  size_t errlen)
{
	struct kc_reader r;
	bool flex = version >= 2;
	const uint8_t *s = NULL;
	size_t o = 0;

	if (msg_len)
		msg[0] = 0;
	*token = NULL;
	*token_len = 0;
	kc_rd_init(&r, frame, len);
	kc_rd_skip(&r, 8);            /* size, correlation id */
	if (flex)
		kc_rd_tags(&r);       /* response header v1 */
	*error = kc_rd_i16(&r);
	int32_t ml = kc_rd_string(&r, flex, true, &s);
	if (kc_rd_ok(&r) && ml > 0 && msg_len)
		sc_append(msg, msg_len, &o, "", s, (size_t)ml);
	int32_t tl = kc_rd_bytes(&r, flex, false, &s);
	if (version >= 1)
		(void)kc_rd_i64(&r);  /* session_lifetime_ms */
	if (flex)
		kc_rd_tags(&r);
	if (kc_rd_ok(&r)) {
		*token = s;
		*token_len = (size_t)tl;
	}
	return sc_rd_end(&r, err, errlen);
}
