/*
 * supervisor — ferryd's model of what it runs, and the engine that decides
 * what happens to it.
 *
 * The model: clusters (struct sup_cluster), each with its generations
 * (struct sup_gen, newest first), each generation a set of worker
 * processes (struct sup_proc, `workers` of them), plus the reload in
 * progress and the records of the last reload and validation. Its rules (which generation serves a
 * cluster, what state a cluster shows, when ferryd is ready) and the names
 * of its enums are supervisor.c's; the admin API renders it (status.c).
 *
 * The engine (engine*.c, reload.c) is pure: no sockets, no fork, no libev.
 * Everything that happens arrives as an event through one of the sup_on_*()
 * entry points below; events are queued and dispatched one at a time
 * through the tables of fsm.h, whose actions the engine carries out with the
 * I/O operations in struct sup_ops (sup_io.c implements them for real,
 * the unit tests with fakes). Timers are deadlines in the model (monotonic
 * ms); the I/O layer sleeps until sup_next_deadline() and calls sup_tick().
 *
 * Lifetimes: nothing is freed inside an event chain. Objects that ended are
 * marked and freed by sup_reap(), which the I/O layer calls after every
 * chain (an ev_prepare watcher) — so no handler can touch freed memory.
 */
#ifndef FERRY_SUPERVISOR_SUPERVISOR_H
#define FERRY_SUPERVISOR_SUPERVISOR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/config.h"
#include "common/ipc.h"
#include "common/lifecycle.h"
#include "common/metrics.h"
#include "common/nodemap.h"
#include "common/sandbox.h"
#include "supervisor/crash.h"
#include "supervisor/fsm.h"
#include "supervisor/plan.h"
#include "supervisor/reloadstats.h"

struct sup;
struct sup_cluster;
struct sup_gen;
struct sup_reload;
struct sup_upgrade;

#define SUP_MAX_PROCS 64          /* worker processes per generation */
#define SUP_STOP_GRACE_MS 2000    /* beyond drain_timeout before SIGKILL */
#define SUP_KILL_GRACE_MS 1000    /* a worker that said FAILED must be gone by then */
#define SUP_KEEP_ENDED 3          /* ended generations kept for status */
#define SUP_RELAY_TIMEOUT_MS 2000 /* a handed-over connection not adopted by then is closed */
#define SUP_COMMIT_BATCH 16       /* clusters a reload commits per loop turn */
#define SUP_COMMIT_PACE_MS 10     /* ... and per this long at most */
#define SUP_PREPARE_BATCH 32      /* clusters a reload prepares per loop turn */
#define SUP_START_BATCH 64        /* clusters whose first generation starts per turn */
#define SUP_UNKNOWN_NODES 16      /* node ids without a broker port shown per cluster */
#define SUP_START_PACE_MS 20      /* what one paced worker start may add to a reload */
#define SUP_WD_LAG_MS 250         /* a watchdog check this late: ferryd itself was busy */
#define SUP_WD_RECHECK_MS 100     /* ... then it judges this much later, answers read */

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
	struct cfg_cluster own;       /* parsed from canonical (the cluster alone) */
	struct cfg_cluster *cl;       /* &own */
	char *canonical;              /* cfg_cluster_canonical(), sent to workers */
	char version[PLAN_VERSION_LEN];
	struct sup_listener *listeners; /* [0] bootstrap, then brokers in node order */
	size_t n_listeners;
	/* client-facing TLS certificate (tls_cert): notAfter (unix seconds; 0 =
	 * no client TLS) and subject, for status, metrics and the expiry
	 * warnings (certs.h) */
	int64_t tls_not_after;
	char tls_subject[256];
};

enum sup_upstream_state { SUP_UPSTREAM_UNKNOWN = 0, SUP_UPSTREAM_REACHABLE, SUP_UPSTREAM_UNREACHABLE };
const char *sup_upstream_state_str(enum sup_upstream_state s);

