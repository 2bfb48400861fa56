"""
scenario — what the transaction, consumer-group and share-group scenarios
share: long-running peers (tests/peers/kafka/java/Scenarios.java, and
python/txn_peer.py for confluent-kafka's transactions) that a test starts in
the background under strace, disturbs, and stops with a stop file; and
the two disturbances themselves, a reload of a modified cluster (live
handover: connections move) and a SIGKILL of the serving worker (the
supervisor restarts it; clients reconnect through ferry).

    p = Peer(workdir, "txn-produce", opts, ferry, cluster)   # starts it
    wait_until(lambda: p.progress().get("txns", 0) >= 20, 60, "20 txns", p)
    fill(kafka_cluster, topic, run, n)   # records "run-i", straight to the brokers
    reload_modified(ferry)          # -> the cluster's lastReplacement
    kill_worker(ferry)              # -> (old pid, new pid)
    p.stop(); r = p.wait(60)        # the peer's JSON result

Every wait has a deadline; a peer still running at the end of the test is
killed by its process group (Peer.kill, registered as a finalizer).
"""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from .conftest import CLUSTER, clients, kcluster

FERRY_CLUSTER_KEY = "idle_timeout"   # toggled to make a reload modify the cluster
# A reload hands a connection over once the responses it is owed are
# delivered: a JoinGroup waiting for a rebalance, a long-polling Fetch or a
# transaction's EndTxn can hold it for seconds on a loaded machine. The
# suite's default drain_timeout (2 s) would close those; an operator's (30 s
# in the example configuration) lets them move.
RELOAD_DRAIN_TIMEOUT = "30s"


PROGRAMS = ("java", "confluent-kafka")


def peer_argv(program, opts):
    """The command line of a scenario peer with --options from opts (True:
    a bare flag): Scenarios.java ("java"), or confluent-kafka's
    transactional producer (tests/peers/kafka/python/txn_peer.py)."""
    args = clients.opt_args(opts)
    if program == "confluent-kafka":
        assert opts.get("mode") == "txn-produce", "txn_peer.py is a transactional producer"
        args = [a for a in args if a not in ("--mode", "txn-produce")]
        return [str(clients.venv_python()), str(clients.HERE / "python" / "txn_peer.py"), *args]
    home = kcluster.kafka_home()
    cp = f"{home / 'java-client'}:{home / 'client'}/*"
    return [kcluster.java_bin(), *clients.JAVA_CLIENT_OPTS, "-cp", cp, "Scenarios", *args]


class Peer:
    """One scenario peer running in the background under strace."""

    def __init__(self, workdir, mode, opts, ferry, cluster, request=None, label=None,
                 program="java"):
        self.label = label or mode
        d = Path(workdir)
        tag = f"{self.label}-{time.monotonic_ns()}"
        self.stop_file = d / f"stop-{tag}"
        self.progress_file = d / f"progress-{tag}.json"
        self.strace_log = d / f"strace-{tag}.log"
        self.out_path = d / f"{tag}.out"
        self.err_path = d / f"{tag}.err"
        self.allowed = {ferry.clusters[CLUSTER]["bootstrap"], *ferry.clusters[CLUSTER]["brokers"]}
        self.forbidden = cluster.all_ports()
        full = {"mode": mode, "stop-file": self.stop_file, "progress": self.progress_file, **opts}
        why = clients.problem(program)
        if why:
            from .conftest import kafka_unavailable
            kafka_unavailable(why)
        self.argv = peer_argv(program, full)
        self._out = open(self.out_path, "wb")
        self._err = open(self.err_path, "wb")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(clients.strace_argv(self.strace_log) + self.argv,
                                     stdin=subprocess.DEVNULL, stdout=self._out, stderr=self._err,
                                     start_new_session=True)
        self.result = None
        self.elapsed = None
        if request is not None:
            request.addfinalizer(self.kill)
            from conftest import register_log
            register_log(request, f"peer {self.label} stderr", self.err_path)

    def progress(self):
        try:
            return json.loads(self.progress_file.read_text())
        except (OSError, ValueError):
            return {}

    def connects(self):
        """connect() calls so far (strace writes them as they happen)."""
        return clients.parse_strace(self.strace_log)

    def running(self):
        return self.proc.poll() is None

    def stop(self):
        self.stop_file.write_text("stop\n")

    def wait(self, timeout):
        """Waits for the peer to exit (killed after timeout); returns its
        result, a dict (None when it printed none)."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self.elapsed = time.monotonic() - self.t0
        for f in (self._out, self._err):
            f.close()
        self.result = clients.result_line(self.out_path.read_text(errors="replace"))
        return self.result

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)

    def dial_problems(self):
        r = clients.Run(self.label, self.argv, self.proc.returncode, "", "", self.connects(), 0,
                        self.allowed, self.forbidden)
        return r.dial_problems()

    def describe(self):
        err = self.err_path.read_text(errors="replace") if self.err_path.exists() else ""
        return (f"{self.label}: rc={self.proc.returncode} in {self.elapsed or 0:.1f}s, "
                f"progress={self.progress()}\nresult={self.result}\n"
                f"argv: {' '.join(map(str, self.argv))}\nstderr (tail):\n{err[-3000:]}")

    def check(self, ferry_addresses):
        """The common checks of a finished peer: a result, no error, only
        ferry's addresses seen, no connect() outside ferry's ports."""
        r = self.result
        assert r is not None, f"no result line\n{self.describe()}"
        assert r["error_count"] == 0 and self.proc.returncode == 0, self.describe()
        seen = set(r.get("brokers", []))
        assert seen <= ferry_addresses, \
            f"{self.label} saw non-ferry brokers {sorted(seen - ferry_addresses)}\n{self.describe()}"
        assert self.connects(), f"strace saw no connect() of {self.label}\n{self.describe()}"
        bad = self.dial_problems()
        assert not bad, "\n".join(bad) + "\n" + self.describe()


def fill(kafka_cluster, topic, run, n):
    """n records "run-i" (key i), produced straight to the brokers (setup,
    not under test) with Debian's librdkafka."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": kafka_cluster.bootstrap(), "enable.idempotence": True,
                  "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=str(i).encode(), value=f"{run}-{i}".encode())
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0, "records left unflushed"
    assert sum(kafka_cluster.end_offsets(topic).values()) == n


