"""
Harness for ferry's end-to-end tests: real ferryd processes in front of real
Kafka peers (librdkafka's mock cluster, hosted by tests/peers/mock_cluster).

Run with Debian's interpreter, which has kafka-python and confluent-kafka:

    /usr/bin/python3 -m pytest -q tests/integration

The build directory is $FERRY_BUILD (default "build", relative to the repo
root). Everything a test starts is recorded by PID and killed in a finalizer
(SIGTERM, up to 5 s, then SIGKILL), including ferryd's worker children, which
are found through /proc/*/stat. Only loopback addresses are used.
"""

import ctypes
import http.client
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_build = Path(os.environ.get("FERRY_BUILD", "build"))
BUILD = _build if _build.is_absolute() else REPO / _build

FERRYD = BUILD / "supervisor" / "ferryd"
FERRY_ADMIN = BUILD / "supervisor" / "ferry-admin"
FERRYCTL = BUILD / "supervisor" / "ctl" / "ferryctl"
MOCK_CLUSTER = BUILD / "tests" / "peers" / "mock_cluster"

DEFAULT_TEST_TIMEOUT = 150  # seconds, per test (ASan builds are slow)
READY_TIMEOUT = 30.0        # seconds for ferryd to report ready

LIFECYCLE_STATES = {"initializing", "accepting", "draining", "failed", "stopped"}
RFC3339_UTC = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|\+00:00)$")


# --------------------------------------------------------------------------
# pytest plumbing: per-test timeouts, log tails on failure, subreaper
# --------------------------------------------------------------------------

try:
    import pytest_timeout  # noqa: F401  (Debian: python3-pytest-timeout)
    HAVE_PYTEST_TIMEOUT = True
except ImportError:
    HAVE_PYTEST_TIMEOUT = False


def pytest_configure(config):
    # Become a child subreaper: ferryd's workers that outlive it are
    # reparented to us (not to init), so they can be found and reaped.
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_CHILD_SUBREAPER = 36
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except Exception:
        pass


def pytest_collection_modifyitems(config, items):
    if not HAVE_PYTEST_TIMEOUT:
        return
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(DEFAULT_TEST_TIMEOUT, method="signal"))


class _TestTimeout(Exception):
    pass


