/*
 * admin_api — what each route of ferryd's admin API (docs/design.md §7)
 * answers, in the supervisor. Requests arrive typed and checked from the
 * admin process (adminproto.h: a route id, a cluster name that follows the
 * name rule, a config text, the caller), never as HTTP; the handlers ask
 * the model and the engine (supervisor.h), render JSON with status.h, and
 * return {status, content type, body} for the admin process to send.
 *
 * Adding a route: a row in adminproto.c's table (method, pattern, flags,
 * id), a handler here with the admin_api_fn signature and its row in
 * admin_api_handlers[] (admin_api.c). A handler either fills the answer, or
 * returns ADMIN_API_DEFERRED after handing its waiter id to the engine for
 * a request that finishes later (a reload or a restart that waits for
 * workers); the engine's answer is then rendered by
 * admin_api_reload_answer() / admin_api_op_answer().
 *
 * Every mutating call (POST) is logged here with its caller as the admin
 * process identified it: uid, gid and pid (SO_PEERCRED) on the control
 * socket; the address, and the certificate subject when there is one, on
 * admin_listen.
 */
#ifndef FERRY_SUPERVISOR_ADMIN_API_H
#define FERRY_SUPERVISOR_ADMIN_API_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "supervisor/adminproto.h"

struct sup;
struct sup_reload_record;
struct sup_answer;

/* One answer for the admin process. */
struct admin_answer {
	int status;                     /* HTTP status */
	enum adminproto_ctype ctype;
	char *body;                     /* malloc'd */
	size_t body_len;
};

/* What the handlers show of the admin process itself (/admin/health,
 * /metrics), filled by adminproc.c. */
struct admin_api_proc {
	const struct adminproto_counters *counters; /* refusals, TLS failures */
	pid_t pid;                      /* 0 while none runs */
	const char *state;              /* adminproc.h's state names */
	uint64_t since_wall_ms;         /* of that state */
	uint64_t restarts;              /* unexpected exits so far */
	const char *last_exit;          /* "exit 1", "signal 9", "" */
};

enum admin_api_result {
	ADMIN_API_ANSWERED = 0,
	ADMIN_API_DEFERRED,             /* the engine answers waiter later */
};

/* Handle one checked request (adminproto_request_check) with its body, if
 * any (a posted config). waiter names it to the engine if it must wait. */
enum admin_api_result admin_api_handle(struct sup *s, const struct adminproto_request_view *v,
				       const char *body, size_t body_len, uint64_t waiter,
				       const struct admin_api_proc *proc, struct admin_answer *out);

/* The answers of deferred requests, once the engine has them. */
void admin_api_reload_answer(struct sup *s, const struct sup_reload_record *rec,
			     struct admin_answer *out);
void admin_api_op_answer(const struct sup_answer *ans, struct admin_answer *out);
struct sup_upgrade_record;
void admin_api_upgrade_answer(struct sup *s, const struct sup_upgrade_record *rec,
			      struct admin_answer *out);

/* The admin API's counts (refused missing, malformed, wrong-token; TLS
 * handshake failures): those of the counters block k (NULL: none) and
 * those earlier ferryds carried over an upgrade (s->admin_carried). */
void admin_api_counters(const struct adminproto_counters *k, const struct sup *s,
			uint64_t out[4]);

#endif
