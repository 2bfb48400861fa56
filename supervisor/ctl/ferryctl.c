/*
 * ferryctl — command-line client of the ferryd admin API (DESIGN §8).
 *
 * One blocking HTTP/1.1 request per run, over the control socket (default
 * FERRY_DEFAULT_SOCKET, overridden by $FERRY_SOCKET, or -s) or over the
 * TCP admin listener (-a HOST:PORT), with a 30 s budget for the whole
 * exchange. A control socket that refuses the connect or does not exist yet
 * is retried for up to 1 s (ctl_connect_unix) before giving up with exit 3. --json prints the response body unchanged; otherwise the JSON
 * is rendered for people (a table for status).
 *
 * Exit codes are contract: 0 ok, 1 the operation failed or was rejected
 * (HTTP 4xx/5xx, not ready, invalid config, unknown cluster), 2 usage,
 * 3 ferryd could not be reached (connect error, timeout, garbled reply).
 *
 * Links only jansson and the HTTP message code of supervisor/http.c; none of
 * the supervisor's event-loop code.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "common/http.h"
#include "ctlconn.h"

#define CTL_EXIT_OK          0
#define CTL_EXIT_FAILED      1
#define CTL_EXIT_USAGE       2
#define CTL_EXIT_UNREACHABLE 3

#define CTL_TIMEOUT_MS   30000
#define CTL_REPLY_MAX    (64u * 1024 * 1024)

struct ctl_opts {
	const char *socket;             /* control socket path */
	const char *address;            /* HOST:PORT of admin_listen, or NULL */
	struct ctlconn_opts conn;       /* how to reach it (ctlconn.h) */
	char token[1100];               /* bearer token for -a, or "" */
	bool json;
	long timeout_ms;                /* for the whole request; 0 = CTL_TIMEOUT_MS */
	bool watch;                     /* status -w: refresh every second */
	long count;                     /* -n: refreshes of -w / top; 0 = until quit */
};

struct ctl_reply {
	char *raw;                      /* whole response as received */
	size_t raw_len;
	int status;
	const char *body;               /* inside raw */
	size_t body_len;
	bool sent;                      /* the request reached ferryd */
};