/* One worker process. */
struct sup_proc {
	struct sup_gen *gen;
	unsigned index;
	pid_t pid;                    /* 0 when not started or reaped */
	bool alive;                   /* started and not yet reaped */
	bool queued;                  /* its start is queued by the I/O layer (spawn
	                                 returned 1): alive, no pid yet */
	bool ready;                   /* sent READY */
	void *chan;                   /* the I/O layer's control channel */
	struct metrics *metrics;      /* shared block; kept after exit */
	struct conntab *conns;        /* its connections (conntab.h); read while alive */
	uint32_t conns_rows;          /* the rows it was created with (never read
	                                 from the block, which the worker can write) */
	uint64_t ping_seq;            /* last PING sent */
	uint64_t last_answer_ms;      /* mono: last PONG (or start) */
	uint64_t unanswered_since_ms; /* mono: when the oldest PING not answered
	                                 yet was sent; 0 = none outstanding */
	uint64_t last_ping_ms;        /* mono: when the last PING was sent */
	bool late, dead;              /* watchdog stages reported */
	uint64_t restart_at;          /* mono: replace it (one of several crashed) */
	uint64_t starts;              /* times this slot was started */
};

/* Who hears a generation's HELD and ENDED: its cluster, the reload that
 * prepares it, the upgrade that prepares it (a successor's generations,
 * held until the predecessor commits, engine_upgrade.c), or nobody (a
 * rolled-back one). */
enum sup_owner { SUP_OWNER_CLUSTER = 0, SUP_OWNER_RELOAD, SUP_OWNER_NONE, SUP_OWNER_UPGRADE };

/* One generation of a cluster: the worker processes started with one
 * configuration. */
struct sup_gen {
	struct sup_cluster *cluster;
	uint64_t generation;
	enum fsm_gstate st;
	struct lc lc;                 /* the contract view of st (fsm_gen_lc) */
	enum sup_owner owner;         /* who hears HELD and ENDED */
	struct sup_reload_item *item; /* owner == SUP_OWNER_RELOAD */
	bool accepted;                /* reached accepting once */
	bool unresponsive;
	uint64_t unresponsive_since_ms; /* wall */
	char end_note[96];            /* why we killed it, for the exit reason */
	char start_why[48];           /* why it was started, for the log */
	char upstream_key[PLAN_VERSION_LEN]; /* what its upstream connections depend on */
	bool handover_keep;           /* replaced: its connections may move (same upstream) */
	bool replaced;                /* drained or handed over for a newer generation */
	uint64_t replaced_at_ms;      /* mono */
	bool need_probe;              /* reload: the new upstream must answer first */
	bool probe_sent, upstream_ok;
	char probe_error[192];
	/* deadlines, monotonic ms; 0 = not armed */
	uint64_t init_at, stop_at, watchdog_at;
	uint64_t init_timeout_ms;     /* init_at is this after the last start */
	size_t n_procs;               /* workers = N of its configuration */
	size_t n_queued;              /* of them queued for their start (init_at
	                                 does not run out while any is) */
	void *shared;                 /* the I/O layer's per-generation block */
	struct sup_proc *procs;       /* n_procs of them */
	struct sup_gen *next;         /* older */
};

/* Learned brokers: the upstream brokers a cluster's workers learned (node
 * id -> host:port), kept across its generations and handed to every new
 * worker at start (supervisor/nodes.h). Valid for one upstream:
 * upstream_key is the plan_upstream_key of the generations it was learned
 * by; a generation with another upstream gets nothing and its reports
 * start a new map. At most one entry per node id of the cluster's
 * configuration. */
struct sup_nodes {
	char upstream_key[PLAN_VERSION_LEN];
	uint64_t generation;          /* newest generation that reported into it */
	struct nodemap_entry *v;
	size_t n, cap;
};

struct tlskeys;

struct sup_cluster {
	struct sup *sup;
	enum fsm_cstate st;
	char name[CFG_NAME_MAX];
	struct sup_ccfg *ccfg;        /* serving configuration */
	/* Mirrors of ccfg for readers (status.c): */
	char config_version[PLAN_VERSION_LEN];
	struct sup_listener *listeners;
	size_t n_listeners;

