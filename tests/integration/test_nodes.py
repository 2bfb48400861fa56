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
