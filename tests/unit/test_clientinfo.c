/*
 * test_clientinfo — unit tests for worker/kafka/clientinfo.c: client_id
 * (null, empty, long, non-ASCII, the first header wins), ApiVersions v3+
 * software name and version (v0-2 carry none, Kafka's validity rule, cuts,
 * a later v0 keeps them, every truncation needs more), and the identity a
 * client asserts in its first SASL token: PLAIN with and without authzid,
 * SCRAM with =2C/=3D, authzid and channel-binding flags, the malformed
 * cases RFC 5802 and Kafka refuse, OAUTHBEARER/GSSAPI/unknown mechanisms
 * reduced to their name, raw v0 tokens, re-authentication. Passwords and
 * tokens never appear in the info (its bytes are searched), and a PLAIN
 * password on a PROT_NONE page is never read.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kafka_fixtures.h"
#include "worker/kafka/clientinfo.h"

#define MAX_FRAME (1u << 20)

/* A request: header v1 (v2 when flex), client_id (NULL = null), body. */
static void
req(struct bb *b, int16_t key, int16_t ver, bool flex, const char *cid, const void *body,
    size_t blen)
{
	bb_init(b);
	bb_i32(b, 0);
	bb_i16(b, key);
	bb_i16(b, ver);
	bb_i32(b, 42);
	bb_str(b, false, cid);
	if (flex)
		bb_u8(b, 0);
	bb_raw(b, body, blen);
	bb_fix(b);
}

static int
on(struct ci_info *ci, const struct bb *b, size_t avail)
{
	struct kc_req_header h;
	char err[128] = "";

	cr_assert_eq(kc_parse_request_header(b->b, avail, MAX_FRAME, &h, err, sizeof err), KC_OK,
	    "header: %s", err);
	return ci_on_request(ci, b->b, avail, &h, err, sizeof err);
}

static int
on_whole(struct ci_info *ci, int16_t key, int16_t ver, bool flex, const char *cid,
	 const void *body, size_t blen)
{
	struct bb b;
	req(&b, key, ver, flex, cid, body, blen);
	int rc = on(ci, &b, b.n);
	bb_free(&b);
	return rc;
}

static void
apiversions(struct ci_info *ci, int16_t ver, const char *name, const char *version, int want)
{
	struct bb body;
	bb_init(&body);
	if (ver >= 3) {
		bb_str(&body, true, name);
		bb_str(&body, true, version);
		bb_u8(&body, 0);
	}
	cr_assert_eq(on_whole(ci, KC_API_API_VERSIONS, ver, ver >= 3, "cid", body.b, body.n), want,
	    "ApiVersions v%d %s %s", ver, name ? name : "(null)", version ? version : "(null)");
	bb_free(&body);
}

static void
handshake(struct ci_info *ci, int16_t ver, const char *mech)
{
	struct bb body;
	bb_init(&body);
	bb_str(&body, false, mech);
	cr_assert_eq(on_whole(ci, KC_API_SASL_HANDSHAKE, ver, false, "cid", body.b, body.n), CI_OK);
	bb_free(&body);
}

/* A SaslAuthenticate request carrying tok: v0/v1 plain bytes, v2 compact. */
static void
auth_req(struct bb *b, int16_t ver, const void *tok, size_t len)
{
	struct bb body;
	bb_init(&body);
	bb_bytes(&body, ver >= 2, tok, len);
	req(b, KC_API_SASL_AUTHENTICATE, ver, ver >= 2, "cid", body.b, body.n);
	bb_free(&body);
}

static int
authenticate(struct ci_info *ci, int16_t ver, const void *tok, size_t len)
{
	struct bb b;
	auth_req(&b, ver, tok, len);
	int rc = on(ci, &b, b.n);
	bb_free(&b);
	return rc;
}

/* No byte string `secret` anywhere in the info. */
static void
no_secret(const struct ci_info *ci, const char *secret)
{
	cr_assert_null(memmem(ci, sizeof *ci, secret, strlen(secret)), "'%s' found in the info",
	    secret);
}

