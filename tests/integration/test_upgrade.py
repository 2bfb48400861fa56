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
from test_reload import ConnectLoop, SeqProducer

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
    lock = open(BUILD.parent / f".{BUILD.name}-upgrade-b.lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (BUILD_B / "build.ninja").exists():
            shutil.rmtree(BUILD_B, ignore_errors=True)
            r = subprocess.run(["meson", "setup", str(BUILD_B), f"-Dversion_suffix={SUFFIX_B}",
                                "-Dfault_injection=true", "-Dtests=false", "--werror",
                                *_meson_options(BUILD)], cwd=str(BUILD.parent), capture_output=True,
                               text=True, timeout=300, stdin=subprocess.DEVNULL)
            assert r.returncode == 0, f"meson setup of B failed:\n{r.stdout}\n{r.stderr}"
        r = subprocess.run(["ninja", "-C", str(BUILD_B), "supervisor/ferryd"], capture_output=True,
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

    def _replace(self, write):
        tmp = self.bin_dir / ".ferryd.new"
        write(tmp)
        os.chmod(tmp, 0o755)
        os.replace(tmp, self.bin)

    def install(self, src):
        """Replace the file at the path ferryd was started from (as dpkg does)."""
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
        if wait:
            self.wait_ready()
        return self

    def health(self):
        code, _, body = self.http("/admin/health")
        assert code == 200, (code, body)
        return json.loads(body)

    def upgrade(self, *args, timeout=120):
        return self.ctl("upgrade", *args, check=False, timeout=timeout)

    def supervisors(self):
        """pids of live ferryd supervisors of this test (predecessor and
        successor: their command lines name the test's bin/ferryd)."""
        out = []
        for e in os.listdir("/proc"):
            if not e.isdigit():
                continue
            try:
                cmd = Path(f"/proc/{e}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmd and cmd[0].decode(errors="replace") == str(self.bin) and pid_alive(int(e)):
                out.append(int(e))
        return sorted(out)

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


class StatsProducer(SeqProducer):
    """SeqProducer with statistics."""

    def __init__(self, bootstrap, topic, stats):
        super().__init__(bootstrap, topic)
        self.stats = stats

    def run(self):
        try:
            from confluent_kafka import Producer
            p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                          "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000,
                          "statistics.interval.ms": 200, "stats_cb": self.stats.cb("p"),
                          "error_cb": lambda e: self.client_errors.append(str(e))})

            def on_delivery(err, msg):
                (self.errors.append(str(err)) if err is not None
                 else self.delivered.append(msg.key().decode()))
            i = 0
            while not self.stop_ev.is_set():
                k = f"{i:08d}"
                p.produce(self.topic, key=k.encode(), value=f"seq {i}".encode(),
                          on_delivery=on_delivery)
                self.produced.append(k)
                i += 1
                p.poll(0.004)
            self.left = p.flush(90)
        except Exception as e:  # noqa: BLE001 -- surfaced by the test
            self.exc = repr(e)


def reconnects(stats):
    """Broker connections made more than once or lost, per client."""
    bad = {}
    for client, brokers in stats.items():
        for b, (conn, disc) in brokers.items():
            if disc or conn > 1:
                bad[f"{client} {b}"] = (conn, disc)
    return bad


@pytest.fixture
def uenv(mock_factory, up_factory, builds):
    m = mock_factory("M", 3, [f"{TOPIC}:3"])
    f = up_factory({"A": m}, drain_timeout="10s")
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
    producer = StatsProducer(f.bootstrap("A"), TOPIC, stats)
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
        assert h["pid"] != h0["pid"] and not pid_alive(h0["pid"])
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
