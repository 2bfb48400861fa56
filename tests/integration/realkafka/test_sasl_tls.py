"""
SASL and TLS through ferry against real Apache Kafka (issue 19, item 3).

SASL pass-through: the reference clients authenticate with PLAIN and
SCRAM-SHA-512 through ferry to the brokers' SASL_PLAINTEXT listener and
produce/consume exact counts; a wrong password is refused by the broker,
whose answer reaches the client (ferry rejects nothing, reports no
protocol error, keeps the upstream reachable).

ferry's own requests (the worker's metadata fetch, which is also its
health probe) against that SASL-only listener:
  - without upstream_sasl_*: ferry says at start that its own fetch cannot
    authenticate, counts the upstream reachable (it answers ApiVersions), a
    broker port is closed with that reason until a client has bootstrapped,
    and after kill -9 of the worker a client that connects straight to a
    broker port is served from the broker map the new worker inherits;
  - with upstream_sasl_* (PLAIN, SCRAM-SHA-512): the brokers are known at
    start, before any client, and a client straight to a broker port is
    served right after a cold start;
  - with a wrong ferry password: unreachable with the broker's reason in
    status and log, and it stays so while clients work on their own.

TLS: upstream TLS to the SSL listener with the broker's name checked (a
wrong CA and a wrong name are refused with the reason), SASL_SSL end to
end (client -> ferry TLS -> broker SASL_SSL, SASL passed through) with
the Java client and confluent-kafka, and a client certificate from ferry
to the MTLS listener (client certificates required).
"""

import os
import signal
import socket
import struct
import subprocess
import time

import pytest

from conftest import serving_pids, wait_for

from .conftest import CLUSTER, ferry_addresses, unique_name

COUNT = 500
ALICE = {"sasl-user": "alice", "sasl-password": "alice-secret"}


def sasl(mech, protocol="SASL_PLAINTEXT", **kw):
    return {"security-protocol": protocol, "sasl-mechanism": mech, **ALICE, **kw}


def check_run(r, ferry):
    assert r.result is not None, f"no result line\n{r.describe()}"
    assert r.result["error_count"] == 0 and r.rc == 0, r.describe()
    seen = set(r.result["brokers"])
    assert seen and seen <= ferry_addresses(ferry), \
        f"{r.name} saw brokers {sorted(seen)}, ferry's are {sorted(ferry_addresses(ferry))}"
    assert not r.dial_problems(), "\n".join(r.dial_problems()) + "\n" + r.describe()


def produce_consume(kafka_cluster, run_client, ferry, client, topic, opts, bootstrap=None):
    """COUNT records produced (acks=all, idempotent) and consumed by a group,
    exactly, through ferry."""
    base = {"bootstrap": bootstrap or ferry.bootstrap(CLUSTER), "topic": topic, "count": COUNT,
            "run-id": unique_name("r"), "timeout": 60, **opts}
    p = run_client(client, ferry, {**base, "mode": "produce", "acks": "all", "idempotent": "true"})
    check_run(p, ferry)
    assert (p.result["produced"], p.result["acked"]) == (COUNT, COUNT), p.describe()
    ends = kafka_cluster.end_offsets(topic)
    assert sum(ends.values()) == COUNT, f"the log holds {ends} for {COUNT} records"
    c = run_client(client, ferry, {**base, "mode": "consume", "group": unique_name("g"),
                                   "linger-ms": 200})
    check_run(c, ferry)
    res = c.result
    assert (res["consumed"], res["unique"], res["duplicates"], res["missing"],
            res["foreign"]) == (COUNT, COUNT, 0, 0, 0), c.describe()
    if res.get("committed") is not None:
        assert res["committed"] == COUNT, c.describe()


def log_text(ferry):
    return ferry.log_path.read_text(errors="replace")


def rejected(ferry):
    return ferry.metrics().get(("ferry_frames_rejected_total", CLUSTER), 0)


def password_file(workdir, name, text, mode=0o600):
    p = workdir / name
    p.write_text(text + "\n")
    os.chmod(p, mode)
    return p


def own_sasl(workdir, mech, user="admin", password="admin-secret"):
    return {"upstream_sasl_mechanism": mech, "upstream_sasl_username": user,
            "upstream_sasl_password_file": password_file(workdir, f"pw-{mech}", password)}


