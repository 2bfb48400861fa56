"""
PROXY protocol on client listeners (proxy_protocol, proxy_protocol_from),
end to end with Debian's haproxy in TCP mode in front of ferry, as behind
a network load balancer:

    kcat (127.0.0.2) -> haproxy 127.0.0.1:PORT --send-proxy[-v2], source
    127.0.0.3--> ferry 127.0.0.5:PORT -> mock cluster

ferry advertises 127.0.0.1 and the same ports, so every broker connection
goes through haproxy too. The client comes from 127.0.0.2 (an LD_PRELOAD
shim binds its sockets, tests/peers/srcbind.c) and haproxy from 127.0.0.3
(the only trusted network): the real address seen in ferry's log lines and
in GET /admin/clusters/NAME/connections can only come from the header.

Checked: v1 and v2 over plaintext and TLS (haproxy passes TLS through,
ferry terminates it after the header) and with the SNI gateway; required
(no header, or an untrusted peer: refused and counted by reason),
optional (direct clients served, a header from an untrusted peer
refused); v2 LOCAL (a health check) keeps the socket's address; hostile
headers (truncated, 64 KiB, wrong signature, a v1 line with no end, slow)
close only their own connection within the handshake deadline while a
producer through haproxy loses nothing; the header and the TLS handshake
share one deadline; a reload hands a connection over with its real
address.

    FERRY_BUILD=$PWD/build /usr/bin/python3 -m pytest -q -p no:cacheprovider \
        tests/integration/test_proxy_protocol.py
"""

import json
import os
import re
import shutil
import socket
import ssl
import struct
import subprocess
import threading
import time

import pytest

from conftest import (ReloadFerry, recv_kframe, register_log, wait_closed, wait_for)
from proxyproto import HAPROXY, v1, v2
from srcbind import srcbind_env

LB = "127.0.0.3"          # haproxy's source: the one trusted network
CLIENT = "127.0.0.2"      # the client's real address
FERRY_HOST = "127.0.0.5"  # where ferry listens, behind haproxy
TOPIC = "pp-e2e"
TIMEOUT_S = 3             # request_timeout: the handshake deadline


# --------------------------------------------------------------------------
# ferry behind a balancer, haproxy in front of it
# --------------------------------------------------------------------------

class EdgeFerry(ReloadFerry):
    """ferry listening on FERRY_HOST, advertising 127.0.0.1 (haproxy) on the
    same ports."""

    def render(self, ferry_keys=None, spec=None, clusters=None):
        text = super().render(ferry_keys, spec, clusters)
        text = text.replace("bootstrap = 127.0.0.1:", f"bootstrap = {FERRY_HOST}:")
        if "gateway = sni" in text:  # one listener, brokers by server name
            text = "\n".join(line for line in text.splitlines() if not line.startswith(
                ("advertised_host", "broker_ports", "node_ids"))) + "\n"
        return text

    def direct(self, name="A"):
        return (FERRY_HOST, self.clusters[name]["bootstrap"])


def start_haproxy(keeper, workdir, request, ports, opts):
    """haproxy in TCP mode: 127.0.0.1:P -> FERRY_HOST:P for every port,
    `opts` on the server line (send-proxy / send-proxy-v2), from LB."""
    assert shutil.which("haproxy") or os.path.exists(HAPROXY), \
        "haproxy is not installed (scripts/install-deps installs it)"
    lines = ["global", "    maxconn 200", "defaults", "    mode tcp",
             "    timeout connect 2s", "    timeout client 60s", "    timeout server 60s"]
    for p in ports:
        lines += [f"frontend f{p}", f"    bind 127.0.0.1:{p}", f"    default_backend b{p}",
                  f"backend b{p}", f"    server s{p} {FERRY_HOST}:{p} {opts} source {LB}"]
    cfg = workdir / "haproxy.cfg"
    cfg.write_text("\n".join(lines) + "\n")
    subprocess.run([HAPROXY, "-c", "-q", "-f", str(cfg)], check=True, timeout=20)
    log = workdir / "haproxy.log"
    register_log(request, "haproxy", log)
    with open(log, "wb") as lf:
        proc = keeper.spawn("haproxy", [HAPROXY, "-db", "-f", str(cfg)], stdout=lf,
                            stderr=subprocess.STDOUT)

    def listening():
        assert proc.poll() is None, "haproxy exited: " + log.read_text()[-2000:]
        try:
            socket.create_connection(("127.0.0.1", ports[0]), timeout=0.5).close()
            return True
        except OSError:
            return False
    wait_for(listening, 10, what="haproxy listening")
    return proc


