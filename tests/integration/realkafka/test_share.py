"""
Share groups (KIP-932, queues for Kafka) through ferry against real Apache
Kafka 4.4, whose fresh clusters finalize share.version 2.

1. On the wire: a ShareFetch sent to ferry's port for a broker that does not
   lead the partitions asked for is answered NOT_LEADER_OR_FOLLOWER with the
   leaders in NodeEndpoints; ferry rewrites them to its own addresses of
   those nodes (v1 and v2, through every broker port). ferry advertises
   ShareFetch and ShareAcknowledge at the versions it parses (1-2), and the
   share coordinator FindCoordinator names is a ferry address.
2. Two Java KafkaShareConsumer members of one share group consume a topic
   through ferry, acknowledging every record (explicit mode): every record is
   delivered and acknowledged, none twice, both members take part, and
   neither dialled an upstream address.
"""

import re
import time

from .conftest import CLUSTER, ferry_addresses, kcluster, report, unique_name
from .groupwire import (KEY_SHARE, find_coordinators, kafka_uuid_text, share_fetch,
                        topic_layout)
from .scenario import Peer, fill, wait_until

N = 1500
NOT_LEADER_OR_FOLLOWER = 6


def requests_by_api(ferry):
    code, _, body = ferry.http("/metrics")
    assert code == 200
    out = {}
    for m in re.finditer(r'^ferry_requests_total\{cluster="%s",api="(\w+)"\} (\d+)$' % CLUSTER,
                         body.decode(), re.M):
        out[m.group(1)] = int(m.group(2))
    return out


def test_share_fetch_node_endpoints_rewritten_on_the_wire(kafka_cluster, kafka_ferry, kafka_topic):
    ferry = kafka_ferry()
    topic = kafka_topic("share-wire", partitions=3)
    ports = dict(zip(ferry.clusters[CLUSTER]["node_ids"], ferry.clusters[CLUSTER]["brokers"]))
    upstream = kafka_cluster.all_ports()
    host, bport = ferry.bootstrap(CLUSTER).rsplit(":", 1)

    av = kcluster.api_versions(host, int(bport))
    assert av.get(78) == (1, 2) and av.get(79) == (1, 2), av

    lay = topic_layout(host, int(bport), topic)
    assert {f"{h}:{p}" for h, p in lay["brokers"].values()} <= ferry_addresses(ferry), lay
    seen = 0
    for node, port in ports.items():
        others = [p for p, leader in lay["leaders"].items() if leader != node]
        for v in (1, 2):
            r = share_fetch("127.0.0.1", port, unique_name("sg-wire"), lay["id"], others, v)
            assert r["error"] == 0, r
            for part in others:
                pd = r["partitions"][part]
                assert pd["error"] == NOT_LEADER_OR_FOLLOWER, (node, part, r)
                assert pd["leader"] == lay["leaders"][part], (node, part, r)
            want = {lay["leaders"][p] for p in others}
            assert set(r["node_endpoints"]) == want, (node, v, r)
            for nid, (h, p, _rack) in r["node_endpoints"].items():
                assert (h, p) == ("127.0.0.1", ports[nid]), (node, v, nid, h, p)
                assert p not in upstream
                seen += 1
    assert seen >= 2 * 3 * 2

    # the share coordinator of (group, topic, partition) is found at ferry
    group = unique_name("sg-coord")
    key = f"{group}:{kafka_uuid_text(lay['id'])}:0"
    deadline = time.monotonic() + 30
    while True:
        err, node, h, p = find_coordinators(host, int(bport), [key], KEY_SHARE)[key]
        if err == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)   # COORDINATOR_NOT_AVAILABLE while its state topic is created
    assert err == 0 and f"{h}:{p}" in ferry_addresses(ferry), (err, node, h, p)


def test_share_group_of_two_consumes_everything(kafka_cluster, kafka_ferry, kafka_topic, workdir,
                                                 request):
    t_start = time.monotonic()
    ferry = kafka_ferry()
    topic = kafka_topic("share", partitions=3)
    run = unique_name("R")
    group = unique_name("sg")
    fill(kafka_cluster, topic, run, N)
    base = {"bootstrap": ferry.bootstrap(CLUSTER), "run-id": run, "timeout": 150, "topic": topic,
            "group": group, "reset-earliest": True, "max-poll-records": 50, "poll-sleep-ms": 20}
    a = Peer(workdir, "share-consume", base, ferry, kafka_cluster, request, "share member A")
    b = Peer(workdir, "share-consume", {**base, "describe": True}, ferry, kafka_cluster, request,
             "share member B")

    def acked():
        return a.progress().get("acked", 0) + b.progress().get("acked", 0)

    wait_until(lambda: acked() >= N, 120, f"{N} records acknowledged", a, b)
    a.stop()
    b.stop()
    ra, rb = a.wait(60), b.wait(60)
    for m in (a, b):
        m.check(ferry_addresses(ferry))
    got = ra["records"] + rb["records"]
    unique = set(got)
    missing = N - len(unique & set(range(N)))
    duplicates = len(got) - len(unique)
    assert missing == 0, f"{missing} records never delivered\n{a.describe()}\n{b.describe()}"
    assert duplicates == 0 and ra["redelivered"] + rb["redelivered"] == 0, (duplicates, ra, rb)
    assert ra["ack_failures"] == rb["ack_failures"] == 0
    assert ra["acked"] + rb["acked"] == N
    assert ra["records"] and rb["records"], "one member got nothing"
    assert rb["coordinator"] in ferry_addresses(ferry), rb
    apis = requests_by_api(ferry)
    assert apis.get("ShareFetch", 0) > 0 and apis.get("ShareGroupHeartbeat", 0) > 0, apis
    m = ferry.metrics()
    assert m.get(("ferry_frames_rejected_total", CLUSTER), 0) == 0, m

    wall = time.monotonic() - t_start
    report.append(
        f"share group (test_share, {wall:.0f}s): {N} records delivered and acknowledged by 2 "
        f"KafkaShareConsumer members (A {len(ra['records'])}, B {len(rb['records'])}), lost 0, "
        f"duplicates 0, redelivered 0; through ferry ShareFetch {apis.get('ShareFetch', 0)}, "
        f"ShareAcknowledge {apis.get('ShareAcknowledge', 0)}, ShareGroupHeartbeat "
        f"{apis.get('ShareGroupHeartbeat', 0)} requests; coordinator {rb['coordinator']} (ferry)")