	struct sup_gen *gens;         /* newest first */
	uint64_t next_generation;
	uint64_t restart_at;          /* mono deadline of a crash restart; 0 none */
	uint64_t restart_delay_ms;    /* the crash policy's delay for the next one */
	unsigned restarts;            /* crash restarts so far */
	char fail_reason[192];        /* why it is failed (st == FSM_C_FAILED) */
	struct crash_state crash;
	uint64_t restart_waiter;      /* deferred POST .../restart; 0 none */
	uint64_t restart_gen;         /* the generation that waiter waits for */
	uint64_t unresponsive_total;  /* watchdog reports */
	struct metrics *retired;      /* counters of processes that ended (private,
	                                 never shared; metrics_totals_new at the
	                                 first), so totals stay monotonic; NULL: none */
	/* after an upgrade: the predecessor's totals for this cluster (its
	 * counters by name, staterec.h), updated while it hands over, folded
	 * into retired when it is gone; its gauges count while it lives.
	 * Allocated like retired when an upgrade carries any; NULL: none */
	struct metrics *carried;
	bool carried_gauges;
	/* upstream node ids without a broker port, as reported by workers:
	 * SUP_UNKNOWN_NODES slots allocated at the first report */
	struct ipc_unknown_node *unknown_nodes;
	uint64_t *unknown_since_ms;
	size_t n_unknown_nodes;
	/* upstream condition reported by the serving generation */
	enum sup_upstream_state upstream;
	uint64_t upstream_since_ms;
	char upstream_error[192];
	bool listed;                  /* in sup->clusters (else limbo) */
	uint8_t ready_class;          /* what it counts for sup_ready_cached()
	                                 (enum sup_ready_class), kept by the engine */
	bool reap_dirty;              /* in sup->reap_list */
	bool start_pending;           /* its first generation starts in a later turn */
	uint64_t deadline;            /* the earliest of its deadlines (0 none), its
	                                 key in sup->dl_heap ... */
	bool deadline_dirty;          /* ... unless something may have changed one
	                                 (then it is in sup->dl_dirty) */
	size_t dl_index;              /* in sup->dl_heap; SIZE_MAX: not in it */
	/* kept across generations */
	struct sup_nodes nodes;       /* learned upstream brokers (nodes.h) */
	struct tlskeys *tickets;      /* TLS clusters: session-ticket keys (tickets.h);
	                                 NULL for plaintext ones */
	/* the last worker that exited unasked (a crash, a sandbox violation,
	 * the watchdog's kill); at_ms 0 = none yet */
	struct {
		uint64_t at_ms;           /* wall */
		uint64_t generation;
		unsigned index;
		pid_t pid;
		char reason[192];
	} last_crash;
	/* what happened to the connections of the last replaced generation */
	struct {
		uint64_t from_generation, to_generation;
		uint64_t handed_over, drained, forced;
		uint64_t duration_ms;
		bool valid;
	} last_replacement;
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
	char requested_version[PLAN_VERSION_LEN];
	char source[16];              /* "SIGHUP", "api" */
	char **added, **modified, **removed, **errors; /* NULL-terminated, malloc'd */
	bool persisted;
	char persist_error[160];
	bool changed;
	bool posted;
	bool aborted;                 /* ended because ferryd is stopping */
	bool conflict;                /* another reload was in progress */
};

/* Outcome of the last upgrade of ferryd itself (docs/design.md §11), for
 * GET /admin/config/status; carried from the predecessor to the successor,
 * which shows the attempt that made it. */
enum sup_upgrade_status {
	SUP_UPGRADE_NONE = 0, SUP_UPGRADE_SUCCESS, SUP_UPGRADE_FAILED, SUP_UPGRADE_REJECTED,
};
#define SUP_UPGRADE_RESULTS 4
const char *sup_upgrade_status_str(enum sup_upgrade_status s);

struct sup_upgrade_record {
	enum sup_upgrade_status status;
	uint64_t timestamp_ms;        /* wall: requested */
	uint64_t duration_ms;         /* to the commit or the rollback */
	uint64_t completed_ms;        /* wall: the predecessor was gone (0: not yet) */
	char source[16];              /* "SIGUSR2", "api" */
	char phase[24];               /* the phase it failed in, or "committed" */
	char from_version[64], to_version[64];
	char from_build[48], to_build[48];
	int32_t from_pid, to_pid;
	char **errors;                /* NULL-terminated, malloc'd */
	bool tail_valid;              /* the predecessor reported its connections: */
	uint64_t handed_over, closed, forced;
};

struct sup_validation_record {
	bool valid;
	uint64_t timestamp_ms;        /* 0: never */
	char requested_version[PLAN_VERSION_LEN];
};

