/*
 * admin_api — the HTTP admin API of ferryd (docs/design.md §7): its routes
 * and their handlers. The HTTP server that carries it (listeners, access
 * checks, deadlines, eviction, TLS) is admin_http.h; this module only says
 * what each path answers, asking the model and the engine (supervisor.h)
 * and rendering with status.h.
 *
 * Adding a route: write a handler with the admin_handler_fn signature
 * (admin_http.h) and add a row to admin_routes[] in admin_api.c, beside
 * the handlers. A '*' path segment matches one non-empty segment, handed
 * to the handler as req->param ("/admin/clusters/ * /drain"). A handler
 * either fills the response and returns ADMIN_RESPOND, or returns
 * ADMIN_DEFERRED after handing req->id to the engine as the waiter of a
 * request that finishes later (a reload or a restart that waits for
 * workers); the engine's answer comes back through admin_api_answer_*().
 */
#ifndef FERRY_SUPERVISOR_ADMIN_API_H
#define FERRY_SUPERVISOR_ADMIN_API_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "supervisor/admin_http.h"

struct sup;
struct sup_reload_record;
struct sup_answer;

/* Start the admin API's servers (admin_http_start) for s on loop, routed
 * to this module's handlers. NULL with a message in err when they cannot
 * start; admin_http_stop() ends them. */
struct admin *admin_api_start(struct sup *s, struct ev_loop *loop,
			      const struct admin_listeners *inherit, char *err, size_t errlen);

/* The engine answers a deferred request (reload, restart) by its waiter id;
 * a client that went away meanwhile (or a stopped admin, a == NULL) is
 * simply not answered. */
void admin_api_answer_reload(struct admin *a, struct sup *s, uint64_t waiter,
			     const struct sup_reload_record *rec);
void admin_api_answer_op(struct admin *a, uint64_t waiter, const struct sup_answer *ans);
struct sup_upgrade_record;
void admin_api_answer_upgrade(struct admin *a, struct sup *s, uint64_t waiter,
			      const struct sup_upgrade_record *rec);
/* The admin API's counters (refused missing, malformed, wrong; TLS
 * handshake failures) including those an upgrade carried over. */
void admin_api_counters(const struct admin *a, const struct sup *s, uint64_t out[4]);

#endif
