/*
 * config_ferry — the keys of the [ferry] section: the table cfgp_fkeys
 * (key name -> setter) and one setter per key, which parses and range-checks
 * its value into struct cfg. Cross-checks between keys run after the whole
 * file was read (config_check.c). See config.h and config_priv.h.
 */
#include "common/config.h"
#include "common/config_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/units.h"

static const char *const cfgp_startup_names[] = { "fail-fast", "best-effort" };
static const char *const cfgp_reload_names[] = {
	"all-or-nothing", "per-cluster",
};
static const char *const cfgp_level_names[] = {
	"debug", "info", "warn", "error",
};
static const char *const cfgp_format_names[] = { "logfmt", "json" };
static const char *const cfgp_latency_names[] = { "api", "cluster", "off" };

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

/* metrics_latency: the labels of the latency histogram in /metrics */
static int
cfgp_set_metrics_latency(struct cfg *c, const char *v, char *err, size_t len)
{
	int i = cfgp_enum(v, cfgp_latency_names, 3, err, len, "off, cluster or api");

	if (i >= 0)
		c->metrics_latency = (enum cfg_metrics_latency)i;
	return i < 0 ? -1 : 0;
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

const struct cfgp_fkeydef cfgp_fkeys[FK_COUNT] = {
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
	[FK_METRICS_LATENCY] = { "metrics_latency", cfgp_set_metrics_latency },
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

const char *
cfg_policy_startup_str(enum cfg_policy_startup p)
{
	if ((unsigned)p >= 2)
		return "unknown";
	return cfgp_startup_names[p];
}

const char *
cfg_metrics_latency_str(enum cfg_metrics_latency m)
{
	if ((unsigned)m >= 3)
		return "unknown";
	return cfgp_latency_names[m];
}

const char *
cfg_policy_reload_str(enum cfg_policy_reload p)
{
	if ((unsigned)p >= 2)
		return "unknown";
	return cfgp_reload_names[p];
}