@pytest.fixture(autouse=True)
def _alarm_timeout(request):
    """Fallback per-test timeout when pytest-timeout is not installed."""
    if HAVE_PYTEST_TIMEOUT:
        yield
        return

    def on_alarm(signum, frame):
        raise _TestTimeout(f"test exceeded {DEFAULT_TEST_TIMEOUT}s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(DEFAULT_TEST_TIMEOUT)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)
    if rep.failed:
        for label, path in getattr(item, "_ferry_logs", []):
            rep.sections.append((f"{label}: tail of {path}", tail_file(path)))


def register_log(request, label, path):
    logs = getattr(request.node, "_ferry_logs", None)
    if logs is None:
        logs = []
        request.node._ferry_logs = logs
    logs.append((label, str(path)))


def tail_file(path, lines=80):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return f"(cannot read {path}: {e})"
    text = data.decode("utf-8", "replace").splitlines()
    return "\n".join(text[-lines:]) + "\n"


# --------------------------------------------------------------------------
# processes
# --------------------------------------------------------------------------

def _stat_fields(pid):
    """Fields of /proc/PID/stat after the comm: [state, ppid, ...]."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return data.rpartition(")")[2].split()


def proc_state(pid):
    f = _stat_fields(pid)
    return f[0] if f else None


def proc_starttime(pid):
    f = _stat_fields(pid)
    return int(f[19]) if f else None


def children_of(pid):
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        f = _stat_fields(int(entry))
        if f and int(f[1]) == pid:
            kids.append(int(entry))
    return kids


def descendants_of(pid):
    out, todo = [], [pid]
    while todo:
        for k in children_of(todo.pop()):
            out.append(k)
            todo.append(k)
    return out


def pid_alive(pid, starttime=None):
    """True if pid runs (not a zombie) and, if given, has that start time."""
    f = _stat_fields(pid)
    if not f or f[0] in ("Z", "X"):
        return False
    return starttime is None or int(f[19]) == starttime


def _reap_if_ours(pid):
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    except OSError:
        pass


def is_admin_process(pid):
    """Is pid a ferry-admin (ferryd's admin process, not a worker)?"""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv0 = f.read().split(b"\0")[0]
    except OSError:
        return False
    return os.path.basename(argv0) == b"ferry-admin"


def admin_pids_of(ferryd_pid):
    """The live admin processes (ferry-admin) ferryd ferryd_pid started."""
    return [k for k in children_of(ferryd_pid) if is_admin_process(k) and pid_alive(k)]


def admin_pid_of(ferryd_pid, timeout=10.0, not_pid=None):
    """The pid of ferryd's admin process, waiting up to timeout for one
    (other than not_pid: a restarted one) to run."""
    deadline = time.monotonic() + timeout
    while True:
        pids = [p for p in admin_pids_of(ferryd_pid) if p != not_pid]
        if len(pids) == 1:
            return pids[0]
        if time.monotonic() >= deadline:
            raise AssertionError(f"ferryd {ferryd_pid}: admin processes {pids}")
        time.sleep(0.02)


def kill_pids(pids_with_start, grace=5.0):
    """SIGTERM each (pid, starttime), wait up to grace, then SIGKILL."""
    live = [(p, s) for p, s in pids_with_start if pid_alive(p, s)]
    for p, _ in live:
        try:
            os.kill(p, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        for p, _ in live:
            _reap_if_ours(p)
        live = [(p, s) for p, s in live if pid_alive(p, s)]
        if not live:
            return
        time.sleep(0.05)
    for p, _ in live:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and live:
        for p, _ in live:
            _reap_if_ours(p)
        live = [(p, s) for p, s in live if pid_alive(p, s)]
        time.sleep(0.05)


class ProcessKeeper:
    """Starts processes and kills every one of them (and their descendants)
    by recorded PID at cleanup."""

    def __init__(self):
        self.procs = []  # (name, Popen)

    def spawn(self, name, argv, **kw):
        kw.setdefault("stdin", subprocess.DEVNULL)
        p = subprocess.Popen([str(a) for a in argv], **kw)
        self.procs.append((name, p))
        return p

    def terminate(self, p, grace=5.0):
        # Record the descendants (ferryd's workers) before the parent goes:
        # once it is gone their ppid no longer leads to them.
        desc = [(d, proc_starttime(d)) for d in descendants_of(p.pid)]
        if p.poll() is None:
            if p.stdin:
                try:
                    p.stdin.close()
                except OSError:
                    pass
            try:
                p.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                p.kill()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    pass
        # Descendants recorded earlier, plus any that appeared meanwhile.
        kill_pids(desc, grace)
        for f in (p.stdout, p.stderr, p.stdin):
            if f:
                try:
                    f.close()
                except OSError:
                    pass

    def cleanup(self):
        for _, p in reversed(self.procs):
            try:
                self.terminate(p)
            except Exception as e:  # keep cleaning up the others
                print(f"cleanup of pid {p.pid} failed: {e}")
        self.procs.clear()


# --------------------------------------------------------------------------
# ports
# --------------------------------------------------------------------------

_used_ports = set()


@pytest.fixture(autouse=True)
def _ports_of_one_test():
    """Ports a test allocated are given back when it ends (its processes are
    gone by then; anything still bound is skipped by _port_free). Without
    it the session's allocations fragment the range until a late test that
    needs a long run (hundreds of clusters) finds none. Ports of wider
    fixtures (a package's Kafka cluster) are taken before this snapshot and
    stay reserved."""
    before = set(_used_ports)
    yield
    _used_ports.intersection_update(before)


def _port_free(port):
    for fam, addr in ((socket.AF_INET, "127.0.0.1"),):
        s = socket.socket(fam, socket.SOCK_STREAM)
        try:
            s.bind((addr, port))
        except OSError:
            return False
        finally:
            s.close()
    return True


def allocate_ports(n):
    """A run of n contiguous free loopback ports, base random in 20000-45000,
    below the kernel's ephemeral range when possible."""
    lo, hi = 20000, 45000
    try:
        eph_lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
        if eph_lo - n > lo + 1000:
            hi = min(hi, eph_lo)
    except (OSError, ValueError, IndexError):
        pass
    rnd = random.Random(os.getpid() ^ int(time.time() * 1000))
    for _ in range(500):
        base = rnd.randrange(lo, hi - n)
        run = list(range(base, base + n))
        if any(p in _used_ports for p in run):
            continue
        if all(_port_free(p) for p in run):
            _used_ports.update(run)
            return run
    raise RuntimeError(f"no run of {n} free ports found in {lo}-{hi}")


# --------------------------------------------------------------------------
# HTTP over the control socket / admin_listen
# --------------------------------------------------------------------------

class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=5.0):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def http_request(method, path, unix_socket=None, tcp=None, body=None, timeout=5.0):
    """Returns (status, headers dict (lower-case), body bytes)."""
    if unix_socket:
        conn = UnixHTTPConnection(unix_socket, timeout)
    else:
        host, port = tcp
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=body)
        r = conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        conn.close()


# --------------------------------------------------------------------------
# a minimal Kafka client: Metadata v0 over a raw socket
# --------------------------------------------------------------------------

def _kstr(b, off):
    (n,) = struct.unpack_from(">h", b, off)
    off += 2
    if n < 0:
        return None, off
    return b[off:off + n].decode(), off + n


def _recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def kafka_metadata(host, port, topics=None, timeout=3.0, correlation_id=4242):
    """Sends one Metadata v0 request; returns
    {"brokers": {node_id: (host, port)}, "topics": {name: {partition: leader}}}.
    Raises on any error, including a correlation id mismatch."""
    client_id = b"ferry-it"
    body = struct.pack(">i", len(topics or []))
    for t in topics or []:
        tb = t.encode()
        body += struct.pack(">h", len(tb)) + tb
    req = struct.pack(">hhih", 3, 0, correlation_id, len(client_id)) + client_id + body
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(req)) + req)
        (size,) = struct.unpack(">i", _recv_exact(s, 4))
        b = _recv_exact(s, size)
    (cid,) = struct.unpack_from(">i", b, 0)
    if cid != correlation_id:
        raise AssertionError(f"correlation id {cid} != {correlation_id}")
    off = 4
    (nb,) = struct.unpack_from(">i", b, off)
    off += 4
    brokers = {}
    for _ in range(nb):
        (nid,) = struct.unpack_from(">i", b, off)
        off += 4
        h, off = _kstr(b, off)
        (p,) = struct.unpack_from(">i", b, off)
        off += 4
        brokers[nid] = (h, p)
    (nt,) = struct.unpack_from(">i", b, off)
    off += 4
    out_topics = {}
    for _ in range(nt):
        (terr,) = struct.unpack_from(">h", b, off)
        off += 2
        name, off = _kstr(b, off)
        (np_,) = struct.unpack_from(">i", b, off)
        off += 4
        parts = {}
        for _ in range(np_):
            perr, pid, leader = struct.unpack_from(">hii", b, off)
            off += 10
            for _arr in range(2):  # replicas, isr
                (na,) = struct.unpack_from(">i", b, off)
                off += 4 + 4 * na
            parts[pid] = leader
        out_topics[name] = {"error": terr, "partitions": parts}
    return {"brokers": brokers, "topics": out_topics}


