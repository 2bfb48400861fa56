/*
 * ferry's own SASL client (worker/kafka/sasl_client.c): the RFC 7677
 * SCRAM-SHA-256 test vector, a SCRAM-SHA-512 vector computed apart (a
 * Python PBKDF2/HMAC loop over hashlib, the same inputs as RFC 7677),
 * PLAIN, every refusal of a broker's token (nonce, iterations, salt,
 * extensions, server signature, errors), and the SaslHandshake /
 * SaslAuthenticate frames byte for byte. No sockets.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "worker/kafka/codec.h"
#include "worker/kafka/sasl_client.h"

#define PW "pencil"
#define CNONCE "rOprNGfwEbeRWgbNEkqO"
#define SFIRST "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
#define CFINAL_WP "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
/* RFC 7677 section 3 */
#define SHA256_FINAL CFINAL_WP ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
#define SHA256_SFINAL "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
/* the same exchange with SHA-512, computed independently */
#define SHA512_FINAL CFINAL_WP ",p=gMGXRcevScNtxZ6/8lQYpGtnsNAc3mGcmNomv+xnoOMw+3R2xNJdMNnzMlTN8PPC6wdp6dybEmDYXYTxwnYPJQ=="
#define SHA512_SFINAL "v=ZQnYEgWQMFmmsM8aQMF0nDDCy/AgCzkwk8CmMZYcMg0vSVlKDanekLtifDSeVGT4+5ZxXnJq199RVG2rR7N7Zw=="

static uint8_t out[SASL_CLIENT_TOKEN_MAX];
static char err[256];

static void
start(struct sasl_client *c, enum sasl_mech m, const char *user, const char *pw)
{
	size_t len = 0;
	cr_assert_eq(sasl_client_init(c, m, user, (const uint8_t *)pw, strlen(pw), CNONCE, err,
	    sizeof err), 0, "%s", err);
	cr_assert_eq(sasl_client_first(c, out, sizeof out, &len, err, sizeof err), 0, "%s", err);
	if (m != SASL_MECH_PLAIN) {
		char want[600];
		snprintf(want, sizeof want, "n,,n=%s,r=" CNONCE, user);
		cr_assert_eq(len, strlen(want));
		cr_assert_arr_eq(out, want, len, "client-first %.*s", (int)len, out);
	}
	cr_assert_eq(c->state, SASL_CLIENT_FIRST_SENT);
}

/* Feed a server token; 0 or -1 as sasl_client_step, the token in out. */
static int
step(struct sasl_client *c, const char *tok, size_t *len)
{
	err[0] = 0;
	return sasl_client_step(c, (const uint8_t *)tok, strlen(tok), out, sizeof out, len, err,
	    sizeof err);
}

static void
full_exchange(enum sasl_mech m, const char *final, const char *sfinal)
{
	struct sasl_client c;
	size_t len = 0;
	start(&c, m, "user", PW);
	cr_assert_eq(step(&c, SFIRST, &len), 0, "%s", err);
	cr_assert_eq(len, strlen(final), "client-final %.*s", (int)len, out);
	cr_assert_arr_eq(out, final, len, "client-final %.*s", (int)len, out);
	cr_assert_eq(c.state, SASL_CLIENT_FINAL_SENT);
	cr_assert_eq(step(&c, sfinal, &len), 0, "%s", err);
	cr_assert_eq(len, 0);
	cr_assert(sasl_client_done(&c));
	sasl_client_wipe(&c);
	cr_assert_null(c.password);
}

Test(sasl_client, rfc7677_scram_sha_256)
{
	full_exchange(SASL_MECH_SCRAM_SHA_256, SHA256_FINAL, SHA256_SFINAL);
}

Test(sasl_client, scram_sha_512_vector)
{
	full_exchange(SASL_MECH_SCRAM_SHA_512, SHA512_FINAL, SHA512_SFINAL);
}

/* A refused server token: -1, state FAILED, a reason, no password in it. */
static void
refused(enum sasl_mech m, const char *first, const char *final, const char *why)
{
	struct sasl_client c;
	size_t len = 0;
	start(&c, m, "user", PW);
	if (final == NULL) {
		cr_assert_eq(step(&c, first, &len), -1, "server-first '%s' accepted", first);
	} else {
		cr_assert_eq(step(&c, first, &len), 0, "%s", err);
		cr_assert_eq(step(&c, final, &len), -1, "server-final '%s' accepted", final);
	}
	cr_assert_eq(c.state, SASL_CLIENT_FAILED);
	cr_assert_not_null(strstr(err, why), "reason '%s' lacks '%s'", err, why);
	cr_assert_null(strstr(err, PW), "the reason shows the password: %s", err);
	cr_assert_eq(step(&c, SFIRST, &len), -1, "a failed exchange went on");
}

