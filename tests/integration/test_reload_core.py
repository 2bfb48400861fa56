"""
The supervisor core under faults (issue 9): what ferryd guarantees when a
worker dies, stops answering, or reports failure in the middle of a
reload, a drain or a removal, and when a partial reload moves listening
addresses between clusters.

- swaps: a per-cluster reload in which cluster X takes cluster Y's ports
  while Y's own move cannot bind: X and Y commit or roll back together,
  every port reaches exactly one cluster's upstream, and status agrees;
  a pure swap X <-> Y succeeds under both reload policies;
- a SIGSTOPped worker: `liveness` says "unresponsive" within
  worker_watchdog (+1 s), a drain or removal of its cluster ends within
  drain_timeout + 2 s grace (+1.5 s slack), the name can be re-added; a
  worker continued in time is not replaced;
- a reload that adds a cluster whose new worker dies before READY
  (SIGKILL) or reports FAILED: ferryd survives, the reload answers 500
  with the cluster's error, the other clusters are untouched;
- garbage on a worker's control channel never takes ferryd down.

Upstreams are told apart by topic: mock X has topic `only-x`, mock Y has
`only-y`; a Metadata v0 request (all topics) through a port says which
upstream the port reaches. Stopped processes are continued and killed in
cleanup (core_helpers.StoppedRegistry).

Worker faults at a chosen moment: ferryd runs with
ASAN_OPTIONS=sleep_after_init=1 (see test_reload.py; needs the ASan build),
so each new worker sleeps 1 s before it reads its configuration, and the
test stops and kills it in that window. What a worker says on its control
channel (a FAILED report, garbage) the test says for it on the worker's
own end of the channel, taken with pidfd_getfd(2) (root or same user;
skips when the kernel or privileges do not allow it); message types and
the envelope are read from common/ipc.h.
"""

import json
import os
import signal
import socket
import threading
import time

import pytest

from conftest import (RFC3339_UTC, allocate_ports, children_of, kafka_metadata,
                      pid_alive, proc_starttime, proc_state, serving_pids, tail_file,
                      wait_for)
from core_helpers import (check_ports_agree, ipc_header, ipc_type_values,  # noqa: F401
                          listener_ports, sanitizer_reports, stopped, take_worker_channel,
                          wait_gone, worker_cluster, worker_generation, workers_of)
from test_reload import sha256_version, slow_worker_env

TOPIC_X = "only-x"
TOPIC_Y = "only-y"
TOPIC_LABELS = {TOPIC_X: "X", TOPIC_Y: "Y"}

WATCHDOG = 2.0       # worker_watchdog in the liveness tests
DRAIN = 3.0          # drain_timeout in the liveness tests
GRACE = 2.0          # contract: STOP/DRAIN end in SIGKILL after drain_timeout + 2 s
SLACK = 1.5          # allowed on top of that in a test


def ports_of(f, name):
    c = f.clusters[name]
    return [c["bootstrap"]] + list(c["brokers"])


def serving_pid(f, name):
    pids = serving_pids(f.cluster(name))
    assert len(pids) == 1, f"{name}: serving workers {pids}"
    return pids[0]


def assert_ferryd_alive(f, what):
    """ferryd runs and answers /admin/health; otherwise fails with its
    exit status and the sanitizer report of its log."""
    err = None
    if f.proc.poll() is None:
        try:
            code, _, body = f.http("/admin/health")
            assert code == 200, f"{what}: /admin/health answered {code} {body!r}"
            return
        except OSError as e:  # dying: give it a moment to finish its report
            err = e
            try:
                f.proc.wait(3)
            except Exception:  # noqa: BLE001
                pass
    rc = f.proc.poll()
    how = f"exited (status {rc})" if rc is not None else f"does not answer ({err!r})"
    reports = sanitizer_reports(f.log_text())
    raise AssertionError(f"{what}: ferryd {how}; sanitizer reports: {reports[:2] or 'none'}\n"
                         f"log tail:\n{tail_file(f.log_path, 40)}")


