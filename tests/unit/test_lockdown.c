/*
 * test_lockdown — the worker's sandbox policy (worker/lockdown.h): what it
 * never allows, which files it names, the trust store only for the
 * clusters that verify their upstream against it; and, in a forked child
 * locked down with it, that what the worker computes after the lock (the
 * SCRAM of its own metadata fetch) needs no file, and that a connection
 * handed over while the control channel is full can wait in the queue.
 */
#include <criterion/criterion.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/ipcq.h"
#include "worker/lockdown.h"

static bool
allows(const struct sandbox_policy *p, const char *name)
{
	for (size_t i = 0; i < p->n_allow; i++)
		if (strcmp(p->allow[i].name, name) == 0)
			return true;
	return false;
}

Test(lockdown, splice_only_when_on)
{
	struct cfg_cluster cl;
	memset(&cl, 0, sizeof cl);
	cl.splice = true;
	const struct sandbox_policy *p = lockdown_policy(&cl);
	cr_expect(allows(p, "splice") && allows(p, "pipe2"));
	cr_expect_not(allows(p, "vmsplice") || allows(p, "sendfile") || allows(p, "execve"));
	cl.splice = false;
	p = lockdown_policy(&cl);
	cr_expect_not(allows(p, "splice") || allows(p, "pipe2"));
}

Test(lockdown, never_allowed)
{
	struct cfg_cluster cl;
	memset(&cl, 0, sizeof cl);
	const struct sandbox_policy *p = lockdown_policy(&cl);
	static const char *const never[] = {
		"execve", "execveat", "fork", "vfork", "clone", "clone3", "bind", "listen",
		"ptrace", "process_vm_readv", "process_vm_writev", "open", "openat", "openat2",
		"socketpair", "memfd_create", "prctl", "setuid", "setgid", "unshare", "mount",
		"chroot", "pivot_root", "kexec_load", "bpf", "perf_event_open", "io_uring_setup",
		"init_module", "finit_module", "userfaultfd", "rt_sigqueueinfo", "pidfd_open",
		"pidfd_send_signal", "unlink", "unlinkat", "rename", "renameat", "mkdir", "mkdirat",
		"chmod", "fchmod", "chown", "fchown", "truncate", "ftruncate", "symlink", "link",
		"kill", "tkill", "ioctl", "dup", "dup2", "dup3", "accept", "readv", "preadv",
		"pwritev", "process_madvise", "sendfile", "splice", "vmsplice", "nanosleep",
	};
	for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
		cr_expect_not(allows(p, never[i]), "%s is allowed", never[i]);
	cr_expect_not(allows(p, "pipe2"), "pipe2 is allowed with splice = off");
	cr_assert(p->deny_tcp_bind && p->scope);
	/* what is allowed is bounded by arguments where it matters */
	for (size_t i = 0; i < p->n_allow; i++) {
		const struct sandbox_syscall *s = &p->allow[i];
		if (!strcmp(s->name, "socket"))
			cr_expect(s->cmp == SANDBOX_EQ && (s->value == AF_INET || s->value == AF_INET6));
		if (!strcmp(s->name, "mmap") || !strcmp(s->name, "mprotect"))
			cr_expect(s->cmp == SANDBOX_CLEAR && (s->value & PROT_EXEC));
		if (!strcmp(s->name, "kill") || !strcmp(s->name, "tgkill"))
			cr_expect(s->cmp == SANDBOX_SELF);
		if (!strcmp(s->name, "fcntl") || !strcmp(s->name, "ioctl"))
			cr_expect(s->cmp == SANDBOX_EQ);
	}
}

Test(lockdown, files)
{
	struct cfg_cluster cl;
	memset(&cl, 0, sizeof cl);
	const struct sandbox_policy *p = lockdown_policy(&cl);
	cr_assert_str_eq(p->read_files[0], "/etc/hosts");
	cr_assert_null(p->read_files[1]);
	cr_assert_null(p->read_dirs[0], "no trust store without upstream TLS");

	cl.upstream_tls = true;
	cl.upstream_tls_verify = true;
	cl.upstream_ca = "/etc/ferry/kafka-ca.pem";
	p = lockdown_policy(&cl);
	cr_assert_null(p->read_dirs[0], "upstream_ca given: its bytes came over IPC");

	cl.upstream_tls_verify = false;
	cl.upstream_ca = "";
	p = lockdown_policy(&cl);
	cr_assert_null(p->read_dirs[0], "nothing verified, nothing looked up");

	cl.upstream_tls_verify = true;
	setenv(X509_get_default_cert_dir_env(), "/etc/ssl/certs:/usr/local/share/certs", 1);
	p = lockdown_policy(&cl);
	cr_assert_str_eq(p->read_dirs[0], "/etc/ssl/certs");
	cr_assert_str_eq(p->read_dirs[1], "/usr/local/share/certs");
	cr_assert_null(p->read_dirs[2]);
	unsetenv(X509_get_default_cert_dir_env());
	p = lockdown_policy(&cl);
	cr_assert_str_eq(p->read_dirs[0], X509_get_default_cert_dir());
	cr_assert_null(p->read_dirs[1]);
}

