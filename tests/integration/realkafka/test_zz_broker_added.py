"""
A broker added to the cluster behind ferry (issue 19): a fourth node (a
broker) joins the running cluster and a partition is reassigned onto it,
led by it. While ferry's `node_ids`/`broker_ports` do not name node 4 it is
dropped from everything clients see (Metadata, DescribeCluster, the
NodeEndpoints of a Produce to the old leader: no upstream address leaks),
counted (ferry_unknown_node_total) and listed under unknownNodes, and the
partition it leads cannot be produced to. A reload that adds the node id
and a fourth broker port makes it reachable: the producer and the consumer
that ran across the reload (the Java client under strace) get through to
it without a single connection of theirs closed (the clients' own
connection counts), every acknowledged record is received, none twice.

The file name sorts last: it adds a node to the package's one cluster.
It removes it before it returns, on failure too (topic deleted, node
stopped, unregistered and forgotten), and leaves three nodes in sync.
"""

import time

from conftest import allocate_ports, register_log

from .conftest import CLUSTER, KafkaUpstream, clients, unique_name
from .ops import (OFFSETS_TOPIC, check_load_result, check_session_dials, figures,  # noqa: F401
                  java_session, kwire, load_step, partitions, wait_healthy, wait_until)

RATE = 200   # records/s
NEW = 4      # the added node's id


def test_broker_added_unknown_then_reloaded_in(kafka_cluster, reload_ferry_factory, java_session,  # noqa: F811
                                               request):
    # ferry with node ids 1-3 on three broker ports, a fourth port kept free
    ferry = reload_ferry_factory({CLUSTER: KafkaUpstream(kafka_cluster)}, start=False)
    ports = allocate_ports(5)
    ferry.clusters[CLUSTER] = {"bootstrap": ports[0], "brokers": ports[1:4], "node_ids": [1, 2, 3]}
    ferry.write()
    ferry.start()
    fport = dict(zip(range(1, 5), ports[1:]))
    addr = {n: f"127.0.0.1:{p}" for n, p in fport.items()}
    topic, group, run = unique_name("added"), unique_name("added-g"), unique_name("r")

    s = java_session(ferry, ports=set(ports))
    # the group coordinators' topic exists before node 4 does (the first
    # FindCoordinator creates it), so none of its replicas lands on node 4
    s("group-offsets", group)
    wait_healthy(kafka_cluster)
    try:
        t0 = time.monotonic()
        node = kafka_cluster.add_node("broker")
        added_in = time.monotonic() - t0
        assert node.id == NEW
        register_log(request, f"kafka node {NEW}", node.dir / "server.log")
        # a topic on nodes 1-3, then its partition 0 moved onto node 4, led by it
        s("create-topic", topic, "assign=1,2,3/2,3,1/3,1,2")
        wait_until(lambda: len(partitions(kafka_cluster, topic)) == 3, 30, "topic created")
        s("reassign", topic, 0, f"{NEW},1,2")
        wait_until(lambda: not s("list-reassignments")["reassignments"], 60, "reassignment onto node 4")
        assert s("elect-preferred", topic, 0)["results"] == {f"{topic}-0": None}
        wait_until(lambda: partitions(kafka_cluster, topic)[0]["leader"] == NEW, 30, "node 4 leads p0")

        # without node 4 in node_ids: dropped from what clients see, counted
        d = s("describe-cluster")
        assert {n["id"]: n["addr"] for n in d["nodes"]} == {n: addr[n] for n in (1, 2, 3)}, d
        md = kwire.metadata("127.0.0.1", ports[0], [topic])
        assert md["brokers"] == {n: ("127.0.0.1", fport[n]) for n in (1, 2, 3)}, md
        assert md["topics"][topic]["partitions"][0]["leader"] == NEW, md
        hint = kwire.produce_v12("127.0.0.1", fport[1], topic, 0, [b"probe"])
        assert hint["partitions"][0]["current_leader"]["leader_id"] == NEW, hint
        assert hint["node_endpoints"] == [], f"node 4's endpoint must be dropped: {hint}"
        direct = kwire.produce_v12("127.0.0.1", kafka_cluster.nodes[1].ports["PLAINTEXT"], topic, 0,
                                   [b"probe"])
        assert [e["node_id"] for e in direct["node_endpoints"]] == [NEW], direct
        unknown = wait_until(lambda: ferry.cluster(CLUSTER).get("unknownNodes"), 10, "unknownNodes")
        assert [u["nodeId"] for u in unknown] == [NEW], unknown
        assert unknown[0]["upstream"] == f"localhost:{node.ports['PLAINTEXT']}", unknown
        counted = ferry.metrics()[("ferry_unknown_node_total", CLUSTER)]
        assert counted >= 1

        # the load: partitions 1 and 2 flow, partition 0 cannot
        s("load-start", topic, group, RATE, run)
        wait_until(lambda: all(s("load-status")["acks"].get(p, {}).get("count", 0) > 20
                               for p in ("1", "2")), 60, "partitions 1 and 2 acknowledged")
        st = s("load-status")
        assert "0" not in st["acks"], f"a record of partition 0 acknowledged without node 4: {st}"
        before = st

        # the reload that adds node 4
        ferry.clusters[CLUSTER] = {"bootstrap": ports[0], "brokers": ports[1:], "node_ids": [1, 2, 3, 4]}
        ferry.write()
        t_reload = time.monotonic()
        rl = ferry.reload_ctl()
        assert rl.returncode == 0, rl.stdout + rl.stderr
        after = load_step(s, [0], lambda: None, timeout=60)[3]
        reachable = time.monotonic() - t_reload
        for who in ("producer_connections", "consumer_connections"):
            assert after[who][1] == before[who][1], \
                f"{who} (created, closed) {before[who]} before the reload, {after[who]} after"
        rep = wait_until(lambda: ferry.cluster_doc(CLUSTER).get("lastReplacement"), 30,
                         "the replaced generation gone")
        assert rep["handedOver"] >= 1 and rep["forced"] == 0 and rep["drained"] == 0, rep
        assert ferry.cluster(CLUSTER)["unknownNodes"] == []
        d = s("describe-cluster")
        assert {n["id"]: n["addr"] for n in d["nodes"]} == addr, d
        p0 = s("describe-topic", topic)["partitions"][0]
        assert (p0["leader"], p0["leader_addr"]) == (NEW, addr[NEW]), p0

        r = s("load-stop", 90)
        check_load_result(r, kafka_cluster, topic, addr.values())
        assert addr[NEW] in r["brokers"], r
        s("delete-topics", topic)
    finally:
        t0 = time.monotonic()
        remove_added_node(kafka_cluster, s, topic)
        removed_in = time.monotonic() - t0
    s.close()
    check_session_dials(s)
    figures(f"broker added (Java {s.lib_version}, {RATE}/s through ferry): node {NEW} joined in "
            f"{added_in:.1f}s, dropped and counted (ferry_unknown_node_total {counted}) until the "
            f"reload; its partition acknowledged {reachable:.1f}s after the reload; "
            f"{r['acked']} records acknowledged, {r['unique']} received, lost {r['lost']}, "
            f"duplicates in the log 0, redelivered {r['duplicates']}; connections closed across the reload: producer "
            f"{after['producer_connections'][1] - before['producer_connections'][1]}, consumer "
            f"{after['consumer_connections'][1] - before['consumer_connections'][1]}; handed over "
            f"{rep['handedOver']}; node removed in {removed_in:.1f}s")


