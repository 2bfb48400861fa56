"""
Node-id to broker-port mapping when the upstream cluster has a broker ferry
has no port for: it must never reach a client as an upstream address, it is
counted, and it is reported on the cluster's status (issue: protocol
fidelity, item 3).
"""

import time

from conftest import kafka_metadata


def test_unknown_node_reported_and_never_leaked(mock_factory, ferry_factory):
    mock = mock_factory("U", 3, ["nodes:3"])
    f = ferry_factory({"U": mock}, start=False)
    c = f.clusters["U"]
    # Serve only nodes 1 and 2: node 3 has no broker port.
    text = f.config_text.replace(
        f"broker_ports = {c['brokers'][0]}-{c['brokers'][-1]}",
        f"broker_ports = {c['brokers'][0]}-{c['brokers'][1]}").replace(
        "node_ids = 1-3", "node_ids = 1-2")
    assert text != f.config_text
    f.config_path.write_text(text)
    f.start()

    brokers = kafka_metadata("127.0.0.1", c["bootstrap"])["brokers"]
    ports = sorted(p for (_, p) in brokers.values())
    assert sorted(brokers) == [1, 2], f"metadata brokers {brokers}"
    assert ports == c["brokers"][:2], f"metadata brokers {brokers}"
    upstream_ports = {int(a.rsplit(":", 1)[1]) for a in mock.bootstrap.split(",")}
    assert not upstream_ports & set(ports), "an upstream address leaked"

    deadline = time.time() + 5
    while True:
        cl = f.cluster("U")
        unknown = cl.get("unknownNodes")
        if unknown or time.time() > deadline:
            break
        time.sleep(0.1)
    assert [u["nodeId"] for u in unknown] == [3], cl
    assert int(unknown[0]["upstream"].rsplit(":", 1)[1]) in upstream_ports
    assert unknown[0]["since"]
    metrics = f.http("/metrics")[2].decode()
    line = [l for l in metrics.splitlines() if l.startswith('ferry_unknown_node_total{cluster="U"}')]
    assert line and int(line[0].split()[-1]) >= 1, line

    # A reload that covers node 3 (the original text maps 1-3 to three
    # ports) clears the report and serves it.
    f.config_path.write_text(f.config_text)
    r = f.ctl("reload")
    assert r.returncode == 0, r.stdout + r.stderr
    brokers = kafka_metadata("127.0.0.1", c["bootstrap"])["brokers"]
    assert sorted(p for (_, p) in brokers.values()) == c["brokers"]
    assert f.cluster("U")["unknownNodes"] == []


def test_cluster_with_more_broker_ports_than_one_fd_batch(mock_factory, ferry_factory):
    """Listening sockets travel to the worker in batches (SCM_RIGHTS carries
    a bounded number per message): a cluster with 100 broker ports starts and
    every port, the last one too, serves Kafka."""
    from conftest import allocate_ports
    mock = mock_factory("W", 3, ["wide:3"])
    f = ferry_factory({"W": mock}, start=False)
    c = f.clusters["W"]
    run = allocate_ports(100)
    text = f.config_text.replace(
        f"broker_ports = {c['brokers'][0]}-{c['brokers'][-1]}",
        f"broker_ports = {run[0]}-{run[-1]}").replace("node_ids = 1-3",
                                                     "node_ids = 101-197,1-3")
    assert text != f.config_text
    f.config_path.write_text(text)
    f.start()
    assert f.cluster("W")["state"] == "accepting"
    assert len(f.cluster("W")["listeners"]) == 101
    # The mock's nodes 1-3 are served on the last three ports (the second
    # batch of sockets); 101-197 do not exist upstream.
    for port in (c["bootstrap"], run[97], run[98], run[99]):
        brokers = kafka_metadata("127.0.0.1", port)["brokers"]
        assert {n: p for n, (_, p) in brokers.items()} == {1: run[97], 2: run[98], 3: run[99]}, \
            (port, brokers)


# ---- a scripted upstream: node 1 moves between two brokers ----------------

import socket as _socket
import struct as _struct
import threading as _threading


def _read_frame(s):
    head = b""
    while len(head) < 4:
        b = s.recv(4 - len(head))
        if not b:
            return None
        head += b
    n = _struct.unpack(">i", head)[0]
    body = b""
    while len(body) < n:
        b = s.recv(n - len(body))
        if not b:
            return None
        body += b
    return body


def _kstr(s):
    b = s.encode()
    return _struct.pack(">h", len(b)) + b


class _FakeKafka:
    """Answers ApiVersions v0 (Metadata 0-1 offered) and Metadata v0/v1
    listing node 1 at self.node1 = (host, port); counts connections."""

    def __init__(self):
        self.node1 = None
        self.connections = 0
        self.sock = _socket.socket()
        self.sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.stop = False
        _threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            _threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        with c:
            while True:
                body = _read_frame(c)
                if body is None:
                    return
                key, ver, corr = _struct.unpack_from(">hhi", body)
                if key == 18:
                    out = _struct.pack(">ihi", corr, 0, 2) + _struct.pack(">hhh", 3, 0, 1) + \
                        _struct.pack(">hhh", 18, 0, 0)
                elif key == 3:
                    host, port = self.node1
                    out = _struct.pack(">ii", corr, 1) + _struct.pack(">i", 1) + _kstr(host) + \
                        _struct.pack(">i", port)
                    if ver >= 1:
                        out += _struct.pack(">h", -1)          # rack null
                        out += _struct.pack(">i", 1)           # controller id
                    out += _struct.pack(">i", 0)               # no topics
                else:
                    return
                c.sendall(_struct.pack(">i", len(out)) + out)

    def close(self):
        self.stop = True
        self.sock.close()


def _apiversions_ok(port):
    with _socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        req = _struct.pack(">hhih", 18, 0, 77, 1) + b"t"
        s.sendall(_struct.pack(">i", len(req)) + req)
        body = _read_frame(s)
        assert body is not None, "no ApiVersions answer"
        assert _struct.unpack_from(">ih", body) == (77, 0)


def test_node_that_moves_upstream_is_followed(ferry_factory):
    upstream, b1, b2 = _FakeKafka(), _FakeKafka(), _FakeKafka()
    try:
        upstream.node1 = ("127.0.0.1", b1.port)
        f = ferry_factory({"N": upstream})
        c = f.clusters["N"]
        broker_port = c["brokers"][0]   # node 1
        # The worker learned node 1 by itself: its broker port reaches b1.
        _apiversions_ok(broker_port)
        assert (b1.connections, b2.connections) == (1, 0)

        # Upstream now says node 1 lives at b2; a Metadata answer through
        # ferry carries that news (and only ferry's address to the client).
        upstream.node1 = ("127.0.0.1", b2.port)
        brokers = kafka_metadata("127.0.0.1", c["bootstrap"])["brokers"]
        assert brokers == {1: ("127.0.0.1", broker_port)}, brokers
        _apiversions_ok(broker_port)
        assert (b1.connections, b2.connections) == (1, 1), "node 1's move was not followed"
        assert "upstream broker moved" in f.log_path.read_text()
    finally:
        for x in (upstream, b1, b2):
            x.close()
