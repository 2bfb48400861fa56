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
