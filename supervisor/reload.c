/*
 * reload — reload orchestration, cluster drain/restart, config status;
 * see reload.h.
 *
 * States of one reload: prepare (new generations held in initializing) ->
 * commit or roll back -> finish (record, answer, persist). Every worker
 * event (READY, FAILED, exit, init timeout) re-evaluates the reload in
 * reload_check(); the whole reload also has its own init_timeout deadline.
 */
#include "supervisor/reload.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file.h"
#include "common/log.h"
#include "supervisor/plan.h"
#include "supervisor/status.h"

enum ri_state { RI_PENDING = 0, RI_READY, RI_FAILED, RI_DONE };

struct reload_item {
	struct plan_item *pi;
	struct sup_cluster *cluster;  /* existing, or new (ADD, not listed yet) */
	struct sup_ccfg *cc;          /* prepared configuration (MODIFY) */
	struct sup_worker *wk;        /* the new generation */
	enum ri_state st;
	char error[256];
};

struct sup_reload {
	struct sup *s;
	uint64_t started_wall, started_mono;
	char source[16];
	struct cfg next;
	bool have_next;
	char version[80];
	char *text;
	size_t len;
	bool posted;
	struct plan plan;
	struct reload_item *items;
	ev_timer timer;
	struct admin_conn *conn;
	bool finished;
};

static void reload_check(struct sup_reload *r);

const char *
sup_reload_status_str(enum sup_reload_status st)
{
	switch (st) {
	case SUP_RELOAD_SUCCESS: return "SUCCESS";
	case SUP_RELOAD_FAILED: return "FAILED";
	case SUP_RELOAD_REJECTED: return "REJECTED";
	case SUP_RELOAD_UNCHANGED: return "UNCHANGED";
	default: return "NONE";
	}
}

/* ---- records ------------------------------------------------------------------- */

static void
strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

static char **
strv_add(char **v, const char *s)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	char **nv = realloc(v, (n + 2) * sizeof *nv);
	if (!nv)
		return v;
	nv[n] = strdup(s);
	nv[n + 1] = NULL;
	return nv;
}

static json_t *
strv_json(char *const *v)
{
	json_t *a = json_array();
	for (; v && *v; v++) {
		json_t *m = json_string(*v);
		json_array_append_new(a, m ? m : json_string("(message is not valid UTF-8)"));
	}
	return a;
}

static void
record_clear(struct sup_reload_record *rec)
{
	strv_free(rec->added);
	strv_free(rec->modified);
	strv_free(rec->removed);
	strv_free(rec->errors);
	memset(rec, 0, sizeof *rec);
}

void
reload_free_records(struct sup *s)
{
	record_clear(&s->last_reload);
}

void
reload_record_validation(struct sup *s, bool valid, const char *version)
{
	s->last_validation.valid = valid;
	s->last_validation.timestamp_ms = clock_wall_ms();
	snprintf(s->last_validation.requested_version,
	    sizeof s->last_validation.requested_version, "%s", version ? version : "");
}

static json_t *
time_json(uint64_t ms)
{
	char buf[40];
	if (!ms)
		return json_null();
	clock_fmt_rfc3339(ms, buf, sizeof buf);
	return json_string(buf);
}

json_t *
reload_status_json(const struct sup *s)
{
	json_t *o = json_object();
	json_object_set_new(o, "currentConfigVersion", json_string(s->config_version));
	json_object_set_new(o, "appliedAt", time_json(s->applied_at_ms));
	json_object_set_new(o, "reloadInProgress", json_boolean(s->reload != NULL));
	if (s->reload)
		json_object_set_new(o, "inProgressSince", time_json(s->reload->started_wall));
	const struct sup_reload_record *rec = &s->last_reload;
	if (rec->status == SUP_RELOAD_NONE) {
		json_object_set_new(o, "lastReloadAttempt", json_null());
	} else {
		json_t *r = json_object();
		json_object_set_new(r, "timestamp", time_json(rec->timestamp_ms));
		json_object_set_new(r, "status", json_string(sup_reload_status_str(rec->status)));
		json_object_set_new(r, "requestedVersion",
		    rec->requested_version[0] ? json_string(rec->requested_version) : json_null());
		json_object_set_new(r, "source", json_string(rec->source));
		json_object_set_new(r, "durationMs", json_integer((json_int_t)rec->duration_ms));
		json_object_set_new(r, "clustersAdded", strv_json(rec->added));
		json_object_set_new(r, "clustersModified", strv_json(rec->modified));
		json_object_set_new(r, "clustersRemoved", strv_json(rec->removed));
		json_object_set_new(r, "errors", strv_json(rec->errors));
		json_object_set_new(r, "persisted", json_boolean(rec->persisted));
		if (rec->persist_error[0])
			json_object_set_new(r, "persistError", json_string(rec->persist_error));
		json_object_set_new(o, "lastReloadAttempt", r);
	}
	if (s->last_validation.timestamp_ms == 0) {
		json_object_set_new(o, "lastValidationAttempt", json_null());
	} else {
		json_object_set_new(o, "lastValidationAttempt", json_pack("{s:o, s:s, s:s}",
		    "timestamp", time_json(s->last_validation.timestamp_ms),
		    "status", s->last_validation.valid ? "VALID" : "INVALID",
		    "requestedVersion", s->last_validation.requested_version));
	}
	return o;
}

