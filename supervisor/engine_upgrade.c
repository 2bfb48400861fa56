/*
 * engine_upgrade — an upgrade of ferryd itself in the engine
 * (docs/design.md §11): the two machines of upgrade.h carried out over the
 * model, on either side — the running ferryd (the predecessor) and the one
 * it starts from the file it was started from (the successor). Part of the
 * engine (engine_priv.h); pure like engine.c: every effect goes through
 * s->ops->upgrade (upgrade_io.c) or the model.
 *
 * Predecessor. Before the commit point it changes nothing that serves:
 * crash restarts of a cluster wait and ticket keys do not rotate (the
 * successor inherits both deadlines), reloads, drains and restarts are
 * refused (409); a rollback only kills the successor, resumes and records.
 * At the commit it gives up its sockets (the successor holds its own
 * copies of the same socket objects), hands every generation over
 * (IPC_HANDOVER, as a reload does) and removes every cluster, so its model
 * drains to nothing; each connection an old worker hands over is relayed
 * to the successor (UPG_CONN) instead of a newer local generation; when its
 * last worker is gone it says BYE and exits.
 *
 * Successor. The model is built from the record (sup_upgrade_restore), a
 * held generation started for every cluster that serves (owner
 * SUP_OWNER_UPGRADE); once all are held it says PREPARED; at COMMIT they
 * accept. While the predecessor hands over, its counters are shown
 * (c->carried) and its connections adopted by the least loaded worker.
 *
 * This file: the machines' events and actions, and the hooks the rest of
 * the engine calls; the channel's messages are engine_upgrade_msg.c's, the
 * successor's model from the record engine_upgrade_restore.c's.
 */
#include "supervisor/engine_priv.h"

#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/buildinfo.h"
#include "common/log.h"
#include "supervisor/staterec.h"
#include "supervisor/upgrade.h"
#include "supervisor/upgproto.h"

/* ---- small things ------------------------------------------------------------------ */

const struct sup_upgrade_ops *
upgrade_ops(const struct sup *s)
{
	return s->ops->upgrade;
}

void
upgrade_error(struct sup_upgrade *u, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	u->errors = sup_strv_add(u->errors, buf);
}

const char *
upgrade_state_name(const struct sup_upgrade *u)
{
	return u->successor ? upg_istate_str((enum upg_istate)u->st) :
	    upg_ostate_str((enum upg_ostate)u->st);
}

void
upgrade_dispose(struct sup_upgrade *u)
{
	sup_strv_free(u->errors);
	free(u);
}

/* The upgrade is over on this side: freed after the chain. */
static void
upg_finish(struct sup *s, struct sup_upgrade *u)
{
	if (s->upgrade == u)
		s->upgrade = NULL;
	u->next_free = s->upgrade_dead;
	s->upgrade_dead = u;
	s->reap_pending = true;
	if (s->hup_pending && !s->stopping)
		s->hup_at = s->now_ms;  /* the SIGHUP it held back */
}

void
upgrade_reap(struct sup *s)
{
	while (s->upgrade_dead) {
		struct sup_upgrade *u = s->upgrade_dead;
		s->upgrade_dead = u->next_free;
		upgrade_dispose(u);
	}
}

/* sup_free(): whatever is left. */
void
upgrade_free(struct sup *s)
{
	if (s->upgrade)
		upgrade_dispose(s->upgrade);
	s->upgrade = NULL;
	upgrade_reap(s);
}

bool
upgrade_frozen(const struct sup *s)
{
	const struct sup_upgrade *u = s->upgrade;
	if (!u)
		return false;
	return u->successor ? u->st < UPG_I_COMMITTED :
	    upg_ostate_precommit((enum upg_ostate)u->st);
}

bool
upgrade_busy(const struct sup *s)
{
	return s->upgrade != NULL;
}

bool
upgrade_holds_exit(const struct sup *s)
{
	return s->upgrade && s->upgrade->successor && s->upgrade->peer_open;
}

