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
                 drain_timeout="2s"):
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
