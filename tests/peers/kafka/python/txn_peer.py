#!/usr/bin/env python3
"""
confluent-kafka (librdkafka) as a transactional producer, the role
Scenarios.java's txn-produce plays for the Java client, with the same
records, stop file, progress file and result (tests/integration/realkafka/
test_txn.py): transactions of --txn-size records "R-t-i", every
--abort-every'th aborted on purpose, until the stop file exists; then one
committed "R-END" record per partition. Result: committed, aborted, unknown
(transaction numbers), commit_retries, max_commit_ms, brokers, errors.

    txn_peer.py --bootstrap B --topic T --run-id R --stop-file F
                [--progress F] [--txn-size 10] [--abort-every 7]
                [--txn-sleep-ms 0] [--transactional-id ID] [--timeout 120]
"""

import argparse
import json
import os
import sys
import time


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--run-id", default="R")
    ap.add_argument("--stop-file", required=True)
    ap.add_argument("--progress")
    ap.add_argument("--txn-size", type=int, default=10)
    ap.add_argument("--abort-every", type=int, default=0)
    ap.add_argument("--txn-sleep-ms", type=int, default=0)
    ap.add_argument("--transactional-id")
    ap.add_argument("--timeout", type=float, default=120)
    return ap.parse_args()


def main():
    import confluent_kafka as ck
    a = parse()
    t0 = time.monotonic()
    deadline = t0 + a.timeout
    errors, error_count = [], 0
    committed, aborted, unknown = [], [], []
    retries = max_commit_ms = producers = 0
    brokers = set()

    def error(what):
        nonlocal error_count
        error_count += 1
        if len(errors) < 20:
            errors.append(str(what))

    def progress(doc):
        if a.progress:
            tmp = a.progress + ".tmp"
            with open(tmp, "w") as f:
                json.dump(doc, f)
            os.replace(tmp, a.progress)

    def new_producer():
        p = ck.Producer({"bootstrap.servers": a.bootstrap, "client.id": "ferry-confluent-txn",
                         "transactional.id": a.transactional_id or f"{a.run_id}-cfk",
                         "enable.idempotence": True, "acks": "all", "linger.ms": 2,
                         "transaction.timeout.ms": 60000, "message.timeout.ms": 60000})
        p.init_transactions(30)
        return p

    def commit(p):
        """commit_transaction, retried while librdkafka says it may be."""
        nonlocal retries
        start = time.monotonic()
        while True:
            try:
                p.commit_transaction(10)
                return int((time.monotonic() - start) * 1000)
            except ck.KafkaException as e:
                if e.args[0].retriable() and time.monotonic() < deadline:
                    retries += 1
                    continue
                raise

    p, t, end_committed, partitions = None, 0, False, 0
    while time.monotonic() < deadline and not end_committed:
        if p is None:
            p = new_producer()
            producers += 1
            md = p.list_topics(a.topic, timeout=30)
            partitions = len(md.topics[a.topic].partitions)
            brokers.update(f"{b.host}:{b.port}" for b in md.brokers.values())
        end = os.path.exists(a.stop_file)
        abort = not end and a.abort_every > 0 and t % a.abort_every == a.abort_every - 1
        try:
            p.begin_transaction()
            if end:
                for part in range(partitions):
                    p.produce(a.topic, key=b"END", value=f"{a.run_id}-END".encode(), partition=part)
            else:
                for i in range(a.txn_size):
                    p.produce(a.topic, key=str(t * a.txn_size + i).encode(),
                              value=f"{a.run_id}-{t}-{i}".encode())
            if abort:
                # librdkafka (up to 2.16 at least, issue 4849) may send the
                # abort's EndTxn before the coordinator has registered the
                # transaction's partitions, which it answers with a fatal
                # INVALID_TXN_STATE: deliver the records first (they are
                # aborted all the same, never visible to read_committed)
                p.flush(30)
                p.abort_transaction(30)
                aborted.append(t)
            else:
                max_commit_ms = max(max_commit_ms, commit(p))
                if end:
                    end_committed = True
                else:
                    committed.append(t)
        except ck.KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                error(f"txn {t} aborted: {err}")
                p.abort_transaction(30)
                if not end:
                    aborted.append(t)
            else:
                # fatal or undecided: a new producer's init_transactions
                # completes or aborts it, as the coordinator decided
                error(f"txn {t}: {err}")
                if not end:
                    unknown.append(t)
                p = None
        if not end:
            t += 1
        progress({"txns": t, "committed": len(committed)})
        if a.txn_sleep_ms and not end_committed:
            time.sleep(a.txn_sleep_ms / 1000)
    if not end_committed:
        error("deadline before the END transaction committed")
    if p is not None:
        p.flush(10)
    print(json.dumps({"client": "confluent-kafka", "lib_version": ck.libversion()[0],
                      "mode": "txn-produce", "txn_size": a.txn_size, "committed": committed,
                      "aborted": aborted, "unknown": unknown, "commit_retries": retries,
                      "max_commit_ms": max_commit_ms, "producers": producers,
                      "brokers": sorted(brokers), "errors": errors, "error_count": error_count,
                      "elapsed_ms": int((time.monotonic() - t0) * 1000)}))
    return 0 if error_count == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