const char *
sup_upgrade_phase(const struct sup *s)
{
	return s->upgrade ? upgrade_state_name(s->upgrade) : NULL;
}

uint64_t
sup_upgrade_since(const struct sup *s)
{
	return s->upgrade ? s->upgrade->started_wall : 0;
}

int32_t
sup_upgrade_peer(const struct sup *s)
{
	return s->upgrade ? s->upgrade->peer_pid : 0;
}

bool
sup_upgrade_is_successor(const struct sup *s)
{
	return s->upgrade && s->upgrade->successor;
}

bool
sup_upgrade_may_notify(const struct sup *s)
{
	const struct sup_upgrade *u = s->upgrade;
	if (!u)
		return true;
	if (u->successor)
		return u->st >= UPG_I_TAIL;
	return upg_ostate_precommit((enum upg_ostate)u->st) || u->st == UPG_O_IDLE ||
	    u->st == UPG_O_ROLLED_BACK;
}

int
upgrade_send_json(struct sup *s, uint32_t type, struct json_t *j)
{
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text)
		return -1;
	int rc = upgrade_ops(s)->send(s, type, text, strlen(text));
	free(text);
	return rc;
}

static json_t *
upg_errors_json(char *const *v)
{
	json_t *a = json_array();
	for (; a && v && *v; v++) {
		json_t *m = json_string(*v);
		json_array_append_new(a, m ? m : json_string("(not valid UTF-8)"));
	}
	return a;
}

/* ---- predecessor: start ------------------------------------------------------------- */

enum sup_result
sup_upgrade_start(struct sup *s, const char *source, uint64_t waiter,
		  const struct sup_upgrade_record **rec, char *err, size_t errlen)
{
	*rec = &s->last_upgrade;
	if (s->stopping) {
		snprintf(err, errlen, "ferryd is stopping");
		return SUP_UNAVAILABLE;
	}
	if (s->upgrade) {
		snprintf(err, errlen, "an upgrade is in progress (%s)", upgrade_state_name(s->upgrade));
		return SUP_CONFLICT;
	}
	if (s->reload) {
		snprintf(err, errlen, "a reload is in progress");
		return SUP_CONFLICT;
	}
	for (size_t i = 0; i < s->n_clusters; i++)
		if (s->clusters[i]->restart_waiter) {
			snprintf(err, errlen, "a restart of cluster '%s' is in progress",
			    s->clusters[i]->name);
			return SUP_CONFLICT;
		}
	if (s->pid == 1) {
		snprintf(err, errlen, "ferryd runs as PID 1 (a container's init): its exit would "
		    "end the container; roll out a new image instead");
		return SUP_CONFLICT;
	}
	if (!upgrade_ops(s) || !s->exec_path) {
		snprintf(err, errlen, "this ferryd cannot start another (no upgrade support)");
		return SUP_CONFLICT;
	}
	struct sup_upgrade *u = calloc(1, sizeof *u);
	if (!u) {
		snprintf(err, errlen, "out of memory");
		return SUP_CONFLICT;
	}
	u->st = UPG_O_IDLE;
	snprintf(u->source, sizeof u->source, "%s", source);
	u->started_mono = s->now_ms;
	u->started_wall = s->now_wall_ms;
	s->upgrade = u;
	log_info("upgrade requested", "source=%s exec=\"%s\" version=%s build=%s", source,
	    s->exec_path, buildinfo_version(), buildinfo_id());
	sup_post_upgrade(s, UPG_OE_START, "");
	sup_dispatch(s);
	if (s->upgrade == u) {
		u->waiter = waiter;
		return SUP_DEFERRED;
	}
	snprintf(err, errlen, "%s", s->last_upgrade.errors && s->last_upgrade.errors[0] ?
	    s->last_upgrade.errors[0] : "upgrade failed");
	return SUP_FAILED;
}

/* ---- predecessor: outcomes --------------------------------------------------------- */

