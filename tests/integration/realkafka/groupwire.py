"""
groupwire — the raw Kafka requests the group, transaction and share-group
scenarios make themselves, to see on the wire what a client would see
(tests/peers/kafka/kwire.py has the harness's own few):

    topic_layout(host, port, topic)     Metadata v12: topic id, partition leaders
    find_coordinators(host, port, keys, key_type)   FindCoordinator v6
    consumer_group_state(host, port, group)         ConsumerGroupDescribe v0
    share_fetch(host, port, group, topic_id, partitions, version)
                                        ShareFetch v1/v2 with a new share
                                        session; the parsed response

Flexible encodings (compact strings and arrays, tag sections, request
header v2, response header v1) throughout; layouts from the apache/kafka
message schemas (MetadataRequest/Response.json, FindCoordinatorRequest/
Response.json, ConsumerGroupDescribeRequest/Response.json,
ShareFetchRequest/Response.json).
"""

import socket
import struct
import uuid

from kwire import _recv_exact as recv_exact   # tests/peers/kafka, on sys.path


class WireError(Exception):
    pass


# ---- encoding ----

def uvarint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def cstr(s):
    if s is None:
        return b"\x00"
    b = s.encode()
    return uvarint(len(b) + 1) + b


def carr(items):
    return uvarint(len(items) + 1) + b"".join(items)


TAGS = b"\x00"


class Reader:
    def __init__(self, b):
        self.b, self.off = b, 0

    def take(self, n):
        if self.off + n > len(self.b):
            raise WireError(f"response ends at {len(self.b)}, field wants {self.off + n}")
        v = self.b[self.off:self.off + n]
        self.off += n
        return v

    def i8(self):
        return struct.unpack(">b", self.take(1))[0]

    def i16(self):
        return struct.unpack(">h", self.take(2))[0]

    def i32(self):
        return struct.unpack(">i", self.take(4))[0]

    def i64(self):
        return struct.unpack(">q", self.take(8))[0]

    def uv(self):
        shift = v = 0
        while True:
            c = self.take(1)[0]
            v |= (c & 0x7F) << shift
            if not c & 0x80:
                return v
            shift += 7

    def cstr(self):
        n = self.uv()
        return None if n == 0 else self.take(n - 1).decode()

    def carr(self):
        n = self.uv()
        return -1 if n == 0 else n - 1

    def cbytes(self):
        n = self.uv()
        return None if n == 0 else self.take(n - 1)

    def tags(self):
        for _ in range(self.uv()):
            self.uv()
            self.take(self.uv())

    def uuid(self):
        return self.take(16)


def roundtrip(host, port, key, version, body, timeout=10.0, corr=11, client_id="groupwire"):
    """One request with header v2; returns the response body after the
    correlation id and the header's tag section (response header v1)."""
    cid = client_id.encode()
    req = struct.pack(">hhih", key, version, corr, len(cid)) + cid + TAGS + body
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(req)) + req)
        (size,) = struct.unpack(">i", recv_exact(s, 4))
        resp = recv_exact(s, size)
    r = Reader(resp)
    if r.i32() != corr:
        raise WireError(f"{host}:{port}: correlation id mismatch")
    r.tags()
    return r


# ---- Metadata v12 ----

def topic_layout(host, port, topic, timeout=10.0):
    """{"id": 16-byte topic id, "leaders": {partition: leader},
    "brokers": {node: (host, port)}} of one topic (Metadata v12)."""
    body = carr([b"\x00" * 16 + cstr(topic) + TAGS]) + b"\x00" + b"\x00" + TAGS
    r = roundtrip(host, port, 3, 12, body, timeout)
    r.i32()                                     # throttle
    brokers = {}
    for _ in range(r.carr()):
        nid, h, p = r.i32(), r.cstr(), r.i32()
        r.cstr()                                # rack
        r.tags()
        brokers[nid] = (h, p)
    r.cstr()                                    # cluster id
    r.i32()                                     # controller
    out = None
    for _ in range(r.carr()):
        err, name, tid = r.i16(), r.cstr(), r.uuid()
        r.i8()                                  # internal
        leaders = {}
        for _ in range(r.carr()):
            r.i16()
            idx, leader = r.i32(), r.i32()
            r.i32()                             # leader epoch
            for _ in range(3):                  # replicas, isr, offline
                for _ in range(r.carr()):
                    r.i32()
            r.tags()
            leaders[idx] = leader
        r.i32()                                 # topic authorized operations
        r.tags()
        if name == topic:
            if err:
                raise WireError(f"Metadata {topic}: error {err}")
            out = {"id": tid, "leaders": leaders}
    if out is None:
        raise WireError(f"Metadata: no topic {topic}")
    out["brokers"] = brokers
    return out


