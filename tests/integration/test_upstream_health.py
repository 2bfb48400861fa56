"""
Upstream health means Kafka health (docs/design.md §3: the `upstream`
condition).

A cluster's upstream is pointed at something that accepts TCP connections
but is not a Kafka broker: a TLS server (`openssl s_server` with a
throwaway certificate), an HTTP server (`python3 -m http.server`, which
waits for a request line that never comes), an HTTP server that answers
anything with `400 Bad Request` at once (as nginx does for a request line
that does not start with a method), and a port that sends random bytes.
Status must say `unreachable` with a protocol error in `lastError`, the
worker must keep probing it, and the condition must flip to `reachable` by
itself (no client traffic) when a real Kafka peer (the librdkafka mock)
takes the fake's place.

The swap happens in a small TCP forwarder run by the test: the cluster's
`upstream` is the forwarder's port, and the forwarder sends each new
connection to the current target (the fake, then the mock's bootstrap
broker). Metadata from the mock names the mock's own broker ports, so only
the bootstrap connection goes through the forwarder.

    FERRY_BUILD=/path/to/build /usr/bin/python3 -m pytest -q tests/integration/test_upstream_health.py
"""

import json
import random
import re
import shutil
import socket
import struct
import subprocess
import threading
import time

import pytest

from conftest import allocate_ports, apiversions_v0, kafka_metadata, tail_file, wait_for

TOPIC = "health"


# --------------------------------------------------------------------------
# the forwarder and the in-process fakes
# --------------------------------------------------------------------------