/* ---- persistence ---------------------------------------------------------------- */

/* Write text to path atomically: temp file in the same directory, fsync,
 * rename, fsync the directory. 0, or -1 with a reason. */
static int
reload_persist(const char *path, const char *text, size_t len, char *err, size_t errlen)
{
	char tmp[4096], dirbuf[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
	snprintf(dirbuf, sizeof dirbuf, "%s", path);
	mode_t mode = 0644;
	struct stat st;
	if (stat(path, &st) == 0)
		mode = st.st_mode & 07777;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd == -1) {
		snprintf(err, errlen, "%.100s: %s", tmp, strerror(errno));
		return -1;
	}
	size_t off = 0;
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(err, errlen, "write %.100s: %s", tmp, strerror(errno));
			goto fail;
		}
		off += (size_t)n;
	}
	if (fsync(fd) == -1) {
		snprintf(err, errlen, "fsync %.100s: %s", tmp, strerror(errno));
		goto fail;
	}
	close(fd);
	fd = -1;
	if (rename(tmp, path) == -1) {
		snprintf(err, errlen, "rename to %.100s: %s", path, strerror(errno));
		goto fail;
	}
	int dfd = open(dirname(dirbuf), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return -1;
}

/* ---- finishing -------------------------------------------------------------------- */

static json_t *
reload_reply_body(const struct sup *s, const struct sup_reload_record *rec, bool changed,
		  bool posted)
{
	bool ok = rec->status == SUP_RELOAD_SUCCESS || rec->status == SUP_RELOAD_UNCHANGED;
	json_t *o = json_object();
	json_object_set_new(o, "success", json_boolean(ok));
	json_object_set_new(o, "changed", json_boolean(changed));
	json_object_set_new(o, "status", json_string(sup_reload_status_str(rec->status)));
	json_object_set_new(o, "configVersion", json_string(ok ? s->config_version :
	    rec->requested_version));
	json_object_set_new(o, "clustersAdded", strv_json(rec->added));
	json_object_set_new(o, "clustersModified", strv_json(rec->modified));
	json_object_set_new(o, "clustersRemoved", strv_json(rec->removed));
	json_object_set_new(o, "durationMs", json_integer((json_int_t)rec->duration_ms));
	if (!ok || rec->errors)
		json_object_set_new(o, "errors", strv_json(rec->errors));
	if (posted) {
		json_object_set_new(o, "persisted", json_boolean(rec->persisted));
		if (rec->persist_error[0])
			json_object_set_new(o, "persistError", json_string(rec->persist_error));
	}
	return o;
}

static void
reload_log_outcome(const struct sup_reload_record *rec)
{
	enum log_level lvl = rec->status == SUP_RELOAD_SUCCESS ||
			     rec->status == SUP_RELOAD_UNCHANGED ? LOG_INFO : LOG_WARN;
	size_t na = 0, nm = 0, nr = 0, ne = 0;
	for (char **p = rec->added; p && *p; p++) na++;
	for (char **p = rec->modified; p && *p; p++) nm++;
	for (char **p = rec->removed; p && *p; p++) nr++;
	for (char **p = rec->errors; p && *p; p++) ne++;
	log_msg(lvl, "reload finished",
	    "status=%s source=%s version=%s duration_ms=%llu added=%zu modified=%zu removed=%zu errors=%zu first_error=\"%s\"",
	    sup_reload_status_str(rec->status), rec->source, rec->requested_version,
	    (unsigned long long)rec->duration_ms, na, nm, nr, ne,
	    rec->errors && rec->errors[0] ? rec->errors[0] : "");
}

