/*
 * engine_priv — what engine.c and reload.c share inside the engine; nothing
 * outside supervisor/engine.c, supervisor/reload.c and their unit tests
 * includes this.
 */
#ifndef FERRY_SUPERVISOR_ENGINE_PRIV_H
#define FERRY_SUPERVISOR_ENGINE_PRIV_H

#include "supervisor/supervisor.h"

/* Queue an event for the current chain (runs when sup_dispatch() gets to
 * it, never inside the caller). */
void sup_post_gen(struct sup *s, struct sup_gen *g, enum fsm_gevent e, const char *why);
/* ... about one process of the generation */
void sup_post_proc(struct sup *s, struct sup_proc *p, enum fsm_gevent e, const char *why);
void sup_post_cluster(struct sup *s, struct sup_cluster *c, enum fsm_cevent e, const char *why);
void sup_post_item(struct sup *s, struct sup_reload_item *it, enum fsm_ievent e, const char *why);
/* Run queued events until none is left (re-entrant calls return at once). */
void sup_dispatch(struct sup *s);

/* Cluster configurations and their listening sockets. */
struct sup_ccfg *sup_ccfg_new(const struct cfg_cluster *cl, char *err, size_t errlen);
/* Bind (or share a dup from `reuse`) every listener of cc that is not open.
 * 0, or -1 with err (what was opened stays open: release or free cc). */
int sup_ccfg_listen(struct sup *s, struct sup_ccfg *cc, struct sup_ccfg *const *reuse,
		    size_t n_reuse, char *err, size_t errlen);
void sup_ccfg_release(struct sup *s, struct sup_ccfg *cc);
void sup_ccfg_free(struct sup *s, struct sup_ccfg *cc);
void sup_cluster_set_ccfg(struct sup_cluster *c, struct sup_ccfg *cc);

struct sup_cluster *sup_cluster_new(struct sup *s, struct sup_ccfg *cc, bool listed);
/* Move a listed cluster to limbo (removed: its name is free at once). */
void sup_cluster_unlist(struct sup *s, struct sup_cluster *c);
/* List a cluster from limbo (a committed addition). */
void sup_cluster_list(struct sup *s, struct sup_cluster *c);

/* Start a generation of c with cc. Always returns a generation (a failed
 * one when it could not start), NULL only when out of memory. */
struct sup_gen *sup_gen_start(struct sup *s, struct sup_cluster *c, const struct sup_ccfg *cc,
			      enum sup_owner owner, struct sup_reload_item *it,
			      uint64_t init_timeout_ms, const char *why);
/* Send to every live process of g (a full queue becomes QUEUE_FULL). */
void sup_gen_send(struct sup *s, struct sup_gen *g, enum ipc_type type, const void *payload,
		  size_t len);

/* reload.c, called by the engine: */
struct sup_reload_item;
void reload_item_event(struct sup *s, struct sup_reload_item *it, enum fsm_ievent e,
		       const char *why);
void reload_gen_held(struct sup *s, struct sup_gen *g);
void reload_gen_ended(struct sup *s, struct sup_gen *g, const char *why);
/* After each chain: settle a reload whose items are all decided. */
void reload_settle(struct sup *s);
void reload_abort(struct sup *s, const char *why);
void reload_reap(struct sup *s);
void reload_tick(struct sup *s);

#endif
