"""
Zero copy of frame bodies (splice = on, worker/splice.h): the rest of a
large pass-through frame (Produce request records, Fetch response records)
moves socket -> pipe -> socket; everything ferry parses or rewrites still
goes through its buffer.

The upstream is SpliceRelay (below), in front of a real mock broker: it
forwards ferry's and the clients' ApiVersions/Metadata requests to the mock
one at a time (so their responses, rewritten by ferry, come in order), and
answers requests whose client_id starts with "splice" itself with
responses of a size the client_id names, of bytes both sides can compute;
it records a digest of every request frame it received.

Checked: byte-exact forwarding of frames of every size class (empty,
1 byte, the splice threshold and the pipe size +-1, several MiB; 100 MiB
with max_frame_bytes) both ways, pipelined and interleaved with Metadata
requests whose responses ferry rewrites, with splice on and, as the
control, off (bytes_spliced stays 0); a reload handing the connection over
while a request frame and a response frame are half through the pipe; a
client that stops reading in the middle of a 64 MiB response (the worker's
memory stays bounded, the upstream is not read ahead); the drain of a
reload with handover = off finishing a frame half through the pipe; a TLS
listener falls back to the buffer copy.
"""

import hashlib
import json
import os
import random
import socket
import struct
import threading
import time

import pytest

from conftest import pid_alive, serving_pids, wait_for
from test_tls import PKI, tls_client_ctx
from wire import ScriptedUpstream

MIB = 1 << 20
THRESHOLD = 64 * 1024        # SPLICE_THRESHOLD
PIPE = MIB                   # SPLICE_PIPE_BYTES
SIZES = [0, 1, THRESHOLD - 1, THRESHOLD, THRESHOLD + 1, PIPE - 1, PIPE, PIPE + 1,
         4 * MIB + 3]


def pattern(seed, n):
    """n bytes both sides compute from seed."""
    return random.Random(seed).randbytes(n) if n else b""


# --------------------------------------------------------------------------
# wire
# --------------------------------------------------------------------------

def kreq(key, ver, corr, cid, body=b""):
    c = cid.encode()
    payload = struct.pack(">hhih", key, ver, corr, len(c)) + c + body
    return struct.pack(">i", len(payload)) + payload


def produce_v3(corr, cid, n):
    """Produce v3, acks=1: transactional_id null, acks, timeout, then n
    bytes standing for the topic data (ferry reads no further than acks)."""
    return kreq(0, 3, corr, cid, struct.pack(">hhi", -1, 1, 30000) + pattern(corr, n))


def fetch_v4(corr, cid):
    body = struct.pack(">iiiib", -1, 100, 1, 1 << 20, 0) + struct.pack(">i", 0)
    return kreq(1, 4, corr, cid, body)


def metadata_v0(corr):
    return kreq(3, 0, corr, "ferry-it", struct.pack(">i", 0))


def apiversions_v0(corr):
    return kreq(18, 0, corr, "ferry-it")


def uvarint(v):
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def read_uvarint(b, off):
    v = shift = 0
    while True:
        c = b[off]
        off += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, off


def fetch_v16(corr, cid):
    """A Fetch v16 request (header v2); ferry reads its header only."""
    return kreq(1, 16, corr, cid, b"\x00" + struct.pack(">iii", 500, 1, 1 << 20) + b"\x00" * 12)


def node_endpoints(entries):
    """Top-level tag section holding NodeEndpoints [(node, host, port)]."""
    v = uvarint(len(entries) + 1)
    for node, host, port in entries:
        h = host.encode()
        v += struct.pack(">i", node) + uvarint(len(h) + 1) + h + struct.pack(">i", port)
        v += b"\x00\x00"                        # rack null, no tags
    return uvarint(1) + uvarint(0) + uvarint(len(v)) + v


def fetch_v16_response(corr, n, tail):
    """Size, correlation id, header tags, throttle, error, session, one
    topic (id) with one partition of n record bytes, then tail."""
    b = struct.pack(">i", corr) + b"\x00" + struct.pack(">ihi", 0, 0, 0x1234)
    b += uvarint(2) + bytes(range(16)) + uvarint(2)
    b += struct.pack(">ihqqq", 0, 0, 100, 100, 0) + uvarint(0) + struct.pack(">i", -1)
    b += uvarint(n + 1) + pattern(corr, n) + b"\x00" + b"\x00" + tail
    return struct.pack(">i", len(b)) + b


