/*
 * config_priv — what the files of the config parser share; private to
 * common/config*.c.
 *
 * The parser is one module in five files:
 *   config.c          the reader (inih, line numbers, section headers), the
 *                     error list, the public parse/free/lookup API, the
 *                     small value helpers below;
 *   config_ferry.c    the [ferry] keys: table and setters;
 *   config_cluster.c  the [cluster NAME] keys: table and setters;
 *   config_check.c    the cross-checks once the whole file was read;
 *   config_canon.c    the canonical text of one cluster.
 *
 * Return conventions: setters and value helpers return 0, or -1 with one
 * line in err (no file:line: the reader adds it); cfgp_err appends
 * "file:line: message" to the parse's error list.
 */
#ifndef FERRY_COMMON_CONFIG_PRIV_H
#define FERRY_COMMON_CONFIG_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/config.h"

#define CFGP_ERRLEN	512
#define CFGP_USER_MAX	32
#define CFGP_DEF_ADMIN_HOST "127.0.0.1"
#define CFGP_DEF_ADMIN_PORT 9190

enum cfgp_section {
	CFGP_SEC_NONE = 0,	/* before the first header */
	CFGP_SEC_FERRY,
	CFGP_SEC_CLUSTER,
	CFGP_SEC_SKIP,		/* a rejected header: ignore its keys */
};

enum cfgp_fkey {
	FK_CONTROL_SOCKET = 0, FK_ADMIN_LISTEN, FK_USER, FK_STARTUP_POLICY,
	FK_RELOAD_POLICY, FK_DRAIN_TIMEOUT, FK_INIT_TIMEOUT, FK_LOG_LEVEL,
	FK_LOG_FORMAT, FK_PERSIST, FK_CRASH_LOOP_LIMIT, FK_CRASH_LOOP_WINDOW,
	FK_WORKER_WATCHDOG, FK_DRAIN_SPREAD, FK_RELOAD_UPSTREAM_CHECK,
	/* admin access control */
	FK_CONTROL_SOCKET_MODE, FK_CONTROL_SOCKET_GROUP, FK_ADMIN_TOKEN_FILE,
	FK_ADMIN_OPEN_PATHS, FK_ADMIN_TLS_CERT, FK_ADMIN_TLS_KEY, FK_ADMIN_TLS_CLIENT_CA,
	FK_ADMIN_INSECURE,
	FK_TLS_TICKET_ROTATION,
	FK_SANDBOX,
	FK_METRICS_LATENCY,
	FK_COUNT,
};

enum cfgp_ckey {
	CK_UPSTREAM = 0, CK_BOOTSTRAP, CK_ADVERTISED_HOST, CK_BROKER_PORTS,
	CK_NODE_IDS, CK_MAX_CONNECTIONS, CK_MAX_FRAME_BYTES, CK_IDLE_TIMEOUT,
	CK_REQUEST_TIMEOUT, CK_MAX_INFLIGHT, CK_WORKERS, CK_HANDOVER,
	/* frame limit before SASL authentication */
	CK_SASL_MAX_FRAME_BYTES,
	/* TLS to clients and to the upstream */
	CK_TLS_CERT, CK_TLS_KEY, CK_TLS_MIN_VERSION, CK_TLS_CIPHERS,
	CK_TLS_CIPHERSUITES, CK_TLS_CLIENT_CA, CK_TLS_CLIENT_AUTH,
	CK_UPSTREAM_TLS, CK_UPSTREAM_CA, CK_UPSTREAM_CERT, CK_UPSTREAM_KEY,
	CK_UPSTREAM_TLS_VERIFY, CK_UPSTREAM_DIAL_MAP,
	/* ferry's own SASL towards the upstream */
	CK_UPSTREAM_SASL_MECHANISM, CK_UPSTREAM_SASL_USERNAME, CK_UPSTREAM_SASL_PASSWORD_FILE,
	CK_GATEWAY, CK_SNI_BOOTSTRAP_HOST, CK_SNI_BROKER_PATTERN,	/* SNI gateway */
	/* behind a load balancer: PROXY protocol, connection max-age */
	CK_PROXY_PROTOCOL, CK_PROXY_PROTOCOL_FROM, CK_MAX_AGE, CK_MAX_AGE_JITTER,
	CK_SPLICE,	/* zero copy of frame bodies */
	CK_COUNT,
};

/* Where each key of one cluster section was set and whether it parsed. */
struct cfgp_meta {
	int line[CK_COUNT];
	int ok[CK_COUNT];
};

/* Parser state; lives on the stack of cfg_parse_string. */
struct cfgp {
	const char *path;
	const char *text;
	size_t len, pos;
	int lineno;			/* line last handed to inih */
	struct cfg *cfg;
	struct cfg_errors *errs;
	enum cfgp_section sec;
	int ferry_line;			/* header of [ferry]; 0 when absent */
	int fline[FK_COUNT];
	int fok[FK_COUNT];
	struct cfgp_meta *meta;		/* parallel to cfg->clusters */
	size_t cap;
	int n_cluster_headers;		/* including rejected ones */
	size_t nerr;			/* errors reported by this parse */
	size_t *names;			/* the clusters by name: index + 1, 0 empty
					   (open addressing, a power of 2 long) */
	size_t names_cap;
};

struct cfgp_fkeydef {
	const char *name;
	int (*set)(struct cfg *, const char *, char *, size_t);
};

struct cfgp_ckeydef {
	const char *name;
	int (*set)(struct cfg_cluster *, const char *, char *, size_t);
};

/* One listening address, for the port conflict check. */
struct cfgp_listener {
	const char *host;
	uint16_t first, last;
	size_t owner;			/* cluster index; SIZE_MAX = admin */
	const char *key;
	int line;			/* 0 = default admin_listen */
};

/* ---- config.c ---- */

/* Append "file:line: message" to the parse's error list. */
void cfgp_err(struct cfgp *p, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

int cfgp_is_blank(char c);
/* True for the any-address of either family ("0.0.0.0", "::", ...). */
int cfgp_host_wildcard(const char *h);
/* A listening address made numeric (literal, localhost, /etc/hosts). */
int cfgp_listen_host(struct cfg_addr *a, char *err, size_t errlen);
/* Index of v in names, or -1 with a "use ..." hint in err. */
int cfgp_enum(const char *v, const char *const *names, int n, char *err,
    size_t errlen, const char *hint);
/* on/off booleans of the config (also accepted: true/false, yes/no). */
int cfgp_onoff(const char *v, bool *out, char *err, size_t len);
/* A file the supervisor reads: an absolute path without control characters. */
int cfgp_path(const char *v, char *out, char *err, size_t len);
/* 1..max characters of [A-Za-z0-9._-]: cluster and user names. */
int cfgp_name_ok(const char *s, size_t max);

/* ---- config_ferry.c, config_cluster.c ---- */

extern const struct cfgp_fkeydef cfgp_fkeys[FK_COUNT];

/* The value of a cluster's unset strings (config.h): shared, never freed. */
extern const char cfgp_empty[1];
/* Replace *dst (cfgp_empty or its own copy) with a copy of v: 0, or -1
 * with "out of memory" in err. */
int cfgp_str_set(const char **dst, const char *v, char *err, size_t len);
/* cfgp_path into a string of the cluster. */
int cfgp_path_set(const char *v, const char **dst, char *err, size_t len);
extern const struct cfgp_ckeydef cfgp_ckeys[CK_COUNT];

/* ---- config_check.c ---- */

/* The cross-checks, after the whole text was read. */
void cfgp_finish(struct cfgp *p);

#endif
