"""
Hostile TLS clients against ferry's client-facing TLS: every one closes only
its own connection.

One ferryd serves two TLS clusters in front of one librdkafka mock cluster,
with a throwaway CA and an ECDSA P-256 server certificate made with the
openssl CLI in the test's directory:

  T12  tls_min_version = 1.2 (ferry's default ciphers)
  T13  tls_min_version = 1.3

Checked: testssl.sh (Debian's `testssl`, protocols and vulnerabilities,
offline, both ports at once) finds no vulnerability and no protocol below
the configured minimum; truncated and garbage ClientHellos, a handshake
that stalls halfway (closed by ferry's handshake deadline, other
connections served meanwhile) and client-initiated renegotiation (TLS 1.2,
`openssl s_client` command `R`) each close only their connection, within
2 s (the stall: within the deadline), and are counted in /metrics. All
along, a confluent-kafka producer produces over TLS through T12 on the
connections it opened at the start (librdkafka's own connect counter does
not move: ferry closed none of them) with no delivery error; ferryd and the
workers keep their pids; a TLS connection opened before each hostile one
still answers afterwards, and kcat over TLS works on new ones.
"""

import json
import os
import shutil
import socket
import ssl
import struct
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import (Ferry, MockCluster, ProcessKeeper, register_log, serving_pids,
                      tail_file)
from wire import CLOSE_WITHIN, client_hello, expect_closed, recv_exact
from wire import metadata_v0 as _metadata_v0

TOPIC = "tlshostile"
HANDSHAKE_TIMEOUT = 2.0  # request_timeout of both clusters (also the handshake's deadline), s
TESTSSL = shutil.which("testssl") or shutil.which("testssl.sh")


# --------------------------------------------------------------------------
# certificates (openssl CLI)
# --------------------------------------------------------------------------

