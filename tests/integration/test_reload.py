"""
Reconfiguration without downtime (docs/design.md §3, §4, §7, §8): live
reloads under load, reloads that fail in preparation and are rolled back,
rejected and concurrent reloads, SIGHUP, per-connection drain, per-cluster
drain and restart, and persistence of a posted config.

Every test starts its own librdkafka mock cluster "M" (3 brokers, topic
`reload` with 3 partitions and topic `reload-empty` with 1) and one ferryd
(ReloadFerry, see the reload helpers at the end of conftest.py) with
clusters A and B in front of it, drain_timeout = 5s. Reloads go through
`ferryctl reload` where the contract is about ferryctl (exit codes), and
through POST /admin/config/reload where it is about the HTTP status/body.

Some tests need a reload that stays in progress for a while. READY does not
wait for the upstream, and a worker is ready ~15 ms after it was forked, so
those tests start ferryd with ASAN_OPTIONS=sleep_after_init=N: every process
of that ferryd (each new worker generation included) sleeps N seconds right
after AddressSanitizer initialises, i.e. before it can read its config. That
makes "a worker that takes N seconds to become ready" deterministic; it
needs the ASan build scripts/test makes and those tests skip otherwise.

Every test runs twice: with one worker per cluster (id w1, the default) and
with `workers = 2` in every cluster (id w2): a generation is then two
processes, and each assertion about "the serving worker" is about all of
the generation's workers (serving_set). The slowest ones, whose steps do not
depend on how many workers a generation has beyond "all of them", run with
two only (TWO_WORKERS_ONLY): the w2 run asserts everything the w1 run would,
for each worker of the set.
"""

import collections
import hashlib
import json
import os
import re
import signal
import socket
import struct
import subprocess
import threading
import time

import pytest

from conftest import (FERRYD, RFC3339_UTC, allocate_ports, apiversions_v0, fetch_v4,
                      kafka_metadata, kreq, pid_alive, port_refuses, proc_starttime,
                      recv_kframe, serving_pids, tail_file, wait_closed, wait_for,
                      workers_keys)

# overrides conftest's workers_n fixture for one test: w2 alone
TWO_WORKERS_ONLY = pytest.mark.parametrize("workers_n", [2], ids=["w2"])

TOPIC = "reload"
EMPTY = "reload-empty"
DRAIN_TIMEOUT = 5.0


# --------------------------------------------------------------------------
# environment and helpers
# --------------------------------------------------------------------------

class Env:
    pass


@pytest.fixture
def reload_ferry_factory(reload_ferry_factory, workers_n):
    """conftest's factory, with `workers = N` in every cluster (clusters a
    test adds later too): N = 1 (w1) and 2 (w2)."""
    def make(upstreams, **kw):
        return reload_ferry_factory(upstreams, cluster_keys=workers_keys(workers_n), **kw)
    return make


@pytest.fixture
def renv(mock_factory, reload_ferry_factory):
    m = mock_factory("M", 3, [f"{TOPIC}:3", f"{EMPTY}:1"])
    f = reload_ferry_factory({"A": m, "B": m}, drain_timeout="5s")
    env = Env()
    env.f, env.m = f, m
    return env


def asan_build():
    """True when ferryd is linked with AddressSanitizer."""
    try:
        r = subprocess.run(["ldd", str(FERRYD)], capture_output=True, text=True, timeout=10)
        if "libasan" in r.stdout:
            return True
        data = FERRYD.read_bytes()
    except (OSError, subprocess.SubprocessError):
        return False
    return b"__asan_init" in data


def slow_worker_env(seconds):
    """Environment for a ferryd whose every process sleeps `seconds` after
    ASan initialised (see the module docstring)."""
    if not asan_build():
        pytest.skip("needs an AddressSanitizer build of ferryd (ASAN_OPTIONS=sleep_after_init "
                    "makes worker start-up deterministically slow); scripts/test builds one")
    env = dict(os.environ)
    opts = env.get("ASAN_OPTIONS", "")
    env["ASAN_OPTIONS"] = (opts + ":" if opts else "") + f"sleep_after_init={seconds}"
    return env


@pytest.fixture
def slow_env(mock_factory, reload_ferry_factory):
    """Like renv, but every worker generation takes 1 s to become ready."""
    env_vars = slow_worker_env(1)
    m = mock_factory("M", 3, [f"{TOPIC}:3", f"{EMPTY}:1"])
    f = reload_ferry_factory({"A": m, "B": m}, drain_timeout="5s", env=env_vars)
    env = Env()
    env.f, env.m = f, m
    return env


def sha256_version(text):
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def cluster_pids(f):
    """{name: (generation, [serving pids, sorted])}."""
    return {c["name"]: (c["generation"], sorted(serving_pids(c)))
            for c in f.status()["clusters"]}


def serving_set(f, name):
    """The pids of cluster `name`'s serving generation: as many accepting
    workers as it is configured with, all of its current generation, each
    its own process."""
    c = f.cluster(name)
    ws = [w for w in c["workers"] if w.get("state") == "accepting"]
    n = f.workers_of(name)
    assert len(ws) == n, f"{name}: {len(ws)} serving workers, want {n}: {c['workers']}"
    assert all(w["generation"] == c["generation"] for w in ws), \
        f"{name}: serving workers of another generation than {c['generation']}: {c['workers']}"
    pids = frozenset(w["pid"] for w in ws)
    assert len(pids) == n and all(pids), f"{name}: serving pids {c['workers']}"
    return pids


def kcat(args, input=None, timeout=60):
    r = subprocess.run(["kcat"] + args, input=input, capture_output=True, text=True,
                       timeout=timeout, stdin=None if input is not None else subprocess.DEVNULL)
    return r


def kcat_brokers(bootstrap):
    """{node id: "host:port"} from kcat -L through bootstrap."""
    r = kcat(["-L", "-b", bootstrap, "-m", "10"], timeout=30)
    assert r.returncode == 0, f"kcat -L -b {bootstrap} failed: {r.stderr[-1500:]}"
    return {int(k): v for k, v in re.findall(r"broker (-?\d+) at (\S+)", r.stdout)}


