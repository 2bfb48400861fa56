"""
Kafka protocol fidelity against modern clients: ferry in front of librdkafka
2.12's mock cluster (Metadata v12, Produce v10, Fetch v16, FindCoordinator,
consumer groups), driven by node-rdkafka (librdkafka 2.12) and kafkajs.

The peers live in tests/peers/node (installed by scripts/install-node-deps)
and are wired up by the "modern peers" block at the end of conftest.py. When
they are not installed these tests fail, or skip when
FERRY_ALLOW_SKIP_MODERN=1.

What matters here is what a client can observe: every broker address it
learns is one of ferry's, it never dials an upstream broker, and messages
arrive exactly once. The Produce/Fetch versions negotiated through ferry are
reported (test_negotiated_versions_reported), not pinned: ferry's caps move
as NodeEndpoints rewriting lands.
"""

import collections
import re
import socket
import struct
import subprocess
import time

import pytest

from conftest import _recv_exact, kafka_metadata


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

RDKAFKA = "rdkafka-client.js"

ADDR_RE = re.compile(r"(?:ipv[46]#)?(?:127\.0\.0\.1|localhost|\[::1\]|::1):(\d{1,5})\b")
CONNECT_RE = re.compile(r"Connecting to ipv[46]#[^ ]*?:(\d{1,5}) ")


def ferry_ports(f, name):
    c = f.clusters[name]
    return {c["bootstrap"], *c["brokers"]}


def ferry_brokers(f, name):
    return {nid: f"{h}:{p}" for nid, (h, p) in f.broker_addresses(name).items()}


def result_brokers(res_md):
    assert "brokers" in res_md, f"client metadata failed: {res_md}"
    return {b["id"]: f"{b['host']}:{b['port']}" for b in res_md["brokers"]}


def assert_no_upstream_in_log(text, f, name, mock, who):
    """Every loopback address in a client's log is one of ferry's ports;
    no upstream port shows up; the client did dial ferry."""
    seen = {int(p) for p in ADDR_RE.findall(text)}
    dialed = {int(p) for p in CONNECT_RE.findall(text)}
    upstream = set(mock.ports)
    leaked = sorted(seen & upstream)
    if leaked:
        lines = [ln for ln in text.splitlines()
                 if any(re.search(rf":{p}\b", ln) for p in leaked)]
        raise AssertionError(f"{who}: upstream ports {leaked} appear in the client's log, e.g.:\n"
                             + "\n".join(lines[:10]))
    assert dialed, f"{who}: no 'Connecting to' lines in the log: debug output missing?"
    fp = ferry_ports(f, name)
    assert dialed <= fp, f"{who}: dialed {sorted(dialed - fp)}, which are not ferry's ports {sorted(fp)}"
    assert seen <= fp, f"{who}: addresses with ports {sorted(seen - fp)} in the log are not ferry's {sorted(fp)}"
    return dialed


def assert_exactly_once(records, expected, who):
    counts = collections.Counter(k for k, _ in records)
    dups = {k: n for k, n in counts.items() if n > 1}
    assert not dups, f"{who}: {len(dups)} keys consumed more than once, e.g. {list(dups.items())[:5]}"
    got = dict(records)
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    assert not missing, f"{who}: {len(missing)} messages never consumed, e.g. {missing[:5]}"
    assert not extra, f"{who}: {len(extra)} unexpected messages, e.g. {extra[:5]}"
    wrong = [k for k in expected if got[k] != expected[k]]
    assert not wrong, f"{who}: {len(wrong)} values differ, e.g. {[(k, got[k]) for k in wrong[:5]]}"


def sent_versions(text, request):
    """Versions of `request` (e.g. "Produce") the client sent, from
    librdkafka's debug=protocol lines "Sent ProduceRequest (v9, ...)"."""
    return sorted({int(v) for v in re.findall(rf"Sent {request}Request \(v(\d+),", text)})


# ---- raw ApiVersions --------------------------------------------------------

