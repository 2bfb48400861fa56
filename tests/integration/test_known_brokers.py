"""
Brokers known across generations (issue 11, item 6): the supervisor keeps
the node id -> upstream address map its workers learn and hands it to every
new worker, so a client that connects straight to a broker port right after
a worker restart or a reload is served at once, with no metadata fetch by
the new worker -- even when that fetch could not succeed (an upstream that
requires SASL; here: an upstream bootstrap address that stops answering).

How "no metadata fetch" is proven: the cluster's only `upstream` address is
a relay in this test process in front of the mock's first broker; the
worker's own metadata fetch always goes there, while broker-port clients go
to the learned broker addresses directly. Before the kill/reload the relay
switches to refusing (accept + close, counted): any fetch by the new worker
is counted, fails, and leaves a broker-port client without an upstream.
"""

import os
import signal
import socket
import threading
import time

from conftest import kafka_metadata, serving_pids, wait_for, workers_keys

TOPIC = "kb"


class Relay:
    """TCP relay 127.0.0.1:port -> target, counting the connections it
    accepts; refuse() makes it close every new one at once (still counted)."""

    def __init__(self, target):
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.ls.settimeout(0.2)
        self.port = self.ls.getsockname()[1]
        self.accepted = 0
        self.refused = 0
        self.refusing = False
        self.stopping = False
        self.socks = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def address(self):
        return f"127.0.0.1:{self.port}"

    def refuse(self):
        with self.lock:
            self.refusing = True

    def counts(self):
        with self.lock:
            return self.accepted, self.refused

    def _pipe(self, a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _run(self):
        while not self.stopping:
            try:
                c, _ = self.ls.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.accepted += 1
                refusing = self.refusing
                if refusing:
                    self.refused += 1
            if refusing:
                c.close()
                continue
            try:
                u = socket.create_connection(self.target, timeout=3)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.socks += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def close(self):
        self.stopping = True
        self.ls.close()
        self.thread.join(2)
        with self.lock:
            for s in self.socks:
                try:
                    s.close()
                except OSError:
                    pass


def start_behind_relay(mock_factory, ferry_factory, request, extra_ferry="", workers=1):
    mock = mock_factory("K", 3, [f"{TOPIC}:3"])
    relay = Relay(mock.addresses[0])
    request.addfinalizer(relay.close)
    f = ferry_factory({"K": mock}, start=False, extra_ferry=extra_ferry,
                      cluster_keys=workers_keys(workers))
    text = f.config_text.replace(f"upstream = {mock.bootstrap}", f"upstream = {relay.address()}")
    assert text != f.config_text
    f.config_text = text
    f.config_path.write_text(text)
    f.start()
    # A client through the bootstrap port (relayed): the worker learns the
    # brokers (from its start fetch and from this response) and reports them.
    md = kafka_metadata("127.0.0.1", f.clusters["K"]["bootstrap"], topics=[TOPIC])
    assert sorted(md["brokers"]) == [1, 2, 3], md
    want = {i + 1: a for i, a in enumerate(mock.addresses)}
    wait_for(lambda: {b["nodeId"]: b["upstream"] for b in f.cluster("K")["knownBrokers"]} == want,
             5, what="the supervisor knows the three brokers")
    assert f.cluster("K")["upstream"]["state"] == "reachable"
    return mock, relay, f


def served_on_broker_ports(f, mock):
    """Every broker port answers Metadata at once, from the upstream broker
    (never an upstream address), within one short client timeout."""
    c = f.clusters["K"]
    for port in c["brokers"]:
        t0 = time.monotonic()
        md = kafka_metadata("127.0.0.1", port, topics=[TOPIC], timeout=3.0)
        took = time.monotonic() - t0
        assert {n: p for n, (_, p) in md["brokers"].items()} == \
            dict(zip(c["node_ids"], c["brokers"])), md
        assert sorted(md["topics"][TOPIC]["partitions"]) == [0, 1, 2], md
        print(f"broker port {port} served in {took * 1000:.1f} ms")


def new_serving_pid(f, old):
    def pred():
        pids = serving_pids(f.cluster("K"))
        return pids if pids and old not in pids else None
    return wait_for(pred, 10, what="a new serving worker")[0]


def test_broker_port_served_after_worker_kill_without_fetch(mock_factory, ferry_factory,
                                                            request, workers_n):
    """With workers = 2 one worker is killed: its replacement (same
    generation) gets the map too and makes no fetch."""
    mock, relay, f = start_behind_relay(mock_factory, ferry_factory, request,
                                        workers=workers_n)
    pids = serving_pids(f.cluster("K"))
    assert len(pids) == workers_n
    old = pids[0]
    relay.refuse()
    before = relay.counts()
    os.kill(old, signal.SIGKILL)

    def replaced():
        now = serving_pids(f.cluster("K"))
        new = [p for p in now if p not in pids]
        return new[0] if len(now) == workers_n and new else None
    pid = wait_for(replaced, 10, what="the replacement worker")
    served_on_broker_ports(f, mock)
    time.sleep(0.3)  # a start-up fetch would have reached the relay by now
    assert relay.counts() == before, \
        f"the new worker {pid} connected to the upstream bootstrap (a metadata fetch): " \
        f"{before} -> {relay.counts()}"
    log = f.log_path.read_text()
    assert any(f"pid={pid}" in l and "upstream brokers known from earlier generations" in l
               for l in log.splitlines()), "no log line of the inherited map"
    cl = f.cluster("K")
    assert cl["upstream"]["state"] == "reachable", cl["upstream"]
    assert len(cl["knownBrokers"]) == 3


def test_broker_port_served_after_reload_without_fetch(mock_factory, ferry_factory, request):
    mock, relay, f = start_behind_relay(mock_factory, ferry_factory, request)
    old = serving_pids(f.cluster("K"))[0]
    relay.refuse()
    before = relay.counts()
    # a modification that keeps the upstream: a new generation
    f.config_path.write_text(f.config_text + "idle_timeout = 9m\n")
    f.ctl("reload")
    pid = new_serving_pid(f, old)
    assert f.cluster("K")["generation"] >= 2
    served_on_broker_ports(f, mock)
    time.sleep(0.3)
    assert relay.counts() == before, \
        f"the new generation's worker {pid} fetched metadata: {before} -> {relay.counts()}"


def test_upstream_change_does_not_carry_the_map(mock_factory, ferry_factory, request):
    """A reload to another upstream starts from nothing: the brokers of the
    old upstream are never used for the new one (with reload_upstream_check
    off, so no probe relearns them before the new worker serves)."""
    mock, relay, f = start_behind_relay(mock_factory, ferry_factory, request,
                                        extra_ferry="reload_upstream_check = off")
    other = mock_factory("O", 3, ["other:1"])
    old = serving_pids(f.cluster("K"))[0]
    f.config_path.write_text(f.config_text.replace(f"upstream = {relay.address()}",
                                                   f"upstream = {other.bootstrap}"))
    f.ctl("reload")
    new_serving_pid(f, old)
    c = f.clusters["K"]
    for port in c["brokers"]:
        md = wait_for(lambda: kafka_metadata("127.0.0.1", port, timeout=3.0),
                      10, what=f"broker port {port} served")
        assert "other" in md["topics"] and TOPIC not in md["topics"], md
    want = {i + 1: a for i, a in enumerate(other.addresses)}
    wait_for(lambda: {b["nodeId"]: b["upstream"] for b in f.cluster("K")["knownBrokers"]} == want,
             5, what="the map holds the new upstream's brokers only")
