"""The worker side of a live handover, without ferryd's supervisor.

tests/peers/handover_relay stands in for the supervisor: it starts
generation 1 of one cluster, and on command generation 2 plus IPC_HANDOVER
to generation 1, relaying CONN_OUT -> CONN_IN and CONN_TAKEN -> CONN_DONE
(see its header). The clients here speak raw Kafka to the worker.
"""
import select
import socket
import struct
import subprocess
import time

import pytest

from conftest import (BUILD, FERRYD, Ferry, _readline, _recv_exact, children_of, kill_pids,
                      pid_alive, proc_starttime, register_log)

RELAY = BUILD / "tests" / "peers" / "handover_relay"


class Relay:
    def __init__(self, keeper, workdir, request, mock):
        if not RELAY.exists():
            pytest.fail(f"{RELAY} not built")
        # Ferry only writes the config and picks the ports here: not started.
        self.ferry = Ferry(keeper, workdir, {"A": mock})
        self.log_path = self.ferry.workdir / "relay.log"
        log = open(self.log_path, "wb")
        register_log(request, "relay + workers", self.log_path)
        self.proc = keeper.spawn("relay", [RELAY, FERRYD, self.ferry.config_path, "A"],
                                 stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=log)
        line = _readline(self.proc.stdout, 20.0)
        assert line == "READY", f"relay: {line!r}"
        host, port = self.ferry.bootstrap("A").split(":")
        self.addr = (host, int(port))

    def cmd(self, line, timeout=10.0):
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()
        reply = _readline(self.proc.stdout, timeout)
        assert reply is not None, f"relay: no answer to {line!r}"
        return reply

    def status(self):
        return {k: int(v) for k, v in (f.split("=") for f in self.cmd("status").split())}

    def wait(self, pred, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.status()
            if pred(st):
                return st
            time.sleep(0.05)
        raise AssertionError(f"relay status never matched: {self.status()}")


@pytest.fixture
def relay(keeper, workdir, request, mock_factory):
    def make():
        return Relay(keeper, workdir, request, mock_factory("up", topics=("t:1",)))
    return make


def metadata_request(corr):
    client_id = b"ho-it"
    req = struct.pack(">hhih", 3, 0, corr, len(client_id)) + client_id + struct.pack(">i", 0)
    return struct.pack(">i", len(req)) + req


def read_response(s):
    (size,) = struct.unpack(">i", _recv_exact(s, 4))
    b = _recv_exact(s, size)
    return struct.unpack_from(">i", b, 0)[0]


def test_connection_moves_and_keeps_serving(relay):
    r = relay()
    s = socket.create_connection(r.addr, timeout=5)
    s.sendall(metadata_request(1))
    assert read_response(s) == 1
    assert r.cmd("handover 1 5000 1000") == "OK"
    st = r.wait(lambda st: st["handed_over"] == 1 and st["old_alive"] == 0)
    assert st["old_status"] == 0, "the old worker exits cleanly (sanitizers included)"
    assert st["adopted"] == 1 and st["taken"] == 1 and st["declined"] == 0
    assert st["forced"] == 0 and st["new_active"] == 1
    # the same TCP connection, now served by generation 2
    for corr in (2, 3):
        s.sendall(metadata_request(corr))
        assert read_response(s) == corr
    s.close()


def test_request_in_flight_then_next_on_the_new_generation(relay):
    r = relay()
    s = socket.create_connection(r.addr, timeout=10)
    s.sendall(metadata_request(1))
    assert read_response(s) == 1         # connected upstream, learned brokers
    r.ferry.upstreams["A"].command("rtt 1 800")
    r.ferry.upstreams["A"].command("rtt 2 800")
    r.ferry.upstreams["A"].command("rtt 3 800")
    t0 = time.monotonic()
    s.sendall(metadata_request(2))       # in flight at the handover
    time.sleep(0.1)
    assert r.cmd("handover 1 5000 1000") == "OK"
    s.sendall(metadata_request(3))       # sent while 2 is owed: not lost, not reordered
    assert read_response(s) == 2
    assert read_response(s) == 3
    assert time.monotonic() - t0 >= 0.8
    st = r.wait(lambda st: st["handed_over"] == 1 and st["old_alive"] == 0)
    assert st["old_status"] == 0, "the old worker exits cleanly (sanitizers included)"
    assert st["forced"] == 0 and st["adopted"] == 1
    s.close()


def test_idle_and_fresh_connections_move_at_once(relay):
    r = relay()
    socks = [socket.create_connection(r.addr, timeout=5) for _ in range(40)]
    for i, s in enumerate(socks[:20]):
        s.sendall(metadata_request(100 + i))
        assert read_response(s) == 100 + i
    # 20 idle connections that did a request, 20 that never sent a byte
    time.sleep(0.2)
    t0 = time.monotonic()
    assert r.cmd("handover 1 5000 1000") == "OK"
    st = r.wait(lambda st: st["handed_over"] == 40 and st["old_alive"] == 0)
    assert st["old_status"] == 0, "the old worker exits cleanly (sanitizers included)"
    took = time.monotonic() - t0
    assert took < 2.0, f"handover of 40 connections took {took:.2f}s"
    assert st["adopted"] == 40 and st["forced"] == 0 and st["drained"] == 0
    for i, s in enumerate(socks):
        s.sendall(metadata_request(200 + i))
        assert read_response(s) == 200 + i
        s.close()


def test_new_generation_gone_closes_cleanly_at_a_boundary(relay):
    r = relay()
    s = socket.create_connection(r.addr, timeout=5)
    s.sendall(metadata_request(1))
    assert read_response(s) == 1
    r.ferry.upstreams["A"].command("rtt 1 500")
    r.ferry.upstreams["A"].command("rtt 2 500")
    r.ferry.upstreams["A"].command("rtt 3 500")
    s.sendall(metadata_request(2))
    time.sleep(0.05)
    assert r.cmd("handover 1 5000 1000") == "OK"
    assert r.cmd("kill-new") == "OK"
    assert read_response(s) == 2          # what was owed is delivered
    s.settimeout(5)
    assert s.recv(1) == b""               # then a clean close
    st = r.wait(lambda st: st["old_alive"] == 0)
    assert st["old_status"] == 0, "the old worker exits cleanly (sanitizers included)"
    assert st["handed_over"] == 0 and st["declined"] == 1 and st["forced"] == 0
    assert st["drained"] == 1
    s.close()


def test_upstream_changed_closes_spread(relay):
    r = relay()
    socks = []
    for i in range(30):
        s = socket.create_connection(r.addr, timeout=5)
        s.sendall(metadata_request(i))
        assert read_response(s) == i
        socks.append(s)
    assert r.cmd("handover 0 8000 1500") == "OK"
    t0 = time.monotonic()
    closed_at = {}
    while len(closed_at) < len(socks) and time.monotonic() - t0 < 6:
        ready, _, _ = select.select([s for s in socks if s not in closed_at], [], [], 0.5)
        for s in ready:
            assert s.recv(1) == b"", "nothing is owed: the only event is the close"
            closed_at[s] = time.monotonic() - t0
    assert len(closed_at) == len(socks), "every connection closed"
    times = sorted(closed_at.values())
    # window = min(1500, 3/4 of 8000): uniform over 1.5 s
    assert times[-1] - times[0] >= 0.5, f"closes not spread: {times}"
    assert times[-1] <= 2.5, f"a close came after the window: {times}"
    st = r.wait(lambda st: st["old_alive"] == 0)
    assert st["old_status"] == 0, "the old worker exits cleanly (sanitizers included)"
    assert st["drained"] == 30 and st["forced"] == 0 and st["handed_over"] == 0
    for s in socks:
        s.close()


def test_supervisor_gone_mid_handover(relay):
    """The control channel closes while a connection still owes a response:
    it is delivered, then the connection closes cleanly; the worker exits."""
    r = relay()
    s = socket.create_connection(r.addr, timeout=5)
    s.sendall(metadata_request(1))
    assert read_response(s) == 1
    for b in (1, 2, 3):
        r.ferry.upstreams["A"].command(f"rtt {b} 600")
    s.sendall(metadata_request(2))
    time.sleep(0.05)
    assert r.cmd("handover 1 5000 1000") == "OK"
    workers = [(p, proc_starttime(p)) for p in children_of(r.proc.pid)]
    assert len(workers) == 2
    r.proc.kill()
    r.proc.wait(5)
    try:
        assert read_response(s) == 2
        s.settimeout(5)
        assert s.recv(1) == b""
        deadline = time.monotonic() + 5
        while any(pid_alive(p, st) for p, st in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(pid_alive(p, st) for p, st in workers), "workers exit on their own"
    finally:
        kill_pids(workers)
        s.close()


def test_frame_in_progress_is_finished_and_bytes_read_move_with_it(relay):
    """A request frame half sent at the handover is read to its end and
    forwarded by the old worker; the next request, read in the same read
    but not parsed, travels with the record (pending bytes) and is answered
    by the new generation, in order."""
    r = relay()
    s = socket.create_connection(r.addr, timeout=5)
    s.sendall(metadata_request(1))
    assert read_response(s) == 1
    req2 = metadata_request(2)
    s.sendall(req2[:-2])                  # header parsed, 2 body bytes to come
    time.sleep(0.2)
    assert r.cmd("handover 1 5000 1000") == "OK"
    time.sleep(0.2)
    st = r.status()
    assert st["out"] == 0, "not moved in the middle of a frame"
    s.sendall(req2[-2:] + metadata_request(3))
    assert read_response(s) == 2
    assert read_response(s) == 3
    st = r.wait(lambda st: st["handed_over"] == 1 and st["old_alive"] == 0)
    assert st["old_status"] == 0
    assert st["pending"] == len(metadata_request(3)), "request 3 moved as pending bytes"
    s.sendall(metadata_request(4))
    assert read_response(s) == 4
    s.close()


def test_not_connected_upstream_moves_client_only(keeper, workdir, request, mock_factory):
    """A connection still waiting for its upstream (here: broker addresses
    not learned yet) moves at once without an upstream socket; the request
    it sent travels as pending bytes and the new worker connects and
    answers it."""
    mock = mock_factory("up", topics=("t:1",))
    for b in (1, 2, 3):
        mock.command(f"rtt {b} 1500")    # the workers' own metadata fetch is slow
    r = Relay(keeper, workdir, request, mock)
    s = socket.create_connection((r.addr[0], r.ferry.clusters["A"]["brokers"][0]), timeout=10)
    s.sendall(metadata_request(1))
    time.sleep(0.3)
    assert r.cmd("handover 1 8000 1000") == "OK"
    st = r.wait(lambda st: st["out"] == 1, timeout=3)
    assert st["with_upstream"] == 0
    assert st["pending"] == len(metadata_request(1))
    assert read_response(s) == 1
    st = r.wait(lambda st: st["handed_over"] == 1 and st["old_alive"] == 0)
    assert st["old_status"] == 0 and st["adopted"] == 1
    s.close()


@pytest.mark.parametrize("kind", ["fds", "version", "pending", "broker", "notstream"])
def test_bad_record_is_refused_and_its_fds_closed(relay, kind):
    r = relay()
    assert r.cmd("handover 1 5000 1000") == "OK"   # starts generation 2
    assert r.cmd(f"bad-in {kind}") == "TAKEN adopted=0 closed=1 alive=1"
    # generation 2 still serves
    s = socket.create_connection(r.addr, timeout=5)
    s.sendall(metadata_request(7))
    assert read_response(s) == 7
    s.close()
