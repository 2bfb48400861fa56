/*
 * sandbox — seccomp-bpf, Landlock and process flags; see sandbox.h.
 */
#include "common/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <link.h>
#include <malloc.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#ifdef FERRY_SANITIZER
#include <sanitizer/common_interface_defs.h>
#endif

/* ---- Landlock, from the kernel's UAPI (the installed headers may be older
 * than the running kernel: what is needed is spelled out here) ---------------------- */

#ifndef SYS_SECCOMP
#define SYS_SECCOMP 1   /* si_code of a SIGSYS from a seccomp filter */
#endif

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif

#define SB_LL_CREATE_RULESET_VERSION (1u << 0)
#define SB_LL_RULE_PATH_BENEATH 1
#define SB_LL_FS_EXECUTE     (1ull << 0)
#define SB_LL_FS_READ_FILE   (1ull << 2)
#define SB_LL_FS_READ_DIR    (1ull << 3)
#define SB_LL_FS_ABI1        ((1ull << 13) - 1)   /* EXECUTE .. MAKE_SYM */
#define SB_LL_FS_REFER       (1ull << 13)         /* ABI 2 */
#define SB_LL_FS_TRUNCATE    (1ull << 14)         /* ABI 3 */
#define SB_LL_FS_IOCTL_DEV   (1ull << 15)         /* ABI 5 */
#define SB_LL_NET_BIND_TCP   (1ull << 0)          /* ABI 4 */
#define SB_LL_SCOPE_ABSTRACT_UNIX (1ull << 0)     /* ABI 6 */
#define SB_LL_SCOPE_SIGNAL   (1ull << 1)

struct sb_ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;    /* ABI 4 */
	uint64_t scoped;                /* ABI 6 */
};

struct sb_ll_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

/* ---- pure parts ----------------------------------------------------------------------- */

void
sandbox_probe(struct sandbox_kernel *k)
{
	memset(k, 0, sizeof *k);
	uint32_t action = SECCOMP_RET_TRAP;
	long r = syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action);
	k->seccomp = r == 0 || (r == -1 && errno == EINVAL && prctl(PR_GET_SECCOMP) >= 0);
	long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, SB_LL_CREATE_RULESET_VERSION);
	k->landlock_abi = abi > 0 ? (int)abi : 0;
}

