/*
 * admin_api — the handlers of ferryd's admin API; see admin_api.h. The
 * admin process has decided who may call and checked the request's shape
 * before a handler runs; the handlers ask the model and the engine
 * (supervisor.h) and render with status.h.
 *
 * Nothing here blocks the loop: the only file read (validate with an empty
 * body) goes through file_read_all, which refuses anything but a bounded
 * regular file (file.h says what remains: a hung network file system).
 */
#include "supervisor/admin_api.h"

#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/file.h"
#include "common/log.h"
#include "common/tlsmat.h"
#include "common/units.h"
#include "supervisor/admincreds.h"
#include "supervisor/clusterlist.h"
#include "supervisor/connlist.h"
#include "supervisor/sandboxstatus.h"
#include "supervisor/status.h"
#include "supervisor/supervisor.h"

struct admin_api_req {
	struct sup *s;
	const struct adminproto_request *rq;
	const char *const *errors;      /* REJECTED: the admin process's parse errors */
	const char *body;
	size_t body_len;
	uint64_t waiter;
	const struct admin_api_proc *proc;
};

typedef enum admin_api_result (*admin_api_fn)(const struct admin_api_req *req,
					      struct admin_answer *out);

/* --- answers ------------------------------------------------------------ */

/* A JSON answer: the compact dump of body (reference stolen); a NULL body
 * (allocation failed) becomes a 500. */
static void
admin_answer_json(struct admin_answer *out, int status, json_t *body)
{
	static const char oom[] = "{\"error\":\"out of memory\"}\n";

	free(out->body);
	out->body = status_dump(body, &out->body_len);
	json_decref(body);
	out->status = status;
	out->ctype = ADMINPROTO_CT_JSON;
	if (out->body == NULL) {
		out->status = 500;
		out->body = strdup(oom);
		out->body_len = out->body ? sizeof oom - 1 : 0;
	}
}

