#!/usr/bin/env python3
"""
The Python test peers: confluent-kafka (librdkafka, as pip ships it) and
kafka-python, from the virtualenv scripts/install-kafka makes. Produces or
consumes a counted run of records and prints one JSON line; the same
arguments and output as the Java and Go peers (tests/peers/kafka/README.md).

    client.py --lib confluent|kafka-python --bootstrap B --topic T --count N
              --mode produce|consume|metadata [...]
"""

import json
import sys
import time

import peer_args


def parse():
    ap = peer_args.parser("ferry-py-peer")
    ap.add_argument("--lib", choices=("confluent", "kafka-python"), required=True)
    ap.add_argument("--debug", action="store_true", help="the library's debug log on stderr")
    a = ap.parse_args()
    if a.debug:
        import logging
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(name)s %(message)s")
        if a.lib == "confluent":
            a.prop.append("debug=broker,protocol,cgrp,fetch,msg")
    return a


class Result:
    def __init__(self, a, client, version):
        self.a = a
        self.t0 = time.monotonic()
        self.fields = {"client": client, "lib_version": version, "mode": a.mode, "topic": a.topic}
        self.errors, self.error_count = [], 0
        self.brokers = set()
        self.seen = [False] * a.count
        self.prefix = a.run_id + "-"
        self.consumed = self.unique = self.foreign = self.acked = 0
        self.produced = 0

    def error(self, what):
        self.error_count += 1
        if len(self.errors) < 20:
            self.errors.append(str(what))

    def broker(self, host, port):
        self.brokers.add(f"{host}:{port}")

    def record(self, value):
        self.consumed += 1
        i = -1
        if value is not None:
            v = value.decode(errors="replace") if isinstance(value, bytes) else value
            if v.startswith(self.prefix) and v[len(self.prefix):].isdigit():
                i = int(v[len(self.prefix):])
        if not 0 <= i < len(self.seen):
            self.foreign += 1
        elif not self.seen[i]:
            self.seen[i] = True
            self.unique += 1

    def done(self):
        return self.unique == len(self.seen)

    def emit(self):
        f = self.fields
        if self.a.mode == "produce":
            f.update(produced=self.produced, acked=self.acked)
        elif self.a.mode == "consume":
            if not self.done():
                self.error(f"timed out with {self.unique} of {len(self.seen)} records")
            f.update(consumed=self.consumed, unique=self.unique,
                     duplicates=self.consumed - self.foreign - self.unique,
                     missing=len(self.seen) - self.unique, foreign=self.foreign)
        f.update(brokers=sorted(self.brokers), errors=self.errors, error_count=self.error_count,
                 elapsed_ms=int((time.monotonic() - self.t0) * 1000))
        print(json.dumps(f), flush=True)
        return 1 if self.error_count else 0


def consume_loop(a, res, poll):
    """poll() -> list of values; until every record is seen (then linger) or timeout."""
    deadline = time.monotonic() + a.timeout
    linger_until = None
    while time.monotonic() < deadline and (linger_until is None or time.monotonic() < linger_until):
        for v in poll():
            res.record(v)
        if res.done() and linger_until is None:
            linger_until = time.monotonic() + a.linger_ms / 1000


# ---- confluent-kafka --------------------------------------------------------

