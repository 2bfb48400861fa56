/*
 * testhook — fault injection for the integration tests, compiled only with
 * `meson -Dtest_hooks=true` (FERRY_TEST_HOOKS; scripts/test sets it): a
 * release build has neither this module nor the call to it.
 *
 * Sandbox probes: a real-time signal makes a sandboxed process (a worker,
 * the admin process) attempt what its sandbox forbids, from its event
 * loop, after the lock-down (the test signals one process by pid, so its
 * siblings, other clusters and ferryd are the control group):
 *   SIGRTMIN+1  open("/etc/passwd", O_RDONLY)
 *   SIGRTMIN+2  execve of a path that does not exist
 *   SIGRTMIN+3  fork()
 *   SIGRTMIN+4  bind() of a TCP socket to 127.0.0.1, any port
 * Sandboxed, each kills the process (the supervisor reports "sandbox
 * violation: syscall NAME"). With sandbox = off each one succeeds (or, for
 * execve, fails with ENOENT) and the process logs "test hook" with the
 * outcome and carries on.
 *
 * Sanitizer builds also watch (the sanitizer runtime must still report
 * from inside the sandbox, symbolized, and not die of it):
 *   SIGRTMIN+5  leak a block (LeakSanitizer reports it when the worker exits)
 *   SIGRTMIN+6  read past a heap block (AddressSanitizer reports and aborts)
 */
#ifndef FERRY_COMMON_TESTHOOK_H
#define FERRY_COMMON_TESTHOOK_H

#include <ev.h>

#define TESTHOOK_SIGNALS 6

/* Watch the probe signals (before the lock-down: installing a handler is
 * part of what it then forbids). */
void testhook_start(struct ev_loop *loop);

#endif
