/*
 * Unit tests for supervisor/notify: address parsing and status formatting as
 * pure functions, then the datagrams themselves received on an AF_UNIX
 * datagram socket the test binds (a path in a temp dir, and an abstract
 * name), the way systemd's notify socket receives them.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "supervisor/notify.h"

static char dir[32];
static char path[96];
static int rx = -1;

static void
setup_path(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	log_init("supervisor", NULL, LOG_ERROR, false);
	snprintf(dir, sizeof dir, "/tmp/ferry-notify-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/notify", dir);
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	rx = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(rx, 0);
	cr_assert_eq(bind(rx, (struct sockaddr *)&sa, sizeof sa), 0, "bind: %s", strerror(errno));
	cr_assert_eq(setenv("NOTIFY_SOCKET", path, 1), 0);
	cr_assert_eq(notify_init(), 0);
}

static void
teardown_path(void)
{
	notify_close();
	if (rx >= 0)
		close(rx);
	rx = -1;
	unlink(path);
	rmdir(dir);
}

/* One datagram, NUL-terminated, within 2 s. */
static void
recv_one(char *buf, size_t len)
{
	struct pollfd p = { .fd = rx, .events = POLLIN };
	cr_assert_eq(poll(&p, 1, 2000), 1, "no datagram within 2 s");
	ssize_t n = recv(rx, buf, len - 1, 0);
	cr_assert_gt(n, 0);
	buf[n] = '\0';
}

static uint64_t
mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

Test(notify, parses_path_and_abstract_addresses)
{
	struct sockaddr_un sa;
	size_t n;

	n = notify_parse_address("/run/systemd/notify", &sa);
	cr_assert_eq(n, offsetof(struct sockaddr_un, sun_path) + strlen("/run/systemd/notify") + 1);
	cr_assert_str_eq(sa.sun_path, "/run/systemd/notify");
	cr_assert_eq(sa.sun_family, AF_UNIX);

	n = notify_parse_address("@ferry/notify", &sa);
	cr_assert_eq(n, offsetof(struct sockaddr_un, sun_path) + strlen("@ferry/notify"));
	cr_assert_eq(sa.sun_path[0], '\0');
	cr_assert_eq(memcmp(sa.sun_path + 1, "ferry/notify", 12), 0);

	cr_assert_eq(notify_parse_address("relative/path", &sa), 0);
	cr_assert_eq(notify_parse_address("vsock:2:1234", &sa), 0);
	cr_assert_eq(notify_parse_address("@", &sa), 0);
	cr_assert_eq(notify_parse_address("", &sa), 0);
	cr_assert_eq(notify_parse_address(NULL, &sa), 0);

	char longp[200];
	memset(longp, 'a', sizeof longp - 1);
	longp[0] = '/';
	longp[sizeof longp - 1] = '\0';
	cr_assert_eq(notify_parse_address(longp, &sa), 0);
	longp[sizeof sa.sun_path] = '\0';  /* exactly sun_path long: no room for NUL */
	cr_assert_eq(notify_parse_address(longp, &sa), 0);
	longp[0] = '@';                    /* but an abstract name may fill it */
	cr_assert_eq(notify_parse_address(longp, &sa), sizeof sa);
}

Test(notify, status_is_one_line)
{
	char buf[64];

	notify_format_status(buf, sizeof buf, "2 clusters\naccepting\r\n");
	cr_assert_str_eq(buf, "STATUS=2 clusters accepting  ");
	notify_format_status(buf, 12, "abcdefghij\n");
	cr_assert_str_eq(buf, "STATUS=abcd");
	notify_format_status(buf, sizeof buf, NULL);
	cr_assert_str_eq(buf, "STATUS=");
}

Test(notify, disabled_without_notify_socket)
{
	log_init("supervisor", NULL, LOG_ERROR, false);
	unsetenv("NOTIFY_SOCKET");
	cr_assert_eq(notify_init(), 1);
	cr_assert_not(notify_enabled());
	cr_assert_eq(notify_ready(NULL), 1);
	cr_assert_eq(notify_reloading(), 1);
	cr_assert_eq(notify_status("x %d", 1), 1);
	cr_assert_eq(notify_stopping(), 1);

	cr_assert_eq(setenv("NOTIFY_SOCKET", "", 1), 0);
	cr_assert_eq(notify_init(), 1);
	cr_assert_eq(setenv("NOTIFY_SOCKET", "not-absolute", 1), 0);
	cr_assert_eq(notify_init(), -1);
	cr_assert_not(notify_enabled());
	cr_assert_null(getenv("NOTIFY_SOCKET"), "a bad value is unset too");
}