static void
upg_record(struct sup *s, struct sup_upgrade *u, enum sup_upgrade_status st, const char *phase)
{
	struct sup_upgrade_record *r = &s->last_upgrade;
	sup_upgrade_record_clear(r);
	r->status = st;
	r->timestamp_ms = u->started_wall;
	r->duration_ms = s->now_ms - u->started_mono;
	snprintf(r->source, sizeof r->source, "%s", u->source);
	snprintf(r->phase, sizeof r->phase, "%s", phase);
	snprintf(r->from_version, sizeof r->from_version, "%s", buildinfo_version());
	snprintf(r->from_build, sizeof r->from_build, "%s", buildinfo_id());
	snprintf(r->to_version, sizeof r->to_version, "%s", u->peer_version);
	snprintf(r->to_build, sizeof r->to_build, "%s", u->peer_build);
	r->from_pid = s->pid;
	r->to_pid = u->peer_pid;
	r->errors = u->errors;
	u->errors = NULL;
	s->upgrade_results[st]++;
}

static void
upg_answer(struct sup *s, struct sup_upgrade *u)
{
	if (u->waiter && upgrade_ops(s)->answer)
		upgrade_ops(s)->answer(s, u->waiter, &s->last_upgrade);
	u->waiter = 0;
}

static void
upg_rollback(struct sup *s, struct sup_upgrade *u, bool rejected, const char *why)
{
	const struct sup_upgrade_ops *o = upgrade_ops(s);
	o->end(s);
	u->peer_open = false;
	o->admin(s, SUP_UPG_ADMIN_RESUME);
	if (why[0])
		upgrade_error(u, "%s", why);
	else if (!u->errors)
		upgrade_error(u, "upgrade failed");
	upg_record(s, u, rejected ? SUP_UPGRADE_REJECTED : SUP_UPGRADE_FAILED, u->phase);
	const struct sup_upgrade_record *r = &s->last_upgrade;
	log_warn("upgrade rolled back: the running ferryd serves on", "status=%s phase=%s "
	    "successor_pid=%d duration_ms=%llu error=\"%s\"", sup_upgrade_status_str(r->status),
	    r->phase, (int)r->to_pid, (unsigned long long)r->duration_ms,
	    r->errors && r->errors[0] ? r->errors[0] : "");
	char status[600];
	snprintf(status, sizeof status, "upgrade %s during %s, rolled back: %s",
	    sup_upgrade_status_str(r->status), r->phase,
	    r->errors && r->errors[0] ? r->errors[0] : "");
	if (!s->stopping)
		o->notify(s, SUP_UPG_NOTIFY_READY, 0, status);
	upg_answer(s, u);
	upg_finish(s, u);
}

/* Every generation goes: its connections move to the successor (relayed
 * by upgrade_relay_out), or close at request boundaries over drain_spread
 * when they cannot (TLS, handover = off, a connection record the
 * successor's workers do not adopt). Every cluster is removed: its
 * sockets (our copies) close at once, its name is the successor's. */
static void
upg_hand_over(struct sup *s, struct sup_upgrade *u)
{
	bool movable = u->conn_min <= IPC_CONN_RECORD_VERSION &&
	    IPC_CONN_RECORD_VERSION <= u->conn_max;
	for (size_t pass = 0; pass < 2; pass++) {
		struct sup_cluster **arr = pass ? s->limbo : s->clusters;
		size_t n = pass ? s->n_limbo : s->n_clusters;
		for (size_t i = 0; i < n; i++) {
			struct sup_cluster *c = arr[i];
			for (struct sup_gen *g = c->gens; g; g = g->next) {
				if (g->st != FSM_G_ACCEPTING)
					continue;
				g->replaced = true;
				g->replaced_at_ms = s->now_ms;
				g->handover_keep = movable && c->ccfg && c->ccfg->cl->handover;
				sup_post_gen(s, g, FSM_GE_HANDOVER, "upgraded: the new ferryd serves it");
			}
			if (c->st != FSM_C_LEAVING && c->st != FSM_C_GONE)
				sup_post_cluster(s, c, FSM_CE_REMOVE, "upgraded: the new ferryd serves it");
		}
	}
	if (!movable)
		log_warn("the new ferryd's workers do not adopt this version's connection records: "
		    "connections close at request boundaries over drain_spread instead of moving",
		    "record=%d successor_adopts=%u..%u", IPC_CONN_RECORD_VERSION, u->conn_min,
		    u->conn_max);
}