static void
sb_append(char *buf, size_t len, size_t *at, const char *sep, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static void
sb_append(char *buf, size_t len, size_t *at, const char *sep, const char *fmt, ...)
{
	va_list ap;
	if (*at >= len)
		return;
	if (*at) {
		int n = snprintf(buf + *at, len - *at, "%s", sep);
		*at += n > 0 ? (size_t)n : 0;
		if (*at >= len)
			return;
	}
	va_start(ap, fmt);
	int n = vsnprintf(buf + *at, len - *at, fmt, ap);
	va_end(ap);
	*at += n > 0 ? (size_t)n : 0;
}

int
sandbox_missing(const struct sandbox_kernel *k, char *buf, size_t len)
{
	size_t at = 0;
	int n = 0;
	if (len)
		buf[0] = '\0';
	if (!k->seccomp) {
		sb_append(buf, len, &at, "; ", "seccomp (no system call filter: every system call "
		    "is allowed)");
		n++;
	}
	if (k->landlock_abi <= 0) {
		sb_append(buf, len, &at, "; ", "Landlock (no file system or network restriction "
		    "beyond seccomp's)");
		return n + 1;
	}
	if (k->landlock_abi < SANDBOX_LANDLOCK_ABI_NET) {
		sb_append(buf, len, &at, "; ", "Landlock network rules (TCP bind; ABI %d, the "
		    "kernel has %d)", SANDBOX_LANDLOCK_ABI_NET, k->landlock_abi);
		n++;
	}
	if (k->landlock_abi < SANDBOX_LANDLOCK_ABI_SCOPE) {
		sb_append(buf, len, &at, "; ", "Landlock scoping of signals and abstract Unix "
		    "sockets (ABI %d, the kernel has %d)", SANDBOX_LANDLOCK_ABI_SCOPE, k->landlock_abi);
		n++;
	}
	return n;
}

uint32_t
sandbox_expected_flags(const struct sandbox_kernel *k)
{
	uint32_t f = SANDBOX_F_LOCKED | SANDBOX_F_NO_NEW_PRIVS | SANDBOX_F_NOT_DUMPABLE;
	if (k->seccomp)
		f |= SANDBOX_F_SECCOMP;
	if (k->landlock_abi >= 1)
		f |= SANDBOX_F_LANDLOCK_FS;
	if (k->landlock_abi >= SANDBOX_LANDLOCK_ABI_NET)
		f |= SANDBOX_F_LANDLOCK_NET;
	if (k->landlock_abi >= SANDBOX_LANDLOCK_ABI_SCOPE)
		f |= SANDBOX_F_LANDLOCK_SCOPE;
#ifdef FERRY_SANITIZER
	f |= SANDBOX_F_SANITIZER;
#endif
	return f;
}

void
sandbox_describe(uint32_t flags, char *buf, size_t len)
{
	static const struct { uint32_t f; const char *name; } names[] = {
		{ SANDBOX_F_SECCOMP, "seccomp" },
		{ SANDBOX_F_LANDLOCK_FS, "landlock-fs" },
		{ SANDBOX_F_LANDLOCK_NET, "landlock-net" },
		{ SANDBOX_F_LANDLOCK_SCOPE, "landlock-scope" },
		{ SANDBOX_F_NO_NEW_PRIVS, "no-new-privs" },
		{ SANDBOX_F_NOT_DUMPABLE, "not-dumpable" },
		{ SANDBOX_F_SANITIZER, "sanitizer-allowlist" },
	};
	size_t at = 0;
	if (len)
		buf[0] = '\0';
	if (!(flags & SANDBOX_F_LOCKED)) {
		snprintf(buf, len, "none");
		return;
	}
	if (flags & SANDBOX_F_OFF) {
		snprintf(buf, len, "off");
		return;
	}
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (flags & names[i].f)
			sb_append(buf, len, &at, ",", "%s", names[i].name);
	if (!at)
		snprintf(buf, len, "none");
}

void
sandbox_syscall_name(uint32_t arch, int nr, char *buf, size_t len)
{
	char *name = nr >= 0 ? seccomp_syscall_resolve_num_arch(arch ? arch : SCMP_ARCH_NATIVE,
	    nr) : NULL;
	if (name)
		snprintf(buf, len, "%s", name);
	else
		snprintf(buf, len, "syscall %d", nr);
	free(name);
}

void
sandbox_violation_path(const struct sandbox_report *r, char *buf, size_t len)
{
	size_t i = 0;
	if (!len)
		return;
	if (r && atomic_load_explicit(&r->violated, memory_order_acquire))
		for (; i + 1 < len && i < sizeof r->path && r->path[i]; i++)
			buf[i] = r->path[i] >= 0x20 && r->path[i] < 0x7f ? r->path[i] : '?';
	buf[i] = '\0';
}

bool
sandbox_exit_reason(const struct sandbox_report *r, char *buf, size_t len)
{
	if (!r || !atomic_load_explicit(&r->violated, memory_order_acquire))
		return false;
	char name[64];
	sandbox_syscall_name(atomic_load_explicit(&r->arch, memory_order_relaxed),
	    atomic_load_explicit(&r->syscall_nr, memory_order_relaxed), name, sizeof name);
	snprintf(buf, len, "sandbox violation: syscall %s", name);
	return true;
}

/* Does path name dir or something beneath it? */
static bool
sb_beneath(const char *dir, const char *path)
{
	size_t n = strlen(dir);
	while (n > 1 && dir[n - 1] == '/')
		n--;
	return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

bool
sandbox_path_allowed(const struct sandbox_policy *p, const char *const *extra_dirs,
		     const char *path)
{
	if (!path || path[0] != '/')
		return false;
	/* no "." or ".." component: what is checked is what is opened */
	for (const char *c = path; *c; c++) {
		if (c - path > 4096)
			return false;
		if (c[0] == '/' && c[1] == '.' && (c[2] == '/' || c[2] == '\0' ||
		    (c[2] == '.' && (c[3] == '/' || c[3] == '\0'))))
			return false;
	}
	for (const char *const *f = p->read_files; f && *f; f++)
		if (strcmp(*f, path) == 0)
			return true;
	for (const char *const *d = p->read_dirs; d && *d; d++)
		if (sb_beneath(*d, path))
			return true;
	for (const char *const *d = extra_dirs; d && *d; d++)
		if (sb_beneath(*d, path))
			return true;
	return false;
}

bool
sandbox_open_flags_ok(uint64_t flags)
{
	if ((flags & O_ACCMODE) != O_RDONLY)
		return false;
	if ((flags & O_TMPFILE) == O_TMPFILE)
		return false;
	return !(flags & (O_CREAT | O_TRUNC | O_APPEND));
}

/* ---- the process's sandbox context (the SIGSYS handler's only way to
 * its state) ------------------------------------------------------------------------------ */

/* System calls that name a path: trapped, re-issued by the handler when the
 * path and flags only read what the policy names. */
enum sb_path_kind { SB_PATH_OPEN, SB_PATH_STAT, SB_PATH_READ };

static const struct sb_path_call {
	const char *name;
	uint8_t path_arg;
	int8_t flags_arg;          /* open flags / AT_ flags; -1 none */
	uint8_t kind;
} sb_path_calls[] = {
	{ "openat", 1, 2, SB_PATH_OPEN },
	{ "open", 0, 1, SB_PATH_OPEN },
	{ "newfstatat", 1, 3, SB_PATH_STAT },
	{ "statx", 1, 2, SB_PATH_STAT },
	{ "stat", 0, -1, SB_PATH_READ },
	{ "lstat", 0, -1, SB_PATH_READ },
	{ "readlinkat", 1, -1, SB_PATH_READ },
	{ "readlink", 0, -1, SB_PATH_READ },
	{ "faccessat", 1, -1, SB_PATH_READ },
	{ "faccessat2", 1, -1, SB_PATH_READ },
	{ "access", 0, -1, SB_PATH_READ },
};
#define SB_PATH_CALLS (sizeof sb_path_calls / sizeof sb_path_calls[0])

#if defined(__x86_64__)
#define SB_AUDIT_ARCH AUDIT_ARCH_X86_64
#define SB_ARG(uc, i) ((uint64_t)(uc)->uc_mcontext.gregs[(int[]){ REG_RDI, REG_RSI, REG_RDX, \
	REG_R10, REG_R8, REG_R9 }[i]])
