#!/usr/bin/python3
"""A scripted Kafka broker that requires SASL, for ferry's integration tests.

One broker (one node id) on one port, speaking just enough Kafka:
ApiVersions v0-4, SaslHandshake v0-1, SaslAuthenticate v0-2, Metadata v0-1
(advertising itself: --advertised-host/--advertised-port) and Produce v2-3
(acks=0 gets no answer; otherwise every partition succeeds). Mechanisms:
PLAIN and SCRAM-SHA-256/512 (real RFC 5802 arithmetic, so a real client can
use them), in both framings: SaslAuthenticate frames after a SaslHandshake
v1, or the legacy raw tokens ([int32 length][token], no Kafka header) after a
SaslHandshake v0. Like a Kafka SASL listener it closes the connection on any
other request before authentication (--preauth-metadata lets Metadata
through, --auth-optional everything) and after a failed authentication (a SaslAuthenticate failure is
answered with error 58 first; a raw exchange has no way to say it).
Re-authentication (KIP-368) is accepted on an authenticated connection;
--session-lifetime-ms is returned in SaslAuthenticate v1+ answers.

Prints "BOOTSTRAP=host:port" on stdout once listening, then one line per
event on stderr ("AUTH ok ...", "AUTH fail ...", "REFUSED ...",
"PRODUCE ...") so tests can check what the broker saw. Exits on SIGTERM or
when stdin closes (--stdin-exit).

Importable: tests use scram_client_* and the frame helpers to drive raw and
framed exchanges by hand.
"""
import argparse
import base64
import hashlib
import hmac
import os
import socket
import struct
import sys
import threading

# ---- wire helpers -----------------------------------------------------------


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def string(s):
    if s is None:
        return i16(-1)
    b = s.encode() if isinstance(s, str) else s
    return i16(len(b)) + b


def uvarint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def compact_bytes(b):
    if b is None:
        return uvarint(0)
    return uvarint(len(b) + 1) + b


def compact_string(s):
    if s is None:
        return uvarint(0)
    b = s.encode()
    return uvarint(len(b) + 1) + b


class Reader:
    def __init__(self, b):
        self.b = b
        self.o = 0

    def take(self, n):
        if self.o + n > len(self.b):
            raise ValueError("short frame")
        v = self.b[self.o:self.o + n]
        self.o += n
        return v

    def i8(self):
        return struct.unpack(">b", self.take(1))[0]

    def i16(self):
        return struct.unpack(">h", self.take(2))[0]

    def i32(self):
        return struct.unpack(">i", self.take(4))[0]

    def i64(self):
        return struct.unpack(">q", self.take(8))[0]

    def uvarint(self):
        n = shift = 0
        while True:
            b = self.take(1)[0]
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7

    def string(self):
        n = self.i16()
        return None if n < 0 else self.take(n).decode()

    def bytes_(self):
        n = self.i32()
        return None if n < 0 else self.take(n)

    def compact_bytes(self):
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1)

    def tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError("peer closed")
        buf += chunk
    return buf


def recv_frame(s):
    """One size-prefixed frame (Kafka frame or raw SASL token): its body."""
    (n,) = struct.unpack(">i", recv_exact(s, 4))
    if n < 0 or n > 64 << 20:
        raise ValueError(f"bad frame size {n}")
    return recv_exact(s, n)


def send_frame(s, body):
    s.sendall(i32(len(body)) + body)


# Request header v2 (flexible) for these (api key, first flexible version).
FLEX_FROM = {18: 3, 36: 2, 17: 99, 3: 9, 0: 9}


def request(api_key, version, corr, body, client_id="sasl-test"):
    """A request frame (with its size prefix)."""
    hdr = i16(api_key) + i16(version) + i32(corr) + string(client_id)
    if version >= FLEX_FROM.get(api_key, 0):
        hdr += b"\x00"
    m = hdr + body
    return i32(len(m)) + m


# ---- SCRAM (RFC 5802 / 7677) -----------------------------------------------

SCRAM_HASH = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
SCRAM_ITER = 4096


def _hmac(h, key, msg):
    return hmac.new(key, msg, h).digest()


