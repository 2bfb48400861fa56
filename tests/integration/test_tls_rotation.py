"""
Certificate rotation without a dropped handshake, and TLS sessions that
resume across reloads and worker restarts (issue 11, item 4).

A throwaway CA and two server certificates (different serials and notAfter)
are made with the `openssl` CLI. The cert and key files of a TLS cluster are
replaced and `ferryctl reload` runs while a client thread keeps making TLS
connections (a full handshake and one Kafka ApiVersions exchange each): not
one fails, and the new certificate (its serial, its notAfter, also in
`tls.notAfter`) is what the same port serves afterwards. Sessions saved
before the reload (TLS 1.2 and TLS 1.3, tickets) resume after it
(`session_reused`), and again after a SIGKILL of the worker: the
session-ticket keys are the supervisor's, handed to every generation.
"""

import datetime
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import threading
import time

from conftest import serving_pids, wait_for, workers_keys


def openssl(*args, cwd):
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


class PKI:
    def __init__(self, d):
        self.d = d
        d.mkdir()
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", "ca.key", "-out", "ca.pem", "-days", "30",
                "-subj", "/CN=ferry rotation test CA",
                "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
        self.ca = d / "ca.pem"

    def issue(self, name, serial, days):
        (self.d / f"{name}.ext").write_text(
            "basicConstraints=CA:FALSE\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n")
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", "/CN=localhost",
                cwd=self.d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-set_serial", str(serial), "-days", str(days), "-extfile", f"{name}.ext",
                "-out", f"{name}.pem", cwd=self.d)
        return self.d / f"{name}.pem", self.d / f"{name}.key"


class ClosedEarly(Exception):
    """The server closed cleanly before any byte of the response."""


def api_versions(s):
    """One ApiVersions v0 request/response over s (reading also takes in
    the TLS 1.3 session tickets the server sent after the handshake)."""
    req = struct.pack(">hhih", 18, 0, 77, 4) + b"rot1"
    s.sendall(struct.pack(">i", len(req)) + req)
    hdr = b""
    while len(hdr) < 4:
        d = s.recv(4 - len(hdr))
        if not d and not hdr:
            raise ClosedEarly()
        assert d, "closed in the response header"
        hdr += d
    (n,) = struct.unpack(">i", hdr)
    body = b""
    while len(body) < n:
        d = s.recv(n - len(body))
        assert d, "closed in the response"
        body += d
    (cid,) = struct.unpack_from(">i", body, 0)
    assert cid == 77, cid
    return body


def client_ctx(pki, version):
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    ctx.check_hostname = True
    if version == "1.2":
        ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    else:
        ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_3
    return ctx


def connect(ctx, port, session=None, timeout=5.0):
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s = ctx.wrap_socket(raw, server_hostname="localhost", session=session)
    return s


def served_cert(ctx, port):
    """(serial, notAfter as unix s) of the certificate a full handshake gets."""
    with connect(ctx, port) as s:
        der = s.getpeercert(binary_form=True)
        info = s.getpeercert()
    assert der
    serial = int(info["serialNumber"], 16)
    not_after = int(ssl.cert_time_to_seconds(info["notAfter"]))
    return serial, not_after


def saved_session(ctx, port):
    """A session (with its ticket) from a full handshake plus one request."""
    with connect(ctx, port) as s:
        api_versions(s)
        api_versions(s)
        sess = s.session
        assert not s.session_reused
    assert sess is not None
    return sess


def resumes(ctx, port, sess):
    with connect(ctx, port, session=sess) as s:
        api_versions(s)
        return s.session_reused