static void
upg_commit(struct sup *s, struct sup_upgrade *u)
{
	const struct sup_upgrade_ops *o = upgrade_ops(s);
	snprintf(u->phase, sizeof u->phase, "committed");
	upg_record(s, u, SUP_UPGRADE_SUCCESS, "committed");
	char status[256];
	snprintf(status, sizeof status, "upgraded to ferryd %s (build %.12s), pid %d",
	    u->peer_version, u->peer_build, (int)u->peer_pid);
	o->notify(s, SUP_UPG_NOTIFY_MAINPID, u->peer_pid, status);
	if (o->send(s, UPG_MAIN, NULL, 0) == -1)
		log_warn("upgrade: cannot tell the new ferryd it is the main process", "%s", "");
	o->admin(s, SUP_UPG_ADMIN_CLOSE);
	s->hup_pending = false;  /* carried in COMMIT: the successor runs it */
	s->hup_at = 0;
	log_info("upgrade committed: the new ferryd serves; handing connections over",
	    "from_version=%s to_version=%s successor_pid=%d duration_ms=%llu",
	    buildinfo_version(), u->peer_version, (int)u->peer_pid,
	    (unsigned long long)s->last_upgrade.duration_ms);
	upg_hand_over(s, u);
	upg_answer(s, u);
	u->counters_at = s->now_ms + SUP_UPGRADE_COUNTERS_MS;
}

static int
upg_send_counters(struct sup *s)
{
	for (size_t pass = 0; pass < 2; pass++) {
		struct sup_cluster **arr = pass ? s->limbo : s->clusters;
		size_t n = pass ? s->n_limbo : s->n_clusters;
		for (size_t i = 0; i < n; i++) {
			/* limbo: clusters a reload removed before the upgrade;
			 * their names may be taken by listed ones */
			if (pass && sup_find_cluster(s, arr[i]->name))
				continue;
			size_t len;
			char *text = staterec_counters_msg(arr[i], &len);
			int rc = text ? upgrade_ops(s)->send(s, UPG_COUNTERS, text, len) : -1;
			free(text);
			if (rc == -1)
				return -1;
		}
	}
	return 0;
}

/* Sum of this process's replaced generations: counted as they go. */
void
upgrade_gen_gone(struct sup *s, uint64_t handed_over, uint64_t drained, uint64_t forced)
{
	struct sup_upgrade *u = s->upgrade;
	if (!u || u->successor || u->st != UPG_O_HANDING_OVER)
		return;
	u->handed_over += handed_over;
	u->drained += drained;
	u->forced += forced;
	u->tail_valid = true;
}

static void
upg_bye(struct sup *s, struct sup_upgrade *u)
{
	if (u->peer_open) {
		upg_send_counters(s);
		upgrade_send_json(s, UPG_BYE, json_pack("{s:I, s:I, s:I}",
		    "handedOver", (json_int_t)u->handed_over, "closed", (json_int_t)u->drained,
		    "forced", (json_int_t)u->forced));
	}
	log_info("upgrade done: every connection moved or closed; exiting", "handed_over=%llu "
	    "closed=%llu forced=%llu tail_ms=%llu", (unsigned long long)u->handed_over,
	    (unsigned long long)u->drained, (unsigned long long)u->forced,
	    (unsigned long long)(s->now_ms - u->started_mono - s->last_upgrade.duration_ms));
	s->exit_code = 0;
	upgrade_ops(s)->exit(s, 0);
}