#define SB_SET_RET(uc, v) ((uc)->uc_mcontext.gregs[REG_RAX] = (greg_t)(v))
#define SB_HAVE_EMULATION 1
#elif defined(__aarch64__)
#define SB_AUDIT_ARCH AUDIT_ARCH_AARCH64
#define SB_ARG(uc, i) ((uint64_t)(uc)->uc_mcontext.regs[i])
#define SB_SET_RET(uc, v) ((uc)->uc_mcontext.regs[0] = (uint64_t)(v))
#define SB_HAVE_EMULATION 1
#else
#define SB_HAVE_EMULATION 0
#endif

#define SB_EXTRA_DIRS 16     /* sanitizer builds: /proc, the executable, its libraries */
#define SB_LINK_DIRS 8      /* directories a read_dirs entry links into */

static struct {
	const struct sandbox_policy *policy;
	struct sandbox_report *rep;
	uint64_t cookie;             /* sixth argument of a re-issued path call */
	int path_nr[SB_PATH_CALLS];  /* -1: not on this architecture */
	const char *extra_dirs[SB_EXTRA_DIRS + 1];
	size_t n_extra;
	char proc_pid[32];           /* "/proc/PID" (sanitizer builds) */
	char exe[512];               /* the executable (sanitizer builds) */
	char modules[2048];          /* the libraries' directories (sanitizer builds) */
	size_t modules_len;
} sb;

#if SB_HAVE_EMULATION
/* Keep the path of a refused call for the supervisor's log line. */
static void
sb_keep_path(const char *path)
{
	size_t i = 0;
	if (!sb.rep)
		return;
	for (; path && i + 1 < sizeof sb.rep->path && path[i]; i++)
		sb.rep->path[i] = path[i];
	sb.rep->path[i] = '\0';
}

/* Re-issue the trapped path call k if it only reads what the policy names:
 * true with its result in the context; false for a violation. */
