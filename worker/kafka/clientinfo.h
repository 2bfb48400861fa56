/*
 * clientinfo — who is at the other end of a client connection, as the
 * client itself says it in the Kafka protocol: the client_id of its request
 * headers, the software name and version it sends in ApiVersions v3+, the
 * SASL mechanism it asks for and the authorization identity it asserts in
 * its first SASL token. For the connection listing, log lines and per-client
 * software counts. Pure: a small struct and functions over byte buffers; no
 * sockets, no logging, no allocation.
 *
 * ferry authenticates nobody: the identity is what the client claims, and
 * the broker decides whether the claim holds. It is what an operator needs
 * to find "which application is this" among hundreds of connections.
 *
 * What is read, and when:
 * - client_id: from the first request header passed to ci_on_request (a
 *   Kafka client uses one client id per connection); later headers are not
 *   looked at, so the per-request cost is one test. A null client id is
 *   recorded as null (client_id_null), an empty one as "".
 * - ApiVersions v3+ (the first flexible version, KIP-511): the compact
 *   strings ClientSoftwareName and ClientSoftwareVersion at the start of the
 *   body. Versions 0-2 carry none; a later ApiVersions without them (a
 *   client retrying v0 after UNSUPPORTED_VERSION) leaves the values seen.
 * - SASL: a SaslHandshake request names the mechanism; the next client
 *   token (the AuthBytes of the next SaslAuthenticate request, or the first
 *   raw token after a v0 handshake, ci_on_raw_token) is the one carrying
 *   the identity:
 *     PLAIN (RFC 4616)  [authzid] NUL authcid NUL password: the authzid when
 *                       not empty, else the authcid. The bytes after the
 *                       second NUL (the password) are never read, copied
 *                       or compared, and no pointer to them is formed.
 *     SCRAM-SHA-256/512 the client-first-message (RFC 5802):
 *                       gs2-header "n,", "y," or "p=NAME," then an
 *                       optional "a=" authzid and ",", then "n=" username
 *                       and ",r=": the authzid when present, else the
 *                       username, with =2C and =3D decoded (any other "="
 *                       escape is malformed, as the RFC requires).
 *     OAUTHBEARER, GSSAPI, others: the mechanism only. Their tokens hold
 *                       bearer tokens and tickets: never looked at.
 *   A re-authentication (KIP-368: a new SaslHandshake) reads the identity
 *   again from its first token.
 *
 * Bounds and sanitising: client_id and principal keep at most
 * CI_CLIENT_ID_MAX / CI_PRINCIPAL_MAX bytes, software name and version
 * CI_SOFTWARE_MAX bytes each; longer values are cut there and flagged
 * (*_cut). Every byte kept is printable ASCII (0x20-0x7e); any other byte
 * (controls, DEL, every byte of a UTF-8 sequence) becomes '?'. So each value
 * is safe in a logfmt line or a JSON string once the usual quoting is
 * applied, and its size is bounded whatever the client sends.
 * software_valid says whether both software strings were sent and match the
 * rule Kafka brokers apply to them ([a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?,
 * uncut): a metrics label should only use valid values.
 *
 * Return conventions: ci_on_request / ci_on_raw_token / ci_sasl_identity
 * return enum ci_status (CI_OK = 0, CI_NEED_MORE = 1, CI_MALFORMED = -1, the
 * codec's tri-state). CI_NEED_MORE: the bytes present do not cover the field
 * to read (call again with more; nothing was changed but the client_id).
 * CI_MALFORMED: the field could not be read (a static reason in err); the
 * info keeps what it had. Neither is a reason to close the connection: the
 * broker judges the request; ferry only failed to learn a name.
 */
#ifndef FERRY_WORKER_KAFKA_CLIENTINFO_H
#define FERRY_WORKER_KAFKA_CLIENTINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "worker/kafka/codec.h"
#include "worker/kafka/sasl.h"

#define CI_CLIENT_ID_MAX 255
#define CI_SOFTWARE_MAX 64
#define CI_PRINCIPAL_MAX 255
#define CI_MECH_MAX 23

enum ci_status { CI_OK = 0, CI_NEED_MORE = 1, CI_MALFORMED = -1 };
/* "ok", "need-more", "malformed". */
const char *ci_status_str(enum ci_status s);

struct ci_info {
	bool client_id_seen;            /* a request header was read */
	bool client_id_null;            /* ... and its client_id was null */
	bool client_id_cut;
	char client_id[CI_CLIENT_ID_MAX + 1];

	bool software_seen;             /* an ApiVersions v3+ was read */
	bool software_valid;            /* both match Kafka's rule, uncut */
	bool software_cut;
	char software_name[CI_SOFTWARE_MAX + 1];
	char software_version[CI_SOFTWARE_MAX + 1];

	enum sasl_mech mech;            /* SASL_MECH_NONE until a SaslHandshake */
	char mech_name[CI_MECH_MAX + 1];/* as sent (sanitised, cut) */
	bool sasl_first_pending;        /* the next client token is the first */
	bool principal_seen;            /* an identity was read */
	bool principal_cut;
	char principal[CI_PRINCIPAL_MAX + 1];
};

/* A fresh connection's info (nothing known). */
void ci_init(struct ci_info *ci);

/*
 * A request header was parsed: buf points at the size prefix, avail bytes
 * are present, h from kc_parse_request_header. Records the client_id of the
 * first header, and acts on ApiVersions v3+ (software), SaslHandshake
 * (mechanism) and the first SaslAuthenticate after it (identity); other
 * requests return CI_OK at once. CI_NEED_MORE when one of those fields is
 * not in the avail bytes yet.
 */
int ci_on_request(struct ci_info *ci, const uint8_t *buf, size_t avail,
		  const struct kc_req_header *h, char *err, size_t errlen);

/*
 * A raw SASL token from the client (after a SaslHandshake v0): buf at its
 * 4-byte length prefix, avail bytes present. The first one after the
 * handshake is read for the identity; later ones return CI_OK at once.
 */
int ci_on_raw_token(struct ci_info *ci, const uint8_t *buf, size_t avail, char *err,
		    size_t errlen);

/*
 * The identity a first SASL client token asserts, for mechanism mech:
 * written to out (outlen bytes, NUL-terminated, sanitised as above; *cut
 * set when it was longer). CI_OK with out "" for mechanisms whose tokens
 * are not read; CI_MALFORMED for a PLAIN or SCRAM token that does not
 * parse (out ""). Reads nothing of a PLAIN token after its second NUL.
 */
int ci_sasl_identity(enum sasl_mech mech, const uint8_t *tok, size_t len, char *out,
		     size_t outlen, bool *cut, char *err, size_t errlen);

/*
 * Copies src[0..len) into out (outlen >= 1 bytes, NUL-terminated), each byte
 * outside printable ASCII replaced by '?', at most outlen - 1 bytes kept.
 * Returns true when it had to cut.
 */
bool ci_printable(char *out, size_t outlen, const uint8_t *src, size_t len);

#endif