def roundtrip(bootstrap, tag, n=5):
    """Produces n keyed messages through bootstrap with kcat and consumes the
    topic back through it: every key must come back exactly once."""
    keys = [f"{tag}-{i}" for i in range(n)]
    r = kcat(["-P", "-b", bootstrap, "-t", TOPIC, "-K", "\t", "-X", "acks=all"],
             input="".join(f"{k}\tv\n" for k in keys), timeout=60)
    assert r.returncode == 0, f"kcat produce via {bootstrap} failed: {r.stderr[-1500:]}"
    r = kcat(["-C", "-b", bootstrap, "-t", TOPIC, "-o", "beginning", "-e", "-q",
              "-f", "%k\n"], timeout=60)
    assert r.returncode == 0, f"kcat consume via {bootstrap} failed: {r.stderr[-1500:]}"
    got = collections.Counter(r.stdout.split())
    bad = {k: got[k] for k in keys if got[k] != 1}
    assert not bad, f"via {bootstrap}: keys not consumed exactly once: {bad}"


def assert_serves(f, name):
    """A raw Metadata request on the bootstrap port and kcat -L both see
    the cluster's own broker ports."""
    want = {nid: f"{h}:{p}" for nid, (h, p) in f.broker_addresses(name).items()}
    md = kafka_metadata("127.0.0.1", f.clusters[name]["bootstrap"], timeout=10)
    got = {nid: f"{h}:{p}" for nid, (h, p) in md["brokers"].items()}
    assert got == want, f"{name}: metadata brokers {got} != {want}"
    assert kcat_brokers(f.bootstrap(name)) == want


def apiversions_once(port, corr=1, timeout=5.0):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(apiversions_v0(corr))
        b = recv_kframe(s, timeout)
    cid, err = struct.unpack_from(">ih", b, 0)
    assert cid == corr and err == 0, (cid, err)


def leader_port(f, name, topic, partition):
    """(node id, ferry port) of the partition's leader, through ferry."""
    md = kafka_metadata("127.0.0.1", f.clusters[name]["bootstrap"], [topic], timeout=10)
    leader = md["topics"][topic]["partitions"][partition]
    return leader, md["brokers"][leader][1]


def log_count(f, pattern):
    return len(re.findall(pattern, f.log_text()))


# --------------------------------------------------------------------------
# load generators
# --------------------------------------------------------------------------

class ConnectLoop(threading.Thread):
    """New TCP connection + one ApiVersions v0 exchange, again and again,
    over `ports` in turn. Failed connects (refused, timeout) and failed
    exchanges (connection closed or reset before the response, timeout,
    wrong response) are counted separately, each with its time."""

    def __init__(self, ports, pause=0.003):
        super().__init__(daemon=True)
        self.ports, self.pause = ports, pause
        self.stop_ev = threading.Event()
        self.connects = 0
        self.ok = 0
        self.connect_failures = []   # (t, port, error)
        self.exchange_failures = []  # (t_connect, t_fail, port, phase, error)

    def run(self):
        corr, i = 0, 0
        while not self.stop_ev.is_set():
            port = self.ports[i % len(self.ports)]
            i += 1
            corr = (corr + 1) % 2_000_000_000
            t0 = time.monotonic()
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(3.0)
            try:
                s.connect(("127.0.0.1", port))
            except OSError as e:
                self.connect_failures.append((t0, port, repr(e)))
                s.close()
                continue
            self.connects += 1
            phase = "send"
            try:
                s.sendall(apiversions_v0(corr))
                phase = "recv"
                b = recv_kframe(s, 5.0)
                cid, err = struct.unpack_from(">ih", b, 0)
                if cid != corr or err != 0:
                    raise AssertionError(f"correlation id {cid} (want {corr}), error {err}")
                self.ok += 1
            except Exception as e:  # noqa: BLE001 -- counted and reported
                self.exchange_failures.append((t0, time.monotonic(), port, phase, repr(e)))
            finally:
                s.close()
            time.sleep(self.pause)

    def stop(self):
        self.stop_ev.set()
        self.join(30)
        assert not self.is_alive(), "connect loop hung"


class SeqProducer(threading.Thread):
    """An idempotent confluent-kafka producer sending sequence-numbered
    messages (key = 8-digit sequence number) until stopped, then flushing."""

    def __init__(self, bootstrap, topic, conf=None):
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.conf = conf or {}   # more librdkafka settings (statistics, ...)
        self.stop_ev = threading.Event()
        self.produced = []
        self.delivered = []
        self.errors = []        # delivery errors
        self.client_errors = []  # error_cb (transport errors etc.): informative
        self.exc = None
        self.left = None

    def run(self):
        try:
            from confluent_kafka import Producer
            p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                          "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000,
                          "error_cb": lambda e: self.client_errors.append(str(e)),
                          **self.conf})

            def on_delivery(err, msg):
                if err is not None:
                    self.errors.append(str(err))
                else:
                    self.delivered.append(msg.key().decode())
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

    def stop(self):
        self.stop_ev.set()
        self.join(120)
        assert not self.is_alive(), "producer thread hung"


class PidWatcher(threading.Thread):
    """Records when each watched process goes away."""

    def __init__(self):
        super().__init__(daemon=True)
        self.lock = threading.Lock()
        self.watched = {}  # pid -> [starttime, drained_at, gone_at]
        self.stop_ev = threading.Event()

    def watch(self, pid, drained_at):
        with self.lock:
            self.watched[pid] = [proc_starttime(pid), drained_at, None]

    def run(self):
        while not self.stop_ev.is_set():
            now = time.monotonic()
            with self.lock:
                for pid, rec in self.watched.items():
                    if rec[2] is None and not pid_alive(pid, rec[0]):
                        rec[2] = now
            time.sleep(0.02)

    def pending(self):
        with self.lock:
            return [p for p, r in self.watched.items() if r[2] is None]

    def stop(self):
        self.stop_ev.set()
        self.join(5)


# --------------------------------------------------------------------------
# 1. thirty modifying reloads under load
# --------------------------------------------------------------------------