# --------------------------------------------------------------------------
# mock upstream cluster
# --------------------------------------------------------------------------

def _readline(f, timeout):
    """Reads one line from a pipe with a timeout; returns str or None."""
    deadline = time.monotonic() + timeout
    buf = b""
    fd = f.fileno()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            return None
        ch = os.read(fd, 1)
        if not ch:
            return buf.decode() if buf else None
        if ch == b"\n":
            return buf.decode()
        buf += ch


class MockCluster:
    def __init__(self, keeper, workdir, name, brokers=3, topics=()):
        if not MOCK_CLUSTER.exists():
            pytest.fail(f"{MOCK_CLUSTER} not built (build with -Dtests=true)")
        self.name = name
        self.log_path = Path(workdir) / f"mock-{name}.log"
        argv = [MOCK_CLUSTER, "-b", str(brokers)]
        for t in topics:
            argv += ["-t", t]
        self.log = open(self.log_path, "wb")
        self.proc = keeper.spawn(f"mock-{name}", argv, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=self.log)
        line = _readline(self.proc.stdout, 15.0)
        if not line or not line.startswith("BOOTSTRAP="):
            raise RuntimeError(f"mock cluster {name}: no BOOTSTRAP line (got {line!r}); "
                               f"log:\n{tail_file(self.log_path)}")
        self.bootstrap = line[len("BOOTSTRAP="):].strip()
        self.addresses = self.bootstrap.split(",")
        self.ports = [int(a.rsplit(":", 1)[1]) for a in self.addresses]
        assert len(self.ports) == brokers, line

    def command(self, line, timeout=10.0):
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()
        reply = _readline(self.proc.stdout, timeout)
        if reply != "OK":
            raise RuntimeError(f"mock {self.name}: {line!r} -> {reply!r}")


# --------------------------------------------------------------------------
# ferryd
# --------------------------------------------------------------------------