static void
upg_hurry(struct sup *s, struct sup_upgrade *u)
{
	if (u->hurried)
		return;
	u->hurried = true;
	uint64_t at = s->now_ms + SUP_STOP_GRACE_MS;
	log_info("upgrade: finishing the hand-over now", "grace_ms=%d", SUP_STOP_GRACE_MS);
	for (size_t pass = 0; pass < 2; pass++) {
		struct sup_cluster **arr = pass ? s->limbo : s->clusters;
		size_t n = pass ? s->n_limbo : s->n_clusters;
		for (size_t i = 0; i < n; i++)
			for (struct sup_gen *g = arr[i]->gens; g; g = g->next)
				if (g->st == FSM_G_DRAINING && (!g->stop_at || g->stop_at > at))
					g->stop_at = at;
	}
}

/* The predecessor's side of each action (upgrade.h). */
static void
upg_out_actions(struct sup *s, struct sup_upgrade *u, unsigned a, const char *why)
{
	const struct sup_upgrade_ops *o = upgrade_ops(s);
	char err[512];
	if (a & UPG_OA_DISARM)
		u->deadline = 0;
	if (a & UPG_OA_SPAWN) {
		snprintf(u->phase, sizeof u->phase, "spawning");
		o->notify(s, SUP_UPG_NOTIFY_RELOADING, 0, NULL);
		if (o->spawn(s, &u->peer_pid, err, sizeof err) == -1) {
			sup_post_upgrade(s, UPG_OE_FAILED, err);
		} else {
			u->peer_open = true;
			log_info("upgrade: new ferryd started", "successor_pid=%d exec=\"%s\"",
			    (int)u->peer_pid, s->exec_path);
		}
	}
	if (a & UPG_OA_SEND_STATE) {
		snprintf(u->phase, sizeof u->phase, "transfer");
		if (o->send_state(s, u->record, err, sizeof err) == -1)
			sup_post_upgrade(s, UPG_OE_FAILED, err);
	}
	if (a & UPG_OA_ARM_PHASE)
		u->deadline = s->now_ms + s->cfg.init_timeout_ms;
	if (a & UPG_OA_ARM_PREPARE) {
		snprintf(u->phase, sizeof u->phase, "preparing");
		u->deadline = s->now_ms + s->cfg.init_timeout_ms + SUP_STOP_GRACE_MS +
		    sup_start_pace_ms(s);  /* the successor starts every worker, paced */
	}
	if (a & UPG_OA_SEND_COMMIT) {
		snprintf(u->phase, sizeof u->phase, "committing");
		/* from here requests to the admin API wait in its backlog for
		 * the successor (nothing is refused) */
		o->admin(s, SUP_UPG_ADMIN_PAUSE);
		if ((upg_send_counters(s) == -1 ||
		    upgrade_send_json(s, UPG_COMMIT, json_pack("{s:b, s:s, s:I}",
		    "hupPending", s->hup_pending, "source", u->source,
		    "startedAt", (json_int_t)u->started_wall)) == -1) &&
		    errno != EPIPE && errno != ECONNRESET)
			sup_post_upgrade(s, UPG_OE_FAILED, "cannot send COMMIT to the new ferryd");
		/* (a successor that has gone: its exit is the news, with its
		 * cause, and comes before the commit deadline) */
	}
	if (a & UPG_OA_ARM_COMMIT)
		u->deadline = s->now_ms + SUP_UPGRADE_COMMIT_MS;
	if (a & UPG_OA_COMMIT)
		upg_commit(s, u);
	if (a & (UPG_OA_ROLLBACK | UPG_OA_REJECT)) {
		upg_rollback(s, u, (a & UPG_OA_REJECT) != 0, why);
		return;  /* u is finished */
	}
	if (a & UPG_OA_PEER_GONE) {
		u->peer_open = false;
		log_warn("upgrade: the new ferryd went away while this one hands over; connections "
		    "in transit close at request boundaries", "why=\"%s\"", why);
		for (size_t i = 0; i < s->n_relays; i++)
			if (!s->relays[i].to)
				s->relays[i].deadline_ms = s->now_ms;  /* unknown, at the next tick */
	}
	if (a & UPG_OA_HURRY)
		upg_hurry(s, u);
	if (a & UPG_OA_BYE)
		upg_bye(s, u);
}