def make_certs(d):
    """A throwaway CA and a server certificate for localhost / 127.0.0.1,
    ECDSA P-256: d/ca.pem, d/server.pem, d/server.key."""
    def run(*argv):
        subprocess.run(["openssl", *argv], cwd=d, check=True, capture_output=True, timeout=30)
    run("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ca.key")
    run("req", "-x509", "-new", "-key", "ca.key", "-sha256", "-days", "2",
        "-subj", "/CN=ferry test CA", "-out", "ca.pem")
    run("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "server.key")
    run("req", "-new", "-key", "server.key", "-subj", "/CN=localhost", "-out", "server.csr")
    with open(os.path.join(d, "ext.cnf"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-sha256", "-extfile", "ext.cnf", "-out", "server.pem")
    for f in ("ca.pem", "server.pem"):
        os.chmod(os.path.join(d, f), 0o644)
    os.chmod(os.path.join(d, "server.key"), 0o600)  # the supervisor reads it


# --------------------------------------------------------------------------
# wire helpers
# --------------------------------------------------------------------------

def metadata_v0(corr):
    return _metadata_v0(corr, "tls-it")


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def tls10_hello():
    """A ClientHello offering TLS 1.0 at most: a TLS 1.2 one (which has no
    supported_versions extension) with client_version 3.1."""
    h = bytearray(client_hello(max_version=ssl.TLSVersion.TLSv1_2))
    assert h[9:11] == b"\x03\x03", h[:12]
    h[9:11] = b"\x03\x01"
    return bytes(h)


def tls_context(ca):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(ca)
    return ctx


class TLSClient:
    """A long-lived TLS client connection doing Metadata v0 requests."""

    def __init__(self, port, ca):
        self.s = tls_context(ca).wrap_socket(connect(port), server_hostname="localhost")
        self.corr = 100

    def metadata(self, timeout=5.0):
        """The number of brokers in a Metadata v0 response."""
        self.corr += 1
        self.s.sendall(metadata_v0(self.corr))
        deadline = time.monotonic() + timeout
        (size,) = struct.unpack(">i", recv_exact(self.s, 4, deadline))
        body = recv_exact(self.s, size, deadline)
        cid, nb = struct.unpack_from(">ii", body, 0)
        assert cid == self.corr, f"correlation id {cid} != {self.corr}"
        return nb

    def close(self):
        self.s.close()


# --------------------------------------------------------------------------
# the producer that runs all along
# --------------------------------------------------------------------------

class Producing:
    """A confluent-kafka producer over TLS through ferry, producing a
    message every 20 ms from the module's start to its end. `connects` is
    librdkafka's count of connections it made (statistics, every 250 ms)."""

    def __init__(self, bootstrap, ca):
        from confluent_kafka import Producer
        self.ok, self.errors, self.connects = 0, [], 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.p = Producer({
            "bootstrap.servers": bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": ca,
            "linger.ms": 5,
            "message.timeout.ms": 15000,
            "statistics.interval.ms": 250,
            "stats_cb": self._stats,
            "log_level": 3,
        })
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _stats(self, text):
        st = json.loads(text)
        n = sum(b.get("connects", 0) for b in st.get("brokers", {}).values())
        with self.lock:
            self.connects = n

    def _dr(self, err, msg):
        with self.lock:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.ok += 1

    def _run(self):
        i = 0
        while not self.stop.is_set():
            try:
                self.p.produce(TOPIC, value=b"v%d" % i, callback=self._dr)
            except BufferError:
                pass
            i += 1
            self.p.poll(0.02)
        self.p.flush(15)

    def snapshot(self):
        with self.lock:
            return self.ok, len(self.errors), self.connects

    def wait_progress(self, since_ok, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.snapshot()[0] > since_ok + 5:
                return
            time.sleep(0.05)
        raise AssertionError(f"the producer delivered nothing more in {timeout}s "
                             f"(errors: {self.errors[-3:]})")

    def close(self):
        self.stop.set()
        self.thread.join(20)


# --------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------

CLUSTER_KEYS = {
    "T12": ["tls_min_version = 1.2", f"request_timeout = {HANDSHAKE_TIMEOUT:g}s"],
    "T13": ["tls_min_version = 1.3", f"request_timeout = {HANDSHAKE_TIMEOUT:g}s"],
}


class _Upstream:
    def __init__(self, bootstrap):
        self.bootstrap = bootstrap


class Env:
    def metrics(self):
        """{(metric without ferry_, cluster): value}, labels summed."""
        return {(k[len("ferry_"):], c): v for (k, c), v in self.ferry.metrics().items()}

    def port(self, cluster):
        return self.ferry.clusters[cluster]["bootstrap"]

    def worker(self, cluster):
        pids = serving_pids(self.ferry.cluster(cluster))
        assert len(pids) == 1, pids
        return pids[0]

    def pids(self):
        return (self.ferry.proc.pid, self.worker("T12"), self.worker("T13"))

    def counter_sum(self, names, cluster):
        m = self.metrics()
        return sum(m.get((n, cluster), 0) for n in names)

    def wait_counter(self, names, cluster, above, timeout=CLOSE_WITHIN):
        deadline = time.monotonic() + timeout
        while True:
            v = self.counter_sum(names, cluster)
            if v > above or time.monotonic() > deadline:
                return v
            time.sleep(0.02)

    def kcat_list(self, cluster):
        r = subprocess.run(["kcat", "-L", "-m", "10", "-b", self.ferry.bootstrap(cluster),
                            "-X", "security.protocol=ssl", "-X", f"ssl.ca.location={self.ca}"],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, f"kcat -L over TLS failed: {r.stderr[-1500:]}"
        assert r.stdout.count(" at 127.0.0.1:") == 3, r.stdout


@pytest.fixture(scope="module")
def shared_env():
    keeper = ProcessKeeper()
    workdir = tempfile.mkdtemp(prefix="ferry-tlsh-", dir="/tmp")
    os.chmod(workdir, 0o755)
    producing = None
    try:
        make_certs(workdir)
        mock = MockCluster(keeper, workdir, "M", 3, [f"{TOPIC}:3"])
        f = Ferry(keeper, workdir, {"T12": mock, "T13": _Upstream(mock.bootstrap)})
        text = f.config_text
        for name, lines in CLUSTER_KEYS.items():
            hdr = f"[cluster {name}]\n"
            lines = [f"tls_cert = {workdir}/server.pem", f"tls_key = {workdir}/server.key"] + lines
            text = text.replace(hdr, hdr + "".join(ln + "\n" for ln in lines))
        f.config_text = text
        f.config_path.write_text(text)
        f.start()
        env = Env()
        env.ferry, env.mock, env.workdir = f, mock, workdir
        env.ca = os.path.join(workdir, "ca.pem")
        env.start_pids = env.pids()
        producing = Producing(f.bootstrap("T12"), env.ca)
        env.producing = producing
        producing.wait_progress(0, timeout=20)
        time.sleep(0.6)  # a statistics window with the connections made
        yield env
        producing.close()
        producing_final = producing.snapshot()
        producing = None
        assert producing_final[1] == 0, f"delivery errors: {env.producing.errors[:5]}"
        assert env.pids() == env.start_pids, "ferryd or a worker was restarted"
    finally:
        if producing:
            producing.close()
        keeper.cleanup()
        if not os.environ.get("FERRY_KEEP_TMP"):
            shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def env(shared_env, request):
    register_log(request, "ferryd", shared_env.ferry.log_path)
    register_log(request, "mock M", shared_env.mock.log_path)
    before = shared_env.producing.snapshot()
    yield shared_env
    # Only the hostile connection went: the producer kept its connections
    # and went on delivering, nobody was restarted, new clients are served.
    shared_env.producing.wait_progress(before[0])
    ok, errors, connects = shared_env.producing.snapshot()
    assert errors == 0, f"delivery errors: {shared_env.producing.errors[:5]}"
    assert connects == before[2], (f"the producer had to reconnect ({before[2]} -> {connects} "
                                   "connections): ferry closed one of its connections")
    assert shared_env.pids() == shared_env.start_pids, "ferryd or a worker was restarted"
    shared_env.kcat_list("T12")


# --------------------------------------------------------------------------
# testssl.sh
# --------------------------------------------------------------------------

PROTOCOLS = ["SSLv2", "SSLv3", "TLS1", "TLS1_1", "TLS1_2", "TLS1_3"]
VULN_IDS = ["heartbleed", "CCS", "ticketbleed", "ROBOT", "secure_renego", "secure_client_renego",
            "CRIME_TLS", "POODLE_SSL", "fallback_SCSV", "SWEET32", "FREAK", "DROWN", "LOGJAM",
            "BEAST", "LUCKY13", "RC4"]
BAD_SEVERITY = {"LOW", "MEDIUM", "HIGH", "CRITICAL", "FATAL"}


def run_testssl(keeper, workdir, port, name, checks):
    """Starts testssl.sh with `checks` (-p: protocols, -U: vulnerabilities),
    offline (no DNS), against 127.0.0.1:port; returns (process, json path,
    log)."""
    js = os.path.join(workdir, f"testssl-{name}.json")
    log = os.path.join(workdir, f"testssl-{name}.log")
    out = open(log, "wb")
    p = keeper.spawn(f"testssl-{name}", [
        TESTSSL, "--quiet", "--color", "0", "--warnings", "off", "--nodns", "none",
        "--jsonfile", js, *checks, f"127.0.0.1:{port}"],
        stdout=out, stderr=subprocess.STDOUT, cwd=workdir)
    out.close()
    return p, js, log


@pytest.mark.timeout(240)
@pytest.mark.skipif(TESTSSL is None, reason="testssl.sh is not installed (Debian: testssl.sh)")
def test_testssl_no_vulnerability_no_old_protocol(env):
    keeper = ProcessKeeper()
    try:
        # Both at once (each is mostly waiting); the vulnerabilities on the
        # 1.2 port, which has the larger surface (on a 1.3-only port
        # testssl finds them all "not applicable").
        runs = {"T12": run_testssl(keeper, env.workdir, env.port("T12"), "T12", ["-p", "-U"]),
                "T13": run_testssl(keeper, env.workdir, env.port("T13"), "T13", ["-p"])}
        for c, (p, js, log) in runs.items():
            try:
                p.wait(150)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"testssl against {c} ran over 150 s:\n{tail_file(log)}")
    finally:
        keeper.cleanup()
    for c, (p, js, log) in runs.items():
        assert os.path.exists(js), f"testssl wrote no JSON (rc {p.returncode}):\n{tail_file(log)}"
        with open(js) as f:
            findings = {e["id"]: e for e in json.load(f)}
        scan_problems = [e for e in findings.values()
                         if e["id"] in ("scanProblem", "scanTime") and e["severity"] == "FATAL"]
        assert not scan_problems, scan_problems
        missing = [i for i in PROTOCOLS + (VULN_IDS if c == "T12" else []) if i not in findings]
        assert not missing, f"{c}: testssl did not report {missing}:\n{tail_file(log)}"
        offered = {i: findings[i]["finding"] for i in PROTOCOLS}
        below = ["SSLv2", "SSLv3", "TLS1", "TLS1_1"] + (["TLS1_2"] if c == "T13" else [])
        for i in below:
            assert offered[i].startswith("not offered"), f"{c}: {i} {offered[i]!r}"
        assert offered["TLS1_3"].startswith("offered"), f"{c}: TLS 1.3 {offered['TLS1_3']!r}"
        if c == "T12":
            assert offered["TLS1_2"].startswith("offered"), f"{c}: TLS 1.2 {offered['TLS1_2']!r}"
        bad = {i: (e["severity"], e["finding"]) for i, e in findings.items()
               if i in VULN_IDS and e["severity"] in BAD_SEVERITY}
        assert not bad, f"{c}: testssl reports {bad}"


# --------------------------------------------------------------------------
# truncated and garbage ClientHellos
# --------------------------------------------------------------------------

def _hostile_hellos():
    hello = client_hello()
    rec_len = struct.unpack(">H", hello[3:5])[0]
    body = hello[5:]
    out = {
        # half a ClientHello, then the client's write side closes
        "truncated-eof": (hello[: len(hello) // 2], True),
        # a whole record whose handshake message claims more than it holds,
        # followed by a record of another type: not a continuation
        "truncated-in-record": (
            b"\x16\x03\x01" + struct.pack(">H", 40) + body[:1] + b"\x00\x10\x00" + body[4:40]
            + b"\x17\x03\x03\x00\x05hello", False),
        # a ClientHello whose inner lengths are garbage (session id length 255)
        "garbage-lengths": (hello[:5 + 4 + 2 + 32] + b"\xff" + b"\x00" * (rec_len - 4 - 2 - 32 - 1),
                            False),
        # random bytes in a handshake record
        "garbage-record": (b"\x16\x03\x01\x01\x00" + os.urandom(256), False),
        # a record above the 16 KiB + 2,048 limit
        "oversized-record": (b"\x16\x03\x01\x48\x01" + b"\x00" * 64, False),
        # an SSLv2-format ClientHello (version 3.1, six cipher specs, a
        # 16-byte challenge)
        "sslv2-hello": (b"\x80\x2b\x01\x03\x01\x00\x12\x00\x00\x00\x10"
                        + bytes.fromhex("010080 0700c0 030080 060040 020080 040080")
                        + os.urandom(16), False),
        # a TLS 1.0 ClientHello (client_version 3.1, no supported_versions)
        # on a port whose minimum is 1.2
        "tls1.0-only": (tls10_hello(), False),
        # not TLS at all: a plaintext Kafka Metadata request
        "plaintext-kafka": (metadata_v0(7), False),
    }
    return out


HOSTILE = _hostile_hellos()
# what a hostile handshake can be counted as (labels summed per family)
TLS_FAIL_COUNTERS = ["tls_handshake_failures_total", "plaintext_on_tls_total"]


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_client_hello_closes_only_its_connection(env, name):
    data, eof = HOSTILE[name]
    by = TLSClient(env.port("T12"), env.ca)
    assert by.metadata() == 3
    before = env.counter_sum(TLS_FAIL_COUNTERS, "T12")
    s = connect(env.port("T12"))
    try:
        s.sendall(data)
        if eof:
            s.shutdown(socket.SHUT_WR)
    except (BrokenPipeError, ConnectionResetError):
        pass
    got, took = expect_closed(s)
    s.close()
    # at most a TLS alert record, never a ServerHello or Kafka bytes
    assert got == b"" or (got[0] == 0x15 and len(got) <= 7 * 2), f"{name}: got {got[:40]!r}"
    after = env.wait_counter(TLS_FAIL_COUNTERS, "T12", before)
    assert after == before + 1, f"{name}: counted {after - before} times"
    assert by.metadata() == 3, "the connection opened before was disturbed"
    by.close()


# --------------------------------------------------------------------------
# a handshake that stalls halfway
# --------------------------------------------------------------------------

def test_stalled_handshake_closed_by_deadline(env):
    hello = client_hello()
    before = env.counter_sum(TLS_FAIL_COUNTERS, "T12")
    stalled = []
    t0 = time.monotonic()
    # half a ClientHello and silence; and a connection that sends nothing
    for part in (hello[: len(hello) // 2], b""):
        s = connect(env.port("T12"))
        if part:
            s.sendall(part)
        stalled.append(s)
    # meanwhile: other connections complete handshakes and are served
    served = 0
    while time.monotonic() - t0 < HANDSHAKE_TIMEOUT * 0.75:
        c = TLSClient(env.port("T12"), env.ca)
        assert c.metadata() == 3
        c.close()
        served += 1
    assert served >= 2, served
    for s in stalled:
        _, took = expect_closed(s, within=HANDSHAKE_TIMEOUT + CLOSE_WITHIN)
        s.close()
    elapsed = time.monotonic() - t0
    assert elapsed >= HANDSHAKE_TIMEOUT * 0.9, f"closed after {elapsed:.2f}s, before the deadline"
    after = env.wait_counter(TLS_FAIL_COUNTERS, "T12", before + 1)
    assert after == before + 2, f"counted {after - before} times"


# --------------------------------------------------------------------------
# renegotiation
# --------------------------------------------------------------------------

def test_client_renegotiation_refused(env):
    by = TLSClient(env.port("T12"), env.ca)
    assert by.metadata() == 3
    before = env.counter_sum(TLS_FAIL_COUNTERS, "T12")
    # s_client reads commands from stdin: "R" renegotiates; stdin stays
    # open, so it exits only when the connection ends.
    p = subprocess.Popen(["openssl", "s_client", "-tls1_2", "-CAfile", env.ca, "-servername",
                          "localhost", "-connect", f"127.0.0.1:{env.port('T12')}"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        time.sleep(0.5)
        p.stdin.write(b"R\n")
        p.stdin.flush()
        try:
            out, _ = p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            raise AssertionError("the connection survived a renegotiation attempt for 5 s")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(5)
    text = out.decode(errors="replace")
    assert "Verify return code: 0 (ok)" in text, text[-2000:]
    assert "RENEGOTIATING" in text, text[-2000:]
    after = env.wait_counter(TLS_FAIL_COUNTERS, "T12", before)
    assert after == before + 1, f"counted {after - before} times"
    # closed by ferry for the attempt, not only because the client gave up
    log = env.ferry.log_path.read_text(errors="replace")
    assert "client-initiated renegotiation refused" in log, tail_file(env.ferry.log_path)
    assert by.metadata() == 3
    by.close()