def known_brokers(ferry):
    return {b["nodeId"]: b["upstream"] for b in ferry.cluster(CLUSTER)["knownBrokers"]}


def broker_port(ferry, node_id):
    c = ferry.clusters[CLUSTER]
    return c["brokers"][c["node_ids"].index(node_id)]


def want_brokers(kafka_cluster, listener):
    return {i: f"localhost:{p}" for i, p in kafka_cluster.broker_ports(listener).items()}


# ---------------------------------------------------------------------------
# SASL passed through
# ---------------------------------------------------------------------------

PASSTHROUGH = [("java", "PLAIN"), ("confluent-kafka", "PLAIN"), ("kcat", "PLAIN"),
               ("sarama", "PLAIN"), ("confluent-kafka", "SCRAM-SHA-512"),
               ("kafka-python", "SCRAM-SHA-512"), ("franz-go", "SCRAM-SHA-512")]


@pytest.mark.parametrize("client,mech", PASSTHROUGH, ids=[f"{c}-{m}" for c, m in PASSTHROUGH])
def test_sasl_passed_through(kafka_cluster, kafka_ferry, kafka_topic, run_client, client, mech):
    ferry = kafka_ferry(listener="SASL_PLAINTEXT")
    topic = kafka_topic(f"sasl-{client}")
    produce_consume(kafka_cluster, run_client, ferry, client, topic, sasl(mech))
    assert rejected(ferry) == 0
    assert ferry.cluster(CLUSTER)["upstream"]["state"] == "reachable"


WRONG = [("java", "SCRAM-SHA-512"), ("franz-go", "SCRAM-SHA-512"), ("kcat", "PLAIN")]


@pytest.mark.parametrize("client,mech", WRONG, ids=[f"{c}-{m}" for c, m in WRONG])
def test_wrong_password_refused_by_the_broker(kafka_ferry, run_client, client, mech):
    ferry = kafka_ferry(listener="SASL_PLAINTEXT")
    r = run_client(client, ferry, {"bootstrap": ferry.bootstrap(CLUSTER), "mode": "metadata",
                                   "timeout": 10, **sasl(mech, **{"sasl-password": "wrong"})},
                   timeout=60)
    assert r.result is not None and r.result["error_count"] >= 1, r.describe()
    errors = " ".join(r.result["errors"])
    print(f"{client}: {errors[:300]}")
    # the broker's own answer reached the client through ferry
    assert "Authentication failed" in errors, r.describe()
    assert not r.result["brokers"], r.describe()
    assert not r.dial_problems(), "\n".join(r.dial_problems())
    # nothing malformed, no protocol error, the upstream still fine
    assert rejected(ferry) == 0
    log = log_text(ferry)
    for bad in ("protocol error", "not a Kafka broker", "malformed"):
        assert bad not in log, f"ferry logged '{bad}':\n{log[-3000:]}"
    assert ferry.cluster(CLUSTER)["upstream"]["state"] == "reachable"


# ---------------------------------------------------------------------------
# ferry's own metadata fetch against a SASL-only upstream
# ---------------------------------------------------------------------------

def straight_to_broker(run_client, ferry, node_id, mech="SCRAM-SHA-512"):
    """A client whose bootstrap is one of ferry's broker ports (as a
    consumer reconnecting to its partition leader): its metadata comes from
    that broker through ferry."""
    r = run_client("franz-go", ferry, {"bootstrap": f"127.0.0.1:{broker_port(ferry, node_id)}",
                                       "mode": "metadata", "timeout": 20, **sasl(mech)},
                   timeout=60)
    check_run(r, ferry)
    assert set(r.result["brokers"]) == ferry_addresses(ferry), r.describe()
    return r


def raw_close_reason(ferry, node_id):
    """Connect to a broker port, send ApiVersions: the connection is closed
    (the broker's address is unknown); ferry logs why."""
    s = socket.create_connection(("127.0.0.1", broker_port(ferry, node_id)), timeout=15)
    req = struct.pack(">hhih", 18, 0, 1, 1) + b"t"
    s.sendall(struct.pack(">i", len(req)) + req)
    try:
        assert s.recv(100) == b"", "answered although the broker's address is unknown"
    except ConnectionResetError:
        pass
    finally:
        s.close()


