"""SNI gateway (gateway = sni): one TLS port for the bootstrap and every
broker, told apart by the ClientHello's server name.

A throwaway CA and a server certificate for kafka.example.com and
*.kafka.example.com are made with the openssl CLI. The names resolve to
127.0.0.1 only inside a private mount namespace (`unshare -m`, a hosts file
bind-mounted over /etc/hosts), where kcat runs: the machine's own files are
never changed. Checked: kcat -L through the one port sees the brokers as
broker-<id>.kafka.example.com:<port> (never an upstream address); kcat
and kafka-python (its own TLS, hostname check on) produce and consume
through it; only the bootstrap listener is bound;
status and ferryctl show the gateway; an unknown server name and a
ClientHello without one are refused with the alert unrecognized_name
(openssl s_client) and counted (sni_unknown); each broker name (any case)
routes a raw TLS connection straight to 127.0.0.1, and a well-formed name of
a node the upstream lacks is closed after metadata; workers = 2; a reload
with a new pattern serves the new names on the same port and refuses the
old ones; a bad gateway config is refused with file:line.
"""
import json
import os
import re
import shutil
import socket
import ssl
import struct
import subprocess

import pytest

from conftest import FERRYD, _kstr, _recv_exact, allocate_ports

DOMAIN = "kafka.example.com"
BOOT_NAME = DOMAIN
PATTERN = "broker-$(nodeId)." + DOMAIN
TOPIC = "sni-e2e"


def _run(argv, timeout=30, **kw):
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout, **kw)


def make_certs(d):
    """CA + server certificate (SANs: the bootstrap name and the wildcard)."""
    ca_key, ca_pem = d / "ca.key", d / "ca.pem"
    key, csr, pem = d / "server.key", d / "server.csr", d / "server.pem"
    ext = d / "san.ext"
    ext.write_text(f"subjectAltName=DNS:{DOMAIN},DNS:*.{DOMAIN}\n")
    steps = [
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key,
         "-out", ca_pem, "-days", "2", "-subj", "/CN=ferry sni test CA"],
        ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
         "-subj", f"/CN={DOMAIN}"],
        ["openssl", "x509", "-req", "-in", csr, "-CA", ca_pem, "-CAkey", ca_key,
         "-CAcreateserial", "-out", pem, "-days", "2", "-extfile", ext],
    ]
    for argv in steps:
        r = _run([str(a) for a in argv])
        assert r.returncode == 0, f"{argv}: {r.stderr}"
    return ca_pem, pem, key


def in_namespace(hosts, argv, timeout=60, input_text=None):
    """Runs argv with `hosts` bind-mounted over /etc/hosts in a private mount
    namespace (one process: unshare execs sh, which execs argv)."""
    script = 'mount --bind "$0" /etc/hosts && exec "$@"'
    full = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, str(hosts)] + \
        [str(a) for a in argv]
    return subprocess.run(full, input=input_text, stdin=None if input_text is not None
                          else subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)


def _sni_setup(mock_factory, ferry_factory, workdir, extra=()):
    for tool in ("openssl", "kcat", "unshare"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} not installed (scripts/install-deps)")
    if os.geteuid() != 0:
        pytest.fail("the SNI test needs root for unshare -m (a private /etc/hosts)")
    mock = mock_factory("S", 3, [f"{TOPIC}:3"])
    ca, cert, key = make_certs(workdir)
    f = ferry_factory({"S": mock}, start=False)
    port = f.clusters["S"]["bootstrap"]
    text = f.config_text.split("[cluster S]")[0] + "\n".join([
        "[cluster S]",
        f"upstream = {mock.bootstrap}",
        f"bootstrap = 127.0.0.1:{port}",
        f"tls_cert = {cert}",
        f"tls_key = {key}",
        "gateway = sni",
        f"sni_bootstrap_host = {BOOT_NAME}",
        f"sni_broker_pattern = {PATTERN}",
    ] + list(extra)) + "\n"
    f.config_text = text
    f.config_path.write_text(text)
    f.start()
    hosts = workdir / "hosts"
    names = [BOOT_NAME] + [f"broker-{i}.{DOMAIN}" for i in range(0, 10)]
    hosts.write_text("127.0.0.1 localhost " + " ".join(names) + "\n")

    class Env:
        pass
    e = Env()
    e.ferry, e.mock, e.port, e.ca, e.hosts = f, mock, port, ca, hosts
    e.kcat_tls = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={ca}"]
    return e


