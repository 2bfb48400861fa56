"""
kwire — the few Kafka requests the real-Kafka harness makes itself, over a
plain socket (no client library, so readiness and checks do not depend on
the clients under test): ApiVersions v0, Metadata v1, CreateTopics v4,
ListOffsets v1, and a diff of two ApiVersions answers with the API names
read from the pinned kafka-clients jar's message schemas.
"""

import re
import socket
import struct


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
