/*
 * engine_upgrade_restore — a successor builds its model from its
 * predecessor's state record (docs/design.md §11): every cluster in the
 * record's order with the listening sockets it inherited (none bound),
 * its numbering, crash history, learned brokers, counters and ticket
 * keys, then a held generation (owner SUP_OWNER_UPGRADE) of every cluster
 * that serves; one that does not (failed, parked, in back-off) shows the
 * generation that represented it. Part of the engine (engine_priv.h); pure.
 */
#include "supervisor/engine_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "supervisor/nodes.h"
#include "supervisor/staterec.h"
#include "supervisor/tickets.h"
#include "supervisor/upgrade.h"
#include "supervisor/upgproto.h"

/* ---- successor: the model from the record -------------------------------------------- */

/* The generation that represents a cluster that has none alive here
 * (failed, parked, in back-off): what its status showed. */
static void
upg_ghost_gen(struct sup *s, struct sup_cluster *c, const struct staterec_cluster *rc)
{
	(void)s;
	struct sup_gen *g = calloc(1, sizeof *g);
	if (!g)
		return;
	g->cluster = c;
	g->generation = rc->serving_generation;
	g->st = rc->serving_state == LC_FAILED ? FSM_G_FAILED : FSM_G_STOPPED;
	g->lc.state = fsm_gen_lc(g->st);
	g->lc.since_ms = rc->serving_since_ms;
	snprintf(g->lc.reason, sizeof g->lc.reason, "%s", rc->serving_reason);
	g->owner = SUP_OWNER_CLUSTER;
	g->accepted = true;
	g->next = c->gens;
	c->gens = g;
}

static int
upg_take_listeners(struct sup_ccfg *cc, const struct staterec *rec, const char *name,
		   int *fds, size_t nfds, char *err, size_t errlen)
{
	for (size_t k = 0; k < cc->n_listeners; k++) {
		struct sup_listener *l = &cc->listeners[k];
		for (size_t j = 0; j < rec->n_fds && j < nfds; j++) {
			const struct staterec_fd *f = &rec->fds[j];
			if (f->kind != STATEREC_FD_LISTENER || fds[j] < 0 ||
			    strcmp(f->cluster, name) != 0 || f->node_id != l->node_id)
				continue;
			if (f->addr.port != l->addr.port || strcmp(f->addr.host, l->addr.host) != 0) {
				snprintf(err, errlen, "cluster %s: the listening socket of %s node %d is "
				    "%s:%u, the configuration says %s:%u", name,
				    sup_listener_role_str(l->role), l->node_id, f->addr.host,
				    f->addr.port, l->addr.host, l->addr.port);
				return -1;
			}
			l->fd = fds[j];
			fds[j] = -1;
			break;
		}
	}
	return 0;
}

_Static_assert(STATEREC_UNKNOWN_NODES <= SUP_UNKNOWN_NODES, "a record's unknown nodes fit");

