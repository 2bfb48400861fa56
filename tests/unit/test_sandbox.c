/*
 * test_sandbox — the pure parts of common/sandbox.h (what a kernel lacks,
 * descriptions, syscall names, exit reasons, the path and flag checks of
 * the SIGSYS handler), and the lock-down itself in a forked child: an
 * allowed call works, a path the policy names is read through the handler,
 * anything else kills the child by SIGSYS with the syscall in its report.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/sandbox.h"

Test(sandbox, missing_by_kernel)
{
	char buf[512];
	struct sandbox_kernel full = { .seccomp = true, .landlock_abi = 7 };
	cr_assert_eq(sandbox_missing(&full, buf, sizeof buf), 0);
	cr_assert_str_eq(buf, "");

	struct sandbox_kernel abi6 = { .seccomp = true, .landlock_abi = 6 };
	cr_assert_eq(sandbox_missing(&abi6, buf, sizeof buf), 0);

	struct sandbox_kernel abi3 = { .seccomp = true, .landlock_abi = 3 };
	cr_assert_eq(sandbox_missing(&abi3, buf, sizeof buf), 2);
	cr_assert_not_null(strstr(buf, "Landlock network rules (TCP bind; ABI 4, the kernel has 3)"),
	    "%s", buf);
	cr_assert_not_null(strstr(buf, "ABI 6, the kernel has 3"), "%s", buf);

	struct sandbox_kernel abi5 = { .seccomp = true, .landlock_abi = 5 };
	cr_assert_eq(sandbox_missing(&abi5, buf, sizeof buf), 1);
	cr_assert_null(strstr(buf, "network"), "%s", buf);

	struct sandbox_kernel none = { 0 };
	cr_assert_eq(sandbox_missing(&none, buf, sizeof buf), 2);
	cr_assert_not_null(strstr(buf, "seccomp"), "%s", buf);
	cr_assert_not_null(strstr(buf, "Landlock (no file system"), "%s", buf);

	/* a short buffer is cut, terminated */
	char small[16];
	sandbox_missing(&none, small, sizeof small);
	cr_assert_eq(strlen(small), sizeof small - 1);
}

Test(sandbox, expected_flags_and_describe)
{
	char buf[200];
	uint32_t san = sandbox_expected_flags(&(struct sandbox_kernel){ 0 }) & SANDBOX_F_SANITIZER;
	struct sandbox_kernel full = { .seccomp = true, .landlock_abi = 7 };
	uint32_t f = sandbox_expected_flags(&full) & ~SANDBOX_F_SANITIZER;
	sandbox_describe(f, buf, sizeof buf);
	cr_assert_str_eq(buf, "seccomp,landlock-fs,landlock-net,landlock-scope,no-new-privs,"
	    "not-dumpable");
	struct sandbox_kernel abi1 = { .seccomp = false, .landlock_abi = 1 };
	f = sandbox_expected_flags(&abi1);
	cr_assert_eq(f & (SANDBOX_F_SECCOMP | SANDBOX_F_LANDLOCK_NET | SANDBOX_F_LANDLOCK_SCOPE), 0);
	cr_assert(f & SANDBOX_F_LANDLOCK_FS);
	cr_assert_eq(f & SANDBOX_F_SANITIZER, san);

	sandbox_describe(0, buf, sizeof buf);
	cr_assert_str_eq(buf, "none");   /* not locked yet */
	sandbox_describe(SANDBOX_F_LOCKED | SANDBOX_F_OFF | SANDBOX_F_SECCOMP, buf, sizeof buf);
	cr_assert_str_eq(buf, "off");
	sandbox_describe(SANDBOX_F_LOCKED, buf, sizeof buf);
	cr_assert_str_eq(buf, "none");   /* locked, but the kernel had nothing */
}

Test(sandbox, syscall_names)
{
	char buf[64];
	int nr = seccomp_syscall_resolve_name("openat");
	sandbox_syscall_name(0, nr, buf, sizeof buf);
	cr_assert_str_eq(buf, "openat");
	sandbox_syscall_name(seccomp_arch_native(), seccomp_syscall_resolve_name("execve"), buf,
	    sizeof buf);
	cr_assert_str_eq(buf, "execve");
	sandbox_syscall_name(0, 99999, buf, sizeof buf);
	cr_assert_str_eq(buf, "syscall 99999");
	sandbox_syscall_name(0, -3, buf, sizeof buf);
	cr_assert_str_eq(buf, "syscall -3");
}

