/*
 * config — turns ferry's INI text into a validated struct cfg.
 *
 * inih does the key = value splitting and inline-comment stripping. Our own
 * line reader feeds it the text one line at a time, which gives us line
 * numbers (the Debian inih handler has none), lets us reject lines inih
 * would silently split, and lets us handle section headers ourselves (inih
 * truncates section names and does not report empty sections). Every
 * problem is appended to a cfg_errors list as "file:line: message"; parsing
 * continues so that all problems are reported at once. After the text is
 * read, cross-checks run over the whole file: required keys, defaults that
 * depend on other keys, and listening port conflicts.
 *
 * Nothing here aborts: a failed allocation is reported as an error
 * ("file:line: out of memory", see cfg_errors in config.h), everything
 * allocated so far is freed, and cfg_parse_string returns -1.
 */
#include "common/config.h"
#include "common/file.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sodium.h>

#include "common/log.h"
#include "common/sni.h"
#include "common/units.h"

#ifndef FERRY_DEFAULT_SOCKET
#define FERRY_DEFAULT_SOCKET "/run/ferry/ferry.sock"
#endif

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
	FK_COUNT,
};

enum cfgp_ckey {
	CK_UPSTREAM = 0, CK_BOOTSTRAP, CK_ADVERTISED_HOST, CK_BROKER_PORTS,
	CK_NODE_IDS, CK_MAX_CONNECTIONS, CK_MAX_FRAME_BYTES, CK_IDLE_TIMEOUT,
	CK_REQUEST_TIMEOUT, CK_MAX_INFLIGHT, CK_WORKERS, CK_HANDOVER,
	/* [sasl] */
	CK_SASL_MAX_FRAME_BYTES,
	/* [tls] */
	CK_TLS_CERT, CK_TLS_KEY, CK_TLS_MIN_VERSION, CK_TLS_CIPHERS,
	CK_TLS_CIPHERSUITES, CK_TLS_CLIENT_CA, CK_TLS_CLIENT_AUTH,
	CK_UPSTREAM_TLS, CK_UPSTREAM_CA, CK_UPSTREAM_CERT, CK_UPSTREAM_KEY,
	CK_UPSTREAM_TLS_VERIFY, CK_UPSTREAM_DIAL_MAP,
	CK_GATEWAY, CK_SNI_BOOTSTRAP_HOST, CK_SNI_BROKER_PATTERN,	/* [sni] */
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

static void cfg_errors_vadd(struct cfg_errors *e, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
static void cfgp_err(struct cfgp *p, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- error list ---- */

/* The out-of-memory entry and the list that holds only it (used when the
 * list itself was never allocated). Never written: a list in this state is
 * closed (oom set). */
static const char cfg_errors_oom_text[] = CFG_ERR_OOM;
static char *const cfg_errors_oom_list[1] = { (char *)cfg_errors_oom_text };

void
cfg_errors_init(struct cfg_errors *e)
{
	memset(e, 0, sizeof *e);
}

void
cfg_errors_free(struct cfg_errors *e)
{
	size_t i;

	for (i = 0; i < e->n; i++)
		if (e->msg[i] != cfg_errors_oom_text)
			free(e->msg[i]);
	if (e->msg != cfg_errors_oom_list)
		free(e->msg);
	memset(e, 0, sizeof *e);
}

/* Appends the static "out of memory" entry in the slot kept in reserve
 * (cap >= n + 1 holds whenever msg is allocated) and closes the list. */
static void
cfg_errors_oom(struct cfg_errors *e)
{
	if (e->msg == NULL) {
		e->msg = (char **)cfg_errors_oom_list;
		e->n = 1;
		e->cap = 1;
	} else {
		e->msg[e->n++] = (char *)cfg_errors_oom_text;
	}
	e->oom = true;
}

static void
cfg_errors_vadd(struct cfg_errors *e, const char *fmt, va_list ap)
{
	va_list ap2;
	char **nm;
	char *s;
	size_t ncap;
	int n;

	if (e->oom)
		return;
	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0 || (s = malloc((size_t)n + 1)) == NULL) {
		cfg_errors_oom(e);
		return;
	}
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	/* keep one slot free after this message for cfg_errors_oom */
	if (e->n + 2 > e->cap) {
		ncap = e->cap ? e->cap * 2 : 8;
		if ((nm = realloc(e->msg, ncap * sizeof *nm)) == NULL) {
			free(s);
			cfg_errors_oom(e);
			return;
		}
		e->msg = nm;
		e->cap = ncap;
	}
	e->msg[e->n++] = s;
}

void
cfg_errors_add(struct cfg_errors *e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cfg_errors_vadd(e, fmt, ap);
	va_end(ap);
}

/* Appends "path:line: " + the formatted message. */
static void
cfgp_err(struct cfgp *p, int line, const char *fmt, ...)
{
	char msg[CFGP_ERRLEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	p->nerr++;
	cfg_errors_add(p->errs, "%s:%d: %s", p->path, line, msg);
}

/* ---- small helpers ---- */

static int
cfgp_is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static int
cfgp_host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_' ||
	    c == ':';
}

/* True for the any-address of either family ("0.0.0.0", "::", ...). */
static int
cfgp_host_wildcard(const char *h)
{
	static const unsigned char zero[16];
	unsigned char a[16];

	if (inet_pton(AF_INET, h, a) == 1)
		return memcmp(a, zero, 4) == 0;
	if (inet_pton(AF_INET6, h, a) == 1)
		return memcmp(a, zero, 16) == 0;
	return 0;
}

/* Two listeners on the same port collide if their hosts are equal or
 * either one is a wildcard. Literal addresses compare in binary form. */
static int
cfgp_hosts_conflict(const char *a, const char *b)
{
	unsigned char x[16], y[16];

	if (cfgp_host_wildcard(a) || cfgp_host_wildcard(b))
		return 1;
	if (inet_pton(AF_INET, a, x) == 1 && inet_pton(AF_INET, b, y) == 1)
		return memcmp(x, y, 4) == 0;
	if (inet_pton(AF_INET6, a, x) == 1 && inet_pton(AF_INET6, b, y) == 1)
		return memcmp(x, y, 16) == 0;
	return strcasecmp(a, b) == 0;
}

#define CFGP_HOSTS_FILE "/etc/hosts"

/* The address of `name` in a hosts(5) file (the first line naming it), as
 * an IP literal in out. 0, or -1 when it is not there. A local file, never
 * DNS: how a fleet gives identical configs per-machine listen addresses
 * (each replica's /etc/hosts maps the same name to its own address). */
static int
cfgp_hosts_file_lookup(const char *path, const char *name, char *out, size_t outlen)
{
	FILE *f = fopen(path, "re");
	char line[1024];
	int rc = -1;
	unsigned char bin[16];

	if (f == NULL)
		return -1;
	while (rc == -1 && fgets(line, sizeof line, f) != NULL) {
		char *save = NULL, *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *ip = strtok_r(line, " \t\r\n", &save);
		if (ip == NULL)
			continue;
		bool v4 = inet_pton(AF_INET, ip, bin) == 1;
		if (!v4 && inet_pton(AF_INET6, ip, bin) != 1)
			continue;
		for (char *n = strtok_r(NULL, " \t\r\n", &save); n != NULL;
		    n = strtok_r(NULL, " \t\r\n", &save)) {
			if (strcasecmp(n, name) != 0)
				continue;
			if (v4)
				snprintf(out, outlen, "%s", ip);
			else if (inet_ntop(AF_INET6, bin, out, (socklen_t)outlen) == NULL)
				break;
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}

/*
 * A listening address must be numeric, so that binding it never needs a
 * (blocking) name lookup on the supervisor's loop: an IPv4 or IPv6 literal
 * (wildcards included), "localhost", which is stored as 127.0.0.1, or a
 * name listed in /etc/hosts (read here, at validation; DNS is never asked),
 * stored as its address. IPv6 literals are stored in their inet_ntop form
 * so equal addresses are equal strings (plan comparisons, status, canonical
 * text).
 */
static int
cfgp_listen_host(struct cfg_addr *a, char *err, size_t errlen)
{
	unsigned char bin[16];
	char norm[INET6_ADDRSTRLEN];

	if (strcasecmp(a->host, "localhost") == 0) {
		snprintf(a->host, sizeof a->host, "127.0.0.1");
		return 0;
	}
	if (inet_pton(AF_INET, a->host, bin) == 1)
		return 0;
	if (inet_pton(AF_INET6, a->host, bin) == 1 &&
	    inet_ntop(AF_INET6, bin, norm, sizeof norm) != NULL) {
		snprintf(a->host, sizeof a->host, "%s", norm);
		return 0;
	}
	if (cfgp_hosts_file_lookup(CFGP_HOSTS_FILE, a->host, norm, sizeof norm) == 0) {
		snprintf(a->host, sizeof a->host, "%s", norm);
		return 0;
	}
	snprintf(err, errlen, "%s is not an IP address (listeners bind to "
	    "addresses: IP literals, localhost or a name in /etc/hosts; DNS names are "
	    "resolved only for upstream)", a->host);
	return -1;
}

/* Index of v in names, or -1 with a "use ..." hint in err. */
static int
cfgp_enum(const char *v, const char *const *names, int n, char *err,
    size_t errlen, const char *hint)
{
	int i;

	for (i = 0; i < n; i++)
		if (strcmp(v, names[i]) == 0)
			return i;
	snprintf(err, errlen, "invalid value '%s' (use %s)", v, hint);
	return -1;
}

/* 1..max characters of [A-Za-z0-9._-]: cluster and user names. */
static int
cfgp_name_ok(const char *s, size_t max)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > max)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

/* ---- [ferry] keys ---- */

static const char *const cfgp_startup_names[] = { "fail-fast", "best-effort" };
static const char *const cfgp_reload_names[] = {
	"all-or-nothing", "per-cluster",
};
static const char *const cfgp_level_names[] = {
	"debug", "info", "warn", "error",
};
static const char *const cfgp_format_names[] = { "logfmt", "json" };

static int
cfgp_set_control_socket(struct cfg *c, const char *v, char *err, size_t len)
{
	size_t n = strlen(v);

	if (v[0] != '/') {
		snprintf(err, len, "'%s' is not an absolute path", v);
		return -1;
	}
	if (n >= sizeof c->control_socket) {
		snprintf(err, len, "path too long (%zu bytes, max %zu)", n,
		    sizeof c->control_socket - 1);
		return -1;
	}
	memcpy(c->control_socket, v, n + 1);
	return 0;
}

static int
cfgp_set_admin_listen(struct cfg *c, const char *v, char *err, size_t len)
{
	struct cfg_addr a;

	if (strcmp(v, "off") == 0) {
		c->admin_enabled = false;
		return 0;
	}
	if (units_parse_addr(v, &a, 0, err, len) != 0 ||
	    cfgp_listen_host(&a, err, len) != 0)
		return -1;
	c->admin_listen = a;
	c->admin_enabled = true;
	return 0;
}

static int
cfgp_set_user(struct cfg *c, const char *v, char *err, size_t len)
{
	if (v[0] == '-' || !cfgp_name_ok(v, CFGP_USER_MAX)) {
		snprintf(err, len, "invalid user name '%s'", v);
		return -1;
	}
	snprintf(c->user, sizeof c->user, "%s", v);
	return 0;
}

static int
cfgp_set_startup_policy(struct cfg *c, const char *v, char *err, size_t len)
{
	int i = cfgp_enum(v, cfgp_startup_names, 2, err, len,
	    "fail-fast or best-effort");

	if (i >= 0)
		c->startup_policy = (enum cfg_policy_startup)i;
	return i < 0 ? -1 : 0;
}

static int
cfgp_set_reload_policy(struct cfg *c, const char *v, char *err, size_t len)
{
	int i = cfgp_enum(v, cfgp_reload_names, 2, err, len,
	    "all-or-nothing or per-cluster");

	if (i >= 0)
		c->reload_policy = (enum cfg_policy_reload)i;
	return i < 0 ? -1 : 0;
}

/* on/off booleans of the config (also accepted: true/false, yes/no). */
static int
cfgp_onoff(const char *v, bool *out, char *err, size_t len)
{
	if (strcmp(v, "on") == 0 || strcmp(v, "true") == 0 || strcmp(v, "yes") == 0)
		*out = true;
	else if (strcmp(v, "off") == 0 || strcmp(v, "false") == 0 || strcmp(v, "no") == 0)
		*out = false;
	else {
		snprintf(err, len, "invalid value '%s' (use on or off)", v);
		return -1;
	}
	return 0;
}

static int
cfgp_positive_duration(const char *v, uint64_t *out, char *err, size_t len)
{
	uint64_t ms;

	if (units_parse_duration_ms(v, &ms, err, len) != 0)
		return -1;
	if (ms == 0) {
		snprintf(err, len, "must be greater than 0");
		return -1;
	}
	*out = ms;
	return 0;
}

static int
cfgp_set_drain_timeout(struct cfg *c, const char *v, char *err, size_t len)
{
	return cfgp_positive_duration(v, &c->drain_timeout_ms, err, len);
}

static int
cfgp_set_init_timeout(struct cfg *c, const char *v, char *err, size_t len)
{
	return cfgp_positive_duration(v, &c->init_timeout_ms, err, len);
}

static int
cfgp_set_log_level(struct cfg *c, const char *v, char *err, size_t len)
{
	int i = cfgp_enum(v, cfgp_level_names, 4, err, len,
	    "debug, info, warn or error");

	if (i >= 0)
		c->log_level = LOG_DEBUG + i;
	return i < 0 ? -1 : 0;
}

static int
cfgp_set_log_format(struct cfg *c, const char *v, char *err, size_t len)
{
	int i = cfgp_enum(v, cfgp_format_names, 2, err, len, "logfmt or json");

	if (i >= 0)
		c->log_format = (enum cfg_log_format)i;
	return i < 0 ? -1 : 0;
}

static int
cfgp_set_persist(struct cfg *c, const char *v, char *err, size_t len)
{
	if (cfgp_onoff(v, &c->persist, err, len) == 0)
		return 0;
	snprintf(err, len, "invalid boolean '%s' (use true or false)", v);
	return -1;
}

static int
cfgp_set_crash_loop_limit(struct cfg *c, const char *v, char *err, size_t len)
{
	uint64_t n;

	if (units_parse_u64(v, 1, 1000, &n, err, len) != 0)
		return -1;
	c->crash_loop_limit = (uint32_t)n;
	return 0;
}

static int
cfgp_set_crash_loop_window(struct cfg *c, const char *v, char *err, size_t len)
{
	return cfgp_positive_duration(v, &c->crash_loop_window_ms, err, len);
}

/* tls_ticket_rotation: how often the supervisor makes a new session-ticket
 * key (supervisor/tickets.h); 1s to 168h (a week). */
static int
cfgp_set_tls_ticket_rotation(struct cfg *c, const char *v, char *err, size_t len)
{
	uint64_t ms;

	if (units_parse_duration_ms(v, &ms, err, len) != 0)
		return -1;
	if (ms < 1000 || ms > 7ULL * 24 * 3600 * 1000) {
		snprintf(err, len, "'%s' out of range (1s-168h)", v);
		return -1;
	}
	c->tls_ticket_rotation_ms = ms;
	return 0;
}

/* worker_watchdog: 0 turns it off; otherwise at least 100ms (the ping
 * period is a quarter of it). */
static int
cfgp_set_worker_watchdog(struct cfg *c, const char *v, char *err, size_t len)
{
	uint64_t ms;

	if (units_parse_duration_ms(v, &ms, err, len) != 0)
		return -1;
	if (ms != 0 && ms < 100) {
		snprintf(err, len, "worker_watchdog '%s' is below 100ms (0 turns it off)", v);
		return -1;
	}
	c->worker_watchdog_ms = ms;
	return 0;
}

static int
cfgp_set_drain_spread(struct cfg *c, const char *v, char *err, size_t len)
{
	return units_parse_duration_ms(v, &c->drain_spread_ms, err, len);
}

static int
cfgp_set_reload_upstream_check(struct cfg *c, const char *v, char *err, size_t len)
{
	return cfgp_onoff(v, &c->reload_upstream_check, err, len);
}

/* ---- [ferry] admin access control (supervisor/adminauth.h) ---- */

#define CFGP_OPEN_PATH_MAX 128   /* one entry of admin_open_paths */
#define CFGP_OPEN_PATHS_N  32    /* entries of admin_open_paths */

/* control_socket_mode: octal permission bits. The owner keeps read and
 * write (ferryd's own user must reach its socket); nothing for "other",
 * since whoever can connect controls ferryd: widen it to a group with
 * control_socket_group and 0660 instead. */
static int
cfgp_set_control_socket_mode(struct cfg *c, const char *v, char *err, size_t len)
{
	unsigned long m = 0;
	const char *s;

	for (s = v; *s >= '0' && *s <= '7' && m <= 07777; s++)
		m = m * 8 + (unsigned long)(*s - '0');
	if (s == v || *s != '\0' || s - v > 4 || m > 0777) {
		snprintf(err, len, "'%s' is not an octal permission mode (like 0600 or 0660)", v);
		return -1;
	}
	if ((m & 0600) != 0600) {
		snprintf(err, len, "%04lo leaves out the owner's read and write (0600)", m);
		return -1;
	}
	if (m & 0007) {
		snprintf(err, len, "%04lo lets every local user control ferryd; widen it to a "
		    "group instead (control_socket_group, mode 0660)", m);
		return -1;
	}
	c->control_socket_mode = (unsigned)m;
	return 0;
}

static int
cfgp_set_control_socket_group(struct cfg *c, const char *v, char *err, size_t len)
{
	if (v[0] == '-' || !cfgp_name_ok(v, CFG_GROUP_MAX - 1)) {
		snprintf(err, len, "invalid group '%s' (a group name or a numeric gid)", v);
		return -1;
	}
	snprintf(c->control_socket_group, sizeof c->control_socket_group, "%s", v);
	return 0;
}

/* A file the supervisor reads: an absolute path without control
 * characters. Relative paths are refused rather than resolved against a
 * working directory that differs between ferryd, ferryd -t and systemd. */
static int
cfgp_path(const char *v, char *out, char *err, size_t len)
{
	size_t n = strlen(v);

	if (v[0] != '/') {
		snprintf(err, len, "'%s' is not an absolute path", v);
		return -1;
	}
	if (n >= CFG_PATH_MAX) {
		snprintf(err, len, "path too long (%zu bytes, max %d)", n, CFG_PATH_MAX - 1);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f) {
			snprintf(err, len, "control character in path");
			return -1;
		}
	memcpy(out, v, n + 1);
	return 0;
}

static int
cfgp_set_admin_token_file(struct cfg *c, const char *v, char *err, size_t len)
{
	return cfgp_path(v, c->admin_token_file, err, len);
}

static int
cfgp_set_admin_tls_cert(struct cfg *c, const char *v, char *err, size_t len)
{
	return cfgp_path(v, c->admin_tls_cert, err, len);
}

static int
cfgp_set_admin_tls_key(struct cfg *c, const char *v, char *err, size_t len)
{
	return cfgp_path(v, c->admin_tls_key, err, len);
}

static int
cfgp_set_admin_tls_client_ca(struct cfg *c, const char *v, char *err, size_t len)
{
	return cfgp_path(v, c->admin_tls_client_ca, err, len);
}

static int
cfgp_set_admin_insecure(struct cfg *c, const char *v, char *err, size_t len)
{
	return cfgp_onoff(v, &c->admin_insecure, err, len);
}

static int
cfgp_set_sandbox(struct cfg *c, const char *v, char *err, size_t len)
{
	return cfgp_onoff(v, &c->sandbox, err, len);
}

/* admin_open_paths: comma-separated absolute paths, matched exactly (no
 * query string); "none" or an empty value opens nothing. Stored as "a,b". */
static int
cfgp_set_admin_open_paths(struct cfg *c, const char *v, char *err, size_t len)
{
	char out[CFG_OPEN_PATHS_MAX];
	size_t o = 0, n = 0, i, ilen;
	const char *s = v, *comma;

	out[0] = '\0';
	if (strcmp(v, "none") == 0 || v[0] == '\0') {
		c->admin_open_paths[0] = '\0';
		return 0;
	}
	for (;; s = comma + 1) {
		comma = strchr(s, ',');
		ilen = comma ? (size_t)(comma - s) : strlen(s);
		while (ilen > 0 && cfgp_is_blank(*s)) {
			s++;
			ilen--;
		}
		while (ilen > 0 && cfgp_is_blank(s[ilen - 1]))
			ilen--;
		if (ilen == 0 || s[0] != '/') {
			snprintf(err, len, "entry %zu: '%.*s' is not a path (want /PATH,/PATH,...)",
			    n + 1, (int)(ilen > 64 ? 64 : ilen), s);
			return -1;
		}
		if (ilen >= CFGP_OPEN_PATH_MAX || ++n > CFGP_OPEN_PATHS_N) {
			snprintf(err, len, "at most %d paths of at most %d bytes each",
			    CFGP_OPEN_PATHS_N, CFGP_OPEN_PATH_MAX - 1);
			return -1;
		}
		for (i = 0; i < ilen; i++) {
			unsigned char ch = (unsigned char)s[i];

			if (ch <= 0x20 || ch >= 0x7f || ch == '?' || ch == '#') {
				snprintf(err, len, "entry %zu: '%.*s' has a character that is "
				    "not allowed in a path", n, (int)(ilen > 64 ? 64 : ilen), s);
				return -1;
			}
		}
		if (o + ilen + 2 > sizeof out) {
			snprintf(err, len, "list too long (max %d bytes)", CFG_OPEN_PATHS_MAX - 1);
			return -1;
		}
		if (o > 0)
			out[o++] = ',';
		memcpy(out + o, s, ilen);
		o += ilen;
		out[o] = '\0';
		if (comma == NULL)
			break;
	}
	memcpy(c->admin_open_paths, out, o + 1);
	return 0;
}

bool
cfg_addr_is_loopback(const char *host)
{
	unsigned char b[16];
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	static const unsigned char one[16] = { [15] = 1 };

	if (inet_pton(AF_INET, host, b) == 1)
		return b[0] == 127;
	if (inet_pton(AF_INET6, host, b) == 1)
		return memcmp(b, one, 16) == 0 ||
		    (memcmp(b, mapped, 12) == 0 && b[12] == 127);
	return false;
}

/* Cross-checks of the admin keys, after the whole file was read. */
static void
cfgp_check_admin(struct cfgp *p)
{
	struct cfg *c = p->cfg;
	int cert = p->fline[FK_ADMIN_TLS_CERT], key = p->fline[FK_ADMIN_TLS_KEY];
	int ca = p->fline[FK_ADMIN_TLS_CLIENT_CA];
	char addr[CFG_HOST_MAX + 16];

	if (cert && !key)
		cfgp_err(p, cert, "admin_tls_cert needs admin_tls_key (the certificate's "
		    "private key)");
	if (key && !cert)
		cfgp_err(p, key, "admin_tls_key needs admin_tls_cert");
	if (ca && !cert)
		cfgp_err(p, ca, "admin_tls_client_ca needs admin_tls_cert and admin_tls_key "
		    "(client certificates are checked in the TLS handshake)");
	if (!c->admin_enabled || c->admin_insecure || cfg_addr_is_loopback(c->admin_listen.host) ||
	    c->admin_token_file[0] != '\0' || c->admin_tls_client_ca[0] != '\0')
		return;
	units_fmt_addr(&c->admin_listen, addr, sizeof addr);
	cfgp_err(p, p->fline[FK_ADMIN_LISTEN] ? p->fline[FK_ADMIN_LISTEN] : p->ferry_line,
	    "admin_listen %s is not a loopback address and the admin API has no "
	    "credentials: anyone who can reach it could reload and drain clusters; set "
	    "admin_token_file or admin_tls_client_ca, or admin_insecure = on to allow it", addr);
}

static const struct cfgp_fkeydef cfgp_fkeys[FK_COUNT] = {
	[FK_CONTROL_SOCKET] = { "control_socket", cfgp_set_control_socket },
	[FK_ADMIN_LISTEN] = { "admin_listen", cfgp_set_admin_listen },
	[FK_USER] = { "user", cfgp_set_user },
	[FK_STARTUP_POLICY] = { "startup_policy", cfgp_set_startup_policy },
	[FK_RELOAD_POLICY] = { "reload_policy", cfgp_set_reload_policy },
	[FK_DRAIN_TIMEOUT] = { "drain_timeout", cfgp_set_drain_timeout },
	[FK_INIT_TIMEOUT] = { "init_timeout", cfgp_set_init_timeout },
	[FK_LOG_LEVEL] = { "log_level", cfgp_set_log_level },
	[FK_LOG_FORMAT] = { "log_format", cfgp_set_log_format },
	[FK_PERSIST] = { "persist", cfgp_set_persist },
	[FK_CRASH_LOOP_LIMIT] = { "crash_loop_limit", cfgp_set_crash_loop_limit },
	[FK_CRASH_LOOP_WINDOW] = { "crash_loop_window", cfgp_set_crash_loop_window },
	[FK_WORKER_WATCHDOG] = { "worker_watchdog", cfgp_set_worker_watchdog },
	[FK_TLS_TICKET_ROTATION] = { "tls_ticket_rotation", cfgp_set_tls_ticket_rotation },
	[FK_DRAIN_SPREAD] = { "drain_spread", cfgp_set_drain_spread },
	[FK_RELOAD_UPSTREAM_CHECK] = { "reload_upstream_check", cfgp_set_reload_upstream_check },
	[FK_CONTROL_SOCKET_MODE] = { "control_socket_mode", cfgp_set_control_socket_mode },
	[FK_CONTROL_SOCKET_GROUP] = { "control_socket_group", cfgp_set_control_socket_group },
	[FK_ADMIN_TOKEN_FILE] = { "admin_token_file", cfgp_set_admin_token_file },
	[FK_ADMIN_OPEN_PATHS] = { "admin_open_paths", cfgp_set_admin_open_paths },
	[FK_ADMIN_TLS_CERT] = { "admin_tls_cert", cfgp_set_admin_tls_cert },
	[FK_ADMIN_TLS_KEY] = { "admin_tls_key", cfgp_set_admin_tls_key },
	[FK_ADMIN_TLS_CLIENT_CA] = { "admin_tls_client_ca", cfgp_set_admin_tls_client_ca },
	[FK_ADMIN_INSECURE] = { "admin_insecure", cfgp_set_admin_insecure },
	[FK_SANDBOX] = { "sandbox", cfgp_set_sandbox },
};

/* ---- [cluster NAME] keys ---- */

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

/* [sasl] The pre-authentication frame limit (worker/kafka/sasl.h): the
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

/* ---- [tls] keys ---- */

static const char *const cfgp_tls_version_names[] = { "1.2", "1.3" };
static const char *const cfgp_tls_auth_names[] = { "none", "requested", "required" };

static int
cfgp_set_tls_cert(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cfgp_path(v, cl->tls_cert, err, len);
}

static int
cfgp_set_tls_key(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cfgp_path(v, cl->tls_key, err, len);
}

static int
cfgp_set_tls_client_ca(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cfgp_path(v, cl->tls_client_ca, err, len);
}

static int
cfgp_set_upstream_ca(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cfgp_path(v, cl->upstream_ca, err, len);
}

static int
cfgp_set_upstream_cert(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cfgp_path(v, cl->upstream_cert, err, len);
}

static int
cfgp_set_upstream_key(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cfgp_path(v, cl->upstream_key, err, len);
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
cfgp_cipher_list(const char *v, char *out, char *err, size_t len)
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
	memcpy(out, v, n + 1);
	return 0;
}

static int
cfgp_set_tls_ciphers(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cfgp_cipher_list(v, cl->tls_ciphers, err, len);
}

static int
cfgp_set_tls_ciphersuites(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	return cfgp_cipher_list(v, cl->tls_ciphersuites, err, len);
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

/* ---- [sni] the SNI gateway's keys ---- */

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
	snprintf(cl->sni_bootstrap_host, sizeof cl->sni_bootstrap_host, "%s", v);
	return 0;
}

static int
cfgp_set_sni_broker_pattern(struct cfg_cluster *cl, const char *v, char *err, size_t len)
{
	if (sni_pattern_check(v, err, len) != 0)
		return -1;
	snprintf(cl->sni_broker_pattern, sizeof cl->sni_broker_pattern, "%s", v);
	return 0;
}

static const struct cfgp_ckeydef cfgp_ckeys[CK_COUNT] = {
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
	/* [sasl] */
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
	[CK_GATEWAY] = { "gateway", cfgp_set_gateway },				/* [sni] */
	[CK_SNI_BOOTSTRAP_HOST] = { "sni_bootstrap_host", cfgp_set_sni_bootstrap_host },
	[CK_SNI_BROKER_PATTERN] = { "sni_broker_pattern", cfgp_set_sni_broker_pattern },
};
_Static_assert(CK_COUNT <= CFG_CLUSTER_KEYS_MAX, "cfg_cluster.key_lines too small");

/* ---- sections ---- */

/* -1 when out of memory (nothing added). */
static int
cfgp_add_cluster(struct cfgp *p, const char *name)
{
	struct cfg *c = p->cfg;
	struct cfg_cluster *cl;
	size_t ncap;
	void *np;

	if (c->n_clusters == p->cap) {
		ncap = p->cap ? p->cap * 2 : 4;
		np = realloc(c->clusters, ncap * sizeof *c->clusters);
		if (np == NULL)
			return -1;
		c->clusters = np;
		if ((np = realloc(p->meta, ncap * sizeof *p->meta)) == NULL)
			return -1;
		p->meta = np;
		p->cap = ncap;
	}
	cl = &c->clusters[c->n_clusters];
	memset(cl, 0, sizeof *cl);
	memset(&p->meta[c->n_clusters], 0, sizeof *p->meta);
	c->n_clusters++;
	snprintf(cl->name, sizeof cl->name, "%s", name);
	cl->line = p->lineno;
	cl->max_connections = 10000;
	cl->max_frame_bytes = 100ULL << 20;
	cl->idle_timeout_ms = 10 * 60 * 1000;
	cl->request_timeout_ms = 30 * 1000;
	cl->max_inflight = 1024;
	cl->workers = 1;
	cl->handover = true;
	cl->sasl_max_frame_bytes = 512ULL << 10;  /* [sasl] */
	cl->tls_min_version = CFG_TLS_1_2;
	cl->upstream_tls_verify = true;
	return 0;
}

/* Handles one header line "[...]" (leading blanks already removed). */
static void
cfgp_section(struct cfgp *p, char *line)
{
	char *close, *in, *end, *name;
	const struct cfg_cluster *dup;

	p->sec = CFGP_SEC_SKIP;
	if ((close = strchr(line, ']')) == NULL) {
		cfgp_err(p, p->lineno, "syntax error: missing ']'");
		return;
	}
	for (end = close + 1; cfgp_is_blank(*end); end++)
		;
	if (*end != '\0' && *end != ';' && *end != '#') {
		cfgp_err(p, p->lineno, "syntax error: text after ']'");
		return;
	}
	*close = '\0';
	for (in = line + 1; cfgp_is_blank(*in); in++)
		;
	for (end = close; end > in && cfgp_is_blank(end[-1]); end--)
		;
	*end = '\0';

	if (strcmp(in, "ferry") == 0) {
		if (p->ferry_line != 0) {
			cfgp_err(p, p->lineno, "duplicate section [ferry] "
			    "(first at line %d)", p->ferry_line);
			return;
		}
		p->ferry_line = p->lineno;
		p->sec = CFGP_SEC_FERRY;
		return;
	}
	if (strncmp(in, "cluster", 7) != 0 ||
	    (in[7] != '\0' && !cfgp_is_blank(in[7]))) {
		cfgp_err(p, p->lineno, "unknown section [%s]", in);
		return;
	}
	p->n_cluster_headers++;
	for (name = in + 7; cfgp_is_blank(*name); name++)
		;
	if (*name == '\0') {
		cfgp_err(p, p->lineno, "missing cluster name: [cluster NAME]");
		return;
	}
	if (!cfgp_name_ok(name, CFG_NAME_MAX - 1)) {
		cfgp_err(p, p->lineno, "invalid cluster name '%s' (1-%d "
		    "characters of A-Z a-z 0-9 . _ -)", name, CFG_NAME_MAX - 1);
		return;
	}
	if ((dup = cfg_find_cluster(p->cfg, name)) != NULL) {
		cfgp_err(p, p->lineno, "duplicate cluster '%s' (first defined "
		    "at line %d)", name, dup->line);
		return;
	}
	if (cfgp_add_cluster(p, name) != 0) {
		cfgp_err(p, p->lineno, CFG_ERR_OOM);
		return;
	}
	p->sec = CFGP_SEC_CLUSTER;
}

/* Mirrors inih's test for a key line: a '=' or ':' before any inline
 * comment, and a non-empty name before it. */
static int
cfgp_key_line_ok(const char *s)
{
	const char *b = s;
	int was_space = 0;

	for (; *s != '\0' && *s != '=' && *s != ':'; s++) {
		if (was_space && *s == ';')
			return 0;
		was_space = cfgp_is_blank(*s);
	}
	if (*s == '\0')
		return 0;
	while (b < s && cfgp_is_blank(*b))
		b++;
	return b < s;
}

/*
 * inih line reader over the in-memory text: one line per call, without its
 * line terminator and leading blanks (so inih never sees a "continuation
 * line"). Lines that are too long, section headers and malformed lines are
 * handled here and passed on as empty lines.
 */
static char *
cfgp_reader(char *buf, int num, void *stream)
{
	struct cfgp *p = stream;
	const char *s, *e, *nl;
	size_t max, n;

	if (p->pos >= p->len || num < 1)
		return NULL;
	s = p->text + p->pos;
	nl = memchr(s, '\n', p->len - p->pos);
	e = nl != NULL ? nl : p->text + p->len;
	p->pos = (size_t)(e - p->text) + (nl != NULL);
	p->lineno++;
	buf[0] = '\0';

	if (e > s && e[-1] == '\r')
		e--;
	if (p->lineno == 1 && e - s >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0)
		s += 3;
	max = (size_t)num - 1;
	n = (size_t)(e - s);
	if (n > max) {
		cfgp_err(p, p->lineno, "line too long (max %zu characters)",
		    max);
		while (s < e && cfgp_is_blank(*s))
			s++;
		if (s < e && *s == '[')
			p->sec = CFGP_SEC_SKIP;
		return buf;
	}
	if (memchr(s, '\0', n) != NULL) {
		cfgp_err(p, p->lineno, "NUL byte in line");
		return buf;
	}
	while (s < e && cfgp_is_blank(*s))
		s++;
	n = (size_t)(e - s);
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (buf[0] == '\0' || buf[0] == ';' || buf[0] == '#')
		return buf;
	if (buf[0] == '[') {
		cfgp_section(p, buf);
		buf[0] = '\0';
	} else if (!cfgp_key_line_ok(buf)) {
		cfgp_err(p, p->lineno, "syntax error: expected 'key = value'");
		buf[0] = '\0';
	}
	return buf;
}

static void
cfgp_ferry_key(struct cfgp *p, const char *name, const char *value)
{
	char err[CFGP_ERRLEN];
	size_t i;

	for (i = 0; i < FK_COUNT; i++)
		if (strcmp(name, cfgp_fkeys[i].name) == 0)
			break;
	if (i == FK_COUNT) {
		cfgp_err(p, p->lineno, "unknown key '%s' in [ferry]", name);
		return;
	}
	if (p->fline[i] != 0) {
		cfgp_err(p, p->lineno, "duplicate key '%s' in [ferry] (first "
		    "at line %d)", name, p->fline[i]);
		return;
	}
	p->fline[i] = p->lineno;
	err[0] = '\0';
	if (cfgp_fkeys[i].set(p->cfg, value, err, sizeof err) == 0)
		p->fok[i] = 1;
	else
		cfgp_err(p, p->lineno, "%s: %s", name, err);
}

static void
cfgp_cluster_key(struct cfgp *p, const char *name, const char *value)
{
	struct cfg_cluster *cl = &p->cfg->clusters[p->cfg->n_clusters - 1];
	struct cfgp_meta *m = &p->meta[p->cfg->n_clusters - 1];
	char err[CFGP_ERRLEN];
	size_t i;

	for (i = 0; i < CK_COUNT; i++)
		if (strcmp(name, cfgp_ckeys[i].name) == 0)
			break;
	if (i == CK_COUNT) {
		cfgp_err(p, p->lineno, "unknown key '%s' in [cluster %s]",
		    name, cl->name);
		return;
	}
	if (m->line[i] != 0) {
		cfgp_err(p, p->lineno, "duplicate key '%s' in [cluster %s] "
		    "(first at line %d)", name, cl->name, m->line[i]);
		return;
	}
	m->line[i] = p->lineno;
	err[0] = '\0';
	if (cfgp_ckeys[i].set(cl, value, err, sizeof err) == 0)
		m->ok[i] = 1;
	else
		cfgp_err(p, p->lineno, "%s: %s", name, err);
}

static void
cfgp_key(struct cfgp *p, const char *name, const char *value)
{
	switch (p->sec) {
	case CFGP_SEC_NONE:
		cfgp_err(p, p->lineno, "key '%s' outside of any section", name);
		break;
	case CFGP_SEC_FERRY:
		cfgp_ferry_key(p, name, value);
		break;
	case CFGP_SEC_CLUSTER:
		cfgp_cluster_key(p, name, value);
		break;
	case CFGP_SEC_SKIP:
		break;
	}
}

#if defined(INI_HANDLER_LINENO) && INI_HANDLER_LINENO
static int
cfgp_handler(void *user, const char *section, const char *name,
    const char *value, int lineno)
{
	(void)section;
	(void)lineno;
	cfgp_key(user, name, value);
	return 1;
}
#else
static int
cfgp_handler(void *user, const char *section, const char *name,
    const char *value)
{
	(void)section;
	cfgp_key(user, name, value);
	return 1;
}
#endif

/* ---- cross-checks ---- */

/* TLS keys that only make sense together. */
static void
cfgp_finish_tls(struct cfgp *p, struct cfg_cluster *cl, const struct cfgp_meta *m)
{
	static const enum cfgp_ckey server_only[] = {
		CK_TLS_MIN_VERSION, CK_TLS_CIPHERS, CK_TLS_CIPHERSUITES,
		CK_TLS_CLIENT_CA, CK_TLS_CLIENT_AUTH,
	};
	static const enum cfgp_ckey upstream_only[] = {
		CK_UPSTREAM_CA, CK_UPSTREAM_CERT, CK_UPSTREAM_KEY, CK_UPSTREAM_TLS_VERIFY,
	};
	size_t i;

	if (m->ok[CK_TLS_CERT] && !m->line[CK_TLS_KEY])
		cfgp_err(p, m->line[CK_TLS_CERT], "tls_cert: tls_key is required with it");
	if (m->ok[CK_TLS_KEY] && !m->line[CK_TLS_CERT])
		cfgp_err(p, m->line[CK_TLS_KEY], "tls_key: tls_cert is required with it");
	cl->tls = cl->tls_cert[0] != '\0' && cl->tls_key[0] != '\0';
	if (!m->line[CK_TLS_CERT])
		for (i = 0; i < sizeof server_only / sizeof server_only[0]; i++)
			if (m->line[server_only[i]])
				cfgp_err(p, m->line[server_only[i]], "%s: needs tls_cert and "
				    "tls_key (client-facing TLS is off)",
				    cfgp_ckeys[server_only[i]].name);
	if (m->line[CK_TLS_CLIENT_AUTH] && m->ok[CK_TLS_CLIENT_AUTH] &&
	    cl->tls_client_auth != CFG_TLS_AUTH_NONE && !m->line[CK_TLS_CLIENT_CA])
		cfgp_err(p, m->line[CK_TLS_CLIENT_AUTH], "tls_client_auth: %s needs "
		    "tls_client_ca (the CA that signs client certificates)",
		    cfgp_tls_auth_names[cl->tls_client_auth]);
	if (m->ok[CK_TLS_CLIENT_CA] && !m->line[CK_TLS_CLIENT_AUTH])
		cl->tls_client_auth = CFG_TLS_AUTH_REQUIRED;
	if (m->ok[CK_TLS_CLIENT_CA] && m->ok[CK_TLS_CLIENT_AUTH] &&
	    cl->tls_client_auth == CFG_TLS_AUTH_NONE)
		cfgp_err(p, m->line[CK_TLS_CLIENT_CA], "tls_client_ca: set, but "
		    "tls_client_auth = none asks no client certificate");

	if (!cl->upstream_tls)
		for (i = 0; i < sizeof upstream_only / sizeof upstream_only[0]; i++)
			if (m->line[upstream_only[i]])
				cfgp_err(p, m->line[upstream_only[i]], "%s: needs "
				    "upstream_tls = on", cfgp_ckeys[upstream_only[i]].name);
	if (m->ok[CK_UPSTREAM_CERT] && !m->line[CK_UPSTREAM_KEY])
		cfgp_err(p, m->line[CK_UPSTREAM_CERT], "upstream_cert: upstream_key is "
		    "required with it");
	if (m->ok[CK_UPSTREAM_KEY] && !m->line[CK_UPSTREAM_CERT])
		cfgp_err(p, m->line[CK_UPSTREAM_KEY], "upstream_key: upstream_cert is "
		    "required with it");
}

/*
 * [sni] The gateway keys, after the common checks. Returns true when the
 * cluster is in SNI mode (then fully checked here: it needs client TLS and
 * has no broker ports, node ids or advertised host, which are refused
 * rather than silently ignored), false for a port-per-broker cluster, where
 * the sni_* keys are refused.
 */
static bool
cfgp_finish_sni(struct cfgp *p, size_t idx)
{
	struct cfg_cluster *cl = &p->cfg->clusters[idx];
	const struct cfgp_meta *m = &p->meta[idx];
	static const enum cfgp_ckey sni_only[] = { CK_SNI_BOOTSTRAP_HOST, CK_SNI_BROKER_PATTERN };
	static const enum cfgp_ckey ports_only[] = {
		CK_BROKER_PORTS, CK_NODE_IDS, CK_ADVERTISED_HOST,
	};
	size_t i;

	if (!m->ok[CK_GATEWAY] || cl->gateway != CFG_GATEWAY_SNI) {
		for (i = 0; i < sizeof sni_only / sizeof sni_only[0]; i++)
			if (m->line[sni_only[i]] != 0)
				cfgp_err(p, m->line[sni_only[i]], "%s: only used with "
				    "gateway = sni", cfgp_ckeys[sni_only[i]].name);
		/* a bad gateway value was reported; the rest is checked as ports */
		return false;
	}
	for (i = 0; i < sizeof sni_only / sizeof sni_only[0]; i++)
		if (m->line[sni_only[i]] == 0)
			cfgp_err(p, m->line[CK_GATEWAY], "gateway = sni needs %s in "
			    "[cluster %s]", cfgp_ckeys[sni_only[i]].name, cl->name);
	if (m->line[CK_TLS_CERT] == 0)
		cfgp_err(p, m->line[CK_GATEWAY], "gateway = sni needs client TLS "
		    "(tls_cert and tls_key): the broker is chosen by the server name "
		    "of the TLS ClientHello");
	for (i = 0; i < sizeof ports_only / sizeof ports_only[0]; i++)
		if (m->line[ports_only[i]] != 0)
			cfgp_err(p, m->line[ports_only[i]], "%s: not used with gateway = "
			    "sni (every broker is reached on the bootstrap port by its "
			    "server name, sni_broker_pattern); remove it",
			    cfgp_ckeys[ports_only[i]].name);
	if (m->ok[CK_SNI_BOOTSTRAP_HOST] && m->ok[CK_SNI_BROKER_PATTERN]) {
		int32_t id;

		if (sni_classify("", cl->sni_broker_pattern, cl->sni_bootstrap_host,
		    strlen(cl->sni_bootstrap_host), &id) == SNI_BROKER)
			cfgp_err(p, m->line[CK_SNI_BOOTSTRAP_HOST], "sni_bootstrap_host: "
			    "'%s' is also the name of broker %ld by sni_broker_pattern "
			    "'%s'; choose a name the pattern cannot produce",
			    cl->sni_bootstrap_host, (long)id, cl->sni_broker_pattern);
	}
	/* the model of an SNI cluster: no broker listeners */
	cl->broker_port_first = cl->broker_port_last = 0;
	free(cl->node_ids);
	cl->node_ids = NULL;
	cl->n_brokers = 0;
	cl->advertised_host[0] = '\0';
	return true;
}

/* Required keys, defaults that depend on other keys, node ids. */
static void
cfgp_finish_cluster(struct cfgp *p, size_t idx)
{
	struct cfg_cluster *cl = &p->cfg->clusters[idx];
	const struct cfgp_meta *m = &p->meta[idx];
	static const enum cfgp_ckey required[] = {
		CK_UPSTREAM, CK_BOOTSTRAP, CK_BROKER_PORTS,
	};
	size_t i, nports;
	/* [sni] one listener: no broker_ports, no advertised_host */
	bool sni = m->ok[CK_GATEWAY] && cl->gateway == CFG_GATEWAY_SNI;

	for (i = 0; i < sizeof required / sizeof required[0]; i++)
		if (m->line[required[i]] == 0 && !(sni && required[i] == CK_BROKER_PORTS))
			cfgp_err(p, cl->line, "missing required key '%s' in "
			    "[cluster %s]", cfgp_ckeys[required[i]].name,
			    cl->name);

	if (!sni && m->line[CK_ADVERTISED_HOST] == 0 && m->ok[CK_BOOTSTRAP]) {
		if (cfgp_host_wildcard(cl->bootstrap.host))
			cfgp_err(p, m->line[CK_BOOTSTRAP], "advertised_host "
			    "is required when bootstrap listens on a wildcard "
			    "address");
		else
			memcpy(cl->advertised_host, cl->bootstrap.host,
			    sizeof cl->advertised_host);
	}

	cfgp_finish_tls(p, cl, m);
	for (i = 0; i < CK_COUNT; i++)
		cl->key_lines[i] = m->line[i];

	if (cfgp_finish_sni(p, idx))
		return;
	if (!m->ok[CK_BROKER_PORTS])
		return;
	nports = (size_t)cl->broker_port_last - cl->broker_port_first + 1;
	if (m->ok[CK_BOOTSTRAP] &&
	    cl->bootstrap.port >= cl->broker_port_first &&
	    cl->bootstrap.port <= cl->broker_port_last)
		cfgp_err(p, m->line[CK_BROKER_PORTS], "broker_ports: range "
		    "%u-%u contains the bootstrap port %u",
		    (unsigned)cl->broker_port_first,
		    (unsigned)cl->broker_port_last, (unsigned)cl->bootstrap.port);
	if (m->line[CK_NODE_IDS] != 0) {
		if (m->ok[CK_NODE_IDS] && cl->n_brokers != nports)
			cfgp_err(p, m->line[CK_NODE_IDS], "node_ids: %zu ids "
			    "for %zu broker ports (%u-%u)", cl->n_brokers,
			    nports, (unsigned)cl->broker_port_first,
			    (unsigned)cl->broker_port_last);
		return;
	}
	if ((cl->node_ids = calloc(nports, sizeof *cl->node_ids)) == NULL) {
		cfgp_err(p, cl->line, CFG_ERR_OOM);
		return;
	}
	for (i = 0; i < nports; i++)
		cl->node_ids[i] = (int32_t)i;
	cl->n_brokers = nports;
}

static void
cfgp_listener_desc(const struct cfgp *p, const struct cfgp_listener *l,
    char *buf, size_t len)
{
	char addr[CFG_HOST_MAX + 16];

	if (l->owner != SIZE_MAX) {
		snprintf(buf, len, "%s of [cluster %s]", l->key,
		    p->cfg->clusters[l->owner].name);
	} else if (l->line != 0) {
		snprintf(buf, len, "admin_listen");
	} else {
		units_fmt_addr(&p->cfg->admin_listen, addr, sizeof addr);
		snprintf(buf, len, "admin_listen (default %s)", addr);
	}
}

/* Every listening port must be unique across the file. Ports inside one
 * cluster are checked by cfgp_finish_cluster. The admin listener is only
 * considered when the text has a [ferry] section: a worker parses the
 * canonical text of its cluster alone, where admin_listen is a default
 * that may not reflect the real file. */
static void
cfgp_check_ports(struct cfgp *p)
{
	struct cfg *c = p->cfg;
	struct cfgp_listener *l;
	char da[CFGP_ERRLEN], db[CFGP_ERRLEN];
	size_t n = 0, i, j;

	if ((l = calloc(1 + 2 * c->n_clusters, sizeof *l)) == NULL) {
		cfgp_err(p, 1, CFG_ERR_OOM);
		return;
	}
	if (p->ferry_line != 0 && c->admin_enabled &&
	    (p->fline[FK_ADMIN_LISTEN] == 0 || p->fok[FK_ADMIN_LISTEN]))
		l[n++] = (struct cfgp_listener){ c->admin_listen.host,
		    c->admin_listen.port, c->admin_listen.port, SIZE_MAX,
		    "admin_listen", p->fline[FK_ADMIN_LISTEN] };
	for (i = 0; i < c->n_clusters; i++) {
		const struct cfg_cluster *cl = &c->clusters[i];
		const struct cfgp_meta *m = &p->meta[i];

		if (!m->ok[CK_BOOTSTRAP])
			continue;
		l[n++] = (struct cfgp_listener){ cl->bootstrap.host,
		    cl->bootstrap.port, cl->bootstrap.port, i, "bootstrap",
		    m->line[CK_BOOTSTRAP] };
		if (m->ok[CK_BROKER_PORTS] && cl->gateway == CFG_GATEWAY_PORTS)
			l[n++] = (struct cfgp_listener){ cl->bootstrap.host,
			    cl->broker_port_first, cl->broker_port_last, i,
			    "broker_ports", m->line[CK_BROKER_PORTS] };
	}
	for (j = 1; j < n; j++) {
		for (i = 0; i < j; i++) {
			uint16_t lo, hi;

			if (l[i].owner == l[j].owner)
				continue;
			lo = l[i].first > l[j].first ? l[i].first : l[j].first;
			hi = l[i].last < l[j].last ? l[i].last : l[j].last;
			if (lo > hi || !cfgp_hosts_conflict(l[i].host, l[j].host))
				continue;
			cfgp_listener_desc(p, &l[j], da, sizeof da);
			cfgp_listener_desc(p, &l[i], db, sizeof db);
			if (l[i].line != 0)
				cfgp_err(p, l[j].line, "%s: port %u already "
				    "used by %s (line %d)", da, (unsigned)lo,
				    db, l[i].line);
			else
				cfgp_err(p, l[j].line, "%s: port %u already "
				    "used by %s", da, (unsigned)lo, db);
		}
	}
	free(l);
}

/*
 * The supervisor sends each worker its cluster's canonical text, which the
 * worker parses with this same parser, so every canonical line must fit the
 * line limit too. Normalising can lengthen a line (" = " around the value,
 * advertised_host defaulted from the bootstrap host), so check it here and
 * report the key whose value is too long, rather than accept a config that
 * can never start.
 */
static void
cfgp_check_canonical(struct cfgp *p, size_t ci)
{
	const struct cfg_cluster *cl = &p->cfg->clusters[ci];
	const struct cfgp_meta *m = &p->meta[ci];
	char *text = cfg_cluster_canonical(cl), *line, *save = NULL;

	if (text == NULL) {
		cfgp_err(p, cl->line, CFG_ERR_OOM);
		return;
	}
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		size_t n = strlen(line), k, klen = strcspn(line, " =");
		int at = cl->line;

		if (n < INI_MAX_LINE)
			continue;
		for (k = 0; k < CK_COUNT; k++)
			if (strlen(cfgp_ckeys[k].name) == klen &&
			    strncmp(cfgp_ckeys[k].name, line, klen) == 0)
				break;
		if (k < CK_COUNT && m->line[k] != 0)
			at = m->line[k];
		else if (k == CK_ADVERTISED_HOST && m->line[CK_BOOTSTRAP] != 0)
			at = m->line[CK_BOOTSTRAP];  /* defaulted from it */
		cfgp_err(p, at, "%.*s: value too long: its normalised line is %zu characters, "
		    "more than %d", (int)klen, line, n, INI_MAX_LINE - 1);
	}
	free(text);
}

static void
cfgp_finish(struct cfgp *p)
{
	size_t i, n0 = p->nerr;

	for (i = 0; i < p->cfg->n_clusters; i++)
		cfgp_finish_cluster(p, i);
	cfgp_check_ports(p);
	cfgp_check_admin(p);
	if (p->n_cluster_headers == 0)
		cfgp_err(p, 1, "no [cluster NAME] section: at least one "
		    "cluster is required");
	/* Only a complete cluster has a canonical form. */
	if (p->nerr == n0)
		for (i = 0; i < p->cfg->n_clusters; i++)
			cfgp_check_canonical(p, i);
}

/* ---- public API ---- */

/* -1 when out of memory (c->path could not be copied). */
static int
cfgp_defaults(struct cfg *c, const char *path)
{
	memset(c, 0, sizeof *c);
	if ((c->path = strdup(path)) == NULL)
		return -1;
	snprintf(c->control_socket, sizeof c->control_socket, "%s",
	    FERRY_DEFAULT_SOCKET);
	c->admin_enabled = true;
	snprintf(c->admin_listen.host, sizeof c->admin_listen.host, "%s",
	    CFGP_DEF_ADMIN_HOST);
	c->admin_listen.port = CFGP_DEF_ADMIN_PORT;
	snprintf(c->user, sizeof c->user, "ferry");
	c->startup_policy = CFG_STARTUP_FAIL_FAST;
	c->reload_policy = CFG_RELOAD_ALL_OR_NOTHING;
	c->drain_timeout_ms = 30 * 1000;
	c->init_timeout_ms = 10 * 1000;
	c->crash_loop_limit = 5;
	c->crash_loop_window_ms = 60 * 1000;
	c->worker_watchdog_ms = 10 * 1000;
	c->tls_ticket_rotation_ms = 3600 * 1000;
	c->drain_spread_ms = 5 * 1000;
	c->reload_upstream_check = true;
	c->sandbox = true;
	c->log_level = LOG_INFO;
	c->log_format = CFG_LOG_LOGFMT;
	c->control_socket_mode = 0600;
	snprintf(c->admin_open_paths, sizeof c->admin_open_paths, "%s", CFG_DEFAULT_OPEN_PATHS);
	return 0;
}

int
cfg_parse_string(const char *path, const char *text, size_t len,
    struct cfg *out, struct cfg_errors *errs)
{
	struct cfg_errors local;
	struct cfgp p;
	struct cfg c;
	int rc;

	memset(out, 0, sizeof *out);
	cfg_errors_init(&local);
	if (errs == NULL)
		errs = &local;
	if (path == NULL)
		path = "<config>";
	if (cfgp_defaults(&c, path) != 0) {
		cfg_errors_add(errs, "%s: " CFG_ERR_OOM, path);
		cfg_errors_free(&local);
		return -1;
	}

	memset(&p, 0, sizeof p);
	p.path = c.path;
	p.text = text;
	p.len = text != NULL ? len : 0;
	p.cfg = &c;
	p.errs = errs;
	rc = ini_parse_stream(cfgp_reader, &p, cfgp_handler, &p);
	if (rc > 0)
		cfgp_err(&p, rc, "syntax error");
	else if (rc == -2)	/* inih could not allocate its line buffer */
		cfgp_err(&p, p.lineno, CFG_ERR_OOM);
	else if (rc < 0)
		cfgp_err(&p, p.lineno, "cannot parse (inih error %d)", rc);
	cfgp_finish(&p);
	free(p.meta);
	_Static_assert(FK_COUNT <= sizeof c.ferry_key_lines / sizeof c.ferry_key_lines[0],
	    "ferry_key_lines too small");
	for (int k = 0; k < FK_COUNT; k++)
		c.ferry_key_lines[k] = p.fline[k];
	c.ferry_line = p.ferry_line;

	if (p.nerr != 0) {
		cfg_free(&c);
		cfg_errors_free(&local);
		return -1;
	}
	*out = c;
	return 0;
}

int
cfg_parse_file(const char *path, struct cfg *out, struct cfg_errors *errs)
{
	struct cfg_errors local;
	char err[CFGP_ERRLEN + 64], *buf;
	size_t len = 0;
	int rc;

	memset(out, 0, sizeof *out);
	if (errs == NULL) {
		cfg_errors_init(&local);
		rc = cfg_parse_file(path, out, &local);
		cfg_errors_free(&local);
		return rc;
	}
	if ((buf = file_read_all(path, CFG_MAX_FILE_BYTES, &len, err, sizeof err)) == NULL) {
		cfg_errors_add(errs, "%s", err);
		return -1;
	}
	rc = cfg_parse_string(path, buf, len, out, errs);
	free(buf);
	return rc;
}

void
cfg_free(struct cfg *c)
{
	size_t i;

	if (c == NULL)
		return;
	for (i = 0; i < c->n_clusters; i++) {
		free(c->clusters[i].upstream);
		free(c->clusters[i].node_ids);
		free(c->clusters[i].dial_map);
		cfg_tls_files_free(c->clusters[i].files);
	}
	free(c->clusters);
	free(c->path);
	memset(c, 0, sizeof *c);
}

/*
 * A growable string for the canonical text (malloc/realloc, so running out
 * of memory is seen here and not hidden inside stdio). After a failed
 * append the builder is marked failed and ignores further appends.
 */
struct cfgp_sb {
	char *s;
	size_t len, cap;
	bool failed;
};

static void cfgp_sb_printf(struct cfgp_sb *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void
cfgp_sb_printf(struct cfgp_sb *b, const char *fmt, ...)
{
	va_list ap;
	size_t need, ncap;
	char *ns;
	int n;

	if (b->failed)
		return;
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->failed = true;
		return;
	}
	need = b->len + (size_t)n + 1;
	if (need > b->cap) {
		for (ncap = b->cap ? b->cap : 512; ncap < need; ncap *= 2)
			;
		if ((ns = realloc(b->s, ncap)) == NULL) {
			b->failed = true;
			return;
		}
		b->s = ns;
		b->cap = ncap;
	}
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* Writes ids as a comma list, runs of three or more as "a-b". */
static void
cfgp_fmt_ids(struct cfgp_sb *b, const int32_t *ids, size_t n)
{
	size_t i = 0, j;

	while (i < n) {
		for (j = i; j + 1 < n && (int64_t)ids[j + 1] == (int64_t)ids[j] + 1; j++)
			;
		if (j - i >= 2) {
			cfgp_sb_printf(b, "%s%ld-%ld", i ? "," : "", (long)ids[i],
			    (long)ids[j]);
			i = j + 1;
		} else {
			cfgp_sb_printf(b, "%s%ld", i ? "," : "", (long)ids[i]);
			i++;
		}
	}
}

char *
cfg_cluster_canonical(const struct cfg_cluster *cl)
{
	char buf[CFG_HOST_MAX + 16];
	struct cfgp_sb b = { 0 };
	size_t i;

	cfgp_sb_printf(&b, "[cluster %s]\n", cl->name);
	cfgp_sb_printf(&b, "upstream = ");
	for (i = 0; i < cl->n_upstream; i++) {
		units_fmt_addr(&cl->upstream[i], buf, sizeof buf);
		cfgp_sb_printf(&b, "%s%s", i ? "," : "", buf);
	}
	units_fmt_addr(&cl->bootstrap, buf, sizeof buf);
	cfgp_sb_printf(&b, "\nbootstrap = %s\n", buf);
	if (cl->gateway == CFG_GATEWAY_PORTS) {
		cfgp_sb_printf(&b, "advertised_host = %s\n", cl->advertised_host);
		if (cl->broker_port_first == cl->broker_port_last)
			cfgp_sb_printf(&b, "broker_ports = %u\n",
			    (unsigned)cl->broker_port_first);
		else
			cfgp_sb_printf(&b, "broker_ports = %u-%u\n",
			    (unsigned)cl->broker_port_first,
			    (unsigned)cl->broker_port_last);
		cfgp_sb_printf(&b, "node_ids = ");
		cfgp_fmt_ids(&b, cl->node_ids, cl->n_brokers);
		cfgp_sb_printf(&b, "\n");
	}
	cfgp_sb_printf(&b, "max_connections = %lu\n",
	    (unsigned long)cl->max_connections);
	units_fmt_size(cl->max_frame_bytes, buf, sizeof buf);
	cfgp_sb_printf(&b, "max_frame_bytes = %s\n", buf);
	units_fmt_duration(cl->idle_timeout_ms, buf, sizeof buf);
	cfgp_sb_printf(&b, "idle_timeout = %s\n", buf);
	units_fmt_duration(cl->request_timeout_ms, buf, sizeof buf);
	cfgp_sb_printf(&b, "request_timeout = %s\n", buf);
	cfgp_sb_printf(&b, "max_inflight_per_connection = %u\n", cl->max_inflight);
	cfgp_sb_printf(&b, "handover = %s\n", cl->handover ? "on" : "off");
	if (cl->workers == 0)
		cfgp_sb_printf(&b, "workers = auto\n");
	else
		cfgp_sb_printf(&b, "workers = %u\n", cl->workers);
	/* [sasl] */
	units_fmt_size(cl->sasl_max_frame_bytes, buf, sizeof buf);
	cfgp_sb_printf(&b, "sasl_max_frame_bytes = %s\n", buf);
	/* [tls]: client-facing keys only when TLS is on, upstream ones only
	 * with upstream_tls (each needs the other), paths as given. */
	if (cl->tls) {
		cfgp_sb_printf(&b, "tls_cert = %s\n", cl->tls_cert);
		cfgp_sb_printf(&b, "tls_key = %s\n", cl->tls_key);
		cfgp_sb_printf(&b, "tls_min_version = %s\n",
		    cfg_tls_version_str((enum cfg_tls_version)cl->tls_min_version));
		if (cl->tls_ciphers[0])
			cfgp_sb_printf(&b, "tls_ciphers = %s\n", cl->tls_ciphers);
		if (cl->tls_ciphersuites[0])
			cfgp_sb_printf(&b, "tls_ciphersuites = %s\n", cl->tls_ciphersuites);
		if (cl->tls_client_ca[0])
			cfgp_sb_printf(&b, "tls_client_ca = %s\n", cl->tls_client_ca);
		cfgp_sb_printf(&b, "tls_client_auth = %s\n",
		    cfg_tls_client_auth_str(cl->tls_client_auth));
	}
	cfgp_sb_printf(&b, "upstream_tls = %s\n", cl->upstream_tls ? "on" : "off");
	if (cl->upstream_tls) {
		if (cl->upstream_ca[0])
			cfgp_sb_printf(&b, "upstream_ca = %s\n", cl->upstream_ca);
		if (cl->upstream_cert[0]) {
			cfgp_sb_printf(&b, "upstream_cert = %s\n", cl->upstream_cert);
			cfgp_sb_printf(&b, "upstream_key = %s\n", cl->upstream_key);
		}
		cfgp_sb_printf(&b, "upstream_tls_verify = %s\n",
		    cl->upstream_tls_verify ? "on" : "off");
	}
	if (cl->n_dial_map) {
		cfgp_sb_printf(&b, "upstream_dial_map = ");
		for (i = 0; i < cl->n_dial_map; i++) {
			char to[CFG_HOST_MAX + 16];
			units_fmt_addr(&cl->dial_map[i].from, buf, sizeof buf);
			units_fmt_addr(&cl->dial_map[i].to, to, sizeof to);
			cfgp_sb_printf(&b, "%s%s=%s", i ? "," : "", buf, to);
		}
		cfgp_sb_printf(&b, "\n");
	}
	/* [sni] */
	cfgp_sb_printf(&b, "gateway = %s\n", cfg_gateway_str(cl->gateway));
	if (cl->gateway == CFG_GATEWAY_SNI)
		cfgp_sb_printf(&b, "sni_bootstrap_host = %s\nsni_broker_pattern = %s\n",
		    cl->sni_bootstrap_host, cl->sni_broker_pattern);
	if (b.failed) {
		free(b.s);
		return NULL;
	}
	return b.s;
}

int
cfg_ferry_key_line(const struct cfg *c, const char *key)
{
	for (int k = 0; k < FK_COUNT; k++)
		if (strcmp(cfgp_fkeys[k].name, key) == 0)
			return c->ferry_key_lines[k];
	return 0;
}

int
cfg_cluster_key_line(const struct cfg_cluster *cl, const char *key)
{
	for (int k = 0; k < CK_COUNT; k++)
		if (strcmp(cfgp_ckeys[k].name, key) == 0)
			return cl->key_lines[k];
	return 0;
}

const struct cfg_addr *
cfg_dial_lookup(const struct cfg_cluster *cl, const char *host, uint16_t port)
{
	for (size_t i = 0; i < cl->n_dial_map; i++)
		if (cl->dial_map[i].from.port == port &&
		    strcasecmp(cl->dial_map[i].from.host, host) == 0)
			return &cl->dial_map[i].to;
	return NULL;
}

const char *
cfg_tls_version_str(enum cfg_tls_version v)
{
	if ((unsigned)v >= 2)
		return "unknown";
	return cfgp_tls_version_names[v];
}

const char *
cfg_tls_file_key(enum cfg_tls_file f)
{
	static const char *const keys[CFG_TLS_FILES] = {
		"tls_cert", "tls_key", "tls_client_ca", "upstream_ca", "upstream_cert",
		"upstream_key",
	};
	return (unsigned)f < CFG_TLS_FILES ? keys[f] : "unknown";
}

const char *
cfg_tls_file_path(const struct cfg_cluster *cl, enum cfg_tls_file f)
{
	switch (f) {
	case CFG_TLS_F_CERT: return cl->tls_cert;
	case CFG_TLS_F_KEY: return cl->tls_key;
	case CFG_TLS_F_CLIENT_CA: return cl->tls_client_ca;
	case CFG_TLS_F_UPSTREAM_CA: return cl->upstream_ca;
	case CFG_TLS_F_UPSTREAM_CERT: return cl->upstream_cert;
	case CFG_TLS_F_UPSTREAM_KEY: return cl->upstream_key;
	case CFG_TLS_FILES: break;
	}
	return "";
}

void
cfg_tls_files_free(struct cfg_tls_files *f)
{
	if (f == NULL)
		return;
	for (int i = 0; i < CFG_TLS_FILES; i++) {
		if (f->data[i] != NULL) {
			sodium_memzero(f->data[i], f->len[i]);
			free(f->data[i]);
		}
	}
	sodium_memzero(f, sizeof *f);
	free(f);
}

const char *
cfg_tls_client_auth_str(enum cfg_tls_client_auth a)
{
	if ((unsigned)a >= 3)
		return "unknown";
	return cfgp_tls_auth_names[a];
}

const struct cfg_cluster *
cfg_find_cluster(const struct cfg *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->n_clusters; i++)
		if (strcmp(c->clusters[i].name, name) == 0)
			return &c->clusters[i];
	return NULL;
}

int
cfg_node_index(const struct cfg_cluster *cl, int32_t node_id)
{
	size_t i;

	for (i = 0; i < cl->n_brokers; i++)
		if (cl->node_ids[i] == node_id)
			return (int)i;
	return -1;
}

const char *
cfg_policy_startup_str(enum cfg_policy_startup p)
{
	if ((unsigned)p >= 2)
		return "unknown";
	return cfgp_startup_names[p];
}

const char *
cfg_policy_reload_str(enum cfg_policy_reload p)
{
	if ((unsigned)p >= 2)
		return "unknown";
	return cfgp_reload_names[p];
}

const char *
cfg_gateway_str(enum cfg_gateway g)
{
	if ((unsigned)g >= 2)
		return "unknown";
	return cfgp_gateway_names[g];
}
