"""
kwire — the few Kafka requests the real-Kafka harness makes itself, over a
plain socket (no client library, so readiness and checks do not depend on
the clients under test): ApiVersions v0 and v5 (KIP-1242's cluster and node
check), Metadata v1 and v12 (topic ids, the cluster id), CreateTopics v4,
ListOffsets v1, Produce v12/v13 and Fetch v17/v18 with the KIP-951 leader
hints of their responses (CurrentLeader, NodeEndpoints), any flexible
request as raw bytes, and a diff of two ApiVersions answers with the API
names read from the pinned kafka-clients jar's message schemas.
"""

import base64
import re
import socket
import struct
import sys
from pathlib import Path

# tests/peers: the frame helpers of sasl_broker.py (importable by design)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from sasl_broker import Reader, compact_bytes, compact_string, uvarint  # noqa: E402


class KafkaError(Exception):
    pass


def _recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def _roundtrip(host, port, api_key, version, body, timeout, corr=7):
    cid = b"kcluster"
    req = struct.pack(">hhih", api_key, version, corr, len(cid)) + cid + body
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(req)) + req)
        (size,) = struct.unpack(">i", _recv_exact(s, 4))
        resp = _recv_exact(s, size)
    (rcorr,) = struct.unpack_from(">i", resp, 0)
    if rcorr != corr:
        raise KafkaError(f"{host}:{port}: correlation id {rcorr}, sent {corr}")
    return resp[4:]


def api_versions(host, port, timeout=5.0):
    """ApiVersions v0: {api_key: (min, max)}; raises on an error code."""
    b = _roundtrip(host, port, 18, 0, b"", timeout)
    err, n = struct.unpack_from(">hi", b, 0)
    if err:
        raise KafkaError(f"{host}:{port}: ApiVersions error {err}")
    out = {}
    for i in range(n):
        k, lo, hi = struct.unpack_from(">hhh", b, 6 + 6 * i)
        out[k] = (lo, hi)
    return out


def metadata(host, port, topics=(), timeout=5.0):
    """Metadata v1 for `topics` (none: no topics): {"brokers": {node_id:
    (host, port)}, "controller": id, "topics": {name: {"error": code,
    "partitions": {index: {"error", "leader", "replicas", "isr"}}}}}."""
    body = struct.pack(">i", len(topics))
    for t in topics:
        tb = t.encode()
        body += struct.pack(">h", len(tb)) + tb
    b = _roundtrip(host, port, 3, 1, body, timeout)
    off = 0

    def i16():
        nonlocal off
        (v,) = struct.unpack_from(">h", b, off)
        off += 2
        return v

    def i32():
        nonlocal off
        (v,) = struct.unpack_from(">i", b, off)
        off += 4
        return v

    def string():
        nonlocal off
        n = i16()
        if n < 0:
            return None
        off += n
        return b[off - n:off].decode()

    brokers = {}
    for _ in range(i32()):
        nid, h, p = i32(), string(), i32()
        string()  # rack
        brokers[nid] = (h, p)
    controller = i32()
    out_topics = {}
    for _ in range(i32()):
        terr, name = i16(), string()
        off += 1  # is_internal
        parts = {}
        for _ in range(i32()):
            perr, idx, leader = i16(), i32(), i32()
            replicas = [i32() for _ in range(i32())]
            isr = [i32() for _ in range(i32())]
            parts[idx] = {"error": perr, "leader": leader, "replicas": replicas, "isr": isr}
        out_topics[name] = {"error": terr, "partitions": parts}
    return {"brokers": brokers, "controller": controller, "topics": out_topics}


def metadata_brokers(host, port, timeout=5.0):
    """({node_id: (host, port)}, controller_id) of a Metadata v1 round trip."""
    md = metadata(host, port, timeout=timeout)
    return md["brokers"], md["controller"]


def create_topics(host, port, topics, timeout=30.0):
    """CreateTopics v4: topics = [(name, partitions, replication_factor,
    {config: value})]. Returns {name: (error_code, message)}."""
    body = struct.pack(">i", len(topics))
    for name, parts, rf, configs in topics:
        nb = name.encode()
        body += struct.pack(">h", len(nb)) + nb + struct.pack(">ihi", parts, rf, 0)
        body += struct.pack(">i", len(configs))
        for k, v in configs.items():
            kb, vb = k.encode(), str(v).encode()
            body += struct.pack(">h", len(kb)) + kb + struct.pack(">h", len(vb)) + vb
    body += struct.pack(">ib", int(timeout * 1000), 0)
    b = _roundtrip(host, port, 19, 4, body, timeout + 5)
    off = 4  # throttle_time_ms
    (n,) = struct.unpack_from(">i", b, off)
    off += 4
    out = {}
    for _ in range(n):
        (nl,) = struct.unpack_from(">h", b, off)
        name = b[off + 2:off + 2 + nl].decode()
        off += 2 + nl
        err, ml = struct.unpack_from(">hh", b, off)
        off += 4
        msg = None
        if ml >= 0:
            msg = b[off:off + ml].decode()
            off += ml
        out[name] = (err, msg)
    return out


