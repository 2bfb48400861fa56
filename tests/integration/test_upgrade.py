"""
Upgrading ferryd itself without disconnecting anyone (docs/design.md §11).

The same source tree is built twice: A is $FERRY_BUILD, B a build with
-Dversion_suffix=+b -Dfault_injection=true (and A's sanitizers) in
$FERRY_BUILD-upgrade-b, made once and kept (ninja only rebuilds what
changed; scripts/test builds it before the suite). ferryd runs from
<workdir>/bin/ferryd, which the tests replace as a package manager does
(write beside, rename over); `ferryctl upgrade` then runs whatever is at
that path. A failing new binary is B with FERRY_FAULT=<point> (B's fault
points, common/fault.h) or a shell script at the path (exits at once,
hangs).

    FERRY_BUILD=$PWD/build /usr/bin/python3 -m pytest -q tests/integration/test_upgrade.py

Every process is recorded by pid and killed at the end: the supervisors
found by their command line (it names the test's directory) and every
descendant of them; the harness is the subreaper of whatever they leave.
"""

import collections
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import (BUILD, FERRYD, ReloadFerry, apiversions_v0, descendants_of, kill_pids,
                      pid_alive, proc_starttime, recv_kframe, register_log, serving_pids,
                      wait_for)
from test_failure import port_bindable
from test_reload import ConnectLoop, SeqProducer, leader_port

TOPIC = "up"
VERSION_A = None          # read from the binaries
BUILD_B = BUILD.parent / f"{BUILD.name}-upgrade-b"
FERRYD_B = BUILD_B / "supervisor" / "ferryd"
SUFFIX_B = "+b"

pytestmark = pytest.mark.timeout(420)


# --------------------------------------------------------------------------
# the second build
# --------------------------------------------------------------------------

def _meson_options(build):
    """The options of an existing meson build dir that change generated code."""
    data = json.loads((build / "meson-info" / "intro-buildoptions.json").read_text())
    opts = {o["name"]: o["value"] for o in data}
    out = [f"--buildtype={opts.get('buildtype', 'debugoptimized')}"]
    san = opts.get("b_sanitize", "none")
    if san and san != "none":
        out.append(f"-Db_sanitize={','.join(san) if isinstance(san, list) else san}")
    out.append(f"-Db_lundef={'true' if opts.get('b_lundef', True) else 'false'}")
    return out


def build_b():
    """Build B once (meson setup if needed, ninja of ferryd); a lock keeps
    two runs from building it at the same time."""
    BUILD_B.parent.mkdir(parents=True, exist_ok=True)
    lock = open(BUILD / ".upgrade-b.lock", "w")   # inside the build dir: never in the tree
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (BUILD_B / "build.ninja").exists():
            shutil.rmtree(BUILD_B, ignore_errors=True)
            r = subprocess.run(["meson", "setup", str(BUILD_B), f"-Dversion_suffix={SUFFIX_B}",
                                "-Dfault_injection=true", "-Dtests=false", "--werror",
                                *_meson_options(BUILD)], cwd=str(BUILD.parent), capture_output=True,
                               text=True, timeout=300, stdin=subprocess.DEVNULL)
            assert r.returncode == 0, f"meson setup of B failed:\n{r.stdout}\n{r.stderr}"
        r = subprocess.run(["ninja", "-C", str(BUILD_B), "supervisor/ferryd",
                            "supervisor/ferry-admin"], capture_output=True,
                           text=True, timeout=900, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, f"building B failed:\n{r.stdout[-4000:]}\n{r.stderr[-2000:]}"
    finally:
        lock.close()
    return FERRYD_B


def version_of(binary):
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                         timeout=30).stdout
    m = re.match(r"ferryd (\S+) \(build ([0-9a-f]+|unknown)\)", out)
    assert m, out
    return m.group(1), m.group(2)


@pytest.fixture(scope="module")
def builds():
    b = build_b()
    va, ida = version_of(FERRYD)
    vb, idb = version_of(b)
    assert vb == va + SUFFIX_B, (va, vb)
    assert ida != idb
    return {"A": (FERRYD, va, ida), "B": (b, vb, idb)}


# --------------------------------------------------------------------------
# a ferryd started from a file the test replaces
# --------------------------------------------------------------------------

