/*
 * adminproto — the typed messages between ferryd (the supervisor, root) and
 * its admin process (ferry-admin, unprivileged), docs/design.md §2 and §12.
 *
 * The admin process accepts on the control socket and admin_listen, does
 * TLS, parses HTTP, decides access and enforces the limits; what reaches
 * the supervisor is one IPC_ADMIN_REQUEST per routed request: a route id
 * (never a path), a cluster name that follows the name rule, a config text
 * as a sealed memfd, and who asked. The supervisor answers every request
 * once with IPC_ADMIN_ANSWER: an HTTP status, a content type id and the
 * body (inline up to ADMINPROTO_INLINE_MAX, else a sealed memfd). Both ends
 * are built from this file, so the layouts are the same; the receiving end
 * still checks every field (adminproto_*_check, pure) and treats a message
 * that fails as a fault of the peer: the supervisor kills an admin process
 * that sends one, the admin process exits on a bad setup.
 *
 * The route table lives here because both ends need it: the admin process
 * matches paths against its patterns, the supervisor rebuilds the path of a
 * request for its log lines. Route ids are the wire values.
 *
 * Return conventions: checks return 0, or -1 with a reason in err.
 */
#ifndef FERRY_SUPERVISOR_ADMINPROTO_H
#define FERRY_SUPERVISOR_ADMINPROTO_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "common/sandbox.h"
#include "common/lifecycle.h"

#define ADMINPROTO_VERSION      1
/* Requests the admin process may have sent and not seen answered; the
 * supervisor kills one that has more outstanding. */
#define ADMINPROTO_MAX_INFLIGHT 64
/* Answer bodies up to this size travel inside the message. */
#define ADMINPROTO_INLINE_MAX   (32u * 1024)
/* The largest answer body (a memfd): /metrics of thousands of clusters. */
#define ADMINPROTO_BODY_MAX     (256u * 1024 * 1024)
/* A config text refused by the admin process's own parse: its errors. */
#define ADMINPROTO_MAX_ERRORS   64
#define ADMINPROTO_ERROR_MAX    512     /* bytes of one error text, NUL included */
#define ADMINPROTO_VERSION_LEN  72      /* "sha256:" + 64 hex digits + NUL */
#define ADMINPROTO_DIGEST_LEN   32      /* SHA-256 of the bearer token */

/* ---- routes ---------------------------------------------------------------- */

enum adminproto_route {
	ADMINPROTO_R_NONE = 0,
	ADMINPROTO_R_HEALTH,
	ADMINPROTO_R_READY,
	ADMINPROTO_R_CLUSTERS,
	ADMINPROTO_R_CLUSTER,
	ADMINPROTO_R_VALIDATE,
	ADMINPROTO_R_RELOAD,
	ADMINPROTO_R_CONFIG_STATUS,
	ADMINPROTO_R_DRAIN,
	ADMINPROTO_R_RESTART,
	ADMINPROTO_R_METRICS,
	ADMINPROTO_R_PAGE,
	ADMINPROTO_R_CONNECTIONS,
	ADMINPROTO_R_UPGRADE,
	ADMINPROTO_R_COUNT,
};

#define ADMINPROTO_RF_NAME    0x1u  /* '*' in the pattern: a cluster name */
#define ADMINPROTO_RF_BODY    0x2u  /* takes the request body (a config text) */
#define ADMINPROTO_RF_MUTATES 0x4u  /* POST: the supervisor logs who asked */
#define ADMINPROTO_RF_LOCAL   0x8u  /* answered by the admin process itself */
#define ADMINPROTO_RF_WAITS   0x10u /* may be answered later (reload, restart, upgrade) */
#define ADMINPROTO_RF_QUERY   0x20u /* takes the connections listing's query (connquery.h) */
#define ADMINPROTO_RF_LIST    0x40u /* takes the cluster list's query (clusterquery.h) */

struct adminproto_route_def {
	enum adminproto_route id;
	const char *method;
	const char *pattern;            /* '*' matches one non-empty path segment */
	unsigned flags;                 /* ADMINPROTO_RF_* */
};

/* The routes of docs/design.md §7 in matching order (the first whose method
 * and path match answers), and their number. */
extern const struct adminproto_route_def adminproto_routes[];
extern const size_t adminproto_n_routes;

/* The definition of route r (the first row with that id), or NULL. */
const struct adminproto_route_def *adminproto_route(enum adminproto_route r);
const char *adminproto_route_str(enum adminproto_route r);
/* A request's path: the route's pattern with '*' replaced by name. */
void adminproto_route_path(enum adminproto_route r, const char *name, char *buf, size_t len);

