/*
 * config — the ferry configuration model and its INI parser.
 *
 * One parser serves every role: the supervisor parses the operator's file,
 * `ferryd -t` validates it, and each worker parses the canonical text of its
 * own cluster that the supervisor sends over IPC. Parsing has no side
 * effects (no sockets, no files besides the one read). Every problem is
 * reported as "file:line: message" and all problems are collected, not just
 * the first.
 *
 * Return convention: 0 on success, -1 when the config is invalid (errors are
 * then in the cfg_errors list) or could not be read.
 */
#ifndef FERRY_COMMON_CONFIG_H
#define FERRY_COMMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cidr.h"

#define CFG_NAME_MAX 64    /* cluster names: [A-Za-z0-9._-]{1,63} */
#define CFG_HOST_MAX 256   /* host names / literal addresses */
#define CFG_MAX_WORKERS 64 /* worker processes per cluster */
#define CFG_MAX_CONNECTIONS_AUTO 10000 /* max_connections = auto: at most this */
/* The one size limit of a configuration: a config file read from disk
 * (startup, SIGHUP, `ferryd -t`, an empty validate/reload request) and a
 * config posted to the admin API (HTTP_MAX_BODY is defined as this) are
 * refused beyond it. Small enough that 1,024 admin connections each
 * uploading one cannot exhaust memory by themselves. */
#define CFG_MAX_FILE_BYTES (4u << 20)

/* ---- TLS ---- */
#define CFG_PATH_MAX 1024  /* certificate/key file paths; "" = unset */
#define CFG_TLS_CIPHERS_MAX 512
/* A TLS file (certificate, key, CA bundle) the supervisor reads for a
 * worker is refused beyond this size. */
#define CFG_TLS_FILE_MAX (1u << 20)

enum cfg_tls_version { CFG_TLS_1_2 = 0, CFG_TLS_1_3 };

/* ---- ferry's own SASL towards the upstream (upstream_sasl_*) ---- */
enum cfg_sasl_mech {
	CFG_SASL_NONE = 0,       /* ferry's own requests do not authenticate */
	CFG_SASL_PLAIN, CFG_SASL_SCRAM_SHA_256, CFG_SASL_SCRAM_SHA_512,
};
#define CFG_SASL_USER_MAX 256       /* upstream_sasl_username: 1-255 bytes */
#define CFG_SASL_PASSWORD_MAX 1024  /* bytes of the password (its file may add a line end) */
enum cfg_tls_client_auth {
	CFG_TLS_AUTH_NONE = 0,   /* no client certificate asked */
	CFG_TLS_AUTH_REQUESTED,  /* asked; verified when sent; none is admitted */
	CFG_TLS_AUTH_REQUIRED,   /* a verified client certificate or no connection */
};

/* [ferry] admin access control keys (admin) */
#ifndef CFG_PATH_MAX
#define CFG_PATH_MAX 1024  /* file paths of the config (certificates, keys, tokens) */
#endif
#define CFG_GROUP_MAX 64          /* control_socket_group */
#define CFG_OPEN_PATHS_MAX 1024   /* admin_open_paths, normalised */
#define CFG_DEFAULT_OPEN_PATHS "/admin/health,/admin/ready,/metrics"

enum cfg_policy_startup { CFG_STARTUP_FAIL_FAST = 0, CFG_STARTUP_BEST_EFFORT };
enum cfg_policy_reload { CFG_RELOAD_ALL_OR_NOTHING = 0, CFG_RELOAD_PER_CLUSTER };
enum cfg_log_format { CFG_LOG_LOGFMT = 0, CFG_LOG_JSON };
/* How clients reach the brokers: one port per broker (broker_ports,
 * the default) or one TLS port where the ClientHello server name says
 * which broker (sni_bootstrap_host, sni_broker_pattern; see common/sni.h). */
enum cfg_gateway { CFG_GATEWAY_PORTS = 0, CFG_GATEWAY_SNI };
/* Which labels the upstream latency histogram of /metrics carries
 * (ferry_request_duration_seconds): the cluster and the API (the default,
 * 0), the cluster, or none (not exposed). */
