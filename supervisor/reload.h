/*
 * reload — carrying out a configuration change in a running ferryd
 * (DESIGN §4), plus the per-cluster drain and restart operations.
 *
 * A reload parses and validates the new text with no side effects, diffs
 * it (plan.h), then prepares: binds new addresses, and starts one new
 * generation per added or modified cluster, held in `initializing` until
 * every one has reported READY within init_timeout. Commit tells the new
 * generations to ACCEPT on the same listening socket objects (dups of the
 * supervisor's fds) and drains the old ones; removed clusters drain and
 * their sockets close. Any preparation failure rolls everything back
 * (reload_policy = all-or-nothing) or only the failed clusters
 * (per-cluster); serving generations are never disturbed before commit.
 *
 * One reload at a time; SIGHUPs during one coalesce into one more.
 */
#ifndef FERRY_SUPERVISOR_RELOAD_H
#define FERRY_SUPERVISOR_RELOAD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "supervisor/admin.h"
#include "supervisor/supervisor.h"

/* Start a reload with `text` (the posted body; NULL = read the config
 * file). Returns ADMIN_RESPOND with *resp filled (rejected, unchanged,
 * conflict, or finished at once), or ADMIN_DEFERRED when the answer goes to
 * conn later. conn may be NULL (SIGHUP): the outcome is only logged and
 * recorded. */
enum admin_handler_result reload_start(struct sup *s, const char *text, size_t len,
				       const char *source, struct admin_conn *conn,
				       struct admin_response *resp);
/* SIGHUP: reload the file, or coalesce into one more after the current. */
void reload_from_signal(struct sup *s);
/* Roll back a reload in progress (ferryd is stopping). */
void reload_abort(struct sup *s, const char *why);

/* POST /admin/clusters/NAME/drain and .../restart. */
enum admin_handler_result reload_cluster_drain(struct sup *s, const char *name,
					       struct admin_response *resp);
enum admin_handler_result reload_cluster_restart(struct sup *s, const char *name,
						 struct admin_conn *conn,
						 struct admin_response *resp);

/* GET /admin/config/status */
json_t *reload_status_json(const struct sup *s);
/* Record a POST /admin/config/validate outcome. */
void reload_record_validation(struct sup *s, bool valid, const char *version);

#endif