def list_offsets(host, port, topic, partitions, timestamp=-1, timeout=5.0):
    """ListOffsets v1 (-1: the end, i.e. the high watermark; -2: the start)
    of some partitions led by this broker: {partition: offset}; raises on a
    partition error."""
    tb = topic.encode()
    body = struct.pack(">ii", -1, 1) + struct.pack(">h", len(tb)) + tb + struct.pack(">i", len(partitions))
    for p in partitions:
        body += struct.pack(">iq", p, timestamp)
    b = _roundtrip(host, port, 2, 1, body, timeout)
    (nt,) = struct.unpack_from(">i", b, 0)
    off, out = 4, {}
    for _ in range(nt):
        (nl,) = struct.unpack_from(">h", b, off)
        off += 2 + nl
        (np_,) = struct.unpack_from(">i", b, off)
        off += 4
        for _ in range(np_):
            p, err, _ts, o = struct.unpack_from(">ihqq", b, off)
            off += 22
            if err:
                raise KafkaError(f"ListOffsets {topic}/{p} at {host}:{port}: error {err}")
            out[p] = o
    return out


def api_names(jar=None):
    """{api_key: name} from the message schemas inside a kafka-clients jar
    (default: the pinned version's, if installed), e.g. {0: "Produce"}."""
    import glob
    import zipfile
    if jar is None:
        from kcluster import kafka_home
        found = glob.glob(str(kafka_home() / "*" / "kafka-clients-*.jar"))
        if not found:
            return {}
        jar = found[0]
    out = {}
    with zipfile.ZipFile(jar) as z:
        for name in z.namelist():
            if name.startswith("common/message/") and name.endswith("Request.json"):
                text = z.read(name).decode()
                m = re.search(r'"apiKey":\s*(\d+)', text)
                if m:
                    out[int(m.group(1))] = name[len("common/message/"):-len("Request.json")]
    return out


def api_versions_diff(broker, proxy, names=None):
    """Rows (key, name, broker range or None, proxy range or None, what)
    for every key where the two ApiVersions answers differ."""
    names = api_names() if names is None else names
    rows = []
    for k in sorted(set(broker) | set(proxy)):
        b, p = broker.get(k), proxy.get(k)
        if b == p:
            continue
        if p is None:
            what = "dropped by the proxy"
        elif b is None:
            what = "ADDED by the proxy (the broker does not advertise it)"
        elif p[0] >= b[0] and p[1] <= b[1]:
            what = f"capped to v{p[0]}-{p[1]}"
        else:
            what = "WIDER than the broker's"
        rows.append((k, names.get(k, "?"), b, p, what))
    return rows


# --------------------------------------------------------------------------
# flexible versions: Produce v12/v13 and Fetch v17/v18 with their KIP-951
# hints, Metadata v12, ApiVersions v5, raw flexible requests
# --------------------------------------------------------------------------

def _varint(n):
    return uvarint((n << 1) ^ (n >> 63))   # zigzag


_CRC32C = []