static void ctl_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
ctl_err(const char *fmt, ...)
{
	va_list ap;

	fputs("ferryctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void
ctl_usage(FILE *f)
{
	fprintf(f,
	    "usage: ferryctl [-s SOCKET | -a [https://]HOST:PORT] [--json] COMMAND [ARGS]\n"
	    "\n"
	    "commands:\n"
	    "  status [NAME]      table of clusters (NAME STATE SINCE GEN PID CONNS REASON)\n"
	    "  health             is ferryd running\n"
	    "  ready              is ferryd serving per its startup_policy (exit 1 if not)\n"
	    "  validate [FILE]    validate FILE, or ferryd's own config file without FILE\n"
	    "  reload [FILE]      apply FILE (or ferryd's own file) and wait for the outcome\n"
	    "  config             configuration status (version, last reload, validation)\n"
	    "  drain NAME         drain one cluster: finish what it owes, release its sockets\n"
	    "  restart NAME       start a fresh generation (retry from failed, or roll)\n"
	    "  metrics            Prometheus metrics\n"
	    "  top                live per-cluster connections, requests/s, bytes/s (q quits)\n"
	    "\n"
	    "options:\n"
	    "  -s, --socket SOCKET       control socket (default: $FERRY_SOCKET, else %s)\n"
	    "  -a, --address HOST:PORT   use the HTTP admin listener instead\n"
	    "                            (https://HOST:PORT: HTTPS, verified against the\n"
	    "                            system's CAs unless --cacert)\n"
	    "      --token-file FILE     admin token for -a (default: $FERRY_TOKEN); never\n"
	    "                            sent over the control socket\n"
	    "      --cacert FILE         HTTPS: CA certificates that sign ferryd's certificate\n"
	    "      --cert FILE           HTTPS: client certificate (with --key)\n"
	    "      --key FILE            HTTPS: the client certificate's private key\n"
	    "  -j, --json                print the API's JSON response unchanged (with -w\n"
	    "                            and top: one JSON document per line and refresh)\n"
	    "  -w, --watch               status: refresh every second until q or Ctrl-C\n"
	    "  -n, --count N             -w and top: stop after N refreshes\n"
	    "  -h, --help                show this help\n"
	    "  -V, --version             show the version\n"
	    "\n"
	    "colour only on a terminal, never with $NO_COLOR set\n"
	    "exit codes: 0 ok, 1 operation failed or rejected (401: token or certificate\n"
	    "  missing or wrong), 2 usage, 3 cannot reach ferryd (TLS failures included)\n"
	    "  (-w and top: the code of the last refresh)\n",
	    FERRY_DEFAULT_SOCKET);
}

/* --- requests ---------------------------------------------------------- */

/* One request; the server closes the connection after its response. Returns
 * 0 with *reply filled, -1 when ferryd could not be reached or the reply is
 * garbled (message in err). */
static int
ctl_request(const struct ctl_opts *o, const char *method, const char *path,
	    const char *body, size_t body_len, struct ctl_reply *reply,
	    char *err, size_t errlen)
{
	long deadline = ctlconn_now_ms() + (o->timeout_ms > 0 ? o->timeout_ms : CTL_TIMEOUT_MS);
	char head[2048], perr[128], rerr[256];
	struct ctlconn c;
	size_t cap = 0;
	bool tls_failed;
	int hn;
	ssize_t n;

	memset(reply, 0, sizeof *reply);
	if (ctlconn_open(&c, &o->conn, deadline, err, errlen, &tls_failed) == -1)
		return -1;

	hn = snprintf(head, sizeof head,
	    "%s %s HTTP/1.1\r\n"
	    "Host: %s\r\n"
	    "User-Agent: ferryctl/%s\r\n"
	    "Accept: application/json, text/plain\r\n"
	    "Connection: close\r\n",
	    method, path, o->address ? o->address : "localhost", FERRY_VERSION);
	/* the token goes to admin_listen only: the control socket is
	 * authorised by its permissions */
	if (o->address != NULL && o->token[0] != '\0' && hn > 0 && (size_t)hn < sizeof head)
		hn += snprintf(head + hn, sizeof head - (size_t)hn,
		    "Authorization: Bearer %s\r\n", o->token);
	if (strcmp(method, "POST") == 0 && hn > 0 && (size_t)hn < sizeof head)
		hn += snprintf(head + hn, sizeof head - (size_t)hn,
		    "Content-Type: text/plain\r\nContent-Length: %zu\r\n", body_len);
	if (hn > 0 && (size_t)hn < sizeof head)
		hn += snprintf(head + hn, sizeof head - (size_t)hn, "\r\n");
	if (hn < 0 || (size_t)hn >= sizeof head) {
		snprintf(err, errlen, "request too long");
		ctlconn_close(&c);
		return -1;
	}
	if (ctlconn_write_all(&c, head, (size_t)hn) == -1 ||
	    ctlconn_write_all(&c, body, body_len) == -1) {
		if (c.tls_err[0] != '\0')
			snprintf(err, errlen, "TLS: ferryd ended the session: %s%s", c.tls_err,
			    strstr(c.tls_err, "ca") || strstr(c.tls_err, "certificate") ?
			    " (ferryd does not accept this client certificate: --cert/--key)" : "");
		else
			snprintf(err, errlen, "cannot send request: %s", ctlconn_strerror(errno));
		ctlconn_close(&c);
		return -1;
	}
	reply->sent = true;

	for (;;) {
		if (reply->raw_len == cap) {
			char *nb;

			if (cap >= CTL_REPLY_MAX) {
				snprintf(err, errlen, "reply too large");
				goto fail;
			}
			cap = cap ? cap * 2 : 16384;
			if ((nb = realloc(reply->raw, cap + 1)) == NULL) {
				snprintf(err, errlen, "out of memory");
				goto fail;
			}
			reply->raw = nb;
		}
		n = ctlconn_read(&c, reply->raw + reply->raw_len, cap - reply->raw_len,
		    rerr, sizeof rerr);
		if (n == -1) {
			/* a reset after a complete response still counts */
			if (errno == ECONNRESET && reply->raw_len > 0)
				break;
			if (rerr[0] != '\0')
				snprintf(err, errlen, "no reply from ferryd: TLS: %s%s", rerr,
				    strstr(rerr, "certificate") ? " (ferryd wants a client "
				    "certificate: --cert and --key)" : "");
			else
				snprintf(err, errlen, "no reply from ferryd: %s",
				    ctlconn_strerror(errno));
			goto fail;
		}
		if (n == 0)
			break;
		reply->raw_len += (size_t)n;
	}
	ctlconn_close(&c);
	if (reply->raw_len == 0) {
		snprintf(err, errlen, "ferryd closed the connection without a reply%s",
		    o->address && !o->conn.tls ? " (is it an HTTPS listener? use --cacert)" : "");
		goto fail;
	}
	reply->raw[reply->raw_len] = '\0';
	if (http_response_parse(reply->raw, reply->raw_len, &reply->status,
	    &reply->body, &reply->body_len, perr, sizeof perr) == -1) {
		snprintf(err, errlen, "garbled reply from ferryd: %s", perr);
		goto fail;
	}
	return 0;
fail:
	ctlconn_close(&c);
	free(reply->raw);
	bool sent = reply->sent;
	memset(reply, 0, sizeof *reply);
	reply->sent = sent;
	return -1;
}

/* --- rendering ---------------------------------------------------------- */

static void
ctl_fmt_age(long long secs, char *buf, size_t len)
{
	if (secs < 0)
		secs = 0;
	if (secs < 60)
		snprintf(buf, len, "%llds", secs);
	else if (secs < 3600 && secs % 60 == 0)
		snprintf(buf, len, "%lldm", secs / 60);
	else if (secs < 3600)
		snprintf(buf, len, "%lldm%llds", secs / 60, secs % 60);
	else if (secs < 86400 && secs % 3600 / 60 == 0)
		snprintf(buf, len, "%lldh", secs / 3600);
	else if (secs < 86400)
		snprintf(buf, len, "%lldh%lldm", secs / 3600, secs % 3600 / 60);
	else if (secs % 86400 / 3600 == 0)
		snprintf(buf, len, "%lldd", secs / 86400);
	else
		snprintf(buf, len, "%lldd%lldh", secs / 86400, secs % 86400 / 3600);
}

/* Age of an RFC 3339 UTC time ("2026-11-21T08:04:05.123Z"), or "-". */
static void
ctl_since(const json_t *v, char *buf, size_t len)
{
	struct tm tm;
	int n = 0;
	time_t t;

	memset(&tm, 0, sizeof tm);
	if (!json_is_string(v) ||
	    sscanf(json_string_value(v), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year,
	    &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 ||
	    n == 0) {
		snprintf(buf, len, "-");
		return;
	}
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	if ((t = timegm(&tm)) == (time_t)-1) {
		snprintf(buf, len, "-");
		return;
	}
	ctl_fmt_age((long long)(time(NULL) - t), buf, len);
}

/* --- colour ------------------------------------------------------------- */

/* ANSI colour only when stdout is a terminal, $NO_COLOR is unset or empty
 * (no-color.org) and $TERM is not "dumb"; set once in main(). */
static bool ctl_color;

#define CTL_RED    "31"
#define CTL_GREEN  "32"
#define CTL_YELLOW "33"
#define CTL_BOLD   "1"

static bool
ctl_color_wanted(void)
{
	const char *nc = getenv("NO_COLOR"), *term = getenv("TERM");

	if (nc != NULL && nc[0] != '\0')
		return false;
	if (term != NULL && strcmp(term, "dumb") == 0)
		return false;
	return isatty(STDOUT_FILENO) == 1;
}

/* text padded to width (0: not padded), in colour code when colour is on. */
static void
ctl_paint(const char *code, const char *text, size_t width)
{
	if (ctl_color && code != NULL)
		printf("\033[%sm%-*s\033[0m", code, (int)width, text);
	else
		printf("%-*s", (int)width, text);
}

static const char *
ctl_state_color(const char *state)
{
	if (state == NULL)
		return NULL;
	if (strstr(state, "unresponsive") || strncmp(state, "failed", 6) == 0 ||
	    strncmp(state, "stopped", 7) == 0)
		return CTL_RED;
	if (strncmp(state, "accepting", 9) == 0)
		return CTL_GREEN;
	return CTL_YELLOW;
}

/* --- the status table --------------------------------------------------- */

#define CTL_COLS 7

struct ctl_row {
	char col[CTL_COLS][256];
};

struct ctl_table {
	struct ctl_row *rows;
	size_t n, cap;
};

static struct ctl_row *
ctl_table_add(struct ctl_table *t)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 8;
		struct ctl_row *nr = realloc(t->rows, cap * sizeof *nr);

		if (nr == NULL)
			return NULL;
		t->rows = nr;
		t->cap = cap;
	}
	memset(&t->rows[t->n], 0, sizeof t->rows[t->n]);
	return &t->rows[t->n++];
}

/* One row per worker, indented under its cluster: "  #INDEX" STATE SINCE
 * GEN PID CONNS. */
static void
ctl_worker_row(const json_t *w, struct ctl_row *r)
{
	const json_t *pid = json_object_get(w, "pid");
	const char *state = json_string_value(json_object_get(w, "state"));
	const char *live = json_string_value(json_object_get(w, "liveness"));

	snprintf(r->col[0], sizeof r->col[0], "  #%lld",
	    (long long)json_integer_value(json_object_get(w, "index")));
	snprintf(r->col[1], sizeof r->col[1], "%s%s", state ? state : "?",
	    live && strcmp(live, "unresponsive") == 0 ? ",unresponsive" : "");
	ctl_since(json_object_get(w, "since"), r->col[2], sizeof r->col[2]);
	snprintf(r->col[3], sizeof r->col[3], "%lld",
	    (long long)json_integer_value(json_object_get(w, "generation")));
	if (json_is_integer(pid))
		snprintf(r->col[4], sizeof r->col[4], "%lld", (long long)json_integer_value(pid));
	else
		snprintf(r->col[4], sizeof r->col[4], "-");
	snprintf(r->col[5], sizeof r->col[5], "%lld",
	    (long long)json_integer_value(json_object_get(w, "connections")));
	r->col[6][0] = '\0';
}

static void
ctl_cluster_row(const json_t *c, struct ctl_row *r)
{
	const json_t *gen = json_object_get(c, "generation"), *w;
	const char *reason = json_string_value(json_object_get(c, "reason"));
	const char *state = json_string_value(json_object_get(c, "state"));
	const char *name = json_string_value(json_object_get(c, "name"));
	long long conns = 0;
	bool have_pid = false;
	size_t i;

	const char *live = json_string_value(json_object_get(c, "liveness"));
	bool unresponsive = live && strcmp(live, "unresponsive") == 0;

	snprintf(r->col[0], sizeof r->col[0], "%s", name ? name : "?");
	/* a hung worker is not what its lifecycle state says: show it */
	snprintf(r->col[1], sizeof r->col[1], "%s%s", state ? state : "?",
	    unresponsive ? ",unresponsive" : "");
	ctl_since(json_object_get(c, unresponsive ? "livenessSince" : "since"), r->col[2],
	    sizeof r->col[2]);
	if (json_is_integer(gen))
		snprintf(r->col[3], sizeof r->col[3], "%lld", (long long)json_integer_value(gen));
	else
		snprintf(r->col[3], sizeof r->col[3], "-");
	snprintf(r->col[4], sizeof r->col[4], "-");
	json_array_foreach(json_object_get(c, "workers"), i, w) {
		const json_t *pid = json_object_get(w, "pid");

		conns += json_integer_value(json_object_get(w, "connections"));
		if (!have_pid && json_is_integer(pid) && json_is_integer(gen) &&
		    json_integer_value(json_object_get(w, "generation")) ==
		    json_integer_value(gen)) {
			snprintf(r->col[4], sizeof r->col[4], "%lld",
			    (long long)json_integer_value(pid));
			have_pid = true;
		}
	}
	snprintf(r->col[5], sizeof r->col[5], "%lld", conns);
	snprintf(r->col[6], sizeof r->col[6], "%s", reason && *reason ? reason : "-");
}

/* Columns padded to width, the last one (REASON) as is; STATE in colour;
 * no trailing blanks (a worker row has no REASON). */
static void
ctl_print_row(const char *const cells[CTL_COLS], const size_t width[CTL_COLS], bool header)
{
	size_t k, last = CTL_COLS - 1;

	while (last > 0 && cells[last][0] == '\0')
		last--;
	for (k = 0; k <= last; k++) {
		const char *code = header ? CTL_BOLD : k == 1 ? ctl_state_color(cells[k]) : NULL;

		ctl_paint(code, cells[k], k < last ? width[k] : 0);
		if (k < last)
			fputs("  ", stdout);
	}
	putchar('\n');
}

/* The contract table (header NAME STATE SINCE GEN PID CONNS REASON first),
 * one row per cluster; a cluster listing more than one worker (workers > 1,
 * or two generations during a reload) gets an indented row per worker. */
static int
ctl_print_table(const json_t *clusters)
{
	static const char *const hdr[CTL_COLS] = {
		"NAME", "STATE", "SINCE", "GEN", "PID", "CONNS", "REASON",
	};
	struct ctl_table t = { NULL, 0, 0 };
	size_t i, k, width[CTL_COLS];
	const json_t *c, *w;

	json_array_foreach(clusters, i, c) {
		const json_t *ws = json_object_get(c, "workers");
		struct ctl_row *r = ctl_table_add(&t);
		size_t j;

		if (r == NULL)
			goto oom;
		ctl_cluster_row(c, r);
		if (json_array_size(ws) > 1)
			json_array_foreach(ws, j, w) {
				if ((r = ctl_table_add(&t)) == NULL)
					goto oom;
				ctl_worker_row(w, r);
			}
	}
	for (k = 0; k < CTL_COLS; k++)
		width[k] = strlen(hdr[k]);
	for (i = 0; i < t.n; i++)
		for (k = 0; k < CTL_COLS; k++)
			if (strlen(t.rows[i].col[k]) > width[k])
				width[k] = strlen(t.rows[i].col[k]);
	ctl_print_row(hdr, width, true);
	for (i = 0; i < t.n; i++) {
		const char *cells[CTL_COLS];

		for (k = 0; k < CTL_COLS; k++)
			cells[k] = t.rows[i].col[k];
		ctl_print_row(cells, width, false);
	}
	free(t.rows);
	return 0;
oom:
	free(t.rows);
	ctl_err("out of memory");
	return -1;
}

/* The reply's body as JSON, or NULL (reported) when it is not JSON. */
static json_t *
ctl_body_json(const struct ctl_reply *r)
{
	json_error_t je;
	json_t *j = json_loadb(r->body, r->body_len, 0, &je);

	if (j == NULL)
		ctl_err("garbled reply from ferryd (HTTP %d): %s", r->status, je.text);
	return j;
}

/* A 4xx/5xx with no command-specific meaning: print the API's message. */
static int
ctl_http_failure(const struct ctl_reply *r)
{
	json_t *j = json_loadb(r->body, r->body_len, 0, NULL);
	const char *msg = json_string_value(json_object_get(j, "error"));

	if (msg != NULL)
		ctl_err("%s", msg);
	else
		ctl_err("ferryd answered HTTP %d %s", r->status, http_status_reason(r->status));
	json_decref(j);
	return CTL_EXIT_FAILED;
}

/* A 401 from admin_listen, explained: what ferryd said and what to do. */
static void
ctl_unauthorized(const struct ctl_opts *o, const struct ctl_reply *r, char *err, size_t errlen)
{
	json_t *j = json_loadb(r->body, r->body_len, 0, NULL);
	const char *msg = json_string_value(json_object_get(j, "error"));

	snprintf(err, errlen, "ferryd refused the request (HTTP 401): %s; %s",
	    msg ? msg : "authentication required",
	    o->token[0] != '\0' ? "check the token (FERRY_TOKEN or --token-file) against "
	    "ferryd's admin_token_file" : "set FERRY_TOKEN or pass --token-file FILE "
	    "(or --cert/--key when ferryd checks client certificates)");
	json_decref(j);
}

static int
ctl_exit_for(int status)
{
	return status >= 200 && status < 300 ? CTL_EXIT_OK : CTL_EXIT_FAILED;
}

/* --- commands ----------------------------------------------------------- */

/* Percent-encode a path segment (cluster names are plain, but be safe). */
static void
ctl_pct_encode(const char *in, char *out, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t j = 0;

	for (; *in != '\0' && j + 4 < len; in++) {
		unsigned char c = (unsigned char)*in;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~')
			out[j++] = (char)c;
		else {
			out[j++] = '%';
			out[j++] = hex[c >> 4];
			out[j++] = hex[c & 15];
		}
	}
	out[j] = '\0';
}

/* [sni] `status NAME` of an SNI gateway cluster: a line below the table
 * with the names it serves on its one port (port-per-broker, the default,
 * adds nothing: its listeners are the ports themselves). */
static void
ctl_print_gateway(const json_t *c)
{
	const char *gw = json_string_value(json_object_get(c, "gateway"));
	const json_t *sni = json_object_get(c, "sni");
	const char *addr = NULL;
	const json_t *l;
	size_t i;

	if (gw == NULL || strcmp(gw, "sni") != 0 || !json_is_object(sni))
		return;
	json_array_foreach(json_object_get(c, "listeners"), i, l)
		if (addr == NULL)
			addr = json_string_value(json_object_get(l, "address"));
	printf("\ngateway sni on %s: bootstrap %s, brokers %s\n", addr ? addr : "?",
	    json_string_value(json_object_get(sni, "bootstrapHost")) ?
	    json_string_value(json_object_get(sni, "bootstrapHost")) : "?",
	    json_string_value(json_object_get(sni, "brokerPattern")) ?
	    json_string_value(json_object_get(sni, "brokerPattern")) : "?");
}

/* Below the table, one line per TLS cluster: when its certificate expires
 * (tls.notAfter), flagged within 14 days. */
static void
ctl_print_tls(const json_t *clusters)
{
	size_t i;
	const json_t *c;

	json_array_foreach(clusters, i, c) {
		const json_t *tls = json_object_get(c, "tls");
		const char *name = json_string_value(json_object_get(c, "name"));
		const char *na = json_string_value(json_object_get(tls, "notAfter"));
		struct tm tm;

		if (!json_is_object(tls))
			continue;
		if (!na) {
			printf("%s: TLS certificate expiry unknown\n", name ? name : "?");
			continue;
		}
		memset(&tm, 0, sizeof tm);
		if (!strptime(na, "%Y-%m-%dT%H:%M:%S", &tm)) {
			printf("%s: TLS certificate valid until %s\n", name ? name : "?", na);
			continue;
		}
		long long left = ((long long)timegm(&tm) - (long long)time(NULL)) / 86400;
		printf("%s: TLS certificate valid until %s (%s%lld days%s)\n", name ? name : "?", na,
		    left < 0 ? "expired " : "", left < 0 ? -left : left,
		    left < 0 ? " ago" : left < 14 ? " left: renew it" : " left");
	}
}

/* Below the table, one line per cluster whose worker exited unasked
 * (lastCrash): when, why, which worker. A crash restart replaces the
 * generation, so the table's REASON no longer says it. */
static void
ctl_print_crashes(const json_t *clusters)
{
	size_t i;
	const json_t *c;

	json_array_foreach(clusters, i, c) {
		const json_t *lc = json_object_get(c, "lastCrash");
		const char *name = json_string_value(json_object_get(c, "name"));
		const char *why = json_string_value(json_object_get(lc, "reason"));
		char ago[32];

		if (!json_is_object(lc))
			continue;
		ctl_since(json_object_get(lc, "time"), ago, sizeof ago);
		printf("%s: last crash %s ago: %s (worker #%lld, pid %lld)\n", name ? name : "?", ago,
		    why ? why : "?", (long long)json_integer_value(json_object_get(lc, "index")),
		    (long long)json_integer_value(json_object_get(lc, "pid")));
	}
}

static int
ctl_cmd_status(const struct ctl_reply *r, bool one)
{
	json_t *j, *list;
	int rc = CTL_EXIT_OK;

	if (r->status != 200)
		return ctl_http_failure(r);
	if ((j = ctl_body_json(r)) == NULL)
		return CTL_EXIT_UNREACHABLE;
	if (one) {
		list = json_array();
		json_array_append(list, j);
	} else
		list = json_incref(json_object_get(j, "clusters"));
	if (!json_is_array(list)) {
		ctl_err("garbled reply from ferryd: no cluster list");
		rc = CTL_EXIT_UNREACHABLE;
	} else if (ctl_print_table(list) == -1)
		rc = CTL_EXIT_FAILED;
	else {
		if (one)
			ctl_print_gateway(j);
		ctl_print_tls(list);
		ctl_print_crashes(list);
	}
	json_decref(list);
	json_decref(j);
	return rc;
}

static int
ctl_cmd_health(const struct ctl_reply *r)
{
	json_t *j;
	char up[32];

	if (r->status != 200)
		return ctl_http_failure(r);
	if ((j = ctl_body_json(r)) == NULL)
		return CTL_EXIT_UNREACHABLE;
	ctl_fmt_age(json_integer_value(json_object_get(j, "uptimeSeconds")), up, sizeof up);
	printf("%s (version %s, uptime %s, %lld clusters)\n",
	    json_string_value(json_object_get(j, "status")) ?
	    json_string_value(json_object_get(j, "status")) : "?",
	    json_string_value(json_object_get(j, "version")) ?
	    json_string_value(json_object_get(j, "version")) : "?",
	    up, (long long)json_integer_value(json_object_get(j, "clusters")));
	json_decref(j);
	return CTL_EXIT_OK;
}

static int
ctl_cmd_ready(const struct ctl_reply *r)
{
	const char *name, *policy;
	json_t *j, *v;
	bool ready;

	if (r->status != 200 && r->status != 503)
		return ctl_http_failure(r);
	if ((j = ctl_body_json(r)) == NULL)
		return CTL_EXIT_UNREACHABLE;
	ready = json_is_true(json_object_get(j, "ready"));
	policy = json_string_value(json_object_get(j, "startupPolicy"));
	printf("%s (startup_policy %s)\n", ready ? "ready" : "not ready",
	    policy ? policy : "?");
	json_object_foreach(json_object_get(j, "clusters"), name, v)
		printf("  %s: %s\n", name, json_string_value(v) ? json_string_value(v) : "?");
	json_decref(j);
	return ready && r->status == 200 ? CTL_EXIT_OK : CTL_EXIT_FAILED;
}

static int
ctl_cmd_validate(const struct ctl_reply *r, const char *file)
{
	const char *version;
	json_t *j, *e;
	size_t i;

	if (r->status != 200 && r->status != 400)
		return ctl_http_failure(r);
	if ((j = ctl_body_json(r)) == NULL)
		return CTL_EXIT_UNREACHABLE;
	if (!json_is_boolean(json_object_get(j, "valid"))) {
		json_decref(j);
		return ctl_http_failure(r);
	}
	if (json_is_true(json_object_get(j, "valid"))) {
		version = json_string_value(json_object_get(j, "configVersion"));
		printf("valid: %s (%lld clusters)\n", version ? version : "?",
		    (long long)json_integer_value(json_object_get(j, "clusters")));
		json_decref(j);
		return CTL_EXIT_OK;
	}
	printf("invalid configuration:\n");
	json_array_foreach(json_object_get(j, "errors"), i, e) {
		const char *msg = json_string_value(e);
		static const char tag[] = "<request>";

		if (msg == NULL)
			continue;
		/* errors name the posted text "<request>": show the file */
		if (file != NULL && strncmp(msg, tag, sizeof tag - 1) == 0)
			printf("  %s%s\n", file, msg + sizeof tag - 1);
		else
			printf("  %s\n", msg);
	}
	json_decref(j);
	return CTL_EXIT_FAILED;
}

/* Print a list field as "  label: a, b" when not empty. */
static void
ctl_print_list(const json_t *j, const char *key, const char *label)
{
	const json_t *a = json_object_get(j, key), *v;
	size_t i;

	if (json_array_size(a) == 0)
		return;
	printf("  %s:", label);
	json_array_foreach(a, i, v)
		printf("%s %s", i ? "," : "", json_string_value(v) ? json_string_value(v) : "?");
	printf("\n");
}

static void
ctl_print_errors(const json_t *j, const char *file)
{
	static const char tag[] = "<request>";
	const json_t *e;
	size_t i;

	json_array_foreach(json_object_get(j, "errors"), i, e) {
		const char *msg = json_string_value(e);

		if (msg == NULL)
			continue;
		if (file != NULL && strncmp(msg, tag, sizeof tag - 1) == 0)
			printf("  %s%s\n", file, msg + sizeof tag - 1);
		else
			printf("  %s\n", msg);
	}
}

static int
ctl_cmd_reload(const struct ctl_reply *r, const char *file)
{
	json_t *j;
	const char *status, *version, *err;

	if ((j = ctl_body_json(r)) == NULL)
		return CTL_EXIT_UNREACHABLE;
	status = json_string_value(json_object_get(j, "status"));
	version = json_string_value(json_object_get(j, "configVersion"));
	err = json_string_value(json_object_get(j, "error"));
	if (r->status == 409) {
		const char *since = json_string_value(json_object_get(j, "inProgressSince"));
		printf("reload refused: %s%s%s\n", err ? err : "conflict",
		    since ? " since " : "", since ? since : "");
		ctl_print_errors(j, file);
		json_decref(j);
		return CTL_EXIT_FAILED;
	}
	if (status == NULL) {
		json_decref(j);
		return ctl_http_failure(r);
	}
	printf("reload %s: %s (%lld ms)\n", status, version ? version : "?",
	    (long long)json_integer_value(json_object_get(j, "durationMs")));
	if (json_is_true(json_object_get(j, "success")) &&
	    !json_is_true(json_object_get(j, "changed")))
		printf("  nothing changed\n");
	ctl_print_list(j, "clustersAdded", "added");
	ctl_print_list(j, "clustersModified", "modified");
	ctl_print_list(j, "clustersRemoved", "removed");
	ctl_print_errors(j, file);
	if (json_is_false(json_object_get(j, "persisted")) &&
	    json_string_value(json_object_get(j, "persistError")) && file != NULL)
		printf("  not persisted: %s\n",
		    json_string_value(json_object_get(j, "persistError")));
	json_decref(j);
	return ctl_exit_for(r->status);
}

static int
ctl_cmd_config(const struct ctl_reply *r)
{
	json_t *j, *last;

	if (r->status != 200)
		return ctl_http_failure(r);
	if ((j = ctl_body_json(r)) == NULL)
		return CTL_EXIT_UNREACHABLE;
	printf("current version:  %s\n", json_string_value(json_object_get(j,
	    "currentConfigVersion")) ?: "?");
	printf("applied at:       %s\n", json_string_value(json_object_get(j, "appliedAt")) ?: "-");
	if (json_is_true(json_object_get(j, "reloadInProgress")))
		printf("reload running since %s\n",
		    json_string_value(json_object_get(j, "inProgressSince")) ?: "?");
	last = json_object_get(j, "lastReloadAttempt");
	if (json_is_object(last)) {
		printf("last reload:      %s at %s (%s, %lld ms)\n",
		    json_string_value(json_object_get(last, "status")) ?: "?",
		    json_string_value(json_object_get(last, "timestamp")) ?: "?",
		    json_string_value(json_object_get(last, "source")) ?: "?",
		    (long long)json_integer_value(json_object_get(last, "durationMs")));
		printf("  requested:      %s\n",
		    json_string_value(json_object_get(last, "requestedVersion")) ?: "-");
		ctl_print_list(last, "clustersAdded", "added");
		ctl_print_list(last, "clustersModified", "modified");
		ctl_print_list(last, "clustersRemoved", "removed");
		ctl_print_errors(last, NULL);
	} else {
		printf("last reload:      none\n");
	}
	last = json_object_get(j, "lastValidationAttempt");
	if (json_is_object(last))
		printf("last validation:  %s at %s (%s)\n",
		    json_string_value(json_object_get(last, "status")) ?: "?",
		    json_string_value(json_object_get(last, "timestamp")) ?: "?",
		    json_string_value(json_object_get(last, "requestedVersion")) ?: "?");
	else
		printf("last validation:  none\n");
	json_decref(j);
	return CTL_EXIT_OK;
}

static int
ctl_cmd_cluster_op(const struct ctl_reply *r, const char *op, const char *name)
{
	json_t *j = json_loadb(r->body, r->body_len, 0, NULL);
	const char *err = json_string_value(json_object_get(j, "error"));

	if (r->status >= 200 && r->status < 300) {
		printf("%s %s: %s, generation %lld\n", op, name,
		    json_string_value(json_object_get(j, "state")) ?: "started",
		    (long long)json_integer_value(json_object_get(j, "generation")));
		json_decref(j);
		return CTL_EXIT_OK;
	}
	ctl_err("%s %s failed: %s", op, name, err ? err : http_status_reason(r->status));
	json_decref(j);
	return CTL_EXIT_FAILED;
}

static int
ctl_read_file(const char *path, char **out, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0, cap = 0, r;

	if (f == NULL)
		return -1;
	for (;;) {
		if (n == cap) {
			char *nb;

			cap = cap ? cap * 2 : 8192;
			if (cap > 2 * HTTP_MAX_BODY || (nb = realloc(buf, cap)) == NULL) {
				errno = cap > 2 * HTTP_MAX_BODY ? EFBIG : ENOMEM;
				goto fail;
			}
			buf = nb;
		}
		r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (r == 0) {
			if (ferror(f)) {
				errno = EIO;
				goto fail;
			}
			break;
		}
	}
	fclose(f);
	*out = buf;
	*len = n;
	return 0;
fail:;
	int e = errno;

	fclose(f);
	free(buf);
	errno = e;
	return -1;
}

/* The request body for `validate FILE` / `reload FILE`. An empty body means
 * "ferryd's own file" to the API, so an empty FILE is refused rather than
 * silently acting on something other than what was asked for. */
static int
ctl_file_body(const char *file, const char *verb, char **body, size_t *len)
{
	if (ctl_read_file(file, body, len) == -1) {
		ctl_err("cannot read %s: %s", file, strerror(errno));
		return -1;
	}
	if (*len == 0) {
		ctl_err("%s is empty (an empty request would %s ferryd's own config file)",
		    file, verb);
		free(*body);
		*body = NULL;
		return -1;
	}
	if (*len > HTTP_MAX_BODY) {
		/* the same limit ferryd applies to a config file and a posted one */
		ctl_err("%s is larger than %u bytes, the limit of a configuration", file,
		    (unsigned)HTTP_MAX_BODY);
		free(*body);
		*body = NULL;
		return -1;
	}
	return 0;
}

enum ctl_command {
	CTL_CMD_STATUS = 0,
	CTL_CMD_HEALTH,
	CTL_CMD_READY,
	CTL_CMD_VALIDATE,
	CTL_CMD_METRICS,
	CTL_CMD_RELOAD,
	CTL_CMD_CONFIG,
	CTL_CMD_DRAIN,
	CTL_CMD_RESTART,
	CTL_CMD_TOP,
};

/*
 * How a command maps onto the API: `path`, or with a cluster name argument
 * `arg_prefix` NAME `arg_suffix`; `file_body` commands post their optional
 * FILE.
 */
struct ctl_command_def {
	const char *name;
	enum ctl_command cmd;
	int max_args;
	int min_args;
	const char *method;
	const char *path;
	const char *arg_prefix;   /* path around the cluster name, or NULL */
	const char *arg_suffix;
	bool file_body;
};

static const struct ctl_command_def ctl_commands[] = {
	{ "status", CTL_CMD_STATUS, 1, 0, "GET", "/admin/clusters", "/admin/clusters/", "", false },
	{ "health", CTL_CMD_HEALTH, 0, 0, "GET", "/admin/health", NULL, NULL, false },
	{ "ready", CTL_CMD_READY, 0, 0, "GET", "/admin/ready", NULL, NULL, false },
	{ "validate", CTL_CMD_VALIDATE, 1, 0, "POST", "/admin/config/validate", NULL, NULL, true },
	{ "metrics", CTL_CMD_METRICS, 0, 0, "GET", "/metrics", NULL, NULL, false },
	{ "reload", CTL_CMD_RELOAD, 1, 0, "POST", "/admin/config/reload", NULL, NULL, true },
	{ "config", CTL_CMD_CONFIG, 0, 0, "GET", "/admin/config/status", NULL, NULL, false },
	{ "drain", CTL_CMD_DRAIN, 1, 1, "POST", NULL, "/admin/clusters/", "/drain", false },
	{ "restart", CTL_CMD_RESTART, 1, 1, "POST", NULL, "/admin/clusters/", "/restart", false },
	{ "top", CTL_CMD_TOP, 0, 0, "GET", "/admin/clusters", NULL, NULL, false },
};

/* How long a reload may take (init_timeout plus margin, as ferryd says in
 * GET /admin/config/status), plus time to answer; at least CTL_TIMEOUT_MS. */
static long
ctl_reload_timeout(const struct ctl_opts *o)
{
	struct ctl_reply r;
	char err[256];
	long t = CTL_TIMEOUT_MS;

	if (ctl_request(o, "GET", "/admin/config/status", NULL, 0, &r, err, sizeof err) == 0 &&
	    r.status == 200) {
		json_t *j = json_loadb(r.body, r.body_len, 0, NULL);
		json_t *v = json_object_get(j, "reloadTimeoutMs");

		if (json_is_integer(v) && json_integer_value(v) + 10000 > t)
			t = (long)json_integer_value(v) + 10000;
		json_decref(j);
	}
	free(r.raw);
	return t;
}

static int
ctl_run(const struct ctl_opts *o, const struct ctl_command_def *def, const char *arg)
{
	struct ctl_reply reply;
	char path[1024], enc[768], err[512];
	const char *method = def->method;
	char *body = NULL;
	size_t body_len = 0;
	int rc;

	if (def->arg_prefix != NULL && arg != NULL) {
		ctl_pct_encode(arg, enc, sizeof enc);
		snprintf(path, sizeof path, "%s%s%s", def->arg_prefix, enc, def->arg_suffix);
	} else {
		snprintf(path, sizeof path, "%s", def->path);
	}
	if (def->file_body && arg != NULL &&
	    ctl_file_body(arg, def->name, &body, &body_len) == -1)
		return CTL_EXIT_FAILED;

	struct ctl_opts ro = *o;
	if (def->cmd == CTL_CMD_RELOAD)
		ro.timeout_ms = ctl_reload_timeout(o);
	rc = ctl_request(&ro, method, path, body, body_len, &reply, err, sizeof err);
	free(body);
	if (rc == -1 && def->cmd == CTL_CMD_RELOAD && reply.sent) {
		/* ferryd took the request but has not answered in the time a
		 * reload can take: it is not unreachable, the reload runs on */
		ctl_err("reload still in progress after %lds (%s); `ferryctl config` shows its "
		    "outcome", ro.timeout_ms / 1000, err);
		free(reply.raw);
		return CTL_EXIT_FAILED;
	}
	if (rc == -1) {
		ctl_err("%s", err);
		free(reply.raw);
		return CTL_EXIT_UNREACHABLE;
	}
	if (reply.status == 401) {
		ctl_unauthorized(o, &reply, err, sizeof err);
		ctl_err("%s", err);
		if (o->json)
			fwrite(reply.body, 1, reply.body_len, stdout);
		free(reply.raw);
		return CTL_EXIT_FAILED;
	}
	if (o->json || def->cmd == CTL_CMD_METRICS) {
		fwrite(reply.body, 1, reply.body_len, stdout);
		rc = ctl_exit_for(reply.status);
		if (def->cmd == CTL_CMD_METRICS && !o->json && rc != CTL_EXIT_OK)
			ctl_err("ferryd answered HTTP %d", reply.status);
	} else {
		switch (def->cmd) {
		case CTL_CMD_STATUS:
			rc = ctl_cmd_status(&reply, arg != NULL);
			break;
		case CTL_CMD_HEALTH:
			rc = ctl_cmd_health(&reply);
			break;
		case CTL_CMD_READY:
			rc = ctl_cmd_ready(&reply);
			break;
		case CTL_CMD_VALIDATE:
			rc = ctl_cmd_validate(&reply, arg);
			break;
		case CTL_CMD_METRICS:
			break;
		case CTL_CMD_RELOAD:
			rc = ctl_cmd_reload(&reply, arg);
			break;
		case CTL_CMD_CONFIG:
			rc = ctl_cmd_config(&reply);
			break;
		case CTL_CMD_DRAIN:
		case CTL_CMD_RESTART:
			rc = ctl_cmd_cluster_op(&reply, def->name, arg);
			break;
		case CTL_CMD_TOP:
			break;  /* ctl_top() */
		}
	}
	free(reply.raw);
	if (fflush(stdout) == EOF && rc == CTL_EXIT_OK)
		rc = CTL_EXIT_FAILED;
	return rc;
}

/* --- status -w and top: a live view ------------------------------------- */

static volatile sig_atomic_t ctl_interrupted;

static void
ctl_on_signal(int sig)
{
	(void)sig;
	ctl_interrupted = 1;
}

/* Keys without Enter and without echo while a live view runs (stdin a
 * terminal); ISIG stays on, so Ctrl-C is still SIGINT. */
struct ctl_tty {
	bool raw;
	bool keys;                      /* stdin may still deliver keys */
	struct termios saved;
};

static void
ctl_tty_enter(struct ctl_tty *t)
{
	struct termios raw;

	t->raw = false;
	t->keys = true;
	if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &t->saved) == -1)
		return;
	raw = t->saved;
	raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	raw.c_cc[VMIN] = 0;
	raw.c_cc[VTIME] = 0;
	if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0)
		t->raw = true;
}

