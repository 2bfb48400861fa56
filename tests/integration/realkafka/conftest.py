"""
Real Apache Kafka behind ferry: the fixtures of tests/integration/realkafka.

One 3-node KRaft cluster (tests/peers/kafka/kcluster.py, the broker
scripts/install-kafka cached) serves every test of this package: it starts
when the first test needs it and stops after the last (package scope), so
the suite pays its start-up once. FERRY_KAFKA_DIR=DIR uses the cluster a
developer started with `kcluster.py start --dir DIR` instead, and leaves it
running (the older line's package, older/, starts its own). Each test
starts its own ferryd in front of it (the parent conftest's Ferry, function scope) and uses topics and
groups of its own.

The cluster's JVMs are recorded in DIR/pids under kcluster.run_root() and
killed when the package ends, at interpreter exit, on SIGTERM, and by
`kcluster.py reap` (scripts/test runs it after pytest) when this process died
without cleaning up. A missing install fails the tests with the reason, or
skips them when FERRY_ALLOW_SKIP_KAFKA=1.

This directory is a package (__init__.py) so that its conftest does not
take the parent's module name "conftest", which the parent's test modules
import from; it must not be named "kafka" (kafka-python's module).
"""

import os
import shutil
import sys
import tempfile
import time
import uuid

import pytest

from conftest import REPO, Ferry, allocate_ports, register_log, workers_keys

sys.path.insert(0, str(REPO / "tests" / "peers" / "kafka"))
import clients  # noqa: E402
import kcluster  # noqa: E402

KAFKA_NODES = 3
KAFKA_READY_TIMEOUT = 150.0   # s: 3 JVMs on 2 cores beside a busy suite
CLUSTER = "kafka"             # the virtual cluster's name in ferry.ini

_timings = {}
report = []   # lines printed at the end of the run (e.g. the ApiVersions table)


def kafka_unavailable(reason):
    if os.environ.get("FERRY_ALLOW_SKIP_KAFKA") == "1":
        pytest.skip(f"real Kafka unavailable: {reason}")
    pytest.fail(f"real Kafka unavailable: {reason} (run scripts/install-kafka; "
                f"FERRY_ALLOW_SKIP_KAFKA=1 turns this into a skip)", pytrace=False)


REALKAFKA_TEST_TIMEOUT = 300  # s per test, the cluster's start-up included


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    # Before the parent conftest gives every test its default timeout: the
    # first test here also waits for the cluster.
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(REALKAFKA_TEST_TIMEOUT, method="signal"))


def pytest_terminal_summary(terminalreporter):
    for line in report:
        terminalreporter.write_line(line)
    if "started_in" in _timings:
        tr = terminalreporter
        tr.write_line(f"real Kafka {_timings['version']}: {KAFKA_NODES}-node cluster ready in "
                      f"{_timings['started_in']:.1f}s, stopped in {_timings.get('stopped_in', 0):.1f}s; "
                      f"package wall time {_timings.get('package_s', 0):.0f}s")


def package_cluster(request, nodes, timings, version=None):
    """The body of a package-scoped cluster fixture (yield from it): a
    cluster of `nodes` nodes of Kafka `version` (default: the pinned one)
    started, yielded, stopped; timings gets version, started_in, stopped_in
    and package_s (the fixture's wall time)."""
    try:
        kcluster.classpath("broker", version)
    except kcluster.NotInstalled as e:
        kafka_unavailable(str(e))
    if version is None and os.environ.get("FERRY_KAFKA_DIR"):
        # a developer's running cluster (kcluster.py start --dir DIR): used
        # as it is and left running (the older line starts its own)
        c = kcluster.Cluster.load(os.environ["FERRY_KAFKA_DIR"])
        c.wait_ready(30.0, nodes=c.running_nodes())
        timings.update(started_in=0.0, version=c.version)
        yield c
        return
    root = kcluster.run_root()
    root.mkdir(parents=True, exist_ok=True)
    kcluster.reap(root)   # JVMs of a run that died before cleaning up
    d = tempfile.mkdtemp(prefix="it-", dir=root)
    t_pkg = time.monotonic()
    c = kcluster.Cluster(d, nodes=nodes, port_alloc=allocate_ports, version=version)
    try:
        c.start(timeout=KAFKA_READY_TIMEOUT)
    except BaseException:
        c.stop(grace=5.0)
        print(f"\nkept {d}")
        raise
    timings.update(started_in=c.started_in, version=c.version)
    yield c
    t0 = time.monotonic()
    c.stop()
    timings["stopped_in"] = time.monotonic() - t0
    timings["package_s"] = time.monotonic() - t_pkg
    if os.environ.get("FERRY_KEEP_TMP") or request.session.testsfailed:
        print(f"\nkept {d}")
    else:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="package")