enum cfg_metrics_latency { CFG_LATENCY_API = 0, CFG_LATENCY_CLUSTER, CFG_LATENCY_OFF };
/* A PROXY protocol header (v1 or v2) before the client's first byte:
 * never read (off), read when one comes from a trusted source (optional),
 * or required of every client (required: from a trusted source only). */
enum cfg_proxy_protocol {
	CFG_PROXY_OFF = 0, CFG_PROXY_OPTIONAL, CFG_PROXY_REQUIRED,
};

/* A host:port pair. host is a name or a literal address, IPv6 without the
 * brackets ("::1"), "0.0.0.0" / "::" for wildcards.
 *
 * Listening addresses (a cluster's `bootstrap`, `admin_listen`) are always
 * numeric: the parser accepts only IP literals (wildcards included) and
 * "localhost", stores "localhost" as "127.0.0.1" and IPv6 literals in their
 * normal inet_ntop form, and refuses host names, so binding never needs a
 * name lookup. Only `upstream` hosts are names resolved at connect time. */
struct cfg_addr {
	char host[CFG_HOST_MAX];
	uint16_t port;
};

/* The secret files of a cluster, in this order (IPC_TLS_MATERIAL carries
 * them in it too): what its TLS keys name, and the password ferry
 * authenticates itself with upstream (upstream_sasl_password_file). */
enum cfg_tls_file {
	CFG_TLS_F_CERT = 0, CFG_TLS_F_KEY, CFG_TLS_F_CLIENT_CA,
	CFG_TLS_F_UPSTREAM_CA, CFG_TLS_F_UPSTREAM_CERT, CFG_TLS_F_UPSTREAM_KEY,
	CFG_TLS_F_UPSTREAM_SASL_PASSWORD,
	CFG_TLS_FILES,
};

/* Their contents, read by the supervisor (common/tlsmat.h); len 0 = the key
 * is unset. The password is stored without its line end. Freed (and
 * wiped: keys, password) by cfg_free / cfg_tls_files_free. */
struct cfg_tls_files {
	char *data[CFG_TLS_FILES];
	size_t len[CFG_TLS_FILES];
};

/* upstream_dial_map entry: an upstream broker address (bootstrap or learned
 * from metadata) and the address actually dialled for it. */
struct cfg_dial {
	struct cfg_addr from, to;
};

/* Slots of cfg_cluster.key_lines (enough for every cluster key). */
#define CFG_CLUSTER_KEYS_MAX 48

struct cfg_cluster {
	char name[CFG_NAME_MAX];
	int line;                        /* line of the [cluster NAME] header */

	struct cfg_addr *upstream;       /* bootstrap servers, tried in order */
	size_t n_upstream;
	struct cfg_addr bootstrap;       /* listener clients bootstrap to */
	char advertised_host[CFG_HOST_MAX];
	uint16_t broker_port_first;      /* broker_ports = first-last inclusive */
	uint16_t broker_port_last;
	int32_t *node_ids;               /* n_brokers entries; default 0..n-1 */
	size_t n_brokers;                /* = last - first + 1 */
	uint32_t max_connections;        /* 0 = auto (the default): the supervisor makes
	                                    it what the workers' descriptor limit
	                                    allows, at most CFG_MAX_CONNECTIONS_AUTO
	                                    (a worker is only ever sent a number) */
	uint64_t max_frame_bytes;        /* default 100 MiB */
	uint64_t idle_timeout_ms;        /* default 10 min; 0 = never */
	uint64_t request_timeout_ms;     /* a started request frame must complete
	                                    within this; default 30s */
	uint32_t max_inflight;           /* max_inflight_per_connection, default 1024:
	                                    reading stops beyond it */
	bool handover;                   /* hand live connections to a new generation on
	                                    reload (default on) */
	bool splice;                     /* large pass-through frame bodies move with
	                                    splice(2), not through a buffer, on
	                                    plaintext connections (default on) */
	uint32_t workers;                /* worker processes per generation, default 1;
	                                    0 = auto (the CPUs ferryd may run on) */
	uint64_t sasl_max_frame_bytes;   /* client frames before SASL authentication
	                                    (worker/kafka/sasl.h); default 512 KiB */