/* What sasl_client.c computes for SCRAM-SHA-256/512, and a nonce. */
static int
t_scram(void)
{
	static const EVP_MD *(*const mds[])(void) = { EVP_sha256, EVP_sha512 };
	for (size_t i = 0; i < sizeof mds / sizeof mds[0]; i++) {
		const EVP_MD *md = mds[i]();
		unsigned char salted[64], key[64], stored[64], nonce[24];
		unsigned int n = 0, sl = 0;
		int dl = EVP_MD_get_size(md);
		if (PKCS5_PBKDF2_HMAC("pencil", 6, (const unsigned char *)"salt", 4, 4096, md, dl,
		    salted) != 1 ||
		    !HMAC(md, salted, dl, (const unsigned char *)"Client Key", 10, key, &n) ||
		    EVP_Digest(key, n, stored, &sl, md, NULL) != 1 ||
		    RAND_bytes(nonce, sizeof nonce) != 1)
			return 3;
	}
	return 0;
}

Test(lockdown, scram_after_the_lock)
{
	struct sandbox_kernel k;
	sandbox_probe(&k);
	if (!k.seccomp)
		cr_skip_test("no seccomp in this kernel");
	struct cfg_cluster cl;
	memset(&cl, 0, sizeof cl);
	cl.upstream_sasl_mechanism = CFG_SASL_SCRAM_SHA_512;  /* a plaintext cluster's own SCRAM */
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char err[256];
		if (sandbox_not_dumpable() == -1 || lockdown_preload(&cl, err, sizeof err) == -1 ||
		    sandbox_lock(lockdown_policy(&cl), true, NULL, err, sizeof err) == -1)
			_exit(100);
		_exit(t_scram());
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(!WIFSIGNALED(st) || WTERMSIG(st) != SIGSYS,
	    "killed by the sandbox: something was read lazily after the lock");
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
}

/* A connection handed over while the control channel is full: the queue
 * keeps a duplicate of its descriptor (common/ipcq.c), after the lock. */
static int
t_handover_queued(int chan, int conn)
{
	struct ipcq q;
	char big[2048] = { 0 };
	ipcq_init(&q, 0, 0);
	while (q.queued == 0)   /* fill the channel until a message waits */
		if (ipcq_send(&q, chan, IPC_CONN_OUT, 1, big, sizeof big, NULL, 0) == -1)
			return 2;
	if (ipcq_send(&q, chan, IPC_CONN_OUT, 1, big, 16, &conn, 1) == -1)
		return 3;
	ipcq_clear(&q);
	return 0;
}

Test(lockdown, handover_queued_behind_a_full_channel)
{
	struct sandbox_kernel k;
	sandbox_probe(&k);
	if (!k.seccomp)
		cr_skip_test("no seccomp in this kernel");
	struct cfg_cluster cl;
	memset(&cl, 0, sizeof cl);
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char err[256];
		int conn = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (conn == -1 || sandbox_not_dumpable() == -1 ||
		    sandbox_lock(lockdown_policy(&cl), true, NULL, err, sizeof err) == -1)
			_exit(100);
		_exit(t_handover_queued(sv[0], conn));
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	close(sv[0]);
	close(sv[1]);
	cr_assert(!WIFSIGNALED(st) || WTERMSIG(st) != SIGSYS,
	    "killed by the sandbox: a queued handover needs a call it forbids");
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
}

/* Only a cluster that uses OpenSSL starts it: TLS on either side, the SNI
 * gateway, or ferry's own SCRAM; a plaintext cluster (PLAIN included) keeps
 * OpenSSL's tables out of its memory. */
Test(lockdown, openssl_only_where_used)
{
	struct cfg_cluster cl;
	memset(&cl, 0, sizeof cl);
	cr_assert_not(lockdown_needs_openssl(&cl));
	cl.upstream_sasl_mechanism = CFG_SASL_PLAIN;
	cr_assert_not(lockdown_needs_openssl(&cl));
	cl.upstream_sasl_mechanism = CFG_SASL_SCRAM_SHA_256;
	cr_assert(lockdown_needs_openssl(&cl));
	cl.upstream_sasl_mechanism = CFG_SASL_SCRAM_SHA_512;
	cr_assert(lockdown_needs_openssl(&cl));
	memset(&cl, 0, sizeof cl);
	cl.tls = true;
	cr_assert(lockdown_needs_openssl(&cl));
	memset(&cl, 0, sizeof cl);
	cl.upstream_tls = true;
	cr_assert(lockdown_needs_openssl(&cl));
	memset(&cl, 0, sizeof cl);
	cl.gateway = CFG_GATEWAY_SNI;
	cr_assert(lockdown_needs_openssl(&cl));
}
