/*
 * reload — carrying out a configuration change in a running ferryd
 * (docs/design.md §4) as part of the engine: pure like engine.c (every
 * effect through s->ops), and producing a record (struct
 * sup_reload_record), never an HTTP answer: the admin layer renders
 * records.
 *
 * A reload parses and validates the new text with no side effects, diffs it
 * (plan.h), then prepares: one item per cluster (fsm.h item table); added
 * and modified clusters get a new generation, held in `initializing` with
 * the new init_timeout as its deadline, on the same listening socket objects
 * where addresses are unchanged. Items are decided by their generations'
 * events (held -> prepared; ended -> failed). Once every item is decided
 * (or, all-or-nothing, one failed), plan_resolve() says which commit:
 * commit ACCEPTs the new generation (the old ones drain when it accepts),
 * rollback stops it and closes what was opened for it. Then the outcome is
 * recorded, answered and logged, once.
 *
 * One reload at a time; SIGHUPs during one coalesce into one more.
 */
#include "supervisor/engine_priv.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/file.h"
#include "common/log.h"
#include "common/tlsmat.h"

struct sup_reload_item {
	struct plan_item *pi;
	bool commit;                  /* resolved to commit (paced: reload_commit_batch) */
	struct sup_cluster *cluster;  /* existing, or new (ADD: in limbo until commit) */
	struct sup_ccfg *cc;          /* prepared configuration (MODIFY) */
	struct sup_gen *gen;          /* the new generation */
	enum fsm_istate st;
	char error[256];
};

struct sup_reload {
	uint64_t started_wall, started_mono;
	char source[16];
	struct cfg next;
	bool have_next;
	char version[PLAN_VERSION_LEN];
	char *text;
	size_t len;
	bool posted;
	struct plan plan;
	struct sup_reload_item *items;
	uint64_t waiter;
	bool resolved;                /* commit/rollback decided and queued */
	size_t prepare_next;          /* items before it were prepared (or needed nothing) */
	uint64_t prepare_at;          /* mono: prepare the next batch (0: none left) */
	size_t commit_next;           /* items before it had their commit posted */
	uint64_t commit_at;           /* mono: post the next batch (0: none left) */
	bool aborted;
	char resolve_error[256];
	struct sup_reload *next_free; /* finished, freed by reload_reap() */
};

static void reload_prepare_batch(struct sup *s, struct sup_reload *r);

/* ---- records ----------------------------------------------------------------------- */


void
sup_record_clear(struct sup_reload_record *rec)
{
	sup_strv_free(rec->added);
	sup_strv_free(rec->modified);
	sup_strv_free(rec->removed);
	sup_strv_free(rec->errors);
	memset(rec, 0, sizeof *rec);
}

void
sup_record_validation(struct sup *s, bool valid, const char *version)
{
	s->last_validation.valid = valid;
	s->last_validation.timestamp_ms = s->now_wall_ms;
	snprintf(s->last_validation.requested_version,
	    sizeof s->last_validation.requested_version, "%s", version ? version : "");
}

static void reload_add_error(struct sup *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void
reload_add_error(struct sup *s, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	s->last_reload.errors = sup_strv_add(s->last_reload.errors, buf);
}

uint64_t
sup_reload_since(const struct sup *s)
{
	return s->reload ? s->reload->started_wall : 0;
}

/* ---- finishing ------------------------------------------------------------------------- */

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
	const char *first = rec->errors && rec->errors[0] ? rec->errors[0] : NULL;
	log_msg(lvl, "reload finished",
	    first ? "status=%s source=%s version=%s duration_ms=%llu added=%zu modified=%zu "
	    "removed=%zu errors=%zu first_error=\"%s\"" : "status=%s source=%s version=%s "
	    "duration_ms=%llu added=%zu modified=%zu removed=%zu errors=%zu%s",
	    sup_reload_status_str(rec->status), rec->source, rec->requested_version,
	    (unsigned long long)rec->duration_ms, na, nm, nr, ne, first ? first : "");
}

/* [ferry] settings that change without a restart (plan_check_restart_keys
 * rejected the others); log_level reaches every live worker. */