	/* ---- the client edge behind a load balancer */
	enum cfg_proxy_protocol proxy_protocol; /* default off */
	struct cidr_list proxy_from;     /* proxy_protocol_from: the balancers'
	                                    networks; required unless off */
	uint64_t max_age_ms;             /* connection_max_age: a connection older
	                                    than its (jittered) age closes at the
	                                    next request boundary; 0 = never */
	uint64_t max_age_jitter_ms;      /* connection_max_age_jitter: each
	                                    connection's age is drawn uniformly in
	                                    [max_age - jitter, max_age]; default a
	                                    tenth of max_age */

	/* ---- TLS: client-facing (tls) and upstream (upstream_tls). The
	 * files are read by the supervisor only (IPC_TLS_MATERIAL carries their
	 * bytes to the worker); paths are absolute, "" = unset.
	 * The strings of a cluster (paths, cipher lists, SNI names) are
	 * allocated as long as their value (at most CFG_PATH_MAX,
	 * CFG_TLS_CIPHERS_MAX, CFG_HOST_MAX), never NULL in a parsed config
	 * (an unset one is ""), and freed by cfg_free / cfg_cluster_free: a
	 * ferryd of thousands of clusters keeps each of them small. */
	bool tls;                        /* tls_cert (and tls_key) set */
	const char *tls_cert;            /* PEM: certificate, then its chain */
	const char *tls_key;             /* PEM private key */
	const char *tls_client_ca;       /* PEM CA bundle for client certificates */
	int tls_min_version;             /* enum cfg_tls_version, default 1.2 */
	const char *tls_ciphers;         /* TLS <= 1.2 list; "" = OpenSSL's */
	const char *tls_ciphersuites;    /* TLS 1.3 suites; "" = OpenSSL's */
	enum cfg_tls_client_auth tls_client_auth;   /* default none; required when
	                                                tls_client_ca is set */
	bool upstream_tls;               /* TLS to the upstream brokers */
	const char *upstream_ca;         /* "" = the system trust store */
	const char *upstream_cert;       /* client certificate for the upstream */
	const char *upstream_key;
	bool upstream_tls_verify;        /* check the broker's name; default on */
	/* ferry's own SASL towards the upstream, used only by the worker's
	 * metadata fetch (its health probe too); clients authenticate
	 * themselves through ferry. The password file is read by the
	 * supervisor like the TLS files. */
	enum cfg_sasl_mech upstream_sasl_mechanism;
	char upstream_sasl_username[CFG_SASL_USER_MAX];
	char upstream_sasl_password_file[CFG_PATH_MAX];
	struct cfg_dial *dial_map;       /* upstream_dial_map, in file order */
	size_t n_dial_map;
	/* Contents of the files above; NULL until the supervisor read them
	 * (tlsmat_read). Not part of the canonical text; part of the
	 * cluster's version (plan_cluster_version). */
	struct cfg_tls_files *files;
	/* Line where each cluster key was set (0 = default); see
	 * cfg_cluster_key_line(). */
	int key_lines[CFG_CLUSTER_KEYS_MAX];
	/* SNI gateway. With CFG_GATEWAY_SNI the cluster has the bootstrap
	 * listener only: no broker_ports, node_ids or advertised_host (n_brokers
	 * is 0, node_ids NULL, broker_port_first/last 0); any node id the
	 * upstream names is reached as sni_broker_pattern with the id, on the
	 * bootstrap port. Requires client TLS (tls_cert). */
	enum cfg_gateway gateway;
	const char *sni_bootstrap_host;
	const char *sni_broker_pattern;
};

struct cfg {
	char *path;                      /* file name used in messages */