@TWO_WORKERS_ONLY
@pytest.mark.timeout(150)
def test_30_reloads_under_load(renv):
    """30 consecutive reloads that modify cluster A (idle_timeout toggled),
    while a connect loop (new connection + ApiVersions every few ms, over A's
    bootstrap and broker ports) and an idempotent producer run through A:
    no connect is refused or times out, no delivery fails, every message is
    consumed exactly once, B is never touched, at most the serving plus
    draining generations are alive, each new generation is all new processes,
    and every process of each old generation exits within drain_timeout of
    being replaced. ApiVersions exchanges may fail only the
    way the drain contract allows (see the end of the test); their number is
    printed."""
    f = renv.f
    a = f.clusters["A"]
    ports = [a["bootstrap"]] + a["brokers"]
    b_pids = serving_set(f, "B")
    b_gen = f.cluster("B")["generation"]
    n = f.workers_of("A")

    loop = ConnectLoop(ports)
    prod = SeqProducer(f.bootstrap("A"), TOPIC)
    watcher = PidWatcher()
    reloads = []  # (t_start, t_end, old pids, new pids)
    loop.start()
    prod.start()
    watcher.start()
    try:
        wait_for(lambda: len(prod.delivered) >= 50 and loop.ok >= 50, 30,
                 what="producer and connect loop flowing")
        assert not loop.connect_failures and not prod.errors
        for i in range(30):
            before = f.cluster("A")
            old_pids = serving_set(f, "A")
            f.spec["A"]["extra"]["idle_timeout"] = "11m" if i % 2 == 0 else "10m"
            f.write()
            t0 = time.monotonic()
            r = f.reload_ctl(json_out=True)
            t1 = time.monotonic()
            assert r.returncode == 0, f"reload {i}: rc={r.returncode} {r.stdout} {r.stderr}"
            body = json.loads(r.stdout)
            assert body["success"] is True and body["changed"] is True, body
            assert (body["clustersModified"], body["clustersAdded"], body["clustersRemoved"]) \
                == (["A"], [], []), body
            assert body["configVersion"] == sha256_version(f.config_text), body
            for p in old_pids:
                watcher.watch(p, t1)

            doc = f.cluster("A")
            assert doc["state"] == "accepting", doc
            assert doc["generation"] > before["generation"], (before["generation"], doc)
            serving = [w for w in doc["workers"] if w["state"] == "accepting"]
            assert len(serving) == n and all(w["generation"] == doc["generation"]
                                             for w in serving), doc["workers"]
            new_pids = frozenset(w["pid"] for w in serving)
            assert len(new_pids) == n and new_pids.isdisjoint(old_pids), (old_pids, doc["workers"])
            others = {w["pid"]: w["state"] for w in doc["workers"] if w["pid"] not in new_pids}
            assert set(others.values()) <= {"draining", "stopped"}, doc["workers"]
            olds = [w for w in doc["workers"] if w["generation"] == before["generation"]]
            for w in olds:
                assert w["state"] in ("draining", "stopped"), doc["workers"]
            # the ones no longer listed have already exited
            for p in old_pids - {w["pid"] for w in olds}:
                assert not pid_alive(p), (p, doc["workers"])
            draining = {w["pid"] for w in doc["workers"] if w["state"] == "draining"}
            live = set(f.live_workers())
            assert live <= new_pids | b_pids | draining, \
                (f"live workers {sorted(live)}, allowed: serving {sorted(new_pids)}, "
                 f"B {sorted(b_pids)}, draining {sorted(draining)}")
            assert serving_set(f, "B") == b_pids
            reloads.append((t0, t1, old_pids, new_pids))
            time.sleep(0.2)
        time.sleep(0.5)  # traffic on the last generation too
    finally:
        loop.stop()
        prod.stop()

    try:
        wait_for(lambda: not watcher.pending(), DRAIN_TIMEOUT + 3,
                 what="every replaced generation exited")
    finally:
        watcher.stop()
    late = []
    for pid, (_, drained_at, gone_at) in watcher.watched.items():
        if gone_at - drained_at > DRAIN_TIMEOUT + 0.5:
            late.append((pid, round(gone_at - drained_at, 2)))
    took = sorted(round(r[2] - r[1], 2) for r in watcher.watched.values())

    # Report what was seen (pytest -s shows it; failures show it too).
    fails = loop.exchange_failures
    desc = []
    for tc, tf, port, phase, err in fails:
        near = min(reloads, key=lambda r: abs(r[1] - tc)) if reloads else None
        rel = f"{(tc - near[1]) * 1000:+.0f} ms from the end of the nearest reload" if near else ""
        role = "bootstrap" if port == ports[0] else f"broker port {ports.index(port)}"
        desc.append(f"{role}: {phase}: {err} ({rel})")
    summary = (f"connects={loop.connects} ok={loop.ok} connect_failures={len(loop.connect_failures)} "
               f"apiversions_failures={len(fails)} produced={len(prod.produced)} "
               f"delivered={len(prod.delivered)} delivery_errors={len(prod.errors)} "
               f"client_errors={len(prod.client_errors)} old_generation_exit_s={took}")
    print("\n30-reload summary: " + summary)
    for d in desc:
        print("  ApiVersions failure: " + d)
    for e in prod.client_errors[:10]:
        print("  producer error_cb: " + e)

    assert len(reloads) == 30
    assert loop.connect_failures == [], f"failed connects: {loop.connect_failures[:5]} ({summary})"
    assert loop.ok > 500, f"connect loop too slow to mean anything: {summary}"
    assert prod.exc is None, prod.exc
    assert prod.left == 0, f"{prod.left} messages not delivered after flush ({summary})"
    assert prod.errors == [], f"delivery errors: {prod.errors[:5]} ({summary})"
    assert sorted(prod.delivered) == prod.produced, summary
    assert not late, f"old generations alive longer than drain_timeout after being replaced: {late}"
    assert set(f.live_workers()) == reloads[-1][3] | b_pids
    assert f.cluster("B")["generation"] == b_gen

    # Every message exactly once, consumed through A from the beginning.
    r = kcat(["-C", "-b", f.bootstrap("A"), "-t", TOPIC, "-o", "beginning", "-e", "-q",
              "-c", str(len(prod.produced)), "-f", "%k\n"], timeout=120)
    assert r.returncode == 0, f"kcat consume failed: {r.stderr[-1500:]}"
    got = collections.Counter(r.stdout.split())
    dups = {k: n for k, n in got.items() if n > 1}
    missing = sorted(set(prod.produced) - set(got))
    extra = sorted(set(got) - set(prod.produced))
    assert not dups, f"{len(dups)} messages consumed more than once, e.g. {list(dups.items())[:5]}"
    assert not missing, f"{len(missing)} messages never consumed, e.g. {missing[:5]}"
    assert not extra, f"unexpected messages {extra[:5]}"
    print(f"  consumed {sum(got.values())} messages, each once")

    # Failed ApiVersions exchanges (printed above). The drain contract
    # (docs/design.md §4: stop reading new requests, answer what was forwarded, close) lets
    # one kind through: a connection the old generation accepted in the last
    # moments before DRAIN, whose request it had not forwarded yet, is closed
    # as "drained" without an answer -- EOF, or RST when the request was
    # still unread in the socket buffer. That is what a Kafka client retries
    # on. Anything else fails: a timeout, a wrong answer, a failure outside
    # a reload, or the connection not being closed by ferry.
    def during_a_reload(tc, tf):
        return any(t0 - 0.1 <= tc <= t1 and t0 <= tf <= t1 + 0.1 for t0, t1, _, _ in reloads)
    unexplained = [d for d, (tc, tf, port, phase, err) in zip(desc, fails)
                   if not (phase == "recv" and during_a_reload(tc, tf)
                           and ("closed after 0 of 4 bytes" in err or "ConnectionResetError" in err))]
    assert unexplained == [], \
        f"ApiVersions exchanges failed other than by a drain close during a reload: {unexplained}"
    assert len(fails) <= len(reloads), f"more failed exchanges than reloads: {desc}"


