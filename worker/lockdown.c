/*
 * lockdown — the worker's sandbox policy; see lockdown.h.
 */
#include "worker/lockdown.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "common/log.h"
#include "common/tlsctx.h"
#include "worker/context.h"

#define ANY(n) { n, 0, SANDBOX_ANY, 0 }

static const struct sandbox_syscall lockdown_allow[] = {
	/* the event loop: libev's epoll backend (epoll_pwait: glibc's
	 * epoll_wait where the architecture has no epoll_wait), which makes
	 * a new epoll descriptor when a closed descriptor's number comes back
	 * under a stale registration, as handover makes happen; its signal
	 * and wake-up descriptors exist already */
	ANY("epoll_wait"), ANY("epoll_pwait"), ANY("epoll_ctl"), ANY("epoll_create1"),
	ANY("read"), ANY("write"), ANY("writev"), ANY("close"),
	/* stdio over /etc/hosts: fstat (glibc before 2.33; later ones use
	 * newfstatat, a path call) and lseek (newer c-ares versions size the file first) */
	ANY("fstat"), ANY("lseek"),
	/* OpenSSL's default paths include a store lookup that lists the trust
	 * store's directory for an unknown issuer; the only directories a
	 * worker can open at all (path check, Landlock) */
	ANY("getdents64"),
	/* time, where the vDSO does not answer */
	ANY("clock_gettime"), ANY("gettimeofday"), ANY("time"),
	/* memory: never executable */
	ANY("brk"), ANY("munmap"), ANY("mremap"), ANY("madvise"),
	{ "mmap", 2, SANDBOX_CLEAR, PROT_EXEC },
	{ "mprotect", 2, SANDBOX_CLEAR, PROT_EXEC },
	ANY("futex"), ANY("getrandom"),
	/* sockets: accepted, adopted (SCM_RIGHTS), created to connect
	 * (upstream TCP, c-ares UDP/TCP, which also connects a UDP socket
	 * and asks getsockname to sort addresses); never bound, never
	 * listening; the client's address of a PROXY header is only parsed */
	{ "socket", 0, SANDBOX_EQ, AF_INET },
	{ "socket", 0, SANDBOX_EQ, AF_INET6 },
	ANY("connect"), ANY("accept4"), ANY("shutdown"),
	ANY("getsockopt"), ANY("setsockopt"), ANY("getsockname"), ANY("getpeername"),
	ANY("sendto"), ANY("recvfrom"), ANY("sendmsg"), ANY("recvmsg"),
	{ "fcntl", 1, SANDBOX_EQ, F_SETFD },   /* c-ares: FD_CLOEXEC */
	{ "fcntl", 1, SANDBOX_EQ, F_GETFL }, { "fcntl", 1, SANDBOX_EQ, F_SETFL },
	/* a message with descriptors that waits for a full control channel
	 * keeps duplicates of them (common/ipcq.c): a handover under load */
	{ "fcntl", 1, SANDBOX_EQ, F_DUPFD_CLOEXEC },
	/* signals, to this process only */
	ANY("rt_sigaction"), ANY("rt_sigprocmask"), ANY("rt_sigreturn"),
	ANY("restart_syscall"),
	{ "tgkill", 0, SANDBOX_SELF, 0 },
	/* the process itself */
	ANY("getpid"), ANY("gettid"), ANY("exit"), ANY("exit_group"),
	/* last, and only with splice = on (lockdown_policy): zero copy
	 * (worker/splice.c), pipes made on demand and sized, and the bytes of
	 * pass-through frames moved through them */
	ANY("pipe2"), ANY("splice"),
	{ "fcntl", 1, SANDBOX_EQ, F_SETPIPE_SZ }, { "fcntl", 1, SANDBOX_EQ, F_GETPIPE_SZ },
};
#define LOCKDOWN_SPLICE_CALLS 4

/* c-ares opens it at every lookup (the others it reads once, at start) */
static const char *const lockdown_files[] = { "/etc/hosts", NULL };

#define LOCKDOWN_DIRS 8
static char lockdown_dir_buf[LOCKDOWN_DIRS][512];
static const char *lockdown_dirs[LOCKDOWN_DIRS + 1];

static struct sandbox_policy lockdown_pol = {
	.proc = "worker",
	.allow = lockdown_allow,
	.n_allow = sizeof lockdown_allow / sizeof lockdown_allow[0],
	.read_files = lockdown_files,
	.read_dirs = lockdown_dirs,
	.deny_tcp_bind = true,
	.scope = true,
};

/* The hashed directories of the system trust store: OpenSSL looks an
 * issuer up there (by_dir) when the bundle loaded at start lacks it. */
static void
lockdown_trust_dirs(void)
{
	const char *env = getenv(X509_get_default_cert_dir_env());
	const char *dirs = env && *env ? env : X509_get_default_cert_dir();
	size_t n = 0;
	while (dirs && *dirs && n < LOCKDOWN_DIRS) {
		size_t len = strcspn(dirs, ":");
		if (len > 0 && len < sizeof lockdown_dir_buf[n]) {
			memcpy(lockdown_dir_buf[n], dirs, len);
			lockdown_dir_buf[n][len] = '\0';
			lockdown_dirs[n] = lockdown_dir_buf[n];
			n++;
		}
		dirs += len;
		dirs += *dirs == ':';
	}
	lockdown_dirs[n] = NULL;
}

const struct sandbox_policy *
lockdown_policy(const struct cfg_cluster *cl)
{
	size_t n = sizeof lockdown_allow / sizeof lockdown_allow[0];
	lockdown_pol.n_allow = cl->splice ? n : n - LOCKDOWN_SPLICE_CALLS;
	lockdown_dirs[0] = NULL;
	if (cl->upstream_tls && cl->upstream_tls_verify && (!cl->upstream_ca || !cl->upstream_ca[0]))
		lockdown_trust_dirs();
	return &lockdown_pol;
}

bool
lockdown_needs_openssl(const struct cfg_cluster *cl)
{
	return cl->tls || cl->upstream_tls || cl->gateway == CFG_GATEWAY_SNI ||
	    cl->upstream_sasl_mechanism == CFG_SASL_SCRAM_SHA_256 ||
	    cl->upstream_sasl_mechanism == CFG_SASL_SCRAM_SHA_512;
}

int
lockdown_preload(const struct cfg_cluster *cl, char *err, size_t errlen)
{
	return lockdown_needs_openssl(cl) ? tlsctx_preload(err, errlen) : 0;
}

int
lockdown_worker(struct worker *w, bool on, char *err, size_t errlen)
{
	const struct sandbox_policy *p = lockdown_policy(w->cl);
	if (on && lockdown_preload(w->cl, err, errlen) == -1)
		return -1;
	if (sandbox_lock(p, on, &w->m->sandbox, err, errlen) == -1)
		return -1;
	char what[160];
	sandbox_describe(atomic_load(&w->m->sandbox.flags), what, sizeof what);
	log_msg(on ? LOG_DEBUG : LOG_INFO, on ? "sandbox locked" : "sandbox off", "sandbox=%s",
	    what);
	return 0;
}
