"""
ApiVersions through ferry against real Apache Kafka: ferry advertises to a
client, for each API, at most what the broker advertises (never a key the
broker lacks, never a version outside the broker's range). Where the two
differ (ferry's caps and refused keys) the table is printed at the end of
the run, for reference; which differences are allowed, and why, is the
business of the version policy in worker/kafka/apiversions.c.
"""

from .conftest import CLUSTER, kcluster, report


def test_ferry_apiversions_within_the_brokers(kafka_cluster, kafka_ferry):
    ferry = kafka_ferry()
    node = kafka_cluster.running_nodes()[0]
    broker = kcluster.api_versions("127.0.0.1", node.ports["PLAINTEXT"])
    host, port = ferry.bootstrap(CLUSTER).rsplit(":", 1)
    via_bootstrap = kcluster.api_versions(host, int(port))
    via_broker_port = kcluster.api_versions("127.0.0.1", ferry.clusters[CLUSTER]["brokers"][0])
    assert via_bootstrap == via_broker_port, "ferry's bootstrap and broker ports disagree"
    rows = kcluster.api_versions_diff(broker, via_bootstrap)
    report.append(f"ApiVersions v0, Kafka {kafka_cluster.version} broker vs ferry "
                  f"({len(broker)} keys advertised by the broker, {len(via_bootstrap)} by ferry):")
    for k, name, b, p, what in rows:
        fmt = (lambda r: f"v{r[0]}-{r[1]}" if r else "-")
        report.append(f"  {k:>3} {name:<38} broker {fmt(b):<8} ferry {fmt(p):<8} {what}")
    bad = [r for r in rows if r[4].startswith(("ADDED", "WIDER"))]
    assert not bad, f"ferry advertises more than the broker: {bad}"
    # the APIs every client of this package needs are there
    for key in (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 18, 22):
        assert key in via_bootstrap, f"ferry drops API key {key}"