def kafka_cluster(request):
    """The package's running Kafka cluster (kcluster.Cluster)."""
    yield from package_cluster(request, KAFKA_NODES, _timings)


class KafkaUpstream:
    """What Ferry wants of an upstream: its bootstrap string."""

    def __init__(self, cluster, listener="PLAINTEXT"):
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap(listener)


def ferry_for(cluster, keeper, workdir, request):
    """make(workers=1, listener="PLAINTEXT", upstream=None, **Ferry kwargs)
    -> a started ferryd with one virtual cluster ("kafka") in front of
    `cluster`'s `listener` (SSL, SASL_SSL, MTLS: upstream TLS verified
    against the cluster's CA); node ids 1-3 as the brokers'. cluster_keys
    adds keys to the [cluster] section; upstream replaces the bootstrap
    list."""
    def make(workers=1, listener="PLAINTEXT", upstream=None, **kw):
        keys = dict(workers_keys(workers))
        if listener.endswith("SSL") or listener == "MTLS":
            # TLS to the brokers, their certificate and name checked
            # against the cluster's throwaway CA
            keys.update({"upstream_tls": "on", "upstream_ca": cluster.dir / "tls" / "ca.crt"})
        keys.update(kw.pop("cluster_keys", {}))
        kw["cluster_keys"] = keys
        up = KafkaUpstream(cluster, listener)
        up.bootstrap = upstream or up.bootstrap
        f = Ferry(keeper, workdir, {CLUSTER: up}, **kw)
        register_log(request, "ferryd", f.log_path)
        for n in cluster.nodes.values():
            register_log(request, f"kafka node {n.id}", n.dir / "server.log")
        return f.start()
    return make


@pytest.fixture
def kafka_ferry(kafka_cluster, keeper, workdir, request):
    """kafka_ferry(workers=1, listener="PLAINTEXT", **Ferry kwargs): ferry_for
    the package's cluster."""
    return ferry_for(kafka_cluster, keeper, workdir, request)


def unique_name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def kafka_topic(kafka_cluster):
    """kafka_topic(prefix, partitions=3) -> a new topic's name, replication
    factor 3, min.insync.replicas 2, every partition led and in sync."""
    def make(prefix="t", partitions=3, **kw):
        name = unique_name(prefix)
        kafka_cluster.create_topic(name, partitions, **kw)
        return name
    return make


def ferry_ports(ferry):
    c = ferry.clusters[CLUSTER]
    return {c["bootstrap"], *c["brokers"]}


def ferry_addresses(ferry):
    return {f"127.0.0.1:{p}" for p in ferry.clusters[CLUSTER]["brokers"]}


def client_runner(cluster, workdir, request, version=None):
    """run(name, ferry, opts, timeout=120, env=None) -> clients.Run, under
    strace; the connects to `cluster`'s ports are counted as upstream dials;
    version: the Java client's (default: the pinned one)."""
    def run(name, ferry, opts, timeout=120, env=None):
        why = clients.problem(name, version)
        if why:
            kafka_unavailable(why)
        r = clients.run(name, opts, timeout=timeout, allowed_ports=ferry_ports(ferry),
                        forbidden_ports=cluster.all_ports(), workdir=str(workdir), env=env,
                        version=version)
        log = workdir / f"{name}-{opts.get('mode', 'run')}-{int(time.time() * 1000)}.log"
        log.write_text(r.describe())
        register_log(request, f"client {name}", log)
        return r
    return run


@pytest.fixture
def run_client(kafka_cluster, workdir, request):
    """run_client(name, ferry, opts, timeout=120, env=None): client_runner of
    the package's cluster."""
    return client_runner(kafka_cluster, workdir, request)