static void
reload_apply_live(struct sup *s, const struct cfg *next)
{
	bool level_changed = s->cfg.log_level != next->log_level;
	s->cfg.startup_policy = next->startup_policy;
	s->cfg.reload_policy = next->reload_policy;
	s->cfg.drain_timeout_ms = next->drain_timeout_ms;
	s->cfg.init_timeout_ms = next->init_timeout_ms;
	s->cfg.log_level = next->log_level;
	s->cfg.persist = next->persist;
	s->cfg.crash_loop_limit = next->crash_loop_limit;
	s->cfg.crash_loop_window_ms = next->crash_loop_window_ms;
	s->cfg.worker_watchdog_ms = next->worker_watchdog_ms;
	s->cfg.tls_ticket_rotation_ms = next->tls_ticket_rotation_ms;
	s->cfg.drain_spread_ms = next->drain_spread_ms;
	s->cfg.reload_upstream_check = next->reload_upstream_check;
	s->cfg.sandbox = next->sandbox;  /* for workers started from now on */
	s->cfg.metrics_latency = next->metrics_latency;
	log_set_level((enum log_level)s->cfg.log_level);
	if (!level_changed)
		return;
	struct ipc_log_level ll = { .level = (uint32_t)next->log_level };
	for (size_t i = 0; i < s->n_clusters; i++)
		for (struct sup_gen *g = s->clusters[i]->gens; g; g = g->next)
			if (!fsm_gen_terminal(g->st))
				sup_gen_send(s, g, IPC_LOG_LEVEL, &ll, sizeof ll);
}

/* Record the outcome, answer, and hand the reload to the reaper. */
static void
reload_finish(struct sup *s, struct sup_reload *r, enum sup_reload_status st, bool changed)
{
	struct sup_reload_record *rec = &s->last_reload;
	char **errors = rec->errors;
	rec->errors = NULL;
	sup_record_clear(rec);
	rec->errors = errors;  /* collected for this attempt */
	rec->status = st;
	rec->timestamp_ms = r->started_wall;
	snprintf(rec->requested_version, sizeof rec->requested_version, "%s", r->version);
	snprintf(rec->source, sizeof rec->source, "%s", r->source);
	rec->aborted = r->aborted;
	for (size_t i = 0; r->items && i < r->plan.n; i++) {
		struct sup_reload_item *it = &r->items[i];
		if (it->st != FSM_I_COMMITTED)
			continue;
		if (it->pi->op == PLAN_ADD)
			rec->added = sup_strv_add(rec->added, it->pi->name);
		else if (it->pi->op == PLAN_MODIFY)
			rec->modified = sup_strv_add(rec->modified, it->pi->name);
		else if (it->pi->op == PLAN_REMOVE)
			rec->removed = sup_strv_add(rec->removed, it->pi->name);
	}
	if (st == SUP_RELOAD_SUCCESS) {
		/* The new file is the running config now. */
		cfg_free(&s->cfg);
		s->cfg = r->next;
		r->have_next = false;
		cfg_drop_clusters(&s->cfg);  /* kept by each cluster's ccfg */
		snprintf(s->config_version, sizeof s->config_version, "%s", r->version);
		s->applied_at_ms = s->now_wall_ms;
		if (r->posted && s->cfg.persist) {
			if (s->ops->persist(s, s->config_path, r->text, r->len, rec->persist_error,
			    sizeof rec->persist_error) == 0)
				rec->persisted = true;
			else
				log_warn("posted config applied but not persisted",
				    "path=%s error=\"%s\"", s->config_path, rec->persist_error);
		} else if (r->posted) {
			snprintf(rec->persist_error, sizeof rec->persist_error,
			    "persist = false in [ferry]");
		}
		free(s->config_text);
		s->config_text = r->text;
		s->config_len = r->len;
		r->text = NULL;
	}
	if (s->ops->clock)
		s->ops->clock(s);  /* the time of this turn's work (plan, commits) counts */
	rec->duration_ms = s->now_ms - r->started_mono;
	reload_stats_observe(&s->reload_stats, (unsigned)st, rec->duration_ms);
	rec->changed = changed;
	rec->posted = r->posted;
	reload_log_outcome(rec);
	if (s->reload == r) {
		s->reload = NULL;
		r->next_free = s->reload_dead;
		s->reload_dead = r;
		s->reap_pending = true;
	}
	if (r->waiter && s->ops->answer_reload)
		s->ops->answer_reload(s, r->waiter, rec);
	r->waiter = 0;
	if (s->ops->reload_end)
		s->ops->reload_end(s, rec);
	if (s->hup_pending && !s->stopping)
		s->hup_at = s->now_ms;  /* the coalesced SIGHUP, from the loop */
}