def _uvarint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def apiversions_request(version, corr, client_id=b"ferry-it"):
    """ApiVersions request frame; v3+ layout (header v2, flexible body) for
    version >= 3, as a current client would send it."""
    hdr = struct.pack(">hhih", 18, version, corr, len(client_id)) + client_id
    if version >= 3:
        hdr += b"\x00"  # header tagged fields
        name, ver = b"ferry-it", b"0.1"
        body = _uvarint(len(name) + 1) + name + _uvarint(len(ver) + 1) + ver + b"\x00"
    else:
        body = b""
    msg = hdr + body
    return struct.pack(">i", len(msg)) + msg


def read_frame(s):
    (size,) = struct.unpack(">i", _recv_exact(s, 4))
    return _recv_exact(s, size)


def parse_apiversions_v0(frame):
    """(correlation id, error code, {key: (min, max)}, trailing bytes) of an
    ApiVersions response with a v0 body."""
    corr, err, n = struct.unpack_from(">ihi", frame, 0)
    off = 10
    keys = {}
    for _ in range(n):
        k, lo, hi = struct.unpack_from(">hhh", frame, off)
        off += 6
        keys[k] = (lo, hi)
    return corr, err, keys, frame[off:]


def apiversions_v0(port, timeout=10.0):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(apiversions_request(0, 7))
        corr, err, keys, rest = parse_apiversions_v0(read_frame(s))
    assert corr == 7 and err == 0 and rest == b"", (corr, err, rest)
    return keys


def wait_for(pred, timeout, what, interval=0.1):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            v = pred()
            if v:
                return v
            last = v
        except Exception as e:  # keep polling; report the last failure
            last = repr(e)
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last})")


# --------------------------------------------------------------------------
# tests
# --------------------------------------------------------------------------

def test_node_rdkafka_idempotent_produce_and_group_consume(modern_mock_factory, ferry_factory,
                                                           node_peer):
    topic = "modern-rdkafka"
    mock = modern_mock_factory("M", [topic])
    f = ferry_factory({"M": mock})
    bs = f.bootstrap("M")
    want = ferry_brokers(f, "M")

    # Idempotent producer: 2,000 messages, 2,000 delivery reports, no error.
    p = node_peer("rdkafka-produce", RDKAFKA,
                  ["produce", "-b", bs, "-t", topic, "-n", 2000, "-k", "n",
                   "--debug", "broker,protocol,metadata"])
    res = p.result(90)
    assert p.wait() == 0
    assert res["librdkafka"].startswith("2."), res["librdkafka"]
    assert res["errorCount"] == 0, f"delivery errors: {res['errors']}"
    assert res["produced"] == 2000 and res["delivered"] == 2000, res
    assert result_brokers(res["metadata"]) == want, \
        f"producer's metadata brokers {result_brokers(res['metadata'])} != ferry's {want}"
    assert "Sent InitProducerIdRequest" in p.log_text(), "idempotent producer never got a producer id"
    dialed = assert_no_upstream_in_log(p.log_text(), f, "M", mock, "producer")
    assert dialed & set(f.clusters["M"]["brokers"]), \
        f"producer never dialed a ferry broker port (dialed {sorted(dialed)})"

    # A consumer group reads them all back, each once.
    c = node_peer("rdkafka-consume", RDKAFKA,
                  ["consume", "-b", bs, "-t", topic, "-n", 2000, "-g", "modern-rdkafka-g",
                   "--timeout-ms", 60000, "--debug", "broker,protocol,cgrp"])
    res = c.result(120)
    assert c.wait() == 0
    assert res["errorCount"] == 0, f"consumer errors: {res['errors']}"
    assert res["consumed"] == 2000, f"consumed {res['consumed']} of 2000"
    assert_exactly_once([tuple(r) for r in res["records"]],
                        {f"n-{i}": f"value {i}" for i in range(2000)}, "node-rdkafka consumer")
    assert result_brokers(res["metadata"]) == want
    log = c.log_text()
    assert_no_upstream_in_log(log, f, "M", mock, "consumer")
    # The group coordinator was found through ferry (FindCoordinator rewritten).
    assert re.search(r"Sent FindCoordinatorRequest", log), "consumer never looked up its coordinator"
    assert re.search(r"Sent (JoinGroup|SyncGroup|OffsetCommit)Request", log), \
        "consumer never talked to its group coordinator"


