"""
PROXY protocol headers from a real sender: Debian's haproxy, in TCP mode,
relays clients to a recording listener with `send-proxy`, `send-proxy-v2`
(also with its crc32c / unique-id / ssl TLVs, and before a TLS ClientHello
it passes through) and `check-send-proxy` health checks (LOCAL). Each header
goes through ferry's parser (tests/peers/pp_parse, worker/proxyproto.c),
which must find the client's real address and port (the client socket's
own) and the frontend's, and end the header exactly where haproxy's framing
does.

The headers tests/integration/proxyproto.py builds (for the tests that will
drive ferry with them) are checked against the same parser, hostile ones
included, so a builder bug cannot hide a parser bug or the reverse.
"""

import subprocess

import pytest

from conftest import BUILD, register_log
from proxyproto import (HAProxy, HAPROXY, Recorder, drain, header_len, send_through, tlv, v1,
                        v2, PP2_TYPE_AUTHORITY, PP2_TYPE_NOOP, PP2_TYPE_UNIQUE_ID)

PP_PARSE = BUILD / "tests" / "peers" / "pp_parse"


def parse(data):
    out = subprocess.run([str(PP_PARSE)], input=data, capture_output=True, timeout=10,
                         check=True).stdout.decode().strip()
    return dict(kv.split("=", 1) for kv in out.split())


def addr(host, port):
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@pytest.fixture
def haproxy(keeper, workdir, request):
    assert HAPROXY and subprocess.run([HAPROXY, "-v"], capture_output=True).returncode == 0, \
        "haproxy is not installed (scripts/install-deps installs it)"
    routes = [
        ("v1_4", "127.0.0.1", "send-proxy"),
        ("v1_6", "::1", "send-proxy"),
        ("v2_4", "127.0.0.1", "send-proxy-v2"),
        ("v2_6", "::1", "send-proxy-v2"),
        ("v2_tlvs", "127.0.0.1", "send-proxy-v2 proxy-v2-options crc32c,unique-id,ssl"),
        ("v2_check", "127.0.0.1", "send-proxy-v2 check check-send-proxy inter 300ms"),
    ]
    recs = [Recorder(host) for _, host, _ in routes]
    request.addfinalizer(lambda: [r.close() for r in recs])
    hap = HAProxy(workdir, [(n, h, o, r) for (n, h, o), r in zip(routes, recs)])
    register_log(request, "haproxy", hap.log)
    return hap.start(keeper.spawn)


@pytest.mark.parametrize("route", ["v1_4", "v1_6", "v2_4", "v2_6", "v2_tlvs"])
def test_haproxy_header_carries_the_client_address(haproxy, route):
    drain(haproxy.route(route)[2], quiet=0.05)
    first = b"\x00\x00\x00\x0e\x00\x12\x00\x00\x00\x00\x00\x01\x00\x04test"  # ApiVersions v0
    client, front, data = send_through(haproxy, route, payload=first)
    assert data.endswith(first)
    r = parse(data)
    assert r["status"] == "ok", r
    assert r["version"] == ("1" if route.startswith("v1") else "2")
    assert r["command"] == "PROXY"
    assert r["family"] == ("TCP6" if route.endswith("6") else "TCP4")
    assert r["src"] == addr(*client), (r, client)
    assert r["dst"] == addr(*front), (r, front)
    assert int(r["len"]) == header_len(data) == len(data) - len(first)
    assert int(r["tlvs"]) == (3 if route == "v2_tlvs" else 0)


@pytest.mark.parametrize("route", ["v1_4", "v2_4"])
def test_haproxy_header_then_tls_client_hello(haproxy, route):
    drain(haproxy.route(route)[2], quiet=0.05)
    client, _, data = send_through(haproxy, route, tls_sni="bootstrap.kafka.example.com")
    r = parse(data)
    assert r["status"] == "ok", r
    assert r["src"] == addr(*client)
    n = int(r["len"])
    assert data[n:n + 2] == b"\x16\x03", data[n:n + 8]     # the ClientHello, untouched
    assert b"bootstrap.kafka.example.com" in data[n:]