static bool
sb_emulate(size_t k, ucontext_t *uc)
{
	const struct sb_path_call *pc = &sb_path_calls[k];
	uint64_t a[6];
	for (int i = 0; i < 6; i++)
		a[i] = SB_ARG(uc, i);
	const char *path = (const char *)(uintptr_t)a[pc->path_arg];
	if (!path)
		return false;
	uint64_t flags = pc->flags_arg >= 0 ? a[pc->flags_arg] : 0;
	if (pc->kind == SB_PATH_OPEN && !sandbox_open_flags_ok(flags)) {
		sb_keep_path(path);
		return false;
	}
	/* fstat(): newfstatat(fd, "", ..., AT_EMPTY_PATH) names no path */
	bool fstat_like = pc->kind == SB_PATH_STAT && path[0] == '\0' && (flags & AT_EMPTY_PATH);
	if (!fstat_like && !sandbox_path_allowed(sb.policy, sb.extra_dirs, path)) {
#ifdef FERRY_SANITIZER
		/* the symbolizer looks modules up by the names the loader
		 * gives them, some of which are no file ("linux-vdso.so.1"):
		 * a relative name is not found, not a violation */
		if (path[0] != '/') {
			SB_SET_RET(uc, -(long)ENOENT);
			return true;
		}
#endif
		sb_keep_path(path);
		return false;
	}
	int saved = errno;
	long r = syscall(sb.path_nr[k], a[0], a[1], a[2], a[3], a[4], sb.cookie);
	SB_SET_RET(uc, r == -1 ? -(long)errno : r);
	errno = saved;
	return true;
}
#endif

#ifdef FERRY_SANITIZER
/* Sanitizer builds: one line on stderr from the dying process,
 * async-signal-safe, in the log's key=value shape. The supervisor's log
 * line names the call; this one also comes from LeakSanitizer's tracer,
 * which the supervisor does not wait for. */
static size_t
sb_num(char *at, unsigned v)
{
	char digits[12];
	size_t d = 0, n = 0;
	do
		digits[d++] = (char)('0' + v % 10);
	while ((v /= 10) && d < sizeof digits);
	while (d)
		at[n++] = digits[--d];
	return n;
}

static void
sb_say(int nr)
{
	char line[160];
	size_t n = 0;
	const char *a = "level=error proc=", *b = " msg=\"sandbox violation\" syscall=";
	const char *proc = sb.policy && sb.policy->proc ? sb.policy->proc : "?", *c = " pid=";
	size_t plen = strnlen(proc, 32);
	memcpy(line, a, strlen(a));
	n += strlen(a);
	memcpy(line + n, proc, plen);
	n += plen;
	memcpy(line + n, c, strlen(c));
	n += strlen(c);
	n += sb_num(line + n, (unsigned)getpid());
	memcpy(line + n, b, strlen(b));
	n += strlen(b);
	n += sb_num(line + n, nr < 0 ? 0u : (unsigned)nr);
	line[n++] = '\n';
	ssize_t w = write(2, line, n);
	(void)w;
}
#else
#define sb_say(nr) ((void)(nr))
#endif

static void
sb_sigsys(int sig, siginfo_t *si, void *ucv)
{
	(void)sig;
#if SB_HAVE_EMULATION
	if (si->si_code == SYS_SECCOMP && si->si_arch == SB_AUDIT_ARCH && sb.policy)
		for (size_t k = 0; k < SB_PATH_CALLS; k++)
			if (sb.path_nr[k] >= 0 && sb.path_nr[k] == si->si_syscall) {
				if (sb_emulate(k, ucv))
					return;
				break;
			}
#else
	(void)ucv;
#endif
	if (sb.rep && si->si_code == SYS_SECCOMP) {
		atomic_store_explicit(&sb.rep->syscall_nr, si->si_syscall, memory_order_relaxed);
		atomic_store_explicit(&sb.rep->arch, si->si_arch, memory_order_relaxed);
		atomic_store_explicit(&sb.rep->violated, 1, memory_order_release);
	}
	sb_say(si->si_syscall);
	/* Die of SIGSYS (default action: no handler, unblocked); no core:
	 * the process is not dumpable. */
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	sigaction(SIGSYS, &sa, NULL);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGSYS);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGSYS);
	_exit(128 + SIGSYS);
}

