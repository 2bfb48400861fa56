/*
 * config_cluster — the keys of a [cluster NAME] section: the table
 * cfgp_ckeys (key name -> setter) and one setter per key (listeners,
 * upstream, limits, TLS both ways, the SNI gateway). Cross-checks between
 * keys run after the whole file was read (config_check.c). See config.h
 * and config_priv.h.
 */
#include "common/config.h"
#include "common/config_priv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/sni.h"
#include "common/units.h"

static int
cfgp_host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_' ||
	    c == ':';
}

static int
cfgp_set_upstream(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	struct cfg_addr *list;
	const char *s, *comma;
	char item[CFGP_ERRLEN];
	size_t n = 1, i = 0, ilen;

	for (s = v; *s != '\0'; s++)
		if (*s == ',')
			n++;
	if ((list = calloc(n, sizeof *list)) == NULL) {
		snprintf(err, len, CFG_ERR_OOM);
		return -1;
	}
	for (s = v;; s = comma + 1) {
		comma = strchr(s, ',');
		ilen = comma ? (size_t)(comma - s) : strlen(s);
		if (ilen >= sizeof item)
			ilen = sizeof item - 1;
		memcpy(item, s, ilen);
		item[ilen] = '\0';
		if (units_parse_addr(item, &list[i], 0, err, len) != 0) {
			free(list);
			return -1;
		}
		i++;
		if (comma == NULL)
			break;
	}
	cl->upstream = list;
	cl->n_upstream = n;
	return 0;
}

static int
cfgp_set_bootstrap(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	struct cfg_addr a;

	if (units_parse_addr(v, &a, 0, err, len) != 0 ||
	    cfgp_listen_host(&a, err, len) != 0)
		return -1;
	cl->bootstrap = a;
	return 0;
}

static int
cfgp_set_advertised_host(struct cfg_cluster *cl, const char *v, char *err,
    size_t len)
{
	const char *b = v;
	size_t n = strlen(v), i;

	if (n >= 2 && v[0] == '[' && v[n - 1] == ']') {
		b++;
		n -= 2;
	}
	if (n == 0) {
		snprintf(err, len, "empty host");
		return -1;
	}
	if (n >= CFG_HOST_MAX) {
		snprintf(err, len, "host longer than %d characters",
		    CFG_HOST_MAX - 1);
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (!cfgp_host_char(b[i])) {
			snprintf(err, len, "invalid host '%s'", v);
			return -1;
		}
	}
	memcpy(cl->advertised_host, b, n);
	cl->advertised_host[n] = '\0';
	if (cfgp_host_wildcard(cl->advertised_host)) {
		snprintf(err, len, "'%s' is a wildcard address; clients need "
		    "a reachable host", v);
		cl->advertised_host[0] = '\0';
		return -1;
	}
	return 0;
}

static int
cfgp_set_broker_ports(struct cfg_cluster *cl, const char *v, char *err,
    size_t len)
{
	return units_parse_port_range(v, &cl->broker_port_first,
	    &cl->broker_port_last, err, len);
}

/* Stores the ids; n_brokers temporarily holds their count until
 * cfgp_finish_cluster compares it with the port range. */
static int
cfgp_set_node_ids(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return units_parse_int_list(v, &cl->node_ids, &cl->n_brokers, err, len);
}

static int
cfgp_set_max_connections(struct cfg_cluster *cl, const char *v, char *err,
    size_t len)
{
	uint64_t n;

	if (strcmp(v, "auto") == 0) {
		cl->max_connections = 0;
		return 0;
	}
	if (units_parse_u64(v, 1, 1000000, &n, err, len) != 0)
		return -1;
	cl->max_connections = (uint32_t)n;
	return 0;
}

static int
cfgp_set_max_frame_bytes(struct cfg_cluster *cl, const char *v, char *err,
    size_t len)
{
	uint64_t n;

	if (units_parse_size(v, &n, err, len) != 0)
		return -1;
	if (n < 1024 || n > (1ULL << 30)) {
		snprintf(err, len, "%s out of range (1KiB-1GiB)", v);
		return -1;
	}
	cl->max_frame_bytes = n;
	return 0;
}