Test(sasl_client, server_signature_checked)
{
	/* the SHA-256 signature on a SHA-512 exchange, and one bit off */
	refused(SASL_MECH_SCRAM_SHA_512, SFIRST, SHA256_SFINAL, "does not verify");
	refused(SASL_MECH_SCRAM_SHA_256, SFIRST,
	    "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G5=", "does not verify");
	refused(SASL_MECH_SCRAM_SHA_256, SFIRST, "v=", "does not verify");
	refused(SASL_MECH_SCRAM_SHA_256, SFIRST, "v=!!!!", "does not verify");
	refused(SASL_MECH_SCRAM_SHA_256, SFIRST, "x=1", "not v=");
	refused(SASL_MECH_SCRAM_SHA_256, SFIRST, "e=invalid-proof", "invalid-proof");
}

Test(sasl_client, server_first_refusals)
{
	enum sasl_mech m = SASL_MECH_SCRAM_SHA_256;
	refused(m, "r=someoneelse123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", NULL, "does not extend");
	refused(m, "r=" CNONCE ",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", NULL, "does not extend");
	refused(m, "r=" CNONCE "abc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1", NULL, "1 iterations");
	refused(m, "r=" CNONCE "abc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095", NULL, "4095 iterations");
	refused(m, "r=" CNONCE "abc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1000000", NULL, "1000000");
	refused(m, "r=" CNONCE "abc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=99999999999", NULL, "not a number");
	refused(m, "r=" CNONCE "abc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4k", NULL, "not a number");
	refused(m, "r=" CNONCE "abc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=", NULL, "not a number");
	refused(m, "r=" CNONCE "abc,s=***,i=4096", NULL, "salt");
	refused(m, "r=" CNONCE "abc,s=,i=4096", NULL, "salt");
	refused(m, "r=" CNONCE "abc,i=4096", NULL, "not r=...,s=...,i=...");
	refused(m, "s=W22ZaJ0SNY7soEsUEjb6gQ==,r=" CNONCE "abc,i=4096", NULL, "not r=");
	refused(m, "m=ext,r=" CNONCE "abc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", NULL, "mandatory");
	refused(m, "e=unknown-user", NULL, "unknown-user");
	refused(m, "r=" CNONCE "a\tb,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", NULL, "not printable");
	char big[SASL_CLIENT_SERVER_FIRST_MAX + 10];
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = 0;
	refused(m, big, NULL, "bytes (at most");
}

Test(sasl_client, server_first_extensions_ignored)
{
	/* attributes after i= (extensions a broker may add) are ignored */
	struct sasl_client c;
	size_t len = 0;
	start(&c, SASL_MECH_SCRAM_SHA_256, "user", PW);
	cr_assert_eq(step(&c, SFIRST ",x=ext", &len), 0, "%s", err);
	cr_assert_gt(len, 0);
}

Test(sasl_client, plain)
{
	struct sasl_client c;
	size_t len = 0;
	cr_assert_eq(sasl_client_init(&c, SASL_MECH_PLAIN, "alice", (const uint8_t *)"s3cret", 6,
	    NULL, err, sizeof err), 0, "%s", err);
	cr_assert_eq(sasl_client_first(&c, out, sizeof out, &len, err, sizeof err), 0);
	cr_assert_eq(len, 13);
	cr_assert_arr_eq(out, "\0alice\0s3cret", 13);
	cr_assert_eq(step(&c, "", &len), 0, "%s", err);
	cr_assert_eq(len, 0);
	cr_assert(sasl_client_done(&c));
	cr_assert_eq(step(&c, "", &len), -1, "a token after the end was taken");
}

Test(sasl_client, user_name_escaped)
{
	struct sasl_client c;
	size_t len = 0;
	cr_assert_eq(sasl_client_init(&c, SASL_MECH_SCRAM_SHA_512, "a,b=c", (const uint8_t *)PW,
	    strlen(PW), CNONCE, err, sizeof err), 0, "%s", err);
	cr_assert_eq(sasl_client_first(&c, out, sizeof out, &len, err, sizeof err), 0, "%s", err);
	cr_assert_eq(len, strlen("n,,n=a=2Cb=3Dc,r=" CNONCE));
	cr_assert_arr_eq(out, "n,,n=a=2Cb=3Dc,r=" CNONCE, len);
}