# ---- FindCoordinator v6 ----

KEY_GROUP, KEY_TRANSACTION, KEY_SHARE = 0, 1, 2


def find_coordinators(host, port, keys, key_type=KEY_GROUP, timeout=10.0):
    """{key: (error, node, host, port)} (FindCoordinator v6, the first
    with the share key type; v4-v6 share one layout). A share-coordinator
    key is "group:topic_id:partition" (KIP-932), the topic id in Kafka's
    text form (kafka_uuid_text)."""
    body = struct.pack(">b", key_type) + carr([cstr(k) for k in keys]) + TAGS
    r = roundtrip(host, port, 10, 6, body, timeout)
    r.i32()
    out = {}
    for _ in range(r.carr()):
        k, node, h, p = r.cstr(), r.i32(), r.cstr(), r.i32()
        err = r.i16()
        r.cstr()
        r.tags()
        out[k] = (err, node, h, p)
    return out


# ---- ConsumerGroupDescribe v0 (KIP-848) ----

def consumer_group_state(host, port, group, timeout=10.0):
    """(error, state, members) of one group, asked of its coordinator;
    error 69 (GROUP_ID_NOT_FOUND) for a group that is not a consumer-protocol
    group."""
    body = carr([cstr(group)]) + b"\x00" + TAGS
    r = roundtrip(host, port, 69, 0, body, timeout)
    r.i32()
    if r.carr() < 1:
        raise WireError("ConsumerGroupDescribe: no group in the answer")
    err = r.i16()
    r.cstr()
    r.cstr()                                    # group id
    state = r.cstr()
    r.i32()                                     # group epoch
    r.i32()                                     # assignment epoch
    r.cstr()                                    # assignor
    return err, state, r.carr()


def kafka_uuid_text(b):
    """A 16-byte Uuid as Kafka writes it: URL-safe base64, no padding."""
    import base64
    return base64.urlsafe_b64encode(b).decode().rstrip("=")


# ---- ShareFetch v1/v2 ----

def share_fetch(host, port, group, topic_id, partitions, version=1, timeout=10.0):
    """A ShareFetch opening a share session (epoch 0, a new member id) for
    `partitions` of one topic, without waiting for records. Returns {"error",
    "partitions": {index: {"error", "leader", "epoch", "records"}},
    "node_endpoints": {node: (host, port, rack)}}."""
    member = str(uuid.uuid4())
    parts = [struct.pack(">i", p) + carr([]) + TAGS for p in partitions]
    body = cstr(group) + cstr(member) + struct.pack(">iiiiii", 0, 0, 1, 1 << 20, 100, 100)
    if version >= 2:
        body += b"\x00\x00"                     # ShareAcquireMode, IsRenewAck
    body += carr([topic_id + carr(parts) + TAGS]) + carr([]) + TAGS
    r = roundtrip(host, port, 78, version, body, timeout)
    r.i32()                                     # throttle
    out = {"error": r.i16(), "partitions": {}, "node_endpoints": {}}
    r.cstr()
    r.i32()                                     # acquisition lock timeout (v1+)
    for _ in range(r.carr()):
        r.uuid()
        for _ in range(r.carr()):
            idx, err = r.i32(), r.i16()
            r.cstr()
            r.i16()
            r.cstr()
            leader, epoch = r.i32(), r.i32()
            r.tags()
            recs = r.cbytes()
            for _ in range(r.carr()):
                r.take(18)
                r.tags()
            r.tags()
            out["partitions"][idx] = {"error": err, "leader": leader, "epoch": epoch,
                                      "records": None if recs is None else len(recs)}
        r.tags()
    for _ in range(r.carr()):
        nid, h, p, rack = r.i32(), r.cstr(), r.i32(), r.cstr()
        r.tags()
        out["node_endpoints"][nid] = (h, p, rack)
    r.tags()
    if r.off != len(r.b):
        raise WireError(f"ShareFetch v{version}: {len(r.b) - r.off} bytes after the message")
    return out
