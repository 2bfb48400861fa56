"""
ferryctl as an operator meets it: every command's table and --json output,
the per-worker rows of a cluster with several workers, colour only on a
terminal (never with NO_COLOR), the live views `status -w` and `top` driven
in a real terminal (tmux: send-keys, capture-pane, q quits), and the exit
codes of docs/design.md §8 (0 ok, 1 failed or rejected, 2 usage,
3 unreachable).

    FERRY_BUILD=$PWD/build /usr/bin/python3 -m pytest -q tests/integration/test_ferryctl.py

tmux runs as a foreground server (`tmux -D`) started by the test's
ProcessKeeper, so it and everything in its panes die by PID at the end.
"""

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import FERRYCTL, http_request, kafka_metadata, register_log, wait_for

TMUX = shutil.which("tmux")
HEADER = ["NAME", "STATE", "SINCE", "GEN", "PID", "CONNS", "REASON"]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def table(out, footer=True):
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert lines and lines[0].split() == HEADER, out
    if not footer:  # the live views have their own
        return lines
    # the last line names the ferryd that answered (version, build, pid)
    assert re.fullmatch(r"ferryd \S+ \(build [0-9a-f]+\) pid \d+", lines[-1]), out
    return lines[:-1]


class Tmux:
    def __init__(self, keeper, workdir, request):
        if TMUX is None:
            pytest.fail("tmux not installed (scripts/install-deps installs Debian `tmux`)")
        self.sock = str(workdir / "tmux.sock")
        self.log_path = workdir / "tmux.log"
        self.log = open(self.log_path, "ab")
        self.keeper = keeper
        self.server = keeper.spawn("tmux", [TMUX, "-D", "-S", self.sock, "-f", "/dev/null"],
                                   stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        register_log(request, "tmux", self.log_path)
        wait_for(lambda: os.path.exists(self.sock), 10, what="tmux server socket")

    def tmux(self, *args, check=True):
        r = subprocess.run([TMUX, "-S", self.sock, *args], capture_output=True, text=True,
                           timeout=15, stdin=subprocess.DEVNULL)
        if check:
            assert r.returncode == 0, (args, r.stderr)
        return r

    def run(self, name, argv, rcfile, env=None):
        """A window running argv; its exit code lands in rcfile."""
        envs = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
        # the shell survives Ctrl-C (caught, so argv still gets the default)
        cmd = (f"trap : INT; env {envs} {shlex.join(str(a) for a in argv)}; "
               f"echo $? > {shlex.quote(str(rcfile))}; sleep 60")
        self.tmux("new-session", "-d", "-s", name, "-x", "160", "-y", "40", "sh", "-c", cmd)

    def capture(self, name, escapes=False):
        args = ["capture-pane", "-p", "-t", name] + (["-e"] if escapes else [])
        return self.tmux(*args).stdout

    def keys(self, name, *keys):
        self.tmux("send-keys", "-t", name, *keys)

    def close(self):
        self.keeper.terminate(self.server)


@pytest.fixture
def tmux(keeper, workdir, request):
    t = Tmux(keeper, workdir, request)
    yield t
    t.close()


def wait_rc(rcfile, timeout=10):
    wait_for(lambda: rcfile.exists() and rcfile.read_text().strip(), timeout, what=f"{rcfile}")
    return int(rcfile.read_text())


# --------------------------------------------------------------------------

def test_every_command_table_and_json(two_clusters):
    f = two_clusters.ferry
    st = f.status()

    # status: contract header first, one row per cluster, JSON unchanged
    out = f.ctl("status").stdout
    rows = {ln.split()[0]: ln.split() for ln in table(out)[1:]}
    assert set(rows) == {"A", "B"}
    for c in st["clusters"]:
        cols = rows[c["name"]]
        assert cols[1] == "accepting" and cols[3] == str(c["generation"])
        assert cols[4] == str(c["workers"][0]["pid"])
        assert re.fullmatch(r"\d+[smhd](\d+[smh])?", cols[2]), cols   # human SINCE
    assert ANSI.search(out) is None, "colour on a pipe"
    assert list(json.loads(f.ctl("--json", "status").stdout)) == ["clusters"]
    one = f.ctl("status", "A").stdout
    assert [ln.split()[0] for ln in table(one)[1:]] == ["A"]
    assert json.loads(f.ctl("--json", "status", "A").stdout)["name"] == "A"

    # health / ready / config / metrics
    assert re.match(r"^UP \(version \S+, build [0-9a-f]+, pid \d+, uptime \d+\w*, 2 clusters\)$",
                    f.ctl("health").stdout)
    assert json.loads(f.ctl("--json", "health").stdout)["status"] == "UP"
    assert f.ctl("ready").stdout.startswith("ready (startup_policy fail-fast)")
    assert json.loads(f.ctl("--json", "ready").stdout)["ready"] is True
    cfg = f.ctl("config").stdout
    assert re.search(r"^current version:\s+sha256:[0-9a-f]{64}$", cfg, re.M), cfg
    assert "currentConfigVersion" in json.loads(f.ctl("--json", "config").stdout)
    m = f.ctl("metrics").stdout
    assert "# TYPE ferry_requests_total counter" in m
    assert f.ctl("--json", "metrics").stdout == m   # not JSON: the exposition as is

    # validate / reload (the file itself: valid, unchanged)
    assert f.ctl("validate").stdout.startswith("valid: sha256:")
    assert json.loads(f.ctl("--json", "validate").stdout)["valid"] is True
    r = f.ctl("reload")
    assert r.stdout.startswith("reload UNCHANGED: sha256:"), r.stdout
    assert json.loads(f.ctl("--json", "reload").stdout)["status"] == "UNCHANGED"
    bad = f.workdir / "bad.ini"
    bad.write_text(f.config_text + "bogus_key = 1\n")
    r = f.ctl("validate", bad, check=False)
    assert r.returncode == 1 and r.stdout.startswith("invalid configuration:"), r.stdout
    assert re.search(r"bad\.ini:\d+: ", r.stdout), r.stdout
    r = f.ctl("--json", "reload", bad, check=False)
    assert r.returncode == 1 and json.loads(r.stdout)["status"] == "REJECTED"

    # restart / drain: one line, then JSON
    old = f.cluster("B")["generation"]
    r = f.ctl("restart", "B")
    assert re.match(r"^restart B: \w+, generation \d+$", r.stdout), r.stdout
    wait_for(lambda: f.cluster("B")["generation"] > old and f.cluster("B")["state"] == "accepting",
             30, what="B restarted")
    r = f.ctl("--json", "drain", "B")
    assert json.loads(r.stdout)["name"] == "B"
    r = f.ctl("drain", "nope", check=False)
    assert r.returncode == 1 and "nope" in r.stderr


def test_exit_codes(two_clusters, workdir):
    f = two_clusters.ferry
    missing = str(workdir / "no-such.sock")

    def run(*args, sock=f.sock):
        return subprocess.run([str(FERRYCTL), "-s", sock, *args], capture_output=True, text=True,
                              timeout=30, stdin=subprocess.DEVNULL)

    for args in (["status"], ["health"], ["ready"], ["config"], ["metrics"], ["reload"],
                 ["validate"], ["drain", "A"], ["restart", "A"], ["status", "-w", "-n", "1"],
                 ["top", "-n", "1"], ["--json", "status"]):
        r = run(*args)
        assert r.returncode == 0, (args, r.returncode, r.stderr)
        r = run(*args, sock=missing)
        assert r.returncode == 3, (args, r.returncode, r.stderr)
        assert "no-such.sock" in (r.stderr + r.stdout)
    for args in ([], ["frobnicate"], ["drain"], ["--bogus"], ["health", "-w"], ["status", "-n", "0"],
                 ["status", "-n", "x", "-w"], ["metrics", "-n", "2"], ["status", "A", "B"],
                 ["top", "A"], ["-s", "x", "-a", "127.0.0.1:1", "status"]):
        r = run(*args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
    for args in (["status", "nope"], ["restart", "nope"], ["status", "-w", "-n", "1", "nope"]):
        r = run(*args)
        assert r.returncode == 1, (args, r.returncode, r.stderr)


def test_several_workers_listed(mock_factory, reload_ferry_factory):
    a = mock_factory("A", 3, ["t:3"])
    b = mock_factory("B", 3, ["t:3"])
    f = reload_ferry_factory({"A": a, "B": b}, cluster_extra={"A": {"workers": "3"}})
    doc = f.cluster_doc("A")
    pids = sorted(w["pid"] for w in doc["workers"])
    assert len(pids) == 3
    out = f.ctl("status").stdout
    lines = table(out)
    # A's row, then one indented row per worker, then B (a single worker: no sub-rows)
    assert lines[1].split()[0] == "A", out
    subs = lines[2:5]
    assert all(ln.startswith("  #") for ln in subs), out
    assert sorted(int(ln.split()[4]) for ln in subs) == pids, out
    assert [ln.split()[0] for ln in subs] == ["#0", "#1", "#2"]
    assert all(ln.split()[1] == "accepting" for ln in subs)
    assert lines[5].split()[0] == "B" and len(lines) == 6, out
    # every data column lines up under its header
    hdr = lines[0]
    for ln in lines[1:]:
        for col in ("STATE", "SINCE", "GEN", "PID", "CONNS"):
            i = hdr.index(col)
            assert ln[i - 2:i] == "  " and ln[i] != " ", (col, ln)


def test_status_watch_in_tmux(two_clusters, tmux, workdir):
    f = two_clusters.ferry
    rc = workdir / "watch.rc"
    tmux.run("w", [FERRYCTL, "-s", f.sock, "status", "-w"], rc)
    wait_for(lambda: "q or Ctrl-C quits" in tmux.capture("w"), 10, what="the watch screen")
    screen = tmux.capture("w")
    lines = table(screen.split("\n\nevery")[0], footer=False)
    assert {ln.split()[0] for ln in lines[1:]} == {"A", "B"}, screen
    # it refreshes: the clock in the footer moves, and a state change shows up
    t0 = re.search(r"every 1s  (\S+)", screen).group(1)
    wait_for(lambda: re.search(r"every 1s  (\S+)", tmux.capture("w")).group(1) != t0, 5,
             what="a second frame")
    old = f.cluster("B")["generation"]
    f.ctl("restart", "B")
    wait_for(lambda: re.search(rf"^B\s+accepting\s+\S+\s+{old + 1}\s", tmux.capture("w"), re.M),
             30, what="the new generation on screen")
    # colour on the terminal: accepting in green
    assert "\x1b[32maccepting" in tmux.capture("w", escapes=True)
    assert not rc.exists()
    tmux.keys("w", "q")
    assert wait_rc(rc) == 0
    # Ctrl-C quits as well
    rc2 = workdir / "watch2.rc"
    tmux.run("w2", [FERRYCTL, "-s", f.sock, "status", "-w", "A"], rc2)
    wait_for(lambda: "q or Ctrl-C quits" in tmux.capture("w2"), 10, what="the watch screen")
    assert [ln.split()[0] for ln in table(tmux.capture("w2").split("\n\nevery")[0], footer=False)[1:]] == ["A"]
    tmux.keys("w2", "C-c")
    assert wait_rc(rc2) == 0


def test_no_color(two_clusters, tmux, workdir):
    f = two_clusters.ferry
    rc = workdir / "nc.rc"
    tmux.run("nc", [FERRYCTL, "-s", f.sock, "status", "-w"], rc, env={"NO_COLOR": "1"})
    wait_for(lambda: "q or Ctrl-C quits" in tmux.capture("nc"), 10, what="the watch screen")
    assert "\x1b[3" not in tmux.capture("nc", escapes=True)
    assert "accepting" in tmux.capture("nc")
    tmux.keys("nc", "q")
    assert wait_rc(rc) == 0


def test_top_in_tmux(two_clusters, tmux, workdir):
    f = two_clusters.ferry
    rc = workdir / "top.rc"
    tmux.run("top", [FERRYCTL, "-s", f.sock, "top"], rc)
    wait_for(lambda: "REQ/S" in tmux.capture("top"), 10, what="the top screen")
    hdr = ["NAME", "STATE", "GEN", "WORKERS", "CONNS", "REQ/S", "IN/S", "OUT/S", "P99",
           "REQUESTS"]

    def rows():
        lines = [ln for ln in tmux.capture("top").splitlines() if ln.strip()]
        i = [k for k, ln in enumerate(lines) if ln.split() == hdr]
        assert i, lines
        return {ln.split()[0]: ln.split() for ln in lines[i[0] + 1:]}

    assert set(rows()) == {"A", "B"}
    # traffic on A for a while: its request rate and byte rates go above 0
    deadline = time.monotonic() + 20
    seen = None
    while time.monotonic() < deadline:
        for _ in range(20):
            kafka_metadata("127.0.0.1", f.clusters["A"]["bootstrap"], timeout=10)
        r = rows()
        if r["A"][5] not in ("-", "0.0") and r["A"][7].endswith("B") and r["A"][7] != "0.0B":
            seen = r
            break
    assert seen, rows()
    assert int(seen["A"][9]) >= 20
    # the 99th percentile of A's upstream latency (a histogram bucket bound)
    assert re.fullmatch(r"[0-9.]+m?s", seen["A"][8]), seen["A"]
    assert seen["B"][5] in ("0.0", "-")
    tmux.keys("top", "q")
    assert wait_rc(rc) == 0


def test_top_and_watch_json(two_clusters):
    f = two_clusters.ferry
    r = f.ctl("--json", "top", "-n", "2", timeout=30)
    docs = [json.loads(ln) for ln in r.stdout.splitlines()]
    assert len(docs) == 2
    assert [c["name"] for c in docs[0]["clusters"]] == ["A", "B"]
    assert docs[0]["clusters"][0]["requestsPerSecond"] is None       # no earlier sample
    assert isinstance(docs[1]["clusters"][0]["requestsPerSecond"], (int, float))
    r = f.ctl("--json", "status", "-w", "-n", "2", timeout=30)
    docs = [json.loads(ln) for ln in r.stdout.splitlines()]
    assert len(docs) == 2 and all(list(d) == ["clusters"] for d in docs)
    # not a terminal: no clearing, no colour
    r = f.ctl("status", "-w", "-n", "2", timeout=30)
    assert "\x1b" not in r.stdout
    assert r.stdout.count("NAME  ") == 2


# ---- a server that is not ferryd: every command exits 3 ---------------------------

class Garbler:
    """A Unix socket server answering every request with one kind of
    garbage, in a thread: what ferryctl meets when something else listens on
    the socket, a proxy in front of admin_listen fails, or a reply is cut."""

    MODES = {
        # bytes that are not HTTP at all
        "junk": lambda: b"\x00\xff garbage \x1b[31m not a status line\r\n\r\n",
        # the request is read, the connection closed without a word
        "close": lambda: b"",
        # HTTP, but not ferryd's: a proxy's error page
        "html502": lambda: Garbler.http(502, b"<html><body>Bad Gateway</body></html>",
                                        "text/html"),
        # HTTP 200, a body that is not JSON
        "text200": lambda: Garbler.http(200, b"hello, this is not ferryd\n", "text/plain"),
        # HTTP 200, JSON without anything a command needs
        "empty200": lambda: Garbler.http(200, b"{}", "application/json"),
        # a body cut short of its Content-Length
        "truncated": lambda: (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                              b"Content-Length: 500\r\nConnection: close\r\n\r\n{\"clus"),
    }

    @staticmethod
    def http(status, body, ctype):
        return (f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                f"Connection: close\r\n\r\n").encode() + body

    def __init__(self, path):
        import threading
        self.path = str(path)
        self.mode = "junk"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.stop = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            with c:
                c.settimeout(2)
                data = b""
                try:
                    while b"\r\n\r\n" not in data:
                        chunk = c.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    m = re.search(rb"Content-Length: *(\d+)", data, re.I)
                    if m:   # the body of a POST too, then answer
                        need = data.index(b"\r\n\r\n") + 4 + int(m.group(1))
                        while len(data) < need:
                            chunk = c.recv(65536)
                            if not chunk:
                                break
                            data += chunk
                    c.sendall(self.MODES[self.mode]())
                except OSError:
                    pass

    def close(self):
        self.stop = True
        self.thread.join(5)
        self.sock.close()


def test_every_command_exits_3_against_a_server_that_is_not_ferryd(workdir):
    g = Garbler(workdir / "garble.sock")
    cfg = workdir / "x.ini"
    cfg.write_text("[ferry]\n[cluster x]\nupstream = 127.0.0.1:9092\nbootstrap = 127.0.0.1:9\n"
                   "broker_ports = 10\n")
    commands = [["status"], ["status", "A"], ["status", "team-*"], ["status", "--state", "failed"],
                ["health"], ["ready"], ["validate"], ["validate", str(cfg)], ["reload"],
                ["reload", str(cfg)], ["config"], ["drain", "A"], ["restart", "A"], ["metrics"],
                ["top", "-n", "1"], ["status", "-w", "-n", "1"], ["--json", "status"],
                ["--json", "health"], ["--json", "reload"], ["--json", "drain", "A"],
                ["--json", "status", "-w", "-n", "1"], ["--json", "top", "-n", "1"],
                ["upgrade"], ["upgrade", "--wait"], ["connections", "A"],
                ["connections", "A", "--limit", "5"], ["--json", "connections", "A"],
                ["--json", "upgrade"]]
    try:
        failures = []
        for mode in Garbler.MODES:
            g.mode = mode
            for args in commands:
                if mode == "empty200" and args[0] == "--json" and "top" not in args:
                    continue  # --json prints ferryd's object as is: {} is one
                r = subprocess.run([str(FERRYCTL), "-s", g.path, *args], capture_output=True,
                                   text=True, timeout=60, stdin=subprocess.DEVNULL)
                if r.returncode != 3 or not r.stderr.strip():
                    failures.append((mode, args, r.returncode, r.stderr.strip()[-200:]))
        assert not failures, "\n".join(map(str, failures))
    finally:
        g.close()


def test_status_filters_sorts_and_puts_trouble_first(mock_factory, reload_ferry_factory):
    mocks = {n: mock_factory(n, 1, ["t:1"]) for n in ("team-a", "team-b", "ops-c")}
    # one crash fails a cluster: a failed one is easy to make
    f = reload_ferry_factory(mocks, ferry_extra={"crash_loop_limit": "1",
                                                 "startup_policy": "best-effort"})
    # table rows only: not the "(2 of 3 clusters)" line nor the "NAME: ..."
    # lines below the table (a certificate's expiry, a last crash)
    names = lambda out: [ln.split()[0] for ln in table(out)[1:]
                         if not ln.startswith("(") and not ln.split()[0].endswith(":")]
    assert names(f.ctl("status").stdout) == ["team-a", "team-b", "ops-c"]
    out = f.ctl("status", "team-*").stdout
    assert names(out) == ["team-a", "team-b"] and "(2 of 3 clusters)" in out, out
    assert names(f.ctl("status", "--sort", "name").stdout) == ["ops-c", "team-a", "team-b"]
    assert names(f.ctl("status", "--state", "failed").stdout) == []
    doc = json.loads(f.ctl("--json", "status", "--state", "accepting", "*-c").stdout)
    assert [c["name"] for c in doc["clusters"]] == ["ops-c"] and doc["matched"] == 1
    assert doc["total"] == 3
    # a failed cluster comes first, whatever the order asked for
    pid = f.cluster("team-b")["workers"][0]["pid"]
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: f.cluster("team-b")["state"] == "failed", 20, what="team-b failed")
    assert names(f.ctl("status").stdout) == ["team-b", "team-a", "ops-c"]
    assert names(f.ctl("status", "--sort", "name").stdout) == ["team-b", "ops-c", "team-a"]
    assert names(f.ctl("status", "--state", "failed").stdout) == ["team-b"]
    assert [c["name"] for c in f.status()["clusters"]][0] == "team-b"
    # bad values: usage for ferryctl, 400 with a JSON error from the API
    r = f.ctl("status", "--sort", "size", check=False)
    assert r.returncode == 2 and "--sort" in r.stderr
    r = f.ctl("status", "--state", "dead", check=False)
    assert r.returncode == 2
    r = f.ctl("drain", "--sort", "name", "team-a", check=False)
    assert r.returncode == 2
    for q in ("sort=size", "state=dead", "limit=0", "color=red", "name=%zz"):
        code, _, body = http_request("GET", "/admin/clusters?" + q, unix_socket=f.sock)
        assert code == 400 and "error" in json.loads(body), (q, code, body)