def test_node_rdkafka_large_fetches_streamed(modern_mock_factory, ferry_factory, node_peer):
    """Fetch v16 responses larger than ferry's buffer are streamed (their
    records spliced, only their top-level tags held and rewritten to the
    same length): librdkafka reads every message back, each once."""
    topic = "modern-large"
    mock = modern_mock_factory("G", [topic])
    f = ferry_factory({"G": mock})
    bs = f.bootstrap("G")
    n, size = 600, 4000
    p = node_peer("rdkafka-produce-large", RDKAFKA,
                  ["produce", "-b", bs, "-t", topic, "-n", n, "-k", "lg", "--value-bytes", size])
    res = p.result(90)
    assert p.wait() == 0 and res["errorCount"] == 0 and res["delivered"] == n, \
        {k: v for k, v in res.items() if k != "records"}
    spliced0 = f.metrics().get(("ferry_bytes_spliced_total", "G"), 0)
    c = node_peer("rdkafka-consume-large", RDKAFKA,
                  ["consume", "-b", bs, "-t", topic, "-n", n, "-g", "modern-large-g",
                   "--timeout-ms", 60000, "--value-bytes", size, "--debug", "broker,protocol"])
    cres = c.result(120)
    assert c.wait() == 0
    # (the final commit finds nothing to do when auto-commit was first)
    errs = [e for e in cres["errors"] if e != "commit: Local: No offset stored"]
    assert not errs, f"consumer errors: {errs}"
    assert_exactly_once([tuple(r) for r in cres["records"]],
                        {f"lg-{i}": f"value {i}|{size}" for i in range(n)},
                        "node-rdkafka consumer of large fetches")
    assert 16 in sent_versions(c.log_text(), "Fetch"), "the consumer did not fetch at v16"
    spliced = f.metrics().get(("ferry_bytes_spliced_total", "G"), 0) - spliced0
    assert spliced >= n * size // 2, f"only {spliced} bytes of the fetches spliced"
    assert f.metrics().get(("ferry_malformed_responses_total", "G"), 0) == 0
    assert_no_upstream_in_log(c.log_text(), f, "G", mock, "consumer of large fetches")


