"""
PROXY protocol helpers for the integration tests: headers built byte by
byte from haproxy's doc/proxy-protocol.txt (v1 lines, v2 binary headers with
TLVs and a CRC32C), and haproxy itself as a sender (`send-proxy`,
`send-proxy-v2`, its proxy-v2-options, `check-send-proxy` health checks that
send LOCAL) in front of a listener that records the bytes it receives.

Standard library only. Processes are started through a caller's `spawn`
(ProcessKeeper.spawn in the tests) so that they are killed by PID.

Run as a script to regenerate tests/unit/proxyproto_haproxy.h, the haproxy
captures the unit tests embed as fixtures:

    /usr/bin/python3 tests/integration/proxyproto.py fixtures tests/unit/proxyproto_haproxy.h
"""

import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

from wire import client_hello

V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"

PP2_TYPE_ALPN = 0x01
PP2_TYPE_AUTHORITY = 0x02
PP2_TYPE_CRC32C = 0x03
PP2_TYPE_NOOP = 0x04
PP2_TYPE_UNIQUE_ID = 0x05
PP2_TYPE_SSL = 0x20


# ---- building headers ------------------------------------------------------

def v1(src=None, dst=None, sport=0, dport=0, proto=None):
    """A v1 line. proto defaults to TCP4 / TCP6 from the address; "UNKNOWN"
    without addresses gives the short form."""
    if proto == "UNKNOWN" and src is None:
        return b"PROXY UNKNOWN\r\n"
    if proto is None:
        proto = "TCP6" if ":" in src else "TCP4"
    return f"PROXY {proto} {src} {dst} {sport} {dport}\r\n".encode()


def crc32c(data):
    """CRC32C (Castagnoli), RFC 4960 appendix B."""
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def tlv(t, value):
    return struct.pack(">BH", t, len(value)) + value


def v2(src=None, dst=None, sport=0, dport=0, command=1, fam=None, tlvs=(), crc=False,
       raw_block=None, length=None, version=2):
    """A v2 header. The family byte comes from the addresses (0x11 TCP4,
    0x21 TCP6, 0x31 for AF_UNIX paths given as bytes) unless fam is given;
    raw_block replaces the address block; length overrides the length field
    (hostile headers); crc appends a CRC32C TLV with the right value."""
    if raw_block is not None:
        block = raw_block
        fam = 0x00 if fam is None else fam
    elif src is None:
        block = b""
        fam = 0x00 if fam is None else fam
    elif isinstance(src, bytes):
        block = src.ljust(108, b"\0") + dst.ljust(108, b"\0")
        fam = 0x31 if fam is None else fam
    elif ":" in src:
        block = (socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst)
                 + struct.pack(">HH", sport, dport))
        fam = 0x21 if fam is None else fam
    else:
        block = (socket.inet_pton(socket.AF_INET, src) + socket.inet_pton(socket.AF_INET, dst)
                 + struct.pack(">HH", sport, dport))
        fam = 0x11 if fam is None else fam
    body = block + b"".join(tlv(t, v) for t, v in tlvs)
    if crc:
        body += tlv(PP2_TYPE_CRC32C, b"\0\0\0\0")
    n = len(body) if length is None else length
    hdr = V2_SIG + bytes([(version << 4) | command, fam]) + struct.pack(">H", n) + body
    if crc:
        hdr = hdr[:-4] + struct.pack(">I", crc32c(hdr))
    return hdr


def header_len(data):
    """The length of the header at the start of data, by its own framing
    (v1: up to its CRLF; v2: 16 + length); no validation."""
    if data.startswith(V2_SIG):
        return 16 + struct.unpack(">H", data[14:16])[0]
    if data.startswith(b"PROXY "):
        return data.index(b"\r\n") + 2
    raise ValueError("no PROXY header")


# ---- haproxy as a sender -----------------------------------------------------

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"


