/*
 * admin_api — the routes of ferryd's admin API and their handlers; see
 * admin_api.h. The HTTP server (admin_http.c) has decided who may call
 * before a handler runs; the handlers ask the model and the engine
 * (supervisor.h) and render with status.h.
 *
 * Nothing here blocks the loop: the only file read (admin_h_validate with
 * an empty body) goes through file_read_all, which refuses anything but a
 * bounded regular file (file.h says what remains: a hung network file
 * system).
 */
#include "supervisor/admin_api.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/file.h"
#include "common/log.h"
#include "common/tlsmat.h"
#include "common/units.h"
#include "supervisor/adminauth.h"
#include "supervisor/clusterlist.h"
#include "supervisor/connlist.h"
#include "supervisor/status.h"
#include "supervisor/statuspage.h"
#include "supervisor/supervisor.h"

static enum admin_handler_result admin_h_health(struct admin_request *, struct admin_response *);
static enum admin_handler_result admin_h_ready(struct admin_request *, struct admin_response *);
static enum admin_handler_result admin_h_clusters(struct admin_request *, struct admin_response *);
static enum admin_handler_result admin_h_cluster(struct admin_request *, struct admin_response *);
static enum admin_handler_result admin_h_validate(struct admin_request *, struct admin_response *);
static enum admin_handler_result admin_h_metrics(struct admin_request *, struct admin_response *);
static enum admin_handler_result admin_h_page(struct admin_request *, struct admin_response *);
static enum admin_handler_result admin_h_reload(struct admin_request *, struct admin_response *);
static enum admin_handler_result admin_h_config_status(struct admin_request *, struct admin_response *);
static enum admin_handler_result admin_h_drain(struct admin_request *, struct admin_response *);
static enum admin_handler_result admin_h_restart(struct admin_request *, struct admin_response *);
static enum admin_handler_result admin_h_upgrade(struct admin_request *, struct admin_response *);

/* The routes of docs/design.md §7, served in this order: the first whose
 * method and path match answers. */
static const struct admin_route admin_routes[] = {
	{ "GET", "/admin/health", admin_h_health },
	{ "GET", "/admin/ready", admin_h_ready },
	{ "GET", "/admin/clusters", admin_h_clusters },
	{ "GET", "/admin/clusters/*", admin_h_cluster },
	{ "POST", "/admin/config/validate", admin_h_validate },
	{ "POST", "/admin/config/reload", admin_h_reload },
	{ "GET", "/admin/config/status", admin_h_config_status },
	{ "POST", "/admin/clusters/*/drain", admin_h_drain },
	{ "POST", "/admin/clusters/*/restart", admin_h_restart },
	{ "POST", "/admin/upgrade", admin_h_upgrade },
	{ "GET", "/admin/clusters/*/connections", connlist_handler },  /* connlist.h */
	{ "GET", "/metrics", admin_h_metrics },
	{ "GET", "/", admin_h_page },         /* the HTML status page */
	{ "GET", "/admin/", admin_h_page },
};

/* --- state: health, readiness, clusters, metrics, the status page --------- */

static enum admin_handler_result
admin_h_health(struct admin_request *req, struct admin_response *resp)
{
	admin_response_json(resp, 200, status_health_json(req->sup, clock_wall_ms()));
	return ADMIN_RESPOND;
}

static enum admin_handler_result
admin_h_ready(struct admin_request *req, struct admin_response *resp)
{
	admin_response_json(resp, sup_ready(req->sup) ? 200 : 503, status_ready_json(req->sup));
	return ADMIN_RESPOND;
}

static enum admin_handler_result
admin_h_clusters(struct admin_request *req, struct admin_response *resp)
{
	struct clusterlist l;
	char err[256];

	/* filter, order and page (clusterlist.h); failed and unresponsive
	 * clusters first */
	if (clusterlist_parse(req->http->query, &l, err, sizeof err) == -1) {
		admin_response_error(resp, 400, "%s", err);
		return ADMIN_RESPOND;
	}
	admin_response_json(resp, 200, clusterlist_json(req->sup, &l));
	clusterlist_free(&l);
	return ADMIN_RESPOND;
}