static int
cfgp_set_idle_timeout(struct cfg_cluster *cl, const char *v, char *err,
    size_t len)
{
	return units_parse_duration_ms(v, &cl->idle_timeout_ms, err, len);
}

static int
cfgp_set_request_timeout(struct cfg_cluster *cl, const char *v, char *err,
    size_t len)
{
	if (units_parse_duration_ms(v, &cl->request_timeout_ms, err, len) != 0)
		return -1;
	if (cl->request_timeout_ms == 0) {
		snprintf(err, len, "must be greater than 0");
		return -1;
	}
	return 0;
}

static int
cfgp_set_max_inflight(struct cfg_cluster *cl, const char *v, char *err,
    size_t len)
{
	uint64_t n;

	if (units_parse_u64(v, 1, 65536, &n, err, len) != 0)
		return -1;
	cl->max_inflight = (uint32_t)n;
	return 0;
}

/* workers = N (1..CFG_MAX_WORKERS) or auto (0: the CPUs ferryd may run on,
 * counted by the supervisor when it starts a generation). */
static int
cfgp_set_workers(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	uint64_t n;

	if (strcmp(v, "auto") == 0) {
		cl->workers = 0;
		return 0;
	}
	if (units_parse_u64(v, 1, CFG_MAX_WORKERS, &n, err, len) != 0)
		return -1;
	cl->workers = (uint32_t)n;
	return 0;
}

static int
cfgp_set_handover(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cfgp_onoff(v, &cl->handover, err, len);
}

static int
cfgp_set_splice(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cfgp_onoff(v, &cl->splice, err, len);
}

/* The pre-authentication frame limit (worker/kafka/sasl.h): the
 * same range as max_frame_bytes; the smaller of the two applies. */
static int
cfgp_set_sasl_max_frame_bytes(struct cfg_cluster *cl, const char *v, char *err,
    size_t len)
{
	uint64_t n;

	if (units_parse_size(v, &n, err, len) != 0)
		return -1;
	if (n < 1024 || n > (1ULL << 30)) {
		snprintf(err, len, "%s out of range (1KiB-1GiB)", v);
		return -1;
	}
	cl->sasl_max_frame_bytes = n;
	return 0;
}

/* ---- TLS keys ---- */

static const char *const cfgp_tls_version_names[] = { "1.2", "1.3" };
static const char *const cfgp_tls_auth_names[] = { "none", "requested", "required" };

static int
cfgp_set_tls_cert(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cfgp_path_set(v, &cl->tls_cert, err, len);
}

static int
cfgp_set_tls_key(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cfgp_path_set(v, &cl->tls_key, err, len);
}

static int
cfgp_set_tls_client_ca(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cfgp_path_set(v, &cl->tls_client_ca, err, len);
}

static int
cfgp_set_upstream_ca(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cfgp_path_set(v, &cl->upstream_ca, err, len);
}

static int
cfgp_set_upstream_cert(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cfgp_path_set(v, &cl->upstream_cert, err, len);
}

static int
cfgp_set_upstream_key(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cfgp_path_set(v, &cl->upstream_key, err, len);
}

static int
cfgp_set_tls_min_version(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	if (strcmp(v, "1.0") == 0 || strcmp(v, "1.1") == 0) {
		snprintf(err, len, "TLS %s is not supported: it is deprecated (RFC 8996); "
		    "use 1.2 or 1.3", v);
		return -1;
	}
	int i = cfgp_enum(v, cfgp_tls_version_names, 2, err, len, "1.2 or 1.3");

	if (i >= 0)
		cl->tls_min_version = i;
	return i < 0 ? -1 : 0;
}

/* An OpenSSL cipher list or TLS 1.3 suite list: its syntax only (the names
 * are checked by OpenSSL when the supervisor builds the context). */
static int
cfgp_cipher_list(const char *v, const char **out, char *err, size_t len)
{
	size_t n = strlen(v);

	if (n >= CFG_TLS_CIPHERS_MAX) {
		snprintf(err, len, "list too long (%zu characters, max %d)", n,
		    CFG_TLS_CIPHERS_MAX - 1);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		char c = v[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || strchr(":+-!@=_.,", c) != NULL)) {
			snprintf(err, len, "invalid character '%c' in cipher list", c);
			return -1;
		}
	}
	return cfgp_str_set(out, v, err, len);
}

