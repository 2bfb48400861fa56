"""
Helpers for the tests of the supervisor core under faults (issue 9):
test_reload_core.py and test_chaos.py.

- which worker a process is (its command line names the cluster),
- a registry of processes a test SIGSTOPped, so that cleanup continues or
  kills every one of them (by PID and start time) before the keeper's
  SIGTERM, which a stopped process would not act on,
- a worker's control channel taken over by the test (pidfd_getfd) to
  send what a worker could send: a FAILED report, garbage,
- which upstream a port reaches (mock clusters told apart by topic names),
- consistency of /admin/clusters listeners with what the ports really reach,
- ferryd's resources (open fds, RSS) and sanitizer reports in its log.
"""

import collections
import ctypes
import os
import re
import signal
import socket
import struct
import threading
import time

import pytest

from conftest import REPO, children_of, kafka_metadata, pid_alive, proc_starttime

ASAN_REPORT = re.compile(r"ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error")


# --------------------------------------------------------------------------
# processes
# --------------------------------------------------------------------------

def proc_cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode("utf-8", "replace").split("\0")
    except OSError:
        return []


def worker_cluster(pid):
    """The cluster a worker process serves (from `--cluster NAME` in its
    command line), or None when pid is not a ferryd worker."""
    argv = proc_cmdline(pid)
    if "--worker" not in argv:
        return None
    try:
        return argv[argv.index("--cluster") + 1]
    except (ValueError, IndexError):
        return None


def workers_of(ferryd_pid, cluster=None):
    """{pid: cluster} of ferryd's live worker children (of one cluster)."""
    out = {}
    for p in children_of(ferryd_pid):
        if not pid_alive(p):
            continue
        name = worker_cluster(p)
        if name is not None and (cluster is None or name == cluster):
            out[p] = name
    return out


def signal_pid(pid, starttime, sig):
    """Sends sig to pid if it still is the process that started at
    starttime (no pid reuse accident). True when sent."""
    if not pid_alive(pid, starttime):
        return False
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


class StoppedRegistry:
    """Processes a test SIGSTOPped. cleanup() continues and then SIGKILLs
    any of them still alive (the keeper's SIGTERM would sit pending on a
    stopped process, and ferryd's own shutdown waits for its workers)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.procs = {}  # pid -> (starttime, stopped_at monotonic)

    def stop(self, pid, starttime=None):
        st = starttime if starttime is not None else proc_starttime(pid)
        if st is None or not signal_pid(pid, st, signal.SIGSTOP):
            return False
        with self.lock:
            self.procs[pid] = (st, time.monotonic())
        return True

    def cont(self, pid):
        with self.lock:
            rec = self.procs.pop(pid, None)
        if rec:
            signal_pid(pid, rec[0], signal.SIGCONT)

    def forget(self, pid):
        with self.lock:
            self.procs.pop(pid, None)

    def alive(self):
        """[(pid, starttime, stopped_at)] of registered processes still alive."""
        with self.lock:
            items = list(self.procs.items())
        return [(p, st, t) for p, (st, t) in items if pid_alive(p, st)]

    def cleanup(self):
        with self.lock:
            items = list(self.procs.items())
            self.procs.clear()
        for p, (st, _) in items:
            signal_pid(p, st, signal.SIGCONT)
        for p, (st, _) in items:
            signal_pid(p, st, signal.SIGKILL)


@pytest.fixture
def stopped(keeper):
    """A StoppedRegistry; its cleanup runs before the keeper's (it depends
    on keeper, so its finalizer is registered later and runs first)."""
    reg = StoppedRegistry()
    yield reg
    reg.cleanup()


def wait_gone(pid, starttime, timeout, interval=0.02):
    """Seconds until pid (with that start time) is gone, or None."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if not pid_alive(pid, starttime):
            return time.monotonic() - t0
        time.sleep(interval)
    return None if pid_alive(pid, starttime) else time.monotonic() - t0


# --------------------------------------------------------------------------
# a worker's control channel, spoken by the test
# --------------------------------------------------------------------------

_SYS_PIDFD_GETFD = 438  # x86_64 and the generic table alike


def _c_source(rel):
    return (REPO / rel).read_text()


def ipc_type_values():
    """{name: value} of enum ipc_type, read from common/ipc.h so the test
    follows a renumbering."""
    text = _c_source("common/ipc.h")
    m = re.search(r"enum\s+ipc_type\s*\{(.*?)\};", text, re.S)
    assert m, "enum ipc_type not found in common/ipc.h"
    body = re.sub(r"/\*.*?\*/|//[^\n]*", "", m.group(1), flags=re.S)
    out, nxt = {}, 0
    for item in body.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, val = (x.strip() for x in item.partition("="))
        if val:
            nxt = int(val, 0)
        out[name] = nxt
        nxt += 1
    return out