def remove_added_node(cluster, s, topic):
    """Topic deleted, whatever else has a replica on node 4 moved to nodes
    1-3, node 4 stopped, unregistered and forgotten; nodes 1-3 in sync.
    Through the session when it still answers, else through a session of
    its own straight to the brokers."""
    if NEW not in cluster.nodes:
        return
    own = None
    try:
        s("describe-cluster", timeout=20)
    except Exception:  # noqa: BLE001 -- the scenario's session is gone
        s = own = clients.Session(cluster.bootstrap(nodes=[1, 2, 3]), strace=False)
    try:
        s("delete-topics", topic, check=False)
        for t in (OFFSETS_TOPIC,):
            for i, p in partitions(cluster, t).items():
                if NEW in p["replicas"]:
                    keep = [r for r in p["replicas"] if r != NEW]
                    s("reassign", t, i, ",".join(map(str, keep + sorted({1, 2, 3} - set(keep)))))
        wait_until(lambda: not s("list-reassignments")["reassignments"], 60, "moved off node 4")
        cluster.stop_node(NEW)
        # the controller fences the stopped broker, then lets it go
        wait_until(lambda: s("unregister-broker", NEW, check=False)["ok"], 60, "node 4 unregistered")
    finally:
        cluster.remove_node(NEW)
        if own:
            own.close()
    wait_healthy(cluster, nodes=[1, 2, 3])