@pytest.fixture
def sni_env(mock_factory, ferry_factory, workdir):
    return _sni_setup(mock_factory, ferry_factory, workdir)


def kcat(e, args, timeout=60, input_text=None):
    r = in_namespace(e.hosts, ["kcat", "-b", f"{BOOT_NAME}:{e.port}"] + e.kcat_tls + args,
                     timeout=timeout, input_text=input_text)
    assert r.returncode == 0, f"kcat {args} rc={r.returncode}: {r.stderr[-3000:]}"
    return r


def test_metadata_names_brokers_by_pattern_on_one_port(sni_env):
    e = sni_env
    f = e.ferry
    c = f.cluster("S")
    # only the bootstrap listener is bound; the gateway shows in status
    assert [(l["role"], l["address"]) for l in c["listeners"]] == \
        [("bootstrap", f"127.0.0.1:{e.port}")], c["listeners"]
    assert c["gateway"] == "sni"
    assert c["sni"] == {"bootstrapHost": BOOT_NAME, "brokerPattern": PATTERN}
    out = f.ctl("status", "S").stdout
    assert f"gateway sni on 127.0.0.1:{e.port}: bootstrap {BOOT_NAME}, brokers {PATTERN}" in out, out

    r = kcat(e, ["-L", "-J", "-m", "15"])
    md = json.loads(r.stdout)
    brokers = sorted((b["id"], b["name"]) for b in md["brokers"])
    assert brokers == [(i, f"broker-{i}.{DOMAIN}:{e.port}") for i in (1, 2, 3)], brokers
    for port in e.mock.ports:
        assert f":{port}" not in r.stdout, f"upstream port {port} leaked: {r.stdout}"
    topics = {t["topic"]: t for t in md["topics"]}
    assert len(topics[TOPIC]["partitions"]) == 3


def test_produce_and_consume_through_one_port(sni_env):
    e = sni_env
    n = 300
    lines = "".join(f"k{i}\tv{i}\n" for i in range(n))
    kcat(e, ["-P", "-t", TOPIC, "-K", "\t"], input_text=lines)
    r = kcat(e, ["-C", "-t", TOPIC, "-o", "beginning", "-c", str(n), "-e", "-q",
                 "-f", "%k\t%s\n"])
    got = sorted(tuple(ln.split("\t", 1)) for ln in r.stdout.splitlines())
    assert got == sorted((f"k{i}", f"v{i}") for i in range(n))
    # the data went to the upstream (and every partition leader was reached
    # through its own server name: three brokers, three partitions)
    direct = _run(["kcat", "-C", "-b", e.mock.bootstrap, "-t", TOPIC, "-o", "beginning",
                   "-e", "-q", "-f", "%p\n"], timeout=60)
    assert direct.returncode == 0, direct.stderr
    assert len(direct.stdout.split()) == n
    assert len(set(direct.stdout.split())) == 3
    m = e.ferry.metrics()
    assert m[("ferry_sni_unknown_total", "S")] == 0
    assert m[("ferry_worker_restarts_total", "S")] == 0


KAFKA_PYTHON = r"""
import sys
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
boot, ca, topic = sys.argv[1], sys.argv[2], sys.argv[3]
tls = dict(security_protocol="SSL", ssl_cafile=ca, ssl_check_hostname=True,
           request_timeout_ms=20000, api_version_auto_timeout_ms=15000)
p = KafkaProducer(bootstrap_servers=boot, acks="all", max_block_ms=30000, **tls)
futs = [p.send(topic, key=b"kp-%d" % i, value=b"kafka-python %d" % i) for i in range(100)]
p.flush(60)
for f in futs:
    f.get(timeout=30)
p.close(5)
c = KafkaConsumer(bootstrap_servers=boot, consumer_timeout_ms=15000, **tls)
parts = [TopicPartition(topic, n) for n in c.partitions_for_topic(topic)]
c.assign(parts)
c.seek_to_beginning(*parts)
got = set()
for m in c:
    if m.key and m.key.startswith(b"kp-"):
        got.add(m.key)
    if len(got) == 100:
        break
c.close()
print("brokers", sorted("%s:%s" % (b.host, b.port) for b in c._client.cluster.brokers()))
print("consumed", len(got))
"""


