"""
The older line operators still run, Kafka 3.9 in KRaft mode, behind ferry
(issue 19, item 4).

- ApiVersions: every cap of ferry's policy is at or above what a 3.9 broker
  advertises, so ferry's answer is the broker's less the refused keys, each
  with its written reason; a client's ApiVersions v5 (ferry lets it through)
  gets the broker's own UNSUPPORTED_VERSION answer, and retries lower.
- The core scenario, an idempotent acks=all producer and then a group
  consumer with commits, with the Java client of the same version
  (kafka-clients 3.9), the current Java client (4.4: its ApiVersions v5 is
  refused by the broker and retried lower through ferry), franz-go and
  confluent-kafka: exact counts, the log
  holds exactly the records produced, the group's committed offsets cover
  them, the clients saw ferry's addresses only and strace saw no connect()
  outside ferry's ports.
"""

import pytest

from .. import apipolicy
from ..conftest import CLUSTER, client_runner, kcluster, report, unique_name
from ..ops import kwire
from ..test_clients import produce_then_consume

COUNT = 500
UNSUPPORTED_VERSION = 35


def test_older_broker_apiversions(older_cluster, older_ferry):
    policy = apipolicy.load()
    ferry = older_ferry()
    node = older_cluster.running_nodes()[0]
    broker = kcluster.api_versions("127.0.0.1", node.ports["PLAINTEXT"])
    host, port = ferry.bootstrap(CLUSTER).rsplit(":", 1)
    via = kcluster.api_versions(host, int(port))
    rows, problems = apipolicy.compare(policy, broker, via)
    report.append(f"ApiVersions, Kafka {older_cluster.version} broker vs ferry ({len(broker)} keys "
                  f"advertised by the broker, {len(via)} by ferry); every other key identical:")
    for k, name, b, f, why in rows:
        report.append(f"  {k:>3} {name:<38} broker {b:<8} ferry {f:<8} {why}")
    assert not problems, "ferry's ApiVersions differ from its policy:\n" + "\n".join(problems)
    assert not policy.unexplained(broker)
    # no cap bites: what ferry lets through is the broker's range itself
    capped = {k: broker[k] for k, r in policy.rows.items() if r["policy"] == "cap" and k in broker}
    assert capped and all(via[k] == b for k, b in capped.items()), (capped, via)
    # ApiVersions v5 reaches the broker, which does not know it: its
    # UNSUPPORTED_VERSION answer (v0 body, KIP-511) comes back as it is
    err, keys = kwire.api_versions_v5(host, int(port))
    assert err == UNSUPPORTED_VERSION and keys == {18: broker[18]}, (err, keys)


CLIENTS = [("java", kcluster.older_kafka_version()), ("java", kcluster.kafka_version()),
           ("franz-go", None), ("confluent-kafka", None)]


@pytest.mark.parametrize("client,java_version", CLIENTS,
                         ids=[f"{c}-{v}" if v else c for c, v in CLIENTS])
def test_older_idempotent_produce_and_group_consume(older_cluster, older_ferry, workdir, request,
                                                    client, java_version):
    older_client = client_runner(older_cluster, workdir, request, java_version)
    ferry = older_ferry()
    topic = unique_name(f"o-{client}")
    older_cluster.create_topic(topic, 3)
    env = apipolicy.java_debug_env(workdir) if client == "java" else None
    p, c = produce_then_consume(older_client, older_cluster, ferry, client, topic, COUNT, env)
    res = c.result
    line = (f"older line, Kafka {older_cluster.version}, {client} "
            f"{p.result.get('lib_version', '')}: {COUNT} produced (idempotent, acks=all), "
            f"{res['consumed']} consumed, {res['missing']} lost, {res['duplicates']} duplicates, "
            f"produce {p.elapsed:.1f}s, consume {c.elapsed:.1f}s")
    if env is not None:
        sent = apipolicy.sent_versions(p.stderr + c.stderr)
        line += "; sent " + ", ".join(f"{a} v{'/'.join(map(str, sorted(v)))}"
                                      for a, v in sorted(sent.items()))
        assert max(sent["PRODUCE"]) == older_cluster_max(older_cluster, 0)
        assert max(sent["FETCH"]) == older_cluster_max(older_cluster, 1)
        if java_version == kcluster.kafka_version():
            # v5 through ferry, UNSUPPORTED_VERSION from the broker, v4 again
            assert {4, 5} <= sent["API_VERSIONS"], sent
    report.append(line)


def older_cluster_max(cluster, key):
    node = cluster.running_nodes()[0]
    return kcluster.api_versions("127.0.0.1", node.ports["PLAINTEXT"])[key][1]