static void
ctl_tty_leave(struct ctl_tty *t)
{
	if (t->raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
	t->raw = false;
}

/* Wait until the monotonic deadline; true when asked to quit: q, Q, Ctrl-C
 * (SIGINT) or SIGTERM. stdin at EOF or not readable is simply ignored. */
static bool
ctl_wait_until(struct ctl_tty *t, long deadline)
{
	for (;;) {
		long left = deadline - ctlconn_now_ms();
		struct pollfd pfd = { STDIN_FILENO, POLLIN, 0 };
		char keys[64];
		ssize_t n;
		int pr;

		if (ctl_interrupted)
			return true;
		if (left <= 0)
			return false;
		pr = poll(&pfd, t->keys ? 1 : 0, (int)left);
		if (pr == -1 && errno != EINTR)
			t->keys = false;
		if (pr <= 0)
			continue;
		if (pfd.revents & (POLLERR | POLLNVAL)) {
			t->keys = false;
			continue;
		}
		n = read(STDIN_FILENO, keys, sizeof keys);
		if (n <= 0) {
			if (n == 0 || (errno != EINTR && errno != EAGAIN))
				t->keys = false;
			continue;
		}
		for (ssize_t i = 0; i < n; i++)
			if (keys[i] == 'q' || keys[i] == 'Q' || keys[i] == 3)
				return true;
	}
}

/* ferry_<field>{cluster="NAME"} VALUE lines of /metrics, for top. */
#define CTL_LAT_BUCKETS 32

struct ctl_sample {
	char name[256];
	double conns, requests, bytes_in, bytes_out;
	bool have_requests;
	/* ferry_request_duration_seconds_bucket summed over APIs, by le */
	double lat_le[CTL_LAT_BUCKETS], lat_n[CTL_LAT_BUCKETS];
	size_t n_lat;
};

struct ctl_samples {
	struct ctl_sample *v;
	size_t n;
	long at_ms;                     /* monotonic time of the scrape */
};

static struct ctl_sample *
ctl_sample_get(struct ctl_samples *ss, const char *name, bool create)
{
	for (size_t i = 0; i < ss->n; i++)
		if (strcmp(ss->v[i].name, name) == 0)
			return &ss->v[i];
	if (!create)
		return NULL;
	struct ctl_sample *nv = realloc(ss->v, (ss->n + 1) * sizeof *nv);
	if (nv == NULL)
		return NULL;
	ss->v = nv;
	memset(&nv[ss->n], 0, sizeof nv[ss->n]);
	snprintf(nv[ss->n].name, sizeof nv[ss->n].name, "%s", name);
	return &nv[ss->n++];
}

/* One bucket line (p..e) of the latency histogram: add v at its le. */
static void
ctl_lat_add(struct ctl_sample *smp, const char *p, const char *e, double v)
{
	const char *le = memmem(p, (size_t)(e - p), "le=\"", 4);
	if (le == NULL)
		return;
	le += 4;
	double bound = strncmp(le, "+Inf", 4) == 0 ? INFINITY : strtod(le, NULL);
	size_t i;
	for (i = 0; i < smp->n_lat; i++)
		if (smp->lat_le[i] == bound)
			break;
	if (i == smp->n_lat) {
		if (smp->n_lat == CTL_LAT_BUCKETS)
			return;
		/* keep the bounds sorted */
		while (i > 0 && smp->lat_le[i - 1] > bound) {
			smp->lat_le[i] = smp->lat_le[i - 1];
			smp->lat_n[i] = smp->lat_n[i - 1];
			i--;
		}
		smp->lat_le[i] = bound;
		smp->lat_n[i] = 0;
		smp->n_lat++;
	}
	smp->lat_n[i] += v;
}

/* The 99th percentile's bucket bound (seconds) of the requests answered
 * between two scrapes (all of them when nothing new); NAN when none. */
static double
ctl_lat_p99(const struct ctl_sample *s, const struct ctl_sample *b)
{
	double d[CTL_LAT_BUCKETS], total;
	if (s == NULL || s->n_lat == 0)
		return NAN;
	for (size_t i = 0; i < s->n_lat; i++) {
		d[i] = s->lat_n[i];
		for (size_t k = 0; b != NULL && k < b->n_lat; k++)
			if (b->lat_le[k] == s->lat_le[i])
				d[i] -= b->lat_n[k];
	}
	total = d[s->n_lat - 1];
	if (total <= 0) {
		for (size_t i = 0; i < s->n_lat; i++)
			d[i] = s->lat_n[i];
		total = d[s->n_lat - 1];
	}
	if (total <= 0)
		return NAN;
	for (size_t i = 0; i < s->n_lat; i++)
		if (d[i] >= 0.99 * total)
			return s->lat_le[i];
	return INFINITY;
}

/* Parse the exposition: per-cluster samples (families with more labels, such
 * as ferry_requests_total{cluster,api}, summed per cluster). */
static void
ctl_parse_metrics(const char *text, size_t len, struct ctl_samples *ss)
{
	static const char pre[] = "{cluster=\"";
	const char *p = text, *endp = text + len;

	while (p < endp) {
		const char *eol = memchr(p, '\n', (size_t)(endp - p));
		const char *e = eol ? eol : endp, *q, *brace;
		char field[128], name[256], num[64];
		size_t fl, nl = 0;

		if (*p == '#' || (brace = memchr(p, '{', (size_t)(e - p))) == NULL ||
		    (size_t)(e - brace) < sizeof pre ||
		    strncmp(brace, pre, sizeof pre - 1) != 0)
			goto next;
		fl = (size_t)(brace - p);
		if (fl >= sizeof field)
			goto next;
		memcpy(field, p, fl);
		field[fl] = '\0';
		for (q = brace + sizeof pre - 1; q < e && *q != '"'; q++) {
			if (*q == '\\' && q + 1 < e)
				q++;
			if (nl + 1 < sizeof name)
				name[nl++] = *q == 'n' && q[-1] == '\\' ? '\n' : *q;
		}
		name[nl] = '\0';
		/* other labels (api, reason, ...) follow: the values are summed */
		if (q + 1 < e && q[1] == ',') {
			while (q < e && *q != '}')
				q++;
			q--;
		}
		if (q + 3 > e || q[1] != '}' || q[2] != ' ')
			goto next;
		q += 3;
		if ((size_t)(e - q) >= sizeof num)
			goto next;
		memcpy(num, q, (size_t)(e - q));
		num[e - q] = '\0';
		{
			char *numend;
			double v = strtod(num, &numend);
			struct ctl_sample *smp;

			if (numend == num || *numend != '\0' ||
			    (smp = ctl_sample_get(ss, name, true)) == NULL)
				goto next;
			if (strcmp(field, "ferry_connections_active") == 0)
				smp->conns = v;
			else if (strcmp(field, "ferry_request_duration_seconds_bucket") == 0)
				ctl_lat_add(smp, p, e, v);
			else if (strcmp(field, "ferry_requests_total") == 0) {
				smp->requests += v;  /* one line per API */
				smp->have_requests = true;
			} else if (strcmp(field, "ferry_bytes_client_to_upstream_total") == 0)
				smp->bytes_in = v;
			else if (strcmp(field, "ferry_bytes_upstream_to_client_total") == 0)
				smp->bytes_out = v;
		}
next:
		p = e + 1;
	}
}

static void
ctl_fmt_rate(double v, const char *unit, char *buf, size_t len)
{
	static const char *const pfx[] = { "", "k", "M", "G", "T" };
	size_t i = 0;

	if (isnan(v)) {
		snprintf(buf, len, "-");
		return;
	}
	while (v >= 1000 && i + 1 < sizeof pfx / sizeof pfx[0]) {
		v /= 1000;
		i++;
	}
	snprintf(buf, len, "%.1f%s%s", v, pfx[i], unit);
}

/* A rate from two samples, NAN when there is no earlier one. */
static double
ctl_rate(double now, double before, bool have_before, double secs)
{
	if (!have_before || secs <= 0)
		return NAN;
	return now > before ? (now - before) / secs : 0.0;
}

#define CTL_TOP_COLS 10

/* One frame of `ferryctl top`. */
static int
ctl_top_frame(const json_t *clusters, const struct ctl_samples *cur, const struct ctl_samples *prev)
{
	static const char *const hdr[CTL_TOP_COLS] = {
		"NAME", "STATE", "GEN", "WORKERS", "CONNS", "REQ/S", "IN/S", "OUT/S", "P99", "REQUESTS",
	};
	double secs = prev->at_ms ? (double)(cur->at_ms - prev->at_ms) / 1000.0 : 0;
	size_t n = json_array_size(clusters), i, k, width[CTL_TOP_COLS];
	char (*cells)[CTL_TOP_COLS][64] = calloc(n ? n : 1, sizeof *cells);
	const json_t *c;

	if (cells == NULL) {
		ctl_err("out of memory");
		return CTL_EXIT_FAILED;
	}
	json_array_foreach(clusters, i, c) {
		const char *name = json_string_value(json_object_get(c, "name"));
		const char *state = json_string_value(json_object_get(c, "state"));
		const json_t *gen = json_object_get(c, "generation"), *w;
		const struct ctl_sample *s = ctl_sample_get((struct ctl_samples *)cur, name ? name : "", false);
		const struct ctl_sample *b = ctl_sample_get((struct ctl_samples *)prev, name ? name : "", false);
		size_t j, workers = 0;

		json_array_foreach(json_object_get(c, "workers"), j, w)
			if (json_is_integer(json_object_get(w, "pid")))
				workers++;
		snprintf(cells[i][0], 64, "%s", name ? name : "?");
		snprintf(cells[i][1], 64, "%s", state ? state : "?");
		if (json_is_integer(gen))
			snprintf(cells[i][2], 64, "%lld", (long long)json_integer_value(gen));
		else
			snprintf(cells[i][2], 64, "-");
		snprintf(cells[i][3], 64, "%zu", workers);
		snprintf(cells[i][4], 64, "%.0f", s ? s->conns : 0.0);
		ctl_fmt_rate(s ? ctl_rate(s->requests, b ? b->requests : 0, b != NULL, secs) : NAN,
		    "", cells[i][5], 64);
		ctl_fmt_rate(s ? ctl_rate(s->bytes_in, b ? b->bytes_in : 0, b != NULL, secs) : NAN,
		    "B", cells[i][6], 64);
		ctl_fmt_rate(s ? ctl_rate(s->bytes_out, b ? b->bytes_out : 0, b != NULL, secs) : NAN,
		    "B", cells[i][7], 64);
		double q = ctl_lat_p99(s, b);
		if (isnan(q))
			snprintf(cells[i][8], 64, "-");
		else if (isinf(q))
			snprintf(cells[i][8], 64, ">10s");
		else if (q < 1.0)
			snprintf(cells[i][8], 64, "%gms", q * 1000.0);
		else
			snprintf(cells[i][8], 64, "%gs", q);
		snprintf(cells[i][9], 64, "%.0f", s ? s->requests : 0.0);
	}
	for (k = 0; k < CTL_TOP_COLS; k++) {
		width[k] = strlen(hdr[k]);
		for (i = 0; i < n; i++)
			if (strlen(cells[i][k]) > width[k])
				width[k] = strlen(cells[i][k]);
	}
	for (k = 0; k < CTL_TOP_COLS; k++) {
		ctl_paint(CTL_BOLD, hdr[k], k + 1 < CTL_TOP_COLS ? width[k] : 0);
		fputs(k + 1 < CTL_TOP_COLS ? "  " : "\n", stdout);
	}
	for (i = 0; i < n; i++)
		for (k = 0; k < CTL_TOP_COLS; k++) {
			/* numbers right-aligned, text left */
			if (k >= 2) {
				printf("%*s", (int)width[k], cells[i][k]);
			} else {
				ctl_paint(k == 1 ? ctl_state_color(cells[i][k]) : NULL, cells[i][k],
				    width[k]);
			}
			fputs(k + 1 < CTL_TOP_COLS ? "  " : "\n", stdout);
		}
	free(cells);
	return CTL_EXIT_OK;
}

/* --json top: one line per refresh. */
static void
ctl_top_json(const json_t *clusters, const struct ctl_samples *cur, const struct ctl_samples *prev)
{
	double secs = prev->at_ms ? (double)(cur->at_ms - prev->at_ms) / 1000.0 : 0;
	json_t *out = json_array(), *doc;
	const json_t *c;
	size_t i;
	char *text;

	json_array_foreach(clusters, i, c) {
		const char *name = json_string_value(json_object_get(c, "name"));
		const struct ctl_sample *s = ctl_sample_get((struct ctl_samples *)cur, name ? name : "", false);
		const struct ctl_sample *b = ctl_sample_get((struct ctl_samples *)prev, name ? name : "", false);
		double r[3] = { NAN, NAN, NAN };
		json_t *o;

		if (s != NULL) {
			r[0] = ctl_rate(s->requests, b ? b->requests : 0, b != NULL, secs);
			r[1] = ctl_rate(s->bytes_in, b ? b->bytes_in : 0, b != NULL, secs);
			r[2] = ctl_rate(s->bytes_out, b ? b->bytes_out : 0, b != NULL, secs);
		}
		o = json_pack("{s:s?, s:O, s:O, s:I, s:I}", "name", name,
		    "state", json_object_get(c, "state") ? json_object_get(c, "state") : json_null(),
		    "generation", json_object_get(c, "generation") ? json_object_get(c, "generation") : json_null(),
		    "connections", (json_int_t)(s ? s->conns : 0),
		    "requests", (json_int_t)(s ? s->requests : 0));
		if (o == NULL)
			continue;
		json_object_set_new(o, "requestsPerSecond", isnan(r[0]) ? json_null() : json_real(r[0]));
		json_object_set_new(o, "bytesInPerSecond", isnan(r[1]) ? json_null() : json_real(r[1]));
		json_object_set_new(o, "bytesOutPerSecond", isnan(r[2]) ? json_null() : json_real(r[2]));
		double q = ctl_lat_p99(s, b);
		json_object_set_new(o, "p99UpstreamSeconds", isnan(q) || isinf(q) ? json_null() :
		    json_real(q));
		json_array_append_new(out, o);
	}
	doc = json_pack("{s:o}", "clusters", out);
	if (doc != NULL && (text = json_dumps(doc, JSON_COMPACT)) != NULL) {
		printf("%s\n", text);
		free(text);
	}
	json_decref(doc);
}

/* One GET; the body as JSON (status 200 only), or NULL with the exit code
 * and a message in err. */
static json_t *
ctl_get_json(const struct ctl_opts *o, const char *path, struct ctl_reply *r, int *rc,
	     char *err, size_t errlen)
{
	json_t *j;

	if (ctl_request(o, "GET", path, NULL, 0, r, err, errlen) == -1) {
		*rc = CTL_EXIT_UNREACHABLE;
		return NULL;
	}
	if (r->status == 401) {
		ctl_unauthorized(o, r, err, errlen);
		*rc = CTL_EXIT_FAILED;
		return NULL;
	}
	if (r->status != 200) {
		json_t *e = json_loadb(r->body, r->body_len, 0, NULL);
		const char *msg = json_string_value(json_object_get(e, "error"));

		snprintf(err, errlen, "%s", msg ? msg : http_status_reason(r->status));
		json_decref(e);
		*rc = CTL_EXIT_FAILED;
		return NULL;
	}
	if ((j = json_loadb(r->body, r->body_len, 0, NULL)) == NULL) {
		snprintf(err, errlen, "garbled reply from ferryd");
		*rc = CTL_EXIT_UNREACHABLE;
	}
	return j;
}

/*
 * status -w and top: a frame every second (a terminal is cleared before
 * each; elsewhere frames follow one another), until q, Ctrl-C, SIGTERM or
 * -n frames. A frame that cannot reach ferryd says so and the view goes
 * on. Returns the exit code of the last frame.
 */
static int
ctl_live(const struct ctl_opts *opts, bool top, const char *name)
{
	struct ctl_opts o = *opts;
	struct ctl_samples cur = { NULL, 0, 0 }, prev = { NULL, 0, 0 };
	struct sigaction sa;
	struct ctl_tty tty;
	bool clear = isatty(STDOUT_FILENO) == 1 && !o.json;
	char path[1024], enc[768];
	long frame = 0, start = ctlconn_now_ms();
	int rc = CTL_EXIT_OK;

	o.timeout_ms = 5000;
	if (name != NULL) {
		ctl_pct_encode(name, enc, sizeof enc);
		snprintf(path, sizeof path, "/admin/clusters/%s", enc);
	} else {
		snprintf(path, sizeof path, "/admin/clusters");
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = ctl_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* a frame goes out in one write */
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	ctl_tty_enter(&tty);
	for (;;) {
		struct ctl_reply r;
		char err[512] = "", clock[32];
		time_t now = time(NULL);
		struct tm tm;

		localtime_r(&now, &tm);
		strftime(clock, sizeof clock, "%H:%M:%S", &tm);
		if (clear)
			fputs("\033[H\033[2J", stdout);
		if (top) {
			json_t *cl = ctl_get_json(&o, "/admin/clusters", &r, &rc, err, sizeof err);

			free(r.raw);
			if (cl != NULL) {
				cur.n = 0;
				if (ctl_request(&o, "GET", "/metrics", NULL, 0, &r, err, sizeof err) == -1) {
					rc = CTL_EXIT_UNREACHABLE;
				} else {
					cur.at_ms = ctlconn_now_ms();
					ctl_parse_metrics(r.body, r.body_len, &cur);
					rc = ctl_exit_for(r.status);
					if (rc != CTL_EXIT_OK)
						snprintf(err, sizeof err, "/metrics: HTTP %d", r.status);
				}
				free(r.raw);
			}
			if (cl != NULL && rc == CTL_EXIT_OK) {
				if (o.json) {
					ctl_top_json(json_object_get(cl, "clusters"), &cur, &prev);
				} else {
					printf("ferry top  %s  every 1s, q or Ctrl-C quits\n\n", clock);
					rc = ctl_top_frame(json_object_get(cl, "clusters"), &cur, &prev);
				}
				struct ctl_samples t = prev;
				prev = cur;
				cur = t;
			}
			json_decref(cl);
		} else if (ctl_request(&o, "GET", path, NULL, 0, &r, err, sizeof err) == -1) {
			rc = CTL_EXIT_UNREACHABLE;
		} else if (r.status == 401) {
			ctl_unauthorized(&o, &r, err, sizeof err);
			rc = CTL_EXIT_FAILED;
			free(r.raw);
		} else {
			if (o.json) {
				/* one document per line */
				json_t *j = json_loadb(r.body, r.body_len, 0, NULL);
				char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;

				if (text != NULL)
					printf("%s\n", text);
				else
					fwrite(r.body, 1, r.body_len, stdout);
				free(text);
				json_decref(j);
				rc = ctl_exit_for(r.status);
			} else {
				fflush(stdout);
				rc = ctl_cmd_status(&r, name != NULL);
				if (clear)
					printf("\nevery 1s  %s  q or Ctrl-C quits\n", clock);
			}
			free(r.raw);
		}
		if (err[0] != '\0') {
			if (clear)
				printf("ferryctl: %s\n\nevery 1s  %s  q or Ctrl-C quits\n", err, clock);
			else
				ctl_err("%s", err);
		}
		fflush(stdout);
		frame++;
		if ((o.count && frame >= o.count) || ctl_wait_until(&tty, start + frame * 1000))
			break;
	}
	ctl_tty_leave(&tty);
	free(cur.v);
	free(prev.v);
	return rc;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "address", required_argument, NULL, 'a' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "watch", no_argument, NULL, 'w' },
		{ "count", required_argument, NULL, 'n' },
		{ "token-file", required_argument, NULL, 'T' },
		{ "cacert", required_argument, NULL, 'C' },
		{ "cert", required_argument, NULL, 'E' },
		{ "key", required_argument, NULL, 'K' },
		{ NULL, 0, NULL, 0 },
	};
	static struct ctl_opts o;
	const char *token_file = NULL;
	char terr[1200];
	char *end;
	const struct ctl_command_def *def = NULL;
	const char *env;
	size_t i;
	int ch, nargs;

	while ((ch = getopt_long(argc, argv, "s:a:jhVwn:T:C:E:K:", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			o.socket = optarg;
			break;
		case 'a':
			o.address = optarg;
			if (strncmp(optarg, "https://", 8) == 0) {
				o.address = optarg + 8;
				o.conn.tls = true;
			}
			break;
		case 'T':
			token_file = optarg;
			break;
		case 'C':
			o.conn.cacert = optarg;
			o.conn.tls = true;
			break;
		case 'E':
			o.conn.cert = optarg;
			o.conn.tls = true;
			break;
		case 'K':
			o.conn.key = optarg;
			o.conn.tls = true;
			break;
		case 'j':
			o.json = true;
			break;
		case 'w':
			o.watch = true;
			break;
		case 'n':
			errno = 0;
			o.count = strtol(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || end == optarg || o.count < 1) {
				ctl_err("bad count '%s' (want a positive number)", optarg);
				return CTL_EXIT_USAGE;
			}
			break;
		case 'h':
			ctl_usage(stdout);
			return CTL_EXIT_OK;
		case 'V':
			printf("ferryctl %s\n", FERRY_VERSION);
			return CTL_EXIT_OK;
		default:
			ctl_usage(stderr);
			return CTL_EXIT_USAGE;
		}
	}
	if (o.socket != NULL && o.address != NULL) {
		ctl_err("-s and -a are mutually exclusive");
		ctl_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	if (o.address != NULL) {
		char host[256], port[8];

		if (ctlconn_split_address(o.address, host, sizeof host, port, sizeof port) == -1) {
			ctl_err("bad address '%s' (want HOST:PORT)", o.address);
			return CTL_EXIT_USAGE;
		}
	}
	if (o.socket == NULL)
		o.socket = (env = getenv("FERRY_SOCKET")) != NULL && *env ? env :
		    FERRY_DEFAULT_SOCKET;
	if (o.conn.tls && o.address == NULL) {
		ctl_err("--cacert, --cert and --key need -a HOST:PORT (HTTPS on admin_listen)");
		return CTL_EXIT_USAGE;
	}
	if ((o.conn.cert == NULL) != (o.conn.key == NULL)) {
		ctl_err("--cert and --key go together");
		return CTL_EXIT_USAGE;
	}
	if (ctlconn_token(token_file, o.token, sizeof o.token, terr, sizeof terr) == -1) {
		ctl_err("%s", terr);
		return CTL_EXIT_USAGE;
	}
	o.conn.socket = o.socket;
	o.conn.address = o.address;
	if (optind >= argc) {
		ctl_err("missing command");
		ctl_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	for (i = 0; i < sizeof ctl_commands / sizeof ctl_commands[0]; i++)
		if (strcmp(argv[optind], ctl_commands[i].name) == 0)
			def = &ctl_commands[i];
	if (def == NULL) {
		ctl_err("unknown command '%s'", argv[optind]);
		ctl_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	nargs = argc - optind - 1;
	if (nargs < def->min_args) {
		ctl_err("'%s' needs a cluster name", def->name);
		ctl_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	if (nargs > def->max_args) {
		ctl_err("too many arguments for '%s'", def->name);
		ctl_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	if ((def->cmd == CTL_CMD_STATUS || def->cmd == CTL_CMD_DRAIN ||
	    def->cmd == CTL_CMD_RESTART) && nargs == 1 && argv[optind + 1][0] == '\0') {
		ctl_err("empty cluster name");
		return CTL_EXIT_USAGE;
	}
	if (o.watch && def->cmd != CTL_CMD_STATUS) {
		ctl_err("-w only applies to status");
		return CTL_EXIT_USAGE;
	}
	if (o.count && !o.watch && def->cmd != CTL_CMD_TOP) {
		ctl_err("-n only applies to status -w and top");
		return CTL_EXIT_USAGE;
	}
	ctl_color = !o.json && ctl_color_wanted();
	if (o.watch || def->cmd == CTL_CMD_TOP)
		return ctl_live(&o, def->cmd == CTL_CMD_TOP, nargs == 1 ? argv[optind + 1] : NULL);
	return ctl_run(&o, def, nargs == 1 ? argv[optind + 1] : NULL);
}