static void reload_hup_cb(struct ev_loop *loop, ev_timer *t, int revents);

/* Record the outcome, answer, free. `changed` says whether the running
 * configuration changed at all. */
static void
reload_finish(struct sup_reload *r, enum sup_reload_status st, int http, bool changed)
{
	struct sup *s = r->s;
	struct sup_reload_record *rec = &s->last_reload;
	char **errors = rec->errors;
	rec->errors = NULL;
	record_clear(rec);
	rec->errors = errors;  /* collected by the caller for this attempt */
	rec->status = st;
	rec->timestamp_ms = r->started_wall;
	rec->duration_ms = clock_mono_ms() - r->started_mono;
	snprintf(rec->requested_version, sizeof rec->requested_version, "%s", r->version);
	snprintf(rec->source, sizeof rec->source, "%s", r->source);
	for (size_t i = 0; r->items && i < r->plan.n; i++) {
		struct reload_item *it = &r->items[i];
		if (it->st != RI_DONE)
			continue;
		if (it->pi->op == PLAN_ADD)
			rec->added = strv_add(rec->added, it->pi->name);
		else if (it->pi->op == PLAN_MODIFY)
			rec->modified = strv_add(rec->modified, it->pi->name);
		else if (it->pi->op == PLAN_REMOVE)
			rec->removed = strv_add(rec->removed, it->pi->name);
	}
	if (st == SUP_RELOAD_SUCCESS) {
		/* The new file is the running config now. */
		cfg_free(&s->cfg);
		s->cfg = r->next;
		r->have_next = false;
		snprintf(s->config_version, sizeof s->config_version, "%s", r->version);
		s->applied_at_ms = clock_wall_ms();
		log_set_level((enum log_level)s->cfg.log_level);
		if (r->posted && s->cfg.persist) {
			if (reload_persist(s->config_path, r->text, r->len, rec->persist_error,
			    sizeof rec->persist_error) == 0)
				rec->persisted = true;
			else
				log_warn("posted config applied but not persisted",
				    "path=%s error=\"%s\"", s->config_path, rec->persist_error);
		} else if (r->posted) {
			snprintf(rec->persist_error, sizeof rec->persist_error,
			    "persist = false in [ferry]");
		}
	}
	rec->duration_ms = clock_mono_ms() - r->started_mono;
	rec->http_status = http;
	rec->changed = changed;
	rec->posted = r->posted;
	reload_log_outcome(rec);
	if (r->conn) {
		struct admin_response resp;
		memset(&resp, 0, sizeof resp);
		admin_response_json(&resp, http, reload_reply_body(s, rec, changed, r->posted));
		admin_conn_respond(r->conn, &resp);
		r->conn = NULL;
	}
	r->finished = true;
}

static void
reload_free(struct sup_reload *r)
{
	ev_timer_stop(r->s->loop, &r->timer);
	if (r->have_next)
		cfg_free(&r->next);
	for (size_t i = 0; r->items && i < r->plan.n; i++)
		sup_ccfg_free(r->items[i].cc);
	free(r->items);
	plan_free(&r->plan);
	free(r->text);
	free(r);
}

/* After a reload: the next coalesced SIGHUP, from the loop. */
static void
reload_done(struct sup *s)
{
	struct sup_reload *r = s->reload;
	s->reload = NULL;
	if (r)
		reload_free(r);
	if (s->hup_pending && !s->stopping) {
		ev_timer_stop(s->loop, &s->hup_timer);
		ev_timer_init(&s->hup_timer, reload_hup_cb, 0., 0.);
		s->hup_timer.data = s;
		ev_timer_start(s->loop, &s->hup_timer);
	}
}

static void
reload_hup_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct sup *s = t->data;
	if (!s->hup_pending || s->reload)
		return;
	s->hup_pending = false;
	log_info("running the reload requested during the previous one", "%s", "");
	reload_from_signal(s);
}

/* A reload that ends before preparing anything. */
static enum admin_handler_result
reload_end_now(struct sup_reload *r, enum sup_reload_status st, int http, bool changed,
	       struct admin_response *resp)
{
	struct sup *s = r->s;
	r->conn = NULL;
	reload_finish(r, st, http, changed);
	if (resp)
		admin_response_json(resp, http, reload_reply_body(s, &s->last_reload, changed,
		    r->posted));
	s->reload = r;
	reload_done(s);
	return ADMIN_RESPOND;
}

/* ---- commit and rollback ------------------------------------------------------------ */