def tag_fields(sec):
    """[(tag, value)] of a tag section that must fill sec exactly."""
    nf, off = read_uvarint(sec, 0)
    out = []
    for _ in range(nf):
        tag, off = read_uvarint(sec, off)
        size, off = read_uvarint(sec, off)
        out.append((tag, sec[off:off + size]))
        off += size
    assert off == len(sec), f"{len(sec) - off} bytes after the tag section"
    return out


def endpoints(v):
    n, off = read_uvarint(v, 0)
    out = []
    for _ in range(n - 1):
        (node,) = struct.unpack_from(">i", v, off)
        hl, off = read_uvarint(v, off + 4)
        host = v[off:off + hl - 1].decode()
        off += hl - 1
        (port,) = struct.unpack_from(">i", v, off)
        off += 4 + 2
        out.append((node, host, port))
    assert off == len(v)
    return out


def read_exact(s, n, deadline):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"timed out after {got} of {n} bytes")
        s.settimeout(left)
        k = s.recv_into(view[got:], min(n - got, 4 * MIB))
        if k == 0:
            raise ConnectionError(f"closed after {got} of {n} bytes")
        got += k
    return bytes(buf)


def read_frame(s, timeout=30.0):
    deadline = time.monotonic() + timeout
    (n,) = struct.unpack(">i", read_exact(s, 4, deadline))
    return read_exact(s, n, deadline)


def metadata_brokers(body):
    """[(node_id, host, port)] of a Metadata v0 response body (after corr)."""
    off = 0
    (nb,) = struct.unpack_from(">i", body, off)
    off += 4
    out = []
    for _ in range(nb):
        node, hl = struct.unpack_from(">ih", body, off)
        off += 6
        host = body[off:off + hl].decode()
        off += hl
        (port,) = struct.unpack_from(">i", body, off)
        off += 4
        out.append((node, host, port))
    return out


# --------------------------------------------------------------------------
# the upstream
# --------------------------------------------------------------------------

class SpliceRelay(ScriptedUpstream):
    """Listens on 127.0.0.1; see the module's docstring. client_id of the
    requests it answers itself:

      splice-R         a response of R bytes after the correlation id
      splice-hold-R    the same, but only its first half until
                       self.release is set
      splice-f16-R     a Fetch v16 response (fetch_v16_response) of R
                       record bytes whose top-level tagged fields are
                       self.tails[corr] (default none)
    """

    def __init__(self, target):
        self.seen = {}              # corr -> (length, sha256) of request frames
        self.tails = {}             # corr -> top-level tags of a splice-f16 response
        self.sent = 0               # response bytes written to ferry
        self.holding = threading.Event()   # a splice-hold response is half out
        self.release = threading.Event()
        self.gate = threading.Event()      # cleared: no request is read
        self.gate.set()
        super().__init__(target)

    def close(self):
        self.release.set()
        self.gate.set()
        super().close()

    @staticmethod
    def _frame(s):
        head = b""
        while len(head) < 4:
            b = s.recv(4 - len(head))
            if not b:
                return b""
            head += b
        (n,) = struct.unpack(">i", head)
        buf = bytearray(4 + n)
        buf[:4] = head
        view = memoryview(buf)
        got = 4
        while got < 4 + n:
            k = s.recv_into(view[got:], min(4 + n - got, 4 * MIB))
            if not k:
                return b""
            got += k
        return bytes(buf)

    def _send(self, s, data):
        s.sendall(data)
        with self.lock:
            self.sent += len(data)

    def _serve(self, down):
        up = None
        try:
            while True:
                self.gate.wait(60)
                frame = self._frame(down)
                if not frame:
                    break
                corr = struct.unpack_from(">i", frame, 8)[0]
                (cl,) = struct.unpack_from(">h", frame, 12)
                cid = frame[14:14 + cl].decode() if cl > 0 else ""
                if not cid.startswith("splice"):
                    if up is None:
                        up = socket.create_connection(self.target, timeout=10)
                        self._track(up)
                    up.sendall(frame)
                    self._send(down, self._frame(up))
                    continue
                with self.lock:
                    self.seen[corr] = (len(frame), hashlib.sha256(frame).digest())
                n = int(cid.rsplit("-", 1)[1])
                if cid.startswith("splice-f16-"):
                    resp = fetch_v16_response(corr, n, self.tails.get(corr, b"\x00"))
                else:
                    resp = struct.pack(">ii", 4 + n, corr) + pattern(corr, n)
                if cid.startswith("splice-hold-"):
                    half = len(resp) // 2
                    self._send(down, resp[:half])
                    self.holding.set()
                    self.release.wait(60)
                    resp = resp[half:]
                self._send(down, resp)
        except OSError:
            pass
        finally:
            for s in (down, up):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass


