"""
Liveness and live settings (issue 10 items 3 and 5): a worker whose loop
stops answering the supervisor's watchdog is reported `unresponsive` (status,
ferryctl, /admin/ready, ferry_worker_unresponsive_total) and recovers when it
answers again; a `log_level` reload reaches every live worker, proved by the
workers' own log lines.
"""

import os
import re
import signal
import socket
import time

from conftest import serving_pids, wait_for

TOPIC = "live"


def _ready_code(f):
    return f.http("/admin/ready")[0]


def _unresponsive_total(f, name):
    text = f.http("/metrics")[2].decode()
    m = re.search(r'^ferry_worker_unresponsive_total\{cluster="%s"\} (\d+)$' % name, text, re.M)
    return int(m.group(1)) if m else None


def test_sigstop_is_unresponsive_and_sigcont_recovers(mock_factory, reload_ferry_factory):
    m = mock_factory("M", 3, [f"{TOPIC}:1"])
    f = reload_ferry_factory({"A": m, "B": m}, ferry_extra={"worker_watchdog": "3s"})
    a_pid = serving_pids(f.cluster("A"))[0]
    b_pid = serving_pids(f.cluster("B"))[0]
    assert _ready_code(f) == 200
    assert _unresponsive_total(f, "A") == 0

    os.kill(a_pid, signal.SIGSTOP)
    t0 = time.monotonic()
    try:
        # unresponsive and not ready within worker_watchdog plus a second
        wait_for(lambda: f.cluster("A")["liveness"] == "unresponsive", 4.0,
                 what="A unresponsive")
        took = time.monotonic() - t0
        assert _ready_code(f) == 503
        c = f.cluster("A")
        assert c["reason"].startswith("unresponsive"), c
        assert c["livenessSince"], c
        assert c["state"] == "accepting", c
        out = f.ctl("status").stdout
        assert re.search(r"^A\s+accepting,unresponsive\s", out, re.M), out
        assert f.cluster("B")["liveness"] == "ok"
        assert _unresponsive_total(f, "A") == 1
    finally:
        os.kill(a_pid, signal.SIGCONT)
    assert took <= 4.0
    # answering again: back to ok and ready, same process (not killed yet:
    # that happens only after twice worker_watchdog)
    wait_for(lambda: f.cluster("A")["liveness"] == "ok", 3.0, what="A responsive again")
    wait_for(lambda: _ready_code(f) == 200, 3.0, what="ready again")
    assert serving_pids(f.cluster("A")) == [a_pid]
    assert serving_pids(f.cluster("B")) == [b_pid]


def test_hung_worker_is_killed_and_restarted(mock_factory, reload_ferry_factory):
    m = mock_factory("M", 3, [f"{TOPIC}:1"])
    f = reload_ferry_factory({"A": m, "B": m}, ferry_extra={"worker_watchdog": "1s"})
    a = f.cluster("A")
    a_pid, gen = serving_pids(a)[0], a["generation"]
    b_pid = serving_pids(f.cluster("B"))[0]
    os.kill(a_pid, signal.SIGSTOP)
    try:
        c = wait_for(lambda: (lambda c: c if c["generation"] != gen and
                              c["state"] == "accepting" else None)(f.cluster("A")),
                     6.0, what="A restarted")
    finally:
        try:
            os.kill(a_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert serving_pids(c) != [a_pid]
    assert c["liveness"] == "ok"
    assert serving_pids(f.cluster("B")) == [b_pid]
    assert _ready_code(f) == 200
    log = f.log_path.read_text(errors="replace")
    assert "worker unresponsive" in log and "killing worker" in log


def _worker_debug_lines(f, pid):
    text = f.log_path.read_text(errors="replace")
    return [l for l in text.splitlines()
            if "level=debug" in l and f"pid={pid} " in l and "proc=worker" in l]


def _touch(port):
    # a connection that closes at once: a worker logs its close at debug level
    with socket.create_connection(("127.0.0.1", port), timeout=3):
        pass


def test_log_level_reload_reaches_workers(mock_factory, reload_ferry_factory):
    m = mock_factory("M", 3, [f"{TOPIC}:1"])
    f = reload_ferry_factory({"A": m}, ferry_extra={"log_level": "error"})
    pid = serving_pids(f.cluster("A"))[0]
    port = f.clusters["A"]["bootstrap"]

    _touch(port)
    time.sleep(0.3)
    assert _worker_debug_lines(f, pid) == []

    f.ferry_keys["log_level"] = "debug"
    f.write()
    r = f.reload_ctl()
    assert r.returncode == 0, r.stdout + r.stderr
    assert serving_pids(f.cluster("A")) == [pid]   # the cluster was not touched
    _touch(port)
    wait_for(lambda: _worker_debug_lines(f, pid), 3.0, what="worker debug lines")

    f.ferry_keys["log_level"] = "error"
    f.write()
    r = f.reload_ctl()
    assert r.returncode == 0, r.stdout + r.stderr
    time.sleep(0.3)
    n = len(_worker_debug_lines(f, pid))
    for _ in range(3):
        _touch(port)
    time.sleep(0.5)
    assert len(_worker_debug_lines(f, pid)) == n, "debug lines after log_level = error"
    assert serving_pids(f.cluster("A")) == [pid]