/* ---- successor ---------------------------------------------------------------------- */

static void
upg_in_abort(struct sup *s, struct sup_upgrade *u, const char *why)
{
	if (why[0])
		upgrade_error(u, "%s", why);
	log_error("upgrade: this new ferryd gives up before the commit; the running one serves "
	    "on", "phase=%s error=\"%s\"", upgrade_state_name(u),
	    u->errors && u->errors[0] ? u->errors[0] : "");
	if (u->peer_open)
		upgrade_send_json(s, UPG_PREPARE_FAILED, json_pack("{s:o}", "errors",
		    upg_errors_json(u->errors)));
	sup_kill_all(s);
	s->exit_code = 1;
	upgrade_ops(s)->exit(s, 1);
}

static void
upg_in_commit(struct sup *s, struct sup_upgrade *u)
{
	for (size_t i = 0; i < s->n_clusters; i++)
		for (struct sup_gen *g = s->clusters[i]->gens; g; g = g->next)
			if (g->owner == SUP_OWNER_UPGRADE) {
				g->owner = SUP_OWNER_CLUSTER;
				sup_post_gen(s, g, FSM_GE_COMMIT, "upgrade committed");
			}
	struct sup_upgrade_record *r = &s->last_upgrade;
	sup_upgrade_record_clear(r);
	r->status = SUP_UPGRADE_SUCCESS;
	r->timestamp_ms = u->started_wall;
	r->duration_ms = s->now_wall_ms > u->started_wall ? s->now_wall_ms - u->started_wall : 0;
	snprintf(r->source, sizeof r->source, "%s", u->source);
	snprintf(r->phase, sizeof r->phase, "committed");
	snprintf(r->from_version, sizeof r->from_version, "%s", u->peer_version);
	snprintf(r->from_build, sizeof r->from_build, "%s", u->peer_build);
	snprintf(r->to_version, sizeof r->to_version, "%s", buildinfo_version());
	snprintf(r->to_build, sizeof r->to_build, "%s", buildinfo_id());
	r->from_pid = u->peer_pid;
	r->to_pid = s->pid;
	s->upgrade_results[SUP_UPGRADE_SUCCESS]++;
	upgrade_ops(s)->commit(s);
	if (upgrade_ops(s)->send(s, UPG_COMMITTED, NULL, 0) == -1)
		log_warn("upgrade: cannot tell the old ferryd we committed", "%s", "");
	log_info("upgrade committed: serving", "from_version=%s from_pid=%d", u->peer_version,
	    (int)u->peer_pid);
}

/* The predecessor is gone: its counters become ours for good. */
static void
upg_in_fold(struct sup *s, struct sup_upgrade *u)
{
	for (size_t pass = 0; pass < 2; pass++) {
		struct sup_cluster **arr = pass ? s->limbo : s->clusters;
		size_t n = pass ? s->n_limbo : s->n_clusters;
		for (size_t i = 0; i < n; i++) {
			struct sup_cluster *c = arr[i];
			if (c->carried && !c->retired)
				c->retired = metrics_totals_new();
			if (c->carried && c->retired)
				metrics_retire(c->retired, c->carried);
			metrics_unmap(c->carried);
			c->carried = NULL;
			c->carried_gauges = false;
		}
	}
	struct sup_upgrade_record *r = &s->last_upgrade;
	r->completed_ms = s->now_wall_ms;
	if (u->tail_valid) {
		r->tail_valid = true;
		r->handed_over = u->handed_over;
		r->closed = u->drained;
		r->forced = u->forced;
	}
	u->peer_open = false;
	log_info("upgrade complete: the old ferryd is gone", "handed_over=%llu closed=%llu "
	    "forced=%llu", (unsigned long long)u->handed_over, (unsigned long long)u->drained,
	    (unsigned long long)u->forced);
	upg_finish(s, u);
}

