/*
 * ctl_priv — what the files of ferryctl share; private to supervisor/ctl.
 *
 * ferryctl is one program in four files around its connection (ctlconn.h):
 *   ferryctl.c  options, the command table, the one-shot commands and how
 *               each renders its reply (health, ready, validate, reload,
 *               config, drain, restart, metrics, upgrade);
 *   request.c   one HTTP/1.1 request to ferryd and the generic handling of
 *               a reply (errors, 401, exit code);
 *   status.c    the status table, and the ages and colours of every view;
 *   top.c       the live views: `status -w` and `top`;
 *   connections.c  `connections NAME`: who is connected to a cluster.
 *
 * Exit codes are contract (docs/design.md §8): 0 ok, 1 the operation failed
 * or was rejected (HTTP 4xx/5xx, not ready, invalid config, unknown
 * cluster), 2 usage, 3 ferryd could not be reached (connect error, TLS,
 * timeout, garbled reply).
 *
 * Return conventions: a command returns its exit code (CTL_EXIT_*);
 * helpers return 0 / -1 with a message in err (or reported on stderr
 * through ctl_err, as each says).
 */
#ifndef FERRY_CTL_PRIV_H
#define FERRY_CTL_PRIV_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "ctlconn.h"

#define CTL_EXIT_OK          0
#define CTL_EXIT_FAILED      1
#define CTL_EXIT_USAGE       2
#define CTL_EXIT_UNREACHABLE 3

#define CTL_TIMEOUT_MS   30000

struct ctl_opts {
	const char *socket;             /* control socket path */
	const char *address;            /* HOST:PORT of admin_listen, or NULL */
	struct ctlconn_opts conn;       /* how to reach it (ctlconn.h) */
	char token[1100];               /* bearer token for -a, or "" */
	bool json;
	long timeout_ms;                /* for the whole request; 0 = CTL_TIMEOUT_MS */
	bool watch;                     /* status -w: refresh every second */
	long count;                     /* -n: refreshes of -w / top; 0 = until quit */
	const char *state;              /* status --state S[,S]: filter */
	const char *sort;               /* status --sort KEY */
	bool wait;                      /* upgrade --wait: until the old ferryd is gone */
	/* connections: filters and paging */
	const char *conn_client_id;     /* --client-id, or NULL */
	const char *conn_principal;     /* --principal, or NULL */
	long conn_limit;                /* --limit: rows; 0 = all (--json: 100) */
	long conn_offset;               /* --offset */
};

struct ctl_reply {
	char *raw;                      /* whole response as received */
	size_t raw_len;
	int status;
	const char *body;               /* inside raw */
	size_t body_len;
	bool sent;                      /* the request reached ferryd */
	bool timed_out;                 /* ... and no reply came in time */
};

/* --- request.c ---------------------------------------------------------- */

/* "ferryctl: MESSAGE" on stderr. */
void ctl_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One request; the server closes the connection after its response. Returns
 * 0 with *reply filled (the caller frees reply->raw), -1 when ferryd could
 * not be reached or the reply is garbled (message in err; reply->sent says
 * whether the request went out). */
int ctl_request(const struct ctl_opts *o, const char *method, const char *path,
		const char *body, size_t body_len, struct ctl_reply *reply,
		char *err, size_t errlen);

/* The reply's body as JSON, or NULL (reported) when it is not JSON. */
json_t *ctl_body_json(const struct ctl_reply *r);

/* A 4xx/5xx with no command-specific meaning: prints the API's message;
 * returns CTL_EXIT_FAILED, or CTL_EXIT_UNREACHABLE when the body is not
 * ferryd's JSON error (something else answered). */
int ctl_http_failure(const struct ctl_reply *r);

/* Whether a /metrics body is ferryd's exposition (lines of comments and
 * samples, ferry_up among them); reported when not. */
bool ctl_metrics_ok(const char *body, size_t len);

/* A 401 from admin_listen, explained into err: what ferryd said and what to
 * do. */
void ctl_unauthorized(const struct ctl_opts *o, const struct ctl_reply *r, char *err,
		      size_t errlen);

/* CTL_EXIT_OK for a 2xx, else CTL_EXIT_FAILED. */
int ctl_exit_for(int status);

/* Percent-encode a path segment (a cluster name) into out. */
void ctl_pct_encode(const char *in, char *out, size_t len);

/* --- status.c ----------------------------------------------------------- */

#define CTL_RED    "31"
#define CTL_GREEN  "32"
#define CTL_YELLOW "33"
#define CTL_BOLD   "1"

/* Colour on stdout only for a terminal, without $NO_COLOR, TERM not dumb,
 * and never with --json. Called once, before any output. */
void ctl_color_init(bool json);

/* text padded to width (0: not padded), in colour code when colour is on. */
void ctl_paint(const char *code, const char *text, size_t width);

/* The colour of a STATE cell: red failed/stopped/unresponsive, green
 * accepting, yellow otherwise; NULL for NULL. */
const char *ctl_state_color(const char *state);

/* secs as "45s", "3m", "2h5m", "1d4h". */
void ctl_fmt_age(long long secs, char *buf, size_t len);

/* `status [NAME]` from a reply of GET /admin/clusters[/NAME] (one: a single
 * cluster object). Returns the exit code. */
int ctl_cmd_status(const struct ctl_reply *r, bool one);

/* The API path of `status [NAME|GLOB] [--state S] [--sort KEY]`: one
 * cluster (*one set) for a plain NAME without filters, else the list with
 * its query (name=GLOB, state, sort). */
void ctl_status_path(const struct ctl_opts *o, const char *name, char *path, size_t len,
		     bool *one);

/* --state / --sort values ferryd knows: 0, or -1 (reported; usage). */
int ctl_status_check(const struct ctl_opts *o);

/* --- connections.c ------------------------------------------------------ */

/* `connections NAME`: the table (every page, or --limit rows), or with
 * --json one page of the API unchanged. Returns the exit code. */
int ctl_connections(const struct ctl_opts *o, const char *name);

/* --- top.c -------------------------------------------------------------- */

/* status -w (top false; name: one cluster or NULL) and top: a frame every
 * second until q, Ctrl-C, SIGTERM or o->count frames. Returns the exit code
 * of the last frame. */
int ctl_live(const struct ctl_opts *opts, bool top, const char *name);

#endif