Test(sandbox, exit_reason_and_path)
{
	struct sandbox_report r;
	char buf[128] = "untouched", path[32];
	memset(&r, 0, sizeof r);
	cr_assert_not(sandbox_exit_reason(NULL, buf, sizeof buf));
	cr_assert_not(sandbox_exit_reason(&r, buf, sizeof buf));
	cr_assert_str_eq(buf, "untouched");
	sandbox_violation_path(&r, path, sizeof path);
	cr_assert_str_eq(path, "");

	atomic_store(&r.syscall_nr, seccomp_syscall_resolve_name("bind"));
	atomic_store(&r.arch, seccomp_arch_native());
	snprintf(r.path, sizeof r.path, "/etc/pass\x01wd\x7f and a long tail beyond the buffer");
	atomic_store(&r.violated, 1);
	cr_assert(sandbox_exit_reason(&r, buf, sizeof buf));
	cr_assert_str_eq(buf, "sandbox violation: syscall bind");
	sandbox_violation_path(&r, path, sizeof path);
	cr_assert_str_eq(path, "/etc/pass?wd? and a long tail b");
	/* a path that fills the report's field is not read past it */
	memset(r.path, 'x', sizeof r.path);
	char all[sizeof r.path + 16];
	sandbox_violation_path(&r, all, sizeof all);
	cr_assert_eq(strlen(all), sizeof r.path);
}

static const char *const t_files[] = { "/etc/hosts", NULL };
static const char *const t_dirs[] = { "/etc/ssl/certs", "/usr/lib/ssl/certs/", NULL };
static const struct sandbox_policy t_policy = { .read_files = t_files, .read_dirs = t_dirs };

Test(sandbox, path_allowed)
{
	const struct sandbox_policy *p = &t_policy;
	cr_assert(sandbox_path_allowed(p, NULL, "/etc/hosts"));
	cr_assert(sandbox_path_allowed(p, NULL, "/etc/ssl/certs"));
	cr_assert(sandbox_path_allowed(p, NULL, "/etc/ssl/certs/ab12cd34.0"));
	cr_assert(sandbox_path_allowed(p, NULL, "/usr/lib/ssl/certs/ab12cd34.0"));
	cr_assert(sandbox_path_allowed(p, NULL, "/etc/ssl/certs/.hidden"));
	cr_assert(sandbox_path_allowed(p, NULL, "/etc/ssl/certs/..x"));

	cr_assert_not(sandbox_path_allowed(p, NULL, "/etc/passwd"));
	cr_assert_not(sandbox_path_allowed(p, NULL, "/etc/hosts.allow"));
	cr_assert_not(sandbox_path_allowed(p, NULL, "/etc/hosts/"));
	cr_assert_not(sandbox_path_allowed(p, NULL, "/etc/ssl/certsX/a"));
	cr_assert_not(sandbox_path_allowed(p, NULL, "/etc/ssl/certs/../../passwd"));
	cr_assert_not(sandbox_path_allowed(p, NULL, "/etc/ssl/certs/./a"));
	cr_assert_not(sandbox_path_allowed(p, NULL, "/etc/ssl/certs/.."));
	cr_assert_not(sandbox_path_allowed(p, NULL, "etc/hosts"));
	cr_assert_not(sandbox_path_allowed(p, NULL, "hosts"));
	cr_assert_not(sandbox_path_allowed(p, NULL, ""));
	cr_assert_not(sandbox_path_allowed(p, NULL, NULL));

	const char *const extra[] = { "/proc/self", NULL };
	cr_assert(sandbox_path_allowed(p, extra, "/proc/self/maps"));
	cr_assert_not(sandbox_path_allowed(p, NULL, "/proc/self/maps"));
	cr_assert_not(sandbox_path_allowed(p, extra, "/proc/selfish"));
}