/* The results of operator requests, for the admin layer to render. */
enum sup_result {
	SUP_OK = 0,
	SUP_DEFERRED,     /* the answer comes later through sup_ops.answer */
	SUP_NOT_FOUND,
	SUP_CONFLICT,
	SUP_UNAVAILABLE,  /* ferryd is stopping */
	SUP_FAILED,
	SUP_INVALID,
};
const char *sup_result_str(enum sup_result r);

struct sup_answer {
	enum sup_result result;
	char name[CFG_NAME_MAX];
	uint64_t generation;
	enum lc_state state;
	char error[256];
};

/* What an upgrade asks of the I/O layer (upgrade_io.c; docs/design.md
 * §11). The channel is the one to the other supervisor: the successor (in
 * the predecessor) or the predecessor (in the successor). */
enum sup_upgrade_admin { SUP_UPG_ADMIN_PAUSE = 0, SUP_UPG_ADMIN_RESUME, SUP_UPG_ADMIN_CLOSE };
enum sup_upgrade_notify {
	SUP_UPG_NOTIFY_RELOADING = 0, /* an upgrade starts */
	SUP_UPG_NOTIFY_READY,         /* it rolled back (predecessor), or we are the
	                                 main process now (successor): READY=1 + STATUS */
	SUP_UPG_NOTIFY_MAINPID,       /* the successor is the main process: MAINPID= */
};

struct sup_upgrade_ops {
	/* Predecessor: start the successor from s->exec_path with the channel
	 * on its fd 3 and send it OFFER. 0, or -1 with err (nothing started). */
	int (*spawn)(struct sup *s, int32_t *pid, char *err, size_t errlen);
	/* Send the state record (version `record`), the listening sockets and
	 * the ticket keys, then UPG_SENT. 0, or -1 with err. */
	int (*send_state)(struct sup *s, uint32_t record, char *err, size_t errlen);
	/* Queue a message without descriptors (-1: channel gone or full). */
	int (*send)(struct sup *s, uint32_t type, const void *payload, size_t len);
	/* A connection to relay (predecessor) with its fds (the caller keeps
	 * its own): struct upg_conn + the worker's record. */
	int (*send_conn)(struct sup *s, const void *payload, size_t len, const int *fds,
			 size_t nfds);
	/* Predecessor: kill the successor (when alive) and close the channel.
	 * Successor, after BYE: close the channel. */
	void (*end)(struct sup *s);
	void (*admin)(struct sup *s, enum sup_upgrade_admin how);
	void (*notify)(struct sup *s, enum sup_upgrade_notify what, int32_t pid, const char *status);
	void (*answer)(struct sup *s, uint64_t waiter, const struct sup_upgrade_record *rec);
	/* Successor at the commit: outlive the predecessor (no more parent-death
	 * signal), serve the admin API on the inherited sockets. */
	void (*commit)(struct sup *s);
	/* Successor, the main process now: the ticket rotation timer resumes
	 * where the predecessor's was. */
	void (*ready)(struct sup *s);
	/* Leave the loop with this exit code once the channel and the admin
	 * API's answers are out (a few seconds at most). */
	void (*exit)(struct sup *s, int code);
};

/* I/O the engine asks for. Every function reports failure instead of
 * deciding anything. */