def crc32c(data):
    """CRC-32C (Castagnoli), the checksum of a record batch v2."""
    if not _CRC32C:
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            _CRC32C.append(c)
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC32C[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def record_batch(values, key=None, timestamp_ms=None):
    """A record batch v2 (magic 2, no compression, no producer id) of
    `values` (bytes), each with the same key (bytes or None)."""
    import time as _time
    ts = int(_time.time() * 1000) if timestamp_ms is None else timestamp_ms
    recs = b""
    for i, v in enumerate(values):
        body = b"\x00" + _varint(0) + _varint(i)   # attributes, timestamp delta, offset delta
        body += _varint(-1) if key is None else _varint(len(key)) + key
        body += _varint(len(v)) + v + _varint(0)   # value, no headers
        recs += _varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", 0, len(values) - 1, ts, ts, -1, -1, -1, len(values)) + recs
    tail = struct.pack(">ibI", -1, 2, crc32c(after_crc)) + after_crc   # leader epoch, magic, crc
    return struct.pack(">qi", 0, len(tail)) + tail


class _Flex(Reader):
    """sasl_broker's reader of a response body, with what the flexible
    versions of Produce and Fetch need besides."""

    def unpack(self, fmt):
        v = struct.unpack(fmt, self.take(struct.calcsize(fmt)))
        return v[0] if len(v) == 1 else v

    def cstr(self):
        b = self.compact_bytes()
        return None if b is None else b.decode()

    def array(self, elem):
        n = self.uvarint() - 1
        return None if n < 0 else [elem() for _ in range(n)]

    def tags(self, known=None):
        """{tag: parsed value} of a tag section; known = {tag: fn(reader)}
        (other tags are kept as raw bytes)."""
        out = {}
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            end = self.o + size
            if known and tag in known:
                out[tag] = known[tag](self)
                if self.o != end:
                    raise KafkaError(f"tag {tag}: {size} bytes, {size + self.o - end} parsed")
            else:
                out[tag] = self.take(size)
            self.o = end
        return out


def _leader_id_and_epoch(r):
    leader, epoch = r.unpack(">ii")
    r.tags()
    return {"leader_id": leader, "leader_epoch": epoch}


def _node_endpoints(r):
    def one():
        nid, host, port, rack = r.unpack(">i"), r.cstr(), r.unpack(">i"), r.cstr()
        r.tags()
        return {"node_id": nid, "host": host, "port": port, "rack": rack}
    return r.array(one)


def _flex_roundtrip(host, port, api_key, version, body, timeout, corr, header_tags=True):
    """One request with header v2; the response's reader after its header
    (v1, with a tag section; header_tags=False: v0, as ApiVersions')."""
    cid = b"ferry-kwire"
    req = struct.pack(">hhih", api_key, version, corr, len(cid)) + cid + b"\x00" + body
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(req)) + req)
        (size,) = struct.unpack(">i", _recv_exact(s, 4))
        resp = _recv_exact(s, size)
    r = _Flex(resp)
    if r.unpack(">i") != corr:
        raise KafkaError(f"{host}:{port}: correlation id mismatch")
    if header_tags:
        r.tags()   # response header v1
    return r


def _uuid(topic_id):
    """16 raw bytes of a topic id given as bytes or in its base64 text form."""
    if isinstance(topic_id, str):
        return base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4))
    return topic_id


