"""
Consumer groups through ferry against real Apache Kafka: the classic
protocol and KIP-848's (group.protocol=consumer), with the Java client, and
a rebalance across a reload.

A topic of 6 partitions holds N records. Two members start; once a fifth
is committed a third member joins while ferry reloads a modified cluster
(its connections move to the new worker in the middle of the rebalance);
once two fifths are committed the first member leaves while ferry reloads
again. The group converges and the two members left consume the rest. Each
member commits after every poll and when partitions are revoked.

Checked: no record lost (the union of what the members consumed is all N,
the group's committed offsets are the log's end); records consumed twice
(redelivery after a rebalance, at-least-once) are counted and bounded; the
coordinator the clients see (FindCoordinator through ferry, the Admin
client's describeConsumerGroups) is a ferry address, the group is of the
protocol asked for; the clients never dialled an upstream address.
"""

import time

import pytest

from .conftest import CLUSTER, ferry_addresses, report, unique_name
from .groupwire import KEY_GROUP, consumer_group_state, find_coordinators
from .scenario import RELOAD_DRAIN_TIMEOUT, Peer, fill, reload_modified, wait_until
from .test_clients import check_run, committed_through

N = 1800
PARTITIONS = 6


def committed_total(members):
    """Sum over partitions of the highest offset any member committed."""
    best = {}
    for m in members:
        for part, off in m.progress().get("committed", {}).items():
            best[part] = max(best.get(part, 0), off)
    return sum(best.values())


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_rebalance_across_reloads(kafka_cluster, kafka_ferry, kafka_topic, workdir, request,
                                  protocol):
    t_start = time.monotonic()
    ferry = kafka_ferry(workers=1, drain_timeout=RELOAD_DRAIN_TIMEOUT)
    topic = kafka_topic(f"grp-{protocol}", partitions=PARTITIONS)
    run = unique_name("R")
    group = unique_name(f"g-{protocol}")
    fill(kafka_cluster, topic, run, N)
    base = {"bootstrap": ferry.bootstrap(CLUSTER), "run-id": run, "timeout": 150, "topic": topic,
            "group": group, "group-protocol": protocol, "max-poll-records": 10,
            "poll-sleep-ms": 100}

    def member(label, **extra):
        return Peer(workdir, "group-member", {**base, **extra}, ferry, kafka_cluster, request, label)

    a, b = member("member A"), member("member B")
    wait_until(lambda: committed_total((a, b)) >= N // 5, 120, "a fifth committed", a, b)
    t_flowing = time.monotonic()

    # a member joins while ferry reloads: the reload starts as soon as the
    # new member's JVM makes its first connection (bootstrap, then the
    # coordinator and its join)
    c = member("member C", describe=True)
    wait_until(c.connects, 60, "member C's first connection", a, b, c)
    rep1 = reload_modified(ferry)
    wait_until(lambda: c.progress().get("assigned", 0) > 0 and committed_total((a, b, c)) >= 2 * N // 5,
               90, "member C assigned", a, b, c)

    # a member leaves while ferry reloads
    a.stop()
    rep2 = reload_modified(ferry)
    ra = a.wait(60)
    wait_until(lambda: committed_total((a, b, c)) >= N, 120, "every record committed", b, c)
    b.stop()
    c.stop()
    rb, rc = b.wait(60), c.wait(60)
    for m in (a, b, c):
        m.check(ferry_addresses(ferry))
    for rep in (rep1, rep2):
        assert rep["forced"] == 0 and rep["handedOver"] >= 2, rep

    got = ra["records"] + rb["records"] + rc["records"]
    unique = set(got)
    missing = N - len(unique & set(range(N)))
    duplicates = len(got) - len(unique)
    assert missing == 0, f"{missing} records never consumed\n{a.describe()}\n{b.describe()}\n{c.describe()}"
    ends = kafka_cluster.end_offsets(topic)
    assert committed_total((a, b, c)) == sum(ends.values()), ends
    revocations = sum(r["revocations"] for r in (ra, rb, rc))
    # at-least-once: only what a member had consumed but not committed when
    # its partitions moved can come again (at most one poll per partition)
    assert duplicates <= revocations * base["max-poll-records"] * PARTITIONS, \
        (duplicates, revocations)

    assert ferry.metrics().get(("ferry_frames_rejected_total", CLUSTER), 0) == 0
    # the coordinator the clients see is ferry's
    assert rc["coordinator"] in ferry_addresses(ferry), rc
    assert rc["group_type"].lower() == protocol, rc
    host, port = ferry.bootstrap(CLUSTER).rsplit(":", 1)
    err, node, h, p = find_coordinators(host, int(port), [group], KEY_GROUP)[group]
    assert err == 0 and f"{h}:{p}" in ferry_addresses(ferry), (err, node, h, p)

    wall = time.monotonic() - t_start
    report.append(
        f"consumer group, {protocol} protocol (test_groups, {wall:.0f}s, "
        f"{t_flowing - t_start:.0f}s to start): {N} records, {len(got)} consumed by 3 members "
        f"(A {len(ra['records'])}, B {len(rb['records'])}, C {len(rc['records'])}), lost 0, "
        f"consumed twice {duplicates} ({revocations} revocations, "
        f"{sum(r['assignments'] for r in (ra, rb, rc))} assignments); reloads handed over "
        f"{rep1['handedOver']} and {rep2['handedOver']} connections, forced 0; coordinator "
        f"{rc['coordinator']} (ferry), group {rc['group_type']} {rc['group_state']}")


def test_kip848_confluent_kafka(kafka_cluster, kafka_ferry, kafka_topic, run_client):
    """confluent-kafka (librdkafka 2.16) with group.protocol=consumer through
    ferry: every record once, the offsets committed, and the group, asked of
    the coordinator ferry names, is a consumer-protocol (KIP-848) group."""
    t_start = time.monotonic()
    ferry = kafka_ferry()
    topic = kafka_topic("grp-cfk", partitions=PARTITIONS)
    run, group, n = unique_name("R"), unique_name("g-cfk"), 600
    fill(kafka_cluster, topic, run, n)
    c = run_client("confluent-kafka", ferry, {
        "bootstrap": ferry.bootstrap(CLUSTER), "topic": topic, "count": n, "run-id": run,
        "mode": "consume", "group": group, "group-protocol": "consumer", "timeout": 60,
        "linger-ms": 500})
    check_run(c, ferry, "consume")
    res = c.result
    assert (res["consumed"], res["unique"], res["duplicates"], res["missing"]) == (n, n, 0, 0), \
        c.describe()
    ends = kafka_cluster.end_offsets(topic)
    assert committed_through(ferry, group, topic, PARTITIONS) == ends
    host, port = ferry.bootstrap(CLUSTER).rsplit(":", 1)
    err, node, h, p = find_coordinators(host, int(port), [group], KEY_GROUP)[group]
    assert err == 0 and f"{h}:{p}" in ferry_addresses(ferry), (err, node, h, p)
    err, state, members = consumer_group_state(h, p, group)
    assert err == 0, f"not a consumer-protocol group: error {err}"
    report.append(f"consumer group, consumer protocol, confluent-kafka {res.get('lib_version')} "
                  f"(test_groups, {time.monotonic() - t_start:.0f}s): {n} records once, "
                  f"committed, group {state} with {members} members at coordinator {h}:{p} (ferry)")
