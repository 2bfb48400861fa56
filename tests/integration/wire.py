"""
Kafka wire helpers shared by the tests that speak raw bytes to ferry
(test_hostile.py, test_tls_hostile.py, proxyproto.py, test_splice.py):
request frames, a real TLS ClientHello, exact reads with a deadline,
waiting for ferry to close a connection, and a scripted upstream's
listening and bookkeeping.
"""

import socket
import ssl
import struct
import threading
import time

CLOSE_WITHIN = 2.0


def kframe(key, ver, corr, client_id, body=b""):
    """A request frame with a v1 header (non-flexible)."""
    cid = client_id.encode()
    payload = struct.pack(">hhih", key, ver, corr, len(cid)) + cid + body
    return struct.pack(">i", len(payload)) + payload


def metadata_v0(corr, client_id="ferry-it"):
    return kframe(3, 0, corr, client_id, struct.pack(">i", 0))


def recv_exact(s, n, deadline):
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"timed out after {len(buf)} of {n} bytes")
        s.settimeout(left)
        chunk = s.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def expect_closed(s, within=CLOSE_WITHIN):
    """Reads until ferry closes the connection; fails if that takes longer
    than `within` seconds. Returns (bytes received, seconds it took)."""
    t0 = time.monotonic()
    deadline = t0 + within
    data = b""
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"connection still open after {within}s "
                                     f"({len(data)} bytes received)")
            s.settimeout(left)
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except (ConnectionResetError, BrokenPipeError):
        pass
    except socket.timeout:
        raise AssertionError(f"connection still open after {within}s ({len(data)} bytes received)")
    return data, time.monotonic() - t0


def client_hello(max_version=None, server_name="localhost"):
    """The bytes of a real ClientHello (Python's ssl, memory BIOs)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if max_version is not None:
        ctx.maximum_version = max_version
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=server_name)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = out.read()
    assert hello[:2] == b"\x16\x03" and hello[5] == 1, hello[:8]
    return hello


class ScriptedUpstream:
    """An upstream in Python in front of a real broker at `target`
    ("host:port"): listens on 127.0.0.1 (bootstrap: what a Ferry puts into
    `upstream`) and serves every connection from ferry with self._serve(s)
    in a thread of its own. Sockets given to _track() are shut down by
    close(). A subclass sets its own fields before calling __init__ (the
    accepting thread starts there)."""

    def __init__(self, target):
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(128)
        self.address = f"127.0.0.1:{self.lsock.getsockname()[1]}"
        self.bootstrap = self.address
        self.socks = []
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.closed = True
        with self.lock:
            socks, self.socks = self.socks, []
        for s in socks + [self.lsock]:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _track(self, s):
        with self.lock:
            self.socks.append(s)

    def _accept(self):
        while not self.closed:
            try:
                s, _ = self.lsock.accept()
            except OSError:
                return
            self._track(s)
            threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, s):
        raise NotImplementedError