Test(clientinfo, names)
{
	cr_assert_str_eq(ci_status_str(CI_OK), "ok");
	cr_assert_str_eq(ci_status_str(CI_NEED_MORE), "need-more");
	cr_assert_str_eq(ci_status_str(CI_MALFORMED), "malformed");
	cr_assert_eq((int)CI_NEED_MORE, (int)KC_NEED_MORE);
	cr_assert_eq((int)CI_MALFORMED, (int)KC_MALFORMED);
}

Test(clientinfo, client_id)
{
	struct ci_info ci;

	ci_init(&ci);
	cr_assert_not(ci.client_id_seen);
	cr_assert_eq(on_whole(&ci, KC_API_METADATA, 1, false, "orders-producer-7", "\0\0\0\0", 4),
	    CI_OK);
	cr_assert(ci.client_id_seen);
	cr_assert_not(ci.client_id_null);
	cr_assert_str_eq(ci.client_id, "orders-producer-7");
	/* the first header's client id stays */
	cr_assert_eq(on_whole(&ci, KC_API_METADATA, 1, false, "other", "\0\0\0\0", 4), CI_OK);
	cr_assert_str_eq(ci.client_id, "orders-producer-7");

	ci_init(&ci);
	cr_assert_eq(on_whole(&ci, KC_API_METADATA, 1, false, NULL, "\0\0\0\0", 4), CI_OK);
	cr_assert(ci.client_id_seen);
	cr_assert(ci.client_id_null);
	cr_assert_str_eq(ci.client_id, "");

	ci_init(&ci);
	cr_assert_eq(on_whole(&ci, KC_API_METADATA, 1, false, "", "\0\0\0\0", 4), CI_OK);
	cr_assert(ci.client_id_seen);
	cr_assert_not(ci.client_id_null);
	cr_assert_str_eq(ci.client_id, "");
}

Test(clientinfo, client_id_bounds_and_bytes)
{
	struct ci_info ci;
	char longid[301];

	memset(longid, 'x', 300);
	longid[300] = '\0';
	ci_init(&ci);
	cr_assert_eq(on_whole(&ci, KC_API_METADATA, 1, false, longid, "\0\0\0\0", 4), CI_OK);
	cr_assert(ci.client_id_cut);
	cr_assert_eq(strlen(ci.client_id), CI_CLIENT_ID_MAX);

	/* exactly the maximum is not cut */
	longid[CI_CLIENT_ID_MAX] = '\0';
	ci_init(&ci);
	cr_assert_eq(on_whole(&ci, KC_API_METADATA, 1, false, longid, "\0\0\0\0", 4), CI_OK);
	cr_assert_not(ci.client_id_cut);
	cr_assert_eq(strlen(ci.client_id), CI_CLIENT_ID_MAX);

	/* controls, quotes kept for the formatters to escape, UTF-8 as '?' */
	ci_init(&ci);
	cr_assert_eq(on_whole(&ci, KC_API_METADATA, 1, false, "a\nb\x7f\"c\\ caf\xc3\xa9\x1b[31m",
	    "\0\0\0\0", 4), CI_OK);
	cr_assert_str_eq(ci.client_id, "a?b?\"c\\ caf???[31m");
	for (const char *p = ci.client_id; *p; p++)
		cr_assert(*p >= 0x20 && *p <= 0x7e);
}

Test(clientinfo, printable)
{
	char out[8];

	cr_assert_not(ci_printable(out, sizeof out, (const uint8_t *)"abc", 3));
	cr_assert_str_eq(out, "abc");
	cr_assert(ci_printable(out, sizeof out, (const uint8_t *)"abcdefghij", 10));
	cr_assert_str_eq(out, "abcdefg");
	cr_assert_not(ci_printable(out, sizeof out, (const uint8_t *)"\0\t\xff", 3));
	cr_assert_str_eq(out, "???");
	cr_assert_not(ci_printable(out, sizeof out, NULL, 0));
	cr_assert_str_eq(out, "");
	cr_assert(ci_printable(out, 1, (const uint8_t *)"a", 1));
	cr_assert_str_eq(out, "");
}

