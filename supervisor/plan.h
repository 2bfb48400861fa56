/*
 * plan — the pure part of a reload: what changes between the running
 * configuration and a new one, and what must be done about it.
 *
 * Clusters are matched by name and compared by a per-cluster version: the
 * SHA-256 of the cluster's canonical text plus the contents of every file it
 * references (none today; TLS material will be folded in, so a renewed
 * certificate is a change). The plan says, per cluster, keep (untouched:
 * same worker, same pid), add, modify (new generation beside the old one,
 * on the same listening sockets where addresses are unchanged) or remove.
 * `[ferry]` settings that cannot change in a running ferryd are reported as
 * errors naming the key.
 *
 * No I/O, no processes: the supervisor feeds it the running state and the
 * parsed new config and carries out the result (reload.c).
 */
#ifndef FERRY_SUPERVISOR_PLAN_H
#define FERRY_SUPERVISOR_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "common/config.h"

#define PLAN_VERSION_LEN 80   /* "sha256:" + 64 hex + NUL */

enum plan_op { PLAN_KEEP = 0, PLAN_ADD, PLAN_MODIFY, PLAN_REMOVE };
const char *plan_op_str(enum plan_op op);

/* What the supervisor runs now, per cluster. */
struct plan_running {
	const struct cfg_cluster *cl;
	const char *version;          /* plan_cluster_version() of it */
};

struct plan_item {
	char name[CFG_NAME_MAX];
	enum plan_op op;
	int old_index;                /* into the running list; -1 for ADD */
	int new_index;                /* into next->clusters; -1 for REMOVE */
	bool listeners_changed;       /* MODIFY: some listening address differs */
	char version[PLAN_VERSION_LEN]; /* new version (ADD/MODIFY/KEEP) */
};

struct plan {
	struct plan_item *items;      /* running order first, then additions */
	size_t n;
	size_t n_add, n_modify, n_remove, n_keep;
};

/* "sha256:<hex>" over the cluster's canonical text. 0, or -1 on OOM. */
int plan_cluster_version(const struct cfg_cluster *cl, char *out, size_t outlen);

/* Appends one "file:line: KEY cannot change without restarting ferryd
 * (running: X, new: Y)" error per such [ferry] key that differs; returns the
 * number of errors added. */
size_t plan_check_restart_keys(const struct cfg *running, const struct cfg *next,
			       struct cfg_errors *errs);

/* Diff running clusters against next. 0 on success, -1 on OOM. */
int plan_make(const struct plan_running *run, size_t n_run, const struct cfg *next,
	      struct plan *out);
void plan_free(struct plan *p);

/* Which items of a reload commit, once every item is decided. ok[i] says
 * item i prepared (keep and remove items need nothing: true). Under
 * all-or-nothing one failure means nothing commits. Under per-cluster an
 * item commits only when no address it takes over stays with a cluster
 * that does not commit — so clusters that swap, rotate or chain their
 * addresses commit or roll back together. The merged result is checked:
 * no address is served by two clusters. Returns 0 with commit[] filled, or
 * -1 with a reason in err and nothing committing. Pure. */
int plan_resolve(const struct plan *p, const struct plan_running *run, const struct cfg *next,
		 const bool *ok, bool per_cluster, bool *commit, char *err, size_t errlen);

/* "sha256:<hex>" over what a cluster's upstream connections depend on (the
 * upstream list; dial map and upstream TLS settings when they exist): two
 * configurations with the same key can take over each other's connections.
 * 0, or -1 on OOM. */
int plan_upstream_key(const struct cfg_cluster *cl, char *out, size_t outlen);

/* True when the two clusters listen on exactly the same addresses. */
bool plan_same_listeners(const struct cfg_cluster *a, const struct cfg_cluster *b);

#endif