def ipc_header(type_value, length, generation):
    """The envelope of common/ipc.h (struct ipc_hdr: uint32 type, uint32
    len, uint64 generation; native byte order). Checked against the header
    so that a change of layout fails here, not silently."""
    text = _c_source("common/ipc.h")
    m = re.search(r"struct\s+ipc_hdr\s*\{(.*?)\};", text, re.S)
    assert m, "struct ipc_hdr not found in common/ipc.h"
    fields = re.findall(r"(u?int\d+_t)\s+(\w+)\s*;", m.group(1))
    assert fields == [("uint32_t", "type"), ("uint32_t", "len"), ("uint64_t", "generation")], \
        f"struct ipc_hdr changed ({fields}): update core_helpers.ipc_header"
    return struct.pack("=IIQ", type_value, length, generation)


def worker_ipc_fd():
    m = re.search(r"#define\s+WORKER_IPC_FD\s+(\d+)", _c_source("worker/worker.h"))
    return int(m.group(1)) if m else 3


def worker_generation(pid):
    from_cmdline = proc_cmdline(pid)
    try:
        return int(from_cmdline[from_cmdline.index("--generation") + 1])
    except (ValueError, IndexError):
        raise AssertionError(f"pid {pid}: no --generation in {from_cmdline}")


def take_worker_channel(pid):
    """A socket object for the worker's end of its control channel
    (pidfd_getfd(2): needs ptrace rights over the worker, i.e. root or the
    same user). What the test sends on it reaches ferryd as coming from
    that worker. Skips when the kernel or the privileges do not allow it."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        pfd = os.pidfd_open(pid)
    except (AttributeError, OSError) as e:
        pytest.skip(f"pidfd_open unavailable: {e!r}")
    try:
        fd = libc.syscall(_SYS_PIDFD_GETFD, pfd, worker_ipc_fd(), 0)
        if fd < 0:
            err = ctypes.get_errno()
            if err in (38, 1):  # ENOSYS, EPERM
                pytest.skip(f"pidfd_getfd on a worker: {os.strerror(err)}")
            raise OSError(err, f"pidfd_getfd({pid}): {os.strerror(err)}")
    finally:
        os.close(pfd)
    s = socket.socket(fileno=fd)
    assert s.type == socket.SOCK_SEQPACKET, f"worker {pid}'s control channel is {s.type}"
    return s


# --------------------------------------------------------------------------
# which upstream a port reaches
# --------------------------------------------------------------------------

def upstream_label(port, topic_labels, timeout=3.0):
    """One new connection to port with one Metadata v0 request (all
    topics): the label of the upstream whose marker topic came back
    ({topic: label}), "refused", or a description of what went wrong."""
    try:
        md = kafka_metadata("127.0.0.1", port, timeout=timeout)
    except ConnectionRefusedError:
        return "refused"
    except Exception as e:  # noqa: BLE001 -- reported as a label
        return f"error: {e!r}"
    labels = {topic_labels[t] for t in md["topics"] if t in topic_labels}
    if len(labels) == 1:
        return labels.pop()
    return f"topics {sorted(md['topics'])}"


def reach_counts(port, topic_labels, n):
    """Counter of upstream_label over n successive connections."""
    return collections.Counter(upstream_label(port, topic_labels) for _ in range(n))


def listener_owners(clusters):
    """{address: [cluster names]} from a /admin/clusters list."""
    owners = collections.defaultdict(list)
    for c in clusters:
        for lst in c.get("listeners", []):
            owners[lst["address"]].append(c["name"])
    return dict(owners)


def shared_addresses(clusters):
    """{address: names} of addresses listed by more than one cluster."""
    return {a: n for a, n in listener_owners(clusters).items() if len(n) > 1}


def check_ports_agree(f, ports, cluster_upstream, topic_labels, n=30):
    """Status and reality agree on every port in `ports` (loopback):
    no address is listed by two clusters; a port a cluster lists reaches
    that cluster's upstream on every one of n connections; a port no
    cluster lists refuses. Returns {port: owner or None}."""
    clusters = f.status()["clusters"]
    dup = shared_addresses(clusters)
    assert not dup, f"status lists addresses under two clusters: {dup}"
    owners = listener_owners(clusters)
    out, bad = {}, []
    for port in ports:
        owner = owners.get(f"127.0.0.1:{port}", [None])[0]
        out[port] = owner
        got = reach_counts(port, topic_labels, n if owner else 3)
        want = cluster_upstream[owner] if owner else "refused"
        if set(got) != {want}:
            bad.append(f"port {port} (status: {owner or 'no cluster'}) reached {dict(got)}, "
                       f"want all {want!r}")
    assert not bad, "ports do not reach what status says:\n  " + "\n  ".join(bad)
    return out


def listener_ports(doc):
    """Sorted ports of a cluster document's listeners."""
    return sorted(int(lst["address"].rsplit(":", 1)[1]) for lst in doc["listeners"])


# --------------------------------------------------------------------------
# ferryd's resources and log
# --------------------------------------------------------------------------

def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def sanitizer_reports(log_text, context=6):
    """Excerpts of the log around each sanitizer report line."""
    lines = log_text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if ASAN_REPORT.search(line):
            out.append("\n".join(lines[max(0, i - 1):i + context]))
    return out
