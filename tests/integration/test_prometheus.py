"""
/metrics as Prometheus sees it: `promtool check metrics` finds nothing to
say about a running ferryd's exposition (with reload metrics populated),
and a real Prometheus server (Debian `prometheus`), started by the test and
scraping the admin listener every second, answers queries for
sum(ferry_requests_total{cluster="A"}) and for histogram_quantile() over
ferry_config_reload_duration_seconds_bucket. The request counter only ever
grows: with traffic, across a SIGKILLed worker (its block is kept by the
supervisor) and across a reload that replaces the generation.

    FERRY_BUILD=$PWD/build /usr/bin/python3 -m pytest -q tests/integration/test_prometheus.py
"""

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from datetime import datetime

import pytest

from conftest import allocate_ports, kafka_metadata, register_log, wait_for

PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")


def require(tool, name):
    if tool is None:
        pytest.fail(f"{name} not installed (scripts/install-deps installs Debian `prometheus`)")


def promtool_check(body):
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True,
                       timeout=30)
    return r.returncode, (r.stdout + r.stderr).decode(errors="replace")


def requests_total(ferry, name):
    return ferry.metrics()[("ferry_requests_total", name)]


def traffic(ferry, name, n):
    for _ in range(n):
        kafka_metadata("127.0.0.1", ferry.clusters[name]["bootstrap"], timeout=10)


def bump(ferry, name, key):
    """A reload that modifies cluster `name` (a new generation)."""
    ferry.spec[name]["extra"]["max_connections"] = str(1000 + key)
    ferry.write()
    r = ferry.reload_ctl(json_out=True)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert json.loads(r.stdout)["status"] == "SUCCESS", r.stdout


def test_promtool_clean(mock_factory, reload_ferry_factory):
    require(PROMTOOL, "promtool")
    a = mock_factory("A", 3, ["t:3"])
    f = reload_ferry_factory({"A": a})
    traffic(f, "A", 3)
    bump(f, "A", 1)
    # a rejected reload counts too
    f.write(f.render() + "bogus_key = 1\n")
    assert f.reload_ctl().returncode != 0
    code, _, body = f.http("/metrics", via="tcp")
    assert code == 200
    rc, out = promtool_check(body)
    assert rc == 0 and out.strip() == "", out
    text = body.decode()
    assert 'ferry_config_reload_total{result="SUCCESS"} 1' in text
    assert 'ferry_config_reload_total{result="REJECTED"} 1' in text
    assert 'ferry_config_reload_duration_seconds_count 2' in text
    assert f'ferry_config_version_info{{version="{f.config_status()["currentConfigVersion"]}"}} 1' in text
    gen = f.cluster_doc("A")["generation"]
    assert f'ferry_cluster_generation{{cluster="A"}} {gen}' in text
    assert 'ferry_request_duration_seconds_count{cluster="A",api="Metadata"}' in text
    # metrics_latency: one histogram per cluster, then none; clean either way
    for mode, want in (("cluster", 'ferry_request_duration_seconds_count{cluster="A"} '),
                       ("off", None)):
        f.ferry_keys["metrics_latency"] = mode
        f.write()
        r = f.reload_ctl(json_out=True)
        assert r.returncode == 0 and json.loads(r.stdout)["status"] == "SUCCESS", r.stdout
        code, _, body = f.http("/metrics", via="tcp")
        rc, out = promtool_check(body)
        assert rc == 0 and out.strip() == "", (mode, out)
        text = body.decode()
        if want:
            assert want in text and ',api="Metadata",le=' not in text, text[-3000:]
        else:
            assert "ferry_request_duration_seconds" not in text
        assert 'ferry_requests_total{cluster="A",api="Metadata"}' in text
    # promtool does complain about a bad exposition (the check can fail)
    rc, out = promtool_check(b"# TYPE ferry_bad counter\nferry_bad 1\n")
    assert rc != 0 or out.strip(), "promtool accepted a counter without _total"


def rfc3339_seconds(ts):
    """'2026-11-23T21:40:01.123456789Z' (any fraction, Z or +00:00) -> epoch seconds."""
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", ts)
    assert m, ts
    base = datetime.fromisoformat(m.group(1) + ("+00:00" if m.group(3) == "Z" else m.group(3)))
    return base.timestamp() + (float("0" + m.group(2)) if m.group(2) else 0.0)


