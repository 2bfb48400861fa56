"""
Transactions through ferry against real Apache Kafka, exactly once across a
reload and across a worker kill.

Four peers run at once through one ferry worker: a Java transactional
producer and a confluent-kafka one (every 7th transaction aborted on
purpose), each writing transactions of 10 records to a topic of its own; a
Java consume-transform-produce loop reading the Java producer's topic
read_committed in a group and writing each record to a second topic in a
transaction that also commits the consumed offsets (sendOffsetsToTransaction);
and a read_committed reader of all three topics. While they run, ferry
reloads a modified cluster (live handover: their connections move to the new
worker) and then the serving worker is killed with SIGKILL (the supervisor
starts another; the clients reconnect through ferry). Then the producers
commit an END record on every partition and everyone finishes.

Checked: every transaction a producer committed is visible to read_committed
exactly once, each of its records once (no duplicate, no loss); none it
aborted is visible; one whose outcome it could not learn (none expected) is
all there or all absent; the transformed topic holds each committed source
record exactly once; the clients saw and dialled only ferry's addresses.
Figures (transactions, messages, duplicates, losses, reconnects, the longest
commit) go to the report printed at the end of the run.
"""

import time

from .conftest import CLUSTER, ferry_addresses, report, unique_name
from .scenario import RELOAD_DRAIN_TIMEOUT, Peer, kill_worker, reload_modified, wait_until

TXN_SIZE = 10
ABORT_EVERY = 7
STEP = 10          # committed transactions each phase waits for


def check_txn_topic(name, topic_doc, prod, what):
    """The reader's view of one topic against a producer's result: returns
    (messages visible, lost records, duplicates)."""
    recs = {int(t): n for t, n in topic_doc["txn_records"].items()}
    committed, aborted, unknown = (set(prod[k]) for k in ("committed", "aborted", "unknown"))
    lost = sum(TXN_SIZE - recs.get(t, 0) for t in committed)
    partial = {t: recs[t] for t in recs if recs[t] != TXN_SIZE}
    visible_aborted = sorted(t for t in aborted if t in recs)
    stray = sorted(t for t in recs if t not in committed | aborted | unknown)
    assert topic_doc["duplicates"] == 0, f"{what}: {topic_doc['duplicates']} duplicates in {name}"
    assert topic_doc["foreign"] == 0, f"{what}: foreign records in {name}: {topic_doc}"
    assert lost == 0, f"{what}: {lost} committed records missing from {name}"
    assert not partial, f"{what}: transactions seen in part in {name}: {partial}"
    assert not visible_aborted, f"{what}: aborted transactions visible in {name}: {visible_aborted}"
    assert not stray, f"{what}: transactions in {name} nobody produced: {stray}"
    return sum(recs.values()), lost, topic_doc["duplicates"]


