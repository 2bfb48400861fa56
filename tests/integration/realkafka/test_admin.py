"""
Admin operations through ferry with the Java Admin client (issue 19):
DescribeCluster, create/delete topics, describe/alter configs of a topic
and of a broker, partition reassignment (AlterPartitionReassignments,
ListPartitionReassignments) with and without data to move, preferred leader
election (ElectLeaders), and the groups' side: ListGroups,
DescribeConsumerGroups, ListConsumerGroupOffsets, DeleteGroups.

Every address the Admin client is told must be ferry's (each node at its
own broker port, the controller and the group coordinator too), what the
Admin calls change must be what the brokers then report (asked straight,
not through ferry), and strace must see the JVM connect to ferry's ports
only.
"""

from .conftest import unique_name
from .ops import (check_session_dials, ferry_node_addresses, figures, java_session,  # noqa: F401
                  partitions, wait_answer, wait_until)


def test_admin_operations(kafka_cluster, kafka_ferry, java_session):  # noqa: F811
    ferry = kafka_ferry()
    by_id = ferry_node_addresses(ferry)
    s = java_session(ferry)
    t_topic, t_moved, group, run = (unique_name("adm"), unique_name("adm-mv"), unique_name("adm-g"),
                                    unique_name("r"))

    # DescribeCluster: every node at its ferry port, the controller one of them
    d = s("describe-cluster")
    assert {n["id"]: n["addr"] for n in d["nodes"]} == by_id, d
    assert d["controller"] == by_id.get(d["controller_id"]), d
    assert d["cluster_id"] == kafka_cluster.cluster_id, d

    # CreateTopics, Metadata: leaders and replicas at ferry addresses
    s("create-topic", t_topic, 3, 3, "min.insync.replicas=2")
    s("create-topic", t_moved, 1, 1)
    wait_until(lambda: {t_topic, t_moved} <= set(s("list-topics")["topics"]), 30, "topics listed")
    desc = wait_answer(s, ("describe-topic", t_topic),
                       lambda x: all(p["leader"] is not None for p in x["partitions"]), 30,
                       "leaders of the new topic")
    assert len(desc["partitions"]) == 3, desc
    for p in desc["partitions"]:
        assert p["leader_addr"] == by_id[p["leader"]], desc
        assert sorted(p["replicas"]) == [1, 2, 3] and set(p["addrs"]) == set(by_id.values()), desc

    # topic configs: set, read back, delete. A broker applies the
    # controller's record a moment after the Admin call returns (and may
    # describe the old value, or the key without a value, until then).
    topic_keys = ("describe-configs", "topic", t_topic, "retention.ms", "max.message.bytes",
                  "min.insync.replicas")
    s("alter-configs", "topic", t_topic, "set:retention.ms=3600000", "set:max.message.bytes=2000000")
    cfg = wait_answer(s, topic_keys, lambda x: x["configs"]["retention.ms"]["value"] == "3600000",
                      30, "retention.ms set")["configs"]
    assert cfg["retention.ms"] == {"value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG"}, cfg
    assert cfg["max.message.bytes"]["value"] == "2000000", cfg
    assert cfg["min.insync.replicas"] == {"value": "2", "source": "DYNAMIC_TOPIC_CONFIG"}, cfg
    s("alter-configs", "topic", t_topic, "delete:retention.ms")
    wait_answer(s, topic_keys, lambda x: x["configs"]["retention.ms"]["source"] != "DYNAMIC_TOPIC_CONFIG",
                30, "retention.ms deleted")

    # broker configs: a per-broker dynamic value on node 2, then removed
    def broker_cfg():
        return s("describe-configs", "broker", 2, "log.retention.ms")["configs"]["log.retention.ms"]

    s("alter-configs", "broker", 2, "set:log.retention.ms=604800001")
    wait_until(lambda: broker_cfg() == {"value": "604800001", "source": "DYNAMIC_BROKER_CONFIG"},
               30, "node 2's log.retention.ms set")
    s("alter-configs", "broker", 2, "delete:log.retention.ms")
    wait_until(lambda: broker_cfg()["source"] != "DYNAMIC_BROKER_CONFIG", 30,
               "node 2's log.retention.ms deleted")

    # reassignment without data to move: the replicas of partition 0 rotated,
    # then the preferred leader (now the first replica) elected
    p0 = desc["partitions"][0]
    rotated = p0["replicas"][1:] + p0["replicas"][:1]
    s("reassign", t_topic, 0, ",".join(map(str, rotated)))
    wait_until(lambda: not s("list-reassignments")["reassignments"], 30, "reassignment done")
    e = s("elect-preferred", t_topic, 0)
    assert e["results"] == {f"{t_topic}-0": None}, e
    after = wait_answer(s, ("describe-topic", t_topic), lambda x: x["partitions"][0]["leader"] == rotated[0],
                        30, f"leader {rotated[0]} of {t_topic}-0 through ferry")
    assert after["partitions"][0]["replicas"] == rotated, after
    assert after["partitions"][0]["leader_addr"] == by_id[rotated[0]], after
    # asked directly, a broker's metadata cache may lag the one ferry asked
    wait_until(lambda: (lambda d: (d["leader"], d["replicas"]) == (rotated[0], rotated))(
        partitions(kafka_cluster, t_topic)[0]), 30, f"leader {rotated[0]} of {t_topic}-0 directly")
    again = s("elect-preferred", t_topic, 0)   # already the preferred leader
    assert "ElectionNotNeeded" in (again["results"][f"{t_topic}-0"] or ""), again

    # reassignment with data to move: a one-replica partition to another node
    acked = s("produce", t_moved, 500, run)["acked"]
    assert acked == 500
    src = partitions(kafka_cluster, t_moved)[0]["leader"]
    dst = src % 3 + 1
    s("reassign", t_moved, 0, dst)
    seen = s("list-reassignments")["reassignments"]
    wait_until(lambda: not s("list-reassignments")["reassignments"], 60, "data-moving reassignment done")
    moved = wait_answer(s, ("describe-topic", t_moved), lambda x: x["partitions"][0]["leader"] == dst,
                        30, f"{t_moved}-0 led by {dst}")
    assert moved["partitions"][0]["replicas"] == [dst], moved
    assert moved["partitions"][0]["leader_addr"] == by_id[dst], moved
    assert kafka_cluster.end_offsets(t_moved) == {0: 500}, "the moved partition lost records"

    # groups: a member that consumed and committed, then listed, described,
    # its offsets read, and the group deleted once empty
    assert s("produce", t_topic, 300, run)["acked"] == 300
    j = s("join-group", group, t_topic, 300, run)
    assert j["unique"] == 300, j
    listed = {g["id"]: g for g in s("list-groups")["groups"]}
    assert group in listed, listed
    assert (listed[group]["type"], listed[group]["state"], listed[group]["protocol"]) == \
        ("Classic", "Stable", "consumer"), listed[group]
    g = s("describe-group", group)
    assert g["state"] == "Stable" and g["coordinator"] == by_id.get(g["coordinator_id"]), g
    assert len(g["members"]) == 1, g
    assert g["members"][0]["client_id"] == "ferry-session-member", g
    assert g["members"][0]["assignment"] == [f"{t_topic}-{i}" for i in range(3)], g
    offsets = s("group-offsets", group)["offsets"]
    ends = kafka_cluster.end_offsets(t_topic)
    assert offsets == {f"{t_topic}-{p}": o for p, o in ends.items()}, (offsets, ends)
    s("leave-group")
    wait_answer(s, ("describe-group", group), lambda x: x["state"] == "Empty", 30, "group empty")
    s("delete-groups", group)
    assert group not in {x["id"] for x in s("list-groups")["groups"]}

    # DeleteTopics
    s("delete-topics", t_topic, t_moved)
    wait_until(lambda: not ({t_topic, t_moved} & set(s("list-topics")["topics"])), 30, "topics deleted")

    s.close()
    check_session_dials(s)
    figures(f"admin (Java Admin {s.lib_version} through ferry): coordinator node "
            f"{g['coordinator_id']}, controller node {d['controller_id']}, in-flight reassignment "
            f"seen {len(seen)}, {len(s.connects)} connects, all to ferry's ports")