def topic_id_text(raw):
    """The text form of a topic id (as Kafka prints it)."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def metadata_v12(host, port, topics=(), timeout=5.0, corr=13):
    """Metadata v12 (flexible; topic ids): {"cluster_id", "controller",
    "brokers": {node_id: (host, port)}, "topics": {name: {"error",
    "topic_id" (text form), "partitions": {index: {"error", "leader",
    "leader_epoch", "replicas", "isr"}}}}}."""
    body = uvarint(len(topics) + 1)
    for t in topics:
        body += b"\x00" * 16 + compact_string(t) + b"\x00"
    body += b"\x00\x00\x00"   # no auto-creation, no authorized operations, tags
    r = _flex_roundtrip(host, port, 3, 12, body, timeout, corr)
    r.unpack(">i")   # throttle
    brokers = {}

    def broker():
        nid, h, p, _rack = r.unpack(">i"), r.cstr(), r.unpack(">i"), r.cstr()
        r.tags()
        brokers[nid] = (h, p)
    r.array(broker)
    cluster_id, controller = r.cstr(), r.unpack(">i")
    out = {}

    def i32s():
        return r.array(lambda: r.unpack(">i"))

    def partition():
        err, idx, leader, epoch = r.unpack(">hiii")
        replicas, isr = i32s(), i32s()
        i32s()   # offline replicas
        r.tags()
        return idx, {"error": err, "leader": leader, "leader_epoch": epoch, "replicas": replicas,
                     "isr": isr}

    def topic():
        err, name, tid = r.unpack(">h"), r.cstr(), r.take(16)
        r.unpack(">b")   # is_internal
        parts = dict(r.array(partition))
        r.unpack(">i")   # authorized operations
        r.tags()
        out[name] = {"error": err, "topic_id": topic_id_text(tid), "partitions": parts}
    r.array(topic)
    r.tags()
    return {"cluster_id": cluster_id, "controller": controller, "brokers": brokers, "topics": out}


def api_versions_v5(host, port, cluster_id=None, node_id=-1, timeout=5.0, corr=14):
    """ApiVersions v5 (KIP-1242): the broker checks cluster_id and node_id
    when a cluster id is given. (error_code, {api_key: (min, max)}); a
    broker older than v5 answers UNSUPPORTED_VERSION (35) with a v0 body
    listing the ApiVersions versions it knows (KIP-511)."""
    body = (compact_string("ferry-kwire") + compact_string("1")
            + compact_string(cluster_id) + struct.pack(">i", node_id) + b"\x00")
    r = _flex_roundtrip(host, port, 18, 5, body, timeout, corr, header_tags=False)
    err = r.unpack(">h")
    keys = {}
    if err == 35:
        for _ in range(r.unpack(">i")):
            k, lo, hi = r.unpack(">hhh")
            keys[k] = (lo, hi)
        return err, keys

    def entry():
        k, lo, hi = r.unpack(">hhh")
        r.tags()
        keys[k] = (lo, hi)
    r.array(entry)
    return err, keys


def flexible_request(host, port, api_key, version, body, timeout=5.0, corr=15):
    """A flexible request of any API, body as raw bytes: the response body
    after its header (v1) as bytes. ConnectionError when the peer closes
    the connection instead of answering (ferry refusing the API)."""
    r = _flex_roundtrip(host, port, api_key, version, body, timeout, corr)
    return r.b[r.o:]


def produce(host, port, topic, partition, values, acks=-1, timeout=10.0, corr=11, version=12):
    """Produce v12 or v13 of one batch to one partition (v13: `topic` is the
    topic id, raw or text, KIP-516): {"partitions": {index: {"error",
    "base_offset", "message", "current_leader": {...} or None}},
    "node_endpoints": [{"node_id", "host", "port", "rack"}] or None} (the
    KIP-951 hints the response carries)."""
    if version not in (12, 13):
        raise ValueError(f"Produce v{version}: kwire writes v12 and v13")
    batch = record_batch([v if isinstance(v, bytes) else v.encode() for v in values])
    name = _uuid(topic) if version >= 13 else compact_string(topic)
    body = (b"\x00" + struct.pack(">hi", acks, int(timeout * 1000))       # null transactional id
            + uvarint(2) + name
            + uvarint(2) + struct.pack(">i", partition) + compact_bytes(batch) + b"\x00"
            + b"\x00" + b"\x00")
    r = _flex_roundtrip(host, port, 0, version, body, timeout + 5, corr)
    parts = {}

    def part():
        idx, err, base = r.unpack(">ihq")
        r.unpack(">qq")   # log append time, log start offset
        r.array(lambda: (r.unpack(">i"), r.cstr(), r.tags()))   # record errors
        msg = r.cstr()
        t = r.tags({0: _leader_id_and_epoch})
        parts[idx] = {"error": err, "base_offset": base, "message": msg, "current_leader": t.get(0)}

    def topic_resp():
        if version >= 13:
            r.take(16)
        else:
            r.cstr()
        r.array(part)
        r.tags()
    r.array(topic_resp)
    r.unpack(">i")   # throttle
    t = r.tags({0: _node_endpoints})
    return {"partitions": parts, "node_endpoints": t.get(0)}


def produce_v12(host, port, topic, partition, values, acks=-1, timeout=10.0, corr=11):
    return produce(host, port, topic, partition, values, acks, timeout, corr, version=12)


def fetch(host, port, topic_id, partition, offset=0, leader_epoch=-1, timeout=10.0, corr=12,
          version=17):
    """Fetch v17 or v18 of one partition (topic_id: the 16 raw bytes or its
    base64 text form), no wait: {"error", "partitions": {index: {"error",
    "high_watermark", "records" (bytes), "current_leader": {...} or None}},
    "node_endpoints": [...] or None}. v18 differs from v17 by a tagged
    field of the request only (a follower's high watermark), left out."""
    if version not in (17, 18):
        raise ValueError(f"Fetch v{version}: kwire writes v17 and v18")
    body = (struct.pack(">iiibii", 0, 1, 1 << 20, 0, 0, -1)   # max wait, min/max bytes, isolation, session
            + uvarint(2) + _uuid(topic_id)
            + uvarint(2) + struct.pack(">iiqiqi", partition, leader_epoch, offset, -1, -1, 1 << 20)
            + b"\x00" + b"\x00"
            + uvarint(1)            # no forgotten topics
            + compact_string("") + b"\x00")   # rack id, tags
    r = _flex_roundtrip(host, port, 1, version, body, timeout + 5, corr)
    r.unpack(">i")   # throttle
    err, _session = r.unpack(">hi")
    parts = {}

    def part():
        idx, perr, hw = r.unpack(">ihq")
        r.unpack(">qq")   # last stable offset, log start offset
        r.array(lambda: r.unpack(">qq"))   # aborted transactions
        r.unpack(">i")    # preferred read replica
        recs = r.compact_bytes()
        t = r.tags({1: _leader_id_and_epoch})
        parts[idx] = {"error": perr, "high_watermark": hw, "records": recs or b"",
                      "current_leader": t.get(1)}

    def topic_resp():
        r.take(16)   # topic id
        r.array(part)
        r.tags()
    r.array(topic_resp)
    t = r.tags({0: _node_endpoints})
    return {"error": err, "partitions": parts, "node_endpoints": t.get(0)}


def fetch_v17(host, port, topic_id, partition, offset=0, leader_epoch=-1, timeout=10.0, corr=12):
    return fetch(host, port, topic_id, partition, offset, leader_epoch, timeout, corr, version=17)