class Ferry:
    """One ferryd process with its config, sockets and ports."""

    BROKERS_PER_CLUSTER = 3

    def __init__(self, keeper, workdir, upstreams, extra_ferry="", user="nobody",
                 drain_timeout="2s", cluster_keys=None):
        for b in (FERRYD, FERRYCTL):
            if not b.exists():
                pytest.fail(f"{b} not built")
        self.keeper = keeper
        self.workdir = Path(workdir)
        self.upstreams = upstreams  # {name: MockCluster}
        n = len(upstreams)
        ports = allocate_ports(n * (1 + self.BROKERS_PER_CLUSTER) + 1)
        self.admin_port = ports[-1]
        self.clusters = {}
        for i, name in enumerate(upstreams):
            base = ports[i * 4]
            self.clusters[name] = {
                "bootstrap": base,
                "brokers": [base + 1 + k for k in range(self.BROKERS_PER_CLUSTER)],
                "node_ids": [1 + k for k in range(self.BROKERS_PER_CLUSTER)],
            }
        self.sock = str(self.workdir / "ferry.sock")
        self.config_path = self.workdir / "ferry.ini"
        self.log_path = self.workdir / "ferryd.log"
        self.proc = None
        # keys written into every [cluster] section (e.g. workers = 2)
        self.cluster_keys = {k: str(v) for k, v in (cluster_keys or {}).items()}
        lines = [
            "[ferry]",
            f"control_socket = {self.sock}",
            f"admin_listen = 127.0.0.1:{self.admin_port}",
            f"user = {user}",
            "startup_policy = fail-fast",
            f"drain_timeout = {drain_timeout}",
            "init_timeout = 10s",
            "log_level = info",
        ]
        if extra_ferry:
            lines.append(extra_ferry)
        for name, mock in upstreams.items():
            c = self.clusters[name]
            lines += [
                "",
                f"[cluster {name}]",
                f"upstream = {mock.bootstrap}",
                f"bootstrap = 127.0.0.1:{c['bootstrap']}",
                "advertised_host = 127.0.0.1",
                f"broker_ports = {c['brokers'][0]}-{c['brokers'][-1]}",
                f"node_ids = {c['node_ids'][0]}-{c['node_ids'][-1]}",
            ]
            lines += [f"{k} = {v}" for k, v in self.cluster_keys.items()]
        self.config_text = "\n".join(lines) + "\n"
        self.config_path.write_text(self.config_text)

    # ---- process ----
    def start(self, wait=True):
        self.log = open(self.log_path, "ab")
        self.proc = self.keeper.spawn("ferryd", [FERRYD, "-c", self.config_path],
                                      stdout=self.log, stderr=self.log,
                                      cwd=str(self.workdir))
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout=READY_TIMEOUT):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"ferryd exited with {self.proc.returncode} before ready; log:\n"
                    + tail_file(self.log_path))
            r = self.ctl("ready", check=False, timeout=5)
            if r.returncode == 0:
                return
            last = r
            time.sleep(0.1)
        raise AssertionError(
            f"ferryd not ready after {timeout}s (last ferryctl ready: rc={last.returncode if last else None} "
            f"out={last.stdout if last else ''!r} err={last.stderr if last else ''!r}); log:\n"
            + tail_file(self.log_path))

    def admin_pid(self, **kw):
        """The pid of this ferryd's admin process (ferry-admin)."""
        return admin_pid_of(self.proc.pid, **kw)

    def workers_of(self, name):
        """The number of worker processes cluster `name` is configured with."""
        return int(self.cluster_keys.get("workers", 1))

    # ---- addresses ----
    def bootstrap(self, name):
        return f"127.0.0.1:{self.clusters[name]['bootstrap']}"

    def broker_addresses(self, name):
        c = self.clusters[name]
        return {nid: ("127.0.0.1", p) for nid, p in zip(c["node_ids"], c["brokers"])}

    # ---- control ----
    def ctl(self, *args, check=True, timeout=15, sock=True, env=None):
        argv = [str(FERRYCTL)]
        if sock:
            argv += ["-s", self.sock]
        argv += [str(a) for a in args]
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=timeout, env=env)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} -> rc={r.returncode}\n"
                                 f"stdout: {r.stdout}\nstderr: {r.stderr}")
        return r

    def status(self):
        r = self.ctl("--json", "status")
        return json.loads(r.stdout)

    def cluster(self, name):
        for c in self.status()["clusters"]:
            if c["name"] == name:
                return c
        raise KeyError(name)

    def http(self, path, via="unix", method="GET", body=None):
        if via == "unix":
            return http_request(method, path, unix_socket=self.sock, body=body)
        return http_request(method, path, tcp=("127.0.0.1", self.admin_port), body=body)

    def metrics(self):
        """{(metric, cluster): value} of the per-cluster lines of /metrics
        (every such value is an integer counter or gauge); a family with
        more labels (api, reason, direction, ...) is summed over them."""
        code, _, body = self.http("/metrics")
        assert code == 200, code
        out = {}
        for line in body.decode().splitlines():
            m = re.match(r'^(ferry_\w+)\{cluster="([^"]+)"(,[^}]*)?\} (\d+)$', line)
            if m:
                key = (m.group(1), m.group(2))
                out[key] = out.get(key, 0) + int(m.group(4))
        return out


def serving_pids(cluster):
    return [w["pid"] for w in cluster.get("workers", []) if w.get("state") == "accepting"]


# --------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------

@pytest.fixture
def keeper(request, workdir):
    # Depends on workdir so that processes die before their files go.
    k = ProcessKeeper()
    request.addfinalizer(k.cleanup)
    return k


@pytest.fixture
def workdir(request):
    # Short path: the control socket must fit in sun_path (108 bytes).
    d = tempfile.mkdtemp(prefix="ferry-it-", dir="/tmp")
    os.chmod(d, 0o755)

    def fin():
        failed = any(getattr(request.node, f"rep_{p}", None) is not None
                     and getattr(request.node, f"rep_{p}").failed
                     for p in ("setup", "call"))
        if os.environ.get("FERRY_KEEP_TMP") or failed:
            print(f"\nkept {d}")
        else:
            shutil.rmtree(d, ignore_errors=True)

    request.addfinalizer(fin)
    return Path(d)


@pytest.fixture
def mock_factory(keeper, workdir, request):
    def make(name, brokers=3, topics=()):
        m = MockCluster(keeper, workdir, name, brokers, topics)
        register_log(request, f"mock {name}", m.log_path)
        return m
    return make


