/*
 * sandbox — lock a process down once it holds everything it needs from the
 * outside world: seccomp-bpf (libseccomp) allowing only the system calls of
 * a caller's allowlist, Landlock denying every file system access but reads
 * of a few named files and directories, and every TCP bind (ABI >= 4),
 * signals and abstract Unix sockets scoped to the process (ABI >= 6),
 * PR_SET_NO_NEW_PRIVS. Not dumpable (no core dump, no ptrace by another
 * process of the same user: TLS keys and relayed passwords stay in the
 * process) is set apart, by sandbox_not_dumpable() at the process's start,
 * before any secret reaches it and whatever `sandbox` says; sandbox_lock()
 * checks it was.
 *
 * The module knows no role: the caller (worker/lockdown.c for a worker)
 * chooses the allowlist in a struct sandbox_policy. A kernel without some
 * feature (no Landlock, an older ABI) gets what it has; sandbox_probe() and
 * sandbox_missing() say what is missing so the supervisor can log it once.
 *
 * A system call outside the allowlist traps (SCMP_ACT_TRAP): the SIGSYS
 * handler records its number in the process's struct sandbox_report (in
 * the shared block the supervisor reads: common/metrics.h) and the process
 * dies of SIGSYS. The supervisor turns that into the exit reason
 * "sandbox violation: syscall NAME" (sandbox_exit_reason()).
 *
 * Calls that name a path (openat, newfstatat, statx, ...) are not allowed
 * by the filter itself, which cannot read strings: they trap, and the
 * handler re-issues the call when the path is one the policy names and the
 * call only reads (O_RDONLY, no O_CREAT, ...); anything else is a
 * violation. The re-issued call carries a random cookie in its unused sixth
 * argument, the one thing the filter allows it on. Landlock remains the
 * boundary the kernel enforces (a process that learns the cookie still
 * reads only what Landlock grants); the trap makes an attempt to open
 * anything else fatal and visible instead of a quiet EACCES.
 *
 * Sanitizer builds (FERRY_SANITIZER, set by meson with b_sanitize): the
 * runtime needs more at report and exit time (LeakSanitizer stops the
 * process with a clone()d tracer that ptrace()s it, reads /proc/PID/task
 * and /proc/self/maps, symbolizes from the mapped ELF files): those are
 * added to every policy, and only there; docs/security.md lists them.
 *
 * Return convention: 0 / -1 with a message in err.
 */
#ifndef FERRY_COMMON_SANDBOX_H
#define FERRY_COMMON_SANDBOX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What is in force in a process (struct sandbox_report.flags). */
#define SANDBOX_F_LOCKED        0x001u  /* sandbox_lock() ran (even if off) */
#define SANDBOX_F_OFF           0x002u  /* sandbox = off: nothing applied */
#define SANDBOX_F_NO_NEW_PRIVS  0x004u
#define SANDBOX_F_NOT_DUMPABLE  0x008u
#define SANDBOX_F_SECCOMP       0x010u
#define SANDBOX_F_LANDLOCK_FS   0x020u  /* file system: only the policy's reads */
#define SANDBOX_F_LANDLOCK_NET  0x040u  /* no TCP bind */
#define SANDBOX_F_LANDLOCK_SCOPE 0x080u /* signals, abstract Unix sockets */
#define SANDBOX_F_SANITIZER     0x100u  /* the wider allowlist of sanitizer builds */

/* Landlock ABI versions that bring what ferry uses. */
#define SANDBOX_LANDLOCK_ABI_NET   4
#define SANDBOX_LANDLOCK_ABI_SCOPE 6

/*
 * What a process reports about its sandbox without a message: a part of
 * its shared block, written by the process, read by the supervisor (live
 * for /admin/health, after death for the exit reason). Values from a
 * compromised process are only displayed (a syscall number is looked up,
 * bounded), never trusted for a decision.
 */
struct sandbox_report {
	_Atomic uint32_t flags;         /* SANDBOX_F_* in force */
	_Atomic uint32_t landlock_abi;  /* the kernel's, 0 = none */
	_Atomic uint32_t violated;      /* 1 once a violation is recorded */
	_Atomic int32_t syscall_nr;     /* of the violation */
	_Atomic uint32_t arch;          /* its AUDIT_ARCH_* */
	uint32_t pad;
	char path[160];                 /* the path a refused path call named
	                                   (cut, not necessarily terminated) */
};

/* What the kernel offers (sandbox_probe()). */
struct sandbox_kernel {
	bool seccomp;                   /* seccomp filters with SECCOMP_RET_TRAP */
	int landlock_abi;               /* 0: no Landlock (or disabled at boot) */
};