class UpFerry(ReloadFerry):
    def __init__(self, keeper, workdir, upstreams, **kw):
        super().__init__(keeper, workdir, upstreams, **kw)
        self.bin_dir = Path(workdir) / "bin"
        self.bin_dir.mkdir(exist_ok=True)
        os.chmod(self.bin_dir, 0o755)
        self.bin = self.bin_dir / "ferryd"
        self.install(FERRYD)
        self.known = set()      # every supervisor pid seen

    def _replace(self, write, name="ferryd"):
        tmp = self.bin_dir / f".{name}.new"
        write(tmp)
        os.chmod(tmp, 0o755)
        os.replace(tmp, self.bin_dir / name)

    def install(self, src):
        """Replace the file at the path ferryd was started from (as dpkg
        does), and the admin process's executable beside it (a ferryd finds
        ferry-admin next to its own file; a running one keeps the file it
        opened at its start)."""
        self._replace(lambda t: shutil.copyfile(Path(src).parent / "ferry-admin", t),
                      "ferry-admin")
        self._replace(lambda t: shutil.copyfile(src, t))

    def install_script(self, body):
        self._replace(lambda t: t.write_text("#!/bin/sh\n" + body + "\n"))

    def install_fault(self, binary, fault):
        self.install_script(f"FERRY_FAULT='{fault}' exec '{binary}' \"$@\"")

    def start(self, wait=True, env=None):
        self.log = open(self.log_path, "ab")
        self.proc = self.keeper.spawn("ferryd", [self.bin, "-c", self.config_path],
                                      stdout=self.log, stderr=self.log,
                                      cwd=str(self.workdir), env=env)
        self.known.add(self.proc.pid)
        if wait:
            self.wait_ready()
        return self

    def health(self):
        code, _, body = self.http("/admin/health")
        assert code == 200, (code, body)
        h = json.loads(body)
        self.known.add(h["pid"])
        return h

    def upgrade(self, *args, timeout=120):
        return self.ctl("upgrade", *args, check=False, timeout=timeout)

    def supervisors(self):
        """pids of the live ferryd supervisors of this test: the one it
        started, and every successor (`--successor --ppid P`) of one of
        them, however its file was made (a wrapper script execs B)."""
        procs = {}
        for e in os.listdir("/proc"):
            if e.isdigit():
                try:
                    procs[int(e)] = Path(f"/proc/{e}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    pass
        if self.proc is not None:
            self.known.add(self.proc.pid)
        # every ferryd of this test runs in its directory (the successors
        # inherit it): a chain of upgrades whose middle links are gone
        # is still found
        for pid, cmd in procs.items():
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            if cwd == str(self.workdir) and cmd and (cmd[0] == str(self.bin).encode() or
                                                     b"--successor" in cmd):
                self.known.add(pid)
        grew = True
        while grew:
            grew = False
            for pid, cmd in procs.items():
                if pid in self.known or b"--successor" not in cmd or b"--ppid" not in cmd:
                    continue
                i = cmd.index(b"--ppid")
                if i + 1 < len(cmd) and cmd[i + 1].isdigit() and int(cmd[i + 1]) in self.known:
                    self.known.add(pid)
                    grew = True
        return sorted(p for p in self.known if pid_alive(p))

    def successor(self, predecessor):
        """The successor a predecessor started (its child running --successor)."""
        for p in descendants_of(predecessor):
            try:
                cmd = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"--successor" in cmd and pid_alive(p):
                return p
        return None


def workers_of(sup_pid):
    """Live worker processes started by supervisor sup_pid (their command
    line says --ppid SUP), wherever they were reparented to."""
    out = []
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{e}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--worker" in cmd and b"--ppid" in cmd:
            i = cmd.index(b"--ppid")
            if i + 1 < len(cmd) and cmd[i + 1] == str(sup_pid).encode() and pid_alive(int(e)):
                out.append(int(e))
    return out


@pytest.fixture
def up_factory(keeper, workdir, request):
    made = []

    def make(upstreams, start=True, env=None, **kw):
        f = UpFerry(keeper, workdir, upstreams, **kw)
        register_log(request, "ferryd", f.log_path)
        made.append(f)
        if start:
            f.start(env=env)
        return f
    yield make
    # every supervisor of the test and all it started, whatever happened
    for f in made:
        sups = f.supervisors()
        victims = []
        for s in sups:
            victims += [(d, proc_starttime(d)) for d in descendants_of(s)]
            victims.append((s, proc_starttime(s)))
            victims += [(w, proc_starttime(w)) for w in workers_of(s)]
        for pid, _ in victims:
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
        kill_pids(victims, grace=5.0)


def proc_fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def proc_rss_kb(pid):
    try:
        for ln in Path(f"/proc/{pid}/status").read_text().splitlines():
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1])
    except OSError:
        pass
    return None


def counters(f):
    """Every counter of /metrics (a *_total sample or a histogram's buckets,
    sums and counts), by its full sample name with labels."""
    code, _, body = f.http("/metrics")
    assert code == 200
    out = {}
    types = {}
    for ln in body.decode().splitlines():
        if ln.startswith("# TYPE "):
            _, _, name, typ = ln.split()
            types[name] = typ
        elif ln and not ln.startswith("#"):
            name, _, value = ln.rpartition(" ")
            fam = re.match(r"^[a-z_]+", name).group(0)
            base = re.sub(r"_(bucket|sum|count)$", "", fam)
            if types.get(fam) == "counter" or types.get(base) == "histogram":
                out[name] = float(value)
    return out


def assert_monotonic(before, after, what):
    went_back = {k: (v, after[k]) for k, v in before.items() if k in after and after[k] < v}
    lost = sorted(k for k in before if k not in after and "ferry_build_info" not in k)
    assert not went_back, f"{what}: counters went backwards: {went_back}"
    assert not lost, f"{what}: counters disappeared: {lost}"


# --------------------------------------------------------------------------
# 1. A -> B under clients that must notice nothing
# --------------------------------------------------------------------------

class Group:
    """A consumer group of two members with long polls, counting what each
    consumed, its assignments and revocations, and its broker connections
    (librdkafka statistics)."""

    def __init__(self, bootstrap, topic, stats):
        from confluent_kafka import Consumer
        self.consumed = []
        self.assigns = collections.Counter()
        self.revokes = collections.Counter()
        self.stop_ev = threading.Event()
        self.consumers = []
        for i in range(2):
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": "up-group",
                          "auto.offset.reset": "earliest", "fetch.wait.max.ms": 5000,
                          "session.timeout.ms": 30000, "statistics.interval.ms": 200,
                          "stats_cb": stats.cb(f"c{i}")})
            c.subscribe([topic], on_assign=self._on(self.assigns, i),
                        on_revoke=self._on(self.revokes, i))
            self.consumers.append(c)
        self.threads = [threading.Thread(target=self._run, args=(c,), daemon=True)
                        for c in self.consumers]
        for t in self.threads:
            t.start()

    @staticmethod
    def _on(counter, i):
        def cb(consumer, partitions):
            counter[i] += 1
        return cb

    def _run(self, c):
        while not self.stop_ev.is_set():
            m = c.poll(0.2)
            if m is not None and not m.error():
                self.consumed.append(m.key().decode())

    def close(self):
        self.stop_ev.set()
        for t in self.threads:
            t.join(10)
        for c in self.consumers:
            c.close()