static void admin_answer_error(struct admin_answer *out, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void
admin_answer_error(struct admin_answer *out, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	free(out->body);
	out->body = adminproto_error_json(msg, "error", &out->body_len);
	out->status = status;
	out->ctype = ADMINPROTO_CT_JSON;
	if (out->body == NULL)
		admin_answer_json(out, 500, NULL);
}

static void
admin_clock(struct sup *s)
{
	sup_set_clock(s, clock_mono_ms(), clock_wall_ms());
}

/* --- state: health, readiness, clusters, metrics -------------------------- */

static enum admin_api_result
admin_h_health(const struct admin_api_req *req, struct admin_answer *out)
{
	const struct admin_api_proc *p = req->proc;
	json_t *j = status_health_json(req->s, clock_wall_ms());
	char since[40] = "";

	/* the admin process that carries this answer, as the supervisor sees it */
	if (p->since_wall_ms != 0)
		clock_fmt_rfc3339(p->since_wall_ms, since, sizeof since);
	if (j != NULL && json_object_set_new(j, "admin", json_pack("{s:o, s:s, s:s?, s:I, s:s?}",
	    "pid", p->pid > 0 ? json_integer(p->pid) : json_null(), "state", p->state,
	    "since", since[0] ? since : NULL, "restarts", (json_int_t)p->restarts,
	    "lastExit", p->last_exit[0] ? p->last_exit : NULL)) == -1) {
		json_decref(j);
		j = NULL;
	}
	/* its sandbox, next to the supervisor's (first) and the workers' */
	json_t *procs = json_object_get(json_object_get(j, "sandbox"), "processes");
	if (procs != NULL && p->pid > 0 && json_array_insert_new(procs, 1,
	    sandboxstatus_admin_json(req->s, p->pid, p->sandbox)) == -1) {
		json_decref(j);
		j = NULL;
	}
	admin_answer_json(out, 200, j);
	return ADMIN_API_ANSWERED;
}

static enum admin_api_result
admin_h_ready(const struct admin_api_req *req, struct admin_answer *out)
{
	admin_answer_json(out, sup_ready(req->s) ? 200 : 503, status_ready_json(req->s));
	return ADMIN_API_ANSWERED;
}

static enum admin_api_result
admin_h_clusters(const struct admin_api_req *req, struct admin_answer *out)
{
	/* filtered, ordered and paged as the admin process read the query
	 * (clusterquery.h); failed and unresponsive clusters first */
	admin_answer_json(out, 200, clusterlist_json(req->s, &req->rq->list));
	return ADMIN_API_ANSWERED;
}

static enum admin_api_result
admin_h_cluster(const struct admin_api_req *req, struct admin_answer *out)
{
	struct sup_cluster *c = sup_find_cluster(req->s, req->rq->name);

	if (c == NULL)
		admin_answer_error(out, 404, "no cluster named '%s'", req->rq->name);
	else
		admin_answer_json(out, 200, status_cluster_json(c));
	return ADMIN_API_ANSWERED;
}

static enum admin_api_result
admin_h_metrics(const struct admin_api_req *req, struct admin_answer *out)
{
	const struct admin_api_proc *p = req->proc;
	char extra[2048];
	int n, m;
	char *body;

	out->body = status_metrics_text(req->s, &out->body_len);
	if (out->body == NULL) {
		admin_answer_error(out, 500, "out of memory");
		return ADMIN_API_ANSWERED;
	}
	/* the admin API's own counters (adminproto.h), with those an upgrade
	 * carried over, and its process */
	uint64_t counts[4];

	admin_api_counters(p->counters, req->s, counts);
	n = adminproto_metrics_text(counts, extra, sizeof extra);
	m = n < 0 ? -1 : snprintf(extra + n, sizeof extra - (size_t)n,
	    "# HELP ferry_admin_process_up Whether the admin process (ferry-admin) runs and "
	    "has answered its setup\n"
	    "# TYPE ferry_admin_process_up gauge\n"
	    "ferry_admin_process_up %d\n"
	    "# HELP ferry_admin_process_restarts_total Unexpected exits of the admin process, "
	    "each followed by a restart\n"
	    "# TYPE ferry_admin_process_restarts_total counter\n"
	    "ferry_admin_process_restarts_total %llu\n",
	    strcmp(p->state, "running") == 0, (unsigned long long)p->restarts);
	if (m > 0 && (size_t)m < sizeof extra - (size_t)n &&
	    (body = realloc(out->body, out->body_len + (size_t)(n + m) + 1)) != NULL) {
		memcpy(body + out->body_len, extra, (size_t)(n + m) + 1);
		out->body = body;
		out->body_len += (size_t)(n + m);
	}
	out->status = 200;
	out->ctype = ADMINPROTO_CT_PROMETHEUS;
	return ADMIN_API_ANSWERED;
}

/* --- validate --------------------------------------------------------- */

static json_t *
admin_invalid(const char *const *msgs, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++) {
		json_t *m = json_string(msgs[i]);

		/* posted text may not be UTF-8; keep the message visible */
		if (m == NULL)
			m = json_string("(error message is not valid UTF-8)");
		json_array_append_new(a, m);
	}
	if (n == 0)
		json_array_append_new(a, json_string("invalid configuration"));
	return json_pack("{s:b, s:o}", "valid", 0, "errors", a);
}

