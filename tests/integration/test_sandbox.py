"""Workers and the admin process sandboxed after start-up (docs/security.md):
seccomp, Landlock, no-new-privs, not dumpable.

The probes of common/testhook.h (a build with -Dtest_hooks=true; scripts/test
makes one) make one worker, picked by pid, attempt what its sandbox forbids
after the lock-down: open("/etc/passwd"), execve, fork, bind. Each must kill
that worker with "sandbox violation: syscall NAME" in its cluster's status
(lastCrash, and the crash-loop reason), the crash policy restarts it, and its
sibling and the other cluster are untouched. The same probes in ferry-admin
kill it with that reason as /admin/health's admin.lastExit; ferryd and the
clusters are untouched and the admin API is back within a second. /admin/health shows the sandbox
of every process; `sandbox = off` turns it off. The data path under the
sandbox: a DNS name upstream (c-ares reads /etc/hosts at every lookup) and
one that does not resolve (c-ares asks the resolver over UDP), and upstream
TLS against the system trust store with an issuer it does not know (OpenSSL
looks it up in the hashed directory during the handshake). In a sanitizer
build the sanitizer runtime must still report from inside the sandbox,
symbolized, and a worker's leak check at exit must not hang.
"""
import ctypes
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import FERRY_ADMIN, FERRYD, pid_alive, proc_starttime, tail_file
from test_failure import TOPIC, metadata_ok, produce, serving_set, wait_for, worker_pid
from test_tls import PKI, Stunnel, pki  # noqa: F401  (pki: a fixture)

# probe -> (signal offset from SIGRTMIN, the syscall that kills)
PROBES = {
    "open /etc/passwd": (1, "openat"),
    "execve": (2, "execve"),
    "fork": (3, "clone"),
    "bind": (4, "bind"),
}


