"""
Many clusters on one ferryd (issue: the per-cluster cost budget), at 300
clusters (the 1,000-cluster figures are scripts/bench --only scale's): each
cluster `workers = 1`, plaintext, a bootstrap and one broker port, all in
front of one mock upstream.

  - start: every cluster accepting; no "file descriptor limit" warning
    (max_connections = auto fits the machine); the supervisor holds at most
    16 descriptors per cluster (listeners included);
  - a reload that modifies every cluster completes: every cluster is
    modified, accepting, in its new generation; afterwards the supervisor
    keeps no descriptor of an ended generation (still at most 16 per
    cluster) and its memory is within the budget (64 MiB per 1,000 clusters,
    times 3 for ASan's allocator, against which this suite is built: its
    redzones and metadata roughly triple a small allocation);
  - one cluster's worker is killed (a crash restart), then 50 reloads
    modify that cluster: every other worker keeps its pid, its descriptors
    and its RSS; the supervisor neither leaks descriptors nor grows.

Timing budgets are the bench's business (docs/design.md §9): here the
deadlines are generous and only bound the test.

    FERRY_BUILD=$PWD/build /usr/bin/python3 -m pytest -q tests/integration/test_scale.py
"""

import json
import os
import re
import signal
import subprocess
import time

from conftest import (FERRYCTL, FERRYD, allocate_ports, children_of, is_admin_process,
                      wait_for)

N = 300
RELOADS = 50
KIB = 1024


def proc_rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def proc_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


