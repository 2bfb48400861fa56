#!/usr/bin/env python3
"""Seed corpora for the libFuzzer harnesses in tests/fuzz/.

    gen_seeds.py OUTDIR [REPO_ROOT]

writes OUTDIR/<target>/seed-<name> for every harness.  The Kafka frames are
built field by field from the apache/kafka message schemas, like the builders
in tests/unit/test_rewrite.c; the HTTP requests, INI texts and IPC envelopes
follow tests/unit/test_http.c, test_config.c and test_ipc.c.  Every file is
small: the whole set is a few tens of KiB.  The input layout of each harness
is described at the top of its .c file.
"""
import os
import re
import struct
import sys

out_dir = sys.argv[1]
root = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "..", "..")


def put(target, name, data):
    d = os.path.join(out_dir, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# ---- Kafka encoding helpers ------------------------------------------------

def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def uv(v):
    b = bytearray()
    while v >= 0x80:
        b.append((v & 0x7F) | 0x80)
        v >>= 7
    b.append(v)
    return bytes(b)


def string(flex, s):
    if s is None:
        return uv(0) if flex else i16(-1)
    s = s.encode() if isinstance(s, str) else s
    return (uv(len(s) + 1) if flex else i16(len(s))) + s


def arr(flex, n):
    return uv(n + 1) if flex else i32(n)


def uv_wide(v):
    """A legal but non-minimal 2-byte varint (v < 128): 0x80|v, 0x00."""
    return bytes([0x80 | v, 0x00])


def frame(body):
    return i32(len(body)) + body


# ---- fuzz_rewrite: [key][version][map mode] + response frame ---------------

def metadata(v, brokers, header_tags=b"\x00", null_name=False, wide_count=False):
    flex = v >= 9
    b = i32(7)
    if flex:
        b += header_tags
    if v >= 3:
        b += i32(25)
    b += uv_wide(len(brokers) + 1) if wide_count else arr(flex, len(brokers))
    for node, host, port, rack in brokers:
        b += i32(node) + string(flex, host) + i32(port)
        if v >= 1:
            b += string(flex, rack)
        if flex:
            b += b"\x00"
    if v >= 2:
        b += string(flex, "cluster-A")
    if v >= 1:
        b += i32(2)
    b += arr(flex, 2)
    for t in range(2):
        b += i16(0 if t == 0 else 3)
        b += string(flex, None if (null_name and t == 1) else ("orders" if t == 0 else "x"))
        if v >= 10:
            b += bytes(range(16, 32))
        if v >= 1:
            b += i8(t)
        b += arr(flex, 2 if t == 0 else 0)
        for p in range(2 if t == 0 else 0):
            b += i16(0) + i32(p) + i32(p + 1)
            if v >= 7:
                b += i32(5)
            b += arr(flex, 2) + i32(1001) + i32(1002)
            b += arr(flex, 1) + i32(1001 + p)
            if v >= 5:
                b += arr(flex, 1) + i32(1003)
            if flex:
                b += b"\x00" if p == 0 else b"\x01\x00\x01\x7f"
        if v >= 8:
            b += i32(-2147483648)
        if flex:
            b += b"\x00"
    if 8 <= v <= 10:
        b += i32(-2147483648)
    if v >= 13:
        b += i16(0)
    if flex:
        b += b"\x02\x00\x00\x09\x03\xaa\xbb\xcc"
    return frame(b)


BROKERS = [
    (1, "kafka-1.internal.example", 9092, "rack-a"),
    (2, "kafka-2.internal.example", 9093, None),
    (7, "kafka-7", 9097, "rack-c"),
    (-1, "", -1, None),
]


def find_coordinator(v, entries):
    flex = v >= 3
    b = i32(42)
    if flex:
        b += b"\x01\x00\x01\x99"
    if v >= 1:
        b += i32(100)
    if v <= 3:
        node, host, port = entries[0]
        b += i16(0)
        if v >= 1:
            b += string(flex, "NONE" if not flex else None)
        b += i32(node) + string(flex, host) + i32(port)
        if flex:
            b += b"\x01\x02\x01\x55"
    else:
        b += uv(len(entries) + 1)
        for k, (node, host, port) in enumerate(entries):
            b += string(True, "group-%d" % k) + i32(node) + string(True, host) + i32(port)
            b += i16(0 if node >= 0 else 15) + string(True, None if node >= 0 else "n/a")
            b += b"\x01\x04\x01\x42" if k == 0 else b"\x00"
        b += b"\x00"
    return frame(b)


def api_versions(v, keys, error=0):
    flex = v >= 3
    b = i32(5) + i16(error) + arr(flex, len(keys))
    for k, lo, hi in keys:
        b += i16(k) + i16(lo) + i16(hi)
        if flex:
            b += b"\x00"
    if v >= 1:
        b += i32(0)
    if flex:
        # SupportedFeatures-like tagged field, copied verbatim
        b += b"\x01\x00\x05\x01\x02\x03\x04\x05"
    return frame(b)


AV_KEYS = [(0, 0, 11), (1, 0, 17), (3, 0, 13), (10, 0, 6), (18, 0, 4), (60, 0, 1),
           (17, 0, 1), (36, 0, 2), (7, 0, 3), (19, 0, 7), (100, 0, 2)]


def node_endpoints(nodes):
    b = uv(len(nodes) + 1)
    for node, host, port, rack in nodes:
        b += i32(node) + string(True, host) + i32(port) + string(True, rack) + b"\x00"
    return b


def tags(fields):
    b = uv(len(fields))
    for tag, val in fields:
        b += uv(tag) + uv(len(val)) + val
    return b


LEADER = i32(2) + i32(5) + b"\x00"   # LeaderIdAndEpoch


def produce_response(v, nodes, more_tags=()):
    flex = v >= 9
    b = i32(11) + (b"\x00" if flex else b"")
    b += arr(flex, 1)
    b += bytes(range(0x20, 0x30)) if v >= 13 else string(flex, "orders")
    b += arr(flex, 1) + i32(0) + i16(0) + struct.pack(">q", 100)
    if v >= 2:
        b += struct.pack(">q", -1)
    if v >= 5:
        b += struct.pack(">q", 0)
    if v >= 8:
        b += arr(flex, 1) + i32(0) + string(flex, "bad batch")
        if flex:
            b += b"\x00"
        b += string(flex, None)
    if flex:
        b += tags([(0, LEADER)] if v >= 10 else [])
        b += b"\x00"   # topic tags
    if v >= 1:
        b += i32(0)
    if flex:
        b += tags(([(0, node_endpoints(nodes))] if v >= 10 and nodes is not None else []) +
                  list(more_tags))
    return frame(b)


def fetch_response(v, nodes):
    flex = v >= 12
    b = i32(12) + (b"\x00" if flex else b"")
    if v >= 1:
        b += i32(0)
    if v >= 7:
        b += i16(0) + i32(77)
    b += arr(flex, 1)
    b += bytes(range(0x40, 0x50)) if v >= 13 else string(flex, "orders")
    b += arr(flex, 1) + i32(0) + i16(0) + struct.pack(">q", 10)
    if v >= 4:
        b += struct.pack(">q", 10)
    if v >= 5:
        b += struct.pack(">q", 0)
    if v >= 4:
        b += arr(flex, 1) + struct.pack(">qq", 5, 6) + (b"\x00" if flex else b"")
    if v >= 11:
        b += i32(-1)
    recs = b"records!"
    b += (uv(len(recs) + 1) if flex else i32(len(recs))) + recs
    if flex:
        b += tags([(1, LEADER), (2, struct.pack(">q", 9) + i32(1) + b"\x00")])
        b += b"\x00"
    if flex:
        b += tags([(0, node_endpoints(nodes))] if v >= 16 and nodes is not None else [])
    return frame(b)


def describe_cluster(v, nodes, endpoint_type=1, wide_count=False):
    b = i32(13) + b"\x00" + i32(0) + i16(0) + string(True, None)
    if v >= 1:
        b += i8(endpoint_type)
    b += string(True, "cluster-A") + i32(1)
    b += uv_wide(len(nodes) + 1) if wide_count else uv(len(nodes) + 1)
    for node, host, port, rack in nodes:
        b += i32(node) + string(True, host) + i32(port) + string(True, rack)
        if v >= 2:
            b += i8(0)
        b += b"\x00"
    b += i32(-2147483648) + b"\x00"
    return frame(b)


def share_response(key, v, nodes, wide_count=False):
    """ShareFetch (78) or ShareAcknowledge (79) v1-2: one topic, a partition
    with records and acquired batches, one NOT_LEADER_OR_FOLLOWER."""
    fetch = key == 78
    b = i32(14) + b"\x00" + i32(0) + i16(0) + string(True, None)
    if fetch or v >= 2:
        b += i32(30000)                                  # AcquisitionLockTimeoutMs
    b += arr(True, 1) + bytes(range(0x60, 0x70)) + arr(True, 2)
    for idx, err in ((0, 0), (1, 6)):
        b += i32(idx) + i16(err) + string(True, "not leader" if err else None)
        if fetch:
            b += i16(0) + string(True, None)
        b += LEADER
        if fetch:
            recs = b"records!" if idx == 0 else b""
            b += uv(len(recs) + 1) + recs
            b += arr(True, 1 - idx) + (struct.pack(">qqh", 0, 7, 1) + b"\x00") * (1 - idx)
        b += b"\x00"
    b += b"\x00"                                         # topic tags
    ne = node_endpoints(nodes)
    if wide_count:
        ne = uv_wide(len(nodes) + 1) + ne[1:]
    return frame(b + ne + b"\x00")


def gen_rewrite():
    mode = 0  # map mode byte: see fuzz_rewrite.c
    for v in (0, 1, 2, 3, 5, 7, 8, 9, 10, 12, 13):
        put("fuzz_rewrite", "md-v%d" % v, bytes([3, v, mode]) + metadata(v, BROKERS[:3]))
    put("fuzz_rewrite", "md-v9-neg", bytes([3, 9, 1]) + metadata(9, BROKERS))
    put("fuzz_rewrite", "md-v12-nullname", bytes([3, 12, 2]) + metadata(12, BROKERS[:2], null_name=True))
    put("fuzz_rewrite", "md-v4-empty", bytes([3, 4, 0x0c]) + metadata(4, []))
    for v in range(0, 7):
        ents = [(2, "kafka-2", 9093), (-1, "", -1)] if v >= 4 else [(2, "kafka-2", 9093)]
        put("fuzz_rewrite", "fc-v%d" % v, bytes([10, v, mode]) + find_coordinator(v, ents))
    put("fuzz_rewrite", "fc-v0-unmapped", bytes([10, 0, 0x0b]) + find_coordinator(0, [(9, "kafka-9", 9099)]))
    for v in range(0, 5):
        put("fuzz_rewrite", "av-v%d" % v, bytes([18, v, 0]) + api_versions(v, AV_KEYS))
    put("fuzz_rewrite", "av-v0-unsupported", bytes([18, 7, 0]) + api_versions(0, [(18, 0, 3)], error=35))
    put("fuzz_rewrite", "av-v3-error", bytes([18, 3, 0]) + frame(i32(5) + i16(35) + uv(2) + i16(18) + i16(0) + i16(3) + b"\x00"))
    nodes = BROKERS
    for v in (0, 3, 8, 9, 10, 12, 13):
        put("fuzz_rewrite", "produce-v%d" % v, bytes([0, v, 0x04 if v == 12 else 0]) + produce_response(v, nodes))
    put("fuzz_rewrite", "produce-v11-none", bytes([0, 11, 0]) + produce_response(11, None))
    for v in (0, 4, 7, 11, 12, 13, 16, 17):
        put("fuzz_rewrite", "fetch-v%d" % v, bytes([1, v, 0x20 if v == 17 else 0]) + fetch_response(v, nodes))
    for v in (0, 1, 2):
        put("fuzz_rewrite", "dc-v%d" % v, bytes([60, v, 0]) + describe_cluster(v, nodes))
    # a count varint that narrows when rewritten; a tag beside NodeEndpoints
    put("fuzz_rewrite", "md-v9-wide-count", bytes([3, 9, 0x04]) + metadata(9, BROKERS, wide_count=True))
    put("fuzz_rewrite", "dc-v2-wide-count", bytes([60, 2, 0x04]) + describe_cluster(2, nodes, wide_count=True))
    put("fuzz_rewrite", "produce-v10-more-tags", bytes([0, 10, 0]) +
        produce_response(10, nodes, more_tags=[(3, b"xyz"), (7, b"")]))
    put("fuzz_rewrite", "dc-v1-controllers", bytes([60, 1, 0]) + describe_cluster(1, nodes[:2], endpoint_type=2))
    for key, name in ((78, "sharefetch"), (79, "shareack")):
        for v in (1, 2):
            put("fuzz_rewrite", "%s-v%d" % (name, v), bytes([key, v, 0x04 if v == 2 else 0]) +
                share_response(key, v, nodes))
        put("fuzz_rewrite", "%s-v1-wide-count" % name, bytes([key, 1, 0x08]) +
            share_response(key, 1, nodes, wide_count=True))


# ---- fuzz_frame: [selector] + bytes (request frame / response prefix) -------

def request(key, ver, corr, client_id, body=b"", header_version=None):
    from_flex = {0: 9, 3: 9, 10: 3, 18: 3, 1: 12, 7: 3}
    if header_version is None:
        if key == 7 and ver == 0:
            header_version = 0
        else:
            header_version = 2 if ver >= from_flex.get(key, 0 if key > 92 else 99) else 1
    h = i16(key) + i16(ver) + i32(corr)
    if header_version >= 1:
        h += string(False, client_id)
    if header_version >= 2:
        h += b"\x00"
    return frame(h + body)


def produce_body(v, txn, acks):
    b = b""
    if v >= 3:
        b += string(v >= 9, txn)
    b += i16(acks) + i32(30000)
    return b + (uv(1) if v >= 9 else i32(0)) + (b"\x00" if v >= 9 else b"")


def gen_frame():
    sel = 0  # max_frame = 100 MiB, parser mode
    put("fuzz_frame", "produce-v0", bytes([sel]) + request(0, 0, 1, "producer", produce_body(0, None, 1)))
    put("fuzz_frame", "produce-v3-acks0", bytes([sel]) + request(0, 3, 2, "p", produce_body(3, "txn-1", 0)))
    put("fuzz_frame", "produce-v9-flex", bytes([sel]) + request(0, 9, 3, "rdkafka", produce_body(9, None, -1)))
    put("fuzz_frame", "produce-v9-txn", bytes([sel]) + request(0, 9, 4, None, produce_body(9, "t", 1)))
    put("fuzz_frame", "metadata-v0", bytes([sel]) + request(3, 0, 5, "c", i32(-1)))
    put("fuzz_frame", "metadata-v12", bytes([sel]) + request(3, 12, 6, "c", uv(1) + b"\x00\x00\x00"))
    put("fuzz_frame", "apiversions-v3", bytes([sel]) + request(18, 3, 7, "adminclient-1",
        string(True, "apache-kafka-java") + string(True, "3.7.0") + b"\x00"))
    put("fuzz_frame", "controlled-shutdown-v0", bytes([sel]) + request(7, 0, 8, None, i32(1)))
    put("fuzz_frame", "header-tags", bytes([sel]) + frame(i16(3) + i16(12) + i32(9) + string(False, "x")
        + b"\x02\x00\x01\xaa\x05\x02\xbb\xcc") + b"")
    put("fuzz_frame", "partial", bytes([sel]) + request(0, 9, 3, "rdkafka", produce_body(9, None, -1))[:13])
    put("fuzz_frame", "response-prefix", bytes([sel]) + i32(10) + i32(77) + b"\x00\x01")
    put("fuzz_frame", "small-max", bytes([1]) + request(3, 1, 1, "c", i32(0)))
    # SASL pass-through (sasl.c): handshakes v0/v1, SaslAuthenticate v2, a
    # flexible SaslAuthenticate response with a tag, a raw token
    put("fuzz_frame", "sasl-handshake-v0-scram", bytes([sel]) + request(17, 0, 10, "kafka-python",
        string(False, "SCRAM-SHA-256")))
    put("fuzz_frame", "sasl-handshake-v1-gssapi", bytes([sel]) + request(17, 1, 11, "rdkafka",
        string(False, "GSSAPI")))
    put("fuzz_frame", "sasl-authenticate-v2", bytes([sel]) + request(36, 2, 12, "rdkafka",
        uv(15) + b"\x00alice\x00secret" + b"\x00"))
    put("fuzz_frame", "sasl-authenticate-response-v2", bytes([sel]) + i32(14) + i32(12)
        + b"\x01\x00\x01\xaa" + i16(0) + b"\x00\x01" + i32(0)[:2])
    put("fuzz_frame", "sasl-raw-token", bytes([sel]) + i32(13) + b"\x00alice\x00secret")
    # reader machine (selector bit 7): ops over a buffer, see fuzz_frame.c
    put("fuzz_frame", "vm-strings", bytes([0x80, 0x10]) + bytes([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
        + b"\x00\x03abc\xff\xff\x04xyz\x00\x01" + b"\x02\x00\x01\xaa")


# ---- fuzz_config: INI text ---------------------------------------------------

CLUSTER_A = ("[cluster a]\nupstream = 127.0.0.1:9092,[::1]:9093\nbootstrap = 127.0.0.1:9192\n"
             "broker_ports = 9193-9195\n")


def gen_config():
    try:
        with open(os.path.join(root, "conf", "ferry.ini"), "rb") as f:
            put("fuzz_config", "ferry-ini", f.read())
    except OSError:
        pass
    put("fuzz_config", "minimal", CLUSTER_A)
    put("fuzz_config", "two-clusters",
        "[ferry]\nadmin_listen = off\nuser = alice\nlog_level = debug\nlog_format = json\n"
        "persist = yes\ncrash_loop_limit = 3\ncrash_loop_window = 90s\n" + CLUSTER_A +
        "[cluster b.2_x-y]\nupstream=h:1\nbootstrap = [::]:9292\nadvertised_host = [fe80::1]\n"
        "broker_ports = 9293\nnode_ids = 2147483646\nmax_frame_bytes = 1025\nidle_timeout = 0\n"
        "request_timeout = 1500ms\nmax_inflight_per_connection = 65536\nmax_connections = 1\n")
    put("fuzz_config", "node-ids",
        "[cluster c]\nupstream = kafka:9092 , kafka2:9092\nbootstrap = localhost:9000\n"
        "broker_ports = 9001-9006\nnode_ids = 0-2, 7 ,9,2147483647\nidle_timeout = 1h\n")
    put("fuzz_config", "errors",
        "\ufeff; comment\n# other\n[ferry]\r\nuser:   bob  ; inline\r\ndrain_timeout = 30\n"
        "[bogus]\nx = 1\n[cluster]\n[cluster a b]\nkey outside\n" + CLUSTER_A + CLUSTER_A)
    put("fuzz_config", "ports-conflict",
        "[ferry]\nadmin_listen = 0.0.0.0:9000\n[cluster a]\nupstream = h:1\nbootstrap = [::1]:9000\n"
        "broker_ports = 9001-9002\n[cluster b]\nupstream = h:1\nbootstrap = [0:0::1]:9001\n"
        "broker_ports = 8999-9003\n")
    # gateway = sni: one TLS port, brokers by server name; and the refused mixes
    put("fuzz_config", "sni-gateway",
        "[cluster s]\nupstream = h:1\nbootstrap = 0.0.0.0:9443\ntls_cert = /c.pem\n"
        "tls_key = /k.pem\ngateway = sni\nsni_bootstrap_host = Kafka.example.com\n"
        "sni_broker_pattern = b-$(nodeId)x.kafka.example.com\n" + CLUSTER_A)
    put("fuzz_config", "sni-errors",
        "[cluster s]\nupstream = h:1\nbootstrap = 127.0.0.1:9443\ngateway = sni\n"
        "sni_bootstrap_host = b-1.k\nsni_broker_pattern = b-$(nodeId).k$(nodeId)\n"
        "broker_ports = 9444\nnode_ids = 1\nadvertised_host = x\n"
        "[cluster p]\nupstream = h:1\nbootstrap = 127.0.0.1:9500\nbroker_ports = 9501\n"
        "sni_bootstrap_host = a.b\ngateway = tunnel\n")
    put("fuzz_config", "long-lines",
        "[cluster l]\nupstream=" + ",".join("kafka-%02d.example.internal:9092" % i for i in range(5)) +
        "\nbootstrap = 127.0.0.1:1\nadvertised_host=" + "h" * 150 + "\nbroker_ports = 2-3\n")


# ---- fuzz_http: [4 split-seed bytes] + request -------------------------------

def gen_http():
    reqs = {
        "get-health": "GET /admin/health HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "get-query": "GET /admin/clusters/a%2Fb?x=1&y#frag HTTP/1.0\r\nUser-Agent: curl/7.88\r\n\r\n",
        "post-body": "POST /admin/config/validate HTTP/1.1\r\nContent-Length: 27\r\n"
                     "Content-Type: text/plain\r\n\r\n[cluster a]\nupstream = h:1\n",
        "expect": "\r\n\nPUT http://localhost:9190/admin?x HTTP/1.1\nExpect: 100-continue\n"
                  "Content-Length: 5, 5\n\nhello",
        "chunked": "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "smuggle": "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc",
        "conflict": "POST / HTTP/1.1\r\nContent-Length: 3\r\ncontent-length: 4\r\n\r\nabcd",
        "fold": "GET / HTTP/1.1\r\nA: b\r\n  c\r\n\r\n",
        "star": "OPTIONS * HTTP/1.1\r\n\r\n",
        "http2": "GET / HTTP/2.0\r\n\r\n",
        "trailing": "GET /metrics HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n",
    }
    for name, r in reqs.items():
        put("fuzz_http", name, b"\x01\x02\x03\x04" + r.encode())
    # the limits: 101 header fields in ~15 KiB, a request line past 16 KiB
    many = "GET /admin/clusters HTTP/1.1\r\n" + "".join(
        "X-H%03d: %s\r\n" % (i, "v" * 140) for i in range(101)) + "\r\n"
    put("fuzz_http", "many-headers", b"\x09\x0a\x0b\x0c" + many.encode())
    put("fuzz_http", "long-target", b"\x0d\x0e\x0f\x10" + ("GET /" + "a" * 16400 + " HTTP/1.1\r\n\r\n").encode())
    # response side (the harness parses the same bytes as a response too)
    put("fuzz_http", "response", b"\x05\x06\x07\x08" + b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")


# ---- fuzz_ipc: one datagram (native-endian envelope) -------------------------

def gen_ipc():
    def msg(t, gen, payload=b""):
        return struct.pack("=IIQ", t, len(payload), gen) + payload

    put("fuzz_ipc", "config", msg(1, 3, b"[cluster a]\nupstream = h:1\n"))
    put("fuzz_ipc", "listeners", msg(2, 3, struct.pack("=I", 4)))
    put("fuzz_ipc", "accept", msg(3, 3))
    put("fuzz_ipc", "drain", msg(4, 3, struct.pack("=Q", 30000)))
    put("fuzz_ipc", "stop", msg(5, 1))
    put("fuzz_ipc", "ready", msg(6, 9))
    put("fuzz_ipc", "upstream", msg(7, 2, struct.pack("=I", 0) + b"connection refused".ljust(188, b"\x00")))
    put("fuzz_ipc", "failed", msg(8, 2, b"bad config"))
    put("fuzz_ipc", "bad-len", struct.pack("=IIQ", 4, 7, 1) + b"\x00" * 8)
    # IPC_TLS_MATERIAL (12): six file lengths, version 1, pad, then the bytes
    pem = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    put("fuzz_ipc", "tls-material", msg(12, 4, struct.pack("=8I", len(pem), 4, 0, 0, 0, 0, 1, 0)
                                       + pem + b"KEY!"))

    # learned brokers: IPC_NODES (13) / IPC_NODE_LEARNED (22): count, flags, then
    # records int32 node id, uint16 port, uint8 host length, host
    def nodemap(flags, *nodes):
        b = struct.pack("=II", len(nodes), flags)
        for nid, host, port in nodes:
            b += struct.pack("=iHB", nid, port, len(host)) + host
        return b
    put("fuzz_ipc", "nodes", msg(13, 5, nodemap(1, (1, b"broker-1.kafka", 9092),
                                                (2, b"10.0.0.2", 9093))))
    put("fuzz_ipc", "node-learned", msg(22, 5, nodemap(0, (3, b"::1", 19092))))
    # IPC_TICKET_KEYS (14): struct tlskeys, 256 bytes: n, pad, serial, 3 keys
    put("fuzz_ipc", "ticket-keys", msg(14, 5, struct.pack("=IIQ", 2, 0, 7) + bytes(range(240))))

    # the admin channel: type numbers read from common/ipc.h, layouts of
    # supervisor/adminproto.h (request: id, route, flags, body_len, n_errors,
    # name[64], version[72], caller: listener, auth, have_cred, uid, gid, pid,
    # addr[64], subject[256], connections query: limit, offset, by_client_id,
    # by_principal, client_id[256], principal[256], cluster list query: given,
    # states, sort, limit, offset, pad, names[1024])
    text = open(os.path.join(root, "common", "ipc.h")).read()
    body = re.sub(r"/\*.*?\*/", "", re.search(r"enum\s+ipc_type\s*\{(.*?)\};", text, re.S).group(1),
                  flags=re.S)
    types = {n.strip(): i for i, n in enumerate(x for x in body.split(",") if x.strip())}

    def caller_control():
        return struct.pack("=IIIIIi64s256s", 0, 0, 1, 1000, 1000, 4242, b"", b"")

    def request(rid, route, flags=0, body_len=0, n_errors=0, name=b"", version=b"",
                caller=None, query=None, listq=None):
        return (struct.pack("=QIIII64s72s", rid, route, flags, body_len, n_errors, name,
                            version) + (caller or caller_control()) +
                (query or struct.pack("=IIII256s256s", 0, 0, 0, 0, b"", b"")) +
                (listq or struct.pack("=IIIIII1024s", 0, 0, 0, 0, 0, 0, b"")))
    req = types["IPC_ADMIN_REQUEST"]
    put("fuzz_ipc", "admin-request-health", msg(req, 0, request(1, 1)))
    put("fuzz_ipc", "admin-request-drain", msg(req, 0, request(2, 8, name=b"prod-a")))
    put("fuzz_ipc", "admin-request-tcp", msg(req, 0, request(3, 3, caller=struct.pack(
        "=IIIIIi64s256s", 1, 3, 0, 0, 0, 0, b"127.0.0.1:5555", b"CN=op"))))
    put("fuzz_ipc", "admin-request-connections", msg(req, 0, request(
        6, 12, name=b"prod-a", query=struct.pack("=IIII256s256s", 100, 5, 1, 0, b"rdkafka", b""))))
    put("fuzz_ipc", "admin-request-clusters-query", msg(req, 0, request(
        7, 3, listq=struct.pack("=IIIIII1024s", 1, (1 << 3) | (1 << 5), 2, 50, 100, 0,
                                b"team-*,ops-[ab]"))))
    put("fuzz_ipc", "admin-request-body", msg(req, 0, request(4, 6, flags=1, body_len=100)))
    put("fuzz_ipc", "admin-request-rejected", msg(req, 0, request(
        5, 5, flags=2, n_errors=2, version=b"sha256:" + b"0" * 64)
        + b"<request>:1: unknown section [x]\0<request>:2: no [ferry]\0"))
    put("fuzz_ipc", "admin-answer", msg(types["IPC_ADMIN_ANSWER"], 0,
                                        struct.pack("=QIIII", 1, 200, 0, 3, 0) + b"{}\n"))
    put("fuzz_ipc", "admin-answer-memfd", msg(types["IPC_ADMIN_ANSWER"], 0,
                                              struct.pack("=QIIII", 1, 200, 1, 100000, 1)))
    put("fuzz_ipc", "admin-creds", msg(types["IPC_ADMIN_CREDS"], 0, struct.pack(
        "=II32s1024sIIII", 1, 5, b"\x01" * 32, b"/admin/health", 4, 3, 0, 0) + b"CERTKEY"))
    put("fuzz_ipc", "admin-setup", msg(types["IPC_ADMIN_SETUP"], 0, struct.pack("=IIII", 1, 1, 1, 0)))


# ---- fuzz_proxyproto: [mode] + PROXY header bytes | proxy_protocol_from ----

def gen_proxyproto():
    # The header builders of the integration tests (haproxy's spec, byte by byte).
    sys.path.insert(0, os.path.join(root, "tests", "integration"))
    from proxyproto import tlv as pp_tlv, v2 as pp_v2

    t = "fuzz_proxyproto"
    kafka = i32(12) + i16(18) + i16(0) + i32(1) + string(False, "c")
    put(t, "v1-tcp4", b"\x00PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n" + kafka)
    put(t, "v1-tcp6", b"\x00PROXY TCP6 2001:db8::1 ::ffff:10.0.0.1 40000 9092\r\n")
    put(t, "v1-unknown", b"\x00PROXY UNKNOWN\r\n\x16\x03\x01")
    put(t, "v1-unknown-long", b"\x00PROXY UNKNOWN " + b"f" * 90 + b"\r\n")
    put(t, "v1-bad-port", b"\x00PROXY TCP4 1.2.3.4 5.6.7.8 65536 1\r\n")
    put(t, "v1-no-crlf", b"\x00PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n")
    ip4 = ("203.0.113.7", "10.0.0.1", 51000, 9092)
    put(t, "v2-tcp4", b"\x00" + pp_v2(*ip4) + kafka)
    put(t, "v2-tcp6", b"\x00" + pp_v2("::1", "::ffff:10.0.0.1", 40000, 9092))
    put(t, "v2-unix", b"\x00" + pp_v2(b"/run/client.sock", b"\0abstract"))
    put(t, "v2-local", b"\x00" + pp_v2(command=0))
    put(t, "v2-udp", b"\x00" + pp_v2(*ip4, fam=0x12))
    put(t, "v2-tlvs", b"\x00" + pp_v2(*ip4, tlvs=[(1, b"kafka"), (2, b"b.example"), (4, b"\0\0"),
        (0x20, b"\x01\0\0\0\0" + pp_tlv(0x21, b"TLSv1.3"))]))
    put(t, "v2-crc", b"\x00" + pp_v2(*ip4, tlvs=[(5, b"conn-1")], crc=True))
    put(t, "v2-64k", b"\x00" + pp_v2(*ip4, length=0xFFFF))
    put(t, "v2-max", b"\x00" + pp_v2(*ip4, tlvs=[(4, bytes(4096 - 16 - 12 - 3))]))
    put(t, "kafka", b"\x00" + kafka)
    put(t, "tls", b"\x00\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    put(t, "cidr-issue", b"\x8010.0.0.0/8, 192.168.1.0/24, ::1/128, 2001:db8::/32")
    put(t, "cidr-mapped", b"\x80::ffff:10.0.0.0/104, 0.0.0.0/0, ::/0, 192.0.2.7")
    put(t, "cidr-bad", b"\x8010.0.0.1/8,,fe80::1%eth0")


# ---- fuzz_clientinfo: [mode] + request frames | [mode][cap] + SASL token ----

def gen_clientinfo():
    t = "fuzz_clientinfo"
    apiv = request(18, 3, 1, "adminclient-1", string(True, "apache-kafka-java") + string(True, "3.7.0")
                   + b"\x00")
    hs_plain = request(17, 1, 2, "adminclient-1", string(False, "PLAIN"))
    au_plain = request(36, 1, 3, "adminclient-1", i32(19) + b"admin\x00alice\x00secret")
    hs_scram = request(17, 1, 2, "rdkafka", string(False, "SCRAM-SHA-256"))
    first = b"n,,n=al=2Cice,r=fyko+d2lbbFgONRv9qkxdawL"
    au_scram = request(36, 2, 3, "rdkafka", uv(len(first) + 1) + first + b"\x00")
    final = b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
    au_final = request(36, 2, 4, "rdkafka", uv(len(final) + 1) + final + b"\x00")
    hs_v0 = request(17, 0, 2, "kafka-python", string(False, "PLAIN"))
    meta = request(3, 1, 9, None, i32(-1))
    put(t, "plain-session", b"\x00" + apiv + hs_plain + au_plain + meta)
    put(t, "scram-session", b"\x00" + apiv + hs_scram + au_scram + au_final + meta)
    put(t, "v0-raw-plain", b"\x40" + hs_v0 + i32(13) + b"\x00bob\x00pw-bob1" + meta)
    put(t, "oauth", b"\x00" + request(17, 1, 2, "c", string(False, "OAUTHBEARER"))
        + request(36, 2, 3, "c", uv(30) + b"n,a=x,\x01auth=Bearer eyJ0\x01\x01".ljust(29, b"A") + b"\x00"))
    put(t, "apiversions-v0", b"\x00" + request(18, 0, 1, "old", b""))
    put(t, "tok-plain", b"\x81\x40" + b"authz\x00authc\x00password")
    put(t, "tok-plain-small", b"\x81\x03" + b"\x00authcid-long\x00pw")
    put(t, "tok-scram", b"\x82\xff" + b"n,a=b=3Dob,n=alice,r=abc,ext=1")
    put(t, "tok-scram-p", b"\x83\x10" + b"p=tls-unique,,n=x,r=y")
    put(t, "tok-oauth", b"\x84\x20" + b"n,,\x01auth=Bearer abc\x01\x01")


# ---- fuzz_conn: [limits] [client length, 2 bytes] client stream, upstream stream

def conn_seed(name, sel, client, upstream):
    put("fuzz_conn", name, bytes([sel]) + struct.pack(">H", len(client)) + client + upstream)


def response(corr, body):
    return frame(i32(corr) + body)


def gen_conn():
    sel = 2 | (3 << 5)  # 1024-byte buffers, max_frame 4096, max_inflight 1024
    md = request(3, 1, 7, "c", i32(-1))
    av_body = string(True, "ferry") + string(True, "1.0") + b"\x00"
    conn_seed("metadata", sel, md, metadata(1, BROKERS))
    conn_seed("metadata-v12", sel, request(3, 12, 7, "c", uv(1) + b"\x00\x00\x00"),
              metadata(12, BROKERS))
    conn_seed("apiversions", sel, request(18, 3, 5, "c", av_body), api_versions(3, AV_KEYS))
    conn_seed("apiversions-too-new", sel, request(18, 9, 5, "c", av_body) + md,
              metadata(1, BROKERS))
    conn_seed("produce-acks", sel, request(0, 7, 1, "p", produce_body(7, None, 0))
              + request(0, 7, 2, "p", produce_body(7, None, 1)), response(2, i32(0) + i32(0)))
    conn_seed("sasl-v0-plain", sel, request(17, 0, 3, "k", string(False, "PLAIN"))
              + i32(13) + b"\x00alice\x00secret" + md,
              response(3, i16(0) + arr(False, 1) + string(False, "PLAIN")) + i32(0)
              + metadata(1, BROKERS))
    conn_seed("inflight-1-small-buffer", 0 | (0 << 5), md + md, metadata(1, BROKERS) * 2)
    conn_seed("sasl-limit", sel | 0x10, request(17, 1, 3, "k", string(False, "PLAIN"))
              + request(36, 1, 4, "k", bytes(80)), b"")



# ---- fuzz_staterec: an upgrade's state record (supervisor/staterec.h) -------

def gen_staterec():
    import json
    cluster = {
        "name": "a", "state": "active", "configVersion": "sha256:" + "1" * 64,
        "nextGeneration": 7, "restarts": 2, "restartAtMono": 0, "restartDelayMs": 0,
        "failReason": "",
        "crash": {"times": [1000, 2000], "backoffMs": 400, "startedMono": 900, "restarts": 2,
                  "loops": 0},
        "unresponsiveTotal": 0,
        "upstream": {"state": "reachable", "since": 1700000000000, "error": ""},
        "unknownNodes": [{"nodeId": 9, "host": "x.kafka", "port": 9092, "since": 1}],
        "nodes": {"upstreamKey": "sha256:" + "2" * 64, "generation": 6,
                  "entries": [{"nodeId": 1, "host": "b1.kafka", "port": 9092}]},
        "lastReplacement": {"fromGeneration": 5, "toGeneration": 6, "handedOver": 3,
                            "drained": 0, "forced": 0, "durationMs": 12},
        "serving": {"generation": 6, "state": "accepting", "since": 1, "reason": "ready"},
        "tickets": False,
        "counters": {"counters": {"connections_accepted": 5, "requests": 9},
                     "gauges": {}, "api": {"18": {"requests": 9, "responses": 9,
                                                   "latencySumUs": 900,
                                                   "buckets": {"250": 9}}}},
    }
    rec = {
        "record": 1,
        "from": {"version": "0.1.0", "buildId": "ab" * 20, "pid": 4121, "startedAt": 1},
        "execPath": "/usr/sbin/ferryd", "notifySocket": None,
        "config": {"path": "/etc/ferry/ferry.ini", "text": "[ferry]\n", "version":
                   "sha256:" + "3" * 64, "appliedAt": 1},
        "serviceStartedAt": 1, "hupPending": False, "ticketRotationNextMono": 0,
        "reloadStats": {"result": [0, 1, 0, 0, 0], "bucket": [0] * 15, "count": 1, "sumMs": 5},
        "lastReload": None, "lastValidation": None,
        "upgrades": {"success": 1, "failed": 0, "rejected": 0}, "lastUpgrade": None,
        "admin": {"refusedMissing": 0, "refusedMalformed": 0, "refusedWrong": 0,
                  "tlsFailures": 0},
        "fds": [{"kind": "listener", "cluster": "a", "nodeId": -1, "host": "127.0.0.1",
                 "port": 9192},
                {"kind": "control", "path": "/run/ferry/ferry.sock", "dev": 1, "ino": 2},
                {"kind": "admin", "host": "127.0.0.1", "port": 9190}],
        "clusters": [cluster, dict(cluster, name="f", state="failed", serving=None)],
    }
    put("fuzz_staterec", "record", json.dumps(rec))
    put("fuzz_staterec", "counters", json.dumps({"cluster": "a", "counters": cluster["counters"]}))
    put("fuzz_staterec", "unknown-key", json.dumps(dict(rec, surprise=1)))

gen_rewrite()
gen_frame()
gen_conn()
gen_config()
gen_http()
gen_ipc()
gen_proxyproto()
gen_clientinfo()
gen_staterec()
