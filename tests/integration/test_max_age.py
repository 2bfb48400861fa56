"""
connection_max_age (with connection_max_age_jitter): a connection older
than its jittered age is closed at its next request boundary, after every
response it is owed, and counted (ferry_connections_expired_total).

Checked: an idempotent producer (acks=all) and a group consumer
(confluent-kafka) against the mock cluster through ferry with a 2 s age
and 1 s of jitter keep working across dozens of closes: every message is
delivered OK, consumed exactly once, no request times out (librdkafka's
statistics), and the closes spread over the jitter window (ages measured
from ferry's close lines and printed). A Fetch in flight when the age
passes is answered before the close, and so is a request half sent; an
idle connection closes on time; a reload that hands a connection over
keeps its age (the close comes at its first accept plus its age, not the
reload's).

    FERRY_BUILD=$PWD/build /usr/bin/python3 -m pytest -q -s -p no:cacheprovider \
        tests/integration/test_max_age.py
"""

import json
import re
import socket
import statistics
import struct
import threading
import time

import pytest

from conftest import apiversions_v0, kreq, recv_kframe, wait_closed, wait_for

TOPIC = "age"


@pytest.fixture
def aged(mock_factory, reload_ferry_factory):
    def make(age, jitter, **more):
        m = mock_factory("A", 3, [f"{TOPIC}:3"])
        keys = {"connection_max_age": age, "connection_max_age_jitter": jitter, **more}
        f = reload_ferry_factory({"A": m}, ferry_extra={"log_level": "debug"},
                                 cluster_extra={"A": keys})
        return f, m
    return make


def expired_ages(f):
    """Ages (ms) of the connections ferry closed for their max-age."""
    return [int(x) for x in re.findall(r'reason="connection_max_age reached after (\d+) ms"',
                                       f.log_text())]


def metric(f, name):
    return f.metrics().get((name, "A"), 0)


def test_producer_and_group_consumer_across_expiries(aged):
    from confluent_kafka import Consumer, KafkaError, Producer
    f, _ = aged("2s", "1s")
    bs = f.bootstrap("A")
    lock = threading.Lock()
    stats, events = {}, []

    def stats_cb(name):
        def cb(js):
            d = json.loads(js)
            with lock:
                stats[name] = {b: {k: v.get(k, 0) for k in ("req_timeouts", "txretries",
                                                           "connects", "disconnects")}
                               for b, v in d.get("brokers", {}).items()
                               if v.get("nodeid", -1) >= 0 and v.get("source") != "logical"}
        return cb

    def error_cb(name):
        def cb(err):
            with lock:
                events.append((name, err.code(), str(err)))
        return cb

    common = {"bootstrap.servers": bs, "statistics.interval.ms": 500,
              "log.connection.close": False}
    p = Producer({**common, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                  "message.timeout.ms": 60000, "stats_cb": stats_cb("p"),
                  "error_cb": error_cb("p")})
    c = Consumer({**common, "group.id": "aged", "auto.offset.reset": "earliest",
                  "fetch.wait.max.ms": 200, "session.timeout.ms": 30000,
                  "stats_cb": stats_cb("c"), "error_cb": error_cb("c")})
    c.subscribe([TOPIC])
    produced, delivered, failed, consumed, consume_errors = [], [], [], [], []
    stop = threading.Event()

    def consume():
        while not stop.is_set():
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    consume_errors.append(str(msg.error()))
                continue
            consumed.append(msg.key().decode())

    def on_delivery(err, msg):
        (failed if err else delivered).append(str(err) if err else msg.key().decode())

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    try:
        t0 = time.monotonic()
        i = 0
        while time.monotonic() - t0 < 12:
            for _ in range(20):
                k = f"{i:07d}"
                p.produce(TOPIC, key=k.encode(), value=b"x" * 100, on_delivery=on_delivery)
                produced.append(k)
                i += 1
            p.poll(0.05)
        assert p.flush(60) == 0, "messages left unflushed"
        wait_for(lambda: len(set(consumed)) >= len(produced), 60, what="everything consumed")
        time.sleep(1.0)
    finally:
        stop.set()
        t.join(10)
        c.close()
    with lock:
        final = {k: dict(v) for k, v in stats.items()}
        evs = list(events)
    # nothing lost, nothing duplicated, every ack OK
    assert failed == [], failed[:5]
    assert sorted(delivered) == produced
    assert sorted(consumed) == produced, (
        f"{len(consumed)} consumed, {len(set(consumed))} distinct, {len(produced)} produced")
    assert consume_errors == [], consume_errors[:5]
    # no request timed out; the only client-side events are the closes
    timeouts = {f"{cl} {b}": v["req_timeouts"] for cl, bs_ in final.items()
                for b, v in bs_.items() if v["req_timeouts"]}
    assert not timeouts, timeouts
    other = [e for e in evs if e[1] not in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)]
    assert not other, other[:5]
    # clients reconnected many times; every close was counted as expired
    ages = expired_ages(f)
    expired = metric(f, "ferry_connections_expired_total")
    disconnects = sum(v["disconnects"] for bs_ in final.values() for v in bs_.values())
    retries = sum(v["txretries"] for bs_ in final.values() for v in bs_.values())
    assert expired >= 10 and len(ages) == expired, (expired, len(ages))
    assert disconnects >= 6, final
    # the spread: ages drawn in [1 s, 2 s], closed at the next boundary after
    lo, hi = min(ages), max(ages)
    assert lo >= 1000, f"a connection closed younger than max_age - jitter: {lo} ms"
    # (past the age only to reach a boundary: a JoinGroup the mock holds is
    # answered first)
    assert hi <= 6000, f"a connection outlived its age by {hi - 2000} ms"
    assert sum(1 for a in ages if a <= 2500) >= 0.8 * len(ages), sorted(ages)
    buckets = [sum(1 for a in ages if 1000 + 250 * k <= a < 1250 + 250 * k) for k in range(4)]
    late = sum(1 for a in ages if a >= 2000)
    print(f"\nmax-age 2s jitter 1s: {len(ages)} expiries in {time.monotonic() - t0:.1f}s; "
          f"age ms min {lo} median {statistics.median(ages):.0f} mean "
          f"{statistics.mean(ages):.0f} stdev {statistics.pstdev(ages):.0f} max {hi}; "
          f"per 250 ms from 1 s: {buckets}, past 2 s (reaching a boundary): {late}; "
          f"client disconnects {disconnects}, request retries {retries}, "
          f"client events {len(evs)}; {len(produced)} messages")
    assert sum(1 for b in buckets if b) >= 3, f"closes not spread over the jitter: {buckets}"