Test(sasl_client, init_refusals)
{
	struct sasl_client c;
	const uint8_t *pw = (const uint8_t *)"pw";
	cr_assert_eq(sasl_client_init(&c, SASL_MECH_GSSAPI, "u", pw, 2, CNONCE, err, sizeof err), -1);
	cr_assert_not_null(strstr(err, "GSSAPI"), "%s", err);
	cr_assert_eq(sasl_client_init(&c, SASL_MECH_OAUTHBEARER, "u", pw, 2, CNONCE, err,
	    sizeof err), -1);
	cr_assert_eq(sasl_client_init(&c, SASL_MECH_PLAIN, "", pw, 2, NULL, err, sizeof err), -1);
	cr_assert_eq(sasl_client_init(&c, SASL_MECH_PLAIN, "u", pw, 0, NULL, err, sizeof err), -1);
	cr_assert_eq(sasl_client_init(&c, SASL_MECH_PLAIN, "u", (const uint8_t *)"a\0b", 3, NULL, err,
	    sizeof err), -1);
	cr_assert_not_null(strstr(err, "NUL"), "%s", err);
	cr_assert_eq(sasl_client_init(&c, SASL_MECH_SCRAM_SHA_256, "u", pw, 2, "a,b", err,
	    sizeof err), -1);
	cr_assert_eq(sasl_client_init(&c, SASL_MECH_SCRAM_SHA_256, "u", pw, 2, "", err,
	    sizeof err), -1);
	char user[SASL_CLIENT_USER_MAX + 2];
	memset(user, 'u', sizeof user - 1);
	user[sizeof user - 1] = 0;
	cr_assert_eq(sasl_client_init(&c, SASL_MECH_SCRAM_SHA_256, user, pw, 2, CNONCE, err,
	    sizeof err), -1);
	user[SASL_CLIENT_USER_MAX] = 0;   /* the longest name, every byte escaped, fits */
	memset(user, ',', SASL_CLIENT_USER_MAX);
	cr_assert_eq(sasl_client_init(&c, SASL_MECH_SCRAM_SHA_256, user, pw, 2, CNONCE, err,
	    sizeof err), 0, "%s", err);
	size_t len;
	cr_assert_eq(sasl_client_first(&c, out, sizeof out, &len, err, sizeof err), 0, "%s", err);
	cr_assert_eq(len, 3 + 2 + 3 * SASL_CLIENT_USER_MAX + 3 + strlen(CNONCE));
}

/* ---- frames ---- */

Test(sasl_client, handshake_request_bytes)
{
	uint8_t buf[64];
	size_t n = sasl_client_handshake_request(buf, sizeof buf, 5, "ferry", "SCRAM-SHA-512");
	static const uint8_t want[] = {
		0, 0, 0, 30, 0, 17, 0, 1, 0, 0, 0, 5, 0, 5, 'f', 'e', 'r', 'r', 'y',
		0, 13, 'S', 'C', 'R', 'A', 'M', '-', 'S', 'H', 'A', '-', '5', '1', '2',
	};
	cr_assert_eq(n, sizeof want);
	cr_assert_arr_eq(buf, want, n);
	cr_assert_eq(sasl_client_handshake_request(buf, 20, 5, "ferry", "PLAIN"), 0);
}

Test(sasl_client, handshake_response)
{
	/* error 33 UNSUPPORTED_SASL_MECHANISM, mechanisms [PLAIN, SCRAM-SHA-256] */
	static const uint8_t f[] = {
		0, 0, 0, 32, 0, 0, 0, 5, 0, 33, 0, 0, 0, 2, 0, 5, 'P', 'L', 'A', 'I', 'N',
		0, 13, 'S', 'C', 'R', 'A', 'M', '-', 'S', 'H', 'A', '-', '2', '5', '6',
	};
	int16_t e = 0;
	char mechs[64];
	cr_assert_eq(sasl_client_handshake_response(f, sizeof f, &e, mechs, sizeof mechs, err,
	    sizeof err), KC_OK, "%s", err);
	cr_assert_eq(e, 33);
	cr_assert_str_eq(mechs, "PLAIN, SCRAM-SHA-256");
	/* cut to fit */
	cr_assert_eq(sasl_client_handshake_response(f, sizeof f, &e, mechs, 8, err, sizeof err),
	    KC_OK);
	cr_assert_str_eq(mechs, "PLAIN, ");
	/* truncated anywhere: malformed */
	for (size_t n = 0; n < sizeof f; n++)
		cr_assert_eq(sasl_client_handshake_response(f, n, &e, mechs, sizeof mechs, err,
		    sizeof err), KC_MALFORMED, "%zu bytes parsed", n);
}