def test_leader_change_during_produce(modern_mock_factory, ferry_factory, node_peer):
    """Partition leaders move while an idempotent node-rdkafka producer runs:
    it learns the new leaders as ferry addresses, keeps producing without a
    single error and never connects upstream; nothing is lost or doubled."""
    topic = "modern-moving"
    mock = modern_mock_factory("L", [f"{topic}:3"], host="c")
    f = ferry_factory({"L": mock})
    bs = f.bootstrap("L")
    want = ferry_brokers(f, "L")

    p = node_peer("rdkafka-follow", RDKAFKA,
                  ["produce", "-b", bs, "-t", topic, "-k", "mv", "--follow",
                   "--debug", "broker,topic,metadata,protocol"], stdin=subprocess.PIPE)

    progress = {"delivered": 0, "errors": 0, "produced": 0}

    def read_progress_until(pred, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = p.readline(max(0.05, deadline - time.monotonic()))
            if line is None:
                break
            m = re.match(r"PROGRESS produced=(\d+) delivered=(\d+) errors=(\d+)", line)
            if m:
                progress.update(produced=int(m[1]), delivered=int(m[2]), errors=int(m[3]))
                if pred():
                    return
        raise AssertionError(f"producer: timed out waiting for {what} (progress {progress}, "
                             f"rc={p.proc.poll()})")

    try:
        read_progress_until(lambda: progress["delivered"] >= 300, 60, "300 deliveries")
        before = kafka_metadata("127.0.0.1", f.clusters["L"]["bootstrap"], [topic], timeout=10)
        leaders = before["topics"][topic]["partitions"]
        assert sorted(leaders) == [0, 1, 2], before
        moved = {part: leader % 3 + 1 for part, leader in leaders.items()}
        for part, new in sorted(moved.items()):
            mock.command(f"leader {topic} {part} {new}")
        at_move = progress["delivered"]

        # ferry's metadata shows the new leaders, at ferry addresses only.
        def ferry_sees_move():
            md = kafka_metadata("127.0.0.1", f.clusters["L"]["bootstrap"], [topic], timeout=5)
            got = {nid: f"{h}:{port}" for nid, (h, port) in md["brokers"].items()}
            assert got == want, f"metadata brokers {got} != {want}"
            return md["topics"][topic]["partitions"] == moved
        wait_for(ferry_sees_move, 20, f"ferry's metadata to show leaders {moved}")

        read_progress_until(lambda: progress["delivered"] >= at_move + 1000, 60,
                            "1000 more deliveries after the leader move")
    finally:
        try:
            p.proc.stdin.close()
        except OSError:
            pass
    res = p.result(90)
    assert p.wait() == 0
    assert res["errorCount"] == 0, f"{res['errorCount']} delivery errors, e.g. {res['errors']}"
    assert res["delivered"] == res["produced"], res
    assert result_brokers(res["metadata"]) == want
    client_leaders = {t["name"]: {q["id"]: q["leader"] for q in t["partitions"]}
                      for t in res["metadata"]["topics"]}
    assert client_leaders.get(topic) == moved, \
        f"client's leaders {client_leaders.get(topic)} != moved leaders {moved}"
    log = p.log_text()
    assert "Sent InitProducerIdRequest" in log, "idempotent producer never got a producer id"
    assert_no_upstream_in_log(log, f, "L", mock, "producer across the leader move")
    # The move was observed by the client and went to ferry's broker ports:
    # librdkafka names the broker handle of node N "host:port/N".
    port_of = {nid: port for nid, (_, port) in f.broker_addresses("L").items()}
    for part, new in moved.items():
        assert re.search(rf"\[{part}\].*(?:migrating|delegate).*:{port_of[new]}/{new}\b", log), \
            (f"no sign in the client log that {topic} [{part}] moved to broker {new} "
             f"at ferry port {port_of[new]}")

    # Everything produced is there, each message once (idempotence held).
    n = res["produced"]
    c = node_peer("rdkafka-consume-moved", RDKAFKA,
                  ["consume", "-b", bs, "-t", topic, "-n", n, "-g", "modern-moving-g",
                   "--timeout-ms", 60000, "--debug", "broker"])
    cres = c.result(120)
    assert c.wait() == 0
    assert cres["consumed"] == n, f"consumed {cres['consumed']} of {n}"
    assert_exactly_once([tuple(r) for r in cres["records"]],
                        {f"mv-{i}": f"value {i}" for i in range(n)}, "consumer after leader move")
    assert_no_upstream_in_log(c.log_text(), f, "L", mock, "consumer after leader move")


def test_kafkajs_group_of_two(modern_mock_factory, ferry_factory, node_peer):
    topic = "modern-kafkajs"
    mock = modern_mock_factory("K", [topic])
    f = ferry_factory({"K": mock})
    bs = f.bootstrap("K")
    k = node_peer("kafkajs-group", "kafkajs-group.js",
                  ["-b", bs, "-t", topic, "-g", "modern-kafkajs-g", "-n", 1000,
                   "--timeout-ms", 45000])
    res = k.result(120)
    assert k.wait() == 0
    assert res["errors"] == [], res["errors"]
    assert res["acked"] == 1000
    brokers = {b["id"]: f"{b['host']}:{b['port']}" for b in res["brokers"]}
    assert brokers == ferry_brokers(f, "K"), f"kafkajs describeCluster {brokers}"
    members = res["members"]
    assert len(members) == 2 and members[0]["memberId"] != members[1]["memberId"], members
    for m in members:
        assert m["assignment"], f"member {m['memberId']} got no partitions"
        assert m["keys"], f"member {m['memberId']} (partitions {m['assignment']}) consumed nothing"
    assert not set(members[0]["assignment"]) & set(members[1]["assignment"])
    records = [(key, None) for m in members for key in m["keys"]]
    assert_exactly_once(records, {f"k-{i}": None for i in range(1000)}, "kafkajs group")

    # kafkajs logs every request with the broker it went to.
    log = k.log_text()
    used = {int(p) for p in re.findall(r'"broker":"[^"]*:(\d+)"', log)}
    assert used, "kafkajs log names no broker: DEBUG logging missing?"
    assert not used & set(mock.ports), f"kafkajs talked to upstream ports {sorted(used & set(mock.ports))}"
    assert used <= ferry_ports(f, "K"), f"kafkajs used ports {sorted(used)}"


def test_apiversions_unsupported_version(modern_mock_factory, ferry_factory):
    """ApiVersions v99 gets UNSUPPORTED_VERSION (35) with ferry's own range for
    key 18 in a v0 body, in order with the next request on the connection."""
    mock = modern_mock_factory("V", [])
    f = ferry_factory({"V": mock})
    with socket.create_connection(("127.0.0.1", f.clusters["V"]["bootstrap"]), timeout=10) as s:
        s.settimeout(10)
        # Pipelined: v99 then v0; the answers must come back in that order.
        s.sendall(apiversions_request(99, 991) + apiversions_request(0, 992))
        first = read_frame(s)
        corr, err, keys, rest = parse_apiversions_v0(first)
        assert corr == 991, f"first response has correlation id {corr}, expected 991"
        assert err == 35, f"ApiVersions v99: error {err}, expected 35 (UNSUPPORTED_VERSION)"
        assert keys == {18: (0, 5)}, f"ApiVersions v99: api_keys {keys}, expected {{18: (0, 5)}}"
        assert rest == b"", f"ApiVersions v99: {len(rest)} bytes after the v0 body: {rest.hex()}"
        assert len(first) == 4 + 2 + 4 + 6

        second = read_frame(s)
        corr, err, keys, rest = parse_apiversions_v0(second)
        assert corr == 992, f"second response has correlation id {corr}, expected 992"
        assert err == 0 and rest == b"", (err, rest)
        for key in (0, 1, 3, 10, 18):
            assert key in keys, f"ApiVersions v0 through ferry lacks key {key}: {keys}"
        lo, hi = keys[18]
        assert 0 <= lo <= hi <= 5, f"ApiVersions range {keys[18]} outside ferry's 0-5"


def test_negotiated_versions_reported(modern_mock_factory, ferry_factory, node_peer, capsys,
                                      record_property):
    """Reports the Produce/Fetch (and Metadata, FindCoordinator) versions
    librdkafka 2.12 negotiates through ferry, next to ferry's advertised
    ranges and the upstream's. Fails only if a client sent a version ferry
    does not advertise (which ferry would refuse) or nothing was negotiated."""
    topic = "modern-versions"
    mock = modern_mock_factory("N", [topic])
    f = ferry_factory({"N": mock})
    bs = f.bootstrap("N")
    p = node_peer("rdkafka-produce-v", RDKAFKA,
                  ["produce", "-b", bs, "-t", topic, "-n", 50, "--debug", "protocol"])
    pres = p.result(60)
    assert p.wait() == 0 and pres["delivered"] == 50, pres
    c = node_peer("rdkafka-consume-v", RDKAFKA,
                  ["consume", "-b", bs, "-t", topic, "-n", 50, "-g", "modern-versions-g",
                   "--timeout-ms", 40000, "--debug", "protocol"])
    cres = c.result(90)
    assert c.wait() == 0 and cres["consumed"] == 50, {k: v for k, v in cres.items() if k != "records"}

    text = p.log_text() + c.log_text()
    ferry_av = apiversions_v0(f.clusters["N"]["bootstrap"])
    upstream_av = apiversions_v0(mock.ports[0])
    names = {0: "Produce", 1: "Fetch", 3: "Metadata", 10: "FindCoordinator"}
    report, problems = [], []
    for key, name in names.items():
        used = sent_versions(text, name)
        fr, ur = ferry_av.get(key), upstream_av.get(key)
        rng = lambda r: f"{r[0]}-{r[1]}" if r else "none"  # noqa: E731
        report.append(f"{name} sent v{','.join(map(str, used)) or '-'} "
                      f"(ferry advertises {rng(fr)}, upstream {rng(ur)})")
        if not used:
            problems.append(f"no {name} request seen")
        elif fr and max(used) > fr[1]:
            problems.append(f"{name} v{max(used)} sent although ferry advertises up to v{fr[1]}")
    line = f"librdkafka {pres['librdkafka']} through ferry: " + "; ".join(report)
    record_property("negotiated_versions", line)
    with capsys.disabled():
        print(f"\n[modern] {line}")
    assert not problems, f"{problems}\n{line}"
