/*
 * adminproto — the admin channel's routes, messages and their checks; see
 * adminproto.h.
 */
#include "supervisor/adminproto.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ipc.h"

_Static_assert(sizeof(struct adminproto_request) + ADMINPROTO_MAX_ERRORS * ADMINPROTO_ERROR_MAX <=
	       IPC_MAX_PAYLOAD, "a rejected request fits one message");
_Static_assert(sizeof(struct adminproto_answer) + ADMINPROTO_INLINE_MAX <= IPC_MAX_PAYLOAD,
	       "an inline answer fits one message");

const struct adminproto_route_def adminproto_routes[] = {
	{ ADMINPROTO_R_HEALTH, "GET", "/admin/health", 0 },
	{ ADMINPROTO_R_READY, "GET", "/admin/ready", 0 },
	{ ADMINPROTO_R_CLUSTERS, "GET", "/admin/clusters", ADMINPROTO_RF_LIST },
	{ ADMINPROTO_R_CLUSTER, "GET", "/admin/clusters/*", ADMINPROTO_RF_NAME },
	{ ADMINPROTO_R_VALIDATE, "POST", "/admin/config/validate",
	  ADMINPROTO_RF_BODY | ADMINPROTO_RF_MUTATES },
	{ ADMINPROTO_R_RELOAD, "POST", "/admin/config/reload",
	  ADMINPROTO_RF_BODY | ADMINPROTO_RF_MUTATES | ADMINPROTO_RF_WAITS },
	{ ADMINPROTO_R_CONFIG_STATUS, "GET", "/admin/config/status", 0 },
	{ ADMINPROTO_R_DRAIN, "POST", "/admin/clusters/*/drain",
	  ADMINPROTO_RF_NAME | ADMINPROTO_RF_MUTATES },
	{ ADMINPROTO_R_RESTART, "POST", "/admin/clusters/*/restart",
	  ADMINPROTO_RF_NAME | ADMINPROTO_RF_MUTATES | ADMINPROTO_RF_WAITS },
	{ ADMINPROTO_R_UPGRADE, "POST", "/admin/upgrade",
	  ADMINPROTO_RF_MUTATES | ADMINPROTO_RF_WAITS },
	{ ADMINPROTO_R_CONNECTIONS, "GET", "/admin/clusters/*/connections",
	  ADMINPROTO_RF_NAME | ADMINPROTO_RF_QUERY },
	{ ADMINPROTO_R_METRICS, "GET", "/metrics", 0 },
	{ ADMINPROTO_R_PAGE, "GET", "/", ADMINPROTO_RF_LOCAL },        /* the HTML status page */
	{ ADMINPROTO_R_PAGE, "GET", "/admin/", ADMINPROTO_RF_LOCAL },
};
const size_t adminproto_n_routes = sizeof adminproto_routes / sizeof adminproto_routes[0];

const struct adminproto_route_def *
adminproto_route(enum adminproto_route r)
{
	for (size_t i = 0; i < adminproto_n_routes; i++)
		if (adminproto_routes[i].id == r)
			return &adminproto_routes[i];
	return NULL;
}

const char *
adminproto_route_str(enum adminproto_route r)
{
	static const char *const names[ADMINPROTO_R_COUNT] = {
		[ADMINPROTO_R_NONE] = "none",
		[ADMINPROTO_R_HEALTH] = "health",
		[ADMINPROTO_R_READY] = "ready",
		[ADMINPROTO_R_CLUSTERS] = "clusters",
		[ADMINPROTO_R_CLUSTER] = "cluster",
		[ADMINPROTO_R_VALIDATE] = "validate",
		[ADMINPROTO_R_RELOAD] = "reload",
		[ADMINPROTO_R_CONFIG_STATUS] = "config-status",
		[ADMINPROTO_R_DRAIN] = "drain",
		[ADMINPROTO_R_RESTART] = "restart",
		[ADMINPROTO_R_METRICS] = "metrics",
		[ADMINPROTO_R_PAGE] = "page",
		[ADMINPROTO_R_CONNECTIONS] = "connections",
		[ADMINPROTO_R_UPGRADE] = "upgrade",
	};

	return (unsigned)r < ADMINPROTO_R_COUNT ? names[r] : "unknown";
}

