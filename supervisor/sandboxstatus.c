/*
 * sandboxstatus — the sandbox in /admin/health and at start; see
 * sandboxstatus.h.
 */
#include "supervisor/sandboxstatus.h"

#include "common/log.h"
#include "common/sandbox.h"

/* What report r says is in force ("sandbox"), and whether it is all the
 * kernel offers ("complete"), into o. */
static json_t *
sandboxstatus_add(json_t *o, const struct sandbox_report *r, uint32_t expected)
{
	uint32_t flags = r ? atomic_load_explicit(&r->flags, memory_order_acquire) : 0;
	char what[160];
	sandbox_describe(flags, what, sizeof what);
	bool complete = (flags & SANDBOX_F_LOCKED) && !(flags & SANDBOX_F_OFF) &&
	    (flags & expected) == expected;
	if (o && (json_object_set_new(o, "sandbox", json_string(what)) == -1 ||
	    json_object_set_new(o, "complete", json_boolean(complete)) == -1)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *
sandboxstatus_worker(const struct sup_cluster *c, const struct sup_gen *g,
		     const struct sup_proc *p, uint32_t expected)
{
	return sandboxstatus_add(json_pack("{s:s, s:s, s:I, s:I, s:I}", "role", "worker",
	    "cluster", c->name, "generation", (json_int_t)g->generation,
	    "index", (json_int_t)p->index, "pid", (json_int_t)p->pid),
	    p->metrics ? &p->metrics->sandbox : NULL, expected);
}

json_t *
sandboxstatus_admin_json(const struct sup *s, pid_t pid, const struct sandbox_report *r)
{
	return sandboxstatus_add(json_pack("{s:s, s:I}", "role", "admin", "pid", (json_int_t)pid),
	    r, sandbox_expected_flags(&s->sandbox_kernel));
}

json_t *
sandboxstatus_json(const struct sup *s)
{
	const struct sandbox_kernel *k = &s->sandbox_kernel;
	char missing[512];
	sandbox_missing(k, missing, sizeof missing);
	uint32_t expected = sandbox_expected_flags(k);
	json_t *procs = json_array();
	/* The supervisor runs as root to bind ports and read key files: no
	 * sandbox (docs/security.md). */
	json_array_append_new(procs, json_pack("{s:s, s:I, s:s}", "role", "supervisor",
	    "pid", (json_int_t)s->pid, "sandbox", "none"));
	for (size_t i = 0; i < s->n_clusters; i++) {
		const struct sup_cluster *c = s->clusters[i];
		for (const struct sup_gen *g = c->gens; g; g = g->next)
			for (size_t j = 0; j < g->n_procs; j++)
				if (g->procs[j].alive && g->procs[j].pid > 0)
					json_array_append_new(procs,
					    sandboxstatus_worker(c, g, &g->procs[j], expected));
	}
	return json_pack("{s:s, s:{s:b, s:i}, s:o, s:o}",
	    "setting", s->cfg.sandbox ? "on" : "off",
	    "kernel", "seccomp", k->seccomp, "landlockAbi", k->landlock_abi,
	    "missing", missing[0] ? json_string(missing) : json_null(),
	    "processes", procs);
}

void
sandboxstatus_start(struct sup *s)
{
	sandbox_probe(&s->sandbox_kernel);
	char missing[512], what[160];
	int n = sandbox_missing(&s->sandbox_kernel, missing, sizeof missing);
	sandbox_describe(s->cfg.sandbox ? sandbox_expected_flags(&s->sandbox_kernel) :
	    SANDBOX_F_LOCKED | SANDBOX_F_OFF, what, sizeof what);
	if (!s->cfg.sandbox)
		log_warn("worker sandbox off", "sandbox=off hint=\"sandbox = on in [ferry] "
		    "confines workers and the admin process (docs/security.md)\"");
	else if (n)
		log_warn("worker sandbox incomplete: the kernel lacks some of it", "sandbox=%s "
		    "missing=\"%s\" landlock_abi=%d", what, missing, s->sandbox_kernel.landlock_abi);
	else
		log_info("worker sandbox", "sandbox=%s landlock_abi=%d", what,
		    s->sandbox_kernel.landlock_abi);
}