@pytest.fixture
def edge(keeper, workdir, request, mock_factory):
    """edge(keys, opts=None): mock + EdgeFerry with cluster keys `keys` (+
    debug logs), and haproxy with server options `opts` when given."""
    def make(keys, opts=None, tls=None):
        mock = mock_factory("A", 3, [f"{TOPIC}:3"])
        extra = {"request_timeout": f"{TIMEOUT_S}s", **keys}
        if tls:
            extra.update({"tls_cert": tls.server[0], "tls_key": tls.server[1]})
        f = EdgeFerry(keeper, workdir, {"A": mock}, ferry_extra={"log_level": "debug"},
                      cluster_extra={"A": extra})
        register_log(request, "ferryd", f.log_path)
        f.start()
        c = f.clusters["A"]
        hap = start_haproxy(keeper, workdir, request, [c["bootstrap"]] + c["brokers"],
                            opts) if opts else None
        return f, mock, hap
    return make


REQUIRED = {"proxy_protocol": "required", "proxy_protocol_from": f"{LB}/32"}
OPTIONAL = {"proxy_protocol": "optional", "proxy_protocol_from": f"{LB}/32"}


# --------------------------------------------------------------------------
# Kafka frames by hand
# --------------------------------------------------------------------------

def apiversions_v3(corr, client_id, name, version):
    """ApiVersions v3: request header v2 (client id, no tags), then the
    compact ClientSoftwareName / ClientSoftwareVersion and no tags."""
    cid = client_id.encode()
    body = (bytes([len(name) + 1]) + name.encode() + bytes([len(version) + 1])
            + version.encode() + b"\x00")
    payload = struct.pack(">hhih", 18, 3, corr, len(cid)) + cid + b"\x00" + body
    return struct.pack(">i", len(payload)) + payload


