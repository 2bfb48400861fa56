/*
 * ferryctl — command-line client of the ferryd admin API (docs/design.md §8).
 *
 * One blocking HTTP/1.1 request per run, over the control socket (default
 * FERRY_DEFAULT_SOCKET, overridden by $FERRY_SOCKET, or -s) or over the
 * TCP admin listener (-a HOST:PORT), with a 30 s budget for the whole
 * exchange. A control socket that refuses the connect or does not exist yet
 * is retried for up to 1 s (ctlconn.h) before giving up with exit 3. --json
 * prints the response body unchanged; otherwise the JSON is rendered for
 * people (a table for status: status.c). `status -w` and `top` are live
 * views (top.c).
 *
 * This file: options, the command table (command -> method and API path),
 * running one command, and the rendering of every one-shot reply but
 * status's. Exit codes and what the files share: ctl_priv.h.
 *
 * Links jansson, OpenSSL and, of common/, the HTTP message code (http.c),
 * the bounded file read (file.c) and TLS contexts from PEM bytes
 * (tlsctx.c); none of the supervisor's code.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/file.h"
#include "common/http.h"
#include "ctl_priv.h"
#include "ctlconn.h"

static void
ctl_usage(FILE *f)
{
	fprintf(f,
	    "usage: ferryctl [-s SOCKET | -a [https://]HOST:PORT] [--json] COMMAND [ARGS]\n"
	    "\n"
	    "commands:\n"
	    "  status [NAME|GLOB] table of clusters, failed and unresponsive first ('team-*')\n"
	    "  health             is ferryd running\n"
	    "  ready              is ferryd serving per its startup_policy (exit 1 if not)\n"
	    "  validate [FILE]    validate FILE, or ferryd's own config file without FILE\n"
	    "  reload [FILE]      apply FILE (or ferryd's own file) and wait for the outcome\n"
	    "  config             configuration status (version, last reload, validation)\n"
	    "  drain NAME         drain one cluster: finish what it owes, release its sockets\n"
	    "  restart NAME       start a fresh generation (retry from failed, or roll)\n"
	    "  upgrade [--wait]   run ferryd's own file again in its place, keeping every connection\n"
	    "  metrics            Prometheus metrics\n"
	    "  top                live per-cluster connections, requests/s, bytes/s (q quits)\n"
	    "  connections NAME   who is connected: address, client id, software, SASL name\n"
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
	    "      --state S[,S...]      status: only clusters in these states (initializing,\n"
	    "                            accepting, draining, failed, stopped, unresponsive)\n"
	    "      --sort KEY            status: file (default), name, connections, state, since\n"
	    "      --wait                upgrade: wait until the old ferryd's connections moved\n"
	    "  -n, --count N             -w and top: stop after N refreshes\n"
	    "      --client-id ID        connections: only those with this client id\n"
	    "      --principal NAME      connections: only those asserting this SASL name\n"
	    "      --limit N             connections: the first N (--json: one page of N)\n"
	    "      --offset N            connections: from the Nth\n"
	    "  -h, --help                show this help\n"
	    "  -V, --version             show the version\n"
	    "\n"
	    "colour only on a terminal, never with $NO_COLOR set\n"
	    "exit codes: 0 ok, 1 operation failed or rejected (401: token or certificate\n"
	    "  missing or wrong), 2 usage, 3 cannot reach ferryd (TLS failures included)\n"
	    "  (-w and top: the code of the last refresh)\n",
	    FERRY_DEFAULT_SOCKET);
}

/* --- commands ----------------------------------------------------------- */

