"""
What the admin, leader-movement and fault scenarios of this package share:
the Java client's interactive session (tests/peers/kafka/java/Session.java)
as a fixture, waits on the cluster's health, and the figures each scenario
prints at the end of the run.

The fault scenarios (test_zz_*.py) stop, kill and add brokers of the
package's one cluster; they restore it before they return (every node
running, every partition of their topics and of __consumer_offsets with a
full ISR), on failure too, and run last (their file names sort last) so that
a cluster they could not restore harms no other scenario.
"""

import time

import pytest

from conftest import register_log, wait_for

from .conftest import CLUSTER, clients, kafka_unavailable, kcluster, report

import kwire  # noqa: E402,F401  (tests/peers/kafka, on sys.path since .conftest)

OFFSETS_TOPIC = "__consumer_offsets"


def ferry_node_addresses(ferry):
    """{node_id: "127.0.0.1:PORT"}: where ferry serves each node."""
    c = ferry.clusters[CLUSTER]
    return {nid: f"127.0.0.1:{p}" for nid, p in zip(c["node_ids"], c["brokers"])}


@pytest.fixture
def java_session(kafka_cluster, workdir, request):
    """java_session(ferry, ports=None, **kw) -> clients.Session through
    ferry's bootstrap, under strace: connects to a port outside `ports`
    (default: ferry's bootstrap and broker ports) are dial problems, those
    to any broker port are upstream dials. Killed at teardown."""
    made = []

    def make(ferry, ports=None, **kw):
        why = clients.problem("java")
        if why:
            kafka_unavailable(why)
        c = ferry.clusters[CLUSTER]
        allowed = set(ports) if ports else {c["bootstrap"], *c["brokers"]}
        s = clients.Session(ferry.bootstrap(CLUSTER), allowed_ports=allowed,
                            forbidden_ports=kafka_cluster.all_ports(), workdir=str(workdir), **kw)
        made.append(s)
        register_log(request, "java session stderr", s.stderr_path)
        return s

    yield make
    failed = getattr(getattr(request.node, "rep_call", None), "failed", False)
    for s in made:
        s.kill()
        if failed:
            print(s.describe())


def check_session_dials(s):
    """After close(): strace saw connects, none outside ferry's ports."""
    assert s.connects, f"strace saw no connect() of the Java session\n{s.describe()}"
    assert not s.dial_problems(), "\n".join(s.dial_problems()) + "\n" + s.describe()


def wait_until(pred, timeout, what, interval=0.2):
    """conftest.wait_for at a pace fit for a JVM or a broker on the other end."""
    return wait_for(pred, timeout, interval=interval, what=what)


def wait_answer(s, words, pred, timeout, what):
    """The session's answer to `words` once pred(answer) holds."""
    def ok():
        doc = s(*words)
        return doc if pred(doc) else None
    return wait_until(ok, timeout, what)


def partitions(cluster, topic):
    """{index: {"leader", "replicas", "isr", "error"}} as a running broker
    sees the topic (Metadata v1 straight to it)."""
    n = cluster.running_nodes()[0]
    t = kcluster.metadata("127.0.0.1", n.ports["PLAINTEXT"], [topic])["topics"].get(topic)
    if not t or t["error"]:
        raise kcluster.KafkaError(f"topic {topic}: {t}")
    return t["partitions"]


def isr_full(cluster, topic):
    """Every running node's metadata shows each partition of `topic` led and
    with all its replicas in sync."""
    for n in cluster.running_nodes():
        t = kcluster.metadata("127.0.0.1", n.ports["PLAINTEXT"], [topic])["topics"].get(topic)
        if not t or t["error"]:
            return False
        for p in t["partitions"].values():
            if p["error"] or p["leader"] < 0 or sorted(p["isr"]) != sorted(p["replicas"]):
                return False
    return True


def wait_healthy(cluster, topics=(), timeout=120.0, nodes=None):
    """Until the nodes (default: every node of the cluster) run and see each
    other, and every partition of `topics` and of __consumer_offsets has its
    full ISR."""
    want = nodes or sorted(cluster.nodes)
    cluster.wait_ready(timeout, nodes=[cluster.nodes[i] for i in want])
    for t in (*topics, OFFSETS_TOPIC):
        wait_until(lambda: isr_full(cluster, t), timeout, f"full ISR of {t}")


def restore(cluster, topics=(), timeout=150.0):
    """Starts every node of the cluster that is not running, then
    wait_healthy(): what a fault scenario runs on its way out."""
    for n in list(cluster.nodes.values()):
        if not n.running():
            cluster.restart_node(n.id, timeout=timeout)
    wait_healthy(cluster, topics, timeout)


def figures(line):
    """A line for the summary printed at the end of the run."""
    report.append(line)
    print(line)


def log_end_total(cluster, topic):
    """Records in the topic's log (sum of its high watermarks)."""
    return sum(cluster.end_offsets(topic).values())


def load_step(s, parts, action, timeout=90.0):
    """Runs action() while the session's load runs; returns (seconds the
    action took, stall_ms, consumer_stall_ms, status): stall is the longest
    gap between acknowledgements of partitions `parts`, from just before the
    action until each of them is acknowledged again after it (waited for,
    up to `timeout`); consumer_stall the same for the records received."""
    s("load-mark")
    t0 = time.monotonic()
    action()
    took = time.monotonic() - t0
    before = s("load-status")
    s("load-mark")

    def resumed():
        st = s("load-status")
        ok = all(st["acks"].get(str(p), {}).get("since_mark", 0) > 0 and
                 st["records"].get(str(p), {}).get("since_mark", 0) > 0 for p in parts)
        return st if ok else None
    after = wait_until(resumed, timeout, f"acks and records of partitions {parts} after the action")

    def gap(kind):
        return max(x[kind].get(str(p), {}).get("window_gap_ms", 0) for x in (before, after) for p in parts)
    return took, gap("acks"), gap("records"), after


def wait_load_flowing(s, n, timeout=60.0):
    """Until every partition has acknowledged and delivered records."""
    def flowing():
        st = s("load-status")
        ok = all(st["acks"].get(str(p), {}).get("count", 0) > 0 and
                 st["records"].get(str(p), {}).get("count", 0) > 0 for p in range(n))
        return st if ok else None
    return wait_until(flowing, timeout, "the load flowing on every partition")


def check_load_result(r, cluster, topic, ferry_addrs):
    """What every fault scenario demands of a stopped load: nothing failed,
    every acknowledged record received, the log holds exactly the records
    acknowledged (no duplicate written by a retry), the clients know only
    ferry's addresses."""
    assert r["sent"] > 0 and r["acked"] == r["sent"], r
    assert r["failed"] == 0 and r["lost"] == 0, r
    assert r["foreign"] == 0 and r["unacked_received"] == 0, r
    assert r["unique"] == r["acked"], r
    in_log = log_end_total(cluster, topic)
    assert in_log == r["acked"], f"the log holds {in_log} records for {r['acked']} acknowledged: {r}"
    assert r["brokers"] and set(r["brokers"]) <= set(ferry_addrs), r


def load_summary(r, s):
    """The figures of a stopped load, for figures()."""
    return (f"{r['acked']} records acknowledged, {r['unique']} received, lost {r['lost']}, "
            f"duplicates in the log 0, redelivered {r['duplicates']}, producer retries "
            f"{r['producer_retries']}, client errors {r['error_count']} "
            f"({s.log_counts()['WARN']} warnings logged), connections (created, closed) producer "
            f"{r['producer_connections']} consumer {r['consumer_connections']}, "
            f"{r['assignments']} assignment(s)")