class HandshakeLoop(threading.Thread):
    """Connects over and over (full handshakes, alternating TLS 1.2 and 1.3,
    one ApiVersions each) until stopped; records every failure."""

    def __init__(self, ctxs, port):
        super().__init__(daemon=True)
        self.ctxs, self.port = ctxs, port
        self.ok = 0
        self.failures = []      # handshakes that failed, or anything unclean
        self.drained = 0        # handshake done, then a clean TLS close before the
                                # request was read (the draining generation closes
                                # a connection that owes nothing: a request boundary)
        self.serials = set()
        self.stop_ev = threading.Event()

    def run(self):
        i = 0
        while not self.stop_ev.is_set():
            ctx = self.ctxs[i % len(self.ctxs)]
            i += 1
            try:
                s = connect(ctx, self.port)  # the handshake completes here
            except Exception as e:  # noqa: BLE001 -- every failure is the finding
                self.failures.append(f"{time.monotonic():.3f} handshake: "
                                     f"{type(e).__name__}: {e}")
                continue
            try:
                with s:
                    self.serials.add(int(s.getpeercert()["serialNumber"], 16))
                    api_versions(s)
                self.ok += 1
            except (ssl.SSLZeroReturnError, ClosedEarly):
                self.drained += 1
            except Exception as e:  # noqa: BLE001
                self.failures.append(f"{time.monotonic():.3f} request: {type(e).__name__}: {e}")

    def stop(self):
        self.stop_ev.set()
        self.join(15)
        assert not self.is_alive()


def rfc3339_unix(s):
    base = s[:-1].split(".")[0]
    t = datetime.datetime.strptime(base, "%Y-%m-%dT%H:%M:%S")
    return int(t.replace(tzinfo=datetime.timezone.utc).timestamp())


def test_rotation_zero_failed_handshakes_and_sessions_resume(mock_factory, ferry_factory,
                                                            workdir, workers_n):
    pki = PKI(workdir / "pki")
    old_cert, old_key = pki.issue("old", 0x1111, 20)
    new_cert, new_key = pki.issue("new", 0x2222, 300)
    live_cert, live_key = workdir / "pki" / "live.pem", workdir / "pki" / "live.key"
    shutil.copy(old_cert, live_cert)
    shutil.copy(old_key, live_key)

    mock = mock_factory("R", 3)
    f = ferry_factory({"R": mock}, start=False, cluster_keys=workers_keys(workers_n))
    text = f.config_text.replace(
        "[cluster R]\n", f"[cluster R]\ntls_cert = {live_cert}\ntls_key = {live_key}\n")
    f.config_path.write_text(text)
    f.start()
    port = f.clusters["R"]["bootstrap"]
    ctx12, ctx13 = client_ctx(pki, "1.2"), client_ctx(pki, "1.3")

    assert served_cert(ctx13, port)[0] == 0x1111
    sessions = {v: saved_session(c, port) for v, c in (("1.2", ctx12), ("1.3", ctx13))}
    for v, c in (("1.2", ctx12), ("1.3", ctx13)):
        assert resumes(c, port, sessions[v]), f"TLS {v}: no resumption even before a reload"
    gen0 = f.cluster("R")["generation"]

    loop = HandshakeLoop([ctx12, ctx13], port)
    loop.start()
    time.sleep(1.0)
    # renew: new files at the same paths, then reload
    shutil.copy(new_cert, live_cert)
    shutil.copy(new_key, live_key)
    r = f.ctl("reload")
    assert "R" in r.stdout, r.stdout
    wait_for(lambda: f.cluster("R")["generation"] > gen0 and serving_pids(f.cluster("R")), 10,
             what="the new generation serving")
    wait_for(lambda: served_cert(ctx13, port)[0] == 0x2222, 10, what="the new certificate")
    time.sleep(1.0)
    loop.stop()
    print(f"handshake loop: {loop.ok} ok, {len(loop.failures)} failed, {loop.drained} "
          f"closed by the drain before a request, serials "
          f"{sorted(hex(s) for s in loop.serials)}")
    assert loop.failures == [], loop.failures[:10]
    assert loop.ok >= 20, loop.ok
    assert loop.serials == {0x1111, 0x2222}, loop.serials

    serial, not_after = served_cert(ctx12, port)
    assert serial == 0x2222
    want_na = int(ssl.cert_time_to_seconds(
        ssl._ssl._test_decode_cert(str(new_cert))["notAfter"]))
    assert not_after == want_na
    assert rfc3339_unix(f.cluster("R")["tls"]["notAfter"]) == want_na

    for v, c in (("1.2", ctx12), ("1.3", ctx13)):
        assert resumes(c, port, sessions[v]), f"TLS {v}: session from before the reload " \
                                              "did not resume after it"

    # a worker restart: the new process gets the same ticket keys (with
    # workers = 2, every worker is killed in turn: whichever accepts, it
    # resumes)
    for pid in serving_pids(f.cluster("R")):
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: pid not in serving_pids(f.cluster("R")) and
                 len(serving_pids(f.cluster("R"))) == workers_n, 10,
                 what="the replacement worker")
    for v, c in (("1.2", ctx12), ("1.3", ctx13)):
        ok = wait_for(lambda: resumes(c, port, sessions[v]), 10,
                      what=f"TLS {v} resumption after the worker restart")
        assert ok