static void
upg_restore_cluster(struct sup *s, struct sup_cluster *c, struct staterec_cluster *rc)
{
	c->st = rc->st;
	c->next_generation = rc->next_generation;
	c->restarts = rc->restarts;
	c->restart_at = rc->st == FSM_C_BACKOFF ? (rc->restart_at_mono ? rc->restart_at_mono :
	    s->now_ms) : 0;
	c->restart_delay_ms = rc->restart_delay_ms;
	snprintf(c->fail_reason, sizeof c->fail_reason, "%s", rc->fail_reason);
	/* the newest crashes the ring holds */
	uint32_t skip = rc->n_crash > c->crash.cap ? rc->n_crash - c->crash.cap : 0;
	for (uint32_t i = skip; i < rc->n_crash; i++)
		c->crash.times[c->crash.n++] = rc->crash_times[i];
	c->crash.head = 0;
	c->crash.backoff_ms = rc->crash_backoff_ms;
	c->crash.started_ms = rc->crash_started_mono;
	c->crash.restarts = rc->crash_restarts;
	c->crash.loops = rc->crash_loops;
	c->unresponsive_total = rc->unresponsive_total;
	c->upstream = rc->upstream;
	c->upstream_since_ms = rc->upstream_since_ms;
	snprintf(c->upstream_error, sizeof c->upstream_error, "%s", rc->upstream_error);
	if (rc->n_unknown && sup_unknown_nodes_alloc(c) == 0) {
		c->n_unknown_nodes = rc->n_unknown;
		memcpy(c->unknown_nodes, rc->unknown_nodes, rc->n_unknown * sizeof *c->unknown_nodes);
		memcpy(c->unknown_since_ms, rc->unknown_since_ms,
		    rc->n_unknown * sizeof *c->unknown_since_ms);
	}
	sup_nodes_free(&c->nodes);
	c->nodes = rc->nodes;
	memset(&rc->nodes, 0, sizeof rc->nodes);
	c->last_replacement.valid = rc->replacement_valid;
	c->last_replacement.from_generation = rc->rep_from;
	c->last_replacement.to_generation = rc->rep_to;
	c->last_replacement.handed_over = rc->rep_handed_over;
	c->last_replacement.drained = rc->rep_drained;
	c->last_replacement.forced = rc->rep_forced;
	c->last_replacement.duration_ms = rc->rep_duration_ms;
	if (!c->carried)
		c->carried = metrics_totals_new();
	if (c->carried)
		metrics_retire(c->carried, &rc->counters);
	c->carried_gauges = false;
	sup_ready_touch(s, c);
	sup_deadline_touch(c);
}

