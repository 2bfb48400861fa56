/*
 * staterec — the versioned state record an upgrade carries from the
 * running ferryd (the predecessor) to its successor (docs/design.md §11):
 * everything of the supervisor's model that must outlive the process —
 * the running configuration (its text, not the file on disk), generation
 * numbering, crash counters and back-off, learned brokers, the counters
 * behind /metrics, the records of the last reload, validation and upgrade,
 * and which listening socket is which — but no secret (ticket keys travel
 * apart, in guarded memory, upgproto.h) and nothing a process of the
 * predecessor holds (its workers stay its own).
 *
 * Encoding: one JSON document (jansson), {"record": VERSION, ...}, written
 * by staterec_encode() from the model and read by staterec_decode() into a
 * plain struct staterec, which the engine applies (engine_upgrade.c).
 * Decoding is strict, as the config parser is: an unknown or missing key,
 * a value of the wrong type or out of range is an error naming its path
 * ("clusters[1].crash.times: ..."); a record of a version this build does
 * not read is refused before anything moves (upgproto.h negotiates the
 * version). Times: wall clock or CLOCK_MONOTONIC milliseconds (both
 * processes run on one boot, so monotonic deadlines carry as they are).
 *
 * Counters go by name, never as a memory layout (struct metrics is "ABI by
 * field order" of one build only): staterec_counters_json() names every
 * nonzero counter of a cluster (METRICS_FIELDS, per API key, histogram
 * buckets by their bound), staterec_counters_read() adds them into this
 * build's struct metrics: names it does not know are dropped, those it
 * knows that are absent count 0, a bucket whose bound it lacks folds into
 * its next larger one (or only into the count). The same encoding carries
 * the predecessor's running totals while it hands over (UPG_COUNTERS).
 *
 * Pure: no I/O, no clock. Return convention: the encoders return malloc'd
 * text or NULL (out of memory); the decoders 0 / -1 with a message in err.
 */
#ifndef FERRY_SUPERVISOR_STATEREC_H
#define FERRY_SUPERVISOR_STATEREC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "supervisor/supervisor.h"

#define STATEREC_MIN 1              /* record versions this build reads */
#define STATEREC_MAX 1              /* ... and writes (the newest) */
#define STATEREC_MAX_BYTES (64u << 20)
#define STATEREC_UNKNOWN_NODES 16   /* as sup_cluster.unknown_nodes */

/* What the record needs that is not in the model: the I/O layer's. */
struct staterec_io {
	const char *notify_socket;      /* "" or NULL: none */
	uint64_t ticket_rotation_next_mono; /* 0: not armed */
	/* the admin API's listeners passed along (their fds follow the
	 * cluster listeners, in this order) */
	bool control;
	const char *control_path;
	uint64_t control_dev, control_ino;
	bool admin;
	struct cfg_addr admin_addr;
	/* the admin API's counters so far (carried and this process's):
	 * refused missing, malformed, wrong; TLS handshake failures */
	uint64_t admin_counters[4];
};

enum staterec_fd_kind { STATEREC_FD_LISTENER = 0, STATEREC_FD_CONTROL, STATEREC_FD_ADMIN };

/* One descriptor passed with the record, in the record's order. */
struct staterec_fd {
	enum staterec_fd_kind kind;
	char cluster[CFG_NAME_MAX];     /* listener */
	int32_t node_id;                /* listener: -1 for the bootstrap */
	struct cfg_addr addr;           /* listener, admin */
	char path[108];                 /* control */
	uint64_t dev, ino;              /* control */
};

struct staterec_cluster {
	char name[CFG_NAME_MAX];
	enum fsm_cstate st;             /* active, backoff, failed or parked */
	char config_version[PLAN_VERSION_LEN];
	uint64_t next_generation;
	uint32_t restarts;
	uint64_t restart_at_mono, restart_delay_ms;
	char fail_reason[192];
	uint64_t *crash_times;          /* oldest first, malloc'd */
	uint32_t n_crash;
	uint64_t crash_backoff_ms, crash_started_mono, crash_restarts, crash_loops;
	uint64_t unresponsive_total;
	enum sup_upstream_state upstream;
	uint64_t upstream_since_ms;
	char upstream_error[192];
	struct ipc_unknown_node unknown_nodes[STATEREC_UNKNOWN_NODES];
	uint64_t unknown_since_ms[STATEREC_UNKNOWN_NODES];
	size_t n_unknown;
	struct sup_nodes nodes;         /* v malloc'd */
	bool replacement_valid;
	uint64_t rep_from, rep_to, rep_handed_over, rep_drained, rep_forced, rep_duration_ms;
	/* the generation that represents it (status), when it has none alive
	 * in the successor: failed, parked, waiting out a back-off */
	bool serving_valid;
	uint64_t serving_generation;
	enum lc_state serving_state;
	uint64_t serving_since_ms;
	char serving_reason[192];
	bool tickets;                   /* its ticket keys follow (UPG_SECRET) */
	struct metrics counters;        /* by name, read into this build's layout */
};

struct staterec {
	uint32_t record;
	char from_version[64], from_build[48];
	int32_t from_pid;
	uint64_t from_started_ms;
	char *exec_path;
	char notify_socket[128];
	char *config_path;
	char *config_text;
	size_t config_len;
	char config_version[PLAN_VERSION_LEN];
	uint64_t applied_at_ms, service_started_ms;
	bool hup_pending;
	uint64_t ticket_rotation_next_mono;
	struct reload_stats reload_stats;
	struct sup_reload_record last_reload;
	struct sup_validation_record last_validation;
	uint64_t upgrade_results[SUP_UPGRADE_RESULTS];
	struct sup_upgrade_record last_upgrade;
	uint64_t admin_carried[4];
	struct staterec_fd *fds;
	size_t n_fds;
	struct staterec_cluster *clusters;
	size_t n_clusters;
};

/* The record of s as version `version` (STATEREC_MIN..STATEREC_MAX), with
 * io's part. malloc'd text, its length in *len; NULL when out of memory. */
char *staterec_encode(const struct sup *s, const struct staterec_io *io, uint32_t version,
		      size_t *len);

/* The listening sockets of s to pass with its record, in the record's
 * order (every listed cluster's open listeners, in file order), into fds
 * (at most max); returns their number. The admin API's follow, the I/O
 * layer's. */
size_t staterec_listener_fds(const struct sup *s, int *fds, size_t max);

/* Decode a record of version `version` (what the handshake chose). 0, or
 * -1 with the first error (its path in the document) in err; on error
 * *out holds nothing (freed). */
int staterec_decode(const char *text, size_t len, uint32_t version, struct staterec *out,
		    char *err, size_t errlen);
void staterec_free(struct staterec *r);

/* Counters by name: the cluster's totals (retired, carried, every mapped
 * block) and, with gauges, its live processes' gauges, nonzero values only.
 * NULL when out of memory. */
json_t *staterec_counters_json(const struct sup_cluster *c, bool gauges);
/* Add the counters (and gauges) of j into m (see above). 0, or -1 when j is
 * not a counters object. */
int staterec_counters_read(const json_t *j, struct metrics *m, char *err, size_t errlen);

/* UPG_COUNTERS: {"cluster": NAME, "counters": {...}} with gauges. */
char *staterec_counters_msg(const struct sup_cluster *c, size_t *len);
/* Its reading: the cluster's name and its counters into m (zeroed first). */
int staterec_counters_msg_read(const char *text, size_t len, char *name, size_t namelen,
			       struct metrics *m, char *err, size_t errlen);

#endif