static enum admin_handler_result
admin_h_cluster(struct admin_request *req, struct admin_response *resp)
{
	struct sup_cluster *c = sup_find_cluster(req->sup, req->param);

	if (c == NULL)
		admin_response_error(resp, 404, "no cluster named '%s'", req->param);
	else
		admin_response_json(resp, 200, status_cluster_json(c));
	return ADMIN_RESPOND;
}

static enum admin_handler_result
admin_h_metrics(struct admin_request *req, struct admin_response *resp)
{
	char extra[1024];
	int n;
	char *body;

	resp->body = status_metrics_text(req->sup, &resp->body_len);
	if (resp->body == NULL) {
		admin_response_error(resp, 500, "out of memory");
		return ADMIN_RESPOND;
	}
	/* the admin API's own counters (adminauth.h), with those of the
	 * processes before this one (an upgrade carries them) */
	uint64_t total[4];
	struct adminauth_counters k;
	admin_api_counters(req->admin, req->sup, total);
	for (int i = 0; i < 3; i++)
		k.refused[i] = total[i];
	k.tls_failures = total[3];
	n = adminauth_metrics_text(&k, extra, sizeof extra);
	if (n > 0 && (body = realloc(resp->body, resp->body_len + (size_t)n + 1)) != NULL) {
		memcpy(body + resp->body_len, extra, (size_t)n + 1);
		resp->body = body;
		resp->body_len += (size_t)n;
	}
	resp->status = 200;
	resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
	return ADMIN_RESPOND;
}

static enum admin_handler_result
admin_h_page(struct admin_request *req, struct admin_response *resp)
{
	size_t len;
	const char *page = statuspage_text(&len);

	(void)req;
	if ((resp->body = malloc(len)) == NULL) {
		admin_response_error(resp, 500, "out of memory");
		return ADMIN_RESPOND;
	}
	memcpy(resp->body, page, len);
	resp->body_len = len;
	resp->status = 200;
	resp->content_type = "text/html; charset=utf-8";
	snprintf(resp->extra_headers, sizeof resp->extra_headers, "%s", STATUSPAGE_HEADERS);
	return ADMIN_RESPOND;
}

/* --- validate --------------------------------------------------------- */

static json_t *
admin_invalid(const char *msg)
{
	json_t *errs = json_array();

	if (json_array_append_new(errs, json_string(msg)) == -1)
		json_array_append_new(errs, json_string("invalid configuration"));
	return json_pack("{s:b, s:o}", "valid", 0, "errors", errs);
}