/* ---- sanitizer builds ------------------------------------------------------------------ */

#ifdef FERRY_SANITIZER
/* What the sanitizer runtime calls at report and exit time beyond a
 * worker's own needs (LeakSanitizer's tracer: clone of a process sharing
 * memory, ptrace, wait4, prctl around dumpability and the ptracer;
 * getdents64 of /proc/PID/task; sched_yield while threads stop). */
/* the kernel's bit of O_TMPFILE (glibc's O_TMPFILE and __O_TMPFILE also
 * carry O_DIRECTORY, which a read-only opendir sets) */
#define SB_O_TMPFILE_BIT 020000000
#define SB_LSAN_CLONE (CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_UNTRACED)
static const struct sandbox_syscall sb_sanitizer_allow[] = {
	{ "clone", 0, SANDBOX_EQ64, SB_LSAN_CLONE },
	{ "ptrace", 0, SANDBOX_ANY, 0 },
	{ "wait4", 0, SANDBOX_ANY, 0 },
	{ "prctl", 0, SANDBOX_EQ, PR_GET_DUMPABLE },
	{ "prctl", 0, SANDBOX_EQ, PR_SET_DUMPABLE },
	{ "prctl", 0, SANDBOX_EQ, PR_SET_PTRACER },
	{ "prctl", 0, SANDBOX_EQ, PR_SET_PDEATHSIG },
	/* the tracer runs with SIGSYS blocked (a trap would kill it, and the
	 * process would wait for it forever): its reads of /proc/PID/task
	 * and /proc/PID/status, with the runtime's own open(2) (glibc uses
	 * openat), are allowed by the filter; Landlock bounds what they read */
	{ "open", 1, SANDBOX_CLEAR, O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND | SB_O_TMPFILE_BIT },
	/* UndefinedBehaviorSanitizer tests whether memory is readable by
	 * writing it to a pipe */
	{ "pipe2", 0, SANDBOX_ANY, 0 },
	{ "pipe", 0, SANDBOX_ANY, 0 },
	/* isatty(2): a report in colour or not */
	{ "ioctl", 1, SANDBOX_EQ, TCGETS },
	{ "getdents", 0, SANDBOX_ANY, 0 },
	{ "getdents64", 0, SANDBOX_ANY, 0 },
	{ "sched_yield", 0, SANDBOX_ANY, 0 },
	/* the tracer watches its parent; the runtime's threads get an
	 * alternate signal stack */
	{ "getppid", 0, SANDBOX_ANY, 0 },
	{ "sigaltstack", 0, SANDBOX_ANY, 0 },
};
#endif

#ifdef FERRY_SANITIZER
static int
sb_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	/* its directory: the loader's name may be a link to a file beside it */
	const char *name = info->dlpi_name;
	const char *slash = name ? strrchr(name, '/') : NULL;
	size_t len = slash ? (size_t)(slash - name) : 0;
	if (!len || name[0] != '/' || sb.n_extra == SB_EXTRA_DIRS ||
	    sb.modules_len + len + 1 > sizeof sb.modules)
		return 0;
	for (size_t i = 0; i < sb.n_extra; i++)
		if (strncmp(sb.extra_dirs[i], name, len) == 0 && sb.extra_dirs[i][len] == '\0')
			return 0;
	char *copy = sb.modules + sb.modules_len;
	memcpy(copy, name, len);
	copy[len] = '\0';
	sb.modules_len += len + 1;
	sb.extra_dirs[sb.n_extra++] = copy;
	return 0;
}
#endif

/* ---- Landlock ------------------------------------------------------------------------------ */

static int
sb_ll_rule(int ruleset, const char *path, bool *is_dir, char *err, size_t errlen)
{
	int fd = open(path, O_PATH | O_CLOEXEC);
	*is_dir = false;
	if (fd == -1)
		return 0;  /* not there: nothing to read, nothing to allow */
	struct stat st;
	struct sb_ll_path_beneath_attr pb = { .allowed_access = SB_LL_FS_READ_FILE, .parent_fd = fd };
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		pb.allowed_access |= SB_LL_FS_READ_DIR;
		*is_dir = true;
	}
	long r = syscall(__NR_landlock_add_rule, ruleset, SB_LL_RULE_PATH_BENEATH, &pb, 0);
	int e = errno;
	close(fd);
	if (r == -1) {
		snprintf(err, errlen, "Landlock rule for %s: %s", path, strerror(e));
		return -1;
	}
	return 0;
}