	/* [ferry] */
	char control_socket[108];        /* default FERRY_DEFAULT_SOCKET */
	bool admin_enabled;              /* admin_listen != "off" */
	struct cfg_addr admin_listen;    /* default 127.0.0.1:9190 */
	char user[64];                   /* default "ferry" */
	enum cfg_policy_startup startup_policy;
	enum cfg_policy_reload reload_policy;
	uint64_t drain_timeout_ms;       /* default 30s */
	uint64_t init_timeout_ms;        /* default 10s */
	int log_level;                   /* enum log_level from common/log.h; default info */
	enum cfg_log_format log_format;
	bool persist;                    /* write a posted config to path on reload */
	uint32_t crash_loop_limit;       /* crashes within the window -> failed; default 5 */
	uint64_t crash_loop_window_ms;   /* default 60s */
	uint64_t drain_spread_ms;        /* connections that must close on a reload close
	                                    at request boundaries spread over this
	                                    (bounded by drain_timeout); default 5s */
	bool reload_upstream_check;      /* a changed upstream must answer metadata
	                                    before its cluster commits; default on */
	uint64_t tls_ticket_rotation_ms; /* a new session-ticket key every this;
	                                    default 1h (supervisor/tickets.h) */
	uint64_t worker_watchdog_ms;     /* a worker must answer a ping within this;
	                                    default 10s, 0 = off */
	bool sandbox;                    /* workers lock themselves down after start
	                                    (worker/lockdown.h); default on; a change
	                                    applies to workers started after it */
	enum cfg_metrics_latency metrics_latency; /* default api */

	/* [ferry] admin access control (supervisor/adminauth.h says how they
	 * are used). Paths are absolute; "" = unset. */
	unsigned control_socket_mode;    /* permission bits, default 0600; never any
	                                    bit for "other" */
	char control_socket_group[CFG_GROUP_MAX]; /* group name or numeric gid the
	                                    socket is given; "" = unchanged */
	char admin_token_file[CFG_PATH_MAX];      /* bearer token for admin_listen */
	char admin_open_paths[CFG_OPEN_PATHS_MAX]; /* comma list of paths readable
	                                    without credentials on admin_listen,
	                                    normalised ("a,b"); "" = none */
	char admin_tls_cert[CFG_PATH_MAX];        /* HTTPS on admin_listen (with key) */
	char admin_tls_key[CFG_PATH_MAX];
	char admin_tls_client_ca[CFG_PATH_MAX];   /* client certificates it verifies
	                                    authorize like the token */
	bool admin_insecure;             /* allow a non-loopback admin_listen with no
	                                    credentials; default off */

	struct cfg_cluster *clusters;    /* in file order */
	size_t n_clusters;

	int ferry_line;                  /* line of the [ferry] header, 0 if none */
	int ferry_key_lines[32];         /* see cfg_ferry_key_line() */
};

/*
 * A growable list of "file:line: message" strings.
 *
 * Out of memory: cfg_errors_add never aborts and never loses the fact that
 * something failed. The list always keeps one slot in reserve (before its
 * first allocation, msg is pointed at a static one-entry list), so when a
 * message or the list cannot be allocated, the entry "out of memory" (a
 * static string) is appended in its place and `oom` is set. From then on the list is closed:
 * further adds are ignored, so "out of memory" is its last entry and n grows
 * by one at most. Readers need nothing special (msg[0..n) are always valid
 * strings); cfg_errors_free knows the static entry.
 */
#define CFG_ERR_OOM "out of memory"

struct cfg_errors {
	char **msg;
	size_t n, cap;
	bool oom;              /* an add failed; "out of memory" is msg[n-1] */
};

void cfg_errors_init(struct cfg_errors *e);
void cfg_errors_free(struct cfg_errors *e);
/* printf-style append; on allocation failure appends CFG_ERR_OOM instead
 * (see above). Never aborts. */