def test_own_fetch_without_credentials(kafka_cluster, kafka_ferry, kafka_topic, run_client):
    ferry = kafka_ferry(listener="SASL_PLAINTEXT")
    wait_for(lambda: "ferry's own metadata fetch cannot authenticate" in log_text(ferry), 10,
             what="the warning that ferry's own fetch cannot authenticate")
    st = ferry.cluster(CLUSTER)
    assert st["upstream"]["state"] == "reachable", st["upstream"]
    assert known_brokers(ferry) == {}
    # a broker port before any client bootstrapped: closed, with the reason
    raw_close_reason(ferry, 2)
    wait_for(lambda: "node id 2 unknown yet: the upstream requires SASL" in log_text(ferry), 10,
             what="the reason a broker port was closed")

    # a client bootstraps through ferry: its metadata is learned and kept
    topic = kafka_topic("own-none")
    r = run_client("franz-go", ferry, {"bootstrap": ferry.bootstrap(CLUSTER), "topic": topic,
                                       "count": 50, "run-id": unique_name("r"), "timeout": 30,
                                       "mode": "produce", **sasl("SCRAM-SHA-512")})
    check_run(r, ferry)
    want = want_brokers(kafka_cluster, "SASL_PLAINTEXT")
    wait_for(lambda: known_brokers(ferry) == want, 10, what="the brokers learned from the client")

    # kill -9 of the worker: its replacement inherits the map, fetches nothing
    # (it could not), and serves a client straight on a broker port
    old = serving_pids(ferry.cluster(CLUSTER))[0]
    os.kill(old, signal.SIGKILL)
    wait_for(lambda: (p := serving_pids(ferry.cluster(CLUSTER))) and old not in p, 15,
             what="a new serving worker")
    assert "upstream brokers known from earlier generations" in log_text(ferry)
    straight_to_broker(run_client, ferry, 2)
    straight_to_broker(run_client, ferry, 3, mech="PLAIN")
    assert ferry.cluster(CLUSTER)["upstream"]["state"] == "reachable"
    assert rejected(ferry) == 0


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-512"])
def test_own_fetch_with_credentials(kafka_cluster, kafka_ferry, run_client, workdir, mech):
    ferry = kafka_ferry(listener="SASL_PLAINTEXT", cluster_keys=own_sasl(workdir, mech))
    # the worker's own fetch authenticated: every broker known, before any client
    want = want_brokers(kafka_cluster, "SASL_PLAINTEXT")
    wait_for(lambda: known_brokers(ferry) == want, 10, what="the brokers known at start")
    st = ferry.cluster(CLUSTER)["upstream"]
    assert st["state"] == "reachable" and st["lastError"] is None, st
    log = log_text(ferry)
    assert f'upstream SASL ready" mechanism={mech} username="admin"' in log
    assert "admin-secret" not in log
    assert "cannot authenticate" not in log
    # right after a cold start, a client straight to a broker port
    straight_to_broker(run_client, ferry, 3)


def test_own_fetch_wrong_password(kafka_cluster, kafka_ferry, kafka_topic, run_client, workdir):
    keys = own_sasl(workdir, "SCRAM-SHA-512", password="not-the-password")
    ferry = kafka_ferry(listener="SASL_PLAINTEXT", cluster_keys=keys)

    def refused():
        u = ferry.cluster(CLUSTER)["upstream"]
        return u if u["state"] == "unreachable" and u["lastError"] else None
    u = wait_for(refused, 10, what="the upstream unreachable with a reason")
    print(f"upstream unreachable: {u['lastError']}")
    assert "upstream SASL SCRAM-SHA-512 as 'admin' refused by localhost:" in u["lastError"], u
    assert "Authentication failed" in u["lastError"], u
    log = log_text(ferry)
    assert 'msg="upstream unreachable" error="upstream SASL SCRAM-SHA-512 as' in log
    assert "not-the-password" not in log
    # clients authenticate themselves: unaffected
    topic = kafka_topic("own-wrong")
    produce_consume(kafka_cluster, run_client, ferry, "franz-go", topic, sasl("SCRAM-SHA-512"))
    # and their success does not hide that ferry's own credentials are refused
    u = ferry.cluster(CLUSTER)["upstream"]
    assert u["state"] == "unreachable" and "refused by" in u["lastError"], u
    assert rejected(ferry) == 0