def test_transactions_exactly_once_across_reload_and_worker_kill(
        kafka_cluster, kafka_ferry, kafka_topic, workdir, request):
    t_start = time.monotonic()
    ferry = kafka_ferry(workers=1, drain_timeout=RELOAD_DRAIN_TIMEOUT)
    src, src2, dst = kafka_topic("txn-src"), kafka_topic("txn-cfk"), kafka_topic("txn-dst")
    run = unique_name("R")
    base = {"bootstrap": ferry.bootstrap(CLUSTER), "run-id": run, "timeout": 150}
    txn = {"txn-size": TXN_SIZE, "abort-every": ABORT_EVERY, "txn-sleep-ms": 10}

    def peer(mode, label, program="java", **opts):
        return Peer(workdir, mode, {**base, **opts}, ferry, kafka_cluster, request, label, program)

    reader = peer("txn-verify", "reader", topics=f"{src},{src2},{dst}")
    jprod = peer("txn-produce", "java producer", topic=src, **txn, **{"transactional-id": run + "-j"})
    cprod = peer("txn-produce", "confluent producer", "confluent-kafka", topic=src2, **txn,
                 **{"transactional-id": run + "-c"})
    ctp = peer("txn-transform", "transform", topic=src, **{"out-topic": dst, "group": run + "-ctp",
                                                          "transactional-id": run + "-t",
                                                          "max-poll-records": 50})
    peers = (jprod, cprod, ctp, reader)

    def committed(p):
        return p.progress().get("committed", 0)

    def flowing(n_prod, n_ctp):
        return lambda: (committed(jprod) >= n_prod and committed(cprod) >= n_prod
                        and ctp.progress().get("txns", 0) >= n_ctp)

    wait_until(flowing(STEP, 3), 120, "transactions flowing", *peers)
    t_flowing = time.monotonic()
    connects = [{p.label: len(p.connects()) for p in peers}]

    # 1. a reload that modifies the cluster: the connections move
    rep = reload_modified(ferry)
    assert rep["forced"] == 0 and rep["handedOver"] >= 4, rep
    mark = (committed(jprod), committed(cprod), ctp.progress().get("txns", 0))
    wait_until(flowing(mark[0] + STEP, mark[2] + 3), 60, "transactions after the reload", *peers)
    connects.append({p.label: len(p.connects()) for p in peers})

    # 2. SIGKILL of the serving worker: the clients reconnect through ferry
    killed, new, back_in = kill_worker(ferry)
    mark = (committed(jprod), committed(cprod), ctp.progress().get("txns", 0))
    wait_until(flowing(mark[0] + STEP, mark[2] + 3), 90, "transactions after the worker kill",
               *peers)
    connects.append({p.label: len(p.connects()) for p in peers})

    for p in (jprod, cprod):
        p.stop()
    results = {p.label: p.wait(120) for p in peers}
    for p in peers:
        p.check(ferry_addresses(ferry))
    jr, cr, tr, rr = (results[p.label] for p in peers)
    topics = rr["topics"]

    msgs = {}
    for name, prod, label in ((src, jr, "java"), (src2, cr, "confluent-kafka")):
        assert not prod["unknown"], f"{label}: transactions of unknown outcome: {prod}"
        msgs[label] = check_txn_topic(name, topics[name], prod, label)
    # the transformed topic: the Java producer's committed records, once each
    out = check_txn_topic(dst, topics[dst], jr, "transform")
    assert out[0] == msgs["java"][0], (out, msgs)
    assert ferry.metrics().get(("ferry_frames_rejected_total", CLUSTER), 0) == 0
    partitions = len(kafka_cluster.end_offsets(src))
    assert tr["records"] == msgs["java"][0] + partitions, tr   # + the END records

    def delta(i):
        return ", ".join(f"{k} {connects[i + 1][k] - connects[i][k]}" for k in connects[i])

    wall = time.monotonic() - t_start
    report.append(
        f"transactions (test_txn, {wall:.0f}s, {t_flowing - t_start:.0f}s to start the peers): "
        f"java {len(jr['committed'])} committed / {len(jr['aborted'])} aborted / "
        f"{len(jr['unknown'])} unknown, {msgs['java'][0]} messages, "
        f"longest commit {jr['max_commit_ms']} ms, {jr['commit_retries']} commit retries; "
        f"confluent-kafka {len(cr['committed'])} / {len(cr['aborted'])} / {len(cr['unknown'])}, "
        f"{msgs['confluent-kafka'][0]} messages, longest commit {cr['max_commit_ms']} ms; "
        f"transform {tr['txns']} txns ({tr['aborted_txns']} aborted, {tr['rewinds']} rewinds), "
        f"{out[0]} messages; read_committed: duplicates 0, lost 0. "
        f"Reload: {rep['handedOver']} connections handed over, {rep['forced']} forced; "
        f"new connections {delta(0)}. Worker kill: {killed} -> {new} serving in {back_in:.2f}s; "
        f"new connections {delta(1)}")