void cfg_errors_add(struct cfg_errors *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Parse and validate `text` (len bytes, need not be NUL-terminated); `path`
 * names it in error messages. On success fills *out (caller frees with
 * cfg_free) and returns 0. On failure returns -1, *out is left zeroed and
 * every error is appended to errs. Running out of memory is a failure like
 * any other: -1, nothing leaked, and an error ending in "out of memory"
 * ("file:line: out of memory", "file:line: KEY: out of memory", or the bare
 * CFG_ERR_OOM when even the message could not be allocated). */
int cfg_parse_string(const char *path, const char *text, size_t len,
		     struct cfg *out, struct cfg_errors *errs);

/* Read the file and call cfg_parse_string. An unreadable file is one error
 * "path: cannot read: strerror". */
int cfg_parse_file(const char *path, struct cfg *out, struct cfg_errors *errs);

/* What max_connections = auto (0) becomes for a cluster with n_brokers
 * broker ports under a descriptor limit of fd_limit (0: none known):
 * min(CFG_MAX_CONNECTIONS_AUTO, (fd_limit - 64 - n_brokers) / 2), at least
 * 1: two descriptors per connection (client and upstream), its listeners,
 * and some for the worker itself. */
uint32_t cfg_max_connections_auto(uint64_t fd_limit, size_t n_brokers);

void cfg_free(struct cfg *c);

/* Move cluster i out of c into *out (c no longer has it); the caller frees
 * it with cfg_cluster_free. */
void cfg_cluster_take(struct cfg *c, size_t i, struct cfg_cluster *out);
/* Free what a cluster holds (not the struct itself) and zero it. */
void cfg_cluster_free(struct cfg_cluster *cl);
/* Free c's clusters (n_clusters becomes 0), keeping the [ferry] settings:
 * for a holder that keeps each cluster's configuration elsewhere. */
void cfg_drop_clusters(struct cfg *c);

/* Canonical text of one cluster: "[cluster NAME]\n" then every key, in a
 * fixed order, with normalised values ("key = value\n"), defaults written
 * out. Feeding it back to cfg_parse_string yields an equal cluster. Used for
 * IPC and per-cluster hashing. Returns malloc'd NUL-terminated text, or NULL
 * when out of memory. */
char *cfg_cluster_canonical(const struct cfg_cluster *cl);

/* Find a cluster by name; NULL if absent. */
const struct cfg_cluster *cfg_find_cluster(const struct cfg *c, const char *name);

/* Index of node_id in cl->node_ids, or -1. The broker port of node id k is
 * broker_port_first + cfg_node_index(cl, k). */
int cfg_node_index(const struct cfg_cluster *cl, int32_t node_id);

/* Line where a key of this cluster was set, 0 when it was left at its
 * default (or the key is unknown). For messages about what a key names
 * (an unreadable tls_cert file, say) found after parsing. */
int cfg_cluster_key_line(const struct cfg_cluster *cl, const char *key);

/* The address to dial for upstream broker address host:port: its
 * upstream_dial_map target, or NULL when it is dialled as is. The TLS name
 * (SNI, certificate check) stays host either way. */
const struct cfg_addr *cfg_dial_lookup(const struct cfg_cluster *cl,
    const char *host, uint16_t port);

const char *cfg_tls_version_str(enum cfg_tls_version v);
/* The key that names file f ("tls_cert", ...) and its path in cl ("" unset). */
const char *cfg_tls_file_key(enum cfg_tls_file f);
const char *cfg_tls_file_path(const struct cfg_cluster *cl, enum cfg_tls_file f);
/* Wipes (sodium_memzero) and frees the contents and f itself; NULL is fine. */
void cfg_tls_files_free(struct cfg_tls_files *f);
const char *cfg_tls_client_auth_str(enum cfg_tls_client_auth a);
/* "none", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512" */
const char *cfg_sasl_mech_str(enum cfg_sasl_mech m);

/* Line where a [ferry] key was set, 0 when it was left at its default (or
 * the key is unknown). */
int cfg_ferry_key_line(const struct cfg *c, const char *key);

/* Is the listening address host (as stored: an IP literal) a loopback
 * address (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104)? Wildcards are not. */
bool cfg_addr_is_loopback(const char *host);

/* Does name follow the rule of cluster names: 1 to CFG_NAME_MAX - 1
 * characters of A-Z a-z 0-9 . _ - ? */
bool cfg_cluster_name_ok(const char *name);

const char *cfg_policy_startup_str(enum cfg_policy_startup p);
const char *cfg_policy_reload_str(enum cfg_policy_reload p);
/* "ports" / "sni" */
const char *cfg_gateway_str(enum cfg_gateway g);
/* "off" / "cluster" / "api" */
const char *cfg_metrics_latency_str(enum cfg_metrics_latency m);
/* "off" / "optional" / "required" */
const char *cfg_proxy_protocol_str(enum cfg_proxy_protocol m);

#endif