Test(clientinfo, software)
{
	struct ci_info ci;

	ci_init(&ci);
	apiversions(&ci, 3, "apache-kafka-java", "3.7.0", CI_OK);
	cr_assert(ci.software_seen);
	cr_assert(ci.software_valid);
	cr_assert_str_eq(ci.software_name, "apache-kafka-java");
	cr_assert_str_eq(ci.software_version, "3.7.0");
	cr_assert_str_eq(ci.client_id, "cid");

	/* a client retrying v0 after UNSUPPORTED_VERSION keeps what it said */
	apiversions(&ci, 0, NULL, NULL, CI_OK);
	cr_assert_str_eq(ci.software_name, "apache-kafka-java");

	ci_init(&ci);
	apiversions(&ci, 4, "confluent-kafka-python", "2.3.0-rdkafka-2.3.0", CI_OK);
	cr_assert(ci.software_valid);
	cr_assert_str_eq(ci.software_version, "2.3.0-rdkafka-2.3.0");

	for (int v = 0; v <= 2; v++) {
		ci_init(&ci);
		apiversions(&ci, (int16_t)v, NULL, NULL, CI_OK);
		cr_assert_not(ci.software_seen, "v%d", v);
		cr_assert(ci.client_id_seen);
	}
}

Test(clientinfo, software_validity)
{
	static const struct {
		const char *name, *version;
		bool valid;
	} cases[] = {
		{ "a", "1", true },
		{ "kafka-python", "2.0.2", true },
		{ "my client", "1.0", false },
		{ "-lead", "1", false },
		{ "trail-", "1", false },
		{ "name", ".1", false },
		{ "name", "1.", false },
		{ "", "1.0", false },
		{ "name", "", false },
		{ "caf\xc3\xa9", "1", false },
		{ "name", "1_0", false },
		{ "a.b-c.d", "0.0.0-SNAPSHOT", true },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct ci_info ci;
		ci_init(&ci);
		apiversions(&ci, 3, cases[i].name, cases[i].version, CI_OK);
		cr_assert(ci.software_seen);
		cr_assert_eq(ci.software_valid, cases[i].valid, "'%s' '%s'", cases[i].name,
		    cases[i].version);
	}

	/* longer than the bound: cut, flagged, not valid for a label */
	char name[101];
	memset(name, 'n', 100);
	name[100] = '\0';
	struct ci_info ci;
	ci_init(&ci);
	apiversions(&ci, 3, name, "1.0", CI_OK);
	cr_assert(ci.software_cut);
	cr_assert_not(ci.software_valid);
	cr_assert_eq(strlen(ci.software_name), CI_SOFTWARE_MAX);
	cr_assert_str_eq(ci.software_version, "1.0");
}

Test(clientinfo, software_malformed_and_truncated)
{
	struct ci_info ci;
	struct bb body, b;

	/* null compact strings (the fields are not nullable) */
	ci_init(&ci);
	apiversions(&ci, 3, NULL, "1.0", CI_MALFORMED);
	cr_assert_not(ci.software_seen);
	cr_assert_str_eq(ci.client_id, "cid");
	ci_init(&ci);
	apiversions(&ci, 3, "x", NULL, CI_MALFORMED);
	cr_assert_not(ci.software_seen);

	/* every truncation after the header needs more; the whole is OK */
	bb_init(&body);
	bb_str(&body, true, "librdkafka");
	bb_str(&body, true, "2.3.0");
	bb_u8(&body, 0);
	req(&b, KC_API_API_VERSIONS, 3, true, "rdkafka", body.b, body.n);
	struct kc_req_header h;
	char err[64];
	cr_assert_eq(kc_parse_request_header(b.b, b.n, MAX_FRAME, &h, err, sizeof err), KC_OK);
	for (size_t k = h.header_len; k < b.n; k++) {
		ci_init(&ci);
		int rc = on(&ci, &b, k);
		/* the strings end before the tag section */
		if (k < b.n - 1) {
			cr_assert_eq(rc, CI_NEED_MORE, "avail %zu of %zu", k, b.n);
			cr_assert_not(ci.software_seen);
		}
		cr_assert_str_eq(ci.client_id, "rdkafka");
	}
	ci_init(&ci);
	cr_assert_eq(on(&ci, &b, b.n), CI_OK);
	cr_assert_str_eq(ci.software_name, "librdkafka");
	bb_free(&b);
	bb_free(&body);

	/* a string length past the frame end */
	static const uint8_t bad[] = { 0x7f, 'a', 'b' };
	ci_init(&ci);
	cr_assert_eq(on_whole(&ci, KC_API_API_VERSIONS, 3, true, "c", bad, sizeof bad), CI_MALFORMED);
	cr_assert_not(ci.software_seen);
}

