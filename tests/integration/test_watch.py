"""
scripts/ferry-watch, the config-watch sidecar: a change of ferryd's config
file triggers `ferryctl validate FILE` then `ferryctl reload`, once per
change, for an edit in place, an atomic rename over the file, and a
Kubernetes ConfigMap update (the `..data` symlink swapped by a rename); an
invalid edit is logged and not reloaded; SIGTERM ends it cleanly.

Each test runs one mock cluster, one ferryd (cluster A) whose config file
lives in its own directory, and ferry-watch on that file. Reloads are
counted in ferryd's log ("reload requested") and in ferry-watch's log.
"""

import hashlib
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (FERRYCTL, REPO, children_of, pid_alive, register_log, serving_pids,
                      wait_for)

WATCH = REPO / "scripts" / "ferry-watch"
DEBOUNCE_MS = 200
SETTLE = 1.5  # s after a change in which a second (wrong) reload would show


def version(text):
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class Watch:
    def __init__(self, keeper, request, workdir, ferry, config_file):
        if not shutil.which("inotifywait"):
            pytest.fail("inotifywait missing (scripts/install-deps installs inotify-tools)")
        self.ferry = ferry
        self.log_path = Path(workdir) / "ferry-watch.log"
        register_log(request, "ferry-watch", self.log_path)
        self.log = open(self.log_path, "wb")
        self.proc = keeper.spawn("ferry-watch", [WATCH, "-s", ferry.sock, "--ferryctl", FERRYCTL,
                                                 "--debounce", str(DEBOUNCE_MS), config_file],
                                 stdout=self.log, stderr=self.log)
        wait_for(lambda: "msg=\"watching\"" in self.text() or self.proc.poll() is not None, 15,
                 what="ferry-watch watching")
        assert self.proc.poll() is None, f"ferry-watch exited: {self.text()}"

    def text(self):
        return self.log_path.read_text(errors="replace")

    def count(self, msg):
        return len(re.findall(rf'msg="{re.escape(msg)}"', self.text()))


def ferry_reloads(f):
    return len(re.findall(r'msg="reload requested"', f.log_text()))


@pytest.fixture
def wenv(mock_factory, reload_ferry_factory, keeper, request, workdir):
    m = mock_factory("M", 3, ["watch:1"])
    f = reload_ferry_factory({"A": m}, start=False)
    confdir = workdir / "conf"
    confdir.mkdir()
    f.config_path = confdir / "ferry.ini"
    f.write()
    f.start()

    class Env:
        pass
    env = Env()
    env.f, env.m, env.confdir, env.keeper, env.request, env.workdir = \
        f, m, confdir, keeper, request, workdir
    return env


def expect_one_reload(env, w, text, reloads0, ok0):
    """ferryd applies `text` through exactly one reload made by ferry-watch."""
    f = env.f
    want = version(text)
    wait_for(lambda: f.config_status()["currentConfigVersion"] == want, 10,
             what=f"ferryd running {want}")
    time.sleep(SETTLE)
    assert ferry_reloads(f) - reloads0 == 1, \
        f"{ferry_reloads(f) - reloads0} reloads for one change\n{w.text()}"
    assert w.count("reloaded") - ok0 == 1, w.text()
    last = f.config_status()["lastReloadAttempt"]
    assert last["status"] == "SUCCESS" and last["requestedVersion"] == want, last
    assert re.search(rf'msg="reloaded" version={re.escape(want)}', w.text()), w.text()


def change(f, i):
    f.spec["A"]["extra"]["idle_timeout"] = f"{20 + i}m"
    return f.render()


