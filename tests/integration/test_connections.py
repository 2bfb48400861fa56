"""
Who is connected: GET /admin/clusters/NAME/connections, `ferryctl
connections NAME` and the client software counts of /metrics, against real
clients authenticating through ferry to the SASL broker peer
(tests/peers/sasl_broker.py): confluent-kafka (librdkafka) with PLAIN and
SCRAM-SHA-256, kcat (librdkafka) with SCRAM-SHA-512, kafka-python with
PLAIN and SCRAM-SHA-512, and a hand-written client that asks for
OAUTHBEARER (the mechanism is listed, its token never looked at).

Checked: every connection's client_id, software name and version (null
where the client sends none), SASL mechanism and asserted name; the
filters (?client_id=, ?principal=, both) and paging; 404 for an unknown
cluster and 400 for bad parameters, as JSON errors; the ferryctl table and
its filters; ferry_client_connections per software (promtool clean); and
that no password or token appears anywhere: the listing, ferryctl's
output, /metrics, the status, ferryd's debug log. Workers are not dumpable
(no core can hold what they relay).

    FERRY_BUILD=$PWD/build /usr/bin/python3 -m pytest -q -p no:cacheprovider \
        tests/integration/test_connections.py
"""

import json
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import ReloadFerry, register_log, wait_for
from sasl_peer import SaslPeer, broker as B

TOPIC = "t"
USERS = {  # name -> password: distinctive, so a grep finds any leak
    "alice": "pw-Alice-7Qz9-secret",
    "bob": "pw-Bob-k3Lm-secret",
    "carol": "pw-Carol-x8Rt-secret",
    "dave": "pw-Dave-p0Uy-secret",
    "erin": "pw-Erin-v5Wq-secret",
    "learner": "pw-Learner-n1Hs-secret",
}
BEARER = "eyJhbGciOiJub25lIn0.bearer-TOKEN-z4Kp.secret"
SECRETS = list(USERS.values()) + [BEARER, "bearer-TOKEN-z4Kp"]


@pytest.fixture
def cenv(keeper, workdir, request):
    peer = SaslPeer(keeper, workdir, "S", users=[f"{u}:{p}" for u, p in USERS.items()])
    register_log(request, "sasl-peer", peer.log_path)
    f = ReloadFerry(keeper, workdir, {"S": peer}, ferry_extra={"log_level": "debug"})
    register_log(request, "ferryd", f.log_path)
    f.start()
    # an authenticated Metadata teaches the worker where node 1 is
    from test_sasl import Client
    c = Client(f.clusters["S"]["bootstrap"])
    code, msg, _ = c.plain_v1(user="learner", password=USERS["learner"])
    assert code == 0, msg
    assert 1 in c.metadata()
    c.close()
    return f, peer


def listing(f, query="", cluster="S"):
    code, _, body = f.http(f"/admin/clusters/{cluster}/connections{query}")
    assert code == 200, (code, body)
    return json.loads(body)


def rows_of(doc, client_id):
    return [r for r in doc["connections"] if r["clientId"] == client_id]


def confluent(f, client_id, mech, user):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": f.bootstrap("S"), "client.id": client_id,
                  "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech,
                  "sasl.username": user, "sasl.password": USERS[user], "acks": 1,
                  "message.timeout.ms": 20000})
    for i in range(5):
        p.produce(TOPIC, f"{client_id}-{i}".encode())
    assert p.flush(25) == 0
    return p


def kafka_python(f, client_id, mech, user):
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=f.bootstrap("S"), client_id=client_id,
                      security_protocol="SASL_PLAINTEXT", sasl_mechanism=mech,
                      sasl_plain_username=user, sasl_plain_password=USERS[user], acks=1,
                      api_version_auto_timeout_ms=10000)
    for i in range(3):
        p.send(TOPIC, f"{client_id}-{i}".encode()).get(timeout=20)
    return p


