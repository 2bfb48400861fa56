"""
Failure domains: a worker that crashes (once, or in a loop), a cluster that
cannot bind at start-up (startup_policy fail-fast / best-effort), and a
supervisor that dies under its workers. Each test runs a real ferryd (the
build in $FERRY_BUILD) in front of librdkafka mock clusters; see conftest.py.

    FERRY_BUILD=/path/to/build /usr/bin/python3 -m pytest -q tests/integration/test_failure.py

Every test runs with one worker per cluster (id w1) and with `workers = 2`
in every cluster (id w2). With two, a crash takes one process of the
generation: its sibling keeps serving (and keeps its pid), the crashed one
alone is replaced under the cluster's crash policy, and a crash loop still
fails the whole cluster.
"""

import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import threading
import time

import pytest

from conftest import (children_of, is_admin_process, kafka_metadata, kill_pids, pid_alive,
                      proc_starttime, serving_pids, tail_file, workers_keys)

TOPIC = "ferry-fail"


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

def child_pids(pid):
    """Worker children of pid (its admin process left out), read from
    /proc/PID/task/*/children (fast enough to time a restart to a few ms);
    falls back to a scan of /proc."""
    kids = set()
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids.update(int(x) for x in f.read().split())
    except OSError:
        kids = set(children_of(pid))
    return {k for k in kids if not is_admin_process(k)}


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def workers_of_supervisor(sup_pid):
    """Every live process that was started as a worker of ferryd sup_pid
    (its argv carries `--worker ... --ppid SUP_PID`), wherever it has been
    reparented to."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        argv = cmdline(int(entry))
        if b"--worker" in argv and b"--ppid" in argv:
            i = argv.index(b"--ppid")
            if i + 1 < len(argv) and argv[i + 1] == str(sup_pid).encode() \
                    and pid_alive(int(entry)):
                out.append(int(entry))
    return out


def reap(pids):
    """Orphaned workers are reparented to the test process (a subreaper)."""
    for p in pids:
        try:
            os.waitpid(p, os.WNOHANG)
        except (ChildProcessError, OSError):
            pass



def wait_for(pred, timeout, interval=0.05, what="condition"):
    """Polls pred() until it returns a truthy value, and returns that value."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = pred()
            if v:
                return v
            last = v
        except Exception as e:  # noqa: BLE001 (reported in the failure message)
            last = repr(e)
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not reached within {timeout}s (last: {last})")
        time.sleep(interval)


def serving_set(ferry, name):
    """The pids of cluster `name`'s workers when it is accepting with all of
    them (as many as configured, all alive), else None."""
    c = ferry.cluster(name)
    pids = frozenset(serving_pids(c))
    if c["state"] == "accepting" and len(pids) == ferry.workers_of(name) \
            and all(pid_alive(p) for p in pids):
        return pids
    return None


def worker_pid(ferry, name, index):
    """The pid of worker `index` of cluster `name`'s serving generation."""
    c = ferry.cluster(name)
    for w in c["workers"]:
        if w["index"] == index and w["state"] == "accepting" \
                and w["generation"] == c["generation"]:
            return w["pid"]
    raise AssertionError(f"{name}: no accepting worker {index}: {c['workers']}")


def metadata_ok(ferry, name, port=None, timeout=3.0):
    """A Metadata round trip through cluster `name` (bootstrap port unless
    given), with every broker rewritten to this cluster's listeners."""
    port = port or ferry.clusters[name]["bootstrap"]
    md = kafka_metadata("127.0.0.1", port, topics=[TOPIC], timeout=timeout)
    want = ferry.broker_addresses(name)
    assert md["brokers"] == {n: (h, p) for n, (h, p) in want.items()}, md["brokers"]
    assert md["topics"][TOPIC]["error"] == 0, md["topics"]
    return md