def test_ticket_key_rotation_schedule(mock_factory, ferry_factory, workdir):
    """tls_ticket_rotation: a ticket resumes while its key is one of the
    last three (the current one and the two before it), and no longer after
    that; fresh tickets resume all along. A reload applies a new period."""
    pki = PKI(workdir / "pki")
    cert, key = pki.issue("srv", 0x3333, 30)
    mock = mock_factory("K", 3)
    f = ferry_factory({"K": mock}, start=False, extra_ferry="tls_ticket_rotation = 2s")
    text = f.config_text.replace(
        "[cluster K]\n", f"[cluster K]\ntls_cert = {cert}\ntls_key = {key}\n")
    f.config_path.write_text(text)
    f.start()
    port = f.clusters["K"]["bootstrap"]
    ctxs = {"1.2": client_ctx(pki, "1.2"), "1.3": client_ctx(pki, "1.3")}

    def rotations():
        return f.log_path.read_text(errors="replace").count("session-ticket keys rotated")

    def next_rotation():
        n = rotations()
        assert wait_for(lambda: rotations() > n, 5, what="a rotation")

    # right after a rotation: the tickets are made with the newest key
    next_rotation()
    sessions = {v: saved_session(c, port) for v, c in ctxs.items()}
    # one rotation later their key is the second of three: they resume
    next_rotation()
    for v, c in ctxs.items():
        assert resumes(c, port, sessions[v]), f"TLS {v}: one rotation later, no resumption"
    # two more rotations: their key is gone; a full handshake instead (no
    # failure), and a fresh ticket resumes
    next_rotation()
    next_rotation()
    for v, c in ctxs.items():
        assert not resumes(c, port, sessions[v]), \
            f"TLS {v}: resumed with a key that should have been wiped"
        assert resumes(c, port, saved_session(c, port)), f"TLS {v}: a fresh ticket did not resume"

    # a reload to 1h: no rotation for the next few seconds
    f.config_path.write_text(text.replace("tls_ticket_rotation = 2s", "tls_ticket_rotation = 1h"))
    r = f.ctl("reload")
    assert r.returncode == 0, r.stdout + r.stderr
    n = rotations()
    time.sleep(4.5)
    assert rotations() == n, "tls_ticket_rotation = 1h did not apply on reload"
    # and a malformed period is refused with its line
    f.config_path.write_text(text.replace("tls_ticket_rotation = 2s", "tls_ticket_rotation = 0"))
    r = f.ctl("reload", check=False)
    assert r.returncode != 0
    assert re.search(r"ferry\.ini:\d+: tls_ticket_rotation: '0' out of range \(1s-168h\)",
                     r.stdout + r.stderr), r.stdout + r.stderr