static void
reload_free(struct sup *s, struct sup_reload *r)
{
	if (r->have_next)
		cfg_free(&r->next);
	for (size_t i = 0; r->items && i < r->plan.n; i++)
		sup_ccfg_free(s, r->items[i].cc);
	free(r->items);
	plan_free(&r->plan);
	free(r->text);
	free(r);
}

void
reload_reap(struct sup *s)
{
	while (s->reload_dead) {
		struct sup_reload *r = s->reload_dead;
		s->reload_dead = r->next_free;
		reload_free(s, r);
	}
}

/* A reload that ends before preparing anything. */
static enum sup_result
reload_end_now(struct sup *s, struct sup_reload *r, enum sup_reload_status st,
	       const struct sup_reload_record **rec)
{
	reload_finish(s, r, st, false);  /* nobody waits yet: no answer sent */
	*rec = &s->last_reload;
	return SUP_OK;
}

/* ---- items ------------------------------------------------------------------------------ */

void
reload_gen_held(struct sup *s, struct sup_gen *g)
{
	if (!g->item || g->st != FSM_G_HELD)
		return;
	if (g->need_probe && !g->upstream_ok) {
		/* reload_upstream_check: held, but prepared only once the new
		 * upstream answered a metadata request (its init deadline runs) */
		if (!g->probe_sent) {
			g->probe_sent = true;
			sup_gen_send(s, g, IPC_PROBE, NULL, 0);
		}
		return;
	}
	/* Prepared: its init deadline is met. It waits for the other items
	 * without one (their starts are paced: the last of a thousand may
	 * start long after the first was ready), each of them bound by its
	 * own deadline from its own start. */
	g->init_at = 0;
	sup_deadline_touch(g->cluster);
	sup_post_item(s, g->item, FSM_IE_PREPARED, "ready");
}

void
reload_gen_ended(struct sup *s, struct sup_gen *g, const char *why)
{
	if (g->item)
		sup_post_item(s, g->item, FSM_IE_FAILED, why[0] ? why :
		    "worker exited during preparation");
}

static void
reload_commit_item(struct sup *s, struct sup_reload_item *it)
{
	struct sup_cluster *c = it->cluster;
	switch (it->pi->op) {
	case PLAN_MODIFY: {
		struct sup_ccfg *old = c->ccfg;
		c->start_pending = false;  /* the reload's generation is its start */
		sup_cluster_set_ccfg(c, it->cc);
		it->cc = NULL;
		c->n_unknown_nodes = 0;  /* node_ids may cover them now */
		/* Shared sockets live on in the new configuration's dups; the
		 * others close now (the old generation closes its own copies
		 * when it drains). */
		sup_ccfg_free(s, old);
		it->gen->owner = SUP_OWNER_CLUSTER;
		it->gen->item = NULL;
		/* It becomes the cluster's newest generation, even if a crash
		 * restart started one (with the old configuration) meanwhile:
		 * that one is older now and drains when this one accepts. */
		for (struct sup_gen **pp = &c->gens; *pp; pp = &(*pp)->next)
			if (*pp == it->gen) {
				*pp = it->gen->next;
				it->gen->next = c->gens;
				c->gens = it->gen;
				break;
			}
		sup_post_cluster(s, c, FSM_CE_COMMIT, "reload: modified");
		sup_post_gen(s, it->gen, FSM_GE_COMMIT, "reload: modified");
		break;
	}
	case PLAN_ADD:
		sup_cluster_list(s, c);
		it->gen->owner = SUP_OWNER_CLUSTER;
		it->gen->item = NULL;
		sup_post_gen(s, it->gen, FSM_GE_COMMIT, "reload: added");
		break;
	case PLAN_REMOVE:
		sup_post_cluster(s, c, FSM_CE_REMOVE, "cluster removed by reload");
		sup_cluster_unlist(s, c);  /* its name is free at once */
		break;
	case PLAN_KEEP:
		break;
	}
}

