"""
The older broker line behind ferry: one node of Kafka 3.9 (KRaft; the pom's
kafka.older.version, installed by scripts/install-kafka), started for this
package only and stopped right after it. pytest runs this package after the
parent's tests, so the 3-node Kafka 4.4 cluster is idle beside it; the
scenario is short (a few hundred records per client) to add little to the
suite.
Its fixtures mirror the parent's: older_cluster, older_ferry (ferry in
front of it); client_runner(older_cluster, ...) runs the clients.
"""

import pytest

from ..conftest import ferry_for, kcluster, package_cluster, report

OLDER_NODES = 1
_timings = {}


@pytest.fixture(scope="package")
def older_cluster(request):
    """A running 1-node cluster of the older line (kcluster.Cluster)."""
    yield from package_cluster(request, OLDER_NODES, _timings, kcluster.older_kafka_version())
    report.append(f"older line, real Kafka {_timings['version']}: {OLDER_NODES}-node cluster ready "
                  f"in {_timings['started_in']:.1f}s, stopped in {_timings['stopped_in']:.1f}s; "
                  f"package wall time {_timings['package_s']:.0f}s")


@pytest.fixture
def older_ferry(older_cluster, keeper, workdir, request):
    return ferry_for(older_cluster, keeper, workdir, request)