def connect_from(addr, target, timeout=10.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((addr, 0))
    s.connect(target)
    return s


def tls_wrap(s, cafile, server_name=None):
    ctx = ssl.create_default_context(cafile=str(cafile))
    ctx.check_hostname = server_name is not None
    if server_name is None:
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx.wrap_socket(s, server_hostname=server_name or "127.0.0.1")


def probe(s, client_id, corr=1):
    """ApiVersions v3 naming the software ferry-it 1.0; the answer's
    correlation id."""
    s.sendall(apiversions_v3(corr, client_id, "ferry-it", "1.0"))
    resp = recv_kframe(s, timeout=10)
    (got,) = struct.unpack(">i", resp[:4])
    assert got == corr
    return resp


def listing(f, **params):
    qs = "&".join(f"{k}={v}" for k, v in params.items())
    code, _, body = f.http(f"/admin/clusters/A/connections{'?' + qs if qs else ''}")
    assert code == 200, (code, body)
    return json.loads(body)


def rejected(f, reason):
    code, _, body = f.http("/metrics")
    m = re.search(rf'^ferry_connections_rejected_total\{{cluster="A",reason="{reason}"\}} (\d+)$',
                  body.decode(), re.M)
    return int(m.group(1)) if m else None


def metric_line(f, pattern):
    code, _, body = f.http("/metrics")
    m = re.search(pattern, body.decode(), re.M)
    return int(m.group(1)) if m else None


def kcat(args, env, tls=None, timeout=60, stdin=None):
    argv = ["kcat"]
    if tls:
        argv += ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={tls.ca}"]
    return subprocess.run(argv + args, input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=env,
                          stdin=None if stdin is not None else subprocess.DEVNULL)


# --------------------------------------------------------------------------
# kcat behind haproxy: v1 and v2, plaintext and TLS
# --------------------------------------------------------------------------

@pytest.fixture
def pki(workdir):
    from test_tls import PKI
    p = PKI(workdir / "pki")
    p.server = p.issue("server", "ferry.test", "DNS:localhost,IP:127.0.0.1")
    return p


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("use_tls", [False, True], ids=["plain", "tls"])
def test_kcat_behind_haproxy(edge, pki, version, use_tls):
    tls = pki if use_tls else None
    f, mock, _ = edge(REQUIRED, "send-proxy" if version == 1 else "send-proxy-v2", tls=tls)
    env = srcbind_env(CLIENT)
    boot = f.bootstrap("A")  # haproxy's address

    # produce and consume through the balancer, every broker connection too
    lines = "".join(f"k{i}\tv{i}\n" for i in range(200))
    r = kcat(["-P", "-b", boot, "-t", TOPIC, "-K", "\t"], env, tls, stdin=lines)
    assert r.returncode == 0, r.stderr[-2000:]
    r = kcat(["-C", "-b", boot, "-t", TOPIC, "-o", "beginning", "-e", "-q", "-f", "%k=%s\n"],
             env, tls)
    assert r.returncode == 0, r.stderr[-2000:]
    got = sorted(r.stdout.split())
    assert got == sorted(f"k{i}=v{i}" for i in range(200)), got[:5]

    # ferry's log lines name the client, not the balancer
    log = f.log_text()
    heads = re.findall(rf"PROXY header.*client=({re.escape(CLIENT)}:\d+) via=({LB}:\d+) "
                       rf"version={version} command=PROXY family=TCP4", log)
    assert len(heads) >= 4, "bootstrap and broker connections of two kcat runs\n" + log[-3000:]

    # one connection held open: listed with its real address and who it says it is
    s = connect_from(CLIENT, ("127.0.0.1", f.clusters["A"]["bootstrap"]))
    if tls:
        s = tls_wrap(s, pki.ca)
    probe(s, "pp-probe")
    me = "%s:%d" % s.getsockname()[:2]
    doc = wait_for(lambda: (lambda d: d if d["total"] == 1 else None)(
        listing(f, client_id="pp-probe")), 10, what="the probe listed")
    row = doc["connections"][0]
    assert row["address"] == me, (row, me)
    assert row["proxied"] is True
    assert row["tls"] is bool(tls)
    assert row["clientSoftwareName"] == "ferry-it" and row["clientSoftwareVersion"] == "1.0"
    assert row["listener"] == "bootstrap" and row["state"] == "open"

    # a close logged at warn names the real address and the balancer
    s.sendall(struct.pack(">i", 3) + b"abc")
    wait_closed(s, 10)
    s.close()
    wait_for(lambda: re.search(rf'connection closed.*reason="malformed request.*'
                               rf'client={re.escape(me)} via={LB}:\d+', f.log_text()),
             10, what="a warn close line with the real address")
    assert metric_line(f, rf'^ferry_proxy_headers_total\{{cluster="A",version="{version}"\}} (\d+)$') >= 5
    for reason in ("proxy_untrusted_source", "proxy_header_missing", "proxy_header_malformed",
                   "proxy_header_truncated", "proxy_header_timeout"):
        assert rejected(f, reason) == 0, reason


def test_sni_gateway_behind_haproxy(edge, workdir, keeper, request, mock_factory):
    from test_sni import DOMAIN, PATTERN, BOOT_NAME, in_namespace, make_certs
    if os.geteuid() != 0:
        pytest.fail("the SNI test needs root for unshare -m (a private /etc/hosts)")
    mock = mock_factory("A", 3, [f"{TOPIC}:3"])
    ca, cert, key = make_certs(workdir)
    f = EdgeFerry(keeper, workdir, {"A": mock}, ferry_extra={"log_level": "debug"},
                  cluster_extra={"A": {**REQUIRED, "tls_cert": cert, "tls_key": key,
                                       "gateway": "sni", "sni_bootstrap_host": BOOT_NAME,
                                       "sni_broker_pattern": PATTERN}})
    register_log(request, "ferryd", f.log_path)
    f.start()
    port = f.clusters["A"]["bootstrap"]
    start_haproxy(keeper, workdir, request, [port], "send-proxy-v2")
    hosts = workdir / "hosts"
    hosts.write_text("127.0.0.1 localhost " + " ".join(
        [BOOT_NAME] + [f"broker-{i}.{DOMAIN}" for i in range(10)]) + "\n")
    env = srcbind_env(CLIENT)
    tls = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={ca}"]
    boot = f"{BOOT_NAME}:{port}"
    lines = "".join(f"s{i}\n" for i in range(50))
    r = in_namespace(hosts, ["env", f"LD_PRELOAD={env['LD_PRELOAD']}",
                             f"FERRY_SRCBIND={CLIENT}", "kcat", "-P", "-b", boot, "-t", TOPIC]
                     + tls, input_text=lines)
    assert r.returncode == 0, r.stderr[-2000:]
    r = in_namespace(hosts, ["env", f"LD_PRELOAD={env['LD_PRELOAD']}",
                             f"FERRY_SRCBIND={CLIENT}", "kcat", "-C", "-b", boot, "-t", TOPIC,
                             "-o", "beginning", "-e", "-q"] + tls)
    assert r.returncode == 0, r.stderr[-2000:]
    assert sorted(r.stdout.split()) == sorted(f"s{i}" for i in range(50))
    log = f.log_text()
    assert len(re.findall(rf"PROXY header.*client={re.escape(CLIENT)}:\d+ via={LB}:\d+ "
                          r"version=2", log)) >= 3, log[-3000:]
    assert re.search(r"TLS server name.*route=broker", log), "a broker picked by its name"
    # a broker connection, open: listed by its node with the real address
    s = connect_from(CLIENT, ("127.0.0.1", port))
    s = tls_wrap(s, ca, server_name=f"broker-1.{DOMAIN}")
    probe(s, "sni-probe")
    row = wait_for(lambda: listing(f, client_id="sni-probe")["connections"], 10,
                   what="listed")[0]
    assert row["address"] == "%s:%d" % s.getsockname()[:2]
    assert row["listener"] == "broker" and row["nodeId"] == 1 and row["tls"] is True
    s.close()


# --------------------------------------------------------------------------
# required / optional / untrusted
# --------------------------------------------------------------------------

def refused(s, timeout=5.0):
    """The connection is closed without an answer."""
    data, took = wait_closed(s, timeout)
    assert data == b"", data
    return took


def test_required(edge):
    f, _, _ = edge(REQUIRED)
    target = f.direct()
    # an untrusted peer is refused at once, before reading anything
    s = connect_from("127.0.0.1", target)
    s.sendall(apiversions_v3(1, "direct", "x", "1"))
    refused(s)
    wait_for(lambda: rejected(f, "proxy_untrusted_source") == 1, 5, what="counted")
    # a trusted peer with no header: refused, missing
    s = connect_from(LB, target)
    s.sendall(apiversions_v3(1, "noheader", "x", "1"))
    refused(s)
    wait_for(lambda: rejected(f, "proxy_header_missing") == 1, 5, what="counted")
    # a v1 header: served, listed with the header's address
    s = connect_from(LB, target)
    s.sendall(v1("10.9.8.7", "10.0.0.1", 41234, 9092))
    probe(s, "v1-client")
    row = listing(f, client_id="v1-client")["connections"][0]
    assert row["address"] == "10.9.8.7:41234" and row["proxied"] is True
    # header and first request in one segment, v2 over IPv6
    s2 = connect_from(LB, target)
    s2.sendall(v2("2001:db8::7", "2001:db8::1", 4711, 9092) + apiversions_v3(1, "v2-client",
                                                                             "ferry-it", "1.0"))
    assert struct.unpack(">i", recv_kframe(s2)[:4])[0] == 1
    row = listing(f, client_id="v2-client")["connections"][0]
    assert row["address"] == "[2001:db8::7]:4711"
    # LOCAL (a balancer's health check): the socket's own address stands
    s3 = connect_from(LB, target)
    s3.sendall(v2(command=0) + apiversions_v3(1, "local-check", "x", "1"))
    recv_kframe(s3)
    row = listing(f, client_id="local-check")["connections"][0]
    assert row["address"] == "%s:%d" % s3.getsockname()[:2] and row["proxied"] is False
    for x in (s, s2, s3):
        x.close()
    assert metric_line(f, r'^ferry_proxy_headers_total\{cluster="A",version="2"\} (\d+)$') == 2


def test_optional(edge):
    f, _, _ = edge(OPTIONAL)
    target = f.direct()
    # a direct client from an untrusted network is served as it is
    r = subprocess.run(["kcat", "-L", "-b", "%s:%d" % target], capture_output=True, text=True,
                       timeout=30, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-2000:]
    # a trusted peer without a header: served, its own address
    s = connect_from(LB, target)
    probe(s, "bare")
    row = listing(f, client_id="bare")["connections"][0]
    assert row["address"] == "%s:%d" % s.getsockname()[:2] and row["proxied"] is False
    # with a header: the header's address
    s2 = connect_from(LB, target)
    s2.sendall(v2("192.0.2.44", "192.0.2.1", 5000, 9092))
    probe(s2, "headed")
    assert listing(f, client_id="headed")["connections"][0]["address"] == "192.0.2.44:5000"
    # a header from a peer outside proxy_protocol_from is refused, counted
    s3 = connect_from(CLIENT, target)
    s3.sendall(v1("203.0.113.9", "10.0.0.1", 1, 2) + apiversions_v3(1, "forged", "x", "1"))
    refused(s3)
    wait_for(lambda: rejected(f, "proxy_untrusted_source") == 1, 5, what="counted")
    assert listing(f, client_id="forged")["total"] == 0
    s.close()
    s2.close()


# --------------------------------------------------------------------------
# hostile headers: only their own connection, within the deadline
# --------------------------------------------------------------------------

def test_hostile_headers_close_only_their_connection(edge):
    from confluent_kafka import Producer
    f, _, _ = edge(REQUIRED, "send-proxy-v2")
    pids = sorted(w["pid"] for w in f.cluster_doc("A")["workers"])
    target = f.direct()

    # a producer through the balancer, all along
    results = {"ok": 0, "err": []}
    stop = threading.Event()

    def produce():
        p = Producer({"bootstrap.servers": f.bootstrap("A"), "enable.idempotence": True,
                      "linger.ms": 5, "message.timeout.ms": 30000})

        def cb(err, msg):
            if err:
                results["err"].append(str(err))
            else:
                results["ok"] += 1
        n = 0
        while not stop.is_set() or n < 200:
            p.produce(TOPIC, value=b"v%d" % n, on_delivery=cb)
            n += 1
            p.poll(0.01)
        results["sent"] = n
        p.flush(30)
    t = threading.Thread(target=produce)
    t.start()
    try:
        def closed_at_once(s, what):
            data, took = wait_closed(s, 3)
            assert took < 1.5, f"{what}: closed after {took:.2f}s, not at once"
            s.close()

        # truncated: half a v2 signature, then the client goes away
        s = connect_from(LB, target)
        s.sendall(v2("10.0.0.1", "10.0.0.2", 1, 2)[:10])
        s.close()
        # 64 KiB: a v2 header announcing 65535 bytes (refused after 16)
        s = connect_from(LB, target)
        try:
            s.sendall(v2("10.0.0.1", "10.0.0.2", 1, 2, length=0xFFFF) + b"\x00" * 65535)
        except OSError:
            pass  # (reset while sending: refused early)
        closed_at_once(s, "64 KiB")
        # wrong signature (v2 with one byte off), and a v1 line with no end
        s = connect_from(LB, target)
        s.sendall(b"\r\n\r\n\x00\r\nQUIX\n" + b"\x21\x11\x00\x0c" + b"\x00" * 12)
        closed_at_once(s, "wrong signature")
        s = connect_from(LB, target)
        s.sendall(b"PROXY UNKNOWN " + b"x" * 120)
        closed_at_once(s, "v1 without its end")
        # slow: one byte of a valid header every 0.4 s, never finished in time
        s = connect_from(LB, target)
        t0 = time.monotonic()
        slow = v1("10.0.0.1", "10.0.0.2", 1, 2)
        closed_at = None
        for b in slow:
            try:
                s.sendall(bytes([b]))
            except OSError:
                break
            r = None
            try:
                s.settimeout(0.4)
                r = s.recv(1)
            except socket.timeout:
                continue
            except OSError:
                r = b""
            if r == b"":
                closed_at = time.monotonic() - t0
                break
        if closed_at is None:
            _, took = wait_closed(s, TIMEOUT_S + 3)
            closed_at = time.monotonic() - t0
        assert TIMEOUT_S - 0.5 <= closed_at <= TIMEOUT_S + 1.5, \
            f"slow header closed after {closed_at:.2f}s (request_timeout {TIMEOUT_S}s)"
        # a truncated header left open: closed at the deadline too
        s = connect_from(LB, target)
        s.sendall(v1("10.0.0.1", "10.0.0.2", 1, 2)[:20])
        _, took = wait_closed(s, TIMEOUT_S + 3)
        assert TIMEOUT_S - 0.5 <= took <= TIMEOUT_S + 1.5, took
    finally:
        stop.set()
        t.join(90)
    assert not t.is_alive(), "producer hung"
    assert results["err"] == [], results["err"][:5]
    assert results["ok"] == results["sent"] and results["ok"] >= 200, results
    assert sorted(w["pid"] for w in f.cluster_doc("A")["workers"]) == pids, "a worker restarted"
    wait_for(lambda: rejected(f, "proxy_header_truncated") == 1, 5, what="truncated counted")
    assert rejected(f, "proxy_header_timeout") == 2      # slow, and truncated left open
    assert rejected(f, "proxy_header_malformed") == 2    # 64 KiB, v1 without its end
    assert rejected(f, "proxy_header_missing") == 1      # not a signature at all
    assert rejected(f, "proxy_untrusted_source") == 0
    log = f.log_text()
    assert "v2_too_large" in log and "v1_too_long" in log


def test_header_and_tls_share_one_deadline(edge, pki):
    f, _, _ = edge(REQUIRED, tls=pki)
    s = connect_from(LB, f.direct())
    t0 = time.monotonic()
    hdr = v1("10.0.0.9", "10.0.0.1", 1, 2)
    # most of the deadline on the header...
    s.sendall(hdr[:5])
    time.sleep(TIMEOUT_S - 1.0)
    s.sendall(hdr[5:])
    # ... then a TLS handshake that never finishes (nothing sent): the
    # connection closes at the one deadline, not one more request_timeout
    _, _ = wait_closed(s, TIMEOUT_S + 3)
    took = time.monotonic() - t0
    assert took <= TIMEOUT_S + 1.0, f"closed after {took:.2f}s: two deadlines added"
    wait_for(lambda: metric_line(f, r'^ferry_tls_handshake_failures_total\{cluster="A"\} (\d+)$')
             == 1, 5, what="counted as a TLS handshake that did not finish")


# --------------------------------------------------------------------------
# a reload hands the connection over with its real address
# --------------------------------------------------------------------------

def test_handover_keeps_the_real_address(edge):
    f, _, _ = edge(REQUIRED)
    s = connect_from(LB, f.direct())
    s.sendall(v1("198.51.100.23", "10.0.0.1", 33333, 9092))
    probe(s, "moving")
    before = listing(f, client_id="moving")["connections"][0]
    f.spec["A"]["extra"]["max_connections"] = "999"
    f.write()
    r = f.reload_ctl(json_out=True)
    assert r.returncode == 0 and json.loads(r.stdout)["status"] == "SUCCESS", r.stdout

    def moved():
        rows = listing(f, client_id="moving")["connections"]
        return rows if rows and rows[0]["generation"] != before["generation"] else None
    after = wait_for(moved, 20, what="the connection adopted by the new generation")
    assert len(after) == 1, "listed once: the old worker let go of its row"
    after = after[0]
    assert after["address"] == "198.51.100.23:33333" and after["proxied"] is True
    assert after["since"] == before["since"], "its age is kept"
    assert after["clientSoftwareName"] == "ferry-it"
    probe(s, "moving", corr=2)  # the same TCP connection still works
    s.close()
