#!/usr/bin/env python3
"""
clients — runs the reference Kafka clients (the peers scripts/install-kafka
put into the cache) with one set of arguments, each under strace, and checks
where they connected.

    CLIENTS   java, franz-go, sarama, confluent-kafka, kafka-python, kcat
    run(name, opts, allowed_ports=..., forbidden_ports=...) -> Run
        opts: {"bootstrap": ..., "topic": ..., "count": N, "mode": "produce", ...}
              (the peers' --options, README.md); True adds a bare flag
        Run.result      the peer's JSON line (dict)
        Run.connects    every connect() to an AF_INET/AF_INET6 address:
                        [(pid, family, address, port)]
        Run.dial_problems()  connects outside allowed_ports (with those to
                        forbidden_ports, e.g. the brokers', named as such)
    Session(bootstrap, allowed_ports=..., forbidden_ports=...)
        the Java client's interactive session (java/Session.java: Admin
        operations, a background producer + group consumer) under strace:
        s("describe-cluster") -> its JSON answer; s.close(); s.dial_problems()

CLI, for a person: clients.py NAME [--strace] -- --bootstrap B --topic T ...
"""

import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import kcluster  # noqa: E402

CLIENTS = ("java", "franz-go", "sarama", "confluent-kafka", "kafka-python", "kcat")
# the JVM of a short-lived client: small heap, one GC thread, C1 only
JAVA_CLIENT_OPTS = ("-Xms32m", "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                    "-XX:-UsePerfData")


def _stamped(d):
    return (d / ".stamp").exists()


def go_dir():
    found = [d for d in kcluster.cache_root().glob("kafka-go-*") if _stamped(d)]
    return found[0] if found else None


def venv_python():
    found = [d for d in kcluster.cache_root().glob("kafka-py-*") if _stamped(d)]
    return found[0] / "venv" / "bin" / "python" if found else None


def problem(name, version=None):
    """Why client `name` cannot run here (None when it can); version: the
    Java client's (default: the pinned kafka.version)."""
    home = kcluster.kafka_home(version)
    if name == "java":
        if not (home / ".java-client.stamp").exists():
            return f"{home}/java-client missing (run scripts/install-kafka)"
        return None
    if name in ("franz-go", "sarama"):
        return None if go_dir() else "Go peers not built (run scripts/install-kafka)"
    if name in ("confluent-kafka", "kafka-python"):
        return None if venv_python() else "Python peers' virtualenv missing (run scripts/install-kafka)"
    if name == "kcat":
        return None if shutil.which("kcat") else "kcat not installed (scripts/install-deps)"
    return f"unknown client {name}"


def java_argv(main_class, args, version=None):
    """A Java peer program (java/*.java, compiled into the cache against
    kafka-clients `version`, default the pinned one)."""
    home = kcluster.kafka_home(version)
    cp = f"{home / 'java-client'}:{home / 'client'}/*"
    return [kcluster.java_bin(), *JAVA_CLIENT_OPTS, "-cp", cp, main_class, *args]


def opt_args(opts):
    """--options from a dict: None/False left out, True a bare flag."""
    args = []
    for k, v in opts.items():
        if v is None or v is False:
            continue
        args.append(f"--{k}")
        if v is not True:
            args.append(str(v))
    return args


def argv_of(name, opts, version=None):
    """The command line of peer `name` with options `opts` (version: the
    Java client's)."""
    args = opt_args(opts)
    if name == "java":
        return java_argv("Client", args, version)
    if name in ("franz-go", "sarama"):
        return [str(go_dir() / ("franz" if name == "franz-go" else "sarama")), *args]
    if name in ("confluent-kafka", "kafka-python"):
        lib = "confluent" if name == "confluent-kafka" else "kafka-python"
        return [str(venv_python()), str(HERE / "python" / "client.py"), "--lib", lib, *args]
    if name == "kcat":
        return [sys.executable, str(HERE / "python" / "kcat_peer.py"), *args]
    raise ValueError(f"unknown client {name}")


# --------------------------------------------------------------------------
# strace: where did it connect?
# --------------------------------------------------------------------------

_CONNECT = re.compile(r"^(\d+)\s+connect\(\d+, \{sa_family=(AF_INET6?),(.*?)\}, \d+\)")
_PORT = re.compile(r"sin6?_port=htons\((\d+)\)")
_ADDR4 = re.compile(r'sin_addr=inet_addr\("([^"]+)"\)')
_ADDR6 = re.compile(r'inet_pton\(AF_INET6, "([^"]+)"')


def parse_strace(path):
    """[(pid, family, address, port)] of every connect() to an INET address
    in an `strace -f -e trace=connect` log."""
    out = []
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        m = _CONNECT.match(line)
        if not m:
            continue
        pm = _PORT.search(m.group(3))
        am = (_ADDR6 if m.group(2) == "AF_INET6" else _ADDR4).search(m.group(3))
        out.append((int(m.group(1)), m.group(2), am.group(1) if am else "?",
                    int(pm.group(1)) if pm else -1))
    return out


def strace_argv(log_path):
    return ["strace", "-f", "--seccomp-bpf", "-qq", "-e", "trace=connect", "-e", "signal=none",
            "-o", str(log_path)]


def dial_problems(connects, allowed, forbidden):
    """Connects to a port outside `allowed` ("upstream" when the port is in
    `forbidden`). Empty when allowed is empty and nothing is forbidden."""
    bad = []
    for pid, fam, addr, port in connects:
        if port in forbidden:
            bad.append(f"pid {pid} dialled the UPSTREAM address {addr}:{port} ({fam})")
        elif allowed and port not in allowed:
            bad.append(f"pid {pid} dialled {addr}:{port} ({fam}), not a ferry port")
    return bad


def result_line(stdout):
    """The peer's result: the last line of its output that is a JSON object."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


class Run:
    def __init__(self, name, argv, rc, stdout, stderr, connects, elapsed, allowed, forbidden):
        self.name, self.argv, self.rc = name, argv, rc
        self.stdout, self.stderr = stdout, stderr
        self.connects = connects
        self.elapsed = elapsed
        self.allowed, self.forbidden = set(allowed or ()), set(forbidden or ())
        self.result = result_line(stdout)

    def dial_problems(self):
        return dial_problems(self.connects, self.allowed, self.forbidden)

    def describe(self):
        return (f"{self.name}: rc={self.rc} in {self.elapsed:.1f}s, result={self.result}\n"
                f"argv: {' '.join(self.argv)}\nconnects: {self.connects}\n"
                f"stderr (tail):\n{self.stderr[-3000:]}")


def run(name, opts, timeout=120, strace=True, allowed_ports=(), forbidden_ports=(), workdir=None,
        env=None, version=None):
    """Runs peer `name` to completion (killed after `timeout`) and returns a
    Run; version: the Java client's kafka-clients (default: the pinned one,
    kcluster.older_kafka_version() for the older line)."""
    why = problem(name, version)
    if why:
        raise kcluster.NotInstalled(why)
    argv = argv_of(name, opts, version)
    log_path = None
    full = argv
    if strace:
        fd, log_path = tempfile.mkstemp(prefix=f"strace-{name}-", suffix=".log", dir=workdir)
        os.close(fd)
        full = strace_argv(log_path) + argv
    t0 = time.monotonic()
    p = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True, env=env)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, err = p.communicate()
        err += f"\n[killed after {timeout}s]"
    connects = parse_strace(log_path) if log_path else []
    if log_path and not os.environ.get("FERRY_KEEP_TMP"):
        os.unlink(log_path)
    return Run(name, argv, p.returncode, out, err, connects, time.monotonic() - t0,
               allowed_ports, forbidden_ports)


class SessionError(Exception):
    pass


class Session:
    """The Java client's interactive session (java/Session.java: Admin
    operations and a background load) under strace. session("describe-topic",
    "t") sends one command and returns its JSON answer (SessionError when it
    says ok: false, unless check=False); close() ends it and parses strace.
    Every answer is awaited with a deadline; the JVM is killed (its process
    group) when one passes, and by close()."""

    def __init__(self, bootstrap, props=(), timeout=30, strace=True, allowed_ports=(),
                 forbidden_ports=(), workdir=None, start_timeout=60):
        why = problem("java")
        if why:
            raise kcluster.NotInstalled(why)
        self.timeout = timeout
        self.allowed, self.forbidden = set(allowed_ports), set(forbidden_ports)
        args = ["--bootstrap", bootstrap, "--timeout", str(timeout)]
        for kv in props:
            args += ["--prop", kv]
        self.argv = java_argv("Session", args)
        self.log_path = None
        self.connects = []
        self.transcript = []
        full = self.argv
        if strace:
            fd, self.log_path = tempfile.mkstemp(prefix="strace-session-", suffix=".log", dir=workdir)
            os.close(fd)
            full = strace_argv(self.log_path) + self.argv
        fd, self.stderr_path = tempfile.mkstemp(prefix="session-", suffix=".stderr", dir=workdir)
        self._stderr = os.fdopen(fd, "wb")
        self.proc = subprocess.Popen(full, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, start_new_session=True)
        self._buf = b""
        try:
            hello = self._read(start_timeout)
        except BaseException:
            self.kill()
            raise
        self.lib_version = hello.get("lib_version")

    def _read(self, timeout):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line, self._buf = self._buf[:nl], self._buf[nl + 1:]
                if line.startswith(b"{"):
                    doc = json.loads(line)
                    self.transcript.append(("<", doc))
                    return doc
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise SessionError(f"no answer from the Java session within {timeout}s; "
                                   f"stderr: {self.stderr_tail()}")
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise SessionError(f"the Java session exited (rc {self.proc.poll()}); "
                                       f"stderr: {self.stderr_tail()}")
                self._buf += chunk

    def __call__(self, *words, timeout=None, check=True):
        line = " ".join(str(w) for w in words)
        self.transcript.append((">", line))
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except OSError as e:
            raise SessionError(f"{line}: the Java session is gone ({e}); "
                               f"stderr: {self.stderr_tail()}")
        doc = self._read(timeout or self.timeout + 15)
        if check and not doc.get("ok"):
            raise SessionError(f"{line}: {doc.get('error')}")
        return doc

    def stderr_tail(self, n=3000):
        try:
            return Path(self.stderr_path).read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def log_counts(self):
        """{"WARN": n, "ERROR": n}: the lines the client logged (log4j2 at
        WARN, java/log4j2.properties) at each level: what it made visible
        of the faults besides the results of its calls."""
        text = self.stderr_tail(n=1 << 30)
        return {lvl: text.count(f"] {lvl} ") for lvl in ("WARN", "ERROR")}

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self._finish()

    def close(self, timeout=60):
        """quit, then wait for the JVM (killed after timeout); returns the
        connects strace saw."""
        if self.proc.poll() is None:
            try:
                self("quit", timeout=timeout, check=False)
                self.proc.wait(timeout)
            except (SessionError, OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        return self.connects

    def _finish(self):
        for f in (self.proc.stdin, self.proc.stdout, self._stderr):
            try:
                f.close()
            except OSError:
                pass
        if self.log_path and os.path.exists(self.log_path):
            self.connects = parse_strace(self.log_path)
            if not os.environ.get("FERRY_KEEP_TMP"):
                os.unlink(self.log_path)

    def dial_problems(self):
        return dial_problems(self.connects, self.allowed, self.forbidden)

    def describe(self):
        lines = [f"session: {' '.join(self.argv)}", f"connects: {self.connects}"]
        for d, x in self.transcript[-40:]:
            lines.append(f"{d} {x}")
        lines.append(f"stderr (tail):\n{self.stderr_tail()}")
        return "\n".join(lines)


def main(argv):
    if not argv or argv[0] not in CLIENTS:
        print(f"usage: clients.py {{{'|'.join(CLIENTS)}}} [--strace] -- PEER-OPTIONS", file=sys.stderr)
        return 2
    name, rest = argv[0], argv[1:]
    use_strace = "--strace" in rest[: rest.index("--")] if "--" in rest else False
    rest = rest[rest.index("--") + 1:] if "--" in rest else rest
    opts, i = {}, 0
    while i < len(rest):
        k = rest[i].lstrip("-")
        if i + 1 < len(rest) and not rest[i + 1].startswith("--"):
            opts[k] = rest[i + 1]
            i += 2
        else:
            opts[k] = True
            i += 1
    r = run(name, opts, strace=use_strace)
    print(json.dumps(r.result))
    if use_strace:
        for c in r.connects:
            print(f"connect: pid {c[0]} {c[1]} {c[2]}:{c[3]}", file=sys.stderr)
    return 0 if r.rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