struct sup_ops {
	/* Start process p of g with configuration cc: queue CONFIG (with its
	 * sealed metrics block, p->metrics set) and LISTENERS on its channel
	 * (p->chan set) and fork/exec. 0: started (p->pid set); 1: queued: the
	 * process starts later, reported by sup_on_spawned() (p->pid set then)
	 * or sup_on_spawn_failed(), and a STOP, DRAIN, HANDOVER or kill before
	 * that cancels it (reported as an exit); -1 with err. */
	int (*spawn)(struct sup *s, struct sup_proc *p, const struct sup_ccfg *cc,
		     char *err, size_t errlen);
	/* Queue a message on p's channel. -1: queue full or channel gone. */
	int (*send)(struct sup *s, struct sup_proc *p, enum ipc_type type, const void *payload,
		    size_t len);
	/* ... with file descriptors (the caller keeps its own). */
	int (*send_fds)(struct sup *s, struct sup_proc *p, enum ipc_type type,
			const void *payload, size_t len, const int *fds, size_t nfds);
	void (*kill)(struct sup *s, struct sup_proc *p, int sig);
	/* Release p's I/O resources (channel, metrics mapping); from sup_reap(). */
	void (*proc_free)(struct sup *s, struct sup_proc *p);
	/* Release what the I/O layer keeps per generation (its shared block). */
	void (*gen_free)(struct sup *s, struct sup_gen *g);
	/* Listening sockets. */
	int (*bind)(struct sup *s, const struct cfg_addr *a, char *err, size_t errlen);
	int (*dup)(struct sup *s, int fd);
	void (*close)(struct sup *s, int fd);
	/* A deferred request (reload, restart) is answered. */
	void (*answer_reload)(struct sup *s, uint64_t waiter, const struct sup_reload_record *rec);
	void (*answer_op)(struct sup *s, uint64_t waiter, const struct sup_answer *a);
	/* Write a posted config to path atomically (temp, fsync, rename),
	 * bounded in time. 0, or -1 with err. */
	int (*persist)(struct sup *s, const char *path, const char *text, size_t len, char *err,
		       size_t errlen);
	/* Everything has exited after sup_stop(): leave the loop. */
	void (*stopped)(struct sup *s);
	/* Lifecycle, for service managers (may be NULL). */
	void (*stopping)(struct sup *s, const char *why);
	void (*reload_begin)(struct sup *s);
	/* The admin API's credentials of the new config (token file, TLS
	 * material) are read and checked, kept aside until reload_end: applied
	 * when the reload ends SUCCESS or UNCHANGED, dropped otherwise. Called
	 * for every parsed config, unchanged ones too (a replaced token file
	 * takes effect on reload). 0, or -1 with err ("file:line: key: ..."):
	 * the reload is rejected. May be NULL. */
	int (*admin_prepare)(struct sup *s, const struct cfg *next, char *err, size_t errlen);
	void (*reload_end)(struct sup *s, const struct sup_reload_record *rec);
	void (*ready_changed)(struct sup *s, bool ready);
	/* Read the clocks again into s->now_ms / now_wall_ms (the work of the
	 * current turn counts), for durations the engine reports. May be NULL
	 * (the clock set by the caller stands). */
	void (*clock)(struct sup *s);
	/* Upgrades of ferryd itself; NULL where there are none (tests). */
	const struct sup_upgrade_ops *upgrade;
};

enum sup_ev_kind { SUP_EV_GEN = 0, SUP_EV_CLUSTER, SUP_EV_ITEM, SUP_EV_UPGRADE };

struct sup_event {
	enum sup_ev_kind kind;
	void *target;
	struct sup_proc *proc;        /* the process a generation event is about */
	int ev;
	char why[192];
};

struct sup {
	const struct sup_ops *ops;
	void *io;                     /* the I/O layer's own state */
	uint64_t now_ms;              /* monotonic, set by the I/O layer per event */
	uint64_t now_wall_ms;
	struct cfg cfg;               /* running config: its [ferry] settings (each
	                                 cluster's configuration is its ccfg) */
	char *config_path;
	char *config_text;            /* the running configuration's bytes (a posted
	                                 one too): what an upgrade validates */
	size_t config_len;
	char config_version[PLAN_VERSION_LEN]; /* sha256 of the config file bytes */
	uint64_t applied_at_ms;
	uint64_t started_at_ms;
	struct sandbox_kernel sandbox_kernel; /* probed once at start (sandboxstatus.h) */
	uint64_t fd_limit;            /* the workers' descriptor limit (RLIMIT_NOFILE);
	                                 0 = none known: max_connections = auto is
	                                 CFG_MAX_CONNECTIONS_AUTO */
	struct sup_cluster **clusters; /* listed, in file order */
	size_t n_clusters;
	struct sup_cluster **limbo;   /* added but not committed, or removed and
	                                 still draining: not listed, not serving */
	size_t n_limbo;
	bool stopping;
	bool stopped_reported;
	bool ever_ready;              /* sup_ready() was true at least once */
	size_t ready_count[4];        /* clusters per enum sup_ready_class */
	bool last_ready;
	int exit_code;                /* of the daemon once it stopped */
	uint64_t start_at;            /* mono: start the next clusters (0: none left) */

