/*
 * clientinfo — client_id, client software and asserted SASL identity of a
 * connection; see clientinfo.h for what is read, the bounds and the rule
 * that a PLAIN password is never read.
 */
#include "worker/kafka/clientinfo.h"

#include <string.h>

const char *
ci_status_str(enum ci_status s)
{
	switch (s) {
	case CI_OK: return "ok";
	case CI_NEED_MORE: return "need-more";
	case CI_MALFORMED: return "malformed";
	}
	return "unknown";
}

void
ci_init(struct ci_info *ci)
{
	memset(ci, 0, sizeof *ci);
	ci->mech = SASL_MECH_NONE;
}

/* A bounded, sanitising output: bytes are appended one by one. */
struct ci_out {
	char *p;
	size_t cap, n;
	bool cut;
};

static void
ci_out_init(struct ci_out *o, char *p, size_t cap)
{
	o->p = p;
	o->cap = cap;
	o->n = 0;
	o->cut = false;
	if (cap > 0)
		p[0] = '\0';
}

static void
ci_out_put(struct ci_out *o, uint8_t c)
{
	if (o->n + 1 >= o->cap) {
		o->cut = true;
		return;
	}
	o->p[o->n++] = c >= 0x20 && c <= 0x7e ? (char)c : '?';
	o->p[o->n] = '\0';
}

bool
ci_printable(char *out, size_t outlen, const uint8_t *src, size_t len)
{
	struct ci_out o;

	ci_out_init(&o, out, outlen);
	for (size_t i = 0; i < len && !o.cut; i++)
		ci_out_put(&o, src[i]);
	return o.cut;
}

/* Kafka's rule for ClientSoftwareName / ClientSoftwareVersion
 * (ApiVersionsRequest.isValid): [a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])? */