static void
reload_graveyard(struct sup *s, struct sup_cluster *c)
{
	c->removing = true;
	if (!sup_cluster_alive(c)) {
		sup_cluster_free(c);
		return;
	}
	struct sup_cluster **g = realloc(s->graveyard, (s->n_graveyard + 1) * sizeof *g);
	if (!g) {
		sup_cluster_free(c);  /* kills its workers */
		return;
	}
	s->graveyard = g;
	s->graveyard[s->n_graveyard++] = c;
}

void
reload_cluster_reaped(struct sup *s, struct sup_cluster *c)
{
	for (size_t i = 0; i < s->n_clusters; i++) {
		if (s->clusters[i] != c)
			continue;
		memmove(&s->clusters[i], &s->clusters[i + 1],
		    (s->n_clusters - i - 1) * sizeof *s->clusters);
		s->n_clusters--;
		log_info("cluster removed", "cluster=%s", c->cfg.name);
		sup_cluster_free(c);
		return;
	}
	for (size_t i = 0; i < s->n_graveyard; i++) {
		if (s->graveyard[i] != c)
			continue;
		s->graveyard[i] = s->graveyard[--s->n_graveyard];
		sup_cluster_free(c);
		return;
	}
}

static void
reload_commit_item(struct sup_reload *r, struct reload_item *it)
{
	struct sup *s = r->s;
	struct sup_cluster *c = it->cluster;
	switch (it->pi->op) {
	case PLAN_ADD: {
		struct sup_cluster **nc = realloc(s->clusters, (s->n_clusters + 1) * sizeof *nc);
		if (!nc) {
			snprintf(it->error, sizeof it->error, "out of memory");
			it->st = RI_FAILED;
			return;
		}
		s->clusters = nc;
		s->clusters[s->n_clusters++] = c;
		sup_worker_promote(it->wk);
		break;
	}
	case PLAN_MODIFY: {
		struct sup_ccfg *old = c->ccfg;
		sup_cluster_set_ccfg(c, it->cc);
		it->cc = NULL;
		c->parked = false;
		c->n_unknown_nodes = 0;  /* node_ids may cover them now */
		crash_reset(&c->crash);
		ev_timer_stop(s->loop, &c->restart_timer);
		sup_worker_promote(it->wk);
		/* Our copies of the old sockets: shared ones live on as the new
		 * configuration's dups, the others close now (the old
		 * generation closed its own copies when it began draining). */
		sup_ccfg_free(old);
		break;
	}
	case PLAN_REMOVE:
		c->removing = true;
		ev_timer_stop(s->loop, &c->restart_timer);
		for (struct sup_worker *wk = c->workers; wk; wk = wk->next)
			sup_worker_drain(wk, "cluster removed by reload");
		sup_ccfg_release(c->ccfg);
		if (!sup_cluster_alive(c))
			reload_cluster_reaped(s, c);
		break;
	case PLAN_KEEP:
		break;
	}
	it->st = RI_DONE;
}

static void
reload_rollback_item(struct sup_reload *r, struct reload_item *it, const char *why)
{
	if (it->wk)
		sup_worker_stop(it->wk, why);  /* a no-op for one already gone */
	if (it->pi->op == PLAN_ADD && it->cluster) {
		sup_ccfg_release(it->cluster->ccfg);
		reload_graveyard(r->s, it->cluster);
		it->cluster = NULL;
	}
	sup_ccfg_free(it->cc);  /* closes dups and new binds; shared sockets live on */
	it->cc = NULL;
	it->wk = NULL;
}

