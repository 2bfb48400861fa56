"""
TLS session resumption towards the upstream brokers.

stunnel4 terminates TLS in front of every mock broker (test_tls.py's
setup, logging at level info so each accepted handshake says "new session
negotiated" or "previous session reused"); ferry dials the stunnel ports
through upstream_dial_map with upstream_tls_verify = on. Client connections
one after another through the bootstrap port each open an upstream
connection to the same broker: after the first full handshake every one
resumes, seen from both ends (ferry_upstream_tls_resumed_total, and
stunnel's log); another broker address is another session. A broker whose
certificate changed to another name is refused although ferry holds a
session for it (the session never skips the check; that the failed
handshake drops it is unit-tested in test_tlscache.c), and a broker that
is back with a valid certificate makes a full handshake, then resumes again.
"""
import re
import socket
import subprocess
import time
from pathlib import Path

from test_tls import (PKI, Stunnel, _kafka_apiversions_frame, _recv_exact,  # noqa: F401
                      _upstream_keys, pki, wait_for)

N = 10


def _apiversions(port):
    """One client connection: ApiVersions through ferry, answered, closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.settimeout(10)
        s.sendall(_kafka_apiversions_frame())
        size = int.from_bytes(_recv_exact(s, 4), "big")
        body = _recv_exact(s, size)
        assert len(body) == size and body[:4] == b"\x00\x00\x00\x01", body[:16]


def _stunnel_counts(workdir):
    log = (Path(workdir) / "stunnel.log").read_text()
    return (len(re.findall(r"(?:SSL|TLS) accepted: new session negotiated", log)),
            len(re.findall(r"(?:SSL|TLS) accepted: previous session reused", log)))


def _m(f, name):
    return f.metrics().get((name, "A"), 0)


def test_upstream_sessions_resumed(mock_factory, ferry_factory, keeper, workdir, request, pki):
    mock = mock_factory("A", 3)
    st = Stunnel(keeper, workdir, request, *pki.issue("broker", "kafka broker", "IP:127.0.0.1"),
                 mock.ports, debug=6)
    f = ferry_factory({"A": mock}, cluster_keys=_upstream_keys(pki, mock, st))
    port = f.clusters["A"]["bootstrap"]
    _apiversions(port)  # whatever ran before (metadata fetch), one full handshake at least
    wait_for(lambda: _m(f, "ferry_upstream_tls_handshakes_total") >= 1, 10, "a handshake")
    full0, reused0 = _stunnel_counts(workdir)
    hs0 = _m(f, "ferry_upstream_tls_handshakes_total")
    res0 = _m(f, "ferry_upstream_tls_resumed_total")
    assert full0 >= 1

    for _ in range(N):
        _apiversions(port)

    # ferry's side: every one of the N resumed
    wait_for(lambda: _m(f, "ferry_upstream_tls_handshakes_total") >= hs0 + N, 10, "N handshakes")
    hs = _m(f, "ferry_upstream_tls_handshakes_total") - hs0
    res = _m(f, "ferry_upstream_tls_resumed_total") - res0
    assert res >= N and res == hs, f"{res} of {hs} upstream handshakes resumed"
    # the broker's side: the same, no new full handshake
    wait_for(lambda: _stunnel_counts(workdir)[1] >= reused0 + N, 10, "stunnel to log them")
    full, reused = _stunnel_counts(workdir)
    assert full == full0, f"stunnel made {full - full0} more full handshakes"
    assert reused - reused0 == res

    # another broker address is another key: its first connection is full
    broker = f.clusters["A"]["brokers"][1]
    _apiversions(broker)
    _apiversions(broker)
    wait_for(lambda: sum(_stunnel_counts(workdir)) >= full + reused + 2, 10, "two more")
    full2, reused2 = _stunnel_counts(workdir)
    assert (full2 - full, reused2 - reused) in ((1, 1), (0, 2)), (full2 - full, reused2 - reused)


def test_session_never_skips_a_failed_verification(mock_factory, ferry_factory, keeper, workdir,
                                                   request, pki):
    """The broker behind the same address starts showing a certificate for
    another name: ferry holds a session for it, but the broker does not
    accept that ticket (its keys are new: a restarted stunnel), the full
    handshake fails verification, and the cached session is dropped, so it
    cannot be used to skip the check later either."""
    mock = mock_factory("A", 3)
    good = pki.issue("broker", "kafka broker", "IP:127.0.0.1")
    st = Stunnel(keeper, workdir, request, *good, mock.ports, debug=6)
    f = ferry_factory({"A": mock}, cluster_keys=_upstream_keys(pki, mock, st))
    port = f.clusters["A"]["bootstrap"]
    for _ in range(3):
        _apiversions(port)
    assert _m(f, "ferry_upstream_tls_resumed_total") >= 2

    # same ports, a certificate for another name
    keeper.terminate(st.proc)
    wrong = pki.issue("wrong", "kafka broker", "DNS:other.test")
    conf = Path(workdir) / "stunnel.conf"
    conf.write_text(conf.read_text().replace(str(good[0]), str(wrong[0]))
                    .replace(str(good[1]), str(wrong[1])))
    fails0 = _m(f, "ferry_upstream_tls_failures_total")
    st.proc = keeper.spawn("stunnel2", ["stunnel4", str(conf)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: _port_ready(st.ports[0]), 15, "stunnel again")
    res0 = _m(f, "ferry_upstream_tls_resumed_total")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.settimeout(10)
        s.sendall(_kafka_apiversions_frame())
        try:
            data = s.recv(4)
        except (ConnectionResetError, socket.timeout):
            data = b""
        assert data == b"", "answered through a broker with another name's certificate"
    wait_for(lambda: _m(f, "ferry_upstream_tls_failures_total") > fails0, 10, "the failure")
    assert _m(f, "ferry_upstream_tls_resumed_total") == res0

    # the right certificate again (another restart): one full handshake, then resumed
    keeper.terminate(st.proc)
    conf.write_text(conf.read_text().replace(str(wrong[0]), str(good[0]))
                    .replace(str(wrong[1]), str(good[1])))
    full0, reused0 = _stunnel_counts(workdir)
    st.proc = keeper.spawn("stunnel3", ["stunnel4", str(conf)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: _port_ready(st.ports[0]), 15, "stunnel once more")
    wait_for(lambda: _try_apiversions(port), 20, "served again")
    _apiversions(port)
    full, reused = _stunnel_counts(workdir)
    assert reused > reused0, "not resumed after the broker came back"


def _port_ready(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def _try_apiversions(port):
    try:
        _apiversions(port)
        return True
    except (OSError, AssertionError):
        time.sleep(0.2)
        return False
