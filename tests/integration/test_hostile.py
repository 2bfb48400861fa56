"""
Failure domains and hostile input (worker side): every hostile input closes
only the offending connection (within 2 s), is counted by reason in
/metrics, and leaves the worker (same pid) serving other connections, which
is checked with a connection opened before the hostile one and with kcat on
a new one.

One ferryd serves five clusters in front of one librdkafka mock cluster:

  H  upstream = Relay (below) -> mock broker 1; request_timeout 1s,
     max_inflight_per_connection 4, max_frame_bytes 1MiB
  I  upstream = Relay; idle_timeout 1s, max_frame_bytes 16MiB
  L  upstream = mock; max_connections 3
  U  upstream = mock broker 2 only (taken down and up again)
  F  upstream = mock; defaults (half-close, split frames)

Relay is a scripted upstream in Python: it forwards frames to a real mock
broker, except for requests whose client_id starts with "hostile-", which it
answers itself, badly (see Relay._serve). test_drain_* and
test_descriptor_exhaustion start their own ferryd.
"""

import json
import os
import re
import resource
import select
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import (REPO, RFC3339_UTC, Ferry, MockCluster, ProcessKeeper, _stat_fields,
                      kafka_metadata, register_log, serving_pids)
from wire import (CLOSE_WITHIN, ScriptedUpstream, client_hello, expect_closed, kframe,
                  metadata_v0, recv_exact)

TOPIC = "hostile"


# --------------------------------------------------------------------------
# wire helpers
# --------------------------------------------------------------------------

def heartbeat_v0(corr, client_id):
    # group_id "g", generation_id 1, member_id "m"
    return kframe(12, 0, corr, client_id, struct.pack(">h", 1) + b"g" + struct.pack(">ih", 1, 1) + b"m")


def recv_frame(s, timeout=5.0):
    deadline = time.monotonic() + timeout
    (size,) = struct.unpack(">i", recv_exact(s, 4, deadline))
    return recv_exact(s, size, deadline)