static void
reload_add_error(struct sup *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
reload_add_error(struct sup *s, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	s->last_reload.errors = strv_add(s->last_reload.errors, buf);
}

/* [ferry] settings that change without a restart (plan_check_restart_keys
 * rejected the others). */
static void
reload_apply_live(struct sup *s, const struct cfg *next)
{
	s->cfg.startup_policy = next->startup_policy;
	s->cfg.reload_policy = next->reload_policy;
	s->cfg.drain_timeout_ms = next->drain_timeout_ms;
	s->cfg.init_timeout_ms = next->init_timeout_ms;
	s->cfg.log_level = next->log_level;
	s->cfg.persist = next->persist;
	s->cfg.crash_loop_limit = next->crash_loop_limit;
	s->cfg.crash_loop_window_ms = next->crash_loop_window_ms;
	log_set_level((enum log_level)s->cfg.log_level);
}

static void
reload_check(struct sup_reload *r)
{
	struct sup *s = r->s;
	if (r->finished)
		return;
	size_t pending = 0, failed = 0;
	for (size_t i = 0; i < r->plan.n; i++) {
		if (r->items[i].st == RI_PENDING)
			pending++;
		else if (r->items[i].st == RI_FAILED)
			failed++;
	}
	bool per_cluster = r->next.reload_policy == CFG_RELOAD_PER_CLUSTER;
	if (pending && (per_cluster || failed == 0))
		return;  /* wait for the others */

	strv_free(s->last_reload.errors);
	s->last_reload.errors = NULL;
	const char *first_failed = NULL;
	for (size_t i = 0; i < r->plan.n; i++)
		if (r->items[i].st == RI_FAILED) {
			if (!first_failed)
				first_failed = r->items[i].pi->name;
			reload_add_error(s, "cluster %s: %s", r->items[i].pi->name, r->items[i].error);
		}

	if (failed && !per_cluster) {
		char why[160];
		snprintf(why, sizeof why, "reload rolled back (cluster %s failed)", first_failed);
		for (size_t i = 0; i < r->plan.n; i++) {
			struct reload_item *it = &r->items[i];
			if (it->st == RI_PENDING || it->st == RI_READY) {
				reload_rollback_item(r, it, why);
				it->st = RI_FAILED;
			} else if (it->st == RI_FAILED) {
				reload_rollback_item(r, it, it->error);
			}
		}
		reload_finish(r, SUP_RELOAD_FAILED, 500, false);
		reload_done(s);
		return;
	}
	/* Commit what prepared (all of it, or per cluster what did). The
	 * settings that apply live take effect first, so the generations this
	 * reload replaces drain with the new drain_timeout. */
	reload_apply_live(s, &r->next);
	bool any = false;
	for (size_t i = 0; i < r->plan.n; i++) {
		struct reload_item *it = &r->items[i];
		if (it->st == RI_FAILED) {
			reload_rollback_item(r, it, it->error);
			continue;
		}
		reload_commit_item(r, it);
		any = any || it->pi->op != PLAN_KEEP;
	}
	if (failed)
		reload_finish(r, SUP_RELOAD_FAILED, 500, any);
	else
		reload_finish(r, SUP_RELOAD_SUCCESS, 200, true);
	reload_done(s);
}

void
reload_worker_event(struct sup *s, struct sup_worker *wk)
{
	struct sup_cluster *c = wk->cluster;
	/* A deferred restart request waits for its generation's outcome. */
	if (c->restart_conn && !wk->held && sup_worker_is_current(wk)) {
		int code = 0;
		const char *why = NULL;
		if (wk->lc.state == LC_ACCEPTING)
			code = 200;
		else if (wk->lc.state == LC_FAILED || wk->lc.state == LC_STOPPED) {
			code = 500;
			why = wk->lc.reason;
		}
		if (code) {
			struct admin_response resp;
			memset(&resp, 0, sizeof resp);
			admin_response_json(&resp, code, json_pack("{s:b, s:s, s:I, s:s, s:s?}",
			    "success", code == 200, "name", c->cfg.name,
			    "generation", (json_int_t)wk->generation,
			    "state", lc_state_str(wk->lc.state), "error", why));
			admin_conn_respond(c->restart_conn, &resp);
			c->restart_conn = NULL;
		}
	}
	struct sup_reload *r = s->reload;
	if (!r || r->finished)
		return;
	for (size_t i = 0; i < r->plan.n; i++) {
		struct reload_item *it = &r->items[i];
		if (it->wk != wk || it->st != RI_PENDING)
			continue;
		if (wk->lc.state == LC_INITIALIZING && wk->ready) {
			it->st = RI_READY;
		} else if (wk->lc.state == LC_FAILED || wk->lc.state == LC_STOPPED ||
			   wk->pid == 0) {
			it->st = RI_FAILED;
			snprintf(it->error, sizeof it->error, "%s",
			    wk->lc.reason[0] ? wk->lc.reason : "worker exited during preparation");
		}
	}
	reload_check(r);
}

static void
reload_timeout_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct sup_reload *r = t->data;
	for (size_t i = 0; i < r->plan.n; i++) {
		struct reload_item *it = &r->items[i];
		if (it->st != RI_PENDING)
			continue;
		it->st = RI_FAILED;
		snprintf(it->error, sizeof it->error, "not ready within init_timeout (%llums)",
		    (unsigned long long)r->next.init_timeout_ms);
		if (it->wk) {
			it->wk->stop_requested = true;
			sup_worker_set_state(it->wk, LC_FAILED, it->error);
		}
	}
	reload_check(r);
}