def scram_keys(mech, password, salt, iterations=SCRAM_ITER):
    h = SCRAM_HASH[mech]
    salted = hashlib.pbkdf2_hmac(h().name, password.encode(), salt, iterations)
    client_key = _hmac(h, salted, b"Client Key")
    stored_key = h(client_key).digest()
    server_key = _hmac(h, salted, b"Server Key")
    return client_key, stored_key, server_key


def scram_client_first(user, nonce=None):
    nonce = nonce or base64.b64encode(os.urandom(18)).decode()
    bare = f"n={user},r={nonce}"
    return "n,," + bare, bare, nonce


def scram_client_final(mech, password, client_first_bare, server_first):
    """(client-final message, expected server signature)."""
    h = SCRAM_HASH[mech]
    attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
    salt = base64.b64decode(attrs["s"])
    client_key, stored_key, server_key = scram_keys(mech, password, salt, int(attrs["i"]))
    without_proof = f"c=biws,r={attrs['r']}"
    auth_msg = f"{client_first_bare},{server_first},{without_proof}".encode()
    sig = _hmac(h, stored_key, auth_msg)
    proof = bytes(a ^ b for a, b in zip(client_key, sig))
    final = f"{without_proof},p={base64.b64encode(proof).decode()}"
    server_sig = _hmac(h, server_key, auth_msg)
    return final, "v=" + base64.b64encode(server_sig).decode()


class ScramServer:
    """Two rounds: client-first -> server-first, client-final -> server-final.
    step() returns (reply bytes or None on failure, done)."""

    def __init__(self, mech, users):
        self.mech = mech
        self.users = users
        self.round = 0
        self.user = None

    def step(self, token):
        msg = token.decode(errors="replace")
        h = SCRAM_HASH[self.mech]
        if self.round == 0:
            self.round = 1
            if not msg.startswith("n,,"):
                return None, True
            self.client_first_bare = msg[3:]
            attrs = dict(kv.split("=", 1) for kv in self.client_first_bare.split(",") if "=" in kv)
            self.user = attrs.get("n")
            if self.user not in self.users or "r" not in attrs:
                return None, True
            salt = hashlib.sha256(self.user.encode()).digest()[:16]
            _, self.stored_key, self.server_key = scram_keys(self.mech, self.users[self.user], salt)
            self.nonce = attrs["r"] + base64.b64encode(os.urandom(12)).decode()
            self.server_first = f"r={self.nonce},s={base64.b64encode(salt).decode()},i={SCRAM_ITER}"
            return self.server_first.encode(), False
        attrs = dict(kv.split("=", 1) for kv in msg.split(","))
        without_proof = msg[:msg.rfind(",p=")]
        # Kafka's ScramSaslServer only checks that the client's nonce ends
        # with the server-first one (librdkafka 2.0 sends its own in front)
        if not attrs.get("r", "").endswith(self.nonce) or "p" not in attrs:
            return None, True
        auth_msg = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        sig = _hmac(h, self.stored_key, auth_msg)
        proof = base64.b64decode(attrs["p"])
        client_key = bytes(a ^ b for a, b in zip(proof, sig))
        if h(client_key).digest() != self.stored_key:
            return None, True
        server_sig = _hmac(h, self.server_key, auth_msg)
        return ("v=" + base64.b64encode(server_sig).decode()).encode(), True


class PlainServer:
    def __init__(self, users):
        self.users = users
        self.user = None

    def step(self, token):
        parts = token.split(b"\x00")
        if len(parts) != 3:
            return None, True
        self.user = parts[1].decode(errors="replace")
        if self.users.get(self.user) != parts[2].decode(errors="replace"):
            return None, True
        return b"", True


# ---- the broker -------------------------------------------------------------

API_VERSIONS = [(0, 2, 3), (3, 0, 1), (17, 0, 1), (18, 0, 4), (36, 0, 2)]


def log(*words):
    sys.stderr.write(" ".join(str(w) for w in words) + "\n")
    sys.stderr.flush()