/* ---- who asked ---------------------------------------------------------------- */

/* The access decision taken for a request (supervisor/adminauth.h decides). */
enum adminproto_auth {
	ADMINPROTO_AUTH_LOCAL = 0,      /* control socket: its permissions decide */
	ADMINPROTO_AUTH_OPEN_PATH,      /* admin_open_paths */
	ADMINPROTO_AUTH_UNPROTECTED,    /* admin_listen has no credential configured */
	ADMINPROTO_AUTH_TOKEN,          /* the right bearer token */
	ADMINPROTO_AUTH_CERT,           /* a verified client certificate */
	ADMINPROTO_AUTH_MISSING,        /* refused: no credential */
	ADMINPROTO_AUTH_MALFORMED,      /* refused: Authorization is not "Bearer TOKEN" */
	ADMINPROTO_AUTH_WRONG,          /* refused: a token that does not match */
};

const char *adminproto_auth_str(enum adminproto_auth a);

static inline bool
adminproto_auth_allowed(enum adminproto_auth a)
{
	return a <= ADMINPROTO_AUTH_CERT;
}

enum adminproto_listener {
	ADMINPROTO_L_CONTROL = 0,       /* the control socket (Unix) */
	ADMINPROTO_L_HTTP,              /* admin_listen (TCP, HTTP or HTTPS) */
};

/* "control" / "http", as the log lines name listeners. */
const char *adminproto_listener_str(enum adminproto_listener l);

struct adminproto_caller {
	uint32_t listener;              /* enum adminproto_listener */
	uint32_t auth;                  /* enum adminproto_auth, an allowed one */
	uint32_t have_cred;             /* control socket: SO_PEERCRED answered */
	uint32_t uid, gid;
	int32_t pid;
	char addr[64];                  /* admin_listen: "ADDR:PORT" / "[ADDR]:PORT" */
	char subject[256];              /* a verified client certificate's subject, or "" */
};

/* The caller as logfmt fields: "uid=U gid=G pid=P" on the control socket,
 * "peer=ADDR" (and subject="...") on admin_listen; strings made safe for a
 * quoted logfmt value. */
void adminproto_caller_fields(const struct adminproto_caller *c, char *buf, size_t len);

/* A client-supplied string made safe for a quoted logfmt value: control
 * bytes, quotes, backslashes and non-ASCII become '?'. out is always
 * NUL-terminated. */
void adminproto_sanitize(const char *in, char *out, size_t len);

/* ---- messages -------------------------------------------------------------------- */

#define ADMINPROTO_REQ_BODY     0x1u  /* the body is fds[0], body_len bytes */
#define ADMINPROTO_REQ_REJECTED 0x2u  /* the admin process's own parse refused the
                                         body: version names it, n_errors texts follow */
#define ADMINPROTO_REQ_HAD_BODY 0x4u  /* a route that takes no body was sent one
                                         (not passed on; /admin/upgrade refuses it) */

/* The connections listing's query (GET /admin/clusters/NAME/connections),
 * read from the query string by the admin process (connquery.h). */
#define ADMINPROTO_CONN_LIMIT_DEFAULT 100
#define ADMINPROTO_CONN_LIMIT_MAX     1000
#define ADMINPROTO_CONN_OFFSET_MAX    100000000
#define ADMINPROTO_CONN_VALUE_MAX     256   /* a filter value, NUL included */

struct adminproto_conn_query {
	uint32_t limit;                 /* 1..ADMINPROTO_CONN_LIMIT_MAX */
	uint32_t offset;                /* 0..ADMINPROTO_CONN_OFFSET_MAX */
	uint32_t by_client_id;          /* 1: only client_id; 0: no filter ("") */
	uint32_t by_principal;          /* 1: only principal; 0: no filter ("") */
	char client_id[ADMINPROTO_CONN_VALUE_MAX];
	char principal[ADMINPROTO_CONN_VALUE_MAX];
};

/* The cluster list's query (GET /admin/clusters), read from the query
 * string by the admin process (clusterquery.h), applied by the supervisor
 * (clusterlist.h). States are bits: 1 << enum lc_state (common/lifecycle.h)
 * and ADMINPROTO_LIST_UNRESPONSIVE. */