def test_haproxy_health_check_is_local(haproxy):
    rec = haproxy.route("v2_check")[2]
    for _ in range(20):
        data = rec.take(timeout=5.0)
        if len(data) >= 13 and data[12] == 0x20:
            break
    else:
        raise AssertionError("no LOCAL health check from haproxy")
    r = parse(data)
    assert r == {"status": "ok", "version": "2", "command": "LOCAL", "family": "UNSPEC",
                 "src": "-", "dst": "-", "len": "16", "tlvs": "0"}, r


def test_built_headers_parse():
    cases = [
        (v1("192.0.2.1", "10.0.0.1", 40000, 9092),
         dict(version="1", family="TCP4", src="192.0.2.1:40000", dst="10.0.0.1:9092")),
        (v1("2001:db8::1", "::1", 1, 65535),
         dict(version="1", family="TCP6", src="[2001:db8::1]:1", dst="[::1]:65535")),
        (v1(proto="UNKNOWN"), dict(version="1", command="UNKNOWN", family="UNSPEC", src="-")),
        (v2("192.0.2.1", "10.0.0.1", 40000, 9092),
         dict(version="2", family="TCP4", src="192.0.2.1:40000", len="28")),
        (v2("2001:db8::1", "2001:db8::2", 5, 6), dict(family="TCP6", src="[2001:db8::1]:5")),
        (v2(b"/run/c.sock", b"\0abstract"),
         dict(family="UNIX", src="unix:/run/c.sock", dst="unix:@abstract")),
        (v2(command=0), dict(command="LOCAL", family="UNSPEC", len="16")),
        (v2("192.0.2.1", "10.0.0.1", 1, 2, tlvs=[(PP2_TYPE_AUTHORITY, b"b.example.com"),
                                               (PP2_TYPE_UNIQUE_ID, b"id-1"),
                                               (PP2_TYPE_NOOP, b"")], crc=True),
         dict(family="TCP4", tlvs="4")),
    ]
    for data, want in cases:
        r = parse(data + b"\x00\x00\x00\x2a")
        assert r["status"] == "ok", (data, r)
        assert int(r["len"]) == len(data)
        for k, v in want.items():
            assert r[k] == v, (data, k, r)


def test_built_hostile_headers_refused():
    good = v2("192.0.2.1", "10.0.0.1", 1, 2, crc=True)
    bad_crc = good[:-1] + bytes([good[-1] ^ 1])
    cases = [
        (v2("192.0.2.1", "10.0.0.1", 1, 2, length=0xFFFF)[:16], "v2_too_large"),
        (v2("192.0.2.1", "10.0.0.1", 1, 2, length=0xFFFF) + bytes(65535 - 12), "v2_too_large"),
        (bad_crc, "v2_crc"),
        (v2("192.0.2.1", "10.0.0.1", 1, 2, version=1), "v2_version"),
        (v2("192.0.2.1", "10.0.0.1", 1, 2, command=2), "v2_command"),
        (v2(raw_block=b"\x01" * 11, fam=0x11), "v2_length"),
        (v2("192.0.2.1", "10.0.0.1", 1, 2, tlvs=[(1, b"x")])[:-1], "need-more"),
        (v1("192.0.2.1", "10.0.0.1", 65536, 1), "v1_port"),
        (v1("192.0.2.1", "10.0.0.1", 1, 2)[:-2] + b"\n", "v1_syntax"),
        (b"PROXY UNKNOWN " + b"x" * 200, "v1_too_long"),
        (b"\x16\x03\x01\x02\x00", "not_proxy"),
        (b"\x00\x00\x00\x2a\x00\x12", "not_proxy"),
        (tlv(1, b"x"), "not_proxy"),
    ]
    for data, reason in cases:
        r = parse(data)
        if reason == "need-more":
            assert r["status"] == "need-more", r
        else:
            assert r == {"status": "malformed", "reason": reason}, (data[:40], r)
