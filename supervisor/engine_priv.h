/*
 * engine_priv — what the files of the engine share: engine.c (event queue,
 * dispatch, I/O events, deadlines, reaper, start and stop), engine_gen.c
 * (generations), engine_cluster.c (clusters, operator requests),
 * engine_relay.c (live handover) and reload.c. Nothing outside them
 * includes this; everyone else uses the engine through supervisor.h.
 */
#ifndef FERRY_SUPERVISOR_ENGINE_PRIV_H
#define FERRY_SUPERVISOR_ENGINE_PRIV_H

#include "supervisor/supervisor.h"

/* The event queue (engine.c). Queue an event for the current chain (runs
 * when sup_dispatch() gets to it, never inside the caller). */
void sup_post_gen(struct sup *s, struct sup_gen *g, enum fsm_gevent e, const char *why);
/* ... about one process of the generation */
void sup_post_proc(struct sup *s, struct sup_proc *p, enum fsm_gevent e, const char *why);
void sup_post_cluster(struct sup *s, struct sup_cluster *c, enum fsm_cevent e, const char *why);
void sup_post_item(struct sup *s, struct sup_reload_item *it, enum fsm_ievent e, const char *why);
/* Run queued events until none is left (re-entrant calls return at once). */
void sup_dispatch(struct sup *s);

/* Something happened to c (an event of it or of one of its generations):
 * the reaper looks at it after the chain. */
void sup_reap_mark(struct sup *s, struct sup_cluster *c);

/* One of c's deadlines (of the cluster, a generation or a process) may
 * have changed: its earliest is computed again before the next wait.
 * Every write of a deadline is followed by this (in the engine's event
 * handlers and tick), so the loop's wait and sup_tick need not walk every
 * generation of every cluster each time: the clusters with a deadline are
 * a heap by their earliest. */
void sup_deadline_touch(struct sup_cluster *c);
/* Room in the deadline heap and lists for one more cluster (before it is
 * made): 0, or -1 out of memory. Forget a cluster about to be freed. */
int sup_deadline_reserve(struct sup *s, size_t n);
void sup_deadline_forget(struct sup *s, struct sup_cluster *c);

/* c's SUP_UNKNOWN_NODES slots of upstream node ids without a broker port,
 * allocated at the first: 0, or -1 out of memory. */
int sup_unknown_nodes_alloc(struct sup_cluster *c);

/* Cluster configurations and their listening sockets (engine_cluster.c). */
/* A configuration of cl for workers: its canonical text (max_connections =
 * auto made a number: sup_max_connections), parsed back, its version (of
 * cl as written), its listeners (not bound yet). */
struct sup_ccfg *sup_ccfg_new(const struct sup *s, const struct cfg_cluster *cl, char *err,
			      size_t errlen);
/* The open listening sockets of every listed cluster's serving
 * configuration, by address: what a reload's new configurations share. */
struct sup_listen_ref;
struct sup_listen_index {
	struct sup_listen_ref *v;     /* sorted by port, then host */
	size_t n;
};
int sup_listen_index_build(struct sup *s, struct sup_listen_index *ix);
void sup_listen_index_free(struct sup_listen_index *ix);
/* Bind (or share a dup of a socket of `reuse`, may be NULL) every listener
 * of cc that is not open. 0, or -1 with err (what was opened stays open:
 * release or free cc). */
int sup_ccfg_listen(struct sup *s, struct sup_ccfg *cc, const struct sup_listen_index *reuse,
		    char *err, size_t errlen);
void sup_ccfg_release(struct sup *s, struct sup_ccfg *cc);
void sup_ccfg_free(struct sup *s, struct sup_ccfg *cc);
void sup_cluster_set_ccfg(struct sup_cluster *c, struct sup_ccfg *cc);

struct sup_cluster *sup_cluster_new(struct sup *s, struct sup_ccfg *cc, bool listed);
/* Move a listed cluster to limbo (removed: its name is free at once). */
void sup_cluster_unlist(struct sup *s, struct sup_cluster *c);
/* List a cluster from limbo (a committed addition). */
void sup_cluster_list(struct sup *s, struct sup_cluster *c);

/* The cluster machine (engine_cluster.c): one event of c's table, and what
 * a generation the cluster started means for it once it accepts or ends. */
void sup_cluster_event(struct sup *s, struct sup_cluster *c, enum fsm_cevent e, const char *why);
void sup_cluster_gen_accepting(struct sup *s, struct sup_gen *g);
void sup_cluster_gen_ended(struct sup *s, struct sup_gen *g, bool crashed, const char *why);

/* Generations (engine_gen.c). */
/* Start a generation of c with cc. Always returns a generation (a failed
 * one when it could not start), NULL only when out of memory. */
struct sup_gen *sup_gen_start(struct sup *s, struct sup_cluster *c, const struct sup_ccfg *cc,
			      enum sup_owner owner, struct sup_reload_item *it,
			      uint64_t init_timeout_ms, const char *why);
/* A generation of c with cc, not started yet (its init deadline runs). */
struct sup_gen *sup_gen_new(struct sup *s, struct sup_cluster *c, const struct sup_ccfg *cc,
			    enum sup_owner owner, struct sup_reload_item *it,
			    uint64_t init_timeout_ms, const char *why);
/* g could not start: a FAILED report and an exit, as if it had said so. */
void sup_gen_fail_now(struct sup *s, struct sup_gen *g, const char *why);
/* Send to every live process of g (a full queue becomes QUEUE_FULL). */
void sup_gen_send(struct sup *s, struct sup_gen *g, enum ipc_type type, const void *payload,
		  size_t len);