#define ADMINPROTO_LIST_UNRESPONSIVE LC_STATE_COUNT
#define ADMINPROTO_LIST_STATES_ALL   ((1u << (ADMINPROTO_LIST_UNRESPONSIVE + 1)) - 1)
#define ADMINPROTO_LIST_LIMIT_MAX    100000
#define ADMINPROTO_LIST_OFFSET_MAX   100000000
#define ADMINPROTO_LIST_NAMES_MAX    1024  /* name=GLOB[,GLOB...], NUL included */

enum adminproto_list_sort {
	ADMINPROTO_SORT_FILE = 0,       /* configuration order */
	ADMINPROTO_SORT_NAME,
	ADMINPROTO_SORT_CONNECTIONS,    /* most first */
	ADMINPROTO_SORT_STATE,          /* failed and unresponsive first, accepting last */
	ADMINPROTO_SORT_SINCE,          /* the most recent change first */
	ADMINPROTO_SORT_COUNT,
};

const char *adminproto_list_sort_str(enum adminproto_list_sort k);
/* The name of state bit i ("initializing" .. "stopped", "unresponsive"). */
const char *adminproto_list_state_str(unsigned i);

struct adminproto_list_query {
	uint32_t given;                 /* 1: a parameter was given (the answer adds
	                                   "matched" and "total"); 0: all else zero */
	uint32_t states;                /* bits within ADMINPROTO_LIST_STATES_ALL; 0 = any */
	uint32_t sort;                  /* enum adminproto_list_sort */
	uint32_t limit;                 /* 0: no limit, else 1..ADMINPROTO_LIST_LIMIT_MAX */
	uint32_t offset;                /* 0..ADMINPROTO_LIST_OFFSET_MAX */
	uint32_t pad;                   /* 0 */
	char names[ADMINPROTO_LIST_NAMES_MAX]; /* comma-separated non-empty globs,
	                                          zero-padded; "" = any name */
};

/* IPC_ADMIN_REQUEST, admin -> supervisor. Request ids grow strictly. */
struct adminproto_request {
	uint64_t id;
	uint32_t route;                 /* enum adminproto_route, never a LOCAL one */
	uint32_t flags;                 /* ADMINPROTO_REQ_* */
	uint32_t body_len;
	uint32_t n_errors;
	char name[CFG_NAME_MAX];        /* RF_NAME routes: the cluster; else "" */
	char version[ADMINPROTO_VERSION_LEN]; /* REJECTED: "sha256:<hex>" of the body */
	struct adminproto_caller caller;
	struct adminproto_conn_query query; /* RF_QUERY routes; else all zero */
	struct adminproto_list_query list;  /* RF_LIST routes; else all zero */
};

enum adminproto_ctype {
	ADMINPROTO_CT_JSON = 0,         /* application/json */
	ADMINPROTO_CT_PROMETHEUS,       /* text/plain; version=0.0.4 */
	ADMINPROTO_CT_COUNT,
};

/* The Content-Type header value of t. */
const char *adminproto_ctype_str(enum adminproto_ctype t);

#define ADMINPROTO_ANS_MEMFD 0x1u     /* the body is fds[0]; else inline after this */

/* IPC_ADMIN_ANSWER, supervisor -> admin. */
struct adminproto_answer {
	uint64_t id;                    /* the request's */
	uint32_t status;                /* HTTP status, 200..599 */
	uint32_t ctype;                 /* enum adminproto_ctype */
	uint32_t body_len;
	uint32_t flags;                 /* ADMINPROTO_ANS_* */
};

#define ADMINPROTO_SETUP_HTTP    0x1u /* an admin_listen listener follows the control socket's */
#define ADMINPROTO_SETUP_SANDBOX 0x2u /* sandbox = on: lock down before READY */

/* IPC_ADMIN_SETUP, supervisor -> admin, first: fds [counters block, control
 * socket listener (, admin_listen listener)]. */
struct adminproto_setup {
	uint32_t version;               /* ADMINPROTO_VERSION */
	uint32_t flags;                 /* ADMINPROTO_SETUP_* */
	uint32_t log_level;             /* enum log_level */
	uint32_t log_json;
};

#define ADMINPROTO_CREDS_TOKEN        0x1u
#define ADMINPROTO_CREDS_CLIENT_CERTS 0x2u  /* admin_tls_client_ca: ca_len bytes */
#define ADMINPROTO_CREDS_TLS          0x4u  /* HTTPS: cert_len + key_len bytes */

