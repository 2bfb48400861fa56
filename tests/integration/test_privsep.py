"""
Privilege separation of the admin API (docs/design.md §12): nothing an
admin client sends is parsed by the root process.

- the ferryd executable links no HTTP parser and no admin HTTP server
  (its symbols), and none of its objects includes their headers (the
  build's dependency records); ferry-admin has them;
- ferry-admin runs as the workers' user (ferryd runs as root here), with
  no new privileges and no capabilities, as a child of ferryd;
- malformed HTTP, a slowloris, a 2,000-connection flood and 50 MB bodies
  are the admin process's business: the supervisor's descriptors do not
  move, it stays up, and so does the admin process;
- kill -9 of the admin process during a reload: the reload runs to its
  end and its outcome is recorded (GET /admin/config/status, after the
  restart), ferryd and every cluster are unaffected, a request sent right
  after the kill is answered by the restarted admin process within a
  second (it waited in the listen backlog), /admin/health counts the
  restart;
- a SIGSTOPped admin process is killed by the watchdog and replaced;
- what the supervisor receives is checked: a malformed request on the
  admin channel (said by the test on the admin process's own end of the
  channel, taken with pidfd_getfd) kills that admin process, never ferryd.

    FERRY_BUILD=$PWD/build /usr/bin/python3 -m pytest -q tests/integration/test_privsep.py
"""

import json
import os
import pwd
import re
import resource
import select
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time

import pytest

from conftest import (BUILD, FERRY_ADMIN, FERRYD, REPO, UnixHTTPConnection, admin_pid_of,
                      http_request, pid_alive, proc_starttime, serving_pids, wait_for)
from core_helpers import _c_source, ipc_header, ipc_type_values, take_worker_channel

NM = shutil.which("nm")
NINJA = shutil.which("ninja")

# What only the admin process may contain: the HTTP parser and formatter,
# the admin HTTP server, the access decision on request headers, the
# eviction queues, the status page.
ADMIN_ONLY_SYMBOLS = ["http_parser_feed", "http_parser_init", "http_format_response",
                      "http_request_header", "admin_http_start", "admin_http_answer",
                      "admin_conn_new",
                      "adminauth_check", "adminauth_bearer", "evict_victim",
                      "statuspage_text"]
ADMIN_ONLY_HEADERS = ["common/http.h", "supervisor/admin_http.h", "supervisor/admin_http_priv.h",
                      "supervisor/adminauth.h", "supervisor/evict.h", "supervisor/statuspage.h"]