class Conn:
    def __init__(self, broker, sock, addr):
        self.b = broker
        self.s = sock
        self.addr = addr
        self.mech = None
        self.auth = None          # PlainServer / ScramServer of the exchange
        self.authenticated = False
        self.user = None
        self.raw = False          # legacy raw tokens follow (handshake v0)

    def run(self):
        try:
            while True:
                body = recv_frame(self.s)
                if self.raw:
                    if not self.raw_token(body):
                        return
                    continue
                if not self.handle(body):
                    return
        except (EOFError, ConnectionError, OSError):
            pass
        except ValueError as e:
            log("BAD", self.addr, e)
        finally:
            self.s.close()

    def reply(self, corr, body, flexible_header=False):
        hdr = i32(corr) + (b"\x00" if flexible_header else b"")
        send_frame(self.s, hdr + body)

    def start_auth(self, mech):
        if mech == "PLAIN":
            return PlainServer(self.b.users)
        return ScramServer(mech, self.b.users)

    def done(self, ok, framing):
        who = self.auth.user
        if ok:
            self.authenticated = True
            self.user = who
            log("AUTH ok", f"user={who}", f"mech={self.mech}", f"framing={framing}")
        else:
            log("AUTH fail", f"user={who}", f"mech={self.mech}", f"framing={framing}")
        self.auth = None

    def raw_token(self, token):
        reply, finished = self.auth.step(token)
        if reply is None:
            self.done(False, "raw")
            return False      # the broker closes: raw framing has no error
        send_frame(self.s, reply)
        if finished:
            self.raw = False
            self.done(True, "raw")
        return True

    def handle(self, body):
        r = Reader(body)
        key, ver, corr = r.i16(), r.i16(), r.i32()
        r.string()  # client id
        if ver >= FLEX_FROM.get(key, 0):
            r.tags()
        if key == 18:
            return self.api_versions(corr, ver)
        if key == 17:
            return self.handshake(r, corr, ver)
        if key == 36:
            return self.authenticate(r, corr, ver)
        if not self.authenticated and not self.b.auth_optional and \
                not (key == 3 and self.b.preauth_metadata):
            log("REFUSED", f"api={key}", "before authentication: closing")
            return False
        if key == 3:
            return self.metadata(r, corr, ver)
        if key == 0:
            return self.produce(r, corr, ver)
        log("REFUSED", f"api={key}", "not implemented: closing")
        return False

    def api_versions(self, corr, ver):
        if ver > 4:
            body = i16(35) + i32(len(API_VERSIONS))
            body += b"".join(i16(k) + i16(lo) + i16(hi) for k, lo, hi in API_VERSIONS)
            self.reply(corr, body)
            return True
        if ver >= 3:
            body = i16(0) + uvarint(len(API_VERSIONS) + 1)
            body += b"".join(i16(k) + i16(lo) + i16(hi) + b"\x00" for k, lo, hi in API_VERSIONS)
            body += i32(0) + b"\x00"
        else:
            body = i16(0) + i32(len(API_VERSIONS))
            body += b"".join(i16(k) + i16(lo) + i16(hi) for k, lo, hi in API_VERSIONS)
            if ver >= 1:
                body += i32(0)
        self.reply(corr, body)
        return True

    def handshake(self, r, corr, ver):
        mech = r.string()
        mechs = self.b.mechanisms
        ok = mech in mechs
        body = i16(0 if ok else 33) + i32(len(mechs)) + b"".join(string(m) for m in mechs)
        self.reply(corr, body)
        log("HANDSHAKE", f"v{ver}", f"mech={mech}", "ok" if ok else "unsupported",
            "reauth" if self.authenticated else "")
        if ok:
            self.mech = mech
            self.auth = self.start_auth(mech)
            self.raw = ver == 0
        return True

    def authenticate(self, r, corr, ver):
        token = r.compact_bytes() if ver >= 2 else r.bytes_()
        if self.auth is None:
            log("REFUSED", "SaslAuthenticate without a handshake: closing")
            return False
        reply, finished = self.auth.step(token or b"")
        flex = ver >= 2
        lifetime = self.b.session_lifetime_ms if (finished and reply is not None) else 0
        if reply is None:
            msg = "Authentication failed: Invalid username or password"
            body = i16(58) + (compact_string(msg) if flex else string(msg))
            body += compact_bytes(b"") if flex else i32(0)
        else:
            body = i16(0) + (compact_string(None) if flex else string(None))
            body += compact_bytes(reply) if flex else i32(len(reply)) + reply
        if ver >= 1:
            body += i64(lifetime)
        if flex:
            body += b"\x00"
        self.reply(corr, body, flexible_header=flex)
        if reply is None:
            self.done(False, f"SaslAuthenticate v{ver}")
            return False
        if finished:
            self.done(True, f"SaslAuthenticate v{ver}")
        return True

    def metadata(self, r, corr, ver):
        n = r.i32()
        topics = [r.string() for _ in range(n)] if n > 0 else list(self.b.topics)
        if n == 0 and ver >= 1:
            topics = []      # v1+: empty = none, null = all; v0: empty = all
        b = self.b
        body = i32(1) + i32(b.node_id) + string(b.adv_host) + i32(b.adv_port)
        if ver >= 1:
            body += string(None) + i32(b.node_id)  # rack, controller
        body += i32(len(topics))
        for t in topics:
            body += i16(0) + string(t) + (b"\x00" if ver >= 1 else b"") + i32(1)
            body += i16(0) + i32(0) + i32(b.node_id) + i32(1) + i32(b.node_id) + i32(1) + i32(b.node_id)
        self.reply(corr, body)
        return True

    def produce(self, r, corr, ver):
        if ver >= 3:
            r.string()       # transactional id
        acks = r.i16()
        r.i32()              # timeout
        out = []
        for _ in range(r.i32()):
            name = r.string()
            parts = []
            for _ in range(r.i32()):
                idx = r.i32()
                records = r.bytes_() or b""
                parts.append((idx, len(records)))
            out.append((name, parts))
        total = sum(n for _, ps in out for _, n in ps)
        log("PRODUCE", f"user={self.user}", f"acks={acks}", f"bytes={total}")
        if acks == 0:
            return True
        body = i32(len(out))
        for name, parts in out:
            body += string(name) + i32(len(parts))
            for idx, _ in parts:
                with self.b.lock:
                    self.b.offset += 1
                    off = self.b.offset
                body += i32(idx) + i16(0) + i64(off) + i64(-1)
        body += i32(0)
        self.reply(corr, body)
        return True