/* IPC_ADMIN_CREDS, supervisor -> admin, after SETUP and after every reload
 * that applied: admin_listen's credentials, then the PEM bytes of the
 * certificate, the key and the client CA, one after the other. The token
 * itself never leaves the supervisor, only its SHA-256. */
struct adminproto_creds {
	uint32_t version;
	uint32_t flags;                 /* ADMINPROTO_CREDS_* */
	uint8_t token_digest[ADMINPROTO_DIGEST_LEN];
	char open_paths[CFG_OPEN_PATHS_MAX];
	uint32_t cert_len, key_len, ca_len, pad;
};

/* IPC_ADMIN_LISTEN, supervisor -> admin: what to do with the listening
 * sockets (an upgrade hands them to another ferryd). */
enum adminproto_listen_state {
	ADMINPROTO_LISTEN_PAUSE = 0,    /* stop accepting; connections go on */
	ADMINPROTO_LISTEN_ACCEPT,       /* accept again */
	ADMINPROTO_LISTEN_CLOSE,        /* close them for good (another ferryd has them) */
};

struct adminproto_listen {
	uint32_t state;                 /* enum adminproto_listen_state */
	uint32_t pad;
};

/* Checked views of received messages; the pointers point into the payload. */
struct adminproto_request_view {
	struct adminproto_request rq;
	const char *errors[ADMINPROTO_MAX_ERRORS]; /* REJECTED: n_errors texts */
};

struct adminproto_creds_view {
	struct adminproto_creds c;
	const char *cert, *key, *ca;    /* into the payload; lengths in c */
};

int adminproto_request_check(const void *payload, size_t len, size_t nfds,
			     struct adminproto_request_view *out, char *err, size_t errlen);
int adminproto_answer_check(const void *payload, size_t len, size_t nfds,
			    struct adminproto_answer *out, char *err, size_t errlen);
int adminproto_setup_check(const void *payload, size_t len, size_t nfds,
			   struct adminproto_setup *out, char *err, size_t errlen);
int adminproto_creds_check(const void *payload, size_t len,
			   struct adminproto_creds_view *out, char *err, size_t errlen);
int adminproto_listen_check(const void *payload, size_t len, struct adminproto_listen *out,
			    char *err, size_t errlen);

/* The request stream of one admin process as the supervisor sees it: ids
 * must grow, and at most ADMINPROTO_MAX_INFLIGHT may be unanswered. */
struct adminproto_session {
	uint64_t last_id;
	unsigned outstanding;
};

/* A request arrived: 0, or -1 (id not above the last one, too many
 * outstanding) with a reason. */
int adminproto_session_accept(struct adminproto_session *s, uint64_t id, char *err,
			      size_t errlen);
/* One outstanding request was answered. */
void adminproto_session_done(struct adminproto_session *s);

/* ---- the counters block ------------------------------------------------------------ */

#define ADMINPROTO_COUNTERS_MAGIC 0x66657272796102ULL

/* Shared memory (common/shmblock.h) the supervisor creates once and hands
 * to every admin process, so the counts survive its restarts; the admin
 * process only adds, the supervisor reads them for /metrics. The sandbox
 * report is the running admin process's (the supervisor clears it before
 * each start): what is in force for /admin/health, the system call of a
 * violation for its exit reason. Only displayed, never trusted. */
struct adminproto_counters {
	uint64_t magic;
	_Atomic uint64_t refused[3];    /* missing, malformed, wrong-token */
	_Atomic uint64_t tls_failures;  /* admin HTTPS handshakes that failed */
	struct sandbox_report sandbox;
};

/* The block's counts in the order an upgrade carries them: refused
 * missing, malformed, wrong-token; TLS handshake failures. */
void adminproto_counters_read(const struct adminproto_counters *k, uint64_t out[4]);

/* The families ferry_admin_requests_refused_total{reason} and
 * ferry_admin_tls_handshake_failures_total of counts v (in the order of
 * adminproto_counters_read) in Prometheus text format into buf
 * (NUL-terminated); the length, or -1 when buf is too small. */
int adminproto_metrics_text(const uint64_t v[4], char *buf, size_t len);

/* Compact JSON and a newline (what every admin answer carries), malloc'd,
 * its length in *len; NULL when j is NULL or out of memory. */
char *adminproto_json_dump(const json_t *j, size_t *len);

/* {"error":"msg"} and a newline, malloc'd (its length in *len); msg not
 * valid UTF-8 is replaced by fallback. NULL when out of memory. */
char *adminproto_error_json(const char *msg, const char *fallback, size_t *len);

#endif
