/*
 * sandboxstatus — what the supervisor says about the sandboxes of ferry's
 * processes: the part "sandbox" of GET /admin/health, and the one line
 * logged at start about what the kernel lacks.
 *
 * The kernel is probed once at start (sup->sandbox_kernel); each worker
 * reports what it applied in its shared block (common/sandbox.h), read
 * here with atomic loads. The JSON builder is pure over the process table.
 */
#ifndef FERRY_SUPERVISOR_SANDBOXSTATUS_H
#define FERRY_SUPERVISOR_SANDBOXSTATUS_H

#include <jansson.h>

#include "supervisor/supervisor.h"

/* {"setting":"on"|"off","kernel":{"seccomp":bool,"landlockAbi":N},
 *  "missing":"..."|null,
 *  "processes":[{"role":"supervisor","pid":N,"sandbox":"none"},
 *               {"role":"worker","cluster","generation","index","pid",
 *                "sandbox":"seccomp,landlock-fs,...","complete":bool},...]}
 * Workers are the live ones; "sandbox" is "none" until a worker has locked
 * down (it does before READY), "off" with sandbox = off; "complete" is
 * whether it has all the kernel offers. The admin process's entry is
 * added by the admin API (it knows the process: adminproc.h). */
json_t *sandboxstatus_json(const struct sup *s);

/* {"role":"admin","pid":N,"sandbox":"...","complete":bool} of the admin
 * process pid whose report is r (NULL: "none"). */
json_t *sandboxstatus_admin_json(const struct sup *s, pid_t pid, const struct sandbox_report *r);

/* Probe the kernel into s->sandbox_kernel and log once what the workers'
 * sandbox will be (warn when on and something is missing). */
void sandboxstatus_start(struct sup *s);

#endif
