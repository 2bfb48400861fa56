#!/usr/bin/env python3
"""
kcluster — a real Apache Kafka cluster (KRaft) on loopback, for ferry's tests,
scripts/demo and scripts/bench.

The broker is the one scripts/install-kafka put into the cache
(${FERRY_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/ferry}/kafka-VERSION/broker,
VERSION pinned in pom.xml beside this file: kafka.version, or
kafka.older.version for the older line, Kafka 3.9, which logs through
log4j 1 / reload4j instead of log4j2). Nothing is downloaded here.

A cluster lives in one directory:

    cluster.json    ports, node ids, cluster id, owner (read by `stop`, `reap`)
    pids            one "NODE_ID PID STARTTIME" line per JVM ever started
    tls/            throwaway CA (ca.crt), the brokers' PEM keystore
                    (server.pem: key + chain, names localhost and 127.0.0.1)
                    and a client certificate (client.crt, client.key)
    log4j2.properties  (log4j.properties for Kafka 3.x)
    node-N/         server.properties, data/, server.log, stdout.log

Every node has six listeners on 127.0.0.1, each on a free port:
PLAINTEXT, SASL_PLAINTEXT and SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512),
SSL (client certificates requested, not required), MTLS (SSL with client
certificates required) and CONTROLLER. The client
listeners are advertised as "localhost" (resolves to 127.0.0.1), so a TLS
client can verify the broker's name. Node ids start at 1. The quorum is
dynamic (KIP-853): the first nodes are combined broker+controller voters; a
node added later is a broker, or a broker+controller observer.

Users (created at format time; PLAIN ones in the listener's JAAS config):
admin/admin-secret and alice/alice-secret for every mechanism.

Library use (pytest):

    c = Cluster(dir, nodes=3).start()      # formats on first start; waits ready
    c.bootstrap()                          # "localhost:P1,localhost:P2,..."
    c.stop_node(2); c.kill_node(3); c.restart_node(3); c.add_node(); c.remove_node(4)
    c.stop()

Every JVM is recorded in `pids` before anything else happens; Cluster.stop()
runs at interpreter exit and on SIGTERM/SIGINT too, and `reap` kills the JVMs
of clusters whose owner process is gone (a crashed run).

CLI:

    kcluster.py start --nodes 3 --dir D [--owner PID] [--older]  # detached; prints JSON
    kcluster.py run --nodes 1 --dir D [--topic T:P] [--older]    # attached: prints JSON,
                                                        # stops when stdin closes (scripts/demo)
    kcluster.py stop --dir D
    kcluster.py status --dir D
    kcluster.py apiversions HOST:PORT                    # {key: [min, max]}
    kcluster.py reap [--root R]
"""

import argparse
import atexit
import base64
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kwire import (KafkaError, api_versions, api_versions_diff,  # noqa: E402,F401
                   create_topics, list_offsets, metadata, metadata_brokers)

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"

LISTENERS = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL", "MTLS", "CONTROLLER")
CLIENT_LISTENERS = LISTENERS[:5]
# listener name -> security protocol where they differ
PROTOCOL = {"CONTROLLER": "PLAINTEXT", "MTLS": "SSL"}
USERS = {"admin": "admin-secret", "alice": "alice-secret"}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

DEFAULT_HEAP = ("-Xms128m", "-Xmx384m")
# Two cores run several brokers and the suite beside them: one GC thread,
# few compiler threads, no perf-data file.
BASE_JVM_OPTS = ("-XX:+UseSerialGC", "-XX:CICompilerCount=2", "-XX:-UsePerfData",
                 "-Djava.awt.headless=true")
# Tests: the C1 compiler only. Measured here: a 3-node cluster ready with
# ~40% less CPU (9 s instead of 15-17 s of JVM time) and sooner (12-17 s
# instead of 29 s, machine loaded); peak throughput is lower, so scripts/bench
# asks for the full JIT (kcluster.py start --full-jit).
QUICK_JIT = ("-XX:TieredStopAtLevel=1",)
DEFAULT_JVM_OPTS = BASE_JVM_OPTS + QUICK_JIT
DEFAULT_READY_TIMEOUT = 90.0
STOP_GRACE = 20.0


class NotInstalled(KafkaError):
    pass