/* A rule for path; for a directory, also for the directories its symbolic
 * links point into (Landlock checks the file opened, not the name: a trust
 * store's hashed directory is links into /usr/share/ca-certificates). */
static int
sb_ll_add(int ruleset, const char *path, bool follow, char *err, size_t errlen)
{
	bool is_dir;
	if (sb_ll_rule(ruleset, path, &is_dir, err, errlen) == -1)
		return -1;
	if (!is_dir || !follow)
		return 0;
	DIR *d = opendir(path);
	if (!d)
		return 0;
	char seen[SB_LINK_DIRS][PATH_MAX];
	size_t n_seen = 0;
	int rc = 0;
	struct dirent *e;
	while (rc == 0 && (e = readdir(d)) != NULL) {
		if (e->d_type != DT_LNK)
			continue;
		char link[PATH_MAX], real[PATH_MAX];
		if (snprintf(link, sizeof link, "%s/%s", path, e->d_name) >= (int)sizeof link ||
		    !realpath(link, real))
			continue;
		char *slash = strrchr(real, '/');
		if (!slash || slash == real)
			continue;
		*slash = '\0';
		if (sb_beneath(path, real))
			continue;
		size_t k = 0;
		while (k < n_seen && strcmp(seen[k], real) != 0)
			k++;
		if (k < n_seen)
			continue;
		if (n_seen == SB_LINK_DIRS)
			break;  /* enough: what is left reads as missing */
		snprintf(seen[n_seen++], PATH_MAX, "%s", real);
		bool sub;
		rc = sb_ll_rule(ruleset, real, &sub, err, errlen);
	}
	closedir(d);
	return rc;
}

static int
sb_landlock(const struct sandbox_policy *p, int abi, uint32_t *flags, char *err, size_t errlen)
{
	struct sb_ll_ruleset_attr attr = { .handled_access_fs = SB_LL_FS_ABI1 };
	size_t size = sizeof attr.handled_access_fs;
	if (abi >= 2)
		attr.handled_access_fs |= SB_LL_FS_REFER;
	if (abi >= 3)
		attr.handled_access_fs |= SB_LL_FS_TRUNCATE;
	if (abi >= 5)
		attr.handled_access_fs |= SB_LL_FS_IOCTL_DEV;
	if (abi >= SANDBOX_LANDLOCK_ABI_NET) {
		size = offsetof(struct sb_ll_ruleset_attr, scoped);
		if (p->deny_tcp_bind)
			attr.handled_access_net = SB_LL_NET_BIND_TCP;  /* and no rule: no bind */
	}
	if (abi >= SANDBOX_LANDLOCK_ABI_SCOPE) {
		size = sizeof attr;
		if (p->scope)
			attr.scoped = SB_LL_SCOPE_ABSTRACT_UNIX | SB_LL_SCOPE_SIGNAL;
	}
	long fd = syscall(__NR_landlock_create_ruleset, &attr, size, 0);
	if (fd == -1) {
		snprintf(err, errlen, "Landlock ruleset (ABI %d): %s", abi, strerror(errno));
		return -1;
	}
	int rc = 0;
	for (const char *const *f = p->read_files; rc == 0 && f && *f; f++)
		rc = sb_ll_add((int)fd, *f, false, err, errlen);
	for (const char *const *d = p->read_dirs; rc == 0 && d && *d; d++)
		rc = sb_ll_add((int)fd, *d, true, err, errlen);
	for (const char *const *d = sb.extra_dirs; rc == 0 && *d; d++)
		rc = sb_ll_add((int)fd, *d, false, err, errlen);
	if (rc == 0 && syscall(__NR_landlock_restrict_self, fd, 0) == -1) {
		snprintf(err, errlen, "Landlock restrict_self: %s", strerror(errno));
		rc = -1;
	}
	close((int)fd);
	if (rc == 0) {
		*flags |= SANDBOX_F_LANDLOCK_FS;
		if (attr.handled_access_net)
			*flags |= SANDBOX_F_LANDLOCK_NET;
		if (attr.scoped)
			*flags |= SANDBOX_F_LANDLOCK_SCOPE;
	}
	return rc;
}

