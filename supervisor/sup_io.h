/*
 * sup_io — ferryd's I/O layer: the libev loop, the worker processes and
 * their control channels, signals, the deadline timer, the reaper and the
 * admin API's servers. It carries out what the engine asks (struct sup_ops
 * in supervisor.h) and turns everything that happens into engine events;
 * it decides nothing. See sup_io.c for the event sources and why nothing in
 * it blocks the loop.
 */
#ifndef FERRY_SUPERVISOR_SUP_IO_H
#define FERRY_SUPERVISOR_SUP_IO_H

#include <stddef.h>

#include "common/config.h"

/* Run ferryd with cfg (taken over) until it stops: config_path and its
 * bytes (for the config version), self_exe re-executed as `ferryd
 * --worker` for every worker, exec_path the file an upgrade executes (the
 * one ferryd was started from, buildinfo.h; NULL: no upgrades). Returns
 * the process exit code. */
int sup_run(struct cfg *cfg, const char *config_path, const char *config_bytes,
	    size_t config_len, const char *self_exe, const char *exec_path);

/* `ferryd --successor`: started by a running ferryd to take over from it
 * (docs/design.md §11), the upgrade channel on fd 3 (upgrade_io.c).
 * Returns the process exit code. */
int upgrade_successor_main(int argc, char **argv);

#endif
