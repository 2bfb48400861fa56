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
 *
 * This file holds the reader, the error list, the public API and the value
 * helpers the key setters share; the key tables and setters are in
 * config_ferry.c and config_cluster.c, the cross-checks in config_check.c,
 * the canonical text in config_canon.c (config_priv.h lists them).
 */
#include "common/config.h"
#include "common/config_priv.h"
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

#ifndef FERRY_DEFAULT_SOCKET
#define FERRY_DEFAULT_SOCKET "/run/ferry/ferry.sock"
#endif

static void cfg_errors_vadd(struct cfg_errors *e, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

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
void
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

int
cfgp_is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* True for the any-address of either family ("0.0.0.0", "::", ...). */
int
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
int
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
int
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

/* on/off booleans of the config (also accepted: true/false, yes/no). */
int
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

/* A file the supervisor reads: an absolute path without control
 * characters. Relative paths are refused rather than resolved against a
 * working directory that differs between ferryd, ferryd -t and systemd. */
int
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

const char cfgp_empty[1] = "";

/* The strings of a cluster that the config allocates (config.h). */
#define CFGP_CLUSTER_STRS(X) X(tls_cert) X(tls_key) X(tls_client_ca) X(tls_ciphers) \
	X(tls_ciphersuites) X(upstream_ca) X(upstream_cert) X(upstream_key) \
	X(sni_bootstrap_host) X(sni_broker_pattern)

static void
cfgp_str_free(const char **s)
{
	if (*s != NULL && *s != cfgp_empty)
		free((char *)*s);
	*s = cfgp_empty;
}

int
cfgp_str_set(const char **dst, const char *v, char *err, size_t len)
{
	char *d = strdup(v);

	if (d == NULL) {
		snprintf(err, len, CFG_ERR_OOM);
		return -1;
	}
	cfgp_str_free(dst);
	*dst = d;
	return 0;
}

int
cfgp_path_set(const char *v, const char **dst, char *err, size_t len)
{
	char buf[CFG_PATH_MAX];

	if (cfgp_path(v, buf, err, len) != 0)
		return -1;
	return cfgp_str_set(dst, buf, err, len);
}

/* 1..max characters of [A-Za-z0-9._-]: cluster and user names. */
int
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

bool
cfg_cluster_name_ok(const char *name)
{
	return cfgp_name_ok(name, CFG_NAME_MAX - 1) != 0;
}

/* ---- sections ---- */

/* The clusters read so far by name (a duplicate [cluster NAME] is found
 * without comparing each header with every earlier one). */
static size_t
cfgp_name_hash(const char *name)
{
	size_t h = 1469598103934665603u;
	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211u;
	return h;
}

static const struct cfg_cluster *
cfgp_find_name(const struct cfgp *p, const char *name)
{
	if (p->names_cap == 0)
		return NULL;
	for (size_t i = cfgp_name_hash(name) & (p->names_cap - 1);; i = (i + 1) & (p->names_cap - 1)) {
		if (p->names[i] == 0)
			return NULL;
		const struct cfg_cluster *cl = &p->cfg->clusters[p->names[i] - 1];
		if (strcmp(cl->name, name) == 0)
			return cl;
	}
}

/* Index cluster k (of p->cfg->clusters) by its name; -1 out of memory. */
static int
cfgp_index_name(struct cfgp *p, size_t k)
{
	if (2 * (k + 1) > p->names_cap) {
		size_t ncap = p->names_cap ? 2 * p->names_cap : 16;
		size_t *nn = calloc(ncap, sizeof *nn);
		if (nn == NULL)
			return -1;
		for (size_t j = 0; j < k; j++) {
			size_t i = cfgp_name_hash(p->cfg->clusters[j].name) & (ncap - 1);
			while (nn[i] != 0)
				i = (i + 1) & (ncap - 1);
			nn[i] = j + 1;
		}
		free(p->names);
		p->names = nn;
		p->names_cap = ncap;
	}
	size_t i = cfgp_name_hash(p->cfg->clusters[k].name) & (p->names_cap - 1);
	while (p->names[i] != 0)
		i = (i + 1) & (p->names_cap - 1);
	p->names[i] = k + 1;
	return 0;
}

/* -1 when out of memory (nothing added). */
static int
cfgp_add_cluster(struct cfgp *p, const char *name)
{
	struct cfg *c = p->cfg;
	struct cfg_cluster *cl;
	size_t ncap;
	void *np;

	if (c->n_clusters == p->cap) {
		/* from 1: a parse of one cluster's canonical text (kept for
		 * every cluster configuration in use) holds one, not four
		 * (a cluster is ~8.6 KiB) */
		ncap = p->cap ? p->cap * 2 : 1;
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
	cl->max_connections = 0;  /* auto: what the descriptor limit allows (config.h) */
	cl->max_frame_bytes = 100ULL << 20;
	cl->idle_timeout_ms = 10 * 60 * 1000;
	cl->request_timeout_ms = 30 * 1000;
	cl->max_inflight = 1024;
	cl->workers = 1;
	cl->handover = true;
	cl->splice = true;
	cl->sasl_max_frame_bytes = 512ULL << 10;  /* before SASL authentication */
	cl->tls_min_version = CFG_TLS_1_2;
	cl->upstream_tls_verify = true;
#define CFGP_STR_INIT(f) cl->f = cfgp_empty;
	CFGP_CLUSTER_STRS(CFGP_STR_INIT)
#undef CFGP_STR_INIT
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
	if ((dup = cfgp_find_name(p, name)) != NULL) {
		cfgp_err(p, p->lineno, "duplicate cluster '%s' (first defined "
		    "at line %d)", name, dup->line);
		return;
	}
	if (cfgp_add_cluster(p, name) != 0) {
		cfgp_err(p, p->lineno, CFG_ERR_OOM);
		return;
	}
	if (cfgp_index_name(p, p->cfg->n_clusters - 1) != 0) {
		p->cfg->n_clusters--;  /* nothing added: it holds no allocation yet */
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
	c->metrics_latency = CFG_LATENCY_API;
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
	free(p.names);
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
	for (i = 0; i < c->n_clusters; i++)
		cfg_cluster_free(&c->clusters[i]);
	free(c->clusters);
	free(c->path);
	memset(c, 0, sizeof *c);
}

void
cfg_cluster_free(struct cfg_cluster *cl)
{
	if (cl == NULL)
		return;
	free(cl->upstream);
	free(cl->node_ids);
	free(cl->dial_map);
	cfg_tls_files_free(cl->files);
#define CFGP_STR_FREE(f) cfgp_str_free(&cl->f);
	CFGP_CLUSTER_STRS(CFGP_STR_FREE)
#undef CFGP_STR_FREE
	memset(cl, 0, sizeof *cl);
}

void
cfg_drop_clusters(struct cfg *c)
{
	for (size_t i = 0; i < c->n_clusters; i++)
		cfg_cluster_free(&c->clusters[i]);
	free(c->clusters);
	c->clusters = NULL;
	c->n_clusters = 0;
}

void
cfg_cluster_take(struct cfg *c, size_t i, struct cfg_cluster *out)
{
	*out = c->clusters[i];
	memmove(&c->clusters[i], &c->clusters[i + 1], (c->n_clusters - i - 1) * sizeof *c->clusters);
	c->n_clusters--;
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
cfg_tls_file_key(enum cfg_tls_file f)
{
	static const char *const keys[CFG_TLS_FILES] = {
		"tls_cert", "tls_key", "tls_client_ca", "upstream_ca", "upstream_cert",
		"upstream_key", "upstream_sasl_password_file",
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
	case CFG_TLS_F_UPSTREAM_SASL_PASSWORD: return cl->upstream_sasl_password_file;
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

uint32_t
cfg_max_connections_auto(uint64_t fd_limit, size_t n_brokers)
{
	uint64_t reserve = 64 + (uint64_t)n_brokers;
	if (!fd_limit)
		return CFG_MAX_CONNECTIONS_AUTO;
	uint64_t n = fd_limit > reserve + 2 ? (fd_limit - reserve) / 2 : 1;
	return n > CFG_MAX_CONNECTIONS_AUTO ? CFG_MAX_CONNECTIONS_AUTO : (uint32_t)n;
}
