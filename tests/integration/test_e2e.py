"""
End-to-end tests: real ferryd in front of librdkafka mock clusters, driven by
real clients (kcat, kafka-python, confluent-kafka) and by ferryctl / the admin
HTTP API. See conftest.py for the harness.
"""

import collections
import json
import os
import pwd
import re
import signal
import subprocess
import threading
import time

import pytest

from conftest import (FERRYCTL, FERRYD, LIFECYCLE_STATES, RFC3339_UTC, children_of,
                      kafka_metadata, pid_alive, proc_starttime, serving_pids, tail_file)


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

def kcat_consume(bootstrap, topic, expect=None, timeout=60):
    """Consumes a topic from the beginning to its end with kcat; returns a
    list of (key, value) strings."""
    argv = ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
            "-f", "%k\t%s\n"]
    if expect is not None:
        argv[4:4] = ["-c", str(expect)]
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, f"kcat consume failed rc={r.returncode}: {r.stderr[-2000:]}"
    out = []
    for line in r.stdout.splitlines():
        k, _, v = line.partition("\t")
        out.append((k, v))
    return out


def kcat_metadata(bootstrap, timeout=30):
    r = subprocess.run(["kcat", "-L", "-b", bootstrap, "-m", "10"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"kcat -L failed rc={r.returncode}: {r.stderr[-2000:]}"
    return r.stdout + r.stderr


def confluent_producer(bootstrap, **extra):
    from confluent_kafka import Producer
    conf = {"bootstrap.servers": bootstrap, "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 30000}
    conf.update(extra)
    return Producer(conf)


def assert_exactly_once(records, expected):
    """records: list of (key, value); expected: dict key -> value."""
    counts = collections.Counter(k for k, _ in records)
    dups = {k: n for k, n in counts.items() if n > 1}
    assert not dups, f"{len(dups)} keys consumed more than once, e.g. {list(dups.items())[:5]}"
    got = dict(records)
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    assert not missing, f"{len(missing)} messages never consumed, e.g. {missing[:5]}"
    assert not extra, f"{len(extra)} unexpected messages, e.g. {extra[:5]}"
    wrong = [k for k in expected if got[k] != expected[k]]
    assert not wrong, f"{len(wrong)} values differ, e.g. {[(k, got[k]) for k in wrong[:5]]}"
    assert len(records) == len(expected)


def upstream_port_leaks(text, mocks):
    leaks = []
    for m in mocks:
        for p in m.ports:
            if re.search(rf":{p}\b", text):
                leaks.append(p)
    return leaks


# --------------------------------------------------------------------------
# tests
# --------------------------------------------------------------------------

def test_two_clusters_produce_consume(two_clusters):
    env = two_clusters
    f, topic = env.ferry, env.topic
    a = f.bootstrap("A")
    expected = {}

    # kafka-python: 500 messages, every future resolved successfully.
    from kafka import KafkaProducer
    kp = KafkaProducer(bootstrap_servers=a, acks="all", linger_ms=5,
                       request_timeout_ms=15000, max_block_ms=30000,
                       api_version_auto_timeout_ms=15000)
    try:
        futures = []
        for i in range(500):
            k, v = f"kp-{i}", f"kafka-python value {i}"
            expected[k] = v
            futures.append(kp.send(topic, key=k.encode(), value=v.encode()))
        kp.flush(60)
        for fut in futures:
            md = fut.get(timeout=30)
            assert md.topic == topic and md.offset >= 0
    finally:
        kp.close(5)

    # confluent-kafka, idempotent: 500 messages, 500 delivery reports, no error.
    delivered, errors = [], []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            delivered.append(msg.key().decode())

    cp = confluent_producer(a)
    for i in range(500):
        k, v = f"ck-{i}", f"confluent value {i}"
        expected[k] = v
        cp.produce(topic, key=k.encode(), value=v.encode(), on_delivery=on_delivery)
        cp.poll(0)
    left = cp.flush(60)
    assert left == 0, f"{left} confluent messages not delivered"
    assert errors == [], f"delivery errors: {errors[:5]}"
    assert sorted(delivered) == sorted(k for k in expected if k.startswith("ck-"))

    # Consume through A: exactly the 1000 messages, each once.
    records = kcat_consume(a, topic)
    assert len(records) == 1000, f"consumed {len(records)} messages through A, expected 1000"
    assert_exactly_once(records, expected)

    # The data really went to upstream A, and cluster B is a separate one.
    direct = kcat_consume(env.mock_a.bootstrap, topic)
    assert_exactly_once(direct, expected)
    assert kcat_consume(env.mock_b.bootstrap, topic) == [], "messages leaked to upstream B"

    # Cluster B works on its own: 20 messages in, the same 20 out.
    b = f.bootstrap("B")
    b_expected = {f"b-{i}": f"bee {i}" for i in range(20)}
    r = subprocess.run(["kcat", "-P", "-b", b, "-t", topic, "-K", "\t"],
                       input="".join(f"{k}\t{v}\n" for k, v in b_expected.items()),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"kcat produce through B failed: {r.stderr[-2000:]}"
    assert_exactly_once(kcat_consume(b, topic), b_expected)
    assert len(kcat_consume(a, topic)) == 1000


def test_metadata_only_proxy_addresses(two_clusters):
    env = two_clusters
    f = env.ferry
    mocks = [env.mock_a, env.mock_b]
    want = {nid: f"{h}:{p}" for nid, (h, p) in f.broker_addresses("A").items()}

    # kcat -L
    out = kcat_metadata(f.bootstrap("A"))
    brokers = dict(re.findall(r"broker (-?\d+) at (\S+)", out))
    brokers = {int(k): v for k, v in brokers.items()}
    assert brokers == want, f"kcat -L brokers {brokers} != {want}\n{out}"
    assert len(re.findall(r"^\s*broker \d+ at ", out, re.M)) == 3, out
    leaks = upstream_port_leaks(out, mocks)
    assert not leaks, f"upstream ports {leaks} visible in kcat -L output:\n{out}"
    assert f'topic "{env.topic}" with 3 partitions' in out, out

    # confluent_kafka list_topics()
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": f.bootstrap("A")}).list_topics(timeout=20)
    cbrokers = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
    assert cbrokers == want, f"confluent_kafka brokers {cbrokers} != {want}"
    assert env.topic in md.topics

    # kafka-python
    from kafka import KafkaAdminClient
    adm = KafkaAdminClient(bootstrap_servers=f.bootstrap("A"), request_timeout_ms=20000,
                           api_version_auto_timeout_ms=15000)
    try:
        desc = adm.describe_cluster()
    finally:
        adm.close()
    kbrokers = {b["node_id"]: f"{b['host']}:{b['port']}" for b in desc["brokers"]}
    assert kbrokers == want, f"kafka-python brokers {kbrokers} != {want}"

    # A raw Metadata v0 request, on the bootstrap port and on each broker port.
    ports = [f.clusters["A"]["bootstrap"]] + f.clusters["A"]["brokers"]
    for port in ports:
        raw = kafka_metadata("127.0.0.1", port, timeout=10)
        got = {nid: f"{h}:{p}" for nid, (h, p) in raw["brokers"].items()}
        assert got == want, f"raw metadata via port {port}: {got} != {want}"

    # Cluster B advertises its own ports, not A's.
    want_b = {nid: f"{h}:{p}" for nid, (h, p) in f.broker_addresses("B").items()}
    out_b = kcat_metadata(f.bootstrap("B"))
    brokers_b = {int(k): v for k, v in re.findall(r"broker (-?\d+) at (\S+)", out_b)}
    assert brokers_b == want_b, f"B: kcat -L brokers {brokers_b} != {want_b}\n{out_b}"
    assert not upstream_port_leaks(out_b, mocks), out_b


def test_worker_crash_isolated(two_clusters):
    env = two_clusters
    f, topic = env.ferry, env.topic
    st = {c["name"]: c for c in f.status()["clusters"]}
    a_pids, b_pids = serving_pids(st["A"]), serving_pids(st["B"])
    assert len(a_pids) == 1 and len(b_pids) == 1, f"serving workers: A={a_pids} B={b_pids}"
    a_pid, b_pid = a_pids[0], b_pids[0]
    assert a_pid != b_pid
    a_start = proc_starttime(a_pid)
    kids = children_of(f.proc.pid)
    assert a_pid in kids and b_pid in kids, f"workers {a_pid},{b_pid} not children of ferryd ({kids})"

    stop = threading.Event()
    delivered, errors, produced = [], [], []
    thread_exc = []

    def producer():
        try:
            p = confluent_producer(f.bootstrap("A"))

            def on_delivery(err, msg):
                if err is not None:
                    errors.append(str(err))
                else:
                    delivered.append(msg.key().decode())
            i = 0
            while not stop.is_set():
                k = f"crash-{i}"
                p.produce(topic, key=k.encode(), value=f"v{i}".encode(), on_delivery=on_delivery)
                produced.append(k)
                i += 1
                p.poll(0.005)
            left = p.flush(60)
            if left:
                errors.append(f"{left} messages still undelivered after flush")
        except Exception as e:  # surfaced in the main thread
            thread_exc.append(repr(e))

    t = threading.Thread(target=producer, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 30
        while len(delivered) < 100 and time.monotonic() < deadline and not thread_exc:
            time.sleep(0.05)
        assert len(delivered) >= 100, f"producer through A not flowing: {len(delivered)} delivered, errors {errors[:3]} {thread_exc}"

        # Kill cluster B's worker.
        os.kill(b_pid, signal.SIGKILL)
        t0 = time.monotonic()
        recovered_at = None
        last = None
        while time.monotonic() - t0 < 2.0:
            try:
                b = f.cluster("B")
                new = [p for p in serving_pids(b) if p != b_pid and pid_alive(p)]
                last = (b.get("state"), serving_pids(b))
                if b.get("state") == "accepting" and new:
                    raw = kafka_metadata("127.0.0.1", f.clusters["B"]["bootstrap"], timeout=0.5)
                    if len(raw["brokers"]) == 3:
                        recovered_at = time.monotonic() - t0
                        break
            except Exception as e:
                last = repr(e)
            time.sleep(0.05)
        assert recovered_at is not None, f"cluster B not serving again within 2 s of its worker's SIGKILL (last: {last})"

        b = f.cluster("B")
        assert b["state"] == "accepting"
        assert b_pid not in serving_pids(b)

        # A is untouched.
        a = f.cluster("A")
        assert serving_pids(a) == [a_pid], f"A's worker changed: {serving_pids(a)} (was {a_pid})"
        assert pid_alive(a_pid, a_start)

        # Keep producing through A a little longer, then stop.
        n_at_kill = len(delivered)
        time.sleep(1.0)
        assert len(delivered) > n_at_kill, "A's producer stalled after B's worker was killed"
    finally:
        stop.set()
        t.join(90)
    assert not t.is_alive(), "producer thread hung"
    assert not thread_exc, thread_exc
    assert errors == [], f"{len(errors)} delivery errors on A, e.g. {errors[:5]}"
    assert sorted(delivered) == sorted(produced)
    assert pid_alive(a_pid, a_start) and serving_pids(f.cluster("A")) == [a_pid]

    records = kcat_consume(f.bootstrap("A"), topic, timeout=90)
    assert_exactly_once(records, {k: "v" + k.split("-")[1] for k in produced})


def test_workers_drop_privileges(two_clusters):
    if os.geteuid() != 0:
        pytest.skip("ferryd drops worker privileges only when started as root")
    f = two_clusters.ferry
    nobody = pwd.getpwnam("nobody")
    st = f.status()
    pids = set()
    for c in st["clusters"]:
        serving = serving_pids(c)
        assert serving and all(pid_alive(p) for p in serving), f"{c['name']}: serving workers {serving}"
        pids.update(serving)
    pids.update(p for p in children_of(f.proc.pid) if pid_alive(p))
    assert len(pids) >= 2, f"expected a worker per cluster, got {pids}"

    def status_of(pid):
        with open(f"/proc/{pid}/status") as fh:
            return dict(line.rstrip("\n").split(":\t", 1) for line in fh if ":\t" in line)

    for pid in sorted(pids):
        s = status_of(pid)
        uids = [int(x) for x in s["Uid"].split()]
        gids = [int(x) for x in s["Gid"].split()]
        assert uids == [nobody.pw_uid] * 4, f"worker {pid} Uid {uids}, want {nobody.pw_uid}"
        assert gids == [nobody.pw_gid] * 4, f"worker {pid} Gid {gids}, want {nobody.pw_gid}"
        groups = [int(x) for x in s.get("Groups", "").split()]
        assert 0 not in groups, f"worker {pid} kept supplementary group root: {groups}"
        assert s.get("NoNewPrivs", "").strip() == "1", f"worker {pid} NoNewPrivs={s.get('NoNewPrivs')}"

    sup = status_of(f.proc.pid)
    assert [int(x) for x in sup["Uid"].split()][:2] == [0, 0], f"ferryd Uid {sup['Uid']}"

    # The unprivileged workers still serve traffic.
    raw = kafka_metadata("127.0.0.1", f.clusters["A"]["bootstrap"], timeout=10)
    assert len(raw["brokers"]) == 3


# ---- admin API contract ----

def _check_time(v, what):
    assert isinstance(v, str) and RFC3339_UTC.match(v), f"{what}: {v!r} is not an RFC 3339 UTC time"


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_cluster_object(c, ferry, name):
    for key in ("name", "state", "since", "reason", "generation", "configVersion",
                "upstream", "listeners", "workers"):
        assert key in c, f"CLUSTER object lacks {key!r}: {c}"
    assert c["name"] == name
    assert c["state"] in LIFECYCLE_STATES, c["state"]
    assert c["state"] == "accepting", f"{name} state {c['state']} ({c['reason']})"
    _check_time(c["since"], "since")
    assert c["reason"] is None or isinstance(c["reason"], str), c["reason"]
    assert _is_int(c["generation"]) and c["generation"] >= 1, c["generation"]
    assert isinstance(c["configVersion"], str) and re.fullmatch(r"sha256:[0-9a-f]{64}", c["configVersion"]), c["configVersion"]

    up = c["upstream"]
    assert isinstance(up, dict)
    for key in ("state", "since", "lastError"):
        assert key in up, f"upstream lacks {key!r}: {up}"
    assert up["state"] in ("reachable", "unreachable", "unknown"), up
    if up["since"] is not None:
        _check_time(up["since"], "upstream.since")
    assert up["lastError"] is None or isinstance(up["lastError"], str), up

    ls = c["listeners"]
    assert isinstance(ls, list)
    for lst in ls:
        for key in ("role", "nodeId", "address"):
            assert key in lst, f"listener lacks {key!r}: {lst}"
        assert lst["role"] in ("bootstrap", "broker"), lst
        assert isinstance(lst["address"], str)
    boot = [lst for lst in ls if lst["role"] == "bootstrap"]
    brk = {lst["nodeId"]: lst["address"] for lst in ls if lst["role"] == "broker"}
    assert [lst["address"] for lst in boot] == [ferry.bootstrap(name)], ls
    assert boot[0]["nodeId"] is None or _is_int(boot[0]["nodeId"]), boot
    assert all(_is_int(k) for k in brk), ls
    want = {nid: f"{h}:{p}" for nid, (h, p) in ferry.broker_addresses(name).items()}
    assert brk == want, f"broker listeners {brk} != {want}"

    ws = c["workers"]
    assert isinstance(ws, list) and ws, f"no workers in {c}"
    for w in ws:
        for key in ("pid", "generation", "state", "since", "connections", "inFlight"):
            assert key in w, f"worker lacks {key!r}: {w}"
        assert _is_int(w["pid"]) and w["pid"] > 0
        assert _is_int(w["generation"])
        assert w["state"] in LIFECYCLE_STATES
        _check_time(w["since"], "workers[].since")
        assert _is_int(w["connections"]) and w["connections"] >= 0
        assert _is_int(w["inFlight"]) and w["inFlight"] >= 0
    serving = [w for w in ws if w["state"] == "accepting"]
    assert len(serving) == 1 and serving[0]["generation"] == c["generation"], ws


def test_admin_api_contract(two_clusters):
    env = two_clusters
    f = env.ferry

    # Touch both clusters so that workers learn their upstream.
    for name in ("A", "B"):
        kafka_metadata("127.0.0.1", f.clusters[name]["bootstrap"], timeout=10)

    bodies = {}
    for via in ("unix", "tcp"):
        code, hdrs, body = f.http("/admin/health", via)
        assert code == 200, (via, code, body)
        assert "json" in hdrs.get("content-type", ""), (via, hdrs)
        h = json.loads(body)
        assert h.get("status") == "UP", (via, h)

        code, _, body = f.http("/admin/ready", via)
        assert code == 200, (via, code, body)

        code, hdrs, body = f.http("/admin/clusters", via)
        assert code == 200, (via, code, body)
        assert "json" in hdrs.get("content-type", ""), (via, hdrs)
        doc = json.loads(body)
        assert isinstance(doc, dict) and isinstance(doc.get("clusters"), list), doc
        assert sorted(c["name"] for c in doc["clusters"]) == ["A", "B"], doc
        for c in doc["clusters"]:
            check_cluster_object(c, f, c["name"])
        bodies[via] = doc

        code, _, body = f.http("/admin/clusters/A", via)
        assert code == 200, (via, code, body)
        one = json.loads(body)
        check_cluster_object(one, f, "A")

        code, _, body = f.http("/admin/clusters/nope", via)
        assert code == 404, (via, code, body)

    # Same clusters, same workers on both transports.
    def summary(doc):
        return sorted((c["name"], c["generation"], c["configVersion"],
                       tuple(sorted(w["pid"] for w in c["workers"]))) for c in doc["clusters"])
    assert summary(bodies["unix"]) == summary(bodies["tcp"])

    # Upstream reachability is reported once traffic went through.
    deadline = time.monotonic() + 10
    while True:
        ups = {c["name"]: c["upstream"]["state"] for c in f.status()["clusters"]}
        if ups == {"A": "reachable", "B": "reachable"} or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert ups == {"A": "reachable", "B": "reachable"}, ups

    # curl, as an operator would.
    r = subprocess.run(["curl", "-sS", "--max-time", "5", "--unix-socket", f.sock,
                        "http://localhost/admin/clusters/B"], capture_output=True, text=True, timeout=15)
    assert r.returncode == 0, r.stderr
    check_cluster_object(json.loads(r.stdout), f, "B")
    r = subprocess.run(["curl", "-sS", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}",
                        f"http://127.0.0.1:{f.admin_port}/admin/clusters/nope"],
                       capture_output=True, text=True, timeout=15)
    assert r.stdout == "404", (r.stdout, r.stderr)

    # ferryctl status: the table.
    r = f.ctl("status")
    lines = [ln for ln in r.stdout.splitlines() if ln.strip() and not ln.startswith("ferryd ")]
    assert lines and lines[0].split() == ["NAME", "STATE", "SINCE", "GEN", "PID", "CONNS", "REASON"], r.stdout
    rows = {ln.split()[0]: ln.split() for ln in lines[1:]}
    assert set(rows) == {"A", "B"}, r.stdout
    for name, cols in rows.items():
        assert cols[1] == "accepting", r.stdout
        assert cols[4] == str(serving_pids(f.cluster(name))[0]), r.stdout
    r = f.ctl("status", "A")
    lines = [ln for ln in r.stdout.splitlines() if ln.strip() and not ln.startswith("ferryd ")]
    assert lines[0].split()[:7] == ["NAME", "STATE", "SINCE", "GEN", "PID", "CONNS", "REASON"], r.stdout
    assert [ln.split()[0] for ln in lines[1:]] == ["A"], r.stdout

    # ferryctl --json status: the API body unchanged.
    r = f.ctl("--json", "status")
    doc = json.loads(r.stdout)
    assert list(doc.keys()) == ["clusters"], doc
    assert sorted(c["name"] for c in doc["clusters"]) == ["A", "B"]
    assert summary(doc) == summary(bodies["unix"])
    # ... also over admin_listen, and with FERRY_SOCKET.
    r = f.ctl("-a", f"127.0.0.1:{f.admin_port}", "--json", "status", sock=False)
    assert summary(json.loads(r.stdout)) == summary(bodies["unix"])
    env_vars = dict(os.environ, FERRY_SOCKET=f.sock)
    r = f.ctl("--json", "status", sock=False, env=env_vars)
    assert summary(json.loads(r.stdout)) == summary(bodies["unix"])
    f.ctl("health")
    f.ctl("ready")

    # Exit codes: 3 cannot reach ferryd, 2 usage, 1 failed operation.
    missing = str(f.workdir / "no-such.sock")
    for args in (["status"], ["health"], ["--json", "status"]):
        r = subprocess.run([str(FERRYCTL), "-s", missing] + args, capture_output=True,
                           text=True, timeout=15, stdin=subprocess.DEVNULL)
        assert r.returncode == 3, f"ferryctl -s {missing} {args}: rc={r.returncode} {r.stderr}"
    for args in (["frobnicate"], ["drain"], ["--bogus-option", "status"]):
        r = f.ctl(*args, check=False)
        assert r.returncode == 2, f"ferryctl {args}: rc={r.returncode} (want 2, usage) {r.stdout} {r.stderr}"
    r = f.ctl("status", "nope", check=False)
    assert r.returncode == 1, f"ferryctl status nope: rc={r.returncode} (want 1) {r.stdout} {r.stderr}"


def test_config_check(workdir):
    if not FERRYD.exists():
        pytest.fail(f"{FERRYD} not built")
    good = workdir / "good.ini"
    good.write_text(f"""\
[ferry]
control_socket = {workdir}/ferry.sock
admin_listen = 127.0.0.1:9190
user = nobody
drain_timeout = 30s
init_timeout = 10s
log_level = info

[cluster demo]
upstream = 127.0.0.1:9092,127.0.0.1:9093
bootstrap = 127.0.0.1:9192
advertised_host = localhost
broker_ports = 9193-9195
node_ids = 1-3
max_connections = 10000
max_frame_bytes = 100MiB
idle_timeout = 10m
""")
    r = subprocess.run([str(FERRYD), "-t", "-c", "good.ini"], cwd=workdir, capture_output=True,
                       text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"ferryd -t good.ini: rc={r.returncode}\n{r.stdout}\n{r.stderr}"
    assert not re.search(r"good\.ini:\d+:", r.stdout + r.stderr), r.stdout + r.stderr

    bad = workdir / "bad.ini"
    bad.write_text(f"""\
[ferry]
control_socket = {workdir}/ferry.sock
bogus_key = 1
drain_timeout = banana
log_level = info

[cluster demo]
upstream = 127.0.0.1:9092
bootstrap = 127.0.0.1:notaport
advertised_host = localhost
broker_ports = 9193-9195
max_frame_bytes = lots

[mystery]
foo = bar
""")
    r = subprocess.run([str(FERRYD), "-t", "-c", "bad.ini"], cwd=workdir, capture_output=True,
                       text=True, timeout=30, stdin=subprocess.DEVNULL)
    out = r.stdout + r.stderr
    assert r.returncode == 1, f"ferryd -t bad.ini: rc={r.returncode} (want 1)\n{out}"
    found = {}
    for m in re.finditer(r"^(?:\S*/)?bad\.ini:(\d+): (.+)$", out, re.M):
        found.setdefault(int(m.group(1)), []).append(m.group(2))
    # 3: unknown key, 4: bad duration, 9: bad port, 12: bad size,
    # 14/15: unknown section (inih may only show it through its key)
    want = {3, 4, 9, 12}
    assert want <= set(found) and (14 in found or 15 in found), \
        f"errors reported for lines {sorted(found)}, want {sorted(want)} and 14 or 15:\n{out}"
    assert all(msg.strip() for msgs in found.values() for msg in msgs)


def test_sigterm_clean_exit(two_clusters):
    env = two_clusters
    f = env.ferry
    # An open client connection must not hold the shutdown up past drain.
    kafka_metadata("127.0.0.1", f.clusters["A"]["bootstrap"], timeout=10)
    st = f.status()
    workers = set()
    for c in st["clusters"]:
        workers.update(w["pid"] for w in c["workers"] if w.get("state") != "stopped")
    workers.update(children_of(f.proc.pid))
    assert len(workers) >= 2, workers
    starts = {p: proc_starttime(p) for p in workers}

    f.proc.send_signal(signal.SIGTERM)
    try:
        rc = f.proc.wait(10)  # drain_timeout is 2s in the test config
    except subprocess.TimeoutExpired:
        pytest.fail("ferryd still running 10 s after SIGTERM")
    assert rc == 0, f"ferryd exited with {rc} after SIGTERM"

    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        for p in workers:
            try:
                os.waitpid(p, os.WNOHANG)  # orphans come to us (subreaper)
            except ChildProcessError:
                pass
        left = [p for p in workers if pid_alive(p, starts[p])]
        if not left:
            break
        time.sleep(0.05)
    assert not left, f"worker processes still running after ferryd exited: {left}"
    log = tail_file(f.log_path, 400)
    assert "AddressSanitizer" not in log and "LeakSanitizer" not in log and "runtime error:" not in log, log
