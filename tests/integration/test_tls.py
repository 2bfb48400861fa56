"""
TLS both ways through ferry (issue 11, items 1-3 and the material half of 4).

A throwaway CA, server, client and "wrong name" certificates are made in
each test's directory with the `openssl` CLI. Client side: kcat and
confluent-kafka over TLS (produce, consume, metadata rewritten to ferry's
ports), client certificates required, a plaintext Kafka frame on a TLS
port closed and counted, a stalled handshake closed at request_timeout.
Upstream side: stunnel4 terminates TLS in front of each mock broker, and
upstream_dial_map sends the brokers' advertised addresses (the mock's own)
to the stunnel ports; verification is against the advertised name. A name
mismatch is refused (and reported as the upstream's condition); with
upstream_tls_verify = off it works and a warning is logged. Validation:
`ferryd -t` names the file and line of a missing file, a key of another
certificate, a bad minimum version. A renewed certificate makes the
cluster modified on reload and the new one is served on the same port.
"""
import json
import os
import re
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest

from conftest import FERRYD, allocate_ports, register_log, tail_file

TOPIC = "ferry-tls"


# --------------------------------------------------------------------------
# certificates (openssl CLI)
# --------------------------------------------------------------------------

def _openssl(*args, cwd):
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"openssl {' '.join(args)}: {r.stderr}"


class PKI:
    """ca.pem; NAME.pem / NAME.key signed by it, with the given SANs."""

    def __init__(self, d):
        self.d = Path(d)
        self.d.mkdir(parents=True, exist_ok=True)
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                 "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
                 "-subj", "/CN=ferry test CA",
                 "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=self.d)
        self.ca = self.d / "ca.pem"
        # only ferryd (root) can read the keys: workers run as `user` and
        # must never need to (they get the bytes over IPC)
        os.chmod(self.d, 0o711)

    def issue(self, name, cn, san=None, days=2):
        ext = self.d / f"{name}.ext"
        lines = ["basicConstraints=CA:FALSE"]
        if san:
            lines.append(f"subjectAltName={san}")
        ext.write_text("\n".join(lines) + "\n")
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}", cwd=self.d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.pem", "-days", str(days),
                 "-extfile", f"{name}.ext", cwd=self.d)
        os.chmod(self.d / f"{name}.key", 0o600)
        return self.d / f"{name}.pem", self.d / f"{name}.key"


@pytest.fixture
def pki(workdir):
    p = PKI(Path(workdir) / "pki")
    p.server = p.issue("server", "ferry.test", "DNS:localhost,IP:127.0.0.1")
    p.client = p.issue("client", "client one")
    return p


def tls_keys(pki, **more):
    keys = {"tls_cert": pki.server[0], "tls_key": pki.server[1]}
    keys.update(more)
    return keys


# --------------------------------------------------------------------------
# clients
# --------------------------------------------------------------------------

def kcat(args, pki, client_cert=False, timeout=60, stdin=None):
    argv = ["kcat", "-X", "security.protocol=ssl", "-X", f"ssl.ca.location={pki.ca}"]
    if client_cert:
        argv += ["-X", f"ssl.certificate.location={pki.client[0]}",
                 "-X", f"ssl.key.location={pki.client[1]}"]
    return subprocess.run(argv + args, input=stdin, capture_output=True, text=True,
                          timeout=timeout, stdin=None if stdin is not None else subprocess.DEVNULL)


def confluent_conf(bootstrap, pki, client_cert=False, **extra):
    conf = {"bootstrap.servers": bootstrap, "security.protocol": "ssl",
            "ssl.ca.location": str(pki.ca)}
    if client_cert:
        conf["ssl.certificate.location"] = str(pki.client[0])
        conf["ssl.key.location"] = str(pki.client[1])
    conf.update(extra)
    return conf


def metadata_brokers(text):
    return sorted(re.findall(r"broker (\d+) at ([\w.]+:\d+)", text))