def assert_no_sanitizer_report(f):
    reports = sanitizer_reports(f.log_text())
    assert not reports, "sanitizer report(s) in ferryd's log:\n" + "\n---\n".join(reports[:3])


def reload_in_thread(f, text, timeout=30.0):
    """Starts POST /admin/config/reload in a thread; returns (thread, out):
    out["r"] = (code, body) or out["exc"] = the exception."""
    out = {}

    def run():
        try:
            out["r"] = f.reload_http(text, timeout=timeout)
        except Exception as e:  # noqa: BLE001 -- ferryd dying shows up here
            out["exc"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def reload_result(f, t, out, what, timeout=40.0):
    t.join(timeout)
    assert not t.is_alive(), f"{what}: the reload did not answer within {timeout}s"
    if "exc" in out:
        assert_ferryd_alive(f, f"{what} (the request failed: {out['exc']!r})")
        raise AssertionError(f"{what}: the reload request failed: {out['exc']!r}")
    return out["r"]


# --------------------------------------------------------------------------
# 1. swaps of listening addresses between clusters
# --------------------------------------------------------------------------

@pytest.fixture
def xy(mock_factory, reload_ferry_factory):
    """Two upstreams with different marker topics; make(**kw) starts a
    ferryd with cluster X in front of mock X and Y in front of mock Y."""
    mx = mock_factory("X", 3, [f"{TOPIC_X}:1"])
    my = mock_factory("Y", 3, [f"{TOPIC_Y}:1"])

    def make(**kw):
        return reload_ferry_factory({"X": mx, "Y": my}, **kw)
    return make


def hold_ports(ports):
    """Listening sockets on ports (loopback): nobody else can bind them."""
    socks = []
    for p in ports:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", p))
        s.listen(8)
        socks.append(s)
    return socks


def settle(f, timeout):
    """Waits until every worker listed in status is accepting (no
    initializing or draining generation left); returns whether it did."""
    def quiet():
        for c in f.status()["clusters"]:
            for w in c.get("workers", []):
                if w["state"] in ("initializing", "draining") and pid_alive(w["pid"]):
                    return False
        return True
    try:
        wait_for(quiet, timeout, what="workers settled")
        return True
    except AssertionError:
        return False


def test_swap_one_side_cannot_bind(xy):
    """reload_policy = per-cluster. X moves to Y's ports; Y moves to ports
    another process holds. X's move depends on Y giving its ports up, so X
    and Y roll back together: the answer is 500 naming Y, both keep their
    serving workers and ports, every port reaches exactly one cluster's
    upstream and status lists no address twice. With the ports released,
    the same config applies: X serves on Y's old ports, Y on the new ones,
    X's old ports refuse."""
    f = xy(drain_timeout="2s", ferry_extra={"reload_policy": "per-cluster"})
    px, py = ports_of(f, "X"), ports_of(f, "Y")
    pids = {n: serving_pid(f, n) for n in ("X", "Y")}
    starts = {n: proc_starttime(p) for n, p in pids.items()}
    version = f.config_status()["currentConfigVersion"]
    check_ports_agree(f, px + py, {"X": "X", "Y": "Y"}, TOPIC_LABELS)

    held = allocate_ports(4)
    moved = {n: dict(c) for n, c in f.clusters.items()}
    moved["X"] = dict(f.clusters["Y"])
    moved["Y"] = {"bootstrap": held[0], "brokers": held[1:],
                  "node_ids": list(f.clusters["Y"]["node_ids"])}
    text = f.render(clusters=moved)
    socks = hold_ports(held)
    try:
        code, body = f.reload_http(text)
        assert_ferryd_alive(f, "after the swap with one side held")
        settle(f, 5)
        # The fault of issue 9 first: two clusters on one address.
        check_ports_agree(f, px + py, {"X": "X", "Y": "Y"}, TOPIC_LABELS)
        assert code == 500, (code, body)
        assert body["success"] is False, body
        assert any(e.startswith("cluster Y") and str(held[0]) in e for e in body["errors"]), body
        docs = {n: f.cluster(n) for n in ("X", "Y")}
        assert listener_ports(docs["X"]) == sorted(px), \
            f"X committed a move onto Y's ports though Y could not move: {docs['X']['listeners']}"
        assert listener_ports(docs["Y"]) == sorted(py), docs["Y"]["listeners"]
        assert {n: serving_pid(f, n) for n in ("X", "Y")} == pids, "serving workers replaced"
        st = f.config_status()
        assert st["lastReloadAttempt"]["status"] == "FAILED", st
        assert st["currentConfigVersion"] == version, st
    finally:
        for s in socks:
            s.close()

    # The held ports are free now: the same configuration applies.
    code, body = f.reload_http(text)
    assert code == 200 and body["success"] is True, (code, body)
    assert sorted(body["clustersModified"]) == ["X", "Y"], body
    for n, p in pids.items():
        assert wait_gone(p, starts[n], 2.0 + GRACE + SLACK) is not None, \
            f"old {n} worker {p} still alive"
    f.clusters = moved
    owners = check_ports_agree(f, px + py + held, {"X": "X", "Y": "Y"}, TOPIC_LABELS)
    assert all(owners[p] == "X" for p in py), owners
    assert all(owners[p] == "Y" for p in held), owners
    assert all(owners[p] is None for p in px), owners
    assert f.config_status()["currentConfigVersion"] == sha256_version(text)
    assert_no_sanitizer_report(f)


@pytest.mark.parametrize("policy", ["per-cluster", "all-or-nothing"])
def test_pure_swap(xy, policy):
    """X and Y exchange their ports (bootstrap and broker ports) in one
    reload: it succeeds; afterwards X's upstream is reached on Y's old ports
    and Y's on X's, on every connection, and status agrees."""
    f = xy(drain_timeout="2s", ferry_extra={"reload_policy": policy})
    px, py = ports_of(f, "X"), ports_of(f, "Y")
    pids = {n: serving_pid(f, n) for n in ("X", "Y")}
    starts = {n: proc_starttime(p) for n, p in pids.items()}
    swapped = {"X": dict(f.clusters["Y"]), "Y": dict(f.clusters["X"])}
    text = f.render(clusters=swapped)
    code, body = f.reload_http(text)
    assert_ferryd_alive(f, "after the swap")
    assert code == 200 and body["success"] is True, (code, body)
    assert sorted(body["clustersModified"]) == ["X", "Y"], body
    for n, p in pids.items():
        assert wait_gone(p, starts[n], 2.0 + GRACE + SLACK) is not None, \
            f"old {n} worker {p} still alive"
    assert settle(f, 5), f.status()
    f.clusters = swapped
    owners = check_ports_agree(f, px + py, {"X": "X", "Y": "Y"}, TOPIC_LABELS)
    assert all(owners[p] == "X" for p in py), owners
    assert all(owners[p] == "Y" for p in px), owners
    assert not {serving_pid(f, n) for n in ("X", "Y")} & set(pids.values()), "not replaced"
    assert f.config_status()["currentConfigVersion"] == sha256_version(text)
    assert_no_sanitizer_report(f)


# --------------------------------------------------------------------------
# 2. a SIGSTOPped worker: liveness, drain, removal, re-add
# --------------------------------------------------------------------------

@pytest.fixture
def liveness_env(mock_factory, reload_ferry_factory):
    """make(watchdog) -> ReloadFerry with clusters A and B (one mock
    upstream, topic `core`), drain_timeout 3s, worker_watchdog given."""
    m = mock_factory("M", 3, ["core:1"])

    def make(watchdog):
        return reload_ferry_factory({"A": m, "B": m}, drain_timeout=f"{DRAIN:g}s",
                                    ferry_extra={"worker_watchdog": watchdog})
    return make


def liveness(doc, pid):
    """(cluster liveness, that worker's liveness) of a cluster document."""
    w = [x for x in doc.get("workers", []) if x["pid"] == pid]
    return doc.get("liveness"), (w[0].get("liveness") if w else None)


def assert_ok_liveness(f, name, pid):
    doc = f.cluster(name)
    assert liveness(doc, pid) == ("ok", "ok"), \
        f"{name}: liveness {liveness(doc, pid)} (want ok/ok); document: {json.dumps(doc)[:600]}"


def wait_unresponsive(f, name, pid, t_stop):
    """Polls GET /admin/clusters/NAME until liveness is "unresponsive";
    asserts it came within worker_watchdog + 1 s of the SIGSTOP and that
    the document says so everywhere the contract says."""
    bound = WATCHDOG + 1.0
    last = None
    while True:
        doc = f.cluster_doc(name)
        last = doc
        if doc and doc.get("liveness") == "unresponsive":
            break
        if time.monotonic() - t_stop > bound:
            raise AssertionError(
                f"{name}: liveness not 'unresponsive' within {bound:g}s of SIGSTOP of pid {pid} "
                f"(worker_watchdog {WATCHDOG:g}s); last document: {json.dumps(last)[:800]}")
        time.sleep(0.05)
    took = time.monotonic() - t_stop
    assert doc["reason"] and doc["reason"].startswith("unresponsive"), doc
    assert RFC3339_UTC.match(doc.get("livenessSince") or ""), doc
    assert liveness(doc, pid) == ("unresponsive", "unresponsive"), doc["workers"]
    assert pid_alive(pid) and proc_state(pid) == "T", "the stopped worker was replaced already"
    return took


@pytest.mark.parametrize("watchdog", ["2s", "0"], ids=["watchdog", "no-watchdog"])
def test_sigstop_then_drain(liveness_env, stopped, watchdog):
    """A's worker is SIGSTOPped (with worker_watchdog = 2s: status says
    unresponsive within 3 s). POST /admin/clusters/A/drain answers 200 and
    the stopped worker is gone within drain_timeout + 2 s (+1.5 s); A ends
    stopped with no worker left; B is untouched; A can be restarted."""
    f = liveness_env(watchdog)
    pid, b_pid = serving_pid(f, "A"), serving_pid(f, "B")
    st = proc_starttime(pid)
    if watchdog != "0":
        assert_ok_liveness(f, "A", pid)
    t_stop = time.monotonic()
    assert stopped.stop(pid, st)
    if watchdog != "0":
        took = wait_unresponsive(f, "A", pid, t_stop)
        print(f"\nunresponsive after {took:.2f}s")
        assert_ok_liveness(f, "B", b_pid)

    t0 = time.monotonic()
    code, _, body = f.http("/admin/clusters/A/drain", method="POST")
    assert code == 200, (code, body)
    bound = DRAIN + GRACE + SLACK
    gone = wait_gone(pid, st, bound)
    assert gone is not None, \
        f"the stopped worker {pid} still runs {bound:g}s after the drain request " \
        f"(state {proc_state(pid)}, A: {f.cluster('A')['state']})"
    stopped.forget(pid)
    print(f"worker gone {gone:.2f}s after the drain request (since SIGSTOP {time.monotonic() - t_stop:.2f}s)")
    wait_for(lambda: f.cluster("A")["state"] == "stopped", max(0.5, bound - (time.monotonic() - t0)) + 0.5,
             what="A stopped")
    time.sleep(0.5)  # a wrong restart would show up now
    assert workers_of(f.proc.pid, "A") == {}, "a drained cluster got a new worker"
    assert serving_pid(f, "B") == b_pid
    assert kafka_metadata("127.0.0.1", f.clusters["B"]["bootstrap"])["brokers"]

    code, _, body = f.http("/admin/clusters/A/restart", method="POST")
    assert code == 200, (code, body)
    assert f.cluster("A")["state"] == "accepting"
    assert kafka_metadata("127.0.0.1", f.clusters["A"]["bootstrap"])["brokers"]
    assert_ferryd_alive(f, "end")
    assert_no_sanitizer_report(f)


@pytest.mark.parametrize("watchdog", ["2s", "0"], ids=["watchdog", "no-watchdog"])
def test_sigstop_then_remove_and_readd(liveness_env, stopped, watchdog):
    """A's worker is SIGSTOPped (with worker_watchdog = 2s: unresponsive
    within 3 s); a reload removes A: it answers 200, the stopped worker is
    gone and A is gone from /admin/clusters within drain_timeout + 2 s
    (+1.5 s) of the request; the next reload adds A back (same name, same
    ports): 200, A accepting and serving; B untouched throughout."""
    f = liveness_env(watchdog)
    pid, b_pid = serving_pid(f, "A"), serving_pid(f, "B")
    st = proc_starttime(pid)
    t_stop = time.monotonic()
    assert stopped.stop(pid, st)
    if watchdog != "0":
        wait_unresponsive(f, "A", pid, t_stop)

    spec_a = f.spec["A"]
    ports_a = f.remove_cluster("A")
    t0 = time.monotonic()
    code, body = f.reload_http(f.render())
    assert code == 200 and body["clustersRemoved"] == ["A"], (code, body)
    bound = DRAIN + GRACE + SLACK
    gone = wait_gone(pid, st, max(0.1, bound - (time.monotonic() - t0)))
    assert gone is not None, \
        f"the stopped worker {pid} still runs {bound:g}s after the reload removing A " \
        f"(state {proc_state(pid)})"
    stopped.forget(pid)
    wait_for(lambda: f.cluster_doc("A") is None, max(0.1, bound - (time.monotonic() - t0)),
             what="A gone from /admin/clusters")
    print(f"\nA removed {time.monotonic() - t0:.2f}s after the reload request")

    f.spec["A"], f.clusters["A"] = spec_a, ports_a
    code, body = f.reload_http(f.render())
    assert code == 200 and body["clustersAdded"] == ["A"], \
        f"re-adding A after its removal: {code} {body}"
    doc = f.cluster("A")
    assert doc["state"] == "accepting", doc
    assert kafka_metadata("127.0.0.1", ports_a["bootstrap"])["brokers"]
    assert serving_pid(f, "B") == b_pid
    assert_ferryd_alive(f, "end")
    assert_no_sanitizer_report(f)


def test_sigstop_sigcont_in_time_keeps_worker(liveness_env, stopped):
    """worker_watchdog = 2s. A worker stopped for 1 s and continued is
    not replaced and reads "ok". A worker stopped until status says
    unresponsive, then continued (before 2 x worker_watchdog), reads "ok"
    again within worker_watchdog + 1 s, keeps its pid and generation, keeps
    serving, and is still the same process 2 x worker_watchdog later."""
    f = liveness_env(f"{WATCHDOG:g}s")
    pid = serving_pid(f, "A")
    st = proc_starttime(pid)
    gen = f.cluster("A")["generation"]
    assert_ok_liveness(f, "A", pid)

    # (i) shorter than the watchdog
    assert stopped.stop(pid, st)
    time.sleep(1.0)
    stopped.cont(pid)
    wait_for(lambda: f.cluster("A").get("liveness") == "ok", WATCHDOG + 1, what="liveness ok")
    assert serving_pid(f, "A") == pid and pid_alive(pid, st)

    # (ii) until reported, then continued
    t_stop = time.monotonic()
    assert stopped.stop(pid, st)
    wait_unresponsive(f, "A", pid, t_stop)
    stopped.cont(pid)
    t_cont = time.monotonic()
    assert t_cont - t_stop < 2 * WATCHDOG, \
        f"continued {t_cont - t_stop:.2f}s after SIGSTOP: too late for this test to mean anything"
    wait_for(lambda: liveness(f.cluster("A"), pid) == ("ok", "ok"), WATCHDOG + 1,
             what="liveness back to ok after SIGCONT")
    doc = f.cluster("A")
    assert doc["generation"] == gen and serving_pids(doc) == [pid], doc
    assert kafka_metadata("127.0.0.1", f.clusters["A"]["bootstrap"])["brokers"]
    time.sleep(2 * WATCHDOG)
    assert pid_alive(pid, st), "the continued worker was killed later"
    assert serving_pid(f, "A") == pid and f.cluster("A")["liveness"] == "ok"
    assert_no_sanitizer_report(f)


# --------------------------------------------------------------------------
# 3. a reload adding a cluster whose new worker fails before READY
# --------------------------------------------------------------------------

def _check_add_failed(f, code, body, before, fault):
    """After a reload adding C whose worker failed: ferryd up, 500 naming
    C, A and B untouched, outcome FAILED, C not serving, no ASan report."""
    assert_ferryd_alive(f, f"after a reload whose new worker {fault}")
    assert code == 500, f"{fault}: reload answered {code} {body}"
    assert body["success"] is False, body
    errs = [e for e in body["errors"] if e.startswith("cluster C")]
    assert errs, f"{fault}: no error for cluster C in {body['errors']}"
    after = {n: serving_pids(f.cluster(n)) for n in ("A", "B")}
    assert after == before, f"{fault}: serving workers of A/B changed: {before} -> {after}"
    for n in ("A", "B"):
        assert f.cluster(n)["state"] == "accepting"
        assert kafka_metadata("127.0.0.1", f.clusters[n]["bootstrap"])["brokers"]
    st = f.config_status()["lastReloadAttempt"]
    assert st["status"] == "FAILED" and st["errors"] == body["errors"], st
    doc = f.cluster_doc("C")
    assert doc is None or doc["state"] != "accepting", doc
    assert_no_sanitizer_report(f)
    return errs


def _add_c_again(f, before):
    code, body = f.reload_http(f.render())
    assert code == 200 and body["clustersAdded"] == ["C"], (code, body)
    assert f.cluster("C")["state"] == "accepting"
    assert kafka_metadata("127.0.0.1", f.clusters["C"]["bootstrap"])["brokers"]
    assert {n: serving_pids(f.cluster(n)) for n in ("A", "B")} == before


def test_add_cluster_worker_killed_before_ready(mock_factory, reload_ferry_factory, stopped):
    """Every worker of this ferryd sleeps 1 s before reading its config
    (sleep_after_init). A reload adds C; C's new worker is SIGSTOPped as
    soon as it appears among ferryd's children, then SIGKILLed. ferryd
    survives (this was a heap use-after-free), answers 500 naming C,
    A and B keep their workers; the next reload adds C."""
    env = slow_worker_env(1)
    m = mock_factory("M", 3, ["core:1"])
    f = reload_ferry_factory({"A": m, "B": m}, env=env, init_timeout="10s")
    before = {n: serving_pids(f.cluster(n)) for n in ("A", "B")}
    f.add_cluster("C", m)
    t, out = reload_in_thread(f, f.render())
    victim = wait_for(lambda: [p for p in children_of(f.proc.pid) if worker_cluster(p) == "C"],
                      10, interval=0.005, what="C's new worker")[0]
    st = proc_starttime(victim)
    assert stopped.stop(victim, st)
    time.sleep(0.1)
    os.kill(victim, signal.SIGKILL)
    stopped.forget(victim)
    code, body = reload_result(f, t, out, "reload adding C (worker SIGKILLed)")
    errs = _check_add_failed(f, code, body, before, "was SIGKILLed before READY")
    assert any("signal 9" in e or "SIGKILL" in e or "Killed" in e for e in errs), errs
    _add_c_again(f, before)


@pytest.mark.parametrize("together", [False, True], ids=["exit-after-report", "report-and-exit-at-once"])
def test_add_cluster_worker_reports_failed(mock_factory, reload_ferry_factory, stopped, together):
    """A reload adds C whose new worker reports FAILED and exits. No
    configuration that ferryd accepts makes a worker fail on its own today
    (the worker parses with ferryd's parser), so the test speaks for the
    worker: every worker of this ferryd sleeps 1 s before reading its
    config (sleep_after_init); C's new worker is stopped in that window,
    the test takes its control channel (pidfd_getfd), sends FAILED with
    the worker's generation and a reason, closes it, and kills the worker.
    exit-after-report: ferryd reads the report before the worker exits;
    report-and-exit-at-once: ferryd is SIGSTOPped meanwhile, so the report
    is still unread when it sees the exit. ferryd survives, answers 500
    with C's error carrying the reported reason, A and B keep their
    workers; the next reload adds C."""
    env = slow_worker_env(1)
    m = mock_factory("M", 3, ["core:1"])
    f = reload_ferry_factory({"A": m, "B": m}, env=env, init_timeout="10s")
    before = {n: serving_pids(f.cluster(n)) for n in ("A", "B")}
    types = ipc_type_values()
    f.add_cluster("C", m)
    t, out = reload_in_thread(f, f.render())
    victim = wait_for(lambda: [p for p in children_of(f.proc.pid) if worker_cluster(p) == "C"],
                      10, interval=0.005, what="C's new worker")[0]
    st = proc_starttime(victim)
    assert stopped.stop(victim, st)
    reason = b"injected by the test: configuration not viable"
    chan = take_worker_channel(victim)
    if together:
        os.kill(f.proc.pid, signal.SIGSTOP)
    try:
        chan.send(ipc_header(types["IPC_FAILED"], len(reason), worker_generation(victim)) + reason)
        chan.close()
        if not together:
            time.sleep(0.2)  # ferryd reads the report while the worker lives
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            pass  # ferryd already killed the worker that reported FAILED
        stopped.forget(victim)
        if together:
            wait_for(lambda: proc_state(victim) in ("Z", None), 5, what="the worker a zombie")
    finally:
        chan.close()
        if together:
            os.kill(f.proc.pid, signal.SIGCONT)
    code, body = reload_result(f, t, out, "reload adding C (worker reported FAILED)")
    errs = _check_add_failed(f, code, body, before, "reported FAILED")
    assert any(reason.decode() in e for e in errs), \
        f"C's error does not carry the reason the worker reported: {errs}"
    _add_c_again(f, before)


GARBAGE = [
    ("3 bytes", lambda types, gen: b"\x01\x02\x03"),
    ("length field larger than the datagram",
     lambda types, gen: ipc_header(types["IPC_UPSTREAM"], 4096, gen) + b"x" * 8),
    ("unknown type", lambda types, gen: ipc_header(0x7fffffff, 0, gen)),
    ("READY of another generation", lambda types, gen: ipc_header(types["IPC_READY"], 0, gen + 77)),
]


@pytest.mark.parametrize("label,make", GARBAGE, ids=[g[0] for g in GARBAGE])
def test_worker_garbage_never_takes_ferryd_down(mock_factory, reload_ferry_factory, label, make):
    """Garbage on a serving worker's control channel (sent by the test on
    the worker's end, see take_worker_channel): ferryd stays up, kills that
    worker (a malformed message from a sibling is a bug of that worker) and
    restarts the cluster under the crash policy; B is untouched."""
    m = mock_factory("M", 3, ["core:1"])
    f = reload_ferry_factory({"A": m, "B": m})
    pid, b_pid = serving_pid(f, "A"), serving_pid(f, "B")
    st = proc_starttime(pid)
    chan = take_worker_channel(pid)
    try:
        chan.send(make(ipc_type_values(), worker_generation(pid)))
        assert wait_gone(pid, st, 5.0) is not None, f"worker {pid} not killed after {label}"
    finally:
        chan.close()
    assert_ferryd_alive(f, f"after {label} from a worker")
    new = wait_for(lambda: (lambda p: p if p and p != [pid] else None)(serving_pids(f.cluster("A"))),
                   10, what="A restarted")
    assert len(new) == 1 and new[0] != pid, new
    assert kafka_metadata("127.0.0.1", f.clusters["A"]["bootstrap"])["brokers"]
    assert serving_pid(f, "B") == b_pid
    assert_no_sanitizer_report(f)