/* ---- SASL ---- */

Test(clientinfo, plain)
{
	static const char t1[] = "\0alice\0alice-secret";
	static const char t2[] = "admin\0alice\0alice-secret";
	struct ci_info ci;

	for (int16_t v = 0; v <= 2; v++) {
		ci_init(&ci);
		handshake(&ci, 1, "PLAIN");
		cr_assert_eq(ci.mech, SASL_MECH_PLAIN);
		cr_assert_str_eq(ci.mech_name, "PLAIN");
		cr_assert(ci.sasl_first_pending);
		cr_assert_eq(authenticate(&ci, v, t1, sizeof t1 - 1), CI_OK, "v%d", v);
		cr_assert(ci.principal_seen);
		cr_assert_str_eq(ci.principal, "alice");
		cr_assert_not(ci.sasl_first_pending);
		no_secret(&ci, "secret");
	}
	/* an authzid wins over the authcid */
	ci_init(&ci);
	handshake(&ci, 1, "PLAIN");
	cr_assert_eq(authenticate(&ci, 1, t2, sizeof t2 - 1), CI_OK);
	cr_assert_str_eq(ci.principal, "admin");
	no_secret(&ci, "secret");
	/* an empty password is the broker's business */
	ci_init(&ci);
	handshake(&ci, 1, "PLAIN");
	cr_assert_eq(authenticate(&ci, 1, "\0bob\0", 5), CI_OK);
	cr_assert_str_eq(ci.principal, "bob");
}

Test(clientinfo, plain_malformed)
{
	static const struct {
		const char *tok;
		size_t len;
	} bad[] = {
		{ "alice", 5 },
		{ "\0alice", 6 },
		{ "", 0 },
		{ "\0\0secret-pw", 11 },
		{ "admin\0\0secret-pw", 16 },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct ci_info ci;
		ci_init(&ci);
		handshake(&ci, 1, "PLAIN");
		cr_assert_eq(authenticate(&ci, 1, bad[i].tok, bad[i].len), CI_MALFORMED, "case %zu", i);
		cr_assert_not(ci.principal_seen);
		cr_assert_str_eq(ci.principal, "");
		cr_assert_not(ci.sasl_first_pending);
		no_secret(&ci, "secret");
	}
	/* the error says what, never the bytes */
	char out[32], err[128];
	bool cut;
	cr_assert_eq(ci_sasl_identity(SASL_MECH_PLAIN, (const uint8_t *)"\0\0hunter2", 9, out,
	    sizeof out, &cut, err, sizeof err), CI_MALFORMED);
	cr_assert_null(strstr(err, "hunter2"));
	cr_assert_str_eq(out, "");
}

/* The PLAIN password sits on a page that cannot be read: extracting the
 * identity must not touch it (a read would crash the test). */