static enum admin_api_result
admin_h_validate(const struct admin_api_req *req, struct admin_answer *out)
{
	const char *name = "<request>", *text = req->body;
	size_t len = req->body_len;
	char *file = NULL, err[512], version[ADMINPROTO_VERSION_LEN];
	const char *msg = err;
	struct cfg_errors errs;
	struct cfg cfg;

	if (req->rq->flags & ADMINPROTO_REQ_REJECTED) {
		/* the admin process's parse refused the posted text */
		sup_record_validation(req->s, false, req->rq->version);
		admin_answer_json(out, 400, admin_invalid(req->errors, req->rq->n_errors));
		return ADMIN_API_ANSWERED;
	}
	if (len == 0) {
		name = req->s->config_path;
		if (name == NULL) {
			msg = "no configuration file to validate";
			admin_answer_json(out, 400, admin_invalid(&msg, 1));
			return ADMIN_API_ANSWERED;
		}
		if ((file = file_read_all(name, CFG_MAX_FILE_BYTES, &len, err, sizeof err)) == NULL) {
			admin_answer_json(out, 400, admin_invalid(&msg, 1));
			return ADMIN_API_ANSWERED;
		}
		text = file;
	}
	sup_hash_hex(text, len, version, sizeof version);
	cfg_errors_init(&errs);
	memset(&cfg, 0, sizeof cfg);
	if (cfg_parse_string(name, text, len, &cfg, &errs) == 0 &&
	    tlsmat_read(&cfg, &errs) == 0 && admincreds_check_cfg(&cfg, &errs) == 0) {
		sup_record_validation(req->s, true, version);
		admin_answer_json(out, 200, json_pack("{s:b, s:s, s:I}",
		    "valid", 1, "configVersion", version,
		    "clusters", (json_int_t)cfg.n_clusters));
	} else {
		sup_record_validation(req->s, false, version);
		admin_answer_json(out, 400, admin_invalid((const char *const *)errs.msg, errs.n));
	}
	cfg_free(&cfg);
	cfg_errors_free(&errs);
	free(file);
	return ADMIN_API_ANSWERED;
}

/* ---- reload, config status, drain, restart: the engine decides, we render ---- */

static int
admin_reload_http_status(const struct sup_reload_record *rec)
{
	switch (rec->status) {
	case SUP_RELOAD_SUCCESS:
	case SUP_RELOAD_UNCHANGED:
		return 200;
	case SUP_RELOAD_REJECTED:
		return 400;
	case SUP_RELOAD_FAILED:
		return rec->aborted ? 503 : 500;
	case SUP_RELOAD_NONE:
		break;
	}
	return 500;
}

void
admin_api_reload_answer(struct sup *s, const struct sup_reload_record *rec,
			struct admin_answer *out)
{
	admin_answer_json(out, admin_reload_http_status(rec), status_reload_reply_json(s, rec));
}

static int
admin_result_http_status(enum sup_result r)
{
	switch (r) {
	case SUP_OK:
		return 200;
	case SUP_DEFERRED:
		return 202;
	case SUP_NOT_FOUND:
		return 404;
	case SUP_CONFLICT:
		return 409;
	case SUP_UNAVAILABLE:
		return 503;
	case SUP_INVALID:
		return 400;
	case SUP_FAILED:
		break;
	}
	return 500;
}

void
admin_api_op_answer(const struct sup_answer *ans, struct admin_answer *out)
{
	int code = admin_result_http_status(ans->result);

	if (ans->result == SUP_NOT_FOUND || ans->result == SUP_CONFLICT ||
	    ans->result == SUP_UNAVAILABLE) {
		admin_answer_error(out, code, "%s", ans->error);
		return;
	}
	admin_answer_json(out, code, json_pack("{s:b, s:s, s:I, s:s, s:s?}",
	    "success", ans->result == SUP_OK || ans->result == SUP_DEFERRED, "name", ans->name,
	    "generation", (json_int_t)ans->generation, "state", lc_state_str(ans->state),
	    "error", ans->error[0] ? ans->error : NULL));
}

