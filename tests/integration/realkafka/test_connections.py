"""
Who is connected, with the Java client against real Apache Kafka: ferry
in front of the cluster's SASL_PLAINTEXT listener, the reference Java
client (kafka-clients, tests/peers/kafka/java) authenticating with PLAIN as
alice. While it is connected, GET /admin/clusters/NAME/connections and
`ferryctl connections` list it with the software name the Java client
sends in ApiVersions (apache-kafka-java) and its version, its client.id,
the mechanism and the asserted principal; alice's password appears
nowhere (the listing, ferryctl, /metrics, ferryd's debug log).
"""

import json
import re
import threading

from conftest import wait_for

from .conftest import CLUSTER, kcluster, unique_name


def test_java_client_listed_with_its_software_and_principal(kafka_cluster, kafka_ferry,
                                                            kafka_topic, run_client):
    password = kcluster.USERS["alice"]
    ferry = kafka_ferry(listener="SASL_PLAINTEXT")
    # debug logs: the most any log line could show (a reload applies it)
    ferry.config_text = ferry.config_text.replace("log_level = info", "log_level = debug")
    ferry.config_path.write_text(ferry.config_text)
    ferry.ctl("reload")
    topic = kafka_topic("conn")
    # a consumer that waits for records that never come: connected for
    # its whole timeout
    opts = {"bootstrap": ferry.bootstrap(CLUSTER), "topic": topic, "count": 10,
            "mode": "consume", "group": unique_name("g-conn"), "run-id": unique_name("r"),
            "timeout": 30, "security-protocol": "SASL_PLAINTEXT", "sasl-mechanism": "PLAIN",
            "sasl-user": "alice", "sasl-password": password}
    done = {}
    t = threading.Thread(target=lambda: done.setdefault(
        "run", run_client("java", ferry, opts, timeout=90)), daemon=True)
    t.start()

    def java_rows():
        code, _, body = ferry.http(f"/admin/clusters/{CLUSTER}/connections?principal=alice")
        assert code == 200, body
        rows = [r for r in json.loads(body)["connections"]
                if r["clientSoftwareName"] == "apache-kafka-java"]
        # the bootstrap connection and one to a broker port
        return rows if any(r["listener"] == "broker" for r in rows) else None
    try:
        rows = wait_for(java_rows, 60, interval=0.3, what="the Java client listed")
        for r in rows:
            assert r["clientSoftwareVersion"] == kafka_cluster.version, r
            assert r["saslMechanism"] == "PLAIN" and r["principal"] == "alice", r
            assert r["clientId"] == "ferry-java-peer", r
            assert r["state"] == "open" and r["address"].startswith("127.0.0.1:"), r
        table = ferry.ctl("connections", CLUSTER, "--principal", "alice").stdout
        assert re.search(rf"ferry-java-peer\s+apache-kafka-java/{re.escape(kafka_cluster.version)}"
                         r"\s+PLAIN\s+alice\s", table), table
        code, _, metrics = ferry.http("/metrics")
        assert re.search(rf'^ferry_client_connections\{{cluster="{CLUSTER}",'
                         rf'software="apache-kafka-java",version="{re.escape(kafka_cluster.version)}"'
                         r'\} [1-9]', metrics.decode(), re.M), metrics.decode()[-2000:]
        code, _, listing = ferry.http(f"/admin/clusters/{CLUSTER}/connections")
    finally:
        t.join(120)
    assert not t.is_alive(), "the Java client did not end"
    for where, blob in (("listing", listing.decode()), ("ferryctl", table),
                        ("metrics", metrics.decode()), ("ferryd log", ferry.log_path.read_text(
                            errors="replace"))):
        assert password not in blob, f"alice's password in {where}"