# --------------------------------------------------------------------------
# 2. reloads that fail in preparation
# --------------------------------------------------------------------------

def _check_rolled_back(f, before_pids, before_version, what):
    assert cluster_pids(f) == before_pids, f"{what}: serving workers changed"
    for name, (_, pids) in before_pids.items():
        assert all(pid_alive(p) for p in pids), f"{what}: {name} worker gone"
        assert f.cluster(name)["state"] == "accepting"
    st = f.config_status()
    assert st["currentConfigVersion"] == before_version, f"{what}: config version changed"
    assert st["lastReloadAttempt"]["status"] == "FAILED", st
    assert st["reloadInProgress"] is False
    for name in before_pids:
        assert_serves(f, name)


def _good_reload_after(f, name="A"):
    old = serving_set(f, name)
    f.spec[name]["extra"]["idle_timeout"] = "7m"
    f.write()
    r = f.reload_ctl()
    assert r.returncode == 0, f"the next good reload failed: rc={r.returncode} {r.stdout} {r.stderr}"
    assert "modified: " + name in r.stdout, r.stdout
    new = serving_set(f, name)
    assert new.isdisjoint(old), (old, new)
    assert f.config_status()["currentConfigVersion"] == sha256_version(f.config_text)
    assert_serves(f, name)
    roundtrip(f.bootstrap(name), "after-rollback")


def test_reload_fails_bind_port_held(renv, workdir):
    """The new config moves A's bootstrap to a port another process holds:
    ferryctl reload exits 1, POST answers 500 naming A, the serving workers
    are the same processes and keep serving, the config version does not
    move, and the next good reload succeeds."""
    f = renv.f
    before, version = cluster_pids(f), f.config_status()["currentConfigVersion"]
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        port = allocate_ports(1)[0]
        held.bind(("127.0.0.1", port))
        held.listen(1)
        moved = {k: dict(v) for k, v in f.clusters.items()}
        moved["A"]["bootstrap"] = port
        text = f.render(clusters=moved)
        path = workdir / "moved.ini"
        path.write_text(text)

        r = f.reload_ctl(path)
        assert r.returncode == 1, f"ferryctl reload: rc={r.returncode} (want 1)\n{r.stdout}{r.stderr}"
        assert "FAILED" in r.stdout and str(port) in r.stdout, r.stdout
        _check_rolled_back(f, before, version, "ferryctl reload")

        code, body = f.reload_http(text)
        assert code == 500, (code, body)
        assert body["success"] is False and body["changed"] is False, body
        assert any(e.startswith("cluster A:") and str(port) in e for e in body["errors"]), body
        _check_rolled_back(f, before, version, "POST reload")
        assert f.config_status()["lastReloadAttempt"]["errors"] == body["errors"]
    finally:
        held.close()
    _good_reload_after(f)


@TWO_WORKERS_ONLY
def test_reload_fails_in_worker(slow_env):
    """A reload whose new generation dies in the worker before it is READY.

    ferryd's supervisor parses with the very parser the worker uses, so no
    configuration value can be valid to one and invalid to the other today
    (TLS material, read by the supervisor and loaded by the worker, will be
    the first). What the worker side of a prepare can still do is fail on
    its own: exit, crash, or report FAILED before READY. This test makes the
    new generation die: every worker of this ferryd takes 1 s to start
    (sleep_after_init, see the module docstring), and the test SIGKILLs A's
    held generation meanwhile.

    Expected: ferryctl reload exits 1 naming cluster A and the signal, the
    serving workers are the same processes and still serve, nothing
    changed, and the next good reload succeeds."""
    f = slow_env.f
    before, version = cluster_pids(f), f.config_status()["currentConfigVersion"]
    f.spec["A"]["extra"]["idle_timeout"] = "8m"
    f.write()
    out = {}

    def run():
        out["r"] = f.reload_ctl()

    t = threading.Thread(target=run)
    t.start()
    victim = None
    deadline = time.monotonic() + 5
    while victim is None and time.monotonic() < deadline:
        for w in f.cluster("A")["workers"]:
            if w["state"] == "initializing" and w["pid"] not in before["A"][1]:
                victim = w["pid"]
        time.sleep(0.02)
    assert victim, "the held generation of A never showed up"
    os.kill(victim, signal.SIGKILL)
    t.join(30)
    r = out["r"]
    assert r.returncode == 1, f"ferryctl reload: rc={r.returncode} (want 1)\n{r.stdout}{r.stderr}"
    assert "FAILED" in r.stdout and "cluster A" in r.stdout, r.stdout
    assert "signal 9" in r.stdout, r.stdout
    _check_rolled_back(f, before, version, "ferryctl reload")
    st = f.config_status()["lastReloadAttempt"]
    assert st["status"] == "FAILED" and any("cluster A" in e for e in st["errors"]), st
    _good_reload_after(f)


