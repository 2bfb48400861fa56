/*
 * sni — the names of an SNI gateway (`gateway = sni`): which server name a
 * client asked for in its TLS ClientHello, and which name metadata gives
 * each broker.
 *
 * A cluster in SNI mode has one TLS port. A client that connects to it names
 * `sni_bootstrap_host` (the bootstrap: any upstream bootstrap server will do)
 * or a broker, by `sni_broker_pattern` with its node id in place of the one
 * `$(nodeId)` (`broker-$(nodeId).kafka.example.com` -> `broker-3.kafka...`).
 * Metadata that passes through ferry advertises exactly those broker names,
 * so every name a client sends back came from sni_format().
 *
 * Pure functions (no I/O, no allocation), used by the config parser to
 * validate the keys and by the worker's TLS ClientHello callback and its
 * metadata rewrite. Role-free, hence in common/.
 *
 * Matching (sni_classify) follows DNS rules: ASCII case-insensitive, one
 * trailing dot accepted ("a.example.com." is "a.example.com"). A node id is
 * decimal digits only, without a sign and without leading zeros ("0" itself
 * is fine; "007" is not a name ferry ever advertised), at most INT32_MAX.
 * The bootstrap name wins over the pattern; the config parser refuses a
 * bootstrap name the pattern could also produce, so that never matters.
 */
#ifndef FERRY_COMMON_SNI_H
#define FERRY_COMMON_SNI_H

#include <stddef.h>
#include <stdint.h>

#define SNI_PLACEHOLDER "$(nodeId)"
#define SNI_NAME_MAX 253          /* a DNS name, without the trailing dot */

enum sni_match {
	SNI_UNKNOWN = 0,          /* neither: refuse the handshake */
	SNI_BOOTSTRAP,
	SNI_BROKER,
};

const char *sni_match_str(enum sni_match m);

/* Is name (len bytes, no trailing dot) a valid DNS host name: labels of
 * 1-63 letters, digits and hyphens, not starting or ending with a hyphen,
 * at most SNI_NAME_MAX in all? 0 yes; -1 no, with the reason in err. */
int sni_host_check(const char *name, size_t len, char *err, size_t errlen);

/* Validate a broker pattern: exactly one SNI_PLACEHOLDER, and a valid host
 * name for every node id (checked with the shortest and the longest:
 * "0" and "2147483647"). 0 ok; -1 with the reason in err. */
int sni_pattern_check(const char *pattern, char *err, size_t errlen);

/* Write the broker name of node_id (>= 0) into out (NUL-terminated).
 * Returns its length, or -1 when node_id < 0, the pattern has no
 * placeholder or out is too small. */
int sni_format(const char *pattern, int32_t node_id, char *out, size_t outlen);

/* The host name of a ClientHello's server_name extension (RFC 6066 3: a
 * 2-byte list length, then entries of a 1-byte type and a 2-byte length;
 * type 0 is host_name), given the extension's body (ext, len) as the TLS
 * library hands it over. 0: *name (not NUL-terminated, inside ext) and
 * *name_len set to the host_name entry; -1: malformed (lengths that do not
 * add up, an empty or second host_name, no host_name at all). */
int sni_ext_host_name(const unsigned char *ext, size_t len, const char **name,
		      size_t *name_len);

/* What does the ClientHello server name `name` (len bytes, not
 * NUL-terminated necessarily; NULL or len 0 = no SNI sent) ask for?
 * SNI_BROKER sets *node_id. pattern must have passed sni_pattern_check. */
enum sni_match sni_classify(const char *bootstrap_host, const char *pattern, const char *name,
			    size_t len, int32_t *node_id);

#endif
