/*
 * admin_lockdown — the admin process's sandbox policy; see
 * admin_lockdown.h.
 */
#include "supervisor/admin_lockdown.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "common/log.h"
#include "common/tlsctx.h"

#ifndef F_ADD_SEALS
#define F_ADD_SEALS 1033
#define F_GET_SEALS 1034
#endif
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x1u
#define MFD_ALLOW_SEALING 0x2u
#endif

#define ANY(n) { n, 0, SANDBOX_ANY, 0 }

static const struct sandbox_syscall admin_lockdown_allow[] = {
	/* the event loop: libev's epoll backend (epoll_create1: a new epoll
	 * descriptor when a closed descriptor's number comes back under a
	 * stale registration) */
	ANY("epoll_wait"), ANY("epoll_pwait"), ANY("epoll_ctl"), ANY("epoll_create1"),
	ANY("read"), ANY("write"), ANY("writev"), ANY("close"),
	/* stdio over /etc/hosts (the config parser): fstat, and lseek when
	 * the stream is closed before its end */
	ANY("fstat"), ANY("lseek"),
	ANY("clock_gettime"), ANY("gettimeofday"), ANY("time"),
	/* memory: never executable */
	ANY("brk"), ANY("munmap"), ANY("mremap"), ANY("madvise"),
	{ "mmap", 2, SANDBOX_CLEAR, PROT_EXEC },
	{ "mprotect", 2, SANDBOX_CLEAR, PROT_EXEC },
	ANY("futex"), ANY("getrandom"),
	/* callers: accepted on the two listeners it was given (never a
	 * socket of its own), read (recv, OpenSSL's read), written (sendmsg,
	 * send, OpenSSL's write), identified, shut down */
	ANY("accept4"), ANY("accept"), ANY("shutdown"),
	ANY("getsockopt"), ANY("setsockopt"), ANY("getsockname"), ANY("getpeername"),
	ANY("sendto"), ANY("recvfrom"), ANY("sendmsg"), ANY("recvmsg"),
	{ "fcntl", 1, SANDBOX_EQ, F_GETFL }, { "fcntl", 1, SANDBOX_EQ, F_SETFL },
	{ "fcntl", 1, SANDBOX_EQ, F_GETFD }, { "fcntl", 1, SANDBOX_EQ, F_SETFD },
	/* a message with descriptors that waits for a full control channel
	 * keeps duplicates of them (common/ipcq.c) */
	{ "fcntl", 1, SANDBOX_EQ, F_DUPFD_CLOEXEC },
	/* adminproto's memfds: a posted config's, created, written, sealed;
	 * an answer's, its seals checked and read */
	{ "memfd_create", 1, SANDBOX_EQ, MFD_CLOEXEC | MFD_ALLOW_SEALING },
	{ "fcntl", 1, SANDBOX_EQ, F_ADD_SEALS }, { "fcntl", 1, SANDBOX_EQ, F_GET_SEALS },
	ANY("pread64"),
	/* signals, to this process only */
	ANY("rt_sigaction"), ANY("rt_sigprocmask"), ANY("rt_sigreturn"),
	ANY("restart_syscall"),
	{ "tgkill", 0, SANDBOX_SELF, 0 },
	/* the process itself */
	ANY("getpid"), ANY("gettid"), ANY("exit"), ANY("exit_group"),
};

/* the config parser's hosts(5) lookup of a listening address */
static const char *const admin_lockdown_files[] = { "/etc/hosts", NULL };

static const struct sandbox_policy admin_lockdown_pol = {
	.proc = "admin",
	.allow = admin_lockdown_allow,
	.n_allow = sizeof admin_lockdown_allow / sizeof admin_lockdown_allow[0],
	.read_files = admin_lockdown_files,
	.read_dirs = NULL,
	.deny_tcp_bind = true,
	.scope = true,
};

const struct sandbox_policy *
admin_lockdown_policy(void)
{
	return &admin_lockdown_pol;
}

int
admin_lockdown(bool on, struct sandbox_report *rep, char *err, size_t errlen)
{
	if (on && tlsctx_preload(err, errlen) == -1)
		return -1;
	/* jansson seeds its hash function from /dev/urandom at the first JSON
	 * object (an error answer the admin process writes itself): now, while
	 * the file can be read; a no-op if it was seeded already */
	json_object_seed(0);
	if (sandbox_lock(&admin_lockdown_pol, on, rep, err, errlen) == -1)
		return -1;
	char what[160];
	sandbox_describe(atomic_load(&rep->flags), what, sizeof what);
	log_msg(on ? LOG_DEBUG : LOG_INFO, on ? "sandbox locked" : "sandbox off", "sandbox=%s",
	    what);
	return 0;
}