class ScaleFerry:
    def __init__(self, keeper, workdir, upstream):
        self.keeper, self.workdir = keeper, workdir
        ports = allocate_ports(2 * N + 1)
        self.admin_port = ports[-1]
        self.ports = {f"s{i:03d}": ports[2 * i] for i in range(N)}
        self.sock = str(workdir / "ferry.sock")
        self.path = workdir / "ferry.ini"
        self.log_path = workdir / "ferryd.log"
        self.upstream = upstream
        self.idle = {name: "10m" for name in self.ports}
        self.write()

    def write(self):
        lines = ["[ferry]", f"control_socket = {self.sock}",
                 f"admin_listen = 127.0.0.1:{self.admin_port}", "user = nobody",
                 "drain_timeout = 5s", "init_timeout = 20s", "log_level = info"]
        for name, p in self.ports.items():
            lines += ["", f"[cluster {name}]", f"upstream = {self.upstream}",
                      f"bootstrap = 127.0.0.1:{p}", "advertised_host = 127.0.0.1",
                      f"broker_ports = {p + 1}", "node_ids = 1",
                      f"idle_timeout = {self.idle[name]}"]
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, self.path)

    def start(self):
        env = dict(os.environ)
        # a small quarantine: ASan keeps freed memory for a while (256 MiB by
        # default), which would read as growth here
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=1").lstrip(":")
        self.log = open(self.log_path, "ab")
        self.proc = self.keeper.spawn("ferryd", [FERRYD, "-c", self.path], stdout=self.log,
                                      stderr=self.log, cwd=str(self.workdir), env=env)

    def ctl(self, *args, timeout=120):
        return subprocess.run([str(FERRYCTL), "-s", self.sock, *args], capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def clusters(self):
        r = self.ctl("--json", "status", timeout=30)
        assert r.returncode == 0, r.stderr
        return {c["name"]: c for c in json.loads(r.stdout)["clusters"]}

    def settled(self, generation=None):
        """{name: pid} once every cluster accepts with one live worker (of
        `generation` when given); else None."""
        try:
            cl = self.clusters()
        except (AssertionError, subprocess.TimeoutExpired, ValueError):
            return None
        out = {}
        for name, c in cl.items():
            live = [w for w in c["workers"] if w["pid"]]
            if c["state"] != "accepting" or len(live) != 1:
                return None
            if generation is not None and c["generation"] != generation:
                return None
            out[name] = live[0]["pid"]
        return out if len(out) == N else None

    def log_text(self):
        return self.log_path.read_text(errors="replace")


def test_three_hundred_clusters(keeper, workdir, mock_factory):
    mock = mock_factory("up", 1, ["t:1"])
    f = ScaleFerry(keeper, workdir, mock.bootstrap)
    f.start()
    pids = wait_for(f.settled, 180, interval=0.5, what=f"{N} clusters accepting")
    sup = f.proc.pid
    log = f.log_text()
    assert "file descriptor limit below max_connections" not in log
    assert re.search(r'msg="max_connections = auto" clusters=300 max_connections=\d+', log), log[-2000:]
    assert 'error=""' not in log, "an empty error field was logged"
    assert proc_fds(sup) <= 16 * N, proc_fds(sup)

    # a reload that modifies every cluster
    for name in f.idle:
        f.idle[name] = "20m"
    f.write()
    r = f.ctl("--json", "reload", timeout=300)
    assert r.returncode == 0, (r.stdout[-500:], r.stderr)
    rec = json.loads(r.stdout)
    assert rec["status"] == "SUCCESS" and sorted(rec["clustersModified"]) == sorted(f.ports), rec
    after = wait_for(lambda: f.settled(generation=2), 120, interval=0.5,
                     what="every cluster in its new generation")
    assert set(after.values()).isdisjoint(pids.values())
    # the old generations are gone (their workers reaped): nothing of them kept
    # (ferryd's other child is its admin process)
    wait_for(lambda: len([p for p in children_of(sup) if not is_admin_process(p)]) == N, 60,
             what="old workers gone")
    fds_sup = proc_fds(sup)
    assert fds_sup <= 16 * N, fds_sup
    rss_sup = proc_rss_kb(sup)
    assert rss_sup <= 3 * 64 * KIB * N // 1000, f"supervisor RSS {rss_sup} KiB for {N} clusters"

    # one cluster's worker killed (a crash restart), then 50 reloads of it:
    # the others keep pid, descriptors and RSS
    victim = "s150"
    others = {n: p for n, p in after.items() if n != victim}
    before = {n: (proc_fds(p), proc_rss_kb(p)) for n, p in others.items()}
    os.kill(after[victim], signal.SIGKILL)
    wait_for(lambda: (f.settled() or {}).get(victim, after[victim]) != after[victim], 60,
             what="the killed worker replaced")
    rss_mid = None
    for i in range(RELOADS):
        f.idle[victim] = f"{30 + i}m"
        f.write()
        r = f.ctl("--json", "reload")
        assert r.returncode == 0, (i, r.stdout[-500:], r.stderr)
        rec = json.loads(r.stdout)
        assert rec["clustersModified"] == [victim], (i, rec)
        if i == 9:
            rss_mid = proc_rss_kb(sup)
    final = wait_for(f.settled, 60, interval=0.5, what="settled after the reloads")
    for n, p in others.items():
        assert final[n] == p, f"{n} was restarted ({p} -> {final[n]})"
    changed = []
    for n, p in others.items():
        fds, rss = proc_fds(p), proc_rss_kb(p)
        # an idle worker's memory does not move; a page either way is noise
        if fds != before[n][0] or abs(rss - before[n][1]) > 64:
            changed.append((n, before[n], (fds, rss)))
    assert not changed, changed[:10]
    wait_for(lambda: proc_fds(sup) == fds_sup, 30, what="the supervisor's descriptors back")
    grown = proc_rss_kb(sup) - rss_mid
    assert grown <= 4 * KIB, f"supervisor grew by {grown} KiB over {RELOADS - 10} reloads"
    print(f"\n{N} clusters: supervisor {fds_sup} descriptors, {rss_sup} KiB RSS after the "
          f"reload of all (ASan build), {grown:+d} KiB over {RELOADS - 10} reloads")
    assert 'error=""' not in f.log_text()