Test(sandbox, open_flags)
{
	cr_assert(sandbox_open_flags_ok(O_RDONLY));
	cr_assert(sandbox_open_flags_ok(O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
	cr_assert(sandbox_open_flags_ok(O_RDONLY | O_DIRECTORY));
	cr_assert_not(sandbox_open_flags_ok(O_WRONLY));
	cr_assert_not(sandbox_open_flags_ok(O_RDWR));
	cr_assert_not(sandbox_open_flags_ok(O_RDONLY | O_CREAT));
	cr_assert_not(sandbox_open_flags_ok(O_RDONLY | O_TRUNC));
	cr_assert_not(sandbox_open_flags_ok(O_RDONLY | O_APPEND));
	cr_assert_not(sandbox_open_flags_ok(O_TMPFILE | O_RDWR));
}

/* ---- the lock-down, in a child ---------------------------------------------------------- */

#define ANY(n) { n, 0, SANDBOX_ANY, 0 }
static const struct sandbox_syscall t_allow[] = {
	ANY("read"), ANY("write"), ANY("close"), ANY("exit"), ANY("exit_group"),
	ANY("rt_sigaction"), ANY("rt_sigprocmask"), ANY("rt_sigreturn"), ANY("getpid"),
	ANY("gettid"), ANY("brk"), ANY("munmap"), ANY("futex"), ANY("fstat"), ANY("sigaltstack"),
	ANY("madvise"),
	{ "mmap", 2, SANDBOX_CLEAR, PROT_EXEC },
	{ "tgkill", 0, SANDBOX_SELF, 0 },
	{ "socket", 0, SANDBOX_EQ, AF_INET },
};
static const char *const t_read[] = { "/etc/hostname", NULL };
static const struct sandbox_policy t_lock = {
	.allow = t_allow, .n_allow = sizeof t_allow / sizeof t_allow[0],
	.read_files = t_read, .deny_tcp_bind = true, .scope = true,
};

enum t_act { T_NOTHING, T_READ_ALLOWED, T_OPEN_PASSWD, T_OPEN_WRITE, T_SOCKET_UNIX, T_EXEC,
	T_MMAP_EXEC };

/* Fork, make the child not dumpable (unless dumpable), lock down with
 * t_lock, act; the child's wait status, and its report (shared memory) in
 * *rep. */
static int
t_child_as(enum t_act act, bool on, bool dumpable, struct sandbox_report *rep)
{
	struct sandbox_report *shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(shared, MAP_FAILED);
	memset(shared, 0, sizeof *shared);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char err[256];
		if ((dumpable ? 0 : sandbox_not_dumpable()) == -1 ||
		    sandbox_lock(&t_lock, on, shared, err, sizeof err) == -1) {
			ssize_t w = write(2, err, strlen(err));
			(void)w;
			_exit(100);
		}
		int rc = 0;
		switch (act) {
		case T_NOTHING:
			break;
		case T_READ_ALLOWED: {
			int fd = open("/etc/hostname", O_RDONLY | O_CLOEXEC);
			char c;
			rc = fd >= 0 && read(fd, &c, 1) == 1 ? 0 : 3;
			break;
		}
		case T_OPEN_PASSWD:
			rc = open("/etc/passwd", O_RDONLY) >= 0 ? 4 : 5;
			break;
		case T_OPEN_WRITE:
			rc = open("/etc/hostname", O_WRONLY) >= 0 ? 4 : 5;
			break;
		case T_SOCKET_UNIX:
			rc = socket(AF_UNIX, SOCK_STREAM, 0) >= 0 ? 4 : 5;
			break;
		case T_EXEC: {
			char *const argv[] = { "true", NULL };
			execve("/bin/true", argv, argv + 1);
			rc = 5;
			break;
		}
		case T_MMAP_EXEC:
			rc = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			    0) != MAP_FAILED ? 4 : 5;
			break;
		}
		_exit(rc);
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	*rep = *shared;
	munmap(shared, sizeof *shared);
	return st;
}

static int
t_child(enum t_act act, bool on, struct sandbox_report *rep)
{
	return t_child_as(act, on, false, rep);
}

static void
t_violation(enum t_act act, const char *reason, const char *path)
{
	struct sandbox_report rep;
	struct sandbox_kernel k;
	sandbox_probe(&k);
	if (!k.seccomp)
		cr_skip_test("no seccomp in this kernel");
	int st = t_child(act, true, &rep);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "status 0x%x", st);
	char buf[128], p[64];
	cr_assert(sandbox_exit_reason(&rep, buf, sizeof buf));
	cr_assert_str_eq(buf, reason);
	sandbox_violation_path(&rep, p, sizeof p);
	cr_assert_str_eq(p, path);
}

Test(sandbox_lock, allowed_calls_and_named_files_work)
{
	struct sandbox_report rep;
	struct sandbox_kernel k;
	sandbox_probe(&k);
	int st = t_child(T_READ_ALLOWED, true, &rep);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
	uint32_t f = atomic_load(&rep.flags);
	cr_assert_eq(f & sandbox_expected_flags(&k), sandbox_expected_flags(&k), "flags 0x%x", f);
	cr_assert_eq(atomic_load(&rep.landlock_abi), (uint32_t)k.landlock_abi);
	cr_assert_eq(atomic_load(&rep.violated), 0);
}

Test(sandbox_lock, off_applies_nothing)
{
	struct sandbox_report rep;
	int st = t_child(T_OPEN_PASSWD, false, &rep);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 4, "status 0x%x", st);
	cr_assert_eq(atomic_load(&rep.flags), SANDBOX_F_LOCKED | SANDBOX_F_OFF);
}

Test(sandbox_lock, open_of_another_file_kills)
{
	t_violation(T_OPEN_PASSWD, "sandbox violation: syscall openat", "/etc/passwd");
}

Test(sandbox_lock, open_for_writing_kills)
{
	t_violation(T_OPEN_WRITE, "sandbox violation: syscall openat", "/etc/hostname");
}

Test(sandbox_lock, argument_rules_hold)
{
	t_violation(T_SOCKET_UNIX, "sandbox violation: syscall socket", "");
	t_violation(T_MMAP_EXEC, "sandbox violation: syscall mmap", "");
}

Test(sandbox_lock, exec_kills)
{
	t_violation(T_EXEC, "sandbox violation: syscall execve", "");
}

Test(sandbox_lock, a_dumpable_process_is_refused)
{
	/* the lock is no place to become not dumpable: the secrets came
	 * before it, so a process that forgot is an error, not a fix-up */
	struct sandbox_report rep;
	int st = t_child_as(T_NOTHING, true, true, &rep);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 100, "status 0x%x", st);
	cr_assert_eq(atomic_load(&rep.flags), 0);
}