@pytest.fixture
def ferry_factory(keeper, workdir, request):
    def make(upstreams, start=True, **kw):
        f = Ferry(keeper, workdir, upstreams, **kw)
        register_log(request, "ferryd", f.log_path)
        if start:
            f.start()
        return f
    return make


@pytest.fixture(params=[1, 2], ids=["w1", "w2"])
def workers_n(request):
    """`workers` of every cluster, for test modules that run their tests with
    one worker per cluster and again with two (test_reload.py,
    test_failure.py override their Ferry factories with it). 1 writes no
    key at all, so the default is what the w1 run checks."""
    return request.param


def workers_keys(n):
    """cluster_keys for `workers = n` (none for the default, 1)."""
    return {} if n == 1 else {"workers": str(n)}


E2E_TOPIC = "ferry-e2e"


@pytest.fixture
def two_clusters(mock_factory, ferry_factory):
    """Two mock upstreams (3 brokers each, topic ferry-e2e with 3 partitions)
    behind one ferryd with clusters A and B; ferryd is ready."""
    a = mock_factory("A", 3, [f"{E2E_TOPIC}:3"])
    b = mock_factory("B", 3, [f"{E2E_TOPIC}:3"])
    f = ferry_factory({"A": a, "B": b})

    class Env:
        pass
    env = Env()
    env.ferry, env.mock_a, env.mock_b, env.topic = f, a, b, E2E_TOPIC
    return env


# ==========================================================================
# BEGIN modern peers (test_modern.py) -- librdkafka 2.12 mock cluster hosted
# by node-rdkafka (tests/peers/node/mock212.js) or by tests/peers/mock_cluster.c
# linked against that same librdkafka 2.12; clients node-rdkafka and kafkajs.
# Installed by scripts/install-node-deps. A missing install fails the tests,
# or skips them when FERRY_ALLOW_SKIP_MODERN=1.
# ==========================================================================

import hashlib as _m_hashlib

NODE_PEERS = REPO / "tests" / "peers" / "node"
NODE_MODULES = NODE_PEERS / "node_modules"
NODE_STAMP = NODE_MODULES / ".ferry-install-stamp"
RDKAFKA212_DEPS = NODE_MODULES / "node-rdkafka" / "build" / "deps"
MOCK212_C_SRC = REPO / "tests" / "peers" / "mock_cluster.c"
MOCK212_C = BUILD / "modern-peers" / "mock212"


def modern_unavailable(reason):
    """Fails the test, or skips it when FERRY_ALLOW_SKIP_MODERN=1."""
    if os.environ.get("FERRY_ALLOW_SKIP_MODERN") == "1":
        pytest.skip(f"modern peers unavailable: {reason}")
    pytest.fail(f"modern peers unavailable: {reason} "
                f"(run scripts/install-node-deps; FERRY_ALLOW_SKIP_MODERN=1 turns this into a skip)",
                pytrace=False)


_modern_probe = {}


def _probe_modern_peers():
    """(problem or None, info dict); computed once per session."""
    if "result" in _modern_probe:
        return _modern_probe["result"]
    node = shutil.which("node")
    problem, info = None, {}
    if not node:
        problem = "no `node` on PATH"
    elif not (NODE_MODULES / "node-rdkafka").is_dir():
        problem = f"{NODE_MODULES}/node-rdkafka missing"
    else:
        try:
            nv = subprocess.run([node, "--version"], capture_output=True, text=True,
                                timeout=30).stdout.strip()
            lock = (NODE_PEERS / "package-lock.json").read_bytes()
            want = f"{_m_hashlib.sha256(lock).hexdigest()} {nv}"
            have = NODE_STAMP.read_text().strip() if NODE_STAMP.exists() else ""
            if have != want:
                problem = (f"{NODE_MODULES} is not installed from the current package-lock.json "
                           f"with node {nv} (stamp {have!r}, want {want!r})")
            else:
                r = subprocess.run(
                    [node, "-e",
                     "const K=require('node-rdkafka');require('kafkajs');"
                     "console.log(JSON.stringify({librdkafka:K.librdkafkaVersion,"
                     "nodeRdkafka:require('node-rdkafka/package.json').version,"
                     "kafkajs:require('kafkajs/package.json').version,node:process.version}))"],
                    cwd=str(NODE_PEERS), capture_output=True, text=True, timeout=60)
                if r.returncode != 0:
                    problem = f"node-rdkafka/kafkajs do not load: {r.stderr.strip()[-1500:]}"
                else:
                    info = json.loads(r.stdout.strip().splitlines()[-1])
                    major, minor = (int(x) for x in info["librdkafka"].split(".")[:2])
                    if (major, minor) < (2, 10):
                        problem = f"node-rdkafka bundles librdkafka {info['librdkafka']} (< 2.10)"
        except (OSError, ValueError, subprocess.SubprocessError) as e:
            problem = f"probing node peers failed: {e!r}"
    info["node_path"] = node
    _modern_probe["result"] = (problem, info)
    return problem, info