class Forwarder:
    """Accepts on a loopback port and pipes each connection to `target`
    (host, port), read when the connection arrives. Counts connections per
    target (the worker's probes show up there)."""

    def __init__(self, target):
        self.target = target
        self.port = allocate_ports(1)[0]
        self.counts = {}
        self.lock = threading.Lock()
        self.socks = []
        self.closed = False
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", self.port))
        self.ls.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def count(self, target=None):
        with self.lock:
            return self.counts.get(target or self.target, 0)

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            target = self.target
            with self.lock:
                self.counts[target] = self.counts.get(target, 0) + 1
            try:
                u = socket.create_connection(target, timeout=2)
                u.settimeout(None)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.socks += [c, u]
            threading.Thread(target=self._pipe, args=(c, u), daemon=True).start()
            threading.Thread(target=self._pipe, args=(u, c), daemon=True).start()

    @staticmethod
    def _pipe(a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        for s, how in ((b, socket.SHUT_WR), (a, socket.SHUT_RD)):
            try:
                s.shutdown(how)
            except OSError:
                pass

    def close(self):
        self.closed = True
        self.ls.close()
        with self.lock:
            for s in self.socks:
                try:
                    s.close()
                except OSError:
                    pass


class ThreadServer:
    """A loopback server run by a thread: handle(conn) per connection."""

    def __init__(self, handle):
        self.port = allocate_ports(1)[0]
        self.handle = handle
        self.closed = False
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", self.port))
        self.ls.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        try:
            c.settimeout(30)
            self.handle(c)
        except OSError:
            pass
        finally:
            c.close()

    def close(self):
        self.closed = True
        self.ls.close()


def http_400(c):
    """What nginx answers to a request line that does not start with a
    method: 400 at the first byte, then close."""
    c.recv(4096)
    body = b"<html><body>400 Bad Request</body></html>\r\n"
    c.sendall(b"HTTP/1.1 400 Bad Request\r\nServer: nginx\r\nContent-Type: text/html\r\n"
              b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)


# Fixed seed: a first four bytes that happened to make a plausible size
# would have the worker wait for the rest of a "frame" (EXPECTED below
# names the negative size these make).
NOISE = random.Random(20261123).randbytes(4096)
assert struct.unpack(">i", NOISE[:4])[0] < 0


def random_bytes(c):
    """Answers the first bytes it gets with 4 KiB of noise, then waits for
    the close."""
    c.recv(4096)
    c.sendall(NOISE)
    while c.recv(4096):
        pass


def wait_port(port, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listening on {port} after {timeout}s")


def start_fake(kind, keeper, workdir):
    """Returns (port, closer) of a fake upstream of this kind."""
    if kind == "tls":
        if not shutil.which("openssl"):
            pytest.skip("openssl not installed")
        key, crt = f"{workdir}/fake.key", f"{workdir}/fake.crt"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                        "-subj", "/CN=localhost", "-days", "1", "-keyout", key, "-out", crt],
                       check=True, capture_output=True, timeout=60)
        port = allocate_ports(1)[0]
        p = keeper.spawn("s_server", ["openssl", "s_server", "-accept", f"127.0.0.1:{port}",
                                      "-cert", crt, "-key", key, "-quiet"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(port)
        return port, lambda: keeper.terminate(p)
    if kind == "http":
        port = allocate_ports(1)[0]
        p = keeper.spawn("http.server", ["/usr/bin/python3", "-m", "http.server", "--bind",
                                         "127.0.0.1", str(port)],
                         cwd=str(workdir), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(port)
        return port, lambda: keeper.terminate(p)
    srv = ThreadServer(http_400 if kind == "http-400" else random_bytes)
    return srv.port, srv.close


# What lastError says for each fake (the worker's own probe).
EXPECTED = {
    "tls": r"not a Kafka broker at 127\.0\.0\.1:\d+: closed the connection without answering "
           r"ApiVersions",
    "http": r"127\.0\.0\.1:\d+ accepted the connection but did not answer ApiVersions within "
            r"10s",
    "http-400": r"not a Kafka broker at 127\.0\.0\.1:\d+: first response bytes look like HTTP "
                r"\(\"HTTP/1\.1 400 Bad Request\"\)",
    "random": r"not a Kafka broker at 127\.0\.0\.1:\d+: malformed response: size prefix -\d+",
}
# What a client's own connection through ferry reports (conn path).
EXPECTED_CLIENT = {
    "tls": r"not a Kafka broker at 127\.0\.0\.1:\d+: closed the connection without answering "
           r"ApiVersions",
    "http-400": r"not a Kafka broker at 127\.0\.0\.1:\d+: first response bytes look like HTTP",
    "random": r"not a Kafka broker at 127\.0\.0\.1:\d+: malformed response: size prefix -\d+",
}


def upstream_of(f, name):
    code, _, body = f.http(f"/admin/clusters/{name}")
    assert code == 200, (code, body)
    return json.loads(body)["upstream"]


def client_apiversions_closed(f, name, timeout=5.0):
    """An ApiVersions v0 through ferry: the connection is closed without an
    answer (the upstream is not Kafka)."""
    s = socket.create_connection(("127.0.0.1", f.clusters[name]["bootstrap"]), timeout=timeout)
    try:
        s.sendall(apiversions_v0(31))
        s.settimeout(timeout)
        data = b""
        while True:
            try:
                d = s.recv(65536)
            except ConnectionResetError:
                break
            if not d:
                break
            data += d
        assert data == b"", data
    finally:
        s.close()


@pytest.mark.parametrize("kind", ["tls", "http", "http-400", "random"])
def test_upstream_that_is_not_kafka(kind, keeper, workdir, mock_factory, ferry_factory):
    mock = mock_factory("M", 3, [f"{TOPIC}:1"])
    fake_port, close_fake = start_fake(kind, keeper, workdir)
    fwd = Forwarder(("127.0.0.1", fake_port))

    class Up:
        bootstrap = fwd.address
    try:
        f = ferry_factory({"H": Up})
        t_ready = time.monotonic()

        # 1. Not Kafka: unreachable with a protocol error.
        up = wait_for(lambda: (lambda u: u if u["state"] == "unreachable" else None)(
            upstream_of(f, "H")), 15, interval=0.05, what="upstream unreachable")
        t_unreach = time.monotonic() - t_ready
        assert re.search(EXPECTED[kind], up["lastError"] or ""), up
        # (the forwarder's address, never "reachable" on the bare connect)

        # 2. The worker keeps probing it, and it stays unreachable.
        probes = 2 if kind == "http" else 3
        wait_for(lambda: fwd.count() >= probes, 25, what=f"{probes} probes of the fake")
        up = upstream_of(f, "H")
        assert up["state"] == "unreachable", up
        assert re.search(EXPECTED[kind], up["lastError"] or ""), up

        # 3. A client's connection through ferry says the same (no hang).
        if kind in EXPECTED_CLIENT:
            client_apiversions_closed(f, "H")
            up = upstream_of(f, "H")
            assert up["state"] == "unreachable", up
            assert re.search(EXPECTED_CLIENT[kind], up["lastError"] or ""), up

        # 4. The real broker takes the fake's place: reachable by itself.
        fwd.target = ("127.0.0.1", mock.ports[0])
        t_swap = time.monotonic()
        up = wait_for(lambda: (lambda u: u if u["state"] == "reachable" else None)(
            upstream_of(f, "H")), 40, interval=0.05, what="upstream reachable after the swap")
        t_reach = time.monotonic() - t_swap
        assert up["lastError"] is None, up
        assert fwd.count() >= 1, "no probe reached the mock"
        md = kafka_metadata("127.0.0.1", f.clusters["H"]["bootstrap"], timeout=5)
        assert len(md["brokers"]) == 3, md

        # 5. And back to the fake: the next client connection finds out.
        t_back = None
        if kind in EXPECTED_CLIENT:
            fwd.target = ("127.0.0.1", fake_port)
            t0 = time.monotonic()
            client_apiversions_closed(f, "H")
            up = wait_for(lambda: (lambda u: u if u["state"] == "unreachable" else None)(
                upstream_of(f, "H")), 5, interval=0.02, what="unreachable again")
            t_back = time.monotonic() - t0
            assert re.search(EXPECTED_CLIENT[kind], up["lastError"] or ""), up
        print(f"\n[{kind}] unreachable {t_unreach:.2f}s after ready; reachable "
              f"{t_reach:.2f}s after the mock took the fake's place; "
              f"unreachable again {'n/a' if t_back is None else f'{t_back:.2f}s'} after "
              f"the swap back (client traffic); lastError={up['lastError']!r}")
        log = tail_file(f.log_path, 400)
        for bad in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
            assert bad not in log, log
    finally:
        fwd.close()
        close_fake()