/* ---- seccomp ------------------------------------------------------------------------------- */

static int
sb_rule(scmp_filter_ctx ctx, const struct sandbox_syscall *s, char *err, size_t errlen)
{
	int nr = seccomp_syscall_resolve_name(s->name);
	if (nr == __NR_SCMP_ERROR)
		return 0;  /* not on this architecture */
	/* 32-bit comparisons look at the low half only (an int argument's
	 * upper half is whatever the caller's register held) */
	struct scmp_arg_cmp c = { .arg = s->arg, .op = SCMP_CMP_MASKED_EQ,
				  .datum_a = 0xffffffffu, .datum_b = (uint32_t)s->value };
	int rc;
	switch ((enum sandbox_cmp)s->cmp) {
	case SANDBOX_ANY:
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
		break;
	case SANDBOX_EQ:
		rc = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, 1, &c);
		break;
	case SANDBOX_SELF:
		c.datum_b = (uint32_t)getpid();
		rc = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, 1, &c);
		break;
	case SANDBOX_EQ64:
		c.op = SCMP_CMP_EQ;
		c.datum_a = s->value;
		c.datum_b = 0;
		rc = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, 1, &c);
		break;
	case SANDBOX_CLEAR:   /* (arg & value) == 0 */
		c.datum_a = s->value;
		c.datum_b = 0;
		rc = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, 1, &c);
		break;
	case SANDBOX_SET:     /* (arg & value) == value */
		c.datum_a = c.datum_b = s->value;
		rc = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, 1, &c);
		break;
	default:
		rc = -EINVAL;
		break;
	}
	if (rc < 0) {
		snprintf(err, errlen, "seccomp rule for %s: %s", s->name, strerror(-rc));
		return -1;
	}
	return 0;
}

static int
sb_seccomp(const struct sandbox_policy *p, char *err, size_t errlen)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);
	if (!ctx) {
		snprintf(err, errlen, "seccomp: cannot create a filter");
		return -1;
	}
	int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (rc < 0)
		snprintf(err, errlen, "seccomp: bad-architecture action: %s", strerror(-rc));
	/* a binary tree of system call numbers, not a list: every allowed
	 * call (the data path's read, write, epoll_wait ...) pays a few
	 * comparisons, not one per rule before it */
	else if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0)
		snprintf(err, errlen, "seccomp: optimization: %s", strerror(-rc));
	for (size_t i = 0; rc >= 0 && i < p->n_allow; i++)
		rc = sb_rule(ctx, &p->allow[i], err, errlen);
#ifdef FERRY_SANITIZER
	for (size_t i = 0; rc >= 0 && i < sizeof sb_sanitizer_allow / sizeof sb_sanitizer_allow[0];
	     i++)
		rc = sb_rule(ctx, &sb_sanitizer_allow[i], err, errlen);
#endif
	/* Path calls: only when re-issued by the handler (the cookie). */
	for (size_t k = 0; rc >= 0 && k < SB_PATH_CALLS; k++) {
		if (sb.path_nr[k] < 0)
			continue;
#if SB_HAVE_EMULATION
		struct scmp_arg_cmp c = { .arg = 5, .op = SCMP_CMP_EQ, .datum_a = sb.cookie,
					  .datum_b = 0 };
		rc = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, sb.path_nr[k], 1, &c);
#else
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, sb.path_nr[k], 0);
#endif
		if (rc < 0)
			snprintf(err, errlen, "seccomp rule for %s: %s", sb_path_calls[k].name,
			    strerror(-rc));
	}
	if (rc >= 0 && (rc = seccomp_load(ctx)) < 0)
		snprintf(err, errlen, "seccomp: cannot load the filter: %s", strerror(-rc));
	seccomp_release(ctx);
	return rc < 0 ? -1 : 0;
}

/* ---- process flags ------------------------------------------------------------------- */