static int
cfgp_set_tls_ciphers(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cfgp_cipher_list(v, &cl->tls_ciphers, err, len);
}

static int
cfgp_set_tls_ciphersuites(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cfgp_cipher_list(v, &cl->tls_ciphersuites, err, len);
}

static int
cfgp_set_tls_client_auth(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	int i = cfgp_enum(v, cfgp_tls_auth_names, 3, err, len,
	    "none, requested or required");

	if (i >= 0)
		cl->tls_client_auth = (enum cfg_tls_client_auth)i;
	return i < 0 ? -1 : 0;
}

static int
cfgp_set_upstream_tls(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cfgp_onoff(v, &cl->upstream_tls, err, len);
}

static int
cfgp_set_upstream_tls_verify(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cfgp_onoff(v, &cl->upstream_tls_verify, err, len);
}

/* upstream_dial_map = HOST:PORT=HOST:PORT[,...]; a source address at most
 * once. */
static int
cfgp_set_upstream_dial_map(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	struct cfg_dial *list;
	const char *s, *comma;
	char item[CFGP_ERRLEN], *eq;
	size_t n = 1, i = 0, ilen;

	for (s = v; *s != '\0'; s++)
		if (*s == ',')
			n++;
	if ((list = calloc(n, sizeof *list)) == NULL) {
		snprintf(err, len, CFG_ERR_OOM);
		return -1;
	}
	for (s = v;; s = comma + 1) {
		comma = strchr(s, ',');
		ilen = comma ? (size_t)(comma - s) : strlen(s);
		if (ilen >= sizeof item)
			ilen = sizeof item - 1;
		memcpy(item, s, ilen);
		item[ilen] = '\0';
		if ((eq = strchr(item, '=')) == NULL) {
			snprintf(err, len, "'%s' is not FROM_HOST:PORT=TO_HOST:PORT", item);
			goto fail;
		}
		*eq = '\0';
		if (units_parse_addr(item, &list[i].from, 0, err, len) != 0 ||
		    units_parse_addr(eq + 1, &list[i].to, 0, err, len) != 0)
			goto fail;
		for (size_t j = 0; j < i; j++)
			if (list[j].from.port == list[i].from.port &&
			    strcasecmp(list[j].from.host, list[i].from.host) == 0) {
				snprintf(err, len, "%s is mapped twice", item);
				goto fail;
			}
		i++;
		if (comma == NULL)
			break;
	}
	cl->dial_map = list;
	cl->n_dial_map = n;
	return 0;
fail:
	free(list);
	return -1;
}

/* ---- ferry's own SASL towards the upstream ---- */

static const char *const cfgp_sasl_mech_names[] = {
	"none", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512",
};

static int
cfgp_set_upstream_sasl_mechanism(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	/* the names as Kafka spells them; the mechanisms a client may pass
	 * through but ferry cannot speak itself get their own reason */
	if (strcmp(v, "GSSAPI") == 0 || strcmp(v, "OAUTHBEARER") == 0) {
		snprintf(err, len, "%s: ferry authenticates its own requests with PLAIN, "
		    "SCRAM-SHA-256 or SCRAM-SHA-512 (clients' %s passes through ferry whatever "
		    "this key says)", v, v);
		return -1;
	}
	for (int i = CFG_SASL_PLAIN; i <= CFG_SASL_SCRAM_SHA_512; i++)
		if (strcmp(v, cfgp_sasl_mech_names[i]) == 0) {
			cl->upstream_sasl_mechanism = (enum cfg_sasl_mech)i;
			return 0;
		}
	snprintf(err, len, "unknown mechanism '%s' (use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, "
	    "upper case as Kafka spells them)", v);
	return -1;
}