def wait_for(pred, timeout=15.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def tls_client_ctx(pki, cert=False):
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    if cert:
        ctx.load_cert_chain(str(pki.client[0]), str(pki.client[1]))
    return ctx


def served_cert_serial(port, pki):
    """The serial number of the certificate ferry serves on port."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        ctx = tls_client_ctx(pki)
        with ctx.wrap_socket(s, server_hostname="localhost") as t:
            der = t.getpeercert(binary_form=True)
    r = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-serial"],
                       input=der, capture_output=True, timeout=10)
    return r.stdout.decode().strip()


# --------------------------------------------------------------------------
# client-facing TLS
# --------------------------------------------------------------------------

@pytest.mark.parametrize("workers", [1, 2])
def test_tls_clients_produce_consume_metadata(mock_factory, ferry_factory, pki, workers):
    mock = mock_factory("A", 3, [f"{TOPIC}:3"])
    f = ferry_factory({"A": mock}, cluster_keys=tls_keys(pki, workers=workers))
    boot = f.bootstrap("A")

    # metadata: the brokers are ferry's ports on its advertised host
    r = kcat(["-L", "-b", boot, "-m", "10"], pki)
    assert r.returncode == 0, r.stderr[-2000:]
    want = sorted((str(n), f"{h}:{p}") for n, (h, p) in f.broker_addresses("A").items())
    assert metadata_brokers(r.stdout) == want, r.stdout
    for port in mock.ports:
        assert f":{port}" not in r.stdout, f"upstream port {port} leaked:\n{r.stdout}"

    # produce with kcat, 200 messages
    lines = "".join(f"k{i}\tkcat value {i}\n" for i in range(200))
    r = kcat(["-P", "-b", boot, "-t", TOPIC, "-K", "\t"], pki, stdin=lines)
    assert r.returncode == 0, r.stderr[-2000:]

    # produce with confluent-kafka (idempotent), 300 messages
    from confluent_kafka import Consumer, Producer
    errors = []
    p = Producer(confluent_conf(boot, pki, **{"enable.idempotence": True, "linger.ms": 5}))
    for i in range(300):
        p.produce(TOPIC, key=f"c{i}", value=f"confluent value {i}",
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(60) == 0
    assert errors == []

    # consume everything back with confluent-kafka
    c = Consumer(confluent_conf(boot, pki, **{"group.id": "tls-test",
                                             "auto.offset.reset": "earliest",
                                             "enable.auto.commit": False}))
    c.subscribe([TOPIC])
    got = {}
    deadline = time.monotonic() + 60
    while len(got) < 500 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        got[m.key().decode()] = m.value().decode()
    c.close()
    assert len(got) == 500, f"consumed {len(got)} of 500"
    assert got["k7"] == "kcat value 7" and got["c299"] == "confluent value 299"

    # and with kcat
    r = kcat(["-C", "-b", boot, "-t", TOPIC, "-o", "beginning", "-e", "-q", "-c", "500",
              "-f", "%k\n"], pki)
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(r.stdout.split()) == 500

    m = f.metrics()
    assert m[("ferry_tls_handshakes_total", "A")] >= 4
    assert m[("ferry_tls_handshake_failures_total", "A")] == 0


def test_client_certificate_required(mock_factory, ferry_factory, pki):
    mock = mock_factory("A", 3, [f"{TOPIC}:1"])
    f = ferry_factory({"A": mock}, cluster_keys=tls_keys(
        pki, tls_client_ca=pki.ca, tls_client_auth="required"))
    boot = f.bootstrap("A")
    before = f.metrics()[("ferry_tls_handshake_failures_total", "A")]

    r = kcat(["-L", "-b", boot, "-m", "5"], pki)
    assert r.returncode != 0, "a client without a certificate was admitted"
    wait_for(lambda: f.metrics()[("ferry_tls_handshake_failures_total", "A")] > before,
             what="the refused handshake to be counted")

    r = kcat(["-L", "-b", boot, "-m", "10"], pki, client_cert=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(metadata_brokers(r.stdout)) == 3
    r = kcat(["-P", "-b", boot, "-t", TOPIC], pki, client_cert=True, stdin="with a cert\n")
    assert r.returncode == 0, r.stderr[-2000:]

    # Python's ssl with and without a certificate, on a broker port
    port = f.clusters["A"]["brokers"][0]
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        with tls_client_ctx(pki, cert=True).wrap_socket(s, server_hostname="localhost") as t:
            assert t.version() in ("TLSv1.2", "TLSv1.3")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with tls_client_ctx(pki).wrap_socket(s, server_hostname="localhost") as t:
                t.settimeout(5)
                t.sendall(b"\x00\x00\x00\x00")
                assert t.recv(1) == b""  # TLS 1.3: the refusal comes with the first read
                raise ConnectionError("closed")


def _kafka_apiversions_frame():
    body = b"\x00\x12\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x04test"
    return len(body).to_bytes(4, "big") + body


def test_plaintext_on_tls_port_closed_and_counted(mock_factory, ferry_factory, pki):
    mock = mock_factory("A", 3)
    f = ferry_factory({"A": mock}, cluster_keys=tls_keys(pki))
    ports = [f.clusters["A"]["bootstrap"], f.clusters["A"]["brokers"][1]]
    before = f.metrics()
    for port in ports:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(_kafka_apiversions_frame())
            s.settimeout(5)
            try:
                data = s.recv(100)
            except ConnectionResetError:
                data = b""
            assert data == b"", f"answered plaintext on a TLS port: {data!r}"
    wait_for(lambda: f.metrics().get(("ferry_plaintext_on_tls_total", "A"), 0) ==
             before.get(("ferry_plaintext_on_tls_total", "A"), 0) + 2,
             what="plaintext_on_tls to count both")
    code, _, body = f.http("/metrics")
    assert re.search(r'ferry_connections_rejected_total\{cluster="A",reason="plaintext_on_tls"\} 2',
                     body.decode()), body.decode()[-3000:]
    # the worker served on: a TLS client still works
    assert kcat(["-L", "-b", f.bootstrap("A"), "-m", "10"], pki).returncode == 0


def test_stalled_handshake_closed_at_request_timeout(mock_factory, ferry_factory, pki):
    mock = mock_factory("A", 3)
    f = ferry_factory({"A": mock}, cluster_keys=tls_keys(pki, request_timeout="1s"))
    pid = f.cluster("A")["workers"][0]["pid"]
    port = f.clusters["A"]["bootstrap"]
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"\x16\x03\x01\x02\x00\x01")  # half a ClientHello, then nothing
    cpu0 = _cpu_ticks(pid)
    t0 = time.monotonic()
    s.settimeout(5)
    assert s.recv(10) == b""
    took = time.monotonic() - t0
    s.close()
    assert 0.8 <= took <= 3.0, f"closed after {took:.2f}s, request_timeout is 1s"
    # it waited, it did not spin: about no CPU while the handshake stalled
    assert _cpu_ticks(pid) - cpu0 < 30, "worker burned CPU on a stalled handshake"
    assert f.metrics()[("ferry_tls_handshake_failures_total", "A")] >= 1


def _not_after(cert):
    r = subprocess.run(["openssl", "x509", "-in", str(cert), "-noout", "-enddate"],
                       capture_output=True, text=True, timeout=10)
    import calendar
    t = time.strptime(r.stdout.strip().split("=", 1)[1], "%b %d %H:%M:%S %Y GMT")
    return calendar.timegm(t)


def _cpu_ticks(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_certificate_renewed_on_reload(mock_factory, ferry_factory, pki):
    mock = mock_factory("A", 3)
    f = ferry_factory({"A": mock}, cluster_keys=tls_keys(pki))
    port = f.clusters["A"]["bootstrap"]
    old = served_cert_serial(port, pki)
    gen = f.cluster("A")["generation"]
    # the same paths, new contents: the cluster is modified
    new_cert, new_key = pki.issue("renewed", "ferry.test", "DNS:localhost,IP:127.0.0.1")
    os.replace(new_cert, pki.server[0])
    os.replace(new_key, pki.server[1])
    r = f.ctl("--json", "reload")
    out = json.loads(r.stdout)
    assert out.get("status") == "SUCCESS", out
    wait_for(lambda: f.cluster("A")["generation"] > gen, what="a new generation")
    new = served_cert_serial(port, pki)
    assert new != old, "the old certificate is still served"
    # status and metric follow the served certificate (the renewed one: 2 days)
    tls = f.cluster("A")["tls"]
    assert tls["subject"] == "CN=ferry.test", tls
    na = _not_after(pki.server[0])
    assert tls["notAfter"] == time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(na)) + ".000Z", tls
    code, _, body = f.http("/metrics")
    assert f'ferry_tls_cert_not_after_seconds{{cluster="A"}} {na}' in body.decode()
    # 2 days left: under 14, warned at start and at the reload
    assert len(re.findall(r'msg="TLS certificate expires soon" cluster=A', f.log_path.read_text())) >= 2
    # nothing changed: UNCHANGED
    out = json.loads(f.ctl("--json", "reload").stdout)
    assert out.get("status") == "UNCHANGED", out


# --------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------

def _validate(workdir, body):
    path = Path(workdir) / "check.ini"
    path.write_text(body)
    r = subprocess.run([FERRYD, "-t", "-c", path], capture_output=True, text=True, timeout=30)
    return r, path


def _cluster(pki, lines):
    ports = allocate_ports(4)
    return ("[ferry]\ncontrol_socket = /tmp/ferry-tls-t.sock\nadmin_listen = off\n\n"
            "[cluster t]\n"                                   # line 5
            "upstream = 127.0.0.1:1\n"
            f"bootstrap = 127.0.0.1:{ports[0]}\n"
            f"broker_ports = {ports[1]}-{ports[3]}\n" + "".join(l + "\n" for l in lines))


def test_ferryd_t_names_file_and_line(workdir, pki):
    other = pki.issue("other", "other", "DNS:other.test")
    r, path = _validate(workdir, _cluster(pki, [f"tls_cert = {pki.server[0]}",
                                                f"tls_key = {pki.server[1]}"]))
    assert r.returncode == 0, r.stderr

    missing = Path(workdir) / "nope.pem"
    r, path = _validate(workdir, _cluster(pki, [f"tls_cert = {missing}",      # line 9
                                                f"tls_key = {pki.server[1]}"]))
    assert r.returncode == 1
    assert f"{path}:9: tls_cert: {missing}: cannot read: No such file or directory" in r.stderr, \
        r.stderr

    r, path = _validate(workdir, _cluster(pki, [f"tls_cert = {pki.server[0]}",
                                                f"tls_key = {other[1]}"]))     # line 10
    assert r.returncode == 1
    assert f"{path}:10: tls_key: key does not match the certificate of tls_cert" in r.stderr, \
        r.stderr

    r, path = _validate(workdir, _cluster(pki, [f"tls_cert = {pki.server[0]}",
                                                f"tls_key = {pki.server[1]}",
                                                "tls_min_version = 1.1"]))    # line 11
    assert r.returncode == 1
    assert f"{path}:11: tls_min_version: TLS 1.1 is not supported" in r.stderr, r.stderr

    bad = Path(workdir) / "bad.pem"
    bad.write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    r, path = _validate(workdir, _cluster(pki, [f"tls_cert = {bad}",
                                                f"tls_key = {pki.server[1]}"]))
    assert r.returncode == 1
    assert f"{path}:9: tls_cert: no PEM certificate" in r.stderr, r.stderr

    r, path = _validate(workdir, _cluster(pki, ["upstream_tls = on",
                                                f"upstream_ca = {missing}"]))  # line 10
    assert r.returncode == 1
    assert f"{path}:10: upstream_ca: {missing}: cannot read" in r.stderr, r.stderr


def test_reload_refuses_bad_material_before_touching_anything(mock_factory, ferry_factory, pki):
    mock = mock_factory("A", 3)
    f = ferry_factory({"A": mock}, cluster_keys=tls_keys(pki))
    gen = f.cluster("A")["generation"]
    pids = [w["pid"] for w in f.cluster("A")["workers"]]
    other = pki.issue("other", "other", "DNS:other.test")
    text = f.config_path.read_text().replace(f"tls_key = {pki.server[1]}",
                                             f"tls_key = {other[1]}")
    f.config_path.write_text(text)
    r = f.ctl("--json", "reload", check=False)
    out = json.loads(r.stdout)
    assert out.get("status") == "REJECTED", out
    assert any("tls_key: key does not match the certificate of tls_cert" in e
               for e in out.get("errors", [])), out
    assert f.cluster("A")["generation"] == gen
    assert [w["pid"] for w in f.cluster("A")["workers"]] == pids
    # validate says the same, and changes nothing
    r = f.ctl("--json", "validate", f.config_path, check=False)
    assert r.returncode != 0
    doc = json.loads(r.stdout)
    assert doc["valid"] is False and any("tls_key: key does not match" in e
                                         for e in doc["errors"]), doc


# --------------------------------------------------------------------------
# upstream TLS: stunnel in front of every mock broker, upstream_dial_map
# --------------------------------------------------------------------------

class Stunnel:
    """One stunnel4 process: TLS on a fresh port per mock broker port."""

    def __init__(self, keeper, workdir, request, cert, key, targets, client_ca=None, debug=5):
        self.ports = allocate_ports(len(targets))
        d = Path(workdir)
        conf = ["pid =", "foreground = yes", f"debug = {debug}",
                f"output = {d / 'stunnel.log'}", ""]
        for i, (t, p) in enumerate(zip(targets, self.ports)):
            conf += [f"[b{i}]", f"accept = 127.0.0.1:{p}", f"connect = 127.0.0.1:{t}",
                     f"cert = {cert}", f"key = {key}"]
            if client_ca:  # mutual TLS: a client certificate of this CA is required
                conf += [f"CAfile = {client_ca}", "verifyChain = yes", "requireCert = yes"]
            conf.append("")
        path = d / "stunnel.conf"
        path.write_text("\n".join(conf))
        register_log(request, "stunnel", d / "stunnel.log")
        self.proc = keeper.spawn("stunnel", ["stunnel4", str(path)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for p in self.ports:
            wait_for(lambda: _port_open(p), 15, f"stunnel on {p}")


def _port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def _upstream_keys(pki, mock, st, verify="on"):
    dial = ",".join(f"127.0.0.1:{m}=127.0.0.1:{s}" for m, s in zip(mock.ports, st.ports))
    return {"upstream_tls": "on", "upstream_ca": pki.ca, "upstream_tls_verify": verify,
            "upstream_dial_map": dial}


def test_upstream_tls_with_dial_map(mock_factory, ferry_factory, keeper, workdir, request, pki):
    mock = mock_factory("A", 3, [f"{TOPIC}:3"])
    # the broker's advertised name is 127.0.0.1: its certificate says so
    st = Stunnel(keeper, workdir, request, *pki.issue("broker", "kafka broker", "IP:127.0.0.1"),
                 mock.ports)
    f = ferry_factory({"A": mock}, cluster_keys=_upstream_keys(pki, mock, st))
    boot = f.bootstrap("A")
    r = subprocess.run(["kcat", "-L", "-b", boot, "-m", "10"], capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-2000:]
    want = sorted((str(n), f"{h}:{p}") for n, (h, p) in f.broker_addresses("A").items())
    assert metadata_brokers(r.stdout) == want, r.stdout
    lines = "".join(f"k{i}\tv{i}\n" for i in range(100))
    r = subprocess.run(["kcat", "-P", "-b", boot, "-t", TOPIC, "-K", "\t"], input=lines,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run(["kcat", "-C", "-b", boot, "-t", TOPIC, "-o", "beginning", "-e", "-q",
                        "-c", "100", "-f", "%k\n"], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and len(r.stdout.split()) == 100, r.stderr[-2000:]
    # every broker connection went through stunnel (TLS), none straight to the mock
    log = (Path(workdir) / "stunnel.log").read_text()
    for i in range(3):
        assert f"Service [b{i}] accepted connection" in log, f"no TLS connection to broker {i}"
    assert f.cluster("A")["upstream"]["state"] == "reachable"


def test_upstream_name_mismatch_refused_and_verify_off(mock_factory, ferry_factory, keeper,
                                                       workdir, request, pki):
    mock = mock_factory("A", 3)
    # a valid certificate of the right CA, for another name
    st = Stunnel(keeper, workdir, request, *pki.issue("wrong", "kafka broker", "DNS:other.test"),
                 mock.ports)
    f = ferry_factory({"A": mock}, cluster_keys=_upstream_keys(pki, mock, st))
    r = subprocess.run(["kcat", "-L", "-b", f.bootstrap("A"), "-m", "5"], capture_output=True,
                       text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert r.returncode != 0, "metadata through a mismatched upstream certificate"

    def unreachable():
        up = f.cluster("A").get("upstream", {})
        return up.get("state") == "unreachable" and "mismatch" in (up.get("lastError") or "")
    wait_for(unreachable, 20, "the upstream reported unreachable with the TLS error")
    assert f.metrics()[("ferry_upstream_tls_failures_total", "A")] >= 1

    # upstream_tls_verify = off: served, with a warning at worker start
    text = f.config_path.read_text().replace("upstream_tls_verify = on", "upstream_tls_verify = off")
    f.config_path.write_text(text)
    out = json.loads(f.ctl("--json", "reload").stdout)
    assert out.get("status") == "SUCCESS", out
    r = subprocess.run(["kcat", "-L", "-b", f.bootstrap("A"), "-m", "10"], capture_output=True,
                       text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(metadata_brokers(r.stdout)) == 3
    assert "upstream_tls_verify = off" in f.log_path.read_text()


# --------------------------------------------------------------------------
# reload: a TLS session cannot move to the new generation
# --------------------------------------------------------------------------

def _recv_exact(t, n):
    b = b""
    while len(b) < n:
        chunk = t.recv(n - len(b))
        if not chunk:
            return b
        b += chunk
    return b


def _tls_apiversions(t):
    t.sendall(_kafka_apiversions_frame())
    size = int.from_bytes(_recv_exact(t, 4), "big")
    body = _recv_exact(t, size)
    assert len(body) == size and body[:4] == b"\x00\x00\x00\x01", body[:16]


def test_tls_connections_close_at_a_boundary_on_reload(mock_factory, ferry_factory, pki):
    mock = mock_factory("A", 3)
    f = ferry_factory({"A": mock}, cluster_keys=tls_keys(pki), extra_ferry="drain_spread = 1s")
    port = f.clusters["A"]["bootstrap"]
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    t = tls_client_ctx(pki).wrap_socket(s, server_hostname="localhost")
    _tls_apiversions(t)
    gen = f.cluster("A")["generation"]
    text = f.config_path.read_text().replace(f"tls_key = {pki.server[1]}",
                                             f"tls_key = {pki.server[1]}\nidle_timeout = 9m")
    f.config_path.write_text(text)
    out = json.loads(f.ctl("--json", "reload").stdout)
    assert out.get("status") == "SUCCESS", out
    wait_for(lambda: f.cluster("A")["generation"] > gen, what="a new generation")
    # the old session is served until ferry closes it at a boundary, within drain_spread
    t.settimeout(10)
    t0 = time.monotonic()
    try:
        closed = t.recv(1) == b""
    except (ssl.SSLError, ConnectionError):
        closed = True
    assert closed and time.monotonic() - t0 < 5
    t.close()
    # a new session is served by the new generation
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    with tls_client_ctx(pki).wrap_socket(s, server_hostname="localhost") as t2:
        _tls_apiversions(t2)
    assert f.metrics().get(("ferry_connections_handed_over_total", "A"), 0) == 0


# --------------------------------------------------------------------------
# hostile TLS: each closes only its own connection
# --------------------------------------------------------------------------

def test_garbage_truncated_and_renegotiation(mock_factory, ferry_factory, pki):
    mock = mock_factory("A", 3)
    f = ferry_factory({"A": mock}, cluster_keys=tls_keys(pki))
    port = f.clusters["A"]["bootstrap"]
    pid = f.cluster("A")["workers"][0]["pid"]
    # a healthy session stays up through all of it
    keep = tls_client_ctx(pki).wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                                           server_hostname="localhost")
    _tls_apiversions(keep)
    before = f.metrics()[("ferry_tls_handshake_failures_total", "A")]
    # a record header claiming a handshake, then garbage
    for payload in (b"\x16\x03\x01\x00\x40" + os.urandom(64),
                    b"\x16\x03\x03\xff\xff" + b"\x01" * 300,      # oversized record
                    b"\x16\x03\x01\x00\x05\x01\x00\x00"):       # truncated, then closed
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(payload)
        if len(payload) < 10:
            s.close()
            continue
        s.settimeout(5)
        try:
            while s.recv(4096):
                pass
        except ConnectionError:
            pass
        s.close()
    wait_for(lambda: f.metrics()[("ferry_tls_handshake_failures_total", "A")] >= before + 3,
             what="three failed handshakes counted")
    # TLS 1.2 renegotiation asked by the client: refused, the worker lives on
    p = subprocess.Popen(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-tls1_2",
                          "-CAfile", str(pki.ca), "-servername", "localhost"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        out, _ = p.communicate(b"R\n", timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    text = out.decode(errors="replace")
    assert "RENEGOTIATING" in text, text[-2000:]
    assert "no renegotiation" in text, text[-2000:]
    _tls_apiversions(keep)
    keep.close()
    assert f.cluster("A")["workers"][0]["pid"] == pid


def test_upstream_mutual_tls(mock_factory, ferry_factory, keeper, workdir, request, pki):
    mock = mock_factory("A", 3)
    st = Stunnel(keeper, workdir, request, *pki.issue("broker", "kafka broker", "IP:127.0.0.1"),
                 mock.ports, client_ca=pki.ca)
    keys = _upstream_keys(pki, mock, st)
    f = ferry_factory({"A": mock}, cluster_keys=keys)
    # no client certificate: the brokers refuse ferry
    r = subprocess.run(["kcat", "-L", "-b", f.bootstrap("A"), "-m", "5"], capture_output=True,
                       text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert r.returncode != 0
    wait_for(lambda: f.cluster("A")["upstream"]["state"] == "unreachable", 20,
             "the upstream unreachable without a client certificate")
    # with upstream_cert / upstream_key: served
    text = f.config_path.read_text().replace(
        "upstream_tls_verify = on",
        f"upstream_tls_verify = on\nupstream_cert = {pki.client[0]}\nupstream_key = {pki.client[1]}")
    f.config_path.write_text(text)
    out = json.loads(f.ctl("--json", "reload").stdout)
    assert out.get("status") == "SUCCESS", out
    r = subprocess.run(["kcat", "-L", "-b", f.bootstrap("A"), "-m", "10"], capture_output=True,
                       text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(metadata_brokers(r.stdout)) == 3


def test_client_auth_requested_and_min_version(mock_factory, ferry_factory, workdir, pki):
    mock = mock_factory("A", 3)
    f = ferry_factory({"A": mock}, cluster_keys=tls_keys(
        pki, tls_client_ca=pki.ca, tls_client_auth="requested", tls_min_version="1.3"))
    port = f.clusters["A"]["brokers"][2]

    def session(ctx):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        t = ctx.wrap_socket(s, server_hostname="localhost")
        try:
            _tls_apiversions(t)
            return t.version()
        finally:
            t.close()

    # requested: no certificate is fine, a verified one too
    assert session(tls_client_ctx(pki)) == "TLSv1.3"
    assert session(tls_client_ctx(pki, cert=True)) == "TLSv1.3"
    # a certificate of another CA is verified when sent: refused
    stranger = PKI(Path(workdir) / "stranger")
    cert, key = stranger.issue("client", "stranger")
    ctx = tls_client_ctx(pki)
    ctx.load_cert_chain(str(cert), str(key))
    with pytest.raises((ssl.SSLError, ConnectionError, OSError, AssertionError)):
        session(ctx)
    # tls_min_version = 1.3: a TLS 1.2 client is refused in the handshake
    ctx = tls_client_ctx(pki)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    with pytest.raises(ssl.SSLError):
        session(ctx)