static void
reload_rollback_item(struct sup *s, struct sup_reload_item *it, unsigned actions,
		     const char *why)
{
	if ((actions & FSM_IA_STOP_NEW) && it->gen) {
		it->gen->owner = SUP_OWNER_NONE;
		it->gen->item = NULL;
		sup_post_gen(s, it->gen, FSM_GE_STOP, why);
	}
	if (actions & FSM_IA_FREE_NEW) {
		if (it->pi->op == PLAN_ADD && it->cluster)
			sup_post_cluster(s, it->cluster, FSM_CE_REMOVE, why);
		sup_ccfg_free(s, it->cc);  /* closes dups and new binds; shared sockets live on */
		it->cc = NULL;
	}
}

void
reload_item_event(struct sup *s, struct sup_reload_item *it, enum fsm_ievent e, const char *why)
{
	struct fsm_istep st = fsm_item_step(it->st, e);
	if (!st.allowed) {
		s->violations++;
		log_error("forbidden reload item event (bug)", "cluster=%s state=%s event=%s",
		    it->pi->name, fsm_istate_str(it->st), fsm_ievent_str(e));
		return;
	}
	if (it->st != st.next)
		log_debug("reload item", "cluster=%s transition=\"%s -> %s\" why=\"%s\"", it->pi->name,
		    fsm_istate_str(it->st), fsm_istate_str(st.next), why);
	it->st = st.next;
	if (st.actions & FSM_IA_RECORD_ERROR)
		snprintf(it->error, sizeof it->error, "%s", why);
	if (st.actions & FSM_IA_COMMIT)
		reload_commit_item(s, it);
	reload_rollback_item(s, it, st.actions, why);
}

/* ---- settling ---------------------------------------------------------------------------- */

/* The commits of a resolved reload, SUP_COMMIT_BATCH clusters a turn and
 * a turn every SUP_COMMIT_PACE_MS at most (a commit sends ACCEPT to the new
 * generation and, once it accepts, HANDOVER to the old one, which drains
 * and exits: a thousand at once would hold the loop, and wake two thousand
 * workers and end a thousand, on a machine whose admin API must still
 * answer). An item whose held generation ended
 * before its turn rolls back with its error; after an abort (ferryd
 * stopping) the rest roll back. */
static void
reload_commit_batch(struct sup *s, struct sup_reload *r)
{
	size_t done = 0;
	r->commit_at = 0;
	for (; r->commit_next < r->plan.n; r->commit_next++) {
		struct sup_reload_item *it = &r->items[r->commit_next];
		if (!it->commit)
			continue;
		if (done == SUP_COMMIT_BATCH && !r->aborted) {
			r->commit_at = s->now_ms + SUP_COMMIT_PACE_MS;
			return;
		}
		if (r->aborted || it->st != FSM_I_READY) {
			sup_post_item(s, it, FSM_IE_ROLLBACK, it->error[0] ? it->error :
			    "ferryd is stopping");
			continue;
		}
		sup_post_item(s, it, FSM_IE_COMMIT, "reload committed");
		if (it->pi->op != PLAN_KEEP)
			done++;
	}
}

uint64_t
reload_next_deadline(const struct sup *s)
{
	if (!s->reload)
		return 0;
	uint64_t a = s->reload->commit_at, b = s->reload->prepare_at;
	return !a ? b : !b ? a : a < b ? a : b;
}