/* Probe the running kernel (a few harmless system calls). */
void sandbox_probe(struct sandbox_kernel *k);

/* Pure: what a kernel like k lacks of the full sandbox, as one line for the
 * log ("Landlock network rules (ABI 4, the kernel has 3); ..."), or "" when
 * nothing is missing. Returns the number of missing pieces. */
int sandbox_missing(const struct sandbox_kernel *k, char *buf, size_t len);

/* Pure: the flags a full lock-down gives on a kernel like k (for tests and
 * for the supervisor to compare with what a process reports). */
uint32_t sandbox_expected_flags(const struct sandbox_kernel *k);

/* Pure: a short description of flags, e.g.
 * "seccomp,landlock-fs,landlock-net,landlock-scope,no-new-privs,not-dumpable"
 * "off", or "none" (not locked yet). */
void sandbox_describe(uint32_t flags, char *buf, size_t len);

/* The name of system call nr of architecture arch (an AUDIT_ARCH_* value;
 * 0 = the native one): "openat"; "syscall 999" when unknown. */
void sandbox_syscall_name(uint32_t arch, int nr, char *buf, size_t len);

/* The exit reason of a process killed by SIGSYS, from its report (may be
 * NULL): true with "sandbox violation: syscall openat" in buf when a
 * violation was recorded; false (buf untouched) when none was (a SIGSYS
 * sent by kill(1), or one the kernel forced past a blocked handler). */
bool sandbox_exit_reason(const struct sandbox_report *r, char *buf, size_t len);

/* The path a refused path call named, copied into buf (terminated, cut,
 * bytes outside printable ASCII as '?'); "" when none. */
void sandbox_violation_path(const struct sandbox_report *r, char *buf, size_t len);

/* Make the calling process not dumpable: no core file, no ptrace and no
 * /proc/PID/mem by another process of its user. Every process that will
 * hold secrets calls it first thing, before it receives any (even with
 * sandbox = off). 0, or -1 with errno. */
int sandbox_not_dumpable(void);

/* ---- policies ---------------------------------------------------------------------- */

enum sandbox_cmp {
	SANDBOX_ANY = 0,        /* any arguments */
	SANDBOX_EQ,             /* (uint32) arg == value */
	SANDBOX_EQ64,           /* arg == value, all 64 bits */
	SANDBOX_CLEAR,          /* (arg & value) == 0: none of these bits */
	SANDBOX_SET,            /* (arg & value) == value: all of these bits */
	SANDBOX_SELF,           /* (int) arg == the process's pid */
};

/* One allowed form of a system call; several entries for one name allow
 * any of them. A name the architecture lacks is skipped. */
struct sandbox_syscall {
	const char *name;
	uint8_t arg;            /* argument compared (0..5) */
	uint8_t cmp;            /* enum sandbox_cmp */
	uint64_t value;
};

struct sandbox_policy {
	const char *proc;               /* the process's role in a sanitizer build's
	                                   line about a violation ("worker") */
	const struct sandbox_syscall *allow;
	size_t n_allow;
	/* Readable through Landlock and through the path check, NULL-ended;
	 * absolute paths as the code opens them. A missing file is skipped. */
	const char *const *read_files;
	const char *const *read_dirs;   /* everything beneath */
	bool deny_tcp_bind;             /* Landlock network (ABI >= 4) */
	bool scope;                     /* Landlock scope (ABI >= 6) */
};

/* Whether a path call may be re-issued: path is absolute, has no "." or
 * ".." component, and is one of p's read_files, beneath one of its
 * read_dirs, or beneath one of extra_dirs (NULL-ended; may be NULL).
 * Pure; also used in the SIGSYS handler (no allocation, no locks). */
bool sandbox_path_allowed(const struct sandbox_policy *p, const char *const *extra_dirs,
			  const char *path);

/* Whether open flags only read (O_RDONLY, none of O_CREAT, O_TRUNC,
 * O_APPEND, O_TMPFILE, write access). Pure. */
bool sandbox_open_flags_ok(uint64_t flags);

/*
 * Lock the calling process down with policy p, as far as the kernel
 * allows, and record what is in force in rep (may be NULL). on = false
 * (sandbox = off) applies nothing and records SANDBOX_F_OFF. Must run in a
 * single-threaded process, after everything that opens files, binds,
 * creates event loop descriptors or installs signal handlers, in a process
 * that sandbox_not_dumpable() already made not dumpable (a dumpable one is
 * an error: its secrets were exposed before the lock). 0, or -1
 * with err: a failure half-way is reported, never ignored (the caller
 * exits rather than run with less than it believes).
 */
int sandbox_lock(const struct sandbox_policy *p, bool on, struct sandbox_report *rep,
		 char *err, size_t errlen);

#endif