@pytest.fixture
def modern_peers():
    """Versions of the installed modern peers ({'librdkafka': '2.12.0', ...})."""
    problem, info = _probe_modern_peers()
    if problem:
        modern_unavailable(problem)
    return info


def _build_mock212_c():
    """tests/peers/mock_cluster.c compiled against node-rdkafka's librdkafka
    (2.12) into $FERRY_BUILD/modern-peers/mock212; rebuilt when older than
    its inputs. Returns None or a problem description."""
    lib = RDKAFKA212_DEPS / "librdkafka.so.1"
    inc = RDKAFKA212_DEPS / "include"
    if not (lib.exists() and (inc / "librdkafka" / "rdkafka_mock.h").exists()):
        return f"{lib} or {inc}/librdkafka/rdkafka_mock.h missing"
    inputs = [MOCK212_C_SRC, lib, inc / "librdkafka" / "rdkafka_mock.h"]
    if MOCK212_C.exists() and all(MOCK212_C.stat().st_mtime >= p.stat().st_mtime for p in inputs):
        return None
    MOCK212_C.parent.mkdir(parents=True, exist_ok=True)
    cc = os.environ.get("CC", "cc")
    tmp = MOCK212_C.with_name(f"mock212.{os.getpid()}.tmp")
    argv = [cc, "-std=c11", "-D_GNU_SOURCE", "-O1", "-g", "-Wall", "-I", str(inc),
            str(MOCK212_C_SRC), "-o", str(tmp), "-L", str(RDKAFKA212_DEPS), "-l:librdkafka.so.1",
            f"-Wl,-rpath,{RDKAFKA212_DEPS}"]
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return f"{' '.join(argv)} failed:\n{r.stderr[-3000:]}"
    os.replace(tmp, MOCK212_C)
    return None


class ModernMock:
    """A librdkafka 2.12 mock cluster, same interface as MockCluster
    (bootstrap, addresses, ports, command()). host="node": mock212.js
    (topics get the mock's default of 4 partitions); host="c": mock_cluster.c
    linked against 2.12 (topics "name:partitions"; leader/up/down commands)."""

    def __init__(self, keeper, workdir, name, host, topics=(), brokers=3, node=None,
                 c_binary=None):
        self.name, self.host = name, host
        self.log_path = Path(workdir) / f"mock212-{host}-{name}.log"
        if host == "node":
            argv = [node, str(NODE_PEERS / "mock212.js"), "-b", str(brokers)]
            for t in topics:
                argv += ["-t", t.split(":")[0]]
            cwd = str(NODE_PEERS)
        else:
            argv = [c_binary, "-b", str(brokers)]
            for t in topics:
                argv += ["-t", t if ":" in t else f"{t}:4"]
            cwd = str(workdir)
        self.log = open(self.log_path, "wb")
        self.proc = keeper.spawn(f"mock212-{name}", argv, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=self.log, cwd=cwd)
        line = _readline(self.proc.stdout, 30.0)
        if not line or not line.startswith("BOOTSTRAP="):
            raise RuntimeError(f"2.12 mock {name} ({host}): no BOOTSTRAP line (got {line!r}); "
                               f"log:\n{tail_file(self.log_path)}")
        self.bootstrap = line[len("BOOTSTRAP="):].strip()
        self.addresses = self.bootstrap.split(",")
        self.ports = [int(a.rsplit(":", 1)[1]) for a in self.addresses]
        assert len(self.ports) == brokers, line
        if host == "c":
            # Make sure the dynamic linker picked 2.12, not Debian's librdkafka.
            maps = Path(f"/proc/{self.proc.pid}/maps").read_text()
            # maps lists real paths: node_modules may be a link into a cache
            assert str(RDKAFKA212_DEPS.resolve()) in maps, \
                f"mock212 C host (pid {self.proc.pid}) did not load {RDKAFKA212_DEPS}/librdkafka.so.1"

    def command(self, line, timeout=20.0):
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()
        reply = _readline(self.proc.stdout, timeout)
        if reply != "OK":
            raise RuntimeError(f"mock212 {self.name}: {line!r} -> {reply!r}")


@pytest.fixture
def modern_mock_factory(keeper, workdir, request, modern_peers):
    def make(name, topics=(), host="node", brokers=3):
        c_binary = None
        if host == "c":
            problem = _build_mock212_c()
            if problem:
                modern_unavailable(f"cannot build the C host of the 2.12 mock: {problem}")
            c_binary = MOCK212_C
        m = ModernMock(keeper, workdir, name, host, topics, brokers,
                       node=modern_peers["node_path"], c_binary=c_binary)
        register_log(request, f"mock212 {name}", m.log_path)
        return m
    return make