static void
reload_resolve(struct sup *s, struct sup_reload *r)
{
	size_t n = r->plan.n;
	bool *ok = calloc(n + 1, sizeof *ok), *commit = calloc(n + 1, sizeof *commit);
	struct plan_running *run = calloc(n + 1, sizeof *run);
	bool per_cluster = r->next.reload_policy == CFG_RELOAD_PER_CLUSTER && !r->aborted;
	if (!ok || !commit || !run) {
		snprintf(r->resolve_error, sizeof r->resolve_error, "out of memory");
		per_cluster = false;
		free(ok);
		free(commit);
		free(run);
		ok = commit = NULL;
	} else {
		/* old_index of the plan is the position in this list */
		for (size_t i = 0; i < n; i++) {
			struct sup_reload_item *it = &r->items[i];
			ok[i] = it->st == FSM_I_READY && !r->aborted;
			if (it->pi->old_index >= 0) {
				run[it->pi->old_index].cl = it->cluster->ccfg->cl;
				run[it->pi->old_index].version = it->cluster->ccfg->version;
			}
		}
		if (plan_resolve(&r->plan, run, &r->next, ok, per_cluster, commit,
		    r->resolve_error, sizeof r->resolve_error) == -1)
			log_error("reload would put two clusters on one address; rolled back",
			    "error=\"%s\"", r->resolve_error);
		free(run);
	}
	bool any = false, all = !r->aborted;
	for (size_t i = 0; i < n; i++) {
		any = any || (commit && commit[i] && r->items[i].pi->op != PLAN_KEEP);
		all = all && commit && commit[i];
	}
	/* The settings that apply live take effect first, so the generations
	 * this reload replaces drain with the new drain_timeout. */
	if (any || all)
		reload_apply_live(s, &r->next);
	const char *first_failed = NULL;
	for (size_t i = 0; i < n; i++)
		if (r->items[i].st == FSM_I_FAILED && !first_failed)
			first_failed = r->items[i].pi->name;
	for (size_t i = 0; i < n; i++) {
		struct sup_reload_item *it = &r->items[i];
		if (commit && commit[i]) {
			it->commit = true;  /* posted in batches: reload_commit_batch */
			continue;
		}
		char why[300];
		if (r->aborted)
			snprintf(why, sizeof why, "%s", it->error[0] ? it->error : "ferryd is stopping");
		else if (it->st == FSM_I_FAILED)
			snprintf(why, sizeof why, "%s", it->error);
		else if (first_failed)
			snprintf(why, sizeof why, "reload rolled back (cluster %s failed)", first_failed);
		else if (r->resolve_error[0])
			snprintf(why, sizeof why, "reload rolled back: %s", r->resolve_error);
		else
			snprintf(why, sizeof why, "reload rolled back: a cluster it depends on "
			    "(a listening address it takes over) did not commit");
		if (it->st != FSM_I_FAILED && it->pi->op != PLAN_KEEP &&
		    (per_cluster || first_failed == NULL))
			snprintf(it->error, sizeof it->error, "%.*s", (int)sizeof it->error - 1, why);
		sup_post_item(s, it, FSM_IE_ROLLBACK, why);
	}
	free(ok);
	free(commit);
	r->resolved = true;
	reload_commit_batch(s, r);
}

void
reload_settle(struct sup *s)
{
	struct sup_reload *r = s->reload;
	if (!r)
		return;
	if (!r->resolved) {
		size_t pending = 0, failed = 0;
		for (size_t i = 0; i < r->plan.n; i++) {
			if (r->items[i].st == FSM_I_PENDING)
				pending++;
			else if (r->items[i].st == FSM_I_FAILED)
				failed++;
		}
		bool per_cluster = r->next.reload_policy == CFG_RELOAD_PER_CLUSTER;
		if (!r->aborted && pending && (per_cluster || failed == 0))
			return;  /* wait for the others */
		reload_resolve(s, r);
		return;  /* the queued commits and rollbacks run first */
	}
	if (r->commit_next < r->plan.n) {
		if (r->aborted)
			reload_commit_batch(s, r);  /* the rest roll back */
		return;  /* commits still to post (reload_tick) */
	}
	/* Every item is committed or rolled back: record it once. */
	sup_record_clear(&s->last_reload);
	bool failed = false, changed = false;
	for (size_t i = 0; i < r->plan.n; i++) {
		struct sup_reload_item *it = &r->items[i];
		if (it->st == FSM_I_ROLLED_BACK && it->pi->op != PLAN_KEEP) {
			failed = true;
			reload_add_error(s, "cluster %s: %s", it->pi->name,
			    it->error[0] ? it->error : "rolled back");
		}
		if (it->st == FSM_I_COMMITTED && it->pi->op != PLAN_KEEP)
			changed = true;
	}
	if (r->aborted && !s->last_reload.errors)
		reload_add_error(s, "ferryd is stopping");
	if (r->resolve_error[0])
		reload_add_error(s, "%s", r->resolve_error);
	reload_finish(s, r, failed || r->aborted ? SUP_RELOAD_FAILED : SUP_RELOAD_SUCCESS,
	    changed);
}