static int
ctl_cmd_health(const struct ctl_reply *r)
{
	json_t *j;
	char up[32];

	if (r->status != 200)
		return ctl_http_failure(r);
	if ((j = ctl_body_json(r)) == NULL)
		return CTL_EXIT_UNREACHABLE;
	if (!json_is_string(json_object_get(j, "status"))) {
		ctl_err("garbled reply from ferryd: no status");
		json_decref(j);
		return CTL_EXIT_UNREACHABLE;
	}
	ctl_fmt_age(json_integer_value(json_object_get(j, "uptimeSeconds")), up, sizeof up);
	printf("%s (version %s, build %.12s, pid %lld, uptime %s, %lld clusters)\n",
	    json_string_value(json_object_get(j, "status")) ?
	    json_string_value(json_object_get(j, "status")) : "?",
	    json_string_value(json_object_get(j, "version")) ?
	    json_string_value(json_object_get(j, "version")) : "?",
	    json_string_value(json_object_get(j, "buildId")) ?: "?",
	    (long long)json_integer_value(json_object_get(j, "pid")),
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
	if (!json_is_boolean(json_object_get(j, "ready"))) {
		ctl_err("garbled reply from ferryd: no ready");
		json_decref(j);
		return CTL_EXIT_UNREACHABLE;
	}
	ready = json_is_true(json_object_get(j, "ready"));
	policy = json_string_value(json_object_get(j, "startupPolicy"));
	printf("%s (startup_policy %s)\n", ready ? "ready" : "not ready",
	    policy ? policy : "?");
	json_object_foreach(json_object_get(j, "clusters"), name, v)
		printf("  %s: %s\n", name, json_string_value(v) ? json_string_value(v) : "?");
	json_decref(j);
	return ready && r->status == 200 ? CTL_EXIT_OK : CTL_EXIT_FAILED;
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

/* The "errors" list, one per line; an error naming the posted text
 * "<request>" names file instead. */
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
ctl_cmd_validate(const struct ctl_reply *r, const char *file)
{
	const char *version;
	json_t *j;

	if (r->status != 200 && r->status != 400)
		return ctl_http_failure(r);
	if ((j = ctl_body_json(r)) == NULL)
		return CTL_EXIT_UNREACHABLE;
	if (!json_is_boolean(json_object_get(j, "valid"))) {
		ctl_err("garbled reply from ferryd: no valid");
		json_decref(j);
		return CTL_EXIT_UNREACHABLE;
	}
	if (json_is_true(json_object_get(j, "valid"))) {
		version = json_string_value(json_object_get(j, "configVersion"));
		printf("valid: %s (%lld clusters)\n", version ? version : "?",
		    (long long)json_integer_value(json_object_get(j, "clusters")));
		json_decref(j);
		return CTL_EXIT_OK;
	}
	printf("invalid configuration:\n");
	ctl_print_errors(j, file);
	json_decref(j);
	return CTL_EXIT_FAILED;
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
		/* a plain API error (503 stopping), or garbage */
		return r->status >= 400 ? ctl_http_failure(r) :
		    (ctl_err("garbled reply from ferryd: no status"), CTL_EXIT_UNREACHABLE);
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
	if (!json_is_string(json_object_get(j, "currentConfigVersion"))) {
		ctl_err("garbled reply from ferryd: no currentConfigVersion");
		json_decref(j);
		return CTL_EXIT_UNREACHABLE;
	}
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
	if (json_is_true(json_object_get(j, "upgradeInProgress")))
		printf("upgrade running since %s (%s)\n",
		    json_string_value(json_object_get(json_object_get(j, "upgrade"), "since")) ?: "?",
		    json_string_value(json_object_get(json_object_get(j, "upgrade"), "phase")) ?: "?");
	last = json_object_get(j, "lastUpgradeAttempt");
	if (json_is_object(last)) {
		printf("last upgrade:     %s at %s (%s, %s -> %s, %lld ms)\n",
		    json_string_value(json_object_get(last, "status")) ?: "?",
		    json_string_value(json_object_get(last, "timestamp")) ?: "?",
		    json_string_value(json_object_get(last, "phase")) ?: "?",
		    json_string_value(json_object_get(last, "fromVersion")) ?: "?",
		    json_string_value(json_object_get(last, "toVersion")) ?: "?",
		    (long long)json_integer_value(json_object_get(last, "durationMs")));
		ctl_print_errors(last, NULL);
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

	if (r->status >= 200 && r->status < 300 &&
	    !json_is_string(json_object_get(j, "name"))) {
		ctl_err("garbled reply from ferryd (HTTP %d): no cluster named", r->status);
		json_decref(j);
		return CTL_EXIT_UNREACHABLE;
	}
	if (r->status >= 300 && err == NULL) {
		json_decref(j);
		return ctl_http_failure(r);
	}
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

/* --- upgrade ----------------------------------------------------------- */

static const char *
ctl_jstr(const json_t *j, const char *key)
{
	const char *v = json_string_value(json_object_get(j, key));

	return v ? v : "?";
}

/* The outcome of POST /admin/upgrade (answered by the old ferryd at the
 * commit or the rollback). */
static int
ctl_cmd_upgrade(const struct ctl_reply *r)
{
	json_t *j, *c;
	size_t i;

	if ((j = ctl_body_json(r)) == NULL)
		return CTL_EXIT_UNREACHABLE;
	if ((r->status == 409 || r->status == 400 || r->status == 503) &&
	    json_is_string(json_object_get(j, "error"))) {
		printf("upgrade refused: %s\n", ctl_jstr(j, "error"));
		json_decref(j);
		return CTL_EXIT_FAILED;
	}
	if (!json_is_string(json_object_get(j, "status"))) {
		json_decref(j);
		return ctl_http_failure(r);
	}
	if (json_is_true(json_object_get(j, "success"))) {
		printf("upgraded ferryd %s (build %.12s) pid %lld -> %s (build %.12s) pid %lld "
		    "in %lld ms\n", ctl_jstr(j, "fromVersion"), ctl_jstr(j, "fromBuildId"),
		    (long long)json_integer_value(json_object_get(j, "previousPid")),
		    ctl_jstr(j, "toVersion"), ctl_jstr(j, "toBuildId"),
		    (long long)json_integer_value(json_object_get(j, "pid")),
		    (long long)json_integer_value(json_object_get(j, "durationMs")));
		json_array_foreach(json_object_get(j, "clusters"), i, c) {
			json_t *from = json_object_get(c, "fromGeneration");
			json_t *to = json_object_get(c, "toGeneration");

			if (json_is_integer(from) && json_is_integer(to))
				printf("  %s: generation %lld -> %lld\n", ctl_jstr(c, "name"),
				    (long long)json_integer_value(from), (long long)json_integer_value(to));
			else
				printf("  %s: not serving, carried over as it is\n", ctl_jstr(c, "name"));
		}
		json_decref(j);
		return CTL_EXIT_OK;
	}
	printf("upgrade %s during %s, rolled back; ferryd %s pid %lld still serving\n",
	    ctl_jstr(j, "status"), ctl_jstr(j, "phase"), ctl_jstr(j, "fromVersion"),
	    (long long)json_integer_value(json_object_get(j, "previousPid")));
	ctl_print_errors(j, NULL);
	json_decref(j);
	return CTL_EXIT_FAILED;
}

/* A number of GET /admin/config/status, or def. */
static long
ctl_status_ms(const struct ctl_opts *o, const char *key, long def)
{
	struct ctl_reply r;
	char err[256];
	long t = def;

	if (ctl_request(o, "GET", "/admin/config/status", NULL, 0, &r, err, sizeof err) == 0 &&
	    r.status == 200) {
		json_t *j = json_loadb(r.body, r.body_len, 0, NULL);
		json_t *v = json_object_get(j, key);

		if (json_is_integer(v) && json_integer_value(v) + 10000 > t)
			t = (long)json_integer_value(v) + 10000;
		json_decref(j);
	}
	free(r.raw);
	return t;
}

/* upgrade --wait: the new ferryd reports the old one's end (its connections
 * handed over, closed at request boundaries, forced) in lastUpgradeAttempt;
 * ask it until then. */
static int
ctl_upgrade_wait(const struct ctl_opts *o)
{
	long budget = ctl_status_ms(o, "upgradeTailTimeoutMs", CTL_TIMEOUT_MS);
	struct timespec ts = { 0, 200 * 1000000L };
	char err[256];

	for (long waited = 0; waited < budget; waited += 200) {
		struct ctl_reply r;

		if (ctl_request(o, "GET", "/admin/config/status", NULL, 0, &r, err, sizeof err) == 0 &&
		    r.status == 200) {
			json_t *j = json_loadb(r.body, r.body_len, 0, NULL);
			json_t *last = json_object_get(j, "lastUpgradeAttempt");
			json_t *conns = json_object_get(last, "connections");

			if (!json_is_true(json_object_get(j, "upgradeInProgress")) &&
			    json_is_string(json_object_get(last, "completedAt"))) {
				if (o->json)
					fwrite(r.body, 1, r.body_len, stdout);
				else if (json_is_object(conns))
					printf("  connections: %lld handed over, %lld closed at request "
					    "boundaries, %lld forced\n",
					    (long long)json_integer_value(json_object_get(conns, "handedOver")),
					    (long long)json_integer_value(json_object_get(conns, "closed")),
					    (long long)json_integer_value(json_object_get(conns, "forced")));
				if (!o->json)
					printf("  old ferryd gone at %s\n", ctl_jstr(last, "completedAt"));
				json_decref(j);
				free(r.raw);
				return CTL_EXIT_OK;
			}
			json_decref(j);
		}
		free(r.raw);
		nanosleep(&ts, NULL);
	}
	ctl_err("the old ferryd still hands connections over after %lds; `ferryctl config` "
	    "shows the outcome", budget / 1000);
	return CTL_EXIT_FAILED;
}

/* The request body for `validate FILE` / `reload FILE`. An empty body means
 * "ferryd's own file" to the API, so an empty FILE is refused rather than
 * silently acting on something other than what was asked for. */
static int
ctl_file_body(const char *file, const char *verb, char **body, size_t *len)
{
	char err[1200];

	/* the one bounded, regular-files-only read (common/file.h), with the
	 * limit ferryd applies to a config file and a posted one */
	if ((*body = file_read_all(file, HTTP_MAX_BODY, len, err, sizeof err)) == NULL) {
		ctl_err("%s", err);
		return -1;
	}
	if (*len == 0) {
		ctl_err("%s is empty (an empty request would %s ferryd's own config file)",
		    file, verb);
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
	CTL_CMD_UPGRADE,
	CTL_CMD_CONNECTIONS,
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
	{ "upgrade", CTL_CMD_UPGRADE, 0, 0, "POST", "/admin/upgrade", NULL, NULL, false },
	{ "connections", CTL_CMD_CONNECTIONS, 1, 1, "GET", NULL, "/admin/clusters/", "/connections",
	  false },  /* connections.c */
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

/* Below the status table: which ferryd answered (an upgrade changes it). */
static void
ctl_status_footer(const struct ctl_opts *o)
{
	struct ctl_reply r;
	char err[256];

	if (ctl_request(o, "GET", "/admin/health", NULL, 0, &r, err, sizeof err) == 0 &&
	    r.status == 200) {
		json_t *j = json_loadb(r.body, r.body_len, 0, NULL);

		printf("\nferryd %s (build %.12s) pid %lld\n", ctl_jstr(j, "version"),
		    ctl_jstr(j, "buildId"), (long long)json_integer_value(json_object_get(j, "pid")));
		json_decref(j);
	}
	free(r.raw);
}

static int
ctl_run(const struct ctl_opts *o, const struct ctl_command_def *def, const char *arg)
{
	struct ctl_reply reply;
	char path[2400], enc[768], err[512];
	const char *method = def->method;
	char *body = NULL;
	size_t body_len = 0;
	bool one = arg != NULL;
	int rc;

	if (def->cmd == CTL_CMD_STATUS) {
		ctl_status_path(o, arg, path, sizeof path, &one);
	} else if (def->arg_prefix != NULL && arg != NULL) {
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
	if (def->cmd == CTL_CMD_UPGRADE)
		ro.timeout_ms = ctl_status_ms(o, "upgradeTimeoutMs", CTL_TIMEOUT_MS);
	rc = ctl_request(&ro, method, path, body, body_len, &reply, err, sizeof err);
	free(body);
	if (rc == -1 && (def->cmd == CTL_CMD_RELOAD || def->cmd == CTL_CMD_UPGRADE) && reply.sent &&
	    reply.timed_out) {
		/* ferryd took the request but has not answered in the time a
		 * reload can take: it is not unreachable, the reload runs on */
		ctl_err("%s still in progress after %lds (%s); `ferryctl config` shows its "
		    "outcome", def->name, ro.timeout_ms / 1000, err);
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
		if (def->cmd == CTL_CMD_METRICS) {
			if (rc != CTL_EXIT_OK)
				rc = ctl_http_failure(&reply);
			else if (!ctl_metrics_ok(reply.body, reply.body_len))
				rc = CTL_EXIT_UNREACHABLE;
		} else {
			/* every answer of ferryd's API is a JSON object */
			json_t *j = json_loadb(reply.body, reply.body_len, 0, NULL);
			if (!json_is_object(j)) {
				ctl_err("garbled reply from ferryd (HTTP %d): not a JSON object",
				    reply.status);
				rc = CTL_EXIT_UNREACHABLE;
			}
			json_decref(j);
		}
	} else {
		switch (def->cmd) {
		case CTL_CMD_STATUS:
			rc = ctl_cmd_status(&reply, one);
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
			break;  /* ctl_live(), top.c */
		case CTL_CMD_UPGRADE:
			rc = ctl_cmd_upgrade(&reply);
			break;
		case CTL_CMD_CONNECTIONS:
			break;  /* ctl_connections(), connections.c */
		}
	}
	if (def->cmd == CTL_CMD_UPGRADE && o->wait && rc == CTL_EXIT_OK && reply.status == 200)
		rc = ctl_upgrade_wait(o);
	if (def->cmd == CTL_CMD_STATUS && !o->json && rc == CTL_EXIT_OK)
		ctl_status_footer(o);
	free(reply.raw);
	if (fflush(stdout) == EOF && rc == CTL_EXIT_OK)
		rc = CTL_EXIT_FAILED;
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
		{ "state", required_argument, NULL, 256 },
		{ "sort", required_argument, NULL, 257 },
		{ "wait", no_argument, NULL, 'W' },
		/* connections */
		{ "client-id", required_argument, NULL, 'I' },
		{ "principal", required_argument, NULL, 'P' },
		{ "limit", required_argument, NULL, 'L' },
		{ "offset", required_argument, NULL, 'O' },
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
	long n;
	bool conn_opts = false;

	while ((ch = getopt_long(argc, argv, "s:a:jhVwn:T:C:E:K:", longopts, NULL)) != -1) {
		/* (the connections options are long ones only) */
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
		case 256:
			o.state = optarg;
			break;
		case 257:
			o.sort = optarg;
			break;
		case 'w':
			o.watch = true;
			break;
		case 'W':
			o.wait = true;
			break;
		case 'n':
			errno = 0;
			o.count = strtol(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || end == optarg || o.count < 1) {
				ctl_err("bad count '%s' (want a positive number)", optarg);
				return CTL_EXIT_USAGE;
			}
			break;
		case 'I':
			o.conn_client_id = optarg;
			conn_opts = true;
			break;
		case 'P':
			o.conn_principal = optarg;
			conn_opts = true;
			break;
		case 'L':
		case 'O':
			errno = 0;
			n = strtol(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || end == optarg || n < (ch == 'L') ||
			    n > 100000000) {
				ctl_err("bad %s '%s' (want a %s number)", ch == 'L' ? "limit" : "offset",
				    optarg, ch == 'L' ? "positive" : "non-negative");
				return CTL_EXIT_USAGE;
			}
			if (ch == 'L')
				o.conn_limit = n;
			else
				o.conn_offset = n;
			conn_opts = true;
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
	    def->cmd == CTL_CMD_RESTART || def->cmd == CTL_CMD_CONNECTIONS) && nargs == 1 &&
	    argv[optind + 1][0] == '\0') {
		ctl_err("empty cluster name");
		return CTL_EXIT_USAGE;
	}
	if (o.wait && def->cmd != CTL_CMD_UPGRADE) {
		ctl_err("--wait only applies to upgrade");
		return CTL_EXIT_USAGE;
	}
	if (o.watch && def->cmd != CTL_CMD_STATUS) {
		ctl_err("-w only applies to status");
		return CTL_EXIT_USAGE;
	}
	if ((o.state || o.sort) && def->cmd != CTL_CMD_STATUS) {
		ctl_err("--state and --sort only apply to status");
		return CTL_EXIT_USAGE;
	}
	if (ctl_status_check(&o) == -1)
		return CTL_EXIT_USAGE;
	if (o.count && !o.watch && def->cmd != CTL_CMD_TOP) {
		ctl_err("-n only applies to status -w and top");
		return CTL_EXIT_USAGE;
	}
	if (conn_opts && def->cmd != CTL_CMD_CONNECTIONS) {
		ctl_err("--client-id, --principal, --limit and --offset only apply to connections");
		return CTL_EXIT_USAGE;
	}
	ctl_color_init(o.json);
	if (def->cmd == CTL_CMD_CONNECTIONS)
		return ctl_connections(&o, argv[optind + 1]);
	if (o.watch || def->cmd == CTL_CMD_TOP)
		return ctl_live(&o, def->cmd == CTL_CMD_TOP, nargs == 1 ? argv[optind + 1] : NULL);
	return ctl_run(&o, def, nargs == 1 ? argv[optind + 1] : NULL);
}