def test_who_is_connected(cenv, keeper, workdir):
    f, peer = cenv
    rdkafka, kpython = [], []
    kcat_proc = None
    try:
        rdkafka.append(confluent(f, "orders-app", "PLAIN", "alice"))
        rdkafka.append(confluent(f, "billing", "SCRAM-SHA-256", "bob"))
        # kcat: a producer kept open on a pipe
        kcat_proc = keeper.spawn("kcat", [
            "kcat", "-P", "-b", f.bootstrap("S"), "-t", TOPIC, "-X", "client.id=kcat-app",
            "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-512",
            "-X", "sasl.username=carol", "-X", f"sasl.password={USERS['carol']}"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=open(workdir / "kcat.log", "wb"))
        # (kcat reads its input in large blocks: enough lines to fill one)
        kcat_proc.stdin.write(b"".join(b"from kcat %06d\n" % i for i in range(40000)))
        kcat_proc.stdin.flush()
        peer.wait_log("PRODUCE user=carol", timeout=30)
        kpython.append(kafka_python(f, "py-plain", "PLAIN", "dave"))
        kpython.append(kafka_python(f, "py-scram", "SCRAM-SHA-512", "erin"))
        # a client asking for OAUTHBEARER: listed by mechanism only
        from test_sasl import Client
        oc = Client(f.clusters["S"]["bootstrap"])
        code, _ = oc.handshake(1, "OAUTHBEARER")
        assert code == 33, "the peer does not speak it; the connection stays"

        doc = wait_for(lambda: (lambda d: d if all(rows_of(d, c) for c in (
            "orders-app", "billing", "kcat-app", "py-plain", "py-scram")) else None)(listing(f)),
            15, what="every client listed")

        def one(client_id, mech, principal, software):
            rows = rows_of(doc, client_id)
            assert rows, client_id
            for r in rows:
                assert r["saslMechanism"] == mech, r
                assert r["principal"] == principal, r
                if software is None:
                    assert r["clientSoftwareName"] is None, r
                else:
                    assert (r["clientSoftwareName"], r["clientSoftwareVersion"]) == software, r
                assert r["address"].startswith("127.0.0.1:") and r["proxied"] is False
                assert r["state"] == "open"
            return rows
        conf_sw = ("confluent-kafka-python", "1.7.0-rdkafka-2.0.2")
        assert len(one("orders-app", "PLAIN", "alice", conf_sw)) >= 2  # bootstrap + broker
        one("billing", "SCRAM-SHA-256", "bob", conf_sw)
        kc = one("kcat-app", "SCRAM-SHA-512", "carol", ("librdkafka", "2.0.2"))
        # kafka-python 2.0.2 sends ApiVersions v0 only: no software to list
        one("py-plain", "PLAIN", "dave", None)
        one("py-scram", "SCRAM-SHA-512", "erin", None)
        assert any(r["listener"] == "broker" and r["nodeId"] == 1 for r in kc)
        oauth = [r for r in listing(f)["connections"] if r["saslMechanism"] == "OAUTHBEARER"]
        assert len(oauth) == 1 and oauth[0]["principal"] is None, oauth
        # the bearer token goes through; ferry never reads it
        token = b"n,,\x01auth=Bearer " + BEARER.encode() + b"\x01\x01"
        oc.s.sendall(B.request(36, 1, 9, B.i32(len(token)) + token))
        time.sleep(0.3)
        oc.close()

        # filters and paging
        d = listing(f, "?client_id=billing")
        assert d["total"] >= 1 and all(r["clientId"] == "billing" for r in d["connections"])
        d = listing(f, "?principal=alice")
        assert {r["clientId"] for r in d["connections"]} == {"orders-app"}
        d = listing(f, "?principal=erin&client_id=py-scram")
        assert d["total"] >= 1 and all(r["principal"] == "erin" for r in d["connections"])
        assert listing(f, "?principal=erin&client_id=billing")["total"] == 0
        everything = listing(f)
        total = everything["total"]
        paged, off = [], 0
        while True:
            d = listing(f, f"?limit=2&offset={off}")
            paged += d["connections"]
            if d["nextOffset"] is None:
                break
            off = d["nextOffset"]
        assert [(r["pid"], r["id"]) for r in paged] == \
            [(r["pid"], r["id"]) for r in everything["connections"]]
        assert len(paged) == total
        since = [r["since"] for r in paged]
        assert since == sorted(since), "oldest first"

        # ferryctl: the table, its filters, --json
        out = f.ctl("connections", "S").stdout
        assert re.search(r"^ADDRESS\s+CLIENT_ID\s+SOFTWARE\s+SASL\s+PRINCIPAL\s+AGE\s+LISTENER",
                         out, re.M), out
        assert re.search(r"orders-app\s+confluent-kafka-python/1\.7\.0-rdkafka-2\.0\.2\s+PLAIN\s+"
                         r"alice\s", out), out
        assert re.search(r"kcat-app\s+librdkafka/2\.0\.2\s+SCRAM-SHA-512\s+carol\s", out), out
        assert re.search(r"py-plain\s+-\s+PLAIN\s+dave\s", out), out
        assert re.search(rf"^{total} connections$", out, re.M), out
        out_bob = f.ctl("connections", "S", "--principal", "bob").stdout
        assert "billing" in out_bob and "orders-app" not in out_bob, out_bob
        out_lim = f.ctl("connections", "S", "--limit", "1").stdout
        assert f"{total} connections, 1 shown" in out_lim, out_lim
        js = json.loads(f.ctl("--json", "connections", "S", "--client-id", "kcat-app").stdout)
        assert js["total"] >= 1 and {r["principal"] for r in js["connections"]} == {"carol"}
        r = f.ctl("connections", "nosuch", check=False)
        assert r.returncode == 1 and "no cluster named 'nosuch'" in r.stderr, r
        r = f.ctl("status", "--client-id", "x", check=False)
        assert r.returncode == 2, r

        # /metrics: counts by client software, bounded, promtool clean
        code, _, metrics = f.http("/metrics")
        text = metrics.decode()
        m = re.search(r'^ferry_client_connections\{cluster="S",software="confluent-kafka-python",'
                      r'version="1\.7\.0-rdkafka-2\.0\.2"\} (\d+)$', text, re.M)
        assert m and int(m.group(1)) >= 3, text[-2000:]
        m = re.search(r'^ferry_client_connections\{cluster="S",software="librdkafka",'
                      r'version="2\.0\.2"\} (\d+)$', text, re.M)
        assert m and int(m.group(1)) >= 1
        m = re.search(r'^ferry_client_connections\{cluster="S",software="unknown",version=""\} '
                      r'(\d+)$', text, re.M)
        assert m and int(m.group(1)) >= 2, "kafka-python's connections"
        assert "orders-app" not in text and "alice" not in text, "never a label"
        if shutil.which("promtool"):
            pr = subprocess.run(["promtool", "check", "metrics"], input=metrics,
                                capture_output=True, timeout=30)
            assert pr.returncode == 0 and not (pr.stdout + pr.stderr).strip(), pr

        # nothing secret anywhere
        code, _, status = f.http("/admin/clusters/S")
        outputs = {
            "listing": json.dumps(listing(f)),
            "ferryctl": out + out_bob + json.dumps(js),
            "metrics": text,
            "status": status.decode(),
        }
    finally:
        for p in kpython:
            p.close(timeout=5)
        del rdkafka[:]  # (confluent-kafka closes its connections when collected)
        if kcat_proc is not None:
            kcat_proc.stdin.close()
            kcat_proc.wait(30)
    outputs["ferryd log"] = f.log_text()
    for where, blob in outputs.items():
        for secret in SECRETS:
            assert secret not in blob, f"a secret in {where}"
    # the log did see the clients (so the grep above looked at something)
    assert re.search(r'msg="client" .*client_id="orders-app" .*principal="alice"',
                     outputs["ferryd log"])


def test_workers_are_not_dumpable(cenv):
    """A core of a worker would hold what it relays (SASL passwords, tokens):
    workers are not dumpable, so /proc/PID/fd belongs to root although the
    worker runs as its own user."""
    f, _ = cenv
    for w in f.cluster_doc("S")["workers"]:
        pid = w["pid"]
        uid = int(re.search(r"^Uid:\s+(\d+)", open(f"/proc/{pid}/status").read(), re.M).group(1))
        if uid == 0:
            pytest.skip("workers run as root here: ownership cannot tell")
        assert os.stat(f"/proc/{pid}/fd").st_uid == 0, "the worker is dumpable"


def test_api_errors(cenv):
    f, _ = cenv
    code, _, body = f.http("/admin/clusters/nosuch/connections")
    assert code == 404 and json.loads(body)["error"] == "no cluster named 'nosuch'"
    for q in ("?limit=0", "?limit=1001", "?offset=-1", "?limit=x", "?user=alice",
              "?client_id=a&client_id=b", "?client_id=%zz", "?principal"):
        code, _, body = f.http(f"/admin/clusters/S/connections{q}")
        assert code == 400, (q, code, body)
        assert json.loads(body)["error"], q
    code, _, body = f.http("/admin/clusters/S/connections", method="POST")
    assert code == 405