def log(msg):
    print(f"kcluster: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# where things are
# --------------------------------------------------------------------------

def kafka_version(prop="kafka.version"):
    """The pinned version: kafka.version, or kafka.older.version (the older
    line, older_kafka_version())."""
    m = re.search(rf"<{re.escape(prop)}>([^<]+)</{re.escape(prop)}>", POM.read_text())
    if not m:
        raise KafkaError(f"{POM}: no <{prop}>")
    return m.group(1).strip()


def older_kafka_version():
    return kafka_version("kafka.older.version")


def uses_log4j1(version):
    """Kafka 3.x logs through log4j 1 (reload4j); 4.x through log4j2."""
    return int(version.split(".")[0]) < 4


def cache_root():
    if os.environ.get("FERRY_CACHE_DIR"):
        return Path(os.environ["FERRY_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.environ.get("HOME", "/nonexistent"),
                                                            ".cache")
    return Path(base) / "ferry"


def kafka_home(version=None):
    return cache_root() / f"kafka-{version or kafka_version()}"


def classpath(part, version=None):
    """The classpath of one installed part (broker, client, tools):
    "DIR/*". Raises NotInstalled when scripts/install-kafka has not put it
    there (its stamp file is written last)."""
    home = kafka_home(version)
    d = home / part
    if not (home / f".{part}.stamp").exists() or not d.is_dir():
        raise NotInstalled(f"{d}: Kafka's {part} jars are not installed (run scripts/install-kafka)")
    return f"{d}/*"


def java_bin():
    j = os.environ.get("FERRY_KAFKA_JAVA")
    if j:
        return j
    if os.environ.get("JAVA_HOME"):
        return os.path.join(os.environ["JAVA_HOME"], "bin", "java")
    return "java"


def run_root():
    """Where test runs put their clusters (reap scans it)."""
    return Path(os.environ.get("FERRY_KAFKA_RUN_ROOT")
                or os.path.join(tempfile.gettempdir(), f"ferry-kafka-{os.getuid()}"))


# --------------------------------------------------------------------------
# processes
# --------------------------------------------------------------------------

def proc_starttime(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = data.rpartition(")")[2].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def alive(pid, starttime=None):
    st = proc_starttime(pid)
    return st is not None and (starttime is None or st == starttime)


def is_kafka_jvm(pid, cluster_dir):
    """The process runs kafka.Kafka with a config inside cluster_dir."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"kafka.Kafka" in argv and any(a.startswith(str(cluster_dir).encode() + b"/")
                                          for a in argv)


def _reap(pid):
    try:
        os.waitpid(pid, os.WNOHANG)
    except OSError:
        pass


def wait_gone(pid, starttime, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(pid)
        if not alive(pid, starttime):
            return True
        time.sleep(0.05)
    _reap(pid)
    return not alive(pid, starttime)


def _set_pdeathsig():
    # The JVM dies with its parent (a test run killed with SIGKILL).
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass


# --------------------------------------------------------------------------
# ports and names
# --------------------------------------------------------------------------

def free_ports(n):
    """n distinct free ports on 127.0.0.1, below the ephemeral range (a port
    a client connection borrowed could not be bound by a restarted node)."""
    lo, hi = 20000, 32000
    try:
        eph = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
        if eph - 1000 > lo:
            hi = eph
    except (OSError, ValueError, IndexError):
        pass
    rnd = random.Random(os.getpid() ^ time.time_ns())
    out = []
    for _ in range(50 * n):
        p = rnd.randrange(lo, hi)
        if p in out:
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            continue
        finally:
            s.close()
        out.append(p)
        if len(out) == n:
            return out
    raise KafkaError(f"no {n} free ports in {lo}-{hi}")


def kafka_uuid():
    """A Kafka Uuid in its text form (URL-safe base64, no padding), never
    starting with '-' (the tools would read it as an option)."""
    while True:
        s = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not s.startswith("-"):
            return s


# --------------------------------------------------------------------------
# TLS material
# --------------------------------------------------------------------------

def make_tls(d, names=("localhost",), ips=("127.0.0.1",)):
    """A throwaway CA and, signed by it, the brokers' certificate (SAN: names
    and ips) as a PEM keystore (PKCS#8 key + chain) and a client certificate."""
    d = Path(d)
    d.mkdir(parents=True, exist_ok=True)
    if (d / "server.pem").exists():
        return d

    def ossl(*args):
        r = subprocess.run(["openssl", *args], cwd=d, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=60)
        if r.returncode != 0:
            raise KafkaError(f"openssl {' '.join(args)}: {r.stderr.strip()}")

    def key(name):
        ossl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", f"{name}.key")

    key("ca")
    ossl("req", "-x509", "-new", "-key", "ca.key", "-days", "3650", "-subj",
         "/CN=ferry test CA", "-out", "ca.crt")
    san = ",".join([f"DNS:{n}" for n in names] + [f"IP:{i}" for i in ips])
    for name, cn, ext in (("server", names[0], f"subjectAltName={san}\nextendedKeyUsage=serverAuth,clientAuth\n"),
                          ("client", "ferry-test-client", "extendedKeyUsage=clientAuth\n")):
        key(name)
        ossl("req", "-new", "-key", f"{name}.key", "-subj", f"/CN={cn}", "-out", f"{name}.csr")
        (d / f"{name}.ext").write_text(ext)
        ossl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "3650", "-extfile", f"{name}.ext", "-out", f"{name}.crt")
    (d / "server.pem").write_text((d / "server.key").read_text() + (d / "server.crt").read_text()
                                  + (d / "ca.crt").read_text())
    return d


# --------------------------------------------------------------------------
# the cluster
# --------------------------------------------------------------------------

LOG4J2 = """\
# Written by kcluster.py. One file per node: ${sys:kafka.logs.dir}/server.log
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = WARN
"""

# The same for Kafka 3.x (log4j 1's format, read by reload4j).
LOG4J1 = """\
# Written by kcluster.py. One file per node: ${kafka.logs.dir}/server.log
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=${kafka.logs.dir}/server.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.authorizer.logger=WARN
"""

_live = set()          # clusters this process started and has not stopped
_live_lock = threading.Lock()
_handlers_installed = False


def _stop_live_clusters():
    with _live_lock:
        clusters = list(_live)
    for c in clusters:
        try:
            c.stop(grace=5.0)
        except Exception as e:  # keep stopping the others
            log(f"stopping {c.dir}: {e}")


def _on_signal(signum, frame):
    _stop_live_clusters()
    prev = _prev_handlers.get(signum)
    if callable(prev):
        prev(signum, frame)
    else:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


_prev_handlers = {}


def _install_handlers():
    global _handlers_installed
    if _handlers_installed:
        return
    _handlers_installed = True
    atexit.register(_stop_live_clusters)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            prev = signal.getsignal(sig)
            if prev in (signal.SIG_IGN,):
                continue
            _prev_handlers[sig] = prev if prev is not signal.default_int_handler else prev
            signal.signal(sig, _on_signal)


class Node:
    def __init__(self, cluster, node_id, roles, ports, dir_id=None):
        self.cluster = cluster
        self.id = node_id
        self.roles = roles              # "broker,controller" or "broker"
        self.ports = ports              # {listener: port}
        self.dir_id = dir_id            # metadata directory id (voters)
        self.dir = cluster.dir / f"node-{node_id}"
        self.proc = None
        self.pid = None
        self.starttime = None
        self.wanted = False     # started here and not stopped since
        self.log_mark = 0       # size of server.log when it was last started

    @property
    def is_controller(self):
        return "controller" in self.roles

    def running(self):
        return self.pid is not None and alive(self.pid, self.starttime)

    def started_since_spawn(self):
        """Its server.log says "Kafka Server started" (every acceptor bound)
        since it was last spawned."""
        try:
            with open(self.dir / "server.log", "rb") as f:
                f.seek(self.log_mark)
                return b"Kafka Server started" in f.read()
        except OSError:
            return False

    def to_json(self):
        return {"id": self.id, "roles": self.roles, "ports": self.ports, "dir_id": self.dir_id,
                "pid": self.pid, "starttime": self.starttime, "wanted": self.wanted}


class Cluster:
    """An N-node KRaft cluster in `dir` (created if missing)."""

    def __init__(self, dir, nodes=3, host="localhost", heap=DEFAULT_HEAP, jvm_opts=DEFAULT_JVM_OPTS,
                 overrides=None, port_alloc=free_ports, version=None, detached=False,
                 owner=None):
        self.dir = Path(dir).resolve()
        self.host = host
        self.heap = tuple(heap)
        self.jvm_opts = tuple(jvm_opts)
        self.overrides = dict(overrides or {})
        self.port_alloc = port_alloc
        self.version = version or kafka_version()
        self.detached = detached   # JVMs outlive this process (the CLI)
        self.owner = owner if owner is not None else os.getpid()
        self.nodes = {}
        self.cluster_id = None
        self.voters = []           # node ids of the initial voters
        self.started_in = None
        self._initial = nodes
        self.tls = None

    # ---- configuration ----
    def _new_node(self, node_id, roles, dir_id=None):
        ports = dict(zip(LISTENERS, self.port_alloc(len(LISTENERS))))
        return Node(self, node_id, roles, ports, dir_id)

    def _setup(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        if uses_log4j1(self.version):
            (self.dir / "log4j.properties").write_text(LOG4J1)
        else:
            (self.dir / "log4j2.properties").write_text(LOG4J2)
        self.tls = make_tls(self.dir / "tls", names=(self.host,))
        self.cluster_id = kafka_uuid()
        for i in range(1, self._initial + 1):
            self.nodes[i] = self._new_node(i, "broker,controller", kafka_uuid())
        self.voters = list(self.nodes)
        self._save()

    def quorum_bootstrap(self):
        return ",".join(f"127.0.0.1:{self.nodes[v].ports['CONTROLLER']}" for v in self.voters)

    def initial_controllers(self):
        return ",".join(f"{v}@127.0.0.1:{self.nodes[v].ports['CONTROLLER']}:{self.nodes[v].dir_id}"
                        for v in self.voters)

    def _rf(self):
        return min(3, len(self.voters))

    def _isr(self):
        return min(2, len(self.voters))

    def node_config(self, n):
        jaas_plain = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                      + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
        jaas_scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        kv = {
            "process.roles": n.roles,
            "node.id": n.id,
            "controller.quorum.bootstrap.servers": self.quorum_bootstrap(),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listeners": ",".join(f"{lst}://127.0.0.1:{n.ports[lst]}" for lst in LISTENERS
                                  if lst != "CONTROLLER" or n.is_controller),
            "advertised.listeners": ",".join(f"{lst}://{self.host}:{n.ports[lst]}"
                                             for lst in CLIENT_LISTENERS),
            "listener.security.protocol.map": ",".join(
                f"{lst}:{PROTOCOL.get(lst, lst)}" for lst in LISTENERS),
            "log.dirs": n.dir / "data",
            # small: 2 cores, several brokers, the test suite beside them
            "num.network.threads": 2,
            "num.io.threads": 2,
            "background.threads": 2,
            "num.recovery.threads.per.data.dir": 1,
            "num.replica.fetchers": 1,
            "log.cleaner.threads": 1,
            "log.cleaner.dedupe.buffer.size": 8 << 20,
            "num.partitions": 3,
            "default.replication.factor": self._rf(),
            "min.insync.replicas": self._isr(),
            "offsets.topic.replication.factor": self._rf(),
            "offsets.topic.num.partitions": 5,
            "transaction.state.log.replication.factor": self._rf(),
            "transaction.state.log.min.isr": self._isr(),
            "transaction.state.log.num.partitions": 5,
            "group.initial.rebalance.delay.ms": 0,
            # SASL on SASL_PLAINTEXT and SASL_SSL
            "sasl.enabled.mechanisms": ",".join(MECHANISMS),
            # TLS on SSL and SASL_SSL
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": self.dir / "tls" / "server.pem",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": self.dir / "tls" / "ca.crt",
            "ssl.client.auth": "requested",
            "listener.name.mtls.ssl.client.auth": "required",
        }
        if not uses_log4j1(self.version):
            # share groups (KIP-932) exist from Kafka 4.0 on
            kv.update({"share.coordinator.state.topic.replication.factor": self._rf(),
                       "share.coordinator.state.topic.min.isr": self._isr(),
                       "share.coordinator.state.topic.num.partitions": 3})
        for lst in ("sasl_plaintext", "sasl_ssl"):
            kv[f"listener.name.{lst}.plain.sasl.jaas.config"] = jaas_plain
            kv[f"listener.name.{lst}.scram-sha-256.sasl.jaas.config"] = jaas_scram
            kv[f"listener.name.{lst}.scram-sha-512.sasl.jaas.config"] = jaas_scram
        kv.update(self.overrides)
        return "".join(f"{k}={v}\n" for k, v in kv.items())

    def _write_config(self, n):
        n.dir.mkdir(parents=True, exist_ok=True)
        (n.dir / "server.properties").write_text(
            f"# node {n.id} of {self.dir} (written by kcluster.py)\n" + self.node_config(n))

    def _format(self, nodes, initial):
        """Formats the nodes' storage, in parallel."""
        procs = []
        for n in nodes:
            self._write_config(n)
            argv = [java_bin(), "-Xmx256m", *self.jvm_opts, "-cp", classpath("broker", self.version),
                    self._log_config(), f"-Dkafka.logs.dir={n.dir}",
                    "kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                    "-c", str(n.dir / "server.properties")]
            if initial:
                argv += ["--initial-controllers", self.initial_controllers()]
                for u, p in USERS.items():
                    for mech in MECHANISMS[1:]:
                        argv += ["-S", f"{mech}=[name={u},password={p}]"]
            elif n.is_controller:
                argv += ["--no-initial-controllers"]
            out = open(n.dir / "format.log", "wb")
            procs.append((n, subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                              stderr=subprocess.STDOUT), out))
        for n, p, out in procs:
            try:
                rc = p.wait(120)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                rc = "timeout"
            out.close()
            if rc != 0:
                raise KafkaError(f"formatting node {n.id} failed ({rc}): "
                                 + (n.dir / "format.log").read_text(errors="replace")[-2000:])

    def _save(self):
        doc = {"version": self.version, "cluster_id": self.cluster_id, "host": self.host,
               "owner": {"pid": self.owner, "starttime": proc_starttime(self.owner)},
               "detached": self.detached, "voters": self.voters,
               "nodes": [n.to_json() for n in self.nodes.values()]}
        tmp = self.dir / ".cluster.json.tmp"
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        os.replace(tmp, self.dir / "cluster.json")

    @classmethod
    def load(cls, dir):
        """The cluster described by DIR/cluster.json (e.g. one the CLI started)."""
        d = Path(dir).resolve()
        doc = json.loads((d / "cluster.json").read_text())
        c = cls(d, nodes=0, host=doc["host"], version=doc["version"], detached=doc["detached"],
                owner=doc["owner"]["pid"])
        c.cluster_id = doc["cluster_id"]
        c.voters = doc["voters"]
        for nd in doc["nodes"]:
            n = Node(c, nd["id"], nd["roles"], nd["ports"], nd["dir_id"])
            n.pid, n.starttime = nd["pid"], nd["starttime"]
            n.wanted = nd.get("wanted", False) and n.running()
            c.nodes[n.id] = n
        c.tls = d / "tls"
        return c

    # ---- processes ----
    def _log_config(self):
        if uses_log4j1(self.version):
            return f"-Dlog4j.configuration=file:{self.dir / 'log4j.properties'}"
        return f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}"

    def _spawn(self, n):
        argv = [java_bin(), *self.heap, *self.jvm_opts, self._log_config(),
                f"-Dkafka.logs.dir={n.dir}",
                "-cp", classpath("broker", self.version), "kafka.Kafka",
                str(n.dir / "server.properties")]
        out = open(n.dir / "stdout.log", "ab")
        try:
            n.log_mark = (n.dir / "server.log").stat().st_size
        except OSError:
            n.log_mark = 0
        n.wanted = True
        n.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                  stderr=subprocess.STDOUT, cwd=str(n.dir),
                                  start_new_session=True,
                                  preexec_fn=None if self.detached else _set_pdeathsig)
        out.close()
        n.pid = n.proc.pid
        n.starttime = proc_starttime(n.pid)
        with open(self.dir / "pids", "a") as f:
            f.write(f"{n.id} {n.pid} {n.starttime}\n")
        self._save()
        if not self.detached:
            _install_handlers()
            with _live_lock:
                _live.add(self)

    def start(self, timeout=DEFAULT_READY_TIMEOUT, attempts=3):
        """Formats (first time) and starts every node; waits until ready.
        A new cluster whose node could not bind a port (another process took
        it between the choice and the bind) is wiped and set up again on
        other ports, up to `attempts` times."""
        t0 = time.monotonic()
        for attempt in range(1, attempts + 1):
            fresh = not (self.dir / "cluster.json").exists()
            if fresh:
                self._setup()
                self._format(list(self.nodes.values()), initial=True)
            for n in self.nodes.values():
                if not n.running():
                    self._spawn(n)
            try:
                self.wait_ready(max(1.0, timeout - (time.monotonic() - t0)))
                break
            except KafkaError as e:
                if not (fresh and attempt < attempts and "Address already in use" in str(e)):
                    raise
                log(f"a port was taken while starting ({e}); setting up again on other ports")
                self.stop(grace=5.0)
                self._wipe()
        self.started_in = time.monotonic() - t0
        log(f"{len(self.nodes)} nodes of Kafka {self.version} ready in {self.started_in:.1f}s "
            f"({self.dir})")
        return self

    def _wipe(self):
        for n in self.nodes.values():
            shutil.rmtree(n.dir, ignore_errors=True)
        for name in ("cluster.json", "pids"):
            try:
                (self.dir / name).unlink()
            except OSError:
                pass
        self.nodes = {}

    def running_nodes(self):
        return [n for n in self.nodes.values() if n.running()]

    def wait_ready(self, timeout=DEFAULT_READY_TIMEOUT, nodes=None):
        """Until every node started here and not stopped since (or those
        given) has logged "Kafka Server started" (every listener bound),
        answers ApiVersions on its PLAINTEXT listener, and the metadata of
        each lists them all (registered and unfenced). A wanted node that
        is not running fails at once, with the tail of its log; otherwise
        KafkaError with the last problem after the timeout."""
        deadline = time.monotonic() + timeout
        last = "nothing tried"
        while True:
            want = nodes or [n for n in self.nodes.values() if n.wanted]
            dead = [n for n in want if not n.running()]
            if dead:
                rc = dead[0].proc.poll() if dead[0].proc is not None else "?"
                raise KafkaError(f"node {dead[0].id} of {self.dir} is not running (rc {rc}); "
                                 f"{self._tail(dead[0].id)}")
            try:
                ids = {n.id for n in want}
                for n in want:
                    if not n.started_since_spawn():
                        raise KafkaError(f"node {n.id} has not logged \"Kafka Server started\"")
                    api_versions("127.0.0.1", n.ports["PLAINTEXT"], timeout=2.0)
                    seen, _ = metadata_brokers("127.0.0.1", n.ports["PLAINTEXT"], timeout=2.0)
                    if not ids <= set(seen):
                        raise KafkaError(f"node {n.id} lists brokers {sorted(seen)}, "
                                         f"want {sorted(ids)}")
                return
            except (OSError, KafkaError, struct.error) as e:
                last = str(e)
            if time.monotonic() >= deadline:
                raise KafkaError(f"cluster {self.dir} not ready after {timeout}s: {last}")
            time.sleep(0.25)

    def _tail(self, node_id, lines=30):
        out = []
        for name in ("stdout.log", "server.log"):
            p = self.nodes[node_id].dir / name
            try:
                out.append(f"{p}:\n" + "\n".join(p.read_text(errors="replace").splitlines()[-lines:]))
            except OSError:
                pass
        return "\n".join(out)

    def stop_node(self, node_id, grace=STOP_GRACE):
        """SIGTERM (controlled shutdown), then SIGKILL after grace."""
        n = self.nodes[node_id]
        if not n.running():
            n.proc, n.wanted = None, False
            return
        os.kill(n.pid, signal.SIGTERM)
        if not wait_gone(n.pid, n.starttime, grace):
            log(f"node {node_id} (pid {n.pid}) ignored SIGTERM for {grace}s: SIGKILL")
            self.kill_node(node_id)
        n.proc = None
        n.wanted = False
        self._save()

    def kill_node(self, node_id):
        """SIGKILL, as a crash."""
        n = self.nodes[node_id]
        if n.running():
            try:
                os.kill(n.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            wait_gone(n.pid, n.starttime, 10.0)
        n.proc = None
        n.wanted = False
        self._save()

    def restart_node(self, node_id, timeout=DEFAULT_READY_TIMEOUT, grace=STOP_GRACE):
        """Stops the node if it runs, starts it again, waits until it is back
        in everyone's metadata."""
        self.stop_node(node_id, grace)
        n = self.nodes[node_id]
        self._spawn(n)
        self.wait_ready(timeout)
        return n

    def add_node(self, roles="broker", timeout=DEFAULT_READY_TIMEOUT):
        """A new node (next id) joining the running cluster: a broker, or a
        broker+controller (an observer of the quorum, not a voter)."""
        node_id = max(self.nodes) + 1
        n = self._new_node(node_id, roles, kafka_uuid())
        self.nodes[node_id] = n
        self._format([n], initial=False)
        self._spawn(n)
        self.wait_ready(timeout)
        return n

    def remove_node(self, node_id, grace=STOP_GRACE):
        """Stops a node added with add_node() and forgets it: bootstrap(),
        broker_ports(), all_ports() and wait_ready() no longer name it, and
        its data directory goes (a later add_node() may reuse its id). Its
        registration stays with the controllers until an UnregisterBroker;
        its logs stay in its directory; its pids stay in `pids` (reap)."""
        if node_id in self.voters:
            raise KafkaError(f"node {node_id} is a voter of the quorum: not removable")
        self.stop_node(node_id, grace)
        n = self.nodes.pop(node_id)
        shutil.rmtree(n.dir / "data", ignore_errors=True)
        self._save()

    def stop(self, grace=STOP_GRACE):
        """Stops every node at once (SIGTERM, then SIGKILL after grace) and
        every JVM the pid file names, even ones of an earlier generation."""
        recorded = self.recorded_pids()
        live = [(p, st) for _, p, st in recorded if alive(p, st) and is_kafka_jvm(p, self.dir)]
        for p, _ in live:
            try:
                os.kill(p, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        for p, st in live:
            if not wait_gone(p, st, max(0.0, deadline - time.monotonic())):
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                wait_gone(p, st, 10.0)
        for n in self.nodes.values():
            n.proc, n.wanted = None, False
        if (self.dir / "cluster.json").exists():
            self._save()
        with _live_lock:
            _live.discard(self)

    def recorded_pids(self):
        try:
            lines = (self.dir / "pids").read_text().splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            w = line.split()
            if len(w) == 3 and all(x.isdigit() for x in w):
                out.append((int(w[0]), int(w[1]), int(w[2])))
        return out

    # ---- topics ----
    def create_topic(self, name, partitions=3, replication_factor=None, min_isr=None, configs=None,
                     timeout=60.0):
        """Creates a topic (default: replication factor min(3, voters),
        min.insync.replicas min(2, voters)) and waits until every running
        node's metadata shows every partition with a leader and a full ISR."""
        rf = replication_factor or self._rf()
        cfg = {"min.insync.replicas": min_isr or min(self._isr(), rf), **(configs or {})}
        n = self.running_nodes()[0]
        err, msg = create_topics("127.0.0.1", n.ports["PLAINTEXT"],
                                 [(name, partitions, rf, cfg)])[name]
        if err not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
            raise KafkaError(f"CreateTopics {name}: error {err} ({msg})")
        self.wait_topic(name, partitions, rf, timeout)

    def wait_topic(self, name, partitions, isr_size, timeout=60.0):
        deadline = time.monotonic() + timeout
        last = None
        while True:
            try:
                ok = True
                for n in self.running_nodes():
                    t = metadata("127.0.0.1", n.ports["PLAINTEXT"], [name])["topics"].get(name)
                    parts = t["partitions"] if t and t["error"] == 0 else {}
                    good = [p for p in parts.values()
                            if p["error"] == 0 and p["leader"] >= 0 and len(p["isr"]) >= isr_size]
                    if len(good) < partitions:
                        ok, last = False, f"node {n.id}: {t}"
                        break
                if ok:
                    return
            except (OSError, KafkaError, struct.error) as e:
                last = str(e)
            if time.monotonic() >= deadline:
                raise KafkaError(f"topic {name} not ready after {timeout}s: {last}")
            time.sleep(0.1)

    def end_offsets(self, topic):
        """{partition: high watermark}, asked of each partition's leader."""
        n = self.running_nodes()[0]
        md = metadata("127.0.0.1", n.ports["PLAINTEXT"], [topic])
        t = md["topics"].get(topic)
        if not t or t["error"]:
            raise KafkaError(f"no topic {topic}: {t}")
        by_leader = {}
        for idx, p in t["partitions"].items():
            by_leader.setdefault(p["leader"], []).append(idx)
        out = {}
        for leader, parts in by_leader.items():
            out.update(list_offsets("127.0.0.1", self.nodes[leader].ports["PLAINTEXT"], topic, parts))
        return out

    # ---- addresses ----
    def bootstrap(self, listener="PLAINTEXT", host=None, nodes=None):
        ids = nodes or sorted(self.nodes)
        return ",".join(f"{host or self.host}:{self.nodes[i].ports[listener]}" for i in ids)

    def broker_ports(self, listener="PLAINTEXT"):
        """{node_id: port} of one listener (every node ever added)."""
        return {i: n.ports[listener] for i, n in self.nodes.items()}

    def all_ports(self):
        return {p for n in self.nodes.values() for p in n.ports.values()}

    def describe(self):
        return {"dir": str(self.dir), "version": self.version, "cluster_id": self.cluster_id,
                "started_in_s": round(self.started_in, 1) if self.started_in else None,
                "bootstrap": {lst: self.bootstrap(lst) for lst in CLIENT_LISTENERS},
                "nodes": {i: n.to_json() for i, n in self.nodes.items()},
                "tls": {"ca": str(self.dir / "tls" / "ca.crt"),
                        "client_cert": str(self.dir / "tls" / "client.crt"),
                        "client_key": str(self.dir / "tls" / "client.key")},
                "users": USERS}


# --------------------------------------------------------------------------
# reaping the JVMs of crashed runs
# --------------------------------------------------------------------------

def reap(root=None, quiet=False):
    """Kills (SIGKILL) every recorded JVM of every cluster under root whose
    owner process is gone; returns the pids killed. A cluster whose owner
    still runs (another developer's run, a demo) is left alone."""
    root = Path(root or run_root())
    killed = []
    if not root.is_dir():
        return killed
    for doc in root.glob("*/cluster.json"):
        d = doc.parent.resolve()
        try:
            owner = json.loads(doc.read_text())["owner"]
        except (OSError, ValueError, KeyError):
            owner = {"pid": None, "starttime": None}
        if owner.get("pid") and alive(owner["pid"], owner.get("starttime")):
            continue
        for line in (d / "pids").read_text().splitlines() if (d / "pids").exists() else []:
            w = line.split()
            if len(w) != 3:
                continue
            pid, st = int(w[1]), int(w[2])
            if alive(pid, st) and is_kafka_jvm(pid, d):
                if not quiet:
                    log(f"killing leftover JVM {pid} (node {w[0]} of {d})")
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except ProcessLookupError:
                    pass
    return killed


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(prog="kcluster.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("start", help="format and start a cluster, detached; prints its JSON")
    s.add_argument("--nodes", type=int, default=3)
    s.add_argument("--dir", required=True)
    s.add_argument("--owner", type=int, default=os.getppid(),
                   help="pid whose death makes `reap` kill the cluster (default: the caller)")
    s.add_argument("--heap", default="384m")
    s.add_argument("--full-jit", action="store_true",
                   help="C2 as well (benchmarks); the default, C1 only, starts faster")
    s.add_argument("--timeout", type=float, default=DEFAULT_READY_TIMEOUT)
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="broker config override (repeatable)")
    s.add_argument("--older", action="store_true",
                   help="the older line (kafka.older.version of pom.xml) instead of kafka.version")
    r = sub.add_parser("run", help="start a cluster attached to this process: print its JSON, "
                       "stop it when stdin closes or on SIGINT/SIGTERM; its JVMs die with this "
                       "process")
    r.add_argument("--nodes", type=int, default=1)
    r.add_argument("--dir", required=True)
    r.add_argument("--topic", action="append", default=[], metavar="NAME:PARTITIONS")
    r.add_argument("--timeout", type=float, default=DEFAULT_READY_TIMEOUT)
    r.add_argument("--older", action="store_true",
                   help="the older line (kafka.older.version of pom.xml) instead of kafka.version")
    for name, h in (("stop", "stop every node of the cluster in DIR"),
                    ("status", "the cluster's JSON and which nodes run")):
        p = sub.add_parser(name, help=h)
        p.add_argument("--dir", required=True)
    p = sub.add_parser("node", help="stop|kill|restart one node, or add one")
    p.add_argument("--dir", required=True)
    p.add_argument("action", choices=("stop", "kill", "restart", "add-broker", "add-combined"))
    p.add_argument("id", type=int, nargs="?")
    p = sub.add_parser("create-topic", help="create a topic (RF min(3,n), min ISR min(2,n))")
    p.add_argument("--dir", required=True)
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("name")
    p = sub.add_parser("apiversions", help="ApiVersions v0 of HOST:PORT as JSON")
    p.add_argument("address")
    p = sub.add_parser("apiversions-diff",
                       help="where a proxy's ApiVersions answer differs from a broker's")
    p.add_argument("broker", metavar="BROKER_HOST:PORT")
    p.add_argument("proxy", metavar="PROXY_HOST:PORT")
    p = sub.add_parser("reap", help="kill JVMs of clusters whose owner is gone")
    p.add_argument("--root", default=None)
    a = ap.parse_args(argv)

    if a.cmd == "start":
        overrides = dict(kv.split("=", 1) for kv in a.set)
        c = Cluster(a.dir, nodes=a.nodes, heap=(f"-Xms{min(128, int(a.heap.rstrip('m')))}m",
                                                 f"-Xmx{a.heap}"),
                    overrides=overrides, detached=True, owner=a.owner,
                    version=older_kafka_version() if a.older else None,
                    jvm_opts=BASE_JVM_OPTS if a.full_jit else DEFAULT_JVM_OPTS)
        try:
            c.start(timeout=a.timeout)
        except BaseException:
            c.stop(grace=5.0)
            raise
        print(json.dumps(c.describe()))
    elif a.cmd == "run":
        # not detached: stopped at exit and on SIGTERM/SIGINT/SIGHUP, and
        # its JVMs get SIGKILL when this process dies (PR_SET_PDEATHSIG)
        c = Cluster(a.dir, nodes=a.nodes,
                    version=older_kafka_version() if a.older else None)
        try:
            c.start(timeout=a.timeout)
            for t in a.topic:
                name, _, n = t.partition(":")
                c.create_topic(name, int(n or 1))
            print(json.dumps(c.describe()), flush=True)
            sys.stdin.read()   # until whoever started us closes it, or dies
        finally:
            c.stop(grace=10.0)
    elif a.cmd == "stop":
        c = Cluster.load(a.dir)
        t0 = time.monotonic()
        c.stop()
        log(f"stopped in {time.monotonic() - t0:.1f}s")
    elif a.cmd == "status":
        c = Cluster.load(a.dir)
        d = c.describe()
        d["running"] = [n.id for n in c.running_nodes()]
        print(json.dumps(d))
    elif a.cmd == "node":
        c = Cluster.load(a.dir)
        c.detached = True
        if a.action.startswith("add-"):
            n = c.add_node("broker" if a.action == "add-broker" else "broker,controller")
            print(json.dumps(n.to_json()))
        else:
            if a.id not in c.nodes:
                ap.error(f"no node {a.id} (nodes: {sorted(c.nodes)})")
            {"stop": c.stop_node, "kill": c.kill_node, "restart": c.restart_node}[a.action](a.id)
    elif a.cmd == "create-topic":
        Cluster.load(a.dir).create_topic(a.name, a.partitions)
    elif a.cmd == "apiversions":
        host, _, port = a.address.rpartition(":")
        print(json.dumps({str(k): list(v) for k, v in sorted(api_versions(host, int(port)).items())}))
    elif a.cmd == "apiversions-diff":
        got = []
        for addr in (a.broker, a.proxy):
            host, _, port = addr.rpartition(":")
            got.append(api_versions(host, int(port)))
        print(f"{'key':>4} {'api':<38} {'broker':<9} {'proxy':<9} difference")
        for k, name, b, p, what in api_versions_diff(*got):
            fmt = (lambda r: f"v{r[0]}-{r[1]}" if r else "-")
            print(f"{k:>4} {name:<38} {fmt(b):<9} {fmt(p):<9} {what}")
    elif a.cmd == "reap":
        reap(a.root)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KafkaError as e:
        log(str(e))
        sys.exit(1)