# --------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------

@pytest.fixture
def senv(mock_factory, reload_ferry_factory, workdir, request):
    """S: splice on (the default), C: splice = off, D: handover = off, all
    through the relay, max_frame_bytes 128MiB."""
    mock = mock_factory("M", 1, ["sp:1"])
    relay = SpliceRelay(mock.addresses[0])
    request.addfinalizer(relay.close)
    big = {"max_frame_bytes": "128MiB"}
    f = reload_ferry_factory({"S": relay, "C": relay, "D": relay}, drain_timeout="20s",
                             cluster_extra={"S": dict(big), "C": {**big, "splice": "off"},
                                            "D": {**big, "handover": "off"}})
    return f, relay


def metric(f, name, cluster):
    return f.metrics().get((name, cluster), 0)


def worker_of(f, cluster):
    pids = serving_pids(f.cluster(cluster))
    assert len(pids) == 1, pids
    return pids[0]


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Conn:
    """A client connection whose requests go out from a thread, so that
    large pipelined requests and responses never wait on each other."""

    def __init__(self, port, ctx=None):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        if ctx is not None:
            s = ctx.wrap_socket(s, server_hostname="localhost")
        self.s = s
        self.err = []
        self.t = None

    def send_async(self, frames):
        def run():
            try:
                for fr in frames:
                    self.s.sendall(fr)
            except OSError as e:
                self.err.append(e)
        self.t = threading.Thread(target=run, daemon=True)
        self.t.start()

    def join(self):
        if self.t:
            self.t.join(60)
            assert not self.t.is_alive(), "requests not sent within 60 s"
        assert not self.err, self.err

    def close(self):
        self.s.close()


def exchange(f, relay, cluster, sizes, corr0, ctx=None, pipelined=True):
    """Pipelines (or, with pipelined False, sends each after the previous
    one's response: an ssl socket is not for two threads), per size n: a Produce request with n bytes of records
    (answered with 16 bytes), a Metadata v0 request (forwarded to the mock,
    its response rewritten by ferry), a Fetch request answered with n
    bytes; checks every response byte for byte and every request frame's
    digest as the upstream received it."""
    c = Conn(f.clusters[cluster]["bootstrap"], ctx)
    try:
        frames, expect = [], []
        corr = corr0
        for n in sizes:
            p = produce_v3(corr, "splice-16", n)
            frames.append(p)
            expect.append(("produce", corr, p, 16))
            frames.append(metadata_v0(corr + 1))
            expect.append(("metadata", corr + 1, None, None))
            frames.append(fetch_v4(corr + 2, f"splice-{n}"))
            expect.append(("fetch", corr + 2, frames[-1], n))
            corr += 3
        if pipelined:
            c.send_async(frames)
        ports = dict((nid, port) for nid, (_, port) in f.broker_addresses(cluster).items())
        for i, (kind, corr, req, n) in enumerate(expect):
            if not pipelined:
                c.s.sendall(frames[i])
            body = read_frame(c.s, 60)
            got = struct.unpack_from(">i", body)[0]
            assert got == corr, f"{kind}: response {got} where {corr} was owed"
            if kind == "metadata":
                brokers = metadata_brokers(body[4:])
                assert brokers, "no broker in the rewritten metadata"
                for nid, host, port in brokers:
                    assert host == "127.0.0.1" and port == ports[nid], brokers
                continue
            assert len(body) == 4 + n, f"{kind} {corr}: {len(body) - 4} bytes, {n} sent"
            assert body[4:] == pattern(corr, n), f"{kind} {corr}: bytes differ"
            seen = relay.seen.get(corr)
            assert seen == (len(req), hashlib.sha256(req).digest()), \
                f"{kind} request {corr} ({len(req)} bytes) reached the upstream altered: {seen}"
        c.join()
    finally:
        c.close()