@TWO_WORKERS_ONLY
def test_reload_fails_init_timeout(slow_env):
    """A new generation that is not ready within init_timeout is rolled
    back. Every worker of this ferryd takes 1 s to start (sleep_after_init,
    see the module docstring); the new config lowers init_timeout to 300ms
    and modifies A. The reload's deadline is the new config's init_timeout,
    so A's new generation misses it deterministically (no race against a
    fast exec as `init_timeout = 1ms` alone would be). The next good reload
    (init_timeout back to 10s) succeeds."""
    f = slow_env.f
    before, version = cluster_pids(f), f.config_status()["currentConfigVersion"]
    f.ferry_keys["init_timeout"] = "300ms"
    f.spec["A"]["extra"]["idle_timeout"] = "9m"
    f.write()
    t0 = time.monotonic()
    r = f.reload_ctl()
    took = time.monotonic() - t0
    assert r.returncode == 1, f"ferryctl reload: rc={r.returncode} (want 1)\n{r.stdout}{r.stderr}"
    assert "init_timeout" in r.stdout and "cluster A" in r.stdout, r.stdout
    assert took < 0.9, f"reload took {took:.2f}s: not failed by the 300ms init_timeout"
    _check_rolled_back(f, before, version, "ferryctl reload")
    st = f.config_status()["lastReloadAttempt"]
    assert any("not ready within init_timeout" in e for e in st["errors"]), st
    code, body = f.reload_http(f.config_text)
    assert code == 500, (code, body)
    assert any(e.startswith("cluster A:") and "init_timeout" in e for e in body["errors"]), body
    _check_rolled_back(f, before, version, "POST reload")
    # The late generations never serve: they are told to stop once awake.
    time.sleep(1.5)
    assert cluster_pids(f) == before
    assert set(f.live_workers()) == {p for _, ps in before.values() for p in ps}
    f.ferry_keys["init_timeout"] = "10s"
    _good_reload_after(f)


# --------------------------------------------------------------------------
# 3. rejected, concurrent and no-op reloads
# --------------------------------------------------------------------------

def test_invalid_config_rejected(renv):
    """An invalid file: 400 with file:line errors, nothing changes (same
    pids, same configVersion)."""
    f = renv.f
    before, version = cluster_pids(f), f.config_status()["currentConfigVersion"]
    good = f.config_text
    bad = good.replace("[cluster B]\n", "[cluster B]\nbogus_key = 1\n") \
              .replace("log_level = info", "log_level = chatty")
    lines = bad.splitlines()
    bogus_line = lines.index("bogus_key = 1") + 1
    level_line = lines.index("log_level = chatty") + 1

    # The file on disk (empty body): errors name the config path.
    f.write(bad)
    code, body = f.reload_http()
    assert code == 400, (code, body)
    assert body["success"] is False and body["changed"] is False, body
    errs = "\n".join(body["errors"])
    for ln in (bogus_line, level_line):
        assert re.search(rf"^{re.escape(str(f.config_path))}:{ln}: \S", errs, re.M), errs
    assert cluster_pids(f) == before
    st = f.config_status()
    assert st["currentConfigVersion"] == version
    assert st["lastReloadAttempt"]["status"] == "REJECTED", st

    # ferryctl reload FILE: exit 1, errors shown as FILE:line.
    path = f.workdir / "bad.ini"
    path.write_text(bad)
    r = f.reload_ctl(path)
    assert r.returncode == 1, f"rc={r.returncode}\n{r.stdout}{r.stderr}"
    assert re.search(rf"{re.escape(str(path))}:{bogus_line}: ", r.stdout), r.stdout
    # A posted body: errors name "<request>".
    code, body = f.reload_http(bad)
    assert code == 400 and any(e.startswith(f"<request>:{bogus_line}:") for e in body["errors"]), body

    assert cluster_pids(f) == before
    assert f.config_status()["currentConfigVersion"] == version
    for name in ("A", "B"):
        assert_serves(f, name)
    f.write(good)


def test_identical_config_is_a_noop(renv):
    """The running bytes again: success, changed false, status UNCHANGED,
    no worker replaced."""
    f = renv.f
    before = cluster_pids(f)
    version = f.config_status()["currentConfigVersion"]
    assert version == sha256_version(f.config_text)
    code, body = f.reload_http(f.config_text)
    assert code == 200 and body["success"] is True and body["changed"] is False, body
    assert body["configVersion"] == version
    assert (body["clustersAdded"], body["clustersModified"], body["clustersRemoved"]) == ([], [], [])
    r = f.reload_ctl()
    assert r.returncode == 0 and "nothing changed" in r.stdout, r.stdout
    st = f.config_status()
    assert st["lastReloadAttempt"]["status"] == "UNCHANGED", st
    assert st["currentConfigVersion"] == version
    time.sleep(0.3)
    assert cluster_pids(f) == before
    assert set(f.live_workers()) == {p for _, ps in before.values() for p in ps}


def _concurrent_reloads(f, senders):
    """Runs the senders (callables) at the same moment as far as ferryd can
    tell: ferryd is SIGSTOPped while they connect and send, then continued,
    so both requests are waiting when it looks at the first. Returns their
    results in order."""
    results = [None] * len(senders)

    def run(i, fn):
        try:
            results[i] = fn()
        except Exception as e:  # noqa: BLE001
            results[i] = e
    threads = [threading.Thread(target=run, args=(i, s), daemon=True) for i, s in enumerate(senders)]
    os.kill(f.proc.pid, signal.SIGSTOP)
    try:
        for t in threads:
            t.start()
        time.sleep(0.5)  # connected and sent (the listen backlog takes them)
    finally:
        os.kill(f.proc.pid, signal.SIGCONT)
    for t in threads:
        t.join(60)
    return results


@TWO_WORKERS_ONLY
def test_concurrent_reload_conflict(slow_env):
    """Two reloads at once: one proceeds, the other gets 409 with
    inProgressSince (RFC 3339); ferryctl exits 1 on the 409. The workers of
    this ferryd take 1 s to start, so the first reload is certainly still
    preparing when the second request is read."""
    f = slow_env.f
    f.spec["A"]["extra"]["idle_timeout"] = "12m"
    t1 = f.render()
    f.spec["A"]["extra"]["idle_timeout"] = "13m"
    t2 = f.render()
    res = _concurrent_reloads(f, [lambda: f.reload_http(t1), lambda: f.reload_http(t2)])
    for r in res:
        assert not isinstance(r, Exception), res
    codes = sorted(r[0] for r in res)
    assert codes == [200, 409], res
    loser = [r[1] for r in res if r[0] == 409][0]
    winner = [r[1] for r in res if r[0] == 200][0]
    assert loser["success"] is False and RFC3339_UTC.match(loser["inProgressSince"]), loser
    assert winner["success"] is True and winner["clustersModified"] == ["A"], winner
    assert f.config_status()["currentConfigVersion"] == winner["configVersion"]

    # ferryctl against an API request in progress.
    f.spec["A"]["extra"]["idle_timeout"] = "14m"
    t3 = f.render()
    path = f.workdir / "t4.ini"
    f.spec["A"]["extra"]["idle_timeout"] = "15m"
    path.write_text(f.render())
    res = _concurrent_reloads(f, [lambda: f.reload_http(t3), lambda: f.reload_ctl(path)])
    http_res, ctl_res = res
    assert not isinstance(http_res, Exception) and not isinstance(ctl_res, Exception), res
    if http_res[0] == 200:
        assert ctl_res.returncode == 1, (ctl_res.returncode, ctl_res.stdout, ctl_res.stderr)
        assert "in progress" in ctl_res.stdout and "since" in ctl_res.stdout, ctl_res.stdout
    else:
        assert http_res[0] == 409 and RFC3339_UTC.match(http_res[1]["inProgressSince"]), http_res
        assert ctl_res.returncode == 0, (ctl_res.stdout, ctl_res.stderr)
    assert_serves(f, "A")