int
sup_upgrade_restore(struct sup *s, struct staterec *rec, int *fds, size_t nfds,
		    const struct upg_secret *secrets, size_t n_secrets, char *err, size_t errlen)
{
	if (strcmp(rec->config_version, s->config_version) != 0) {
		snprintf(err, errlen, "the configuration text is not version %s", rec->config_version);
		return -1;
	}
	if (rec->n_clusters != s->cfg.n_clusters) {
		snprintf(err, errlen, "the record has %zu clusters, its configuration %zu",
		    rec->n_clusters, s->cfg.n_clusters);
		return -1;
	}
	struct sup_upgrade *u = calloc(1, sizeof *u);
	if (!u) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	u->successor = true;
	u->st = UPG_I_PREPARING;
	u->peer_open = true;
	u->peer_pid = rec->from_pid;
	snprintf(u->peer_version, sizeof u->peer_version, "%s", rec->from_version);
	snprintf(u->peer_build, sizeof u->peer_build, "%s", rec->from_build);
	u->started_mono = s->now_ms;
	u->started_wall = s->now_wall_ms;
	snprintf(u->source, sizeof u->source, "upgrade");

	s->started_at_ms = rec->service_started_ms;
	s->applied_at_ms = rec->applied_at_ms;
	free(s->exec_path);
	s->exec_path = rec->exec_path;
	rec->exec_path = NULL;
	s->reload_stats = rec->reload_stats;
	sup_record_clear(&s->last_reload);
	s->last_reload = rec->last_reload;
	memset(&rec->last_reload, 0, sizeof rec->last_reload);
	s->last_validation = rec->last_validation;
	memcpy(s->upgrade_results, rec->upgrade_results, sizeof s->upgrade_results);
	sup_upgrade_record_clear(&s->last_upgrade);
	s->last_upgrade = rec->last_upgrade;
	memset(&rec->last_upgrade, 0, sizeof rec->last_upgrade);
	memcpy(s->admin_carried, rec->admin_carried, sizeof s->admin_carried);
	s->hup_pending = rec->hup_pending;
	/* the service started long ago: a cluster that is failed (a crash
	 * loop) is carried as it is, not a start-up failure */
	s->ever_ready = true;

	/* First every cluster with its sockets (a mismatch refuses before any
	 * worker starts), then the held generations. */
	for (size_t i = 0; i < rec->n_clusters; i++) {
		struct staterec_cluster *rc = &rec->clusters[i];
		const struct cfg_cluster *cl = NULL;
		/* the record lists the clusters in the file's order: the same
		 * index, looked for by name only when that is not it */
		if (strcmp(s->cfg.clusters[i].name, rc->name) == 0)
			cl = &s->cfg.clusters[i];
		for (size_t k = 0; !cl && k < s->cfg.n_clusters; k++)
			if (strcmp(s->cfg.clusters[k].name, rc->name) == 0)
				cl = &s->cfg.clusters[k];
		if (!cl) {
			snprintf(err, errlen, "cluster %s of the record is not in its configuration",
			    rc->name);
			goto fail;
		}
		struct sup_ccfg *cc = sup_ccfg_new(s, cl, err, errlen);
		if (!cc)
			goto fail;
		if (upg_take_listeners(cc, rec, rc->name, fds, nfds, err, errlen) == -1) {
			sup_ccfg_free(s, cc);
			goto fail;
		}
		bool serves = rc->st == FSM_C_ACTIVE || rc->st == FSM_C_BACKOFF;
		for (size_t k = 0; serves && k < cc->n_listeners; k++)
			if (cc->listeners[k].fd < 0) {
				snprintf(err, errlen, "cluster %s: no listening socket for %s:%u", rc->name,
				    cc->listeners[k].addr.host, cc->listeners[k].addr.port);
				sup_ccfg_free(s, cc);
				goto fail;
			}
		struct sup_cluster *c = sup_cluster_new(s, cc, true);
		if (!c) {
			sup_ccfg_free(s, cc);
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		upg_restore_cluster(s, c, rc);
		if (rc->tickets) {
			const struct upg_secret *k = NULL;
			for (size_t j = 0; j < n_secrets && !k; j++)
				if (strncmp(secrets[j].cluster, c->name, sizeof secrets[j].cluster) == 0)
					k = &secrets[j];
			if (!k || tickets_import(c, &k->keys) == -1)
				log_warn("upgrade: session-ticket keys not taken over: sessions of this "
				    "cluster do not resume once", "cluster=%s", c->name);
		}
	}
	for (size_t j = 0; j < rec->n_fds && j < nfds; j++)
		if (rec->fds[j].kind == STATEREC_FD_LISTENER && fds[j] >= 0) {
			snprintf(err, errlen, "a listening socket of cluster %s (%s:%u) belongs to no "
			    "listener of its configuration", rec->fds[j].cluster, rec->fds[j].addr.host,
			    rec->fds[j].addr.port);
			goto fail;
		}
	s->upgrade = u;
	for (size_t i = 0; i < s->n_clusters; i++) {
		struct sup_cluster *c = s->clusters[i];
		struct staterec_cluster *rc = &rec->clusters[i];
		if (c->st == FSM_C_ACTIVE) {
			u->to_hold++;
			sup_gen_start(s, c, c->ccfg, SUP_OWNER_UPGRADE, NULL, s->cfg.init_timeout_ms,
			    "upgrade: taking over");
		} else if (rc->serving_valid) {
			upg_ghost_gen(s, c, rc);
			sup_ready_touch(s, c);
		}
	}
	/* each cluster keeps its configuration in its ccfg (as sup_start) */
	cfg_drop_clusters(&s->cfg);
	u->deadline = s->now_ms + s->cfg.init_timeout_ms + SUP_UPGRADE_COMMIT_MS +
	    sup_start_pace_ms(s);  /* its workers start paced */
	log_info("upgrade: taking over", "from_pid=%d from_version=%s clusters=%zu preparing=%zu",
	    (int)u->peer_pid, u->peer_version, s->n_clusters, u->to_hold);
	if (u->to_hold == 0)
		sup_post_upgrade(s, UPG_IE_ALL_HELD, "nothing to prepare");
	sup_dispatch(s);
	return 0;
fail:
	upgrade_dispose(u);
	return -1;
}
