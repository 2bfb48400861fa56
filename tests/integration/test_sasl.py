"""
SASL pass-through (issue 11, item 7): ferry authenticates nobody, it relays
SaslHandshake v0/v1 and SaslAuthenticate v0-2 to a broker that requires SASL
(the scripted peer tests/peers/sasl_broker.py: the mock cluster has none),
relays the legacy raw token exchange after a v0 handshake for PLAIN and
SCRAM without taking tokens for Kafka frames, refuses v0 raw mechanisms it
cannot frame, holds every client frame to sasl_max_frame_bytes until the
client has authenticated, lets a client re-authenticate (KIP-368), and moves
an authenticated connection on a reload knowing it is authenticated. Its
own metadata fetch authenticates with upstream_sasl_* (PLAIN, SCRAM),
keeps the upstream unreachable while its password is refused, and without
credentials counts a SASL-only upstream reachable and says why.

    FERRY_BUILD=$PWD/build /usr/bin/python3 -m pytest -q -p no:cacheprovider \
        tests/integration/test_sasl.py
"""

import re
import socket
import struct
import subprocess
import time

import pytest

from conftest import register_log, wait_for
from sasl_peer import SaslPeer, broker as B

TOPIC = "t"
CLOSE_WITHIN = 3.0


# --------------------------------------------------------------------------
# a hand-written client
# --------------------------------------------------------------------------