void
reload_abort(struct sup *s, const char *why)
{
	struct sup_reload *r = s->reload;
	if (!r)
		return;
	log_warn("reload aborted", "why=\"%s\"", why);
	r->aborted = true;
	sup_dispatch(s);  /* settles it (or the chain in progress will) */
}

void
reload_tick(struct sup *s)
{
	struct sup_reload *r = s->reload;
	if (r && r->prepare_at && s->now_ms >= r->prepare_at)
		reload_prepare_batch(s, r);
	if (r && r->commit_at && s->now_ms >= r->commit_at)
		reload_commit_batch(s, r);
	if (!s->hup_at || s->now_ms < s->hup_at)
		return;
	s->hup_at = 0;
	if (!s->hup_pending || s->reload || upgrade_busy(s) || s->stopping)
		return;
	s->hup_pending = false;
	log_info("running the reload requested during the previous one", "%s", "");
	sup_reload_signal(s);
}
/* Prepare the next SUP_PREPARE_BATCH added or modified clusters of r: their
 * configuration (canonical text, parsed back), their listening sockets
 * (new addresses bound, unchanged ones shared: a dup of the listed
 * configuration's socket), a new generation held in `initializing`. The
 * rest wait for the next loop turn (a thousand at once would hold the
 * loop); nothing more is prepared once the reload is resolved (a failure
 * under all-or-nothing) or aborted. */
static void
reload_prepare_batch(struct sup *s, struct sup_reload *r)
{
	char err[512];
	size_t done = 0;
	r->prepare_at = 0;
	if (r->resolved || r->aborted) {
		r->prepare_next = r->plan.n;
		return;
	}
	/* Sockets of every listed configuration are candidates for sharing
	 * (out of memory for the index: none are, and the binds of the same
	 * addresses fail). Built per batch: a cluster may have released its
	 * sockets meanwhile. */
	struct sup_listen_index reuse;
	sup_listen_index_build(s, &reuse);
	for (; r->prepare_next < r->plan.n; r->prepare_next++) {
		struct sup_reload_item *it = &r->items[r->prepare_next];
		if (it->pi->op != PLAN_ADD && it->pi->op != PLAN_MODIFY)
			continue;
		if (done++ == SUP_PREPARE_BATCH) {
			r->prepare_at = s->now_ms;  /* the next turn, after the loop's I/O */
			break;
		}
		const struct cfg_cluster *ncl = &r->next.clusters[it->pi->new_index];
		struct sup_ccfg *cc = sup_ccfg_new(s, ncl, err, sizeof err);
		if (cc && sup_ccfg_listen(s, cc, &reuse, err, sizeof err) == -1) {
			sup_ccfg_free(s, cc);
			cc = NULL;
		}
		if (!cc) {
			sup_post_item(s, it, FSM_IE_FAILED, err);
			continue;
		}
		if (it->pi->op == PLAN_ADD) {
			it->cluster = sup_cluster_new(s, cc, false);
			if (!it->cluster) {
				sup_ccfg_free(s, cc);
				sup_post_item(s, it, FSM_IE_FAILED, "out of memory");
				continue;
			}
		} else {
			it->cc = cc;
		}
		it->gen = sup_gen_start(s, it->cluster, cc, SUP_OWNER_RELOAD, it,
		    r->next.init_timeout_ms, it->pi->op == PLAN_ADD ? "reload: added" :
		    "reload: modified");
		if (!it->gen) {
			sup_post_item(s, it, FSM_IE_FAILED, "out of memory");
			continue;
		}
		/* A modified cluster whose upstream changed commits only once the
		 * new upstream answered (reload_upstream_check). */
		struct sup_gen *serving = sup_cluster_serving(it->cluster);
		if (it->pi->op == PLAN_MODIFY && r->next.reload_upstream_check && serving &&
		    serving != it->gen && strcmp(serving->upstream_key, it->gen->upstream_key) != 0)
			it->gen->need_probe = true;
	}
	sup_listen_index_free(&reuse);
}