static bool
ci_alnum(uint8_t c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool
ci_software_ok(const uint8_t *s, size_t n)
{
	if (n == 0 || !ci_alnum(s[0]) || !ci_alnum(s[n - 1]))
		return false;
	for (size_t i = 1; i + 1 < n; i++)
		if (!ci_alnum(s[i]) && s[i] != '-' && s[i] != '.')
			return false;
	return true;
}

/* ---- SASL identities ---------------------------------------------------- */

static int
ci_fail(char *err, size_t errlen, const char *why)
{
	kc_set_err(err, errlen, why);
	return CI_MALFORMED;
}

/* PLAIN: [authzid] NUL authcid NUL password. Only the bytes before the
 * second NUL are examined. */
static int
ci_plain(const uint8_t *tok, size_t len, struct ci_out *o, char *err, size_t errlen)
{
	const uint8_t *z1 = memchr(tok, 0, len), *authcid, *z2;

	if (z1 == NULL)
		return ci_fail(err, errlen, "PLAIN token without a NUL separator");
	authcid = z1 + 1;
	z2 = memchr(authcid, 0, len - (size_t)(authcid - tok));
	if (z2 == NULL)
		return ci_fail(err, errlen, "PLAIN token without its second NUL separator");
	if (z2 == authcid)
		return ci_fail(err, errlen, "PLAIN token with an empty username");
	if (z1 > tok) {
		for (const uint8_t *p = tok; p < z1; p++)
			ci_out_put(o, *p);
	} else {
		for (const uint8_t *p = authcid; p < z2; p++)
			ci_out_put(o, *p);
	}
	return CI_OK;
}

/*
 * A SCRAM saslname (RFC 5802 5.1) at s[0..n), ending at the first ',' or
 * the end: 1 or more bytes, no NUL, "=" only as =2C or =3D. Returns its
 * encoded length, or -1. Decoded into o when o is not NULL.
 */
static long
ci_saslname(const uint8_t *s, size_t n, struct ci_out *o)
{
	size_t i = 0;

	while (i < n && s[i] != ',') {
		uint8_t c = s[i];

		if (c == 0)
			return -1;
		if (c == '=') {
			if (n - i >= 3 && s[i + 1] == '2' && s[i + 2] == 'C')
				c = ',';
			else if (n - i >= 3 && s[i + 1] == '3' && s[i + 2] == 'D')
				c = '=';
			else
				return -1;
			i += 3;
		} else {
			i++;
		}
		if (o != NULL)
			ci_out_put(o, c);
	}
	return i == 0 ? -1 : (long)i;
}

/* SCRAM client-first-message: gs2-header then "n=" username ",r=". */
static int
ci_scram(const uint8_t *tok, size_t len, struct ci_out *o, char *err, size_t errlen)
{
	size_t i = 0, az = 0, un;
	long azlen = 0, unlen;

	/* gs2-cbind-flag */
	if (len >= 2 && (tok[0] == 'n' || tok[0] == 'y') && tok[1] == ',') {
		i = 2;
	} else if (len >= 2 && tok[0] == 'p' && tok[1] == '=') {
		for (i = 2; i < len && (ci_alnum(tok[i]) || tok[i] == '.' || tok[i] == '-'); i++)
			;
		if (i == 2 || i >= len || tok[i] != ',')
			return ci_fail(err, errlen, "SCRAM client-first-message: bad channel binding name");
		i++;
	} else {
		return ci_fail(err, errlen, "SCRAM client-first-message: bad gs2 header");
	}
	/* [ "a=" saslname ] "," */
	if (len - i >= 2 && tok[i] == 'a' && tok[i + 1] == '=') {
		az = i + 2;
		azlen = ci_saslname(tok + az, len - az, NULL);
		if (azlen < 0)
			return ci_fail(err, errlen, "SCRAM client-first-message: bad authzid");
		i = az + (size_t)azlen;
	}
	if (i >= len || tok[i] != ',')
		return ci_fail(err, errlen, "SCRAM client-first-message: bad gs2 header");
	i++;
	/* "n=" saslname ",r=" */
	if (len - i < 2 || tok[i] != 'n' || tok[i + 1] != '=')
		return ci_fail(err, errlen, "SCRAM client-first-message: no n= username");
	un = i + 2;
	unlen = ci_saslname(tok + un, len - un, NULL);
	if (unlen < 0)
		return ci_fail(err, errlen, "SCRAM client-first-message: bad username");
	i = un + (size_t)unlen;
	if (len - i < 3 || memcmp(tok + i, ",r=", 3) != 0)
		return ci_fail(err, errlen, "SCRAM client-first-message: no r= nonce after the username");
	if (azlen > 0)
		(void)ci_saslname(tok + az, (size_t)azlen, o);
	else
		(void)ci_saslname(tok + un, (size_t)unlen, o);
	return CI_OK;
}

static bool
ci_mech_has_identity(enum sasl_mech m)
{
	return m == SASL_MECH_PLAIN || m == SASL_MECH_SCRAM_SHA_256 || m == SASL_MECH_SCRAM_SHA_512;
}

int
ci_sasl_identity(enum sasl_mech mech, const uint8_t *tok, size_t len, char *out, size_t outlen,
		 bool *cut, char *err, size_t errlen)
{
	struct ci_out o;
	int rc = CI_OK;

	ci_out_init(&o, out, outlen);
	if (mech == SASL_MECH_PLAIN)
		rc = ci_plain(tok, len, &o, err, errlen);
	else if (mech == SASL_MECH_SCRAM_SHA_256 || mech == SASL_MECH_SCRAM_SHA_512)
		rc = ci_scram(tok, len, &o, err, errlen);
	if (rc != CI_OK) {
		ci_out_init(&o, out, outlen);
		o.cut = false;
	}
	*cut = o.cut;
	return rc;
}

/* The identity of a first client token into ci. */
static int
ci_take_token(struct ci_info *ci, const uint8_t *tok, size_t len, char *err, size_t errlen)
{
	bool cut;
	int rc = ci_sasl_identity(ci->mech, tok, len, ci->principal, sizeof ci->principal, &cut,
	    err, errlen);

	ci->principal_seen = rc == CI_OK && ci->principal[0] != '\0';
	ci->principal_cut = rc == CI_OK && cut;
	return rc;
}

/* ---- requests ----------------------------------------------------------- */

static int
ci_reader_status(const struct kc_reader *r, char *err, size_t errlen, const char *what)
{
	if (r->status == KC_NEED_MORE)
		return CI_NEED_MORE;
	if (!kc_rd_ok(r))
		return ci_fail(err, errlen, what);
	return CI_OK;
}

int
ci_on_request(struct ci_info *ci, const uint8_t *buf, size_t avail,
	      const struct kc_req_header *h, char *err, size_t errlen)
{
	struct kc_reader r;
	int rc;

	if (!ci->client_id_seen) {
		ci->client_id_seen = true;
		ci->client_id_null = h->client_id_len < 0;
		if (h->client_id_len > 0)
			ci->client_id_cut = ci_printable(ci->client_id, sizeof ci->client_id,
			    h->client_id, (size_t)h->client_id_len);
	}
	if (h->api_key != KC_API_API_VERSIONS && h->api_key != KC_API_SASL_HANDSHAKE &&
	    h->api_key != KC_API_SASL_AUTHENTICATE)
		return CI_OK;
	if (h->api_key == KC_API_API_VERSIONS && h->api_version < 3)
		return CI_OK;
	if (h->api_key == KC_API_SASL_AUTHENTICATE &&
	    (!ci->sasl_first_pending || !ci_mech_has_identity(ci->mech))) {
		ci->sasl_first_pending = false;
		return CI_OK;
	}

	kc_rd_init_partial(&r, buf, 4 + (size_t)h->size, avail);
	kc_rd_skip(&r, h->header_len);

	if (h->api_key == KC_API_API_VERSIONS) {
		const uint8_t *name = NULL, *ver = NULL;
		int32_t nlen = kc_rd_string(&r, true, false, &name);
		int32_t vlen = kc_rd_string(&r, true, false, &ver);

		rc = ci_reader_status(&r, err, errlen, "ApiVersions: bad client software name or version");
		if (rc != CI_OK)
			return rc;
		ci->software_seen = true;
		ci->software_cut = ci_printable(ci->software_name, sizeof ci->software_name, name,
		    (size_t)nlen);
		ci->software_cut |= ci_printable(ci->software_version,
		    sizeof ci->software_version, ver, (size_t)vlen);
		ci->software_valid = !ci->software_cut && ci_software_ok(name, (size_t)nlen) &&
		    ci_software_ok(ver, (size_t)vlen);
		return CI_OK;
	}
	if (h->api_key == KC_API_SASL_HANDSHAKE) {
		const uint8_t *name = NULL;
		int32_t n = kc_rd_string(&r, false, false, &name);

		rc = ci_reader_status(&r, err, errlen, "SaslHandshake: bad mechanism");
		if (rc != CI_OK)
			return rc;
		ci->mech = sasl_mech_parse(name, (size_t)n);
		(void)ci_printable(ci->mech_name, sizeof ci->mech_name, name, (size_t)n);
		ci->sasl_first_pending = true;
		return CI_OK;
	}
	/* SaslAuthenticate, the first after a handshake of PLAIN or SCRAM. */
	const uint8_t *tok = NULL;
	int32_t tlen = kc_rd_bytes(&r, kc_is_flexible(h->api_key, h->api_version), false, &tok);

	rc = ci_reader_status(&r, err, errlen, "SaslAuthenticate: bad auth bytes");
	if (rc == CI_NEED_MORE)
		return rc;
	ci->sasl_first_pending = false;
	if (rc != CI_OK)
		return rc;
	return ci_take_token(ci, tok, (size_t)tlen, err, errlen);
}

int
ci_on_raw_token(struct ci_info *ci, const uint8_t *buf, size_t avail, char *err, size_t errlen)
{
	int32_t len;

	if (!ci->sasl_first_pending)
		return CI_OK;
	if (!ci_mech_has_identity(ci->mech)) {
		ci->sasl_first_pending = false;
		return CI_OK;
	}
	if (avail < 4)
		return CI_NEED_MORE;
	len = kc_get_i32(buf);
	if (len < 0) {
		ci->sasl_first_pending = false;
		return ci_fail(err, errlen, "raw SASL token with a negative length");
	}
	if (avail - 4 < (size_t)len)
		return CI_NEED_MORE;
	ci->sasl_first_pending = false;
	return ci_take_token(ci, buf + 4, (size_t)len, err, errlen);
}