def test_kafka_python_through_one_port(sni_env):
    """kafka-python (pure Python, its own TLS and SNI code) produces and
    consumes through the one port, checking the certificate's names."""
    e = sni_env
    r = in_namespace(e.hosts, ["/usr/bin/python3", "-c", KAFKA_PYTHON, f"{BOOT_NAME}:{e.port}",
                               str(e.ca), TOPIC], timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "consumed 100" in r.stdout, r.stdout + r.stderr[-3000:]
    want = sorted(f"broker-{i}.{DOMAIN}:{e.port}" for i in (1, 2, 3))
    assert f"brokers {want}" in r.stdout, r.stdout


def s_client(e, servername):
    argv = ["openssl", "s_client", "-connect", f"127.0.0.1:{e.port}", "-CAfile", str(e.ca)]
    argv += ["-servername", servername] if servername else ["-noservername"]
    r = subprocess.run(argv, input="", capture_output=True, text=True, timeout=20)
    return r.returncode, r.stdout + r.stderr


def test_unknown_or_missing_server_name_is_refused_and_counted(sni_env):
    e = sni_env
    f = e.ferry
    before = f.metrics().get(("ferry_sni_unknown_total", "S"), 0)
    # a known name completes the handshake (no Kafka needed for that)
    rc, out = s_client(e, f"broker-2.{DOMAIN}")
    assert rc == 0 and "Verify return code: 0 (ok)" in out, out
    for name in ("nope.example.com", f"broker-01.{DOMAIN}", None):
        rc, out = s_client(e, name)
        assert rc != 0, out
        assert re.search(r"unrecognized.name", out), out
    m = f.metrics()
    assert m[("ferry_sni_unknown_total", "S")] == before + 3
    code, _, body = f.http("/metrics")
    assert code == 200
    assert re.search(r'^ferry_connections_rejected_total\{cluster="S",reason="sni_unknown"\} 3$',
                     body.decode(), re.M), body.decode()
    # the worker is still serving, and never crashed
    kcat(e, ["-L", "-m", "15"])
    assert f.metrics()[("ferry_worker_restarts_total", "S")] == 0


def tls_metadata(e, servername, timeout=15.0):
    """One Metadata v0 request over TLS to the SNI port with the given server
    name (straight to 127.0.0.1: no name lookup); {node_id: (host, port)}."""
    ctx = ssl.create_default_context(cafile=str(e.ca))
    req = struct.pack(">hhih", 3, 0, 77, 2) + b"it" + struct.pack(">i", 0)
    with socket.create_connection(("127.0.0.1", e.port), timeout=timeout) as raw:
        with ctx.wrap_socket(raw, server_hostname=servername) as s:
            s.settimeout(timeout)
            s.sendall(struct.pack(">i", len(req)) + req)
            (size,) = struct.unpack(">i", _recv_exact(s, 4))
            b = _recv_exact(s, size)
    assert struct.unpack_from(">i", b, 0)[0] == 77
    (nb,) = struct.unpack_from(">i", b, 4)
    off, brokers = 8, {}
    for _ in range(nb):
        (nid,) = struct.unpack_from(">i", b, off)
        h, off = _kstr(b, off + 4)
        brokers[nid] = (h, struct.unpack_from(">i", b, off)[0])
        off += 4
    return brokers


def test_broker_names_route_before_the_upstream_connect(sni_env):
    e = sni_env
    want = {i: (f"broker-{i}.{DOMAIN}", e.port) for i in (1, 2, 3)}
    # the bootstrap, and each broker by its name (any case), answer
    assert tls_metadata(e, BOOT_NAME) == want
    for i in (1, 2, 3):
        assert tls_metadata(e, f"broker-{i}.{DOMAIN}") == want
    assert tls_metadata(e, "BROKER-3.Kafka.Example.COM") == want
    # a well-formed broker name of a node the upstream does not have: the
    # handshake succeeds (the name is the pattern's), then the worker's
    # metadata says there is no such broker and the connection closes
    with pytest.raises((ConnectionError, ssl.SSLError, OSError)):
        tls_metadata(e, f"broker-9.{DOMAIN}")
    log = e.ferry.log_path.read_text()
    assert "upstream metadata has no broker with node id 9" in log, log[-3000:]
    assert e.ferry.metrics()[("ferry_sni_unknown_total", "S")] == 0


def test_two_workers_share_learned_brokers(mock_factory, ferry_factory, workdir):
    """workers = 2: every name reaches its upstream on either worker (both
    share the one listening socket), with no metadata fetch beyond the
    ones each worker makes at start."""
    e = _sni_setup(mock_factory, ferry_factory, workdir, ["workers = 2"])
    assert len(e.ferry.cluster("S")["workers"]) == 2
    want = {i: (f"broker-{i}.{DOMAIN}", e.port) for i in (1, 2, 3)}
    assert tls_metadata(e, BOOT_NAME) == want
    fetches = e.ferry.metrics()[("ferry_metadata_fetches_total", "S")]
    for _ in range(4):
        for i in (1, 2, 3):
            assert tls_metadata(e, f"broker-{i}.{DOMAIN}") == want
    m = e.ferry.metrics()
    assert m[("ferry_metadata_fetches_total", "S")] == fetches, m
    assert m[("ferry_connections_accepted_total", "S")] == 13
    assert m[("ferry_worker_restarts_total", "S")] == 0


def test_reload_changes_the_names_on_the_same_port(sni_env):
    """A new pattern on reload: the new generation serves the new names on
    the same listening socket; the old names are refused from then on."""
    e = sni_env
    f = e.ferry
    gen = f.cluster("S")["generation"]
    text = f.config_path.read_text().replace(f"sni_broker_pattern = {PATTERN}",
                                             f"sni_broker_pattern = kafka-$(nodeId).{DOMAIN}")
    f.config_path.write_text(text)
    r = f.ctl("--json", "reload")
    assert json.loads(r.stdout)["clustersModified"] == ["S"], r.stdout
    c = f.cluster("S")
    assert c["generation"] > gen and c["state"] == "accepting"
    assert c["sni"]["brokerPattern"] == f"kafka-$(nodeId).{DOMAIN}"
    assert [l["address"] for l in c["listeners"]] == [f"127.0.0.1:{e.port}"]
    want = {i: (f"kafka-{i}.{DOMAIN}", e.port) for i in (1, 2, 3)}
    assert tls_metadata(e, BOOT_NAME) == want
    assert tls_metadata(e, f"kafka-2.{DOMAIN}") == want
    before = f.metrics()[("ferry_sni_unknown_total", "S")]
    rc, out = s_client(e, f"broker-2.{DOMAIN}")
    assert rc != 0 and re.search(r"unrecognized.name", out), out
    assert f.metrics()[("ferry_sni_unknown_total", "S")] == before + 1


def test_config_errors(workdir):
    port = allocate_ports(1)[0]
    bad = workdir / "bad.ini"
    bad.write_text("\n".join([
        "[cluster S]",
        "upstream = 127.0.0.1:9092",
        f"bootstrap = 127.0.0.1:{port}",
        "gateway = sni",
        f"sni_bootstrap_host = {BOOT_NAME}",
        "sni_broker_pattern = broker.kafka.example.com",
        f"broker_ports = {port + 1}-{port + 2}",
    ]) + "\n")
    r = _run([str(FERRYD), "-t", "-c", str(bad)])
    assert r.returncode == 1, r
    err = r.stdout + r.stderr
    assert f"{bad}:4: gateway = sni needs client TLS" in err, err
    assert f"{bad}:6: sni_broker_pattern: 'broker.kafka.example.com' has no $(nodeId)" in err, err
    assert f"{bad}:7: broker_ports: not used with gateway = sni" in err, err