	struct sup_reload *reload;    /* in progress, or NULL */
	struct sup_reload *reload_dead; /* finished, freed by sup_reap() */
	bool hup_pending;             /* SIGHUP during a reload: one more after it */
	uint64_t hup_at;              /* mono: run that one (0 none) */
	struct sup_reload_record last_reload;
	struct reload_stats reload_stats; /* every finished reload, for /metrics */
	struct sup_validation_record last_validation;

	/* what this process is (status, health; an upgrade carries the rest) */
	int32_t pid;
	uint64_t process_started_at_ms; /* wall: this process (started_at_ms: the
	                                   service, carried across upgrades) */
	char *exec_path;              /* what an upgrade executes (buildinfo.h) */
	/* upgrades of ferryd itself (engine_upgrade.c) */
	struct sup_upgrade *upgrade;  /* in progress (either side), or NULL */
	struct sup_upgrade *upgrade_dead; /* finished, freed by sup_reap() */
	struct sup_upgrade_record last_upgrade;
	uint64_t upgrade_results[SUP_UPGRADE_RESULTS]; /* by status, for /metrics */
	/* the admin API's counters of the processes before this one (an
	 * upgrade carries them): refused missing, malformed, wrong; TLS */
	uint64_t admin_carried[4];

	/* event queue of the current chain */
	struct sup_event *evq;
	size_t evq_head, evq_len, evq_cap;
	bool dispatching;
	bool reap_pending;
	/* clusters something happened to since the last reap: the reaper and
	 * the sweep for clusters that are gone look at these only */
	struct sup_cluster **reap_list;
	size_t n_reap, cap_reap;
	bool reap_all;                /* the list could not grow: look at every one */
	/* deadlines: the clusters that have one, a min-heap by their earliest
	 * (sup_next_deadline is its top), and those whose earliest may have
	 * changed since (computed again before the next wait); both have room
	 * for every cluster (reserved when a cluster is made) */
	struct sup_cluster **dl_heap, **dl_dirty, **dl_due;
	size_t n_dl_heap, n_dl_dirty, cap_dl;
	bool dl_frozen;               /* upgrade_frozen() when they were computed */
	uint64_t violations;          /* forbidden pairs met (programming errors) */
	/* live handover: connections passed from an old worker to a new one */
	struct sup_relay {
		uint64_t id;              /* ours, given to the new worker */
		struct sup_proc *from, *to; /* NULL: the other supervisor of an
		                               upgrade (engine_upgrade.c) */
		uint64_t from_id;         /* the old worker's (or the predecessor's relay id) */
		uint64_t deadline_ms;     /* mono: no answer by then = outcome unknown */
	} *relays;
	size_t n_relays, cap_relays;
	uint64_t next_relay;
};

/* ---- the model's rules (supervisor.c; asked by the engine, status.c, the
 * admin API and the tests) ---- */

/* The generation that represents the cluster (docs/design.md §3): the
 * newest that accepts or drains, else the newest a reload did not roll
 * back, else the newest. NULL if none. */
struct sup_gen *sup_cluster_serving(const struct sup_cluster *c);
/* The state the cluster shows: its serving generation's, except that a
 * cluster the supervisor gave up on (crash loop, cannot start) is failed
 * unless that generation still accepts. */
enum lc_state sup_cluster_state(const struct sup_cluster *c);
/* The newest generation the cluster itself started (not a reload's). */
struct sup_gen *sup_cluster_current(struct sup_cluster *c);
bool sup_cluster_alive(const struct sup_cluster *c);
bool sup_gen_alive(const struct sup_gen *g);
/* Ready per startup policy: fail-fast — every cluster serving in accepting
 * and responsive; best-effort — at least one accepting and none still
 * initializing. */
bool sup_ready(const struct sup *s);
/* The same answer from counts the engine keeps current (sup_ready_touch
 * after anything that may change what a cluster counts for): O(1), asked
 * after every event chain. */
enum sup_ready_class { SUP_READY_NONE = 0, SUP_READY_OTHER, SUP_READY_INIT, SUP_READY_ACCEPTING };
bool sup_ready_cached(const struct sup *s);
void sup_ready_touch(struct sup *s, struct sup_cluster *c);
struct sup_cluster *sup_find_cluster(struct sup *s, const char *name);
/* How long a reload can take (reloadTimeoutMs, what ferryctl waits for):
 * init_timeout and the stop grace, plus SUP_START_PACE_MS for every worker
 * process a reload of everything would start (starts are paced). */