def produce(bootstrap, n, prefix, timeout=30):
    """n messages through confluent-kafka; returns the delivery errors."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                  "message.timeout.ms": int(timeout * 1000)})
    errors, ok = [], []

    def dr(err, msg):
        (errors if err is not None else ok).append(str(err) if err else msg.key())
    for i in range(n):
        p.produce(TOPIC, key=f"{prefix}-{i}".encode(), value=b"v", on_delivery=dr)
    left = p.flush(timeout + 5)
    if left:
        errors.append(f"{left} messages undelivered after flush")
    if len(ok) != n and not errors:
        errors.append(f"{len(ok)} of {n} delivered")
    return errors


class Traffic:
    """Background traffic through one cluster while the test breaks another:
    a Metadata round trip every 50 ms on a fresh connection, and a
    confluent-kafka producer. Every failure is recorded."""

    def __init__(self, ferry, name):
        self.ferry, self.name = ferry, name
        self.stop = threading.Event()
        self.md_ok, self.md_errors = 0, []
        self.delivered, self.produced, self.errors = [], [], []
        self.threads = [threading.Thread(target=self._metadata, daemon=True),
                        threading.Thread(target=self._producer, daemon=True)]

    def __enter__(self):
        for t in self.threads:
            t.start()
        wait_for(lambda: (self.md_ok >= 3 and len(self.delivered) >= 20)
                 or self.md_errors or self.errors, 30,
                 what=f"traffic through {self.name} flowing")
        assert not self.md_errors and not self.errors, (self.md_errors[:3], self.errors[:3])
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def _metadata(self):
        while not self.stop.is_set():
            try:
                metadata_ok(self.ferry, self.name)
                self.md_ok += 1
            except Exception as e:  # noqa: BLE001
                self.md_errors.append(f"{time.strftime('%T')} {e!r}")
            self.stop.wait(0.05)

    def _producer(self):
        try:
            from confluent_kafka import Producer
            p = Producer({"bootstrap.servers": self.ferry.bootstrap(self.name),
                          "linger.ms": 5, "message.timeout.ms": 20000})

            def dr(err, msg):
                if err is not None:
                    self.errors.append(str(err))
                else:
                    self.delivered.append(msg.key().decode())
            i = 0
            while not self.stop.is_set():
                k = f"bg-{i}"
                p.produce(TOPIC, key=k.encode(), value=b"x", on_delivery=dr)
                self.produced.append(k)
                i += 1
                p.poll(0.02)
            left = p.flush(30)
            if left:
                self.errors.append(f"{left} messages undelivered after flush")
        except Exception as e:  # noqa: BLE001
            self.errors.append(repr(e))

    def check(self, at):
        assert not self.md_errors, f"{at}: metadata through {self.name} failed: {self.md_errors[:5]}"
        assert not self.errors, f"{at}: produce through {self.name} failed: {self.errors[:5]}"


def hold_port(port):
    """Occupies 127.0.0.1:port (bound and listening) until closed."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", port))
    s.listen(1)
    return s