def connect(port, rcvbuf=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    return s


class Client:
    """A long-lived raw client connection doing Metadata v0 requests."""

    def __init__(self, port):
        self.s = connect(port)
        self.corr = 100

    def metadata(self, timeout=5.0):
        self.corr += 1
        self.s.sendall(metadata_v0(self.corr))
        b = recv_frame(self.s, timeout)
        (cid, nb) = struct.unpack_from(">ii", b, 0)
        assert cid == self.corr, f"correlation id {cid} != {self.corr}"
        return nb

    def close(self):
        self.s.close()


def kcat_list(bootstrap, timeout=20):
    r = subprocess.run(["kcat", "-L", "-b", bootstrap, "-m", "10"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"kcat -L via {bootstrap} failed: {r.stderr[-1500:]}"
    brokers = re.findall(r"broker (\d+) at (\S+)", r.stdout)
    assert len(brokers) == 3, r.stdout
    return r.stdout


def kcat_produce(bootstrap, n=3, timeout=30):
    lines = "".join(f"k{i}\tv{i}\n" for i in range(n))
    r = subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", TOPIC, "-K", "\t"],
                       input=lines, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"kcat produce via {bootstrap} failed: {r.stderr[-1500:]}"


def cpu_seconds(pid):
    f = _stat_fields(pid)
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------
# Relay: a scripted upstream in front of a real mock broker
# --------------------------------------------------------------------------

def big_metadata_v0(approx):
    """A valid Metadata v0 response body: no brokers, topics with long
    names (one partition each) adding up to about `approx` bytes."""
    name_len = 30000
    n = max(1, approx // (name_len + 40))
    parts = [struct.pack(">ii", 0, n)]
    for i in range(n):
        name = (b"t%06d-" % i).ljust(name_len, b"x")
        parts.append(struct.pack(">hh", 0, name_len) + name + struct.pack(">i", 1)
                     + struct.pack(">hiiiiii", 0, 0, 1, 1, 1, 1, 1))
    return b"".join(parts)


class Relay(ScriptedUpstream):
    """Listens on 127.0.0.1; per connection from ferry, forwards request
    frames to `target` and its bytes back, except requests whose client_id
    is one of:

      hostile-corr        answered with correlation id + 1
      hostile-md          answered with a Metadata body that does not parse
      hostile-hold        held; answered (Heartbeat v0 bodies) in one batch
                          once no request came for HOLD_QUIET s; the batch
                          sizes go to self.batches
      hostile-big-N       answered with an N-byte body
      hostile-mdeof-N     answered with a valid Metadata v0 response of
                          about N bytes (no brokers, many topics), then
                          the connection is closed
    """

    HOLD_QUIET = 0.15

    def __init__(self, target):
        self.batches = []
        super().__init__(target)

    @staticmethod
    def _read_frame(s, timeout):
        """A whole frame; None on timeout before its first byte; b"" on EOF."""
        r, _, _ = select.select([s], [], [], timeout)
        if not r:
            return None
        head = b""
        while len(head) < 4:
            chunk = s.recv(4 - len(head))
            if not chunk:
                return b""
            head += chunk
        (size,) = struct.unpack(">i", head)
        body = b""
        while len(body) < size:
            chunk = s.recv(size - len(body))
            if not chunk:
                return b""
            body += chunk
        return head + body

    def _copy(self, up, down, wlock):
        try:
            while True:
                data = up.recv(65536)
                if not data:
                    break
                with wlock:
                    down.sendall(data)
        except OSError:
            pass
        try:
            down.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _serve(self, down):
        up = None
        wlock = threading.Lock()
        held = []

        def answer(frame):
            with wlock:
                down.sendall(frame)
        try:
            while True:
                frame = self._read_frame(down, self.HOLD_QUIET if held else None)
                if frame is None:
                    self.batches.append(len(held))
                    answer(b"".join(struct.pack(">iih", 6, c, 0) for c in held))
                    held.clear()
                    continue
                if not frame:
                    break
                corr = struct.unpack_from(">i", frame, 8)[0]
                (cid_len,) = struct.unpack_from(">h", frame, 12)
                cid = frame[14:14 + cid_len].decode("ascii", "replace") if cid_len > 0 else ""
                if cid == "hostile-corr":
                    answer(struct.pack(">iih", 6, corr + 1, 0))
                elif cid == "hostile-md":
                    # Metadata v0 body: 1000 brokers announced, none present.
                    answer(struct.pack(">iii", 8, corr, 1000))
                elif cid == "hostile-hold":
                    held.append(corr)
                elif cid.startswith("hostile-big-"):
                    n = int(cid.rsplit("-", 1)[1])
                    answer(struct.pack(">ii", 4 + n, corr) + b"\x00" * n)
                elif cid.startswith("hostile-mdeof-"):
                    body = big_metadata_v0(int(cid.rsplit("-", 1)[1]))
                    answer(struct.pack(">ii", 4 + len(body), corr) + body)
                    break
                else:
                    if up is None:
                        up = socket.create_connection(self.target, timeout=5)
                        up.settimeout(None)
                        self._track(up)
                        threading.Thread(target=self._copy, args=(up, down, wlock),
                                         daemon=True).start()
                    up.sendall(frame)
        except OSError:
            pass
        finally:
            for s in (down, up):
                if s is not None:
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    s.close()


class _Upstream:
    def __init__(self, bootstrap):
        self.bootstrap = bootstrap


# --------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------

CLUSTER_KEYS = {
    "H": ["request_timeout = 1s", "max_inflight_per_connection = 4", "max_frame_bytes = 1MiB"],
    "I": ["idle_timeout = 1s", "max_frame_bytes = 16MiB"],
    "L": ["max_connections = 3"],
    "U": [],
    "F": [],
}


def add_cluster_keys(f, keys):
    text = f.config_text
    for name, lines in keys.items():
        hdr = f"[cluster {name}]\n"
        assert hdr in text
        text = text.replace(hdr, hdr + "".join(ln + "\n" for ln in lines))
    f.config_text = text
    f.config_path.write_text(text)


class Env:
    def metrics(self):
        """Ferry.metrics() keyed without the ferry_ prefix."""
        return {(k[len("ferry_"):], c): v for (k, c), v in self.ferry.metrics().items()}

    def counter(self, name, cluster):
        return self.metrics()[(name + "_total", cluster)]

    def wait_counter(self, name, cluster, above, timeout=2.0):
        deadline = time.monotonic() + timeout
        while True:
            v = self.counter(name, cluster)
            if v > above or time.monotonic() > deadline:
                return v
            time.sleep(0.02)

    def port(self, cluster):
        return self.ferry.clusters[cluster]["bootstrap"]

    def worker(self, cluster):
        pids = serving_pids(self.ferry.cluster(cluster))
        assert len(pids) == 1, pids
        return pids[0]

    def upstream(self, cluster):
        code, _, body = self.ferry.http(f"/admin/clusters/{cluster}")
        assert code == 200, (code, body)
        return json.loads(body)["upstream"]


@pytest.fixture(scope="module")
def shared_env():
    keeper = ProcessKeeper()
    workdir = tempfile.mkdtemp(prefix="ferry-hostile-", dir="/tmp")
    os.chmod(workdir, 0o755)
    relay = None
    try:
        mock = MockCluster(keeper, workdir, "M", 3, [f"{TOPIC}:3"])
        relay = Relay(mock.addresses[0])
        ups = {"H": relay, "I": relay, "L": mock, "U": _Upstream(mock.addresses[1]), "F": mock}
        f = Ferry(keeper, workdir, ups)
        add_cluster_keys(f, CLUSTER_KEYS)
        f.start()
        env = Env()
        env.ferry, env.mock, env.relay, env.workdir = f, mock, relay, workdir
        yield env
    finally:
        keeper.cleanup()
        if relay:
            relay.close()
        if not os.environ.get("FERRY_KEEP_TMP"):
            shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def env(shared_env, request):
    register_log(request, "ferryd", shared_env.ferry.log_path)
    register_log(request, "mock M", shared_env.mock.log_path)
    return shared_env


def check_isolated(env, cluster, pid, bystander):
    """The worker survived, the connection opened before the hostile one
    still works, and a real client on new connections works."""
    assert env.worker(cluster) == pid, "worker restarted"
    assert bystander.metadata() == 3
    if cluster != "L":
        kcat_list(env.ferry.bootstrap(cluster))


# --------------------------------------------------------------------------
# 1. hostile requests
# --------------------------------------------------------------------------

CID = b"\x00\x03abc"
# The first API key the codec does not know (the key above its table): a
# request for it is refused however well formed.
UNKNOWN_KEY = int(re.search(r"#define KC_API_KEY_MAX_KNOWN\s+(\d+)",
                            (REPO / "worker" / "kafka" / "codec.h").read_text()).group(1)) + 1

BAD_REQUESTS = {
    # name: (bytes, counter)
    "negative-size": (struct.pack(">i", -16) + b"\x00" * 8, "malformed_requests"),
    "size-below-minimum": (struct.pack(">i", 4) + b"\x00\x03\x00\x00", "malformed_requests"),
    "size-above-max-frame": (struct.pack(">i", 2 * 1024 * 1024) + b"\x00\x03\x00\x00" + b"\x00" * 60,
                             "frame_too_large"),
    # client_id claims 100 bytes, the frame has 2 left
    "string-past-frame-end": (struct.pack(">ihhih", 14, 3, 0, 7, 100) + b"ab", "malformed_requests"),
    # client_id length -2
    "negative-string-length": (struct.pack(">ihhih", 14, 3, 0, 7, -2) + b"ab", "malformed_requests"),
    "negative-api-key": (struct.pack(">ihhi", 12, -3, 0, 7) + CID[:2] + b"\x00\x00", "malformed_requests"),
    # (flexible header: client_id, empty tag section; then a body)
    "unknown-api-key": (kframe(UNKNOWN_KEY, 0, 7, "x", b"\x00" + b"\x00" * 8), "malformed_requests"),
    "unknown-api-key-max": (kframe(32767, 0, 7, "x", b"\x00" + b"\x00" * 8), "malformed_requests"),
    "refused-api-key": (kframe(4, 0, 7, "x", b"\x00" * 16), "malformed_requests"),
    "metadata-version-above-cap": (kframe(3, 40, 7, "x", b"\x00" * 8), "malformed_requests"),
}


@pytest.mark.parametrize("name", sorted(BAD_REQUESTS))
def test_bad_request_closes_only_that_connection(env, name):
    data, counter = BAD_REQUESTS[name]
    pid = env.worker("H")
    by = Client(env.port("H"))
    assert by.metadata() == 3
    before = env.counter(counter, "H")
    s = connect(env.port("H"))
    s.sendall(data)
    got, _ = expect_closed(s)
    s.close()
    assert got == b"", f"ferry answered a {name} request: {got[:40]!r}"
    assert env.wait_counter(counter, "H", before) == before + 1, counter
    check_isolated(env, "H", pid, by)
    by.close()


def test_tls_client_hello_on_plaintext(env):
    pid = env.worker("H")
    by = Client(env.port("H"))
    assert by.metadata() == 3
    before = env.metrics()
    hello = client_hello(server_name="ferry.example")
    # On the bootstrap port and on a broker port.
    for port in (env.port("H"), env.ferry.clusters["H"]["brokers"][1]):
        s = connect(port)
        s.sendall(hello)
        got, _ = expect_closed(s)
        s.close()
        assert got == b""
    # A real TLS client fails its handshake at once instead of hanging.
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    t0 = time.monotonic()
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        with ctx.wrap_socket(connect(env.port("H")), server_hostname="ferry.example") as ts:
            ts.recv(1)
    assert time.monotonic() - t0 < CLOSE_WITHIN

    env.wait_counter("tls_on_plaintext", "H", before[("tls_on_plaintext_total", "H")] + 2)
    after = env.metrics()
    assert after[("tls_on_plaintext_total", "H")] == before[("tls_on_plaintext_total", "H")] + 3
    # Counted as what it is, not as a frame too large.
    assert after[("frame_too_large_total", "H")] == before[("frame_too_large_total", "H")]
    log = env.ferry.log_path.read_text(errors="replace")
    assert "TLS ClientHello on a plaintext listener" in log
    check_isolated(env, "H", pid, by)
    kcat_produce(env.ferry.bootstrap("H"))
    by.close()


# --------------------------------------------------------------------------
# 2. hostile responses (scripted upstream)
# --------------------------------------------------------------------------

@pytest.mark.parametrize("mode,counter", [("hostile-corr", "correlation_mismatch"),
                                          ("hostile-md", "malformed_responses")])
def test_bad_response_closes_client(env, mode, counter):
    pid = env.worker("H")
    by = Client(env.port("H"))
    assert by.metadata() == 3
    before = env.counter(counter, "H")
    s = connect(env.port("H"))
    # Like a client: ApiVersions first (answered by the real broker) ...
    s.sendall(kframe(18, 0, 1, "ferry-it"))
    av = recv_frame(s)
    assert struct.unpack_from(">ih", av, 0) == (1, 0)
    # ... then a request the scripted upstream answers badly.
    s.sendall(metadata_v0(2, mode))
    got, _ = expect_closed(s)
    s.close()
    assert got == b"", f"garbage passed to the client: {got[:40]!r}"
    assert env.wait_counter(counter, "H", before) == before + 1
    check_isolated(env, "H", pid, by)
    by.close()


def test_upstream_eof_delivers_whole_responses(env):
    """The upstream answers with an 8 MB Metadata response (rewritten by
    ferry, more than the kernel buffers to the client hold) and closes at
    once; a client that reads late still gets all of it, then the close."""
    pid = env.worker("I")
    before = env.counter("upstream_closed", "I")
    s = connect(env.port("I"), rcvbuf=16384)
    s.sendall(metadata_v0(5, "hostile-mdeof-8000000"))
    time.sleep(0.5)  # ferry has the response and the EOF; the client is full
    b = recv_frame(s, 10)
    want = big_metadata_v0(8000000)
    assert struct.unpack_from(">i", b)[0] == 5
    assert b[4:] == want, f"{len(b) - 4} body bytes, want {len(want)}"
    rest, _ = expect_closed(s)
    assert rest == b""
    s.close()
    assert env.wait_counter("upstream_closed", "I", before) == before + 1
    assert env.worker("I") == pid
    # (I has idle_timeout 1s: the check uses new connections)
    kcat_list(env.ferry.bootstrap("I"))


def test_idle_timeout_spares_a_response_in_progress(env):
    """idle_timeout (1s) must not cut a response the client reads slowly;
    the connection is closed as idle only once nothing is owed."""
    before = env.counter("connections_idle_closed", "I")
    n = 8 * 1024 * 1024
    s = connect(env.port("I"), rcvbuf=16384)
    s.sendall(heartbeat_v0(9, f"hostile-big-{n}"))
    time.sleep(2.2)  # ferry holds unsent bytes, nothing moves: not idle
    frame = recv_frame(s, 20)
    assert len(frame) == 4 + n and struct.unpack_from(">i", frame)[0] == 9
    assert env.counter("connections_idle_closed", "I") == before
    _, took = expect_closed(s, 3.0)  # now idle: closed after ~1 s
    s.close()
    assert took > 0.5, took
    assert env.wait_counter("connections_idle_closed", "I", before) == before + 1


# --------------------------------------------------------------------------
# 3. request_timeout, max_inflight_per_connection
# --------------------------------------------------------------------------

def test_request_timeout(env):
    pid = env.worker("H")
    by = Client(env.port("H"))
    assert by.metadata() == 3
    before = env.counter("request_timeouts", "H")
    req = metadata_v0(1)
    a = connect(env.port("H"))
    b = connect(env.port("H"))
    t0 = time.monotonic()
    a.sendall(req[:2])        # half a size prefix
    b.sendall(req[:-2])       # header whole, body short
    for s in (a, b):
        got, _ = expect_closed(s, 2.5)
        assert got == b""
        s.close()
    took = time.monotonic() - t0
    assert 0.9 <= took <= 2.5, f"closed after {took:.2f}s, request_timeout is 1s"
    assert env.wait_counter("request_timeouts", "H", before + 1) == before + 2

    # The timeout is per frame: a connection that keeps sending frames,
    # each in two pieces, for 2.5 x request_timeout stays open.
    c = connect(env.port("H"))
    t0 = time.monotonic()
    corr = 0
    while time.monotonic() - t0 < 2.5:
        corr += 1
        f = metadata_v0(corr)
        c.sendall(f[:7])
        time.sleep(0.2)
        c.sendall(f[7:])
        assert struct.unpack_from(">i", recv_frame(c))[0] == corr
    c.close()
    assert env.counter("request_timeouts", "H") == before + 2
    check_isolated(env, "H", pid, by)  # idle since before, not timed out
    by.close()


def test_max_inflight_backpressure(env):
    """40 requests pipelined to a slow upstream with max_inflight 4: the
    upstream never sees more than 4 at a time, every response arrives, in
    order, and the connection stays open."""
    pid = env.worker("H")
    before = env.counter("inflight_paused", "H")
    env.relay.batches.clear()
    s = connect(env.port("H"))
    s.sendall(b"".join(heartbeat_v0(i, "hostile-hold") for i in range(40)))
    for i in range(40):
        b = recv_frame(s, 10)
        assert struct.unpack_from(">ih", b) == (i, 0)
    batches = list(env.relay.batches)
    assert sum(batches) == 40, batches
    assert max(batches) <= 4, f"upstream saw batches {batches} with max_inflight 4"
    assert len(batches) >= 10, batches
    assert env.counter("inflight_paused", "H") >= before + 9
    # Still open and usable.
    s.sendall(metadata_v0(77))
    assert struct.unpack_from(">i", recv_frame(s))[0] == 77
    s.close()
    assert env.worker("H") == pid


# --------------------------------------------------------------------------
# 4. connection limits, descriptor exhaustion
# --------------------------------------------------------------------------

def test_max_connections(env):
    pid = env.worker("L")
    before = env.counter("connections_rejected", "L")
    clients = [Client(env.port("L")) for _ in range(3)]
    for c in clients:
        assert c.metadata() == 3
    extra = connect(env.port("L"))
    try:
        extra.sendall(metadata_v0(1))
    except OSError:
        pass
    got, _ = expect_closed(extra)
    extra.close()
    assert got == b""
    assert env.wait_counter("connections_rejected", "L", before) == before + 1
    for c in clients:
        assert c.metadata() == 3
    clients.pop().close()
    # Room again once the worker has seen that close.
    deadline = time.monotonic() + CLOSE_WITHIN
    while True:
        try:
            assert len(kafka_metadata("127.0.0.1", env.port("L"), timeout=1)["brokers"]) == 3
            break
        except (ConnectionError, OSError, struct.error):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    assert env.worker("L") == pid
    for c in clients:
        c.close()


def test_descriptor_exhaustion(keeper, workdir, request):
    """ferryd started with a low RLIMIT_NOFILE (workers inherit it); clients
    connect until the worker runs out of descriptors. The worker keeps
    serving the open connections, does not spin on its listeners, counts
    the pauses, does not blame the upstream, and accepts the waiting
    connections once descriptors are free again."""
    limit = 64
    spawn = keeper.spawn

    # Both limits: ferryd raises its soft limit to the hard one at start
    # (workers need 2 descriptors per connection), so a low soft limit
    # alone would not stick.
    def spawn_limited(name, argv, **kw):
        if name == "ferryd":
            kw["preexec_fn"] = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
        return spawn(name, argv, **kw)
    keeper.spawn = spawn_limited
    mock = MockCluster(keeper, workdir, "E", 3, [f"{TOPIC}:1"])
    register_log(request, "mock E", mock.log_path)
    # a connection cap above what the descriptors allow: max_connections =
    # auto would derive it from this limit and refuse before the table fills
    f = Ferry(keeper, workdir, {"X": mock}, cluster_keys={"max_connections": "1000"})
    register_log(request, "ferryd", f.log_path)
    f.start()
    keeper.spawn = spawn

    class One(Env):
        pass
    env = One()
    env.ferry = f
    pid = env.worker("X")
    with open(f"/proc/{pid}/limits") as fh:
        assert re.search(rf"Max open files\s+{limit}\s", fh.read()), "rlimit not inherited"
    port = env.port("X")
    clients, pending = [], []
    try:
        # Fill the worker's descriptor table (2 per connection).
        for _ in range(limit):
            c = Client(port)
            try:
                c.metadata(timeout=0.5)
            except (AssertionError, OSError):
                pending.append(c.s)  # closed (no fd for upstream) or not accepted
                break
            clients.append(c)
        else:
            pytest.fail(f"{limit} connections served with RLIMIT_NOFILE {limit}")
        assert len(clients) > 5, len(clients)
        before = env.counter("accept_paused", "X")
        for i in range(3):
            s = connect(port)  # completes in the kernel's backlog
            s.sendall(metadata_v0(500 + i))
            pending.append(s)
        cpu0 = cpu_seconds(pid)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.0:  # open connections keep working
            for c in clients[:3]:
                assert c.metadata() == 3
            time.sleep(0.05)
        cpu = cpu_seconds(pid) - cpu0
        assert cpu < 0.5, f"worker used {cpu:.2f}s CPU in 1s while out of descriptors (spinning?)"
        paused = env.counter("accept_paused", "X")
        assert paused >= before + 3, f"accept_paused {before} -> {paused}"
        for s in pending[1:]:  # not accepted: no answer yet, not closed
            s.setblocking(False)
            with pytest.raises(BlockingIOError):
                s.recv(1)
            s.setblocking(True)
        assert env.upstream("X")["state"] == "reachable"
        # Free descriptors: the waiting connections are accepted and answered.
        for c in clients[10:]:
            c.close()
        del clients[10:]
        for i, s in enumerate(pending[1:]):
            b = recv_frame(s, CLOSE_WITHIN + 1)
            assert struct.unpack_from(">i", b)[0] == 500 + i
        assert env.worker("X") == pid
        assert clients[0].metadata() == 3
        kcat_list(f.bootstrap("X"))
    finally:
        for c in clients:
            c.close()
        for s in pending:
            s.close()


# --------------------------------------------------------------------------
# 5. upstream failure and recovery
# --------------------------------------------------------------------------

def test_upstream_down_and_back(env):
    f, mock = env.ferry, env.mock
    pid = env.worker("U")
    by = Client(env.port("U"))
    assert by.metadata() == 3
    assert env.upstream("U")["state"] == "reachable"
    m0 = env.metrics()
    mock.command("down 2")  # U's only upstream server
    try:
        # The open connection's upstream is gone: a clean close, no hang.
        by.s.sendall(metadata_v0(1))
        got, _ = expect_closed(by.s)
        assert got == b""
        by.close()
        # New connections: closed at once, not left hanging.
        t0 = time.monotonic()
        with pytest.raises((ConnectionError, OSError, struct.error)):
            kafka_metadata("127.0.0.1", env.port("U"), timeout=CLOSE_WITHIN)
        assert time.monotonic() - t0 < CLOSE_WITHIN
        up = env.upstream("U")
        assert up["state"] == "unreachable", up
        assert up["lastError"] and "refused" in up["lastError"], up
        assert RFC3339_UTC.match(up["since"]), up
        m1 = env.metrics()
        assert m1[("upstream_connect_errors_total", "U")] > m0[("upstream_connect_errors_total", "U")]
        assert m1[("upstream_closed_total", "U")] >= m0[("upstream_closed_total", "U")] + 2
    finally:
        mock.command("up 2")
    # Recovers by itself: the worker re-probes, no client needed.
    deadline = time.monotonic() + 5
    while env.upstream("U")["state"] != "reachable":
        assert time.monotonic() < deadline, f"still {env.upstream('U')} 5 s after the broker came back"
        time.sleep(0.1)
    assert env.upstream("U")["lastError"] is None
    assert len(kafka_metadata("127.0.0.1", env.port("U"), timeout=5)["brokers"]) == 3
    kcat_list(f.bootstrap("U"))
    assert env.worker("U") == pid


# --------------------------------------------------------------------------
# 6. EOF ordering and frames split across reads
# --------------------------------------------------------------------------

def test_half_close_gets_owed_responses(env):
    pid = env.worker("F")
    # Three requests, then shutdown(SHUT_WR): three responses, then EOF.
    s = connect(env.port("F"))
    s.sendall(b"".join(metadata_v0(i) for i in (1, 2, 3)))
    s.shutdown(socket.SHUT_WR)
    for i in (1, 2, 3):
        assert struct.unpack_from(">i", recv_frame(s))[0] == i
    rest, _ = expect_closed(s)
    assert rest == b""
    s.close()
    # EOF in the middle of a request: closed at once (not request_timeout).
    s = connect(env.port("F"))
    s.sendall(metadata_v0(4)[:-2])
    s.shutdown(socket.SHUT_WR)
    got, _ = expect_closed(s)
    assert got == b""
    s.close()
    assert env.worker("F") == pid


def test_split_apiversions_ahead_of_proxy(env):
    """ApiVersions at a version above ferry's (answered by ferry itself)
    arriving in two pieces, then another request: both answered."""
    pid = env.worker("F")
    s = connect(env.port("F"))
    cid = b"ferry-it"
    hdr = struct.pack(">hhih", 18, 7, 1, len(cid)) + cid + b"\x00"   # header v2
    body = b"\x04abc" + b"\x021" + b"\x00"                            # compact strings, tags
    frame = struct.pack(">i", len(hdr) + len(body)) + hdr + body
    s.sendall(frame[:len(hdr) + 4 + 2])
    time.sleep(0.2)
    s.sendall(frame[len(hdr) + 4 + 2:] + metadata_v0(2))
    av = recv_frame(s)
    assert struct.unpack_from(">ih", av) == (1, 35), av[:8]  # UNSUPPORTED_VERSION
    assert struct.unpack_from(">i", recv_frame(s, CLOSE_WITHIN))[0] == 2
    s.close()
    assert env.worker("F") == pid


# --------------------------------------------------------------------------
# drain (own ferryd: it is stopped)
# --------------------------------------------------------------------------

def test_drain_finishes_a_request_in_progress(keeper, workdir, request):
    mock = MockCluster(keeper, workdir, "D", 3, [f"{TOPIC}:1"])
    register_log(request, "mock D", mock.log_path)
    f = Ferry(keeper, workdir, {"D": mock}, drain_timeout="10s")
    register_log(request, "ferryd", f.log_path)
    f.start()
    port = f.clusters["D"]["bootstrap"]
    req = metadata_v0(3)
    mid = connect(port)
    mid.sendall(req[:-2])          # header parsed, body not complete
    boundary = connect(port)
    boundary.sendall(req[:3])      # not even a size prefix yet
    idle = Client(port)
    assert idle.metadata() == 3  # (the worker has read both by now)
    time.sleep(0.1)
    t0 = time.monotonic()
    f.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    mid.sendall(req[-2:])
    b = recv_frame(mid, CLOSE_WITHIN)
    assert struct.unpack_from(">i", b)[0] == 3
    got, _ = expect_closed(mid)
    assert got == b""
    got, _ = expect_closed(boundary)
    assert got == b""
    rc = f.proc.wait(10)
    assert rc == 0
    assert time.monotonic() - t0 < 5, "drain waited for its deadline"
    for c in (mid, boundary, idle.s):
        c.close()
