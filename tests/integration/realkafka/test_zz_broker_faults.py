"""
Broker faults under load, through ferry (issue 19): a topic with
replication factor 3 and min.insync.replicas=2, an idempotent acks=all
producer and a group consumer (the Java client, one JVM under strace),
while the leader of a partition is killed with SIGKILL and comes back, and
then every broker in turn is stopped (controlled shutdown) and started
again, the next one only once every partition has its full ISR again.

No acknowledged record may be lost, none may be written twice (the log
holds exactly the records acknowledged), the clients must recover through
ferry after each fault (acknowledgements and records resume on every
partition) and never dial a broker. Figures: records, losses, duplicates,
redeliveries, the producer's retries, client-visible errors, connections,
and per fault how long the partitions stalled and how long the broker took
to come back in sync.

The file name sorts last: it stops and kills brokers of the package's one
cluster. It leaves the cluster as it found it, on failure too: three nodes
running, every partition of its topic and of __consumer_offsets in sync,
leaders back on their preferred replicas.
"""

import time

from .conftest import unique_name
from .ops import (check_load_result, check_session_dials, ferry_node_addresses, figures,  # noqa: F401
                  java_session, load_step, load_summary, partitions, restore, wait_healthy,
                  wait_load_flowing)

RATE = 200          # records/s
PARTS = [0, 1, 2]


def test_leader_kill_and_rolling_restart_under_load(kafka_cluster, kafka_ferry, java_session):  # noqa: F811
    ferry = kafka_ferry()
    by_id = ferry_node_addresses(ferry)
    topic, group, run = unique_name("faults"), unique_name("faults-g"), unique_name("r")
    kafka_cluster.create_topic(topic, 3, replication_factor=3, min_isr=2)
    s = java_session(ferry)
    events = []
    t_start = time.monotonic()
    try:
        cfg = s("describe-configs", "topic", topic, "min.insync.replicas")["configs"]
        assert cfg["min.insync.replicas"]["value"] == "2", cfg
        s("load-start", topic, group, RATE, run)
        wait_load_flowing(s, len(PARTS))

        def fault(name, action):
            took, stall, cstall, _ = load_step(s, PARTS, action)
            events.append((name, took, stall, cstall))

        def back(node):
            def start():
                kafka_cluster.restart_node(node)
                wait_healthy(kafka_cluster, [topic])
            fault(f"node {node} started, ISR full", start)

        # kill -9 of partition 0's leader
        victim = partitions(kafka_cluster, topic)[0]["leader"]
        fault(f"kill -9 node {victim} (leader of p0)", lambda: kafka_cluster.kill_node(victim))
        back(victim)

        # rolling restart
        for node in sorted(kafka_cluster.nodes):
            fault(f"stop node {node}", lambda: kafka_cluster.stop_node(node))
            back(node)

        s("elect-preferred", "*")   # leaders back where they were (no wait: Kafka's default)
        r = s("load-stop", 120)
        offsets = s("group-offsets", group)["offsets"]
    finally:
        restore(kafka_cluster, [topic])
    took_all = time.monotonic() - t_start
    s.close()
    check_session_dials(s)
    check_load_result(r, kafka_cluster, topic, by_id.values())
    ends = kafka_cluster.end_offsets(topic)
    assert offsets == {f"{topic}-{p}": o for p, o in ends.items()}, (offsets, ends)
    assert sorted(n.id for n in kafka_cluster.running_nodes()) == [1, 2, 3]

    figures(f"broker faults (Java {s.lib_version}, {RATE}/s, RF 3, min ISR 2, through ferry, "
            f"{took_all:.0f}s): {load_summary(r, s)}")
    for name, took, stall, cstall in events:
        figures(f"  {name}: {took:.1f}s, longest ack gap {stall} ms, record gap {cstall} ms")