void
reload_abort(struct sup *s, const char *why)
{
	struct sup_reload *r = s->reload;
	if (!r)
		return;
	for (size_t i = 0; i < r->plan.n; i++) {
		struct reload_item *it = &r->items[i];
		if (it->st == RI_PENDING || it->st == RI_READY || it->st == RI_FAILED) {
			reload_rollback_item(r, it, why);
			it->st = RI_FAILED;
			snprintf(it->error, sizeof it->error, "%s", why);
		}
	}
	strv_free(s->last_reload.errors);
	s->last_reload.errors = strv_add(NULL, why);
	reload_finish(r, SUP_RELOAD_FAILED, 503, false);
	s->hup_pending = false;
	reload_done(s);
}

/* ---- starting ------------------------------------------------------------------------ */

enum admin_handler_result
reload_start(struct sup *s, const char *text, size_t len, const char *source,
	     struct admin_conn *conn, struct admin_response *resp)
{
	if (s->reload) {
		char since[40];
		clock_fmt_rfc3339(s->reload->started_wall, since, sizeof since);
		admin_response_json(resp, 409, json_pack("{s:b, s:s, s:s}", "success", 0,
		    "error", "a reload is in progress", "inProgressSince", since));
		return ADMIN_RESPOND;
	}
	if (s->stopping) {
		admin_response_error(resp, 503, "ferryd is stopping");
		return ADMIN_RESPOND;
	}
	struct sup_reload *r = calloc(1, sizeof *r);
	if (!r) {
		admin_response_error(resp, 500, "out of memory");
		return ADMIN_RESPOND;
	}
	r->s = s;
	r->started_wall = clock_wall_ms();
	r->started_mono = clock_mono_ms();
	snprintf(r->source, sizeof r->source, "%s", source);
	ev_timer_init(&r->timer, reload_timeout_cb, 0., 0.);
	r->timer.data = r;
	s->reload = r;
	strv_free(s->last_reload.errors);
	s->last_reload.errors = NULL;

	/* 1. The text: posted, or the file on disk. */
	char err[512];
	const char *name = s->config_path;
	if (text && len) {
		r->posted = true;
		r->text = malloc(len + 1);
		if (r->text) {
			memcpy(r->text, text, len);
			r->text[len] = 0;
		}
		r->len = len;
		name = "<request>";
	} else {
		r->text = file_read_all(s->config_path, CFG_MAX_FILE_BYTES, &r->len, err, sizeof err);
		if (!r->text) {
			reload_add_error(s, "%s", err);
			return reload_end_now(r, SUP_RELOAD_REJECTED, 400, false, resp);
		}
	}
	if (!r->text) {
		reload_add_error(s, "out of memory");
		return reload_end_now(r, SUP_RELOAD_FAILED, 500, false, resp);
	}
	sup_hash_hex(r->text, r->len, r->version, sizeof r->version);
	log_info("reload requested", "source=%s version=%s posted=%s", source, r->version,
	    r->posted ? "true" : "false");

	/* 2. Parse and validate, no side effects. */
	struct cfg_errors errs;
	cfg_errors_init(&errs);
	if (cfg_parse_string(name, r->text, r->len, &r->next, &errs) == -1) {
		for (size_t i = 0; i < errs.n; i++)
			reload_add_error(s, "%s", errs.msg[i]);
		cfg_errors_free(&errs);
		return reload_end_now(r, SUP_RELOAD_REJECTED, 400, false, resp);
	}
	r->have_next = true;
	/* 3. Same bytes as running: nothing to do. */
	if (strcmp(r->version, s->config_version) == 0) {
		cfg_errors_free(&errs);
		return reload_end_now(r, SUP_RELOAD_UNCHANGED, 200, false, resp);
	}
	if (plan_check_restart_keys(&s->cfg, &r->next, &errs) > 0) {
		for (size_t i = 0; i < errs.n; i++)
			reload_add_error(s, "%s", errs.msg[i]);
		cfg_errors_free(&errs);
		return reload_end_now(r, SUP_RELOAD_REJECTED, 400, false, resp);
	}
	cfg_errors_free(&errs);