# --------------------------------------------------------------------------
# 4. add, remove, move
# --------------------------------------------------------------------------

def test_add_remove_move_clusters_live(renv):
    """Add cluster C, remove cluster B, move A's bootstrap port: each live,
    each checked with real clients through the new ports, and the ports
    given up refusing connections."""
    f, m = renv.f, renv.m
    a_pids = serving_set(f, "A")
    b_pids = serving_set(f, "B")
    roundtrip(f.bootstrap("A"), "before")

    # add C
    f.add_cluster("C", m)
    f.write()
    r = f.reload_ctl()
    assert r.returncode == 0 and "added: C" in r.stdout, r.stdout
    c = f.cluster("C")
    assert c["state"] == "accepting", c
    assert_serves(f, "C")
    roundtrip(f.bootstrap("C"), "via-c")
    serving_set(f, "C")  # as many workers as configured
    assert serving_set(f, "A") == a_pids and serving_set(f, "B") == b_pids

    # remove B
    b_ports = [f.clusters["B"]["bootstrap"]] + f.clusters["B"]["brokers"]
    f.remove_cluster("B")
    f.write()
    code, body = f.reload_http()
    assert code == 200 and body["clustersRemoved"] == ["B"], body
    wait_for(lambda: all(port_refuses(p) for p in b_ports), 3, what="B's ports refusing")
    wait_for(lambda: not any(pid_alive(p) for p in b_pids), DRAIN_TIMEOUT + 1,
             what="B's workers gone")
    wait_for(lambda: f.cluster_doc("B") is None, 3, what="B gone from /admin/clusters")
    assert sorted(c["name"] for c in f.status()["clusters"]) == ["A", "C"]
    assert serving_set(f, "A") == a_pids

    # move A's bootstrap port (broker ports stay)
    old_boot = f.clusters["A"]["bootstrap"]
    f.clusters["A"]["bootstrap"] = allocate_ports(1)[0]
    f.write()
    r = f.reload_ctl()
    assert r.returncode == 0 and "modified: A" in r.stdout, r.stdout
    assert serving_set(f, "A").isdisjoint(a_pids)
    wait_for(lambda: port_refuses(old_boot), 3, what="A's old bootstrap port refusing")
    assert_serves(f, "A")
    roundtrip(f.bootstrap("A"), "moved")
    listeners = {(l["role"], l["address"]) for l in f.cluster("A")["listeners"]}
    assert ("bootstrap", f.bootstrap("A")) in listeners, listeners
    for name in ("A", "C"):
        assert_serves(f, name)


# --------------------------------------------------------------------------
# 5. SIGHUP
# --------------------------------------------------------------------------

@TWO_WORKERS_ONLY
def test_sighup_rereads_file_and_coalesces(slow_env):
    """SIGHUP reloads the file. SIGHUPs that arrive while a reload is in
    progress (workers take 1 s to start here) coalesce into exactly one more
    reload, which reads the file as it is by then."""
    f = slow_env.f
    # Plain SIGHUP.
    f.spec["A"]["extra"]["idle_timeout"] = "21m"
    f.write()
    want = sha256_version(f.config_text)
    f.proc.send_signal(signal.SIGHUP)
    st = wait_for(lambda: (lambda s: s if s["currentConfigVersion"] == want else None)(f.config_status()),
                  10, what="SIGHUP reload applied")
    assert st["lastReloadAttempt"]["source"] == "SIGHUP" and st["lastReloadAttempt"]["status"] == "SUCCESS", st
    assert st["lastReloadAttempt"]["clustersModified"] == ["A"]

    requested0 = log_count(f, r'msg="reload requested" source=SIGHUP')
    coalesce0 = log_count(f, r'msg="running the reload requested during the previous one"')

    # A reload in progress (API), SIGHUPs during it.
    f.spec["A"]["extra"]["idle_timeout"] = "22m"
    posted = f.render()
    result = {}
    t = threading.Thread(target=lambda: result.update(r=f.reload_http(posted)), daemon=True)
    t.start()
    wait_for(lambda: f.config_status()["reloadInProgress"], 5, interval=0.01, what="reload in progress")
    f.spec["A"]["extra"]["idle_timeout"] = "23m"
    f.write()
    final = sha256_version(f.config_text)
    for _ in range(4):
        f.proc.send_signal(signal.SIGHUP)
        time.sleep(0.1)
    assert f.config_status()["reloadInProgress"], "reload finished before the SIGHUPs were sent"
    t.join(30)
    assert result["r"][0] == 200, result
    st = wait_for(lambda: (lambda s: s if s["currentConfigVersion"] == final and not s["reloadInProgress"]
                           else None)(f.config_status()), 15, what="the coalesced SIGHUP reload")
    assert st["lastReloadAttempt"]["source"] == "SIGHUP", st
    time.sleep(2.5)  # any further (wrong) reload would have started and finished by now
    assert log_count(f, r'msg="reload requested" source=SIGHUP') - requested0 == 1, \
        tail_file(f.log_path, 60)
    assert log_count(f, r'msg="running the reload requested during the previous one"') - coalesce0 == 1
    assert log_count(f, r'msg="SIGHUP during a reload: one more reload will follow"') >= 1
    st = f.config_status()
    assert st["currentConfigVersion"] == final and st["lastReloadAttempt"]["source"] == "SIGHUP", st
    assert_serves(f, "A")


# --------------------------------------------------------------------------
# 6. drain per connection
# --------------------------------------------------------------------------