int
sandbox_not_dumpable(void)
{
	return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == -1 ? -1 : 0;
}

/* ---- lock-down ------------------------------------------------------------------------------- */

int
sandbox_lock(const struct sandbox_policy *p, bool on, struct sandbox_report *rep, char *err,
	     size_t errlen)
{
	uint32_t flags = SANDBOX_F_LOCKED;
	err[0] = '\0';
	if (!on) {
		if (rep)
			atomic_store_explicit(&rep->flags, flags | SANDBOX_F_OFF, memory_order_release);
		return 0;
	}
	struct sandbox_kernel k;
	sandbox_probe(&k);

	memset(&sb, 0, sizeof sb);
	sb.rep = rep;
	for (size_t i = 0; i < SB_PATH_CALLS; i++) {
		int nr = seccomp_syscall_resolve_name(sb_path_calls[i].name);
		sb.path_nr[i] = nr == __NR_SCMP_ERROR ? -1 : nr;
	}
	while (sb.cookie == 0)
		if (getrandom(&sb.cookie, sizeof sb.cookie, 0) != sizeof sb.cookie) {
			snprintf(err, errlen, "getrandom: %s", strerror(errno));
			return -1;
		}
#ifdef FERRY_SANITIZER
	{
		/* the runtime caches the memory map and readies its symbolizer */
		__sanitizer_sandbox_arguments args;
		memset(&args, 0, sizeof args);
		__sanitizer_sandbox_on_notify(&args);
		snprintf(sb.proc_pid, sizeof sb.proc_pid, "/proc/%d", (int)getpid());
		sb.extra_dirs[sb.n_extra++] = sb.proc_pid;
		sb.extra_dirs[sb.n_extra++] = "/proc/self";
		sb.extra_dirs[sb.n_extra++] = "/usr/lib/debug";
		ssize_t len = readlink("/proc/self/exe", sb.exe, sizeof sb.exe - 1);
		if (len > 0) {
			sb.exe[len] = '\0';
			sb.extra_dirs[sb.n_extra++] = sb.exe;
		}
		/* the executable once more through the link: a worker user that
		 * may not search a directory above it (a checkout under a 0700
		 * directory) cannot open it by name, so Landlock gets no rule
		 * from that name, and the symbolizer reads it through this link */
		sb.extra_dirs[sb.n_extra++] = "/proc/self/exe";
		/* what the symbolizer reads: the directories of the modules */
		dl_iterate_phdr(sb_module, NULL);
		flags |= SANDBOX_F_SANITIZER;
	}
#endif

	/* glibc reads the time zone (/etc/localtime) at the first time
	 * conversion, even gmtime_r()'s: now, while files can be read. */
	tzset();

	/* made so at the process's start (sandbox_not_dumpable()) */
	if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0) {
		snprintf(err, errlen, "the process is dumpable (sandbox_not_dumpable() did not run "
		    "at its start)");
		return -1;
	}
	flags |= SANDBOX_F_NOT_DUMPABLE;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1) {
		snprintf(err, errlen, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
		return -1;
	}
	flags |= SANDBOX_F_NO_NEW_PRIVS;
	if (k.landlock_abi >= 1 && sb_landlock(p, k.landlock_abi, &flags, err, errlen) == -1)
		return -1;
	if (k.seccomp) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = sb_sigsys;
		sa.sa_flags = SA_SIGINFO;
		sigemptyset(&sa.sa_mask);
		sb.policy = p;
		if (sigaction(SIGSYS, &sa, NULL) == -1) {
			snprintf(err, errlen, "SIGSYS handler: %s", strerror(errno));
			return -1;
		}
		if (sb_seccomp(p, err, errlen) == -1)
			return -1;
		flags |= SANDBOX_F_SECCOMP;
	}
#ifndef FERRY_SANITIZER
	/* building the filter took memory libseccomp has freed: give it back
	 * (an idle worker stays small; a sanitizer has its own allocator) */
	malloc_trim(0);
#endif
	if (rep) {
		atomic_store_explicit(&rep->landlock_abi, (uint32_t)k.landlock_abi,
		    memory_order_relaxed);
		atomic_store_explicit(&rep->flags, flags, memory_order_release);
	}
	return 0;
}
