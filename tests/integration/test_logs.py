"""
ferryd's stderr as a log pipeline sees it: with log_format = json every
line of the supervisor and its workers is one JSON object with ts, level,
proc, pid and msg (workers also cluster); with logfmt every line has
ts= level= proc= pid= msg=; and when stderr is journald's stream
($JOURNAL_STREAM names its device and inode, as systemd sets it) lines
carry a syslog priority prefix (<4> warn, <6> info) and no ts, in the
supervisor and in the workers (which inherit both).

    FERRY_BUILD=$PWD/build /usr/bin/python3 -m pytest -q tests/integration/test_logs.py
"""

import json
import os
import re

from conftest import kafka_metadata, wait_for


def lines_of(f):
    return [ln for ln in f.log_text().splitlines() if ln.strip()]


def test_json_lines(mock_factory, reload_ferry_factory):
    a = mock_factory("A", 3, ["t:3"])
    f = reload_ferry_factory({"A": a}, ferry_extra={"log_format": "json"})
    kafka_metadata("127.0.0.1", f.clusters["A"]["bootstrap"], timeout=10)
    wait_for(lambda: any('"proc":"worker"' in ln for ln in lines_of(f)), 10, what="worker lines")
    procs = set()
    for ln in lines_of(f):
        doc = json.loads(ln)
        for k in ("ts", "level", "proc", "pid", "msg"):
            assert isinstance(doc.get(k), str) and doc[k], (k, ln)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", doc["ts"]), ln
        assert doc["level"] in ("debug", "info", "warn", "error")
        procs.add(doc["proc"])
        if doc["proc"] == "worker":
            assert doc["cluster"] == "A", ln
        assert list(doc)[:3] == ["ts", "level", "proc"], ln
    assert procs == {"supervisor", "worker"}
    # keys stay unique: the worker's pid in a supervisor event is event_pid
    started = [json.loads(ln) for ln in lines_of(f) if '"msg":"worker started"' in ln]
    assert started and started[0]["proc"] == "supervisor"
    assert started[0]["event_pid"] == str(f.cluster_doc("A")["workers"][0]["pid"])
    assert started[0]["pid"] == str(f.proc.pid)
    for ln in lines_of(f):
        pairs = json.loads(ln, object_pairs_hook=lambda kv: [k for k, _ in kv])
        assert len(pairs) == len(set(pairs)), ln


def test_logfmt_lines(mock_factory, reload_ferry_factory):
    a = mock_factory("A", 3, ["t:3"])
    f = reload_ferry_factory({"A": a})
    wait_for(lambda: any("proc=worker" in ln for ln in lines_of(f)), 10, what="worker lines")
    for ln in lines_of(f):
        assert re.match(r'^ts=\S+Z level=(debug|info|warn|error) proc=(supervisor|worker) '
                        r'(cluster=A (gen=\d+ )?)?pid=\d+ msg="', ln), ln


def test_journald_priority_prefix(mock_factory, reload_ferry_factory):
    a = mock_factory("A", 3, ["t:3"])
    f = reload_ferry_factory({"A": a}, start=False)
    f.log_path.touch()
    st = os.stat(f.log_path)
    env = dict(os.environ, JOURNAL_STREAM=f"{st.st_dev}:{st.st_ino}")
    f.start(env=env)
    wait_for(lambda: any("proc=worker" in ln for ln in lines_of(f)), 10, what="worker lines")
    seen = set()
    for ln in lines_of(f):
        m = re.match(r"^<([3467])>level=(\w+) proc=(\w+) ", ln)
        assert m, ln
        assert "ts=" not in ln, ln
        want = {"error": "3", "warn": "4", "info": "6", "debug": "7"}[m.group(2)]
        assert m.group(1) == want, ln
        seen.add((m.group(1), m.group(3)))
    assert ("6", "supervisor") in seen and ("6", "worker") in seen, seen
    # a rejected reload is logged at warn or error: <4>/<3>, as journalctl -p warning selects
    f.write(f.render() + "bogus_key = 1\n")
    assert f.reload_ctl().returncode == 1
    wait_for(lambda: any(re.match(r"^<[34]>.*reload", ln) for ln in lines_of(f)), 10,
             what="a prioritized reload failure")
