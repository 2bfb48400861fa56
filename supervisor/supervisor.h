/*
 * supervisor — the ferryd process table: one entry per virtual cluster, each
 * with its worker generations, the listening sockets the supervisor owns for
 * it, and the lifecycle of every generation.
 *
 * The supervisor binds every listener, re-executes itself as one worker per
 * cluster (`ferryd --worker`), hands the worker its canonical config text,
 * its metrics block and its listening sockets over a SOCK_SEQPACKET
 * socketpair, waits for READY, then tells it to ACCEPT. Child exits and
 * signals are libev events. A worker that dies is restarted as a new
 * generation with exponential backoff until the crash-loop limit
 * (crash.h). Reloads (reload.c) prepare new generations beside the serving
 * ones, holding them until every one is READY, then commit.
 *
 * This header is the read model used by the admin API (status.c) as well.
 */
#ifndef FERRY_SUPERVISOR_SUPERVISOR_H
#define FERRY_SUPERVISOR_SUPERVISOR_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/config.h"
#include "common/ipc.h"
#include "common/lifecycle.h"
#include "common/metrics.h"
#include "supervisor/crash.h"

struct sup;
struct sup_cluster;
struct sup_reload;
struct admin_conn;

enum sup_listener_role { SUP_LISTENER_BOOTSTRAP = 0, SUP_LISTENER_BROKER };
const char *sup_listener_role_str(enum sup_listener_role r);

struct sup_listener {
	enum sup_listener_role role;
	int32_t node_id;              /* -1 for bootstrap */
	struct cfg_addr addr;
	int fd;                       /* owned by its sup_ccfg; -1 when released */
};

/*
 * One configuration of one cluster with its listening sockets: the serving
 * one (cluster->ccfg) or one being prepared by a reload. A socket whose
 * address is unchanged across configurations is shared as a dup() of the
 * same socket object, so it is never closed while any configuration uses it.
 */
struct sup_ccfg {
	struct cfg own;               /* parsed from canonical: own.clusters[0] */
	struct cfg_cluster *cl;
	char *canonical;              /* cfg_cluster_canonical(), sent to workers */
	char version[80];             /* plan_cluster_version() */
	struct sup_listener *listeners; /* [0] bootstrap, then brokers in node order */
	size_t n_listeners;
};

enum sup_upstream_state { SUP_UPSTREAM_UNKNOWN = 0, SUP_UPSTREAM_REACHABLE, SUP_UPSTREAM_UNREACHABLE };
const char *sup_upstream_state_str(enum sup_upstream_state s);

/* One worker process (one generation of a cluster). */
struct sup_worker {
	struct sup_cluster *cluster;
	uint64_t generation;
	pid_t pid;                    /* 0 once reaped */
	struct lc lc;
	int ipc_fd;                   /* supervisor end of the socketpair; -1 when closed */
	ev_io ipc_watcher;
	ev_child child_watcher;
	ev_timer init_timer;          /* init_timeout while initializing */
	struct metrics *metrics;      /* shared block; kept after exit */
	int metrics_fd;
	bool stop_requested;          /* we asked it to stop: exit is not a crash */
	bool held;                    /* READY does not mean ACCEPT (reload prepare) */
	bool ready;                   /* sent READY */
	char config_version[80];      /* of the configuration it was started with */
	struct sup_worker *next;      /* newer generations first */
};

struct sup_cluster {
	struct sup *sup;
	struct sup_ccfg *ccfg;        /* serving configuration */
	/* Mirrors of ccfg for readers (status.c): */
	struct cfg_cluster cfg;       /* shallow copy of *ccfg->cl */
	char config_version[80];
	struct sup_listener *listeners;
	size_t n_listeners;

	struct sup_worker *workers;   /* newest first; old ones pruned */
	uint64_t next_generation;
	ev_timer restart_timer;
	unsigned restarts;            /* crash restarts so far */
	struct crash_state crash;
	bool removing;                /* removed by a reload: draining, then freed */
	bool parked;                  /* drained by an operator: sockets released */
	struct admin_conn *restart_conn; /* deferred reply of POST .../restart */
	struct metrics retired;       /* counters of generations already freed (plain
	                                 copy, never shared), so totals stay monotonic */
	/* upstream node ids without a broker port, as reported by workers */
	struct ipc_unknown_node unknown_nodes[16];
	uint64_t unknown_since_ms[16];
	size_t n_unknown_nodes;
	/* upstream condition reported by the serving worker */
	enum sup_upstream_state upstream;
	uint64_t upstream_since_ms;
	char upstream_error[192];
};

/* Outcome of the last reload / validation, for GET /admin/config/status. */
enum sup_reload_status {
	SUP_RELOAD_NONE = 0, SUP_RELOAD_SUCCESS, SUP_RELOAD_FAILED, SUP_RELOAD_REJECTED,
	SUP_RELOAD_UNCHANGED,
};
const char *sup_reload_status_str(enum sup_reload_status s);

