/*
 * notify — systemd notify datagrams. See notify.h.
 */
#include "supervisor/notify.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define NOTIFY_STATUS_MAX 1024

/* The process context: one socket, one address, one "already complained". */
static struct {
	int fd;
	struct sockaddr_un sa;
	socklen_t salen;
	char address[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
	bool warned;
} notify_ctx = { .fd = -1 };

size_t
notify_parse_address(const char *value, void *out)
{
	struct sockaddr_un *sa = out;
	size_t n;

	if (value == NULL || (value[0] != '/' && value[0] != '@'))
		return 0;
	n = strlen(value);
	if (n < 2 || n > sizeof sa->sun_path)
		return 0;
	memset(sa, 0, sizeof *sa);
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, value, n);
	if (value[0] == '@') {
		/* Abstract namespace: the name is the bytes after a leading NUL,
		 * its length is given by the socklen, not by a terminator. */
		sa->sun_path[0] = '\0';
		return offsetof(struct sockaddr_un, sun_path) + n;
	}
	if (n == sizeof sa->sun_path)
		return 0;  /* no room for the terminator a path name needs */
	return offsetof(struct sockaddr_un, sun_path) + n + 1;
}

void
notify_close(void)
{
	if (notify_ctx.fd >= 0)
		close(notify_ctx.fd);
	notify_ctx.fd = -1;
	notify_ctx.salen = 0;
	notify_ctx.address[0] = '\0';
	notify_ctx.warned = false;
}

int
notify_init(void)
{
	const char *env = getenv("NOTIFY_SOCKET");
	char copy[sizeof notify_ctx.address + 1];

	snprintf(copy, sizeof copy, "%s", env ? env : "");
	unsetenv("NOTIFY_SOCKET");
	if (env != NULL && strlen(env) >= sizeof copy)
		copy[0] = 'x';  /* too long: refused below as not an address */
	return notify_init_address(copy);
}

int
notify_init_address(const char *env)
{
	char value[sizeof notify_ctx.address];
	size_t salen;

	notify_close();
	if (env == NULL || env[0] == '\0')
		return 1;
	snprintf(value, sizeof value, "%s", env);
	if (strlen(env) >= sizeof value ||
	    (salen = notify_parse_address(value, &notify_ctx.sa)) == 0) {
		log_warn("systemd notifications disabled",
		    "reason=\"NOTIFY_SOCKET is not an AF_UNIX path or @abstract name\" value=\"%.64s\"",
		    env);
		return -1;
	}
	notify_ctx.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (notify_ctx.fd == -1) {
		log_warn("systemd notifications disabled", "reason=\"socket: %s\"", strerror(errno));
		return -1;
	}
	notify_ctx.salen = (socklen_t)salen;
	snprintf(notify_ctx.address, sizeof notify_ctx.address, "%s", value);
	log_debug("systemd notifications enabled", "address=\"%s\"", notify_ctx.address);
	return 0;
}

bool
notify_enabled(void)
{
	return notify_ctx.fd >= 0;
}

const char *
notify_address(void)
{
	return notify_ctx.address;
}

int
notify_send(const char *state)
{
	ssize_t n;

	if (notify_ctx.fd < 0)
		return 1;
	size_t len = strlen(state);
	do
		n = sendto(notify_ctx.fd, state, len, MSG_DONTWAIT | MSG_NOSIGNAL,
		    (const struct sockaddr *)&notify_ctx.sa, notify_ctx.salen);
	while (n == -1 && errno == EINTR);
	if (n == (ssize_t)len)
		return 0;
	if (!notify_ctx.warned) {
		/* Once per process: a gone or full notify socket must not flood
		 * the log on every status change. */
		notify_ctx.warned = true;
		log_warn("systemd notification not sent",
		    "address=\"%s\" error=\"%s\" note=\"further failures are not logged\"",
		    notify_ctx.address, n == -1 ? strerror(errno) : "short send");
	}
	return -1;
}

void
notify_format_status(char *buf, size_t len, const char *text)
{
	int n = snprintf(buf, len, "STATUS=%s", text ? text : "");
	size_t end = n < 0 ? 0 : (size_t)n < len ? (size_t)n : len ? len - 1 : 0;

	for (size_t i = 7; i < end; i++)
		if (buf[i] == '\n' || buf[i] == '\r')
			buf[i] = ' ';
}

int
notify_ready(const char *status)
{
	char buf[NOTIFY_STATUS_MAX + 16];

	if (status == NULL)
		return notify_send("READY=1");
	memcpy(buf, "READY=1\n", 8);
	notify_format_status(buf + 8, sizeof buf - 8, status);
	return notify_send(buf);
}

int
notify_reloading(void)
{
	struct timespec ts;
	char buf[64];

	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(buf, sizeof buf, "RELOADING=1\nMONOTONIC_USEC=%llu",
	    (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000ULL);
	return notify_send(buf);
}

int
notify_mainpid(int pid, const char *status)
{
	char buf[NOTIFY_STATUS_MAX + 48];
	int n = snprintf(buf, sizeof buf, "MAINPID=%d", pid);

	if (status != NULL && n > 0 && (size_t)n < sizeof buf - 1) {
		buf[n] = '\n';
		notify_format_status(buf + n + 1, sizeof buf - (size_t)n - 1, status);
	}
	return notify_send(buf);
}

int
notify_stopping(void)
{
	return notify_send("STOPPING=1");
}

int
notify_status(const char *fmt, ...)
{
	char text[NOTIFY_STATUS_MAX], buf[NOTIFY_STATUS_MAX + 8];
	va_list ap;

	if (notify_ctx.fd < 0)
		return 1;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	notify_format_status(buf, sizeof buf, text);
	return notify_send(buf);
}
