"""
API versions through ferry against real Apache Kafka (issue 19, versions):

- ferry's ApiVersions answer equals the broker's for every API, except
  where ferry's version policy (worker/kafka/apiversions.c, read through
  tests/peers/api_policy) caps or refuses it; every such difference has a
  written reason there, and the test fails on a version or a key the broker
  advertises that ferry drops without one (a newer broker's Produce v14, a
  key the codec does not know). The table is printed at the end of the run.
- the codec knows every API key of the pinned broker by its schema's name,
  with the schema's first flexible version (its header rule);
- the versions raised here are exercised on the wire through ferry:
  Produce v13 (topic ids) and Fetch v18, their KIP-951 leader hints
  rewritten; Metadata v12 with topic ids; ApiVersions v5 (KIP-1242: the
  broker checks that ferry's broker port for node N reaches node N);
  StreamsGroupTopologyDescriptionUpdate (93) forwarded and
  UnregisterController (94) refused;
- the Java client of the broker's version, through ferry, sends the newest
  versions (Produce v13, Fetch v18, ApiVersions v5, Metadata v13) with exact
  counts and no connect() outside ferry's ports.
"""

import json
import zipfile

import pytest

from . import apipolicy
from .conftest import CLUSTER, ferry_addresses, kcluster, report, unique_name
from .ops import ferry_node_addresses, kwire
from .test_clients import produce_then_consume

NOT_LEADER_OR_FOLLOWER = 6
REBOOTSTRAP_REQUIRED = 129


@pytest.fixture(scope="module")
def policy():
    return apipolicy.load()


def test_ferry_apiversions_follow_the_policy(kafka_cluster, kafka_ferry, policy):
    ferry = kafka_ferry()
    node = kafka_cluster.running_nodes()[0]
    broker = kcluster.api_versions("127.0.0.1", node.ports["PLAINTEXT"])
    host, port = ferry.bootstrap(CLUSTER).rsplit(":", 1)
    via_bootstrap = kcluster.api_versions(host, int(port))
    for p in ferry.clusters[CLUSTER]["brokers"]:
        assert kcluster.api_versions("127.0.0.1", p) == via_bootstrap, \
            f"ferry's bootstrap and broker port {p} disagree"
    rows, problems = apipolicy.compare(policy, broker, via_bootstrap)
    report.append(f"ApiVersions, Kafka {kafka_cluster.version} broker vs ferry "
                  f"({len(broker)} keys advertised by the broker, {len(via_bootstrap)} by ferry); "
                  f"every other key identical:")
    for k, name, b, f, why in rows:
        report.append(f"  {k:>3} {name:<38} broker {b:<8} ferry {f:<8} {why}")
    assert not problems, "ferry's ApiVersions differ from its policy:\n" + "\n".join(problems)
    missing = policy.unexplained(broker)
    assert not missing, ("the broker advertises what ferry drops without a written reason "
                         "(worker/kafka/apiversions.c):\n"
                         + "\n".join(f"  {k} {n}: {w}" for k, n, w in missing))
    # never more than the broker
    for k, r in via_bootstrap.items():
        assert k in broker and broker[k][0] <= r[0] and r[1] <= broker[k][1], (k, r, broker.get(k))
    # the APIs every client of this package needs are there
    for key in (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 18, 22):
        assert key in via_bootstrap, f"ferry drops API key {key}"


def _schemas(jar):
    """{api_key: (name, valid_versions, first_flexible or -1)} of the
    request schemas in a kafka-clients jar."""
    out = {}
    with zipfile.ZipFile(jar) as z:
        for name in z.namelist():
            if not (name.startswith("common/message/") and name.endswith("Request.json")):
                continue
            text = "\n".join(line for line in z.read(name).decode().splitlines()
                             if not line.lstrip().startswith("//"))
            d = json.loads(text)
            if "apiKey" not in d:
                continue
            flex = d.get("flexibleVersions", "none")
            out[d["apiKey"]] = (d["name"][:-len("Request")], d["validVersions"],
                                -1 if flex == "none" else int(flex.rstrip("+")))
    return out


def test_codec_knows_every_key_of_the_broker(kafka_cluster, policy):
    jar = next((kcluster.kafka_home(kafka_cluster.version) / "client").glob("kafka-clients-*.jar"))
    schemas = _schemas(jar)
    node = kafka_cluster.running_nodes()[0]
    broker = kcluster.api_versions("127.0.0.1", node.ports["PLAINTEXT"])
    unknown = sorted(k for k in broker if k > policy.max_known)
    assert not unknown, f"the broker advertises keys the codec does not know: {unknown}"
    bad = []
    for k, (name, valid, flex) in sorted(schemas.items()):
        row = policy.rows.get(k)
        if row is None:
            bad.append(f"key {k} {name}: not in the codec's table")
            continue
        if row["name"] != name:
            bad.append(f"key {k}: the codec calls it {row['name']}, the schema {name}")
        if valid != "none" and row["flexible_from"] != flex:
            bad.append(f"key {k} {name}: flexible from v{flex} in the schema, "
                       f"v{row['flexible_from']} in the codec")
    assert not bad, "\n".join(bad)


def _hint_ok(resp, partition, leader, port, host="127.0.0.1"):
    p = resp["partitions"][partition]
    return (p["error"] == NOT_LEADER_OR_FOLLOWER and p["current_leader"]
            and p["current_leader"]["leader_id"] == leader
            and resp["node_endpoints"] == [{"node_id": leader, "host": host, "port": port,
                                            "rack": None}])


