"""
The HTML status page (GET / and GET /admin/ on the admin API): served as one
self-contained document (no external assets, a CSP that forbids them), and
rendered by a real browser: headless Chromium (Debian `chromium`) loads it
from a running ferryd, runs its script (which polls the admin API), and the
DOM it dumps has a row for every cluster with its state, generation and
worker pids, plus the last reload's outcome. A screenshot goes into the
build directory (statuspage.png) for a human to look at.

    FERRY_BUILD=$PWD/build /usr/bin/python3 -m pytest -q tests/integration/test_statuspage.py
"""

import html.parser
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import BUILD, http_request, kafka_metadata

CHROMIUM = shutil.which("chromium")


def chromium(workdir, url, *mode, timeout=90):
    if CHROMIUM is None:
        pytest.fail("chromium not installed (scripts/install-deps installs Debian `chromium`)")
    profile = workdir / "chromium-profile"
    profile.mkdir(exist_ok=True)
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
            "--virtual-time-budget=5000", *mode, url]
    # own process group: the test kills Chromium's helpers too if it hangs
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         cwd=str(workdir), start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        p.communicate()
        raise
    assert p.returncode == 0, err.decode(errors="replace")[-2000:]
    return out.decode(errors="replace")


class Rows(html.parser.HTMLParser):
    """{cluster: {cell class: text}} from the rows of table#clusters."""

    def __init__(self):
        super().__init__()
        self.rows, self.cur, self.cls, self.ids = {}, None, None, {}
        self.id_now = None
        self.order = []        # cluster rows, top to bottom
        self.states = {}       # the summary's counts: {state: text}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and "data-state" in a:
            self.states[a["data-state"]] = ""
            self.id_now = "state:" + a["data-state"]
            self.ids[self.id_now] = ""
        if tag == "tr" and "data-cluster" in a:
            self.order.append(a["data-cluster"])
            self.cur = self.rows.setdefault(a["data-cluster"], {"_class": a.get("class", "")})
        elif tag == "td" and self.cur is not None:
            self.cls = (a.get("class") or "").split()
            for k in self.cls:
                self.cur[k] = ""
        if "id" in a:
            self.id_now = a["id"]
            self.ids[self.id_now] = ""

    def handle_endtag(self, tag):
        if tag == "tr":
            self.cur = None
        if tag == "td":
            self.cls = None
        self.id_now = None

    def handle_data(self, data):
        if self.cur is not None and self.cls is not None:
            for k in self.cls:
                self.cur[k] += data
        if self.id_now is not None:
            self.ids[self.id_now] += data


def test_page_is_self_contained(two_clusters):
    f = two_clusters.ferry
    for path in ("/", "/admin/"):
        for via in ("unix", "tcp"):
            code, headers, body = f.http(path, via=via)
            assert code == 200, (path, via, code)
            h = headers
            assert h.get("content-type", "").startswith("text/html"), h
            assert "default-src 'none'" in h.get("content-security-policy", ""), h
            text = body.decode()
            assert text.startswith("<!DOCTYPE html>")
            # no external assets: nothing loaded from another origin
            assert not re.search(r'(src|href)="(https?:)?//', text), "external asset"
            assert "<link" not in text and "@import" not in text
    code, _, _ = f.http("/admin/nope", via="tcp")
    assert code == 404
    code, _, _ = http_request("POST", "/", tcp=("127.0.0.1", f.admin_port), body=b"")
    assert code == 405


@pytest.mark.parametrize("path", ["/", "/admin/"])
def test_chromium_renders_every_cluster(two_clusters, workdir, path):
    f = two_clusters.ferry
    # a reload, so the page has an outcome to show
    r = f.ctl("reload", check=False)
    assert r.returncode == 0, r.stderr
    # requests through every cluster, so the upstream latency has data
    for name in f.clusters:
        kafka_metadata("127.0.0.1", f.clusters[name]["bootstrap"])
    url = f"http://127.0.0.1:{f.admin_port}{path}"
    dom = chromium(workdir, url, "--dump-dom")
    p = Rows()
    p.feed(dom)
    status = f.status()
    names = [c["name"] for c in status["clusters"]]
    assert sorted(p.rows) == sorted(names), dom[-3000:]
    for c in status["clusters"]:
        row = p.rows[c["name"]]
        assert row["name"] == c["name"]
        assert row["state"].startswith(c["state"]), row
        assert row["_class"] == f"s-{c['state']}"
        assert row["gen"] == str(c["generation"]), row
        for w in c["workers"]:
            if w["pid"]:
                assert str(w["pid"]) in row["pids"], row
        assert row["workers"] == str(len([w for w in c["workers"] if w["pid"]]))
        assert row["upstream"].startswith("reachable"), row
        assert re.fullmatch(r"\u2264 [0-9.]+ ms", row["p99"]), row
    # two polls happened (2 s apart in virtual time): rates are numbers
    assert all(re.fullmatch(r"[0-9.]+[kMG]?", row["rps"]) for row in p.rows.values()), p.rows
    assert p.ids["reload-status"].startswith("UNCHANGED"), p.ids
    assert p.ids["cfg-version"] == f.http("/admin/config/status")[2].decode().split(
        '"currentConfigVersion":"')[1].split('"')[0]
    assert p.ids["ready"] == "ready"
    assert p.ids["error"] == ""

    if path == "/":
        shot = BUILD / "statuspage.png"
        if shot.exists():
            shot.unlink()
        chromium(workdir, url, f"--screenshot={shot}", "--window-size=1400,500",
                 "--hide-scrollbars")
        assert shot.exists() and shot.stat().st_size > 5000
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_many_clusters_are_paged_filtered_and_trouble_comes_first(mock_factory, ferry_factory,
                                                                   workdir):
    """55 clusters: a page of 50, the rest on page 2; a failed cluster is
    the first row; the fragment of the URL filters (state, name) and the
    summary counts every cluster by state."""
    mock = mock_factory("up", 3, ["t:3"])
    names = [f"c{i:02d}" for i in range(55)]
    f = ferry_factory({n: mock for n in names},
                      extra_ferry="crash_loop_limit = 1")
    victim = "c37"
    os.kill(f.cluster(victim)["workers"][0]["pid"], 9)
    deadline = time.monotonic() + 20
    while f.cluster(victim)["state"] != "failed" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert f.cluster(victim)["state"] == "failed"
    base = f"http://127.0.0.1:{f.admin_port}/"

    def page(fragment=""):
        p = Rows()
        p.feed(chromium(workdir, base + fragment, "--dump-dom"))
        return p

    p = page()
    assert len(p.order) == 50, p.order
    assert p.order[0] == victim, p.order[:3]
    assert p.order[1:] == [n for n in names if n != victim][:49]
    assert p.ids["page-info"].split() == ["1\u201350", "of", "55"], p.ids["page-info"]
    assert p.ids["state:failed"] == "1 failed" and p.ids["state:accepting"] == "54 accepting", p.ids
    p = page("#page=2")
    assert p.order == [n for n in names if n != victim][49:], p.order
    p = page("#state=failed")
    assert p.order == [victim]
    p = page("#name=c1*&sort=name")
    assert p.order == [f"c1{i}" for i in range(10)]