def _symbols(binary=FERRYD):
    r = subprocess.run(["nm", str(binary)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def build_kind():
    syms = _symbols()
    for binary, s in ((FERRYD, syms), (FERRY_ADMIN, _symbols(FERRY_ADMIN))):
        if not re.search(r"\btesthook_start\b", s):
            pytest.fail(f"{binary} has no test hooks: build with meson -Dtest_hooks=true "
                        "(scripts/test does)")
    return {"sanitizer": "__asan_init" in syms or "__asan_report_load1" in syms}


def _landlock_abi():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint(1))
    return abi if abi > 0 else 0


def _expected(sanitizer):
    abi = _landlock_abi()
    parts = ["seccomp"]
    if abi >= 1:
        parts.append("landlock-fs")
    if abi >= 4:
        parts.append("landlock-net")
    if abi >= 6:
        parts.append("landlock-scope")
    parts += ["no-new-privs", "not-dumpable"]
    if sanitizer:
        parts.append("sanitizer-allowlist")
    return ",".join(parts)


def _probe(pid, name):
    os.kill(pid, signal.SIGRTMIN + PROBES[name][0])


def _status_field(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return line.split(":", 1)[1].split()
    raise KeyError(field)


def _health(f):
    code, _, body = f.http("/admin/health")
    assert code == 200, code
    import json
    return json.loads(body)


@pytest.fixture
def upstream(mock_factory):
    return mock_factory("up", 3, [f"{TOPIC}:3"])


def _ferry(ferry_factory, upstream, extra="", a_workers=2, crash_loop_limit=10):
    """A (workers = a_workers) and B (one worker) on one upstream; the crash
    policy lets a few crashes through unless told otherwise."""
    f = ferry_factory({"A": upstream, "B": upstream},
                      extra_ferry=f"crash_loop_limit = {crash_loop_limit}\n" + extra,
                      start=False)
    text = f.config_text.replace("[cluster A]\n", f"[cluster A]\nworkers = {a_workers}\n", 1)
    f.config_text = text
    f.config_path.write_text(text)
    f.workers_of = {"A": a_workers, "B": 1}.get   # for serving_set()
    return f.start()


def test_health_shows_the_sandbox_of_every_process(upstream, ferry_factory, build_kind):
    f = _ferry(ferry_factory, upstream)
    sb = _health(f)["sandbox"]
    assert sb["setting"] == "on", sb
    assert sb["kernel"]["landlockAbi"] == _landlock_abi() and sb["kernel"]["seccomp"], sb
    assert sb["missing"] is None, sb  # this kernel has Landlock ABI >= 6
    procs = sb["processes"]
    assert procs[0] == {"role": "supervisor", "pid": f.proc.pid, "sandbox": "none"}, procs
    assert procs[1] == {"role": "admin", "pid": f.admin_pid(),
                        "sandbox": _expected(build_kind["sanitizer"]), "complete": True}, procs
    workers = {p["pid"]: p for p in procs[2:]}
    want = serving_set(f, "A") | serving_set(f, "B")
    assert set(workers) == want, (procs, want)
    for pid, p in workers.items():
        assert p["role"] == "worker" and p["cluster"] in ("A", "B"), p
        assert p["sandbox"] == _expected(build_kind["sanitizer"]), p
        assert p["complete"] is True, p
    for pid in list(workers) + [f.admin_pid()]:
        # what the kernel says of it: a seccomp filter, no new privileges,
        # and /proc/PID owned by root although it runs as nobody (not dumpable)
        assert _status_field(pid, "Seccomp") == ["2"], pid
        assert _status_field(pid, "NoNewPrivs") == ["1"], pid
        assert _status_field(pid, "Uid")[0] == "65534", pid
        assert os.stat(f"/proc/{pid}/status").st_uid == 0, pid
    log = tail_file(f.log_path, 400)
    assert re.search(r'msg="worker sandbox" sandbox=seccomp,', log), log
    assert "worker sandbox incomplete" not in log
    # ferryctl health prints the same document
    r = f.ctl("--json", "health")
    assert '"sandbox"' in r.stdout


@pytest.mark.parametrize("probe", list(PROBES))
def test_forbidden_call_kills_only_that_worker(upstream, ferry_factory, build_kind, probe):
    f = _ferry(ferry_factory, upstream)
    a_pids, b_pids = serving_set(f, "A"), serving_set(f, "B")
    assert len(a_pids) == 2 and len(b_pids) == 1, f.status()
    starts = {p: proc_starttime(p) for p in a_pids | b_pids}
    victim = worker_pid(f, "A", 0)
    sibling = next(iter(a_pids - {victim}))
    restarts0 = f.metrics().get(("ferry_worker_restarts_total", "A"), 0)

    _probe(victim, probe)
    wait_for(lambda: not pid_alive(victim, starts[victim]), 10,
             what=f"worker {victim} killed by its {probe} probe")
    syscall = PROBES[probe][1]
    a = wait_for(lambda: (lambda c: c if (c.get("lastCrash") or {}).get("pid") == victim
                          else None)(f.cluster("A")), 10, what="A's lastCrash")
    assert a["lastCrash"]["reason"] == f"sandbox violation: syscall {syscall}", a["lastCrash"]
    assert a["lastCrash"]["index"] == 0, a["lastCrash"]
    log = tail_file(f.log_path, 600)
    m = re.search(rf'msg="sandbox violation" cluster=A gen=\d+ pid={victim} '
                  rf'reason="sandbox violation: syscall {syscall}" path="([^"]*)"', log)
    assert m, log
    assert m.group(1) == ("/etc/passwd" if probe.startswith("open") else ""), m.group(0)
    assert re.search(rf'worker exited.*cluster=A .*pid={victim} '
                     rf'how="sandbox violation: syscall {syscall}"', log), log
    assert f"probe=\"{probe}\" outcome" not in log, "the probe survived"

    # the crash policy replaces it; its sibling and B are untouched
    wait_for(lambda: len(serving_set(f, "A")) == 2 and victim not in serving_set(f, "A"), 15,
             what="A's replacement worker accepting")
    assert sibling in serving_set(f, "A") and pid_alive(sibling, starts[sibling])
    assert serving_set(f, "B") == b_pids and all(pid_alive(p, starts[p]) for p in b_pids)
    assert f.metrics().get(("ferry_worker_restarts_total", "A"), 0) == restarts0 + 1
    assert f.metrics().get(("ferry_worker_restarts_total", "B"), 0) == 0
    assert f.cluster("B").get("lastCrash") is None
    out = f.ctl("status").stdout
    assert re.search(rf"^A: last crash \S+ ago: sandbox violation: syscall {syscall} "
                     rf"\(worker #0, pid {victim}\)$", out, re.M), out
    assert not re.search(r"^B: last crash", out, re.M), out
    # the replacement is sandboxed too, and both clusters serve
    new = next(iter(serving_set(f, "A") - a_pids))
    procs = {p["pid"]: p for p in _health(f)["sandbox"]["processes"]}
    assert procs[new]["sandbox"] == _expected(build_kind["sanitizer"]), procs
    for name in ("A", "B"):
        metadata_ok(f, name, timeout=5)
        assert produce(f.bootstrap(name), 20, f"after-{probe[:4]}") == []


def test_crash_loop_reason_names_the_violation(upstream, ferry_factory, build_kind):
    """A single worker (B) with crash_loop_limit = 1: its first violation is
    a crash loop, and the cluster's reason says why."""
    f = _ferry(ferry_factory, upstream, crash_loop_limit=1)
    b = worker_pid(f, "B", 0)
    a_pids = serving_set(f, "A")
    _probe(b, "bind")
    c = wait_for(lambda: (lambda c: c if c["state"] == "failed" else None)(f.cluster("B")), 10,
                 what="B failed")
    assert c["reason"] == ("crash loop: 1 crash within 60s, last sandbox violation: "
                           "syscall bind"), c["reason"]
    r = f.ctl("status")
    assert "sandbox violation: syscall bind" in r.stdout, r.stdout
    assert serving_set(f, "A") == a_pids
    f.ctl("restart", "B")
    wait_for(lambda: f.cluster("B")["state"] == "accepting", 15, what="B back after restart")
    metadata_ok(f, "B", timeout=5)


def test_sandbox_off(upstream, ferry_factory, build_kind):
    f = _ferry(ferry_factory, upstream, extra="sandbox = off", a_workers=1)
    sb = _health(f)["sandbox"]
    assert sb["setting"] == "off", sb
    assert [p["role"] for p in sb["processes"][:2]] == ["supervisor", "admin"], sb
    for p in sb["processes"][1:]:
        assert p["sandbox"] == "off" and p["complete"] is False, p
    victim = worker_pid(f, "A", 0)
    st = proc_starttime(victim)
    assert _status_field(victim, "Seccomp") == ["0"]
    # not dumpable all the same: that protects what a worker relays, not
    # the machine from the worker
    assert os.stat(f"/proc/{victim}/status").st_uid == 0
    outcomes = {"open /etc/passwd": "opened", "execve": "No such file or directory",
                "fork": "forked", "bind": "bound"}
    for probe, outcome in outcomes.items():
        _probe(victim, probe)
        wait_for(lambda: f'probe="{probe}" outcome="{outcome}"' in tail_file(f.log_path, 300),
                 10, what=f"{probe} survived with sandbox = off")
    assert pid_alive(victim, st) and serving_set(f, "A") == {victim}
    assert f.cluster("A").get("lastCrash") is None
    log = tail_file(f.log_path, 400)
    assert 'msg="worker sandbox off"' in log
    metadata_ok(f, "A", timeout=5)


def test_reload_to_sandbox_on_applies_to_new_workers(upstream, ferry_factory, build_kind):
    """sandbox is read at every reload; a worker started after it (here a
    restart) gets the new setting, one already running keeps its own."""
    f = _ferry(ferry_factory, upstream, extra="sandbox = off", a_workers=1)
    old = worker_pid(f, "A", 0)
    f.config_text = f.config_text.replace("sandbox = off", "sandbox = on")
    f.config_path.write_text(f.config_text)
    f.ctl("reload")
    assert _health(f)["sandbox"]["setting"] == "on"
    procs = {p["pid"]: p for p in _health(f)["sandbox"]["processes"]}
    assert procs[old]["sandbox"] == "off"
    f.ctl("restart", "A")
    wait_for(lambda: serving_set(f, "A") and old not in serving_set(f, "A"), 20,
             what="A restarted")
    new = worker_pid(f, "A", 0)
    procs = {p["pid"]: p for p in _health(f)["sandbox"]["processes"]}
    assert procs[new]["sandbox"] == _expected(build_kind["sanitizer"]), procs


def test_dns_names_upstream(upstream, ferry_factory, build_kind):
    """A: upstream by name (c-ares reads /etc/hosts at every lookup, through
    the sandbox's path check); B: a name no resolver knows (c-ares asks the
    resolver over UDP): unreachable, and alive."""
    f = ferry_factory({"A": upstream, "B": upstream}, start=False)
    port = upstream.bootstrap.split(",")[0].rsplit(":", 1)[1]
    text = f.config_text.replace(f"upstream = {upstream.bootstrap}", f"upstream = localhost:{port}", 1)
    text = text.replace(f"upstream = {upstream.bootstrap}",
                        "upstream = ferry-sandbox-test.invalid:9092", 1)
    f.config_text = text
    f.config_path.write_text(text)
    f.start()
    a, b = worker_pid(f, "A", 0), worker_pid(f, "B", 0)
    sa, sbt = proc_starttime(a), proc_starttime(b)
    for i in range(3):  # several lookups: /etc/hosts is opened each time
        metadata_ok(f, "A", timeout=10)
        assert produce(f.bootstrap("A"), 10, f"dns-{i}") == []
    up = wait_for(lambda: (lambda u: u if u["state"] == "unreachable" else None)(
        f.cluster("B")["upstream"]), 30, what="B's upstream unreachable")
    assert "ferry-sandbox-test.invalid" in (up["lastError"] or ""), up
    print(f"B's upstream: {up['lastError']}")
    assert pid_alive(a, sa) and pid_alive(b, sbt)
    assert "sandbox violation" not in tail_file(f.log_path, 400)


def test_upstream_tls_system_trust_store(mock_factory, ferry_factory, keeper, workdir, request,
                                         pki, build_kind):  # noqa: F811
    """upstream_tls without upstream_ca verifies against the system store:
    a broker certificate of an unknown CA makes OpenSSL look the issuer up
    in the hashed directory during the handshake (allowed: read-only, the
    trust store). The handshake fails; the worker lives."""
    mock = mock_factory("T", 3, [f"{TOPIC}:3"])
    st = Stunnel(keeper, workdir, request, *pki.issue("broker", "kafka broker", "IP:127.0.0.1"),
                 mock.ports)
    dial = ",".join(f"127.0.0.1:{m}=127.0.0.1:{s}" for m, s in zip(mock.ports, st.ports))
    f = ferry_factory({"A": mock}, cluster_keys={"upstream_tls": "on",
                                                 "upstream_dial_map": dial})
    w = worker_pid(f, "A", 0)
    sw = proc_starttime(w)
    up = wait_for(lambda: (lambda u: u if u["state"] == "unreachable" else None)(
        f.cluster("A")["upstream"]), 30, what="A's upstream unreachable (unknown CA)")
    assert "certificate" in (up["lastError"] or "").lower(), up
    print(f"A's upstream: {up['lastError']}")
    time.sleep(1.0)  # a re-probe or two
    assert pid_alive(w, sw), "the worker died verifying against the system store"
    assert "sandbox violation" not in tail_file(f.log_path, 400)


def test_sanitizer_reports_from_inside_the_sandbox(upstream, ferry_factory, build_kind):
    """Sanitizer builds: a leak check (LeakSanitizer stops the process with a
    tracer it ptrace()s) and an AddressSanitizer report, symbolized, from a
    sandboxed worker; and the leak check at exit finishes."""
    if not build_kind["sanitizer"]:
        pytest.skip("not a sanitizer build (the probes are compiled in sanitizer builds only)")
    f = _ferry(ferry_factory, upstream, a_workers=1)
    w = worker_pid(f, "A", 0)
    sw = proc_starttime(w)
    os.kill(w, signal.SIGRTMIN + 5)  # leak, and a recoverable leak check now
    wait_for(lambda: 'probe="leak" outcome="leaked 8 blocks of 4242 bytes, leak check: 1"'
             in tail_file(f.log_path, 300), 20, what="the leak check's verdict")
    log = tail_file(f.log_path, 300)
    assert "LeakSanitizer: detected memory leaks" in log
    assert re.search(r"in testhook_try \S*common/testhook\.c:\d+", log), log
    assert pid_alive(w, sw) and "sandbox violation" not in log

    b = worker_pid(f, "B", 0)
    os.kill(b, signal.SIGRTMIN + 6)  # heap overflow: the sanitizer reports and aborts
    wait_for(lambda: not pid_alive(b), 20, what="B's worker ended by its sanitizer report")
    log = tail_file(f.log_path, 400)
    assert re.search(r"(AddressSanitizer: heap-buffer-overflow|runtime error: load of address)",
                     log), log
    assert re.search(r"testhook\.c:\d+", log), log
    assert "sandbox violation" not in log, log

    # stop: A's worker runs its leak check at exit, inside the sandbox, and ends
    t0 = time.monotonic()
    f.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: not pid_alive(w, sw), 20, what="A's worker exiting after its leak check")
    took = time.monotonic() - t0
    f.proc.wait(20)
    log = tail_file(f.log_path, 200)
    assert log.count("LeakSanitizer: detected memory leaks") >= 1, log
    assert "sandbox violation" not in log, log
    print(f"worker with a leak exited {took:.2f}s after SIGTERM")


# --------------------------------------------------------------------------
# the admin process (ferry-admin)
# --------------------------------------------------------------------------

def _health_when_back(f, timeout=5.0):
    """/admin/health as soon as an admin process answers (a request sent
    while none runs waits in the listen backlog)."""
    from conftest import http_request
    import json
    code, _, body = http_request("GET", "/admin/health", unix_socket=f.sock, timeout=timeout)
    assert code == 200, body
    return json.loads(body)


@pytest.mark.parametrize("probe", list(PROBES))
def test_forbidden_call_kills_only_the_admin_process(upstream, ferry_factory, build_kind, probe):
    f = _ferry(ferry_factory, upstream)
    workers = {p: proc_starttime(p) for p in serving_set(f, "A") | serving_set(f, "B")}
    admin = f.admin_pid()
    start = proc_starttime(admin)

    _probe(admin, probe)
    wait_for(lambda: not pid_alive(admin, start), 10, interval=0.005,
             what=f"admin process {admin} killed by its {probe} probe")
    t0 = time.monotonic()
    h = _health_when_back(f)
    back = time.monotonic() - t0
    print(f"\nadmin API back {back * 1000:.0f} ms after the {probe} violation")
    # the admin process may not even create a socket: its bind probe dies
    # one call earlier than a worker's
    syscall = "socket" if probe == "bind" else PROBES[probe][1]
    assert h["admin"]["lastExit"] == f"sandbox violation: syscall {syscall}", h["admin"]
    assert h["admin"]["restarts"] == 1 and h["admin"]["pid"] not in (None, admin), h["admin"]
    assert back < 1.0, f"admin API back after {back:.2f}s"
    log = tail_file(f.log_path, 600)
    m = re.search(rf'msg="sandbox violation" proc=admin pid={admin} '
                  rf'reason="sandbox violation: syscall {syscall}" path="([^"]*)"', log)
    assert m, log
    assert m.group(1) == ("/etc/passwd" if probe.startswith("open") else ""), m.group(0)
    assert re.search(rf'msg="admin process exited; restarting it" pid={admin} '
                     rf'status="sandbox violation: syscall {syscall}"', log), log
    assert f"probe=\"{probe}\" outcome" not in log, "the probe survived"

    # ferryd and every worker untouched; the new admin process is locked too
    assert f.proc.poll() is None
    assert all(pid_alive(p, s) for p, s in workers.items())
    assert serving_set(f, "A") | serving_set(f, "B") == set(workers)
    for name in ("A", "B"):
        assert f.cluster(name).get("lastCrash") is None
    procs = h["sandbox"]["processes"]
    assert procs[1] == {"role": "admin", "pid": h["admin"]["pid"],
                        "sandbox": _expected(build_kind["sanitizer"]), "complete": True}, procs
    metadata_ok(f, "A", timeout=5)


def test_admin_process_sandbox_off(upstream, ferry_factory, build_kind):
    f = _ferry(ferry_factory, upstream, extra="sandbox = off", a_workers=1)
    admin = f.admin_pid()
    st = proc_starttime(admin)
    assert _status_field(admin, "Seccomp") == ["0"]
    assert os.stat(f"/proc/{admin}/status").st_uid == 0   # not dumpable all the same
    for probe, outcome in {"open /etc/passwd": "opened", "fork": "forked",
                           "bind": "bound"}.items():
        _probe(admin, probe)
        wait_for(lambda: re.search(rf'proc=admin .*probe="{probe}" outcome="{outcome}"',
                                   tail_file(f.log_path, 300)), 10,
                 what=f"{probe} survived in the admin process with sandbox = off")
    assert pid_alive(admin, st) and f.admin_pid() == admin
    assert _health(f)["admin"]["restarts"] == 0


def test_admin_process_parses_a_hosts_name_inside_the_sandbox(upstream, ferry_factory,
                                                              build_kind):
    """A posted config is parsed by the admin process first; a listening
    address named in /etc/hosts makes the parser read that file (the one
    file its sandbox lets it read)."""
    names = []
    with open("/etc/hosts") as hosts:
        for line in hosts:
            parts = line.split("#", 1)[0].split()
            if len(parts) >= 2 and parts[0] == "127.0.0.1":
                names += [n for n in parts[1:] if n != "localhost"]
    if not names:
        pytest.skip("no name other than localhost for 127.0.0.1 in /etc/hosts")
    f = _ferry(ferry_factory, upstream, a_workers=1)
    admin = f.admin_pid()
    st = proc_starttime(admin)
    text = f.config_text.replace("bootstrap = 127.0.0.1:", f"bootstrap = {names[0]}:", 1)
    assert text != f.config_text
    code, _, body = f.http("/admin/config/validate", method="POST", body=text.encode())
    assert code == 200, body
    # and one the parser refuses: its errors, not the text, go to ferryd
    bad = text.replace(f"bootstrap = {names[0]}:", "bootstrap = no-such-name.invalid:", 1)
    code, _, body = f.http("/admin/config/validate", method="POST", body=bad.encode())
    assert code == 400 and b"not an IP address" in body, body
    assert pid_alive(admin, st) and f.admin_pid() == admin
    assert "sandbox violation" not in tail_file(f.log_path, 300)