def port_bindable(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def set_startup_policy(ferry, policy):
    text = ferry.config_text.replace("startup_policy = fail-fast",
                                     f"startup_policy = {policy}")
    assert f"startup_policy = {policy}" in text
    ferry.config_text = text
    ferry.config_path.write_text(text)


def open_client(ferry, name):
    """A client connection through cluster `name` that has completed one
    Metadata round trip and stays open, idle."""
    s = socket.create_connection(("127.0.0.1", ferry.clusters[name]["bootstrap"]), timeout=5)
    s.settimeout(5)
    req = struct.pack(">hhih", 3, 0, 7, 4) + b"idle" + struct.pack(">i", 0)
    s.sendall(struct.pack(">i", len(req)) + req)
    (size,) = struct.unpack(">i", _recv_exact(s, 4))
    body = _recv_exact(s, size)
    assert struct.unpack_from(">i", body, 0)[0] == 7
    return s


def _recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def wait_closed(s, t0, timeout):
    """Waits for the peer to close s; returns (seconds since t0, how)."""
    deadline = t0 + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None, "still open"
        r, _, _ = select.select([s], [], [], left)
        if not r:
            continue
        try:
            data = s.recv(65536)
        except ConnectionResetError:
            return time.monotonic() - t0, "reset"
        except OSError as e:
            return time.monotonic() - t0, repr(e)
        if data == b"":
            return time.monotonic() - t0, "eof"
        # bytes (a late response) before the close: keep reading


def assert_clean_log(ferry):
    log = tail_file(ferry.log_path, 2000)
    for bad in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
        assert bad not in log, f"{bad} in ferryd's log:\n{log[-6000:]}"


@pytest.fixture
def ferry_factory(ferry_factory, workers_n):
    """conftest's factory with `workers = N` in every cluster: N = 1 (w1), 2 (w2)."""
    def make(upstreams, **kw):
        return ferry_factory(upstreams, cluster_keys=workers_keys(workers_n), **kw)
    return make


@pytest.fixture
def upstream(mock_factory):
    """One 3-broker mock upstream with topic ferry-fail (3 partitions),
    shared by the clusters of a test."""
    return mock_factory("up", 3, [f"{TOPIC}:3"])


# --------------------------------------------------------------------------
# worker crashes
# --------------------------------------------------------------------------

def test_single_sigkill_serves_again_within_2s(upstream, ferry_factory):
    """SIGKILL of one of A's workers (its only one with workers = 1): A serves
    again within 2 s on its bootstrap and a broker port, through a new
    process; B is not touched. With one worker that is a new generation;
    with two, the killed process alone is replaced inside the same
    generation, and its sibling keeps its pid and serves all along."""
    f = ferry_factory({"A": upstream, "B": upstream})
    a_pids, b_pids = serving_set(f, "A"), serving_set(f, "B")
    assert a_pids and b_pids, f.status()
    n = f.workers_of("A")
    b_starts = {p: proc_starttime(p) for p in b_pids}
    gen0 = f.cluster("A")["generation"]
    broker_port = f.clusters["A"]["brokers"][1]
    victim = worker_pid(f, "A", 0)
    siblings = a_pids - {victim}

    os.kill(victim, signal.SIGKILL)
    t0 = time.monotonic()
    if siblings:
        # the siblings serve while the killed one is replaced
        metadata_ok(f, "A", timeout=1.0)
        metadata_ok(f, "A", port=broker_port, timeout=1.0)
    back = None
    last = None
    while time.monotonic() - t0 < 2.0:
        try:
            p = serving_set(f, "A")
            last = f.cluster("A")["state"], p
            if p and victim not in p:
                # Bootstrap and a broker port (the new worker must learn the
                # upstream brokers again on its own).
                metadata_ok(f, "A", timeout=1.0)
                metadata_ok(f, "A", port=broker_port, timeout=1.0)
                back = time.monotonic() - t0
                print(f"A serving again {back:.3f}s after SIGKILL of its worker")
                break
        except Exception as e:  # noqa: BLE001
            last = repr(e)
        time.sleep(0.02)
    assert back is not None, f"A not serving again within 2 s of SIGKILL of its worker (last: {last})"

    a = f.cluster("A")
    assert a["state"] == "accepting", a
    if n == 1:
        assert a["generation"] > gen0, a
    else:
        assert a["generation"] == gen0, f"the generation was replaced, not the process: {a}"
        now = serving_set(f, "A")
        assert siblings < now and len(now - siblings) == 1, \
            f"a sibling of the killed worker was touched: {sorted(a_pids)} -> {a['workers']}"
        assert worker_pid(f, "A", 0) in now - siblings
    assert not pid_alive(victim)
    assert serving_set(f, "B") == b_pids and all(pid_alive(p, st) for p, st in b_starts.items()), \
        "B's worker was touched"
    m = f.metrics()
    assert m.get(("ferry_worker_restarts_total", "A")) == 1, m
    assert m.get(("ferry_crash_loops_total", "A")) == 0, m
    assert m.get(("ferry_worker_restarts_total", "B")) == 0, m
    log = tail_file(f.log_path, 2000)
    assert re.search(rf'worker exited.*cluster=A .*pid={victim} how="killed by signal 9', log), log
    assert_clean_log(f)


def test_crash_loop_fails_cluster_and_restart_recovers(upstream, ferry_factory):
    """Worker 0 of A is killed three times within crash_loop_window
    (crash_loop_limit = 3): replaced after 100 ms, then 200 ms, then A is
    failed (its other workers, with workers = 2, are stopped too) and not
    restarted; B serves throughout; ferryctl restart brings A back."""
    f = ferry_factory({"A": upstream, "B": upstream},
                      extra_ferry="crash_loop_limit = 3\ncrash_loop_window = 30s")
    a_pids, b_pids = serving_set(f, "A"), serving_set(f, "B")
    assert a_pids and b_pids, f.status()
    b_starts = {p: proc_starttime(p) for p in b_pids}
    sup = f.proc.pid
    killed = []
    gaps = []  # seconds from a SIGKILL to the next worker of A being forked

    with Traffic(f, "B") as traffic:
        victim = worker_pid(f, "A", 0)
        siblings = a_pids - {victim}
        for round_ in range(3):
            known = b_pids | siblings | {victim} | set(killed)
            os.kill(victim, signal.SIGKILL)
            t_kill = time.monotonic()
            killed.append(victim)
            if round_ == 2:
                break
            # Watch ferryd's children directly: the time a new pid appears
            # is when the restart timer fired.
            new = None
            while time.monotonic() - t_kill < 5.0:
                fresh = [p for p in child_pids(sup) if p not in known and pid_alive(p)]
                if fresh:
                    new = fresh[0]
                    break
                time.sleep(0.002)
            assert new, f"no new worker for A within 5 s of kill #{round_ + 1}"
            gaps.append(time.monotonic() - t_kill)
            # Let it come back fully (accepting) before killing it again.
            victim = wait_for(lambda: serving_set(f, "A") == siblings | {new} and new, 10,
                              what=f"A's worker {new} accepting beside {sorted(siblings)} "
                                   f"after kill #{round_ + 1}")

        # Third crash within the window: the cluster is given up on.
        a = wait_for(lambda: (lambda c: c if c["state"] == "failed" else None)(f.cluster("A")),
                     5, what="A failed after 3 crashes")
        traffic.check("during the crash loop")

        # A failed cluster has released everything: its other workers
        # (workers = 2) are gone too; they have no connection to drain.
        wait_for(lambda: not any(pid_alive(p) for p in siblings), 3,
                 what=f"A's surviving workers {sorted(siblings)} stopped after the crash loop")
        # No restart is attempted any more.
        time.sleep(1.5)
        extra = [p for p in child_pids(sup) if p not in b_pids | set(killed) and pid_alive(p)]
        assert not extra, f"A restarted after it was declared failed: {extra}; {f.cluster('A')}"
        assert f.cluster("A")["state"] == "failed"
        traffic.check("after the crash loop")
        n_before = len(traffic.delivered)
        time.sleep(0.5)
        assert len(traffic.delivered) > n_before, "B's producer stalled"
    traffic.check("at the end")
    assert traffic.md_ok > 20

    reason = a["reason"] or ""
    assert "crash loop" in reason and re.search(r"\b3 crashes\b", reason) \
        and "signal 9" in reason, f"reason does not name the count and the signal: {reason!r}"
    failed_gen = a["generation"]

    # Backoff: 100 ms, then 200 ms (each plus the time to reap and fork).
    print(f"restart gaps after SIGKILL: {['%.3f' % g for g in gaps]}")
    assert len(gaps) == 2, gaps
    assert 0.09 <= gaps[0] < 1.0, f"first restart after {gaps[0]:.3f}s, want ~0.1s"
    # A timer never fires early, so the lower bounds hold under any load; a
    # backoff that does not grow fails the second one.
    assert gaps[1] >= 0.19 and gaps[1] > gaps[0], \
        f"restarts did not get slower: gaps {['%.3f' % g for g in gaps]}"
    log = tail_file(f.log_path, 2000)
    delays = [int(d) for d in re.findall(r"restarting worker.*cluster=A .*?delay_ms=(\d+)", log)]
    assert delays == [100, 200], f"logged restart delays {delays}"

    # B was never touched.
    assert serving_set(f, "B") == b_pids and all(pid_alive(p, st) for p, st in b_starts.items())
    assert produce(f.bootstrap("B"), 20, "after-loop") == []

    m = f.metrics()
    assert m.get(("ferry_worker_restarts_total", "A")) == 2, m
    assert m.get(("ferry_crash_loops_total", "A")) == 1, m
    assert m.get(("ferry_worker_restarts_total", "B")) == 0, m
    assert m.get(("ferry_crash_loops_total", "B")) == 0, m

    # The operator brings it back.
    r = f.ctl("restart", "A", check=False, timeout=30)
    assert r.returncode == 0, f"ferryctl restart A: rc={r.returncode} {r.stdout} {r.stderr}"
    new_pids = wait_for(lambda: serving_set(f, "A"), 10, what="A accepting after restart")
    a = f.cluster("A")
    assert a["state"] == "accepting" and a["generation"] > failed_gen, a
    assert new_pids.isdisjoint(set(killed) | siblings), (new_pids, killed, siblings)
    metadata_ok(f, "A")
    assert produce(f.bootstrap("A"), 20, "after-restart") == []
    m = f.metrics()
    assert m.get(("ferry_crash_loops_total", "A")) == 1, m
    assert m.get(("ferry_worker_restarts_total", "A")) == 2, m
    assert serving_set(f, "B") == b_pids and all(pid_alive(p, st) for p, st in b_starts.items())
    assert_clean_log(f)


def test_crash_loop_failed_cluster_refuses_clients(upstream, ferry_factory):
    """A cluster failed by a crash loop has released its resources (docs/design.md
    §3 `failed`): a client is refused at once instead of being queued on a
    listening socket that no worker will ever accept from -- with
    workers = 2 too, where the killed worker's sibling still holds the
    listening sockets when the crash loop is declared."""
    f = ferry_factory({"A": upstream, "B": upstream},
                      extra_ferry="crash_loop_limit = 1\ncrash_loop_window = 30s")
    a_pids = serving_set(f, "A")
    assert a_pids
    os.kill(worker_pid(f, "A", 0), signal.SIGKILL)
    a = wait_for(lambda: (lambda c: c if c["state"] == "failed" else None)(f.cluster("A")),
                 5, what="A failed after its first crash (crash_loop_limit = 1)")
    assert "crash loop" in (a["reason"] or ""), a
    t0 = time.monotonic()
    try:
        kafka_metadata("127.0.0.1", f.clusters["A"]["bootstrap"], timeout=3)
        outcome = "answered"
    except socket.timeout:
        outcome = "hung (connected, no answer)"
    except (ConnectionRefusedError, ConnectionError) as e:
        outcome = f"refused/closed: {e!r}"
    took = time.monotonic() - t0
    assert outcome.startswith("refused/closed") and took < 1.0, \
        f"client of failed cluster A: {outcome} after {took:.1f}s"
    metadata_ok(f, "B")
    # The operator restart binds again and serves.
    f.ctl("restart", "A", timeout=30)
    wait_for(lambda: serving_set(f, "A"), 10, what="A accepting after restart")
    metadata_ok(f, "A")
    assert_clean_log(f)


# --------------------------------------------------------------------------
# start-up policy
# --------------------------------------------------------------------------

def test_startup_fail_fast_on_bind_error(upstream, ferry_factory):
    f = ferry_factory({"A": upstream, "B": upstream}, start=False)
    taken = f.clusters["B"]["brokers"][1]
    holder = hold_port(taken)
    try:
        t0 = time.monotonic()
        f.start(wait=False)
        try:
            rc = f.proc.wait(10)
        except subprocess.TimeoutExpired:
            pytest.fail(f"ferryd still running 10 s after start with port {taken} taken "
                        f"(fail-fast); log:\n{tail_file(f.log_path)}")
        took = time.monotonic() - t0
        log = tail_file(f.log_path, 200)
        assert rc != 0, f"ferryd exited 0 although cluster B could not bind; log:\n{log}"
        assert took < 5.0, f"ferryd took {took:.1f}s to give up"
        assert re.search(rf"127\.0\.0\.1:{taken}\b.*Address already in use", log), \
            f"bind error for port {taken} not printed:\n{log}"
        assert "cluster=B" in log, log
        assert not workers_of_supervisor(f.proc.pid), "workers left behind"
        assert not os.path.exists(f.sock), f"control socket {f.sock} left behind"
        # Everything ferryd bound is released.
        for name in ("A", "B"):
            c = f.clusters[name]
            for p in [c["bootstrap"]] + c["brokers"]:
                if p != taken:
                    assert port_bindable(p), f"port {p} of {name} still bound after exit"
        assert_clean_log(f)
    finally:
        holder.close()


def test_startup_best_effort_serves_the_others(upstream, ferry_factory):
    f = ferry_factory({"A": upstream, "B": upstream}, start=False)
    set_startup_policy(f, "best-effort")
    taken = f.clusters["B"]["bootstrap"]
    holder = hold_port(taken)
    try:
        f.start()  # waits for `ferryctl ready`
        assert f.proc.poll() is None
        b = f.cluster("B")
        assert b["state"] == "failed", b
        assert f"127.0.0.1:{taken}" in (b["reason"] or "") \
            and "Address already in use" in b["reason"], f"B's reason: {b['reason']!r}"
        assert not serving_pids(b)
        a_pids = wait_for(lambda: serving_set(f, "A"), 10, what="A accepting")
        metadata_ok(f, "A")
        assert produce(f.bootstrap("A"), 10, "be") == []

        status, _, body = f.http("/admin/ready")
        assert status == 200, (status, body)
        status, _, body = f.http("/admin/ready", via="tcp")
        assert status == 200, (status, body)
        assert json.loads(body).get("ready") is True, body

        # B's other ports were released, not held half-bound.
        for p in f.clusters["B"]["brokers"]:
            assert port_bindable(p), f"B's broker port {p} still bound while B is failed"

        # Restart while the port is still taken: refused, still failed.
        r = f.ctl("restart", "B", check=False, timeout=30)
        assert r.returncode == 1, f"restart with the port taken: rc={r.returncode} {r.stdout} {r.stderr}"
        assert "Address already in use" in r.stdout + r.stderr, r
        assert f.cluster("B")["state"] == "failed"

        holder.close()
        r = f.ctl("restart", "B", check=False, timeout=30)
        assert r.returncode == 0, f"restart after freeing the port: rc={r.returncode} {r.stdout} {r.stderr}"
        wait_for(lambda: serving_set(f, "B"), 10, what="B accepting after restart")
        metadata_ok(f, "B")
        metadata_ok(f, "B", port=f.clusters["B"]["brokers"][2])
        assert produce(f.bootstrap("B"), 10, "be-b") == []
        assert serving_set(f, "A") == a_pids
        assert f.ctl("ready", check=False).returncode == 0
        assert_clean_log(f)
    finally:
        holder.close()


# --------------------------------------------------------------------------
# supervisor death
# --------------------------------------------------------------------------

def _kill_supervisor(f):
    """SIGKILL ferryd; returns (t0, the worker pids with start times)."""
    st = f.status()
    pids = {w["pid"] for c in st["clusters"] for w in c["workers"] if w.get("pid")}
    pids |= set(children_of(f.proc.pid))
    pids = {p for p in pids if pid_alive(p)}
    assert len(pids) >= 2, pids
    workers = {p: proc_starttime(p) for p in pids}
    os.kill(f.proc.pid, signal.SIGKILL)
    t0 = time.monotonic()
    f.proc.wait(5)
    return t0, workers


def _wait_workers_gone(workers, t0, timeout):
    while True:
        reap(workers)
        left = [p for p, s in workers.items() if pid_alive(p, s)]
        if not left:
            return time.monotonic() - t0, []
        if time.monotonic() - t0 > timeout:
            return None, left
        time.sleep(0.01)


def test_supervisor_sigkill_workers_exit_and_restart_serves(upstream, ferry_factory):
    f = ferry_factory({"A": upstream, "B": upstream})
    clients = [open_client(f, "A"), open_client(f, "B")]
    workers = {}
    try:
        t0, workers = _kill_supervisor(f)
        gone, left = _wait_workers_gone(workers, t0, 10.0)
        closes = [wait_closed(s, t0, 10.0) for s in clients]
        print(f"after SIGKILL of ferryd: workers gone in {gone}s, idle clients closed {closes}")
        assert gone is not None, f"workers {left} still running 10 s after ferryd was killed"
        assert gone <= 2.0, f"workers took {gone:.2f}s to exit after ferryd was killed (bound 2 s)"
        for (t, how), name in zip(closes, ("A", "B")):
            assert t is not None, f"idle client of {name} not closed 10 s after ferryd was killed"
            assert how == "eof", f"client of {name}: {how} after {t:.2f}s, want a clean close"
            assert t <= 2.0, f"idle client of {name} closed only after {t:.2f}s (bound 2 s)"
        log = tail_file(f.log_path, 300)
        assert "control channel closed" in log or "supervisor gone" in log, log

        # A new ferryd on the same config and ports serves at once.
        old_pid = f.proc.pid
        t1 = time.monotonic()
        f.start()
        ready_in = time.monotonic() - t1
        print(f"new ferryd ready in {ready_in:.2f}s")
        assert f.proc.pid != old_pid
        for name in ("A", "B"):
            metadata_ok(f, name)
        assert produce(f.bootstrap("A"), 10, "reborn") == []
        assert ready_in < 10, f"new ferryd ready only after {ready_in:.1f}s"
        log = tail_file(f.log_path, 300)
        assert "Address already in use" not in log, log
        assert_clean_log(f)
    finally:
        for s in clients:
            s.close()
        kill_pids(list(workers.items()))


def test_supervisor_sigkill_with_request_in_flight(upstream, ferry_factory):
    """A worker orphaned while a request is owed upstream must still be gone
    within 2 s, and its client closed, not left hanging."""
    f = ferry_factory({"A": upstream, "B": upstream})
    metadata_ok(f, "A")
    for broker in (1, 2, 3):
        upstream.command(f"rtt {broker} 8000")
    s = socket.create_connection(("127.0.0.1", f.clusters["A"]["bootstrap"]), timeout=5)
    workers = {}
    try:
        req = struct.pack(">hhih", 3, 0, 99, 4) + b"slow" + struct.pack(">i", 0)
        s.sendall(struct.pack(">i", len(req)) + req)
        wait_for(lambda: sum(w.get("inFlight", 0) for w in f.cluster("A")["workers"]) >= 1,
                 5, what="request in flight on A's worker")
        t0, workers = _kill_supervisor(f)
        gone, left = _wait_workers_gone(workers, t0, 10.0)
        t_close, how = wait_closed(s, t0, 10.0)
        assert gone is not None, f"workers {left} still running 10 s after ferryd was killed"
        assert t_close is not None, "client with a request in flight still open 10 s later"
        assert how in ("eof", "reset"), how
        assert gone <= 2.0, (f"orphaned worker with a request in flight took {gone:.2f}s to "
                             f"exit after ferryd was killed (bound 2 s); client closed ({how}) "
                             f"after {t_close:.2f}s")
        assert t_close <= 2.0, f"client closed ({how}) only after {t_close:.2f}s"
    finally:
        s.close()
        for broker in (1, 2, 3):
            try:
                upstream.command(f"rtt {broker} 0")
            except Exception:  # noqa: BLE001
                pass
        kill_pids(list(workers.items()))


def test_supervisor_sigkill_while_a_generation_drains(upstream, reload_ferry_factory):
    """kill -9 ferryd while an old generation drains with drain_timeout = 20s
    and a connection that still owes a response: the draining worker keeps
    the earlier deadline (WORKER_ORPHAN_DRAIN_MS, 1.5 s), so no worker
    outlives ferryd by more than 2 s."""
    f = reload_ferry_factory({"A": upstream, "B": upstream}, drain_timeout="20s")
    metadata_ok(f, "A")
    old_pid = serving_pids(f.cluster("A"))[0]
    for broker in (1, 2, 3):
        upstream.command(f"rtt {broker} 30000")
    s = socket.create_connection(("127.0.0.1", f.clusters["A"]["bootstrap"]), timeout=5)
    workers = {}
    try:
        req = struct.pack(">hhih", 3, 0, 42, 4) + b"slow" + struct.pack(">i", 0)
        s.sendall(struct.pack(">i", len(req)) + req)
        wait_for(lambda: sum(w.get("inFlight", 0) for w in f.cluster("A")["workers"]) >= 1,
                 5, what="request in flight on A's worker")
        f.spec["A"]["extra"]["idle_timeout"] = "7m"
        f.write()
        r = f.reload_ctl()
        assert r.returncode == 0, r.stdout + r.stderr
        wait_for(lambda: any(w["pid"] == old_pid and w["state"] == "draining"
                             for w in f.cluster("A")["workers"]),
                 5, what="A's old generation draining")
        time.sleep(0.5)  # well inside the 20 s drain
        assert pid_alive(old_pid)
        t0, workers = _kill_supervisor(f)
        assert old_pid in workers, (old_pid, workers)
        gone, left = _wait_workers_gone(workers, t0, 25.0)
        t_close, how = wait_closed(s, t0, 25.0)
        print(f"after SIGKILL of ferryd during a 20 s drain: workers gone in {gone}s, "
              f"draining client closed ({how}) after {t_close}s")
        assert gone is not None, f"workers {left} still running 25 s after ferryd was killed"
        assert gone <= 2.0, (f"workers took {gone:.2f}s to exit after ferryd was killed "
                             f"during a 20 s drain (bound 2 s)")
        assert t_close is not None and t_close <= 2.0, (t_close, how)
        log = f.log_text()
        assert "drain deadline moved earlier" in log, tail_file(f.log_path, 80)
    finally:
        s.close()
        for broker in (1, 2, 3):
            try:
                upstream.command(f"rtt {broker} 0")
            except Exception:  # noqa: BLE001
                pass
        kill_pids(list(workers.items()))
