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
 * generation after a short delay.
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

struct sup;
struct sup_cluster;

enum sup_listener_role { SUP_LISTENER_BOOTSTRAP = 0, SUP_LISTENER_BROKER };
const char *sup_listener_role_str(enum sup_listener_role r);

struct sup_listener {
	enum sup_listener_role role;
	int32_t node_id;              /* -1 for bootstrap */
	struct cfg_addr addr;
	int fd;                       /* owned by the supervisor */
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
	struct sup_worker *next;      /* newer generations first */
};

struct sup_cluster {
	struct sup *sup;
	struct cfg_cluster cfg;       /* deep copy owned by the cluster */
	char *canonical;              /* cfg_cluster_canonical(), sent to workers */
	char config_version[80];      /* "sha256:<hex>" of canonical text */
	struct sup_listener *listeners; /* [0] bootstrap, then brokers in node order */
	size_t n_listeners;
	struct sup_worker *workers;   /* newest first; old ones pruned */
	uint64_t next_generation;
	ev_timer restart_timer;
	unsigned restarts;            /* crash restarts so far */
	struct metrics retired;       /* counters of generations already freed (plain
	                                 copy, never shared), so totals stay monotonic */
	/* upstream condition reported by the serving worker */
	enum sup_upstream_state upstream;
	uint64_t upstream_since_ms;
	char upstream_error[192];
};

struct sup {
	struct ev_loop *loop;
	struct cfg cfg;               /* running config */
	char *config_path;
	char config_version[80];      /* sha256 of the config file bytes */
	uint64_t applied_at_ms;
	uint64_t started_at_ms;
	struct sup_cluster *clusters;
	size_t n_clusters;
	bool stopping;                /* SIGTERM/SIGINT received */
	unsigned term_signals;
	char *self_exe;               /* path used to re-execute workers */
	uid_t worker_uid;             /* when running as root */
	gid_t worker_gid;
	bool drop_privileges;
	struct admin *admin;          /* admin API servers (admin.c) */
	ev_signal sig_term, sig_int, sig_hup;
	ev_timer stop_timer;
	bool ever_ready;              /* sup_ready() was true at least once */
	int exit_code;                /* of sup_run once the loop ends */
	uint8_t ipc_buf[sizeof(struct ipc_hdr) + IPC_MAX_PAYLOAD];
};

/* The generation that represents the cluster (DESIGN §3): the newest that
 * reached accepting (and is not stopped), else the newest. NULL if none. */
struct sup_worker *sup_cluster_serving(struct sup_cluster *c);

/* Ready per startup policy: fail-fast — every cluster serving in accepting;
 * best-effort — at least one accepting and none still initializing. */
bool sup_ready(const struct sup *s);

struct sup_cluster *sup_find_cluster(struct sup *s, const char *name);

/* Begin a clean stop: drain every worker, exit the loop when all are gone
 * (force-killed after drain_timeout plus a grace period). */
void sup_stop(struct sup *s, const char *why);

/* "sha256:<hex>" of data, into out. */
void sup_hash_hex(const void *data, size_t len, char *out, size_t outlen);

/* Lifecycle entry point used by main: load config (already parsed), bind,
 * start workers, run the loop until stopped. Returns the process exit code. */
int sup_run(struct cfg *cfg, const char *config_path, const char *config_bytes,
	    size_t config_len, const char *self_exe);

#endif