class Prometheus:
    def __init__(self, keeper, workdir, target):
        self.port = allocate_ports(1)[0]
        self.dir = workdir / "prometheus"
        self.dir.mkdir()
        cfg = self.dir / "prometheus.yml"
        cfg.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n  - job_name: ferry\n    metrics_path: /metrics\n"
            f"    static_configs:\n      - targets: ['{target}']\n")
        self.log_path = workdir / "prometheus.log"
        self.log = open(self.log_path, "ab")
        self.proc = keeper.spawn("prometheus", [
            PROMETHEUS, f"--config.file={cfg}",
            f"--storage.tsdb.path={self.dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--storage.tsdb.retention.time=1h",
        ], stdout=self.log, stderr=self.log, cwd=str(self.dir))

    def query(self, q):
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
        with urllib.request.urlopen(url, timeout=5) as r:
            doc = json.loads(r.read())
        assert doc["status"] == "success", doc
        return doc["data"]["result"]

    def value(self, q):
        """The single sample's value of an instant query, or None."""
        try:
            res = self.query(q)
        except OSError:
            return None
        if len(res) != 1:
            return None
        return float(res[0]["value"][1])

    def scrapes_after(self, t0):
        """True once ferry's target was scraped successfully after wall time t0."""
        url = f"http://127.0.0.1:{self.port}/api/v1/targets"
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                doc = json.loads(r.read())
        except OSError:
            return False
        for t in doc["data"]["activeTargets"]:
            last = t.get("lastScrape", "")
            if t.get("health") == "up" and last:
                return rfc3339_seconds(last) > t0
        return False


def test_prometheus_scrapes(keeper, workdir, request, mock_factory, reload_ferry_factory):
    require(PROMETHEUS, "prometheus")
    a = mock_factory("A", 3, ["t:3"])
    f = reload_ferry_factory({"A": a})
    prom = Prometheus(keeper, workdir, f"127.0.0.1:{f.admin_port}")
    register_log(request, "prometheus", prom.log_path)

    def wait_scraped(what):
        t0 = time.time()
        wait_for(lambda: prom.scrapes_after(t0 + 0.05), 30, 0.2, what)

    seen = []  # every value Prometheus returned, in order

    def prom_requests():
        v = prom.value('sum(ferry_requests_total{cluster="A"})')
        assert v is not None
        seen.append(v)
        return v

    traffic(f, "A", 5)
    direct = requests_total(f, "A")
    assert direct >= 5
    wait_scraped("a first scrape of ferry")
    wait_for(lambda: prom.value('sum(ferry_requests_total{cluster="A"})') == direct, 15, 0.2,
             "Prometheus to see the requests")
    base = prom_requests()

    # traffic: grows
    traffic(f, "A", 5)
    wait_for(lambda: (prom.value('sum(ferry_requests_total{cluster="A"})') or 0) >= base + 5, 15, 0.2,
             "the counter to grow with traffic")
    after_traffic = prom_requests()

    # SIGKILL the worker: the supervisor restarts it, the count stays
    pid = f.cluster_doc("A")["workers"][0]["pid"]
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: (lambda d: d["state"] == "accepting" and d["workers"]
                      and d["workers"][0]["pid"] != pid)(f.cluster_doc("A")), 30, 0.1,
             "a new worker after the kill")
    assert requests_total(f, "A") >= after_traffic
    traffic(f, "A", 2)
    wait_scraped("a scrape after the worker kill")
    after_kill = prom_requests()
    assert after_kill >= after_traffic + 2, seen

    # two reloads (new generations): the count stays, the histogram fills
    bump(f, "A", 1)
    bump(f, "A", 2)
    traffic(f, "A", 2)
    wait_scraped("a scrape after the reloads")
    after_reload = prom_requests()
    assert after_reload >= after_kill + 2, seen
    assert prom.value('ferry_config_reload_total{result="SUCCESS"}') == 2
    assert prom.value('ferry_cluster_generation{cluster="A"}') == f.cluster_doc("A")["generation"]
    q = prom.value("histogram_quantile(0.99, sum by (le) (ferry_config_reload_duration_seconds_bucket))")
    assert q is not None and 0 < q <= 60, q
    # the upstream latency of the cluster's requests, per API and overall
    q = prom.value('histogram_quantile(0.99, sum by (le) '
                   '(ferry_request_duration_seconds_bucket{cluster="A"}))')
    assert q is not None and 0 < q <= 10, q
    assert prom.value('sum(ferry_request_duration_seconds_count{cluster="A",api="Metadata"})') >= 5
    ver = f.config_status()["currentConfigVersion"]
    assert prom.value(f'ferry_config_version_info{{version="{ver}"}}') == 1

    # never backwards, as Prometheus saw it: no counter reset over the run
    assert seen == sorted(seen), seen
    assert prom.value('sum(resets(ferry_requests_total{cluster="A"}[5m]))') == 0
    keeper.terminate(prom.proc)