static enum admin_api_result
admin_h_reload(const struct admin_api_req *req, struct admin_answer *out)
{
	const struct sup_reload_record *rec = NULL;
	enum sup_result r;

	admin_clock(req->s);
	if (req->rq->flags & ADMINPROTO_REQ_REJECTED)
		r = sup_reload_reject(req->s, req->rq->version, req->errors, req->rq->n_errors,
		    "api", &rec);
	else
		r = sup_reload_start(req->s, req->body_len ? req->body : NULL, req->body_len, "api",
		    req->waiter, &rec);
	switch (r) {
	case SUP_DEFERRED:
		return ADMIN_API_DEFERRED;
	case SUP_CONFLICT: {
		char since[40];

		clock_fmt_rfc3339(rec->timestamp_ms, since, sizeof since);
		admin_answer_json(out, 409, json_pack("{s:b, s:s, s:s}", "success", 0,
		    "error", rec->errors && rec->errors[0] ? rec->errors[0] :
		    "a reload is in progress", "inProgressSince", since));
		return ADMIN_API_ANSWERED;
	}
	case SUP_UNAVAILABLE:
		admin_answer_error(out, 503, "ferryd is stopping");
		return ADMIN_API_ANSWERED;
	default:
		admin_api_reload_answer(req->s, rec, out);
		return ADMIN_API_ANSWERED;
	}
}

static enum admin_api_result
admin_h_config_status(const struct admin_api_req *req, struct admin_answer *out)
{
	admin_answer_json(out, 200, status_config_json(req->s));
	return ADMIN_API_ANSWERED;
}

static enum admin_api_result
admin_h_drain(const struct admin_api_req *req, struct admin_answer *out)
{
	struct sup_answer ans;

	admin_clock(req->s);
	sup_cluster_drain(req->s, req->rq->name, &ans);
	admin_api_op_answer(&ans, out);
	return ADMIN_API_ANSWERED;
}

static enum admin_api_result
admin_h_restart(const struct admin_api_req *req, struct admin_answer *out)
{
	struct sup_answer ans;

	admin_clock(req->s);
	if (sup_cluster_restart(req->s, req->rq->name, req->waiter, &ans) == SUP_DEFERRED)
		return ADMIN_API_DEFERRED;
	admin_api_op_answer(&ans, out);
	return ADMIN_API_ANSWERED;
}

/* ---- upgrade (docs/design.md §11), connections ----------------------------- */

void
admin_api_counters(const struct adminproto_counters *k, const struct sup *s, uint64_t out[4])
{
	uint64_t now[4] = { 0, 0, 0, 0 };

	if (k != NULL)
		adminproto_counters_read(k, now);
	for (int i = 0; i < 4; i++)
		out[i] = s->admin_carried[i] + now[i];
}

void
admin_api_upgrade_answer(struct sup *s, const struct sup_upgrade_record *rec,
			 struct admin_answer *out)
{
	admin_answer_json(out, rec->status == SUP_UPGRADE_SUCCESS ? 200 : 500,
	    status_upgrade_reply_json(s, rec));
}

/* The executable is never chosen by the API: ferryd runs the file it was
 * started from (a package upgrade replaces it), so a body is refused. */
static enum admin_api_result
admin_h_upgrade(const struct admin_api_req *req, struct admin_answer *out)
{
	const struct sup_upgrade_record *rec = NULL;
	char err[256], since[40];
	enum sup_result r;

	if (req->rq->flags & ADMINPROTO_REQ_HAD_BODY) {
		admin_answer_error(out, 400, "POST /admin/upgrade takes no body: ferryd always "
		    "executes the file it was started from (%s)",
		    req->s->exec_path ? req->s->exec_path : "unknown");
		return ADMIN_API_ANSWERED;
	}
	admin_clock(req->s);
	r = sup_upgrade_start(req->s, "api", req->waiter, &rec, err, sizeof err);
	switch (r) {
	case SUP_DEFERRED:
		return ADMIN_API_DEFERRED;
	case SUP_CONFLICT:
		clock_fmt_rfc3339(req->s->reload ? sup_reload_since(req->s) :
		    sup_upgrade_since(req->s) ? sup_upgrade_since(req->s) : clock_wall_ms(),
		    since, sizeof since);
		admin_answer_json(out, 409, json_pack("{s:b, s:s, s:s}", "success", 0,
		    "error", err, "inProgressSince", since));
		return ADMIN_API_ANSWERED;
	case SUP_UNAVAILABLE:
		admin_answer_error(out, 503, "%s", err);
		return ADMIN_API_ANSWERED;
	default:
		admin_api_upgrade_answer(req->s, rec, out);
		return ADMIN_API_ANSWERED;
	}
}