class Stats:
    """librdkafka statistics of several clients: per real broker
    connection, (connects, disconnects)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.by_client = {}

    def cb(self, name):
        def f(js):
            d = json.loads(js)
            with self.lock:
                self.by_client[name] = {
                    b: (v.get("connects", 0), v.get("disconnects", 0))
                    for b, v in d.get("brokers", {}).items()
                    if v.get("nodeid", -1) >= 0 and v.get("source") != "logical"}
        return f

    def snapshot(self):
        with self.lock:
            return {k: dict(v) for k, v in self.by_client.items()}


def reconnects(stats):
    """Broker connections made more than once or lost, per client."""
    bad = {}
    for client, brokers in stats.items():
        for b, (conn, disc) in brokers.items():
            if disc or conn > 1:
                bad[f"{client} {b}"] = (conn, disc)
    return bad


@pytest.fixture(params=[1, 2], ids=["w1", "w2"])
def uenv(request, mock_factory, up_factory, builds):
    m = mock_factory("M", 3, [f"{TOPIC}:3"])
    keys = {} if request.param == 1 else {"workers": str(request.param)}
    f = up_factory({"A": m}, drain_timeout="10s", cluster_keys=keys)
    return f, m, builds


def test_upgrade_a_to_b_nobody_notices(uenv):
    f, m, builds = uenv
    b_bin, vb, idb = builds["B"]
    _, va, ida = builds["A"]
    h0 = f.health()
    assert (h0["version"], h0["buildId"], h0["execPath"]) == (va, ida, str(f.bin))
    c = f.clusters["A"]
    stats = Stats()
    loop = ConnectLoop([c["bootstrap"]] + c["brokers"])
    producer = SeqProducer(f.bootstrap("A"), TOPIC, {"statistics.interval.ms": 200,
                                                     "stats_cb": stats.cb("p")})
    group = Group(f.bootstrap("A"), TOPIC, stats)
    loop.start()
    producer.start()
    try:
        wait_for(lambda: len(group.consumed) >= 200 and sum(group.assigns.values()) == 2, 60,
                 what="both consumers receiving")
        time.sleep(1.5)
        before_stats = stats.snapshot()
        before = counters(f)
        gen0 = f.cluster("A")["generation"]
        f.install(b_bin)
        r = f.upgrade("--wait")
        assert r.returncode == 0, r.stdout + r.stderr
        print("\n" + r.stdout)
        assert f"-> {vb} (build {idb[:12]})" in r.stdout, r.stdout
        assert re.search(r"A: generation \d+ -> \d+", r.stdout), r.stdout
        assert "handed over" in r.stdout, r.stdout
        h = f.health()
        assert (h["version"], h["buildId"]) == (vb, idb)
        assert h["pid"] != h0["pid"]
        # it said BYE; it is gone once its last admin answer is out
        wait_for(lambda: not pid_alive(h0["pid"]), 10, what="the old ferryd gone")
        assert h["startedAt"] == h0["startedAt"], "the service's start is carried"
        assert f.cluster("A")["generation"] > gen0
        time.sleep(2.0)
    finally:
        producer.stop()
        loop.stop()
        assert producer.left == 0, producer.left
        wait_for(lambda: set(group.consumed) >= set(producer.produced), 60,
                 what="everything consumed")
        time.sleep(0.6)
        end_stats = stats.snapshot()
        revoked = dict(group.revokes)   # (closing the group revokes, of course)
        group.close()
    after = counters(f)
    assert_monotonic(before, after, "across the upgrade")
    assert after.get('ferry_upgrades_total{result="SUCCESS"}') == 1, after
    code, _, body = f.http("/metrics")
    assert f'ferry_build_info{{version="{vb}",build_id="{idb}"}} 1' in body.decode()
    st = f.config_status()
    last = st["lastUpgradeAttempt"]
    assert last["status"] == "SUCCESS" and last["fromVersion"] == va and last["toVersion"] == vb
    assert last["completedAt"] and last["connections"]["forced"] == 0, last
    # the clients: not one refused connection, not one reconnect, every
    # message exactly once, the group never rebalanced
    print(f"connect loop: {loop.connects} connects, {loop.ok} exchanges; producer "
          f"{len(producer.produced)} sent; consumed {len(group.consumed)}; connections "
          f"{end_stats}")
    assert not loop.connect_failures, loop.connect_failures[:5]
    assert not loop.exchange_failures, loop.exchange_failures[:5]
    assert loop.ok > 50
    assert not producer.errors and producer.exc is None, (producer.errors[:5], producer.exc)
    assert sorted(producer.delivered) == producer.produced
    dup = [k for k, n in collections.Counter(group.consumed).items() if n > 1]
    assert not dup, f"consumed more than once: {dup[:10]}"
    assert set(group.consumed) == set(producer.produced)
    assert dict(group.assigns) == {0: 1, 1: 1} and not revoked, (group.assigns, revoked)
    assert not reconnects(end_stats), f"clients reconnected: {reconnects(end_stats)}"
    assert before_stats.keys() <= end_stats.keys()


# --------------------------------------------------------------------------
# 2. a new binary that fails before the commit: rolled back, nobody notices
# --------------------------------------------------------------------------

# name: (how the file at the path is made, status, phase, error pattern)
ROLLBACKS = {
    "exits-at-once": (("script", "exit 3"), "FAILED", "spawning",
                      r"new ferryd \(pid \d+\) exited with status 3"),
    "crashes-after-its-workers-are-ready": (("fault", "crash-after-prepared"), "FAILED",
                                            "(preparing|committing)",
                                            r"killed by signal 11"),
    "hangs": (("script", "exec sleep 600"), "FAILED", "spawning",
              r"did not answer within 3000ms"),
    "refuses-the-record-version": (("fault", "record-versions=5-6"), "REJECTED", "spawning",
                                   r"state record versions 1\.\.1 offered, this ferryd reads "
                                   r"5\.\.6"),
    "its-workers-fail": (("fault", "worker-fail-at-start"), "FAILED", "preparing",
                         r"cluster A: .*fault injection: worker-fail-at-start"),
}

INIT_TIMEOUT_S = 3


@pytest.mark.parametrize("case", list(ROLLBACKS))
def test_failed_upgrade_rolls_back(case, mock_factory, up_factory, builds):
    (kind, arg), status, phase, pattern = ROLLBACKS[case]
    b_bin, vb, idb = builds["B"]
    _, va, _ = builds["A"]
    m = mock_factory("M", 3, [f"{TOPIC}:3"])
    f = up_factory({"A": m}, init_timeout=f"{INIT_TIMEOUT_S}s")
    pid0 = f.health()["pid"]
    workers0 = serving_pids(f.cluster("A"))
    held = socket.create_connection(("127.0.0.1", f.clusters["A"]["bootstrap"]), timeout=5)
    held.sendall(apiversions_v0(1))
    recv_kframe(held)
    c = f.clusters["A"]
    loop = ConnectLoop([c["bootstrap"]] + c["brokers"])
    loop.start()
    before = counters(f)
    if kind == "script":
        f.install_script(arg)
    else:
        f.install_fault(b_bin, arg)
    t0 = time.monotonic()
    r = f.upgrade()
    took = time.monotonic() - t0
    loop.stop()
    print(f"\n{case}: {took:.2f}s\n{r.stdout}{r.stderr}")
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(rf"upgrade {status} during {phase}, rolled back; ferryd {re.escape(va)} "
                     rf"pid {pid0} still serving", r.stdout), r.stdout
    assert re.search(pattern, r.stdout), r.stdout
    # within its deadline: each phase has init_timeout
    assert took < 3 * INIT_TIMEOUT_S + 2 + 5 + 5, took
    st = f.config_status()
    last = st["lastUpgradeAttempt"]
    assert not st["upgradeInProgress"]
    assert last["status"] == status and re.fullmatch(phase, last["phase"]), last
    assert any(re.search(pattern, e) for e in last["errors"]), last
    assert f'ferry_upgrades_total{{result="{status}"}}' in counters(f)
    assert counters(f)[f'ferry_upgrades_total{{result="{status}"}}'] == 1
    assert_monotonic(before, counters(f), "across a rolled-back upgrade")
    assert re.search(r"upgrade rolled back: the running ferryd serves on", f.log_text())
    # no disruption: the same ferryd and workers, the same connection, no
    # refused or failed exchange meanwhile
    h = f.health()
    assert h["pid"] == pid0 and h["version"] == va
    assert serving_pids(f.cluster("A")) == workers0
    held.sendall(apiversions_v0(2))
    recv_kframe(held)
    held.close()
    assert not loop.connect_failures, loop.connect_failures[:5]
    assert not loop.exchange_failures, loop.exchange_failures[:5]
    # nothing of the new one is left
    succ = last["successorPid"]
    if succ:
        wait_for(lambda: not pid_alive(succ) and not workers_of(succ), INIT_TIMEOUT_S + 3,
                 what=f"successor {succ} and its workers gone")
    assert f.supervisors() == [pid0]
    # and the next upgrade works
    f.install(b_bin)
    r = f.upgrade()
    assert r.returncode == 0, r.stdout + r.stderr
    assert f.health()["version"] == vb


# --------------------------------------------------------------------------
# 3. twenty upgrades in a row under load: nothing grows, nothing is lost
# --------------------------------------------------------------------------

def test_twenty_upgrades_in_a_row_under_load(mock_factory, up_factory, builds):
    a_bin, va, _ = builds["A"]
    b_bin, vb, _ = builds["B"]
    m = mock_factory("M", 3, [f"{TOPIC}:3"])
    f = up_factory({"A": m}, drain_timeout="10s")
    # two crashes first: the crash counters must survive every upgrade
    for _ in range(2):
        pid = serving_pids(f.cluster("A"))[0]
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: serving_pids(f.cluster("A")) and
                 serving_pids(f.cluster("A"))[0] != pid, 20, what="the restarted worker")
    base = f.metrics()
    assert base[("ferry_worker_restarts_total", "A")] == 2, base
    known = f.cluster("A")["knownBrokers"]
    assert len(known) == 3, known
    c = f.clusters["A"]
    loop = ConnectLoop([c["bootstrap"]] + c["brokers"])
    producer = SeqProducer(f.bootstrap("A"), TOPIC)
    idle = [socket.create_connection(("127.0.0.1", p), timeout=5)
            for p in [c["bootstrap"]] * 10 + c["brokers"] * 3]
    for i, s in enumerate(idle):
        s.sendall(apiversions_v0(i + 1))
        recv_kframe(s)
    loop.start()
    producer.start()
    samples = []
    prev = counters(f)
    try:
        for i in range(20):
            binary, version = (b_bin, vb) if i % 2 == 0 else (a_bin, va)
            f.install(binary)
            r = f.upgrade("--wait")
            assert r.returncode == 0, f"upgrade {i + 1}: {r.stdout}{r.stderr}"
            h = f.health()
            assert h["version"] == version
            workers = serving_pids(f.cluster("A"))
            samples.append({"sup": h["pid"], "sup_fds": proc_fds(h["pid"]),
                            "sup_rss": proc_rss_kb(h["pid"]),
                            "w_fds": sum(proc_fds(w) or 0 for w in workers),
                            "w_rss": sum(proc_rss_kb(w) or 0 for w in workers)})
            now = counters(f)
            assert_monotonic(prev, now, f"upgrade {i + 1}")
            prev = now
            for k, s in enumerate(idle):       # the same connections answer
                s.sendall(apiversions_v0(1000 * (i + 1) + k))
                recv_kframe(s)
    finally:
        producer.stop()
        loop.stop()
    for s in idle:
        s.close()
    for i, smp in enumerate(samples):
        print(f"upgrade {i + 1:2d}: {smp}")
    assert not loop.connect_failures, loop.connect_failures[:5]
    assert not loop.exchange_failures, loop.exchange_failures[:5]
    assert not producer.errors and producer.exc is None and producer.left == 0
    assert sorted(producer.delivered) == producer.produced
    # flat: the same binary after 4 and after 20 upgrades (A runs after odd ones)
    s4, s20 = samples[3], samples[19]
    assert s20["sup_fds"] <= s4["sup_fds"] + 2, (s4, s20)
    assert s20["w_fds"] <= s4["w_fds"] + 4, (s4, s20)
    assert s20["sup_rss"] <= s4["sup_rss"] * 1.15 + 2048, (s4, s20)
    assert s20["w_rss"] <= s4["w_rss"] * 1.15 + 2048, (s4, s20)
    end = f.metrics()
    assert end[("ferry_worker_restarts_total", "A")] == 2
    assert end[("ferry_crash_loops_total", "A")] == base[("ferry_crash_loops_total", "A")]
    # learned brokers carried: no generation had to fetch metadata again
    assert f.cluster("A")["knownBrokers"] == known
    assert end[("ferry_metadata_fetches_total", "A")] == base[("ferry_metadata_fetches_total", "A")]
    assert counters(f)['ferry_upgrades_total{result="SUCCESS"}'] == 20
    assert f.config_status()["lastUpgradeAttempt"]["fromVersion"] == vb


# --------------------------------------------------------------------------
# 4. kill -9 of either supervisor at each phase
# --------------------------------------------------------------------------

KILL_PHASES = ["hello", "receiving", "preparing", "prepared", "committed", "tail"]
PRECOMMIT = {"hello", "receiving", "preparing", "prepared"}
ORPHAN_S = 1.5 + 3.0    # a worker drains 1.5 s without its supervisor (+ slack)


def proc_state(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return None


def serves(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
            s.sendall(apiversions_v0(7))
            recv_kframe(s, 5)
        return True
    except OSError:
        return False


@pytest.mark.parametrize("phase", KILL_PHASES)
@pytest.mark.parametrize("victim", ["successor", "predecessor"])
def test_kill9_at_each_phase(victim, phase, mock_factory, up_factory, builds):
    b_bin, vb, _ = builds["B"]
    m = mock_factory("M", 3, [f"{TOPIC}:3"])
    f = up_factory({"A": m}, init_timeout="5s", drain_timeout="5s")
    port = f.clusters["A"]["bootstrap"]
    pred = f.health()["pid"]
    pred_workers = workers_of(pred)
    idle = socket.create_connection(("127.0.0.1", port), timeout=5)
    idle.sendall(apiversions_v0(1))
    recv_kframe(idle)
    f.install_fault(b_bin, f"stop-at={phase}")
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", f.upgrade(timeout=60)), daemon=True)
    t.start()
    succ = wait_for(lambda: (lambda s: s if s and proc_state(s) == "T" else None)(
        f.successor(pred)), 30, what=f"the successor stopped at {phase}")
    succ_workers = workers_of(succ)
    print(f"\n{victim} killed at {phase}: predecessor {pred} {pred_workers}, successor {succ} "
          f"{succ_workers}")
    os.kill(pred if victim == "predecessor" else succ, signal.SIGKILL)
    survivor = None
    if victim == "successor" and phase in PRECOMMIT:
        survivor = pred                     # rolled back
    elif victim == "predecessor" and phase not in PRECOMMIT:
        survivor = succ                     # committed: serves on
        os.kill(succ, signal.SIGCONT)
    t.join(60)
    gone = []
    if victim == "predecessor":
        gone += [pred] + pred_workers
        if phase in PRECOMMIT:
            gone += [succ] + succ_workers   # dies with it, its held workers too
    else:
        gone += [succ] + succ_workers
        if phase not in PRECOMMIT:
            gone += pred_workers            # handed over or closed, then exit
    t0 = time.monotonic()
    wait_for(lambda: not [p for p in gone if pid_alive(p)], ORPHAN_S + 10,
             what=f"processes {gone} gone")
    took = time.monotonic() - t0
    orphans = [p for p in (workers_of(pred) + workers_of(succ)) if p not in
               (workers_of(survivor) if survivor else [])]
    assert not orphans, f"orphan workers: {orphans}"
    if survivor:
        if survivor == succ:
            wait_for(lambda: f.supervisors() == [succ], 20, what="the predecessor gone")
        wait_for(lambda: f.health()["pid"] == survivor, 20, what="the survivor answering")
        assert wait_for(lambda: serves(port), 20, what="the survivor serving")
    else:
        # a restarted ferryd binds and serves (nothing left holds a socket)
        wait_for(lambda: not f.supervisors(), 20, what="every supervisor gone")
        f.install(FERRYD)
        f.start()
        assert serves(port)
    print(f"gone {took:.2f}s after the kill; survivor {survivor}")
    idle.close()


# --------------------------------------------------------------------------
# 5. TLS: sessions resume with the carried keys, no request cut in half
# --------------------------------------------------------------------------

def test_tls_sessions_resume_across_the_upgrade(mock_factory, up_factory, builds, workdir):
    from test_tls_rotation import PKI, ClosedEarly, api_versions, client_ctx, connect, resumes, \
        saved_session
    b_bin, vb, _ = builds["B"]
    pki = PKI(workdir / "pki")
    cert, key = pki.issue("srv", 0x4444, 30)
    m = mock_factory("T", 3)
    f = up_factory({"T": m}, start=False, drain_timeout="10s",
                   ferry_extra={"drain_spread": "2s"},
                   cluster_extra={"T": {"tls_cert": str(cert), "tls_key": str(key)}})
    f.start()
    port = f.clusters["T"]["bootstrap"]
    ctxs = {"1.2": client_ctx(pki, "1.2"), "1.3": client_ctx(pki, "1.3")}
    sessions = {v: saved_session(c, port) for v, c in ctxs.items()}

    class Looper(threading.Thread):
        """Request after request on one TLS connection; a close is fine
        only between two requests; then reconnect with the session."""

        def __init__(self, ctx):
            super().__init__(daemon=True)
            self.ctx = ctx
            self.stop_ev = threading.Event()
            self.requests = self.closes = self.resumed = self.full = 0
            self.cut = []

        def run(self):
            sess = None
            while not self.stop_ev.is_set():
                try:
                    s = connect(self.ctx, port, session=sess)
                except Exception as e:  # noqa: BLE001
                    self.cut.append(f"connect: {e!r}")
                    time.sleep(0.05)
                    continue
                if s.session_reused:
                    self.resumed += 1
                else:
                    self.full += 1
                with s:
                    while not self.stop_ev.is_set():
                        try:
                            api_versions(s)
                            self.requests += 1
                            sess = s.session
                        except (ClosedEarly, ssl.SSLZeroReturnError):
                            self.closes += 1     # between two requests
                            break
                        except Exception as e:  # noqa: BLE001 -- in a response: cut
                            self.cut.append(repr(e))
                            break
                        time.sleep(0.01)

    loops = [Looper(ctxs["1.2"]), Looper(ctxs["1.3"]), Looper(ctxs["1.3"])]
    for lp in loops:
        lp.start()
    time.sleep(1.0)
    before = f.metrics()
    f.install(b_bin)
    r = f.upgrade("--wait")
    assert r.returncode == 0, r.stdout + r.stderr
    time.sleep(1.0)
    for lp in loops:
        lp.stop_ev.set()
    for lp in loops:
        lp.join(20)
    after = f.metrics()
    print("\n" + r.stdout + "\n" + "; ".join(
        f"{lp.requests} requests, {lp.closes} closes, {lp.full} full, {lp.resumed} resumed"
        for lp in loops))
    for lp in loops:
        assert not lp.cut, lp.cut[:5]
        assert lp.closes >= 1, "the old ferryd's TLS connections close (they cannot move)"
        assert lp.full == 1 and lp.resumed >= 1, (lp.full, lp.resumed)
    # sessions from before the upgrade resume on the new ferryd
    assert f.health()["version"] == vb
    for v, c in ctxs.items():
        assert resumes(c, port, sessions[v]), f"TLS {v}: no resumption after the upgrade"
    after = f.metrics()
    assert after[("ferry_tls_resumed_total", "T")] > before[("ferry_tls_resumed_total", "T")]
    assert after[("ferry_tls_handshakes_total", "T")] >= before[("ferry_tls_handshakes_total", "T")]


# --------------------------------------------------------------------------
# 6. systemd, the API's edges, connection records another version
# --------------------------------------------------------------------------

def test_systemd_sees_one_service(mock_factory, up_factory, builds, workdir):
    from test_systemd import NotifySocket
    b_bin, vb, _ = builds["B"]
    n = NotifySocket(workdir / "notify.sock")
    try:
        m = mock_factory("M", 3, [f"{TOPIC}:1"])
        f = up_factory({"A": m}, start=False, init_timeout="3s")
        f.start(env=dict(os.environ, NOTIFY_SOCKET=n.path))
        pred = f.proc.pid
        n.wait(lambda kv: kv.get("READY") == "1", 10, "READY=1 at start")
        # a failed upgrade: RELOADING=1, then READY=1 with the error, both ours
        f.install_script("exit 3")
        assert f.upgrade().returncode == 1
        m1, _ = n.wait(lambda kv: kv.get("RELOADING") == "1", 10, "RELOADING=1")
        m2, _ = n.wait(lambda kv: kv.get("READY") == "1", 10, "READY=1 after the rollback")
        assert m1[0] == m2[0] == pred
        assert "rolled back" in m2[1].get("STATUS", ""), m2
        # a good one: RELOADING=1 and MAINPID= from the old, READY=1 from the new
        f.install(b_bin)
        r = f.upgrade("--wait")
        assert r.returncode == 0, r.stdout + r.stderr
        succ = f.health()["pid"]
        m1, _ = n.wait(lambda kv: kv.get("RELOADING") == "1", 10, "RELOADING=1")
        m2, _ = n.wait(lambda kv: "MAINPID" in kv, 10, "MAINPID=")
        m3, seen = n.wait(lambda kv: kv.get("READY") == "1", 10, "READY=1 from the new one")
        assert m1[0] == pred and m2[0] == pred and int(m2[1]["MAINPID"]) == succ
        assert m3[0] == succ, (m3, seen)
        assert "MONOTONIC_USEC" in m1[1]
        # nothing from a worker, nothing more from the old one after MAINPID=
        time.sleep(0.5)
        late = [g for g in n.got[n.got.index(m2) + 1:] if g[0] != succ]
        assert not late, late
        assert {g[0] for g in n.got} == {pred, succ}
    finally:
        n.close()


def test_api_edges(mock_factory, up_factory, builds):
    b_bin, _, _ = builds["B"]
    m = mock_factory("M", 3, [f"{TOPIC}:1"])
    f = up_factory({"A": m}, init_timeout="5s")
    # the API never names the executable
    code, _, body = f.http("/admin/upgrade", method="POST", body=b'{"path":"/tmp/x"}')
    assert code == 400 and "takes no body" in json.loads(body)["error"], body
    # a file that is not safe to run as root is refused before anything starts
    f.install(b_bin)
    os.chmod(f.bin, 0o777)
    r = f.upgrade()
    assert r.returncode == 1 and "writable by others" in r.stdout, r.stdout
    os.chmod(f.bin, 0o755)
    # while one runs (parked while preparing): another, a reload, a restart: 409
    pred = f.health()["pid"]
    f.install_fault(b_bin, "stop-at=preparing")
    t = threading.Thread(target=lambda: f.upgrade(timeout=60), daemon=True)
    t.start()
    succ = wait_for(lambda: (lambda s: s if s and proc_state(s) == "T" else None)(
        f.successor(pred)), 30, what="the successor parked")
    code, _, body = f.http("/admin/upgrade", method="POST")
    assert code == 409 and "an upgrade is in progress" in json.loads(body)["error"], body
    code, body = f.reload_http()
    assert code == 409 and "upgrade" in body["error"], body
    r = f.ctl("restart", "A", check=False)
    assert r.returncode == 1 and "upgrade" in r.stderr, r.stderr
    st = f.config_status()
    assert st["upgradeInProgress"] and st["upgrade"]["successorPid"] == succ, st
    assert st["upgrade"]["phase"] == "preparing", st   # it said VALID, then stopped
    # SIGUSR2 meanwhile is refused too (logged), and SIGHUP waits for the end
    os.kill(pred, signal.SIGUSR2)
    wait_for(lambda: "upgrade refused" in f.log_text(), 10, what="SIGUSR2 refused")
    os.kill(pred, signal.SIGHUP)
    wait_for(lambda: "SIGHUP during an upgrade" in f.log_text(), 10, what="SIGHUP held back")
    os.kill(succ, signal.SIGKILL)
    t.join(30)
    wait_for(lambda: not f.config_status()["upgradeInProgress"], 10, what="the rollback")
    wait_for(lambda: f.config_status().get("lastReloadAttempt"), 10,
             what="the SIGHUP held back during the upgrade, run after it")
    assert "upgrade refused" in f.log_text() and "source=SIGUSR2" in f.log_text()
    # SIGUSR2 upgrades like the API does
    f.install(b_bin)
    os.kill(pred, signal.SIGUSR2)
    wait_for(lambda: f.health()["pid"] != pred, 30, what="the upgrade by SIGUSR2")
    assert f.config_status()["lastUpgradeAttempt"]["source"] == "SIGUSR2"


def test_connections_of_a_record_version_the_new_workers_do_not_adopt(mock_factory, up_factory,
                                                                        builds):
    """A successor whose workers adopt only another connection record version:
    connections are never passed in a format the other side misreads; they
    close at request boundaries (what is owed is delivered first) and clients
    reconnect to the new workers."""
    b_bin, vb, _ = builds["B"]
    m = mock_factory("M", 3, [f"{TOPIC}:1"])
    f = up_factory({"A": m}, ferry_extra={"drain_spread": "1s"}, drain_timeout="10s")
    port = f.clusters["A"]["bootstrap"]
    socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(5)]
    for i, s in enumerate(socks):
        s.sendall(apiversions_v0(i + 1))
        recv_kframe(s)
    # a request in flight across the commit: its answer still comes
    for b in (1, 2, 3):
        m.command(f"rtt {b} 1000")
    busy = socket.create_connection(("127.0.0.1", port), timeout=5)
    busy.sendall(struct.pack(">i", 18) + struct.pack(">hhih", 3, 0, 77, 4) + b"meta" +
                 struct.pack(">i", 0))
    time.sleep(0.2)
    f.install_fault(b_bin, "conn-records=9-9")
    r = f.upgrade("--wait")
    assert r.returncode == 0, r.stdout + r.stderr
    body = recv_kframe(busy, 10)
    assert struct.unpack(">i", body[:4])[0] == 77
    for b in (1, 2, 3):
        m.command(f"rtt {b} 0")
    for s in socks + [busy]:
        s.settimeout(10)
        assert s.recv(1) == b"", "closed at a boundary, nothing half-sent"
        s.close()
    assert "do not adopt this version's connection records" in f.log_text()
    last = f.config_status()["lastUpgradeAttempt"]
    assert last["connections"]["handedOver"] == 0 and last["connections"]["closed"] == 6, last
    assert serves(port)


def test_clusters_that_do_not_serve_are_carried_as_they_are(mock_factory, up_factory, builds):
    """A parked cluster (drained by the operator, sockets released) and a
    failed one (a crash loop) come out of an upgrade as they went in: same
    state, generation and reason, counters kept, and `ferryctl restart`
    brings each back on the new ferryd."""
    b_bin, vb, _ = builds["B"]
    m = mock_factory("M", 3, [f"{TOPIC}:1"])
    f = up_factory({"A": m, "P": m, "F": m}, ferry_extra={"crash_loop_limit": "2",
                                                         "crash_loop_window": "60s"})
    f.ctl("drain", "P")
    wait_for(lambda: f.cluster("P")["workers"] == [] or
             all(w["pid"] is None for w in f.cluster("P")["workers"]), 10, what="P drained")
    for _ in range(2):
        pid = wait_for(lambda: serving_pids(f.cluster("F")), 20, what="F serving")[0]
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not pid_alive(pid), 10, what="the crash")
    wait_for(lambda: f.cluster("F")["state"] == "failed", 20, what="F failed (crash loop)")
    before = {n: f.cluster(n) for n in ("P", "F")}
    mb = f.metrics()
    f.install(b_bin)
    r = f.upgrade("--wait")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "P: not serving" in r.stdout and "F: not serving" in r.stdout, r.stdout
    assert f.health()["version"] == vb
    for n in ("P", "F"):
        c = f.cluster(n)
        for k in ("state", "generation", "reason"):
            assert c[k] == before[n][k], (n, k, c, before[n])
    ma = f.metrics()
    assert ma[("ferry_crash_loops_total", "F")] == mb[("ferry_crash_loops_total", "F")] == 1
    assert ma[("ferry_worker_restarts_total", "F")] == mb[("ferry_worker_restarts_total", "F")]
    assert all(port_bindable(f.clusters[n]["bootstrap"]) for n in ("P", "F"))
    for n in ("P", "F"):
        f.ctl("restart", n)
        c = wait_for(lambda: (lambda c: c if c["state"] == "accepting" else None)(f.cluster(n)),
                     20, what=f"{n} restarted")
        assert c["generation"] > before[n]["generation"]
        assert serves(f.clusters[n]["bootstrap"])


# --------------------------------------------------------------------------
# 7. a stop during an upgrade (systemctl stop, SIGTERM)
# --------------------------------------------------------------------------

def test_stop_during_an_upgrade(mock_factory, up_factory, builds):
    """SIGTERM to the running ferryd before the commit: it rolls back (the
    successor and its held workers go), then stops as always. SIGTERM to the
    new one while the old one still hands over (a long poll holds a
    connection there): the old one is asked to finish now, and both exit,
    leaving nothing behind."""
    from conftest import fetch_v4
    b_bin, vb, _ = builds["B"]
    m = mock_factory("M", 3, [f"{TOPIC}:1"])
    f = up_factory({"A": m}, init_timeout="5s", drain_timeout="20s")
    pred = f.health()["pid"]
    pred_workers = workers_of(pred)
    f.install_fault(b_bin, "stop-at=preparing")
    t = threading.Thread(target=lambda: f.upgrade(timeout=60), daemon=True)
    t.start()
    succ = wait_for(lambda: (lambda s: s if s and proc_state(s) == "T" else None)(
        f.successor(pred)), 30, what="the successor parked")
    os.kill(pred, signal.SIGTERM)
    assert f.proc.wait(30) == 0
    t.join(30)
    wait_for(lambda: not [p for p in [pred, succ] + pred_workers if pid_alive(p)], 10,
             what="everything gone")
    assert "upgrade rolled back" in f.log_text() and "ferryd is stopping" in f.log_text()

    # again, and this time the stop comes during the tail
    f.install(FERRYD)
    f.start()
    pred = f.health()["pid"]
    poll = socket.create_connection(("127.0.0.1", leader_port(f, "A", TOPIC, 0)[1]), timeout=10)
    poll.sendall(apiversions_v0(1))
    recv_kframe(poll)
    # a long poll on an empty partition: owed until max_wait, so its
    # connection cannot move before that
    poll.sendall(fetch_v4(2, TOPIC, 0, 0, 15000))
    time.sleep(0.3)
    f.install(b_bin)
    r = f.upgrade()
    assert r.returncode == 0, r.stdout + r.stderr
    succ = f.health()["pid"]
    assert pid_alive(pred), "the old ferryd holds the long poll"
    t0 = time.monotonic()
    os.kill(succ, signal.SIGTERM)
    wait_for(lambda: not pid_alive(succ) and not pid_alive(pred), 20,
             what="both ferryds gone")
    took = time.monotonic() - t0
    print(f"\nboth gone {took:.2f}s after SIGTERM of the new one")
    assert took < 15, took     # the old one was hurried (it had 20 s of drain_timeout)
    assert not workers_of(pred) and not workers_of(succ)
    poll.close()
    assert re.search(r"finishing the hand-over now", f.log_text())
