"""
Leader movement while producing and fetching, through ferry (issue 19):
an idempotent acks=all producer and a group consumer (the Java client, one
JVM under strace) run while partition leadership moves three ways: a
reassignment that rotates the replicas followed by a preferred leader
election, a reassignment that takes the leader out of the replica set (and
one that puts it back, copying the data), and a kill -9 of a leader.

The KIP-951 leader hints are checked on the wire: after each move a raw
Produce v12 / Fetch v17 sent to the old leader through ferry's broker port
is answered NOT_LEADER_OR_FOLLOWER (or FENCED_LEADER_EPOCH for a stale
epoch) with CurrentLeader and NodeEndpoints, and the endpoint is the new
leader at ferry's address for it, where the same request sent straight to
the broker names the broker's own address. The clients recover through
ferry: every acknowledged record is received, none is written twice, and
strace sees no connect() outside ferry's ports.
"""

import time

from .conftest import unique_name
from .ops import (check_load_result, check_session_dials, ferry_node_addresses, figures,  # noqa: F401
                  java_session, kwire, load_step, load_summary, partitions, restore, wait_healthy,
                  wait_load_flowing, wait_until)

RATE = 200          # records/s
NOT_LEADER_OR_FOLLOWER = 6
FENCED_LEADER_EPOCH = 74


def check_hint(resp, partition, error, leader, ferry_port, via):
    """A response to the old leader: `error` with CurrentLeader `leader` and
    NodeEndpoints naming that leader at ferry's address only."""
    p = resp["partitions"][partition]
    assert p["error"] == error, f"{via}: {resp}"
    assert p["current_leader"] and p["current_leader"]["leader_id"] == leader, f"{via}: {resp}"
    assert resp["node_endpoints"] == [{"node_id": leader, "host": "127.0.0.1", "port": ferry_port,
                                       "rack": None}], f"{via}: {resp}"


def test_leader_movement_under_load(kafka_cluster, kafka_ferry, java_session):  # noqa: F811
    ferry = kafka_ferry()
    by_id = ferry_node_addresses(ferry)
    fport = {nid: int(a.rsplit(":", 1)[1]) for nid, a in by_id.items()}
    bport = {nid: n.ports["PLAINTEXT"] for nid, n in kafka_cluster.nodes.items()}
    topic, group, run = unique_name("lead"), unique_name("lead-g"), unique_name("r")
    kafka_cluster.create_topic(topic, 3)
    s = java_session(ferry)
    steps = []
    try:
        topic_id = s("describe-topic", topic)["topic_id"]
        s("load-start", topic, group, RATE, run)
        wait_load_flowing(s, 3)

        # 1. replicas of partition 0 rotated, then the preferred leader elected
        p0 = partitions(kafka_cluster, topic)[0]
        old0, rotated = p0["leader"], p0["replicas"][1:] + p0["replicas"][:1]
        new0 = rotated[0]

        def rotate_and_elect():
            s("reassign", topic, 0, ",".join(map(str, rotated)))
            wait_until(lambda: not s("list-reassignments")["reassignments"], 30, "rotation done")
            assert s("elect-preferred", topic, 0)["results"] == {f"{topic}-0": None}
            wait_until(lambda: partitions(kafka_cluster, topic)[0]["leader"] == new0, 30,
                       f"node {new0} leads {topic}-0")
        took, stall, cstall, _ = load_step(s, [0], rotate_and_elect)
        steps.append(("rotate+elect p0", took, stall, cstall))
        probe = [b"kip951-probe"]   # refused by the old leader: never written
        check_hint(kwire.produce_v12("127.0.0.1", fport[old0], topic, 0, probe), 0,
                   NOT_LEADER_OR_FOLLOWER, new0, fport[new0], "Produce v12 to the old leader via ferry")
        direct = kwire.produce_v12("127.0.0.1", bport[old0], topic, 0, probe)
        assert direct["node_endpoints"] == [{"node_id": new0, "host": "localhost", "port": bport[new0],
                                             "rack": None}], direct
        check_hint(kwire.fetch_v17("127.0.0.1", fport[new0], topic_id, 0, leader_epoch=0), 0,
                   FENCED_LEADER_EPOCH, new0, fport[new0], "Fetch v17 with a stale epoch via ferry")

        # 2. partition 1's leader taken out of its replicas, then put back
        p1 = partitions(kafka_cluster, topic)[1]
        old1 = p1["leader"]
        without = [r for r in p1["replicas"] if r != old1]

        def drop_leader():
            s("reassign", topic, 1, ",".join(map(str, without)))
            wait_until(lambda: not s("list-reassignments")["reassignments"], 30, "reassignment done")
            wait_until(lambda: partitions(kafka_cluster, topic)[1]["replicas"] == without, 30,
                       f"{topic}-1 on {without}")
        took, stall, cstall, _ = load_step(s, [1], drop_leader)
        steps.append(("p1 off its leader", took, stall, cstall))
        new1 = partitions(kafka_cluster, topic)[1]["leader"]
        assert new1 in without
        check_hint(kwire.produce_v12("127.0.0.1", fport[old1], topic, 1, probe), 1,
                   NOT_LEADER_OR_FOLLOWER, new1, fport[new1], "Produce v12 to a former replica via ferry")
        check_hint(kwire.fetch_v17("127.0.0.1", fport[old1], topic_id, 1), 1,
                   NOT_LEADER_OR_FOLLOWER, new1, fport[new1], "Fetch v17 to a former replica via ferry")

        def put_back():
            s("reassign", topic, 1, ",".join(map(str, without + [old1])))
            wait_until(lambda: not s("list-reassignments")["reassignments"], 60, "copy done")
            wait_until(lambda: sorted(partitions(kafka_cluster, topic)[1]["isr"]) == [1, 2, 3], 60,
                       f"{topic}-1 back on 3 replicas")
        took, stall, cstall, _ = load_step(s, [1], put_back)
        steps.append(("p1 back on 3 replicas (copy)", took, stall, cstall))

        # 3. kill -9 of partition 2's leader; it comes back and catches up
        victim = partitions(kafka_cluster, topic)[2]["leader"]
        t_kill = time.monotonic()
        took, stall, cstall, _ = load_step(s, [2], lambda: kafka_cluster.kill_node(victim))
        recovered = time.monotonic() - t_kill
        steps.append((f"kill -9 node {victim} (leader of p2)", took, stall, cstall))
        t0 = time.monotonic()
        kafka_cluster.restart_node(victim)
        wait_healthy(kafka_cluster, [topic])
        back = time.monotonic() - t0
        s("elect-preferred", "*")   # leaders back on their preferred replicas, still under load

        r = s("load-stop", 90)
    finally:
        restore(kafka_cluster, [topic])
    s.close()
    check_session_dials(s)
    check_load_result(r, kafka_cluster, topic, by_id.values())
    figures(f"leader movement (Java {s.lib_version}, {RATE}/s through ferry): {load_summary(r, s)}")
    for name, took, stall, cstall in steps:
        figures(f"  {name}: {took:.1f}s, longest ack gap {stall} ms, record gap {cstall} ms")
    figures(f"  node {victim}: acks resumed {recovered:.1f}s after the kill; back with a full ISR "
            f"{back:.1f}s after its restart")