def defined_symbols(binary):
    r = subprocess.run([NM, "--defined-only", str(binary)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return {line.split()[-1] for line in r.stdout.splitlines() if line.strip()}


def proc_status(pid):
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def health(ferry, timeout=5.0):
    code, _, body = http_request("GET", "/admin/health", unix_socket=ferry.sock,
                                 timeout=timeout)
    assert code == 200, (code, body)
    return json.loads(body)


def config_status(ferry):
    code, _, body = http_request("GET", "/admin/config/status", unix_socket=ferry.sock)
    assert code == 200, body
    return json.loads(body)


def raw(target, data, timeout=5.0, shut=False):
    """Send data on a new connection to target ((AF, addr)); return all
    that comes back until EOF or timeout."""
    family, addr = target
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(addr)
        s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
        buf = b""
        while True:
            try:
                d = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not d:
                break
            buf += d
        return buf
    finally:
        s.close()


# --------------------------------------------------------------------------
# no HTTP parser in the root process
# --------------------------------------------------------------------------

def test_ferryd_links_no_http_parser():
    if NM is None:
        pytest.fail("nm not installed (binutils)")
    assert FERRY_ADMIN.exists(), f"{FERRY_ADMIN} not built"
    ferryd = defined_symbols(FERRYD)
    admin = defined_symbols(FERRY_ADMIN)
    # the check can fail: the admin process has every one of them
    missing = [s for s in ADMIN_ONLY_SYMBOLS if s not in admin]
    assert not missing, f"ferry-admin lacks {missing}"
    linked = [s for s in ADMIN_ONLY_SYMBOLS if s in ferryd]
    assert not linked, f"ferryd links {linked}"
    assert not any(s.startswith("http_") for s in ferryd), \
        sorted(s for s in ferryd if s.startswith("http_"))
    # what ferryd does have of the admin API: the typed messages
    assert "adminproto_request_check" in ferryd and "admin_api_handle" in ferryd


def _link_inputs(target):
    """Objects and static libraries of the build linked into target
    (relative to the build directory), static libraries expanded into
    their objects: what `ninja -t query` lists as its inputs."""
    r = subprocess.run([NINJA, "-C", str(BUILD), "-t", "query", target], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    inputs, section = [], None
    for line in r.stdout.splitlines():
        if line.startswith("  ") and not line.startswith("    "):
            section = line.strip().split(":")[0]
            continue
        if section == "input" and line.startswith("    "):
            name = line.strip().lstrip("|").strip()
            if not os.path.isabs(name):
                inputs.append(name)
    out = []
    for i in inputs:
        if i.endswith(".a"):
            out += _link_inputs(i)
        elif i.endswith(".o"):
            out.append(i)
    return out


def test_ferryd_objects_include_no_admin_http_header():
    """The module graph: every object linked into ferryd, and the headers
    the compiler read for it (ninja's dependency log)."""
    if NINJA is None:
        pytest.fail("ninja not installed")
    objs = _link_inputs("supervisor/ferryd")
    assert any(o.endswith("main.c.o") for o in objs), objs
    assert any("sup_io.c.o" in o for o in objs) and any("adminproc.c.o" in o for o in objs)
    assert not [o for o in objs if re.search(r"/(http|admin_http|admin_accept|admin_main|"
                                             r"adminauth|evict|statuspage)\.c\.o$", o)], objs
    r = subprocess.run([NINJA, "-C", str(BUILD), "-t", "deps", *objs], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    headers, current = {}, None
    for line in r.stdout.splitlines():
        if line and not line.startswith(" "):
            current = line.split(":")[0]
            headers[current] = []
        elif line.strip() and current:
            headers[current].append(line.strip())
    assert set(headers) == set(objs), "ninja has no dependency record for some objects " \
        f"(build with ninja first): {set(objs) - set(headers)}"
    bad = {o: [h for h in hs if any(os.path.normpath(h).endswith(x) for x in ADMIN_ONLY_HEADERS)]
           for o, hs in headers.items()}
    bad = {o: hs for o, hs in bad.items() if hs}
    assert not bad, f"ferryd's objects include admin HTTP headers: {bad}"
    # and ferry-admin's do (the check sees headers at all)
    adm = _link_inputs("supervisor/ferry-admin")
    r = subprocess.run([NINJA, "-C", str(BUILD), "-t", "deps", *adm], capture_output=True,
                       text=True, timeout=60)
    assert "common/http.h" in r.stdout


# --------------------------------------------------------------------------
# who the admin process is
# --------------------------------------------------------------------------

@pytest.fixture
def one(mock_factory, ferry_factory):
    m = mock_factory("A", 3)
    return ferry_factory({"A": m})


def test_admin_process_runs_as_the_workers_user(one):
    f = one
    pid = f.admin_pid()
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        argv = fh.read().split(b"\0")
    assert argv[0] == b"ferry-admin" and argv[1:3] == [b"--ppid", str(f.proc.pid).encode()]
    st = proc_status(pid)
    assert int(st["PPid"]) == f.proc.pid
    assert st["NoNewPrivs"].strip() == "1"
    assert int(st["CapEff"], 16) == 0 and int(st["CapPrm"], 16) == 0
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")   # `user` of the test config
        assert st["Uid"].split() == [str(nobody.pw_uid)] * 4, st["Uid"]
        assert st["Gid"].split() == [str(nobody.pw_gid)] * 4, st["Gid"]
        assert st["Groups"].split() == [str(nobody.pw_gid)], st["Groups"]
        # and the supervisor is root
        assert proc_status(f.proc.pid)["Uid"].split()[0] == "0"
    # what it holds: sockets, its loop's descriptors, the log; no file of
    # ferryd's (the executable it was started from, a config, a key)
    fds = {int(n): os.readlink(f"/proc/{pid}/fd/{n}") for n in os.listdir(f"/proc/{pid}/fd")}
    files = {n: t for n, t in fds.items() if t.startswith("/") and n > 2 and
             not t.startswith("/dev/")}
    assert not files, f"the admin process holds files: {files}"
    assert sum(t.startswith("socket:") for t in fds.values()) == 3, fds  # channel, 2 listeners
    h = health(f)
    assert h["admin"]["pid"] == pid and h["admin"]["state"] == "running"
    assert h["admin"]["restarts"] == 0
    # the control socket is bound by the supervisor, the connection served
    # by the admin process: the caller's uid is still known to the log
    code, _, _ = http_request("POST", "/admin/config/validate", unix_socket=f.sock,
                              body=f.config_text.encode())
    assert code == 200
    wait_for(lambda: f"pid={os.getpid()}" in f.log_path.read_text(), 5, what="caller logged")
    line = [x for x in f.log_path.read_text().splitlines() if 'msg="admin call"' in x][-1]
    assert "proc=supervisor" in line and f"uid={os.getuid()} gid={os.getgid()}" in line, line


def test_ferryd_does_not_start_without_a_working_ferry_admin(mock_factory, ferry_factory,
                                                            workdir):
    """ferryd looks for ferry-admin next to itself first: a copy of ferryd
    beside a ferry-admin that the workers' user may not execute refuses to
    start, saying so, instead of restarting it in a loop."""
    if os.geteuid() != 0:
        pytest.skip("the admin process changes user only when ferryd runs as root")
    m = mock_factory("A", 3)
    f = ferry_factory({"A": m}, start=False)
    bindir = workdir / "bin"
    bindir.mkdir()
    shutil.copy(FERRYD, bindir / "ferryd")
    shutil.copy(FERRY_ADMIN, bindir / "ferry-admin")
    os.chmod(bindir / "ferry-admin", 0o700)           # root only: not `nobody`
    r = subprocess.run([str(bindir / "ferryd"), "-c", str(f.config_path)], capture_output=True,
                       text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    assert f"{bindir / 'ferry-admin'} exited before it was ready (exit 127): it cannot be " \
        "executed as the workers' user" in r.stderr, r.stderr[-2000:]
    assert not os.path.exists(f.sock), "the control socket was left behind"
    # beside a working one, the same copy starts
    os.chmod(bindir / "ferry-admin", 0o755)
    f.keeper.procs.append(("ferryd-copy", subprocess.Popen(
        [str(bindir / "ferryd"), "-c", str(f.config_path)], stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=open(workdir / "copy.log", "wb"))))
    p = f.keeper.procs[-1][1]
    wait_for(lambda: f.ctl("ready", check=False).returncode == 0, 30, what="copy ready")
    with open(f"/proc/{admin_pid_of(p.pid)}/cmdline", "rb") as fh:
        assert fh.read().split(b"\0")[0] == b"ferry-admin"


# --------------------------------------------------------------------------
# hostile clients are the admin process's business
# --------------------------------------------------------------------------

MALFORMED = [
    (b"GARBAGE\r\n\r\n", b" 400 "),
    (b"GET /admin/health HTTP/2.0\r\n\r\n", b" 505 "),
    (b"GET /admin/health HTTP/1.1\r\nHost: x\rEvil: 1\r\n\r\n", b" 400 "),
    (b"GET /admin/health HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n", b" 431 "),
    (b"POST /admin/config/reload HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
     b" 411 "),
    (b"POST /admin/config/reload HTTP/1.1\r\nContent-Length: 4\r\n"
     b"Transfer-Encoding: chunked\r\n\r\nabcd", b" 400 "),
    (b"GET /admin/clusters/%00 HTTP/1.1\r\n\r\n", b" 400 "),
    (b"AVERYLONGMETHODNAMEINDEED /x HTTP/1.1\r\n\r\n", b" 501 "),
    (b"GET /admin/clusters/..%2f..%2fetc HTTP/1.1\r\n\r\n", b" 404 "),
    (b"GET /admin/clusters/" + b"x" * 300 + b" HTTP/1.1\r\n\r\n", b" 404 "),
    (b"POST /admin/clusters/A/drain HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n",
     b" 413 "),
    # binary: refused, or never a complete head (408 at the head deadline)
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(64), None),
    (os.urandom(4096), None),
]


def test_malformed_http_never_reaches_the_supervisor(one):
    f = one
    admin = f.admin_pid()
    sup_fds = fd_count(f.proc.pid)
    lines_before = f.log_path.read_text().count("proc=supervisor")
    targets = [(socket.AF_UNIX, f.sock), (socket.AF_INET, ("127.0.0.1", f.admin_port))]
    for target in targets:
        for data, want in MALFORMED:
            got = raw(target, data)
            if want is not None:
                assert got.startswith(b"HTTP/1.1") and want in got[:20], (data[:60], got[:120])
            else:
                assert got[:13] in (b"HTTP/1.1 400 ", b"HTTP/1.1 408 ", b"HTTP/1.1 431 ",
                                    b"HTTP/1.1 501 ", b"HTTP/1.1 505 "), (data[:20], got[:120])
    assert fd_count(f.proc.pid) == sup_fds
    assert f.admin_pid() == admin, "the admin process died"
    assert f.proc.poll() is None
    # the supervisor said nothing about any of it (no request reached it)
    assert f.log_path.read_text().count("proc=supervisor") == lines_before
    assert health(f)["admin"]["restarts"] == 0


def test_slowloris_and_flood_stay_in_the_admin_process(one):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2600 <= hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 2600:
        pytest.skip("needs 2,600 descriptors")
    f = one
    admin, sup = f.admin_pid(), f.proc.pid
    sup_fds = fd_count(sup)
    targets = [(socket.AF_UNIX, f.sock), (socket.AF_INET, ("127.0.0.1", f.admin_port))]
    request = b"GET /admin/health HTTP/1.1\r\nHost: x\r\n\r\n"
    held = []
    try:
        # 400 slowloris connections, one byte each second
        for i in range(400):
            fam, addr = targets[i % 2]
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.connect(addr)
            s.send(b"G")
            held.append(s)
        # then a flood of 2,000 connections: 1,000 send a request as soon as
        # they are connected (as a real client does), 1,000 send nothing
        flood, answered = [], 0
        for i in range(2000):
            fam, addr = targets[i % 2]
            wf = (i // 2) % 2 == 0
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.settimeout(2)
            try:
                s.connect(addr)
                if wf:
                    s.send(request)
            except OSError:
                s.close()
                continue
            s.setblocking(False)
            flood.append((s, wf))
        peak = fd_count(admin)
        sup_peak = fd_count(sup)
        poller = select.poll()
        pending = {}
        for s, wf in flood:
            if wf:
                poller.register(s, select.POLLIN)
                pending[s.fileno()] = s
        deadline = time.monotonic() + 10
        while pending and time.monotonic() < deadline:
            for fd, _ in poller.poll(200):
                s = pending.pop(fd, None)
                if s is None:
                    continue
                poller.unregister(fd)
                try:
                    d = s.recv(4096)
                except OSError:
                    d = b""
                if d.startswith(b"HTTP/1.1 200 "):
                    answered += 1
        for s in held[:200]:
            try:
                s.send(b"E")
            except OSError:
                pass
        # the supervisor still answers through a fresh connection
        assert health(f)["status"] == "UP"
    finally:
        for s in held:
            s.close()
        for s, _ in flood:
            s.close()
    print(f"\nflood: {answered} of 1000 well-formed requests answered; admin process "
          f"fds peaked at {peak}, supervisor's at {sup_peak} (baseline {sup_fds})")
    assert answered == 1000, answered
    assert peak > 1000, f"the flood did not reach the admin process ({peak} fds)"
    assert sup_peak == sup_fds and fd_count(sup) == sup_fds
    assert f.admin_pid() == admin and f.proc.poll() is None


def test_50mb_bodies(one):
    f = one
    admin = f.admin_pid()
    rss = {p: int(proc_status(p)["VmRSS"].split()[0]) for p in (f.proc.pid, admin)}
    chunk = b"x" * (1 << 20)
    results = []
    for target in ((socket.AF_UNIX, f.sock), (socket.AF_INET, ("127.0.0.1", f.admin_port))):
        # announced: refused on the head, before any of it is read
        fam, addr = target
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(addr)
        s.sendall(b"POST /admin/config/reload HTTP/1.1\r\nContent-Length: 52428800\r\n\r\n")
        sent = 0
        try:
            for _ in range(50):
                s.sendall(chunk)
                sent += len(chunk)
        except OSError:
            pass
        buf = b""
        try:
            while True:
                d = s.recv(4096)
                if not d:
                    break
                buf += d
        except OSError:
            pass
        s.close()
        results.append((sent, buf[:40]))
        assert buf.startswith(b"HTTP/1.1 413 "), buf[:200]
        # not announced: 50 MB of "config" after a 4 MiB Content-Length
        # (the most a config may be): the first 4 MiB are the body, not
        # a config; the admin process refuses it with the parser's errors
        body = b"[ferry]\n" + b";" * (4 * 1024 * 1024 - 9) + b"\n"
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(20)
        s.connect(addr)
        s.sendall(b"POST /admin/config/reload HTTP/1.1\r\nContent-Length: %d\r\n\r\n"
                  % len(body) + body)
        try:
            for _ in range(46):
                s.sendall(chunk)
        except OSError:
            pass
        buf = b""
        try:
            while True:
                d = s.recv(65536)
                if not d:
                    break
                buf += d
        except OSError:
            pass
        s.close()
        assert buf.startswith(b"HTTP/1.1 400 "), buf[:300]
        assert b'"status":"REJECTED"' in buf and b"<request>:" in buf, buf[:600]
    st = config_status(f)
    assert st["lastReloadAttempt"]["status"] == "REJECTED", st
    assert st["lastReloadAttempt"]["source"] == "api"
    after = {p: int(proc_status(p)["VmRSS"].split()[0]) for p in (f.proc.pid, admin)}
    print(f"\n50 MB bodies: sent before the 413 {[r[0] for r in results]}; RSS KiB "
          f"supervisor {rss[f.proc.pid]}->{after[f.proc.pid]}, admin {rss[admin]}->"
          f"{after[admin]}")
    # nothing like 50 MB was held anywhere
    assert after[f.proc.pid] - rss[f.proc.pid] < 40 * 1024
    assert after[admin] - rss[admin] < 40 * 1024
    assert f.admin_pid() == admin and f.proc.poll() is None


# --------------------------------------------------------------------------
# the admin process dies
# --------------------------------------------------------------------------

def test_kill_admin_during_reload(mock_factory, ferry_factory):
    """A reload whose new upstream answers only after 2 s (reload_upstream_
    check); the admin process that carried it is killed meanwhile."""
    a = mock_factory("A", 3)
    b = mock_factory("B", 3)
    c = mock_factory("C", 3)
    f = ferry_factory({"A": a, "C": c})
    before = {x["name"]: x for x in f.status()["clusters"]}
    c_pids = {p: proc_starttime(p) for p in serving_pids(before["C"])}
    a_gen = before["A"]["generation"]
    for n in (1, 2, 3):
        b.command(f"rtt {n} 2000")
    text = f.config_text.replace(f"upstream = {a.bootstrap}", f"upstream = {b.bootstrap}")
    assert text != f.config_text
    admin = f.admin_pid()
    outcome = {}

    def post():
        try:
            conn = UnixHTTPConnection(f.sock, timeout=30)
            conn.request("POST", "/admin/config/reload", body=text.encode())
            outcome["status"] = conn.getresponse().status
        except Exception as e:  # noqa: BLE001 -- the admin process dies under it
            outcome["error"] = repr(e)

    t = threading.Thread(target=post, daemon=True)
    t.start()
    wait_for(lambda: config_status(f)["reloadInProgress"], 5, interval=0.02,
             what="reload in progress")
    start = proc_starttime(admin)
    t0 = time.monotonic()
    os.kill(admin, signal.SIGKILL)
    wait_for(lambda: not pid_alive(admin, start), 5, interval=0.005, what="admin gone")
    # right away: this connection waits in the backlog for the next one
    code, _, body = http_request("GET", "/admin/health", unix_socket=f.sock, timeout=5)
    back = time.monotonic() - t0
    assert code == 200, body
    h = json.loads(body)
    t.join(10)
    print(f"\nadmin API back {back * 1000:.0f} ms after kill -9; the waiting client got "
          f"{outcome}")
    assert back < 1.0, f"admin API back after {back:.2f}s"
    assert "status" not in outcome, outcome        # its connection died with it
    assert h["admin"]["restarts"] == 1 and h["admin"]["lastExit"] == "signal 9", h
    assert h["admin"]["pid"] != admin and h["admin"]["pid"] == f.admin_pid()
    # the reload ran to its end regardless, and is recorded
    st = wait_for(lambda: (lambda s: s if not s["reloadInProgress"] else None)(
        config_status(f)), 15, what="reload finished")
    last = st["lastReloadAttempt"]
    assert last["status"] == "SUCCESS" and last["source"] == "api", last
    assert last["clustersModified"] == ["A"], last
    assert st["currentConfigVersion"] == last["requestedVersion"]
    # ferryd and every cluster unaffected
    assert f.proc.poll() is None
    after = {x["name"]: x for x in f.status()["clusters"]}
    assert after["A"]["state"] == "accepting" and after["A"]["generation"] > a_gen
    assert after["C"]["state"] == "accepting"
    assert all(pid_alive(p, s) for p, s in c_pids.items())
    assert set(serving_pids(after["C"])) == set(c_pids)
    log = f.log_path.read_text()
    assert 'msg="admin process exited; restarting it"' in log and 'status="signal 9"' in log


def test_admin_restarts_and_watchdog(mock_factory, ferry_factory, keeper):
    m = mock_factory("A", 3)
    f = ferry_factory({"A": m})
    workers = {p: proc_starttime(p) for p in serving_pids(f.cluster("A"))}
    # repeated crashes: restarted each time, with a growing delay
    pid = f.admin_pid()
    for n in range(1, 4):
        os.kill(pid, signal.SIGKILL)
        pid = f.admin_pid(not_pid=pid)
        assert health(f)["admin"]["restarts"] == n
    log = f.log_path.read_text()
    delays = [int(x) for x in re.findall(r"restart_in_ms=(\d+)", log)]
    assert delays == [100, 200, 400], delays
    # frozen: the watchdog kills it (no answer within 10 s) and a new one
    # serves; meanwhile the listening sockets stay open
    os.kill(pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        code, _, _ = http_request("GET", "/admin/ready", unix_socket=f.sock, timeout=20)
        waited = time.monotonic() - t0
    finally:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    assert code == 200
    assert 5.0 < waited < 15.0, waited
    assert f.admin_pid() != pid
    assert "unresponsive: no answer to the watchdog" in f.log_path.read_text()
    assert all(pid_alive(p, s) for p, s in workers.items())
    assert f.proc.poll() is None


# --------------------------------------------------------------------------
# the supervisor checks what the admin process says
# --------------------------------------------------------------------------

def _enum_values(rel, name):
    text = _c_source(rel)
    mt = re.search(r"enum\s+%s\s*\{(.*?)\};" % name, text, re.S)
    assert mt, f"enum {name} not in {rel}"
    body = re.sub(r"/\*.*?\*/|//[^\n]*", "", mt.group(1), flags=re.S)
    out, nxt = {}, 0
    for item in body.split(","):
        item = item.strip()
        if item:
            k, _, v = (x.strip() for x in item.partition("="))
            nxt = int(v, 0) if v else nxt
            out[k] = nxt
            nxt += 1
    return out


REQUEST_FIELDS = [("uint64_t", "id"), ("uint32_t", "route"), ("uint32_t", "flags"),
                  ("uint32_t", "body_len"), ("uint32_t", "n_errors"), ("char", "name"),
                  ("char", "version"), ("struct adminproto_caller", "caller"),
                  ("struct adminproto_conn_query", "query"),
                  ("struct adminproto_list_query", "list")]


def admin_request(req_id, route, name=b"", flags=0, body_len=0, limit=0, list_sort=0):
    """struct adminproto_request (supervisor/adminproto.h) from the control
    socket, caller uid/gid/pid 0/0/1. The layout is checked against the
    header so that a change fails here."""
    text = _c_source("supervisor/adminproto.h")
    m = re.search(r"struct\s+adminproto_request\s*\{(.*?)\};", text, re.S)
    fields = re.findall(r"^\s*((?:struct\s+)?\w+)\s+(\w+)", m.group(1), re.M)
    assert fields == REQUEST_FIELDS, f"struct adminproto_request changed: {fields}"
    caller = struct.pack("=IIIIIi64s256s", 0, 0, 1, 0, 0, 1, b"", b"")
    # the connections listing's query: limit, offset, two filters (none)
    query = struct.pack("=IIII256s256s", limit, 0, 0, 0, b"", b"")
    # the cluster list's query: given, states, sort, limit, offset, pad, names
    listq = struct.pack("=IIIIII1024s", 1 if list_sort else 0, 0, list_sort, 0, 0, 0, b"")
    return (struct.pack("=QIIII64s72s", req_id, route, flags, body_len, 0, name, b"") +
            caller + query + listq)


def test_malformed_admin_messages_kill_the_admin_process(mock_factory, ferry_factory):
    m = mock_factory("A", 3)
    f = ferry_factory({"A": m})
    workers = {p: proc_starttime(p) for p in serving_pids(f.cluster("A"))}
    t = ipc_type_values()
    r = _enum_values("supervisor/adminproto.h", "adminproto_route")
    req = t["IPC_ADMIN_REQUEST"]

    def msg(typ, payload):
        return ipc_header(typ, len(payload), 0) + payload

    good = admin_request(10 ** 12, r["ADMINPROTO_R_HEALTH"])
    cases = [
        ("unknown route", [msg(req, admin_request(10 ** 12, 99))], "unknown route 99"),
        ("short", [msg(req, good[:100])], "request: 100 bytes"),
        ("id reused", [msg(req, good), msg(req, good)], "reused or out of order"),
        ("name rule", [msg(req, admin_request(10 ** 12, r["ADMINPROTO_R_DRAIN"],
                                              name=b"../etc"))], "name rule"),
        ("body without memfd", [msg(req, admin_request(10 ** 12, r["ADMINPROTO_R_RELOAD"],
                                                       flags=1, body_len=10))],
         "body of 10 bytes with 0 fds"),
        ("status page", [msg(req, admin_request(10 ** 12, r["ADMINPROTO_R_PAGE"]))],
         "admin process's own"),
        ("query out of range", [msg(req, admin_request(10 ** 12, r["ADMINPROTO_R_CONNECTIONS"],
                                                       name=b"A", limit=0))],
         "query: limit 0"),
        ("query on another route", [msg(req, admin_request(10 ** 12, r["ADMINPROTO_R_HEALTH"],
                                                           limit=5))],
         "health takes no query"),
        ("list query out of range", [msg(req, admin_request(10 ** 12, r["ADMINPROTO_R_CLUSTERS"],
                                                            list_sort=99))],
         "list: given 1, states 0, sort 99"),
        ("list query on another route", [msg(req, admin_request(
            10 ** 12, r["ADMINPROTO_R_READY"], list_sort=1))], "ready takes no list query"),
        ("worker message", [msg(t["IPC_CONFIG"], b"[ferry]\n")], "unexpected message config"),
        ("length lies", [ipc_header(req, 9999, 0) + good], "does not match datagram"),
    ]
    pid = f.admin_pid()
    for what, datagrams, reason in cases:
        ch = take_worker_channel(pid)
        try:
            for d in datagrams:
                ch.send(d)
        finally:
            ch.close()
        new = f.admin_pid(not_pid=pid, timeout=15)   # the backoff grows to 5 s
        log = f.log_path.read_text()
        assert re.search(r'msg="killing the admin process" pid=%d reason="[^"]*%s' %
                         (pid, re.escape(reason)), log), (what, log[-2000:])
        pid = new
        assert health(f)["status"] == "UP"
    assert health(f)["admin"]["restarts"] == len(cases)
    assert f.proc.poll() is None
    assert all(pid_alive(p, s) for p, s in workers.items())