	/* 4. Diff against what runs (clusters being removed do not count). */
	struct plan_running *run = calloc(s->n_clusters + 1, sizeof *run);
	struct sup_cluster **run_c = calloc(s->n_clusters + 1, sizeof *run_c);
	size_t n_run = 0;
	if (!run || !run_c) {
		free(run);
		free(run_c);
		reload_add_error(s, "out of memory");
		return reload_end_now(r, SUP_RELOAD_FAILED, 500, false, resp);
	}
	for (size_t i = 0; i < s->n_clusters; i++) {
		struct sup_cluster *c = s->clusters[i];
		if (c->removing) {
			if (cfg_find_cluster(&r->next, c->cfg.name)) {
				reload_add_error(s, "cluster %s is still draining after its removal; "
				    "retry when it has stopped", c->cfg.name);
				free(run);
				free(run_c);
				return reload_end_now(r, SUP_RELOAD_REJECTED, 409, false, resp);
			}
			continue;
		}
		run[n_run].cl = c->ccfg->cl;
		run[n_run].version = c->ccfg->version;
		run_c[n_run++] = c;
	}
	if (plan_make(run, n_run, &r->next, &r->plan) == -1 ||
	    !(r->items = calloc(r->plan.n + 1, sizeof *r->items))) {
		free(run);
		free(run_c);
		reload_add_error(s, "out of memory");
		return reload_end_now(r, SUP_RELOAD_FAILED, 500, false, resp);
	}
	free(run);
	for (size_t i = 0; i < r->plan.n; i++) {
		struct reload_item *it = &r->items[i];
		it->pi = &r->plan.items[i];
		it->st = RI_READY;  /* KEEP / REMOVE need no preparation */
		if (it->pi->old_index >= 0)
			it->cluster = run_c[it->pi->old_index];
		log_info("reload plan", "cluster=%s op=%s", it->pi->name, plan_op_str(it->pi->op));
	}
	free(run_c);

	/* 5. Prepare: bind new addresses, start held generations. Sockets of
	 * every running configuration are candidates for sharing. */
	struct sup_ccfg **reuse = calloc(s->n_clusters + 1, sizeof *reuse);
	size_t n_reuse = 0;
	for (size_t i = 0; reuse && i < s->n_clusters; i++)
		reuse[n_reuse++] = s->clusters[i]->ccfg;
	for (size_t i = 0; i < r->plan.n; i++) {
		struct reload_item *it = &r->items[i];
		if (it->pi->op != PLAN_ADD && it->pi->op != PLAN_MODIFY)
			continue;
		it->st = RI_PENDING;
		const struct cfg_cluster *ncl = &r->next.clusters[it->pi->new_index];
		struct sup_ccfg *cc = sup_ccfg_build(ncl, reuse, n_reuse, it->error,
		    sizeof it->error);
		if (!cc) {
			it->st = RI_FAILED;
			continue;
		}
		if (it->pi->op == PLAN_ADD) {
			it->cluster = sup_cluster_new(s, cc);
			if (!it->cluster) {
				sup_ccfg_free(cc);
				snprintf(it->error, sizeof it->error, "out of memory");
				it->st = RI_FAILED;
				continue;
			}
			it->wk = sup_start_worker(it->cluster, NULL, "reload: added", true);
		} else {
			it->cc = cc;
			it->wk = sup_start_worker(it->cluster, cc, "reload: modified", true);
		}
		if (!it->wk || it->wk->lc.state == LC_FAILED) {
			snprintf(it->error, sizeof it->error, "%s",
			    it->wk ? it->wk->lc.reason : "out of memory");
			it->st = RI_FAILED;
		} else {
			/* Held generations answer to the new init_timeout. */
			ev_timer_stop(s->loop, &it->wk->init_timer);
			ev_timer_set(&it->wk->init_timer,
			    (ev_tstamp)r->next.init_timeout_ms / 1000.0, 0.);
			ev_timer_start(s->loop, &it->wk->init_timer);
		}
	}
	free(reuse);
	ev_timer_set(&r->timer, (ev_tstamp)r->next.init_timeout_ms / 1000.0 + 0.05, 0.);
	ev_timer_start(s->loop, &r->timer);
	reload_check(r);
	if (s->reload == r) {
		/* Waiting for workers: the answer goes to conn later. */
		r->conn = conn;
		return conn ? ADMIN_DEFERRED : ADMIN_RESPOND;
	}
	/* Finished during this call (e.g. every preparation failed at once). */
	const struct sup_reload_record *rec = &s->last_reload;
	admin_response_json(resp, rec->http_status, reload_reply_body(s, rec, rec->changed,
	    rec->posted));
	return ADMIN_RESPOND;
}