Test(notify, sends_each_state, .init = setup_path, .fini = teardown_path)
{
	char buf[2048];

	cr_assert(notify_enabled());
	cr_assert_str_eq(notify_address(), path);
	cr_assert_null(getenv("NOTIFY_SOCKET"), "workers must not inherit NOTIFY_SOCKET");

	cr_assert_eq(notify_ready("serving 2 clusters"), 0);
	recv_one(buf, sizeof buf);
	cr_assert_str_eq(buf, "READY=1\nSTATUS=serving 2 clusters");

	cr_assert_eq(notify_ready(NULL), 0);
	recv_one(buf, sizeof buf);
	cr_assert_str_eq(buf, "READY=1");

	uint64_t before = mono_us();
	cr_assert_eq(notify_reloading(), 0);
	uint64_t after = mono_us();
	recv_one(buf, sizeof buf);
	unsigned long long usec = 0;
	cr_assert_eq(sscanf(buf, "RELOADING=1\nMONOTONIC_USEC=%llu", &usec), 1, "got %s", buf);
	cr_assert_geq(usec, before);
	cr_assert_leq(usec, after);
	cr_assert_null(strchr(strchr(buf, '\n') + 1, '\n'), "exactly two assignments: %s", buf);

	cr_assert_eq(notify_status("clusters: %d accepting, %d failed\n", 3, 1), 0);
	recv_one(buf, sizeof buf);
	cr_assert_str_eq(buf, "STATUS=clusters: 3 accepting, 1 failed ");

	cr_assert_eq(notify_ready("reload failed: bind 127.0.0.1:1: Address in use"), 0);
	recv_one(buf, sizeof buf);
	cr_assert_str_eq(buf, "READY=1\nSTATUS=reload failed: bind 127.0.0.1:1: Address in use");

	cr_assert_eq(notify_stopping(), 0);
	recv_one(buf, sizeof buf);
	cr_assert_str_eq(buf, "STOPPING=1");
}

Test(notify, abstract_address)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char name[64], env[80], buf[256];
	socklen_t len;

	log_init("supervisor", NULL, LOG_ERROR, false);
	snprintf(name, sizeof name, "ferry-notify-test-%d", (int)getpid());
	memcpy(sa.sun_path + 1, name, strlen(name));
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
	rx = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(rx, 0);
	cr_assert_eq(bind(rx, (struct sockaddr *)&sa, len), 0, "bind: %s", strerror(errno));
	snprintf(env, sizeof env, "@%s", name);
	cr_assert_eq(setenv("NOTIFY_SOCKET", env, 1), 0);
	cr_assert_eq(notify_init(), 0);
	cr_assert_str_eq(notify_address(), env);
	cr_assert_eq(notify_stopping(), 0);
	recv_one(buf, sizeof buf);
	cr_assert_str_eq(buf, "STOPPING=1");
	notify_close();
	close(rx);
	rx = -1;
}

Test(notify, never_blocks_and_failures_are_not_fatal, .init = setup_path, .fini = teardown_path,
     .timeout = 10)
{
	/* Nobody reads rx: the queue fills and a blocking send would hang. */
	int sent = 0, failed = 0;
	for (int i = 0; i < 5000; i++) {
		int r = notify_status("filler %d", i);
		if (r == 0)
			sent++;
		else if (r == -1)
			failed++;
	}
	cr_assert_gt(sent, 0);
	cr_assert_gt(failed, 0, "the receive queue never filled");

	/* The receiver goes away: sends fail, quietly, and keep failing. */
	close(rx);
	rx = -1;
	cr_assert_eq(notify_ready("x"), -1);
	cr_assert_eq(notify_stopping(), -1);
	cr_assert(notify_enabled());
}