Test(clientinfo, plain_password_never_read)
{
	long page = sysconf(_SC_PAGESIZE);
	uint8_t *m = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(m, MAP_FAILED);
	static const char head[] = "authz\0carol";
	size_t hl = sizeof head;		/* with the second NUL */
	uint8_t *tok = m + page - hl;
	memcpy(tok, head, hl);
	memset(m + page, 'P', (size_t)page);
	cr_assert_eq(mprotect(m + page, (size_t)page, PROT_NONE), 0);

	char out[64], err[64];
	bool cut = true;
	cr_assert_eq(ci_sasl_identity(SASL_MECH_PLAIN, tok, hl + (size_t)page, out, sizeof out,
	    &cut, err, sizeof err), CI_OK);
	cr_assert_str_eq(out, "authz");
	cr_assert_not(cut);
	/* no authzid: the authcid, its NUL the last readable byte */
	static const char head2[] = "\0carol";
	tok = m + page - sizeof head2;
	memcpy(tok, head2, sizeof head2);
	cr_assert_eq(ci_sasl_identity(SASL_MECH_PLAIN, tok, sizeof head2 + (size_t)page, out,
	    sizeof out, &cut, err, sizeof err), CI_OK);
	cr_assert_str_eq(out, "carol");
	munmap(m, (size_t)page * 2);
}

Test(clientinfo, scram)
{
	static const struct {
		const char *tok, *want;
	} ok[] = {
		{ "n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL", "alice" },
		{ "n,,n=al=2Cice=3D,r=abc", "al,ice=" },
		{ "n,,n==3D=2C,r=x", "=," },
		{ "n,a=bob,n=alice,r=x", "bob" },
		{ "n,a=b=2Cob,n=alice,r=x", "b,ob" },
		{ "y,,n=carol,r=x", "carol" },
		{ "p=tls-unique,,n=dave,r=x", "dave" },
		{ "n,,n=erin,r=x,tokenauth=true", "erin" },
		{ "n,,n=caf\xc3\xa9,r=x", "caf??" },
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		struct ci_info ci;
		ci_init(&ci);
		handshake(&ci, 1, i % 2 ? "SCRAM-SHA-512" : "SCRAM-SHA-256");
		cr_assert_eq(ci.mech, i % 2 ? SASL_MECH_SCRAM_SHA_512 : SASL_MECH_SCRAM_SHA_256);
		cr_assert_eq(authenticate(&ci, (int16_t)(i % 3), ok[i].tok, strlen(ok[i].tok)), CI_OK,
		    "'%s'", ok[i].tok);
		cr_assert_str_eq(ci.principal, ok[i].want, "'%s'", ok[i].tok);
		cr_assert(ci.principal_seen);
		/* the client-final message (with the proof) is not read */
		const char *fin = "c=biws,r=x,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=";
		cr_assert_eq(authenticate(&ci, 1, fin, strlen(fin)), CI_OK);
		cr_assert_str_eq(ci.principal, ok[i].want);
		no_secret(&ci, "v0X8v3Bz2T0CJGbJ");
	}
}

Test(clientinfo, scram_malformed)
{
	static const char *const bad[] = {
		"",
		"n",
		"n,",
		"x,,n=alice,r=x",
		"nn,,n=alice,r=x",
		"p=,,n=alice,r=x",
		"p=tls unique,,n=alice,r=x",
		"n,,n=alice",
		"n,,n=alice,",
		"n,,n=alice,s=x",
		"n,,n=,r=x",
		"n,,n=al=2Xice,r=x",
		"n,,n=al=2cice,r=x",
		"n,,n=alice=,r=x",
		"n,,n=alice=3,r=x",
		"n,a=,n=alice,r=x",
		"n,a=bo=b,n=alice,r=x",
		"n,,m=ext,n=alice,r=x",
		"n,,r=x,n=alice",
		"n,b=bob,n=alice,r=x",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct ci_info ci;
		ci_init(&ci);
		handshake(&ci, 1, "SCRAM-SHA-256");
		cr_assert_eq(authenticate(&ci, 1, bad[i], strlen(bad[i])), CI_MALFORMED, "'%s'", bad[i]);
		cr_assert_not(ci.principal_seen, "'%s'", bad[i]);
		cr_assert_str_eq(ci.principal, "");
	}
	/* a NUL inside the name */
	struct ci_info ci;
	ci_init(&ci);
	handshake(&ci, 1, "SCRAM-SHA-256");
	cr_assert_eq(authenticate(&ci, 1, "n,,n=al\0ice,r=x", 15), CI_MALFORMED);
}