def test_drain_delivers_long_poll_then_closes(renv):
    """When a reload replaces A's generation: a connection with an
    outstanding long-poll Fetch (max_wait 3000 ms on an empty partition)
    gets its response, then is closed; an idle connection is closed at
    once; the old generation exits once the Fetch is answered."""
    f = renv.f
    _, port = leader_port(f, "A", EMPTY, 0)
    idle = socket.create_connection(("127.0.0.1", f.clusters["A"]["bootstrap"]), timeout=5)
    idle.sendall(apiversions_v0(5))
    recv_kframe(idle, 5)
    fetch = socket.create_connection(("127.0.0.1", port), timeout=5)
    fetch.sendall(apiversions_v0(6))
    recv_kframe(fetch, 5)
    old_pids = serving_set(f, "A")
    drained0 = f.metrics().get(("ferry_connections_drained_total", "A"), 0)

    t_sent = time.monotonic()
    fetch.sendall(fetch_v4(77, EMPTY, 0, 0, 3000))
    wait_for(lambda: f.metrics()[("ferry_in_flight", "A")] >= 1, 2, interval=0.01,
             what="the Fetch in flight")
    f.spec["A"]["extra"]["idle_timeout"] = "5m"
    # the drain contract (connections close): no live handover, no spread
    # (test_handover.py covers the connections that move)
    f.spec["A"]["extra"]["handover"] = "off"
    f.ferry_keys["drain_spread"] = "0s"
    f.write()
    r = f.reload_ctl()
    assert r.returncode == 0, r.stdout + r.stderr
    t_reload = time.monotonic()
    assert time.monotonic() - t_sent < 2.0, "reload too slow for this test to mean anything"

    # idle: closed at once, nothing sent
    data, took = wait_closed(idle, 1.5)
    assert data == b"", data
    # fetch: the response comes (after max_wait), then the close
    b = recv_kframe(fetch, 6)
    t_resp = time.monotonic()
    (cid,) = struct.unpack_from(">i", b, 0)
    assert cid == 77
    assert t_resp - t_sent >= 2.5, f"Fetch answered after {t_resp - t_sent:.2f}s: not a long poll"
    data, _ = wait_closed(fetch, 2)
    assert data == b""
    wait_for(lambda: not any(pid_alive(p) for p in old_pids), 2,
             what="old generation exited after the Fetch")
    assert time.monotonic() - t_reload < DRAIN_TIMEOUT, "old generation waited for drain_timeout"
    m = f.metrics()
    assert m[("ferry_connections_drained_total", "A")] >= drained0 + 2, m
    assert m.get(("ferry_connections_forced_total", "A"), 0) == 0
    idle.close()
    fetch.close()
    assert_serves(f, "A")


@TWO_WORKERS_ONLY
def test_drain_forces_late_response_at_deadline(renv):
    """A response later than drain_timeout (mock broker RTT 8 s, drain_timeout
    5 s): the connection is force-closed at the deadline without it, counted
    in ferry_connections_forced_total, and the old generation exits then."""
    f, m = renv.f, renv.m
    node = 3
    port = f.broker_addresses("A")[node][1]
    old_pids = serving_set(f, "A")
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(apiversions_v0(1))
    recv_kframe(s, 5)
    forced0 = f.metrics().get(("ferry_connections_forced_total", "A"), 0)
    m.command(f"rtt {node} 8000")
    try:
        s.sendall(kreq(3, 0, 2, struct.pack(">i", 0)))  # Metadata v0, answered 8 s later
        wait_for(lambda: f.metrics()[("ferry_in_flight", "A")] >= 1, 2, interval=0.01,
                 what="the request in flight")
        f.spec["A"]["extra"]["idle_timeout"] = "6m"
        f.write()
        r = f.reload_ctl()
        t_reload = time.monotonic()
        assert r.returncode == 0, r.stdout + r.stderr
        data, took = wait_closed(s, DRAIN_TIMEOUT + 2)
        closed_after = time.monotonic() - t_reload
        assert data == b"", f"{len(data)} bytes arrived: the late response was not held back"
        assert DRAIN_TIMEOUT - 0.5 <= closed_after <= DRAIN_TIMEOUT + 1.0, \
            f"closed {closed_after:.2f}s after the reload (drain_timeout {DRAIN_TIMEOUT}s)"
        wait_for(lambda: not any(pid_alive(p) for p in old_pids), 2,
                 what="old generation exited at the deadline")
        assert f.metrics()[("ferry_connections_forced_total", "A")] == forced0 + 1
        assert "drain deadline reached" in f.log_text()
    finally:
        m.command(f"rtt {node} 0")
        s.close()
    assert_serves(f, "A")


# --------------------------------------------------------------------------
# 7. per-cluster drain and restart
# --------------------------------------------------------------------------

@TWO_WORKERS_ONLY
def test_cluster_drain_and_restart(renv):
    """POST .../drain and ferryctl drain: the cluster goes draining ->
    stopped and its sockets refuse; ferryctl restart (and POST .../restart)
    bring it back with a new generation that serves; B is never touched."""
    f = renv.f
    b_pids = serving_set(f, "B")
    a = f.clusters["A"]
    a_ports = [a["bootstrap"]] + a["brokers"]

    for round_, (drain, restart) in enumerate((("http", "ctl"), ("ctl", "http"))):
        gen0 = f.cluster("A")["generation"]
        old_pids = serving_set(f, "A")
        # A long-poll Fetch keeps the draining generation around long
        # enough to be seen draining.
        _, port = leader_port(f, "A", EMPTY, 0)
        fetch = socket.create_connection(("127.0.0.1", port), timeout=5)
        fetch.sendall(fetch_v4(9, EMPTY, 0, 0, 3000))
        wait_for(lambda: f.metrics()[("ferry_in_flight", "A")] >= 1, 2, interval=0.01,
                 what="the Fetch in flight")
        if drain == "http":
            code, _, body = f.http("/admin/clusters/A/drain", method="POST")
            assert code == 200, (code, body)
        else:
            r = f.ctl("drain", "A", check=False)
            assert r.returncode == 0, r.stdout + r.stderr
        st = f.cluster("A")
        assert st["state"] == "draining", st
        wait_for(lambda: all(port_refuses(p) for p in a_ports), 2, what="A's ports refusing")
        b = recv_kframe(fetch, 5)  # still answered
        assert struct.unpack_from(">i", b, 0)[0] == 9
        fetch.close()
        wait_for(lambda: f.cluster("A")["state"] == "stopped", DRAIN_TIMEOUT + 1,
                 what="A stopped")
        assert not any(pid_alive(p) for p in old_pids)
        assert all(port_refuses(p) for p in a_ports)
        assert serving_set(f, "B") == b_pids
        assert_serves(f, "B")
        # Draining it again is a conflict, not a success.
        code, _, _ = f.http("/admin/clusters/A/drain", method="POST")
        assert code == 409
        code, _, _ = f.http("/admin/clusters/nope/drain", method="POST")
        assert code == 404

        if restart == "ctl":
            r = f.ctl("restart", "A", check=False)
            assert r.returncode == 0, r.stdout + r.stderr
        else:
            code, _, body = f.http("/admin/clusters/A/restart", method="POST")
            assert code == 200, (code, body)
        st = f.cluster("A")
        assert st["state"] == "accepting" and st["generation"] > gen0, st
        assert serving_set(f, "A").isdisjoint(old_pids)
        assert_serves(f, "A")
        roundtrip(f.bootstrap("A"), f"restarted-{round_}")
    assert serving_set(f, "B") == b_pids


