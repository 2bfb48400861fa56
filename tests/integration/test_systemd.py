"""
systemd notify protocol: ferryd started with NOTIFY_SOCKET pointing at an
AF_UNIX datagram socket owned by the test (as systemd's is) sends READY=1
once serving, RELOADING=1 + MONOTONIC_USEC at the start of a reload and
READY=1 + STATUS= with the outcome at its end (also when the reload fails),
STATUS= with cluster counts, and STOPPING=1 on SIGTERM; every datagram comes
from ferryd's main pid (NotifyAccess=main), none from a worker.

    FERRY_BUILD=$PWD/build /usr/bin/python3 -m pytest -q tests/integration/test_systemd.py

supervisor/notify.c speaks the protocol (unit-tested in tests/unit/
test_notify.c); supervisor/sup_io.c calls it from the engine's
lifecycle hooks (ready, reload begin/end, stopping) and after every event
chain for STATUS=.
"""

import os
import signal
import socket
import struct
import time

import pytest

from conftest import allocate_ports

SO_PASSCRED = getattr(socket, "SO_PASSCRED", 16)
SCM_CREDENTIALS = getattr(socket, "SCM_CREDENTIALS", 2)



class NotifySocket:
    """The test's stand-in for systemd's notify socket."""

    def __init__(self, path):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_PASSCRED, 1)
        self.got = []  # [(pid, {key: value}, raw)]

    def close(self):
        self.sock.close()

    def _recv(self, timeout):
        self.sock.settimeout(max(timeout, 0.001))
        try:
            data, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(12))
        except socket.timeout:
            return None
        pid = None
        for level, typ, cdata in anc:
            if level == socket.SOL_SOCKET and typ == SCM_CREDENTIALS:
                pid, _, _ = struct.unpack("iII", cdata[:12])
        text = data.decode()
        kv = dict(line.split("=", 1) for line in text.split("\n") if "=" in line)
        msg = (pid, kv, text)
        self.got.append(msg)
        return msg

    def wait(self, pred, timeout, what):
        """Receives until a datagram satisfies pred(kv); returns it and the
        ones received before it (in order)."""
        deadline = time.monotonic() + timeout
        seen = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {what} within {timeout}s; got {[m[2] for m in seen]!r}")
            m = self._recv(left)
            if m is None:
                continue
            seen.append(m)
            if pred(m[1]):
                return m, seen


def mono_us():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


@pytest.fixture
def notify_sock(workdir):
    n = NotifySocket(workdir / "notify.sock")
    yield n
    n.close()


def test_notify_ready_reload_failed_reload_stopping(mock_factory, reload_ferry_factory,
                                                     notify_sock, workdir):
    up = mock_factory("up", brokers=3)
    env = dict(os.environ, NOTIFY_SOCKET=notify_sock.path)
    f = reload_ferry_factory({"a": up, "b": up}, start=False)
    f.start(env=env)  # returns once `ferryctl ready` says ready
    main_pid = f.proc.pid

    # READY=1 once serving; STATUS= names the cluster count.
    m, _ = notify_sock.wait(lambda kv: kv.get("READY") == "1", 5, "READY=1 at startup")
    code, _, _ = f.http("/admin/ready")
    assert code == 200
    statuses = [kv["STATUS"] for _, kv, _ in notify_sock.got if "STATUS" in kv]
    assert any("2" in s and "cluster" in s for s in statuses), statuses

    # A successful reload: RELOADING=1 + MONOTONIC_USEC, then READY=1 + STATUS.
    f.spec["a"]["extra"]["max_connections"] = "5000"
    f.write()
    t0 = mono_us()
    r = f.reload_ctl()
    t1 = mono_us()
    assert r.returncode == 0, r.stdout + r.stderr
    m, _ = notify_sock.wait(lambda kv: kv.get("RELOADING") == "1", 5, "RELOADING=1")
    usec = int(m[1]["MONOTONIC_USEC"])
    assert t0 - 1_000_000 <= usec <= t1, (t0, usec, t1)
    m, _ = notify_sock.wait(lambda kv: kv.get("READY") == "1", 5, "READY=1 after the reload")
    assert m[1].get("STATUS"), f"READY=1 after a reload carries STATUS=: {m[2]!r}"

    # A reload that fails (a port held): READY=1 with a STATUS saying so.
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        ports = allocate_ports(4)
        held.bind(("127.0.0.1", ports[0]))
        held.listen(1)
        f.clusters["c"] = {"bootstrap": ports[0], "brokers": ports[1:],
                           "node_ids": [1, 2, 3]}
        f.spec["c"] = {"upstream": up.bootstrap, "extra": {}}
        f.write()
        r = f.reload_ctl()
        assert r.returncode == 1, r.stdout + r.stderr
    finally:
        held.close()
    notify_sock.wait(lambda kv: kv.get("RELOADING") == "1", 5, "RELOADING=1 (failing reload)")
    m, _ = notify_sock.wait(lambda kv: kv.get("READY") == "1", 5, "READY=1 after the failed reload")
    status = m[1].get("STATUS", "")
    assert "fail" in status.lower() or "rolled back" in status.lower(), m[2]

    # SIGTERM: STOPPING=1, then ferryd exits 0.
    f.proc.send_signal(signal.SIGTERM)
    notify_sock.wait(lambda kv: kv.get("STOPPING") == "1", 10, "STOPPING=1")
    assert f.proc.wait(timeout=30) == 0

    # Only ferryd's main process notifies (workers never inherit the socket).
    senders = {pid for pid, _, _ in notify_sock.got}
    assert senders == {main_pid}, (senders, main_pid)


def test_notify_abstract_socket(mock_factory, reload_ferry_factory, workdir):
    name = f"ferry-it-notify-{os.getpid()}-{time.monotonic_ns()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    try:
        up = mock_factory("up", brokers=3)
        f = reload_ferry_factory({"a": up}, start=False)
        f.start(env=dict(os.environ, NOTIFY_SOCKET="@" + name))
        sock.settimeout(5)
        msgs = []
        while not any(m.startswith("READY=1") or "\nREADY=1" in m for m in msgs):
            msgs.append(sock.recv(4096).decode())
    finally:
        sock.close()


def test_no_notify_socket_no_harm(mock_factory, reload_ferry_factory):
    """Without NOTIFY_SOCKET (or with one nobody listens on) ferryd runs,
    reloads and stops as before."""
    up = mock_factory("up", brokers=3)
    env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    env["NOTIFY_SOCKET"] = "/nonexistent/notify.sock"
    f = reload_ferry_factory({"a": up}, start=False)
    f.start(env=env)
    f.spec["a"]["extra"]["max_connections"] = "5000"
    f.write()
    assert f.reload_ctl().returncode == 0
    f.proc.send_signal(signal.SIGTERM)
    assert f.proc.wait(timeout=30) == 0
    # Logged once, not per notification; never fatal.
    assert f.log_text().count("systemd notification not sent") <= 1
