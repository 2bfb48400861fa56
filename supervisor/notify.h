/*
 * notify — the systemd notify protocol (sd_notify(3)) spoken directly: one
 * datagram of newline-separated "KEY=VALUE" assignments per call, sent to
 * the AF_UNIX datagram socket named by $NOTIFY_SOCKET ("/path" or, for the
 * Linux abstract namespace, "@name"). No libsystemd: the protocol is a
 * single sendto(), and ferryd needs none of libsystemd's other parts.
 *
 * Notifications are best effort. Sends never block (MSG_DONTWAIT), a failure
 * is logged once per process and never returned as fatal; without
 * $NOTIFY_SOCKET every call is a silent no-op (ferryd not run by systemd).
 *
 * The module keeps one small process context (the socket and its address),
 * set up by notify_init() in the supervisor. notify_init() removes
 * NOTIFY_SOCKET from the environment so the workers ferryd re-executes do
 * not inherit it (systemd accepts notifications from the main PID only
 * under the default NotifyAccess=main).
 *
 * Return convention: the senders return 0 when the datagram was sent, 1 when
 * notifications are disabled, -1 when the send failed (already logged).
 */
#ifndef FERRY_SUPERVISOR_NOTIFY_H
#define FERRY_SUPERVISOR_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reads and unsets $NOTIFY_SOCKET and opens the datagram socket. Returns 0
 * when enabled, 1 when the variable is absent or empty, -1 when it is
 * unusable (bad address, socket() failure; logged) — notifications are then
 * disabled and ferryd runs on. Calling it again re-initialises. */
int notify_init(void);

/* The same from a given $NOTIFY_SOCKET value (an upgrade's successor gets
 * its predecessor's, which was removed from the environment). */
int notify_init_address(const char *value);

/* True between a successful notify_init() and notify_close(). */
bool notify_enabled(void);

/* The socket address in use ("/run/systemd/notify", "@abstract"), or "". */
const char *notify_address(void);

/* Closes the socket; later calls are no-ops until notify_init(). */
void notify_close(void);

/* Sends `state` verbatim (assignments separated by '\n'). */
int notify_send(const char *state);

/* "READY=1" plus "STATUS=<status>" when status is not NULL. Sent once
 * serving at startup and again at the end of every reload (success or not):
 * READY=1 after RELOADING=1 tells systemd the reload is over. */
int notify_ready(const char *status);

/* "RELOADING=1" and "MONOTONIC_USEC=<CLOCK_MONOTONIC in µs>" (systemd ≥ 253
 * uses the timestamp to match a reload to its ExecReload). */
int notify_reloading(void);

/* "MAINPID=<pid>" plus "STATUS=<status>" when status is not NULL: an
 * upgrade's predecessor hands the unit over to its successor (systemd
 * accepts it from the main process, NotifyAccess=main, and listens to the
 * new main process from then on). */
int notify_mainpid(int pid, const char *status);

/* "STOPPING=1". */
int notify_stopping(void);

/* "STATUS=<formatted text>"; newlines in the text become spaces. */
int notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Builds "STATUS=" + text into buf with newlines replaced by spaces
 * (a STATUS value is one line); truncates to len. Pure; exposed for tests. */
void notify_format_status(char *buf, size_t len, const char *text);

/* Fills an AF_UNIX address from a $NOTIFY_SOCKET value: "/path" or "@name"
 * (abstract: leading NUL). Returns the socklen to pass to sendto(), or 0
 * when the value is not a usable AF_UNIX address. `sa` is a
 * struct sockaddr_un. Pure; exposed for tests. */
size_t notify_parse_address(const char *value, void *sa);

#endif