static void
upg_in_actions(struct sup *s, struct sup_upgrade *u, unsigned a, const char *why)
{
	const struct sup_upgrade_ops *o = upgrade_ops(s);
	if (a & UPG_IA_DISARM)
		u->deadline = 0;
	if (a & UPG_IA_ARM)
		u->deadline = s->now_ms + s->cfg.init_timeout_ms + SUP_UPGRADE_COMMIT_MS +
		    sup_start_pace_ms(s);
	if (a & UPG_IA_SEND_PREPARED) {
		json_t *cl = json_array();
		for (size_t i = 0; i < s->n_clusters; i++) {
			struct sup_gen *g = sup_cluster_current(s->clusters[i]);
			for (g = s->clusters[i]->gens; g && g->owner != SUP_OWNER_UPGRADE; g = g->next)
				;
			json_array_append_new(cl, json_pack("{s:s, s:I}", "name",
			    s->clusters[i]->name, "generation", (json_int_t)(g ? g->generation : 0)));
		}
		if (upgrade_send_json(s, UPG_PREPARED, json_pack("{s:o}", "clusters", cl)) == -1)
			sup_post_upgrade(s, UPG_IE_PEER_GONE, "cannot send PREPARED");
		else
			log_info("upgrade: every cluster prepared, waiting for the commit",
			    "clusters=%zu", s->n_clusters);
	}
	if (a & UPG_IA_ABORT) {
		upg_in_abort(s, u, why);
		return;
	}
	if (a & UPG_IA_COMMIT)
		upg_in_commit(s, u);
	if (a & UPG_IA_READY) {
		o->ready(s);
		log_info("upgrade: this ferryd is the main process now", "%s", "");
	}
	if (a & UPG_IA_SEND_STOP)
		o->send(s, UPG_STOP, NULL, 0);
	if (a & UPG_IA_FOLD) {
		/* BYE is the predecessor's last word: the channel closes now,
		 * not at its EOF, which waits for the predecessor's exit (its
		 * admin process finishing its last answers): another upgrade
		 * may start at once */
		o->end(s);
		upg_in_fold(s, u);
	}
}

void
upgrade_event(struct sup *s, struct sup_upgrade *u, int e, const char *why)
{
	if (u != s->upgrade)
		return;  /* an event for an upgrade that is over */
	unsigned actions;
	int from = u->st, next;
	bool ok;
	if (u->successor) {
		struct upg_istep st = upg_in_step((enum upg_istate)u->st, (enum upg_ievent)e);
		ok = st.allowed;
		next = (int)st.next;
		actions = st.actions;
	} else {
		struct upg_ostep st = upg_out_step((enum upg_ostate)u->st, (enum upg_oevent)e);
		ok = st.allowed;
		next = (int)st.next;
		actions = st.actions;
	}
	const char *ename = u->successor ? upg_ievent_str((enum upg_ievent)e) :
	    upg_oevent_str((enum upg_oevent)e);
	if (!ok) {
		s->violations++;
		log_error("forbidden upgrade event (bug)", "side=%s state=%s event=%s",
		    u->successor ? "successor" : "predecessor", upgrade_state_name(u), ename);
		return;
	}
	u->st = next;
	if (from != next)
		log_info("upgrade phase", "side=%s transition=\"%s -> %s\" event=%s why=\"%s\"",
		    u->successor ? "successor" : "predecessor",
		    u->successor ? upg_istate_str((enum upg_istate)from) :
		    upg_ostate_str((enum upg_ostate)from), upgrade_state_name(u), ename, why);
	if (u->successor)
		upg_in_actions(s, u, actions, why);
	else
		upg_out_actions(s, u, actions, why);
}

