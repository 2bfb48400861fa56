"""
Kafka wire helpers shared by the tests that speak raw bytes to ferry
(test_hostile.py, test_tls_hostile.py, proxyproto.py): request frames, a
real TLS ClientHello, exact reads with a deadline, and waiting for ferry to
close a connection.
"""

import socket
import ssl
import struct
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