def test_raised_versions_on_the_wire(kafka_cluster, kafka_ferry, workdir):
    ferry = kafka_ferry()
    fport = {nid: int(a.rsplit(":", 1)[1]) for nid, a in ferry_node_addresses(ferry).items()}
    bport = {nid: n.ports["PLAINTEXT"] for nid, n in kafka_cluster.nodes.items()}
    topic = unique_name("v13")
    kafka_cluster.create_topic(topic, 1, replication_factor=1)
    bhost, bp = ferry.bootstrap(CLUSTER).rsplit(":", 1)

    # Metadata v12 through ferry: topic ids, ferry's addresses only
    md = kwire.metadata_v12(bhost, int(bp), [topic])
    assert {f"{h}:{p}" for h, p in md["brokers"].values()} <= ferry_addresses(ferry), md
    t = md["topics"][topic]
    assert t["error"] == 0, md
    tid, leader = t["topic_id"], t["partitions"][0]["leader"]
    other = next(n for n in sorted(bport) if n != leader)

    # Produce v13 (by topic id) to the leader through ferry, then Fetch v18
    values = [f"v13-{i}" for i in range(5)]
    r = kwire.produce("127.0.0.1", fport[leader], tid, 0, values, version=13)
    assert r["partitions"][0]["error"] == 0 and r["partitions"][0]["base_offset"] == 0, r
    f = kwire.fetch("127.0.0.1", fport[leader], tid, 0, version=18)
    assert f["error"] == 0 and f["partitions"][0]["error"] == 0, f
    assert f["partitions"][0]["high_watermark"] == len(values), f
    assert all(v.encode() in f["partitions"][0]["records"] for v in values), f

    # the same to a broker that does not lead it: NOT_LEADER_OR_FOLLOWER with
    # the KIP-951 hints, rewritten by ferry to its own address for the leader
    via = kwire.produce("127.0.0.1", fport[other], tid, 0, [b"refused"], version=13)
    assert _hint_ok(via, 0, leader, fport[leader]), f"Produce v13 via ferry: {via}"
    direct = kwire.produce("127.0.0.1", bport[other], tid, 0, [b"refused"], version=13)
    assert _hint_ok(direct, 0, leader, bport[leader], "localhost"), f"Produce v13 direct: {direct}"
    via = kwire.fetch("127.0.0.1", fport[other], tid, 0, version=18)
    assert _hint_ok(via, 0, leader, fport[leader]), f"Fetch v18 via ferry: {via}"
    direct = kwire.fetch("127.0.0.1", bport[other], tid, 0, version=18)
    assert _hint_ok(direct, 0, leader, bport[leader], "localhost"), f"Fetch v18 direct: {direct}"
    assert kafka_cluster.end_offsets(topic) == {0: len(values)}

    # ApiVersions v5 (KIP-1242): ferry's port for node N reaches node N, so
    # the broker's cluster and node check passes; a wrong node id is caught
    # by the broker and its REBOOTSTRAP_REQUIRED comes back unchanged
    v0 = kcluster.api_versions(bhost, int(bp))
    for nid, p in fport.items():
        err, keys = kwire.api_versions_v5("127.0.0.1", p, md["cluster_id"], nid)
        assert err == 0 and keys == v0, f"ApiVersions v5 node {nid} via ferry: {err} {keys}"
        err, _ = kwire.api_versions_v5("127.0.0.1", p, md["cluster_id"], nid % 3 + 1)
        assert err == REBOOTSTRAP_REQUIRED, f"ApiVersions v5 to node {nid} naming another: {err}"
    err, keys = kwire.api_versions_v5(bhost, int(bp))
    assert err == 0 and keys == v0

    # 93 forwarded, byte for byte; 94 refused (ferry closes the connection)
    body = (kwire.compact_string("no-such-group") + kwire.compact_string("m1")
            + b"\x00\x00\x00\x01" + kwire.uvarint(1) + kwire.uvarint(1) + b"\x00" + b"\x00")
    direct = kwire.flexible_request("127.0.0.1", bport[leader], 93, 0, body)
    assert kwire.flexible_request("127.0.0.1", fport[leader], 93, 0, body) == direct
    with pytest.raises(ConnectionError):
        kwire.flexible_request("127.0.0.1", fport[leader], 94, 0, b"\x00\x00\x00\x63\x00")
    assert "refused request UnregisterController (key 94) v0" in ferry.log_path.read_text()


def test_java_client_sends_the_newest_versions(kafka_cluster, kafka_ferry, kafka_topic, run_client,
                                               workdir, policy):
    ferry = kafka_ferry()
    topic = kafka_topic("vj")
    env = apipolicy.java_debug_env(workdir)
    p, c = produce_then_consume(run_client, kafka_cluster, ferry, "java", topic, 1000, env)
    sent = apipolicy.sent_versions(p.stderr + c.stderr)
    report.append(f"Java client {kafka_cluster.version} through ferry sent: "
                  + ", ".join(f"{a} v{'/'.join(map(str, sorted(v)))}" for a, v in sorted(sent.items())))
    caps = {name: policy.rows[k]["max"] for k, name in
            ((0, "PRODUCE"), (1, "FETCH"), (3, "METADATA"), (10, "FIND_COORDINATOR"),
             (18, "API_VERSIONS"))}
    for api, cap in caps.items():
        assert max(sent.get(api, {-1})) == cap, f"{api}: sent {sent.get(api)}, ferry's cap v{cap}"