Test(clientinfo, mechanism_only)
{
	static const char oauth[] = "n,a=alice,\x01" "auth=Bearer eyJhbGciOiJub25lIn0.secret-jwt\x01\x01";
	static const char *const mechs[] = { "OAUTHBEARER", "GSSAPI", "FOO-BAR" };
	static const enum sasl_mech want[] = { SASL_MECH_OAUTHBEARER, SASL_MECH_GSSAPI, SASL_MECH_OTHER };

	for (size_t i = 0; i < 3; i++) {
		struct ci_info ci;
		ci_init(&ci);
		handshake(&ci, 1, mechs[i]);
		cr_assert_eq(ci.mech, want[i]);
		cr_assert_str_eq(ci.mech_name, mechs[i]);
		cr_assert_eq(authenticate(&ci, 2, oauth, sizeof oauth - 1), CI_OK);
		cr_assert_not(ci.principal_seen);
		cr_assert_str_eq(ci.principal, "");
		cr_assert_not(ci.sasl_first_pending);
		no_secret(&ci, "secret-jwt");
		no_secret(&ci, "alice");
	}

	/* a token not yet whole is not waited for */
	struct ci_info ci;
	struct bb b;
	ci_init(&ci);
	handshake(&ci, 1, "OAUTHBEARER");
	auth_req(&b, 1, oauth, sizeof oauth - 1);
	struct kc_req_header h;
	char err[64];
	cr_assert_eq(kc_parse_request_header(b.b, b.n, MAX_FRAME, &h, err, sizeof err), KC_OK);
	cr_assert_eq(ci_on_request(&ci, b.b, h.header_len, &h, err, sizeof err), CI_OK);
	bb_free(&b);

	/* a very long mechanism name is cut */
	ci_init(&ci);
	handshake(&ci, 1, "X-A-VERY-LONG-MECHANISM-NAME-INDEED");
	cr_assert_eq(strlen(ci.mech_name), CI_MECH_MAX);
	cr_assert_eq(ci.mech, SASL_MECH_OTHER);
}

Test(clientinfo, authenticate_truncated)
{
	static const char tok[] = "n,,n=frank,r=nonce";
	struct ci_info ci;
	struct bb b;
	struct kc_req_header h;
	char err[64];

	for (int16_t v = 0; v <= 2; v++) {
		auth_req(&b, v, tok, sizeof tok - 1);
		cr_assert_eq(kc_parse_request_header(b.b, b.n, MAX_FRAME, &h, err, sizeof err), KC_OK);
		ci_init(&ci);
		handshake(&ci, 1, "SCRAM-SHA-512");
		for (size_t k = h.header_len; k < b.n; k++) {
			cr_assert_eq(on(&ci, &b, k), CI_NEED_MORE, "v%d: %zu of %zu", v, k, b.n);
			cr_assert(ci.sasl_first_pending);
			cr_assert_not(ci.principal_seen);
		}
		cr_assert_eq(on(&ci, &b, b.n), CI_OK);
		cr_assert_str_eq(ci.principal, "frank");
		bb_free(&b);
	}
}

Test(clientinfo, no_handshake_no_identity)
{
	struct ci_info ci;

	ci_init(&ci);
	cr_assert_eq(authenticate(&ci, 1, "\0mallory\0pw", 11), CI_OK);
	cr_assert_not(ci.principal_seen);
	cr_assert_eq(ci.mech, SASL_MECH_NONE);
	/* a malformed handshake body */
	cr_assert_eq(on_whole(&ci, KC_API_SASL_HANDSHAKE, 1, false, "c", "\xff\xff", 2),
	    CI_MALFORMED);
	cr_assert_not(ci.sasl_first_pending);
}