void
reload_from_signal(struct sup *s)
{
	if (s->reload) {
		if (!s->hup_pending)
			log_info("SIGHUP during a reload: one more reload will follow", "%s", "");
		s->hup_pending = true;
		return;
	}
	struct admin_response resp;
	memset(&resp, 0, sizeof resp);
	reload_start(s, NULL, 0, "SIGHUP", NULL, &resp);
	free(resp.body);
}

/* ---- drain and restart one cluster ------------------------------------------------------ */

static struct sup_cluster *
reload_lookup(struct sup *s, const char *name, struct admin_response *resp)
{
	struct sup_cluster *c = sup_find_cluster(s, name);
	if (!c || c->removing) {
		admin_response_error(resp, 404, "no cluster named '%s'", name);
		return NULL;
	}
	if (s->reload) {
		admin_response_error(resp, 409, "a reload is in progress");
		return NULL;
	}
	if (s->stopping) {
		admin_response_error(resp, 503, "ferryd is stopping");
		return NULL;
	}
	return c;
}

enum admin_handler_result
reload_cluster_drain(struct sup *s, const char *name, struct admin_response *resp)
{
	struct sup_cluster *c = reload_lookup(s, name, resp);
	if (!c)
		return ADMIN_RESPOND;
	struct sup_worker *serving = sup_cluster_serving(c);
	if (!serving || serving->lc.state != LC_ACCEPTING) {
		admin_response_error(resp, 409, "cluster '%s' is %s, not accepting", name,
		    serving ? lc_state_str(serving->lc.state) : "not running");
		return ADMIN_RESPOND;
	}
	c->parked = true;
	ev_timer_stop(s->loop, &c->restart_timer);
	for (struct sup_worker *wk = c->workers; wk; wk = wk->next)
		sup_worker_drain(wk, "drained by operator");
	sup_ccfg_release(c->ccfg);  /* its sockets are released */
	log_info("cluster drained by operator", "cluster=%s gen=%llu", name,
	    (unsigned long long)serving->generation);
	admin_response_json(resp, 200, json_pack("{s:b, s:s, s:s, s:I}", "success", 1,
	    "name", name, "state", lc_state_str(serving->lc.state),
	    "generation", (json_int_t)serving->generation));
	return ADMIN_RESPOND;
}

enum admin_handler_result
reload_cluster_restart(struct sup *s, const char *name, struct admin_conn *conn,
		       struct admin_response *resp)
{
	struct sup_cluster *c = reload_lookup(s, name, resp);
	if (!c)
		return ADMIN_RESPOND;
	if (c->restart_conn) {
		admin_response_error(resp, 409, "a restart of '%s' is in progress", name);
		return ADMIN_RESPOND;
	}
	for (struct sup_worker *wk = c->workers; wk; wk = wk->next)
		if (wk->pid > 0 && wk->lc.state == LC_INITIALIZING) {
			admin_response_error(resp, 409, "cluster '%s' is already starting (generation %llu)",
			    name, (unsigned long long)wk->generation);
			return ADMIN_RESPOND;
		}
	/* Sockets released by a drain or a failed bind: bind them again. */
	char err[256];
	if (sup_ccfg_listen(c->ccfg, NULL, 0, err, sizeof err) == -1) {
		sup_ccfg_release(c->ccfg);
		admin_response_json(resp, 500, json_pack("{s:b, s:s, s:s}", "success", 0,
		    "name", name, "error", err));
		return ADMIN_RESPOND;
	}
	struct sup_worker *serving = sup_cluster_serving(c);
	bool roll = serving && serving->lc.state == LC_ACCEPTING;
	c->parked = false;
	crash_reset(&c->crash);
	ev_timer_stop(s->loop, &c->restart_timer);
	struct sup_worker *wk = sup_start_worker(c, NULL, roll ? "restart (rolling)" : "restart",
	    false);
	if (!wk || wk->lc.state == LC_FAILED) {
		admin_response_json(resp, 500, json_pack("{s:b, s:s, s:s}", "success", 0,
		    "name", name, "error", wk ? wk->lc.reason : "out of memory"));
		return ADMIN_RESPOND;
	}
	log_info("cluster restart by operator", "cluster=%s gen=%llu rolling=%s", name,
	    (unsigned long long)wk->generation, roll ? "true" : "false");
	if (!conn) {
		admin_response_json(resp, 202, json_pack("{s:b, s:s, s:I}", "success", 1,
		    "name", name, "generation", (json_int_t)wk->generation));
		return ADMIN_RESPOND;
	}
	c->restart_conn = conn;
	return ADMIN_DEFERRED;
}