def wait_until(pred, timeout, what, *peers):
    """Polls pred() every 50 ms until truthy (returns it); fails after
    timeout naming `what`, or at once when a peer exited early."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        for p in peers:
            if not p.running():
                p.wait(1)
                raise AssertionError(f"{p.label} exited while waiting for {what}\n{p.describe()}")
        if time.monotonic() >= deadline:
            raise AssertionError(f"no {what} after {timeout}s; "
                                 + "; ".join(f"{p.label}: {p.progress()}" for p in peers))
        time.sleep(0.05)


def reload_modified(ferry, timeout=60):
    """Modifies the cluster (toggles FERRY_CLUSTER_KEY at the end of its
    section, the last of the file) and reloads with ferryctl; returns the
    cluster's lastReplacement once the replaced generation is gone."""
    text = ferry.config_path.read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith(f"{FERRY_CLUSTER_KEY} =")]
    n = getattr(ferry, "_reloads", 0) + 1
    ferry._reloads = n
    lines.append(f"{FERRY_CLUSTER_KEY} = {10 + n}m")
    ferry.config_path.write_text("\n".join(lines) + "\n")
    before = ferry.cluster(CLUSTER).get("lastReplacement")
    r = ferry.ctl("--json", "reload", check=False, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    body = json.loads(r.stdout)
    assert body.get("clustersModified") == [CLUSTER], body
    deadline = time.monotonic() + timeout
    while True:
        rep = ferry.cluster(CLUSTER).get("lastReplacement")
        if rep and rep != before:
            return rep      # the replaced generation is gone
        if time.monotonic() >= deadline:
            raise AssertionError(f"no replacement after the reload: {rep}")
        time.sleep(0.1)


def serving_workers(ferry):
    return [w["pid"] for w in ferry.cluster(CLUSTER).get("workers", [])
            if w.get("state") == "accepting"]


def kill_worker(ferry, timeout=30):
    """SIGKILL of the (first) serving worker; waits until the supervisor has
    a new one serving. Returns (killed pid, new pid, seconds to serve)."""
    old = serving_workers(ferry)
    assert old, ferry.cluster(CLUSTER)
    t0 = time.monotonic()
    os.kill(old[0], signal.SIGKILL)
    deadline = t0 + timeout
    while True:
        now = serving_workers(ferry)
        new = [p for p in now if p not in old]
        if new and old[0] not in now:
            return old[0], new[0], time.monotonic() - t0
        if time.monotonic() >= deadline:
            raise AssertionError(f"worker {old[0]} not replaced after {timeout}s: "
                                 f"{ferry.cluster(CLUSTER)}")
        time.sleep(0.05)