/* ---- starting ---------------------------------------------------------------------------- */

/* A new reload, in progress from now on, unless one is (SUP_CONFLICT),
 * ferryd is stopping (SUP_UNAVAILABLE) or memory is short (SUP_FAILED):
 * then *rec is the answer and *out NULL. */
static enum sup_result
reload_new(struct sup *s, const char *source, struct sup_reload **out,
	   const struct sup_reload_record **rec)
{
	static struct sup_reload_record conflict;
	*out = NULL;
	if (s->reload) {
		sup_record_clear(&conflict);
		conflict.conflict = true;
		conflict.timestamp_ms = s->reload->started_wall;
		*rec = &conflict;
		return SUP_CONFLICT;
	}
	if (upgrade_busy(s)) {
		sup_record_clear(&conflict);
		conflict.conflict = true;
		conflict.timestamp_ms = sup_upgrade_since(s);
		conflict.errors = sup_strv_add(NULL, "an upgrade of ferryd is in progress");
		*rec = &conflict;
		return SUP_CONFLICT;
	}
	if (s->stopping) {
		sup_record_clear(&conflict);
		conflict.aborted = true;
		*rec = &conflict;
		return SUP_UNAVAILABLE;
	}
	struct sup_reload *r = calloc(1, sizeof *r);
	if (!r) {
		sup_record_clear(&conflict);
		conflict.errors = sup_strv_add(NULL, "out of memory");
		conflict.status = SUP_RELOAD_FAILED;
		*rec = &conflict;
		return SUP_FAILED;
	}
	r->started_wall = s->now_wall_ms;
	r->started_mono = s->now_ms;
	snprintf(r->source, sizeof r->source, "%s", source);
	s->reload = r;
	sup_record_clear(&s->last_reload);
	if (s->ops->reload_begin)
		s->ops->reload_begin(s);
	*out = r;
	return SUP_OK;
}

enum sup_result
sup_reload_reject(struct sup *s, const char *version, const char *const *errors,
		  size_t n_errors, const char *source, const struct sup_reload_record **rec)
{
	struct sup_reload *r;
	enum sup_result res = reload_new(s, source, &r, rec);
	if (!r)
		return res;
	r->posted = true;
	snprintf(r->version, sizeof r->version, "%s", version);
	log_info("reload requested", "source=%s version=%s posted=true", source, r->version);
	for (size_t i = 0; i < n_errors; i++)
		reload_add_error(s, "%s", errors[i]);
	if (!n_errors)
		reload_add_error(s, "invalid configuration");
	return reload_end_now(s, r, SUP_RELOAD_REJECTED, rec);
}