def free_port(host="127.0.0.1"):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.bind((host, 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Recorder:
    """A listener that records, per accepted connection, the first bytes
    received (until `want` bytes, the peer's close or a quiet period)."""

    def __init__(self, host="127.0.0.1"):
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(fam, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.host = host
        self.port = self.sock.getsockname()[1]

    def take(self, timeout=5.0, want=4096, quiet=0.3):
        """Accepts one connection; returns the bytes it sent."""
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            raise AssertionError(f"nothing connected to the recorder within {timeout}s")
        c, _ = self.sock.accept()
        data = b""
        end = time.monotonic() + timeout
        with c:
            while len(data) < want and time.monotonic() < end:
                r, _, _ = select.select([c], [], [], quiet)
                if not r:
                    break
                try:
                    chunk = c.recv(65536)
                except ConnectionResetError:   # a health check ends so
                    break
                if not chunk:
                    break
                data += chunk
        return data

    def close(self):
        self.sock.close()


class HAProxy:
    """haproxy in TCP mode with one frontend per route, each relaying to a
    server line with the options given (e.g. "send-proxy-v2").

    routes: list of (name, bind_host, server_options, recorder).
    """

    def __init__(self, workdir, routes, extra_global="", extra_backend=""):
        self.workdir = str(workdir)
        self.routes = []
        lines = ["global", "    maxconn 100", extra_global,
                 "defaults", "    mode tcp", "    timeout connect 2s",
                 "    timeout client 10s", "    timeout server 10s",
                 "    unique-id-format conn-%{+X}o%ci:%cp"]
        for name, host, opts, rec in routes:
            port = free_port(host)
            self.routes.append((name, host, port, rec))
            bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            target = f"[{rec.host}]:{rec.port}" if ":" in rec.host else f"{rec.host}:{rec.port}"
            lines += [f"frontend f_{name}", f"    bind {bind}", f"    default_backend b_{name}",
                      f"backend b_{name}", extra_backend,
                      f"    server s_{name} {target} {opts}"]
        self.cfg = os.path.join(self.workdir, "haproxy.cfg")
        with open(self.cfg, "w") as f:
            f.write("\n".join(x for x in lines if x) + "\n")
        self.log = os.path.join(self.workdir, "haproxy.log")
        self.proc = None

    def start(self, spawn):
        """spawn(name, argv, **popen_kw) -> Popen (ProcessKeeper.spawn)."""
        subprocess.run([HAPROXY, "-c", "-q", "-f", self.cfg], check=True, timeout=20)
        logf = open(self.log, "wb")
        self.proc = spawn("haproxy", [HAPROXY, "-db", "-f", self.cfg], stdout=logf,
                          stderr=subprocess.STDOUT)
        logf.close()
        deadline = time.monotonic() + 10
        for name, host, port, _ in self.routes:
            while True:
                if self.proc.poll() is not None:
                    raise AssertionError(f"haproxy exited: {open(self.log).read()[-2000:]}")
                try:
                    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
                    with socket.socket(fam, socket.SOCK_STREAM) as s:
                        s.settimeout(0.5)
                        s.connect((host, port))
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise AssertionError(f"haproxy not listening on {host}:{port}")
                    time.sleep(0.05)
        # The readiness probes above went through to the recorders: drop them.
        for _, _, _, rec in self.routes:
            drain(rec, quiet=0.1, limit=0.5)
        return self

    def route(self, name):
        for n, host, port, rec in self.routes:
            if n == name:
                return host, port, rec
        raise KeyError(name)


def drain(rec, quiet=0.3, limit=2.0):
    """Accepts and drops the connections pending on a recorder, until none
    comes for `quiet` seconds or `limit` seconds have passed (health checks
    keep coming)."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        r, _, _ = select.select([rec.sock], [], [], quiet)
        if not r:
            return
        c, _ = rec.sock.accept()
        c.close()


def send_through(hap, name, payload=b"", tls_sni=None, timeout=5.0):
    """Connects a client to route `name`, sends payload (or a TLS ClientHello
    for tls_sni), and returns (client address, frontend address, recorded
    bytes)."""
    host, port, rec = hap.route(name)
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    c = socket.socket(fam, socket.SOCK_STREAM)
    c.settimeout(timeout)
    c.connect((host, port))
    client = c.getsockname()[:2]
    front = c.getpeername()[:2]
    try:
        if tls_sni is not None:
            c.sendall(client_hello(server_name=tls_sni))
        elif payload:
            c.sendall(payload)
        data = rec.take(timeout=timeout)
    finally:
        c.close()
    return client, front, data


# ---- fixtures for the unit tests ------------------------------------------------

def _c_bytes(b):
    out = []
    for i in range(0, len(b), 12):
        out.append("\t\t" + " ".join(f"0x{x:02x}," for x in b[i:i + 12]))
    return "\n".join(out)


def capture_fixtures(workdir, spawn):
    """Runs haproxy with every sending mode and returns the captures:
    dicts with name, bytes (the header only), version, command, family,
    src, sport, dst, dport, tlv_count, has_crc."""
    recs = {}
    routes = []
    modes = [
        ("v1_tcp4", "127.0.0.1", "send-proxy"),
        ("v1_tcp6", "::1", "send-proxy"),
        ("v2_tcp4", "127.0.0.1", "send-proxy-v2"),
        ("v2_tcp6", "::1", "send-proxy-v2"),
        ("v2_tcp4_tlvs", "127.0.0.1",
         "send-proxy-v2 proxy-v2-options crc32c,unique-id,ssl"),
        ("v1_tls", "127.0.0.1", "send-proxy"),
        ("v2_tls", "127.0.0.1", "send-proxy-v2"),
        ("v2_local_check", "127.0.0.1",
         "send-proxy-v2 check check-send-proxy inter 200ms"),
    ]
    for name, host, opts in modes:
        rec = Recorder("127.0.0.1" if name != "v1_tcp6" else "::1")
        recs[name] = rec
        routes.append((name, host, opts, rec))
    hap = HAProxy(workdir, routes)
    out = []
    try:
        hap.start(spawn)
        for name, host, opts in modes:
            if name == "v2_local_check":
                # A health check's connection: LOCAL, then nothing. (The
                # readiness probe's connection, PROXY, may come first.)
                for _ in range(20):
                    data = hap.route(name)[2].take(timeout=5.0)
                    if len(data) >= 16 and data[12] == 0x20:
                        break
                else:
                    raise AssertionError("no LOCAL health check from haproxy")
                hdr_len = header_len(data)
                out.append(dict(name="haproxy send-proxy-v2 health check (LOCAL)",
                                bytes=data[:hdr_len], hdr_len=hdr_len, version=2,
                                command="PP_CMD_LOCAL",
                                family="PP_FAM_UNSPEC", src=None, sport=0, dst=None, dport=0,
                                tlv_count=0, has_crc=False))
                continue
            drain(hap.route(name)[2], quiet=0.05)
            if name.endswith("_tls"):
                # TLS passes through: the header, then the ClientHello.
                client, front, data = send_through(hap, name, tls_sni="bootstrap.kafka.example.com")
                at = header_len(data)
                hdr, after = data[:at], data[at:]
                assert after[:2] == b"\x16\x03", (name, data)
            else:
                client, front, data = send_through(hap, name, payload=b"\x00\x00\x00\x2a")
                assert data.endswith(b"\x00\x00\x00\x2a"), (name, data)
                hdr, after = data[:-4], b""
            tcp6 = ":" in host
            tlvs = 0
            if hdr.startswith(V2_SIG):
                off = 16 + (36 if tcp6 else 12)
                while off < len(hdr):
                    off += 3 + struct.unpack(">H", hdr[off + 1:off + 3])[0]
                    tlvs += 1
            what = " then a TLS ClientHello" if after else ""
            out.append(dict(name=f"haproxy {opts} from {client[0]}{what}", bytes=hdr + after,
                            hdr_len=len(hdr),
                            version=2 if hdr.startswith(V2_SIG) else 1, command="PP_CMD_PROXY",
                            family="PP_FAM_TCP6" if tcp6 else "PP_FAM_TCP4",
                            src=client[0], sport=client[1], dst=front[0], dport=front[1],
                            tlv_count=tlvs, has_crc="crc32c" in opts))
    finally:
        for rec in recs.values():
            rec.close()
    return out


def write_fixture_header(path, captures):
    def cstr(s):
        return "NULL" if s is None else '"' + s + '"'
    lines = [
        "/*",
        " * proxyproto_haproxy.h - PROXY protocol headers captured from haproxy "
        "(Debian's",
        " * package) by tests/integration/proxyproto.py: a client connected to a",
        " * haproxy frontend in TCP mode whose server line sends the header; a",
        " * listener recorded the bytes. Regenerate with",
        " *   /usr/bin/python3 tests/integration/proxyproto.py fixtures "
        "tests/unit/proxyproto_haproxy.h",
        " * The addresses and ports are those of that run.",
        " */",
        "#ifndef FERRY_TESTS_UNIT_PROXYPROTO_HAPROXY_H",
        "#define FERRY_TESTS_UNIT_PROXYPROTO_HAPROXY_H",
        "",
        "struct hap_capture {",
        "\tconst char *name;",
        "\tconst uint8_t *bytes;       /* the header, and what followed it */",
        "\tsize_t len;",
        "\tsize_t hdr_len;             /* the header's length */",
        "\tint version;",
        "\tenum pp_command command;",
        "\tenum pp_family family;",
        "\tconst char *src, *dst;",
        "\tunsigned sport, dport;",
        "\tunsigned tlv_count;",
        "\tbool has_crc;",
        "};",
        "",
    ]
    for i, c in enumerate(captures):
        lines += [f"static const uint8_t hap_bytes_{i}[] = {{", _c_bytes(c["bytes"]), "};"]
    lines += ["", "static const struct hap_capture hap_captures[] = {"]
    for i, c in enumerate(captures):
        lines += [
            f"\t{{ {cstr(c['name'])},",
            f"\t  hap_bytes_{i}, sizeof hap_bytes_{i}, {c['hdr_len']}, {c['version']},",
            f"\t  {c['command']}, {c['family']}, {cstr(c['src'])}, {cstr(c['dst'])},",
            f"\t  {c['sport']}, {c['dport']}, {c['tlv_count']}, "
            f"{'true' if c['has_crc'] else 'false'} }},",
        ]
    lines += ["};", "", "#endif", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def _main(argv):
    if len(argv) != 3 or argv[1] != "fixtures":
        print(__doc__, file=sys.stderr)
        return 2
    procs = []

    def spawn(name, args, **kw):
        kw.setdefault("stdin", subprocess.DEVNULL)
        p = subprocess.Popen([str(a) for a in args], **kw)
        procs.append(p)
        return p

    d = tempfile.mkdtemp(prefix="ferry-pp-")
    try:
        caps = capture_fixtures(d, spawn)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)
        shutil.rmtree(d, ignore_errors=True)
    write_fixture_header(argv[2], caps)
    for c in caps:
        print(f"{c['name']}: {c['hdr_len']} bytes of header, {len(c['bytes'])} in all")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