static int
cfgp_set_upstream_sasl_username(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	size_t n = strlen(v);

	if (n == 0 || n >= CFG_SASL_USER_MAX) {
		snprintf(err, len, "a user name of 1-%d bytes", CFG_SASL_USER_MAX - 1);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f) {
			snprintf(err, len, "control character in the user name");
			return -1;
		}
	memcpy(cl->upstream_sasl_username, v, n + 1);
	return 0;
}

static int
cfgp_set_upstream_sasl_password_file(struct cfg_cluster *cl, const char *v, char *err,
    size_t len)
{
	return cfgp_path(v, cl->upstream_sasl_password_file, err, len);
}

/* ---- the SNI gateway's keys ---- */

static const char *const cfgp_gateway_names[] = { "ports", "sni" };

static int
cfgp_set_gateway(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	int i = cfgp_enum(v, cfgp_gateway_names, 2, err, len, "ports or sni");

	if (i >= 0)
		cl->gateway = (enum cfg_gateway)i;
	return i < 0 ? -1 : 0;
}

static int
cfgp_set_sni_bootstrap_host(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	char why[160];

	if (sni_host_check(v, strlen(v), why, sizeof why) != 0) {
		snprintf(err, len, "'%s': %s", v, why);
		return -1;
	}
	if (strlen(v) >= CFG_HOST_MAX) {
		snprintf(err, len, "longer than %d characters", CFG_HOST_MAX - 1);
		return -1;
	}
	return cfgp_str_set(&cl->sni_bootstrap_host, v, err, len);
}

static int
cfgp_set_sni_broker_pattern(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	if (sni_pattern_check(v, err, len) != 0)
		return -1;
	if (strlen(v) >= CFG_HOST_MAX) {
		snprintf(err, len, "longer than %d characters", CFG_HOST_MAX - 1);
		return -1;
	}
	return cfgp_str_set(&cl->sni_broker_pattern, v, err, len);
}

/* ---- behind a load balancer ---- */

static const char *const cfgp_proxy_names[] = { "off", "optional", "required" };

static int
cfgp_set_proxy_protocol(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	int i = cfgp_enum(v, cfgp_proxy_names, 3, err, len, "off, optional or required");

	if (i >= 0)
		cl->proxy_protocol = (enum cfg_proxy_protocol)i;
	return i < 0 ? -1 : 0;
}

static int
cfgp_set_proxy_protocol_from(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cidr_list_parse(v, &cl->proxy_from, err, len);
}

/* A connection's age: 0 (never), or a duration of at least a second (a
 * shorter one would close connections faster than clients reconnect). */
static int
cfgp_set_max_age(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	if (units_parse_duration_ms(v, &cl->max_age_ms, err, len) != 0)
		return -1;
	if (cl->max_age_ms != 0 && cl->max_age_ms < 1000) {
		snprintf(err, len, "%s is below 1s (0 turns the age limit off)", v);
		cl->max_age_ms = 0;
		return -1;
	}
	return 0;
}

static int
cfgp_set_max_age_jitter(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return units_parse_duration_ms(v, &cl->max_age_jitter_ms, err, len);
}