# ---------------------------------------------------------------------------
# TLS
# ---------------------------------------------------------------------------

def other_ca(workdir):
    """A CA that signed nothing of the cluster's."""
    d = workdir / "other-ca"
    d.mkdir(exist_ok=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(d / "ca.key"), "-days",
                    "2", "-subj", "/CN=some other CA", "-out", str(d / "ca.crt")],
                   check=True, capture_output=True, timeout=30)
    return d / "ca.crt"


def test_upstream_tls_name_verified(kafka_cluster, kafka_ferry, kafka_topic, run_client):
    ferry = kafka_ferry(listener="SSL")
    want = want_brokers(kafka_cluster, "SSL")
    wait_for(lambda: known_brokers(ferry) == want, 10, what="the brokers known over TLS")
    topic = kafka_topic("tls")
    produce_consume(kafka_cluster, run_client, ferry, "franz-go", topic, {})
    m = ferry.metrics()
    assert m.get(("ferry_upstream_tls_handshakes_total", CLUSTER), 0) >= 2, m
    assert rejected(ferry) == 0


def unreachable_because(ferry, what):
    def pred():
        u = ferry.cluster(CLUSTER)["upstream"]
        return u if u["state"] == "unreachable" and what in (u["lastError"] or "") else None
    u = wait_for(pred, 15, what=f"the upstream unreachable because of '{what}'")
    print(f"upstream unreachable: {u['lastError']}")
    return u


def test_upstream_tls_wrong_ca_refused(kafka_ferry, workdir):
    ferry = kafka_ferry(listener="SSL", cluster_keys={"upstream_ca": other_ca(workdir)})
    unreachable_because(ferry, "certificate verify failed")
    assert known_brokers(ferry) == {}


def test_upstream_tls_wrong_name_refused(kafka_cluster, kafka_ferry):
    # the broker's certificate names localhost and 127.0.0.1; ferry dials
    # the same broker under a name the certificate does not carry
    port = kafka_cluster.broker_ports("SSL")[1]
    ferry = kafka_ferry(listener="SSL", upstream=f"kafka.invalid:{port}",
                        cluster_keys={"upstream_dial_map": f"kafka.invalid:{port}=127.0.0.1:{port}"})
    u = unreachable_because(ferry, "certificate verify failed")
    assert "hostname mismatch" in u["lastError"] or "kafka.invalid" in u["lastError"], u


@pytest.mark.parametrize("client", ["java", "confluent-kafka"])
def test_sasl_ssl_end_to_end(kafka_cluster, kafka_ferry, kafka_topic, run_client, client):
    tls = kafka_cluster.dir / "tls"
    ferry = kafka_ferry(listener="SASL_SSL", cluster_keys={"tls_cert": tls / "server.crt",
                                                           "tls_key": tls / "server.key"})
    topic = kafka_topic(f"sasl-ssl-{client}")
    # the client checks ferry's certificate (127.0.0.1, as advertised) and
    # authenticates with SCRAM through ferry, which checks the broker's
    produce_consume(kafka_cluster, run_client, ferry, client, topic,
                    sasl("SCRAM-SHA-512", "SASL_SSL", ca=str(tls / "ca.crt")))
    m = ferry.metrics()
    assert m.get(("ferry_upstream_tls_handshakes_total", CLUSTER), 0) >= 2, m
    assert rejected(ferry) == 0


def test_upstream_mtls(kafka_cluster, kafka_ferry, kafka_topic, run_client):
    tls = kafka_cluster.dir / "tls"
    ferry = kafka_ferry(listener="MTLS", cluster_keys={"upstream_cert": tls / "client.crt",
                                                       "upstream_key": tls / "client.key"})
    want = want_brokers(kafka_cluster, "MTLS")
    wait_for(lambda: known_brokers(ferry) == want, 10, what="the brokers known over mTLS")
    topic = kafka_topic("mtls")
    produce_consume(kafka_cluster, run_client, ferry, "franz-go", topic, {})
    assert rejected(ferry) == 0


def test_upstream_mtls_without_certificate_refused(kafka_ferry):
    ferry = kafka_ferry(listener="MTLS")
    u = unreachable_because(ferry, "metadata fetch from localhost:")
    assert "(the broker wants a client certificate: upstream_cert, upstream_key)" in \
        u["lastError"], u