class Client:
    """Kafka frames and raw SASL tokens over one socket, by hand."""

    def __init__(self, port, timeout=10.0):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.corr = 100

    def call(self, key, ver, body, flex_resp=False):
        """Sends a request, returns a Reader positioned at the response body."""
        self.corr += 1
        self.s.sendall(B.request(key, ver, self.corr, body))
        r = B.Reader(B.recv_frame(self.s))
        assert r.i32() == self.corr, "correlation id"
        if flex_resp:
            r.tags()
        return r

    def raw(self, token):
        """One raw SASL token out, the broker's token back."""
        B.send_frame(self.s, token)
        return B.recv_frame(self.s)

    def handshake(self, ver, mech):
        r = self.call(17, ver, B.string(mech))
        code = r.i16()
        mechs = [r.string() for _ in range(r.i32())]
        return code, mechs

    def authenticate(self, ver, token):
        """SaslAuthenticate: (error code, message, auth bytes)."""
        body = B.compact_bytes(token) + b"\x00" if ver >= 2 else B.i32(len(token)) + token
        r = self.call(36, ver, body, flex_resp=ver >= 2)
        code = r.i16()
        if ver >= 2:
            n = r.uvarint()
            msg = r.take(n - 1).decode() if n else None
            data = r.compact_bytes()
        else:
            msg = r.string()
            data = r.bytes_()
        return code, msg, data

    def metadata(self):
        """Metadata v1, all topics: {node id: (host, port)}."""
        r = self.call(3, 1, B.i32(-1))
        brokers = {}
        for _ in range(r.i32()):
            nid, host, port = r.i32(), r.string(), r.i32()
            r.string()
            brokers[nid] = (host, port)
        return brokers

    def produce(self, payload, acks=1):
        """Produce v3 of one partition; the partition's error code."""
        body = B.string(None) + B.i16(acks) + B.i32(5000) + B.i32(1) + B.string(TOPIC)
        body += B.i32(1) + B.i32(0) + B.i32(len(payload)) + payload
        r = self.call(0, 3, body)
        assert r.i32() == 1 and r.string() == TOPIC and r.i32() == 1
        assert r.i32() == 0
        return r.i16()

    def plain_v1(self, user="alice", password="secret", ver=2):
        assert self.handshake(1, "PLAIN")[0] == 0
        return self.authenticate(ver, f"\0{user}\0{password}".encode())

    def scram_v1(self, mech="SCRAM-SHA-256", user="alice", password="secret", ver=1):
        assert self.handshake(1, mech)[0] == 0
        first, bare, _ = B.scram_client_first(user)
        code, _, server_first = self.authenticate(ver, first.encode())
        assert code == 0
        final, want = B.scram_client_final(mech, password, bare, server_first.decode())
        code, msg, server_final = self.authenticate(ver, final.encode())
        assert code == 0, msg
        assert server_final.decode() == want, "server signature"

    def send_quietly(self, data):
        """sendall that tolerates the peer closing meanwhile."""
        try:
            self.s.sendall(data)
        except OSError:
            pass

    def closed_within(self, seconds=CLOSE_WITHIN):
        """True when the other side closes the connection in time (what it
        sent before is read and dropped)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.s.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                if not self.s.recv(1 << 16):
                    return True
            except socket.timeout:
                return False
            except OSError:
                return True
        return False

    def close(self):
        self.s.close()


def frames_rejected(f, cluster, reason):
    code, _, body = f.http("/metrics")
    assert code == 200
    m = re.search(r'^ferry_frames_rejected_total\{cluster="%s",reason="%s"\} (\d+)$'
                  % (cluster, reason), body.decode(), re.M)
    assert m, f"no ferry_frames_rejected_total for {reason}"
    return int(m.group(1))


def ferry_log(f):
    return f.log_path.read_text(errors="replace")


def learn_brokers(f):
    """An authenticated Metadata through the bootstrap port teaches the
    worker where node 1 is (its own metadata fetch cannot authenticate:
    the peer closes it, as a Kafka SASL listener does)."""
    c = Client(f.clusters["S"]["bootstrap"])
    code, msg, _ = c.plain_v1(user="learner", password="x")
    assert code == 0, msg
    assert 1 in c.metadata()
    c.close()


@pytest.fixture
def senv(keeper, workdir, request, ferry_factory):
    peer = SaslPeer(keeper, workdir, "S", users=["alice:secret", "bob:builder", "learner:x"])
    register_log(request, "sasl-peer", peer.log_path)
    f = ferry_factory({"S": peer})
    learn_brokers(f)
    return f, peer


def _boot(f):
    return f.clusters["S"]["bootstrap"]


def _broker1(f):
    return f.clusters["S"]["brokers"][0]  # node id 1


# --------------------------------------------------------------------------
# (1) PLAIN and SCRAM pass-through with real clients
# --------------------------------------------------------------------------

def _producer_conf(f, mech, user, password):
    return {"bootstrap.servers": f.bootstrap("S"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mech, "sasl.username": user, "sasl.password": password,
            "acks": 1, "message.timeout.ms": 20000, "socket.timeout.ms": 10000}


def _produce_confluent(conf, n):
    from confluent_kafka import Producer
    errors, delivered = [], []
    conf = dict(conf, error_cb=lambda e: errors.append(e))
    p = Producer(conf)
    for i in range(n):
        p.produce(TOPIC, f"m{i}".encode(),
                  on_delivery=lambda err, msg: delivered.append(err))
    left = p.flush(25)
    return left, delivered, errors


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_real_client_authenticates_through_ferry_and_produces(senv, mech):
    f, peer = senv
    left, delivered, errors = _produce_confluent(_producer_conf(f, mech, "alice", "secret"), 20)
    assert left == 0 and len(delivered) == 20 and all(e is None for e in delivered), \
        (left, delivered[:3], errors[:3])
    # the bootstrap connection and the broker-port connection both authenticated
    assert peer.count(f"AUTH ok user=alice mech={mech} framing=SaslAuthenticate") >= 2
    assert "PRODUCE user=alice acks=1" in peer.log_text()
    assert peer.count("AUTH fail") == 0


def test_kcat_plain_produce(senv):
    f, peer = senv
    r = subprocess.run(
        ["kcat", "-P", "-b", f.bootstrap("S"), "-t", TOPIC, "-X", "security.protocol=SASL_PLAINTEXT",
         "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=bob", "-X", "sasl.password=builder"],
        input=b"one\ntwo\nthree\n", capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    peer.wait_log("PRODUCE user=bob acks=")


def test_wrong_password_is_refused_by_the_broker_and_the_client_sees_it(senv):
    f, peer = senv
    from confluent_kafka import KafkaError, Producer
    errors = []
    conf = dict(_producer_conf(f, "PLAIN", "alice", "wrong"), error_cb=lambda e: errors.append(e))
    p = Producer(conf)
    p.produce(TOPIC, b"x")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not errors:
        p.poll(0.2)
    assert errors, "no error reported to the client"
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert any("Invalid username or password" in e.str() for e in errors), errors
    p.purge()
    p.flush(1)
    # the peer logs the failure after it has answered: wait for the line
    peer.wait_log("AUTH fail user=alice mech=PLAIN")
    assert "PRODUCE" not in peer.log_text()


# --------------------------------------------------------------------------
# (2) the legacy raw token exchange after SaslHandshake v0
# --------------------------------------------------------------------------

def test_v0_plain_raw_tokens_relayed_then_kafka_frames_resume(senv):
    f, peer = senv
    c = Client(_boot(f))
    assert c.call(18, 0, b"").i16() == 0
    code, mechs = c.handshake(0, "PLAIN")
    assert code == 0 and "PLAIN" in mechs
    # [int32 len][\0alice\0secret]: no API key, no correlation id
    assert c.raw(b"\0alice\0secret") == b"", "PLAIN success is an empty token"
    peer.wait_log("AUTH ok user=alice mech=PLAIN framing=raw")
    # Kafka frames again: metadata rewritten to ferry's broker port, produce
    brokers = c.metadata()
    assert brokers == {1: ("127.0.0.1", _broker1(f))}, brokers
    assert c.produce(b"r" * 100) == 0
    c.close()
    # the same on a broker port
    c = Client(_broker1(f))
    assert c.handshake(0, "PLAIN")[0] == 0
    assert c.raw(b"\0bob\0builder") == b""
    assert c.produce(b"q" * 10) == 0
    c.close()


def test_v0_scram_raw_exchange_relayed(senv):
    f, peer = senv
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        c = Client(_boot(f))
        assert c.handshake(0, mech)[0] == 0
        first, bare, _ = B.scram_client_first("alice")
        server_first = c.raw(first.encode()).decode()
        assert server_first.startswith("r=") and ",s=" in server_first
        final, want = B.scram_client_final(mech, "secret", bare, server_first)
        assert c.raw(final.encode()).decode() == want
        peer.wait_log(f"AUTH ok user=alice mech={mech} framing=raw")
        assert c.produce(b"s" * 64) == 0
        assert c.metadata()[1][1] == _broker1(f)
        c.close()


def test_v0_raw_wrong_password_closes(senv):
    f, peer = senv
    c = Client(_boot(f))
    assert c.handshake(0, "PLAIN")[0] == 0
    B.send_frame(c.s, b"\0alice\0nope")
    assert c.closed_within(), "the broker closes a failed raw exchange"
    assert "AUTH fail user=alice mech=PLAIN framing=raw" in peer.log_text()


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_legacy_client_raw_exchange_through_ferry(senv, mech):
    """kafka-python 2.0 always authenticates with SaslHandshake v0 and raw
    tokens: a real legacy client, through the bootstrap and a broker port."""
    f, peer = senv
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=f.bootstrap("S"), security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism=mech, sasl_plain_username="bob",
                      sasl_plain_password="builder", acks=1, request_timeout_ms=10000,
                      max_block_ms=15000)
    try:
        md = p.send(TOPIC, b"legacy").get(timeout=15)
        assert md.offset >= 1
    finally:
        p.close(timeout=5)
    assert peer.count(f"HANDSHAKE v0 mech={mech} ok") >= 2
    assert peer.count(f"AUTH ok user=bob mech={mech} framing=raw") >= 2
    assert "PRODUCE user=bob acks=1" in peer.log_text()


def test_v0_mechanisms_not_relayed_are_refused_and_counted(senv):
    f, peer = senv
    before = frames_rejected(f, "S", "sasl_mechanism_refused")
    for mech in ("GSSAPI", "OAUTHBEARER", "X-UNKNOWN"):
        c = Client(_boot(f))
        c.s.sendall(B.request(17, 0, 1, B.string(mech)))
        assert c.closed_within(), mech
        c.close()
    # a Kafka 0.9 client: a bare GSSAPI token with no handshake at all
    c = Client(_boot(f))
    B.send_frame(c.s, b"\x60\x82\x02\x00" + b"\x06\x09" + b"\0" * 40)
    assert c.closed_within()
    c.close()
    wait_for(lambda: frames_rejected(f, "S", "sasl_mechanism_refused") == before + 4, 5,
             what="4 refusals counted")
    assert "a bare GSSAPI token with no SaslHandshake" in ferry_log(f)
    log = ferry_log(f)
    assert ("SASL mechanism 'GSSAPI' is not relayed in legacy SaslHandshake v0 raw framing "
            "(PLAIN and SCRAM are; use SaslHandshake v1)") in log
    assert "'OAUTHBEARER'" in log and "'X-UNKNOWN'" in log
    assert "HANDSHAKE v0" not in peer.log_text(), "nothing was forwarded"
    # the same mechanisms with SaslHandshake v1 are forwarded (the broker answers)
    c = Client(_boot(f))
    code, mechs = c.handshake(1, "GSSAPI")
    assert code == 33 and "PLAIN" in mechs, (code, mechs)
    c.close()


# --------------------------------------------------------------------------
# (3) the pre-authentication frame limit
# --------------------------------------------------------------------------

MIB = 1 << 20


def test_one_mib_before_authentication_is_closed_and_counted(senv):
    f, peer = senv
    before = frames_rejected(f, "S", "sasl_frame_too_large")
    # a 1 MiB token in SaslAuthenticate after the handshake
    c = Client(_boot(f))
    assert c.handshake(1, "PLAIN")[0] == 0
    c.send_quietly(B.request(36, 1, 9, B.i32(MIB) + b"\0" * MIB))
    assert c.closed_within()
    c.close()
    # a 1 MiB first frame (ApiVersions)
    c = Client(_boot(f))
    c.send_quietly(B.request(18, 0, 1, b"\0" * MIB))
    assert c.closed_within()
    c.close()
    # a 1 MiB Produce after the handshake, before authenticating
    c = Client(_broker1(f))
    assert c.handshake(1, "PLAIN")[0] == 0
    c.send_quietly(B.request(0, 3, 9, b"\xff\xff\x00\x01" + b"\0" * MIB))
    assert c.closed_within()
    c.close()
    # a 1 MiB raw token after a v0 handshake
    c = Client(_boot(f))
    assert c.handshake(0, "PLAIN")[0] == 0
    c.send_quietly(B.i32(MIB) + b"\0" * MIB)
    assert c.closed_within()
    c.close()
    wait_for(lambda: frames_rejected(f, "S", "sasl_frame_too_large") == before + 4, 5,
             what="4 closes counted")
    assert "before SASL authentication exceeds sasl_max_frame_bytes (524288)" in ferry_log(f)
    assert "over sasl_max_frame_bytes before authentication" in ferry_log(f)
    assert "AUTH ok user=alice" not in peer.log_text() and "PRODUCE" not in peer.log_text()
    assert "AUTH fail" not in peer.log_text(), "no oversized token reached the broker"
    # once authenticated, 1 MiB passes (only max_frame_bytes applies)
    c = Client(_boot(f))
    code, msg, _ = c.plain_v1()
    assert code == 0, msg
    assert c.produce(b"b" * MIB) == 0
    assert f"bytes={MIB}" in peer.log_text()
    c.close()
    assert frames_rejected(f, "S", "sasl_frame_too_large") == before + 4


def test_limit_is_configurable_and_spares_clients_without_sasl(keeper, workdir, request,
                                                                ferry_factory):
    peer = SaslPeer(keeper, workdir, "O", extra=["--auth-optional"])
    register_log(request, "sasl-peer", peer.log_path)
    f = ferry_factory({"S": peer}, cluster_keys={"sasl_max_frame_bytes": "4KiB"})
    # no SASL at all: ApiVersions, then a 1 MiB Produce (a plaintext listener)
    c = Client(_broker1(f))
    assert c.call(18, 0, b"").i16() == 0
    assert c.produce(b"n" * MIB) == 0
    c.close()
    # SASL started: 8 KiB is over this cluster's 4 KiB
    c = Client(_boot(f))
    assert c.handshake(1, "PLAIN")[0] == 0
    c.send_quietly(B.request(36, 1, 9, B.i32(8192) + b"\0" * 8192))
    assert c.closed_within()
    c.close()
    assert frames_rejected(f, "S", "sasl_frame_too_large") == 1
    assert "sasl_max_frame_bytes (4096)" in ferry_log(f)


# --------------------------------------------------------------------------
# (4) re-authentication (KIP-368)
# --------------------------------------------------------------------------

def test_reauthentication_mid_connection(senv):
    f, peer = senv
    c = Client(_broker1(f))
    code, msg, _ = c.plain_v1(ver=2)
    assert code == 0, msg
    assert c.produce(b"1" * 100) == 0
    # again, after traffic: PLAIN with SaslAuthenticate v2, then SCRAM v1
    code, msg, _ = c.plain_v1(user="bob", password="builder", ver=2)
    assert code == 0, msg
    assert c.produce(b"2" * 100) == 0
    c.scram_v1("SCRAM-SHA-512")
    assert c.produce(b"3" * MIB) == 0, "still authenticated: no pre-authentication limit"
    peer.wait_log("reauth", n=2)
    assert peer.count("AUTH ok user=alice mech=PLAIN") == 1
    assert peer.count("AUTH ok user=bob mech=PLAIN") == 1
    assert peer.count("AUTH ok user=alice mech=SCRAM-SHA-512") == 1
    # a failed re-authentication: the broker answers 58 and closes
    code, msg, _ = c.plain_v1(password="wrong", ver=1)
    assert code == 58 and "Invalid username or password" in msg
    assert c.closed_within()
    c.close()


# --------------------------------------------------------------------------
# reload: an authenticated connection moves knowing it is authenticated; one
# in the middle of a raw exchange does not move (it finishes as a drain)
# --------------------------------------------------------------------------

def test_authenticated_connection_moves_on_reload_raw_exchange_drains(keeper, workdir, request,
                                                                      reload_ferry_factory):
    peer = SaslPeer(keeper, workdir, "S")
    register_log(request, "sasl-peer", peer.log_path)
    f = reload_ferry_factory({"S": peer}, drain_timeout="10s")
    port = f.clusters["S"]["bootstrap"]
    auth = Client(port)
    code, msg, _ = auth.plain_v1()
    assert code == 0, msg
    raw = Client(port)
    assert raw.handshake(0, "SCRAM-SHA-256")[0] == 0
    first, _, _ = B.scram_client_first("alice")
    assert raw.raw(first.encode()).startswith(b"r=")  # between the two rounds
    f.spec["S"]["extra"]["idle_timeout"] = "11m"
    f.write()
    r = f.reload_ctl(json_out=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert raw.closed_within(8), "a raw exchange in progress is not handed over"
    wait_for(lambda: f.cluster("S").get("lastReplacement"), 10, what="replacement done")
    rep = f.cluster("S")["lastReplacement"]
    assert rep["handedOver"] == 1, rep
    # the new worker knows `auth` is authenticated: a re-authentication
    # whose token (a 600 KiB authzid) is over sasl_max_frame_bytes passes,
    # as it would have in the old worker (a fresh connection's handshake
    # would bring the limit back)
    assert auth.handshake(1, "PLAIN")[0] == 0
    code, msg, _ = auth.authenticate(1, b"z" * (600 << 10) + b"\0alice\0secret")
    assert code == 0, msg
    assert auth.produce(b"h" * MIB) == 0
    assert f"bytes={MIB}" in peer.log_text()
    assert frames_rejected(f, "S", "sasl_frame_too_large") == 0
    auth.close()
    raw.close()


# --------------------------------------------------------------------------
# ferry's own metadata fetch (the worker's start-up fetch and health probe)
# against an upstream that requires SASL: upstream_sasl_* credentials, a
# wrong password, none at all (tests/integration/realkafka/test_sasl_tls.py
# does the same against Apache Kafka)
# --------------------------------------------------------------------------

def own_keys(workdir, mech, password="own-secret"):
    pw = workdir / "ferry.password"
    pw.write_text(password + "\n")
    pw.chmod(0o600)
    return {"upstream_sasl_mechanism": mech, "upstream_sasl_username": "ferry",
            "upstream_sasl_password_file": pw}


def own_peer(keeper, workdir, request):
    peer = SaslPeer(keeper, workdir, "S", users=["alice:secret", "learner:x", "ferry:own-secret"])
    register_log(request, "sasl-peer", peer.log_path)
    return peer


def known(f):
    return {b["nodeId"]: b["upstream"] for b in f.cluster("S")["knownBrokers"]}


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_own_fetch_authenticates(keeper, workdir, request, ferry_factory, mech):
    peer = own_peer(keeper, workdir, request)
    f = ferry_factory({"S": peer}, cluster_keys=own_keys(workdir, mech))
    # before any client: the broker is known and the upstream reachable
    wait_for(lambda: known(f) == {1: peer.bootstrap}, 10, what="node 1 learned at start")
    assert f.cluster("S")["upstream"]["state"] == "reachable"
    peer.wait_log(f"AUTH ok user=ferry mech={mech} framing=SaslAuthenticate")
    assert "own-secret" not in ferry_log(f)
    # a client straight on the broker port is forwarded at once
    c = Client(_broker1(f))
    code, msg, _ = c.plain_v1()
    assert code == 0, msg
    assert 1 in c.metadata()
    c.close()


def test_own_fetch_wrong_password_keeps_the_upstream_unreachable(keeper, workdir, request,
                                                                 ferry_factory):
    peer = own_peer(keeper, workdir, request)
    f = ferry_factory({"S": peer}, cluster_keys=own_keys(workdir, "SCRAM-SHA-256", "nope"))

    def refused():
        u = f.cluster("S")["upstream"]
        return u if u["state"] == "unreachable" and "refused by" in (u["lastError"] or "") \
            else None
    u = wait_for(refused, 10, what="unreachable: ferry's credentials refused")
    assert u["lastError"].startswith("upstream SASL SCRAM-SHA-256 as 'ferry' refused by "), u
    peer.wait_log("AUTH fail user=ferry mech=SCRAM-SHA-256")
    assert known(f) == {}
    # a client authenticates on its own and its traffic passes; the
    # condition stays what ferry's own credentials get
    learn_brokers(f)
    u = f.cluster("S")["upstream"]
    assert u["state"] == "unreachable" and "refused by" in u["lastError"], u
    assert "nope" not in ferry_log(f)


def test_own_fetch_without_credentials_counts_reachable_and_says_why(keeper, workdir, request,
                                                                      ferry_factory):
    peer = own_peer(keeper, workdir, request)
    f = ferry_factory({"S": peer})
    wait_for(lambda: "ferry's own metadata fetch cannot authenticate" in ferry_log(f), 10,
             what="the warning")
    assert f.cluster("S")["upstream"]["state"] == "reachable"
    # a broker port before any client learned the broker: closed, with the reason
    c = Client(_broker1(f))
    c.send_quietly(B.request(18, 0, 1, b""))
    assert c.closed_within(12)
    c.close()
    wait_for(lambda: "node id 1 unknown yet: the upstream requires SASL" in ferry_log(f), 5,
             what="the reason")
    learn_brokers(f)
    wait_for(lambda: known(f) == {1: peer.bootstrap}, 5, what="node 1 learned from a client")