class Broker:
    def __init__(self, args):
        self.users = dict(u.split(":", 1) for u in args.user)
        self.mechanisms = args.mechanisms.split(",")
        self.preauth_metadata = args.preauth_metadata
        self.auth_optional = args.auth_optional
        self.session_lifetime_ms = args.session_lifetime_ms
        self.node_id = args.node_id
        self.topics = args.topic or ["t"]
        self.lock = threading.Lock()
        self.offset = 0
        self.ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind((args.host, args.port))
        self.ls.listen(128)
        self.port = self.ls.getsockname()[1]
        self.adv_host = args.advertised_host or args.host
        self.adv_port = args.advertised_port or self.port

    def serve(self):
        while True:
            s, addr = self.ls.accept()
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=Conn(self, s, addr).run, daemon=True).start()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: any free port")
    ap.add_argument("--advertised-host", default=None)
    ap.add_argument("--advertised-port", type=int, default=0)
    ap.add_argument("--node-id", type=int, default=1)
    ap.add_argument("--user", action="append", default=[], metavar="NAME:PASSWORD")
    ap.add_argument("--mechanisms", default="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512")
    ap.add_argument("--topic", action="append", default=[])
    ap.add_argument("--preauth-metadata", action="store_true",
                    help="answer Metadata before authentication")
    ap.add_argument("--auth-optional", action="store_true",
                    help="serve every request without authentication (a plaintext "
                         "listener that also speaks SASL)")
    ap.add_argument("--session-lifetime-ms", type=int, default=0)
    ap.add_argument("--stdin-exit", action="store_true", help="exit when stdin closes")
    args = ap.parse_args()
    b = Broker(args)
    print(f"BOOTSTRAP={args.host}:{b.port}", flush=True)
    threading.Thread(target=b.serve, daemon=True).start()
    if args.stdin_exit:
        sys.stdin.read()
    else:
        threading.Event().wait()


if __name__ == "__main__":
    main()