static enum admin_handler_result
admin_h_validate(struct admin_request *req, struct admin_response *resp)
{
	const struct http_request *hr = req->http;
	const char *name = "<request>", *text = hr->body;
	size_t len = hr->body_len, i;
	char *file = NULL, err[512];
	unsigned char hash[crypto_hash_sha256_BYTES];
	char version[8 + 2 * crypto_hash_sha256_BYTES + 1];
	struct cfg_errors errs;
	struct cfg cfg;
	json_t *a;

	if (len == 0) {
		name = req->sup->config_path;
		if (name == NULL) {
			admin_response_json(resp, 400, admin_invalid("no configuration file to validate"));
			return ADMIN_RESPOND;
		}
		if ((file = file_read_all(name, HTTP_MAX_BODY, &len, err, sizeof err)) == NULL) {
			admin_response_json(resp, 400, admin_invalid(err));
			return ADMIN_RESPOND;
		}
		text = file;
	}
	crypto_hash_sha256(hash, (const unsigned char *)text, len);
	memcpy(version, "sha256:", 7);
	sodium_bin2hex(version + 7, sizeof version - 7, hash, sizeof hash);

	cfg_errors_init(&errs);
	memset(&cfg, 0, sizeof cfg);
	if (cfg_parse_string(name, text, len, &cfg, &errs) == 0 &&
	    tlsmat_read(&cfg, &errs) == 0 && adminauth_check_cfg(&cfg, &errs) == 0) {
		sup_record_validation(req->sup, true, version);
		admin_response_json(resp, 200, json_pack("{s:b, s:s, s:I}",
		    "valid", 1, "configVersion", version,
		    "clusters", (json_int_t)cfg.n_clusters));
		cfg_free(&cfg);
	} else {
		cfg_free(&cfg);
		sup_record_validation(req->sup, false, version);
		a = json_array();
		for (i = 0; i < errs.n; i++) {
			json_t *m = json_string(errs.msg[i]);

			/* posted text may not be UTF-8; keep the message visible */
			if (m == NULL)
				m = json_string("(error message is not valid UTF-8)");
			json_array_append_new(a, m);
		}
		if (errs.n == 0)
			json_array_append_new(a, json_string("invalid configuration"));
		admin_response_json(resp, 400, json_pack("{s:b, s:o}", "valid", 0, "errors", a));
	}
	cfg_errors_free(&errs);
	free(file);
	return ADMIN_RESPOND;
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
admin_api_answer_reload(struct admin *a, struct sup *s, uint64_t waiter,
			const struct sup_reload_record *rec)
{
	struct admin_conn *c;
	struct admin_response resp;

	if (a == NULL || (c = admin_http_deferred(a, waiter)) == NULL)
		return;  /* the client went away meanwhile */
	memset(&resp, 0, sizeof resp);
	admin_response_json(&resp, admin_reload_http_status(rec), status_reload_reply_json(s, rec));
	admin_conn_respond(c, &resp);
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

static void
admin_render_answer(struct admin_response *resp, const struct sup_answer *ans)
{
	int code = admin_result_http_status(ans->result);

	if (ans->result == SUP_NOT_FOUND || ans->result == SUP_CONFLICT ||
	    ans->result == SUP_UNAVAILABLE) {
		admin_response_error(resp, code, "%s", ans->error);
		return;
	}
	admin_response_json(resp, code, json_pack("{s:b, s:s, s:I, s:s, s:s?}",
	    "success", ans->result == SUP_OK || ans->result == SUP_DEFERRED, "name", ans->name,
	    "generation", (json_int_t)ans->generation, "state", lc_state_str(ans->state),
	    "error", ans->error[0] ? ans->error : NULL));
}

void
admin_api_answer_op(struct admin *a, uint64_t waiter, const struct sup_answer *ans)
{
	struct admin_conn *c;
	struct admin_response resp;

	if (a == NULL || (c = admin_http_deferred(a, waiter)) == NULL)
		return;
	memset(&resp, 0, sizeof resp);
	admin_render_answer(&resp, ans);
	admin_conn_respond(c, &resp);
}

static void
admin_clock(struct sup *s)
{
	sup_set_clock(s, clock_mono_ms(), clock_wall_ms());
}

static enum admin_handler_result
admin_h_reload(struct admin_request *req, struct admin_response *resp)
{
	const struct http_request *h = req->http;
	const struct sup_reload_record *rec = NULL;
	uint64_t id = req->id;
	enum sup_result r;

	admin_clock(req->sup);
	r = sup_reload_start(req->sup, h->body_len ? h->body : NULL, h->body_len, "api", id, &rec);
	switch (r) {
	case SUP_DEFERRED:
		return ADMIN_DEFERRED;
	case SUP_CONFLICT: {
		char since[40];

		clock_fmt_rfc3339(rec->timestamp_ms, since, sizeof since);
		admin_response_json(resp, 409, json_pack("{s:b, s:s, s:s}", "success", 0,
		    "error", rec->errors && rec->errors[0] ? rec->errors[0] :
		    "a reload is in progress", "inProgressSince", since));
		return ADMIN_RESPOND;
	}
	case SUP_UNAVAILABLE:
		admin_response_error(resp, 503, "ferryd is stopping");
		return ADMIN_RESPOND;
	default:
		admin_response_json(resp, admin_reload_http_status(rec),
		    status_reload_reply_json(req->sup, rec));
		return ADMIN_RESPOND;
	}
}

static enum admin_handler_result
admin_h_config_status(struct admin_request *req, struct admin_response *resp)
{
	admin_response_json(resp, 200, status_config_json(req->sup));
	return ADMIN_RESPOND;
}

static enum admin_handler_result
admin_h_drain(struct admin_request *req, struct admin_response *resp)
{
	struct sup_answer ans;

	admin_clock(req->sup);
	sup_cluster_drain(req->sup, req->param, &ans);
	admin_render_answer(resp, &ans);
	return ADMIN_RESPOND;
}

static enum admin_handler_result
admin_h_restart(struct admin_request *req, struct admin_response *resp)
{
	struct sup_answer ans;

	admin_clock(req->sup);
	if (sup_cluster_restart(req->sup, req->param, req->id, &ans) == SUP_DEFERRED)
		return ADMIN_DEFERRED;
	admin_render_answer(resp, &ans);
	return ADMIN_RESPOND;
}

/* --- upgrade (docs/design.md §11) ------------------------------------------ */

void
admin_api_counters(const struct admin *a, const struct sup *s, uint64_t out[4])
{
	const struct adminauth_counters *k = a ? admin_http_counters(a) : NULL;

	for (int i = 0; i < 4; i++)
		out[i] = s->admin_carried[i] + (k == NULL ? 0 : i < 3 ? k->refused[i] :
		    k->tls_failures);
}

static int
admin_upgrade_http_status(const struct sup_upgrade_record *rec)
{
	return rec->status == SUP_UPGRADE_SUCCESS ? 200 : 500;
}

void
admin_api_answer_upgrade(struct admin *a, struct sup *s, uint64_t waiter,
			 const struct sup_upgrade_record *rec)
{
	struct admin_conn *c;
	struct admin_response resp;

	if (a == NULL || (c = admin_http_deferred(a, waiter)) == NULL)
		return;
	memset(&resp, 0, sizeof resp);
	admin_response_json(&resp, admin_upgrade_http_status(rec), status_upgrade_reply_json(s, rec));
	admin_conn_respond(c, &resp);
}

/* The executable is never chosen by the API: ferryd runs the file it was
 * started from (a package upgrade replaces it), so a body is refused. */
static enum admin_handler_result
admin_h_upgrade(struct admin_request *req, struct admin_response *resp)
{
	const struct sup_upgrade_record *rec = NULL;
	char err[256], since[40];
	enum sup_result r;

	if (req->http->body_len != 0) {
		admin_response_error(resp, 400, "POST /admin/upgrade takes no body: ferryd always "
		    "executes the file it was started from (%s)",
		    req->sup->exec_path ? req->sup->exec_path : "unknown");
		return ADMIN_RESPOND;
	}
	admin_clock(req->sup);
	r = sup_upgrade_start(req->sup, "api", req->id, &rec, err, sizeof err);
	switch (r) {
	case SUP_DEFERRED:
		return ADMIN_DEFERRED;
	case SUP_CONFLICT:
		clock_fmt_rfc3339(req->sup->reload ? sup_reload_since(req->sup) :
		    sup_upgrade_since(req->sup) ? sup_upgrade_since(req->sup) : clock_wall_ms(),
		    since, sizeof since);
		admin_response_json(resp, 409, json_pack("{s:b, s:s, s:s}", "success", 0,
		    "error", err, "inProgressSince", since));
		return ADMIN_RESPOND;
	case SUP_UNAVAILABLE:
		admin_response_error(resp, 503, "%s", err);
		return ADMIN_RESPOND;
	default:
		admin_response_json(resp, admin_upgrade_http_status(rec),
		    status_upgrade_reply_json(req->sup, rec));
		return ADMIN_RESPOND;
	}
}

struct admin *
admin_api_start(struct sup *s, struct ev_loop *loop, const struct admin_listeners *inherit,
		char *err, size_t errlen)
{
	return admin_http_start(&s->cfg, s, loop, admin_routes,
	    sizeof admin_routes / sizeof admin_routes[0], inherit, err, errlen);
}