void
adminproto_route_path(enum adminproto_route r, const char *name, char *buf, size_t len)
{
	const struct adminproto_route_def *d = adminproto_route(r);
	const char *star;

	if (d == NULL) {
		snprintf(buf, len, "-");
		return;
	}
	if ((star = strchr(d->pattern, '*')) == NULL) {
		snprintf(buf, len, "%s", d->pattern);
		return;
	}
	snprintf(buf, len, "%.*s%s%s", (int)(star - d->pattern), d->pattern, name, star + 1);
}

/* ---- who asked ---------------------------------------------------------------- */

const char *
adminproto_auth_str(enum adminproto_auth a)
{
	switch (a) {
	case ADMINPROTO_AUTH_LOCAL:
		return "local";
	case ADMINPROTO_AUTH_OPEN_PATH:
		return "open-path";
	case ADMINPROTO_AUTH_UNPROTECTED:
		return "unprotected";
	case ADMINPROTO_AUTH_TOKEN:
		return "token";
	case ADMINPROTO_AUTH_CERT:
		return "certificate";
	case ADMINPROTO_AUTH_MISSING:
		return "missing";
	case ADMINPROTO_AUTH_MALFORMED:
		return "malformed";
	case ADMINPROTO_AUTH_WRONG:
		return "wrong-token";
	}
	return "unknown";
}

const char *
adminproto_listener_str(enum adminproto_listener l)
{
	return l == ADMINPROTO_L_CONTROL ? "control" : l == ADMINPROTO_L_HTTP ? "http" : "unknown";
}

void
adminproto_sanitize(const char *in, char *out, size_t len)
{
	size_t i;

	for (i = 0; in[i] != '\0' && i + 1 < len; i++) {
		unsigned char ch = (unsigned char)in[i];

		out[i] = (ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\') ? '?' : (char)ch;
	}
	out[i] = '\0';
}

void
adminproto_caller_fields(const struct adminproto_caller *c, char *buf, size_t len)
{
	char addr[sizeof c->addr], subj[sizeof c->subject];

	if (c->listener == ADMINPROTO_L_CONTROL && c->have_cred) {
		snprintf(buf, len, "uid=%u gid=%u pid=%d", (unsigned)c->uid, (unsigned)c->gid,
		    (int)c->pid);
		return;
	}
	if (c->listener == ADMINPROTO_L_CONTROL) {
		snprintf(buf, len, "uid=? pid=?");
		return;
	}
	adminproto_sanitize(c->addr, addr, sizeof addr);
	if (c->subject[0] != '\0') {
		adminproto_sanitize(c->subject, subj, sizeof subj);
		snprintf(buf, len, "peer=%s subject=\"%s\"", addr, subj);
	} else {
		snprintf(buf, len, "peer=%s", addr);
	}
}

/* ---- checks ------------------------------------------------------------------------ */

static int adminproto_fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int
adminproto_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* A fixed-size text field holds a NUL within it. */
static bool
adminproto_terminated(const char *s, size_t size)
{
	return memchr(s, '\0', size) != NULL;
}

/* Every byte of a fixed-size field is zero. */
static bool
adminproto_zero(const void *p, size_t size)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < size; i++)
		if (b[i] != 0)
			return false;
	return true;
}