def test_watch_edit_in_place_and_rename(wenv):
    f = wenv.f
    w = Watch(wenv.keeper, wenv.request, wenv.workdir, f, f.config_path)
    pid0 = serving_pids(f.cluster("A"))

    # nothing happens on its own
    time.sleep(SETTLE)
    assert ferry_reloads(f) == 0 and w.count("reloaded") == 0, w.text()

    # edit in place (open, truncate, write, close)
    text = change(f, 1)
    r0, ok0 = ferry_reloads(f), w.count("reloaded")
    with open(f.config_path, "r+") as fh:
        fh.seek(0)
        fh.truncate()
        fh.write(text)
    expect_one_reload(wenv, w, text, r0, ok0)
    assert serving_pids(f.cluster("A")) != pid0

    # atomic rename of a temp file over it (as editors and config tools do)
    text = change(f, 2)
    r0, ok0 = ferry_reloads(f), w.count("reloaded")
    tmp = wenv.confdir / ".ferry.ini.swp"
    tmp.write_text(text)
    os.rename(tmp, f.config_path)
    expect_one_reload(wenv, w, text, r0, ok0)

    # touching the file (same content) and unrelated files: no reload
    r0 = ferry_reloads(f)
    os.utime(f.config_path)
    with open(f.config_path, "a"):
        pass
    (wenv.confdir / "notes.txt").write_text("x")
    os.unlink(wenv.confdir / "notes.txt")
    time.sleep(SETTLE)
    assert ferry_reloads(f) == r0, w.text()

    # an invalid edit: validate fails, logged, no reload
    bad = text.replace("[cluster A]\n", "[cluster A]\nno_such_key = 1\n")
    bad_line = bad.splitlines().index("no_such_key = 1") + 1
    r0, inv0 = ferry_reloads(f), w.count("config invalid; not reloading")
    running = f.config_status()["currentConfigVersion"]
    f.config_path.write_text(bad)
    wait_for(lambda: w.count("config invalid; not reloading") > inv0, 10,
             what="ferry-watch logging the invalid config")
    time.sleep(SETTLE)
    assert ferry_reloads(f) == r0, "an invalid file was reloaded"
    assert f.config_status()["currentConfigVersion"] == running
    assert w.count("config invalid; not reloading") == inv0 + 1, w.text()
    line = [ln for ln in w.text().splitlines() if "config invalid" in ln][-1]
    assert f"{f.config_path}:{bad_line}:" in line, line
    assert f.config_status()["lastValidationAttempt"]["status"] == "INVALID"

    # fixing it reloads again
    text = change(f, 3)
    r0, ok0 = ferry_reloads(f), w.count("reloaded")
    f.write(text)
    expect_one_reload(wenv, w, text, r0, ok0)

    # SIGTERM: clean exit, inotifywait gone too
    kids = children_of(w.proc.pid)
    assert kids, "no inotifywait child"
    w.proc.send_signal(signal.SIGTERM)
    assert w.proc.wait(5) == 0
    wait_for(lambda: not any(pid_alive(k) for k in kids), 3, what="inotifywait gone")
    assert w.count("stopping") == 1


def test_watch_configmap_symlink_swap(wenv):
    """The Kubernetes ConfigMap layout: cm/ferry.ini -> ..data/ferry.ini,
    ..data -> ..2025_01_01_00_00_00.000000001/; an update writes a new
    timestamped directory, renames a new ..data symlink over the old one
    and deletes the old directory. ferryd runs with -c cm/ferry.ini."""
    f = wenv.f
    # Stop the ferryd of the fixture and run one on the ConfigMap layout.
    f.keeper.terminate(f.proc)
    cm = wenv.workdir / "cm"
    cm.mkdir()
    seq = [0]

    def publish(text):
        seq[0] += 1
        ts = f"..2025_01_01_00_00_00.{seq[0]:09d}"
        d = cm / ts
        d.mkdir()
        (d / "ferry.ini").write_text(text)
        os.symlink(ts, cm / "..data_tmp")
        old = os.readlink(cm / "..data") if (cm / "..data").is_symlink() else None
        os.rename(cm / "..data_tmp", cm / "..data")
        if old:
            shutil.rmtree(cm / old)

    publish(f.render())
    os.symlink("..data/ferry.ini", cm / "ferry.ini")
    f.config_path = cm / "ferry.ini"
    f.config_text = f.render()
    f.start()
    w = Watch(wenv.keeper, wenv.request, wenv.workdir, f, f.config_path)
    assert f"dir=\"{cm}\"" in w.text(), w.text()

    for i in (1, 2, 3):
        text = change(f, 10 + i)
        r0, ok0 = ferry_reloads(f), w.count("reloaded")
        publish(text)
        expect_one_reload(wenv, w, text, r0, ok0)
        assert sorted(p.name for p in cm.iterdir()) == \
            sorted(["..data", "ferry.ini", f"..2025_01_01_00_00_00.{seq[0]:09d}"])
    assert w.proc.poll() is None, w.text()
    assert "inotifywait exited" not in w.text(), w.text()

    w.proc.send_signal(signal.SIGTERM)
    assert w.proc.wait(5) == 0


def test_watch_usage_errors(tmp_path):
    r = subprocess.run([str(WATCH)], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "usage" in r.stderr, r.stderr
    r = subprocess.run([str(WATCH), "--bogus", "x"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, r.stderr
    r = subprocess.run([str(WATCH), "--ferryctl", str(FERRYCTL), str(tmp_path / "nodir" / "f.ini")],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 1 and "directory does not exist" in r.stderr, r.stderr