class NodePeer:
    """One run of a script in tests/peers/node: stdout is a pipe (PROGRESS
    and RESULT lines), stderr (the client's log) goes to a file that is
    attached to the report of a failing test."""

    def __init__(self, keeper, workdir, request, node, label, script, args, stdin=None):
        self.label = label
        self.log_path = Path(workdir) / f"{label}.log"
        register_log(request, label, self.log_path)
        self.log = open(self.log_path, "wb")
        self.proc = keeper.spawn(label, [node, str(NODE_PEERS / script)] + [str(a) for a in args],
                                 stdin=stdin if stdin is not None else subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=self.log, cwd=str(NODE_PEERS))
        self.lines = []

    def readline(self, timeout):
        line = _readline(self.proc.stdout, timeout)
        if line is not None:
            self.lines.append(line)
        return line

    def result(self, timeout):
        """Reads stdout until the RESULT line; returns its JSON."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            line = self.readline(max(left, 0.01)) if left > 0 else None
            if line is None:
                if time.monotonic() < deadline:  # stdout closed: the script ended
                    try:
                        rc = self.proc.wait(5)
                    except subprocess.TimeoutExpired:
                        rc = None
                    why = f"exited (rc={rc}) without a RESULT line"
                else:
                    why = f"no RESULT line within {timeout}s (rc={self.proc.poll()})"
                raise AssertionError(
                    f"{self.label}: {why}; last stdout {self.lines[-3:]}; "
                    f"log:\n{tail_file(self.log_path, 40)}")
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])

    def wait(self, timeout=30):
        rc = self.proc.wait(timeout)
        self.log.close()
        return rc

    def log_text(self):
        return Path(self.log_path).read_text(errors="replace")


@pytest.fixture
def node_peer(keeper, workdir, request, modern_peers):
    """node_peer(label, script, args, stdin=None) -> NodePeer (started)."""
    def run(label, script, args, stdin=None):
        return NodePeer(keeper, workdir, request, modern_peers["node_path"], label, script,
                        args, stdin)
    return run

# ==========================================================================
# END modern peers
# ==========================================================================


# ==========================================================================
# BEGIN reload helpers (test_reload.py, test_watch.py) -- a ferryd whose
# config is rendered from a table of clusters so a test can change it and
# reload (ferryctl or the admin API), and raw Kafka frames (ApiVersions v0,
# Fetch v4) for connection-level checks.
# ==========================================================================

class ReloadFerry(Ferry):
    """A Ferry whose config text is rendered from `ferry_keys` (the [ferry]
    section, in order) and `spec` ({name: {"upstream", "extra": {key: value}}},
    ports in self.clusters as in Ferry). render() builds text from copies, so
    a test can post a variant without touching the file."""

    def __init__(self, keeper, workdir, upstreams, ferry_extra=None, drain_timeout="5s",
                 init_timeout="10s", cluster_extra=None, cluster_keys=None):
        super().__init__(keeper, workdir, upstreams, drain_timeout=drain_timeout,
                         cluster_keys=cluster_keys)
        self.ferry_keys = {
            "control_socket": self.sock,
            "admin_listen": f"127.0.0.1:{self.admin_port}",
            "user": "nobody",
            "startup_policy": "fail-fast",
            "drain_timeout": drain_timeout,
            "init_timeout": init_timeout,
            "log_level": "info",
        }
        self.ferry_keys.update(ferry_extra or {})
        self.spec = {}
        for name, mock in upstreams.items():
            self.spec[name] = {"upstream": mock.bootstrap,
                               "extra": {**self.cluster_keys,
                                         **(cluster_extra or {}).get(name, {})}}
        self.write()

    # ---- config ----
    def render(self, ferry_keys=None, spec=None, clusters=None):
        fk = self.ferry_keys if ferry_keys is None else ferry_keys
        sp = self.spec if spec is None else spec
        cl = self.clusters if clusters is None else clusters
        lines = ["[ferry]"] + [f"{k} = {v}" for k, v in fk.items()]
        for name, s in sp.items():
            c = cl[name]
            lines += [
                "",
                f"[cluster {name}]",
                f"upstream = {s['upstream']}",
                f"bootstrap = 127.0.0.1:{c['bootstrap']}",
                "advertised_host = 127.0.0.1",
                f"broker_ports = {c['brokers'][0]}-{c['brokers'][-1]}",
                f"node_ids = {c['node_ids'][0]}-{c['node_ids'][-1]}",
            ]
            lines += [f"{k} = {v}" for k, v in s["extra"].items()]
        return "\n".join(lines) + "\n"

    def write(self, text=None, path=None):
        """Writes the config (rendered unless given) to the config file,
        atomically (temp file + rename); returns the text."""
        text = self.render() if text is None else text
        path = Path(path or self.config_path)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
        if path == self.config_path:
            self.config_text = text
        return text

    def add_cluster(self, name, upstream, brokers=None):
        """Adds a cluster to the table (fresh ports); not written."""
        n = brokers or self.BROKERS_PER_CLUSTER
        ports = allocate_ports(n + 1)
        self.clusters[name] = {"bootstrap": ports[0], "brokers": ports[1:],
                               "node_ids": [1 + k for k in range(n)]}
        self.spec[name] = {"upstream": upstream if isinstance(upstream, str) else upstream.bootstrap,
                           "extra": dict(self.cluster_keys)}

    def remove_cluster(self, name):
        del self.spec[name]
        return self.clusters.pop(name)

    def admin_pid(self, **kw):
        """The pid of this ferryd's admin process (ferry-admin)."""
        return admin_pid_of(self.proc.pid, **kw)

    def workers_of(self, name):
        return int(self.spec[name]["extra"].get("workers", 1))

    # ---- process ----
    def start(self, wait=True, env=None):
        self.log = open(self.log_path, "ab")
        self.proc = self.keeper.spawn("ferryd", [FERRYD, "-c", self.config_path],
                                      stdout=self.log, stderr=self.log,
                                      cwd=str(self.workdir), env=env)
        if wait:
            self.wait_ready()
        return self

    # ---- reload and status ----
    def reload_http(self, text=None, timeout=60.0):
        """POST /admin/config/reload (text None: empty body = the file).
        Returns (HTTP status, JSON body)."""
        body = text.encode() if isinstance(text, str) else text
        code, _, data = http_request("POST", "/admin/config/reload", unix_socket=self.sock,
                                     body=body or b"", timeout=timeout)
        return code, json.loads(data)

    def reload_ctl(self, path=None, json_out=False, timeout=60):
        args = (["--json"] if json_out else []) + ["reload"] + ([str(path)] if path else [])
        return self.ctl(*args, check=False, timeout=timeout)

    def config_status(self):
        code, _, data = self.http("/admin/config/status")
        assert code == 200, (code, data)
        return json.loads(data)

    def cluster_doc(self, name):
        """GET /admin/clusters/NAME as a dict, or None on 404."""
        code, _, data = self.http(f"/admin/clusters/{name}")
        if code == 404:
            return None
        assert code == 200, (code, data)
        return json.loads(data)

    def live_workers(self):
        """pids of ferryd's live workers (its children but the admin process)."""
        return sorted(p for p in children_of(self.proc.pid)
                      if pid_alive(p) and not is_admin_process(p))

    def log_text(self):
        return Path(self.log_path).read_text(errors="replace")