const struct cfgp_ckeydef cfgp_ckeys[CK_COUNT] = {
	[CK_UPSTREAM] = { "upstream", cfgp_set_upstream },
	[CK_BOOTSTRAP] = { "bootstrap", cfgp_set_bootstrap },
	[CK_ADVERTISED_HOST] = { "advertised_host", cfgp_set_advertised_host },
	[CK_BROKER_PORTS] = { "broker_ports", cfgp_set_broker_ports },
	[CK_NODE_IDS] = { "node_ids", cfgp_set_node_ids },
	[CK_MAX_CONNECTIONS] = { "max_connections", cfgp_set_max_connections },
	[CK_MAX_FRAME_BYTES] = { "max_frame_bytes", cfgp_set_max_frame_bytes },
	[CK_IDLE_TIMEOUT] = { "idle_timeout", cfgp_set_idle_timeout },
	[CK_REQUEST_TIMEOUT] = { "request_timeout", cfgp_set_request_timeout },
	[CK_MAX_INFLIGHT] = { "max_inflight_per_connection", cfgp_set_max_inflight },
	[CK_WORKERS] = { "workers", cfgp_set_workers },
	[CK_HANDOVER] = { "handover", cfgp_set_handover },
	[CK_SASL_MAX_FRAME_BYTES] = { "sasl_max_frame_bytes", cfgp_set_sasl_max_frame_bytes },
	[CK_TLS_CERT] = { "tls_cert", cfgp_set_tls_cert },
	[CK_TLS_KEY] = { "tls_key", cfgp_set_tls_key },
	[CK_TLS_MIN_VERSION] = { "tls_min_version", cfgp_set_tls_min_version },
	[CK_TLS_CIPHERS] = { "tls_ciphers", cfgp_set_tls_ciphers },
	[CK_TLS_CIPHERSUITES] = { "tls_ciphersuites", cfgp_set_tls_ciphersuites },
	[CK_TLS_CLIENT_CA] = { "tls_client_ca", cfgp_set_tls_client_ca },
	[CK_TLS_CLIENT_AUTH] = { "tls_client_auth", cfgp_set_tls_client_auth },
	[CK_UPSTREAM_TLS] = { "upstream_tls", cfgp_set_upstream_tls },
	[CK_UPSTREAM_CA] = { "upstream_ca", cfgp_set_upstream_ca },
	[CK_UPSTREAM_CERT] = { "upstream_cert", cfgp_set_upstream_cert },
	[CK_UPSTREAM_KEY] = { "upstream_key", cfgp_set_upstream_key },
	[CK_UPSTREAM_TLS_VERIFY] = { "upstream_tls_verify", cfgp_set_upstream_tls_verify },
	[CK_UPSTREAM_DIAL_MAP] = { "upstream_dial_map", cfgp_set_upstream_dial_map },
	[CK_UPSTREAM_SASL_MECHANISM] = { "upstream_sasl_mechanism",
		cfgp_set_upstream_sasl_mechanism },
	[CK_UPSTREAM_SASL_USERNAME] = { "upstream_sasl_username", cfgp_set_upstream_sasl_username },
	[CK_UPSTREAM_SASL_PASSWORD_FILE] = { "upstream_sasl_password_file",
		cfgp_set_upstream_sasl_password_file },
	[CK_GATEWAY] = { "gateway", cfgp_set_gateway },
	[CK_SNI_BOOTSTRAP_HOST] = { "sni_bootstrap_host", cfgp_set_sni_bootstrap_host },
	[CK_SNI_BROKER_PATTERN] = { "sni_broker_pattern", cfgp_set_sni_broker_pattern },
	[CK_PROXY_PROTOCOL] = { "proxy_protocol", cfgp_set_proxy_protocol },
	[CK_PROXY_PROTOCOL_FROM] = { "proxy_protocol_from", cfgp_set_proxy_protocol_from },
	[CK_MAX_AGE] = { "connection_max_age", cfgp_set_max_age },
	[CK_MAX_AGE_JITTER] = { "connection_max_age_jitter", cfgp_set_max_age_jitter },
	[CK_SPLICE] = { "splice", cfgp_set_splice },
};
_Static_assert(CK_COUNT <= CFG_CLUSTER_KEYS_MAX, "cfg_cluster.key_lines too small");

const char *
cfg_tls_version_str(enum cfg_tls_version v)
{
	if ((unsigned)v >= 2)
		return "unknown";
	return cfgp_tls_version_names[v];
}

const char *
cfg_tls_client_auth_str(enum cfg_tls_client_auth a)
{
	if ((unsigned)a >= 3)
		return "unknown";
	return cfgp_tls_auth_names[a];
}

const char *
cfg_sasl_mech_str(enum cfg_sasl_mech m)
{
	if ((unsigned)m > CFG_SASL_SCRAM_SHA_512)
		return "unknown";
	return cfgp_sasl_mech_names[m];
}

const char *
cfg_proxy_protocol_str(enum cfg_proxy_protocol m)
{
	if ((unsigned)m >= 3)
		return "unknown";
	return cfgp_proxy_names[m];
}

const char *
cfg_gateway_str(enum cfg_gateway g)
{
	if ((unsigned)g >= 2)
		return "unknown";
	return cfgp_gateway_names[g];
}