enum sup_result
sup_reload_start(struct sup *s, const char *text, size_t len, const char *source,
		 uint64_t waiter, const struct sup_reload_record **rec)
{
	struct sup_reload *r;
	enum sup_result res = reload_new(s, source, &r, rec);
	if (!r)
		return res;

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
			return reload_end_now(s, r, SUP_RELOAD_REJECTED, rec);
		}
	}
	if (!r->text) {
		reload_add_error(s, "out of memory");
		return reload_end_now(s, r, SUP_RELOAD_FAILED, rec);
	}
	sup_hash_hex(r->text, r->len, r->version, sizeof r->version);
	log_info("reload requested", "source=%s version=%s posted=%s", source, r->version,
	    r->posted ? "true" : "false");

	/* 2. Parse and validate, no side effects. */
	struct cfg_errors errs;
	cfg_errors_init(&errs);
	if (cfg_parse_string(name, r->text, r->len, &r->next, &errs) == -1 ||
	    tlsmat_read(&r->next, &errs) == -1) {
		cfg_free(&r->next);
		for (size_t i = 0; i < errs.n; i++)
			reload_add_error(s, "%s", errs.msg[i]);
		if (!errs.n)
			reload_add_error(s, "invalid configuration");
		cfg_errors_free(&errs);
		return reload_end_now(s, r, SUP_RELOAD_REJECTED, rec);
	}
	r->have_next = true;
	/* 2b. The admin API's credentials (read even when nothing else changed) */
	if (s->ops->admin_prepare &&
	    s->ops->admin_prepare(s, &r->next, err, sizeof err) == -1) {
		reload_add_error(s, "%s", err);
		cfg_errors_free(&errs);
		return reload_end_now(s, r, SUP_RELOAD_REJECTED, rec);
	}
	/* 3. Diff against what is listed (removed clusters still draining are
	 * in limbo and do not count: their names are free). */
	struct plan_running *run = calloc(s->n_clusters + 1, sizeof *run);
	if (!run) {
		cfg_errors_free(&errs);
		reload_add_error(s, "out of memory");
		return reload_end_now(s, r, SUP_RELOAD_FAILED, rec);
	}
	for (size_t i = 0; i < s->n_clusters; i++) {
		run[i].cl = s->clusters[i]->ccfg->cl;
		run[i].version = s->clusters[i]->ccfg->version;
	}
	if (plan_make(run, s->n_clusters, &r->next, &r->plan) == -1 ||
	    !(r->items = calloc(r->plan.n + 1, sizeof *r->items))) {
		free(run);
		cfg_errors_free(&errs);
		reload_add_error(s, "out of memory");
		return reload_end_now(s, r, SUP_RELOAD_FAILED, rec);
	}
	free(run);
	/* 4. Same bytes as running, and the same contents of the files they
	 * name (a renewed certificate under the same path is a change: its
	 * cluster's version differs): nothing to do. */
	if (strcmp(r->version, s->config_version) == 0 &&
	    r->plan.n_add + r->plan.n_modify + r->plan.n_remove == 0) {
		cfg_errors_free(&errs);
		return reload_end_now(s, r, SUP_RELOAD_UNCHANGED, rec);
	}
	if (plan_check_restart_keys(&s->cfg, &r->next, &errs) > 0) {
		for (size_t i = 0; i < errs.n; i++)
			reload_add_error(s, "%s", errs.msg[i]);
		cfg_errors_free(&errs);
		return reload_end_now(s, r, SUP_RELOAD_REJECTED, rec);
	}
	cfg_errors_free(&errs);

	for (size_t i = 0; i < r->plan.n; i++) {
		struct sup_reload_item *it = &r->items[i];
		it->pi = &r->plan.items[i];
		it->st = FSM_I_READY;  /* keep and remove need no preparation */
		if (it->pi->old_index >= 0)
			it->cluster = s->clusters[it->pi->old_index];
		if (it->pi->op != PLAN_KEEP)
			log_info("reload plan", "cluster=%s op=%s", it->pi->name,
			    plan_op_str(it->pi->op));
	}
	/* one line for the whole plan: kept clusters are not listed one by one */
	log_info("reload plan", "keep=%zu add=%zu modify=%zu remove=%zu", r->plan.n_keep,
	    r->plan.n_add, r->plan.n_modify, r->plan.n_remove);

	/* 5. Prepare: bind new addresses, start held generations, in batches
	 * (reload_prepare_batch); every cluster to prepare is pending until
	 * its turn. */
	for (size_t i = 0; i < r->plan.n; i++)
		if (r->items[i].pi->op == PLAN_ADD || r->items[i].pi->op == PLAN_MODIFY)
			r->items[i].st = FSM_I_PENDING;
	reload_prepare_batch(s, r);
	sup_dispatch(s);
	if (s->reload == r) {
		r->waiter = waiter;   /* answered when it settles */
		return SUP_DEFERRED;
	}
	/* Finished during this call (nothing to prepare, or it all failed). */
	*rec = &s->last_reload;
	return SUP_OK;
}

void
sup_reload_signal(struct sup *s)
{
	if (s->reload || upgrade_busy(s)) {
		if (!s->hup_pending)
			log_info(s->reload ? "SIGHUP during a reload: one more reload will follow" :
			    "SIGHUP during an upgrade: a reload will follow it", "%s", "");
		s->hup_pending = true;
		return;
	}
	const struct sup_reload_record *rec;
	sup_reload_start(s, NULL, 0, "SIGHUP", 0, &rec);
}