def run_confluent(a):
    import confluent_kafka as ck
    res = Result(a, "confluent-kafka", f"{ck.__version__} (librdkafka {ck.libversion()[0]})")
    conf = {"bootstrap.servers": a.bootstrap, "client.id": "ferry-confluent-peer",
            "security.protocol": a.security_protocol}
    if a.security_protocol.startswith("SASL"):
        conf.update({"sasl.mechanism": a.sasl_mechanism, "sasl.username": a.sasl_user,
                     "sasl.password": a.sasl_password})
    if a.ca:
        conf["ssl.ca.location"] = a.ca
    if a.cert:
        conf.update({"ssl.certificate.location": a.cert, "ssl.key.location": a.key})
    if a.no_verify_name:
        conf["ssl.endpoint.identification.algorithm"] = "none"
    conf.update(kv.split("=", 1) for kv in a.prop)

    def seen(client):
        try:
            md = client.list_topics(timeout=30)
            for b in md.brokers.values():
                res.broker(b.host, b.port)
        except Exception as e:
            res.error(f"metadata: {e}")

    if a.mode == "produce":
        conf.update({"acks": a.acks, "enable.idempotence": a.idempotent == "true",
                     "linger.ms": 5, "message.timeout.ms": int(a.timeout * 1000)})
        p = ck.Producer(conf)

        def dr(err, msg):
            if err is None:
                res.acked += 1
            else:
                res.error(f"delivery: {err}")
        for i in range(a.count):
            while True:
                try:
                    p.produce(a.topic, key=str(i), value=f"{a.run_id}-{i}", on_delivery=dr)
                    break
                except BufferError:
                    p.poll(0.1)
            res.produced += 1
            p.poll(0)
        left = p.flush(a.timeout)
        if left:
            res.error(f"{left} records not delivered after {a.timeout}s")
        seen(p)
    elif a.mode == "consume":
        conf.update({"group.id": a.group, "group.protocol": a.group_protocol,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        c = ck.Consumer(conf)
        c.subscribe([a.topic])

        def poll():
            out = []
            for m in c.consume(num_messages=500, timeout=0.2):
                if m.error():
                    if m.error().code() != ck.KafkaError._PARTITION_EOF:
                        res.error(f"consume: {m.error()}")
                else:
                    out.append(m.value())
            return out
        consume_loop(a, res, poll)
        try:
            c.commit(asynchronous=False)
            got = c.committed(c.assignment(), timeout=30)
            res.fields["committed"] = sum(tp.offset for tp in got if tp.offset >= 0)
        except ck.KafkaException as e:
            res.error(f"commit: {e}")
        seen(c)
        c.close()
    else:
        from confluent_kafka.admin import AdminClient
        seen(AdminClient(conf))
    return res.emit()


# ---- kafka-python -------------------------------------------------------------

def run_kafka_python(a):
    import kafka
    from kafka.structs import TopicPartition
    res = Result(a, "kafka-python", kafka.__version__)
    conf = {"bootstrap_servers": a.bootstrap.split(","), "client_id": "ferry-kafka-python-peer",
            "security_protocol": a.security_protocol}
    if a.security_protocol.startswith("SASL"):
        conf.update({"sasl_mechanism": a.sasl_mechanism, "sasl_plain_username": a.sasl_user,
                     "sasl_plain_password": a.sasl_password})
    if a.ca:
        conf["ssl_cafile"] = a.ca
    if a.cert:
        conf.update({"ssl_certfile": a.cert, "ssl_keyfile": a.key})
    if a.no_verify_name:
        conf["ssl_check_hostname"] = False
    for kv in a.prop:
        k, v = kv.split("=", 1)
        conf[k] = int(v) if v.isdigit() else v

    def seen(client):
        # the client's own metadata (KafkaProducer keeps it in _metadata)
        cluster = client._metadata if hasattr(client, "_metadata") else client._client.cluster
        for b in cluster.brokers():
            res.broker(b.host, b.port)

    if a.mode == "produce":
        acks = "all" if a.acks in ("all", "-1") else int(a.acks)
        p = kafka.KafkaProducer(acks=acks, enable_idempotence=a.idempotent == "true",
                                linger_ms=5, **conf)
        futures = []
        for i in range(a.count):
            futures.append(p.send(a.topic, key=str(i).encode(), value=f"{a.run_id}-{i}".encode()))
            res.produced += 1
        p.flush(a.timeout)
        for f in futures:
            try:
                f.get(timeout=max(0.1, a.timeout))
                res.acked += 1
            except Exception as e:  # noqa: BLE001 -- reported
                res.error(f"delivery: {e!r}")
        p.partitions_for(a.topic)
        seen(p)
        p.close(timeout=10)
    elif a.mode == "consume":
        c = kafka.KafkaConsumer(group_id=a.group, enable_auto_commit=False,
                                auto_offset_reset="earliest", **conf)
        c.subscribe([a.topic])

        def poll():
            # kafka-python 3.0.12 sometimes never completes a JoinGroup/
            # SyncGroup round that a poll(timeout_ms=200) timed out in the
            # middle of: the consumer then sits with no assignment until its
            # session expires (seen against Kafka 4.4 directly, about one run
            # in six). Polls of a second, as applications make, do not hit it.
            out = []
            for recs in c.poll(timeout_ms=1000, max_records=500).values():
                out.extend(r.value for r in recs)
            return out
        consume_loop(a, res, poll)
        try:
            c.commit()
            total = 0
            for tp in c.assignment():
                off = c.committed(TopicPartition(tp.topic, tp.partition))
                total += off or 0
            res.fields["committed"] = total
        except Exception as e:  # noqa: BLE001 -- reported
            res.error(f"commit: {e!r}")
        seen(c)
        c.close()
    else:
        admin = kafka.KafkaAdminClient(**conf)
        for b in admin.describe_cluster()["brokers"]:
            res.broker(b["host"], b["port"])
        admin.close()
    return res.emit()


def main():
    a = parse()
    try:
        return (run_confluent if a.lib == "confluent" else run_kafka_python)(a)
    except Exception as e:  # noqa: BLE001 -- a fatal error is still a result line
        res = Result(a, a.lib, "unknown")
        res.error(f"fatal: {e!r}")
        return res.emit()


if __name__ == "__main__":
    sys.exit(main())