/* GET /admin/clusters/NAME/connections: the admin process read the query
 * string into req->rq->query (connquery.h). */
static enum admin_api_result
admin_h_connections(const struct admin_api_req *req, struct admin_answer *out)
{
	const struct sup_cluster *c = sup_find_cluster(req->s, req->rq->name);

	if (c == NULL)
		admin_answer_error(out, 404, "no cluster named '%s'", req->rq->name);
	else
		admin_answer_json(out, 200, connlist_json(c, &req->rq->query, clock_wall_ms()));
	return ADMIN_API_ANSWERED;
}

/* The handler of each route the supervisor answers (adminproto.c has the
 * paths); the status page is the admin process's own. */
static const admin_api_fn admin_api_handlers[ADMINPROTO_R_COUNT] = {
	[ADMINPROTO_R_HEALTH] = admin_h_health,
	[ADMINPROTO_R_READY] = admin_h_ready,
	[ADMINPROTO_R_CLUSTERS] = admin_h_clusters,
	[ADMINPROTO_R_CLUSTER] = admin_h_cluster,
	[ADMINPROTO_R_VALIDATE] = admin_h_validate,
	[ADMINPROTO_R_RELOAD] = admin_h_reload,
	[ADMINPROTO_R_CONFIG_STATUS] = admin_h_config_status,
	[ADMINPROTO_R_DRAIN] = admin_h_drain,
	[ADMINPROTO_R_RESTART] = admin_h_restart,
	[ADMINPROTO_R_METRICS] = admin_h_metrics,
	[ADMINPROTO_R_CONNECTIONS] = admin_h_connections,
	[ADMINPROTO_R_UPGRADE] = admin_h_upgrade,
};

/* Every POST changes something (reload, drain, restart) or records
 * something (validate): say who asked. */
static void
admin_api_log_call(const struct adminproto_request *rq)
{
	const struct adminproto_route_def *d = adminproto_route((enum adminproto_route)rq->route);
	char who[sizeof rq->caller.subject + 96], path[128];

	adminproto_caller_fields(&rq->caller, who, sizeof who);
	adminproto_route_path(d->id, rq->name, path, sizeof path);
	log_info("admin call", "listener=%s method=%s path=\"%s\" auth=%s %s",
	    adminproto_listener_str((enum adminproto_listener)rq->caller.listener), d->method,
	    path, adminproto_auth_str((enum adminproto_auth)rq->caller.auth), who);
}

enum admin_api_result
admin_api_handle(struct sup *s, const struct adminproto_request_view *v, const char *body,
		 size_t body_len, uint64_t waiter, const struct admin_api_proc *proc,
		 struct admin_answer *out)
{
	const struct adminproto_route_def *d = adminproto_route((enum adminproto_route)v->rq.route);
	struct admin_api_req req = {
		.s = s, .rq = &v->rq, .errors = v->errors, .body = body, .body_len = body_len,
		.waiter = waiter, .proc = proc,
	};
	admin_api_fn fn = v->rq.route < ADMINPROTO_R_COUNT ? admin_api_handlers[v->rq.route] : NULL;

	memset(out, 0, sizeof *out);
	if (d != NULL && (d->flags & ADMINPROTO_RF_MUTATES))
		admin_api_log_call(&v->rq);
	if (fn == NULL) {
		/* adminproto_request_check lets only these routes through */
		admin_answer_error(out, 404, "no such endpoint");
		return ADMIN_API_ANSWERED;
	}
	return fn(&req, out);
}