def test_a_request_in_flight_is_answered_before_the_close(aged):
    f, m = aged("2s", "0s")
    s = socket.create_connection(("127.0.0.1", f.clusters["A"]["bootstrap"]), timeout=10)
    t0 = time.monotonic()
    s.sendall(apiversions_v0(1))
    recv_kframe(s)
    # a request sent at 1.5 s that the upstream answers 2.5 s later: in
    # flight when the age passes
    for b in (1, 2, 3):
        m.command(f"rtt {b} 2500")
    time.sleep(1.5 - (time.monotonic() - t0))
    s.sendall(kreq(3, 0, 2, struct.pack(">i", 0)))  # Metadata v0, all topics
    resp = recv_kframe(s, timeout=10)
    got = time.monotonic() - t0
    assert struct.unpack(">i", resp[:4])[0] == 2
    assert got >= 3.5, f"the response came after {got:.2f}s: not delayed?"
    # then, at the boundary, the close
    data, _ = wait_closed(s, 3)
    assert data == b"", "nothing after the owed response"
    ages = expired_ages(f)
    assert len(ages) == 1 and ages[0] >= 3900, ages
    for b in (1, 2, 3):
        m.command(f"rtt {b} 0")
    s.close()


def test_a_request_half_sent_is_finished_and_answered(aged):
    f, _ = aged("2s", "0s")
    s = socket.create_connection(("127.0.0.1", f.clusters["A"]["bootstrap"]), timeout=10)
    t0 = time.monotonic()
    s.sendall(apiversions_v0(1))
    recv_kframe(s)
    req = apiversions_v0(2)
    time.sleep(1.8 - (time.monotonic() - t0))
    s.sendall(req[:7])
    time.sleep(0.6)       # the age passes with the frame in progress
    s.sendall(req[7:])
    resp = recv_kframe(s, timeout=5)
    assert struct.unpack(">i", resp[:4])[0] == 2
    wait_closed(s, 3)
    assert metric(f, "ferry_connections_expired_total") == 1
    s.close()


def test_idle_connection_closes_on_time_and_others_are_untouched(aged):
    f, _ = aged("3s", "0s")
    port = f.clusters["A"]["bootstrap"]
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    t0 = time.monotonic()
    s.sendall(apiversions_v0(1))
    recv_kframe(s)
    time.sleep(1.5)
    young = socket.create_connection(("127.0.0.1", port), timeout=10)
    young.sendall(apiversions_v0(1))
    recv_kframe(young)
    _, _ = wait_closed(s, 5)
    took = time.monotonic() - t0
    assert 2.9 <= took <= 3.8, took
    # the younger one still works
    young.sendall(apiversions_v0(2))
    recv_kframe(young)
    assert metric(f, "ferry_connections_expired_total") == 1
    assert metric(f, "ferry_connections_drained_total") == 0, "an expiry is not a drain"
    young.close()
    s.close()


def test_a_reload_that_hands_the_connection_over_keeps_its_age(aged):
    f, _ = aged("4s", "0s")
    s = socket.create_connection(("127.0.0.1", f.clusters["A"]["bootstrap"]), timeout=10)
    t0 = time.monotonic()
    s.sendall(apiversions_v0(1))
    recv_kframe(s)
    time.sleep(2.0)
    f.spec["A"]["extra"]["max_connections"] = "999"
    f.write()
    r = f.reload_ctl(json_out=True)
    assert r.returncode == 0 and json.loads(r.stdout)["status"] == "SUCCESS", r.stdout
    # handed over (not drained): the same connection answers
    s.sendall(apiversions_v0(2))
    recv_kframe(s)
    wait_for(lambda: metric(f, "ferry_connections_handed_over_total") == 1, 10,
             what="handed over")
    _, _ = wait_closed(s, 8)
    took = time.monotonic() - t0
    assert 3.8 <= took <= 4.9, f"closed {took:.2f}s after its first accept (age 4s)"
    ages = expired_ages(f)
    assert len(ages) == 1 and 3900 <= ages[0] <= 4900, ages
    s.close()