/* SIGKILL every live process of g. */
void sup_gen_kill(struct sup *s, struct sup_gen *g);
/* One event of g's table (ep: the process it is about, or NULL). */
void sup_gen_event(struct sup *s, struct sup_gen *g, struct sup_proc *ep, enum fsm_gevent e,
		   const char *why);
/* g's deadlines that passed: process restarts, init, stop, the watchdog. */
void sup_gen_tick(struct sup *s, struct sup_gen *g);
/* A worker of c crashed: the crash policy says after what delay it is
 * restarted (false), or (true) that c is in a crash loop: then c fails. */
bool sup_crash_policy(struct sup *s, struct sup_cluster *c, const char *why, uint64_t *delay,
		      uint32_t *n);

/* Live handover (engine_relay.c): relays of a process that exited end now;
 * relays past their deadline end with their outcome unknown. */
void sup_relays_proc_gone(struct sup *s, struct sup_proc *p);
void sup_relays_tick(struct sup *s);
/* The newest accepting generation of c other than `not`, and its process
 * with the fewest connections (NULL: none). */
struct sup_proc *sup_handover_target(struct sup_cluster *c, const struct sup_gen *not);
/* Tell whoever handed a connection over (an old worker: CONN_DONE; NULL:
 * the predecessor of an upgrade) its outcome (enum ipc_adopted). */
void sup_relay_done(struct sup *s, struct sup_proc *from, uint64_t from_id, uint32_t adopted);
/* Room for one more relay in s->relays: 0, or -1 when out of memory. */
int sup_relay_room(struct sup *s);

/* Reloads (reload.c), called by the rest of the engine: */
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
/* When the reload in progress posts its next batch of commits (0 none). */
uint64_t reload_next_deadline(const struct sup *s);

/* Upgrades (engine_upgrade.c: the machines, actions and hooks;
 * engine_upgrade_msg.c: the channel's messages and relayed connections;
 * engine_upgrade_restore.c: a successor's model from the record). The one
 * upgrade in progress, on either side: */
struct sup_upgrade {
	bool successor;               /* which machine: upgrade.h "in" or "out" */
	int st;                       /* enum upg_ostate / enum upg_istate */
	char source[16];
	uint64_t waiter;
	uint64_t started_mono, started_wall;
	uint64_t deadline;            /* mono; 0 none */
	uint64_t counters_at;         /* predecessor handing over: next UPG_COUNTERS */
	int32_t peer_pid;
	char peer_version[64], peer_build[48];
	uint32_t record;              /* the state record version agreed */
	uint32_t conn_min, conn_max;  /* connection records the successor adopts */
	bool peer_open;               /* the channel is up */
	bool hurried;
	char **errors;
	char phase[24];               /* where it failed */
	size_t to_hold, held;         /* successor: generations to prepare */
	/* the tail: what the predecessor's replaced generations did */
	uint64_t handed_over, drained, forced;
	bool tail_valid;
	struct sup_upgrade *next_free;
};

/* What the three files share. */
const struct sup_upgrade_ops *upgrade_ops(const struct sup *s);
void upgrade_error(struct sup_upgrade *u, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
const char *upgrade_state_name(const struct sup_upgrade *u);
void upgrade_dispose(struct sup_upgrade *u);
/* Send j (stolen) as a message of type on the channel. 0, or -1. */
struct json_t;
int upgrade_send_json(struct sup *s, uint32_t type, struct json_t *j);

/* Upgrades, called by the rest of the engine: */
void sup_post_upgrade(struct sup *s, int e, const char *why);
void upgrade_event(struct sup *s, struct sup_upgrade *u, int e, const char *why);
/* a generation owned by the upgrade is held / ended */
void upgrade_gen_held(struct sup *s, struct sup_gen *g);
void upgrade_gen_ended(struct sup *s, struct sup_gen *g, const char *why);
/* a replaced generation of the predecessor is gone: its connections' fate */
void upgrade_gen_gone(struct sup *s, uint64_t handed_over, uint64_t drained, uint64_t forced);
/* a cluster's serving generation crashed */
void upgrade_cluster_crashed(struct sup *s, struct sup_cluster *c, const char *why);
/* Predecessor after the commit: relay an old worker's connection to the
 * successor. true: taken care of (relayed, or declined to p). */
bool upgrade_relay_out(struct sup *s, struct sup_proc *p, const struct ipc_conn_record *rec,
		       const void *payload, size_t len, const int *fds, size_t nfds);
/* Successor: the outcome of a connection relayed from the predecessor. */
void upgrade_relay_answer(struct sup *s, uint64_t peer_id, uint32_t adopted);
/* Before the commit nothing new starts (crash restarts wait, no rotation). */
bool upgrade_frozen(const struct sup *s);
/* Reloads, drains, restarts and another upgrade wait until it is over. */
bool upgrade_busy(const struct sup *s);
/* sup_stop(): false when the upgrade takes the stop over (see engine_upgrade.c). */
bool upgrade_on_stop(struct sup *s, const char *why);
/* A successor waiting for its predecessor's last connections does not exit. */
bool upgrade_holds_exit(const struct sup *s);
void upgrade_tick(struct sup *s);
uint64_t upgrade_deadline(const struct sup *s);
void upgrade_reaped(struct sup *s);
void upgrade_reap(struct sup *s);
void upgrade_free(struct sup *s);

#endif