Test(sasl_client, authenticate_request_bytes)
{
	uint8_t buf[64];
	const uint8_t tok[] = { 'a', 0, 'b' };
	/* v2: header v2 (tags), compact bytes, tags */
	size_t n = sasl_client_authenticate_request(buf, sizeof buf, 2, 9, "f", tok, 3);
	static const uint8_t v2[] = {
		0, 0, 0, 17, 0, 36, 0, 2, 0, 0, 0, 9, 0, 1, 'f', 0, 4, 'a', 0, 'b', 0,
	};
	cr_assert_eq(n, sizeof v2);
	cr_assert_arr_eq(buf, v2, n);
	/* v0: header v1, INT32 bytes */
	n = sasl_client_authenticate_request(buf, sizeof buf, 0, 9, "f", tok, 3);
	static const uint8_t v0[] = {
		0, 0, 0, 18, 0, 36, 0, 0, 0, 0, 0, 9, 0, 1, 'f', 0, 0, 0, 3, 'a', 0, 'b',
	};
	cr_assert_eq(n, sizeof v0);
	cr_assert_arr_eq(buf, v0, n);
	cr_assert_eq(sasl_client_authenticate_request(buf, sizeof buf, 3, 9, "f", tok, 3), 0);
	cr_assert_eq(sasl_client_authenticate_request(buf, 10, 2, 9, "f", tok, 3), 0);
}

Test(sasl_client, authenticate_response)
{
	int16_t e;
	char msg[64];
	const uint8_t *tok;
	size_t tl;
	/* v2: header v1 (tags), error 58, compact message "bad", compact
	 * bytes "", session lifetime, tags */
	static const uint8_t v2[] = {
		0, 0, 0, 21, 0, 0, 0, 9, 0, 0, 58, 4, 'b', 'a', 'd', 1,
		0, 0, 0, 0, 0, 0, 0, 0, 0,
	};
	cr_assert_eq(sasl_client_authenticate_response(v2, sizeof v2, 2, &e, msg, sizeof msg, &tok,
	    &tl, err, sizeof err), KC_OK, "%s", err);
	cr_assert_eq(e, 58);
	cr_assert_str_eq(msg, "bad");
	cr_assert_eq(tl, 0);
	for (size_t n = 0; n < sizeof v2; n++)
		cr_assert_eq(sasl_client_authenticate_response(v2, n, 2, &e, msg, sizeof msg, &tok,
		    &tl, err, sizeof err), KC_MALFORMED, "%zu bytes parsed", n);
	/* v1: error 0, null message, token "v=x", session lifetime */
	static const uint8_t v1[] = {
		0, 0, 0, 23, 0, 0, 0, 9, 0, 0, 0xff, 0xff, 0, 0, 0, 3, 'v', '=', 'x',
		0, 0, 0, 0, 0, 0, 0x0e, 0x10,
	};
	cr_assert_eq(sasl_client_authenticate_response(v1, sizeof v1, 1, &e, msg, sizeof msg, &tok,
	    &tl, err, sizeof err), KC_OK, "%s", err);
	cr_assert_eq(e, 0);
	cr_assert_str_eq(msg, "");
	cr_assert_eq(tl, 3);
	cr_assert_arr_eq(tok, "v=x", 3);
	/* v0: no session lifetime */
	cr_assert_eq(sasl_client_authenticate_response(v1, sizeof v1 - 8, 0, &e, msg, sizeof msg,
	    &tok, &tl, err, sizeof err), KC_OK, "%s", err);
	cr_assert_eq(tl, 3);
	/* a message with control bytes is shown printable */
	static const uint8_t ctl[] = {
		0, 0, 0, 15, 0, 0, 0, 9, 0, 58, 0, 3, 'a', '\n', 'b', 0, 0, 0, 0,
	};
	cr_assert_eq(sasl_client_authenticate_response(ctl, sizeof ctl, 0, &e, msg, sizeof msg,
	    &tok, &tl, err, sizeof err), KC_OK, "%s", err);
	cr_assert_str_eq(msg, "a?b");
}