struct sup_reload_record {
	enum sup_reload_status status;
	uint64_t timestamp_ms;
	uint64_t duration_ms;
	char requested_version[80];
	char source[16];              /* "SIGHUP", "api" */
	char **added, **modified, **removed, **errors; /* NULL-terminated, malloc'd */
	bool persisted;
	char persist_error[160];
	int http_status;              /* of the answer given */
	bool changed;
	bool posted;
};

struct sup_validation_record {
	bool valid;
	uint64_t timestamp_ms;        /* 0: never */
	char requested_version[80];
};

struct sup {
	struct ev_loop *loop;
	struct cfg cfg;               /* running config */
	char *config_path;
	char config_version[80];      /* sha256 of the config file bytes */
	uint64_t applied_at_ms;
	uint64_t started_at_ms;
	struct sup_cluster **clusters; /* file order; removed ones until reaped */
	size_t n_clusters;
	bool stopping;                /* SIGTERM/SIGINT received */
	char *self_exe;               /* path used to re-execute workers */
	uid_t worker_uid;             /* when running as root */
	gid_t worker_gid;
	bool drop_privileges;
	struct admin *admin;          /* admin API servers (admin.c) */
	ev_signal sig_term, sig_int, sig_hup;
	ev_timer stop_timer;
	bool ever_ready;              /* sup_ready() was true at least once */
	int exit_code;                /* of sup_run once the loop ends */

	struct sup_reload *reload;    /* in progress, or NULL */
	bool hup_pending;             /* SIGHUP during a reload: one more after it */
	ev_timer hup_timer;           /* runs that one from the loop */
	struct sup_reload_record last_reload;
	struct sup_validation_record last_validation;
	struct sup_cluster **graveyard; /* rolled-back additions until reaped */
	size_t n_graveyard;

	uint8_t ipc_buf[sizeof(struct ipc_hdr) + IPC_MAX_PAYLOAD];
};

/* The generation that represents the cluster (DESIGN §3): the newest that
 * reached accepting (and is not stopped), else the newest. NULL if none. */
struct sup_worker *sup_cluster_serving(struct sup_cluster *c);

/* Ready per startup policy: fail-fast — every cluster serving in accepting;
 * best-effort — at least one accepting and none still initializing. */
bool sup_ready(const struct sup *s);

struct sup_cluster *sup_find_cluster(struct sup *s, const char *name);

/* Lifecycle entry point used by main: load config (already parsed), bind,
 * start workers, run the loop until stopped. Returns the process exit code. */
int sup_run(struct cfg *cfg, const char *config_path, const char *config_bytes,
	    size_t config_len, const char *self_exe);

/* Begin a clean stop: drain every worker, exit the loop when all are gone
 * (force-killed after drain_timeout plus a grace period). */
void sup_stop(struct sup *s, const char *why);

/* "sha256:<hex>" of data, into out. */
void sup_hash_hex(const void *data, size_t len, char *out, size_t outlen);

/* ---- used by reload.c (and nothing else) ---- */

/* Build a cluster configuration: canonical text, own parsed copy, version,
 * and listeners — dup()ed from `reuse` configurations where the address
 * matches, bound otherwise. 0, or -1 with err (nothing left open). */
struct sup_ccfg *sup_ccfg_build(const struct cfg_cluster *cl, struct sup_ccfg *const *reuse,
				size_t n_reuse, char *err, size_t errlen);
/* Bind (or share from `reuse`) every listener of cc that is not open. */
int sup_ccfg_listen(struct sup_ccfg *cc, struct sup_ccfg *const *reuse, size_t n_reuse,
		    char *err, size_t errlen);
/* Close the listening sockets (the sockets live on where dup()ed). */
void sup_ccfg_release(struct sup_ccfg *cc);
void sup_ccfg_free(struct sup_ccfg *cc);
void sup_cluster_set_ccfg(struct sup_cluster *c, struct sup_ccfg *cc);
struct sup_cluster *sup_cluster_new(struct sup *s, struct sup_ccfg *cc);
void sup_cluster_free(struct sup_cluster *c);
/* Start a generation with cc (NULL = the cluster's serving config). */
struct sup_worker *sup_start_worker(struct sup_cluster *c, struct sup_ccfg *cc,
				    const char *why, bool held);
void sup_worker_set_state(struct sup_worker *wk, enum lc_state to, const char *reason);
/* Commit a READY generation: ACCEPT it and DRAIN every older accepting one. */
void sup_worker_promote(struct sup_worker *wk);
/* Ask a live worker to stop now (STOP) or to drain (DRAIN), by its state. */
void sup_worker_stop(struct sup_worker *wk, const char *why);
void sup_worker_drain(struct sup_worker *wk, const char *why);
bool sup_cluster_alive(const struct sup_cluster *c);
/* Is wk its cluster's current generation: the newest one not held by a
 * reload (what a crash restart or an operator restart started)? */
bool sup_worker_is_current(const struct sup_worker *wk);

/* reload.c: events from the supervisor. */
void reload_worker_event(struct sup *s, struct sup_worker *wk);
void reload_cluster_reaped(struct sup *s, struct sup_cluster *c);
void reload_free_records(struct sup *s);

#endif