Test(clientinfo, raw_tokens)
{
	struct ci_info ci;
	uint8_t raw[64];
	static const char t[] = "\0bob\0bob-secret";
	size_t tl = sizeof t - 1;

	ci_init(&ci);
	handshake(&ci, 0, "PLAIN");
	kc_put_i32(raw, (int32_t)tl);
	memcpy(raw + 4, t, tl);
	for (size_t k = 0; k < 4 + tl; k++)
		cr_assert_eq(ci_on_raw_token(&ci, raw, k, NULL, 0), CI_NEED_MORE, "%zu", k);
	cr_assert_eq(ci_on_raw_token(&ci, raw, 4 + tl, NULL, 0), CI_OK);
	cr_assert_str_eq(ci.principal, "bob");
	no_secret(&ci, "secret");
	/* the next raw token (SCRAM's client-final) is not read */
	kc_put_i32(raw, 5);
	memcpy(raw + 4, "\0x\0yz", 5);
	cr_assert_eq(ci_on_raw_token(&ci, raw, 9, NULL, 0), CI_OK);
	cr_assert_str_eq(ci.principal, "bob");

	ci_init(&ci);
	handshake(&ci, 0, "SCRAM-SHA-256");
	kc_put_i32(raw, -1);
	cr_assert_eq(ci_on_raw_token(&ci, raw, 4, NULL, 0), CI_MALFORMED);
	cr_assert_not(ci.sasl_first_pending);

	/* before any handshake: nothing */
	ci_init(&ci);
	kc_put_i32(raw, (int32_t)tl);
	memcpy(raw + 4, t, tl);
	cr_assert_eq(ci_on_raw_token(&ci, raw, 4 + tl, NULL, 0), CI_OK);
	cr_assert_not(ci.principal_seen);
}

Test(clientinfo, reauthentication)
{
	struct ci_info ci;

	ci_init(&ci);
	handshake(&ci, 1, "PLAIN");
	cr_assert_eq(authenticate(&ci, 2, "\0alice\0pw1", 10), CI_OK);
	cr_assert_str_eq(ci.principal, "alice");
	/* KIP-368: a new handshake and first token later on the connection */
	handshake(&ci, 1, "SCRAM-SHA-256");
	cr_assert_str_eq(ci.principal, "alice");
	cr_assert_eq(authenticate(&ci, 2, "n,,n=alice2,r=x", 15), CI_OK);
	cr_assert_str_eq(ci.principal, "alice2");
	cr_assert_str_eq(ci.mech_name, "SCRAM-SHA-256");
}

Test(clientinfo, principal_bounds)
{
	struct ci_info ci;
	char tok[1024];
	size_t n = 0;

	tok[n++] = '\0';
	memset(tok + n, 'u', 300);
	n += 300;
	tok[n++] = '\0';
	memcpy(tok + n, "pw", 2);
	n += 2;
	ci_init(&ci);
	handshake(&ci, 1, "PLAIN");
	cr_assert_eq(authenticate(&ci, 1, tok, n), CI_OK);
	cr_assert(ci.principal_cut);
	cr_assert_eq(strlen(ci.principal), CI_PRINCIPAL_MAX);

	/* SCRAM escapes decode before the bound applies */
	n = 0;
	memcpy(tok, "n,,n=", 5);
	n = 5;
	for (int i = 0; i < CI_PRINCIPAL_MAX; i++) {
		memcpy(tok + n, "=2C", 3);
		n += 3;
	}
	memcpy(tok + n, ",r=x", 4);
	n += 4;
	ci_init(&ci);
	handshake(&ci, 1, "SCRAM-SHA-256");
	cr_assert_eq(authenticate(&ci, 1, tok, n), CI_OK);
	cr_assert_not(ci.principal_cut);
	cr_assert_eq(strlen(ci.principal), CI_PRINCIPAL_MAX);
	cr_assert_eq(ci.principal[0], ',');
}