/* ---- hooks of the rest of the engine ------------------------------------------------- */

void
upgrade_gen_held(struct sup *s, struct sup_gen *g)
{
	struct sup_upgrade *u = s->upgrade;
	if (!u || !u->successor)
		return;
	u->held++;
	log_info("upgrade: cluster prepared", "cluster=%s gen=%llu held=%zu of=%zu",
	    g->cluster->name, (unsigned long long)g->generation, u->held, u->to_hold);
	if (u->held == u->to_hold)
		sup_post_upgrade(s, UPG_IE_ALL_HELD, "every cluster is held");
}

void
upgrade_gen_ended(struct sup *s, struct sup_gen *g, const char *why)
{
	if (!s->upgrade || !s->upgrade->successor)
		return;
	char buf[300];
	snprintf(buf, sizeof buf, "cluster %s: %s", g->cluster->name, why[0] ? why :
	    "worker exited during preparation");
	sup_post_upgrade(s, UPG_IE_GEN_FAILED, buf);
}

void
upgrade_cluster_crashed(struct sup *s, struct sup_cluster *c, const char *why)
{
	struct sup_upgrade *u = s->upgrade;
	if (!u || u->successor || !upg_ostate_precommit((enum upg_ostate)u->st))
		return;
	char buf[300];
	snprintf(buf, sizeof buf, "cluster %s crashed during the upgrade: %s", c->name, why);
	sup_post_upgrade(s, UPG_OE_FAILED, buf);
}


bool
upgrade_on_stop(struct sup *s, const char *why)
{
	struct sup_upgrade *u = s->upgrade;
	if (!u)
		return true;
	char buf[256];
	snprintf(buf, sizeof buf, "ferryd is stopping (%s)", why);
	if (!u->successor) {
		if (upg_ostate_precommit((enum upg_ostate)u->st))
			sup_post_upgrade(s, UPG_OE_FAILED, buf);
		else
			sup_post_upgrade(s, UPG_OE_HURRY, buf);
		sup_dispatch(s);
		return true;
	}
	bool before = u->st < UPG_I_COMMITTED;
	sup_post_upgrade(s, UPG_IE_STOP, buf);
	sup_dispatch(s);
	return !before;  /* before the commit we just go */
}

uint64_t
upgrade_deadline(const struct sup *s)
{
	const struct sup_upgrade *u = s->upgrade;
	if (!u)
		return 0;
	uint64_t d = u->deadline;
	if (!u->successor && u->st == UPG_O_HANDING_OVER && u->peer_open &&
	    (!d || u->counters_at < d))
		d = u->counters_at;
	return d;
}

void
upgrade_tick(struct sup *s)
{
	struct sup_upgrade *u = s->upgrade;
	if (!u)
		return;
	if (u->deadline && s->now_ms >= u->deadline) {
		u->deadline = 0;
		char why[160];
		snprintf(why, sizeof why, "the %s ferryd did not answer within %llums (%s)",
		    u->successor ? "old" : "new", (unsigned long long)(s->cfg.init_timeout_ms),
		    upgrade_state_name(u));
		sup_post_upgrade(s, u->successor ? UPG_IE_DEADLINE : UPG_OE_DEADLINE, why);
	}
	if (!u->successor && u->st == UPG_O_HANDING_OVER && u->peer_open &&
	    s->now_ms >= u->counters_at) {
		u->counters_at = s->now_ms + SUP_UPGRADE_COUNTERS_MS;
		upg_send_counters(s);
	}
}

/* After the reaper: the predecessor is done when nothing of it is left. */
void
upgrade_reaped(struct sup *s)
{
	struct sup_upgrade *u = s->upgrade;
	if (!u || u->successor || u->st != UPG_O_HANDING_OVER)
		return;
	if (s->n_clusters || s->n_limbo || s->n_relays)
		return;
	sup_post_upgrade(s, UPG_OE_TAIL_DONE, "every worker exited");
	sup_dispatch(s);
}