uint64_t sup_reload_timeout_ms(const struct sup *s);
/* What the paced starts of every cluster's workers may add to a reload or
 * an upgrade: SUP_START_PACE_MS per worker process. */
uint64_t sup_start_pace_ms(const struct sup *s);
/* The max_connections a worker of cl gets: its own, or for auto (0) what
 * the workers' descriptor limit allows (cfg_max_connections_auto). */
uint32_t sup_max_connections(const struct sup *s, const struct cfg_cluster *cl);
/* A configuration's version: "sha256:<hex>" of data, into out. */
void sup_hash_hex(const void *data, size_t len, char *out, size_t outlen);

/* ---- engine entry points (engine.c; drain and restart in engine_cluster.c,
 * sup_cluster_send in engine_gen.c, the handover relay in engine_relay.c) ---- */

/* Set up s with cfg (taken over). 0, or -1 (startup failed; logged). */
int sup_init(struct sup *s, const struct sup_ops *ops, struct cfg *cfg,
	     const char *config_path, const char *config_bytes, size_t config_len);
/* Bind and start every cluster. -1: fail-fast start-up error. */
int sup_start(struct sup *s);
void sup_free(struct sup *s);

/* Events from the I/O layer. `p` stays valid until sup_reap(). */
/* A queued start (spawn returned 1) happened now: p->pid is set; its
 * generation's init deadline counts from here. */
void sup_on_spawned(struct sup *s, struct sup_proc *p);
/* ... or could not happen (err says why): as if the process had reported
 * FAILED and exited. */
void sup_on_spawn_failed(struct sup *s, struct sup_proc *p, const char *err);
void sup_on_ready(struct sup *s, struct sup_proc *p);
void sup_on_failed(struct sup *s, struct sup_proc *p, const char *reason);
void sup_on_exit(struct sup *s, struct sup_proc *p, int wstatus);
void sup_on_malformed(struct sup *s, struct sup_proc *p, const char *what);
void sup_on_queue_full(struct sup *s, struct sup_proc *p);
void sup_on_pong(struct sup *s, struct sup_proc *p, uint64_t seq);
void sup_on_upstream(struct sup *s, struct sup_proc *p, const struct ipc_upstream *u);
void sup_on_unknown_node(struct sup *s, struct sup_proc *p, const struct ipc_unknown_node *u);
/* Live handover: an old worker hands a connection over (fds: [client] or
 * [client, upstream], closed by the engine whatever happens), a new worker
 * says whether it adopted one. */
void sup_on_conn_out(struct sup *s, struct sup_proc *p, const void *payload, size_t len,
		     const int *fds, size_t nfds);
void sup_on_conn_taken(struct sup *s, struct sup_proc *p, const struct ipc_conn_ack *ack);
/* Deadlines: the earliest armed one (mono ms, 0 = none), and firing. */
uint64_t sup_next_deadline(struct sup *s);
/* Every cluster's earliest deadline is computed again before the next
 * wait (for the unit tests' check that the kept answer is right). */
void sup_deadline_touch_all(struct sup *s);
void sup_tick(struct sup *s);
/* Free what ended; after every event chain. */
void sup_reap(struct sup *s);
/* SIGTERM/SIGINT: drain everything, then ops->stopped. A second call
 * kills every process. */
void sup_stop(struct sup *s, const char *why);
void sup_kill_all(struct sup *s);

/* Send one message to every live worker of every alive generation of c
 * (a full channel is that worker's fault, as for any message), then run
 * what that caused. Returns the number of workers sent to. */
size_t sup_cluster_send(struct sup *s, struct sup_cluster *c, enum ipc_type type,
			const void *payload, size_t len);

/* Every tls_ticket_rotation (the I/O layer's timer): rotate the
 * session-ticket keys of every cluster that has some (tickets.h) and send
 * them to every live worker of its alive generations (a full channel is
 * that worker's fault like any other message); keys of a cluster a reload
 * turned TLS off for are wiped instead. */
void sup_tickets_rotate(struct sup *s);

/* Operator requests. */
enum sup_result sup_cluster_drain(struct sup *s, const char *name, struct sup_answer *a);
enum sup_result sup_cluster_restart(struct sup *s, const char *name, uint64_t waiter,
				    struct sup_answer *a);

