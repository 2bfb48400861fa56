"""
The reference clients through ferry, against real Apache Kafka (issue 19,
first scenario): idempotent produce with acks=all, then a consumer group
consumes with commits, for every client (Java, franz-go, sarama,
confluent-kafka, kafka-python, kcat), with one worker and with two.

Each run checks: exact counts (every record acknowledged, consumed once,
none missing, none foreign), the topic's log holds exactly the records
produced (high watermarks, asked of the brokers), the group's committed
offsets cover them all (asked through ferry), the brokers the client saw in
metadata are ferry's addresses only, and strace saw no connect() to a port
that is not ferry's (none to a broker's).
"""

import pytest

from .conftest import (CLUSTER, clients, ferry_addresses, unique_name)

COUNT = 2000


def committed_through(ferry, group, topic, partitions):
    """The group's committed offsets, asked through ferry (Debian's
    confluent-kafka, another librdkafka than the peers')."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": ferry.bootstrap(CLUSTER), "group.id": group,
                  "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in got}


def check_run(r, ferry, mode):
    assert r.result is not None, f"no result line\n{r.describe()}"
    assert r.result["error_count"] == 0, r.describe()
    assert r.rc == 0, r.describe()
    seen = set(r.result["brokers"])
    assert seen, f"{r.name} saw no brokers\n{r.describe()}"
    assert seen <= ferry_addresses(ferry), \
        f"{r.name} saw non-ferry brokers {sorted(seen - ferry_addresses(ferry))}\n{r.describe()}"
    assert r.connects, f"strace saw no connect() of {r.name}\n{r.describe()}"
    assert not r.dial_problems(), "\n".join(r.dial_problems()) + "\n" + r.describe()


def produce_then_consume(run_client, cluster, ferry, client, topic, count=COUNT, env=None):
    """The core scenario with one client: `count` records produced
    idempotently with acks=all, then consumed by a new group that commits.
    Checks exact counts, the log's end offsets and the group's committed
    offsets (asked through ferry). Returns the two clients.Run."""
    group = unique_name(f"g-{client}")
    base = {"bootstrap": ferry.bootstrap(CLUSTER), "topic": topic, "count": count,
            "run-id": unique_name("r"), "timeout": 90}

    p = run_client(client, ferry, {**base, "mode": "produce", "acks": "all", "idempotent": "true"},
                   env=env)
    check_run(p, ferry, "produce")
    assert p.result["produced"] == count and p.result["acked"] == count, p.describe()
    ends = cluster.end_offsets(topic)
    assert sum(ends.values()) == count, f"the log holds {ends} for {count} records produced"

    c = run_client(client, ferry, {**base, "mode": "consume", "group": group}, env=env)
    check_run(c, ferry, "consume")
    res = c.result
    assert (res["consumed"], res["unique"], res["duplicates"], res["missing"], res["foreign"]) == \
        (count, count, 0, 0, 0), c.describe()
    if res.get("committed") is not None:
        assert res["committed"] == count, c.describe()
    committed = committed_through(ferry, group, topic, len(ends))
    assert committed == ends, f"group {group} committed {committed}, log ends at {ends}"
    return p, c


@pytest.mark.parametrize("workers", [1, 2], ids=["w1", "w2"])
@pytest.mark.parametrize("client", clients.CLIENTS)
def test_idempotent_produce_and_group_consume(kafka_cluster, kafka_ferry, kafka_topic, run_client,
                                              client, workers):
    ferry = kafka_ferry(workers=workers)
    topic = kafka_topic(f"s1-{client}-w{workers}")
    produce_then_consume(run_client, kafka_cluster, ferry, client, topic)