# --------------------------------------------------------------------------
# tests
# --------------------------------------------------------------------------

def test_every_size_both_ways_spliced_and_copied(senv):
    f, relay = senv
    total = sum(SIZES)
    exchange(f, relay, "S", SIZES, 1000)
    spliced = metric(f, "ferry_bytes_spliced_total", "S")
    # the records of every frame at or above the threshold, both ways,
    # less what arrived with headers
    assert spliced >= total, f"only {spliced} bytes spliced of {2 * total}"
    exchange(f, relay, "C", SIZES, 2000)
    assert metric(f, "ferry_bytes_spliced_total", "C") == 0, "splice = off spliced"
    assert metric(f, "ferry_splice_fallbacks_total", "S") == 0
    # the pipes went back to the pool: at most the idle ones are open
    assert metric(f, "ferry_splice_pipes", "S") <= 8
    assert metric(f, "ferry_splice_pipes", "C") == 0


def test_100_mib_frames_both_ways(senv):
    f, relay = senv
    exchange(f, relay, "S", [100 * MIB], 3000)
    assert metric(f, "ferry_bytes_spliced_total", "S") >= 199 * MIB


def test_many_connections_at_once(senv):
    """More connections splicing at once than the pool keeps pipes for."""
    f, relay = senv
    errs = []

    def one(i):
        try:
            exchange(f, relay, "S", [PIPE + i, 3 * THRESHOLD], 10000 + 100 * i)
        except Exception as e:  # noqa: BLE001 (reported below)
            errs.append(e)
    ts = [threading.Thread(target=one, args=(i,)) for i in range(12)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errs, errs
    assert metric(f, "ferry_splice_pipes", "S") <= 8


def test_client_stops_reading_mid_body(senv):
    """A 64 MiB response to a client that reads nothing: ferry holds at
    most a pipe of it (the upstream is not read ahead), its memory stays
    put, and the bytes arrive whole once the client reads."""
    f, relay = senv
    pid = worker_of(f, "S")
    c = Conn(f.clusters["S"]["bootstrap"])
    try:
        c.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        n = 64 * MIB
        before = rss_kb(pid)
        sent0 = relay.sent
        c.s.sendall(fetch_v4(7, f"splice-{n}"))
        time.sleep(2.0)
        held = relay.sent - sent0
        grown = rss_kb(pid) - before
        # what the sockets' buffers and one pipe hold, far from 64 MiB
        assert held < 24 * MIB, f"the upstream wrote {held} bytes to a stalled client"
        assert grown < 8 * 1024, f"worker RSS grew by {grown} KiB"
        body = read_frame(c.s, 60)
        assert len(body) == 4 + n and body[4:] == pattern(7, n)
    finally:
        c.close()


def test_stalled_peers_keep_the_order(senv):
    """Each side stops reading while several large frames are pipelined
    towards it, so that a frame's header waits in the buffer behind the
    previous frame's tail in the pipe: nothing overtakes anything."""
    f, relay = senv
    c = Conn(f.clusters["S"]["bootstrap"])
    try:
        # the upstream reads nothing for a second
        relay.gate.clear()
        reqs = [produce_v3(1, "splice-16", 16 * MIB), produce_v3(2, "splice-16", PIPE + 1),
                produce_v3(3, "splice-16", 100), produce_v3(4, "splice-16", 3 * THRESHOLD),
                metadata_v0(5)]
        c.send_async(reqs)
        time.sleep(1.0)
        relay.gate.set()
        for corr in (1, 2, 3, 4):
            assert read_frame(c.s) == struct.pack(">i", corr) + pattern(corr, 16)
            assert relay.seen[corr] == (len(reqs[corr - 1]),
                                        hashlib.sha256(reqs[corr - 1]).digest()), corr
        assert struct.unpack_from(">i", read_frame(c.s))[0] == 5
        c.join()
        # the client reads nothing for a second
        sizes = {11: 16 * MIB, 12: PIPE + 1, 13: 100, 15: 3 * THRESHOLD}
        c.send_async([fetch_v4(11, f"splice-{sizes[11]}"), fetch_v4(12, f"splice-{sizes[12]}"),
                      fetch_v4(13, f"splice-{sizes[13]}"), metadata_v0(14),
                      fetch_v4(15, f"splice-{sizes[15]}")])
        time.sleep(1.0)
        for corr in (11, 12, 13, 14, 15):
            body = read_frame(c.s)
            assert struct.unpack_from(">i", body)[0] == corr
            if corr in sizes:
                assert body[4:] == pattern(corr, sizes[corr]), corr
            else:
                assert metadata_brokers(body[4:])
        c.join()
    finally:
        c.close()


def _modify(f, i, cluster="S"):
    f.spec[cluster]["extra"]["idle_timeout"] = "11m" if i % 2 == 0 else "10m"
    f.write()
    r = f.reload_ctl(json_out=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["clustersModified"] == [cluster]


def _reload_mid_request(f, relay, c, cluster, i, corr, old):
    """Sends half of an 8 MiB Produce request, starts a modifying reload of
    cluster once its records are being spliced, checks that the old worker
    (pid old) is still there, sends the rest; checks the response and the
    request as the upstream got it. Returns the reload's thread."""
    spliced0 = metric(f, "ferry_bytes_spliced_total", cluster)
    req = produce_v3(corr, "splice-16", 8 * MIB)
    half = len(req) // 2
    c.s.sendall(req[:half])
    wait_for(lambda: metric(f, "ferry_bytes_spliced_total", cluster) > spliced0 + MIB, 10,
             what="request bytes spliced")
    t = threading.Thread(target=_modify, args=(f, i, cluster))
    t.start()
    time.sleep(0.5)
    assert pid_alive(old), "the old worker left with a request frame half read"
    c.s.sendall(req[half:])
    assert read_frame(c.s) == struct.pack(">i", corr) + pattern(corr, 16)
    assert relay.seen[corr] == (len(req), hashlib.sha256(req).digest())
    return t


def test_drain_mid_frame(senv):
    """handover = off: a reload while a request's records are half through
    the pipe; the old worker finishes the frame and delivers its response
    whole, then closes the connection at the boundary."""
    f, relay = senv
    old = worker_of(f, "D")
    c = Conn(f.clusters["D"]["bootstrap"])
    try:
        t = _reload_mid_request(f, relay, c, "D", 0, 2, old)
        c.s.settimeout(15)
        assert c.s.recv(1) == b"", "the drained connection stays open"
        t.join(60)
        wait_for(lambda: not pid_alive(old), 15, what="old generation exited")
        assert metric(f, "ferry_connections_handed_over_total", "D") == 0
    finally:
        c.close()


def test_handover_mid_frame_both_ways(senv):
    """A reload while a request's records and then a response's records are
    half through: the old worker finishes the frame (its pipe empties),
    then hands the connection over; the next generation serves it, and
    every byte arrives as it was sent."""
    f, relay = senv
    old = worker_of(f, "S")
    c = Conn(f.clusters["S"]["bootstrap"])
    try:
        c.s.sendall(apiversions_v0(1))
        read_frame(c.s)
        # 1. half of an 8 MiB Produce request, then the reload
        t = _reload_mid_request(f, relay, c, "S", 0, 2, old)
        t.join(60)
        wait_for(lambda: not pid_alive(old), 15, what="old generation exited")
        assert metric(f, "ferry_connections_handed_over_total", "S") == 1
        new = worker_of(f, "S")
        # 2. half of an 8 MiB response held by the upstream, then a reload
        relay.holding.clear()
        relay.release.clear()
        c.s.sendall(fetch_v4(3, f"splice-hold-{8 * MIB}"))
        assert relay.holding.wait(10)
        t = threading.Thread(target=_modify, args=(f, 1))
        t.start()
        time.sleep(0.5)
        assert pid_alive(new), "the worker left with a response half written"
        relay.release.set()
        body = read_frame(c.s)
        assert body == struct.pack(">i", 3) + pattern(3, 8 * MIB)
        t.join(60)
        wait_for(lambda: not pid_alive(new), 15, what="second generation exited")
        assert metric(f, "ferry_connections_handed_over_total", "S") == 2
        # 3. the same connection, served by the third generation
        exchange_on(c, relay, [PIPE + 5], 4)
    finally:
        c.close()


def exchange_on(c, relay, sizes, corr):
    for n in sizes:
        p = produce_v3(corr, "splice-16", n)
        c.send_async([p, fetch_v4(corr + 1, f"splice-{n}")])
        assert read_frame(c.s) == struct.pack(">i", corr) + pattern(corr, 16)
        assert read_frame(c.s) == struct.pack(">i", corr + 1) + pattern(corr + 1, n)
        c.join()
        assert relay.seen[corr] == (len(p), hashlib.sha256(p).digest())
        corr += 2


def test_tls_clients_fall_back_to_the_copy(mock_factory, reload_ferry_factory, workdir,
                                           request):
    mock = mock_factory("M", 1, ["sp:1"])
    relay = SpliceRelay(mock.addresses[0])
    request.addfinalizer(relay.close)
    pki = PKI(os.path.join(workdir, "pki"))
    pki.server = pki.issue("server", "ferry.test", "DNS:localhost,IP:127.0.0.1")
    f = reload_ferry_factory({"T": relay}, cluster_extra={"T": {
        "tls_cert": pki.server[0], "tls_key": pki.server[1], "max_frame_bytes": "16MiB"}})
    exchange(f, relay, "T", [0, 1, PIPE + 1, 4 * MIB], 100, ctx=tls_client_ctx(pki),
             pipelined=False)
    assert metric(f, "ferry_bytes_spliced_total", "T") == 0
    assert metric(f, "ferry_splice_pipes", "T") == 0


def test_fetch_v16_streamed_and_its_leader_hints(senv):
    """Fetch v16 responses (what modern consumers use) above the buffer are
    streamed: their records spliced, only their top-level tagged fields
    held. Without NodeEndpoints they arrive byte for byte; with it, the
    hints name ferry's address, in a frame of the same length (padded), or
    are dropped when they cannot fit it (counted). A small one is still
    collected and rewritten whole."""
    f, relay = senv
    node = f.clusters["S"]["node_ids"][0]
    ports = dict((nid, port) for nid, (_, port) in f.broker_addresses("S").items())
    mhost, mport = relay.target
    c = Conn(f.clusters["S"]["bootstrap"])
    try:
        c.s.sendall(apiversions_v0(1))
        read_frame(c.s)
        big = 4 * MIB + 3
        cases = [
            # corr, records, tags, what the client must get
            (10, big, b"\x00", "same"),
            (11, PIPE + 1, b"\x02\x05\x03abc" + b"\x07\x01z", "same"),
            (12, big, node_endpoints([(node, mhost, mport),
                                      (99, "broker-99.upstream.invalid", 9092)]), "padded"),
            (13, 100, node_endpoints([(node, mhost, mport)]), "small"),
            (14, big, node_endpoints([(node, "127.1", mport)]), "dropped"),
        ]
        for corr, n, tail, want in cases:
            relay.tails[corr] = tail
            spliced0 = metric(f, "ferry_bytes_spliced_total", "S")
            sent = fetch_v16_response(corr, n, tail)
            c.s.sendall(fetch_v16(corr, f"splice-f16-{n}"))
            body = read_frame(c.s, 60)
            head = sent[4:len(sent) - len(tail)]
            if want == "same":
                assert body == sent[4:], f"Fetch v16 {corr}: altered"
            elif want == "small":
                assert body[:len(head)] == head
                fields = tag_fields(body[len(head):])
                assert [t for t, _ in fields] == [0], fields
                assert endpoints(fields[0][1]) == [(node, "127.0.0.1", ports[node])]
            else:
                assert len(body) == len(sent) - 4, f"Fetch v16 {corr}: length changed"
                assert body[:len(head)] == head, f"Fetch v16 {corr}: parts before the tags"
                fields = tag_fields(body[len(head):])
                tags = [t for t, _ in fields]
                assert tags == sorted(tags) and tags[-1] == 127, fields
                if want == "padded":
                    assert tags == [0, 127], fields
                    assert endpoints(fields[0][1]) == [(node, "127.0.0.1", ports[node])]
                else:
                    assert tags == [127], f"a hint that cannot fit is dropped: {fields}"
            if n >= THRESHOLD:
                assert metric(f, "ferry_bytes_spliced_total", "S") - spliced0 >= n - 64 * 1024
        assert metric(f, "ferry_leader_hints_dropped_total", "S") == 1
        assert metric(f, "ferry_malformed_responses_total", "S") == 0
    finally:
        c.close()