/* ---- reload (reload.c) ---- */

/* Start a reload with `text` (posted body; NULL/0 = read the config file).
 * SUP_DEFERRED: the answer goes to ops->answer_reload(waiter) later (waiter
 * 0 = nobody waits: SIGHUP). Otherwise it finished: *rec is the outcome
 * (s->last_reload, or a conflict record for SUP_CONFLICT). */
enum sup_result sup_reload_start(struct sup *s, const char *text, size_t len,
				 const char *source, uint64_t waiter,
				 const struct sup_reload_record **rec);
/* A posted config that the admin process's parse already refused (its
 * version and errors): recorded and answered like any rejected reload, or
 * SUP_CONFLICT / SUP_UNAVAILABLE as sup_reload_start would answer. */
enum sup_result sup_reload_reject(struct sup *s, const char *version, const char *const *errors,
				  size_t n_errors, const char *source,
				  const struct sup_reload_record **rec);
/* SIGHUP: reload the file, or coalesce into one more after the current. */
void sup_reload_signal(struct sup *s);
/* When the reload in progress started (wall ms), 0 if none. */
uint64_t sup_reload_since(const struct sup *s);
void sup_record_validation(struct sup *s, bool valid, const char *version);
void sup_record_clear(struct sup_reload_record *rec);
void sup_upgrade_record_clear(struct sup_upgrade_record *rec);
/* The records' NULL-terminated string lists: add a copy of str (out of
 * memory: the list lacks it, nothing worse), free one. */
char **sup_strv_add(char **v, const char *str);
void sup_strv_free(char **v);

/* ---- upgrades of ferryd itself (engine_upgrade.c, docs/design.md §11) ---- */

#define SUP_UPGRADE_COMMIT_MS 5000   /* COMMIT to COMMITTED */
#define SUP_UPGRADE_RELAY_MS 3000    /* predecessor: a connection relayed to the
                                        successor not answered by then: unknown */
#define SUP_UPGRADE_COUNTERS_MS 1000 /* predecessor: its counters every this */

/* SIGUSR2 or POST /admin/upgrade. SUP_DEFERRED: started, the outcome goes
 * to ops->upgrade->answer(waiter) (0: nobody waits). SUP_CONFLICT,
 * SUP_UNAVAILABLE: refused with err, nothing recorded. SUP_FAILED: it
 * ended during the call (the file cannot be executed): *rec is
 * s->last_upgrade. */
enum sup_result sup_upgrade_start(struct sup *s, const char *source, uint64_t waiter,
				  const struct sup_upgrade_record **rec, char *err, size_t errlen);
/* A message on the upgrade channel, its type and size checked
 * (upg_decode); its fds are the engine's (closed whatever happens). */
void sup_on_upgrade_msg(struct sup *s, struct ipc_msg *msg);
/* The other supervisor is gone (exit, channel EOF or broken), why says how. */
void sup_on_upgrade_gone(struct sup *s, const char *why);
struct staterec;
struct upg_secret;
/* Successor: build the model from the predecessor's record, taking the
 * listening sockets of fds[] (record order; a taken one becomes -1) and
 * the ticket keys, and start a held generation of every cluster that
 * serves. 0, or -1 with err (then nothing was started). */
int sup_upgrade_restore(struct sup *s, struct staterec *rec, int *fds, size_t nfds,
			const struct upg_secret *secrets, size_t n_secrets, char *err,
			size_t errlen);
/* For status: the phase of the upgrade in progress (NULL: none), since
 * when (wall ms), the other process's pid, and whether this process is the
 * successor. */
const char *sup_upgrade_phase(const struct sup *s);
uint64_t sup_upgrade_since(const struct sup *s);
int32_t sup_upgrade_peer(const struct sup *s);
bool sup_upgrade_is_successor(const struct sup *s);
/* Whether this process may speak to systemd now (not a predecessor that
 * handed over, not a successor before it is the main process). */
bool sup_upgrade_may_notify(const struct sup *s);

/* Engine entry points read the clock from the model: callers set it first. */
static inline void
sup_set_clock(struct sup *s, uint64_t mono_ms, uint64_t wall_ms)
{
	s->now_ms = mono_ms;
	s->now_wall_ms = wall_ms;
}

#endif