# --------------------------------------------------------------------------
# 8. persistence of a posted config
# --------------------------------------------------------------------------

def test_persist_posted_config(mock_factory, reload_ferry_factory, workdir):
    """persist = true: a posted config that applies is written to the config
    path atomically (same bytes, no temp file left). With the directory
    read-only the reload still succeeds and says persisted false with the
    error."""
    m = mock_factory("M", 3, [f"{TOPIC}:3"])
    f = reload_ferry_factory({"A": m}, start=False, ferry_extra={"persist": "true"})
    confdir = workdir / "conf"
    confdir.mkdir()
    f.config_path = confdir / "ferry.ini"
    f.write()
    os.chmod(f.config_path, 0o640)
    f.start()
    ino0 = os.stat(f.config_path).st_ino

    f.spec["A"]["extra"]["idle_timeout"] = "3m"
    text = f.render()
    code, body = f.reload_http(text)
    assert code == 200 and body["success"] and body["persisted"] is True, body
    assert f.config_path.read_text() == text
    st = os.stat(f.config_path)
    assert st.st_ino != ino0, "not replaced by a rename"
    assert st.st_mode & 0o777 == 0o640, oct(st.st_mode)
    assert sorted(os.listdir(confdir)) == ["ferry.ini"], os.listdir(confdir)
    assert f.config_status()["lastReloadAttempt"]["persisted"] is True
    f.config_text = text

    # Read-only directory.
    mounted = False
    if os.geteuid() != 0:
        os.chmod(confdir, 0o555)
    else:
        r1 = subprocess.run(["mount", "--bind", str(confdir), str(confdir)], capture_output=True,
                            text=True)
        if r1.returncode != 0:
            pytest.skip(f"running as root and cannot bind-mount read-only: {r1.stderr.strip()}")
        mounted = True
        r2 = subprocess.run(["mount", "-o", "remount,bind,ro", str(confdir)], capture_output=True,
                            text=True)
        if r2.returncode != 0:
            subprocess.run(["umount", str(confdir)])
            pytest.skip(f"running as root and cannot remount read-only: {r2.stderr.strip()}")
    try:
        with pytest.raises(OSError):
            (confdir / "probe").write_text("x")
        old_pids = serving_set(f, "A")
        f.spec["A"]["extra"]["idle_timeout"] = "4m"
        text2 = f.render()
        code, body = f.reload_http(text2)
        assert code == 200 and body["success"] is True and body["changed"] is True, body
        assert body["persisted"] is False and body.get("persistError"), body
        assert serving_set(f, "A").isdisjoint(old_pids)
        st = f.config_status()
        assert st["currentConfigVersion"] == sha256_version(text2)
        last = st["lastReloadAttempt"]
        assert last["status"] == "SUCCESS" and last["persisted"] is False, last
        assert str(confdir) in last["persistError"] or "ferry.ini" in last["persistError"], last
        assert f.config_path.read_text() == text, "file changed though the directory is read-only"
        assert sorted(os.listdir(confdir)) == ["ferry.ini"]
        assert_serves(f, "A")
    finally:
        if mounted:
            subprocess.run(["umount", str(confdir)], capture_output=True)
        else:
            os.chmod(confdir, 0o755)


def test_reload_per_cluster_policy_commits_what_prepared(renv):
    """reload_policy = per-cluster: A is modified and prepares fine, B's new
    bootstrap port is held by another process. A's new generation is
    committed, B keeps its serving generation; the answer is a 500 that says
    which cluster failed and lists A as modified; the running config version
    stays (the file is not fully applied), so the same file reloaded once
    the port is free modifies only B."""
    f = renv.f
    before = cluster_pids(f)
    version = f.config_status()["currentConfigVersion"]
    held_port = allocate_ports(1)[0]
    held = socket.socket()
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    held.bind(("127.0.0.1", held_port))
    held.listen(1)
    old_b = f.clusters["B"]["bootstrap"]
    try:
        f.ferry_keys["reload_policy"] = "per-cluster"
        f.spec["A"]["extra"]["idle_timeout"] = "9m"
        f.clusters["B"]["bootstrap"] = held_port
        f.write()
        r = f.reload_ctl()
        assert r.returncode == 1, f"rc={r.returncode}\n{r.stdout}{r.stderr}"
        code, body = f.reload_http()
        # The first attempt committed A: the second sees A unchanged and
        # only B (still failing) to do.
        assert code == 500, (code, body)
        assert body["clustersModified"] == [], body
        assert any(e.startswith("cluster B:") and str(held_port) in e
                   for e in body["errors"]), body
        st = f.config_status()
        assert st["currentConfigVersion"] == version, "a partial reload is not the new version"
        assert "A" in r.stdout and "modified: A" in r.stdout, r.stdout
        after = cluster_pids(f)
        assert set(after["A"][1]).isdisjoint(before["A"][1]), "A was not replaced"
        assert after["B"] == before["B"], "B's serving generation changed"
        assert kafka_metadata("127.0.0.1", old_b)["brokers"], "B stopped serving"
        assert kafka_metadata("127.0.0.1", f.clusters["A"]["bootstrap"])["brokers"]
    finally:
        held.close()
    pids_a = serving_set(f, "A")
    r = f.reload_ctl()
    assert r.returncode == 0, f"rc={r.returncode}\n{r.stdout}{r.stderr}"
    assert "modified: B" in r.stdout and "A" not in r.stdout.split("modified:")[1], r.stdout
    assert serving_set(f, "A") == pids_a, "A was touched by the retry"
    assert kafka_metadata("127.0.0.1", held_port)["brokers"]
    wait_for(lambda: port_refuses(old_b), 6, what="B's old bootstrap port closed")