/* "sha256:" and 64 lower-case hex digits. */
static bool
adminproto_version_ok(const char *v)
{
	if (strncmp(v, "sha256:", 7) != 0 || strlen(v) != 7 + 64)
		return false;
	for (const char *p = v + 7; *p != '\0'; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

static int
adminproto_caller_check(const struct adminproto_caller *c, char *err, size_t errlen)
{
	if (!adminproto_terminated(c->addr, sizeof c->addr) ||
	    !adminproto_terminated(c->subject, sizeof c->subject))
		return adminproto_fail(err, errlen, "caller: unterminated text");
	switch (c->listener) {
	case ADMINPROTO_L_CONTROL:
		if (c->auth != ADMINPROTO_AUTH_LOCAL)
			return adminproto_fail(err, errlen, "caller: control socket with auth %u",
			    c->auth);
		if (c->have_cred > 1 || c->addr[0] != '\0' || c->subject[0] != '\0')
			return adminproto_fail(err, errlen, "caller: control socket with TCP fields");
		return 0;
	case ADMINPROTO_L_HTTP:
		if (c->auth != ADMINPROTO_AUTH_OPEN_PATH && c->auth != ADMINPROTO_AUTH_UNPROTECTED &&
		    c->auth != ADMINPROTO_AUTH_TOKEN && c->auth != ADMINPROTO_AUTH_CERT)
			return adminproto_fail(err, errlen, "caller: admin_listen with auth %u",
			    c->auth);
		if (c->have_cred != 0 || c->uid != 0 || c->gid != 0 || c->pid != 0 ||
		    c->addr[0] == '\0')
			return adminproto_fail(err, errlen, "caller: admin_listen with "
			    "control socket fields");
		return 0;
	}
	return adminproto_fail(err, errlen, "caller: unknown listener %u", c->listener);
}

/* The connections listing's query: bounds, flags, filter texts. */
static int
adminproto_query_check(const struct adminproto_conn_query *q, char *err, size_t errlen)
{
	if (q->limit < 1 || q->limit > ADMINPROTO_CONN_LIMIT_MAX ||
	    q->offset > ADMINPROTO_CONN_OFFSET_MAX)
		return adminproto_fail(err, errlen, "query: limit %u, offset %u", q->limit,
		    q->offset);
	if (q->by_client_id > 1 || q->by_principal > 1 ||
	    !adminproto_terminated(q->client_id, sizeof q->client_id) ||
	    !adminproto_terminated(q->principal, sizeof q->principal))
		return adminproto_fail(err, errlen, "query: malformed filter");
	if ((!q->by_client_id && !adminproto_zero(q->client_id, sizeof q->client_id)) ||
	    (!q->by_principal && !adminproto_zero(q->principal, sizeof q->principal)))
		return adminproto_fail(err, errlen, "query: a value without its filter");
	return 0;
}

const char *
adminproto_list_sort_str(enum adminproto_list_sort k)
{
	static const char *const names[ADMINPROTO_SORT_COUNT] = {
		[ADMINPROTO_SORT_FILE] = "file", [ADMINPROTO_SORT_NAME] = "name",
		[ADMINPROTO_SORT_CONNECTIONS] = "connections", [ADMINPROTO_SORT_STATE] = "state",
		[ADMINPROTO_SORT_SINCE] = "since",
	};

	return (unsigned)k < ADMINPROTO_SORT_COUNT ? names[k] : "unknown";
}

const char *
adminproto_list_state_str(unsigned i)
{
	if (i == ADMINPROTO_LIST_UNRESPONSIVE)
		return "unresponsive";
	return i < LC_STATE_COUNT ? lc_state_str((enum lc_state)i) : "unknown";
}

/* The cluster list's query: bounds, flags, the globs' text. */
static int
adminproto_list_check(const struct adminproto_list_query *q, char *err, size_t errlen)
{
	size_t n;

	if (q->given == 0) {
		if (!adminproto_zero(q, sizeof *q))
			return adminproto_fail(err, errlen, "list: fields without given");
		return 0;
	}
	if (q->given != 1 || q->pad != 0 || (q->states & ~ADMINPROTO_LIST_STATES_ALL) != 0 ||
	    q->sort >= ADMINPROTO_SORT_COUNT || q->limit > ADMINPROTO_LIST_LIMIT_MAX ||
	    q->offset > ADMINPROTO_LIST_OFFSET_MAX)
		return adminproto_fail(err, errlen, "list: given %u, states %#x, sort %u, "
		    "limit %u, offset %u", q->given, q->states, q->sort, q->limit, q->offset);
	if (!adminproto_terminated(q->names, sizeof q->names))
		return adminproto_fail(err, errlen, "list: unterminated names");
	n = strlen(q->names);
	if (!adminproto_zero(q->names + n, sizeof q->names - n))
		return adminproto_fail(err, errlen, "list: bytes after the names");
	if (n > 0 && (q->names[0] == ',' || q->names[n - 1] == ',' || strstr(q->names, ",,")))
		return adminproto_fail(err, errlen, "list: an empty name pattern");
	return 0;
}

int
adminproto_request_check(const void *payload, size_t len, size_t nfds,
			 struct adminproto_request_view *out, char *err, size_t errlen)
{
	struct adminproto_request *rq = &out->rq;
	const struct adminproto_route_def *d;

	memset(out, 0, sizeof *out);
	if (len < sizeof *rq)
		return adminproto_fail(err, errlen, "request: %zu bytes, at least %zu", len,
		    sizeof *rq);
	memcpy(rq, payload, sizeof *rq);
	if (rq->route == ADMINPROTO_R_NONE || rq->route >= ADMINPROTO_R_COUNT ||
	    (d = adminproto_route((enum adminproto_route)rq->route)) == NULL)
		return adminproto_fail(err, errlen, "request: unknown route %u", rq->route);
	if (d->flags & ADMINPROTO_RF_LOCAL)
		return adminproto_fail(err, errlen, "request: route %s is the admin process's own",
		    adminproto_route_str(d->id));
	if ((rq->flags & ~(ADMINPROTO_REQ_BODY | ADMINPROTO_REQ_REJECTED |
	    ADMINPROTO_REQ_HAD_BODY)) != 0 ||
	    rq->flags == (ADMINPROTO_REQ_BODY | ADMINPROTO_REQ_REJECTED))
		return adminproto_fail(err, errlen, "request: flags %#x", rq->flags);
	if ((rq->flags & (ADMINPROTO_REQ_BODY | ADMINPROTO_REQ_REJECTED)) &&
	    !(d->flags & ADMINPROTO_RF_BODY))
		return adminproto_fail(err, errlen, "request: %s takes no body",
		    adminproto_route_str(d->id));
	if (rq->flags == ADMINPROTO_REQ_HAD_BODY && (d->flags & ADMINPROTO_RF_BODY))
		return adminproto_fail(err, errlen, "request: %s passes its body",
		    adminproto_route_str(d->id));
	if ((rq->flags & ADMINPROTO_REQ_HAD_BODY) && rq->flags != ADMINPROTO_REQ_HAD_BODY)
		return adminproto_fail(err, errlen, "request: flags %#x", rq->flags);
	if (!adminproto_terminated(rq->name, sizeof rq->name) ||
	    !adminproto_terminated(rq->version, sizeof rq->version))
		return adminproto_fail(err, errlen, "request: unterminated text");
	if (d->flags & ADMINPROTO_RF_NAME) {
		if (!cfg_cluster_name_ok(rq->name))
			return adminproto_fail(err, errlen, "request: cluster name does not follow "
			    "the name rule");
	} else if (!adminproto_zero(rq->name, sizeof rq->name)) {
		return adminproto_fail(err, errlen, "request: %s takes no cluster name",
		    adminproto_route_str(d->id));
	}
	if (adminproto_caller_check(&rq->caller, err, errlen) == -1)
		return -1;
	if (d->flags & ADMINPROTO_RF_QUERY) {
		if (adminproto_query_check(&rq->query, err, errlen) == -1)
			return -1;
	} else if (!adminproto_zero(&rq->query, sizeof rq->query)) {
		return adminproto_fail(err, errlen, "request: %s takes no query",
		    adminproto_route_str(d->id));
	}
	if (d->flags & ADMINPROTO_RF_LIST) {
		if (adminproto_list_check(&rq->list, err, errlen) == -1)
			return -1;
	} else if (!adminproto_zero(&rq->list, sizeof rq->list)) {
		return adminproto_fail(err, errlen, "request: %s takes no list query",
		    adminproto_route_str(d->id));
	}
	if (rq->flags & ADMINPROTO_REQ_BODY) {
		if (nfds != 1 || len != sizeof *rq || rq->body_len == 0 ||
		    rq->body_len > CFG_MAX_FILE_BYTES || rq->n_errors != 0 || rq->version[0] != '\0')
			return adminproto_fail(err, errlen, "request: body of %u bytes with %zu fds "
			    "in %zu bytes", rq->body_len, nfds, len);
		return 0;
	}
	if (nfds != 0 || rq->body_len != 0)
		return adminproto_fail(err, errlen, "request: %zu fds, body_len %u without a body",
		    nfds, rq->body_len);
	if (!(rq->flags & ADMINPROTO_REQ_REJECTED)) {
		if (len != sizeof *rq || rq->n_errors != 0 || rq->version[0] != '\0')
			return adminproto_fail(err, errlen, "request: %zu bytes with %u errors",
			    len, rq->n_errors);
		return 0;
	}
	/* refused by the admin process's parse: its version and error texts */
	if (!adminproto_version_ok(rq->version))
		return adminproto_fail(err, errlen, "request: malformed config version");
	if (rq->n_errors == 0 || rq->n_errors > ADMINPROTO_MAX_ERRORS)
		return adminproto_fail(err, errlen, "request: %u errors", rq->n_errors);
	const char *p = (const char *)payload + sizeof *rq, *end = (const char *)payload + len;
	for (uint32_t i = 0; i < rq->n_errors; i++) {
		size_t room = (size_t)(end - p);
		const char *nul = memchr(p, '\0', room < ADMINPROTO_ERROR_MAX ? room :
		    ADMINPROTO_ERROR_MAX);

		if (nul == NULL)
			return adminproto_fail(err, errlen, "request: error text %u unterminated "
			    "or too long", i);
		out->errors[i] = p;
		p = nul + 1;
	}
	if (p != end)
		return adminproto_fail(err, errlen, "request: %zu bytes after the error texts",
		    (size_t)(end - p));
	return 0;
}

int
adminproto_answer_check(const void *payload, size_t len, size_t nfds,
			struct adminproto_answer *out, char *err, size_t errlen)
{
	if (len < sizeof *out)
		return adminproto_fail(err, errlen, "answer: %zu bytes", len);
	memcpy(out, payload, sizeof *out);
	if (out->status < 200 || out->status > 599)
		return adminproto_fail(err, errlen, "answer: status %u", out->status);
	if (out->ctype >= ADMINPROTO_CT_COUNT)
		return adminproto_fail(err, errlen, "answer: content type %u", out->ctype);
	if ((out->flags & ~ADMINPROTO_ANS_MEMFD) != 0)
		return adminproto_fail(err, errlen, "answer: flags %#x", out->flags);
	if (out->flags & ADMINPROTO_ANS_MEMFD) {
		if (nfds != 1 || len != sizeof *out || out->body_len == 0 ||
		    out->body_len > ADMINPROTO_BODY_MAX)
			return adminproto_fail(err, errlen, "answer: memfd body of %u bytes",
			    out->body_len);
		return 0;
	}
	if (nfds != 0 || out->body_len > ADMINPROTO_INLINE_MAX ||
	    len != sizeof *out + out->body_len)
		return adminproto_fail(err, errlen, "answer: inline body of %u bytes in %zu",
		    out->body_len, len);
	return 0;
}

int
adminproto_setup_check(const void *payload, size_t len, size_t nfds,
		       struct adminproto_setup *out, char *err, size_t errlen)
{
	if (len != sizeof *out)
		return adminproto_fail(err, errlen, "setup: %zu bytes, not %zu", len, sizeof *out);
	memcpy(out, payload, sizeof *out);
	if (out->version != ADMINPROTO_VERSION)
		return adminproto_fail(err, errlen, "setup: protocol version %u, this ferry-admin "
		    "speaks %u (ferryd and ferry-admin of different builds)", out->version,
		    ADMINPROTO_VERSION);
	if ((out->flags & ~(ADMINPROTO_SETUP_HTTP | ADMINPROTO_SETUP_SANDBOX)) != 0 ||
	    out->log_level > 3 || out->log_json > 1)
		return adminproto_fail(err, errlen, "setup: flags %#x", out->flags);
	if (nfds != ((out->flags & ADMINPROTO_SETUP_HTTP) ? 3u : 2u))
		return adminproto_fail(err, errlen, "setup: %zu file descriptors", nfds);
	return 0;
}

int
adminproto_creds_check(const void *payload, size_t len, struct adminproto_creds_view *out,
		       char *err, size_t errlen)
{
	struct adminproto_creds *c = &out->c;
	const char *p = (const char *)payload + sizeof *c;
	uint64_t sum;

	memset(out, 0, sizeof *out);
	if (len < sizeof *c)
		return adminproto_fail(err, errlen, "credentials: %zu bytes", len);
	memcpy(c, payload, sizeof *c);
	if (c->version != ADMINPROTO_VERSION)
		return adminproto_fail(err, errlen, "credentials: version %u", c->version);
	if ((c->flags & ~(ADMINPROTO_CREDS_TOKEN | ADMINPROTO_CREDS_CLIENT_CERTS |
	    ADMINPROTO_CREDS_TLS)) != 0)
		return adminproto_fail(err, errlen, "credentials: flags %#x", c->flags);
	if (!adminproto_terminated(c->open_paths, sizeof c->open_paths))
		return adminproto_fail(err, errlen, "credentials: unterminated open paths");
	if (!(c->flags & ADMINPROTO_CREDS_TOKEN) && !adminproto_zero(c->token_digest,
	    sizeof c->token_digest))
		return adminproto_fail(err, errlen, "credentials: a digest without a token");
	if (((c->flags & ADMINPROTO_CREDS_TLS) != 0) != (c->cert_len > 0 && c->key_len > 0) ||
	    (!(c->flags & ADMINPROTO_CREDS_TLS) && (c->cert_len || c->key_len)))
		return adminproto_fail(err, errlen, "credentials: HTTPS flag and files disagree");
	if (((c->flags & ADMINPROTO_CREDS_CLIENT_CERTS) != 0) != (c->ca_len > 0) ||
	    (c->ca_len > 0 && !(c->flags & ADMINPROTO_CREDS_TLS)))
		return adminproto_fail(err, errlen, "credentials: client CA without HTTPS");
	if (c->pad != 0)
		return adminproto_fail(err, errlen, "credentials: padding");
	sum = (uint64_t)c->cert_len + c->key_len + c->ca_len;
	if (sum != len - sizeof *c)
		return adminproto_fail(err, errlen, "credentials: files of %llu bytes in %zu",
		    (unsigned long long)sum, len - sizeof *c);
	out->cert = c->cert_len ? p : NULL;
	out->key = c->key_len ? p + c->cert_len : NULL;
	out->ca = c->ca_len ? p + c->cert_len + c->key_len : NULL;
	return 0;
}

int
adminproto_listen_check(const void *payload, size_t len, struct adminproto_listen *out,
			char *err, size_t errlen)
{
	if (len != sizeof *out)
		return adminproto_fail(err, errlen, "listen: %zu bytes", len);
	memcpy(out, payload, sizeof *out);
	if (out->state > ADMINPROTO_LISTEN_CLOSE || out->pad != 0)
		return adminproto_fail(err, errlen, "listen: state %u", out->state);
	return 0;
}

int
adminproto_session_accept(struct adminproto_session *s, uint64_t id, char *err, size_t errlen)
{
	if (id <= s->last_id)
		return adminproto_fail(err, errlen, "request id %llu after %llu (reused or out "
		    "of order)", (unsigned long long)id, (unsigned long long)s->last_id);
	if (s->outstanding >= ADMINPROTO_MAX_INFLIGHT)
		return adminproto_fail(err, errlen, "more than %d requests outstanding",
		    ADMINPROTO_MAX_INFLIGHT);
	s->last_id = id;
	s->outstanding++;
	return 0;
}

void
adminproto_session_done(struct adminproto_session *s)
{
	if (s->outstanding > 0)
		s->outstanding--;
}

/* ---- counters, errors ------------------------------------------------------------------- */

void
adminproto_counters_read(const struct adminproto_counters *k, uint64_t out[4])
{
	for (int i = 0; i < 3; i++)
		out[i] = atomic_load_explicit(&k->refused[i], memory_order_relaxed);
	out[3] = atomic_load_explicit(&k->tls_failures, memory_order_relaxed);
}

int
adminproto_metrics_text(const uint64_t v[4], char *buf, size_t len)
{
	int n = snprintf(buf, len,
	    "# HELP ferry_admin_requests_refused_total Admin API requests on admin_listen "
	    "refused for want of credentials, by reason\n"
	    "# TYPE ferry_admin_requests_refused_total counter\n"
	    "ferry_admin_requests_refused_total{reason=\"%s\"} %llu\n"
	    "ferry_admin_requests_refused_total{reason=\"%s\"} %llu\n"
	    "ferry_admin_requests_refused_total{reason=\"%s\"} %llu\n"
	    "# HELP ferry_admin_tls_handshake_failures_total Failed TLS handshakes on an HTTPS "
	    "admin_listen (plain HTTP, untrusted client certificates, garbage)\n"
	    "# TYPE ferry_admin_tls_handshake_failures_total counter\n"
	    "ferry_admin_tls_handshake_failures_total %llu\n",
	    adminproto_auth_str(ADMINPROTO_AUTH_MISSING), (unsigned long long)v[0],
	    adminproto_auth_str(ADMINPROTO_AUTH_MALFORMED), (unsigned long long)v[1],
	    adminproto_auth_str(ADMINPROTO_AUTH_WRONG), (unsigned long long)v[2],
	    (unsigned long long)v[3]);

	return n < 0 || (size_t)n >= len ? -1 : n;
}

const char *
adminproto_ctype_str(enum adminproto_ctype t)
{
	return t == ADMINPROTO_CT_PROMETHEUS ? "text/plain; version=0.0.4; charset=utf-8" :
	    "application/json";
}

char *
adminproto_json_dump(const json_t *j, size_t *len)
{
	char *s, *out;
	size_t n;

	if (j == NULL || (s = json_dumps(j, JSON_COMPACT)) == NULL)
		return NULL;
	n = strlen(s);
	if ((out = realloc(s, n + 2)) == NULL) {
		free(s);
		return NULL;
	}
	out[n] = '\n';
	out[n + 1] = '\0';
	*len = n + 1;
	return out;
}

char *
adminproto_error_json(const char *msg, const char *fallback, size_t *len)
{
	/* json_string refuses invalid UTF-8 (e.g. echoed from a path) */
	json_t *j = json_pack("{s:s}", "error", msg);
	char *out;

	if (j == NULL)
		j = json_pack("{s:s}", "error", fallback);
	out = adminproto_json_dump(j, len);
	json_decref(j);
	return out;
}