@pytest.fixture
def reload_ferry_factory(keeper, workdir, request):
    """reload_ferry_factory(upstreams, start=True, env=None, **kw) -> ReloadFerry."""
    def make(upstreams, start=True, env=None, **kw):
        f = ReloadFerry(keeper, workdir, upstreams, **kw)
        register_log(request, "ferryd", f.log_path)
        if start:
            f.start(env=env)
        return f
    return make


def wait_for(pred, timeout, interval=0.05, what="condition"):
    """Polls pred() until it returns a truthy value; returns it, or raises
    AssertionError naming `what` and the last value/exception."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = pred()
            if v:
                return v
            last = v
        except Exception as e:  # noqa: BLE001 -- reported below
            last = repr(e)
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not reached within {timeout}s (last: {last!r})")
        time.sleep(interval)


def port_refuses(port, host="127.0.0.1", timeout=1.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect((host, port))
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    finally:
        s.close()
    return False


def kreq(api_key, api_version, corr, body=b"", client_id="ferry-it"):
    """A request frame with a v1 (non-flexible) header."""
    cid = client_id.encode()
    payload = struct.pack(">hhih", api_key, api_version, corr, len(cid)) + cid + body
    return struct.pack(">i", len(payload)) + payload


def apiversions_v0(corr, client_id="ferry-it"):
    return kreq(18, 0, corr, b"", client_id)


def fetch_v4(corr, topic, partition, offset, max_wait_ms, client_id="ferry-it"):
    """Fetch v4: replica -1, min_bytes 1, one partition."""
    t = topic.encode()
    body = struct.pack(">iiiib", -1, max_wait_ms, 1, 1 << 20, 0)
    body += struct.pack(">i", 1) + struct.pack(">h", len(t)) + t
    body += struct.pack(">i", 1) + struct.pack(">iqi", partition, offset, 1 << 20)
    return kreq(1, 4, corr, body, client_id)


def recv_kframe(s, timeout=5.0):
    """One response frame (without its size); raises on EOF or timeout."""
    deadline = time.monotonic() + timeout
    buf = b""
    need = 4
    size = None
    while len(buf) < need:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout(f"timed out after {len(buf)} of {need} bytes")
        s.settimeout(left)
        chunk = s.recv(need - len(buf))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {need} bytes")
        buf += chunk
        if size is None and len(buf) == 4:
            (size,) = struct.unpack(">i", buf)
            need = 4 + size
    return buf[4:]


def wait_closed(s, timeout):
    """Reads until EOF/reset; returns (bytes, seconds) or raises on timeout."""
    t0 = time.monotonic()
    data = b""
    while True:
        left = t0 + timeout - time.monotonic()
        if left <= 0:
            raise AssertionError(f"connection still open after {timeout}s ({len(data)} bytes)")
        s.settimeout(left)
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            break
        except socket.timeout:
            continue
        if not chunk:
            break
        data += chunk
    return data, time.monotonic() - t0

# ==========================================================================
# END reload helpers
# ==========================================================================
