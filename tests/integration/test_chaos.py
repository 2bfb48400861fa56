"""
Chaos around live reloads (issue 9): 200 reloads that add, modify, move,
swap and remove clusters, under both reload policies (switched live in
[ferry] now and then), while a chaos thread SIGKILLs or SIGSTOPs the new
and old workers of the churned clusters at random moments. One cluster, U,
is never changed and never signalled; an idempotent producer
(confluent-kafka, enable.idempotence) and a connect loop run through it
the whole time.

What must hold (the supervisor is the guardian of the failure domain):
- ferryd never dies and answers every reload; each reload ends with
  exactly one recorded outcome (GET /admin/config/status lastReloadAttempt
  names this reload's configVersion with the status the HTTP code says);
  reloads hit by the chaos may fail and roll back: outcomes are counted
  and printed;
- after every reload no address is listed by two clusters;
- U is untouched: same worker, 0 failed connects and ApiVersions
  exchanges, 0 delivery errors, every produced message consumed back once;
- a worker left SIGSTOPped is reaped by ferryd (watchdog, init, drain or
  stop deadlines) within 6 s;
- ferryd's open fds and RSS are flat: measured in the same state (U alone,
  no other worker alive) after 40 reloads, after 120 (printed only) and
  at the end: fds equal +-2, RSS within +20% of the first sample;
- no sanitizer report in ferryd's log (its workers log there too), ferryd
  exits 0 on SIGTERM, and no worker it ever had is left behind.

Timeouts are short (init_timeout, drain_timeout, worker_watchdog = 1s) so
the test takes about two to three minutes on an ASan build. ferryd runs
with a small ASan quarantine so that freed memory held in quarantine is
not mistaken for growth. FERRY_CHAOS_SEED picks the random sequence (the
seed used is printed); FERRY_CHAOS_RELOADS changes the number of reloads
for a quick local run (the contract is 200).
"""

import collections
import json
import os
import random
import signal
import statistics
import threading
import time

import pytest

from conftest import allocate_ports, pid_alive, proc_starttime, proc_state, serving_pids, wait_for
from core_helpers import (fd_count, rss_kib, sanitizer_reports, shared_addresses,  # noqa: F401
                          signal_pid, stopped, workers_of)
from test_reload import ConnectLoop, SeqProducer, kcat, sha256_version

N_RELOADS = int(os.environ.get("FERRY_CHAOS_RELOADS", "200"))
WARMUP = 40              # reloads before the first fds/RSS sample (ASan's allocator settles)
MAX_CHURN = 4            # churned clusters configured at most
TOPIC = "chaos"
REAP_BOUND = 6.0         # a worker left SIGSTOPped must be gone by then
NAME_FREE = 1.0 + 2.0 + 1.5  # drain_timeout + grace + slack: a removed name is free again
FDS_SLACK = 2
RSS_GROWTH = 1.20
LISTENING = ("initializing", "accepting")  # states that hold listening sockets
EXPECTED_STATUS = {200: {"SUCCESS"}, 500: {"FAILED"}, 409: {"REJECTED"}}


class Chaos(threading.Thread):
    """Signals ferryd's workers of every cluster but `protected`: a new
    worker is hit with probability P_NEW within 60 ms of being seen (so
    preparing generations are hit before and after READY), and a random
    worker every 50-350 ms. A hit is SIGKILL (40%), SIGSTOP then SIGCONT
    after 50 ms-2.5 s (45%), or SIGSTOP for good (15%: ferryd must reap
    it)."""

    P_NEW = 0.35

    def __init__(self, ferryd_pid, protected, registry, rng):
        super().__init__(daemon=True)
        self.ferryd_pid, self.protected = ferryd_pid, protected
        self.reg, self.rng = registry, rng
        self.stop_ev, self.pause_ev = threading.Event(), threading.Event()
        self.lock = threading.Lock()
        self.seen = {}           # pid -> (starttime, cluster)
        self.actions = collections.Counter()
        self.conts = []          # (time, pid, starttime)
        self.left = {}           # pid -> (starttime, stopped at)
        self.unreaped = {}       # pid -> seconds stopped when found alive past REAP_BOUND
        self.exc = None

    def _act(self, pid, st, now):
        if not pid_alive(pid, st) or proc_state(pid) == "T":
            return
        r = self.rng.random()
        if r < 0.40:
            if signal_pid(pid, st, signal.SIGKILL):
                self.actions["SIGKILL"] += 1
        elif r < 0.85:
            if self.reg.stop(pid, st):
                self.conts.append((now + self.rng.uniform(0.05, 2.5), pid, st))
                self.actions["SIGSTOP+SIGCONT"] += 1
        else:
            if self.reg.stop(pid, st):
                self.left[pid] = (st, now)
                self.actions["SIGSTOP (left)"] += 1

    def run(self):
        try:
            self._run()
        except Exception as e:  # noqa: BLE001 -- surfaced by the test
            self.exc = repr(e)

    def _run(self):
        rng = self.rng
        scheduled = []
        next_random = time.monotonic() + rng.uniform(0.05, 0.35)
        while not self.stop_ev.is_set():
            now = time.monotonic()
            for item in [c for c in self.conts if c[0] <= now]:
                self.conts.remove(item)
                self.reg.cont(item[1])
            for pid, (st, t) in list(self.left.items()):
                if not pid_alive(pid, st):
                    del self.left[pid]
                    self.reg.forget(pid)
                elif now - t > REAP_BOUND and pid not in self.unreaped:
                    self.unreaped[pid] = round(now - t, 1)
            kids = {}
            for pid, name in workers_of(self.ferryd_pid).items():
                st = proc_starttime(pid)
                if st is None:
                    continue
                with self.lock:
                    if pid not in self.seen or self.seen[pid][0] != st:
                        self.seen[pid] = (st, name)
                        if name != self.protected and rng.random() < self.P_NEW:
                            scheduled.append((now + rng.uniform(0, 0.06), pid, st))
                if name != self.protected:
                    kids[pid] = st
            if not self.pause_ev.is_set():
                for item in [s for s in scheduled if s[0] <= now]:
                    scheduled.remove(item)
                    self._act(item[1], item[2], now)
                if now >= next_random:
                    if kids:
                        pid = rng.choice(sorted(kids))
                        self._act(pid, kids[pid], now)
                    next_random = now + rng.uniform(0.05, 0.35)
            else:
                scheduled.clear()
            time.sleep(0.005)

    def finish(self):
        """Stops the thread and continues the processes it meant to
        continue; the ones left stopped stay (ferryd must reap them)."""
        self.stop_ev.set()
        self.join(10)
        for _, pid, _ in self.conts:
            self.reg.cont(pid)
        self.conts.clear()


class Model:
    """The configuration the test wants: U plus up to MAX_CHURN churned
    clusters, each with its own fresh ports (ports are never reused, so a
    bind never fails because of the test)."""

    def __init__(self, f, upstream, rng):
        self.f, self.upstream, self.rng = f, upstream, rng
        self.next_id = 0
        self.removed_at = {}  # name -> when a reload answer listed it as removed
        self.ops = collections.Counter()

    def churned(self):
        return sorted(n for n in self.f.spec if n != "U")

    def _ports(self):
        p = allocate_ports(4)
        return {"bootstrap": p[0], "brokers": p[1:], "node_ids": [1, 2, 3]}

    def mutate(self):
        f, rng = self.f, self.rng
        done = []
        for _ in range(rng.choice([1, 1, 2])):
            names = self.churned()
            choices = []
            if len(names) < MAX_CHURN:
                choices += ["add"] * 3
            if names:
                choices += ["remove"] * 2 + ["modify"] * 3 + ["move"] * 2
            if len(names) >= 2:
                choices += ["swap"] * 2
            op = rng.choice(choices)
            if op == "add":
                now = time.monotonic()
                again = sorted(n for n, t in self.removed_at.items()
                               if now - t > NAME_FREE and n not in f.spec)
                if again and rng.random() < 0.3:
                    name = rng.choice(again)
                else:
                    name = f"k{self.next_id}"
                    self.next_id += 1
                f.spec[name] = {"upstream": self.upstream, "extra": {}}
                f.clusters[name] = self._ports()
            elif op == "remove":
                name = rng.choice(names)
                f.remove_cluster(name)
            elif op == "modify":
                name = rng.choice(names)
                ex = f.spec[name]["extra"]
                ex["idle_timeout"] = "11m" if ex.get("idle_timeout") != "11m" else "10m"
            elif op == "move":
                name = rng.choice(names)
                f.clusters[name] = self._ports()
            else:
                a, b = rng.sample(names, 2)
                f.clusters[a], f.clusters[b] = f.clusters[b], f.clusters[a]
                name = f"{a}<->{b}"
            self.ops[op] += 1
            done.append(f"{op} {name}")
        if rng.random() < 0.2:
            pol = "per-cluster" if f.ferry_keys["reload_policy"] == "all-or-nothing" \
                else "all-or-nothing"
            f.ferry_keys["reload_policy"] = pol
            self.ops["policy switch"] += 1
            done.append(f"reload_policy={pol}")
        return done


@pytest.mark.timeout(480)
def test_chaos_200_reloads(mock_factory, reload_ferry_factory, stopped):
    seed = int(os.environ.get("FERRY_CHAOS_SEED", str(int(time.time()) % 100000)))
    rng = random.Random(seed)
    print(f"\nchaos seed {seed} (FERRY_CHAOS_SEED={seed} repeats the sequence)")
    m = mock_factory("M", 3, [f"{TOPIC}:3"])
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(x for x in (env.get("ASAN_OPTIONS", ""),
                                               "quarantine_size_mb=1") if x)
    f = reload_ferry_factory({"U": m}, env=env, drain_timeout="1s", init_timeout="1s",
                             ferry_extra={"worker_watchdog": "1s",
                                          "reload_policy": "all-or-nothing"})
    reg = stopped
    u_pid = serving_pids(f.cluster("U"))[0]
    u_gen = f.cluster("U")["generation"]
    model = Model(f, m.bootstrap, rng)
    chaos = Chaos(f.proc.pid, "U", reg, random.Random(seed + 1))
    loop = ConnectLoop([f.clusters["U"]["bootstrap"]], pause=0.01)
    prod = SeqProducer(f.bootstrap("U"), TOPIC)
    violations = []
    outcomes = collections.Counter()
    durations = []
    samples = {}
    reloads_done = 0
    last_dup = {}
    t_start = time.monotonic()

    def violation(msg):
        violations.append(msg)
        print("  VIOLATION: " + msg)

    def alive(what):
        if f.proc.poll() is not None:
            violation(f"ferryd exited with {f.proc.returncode} ({what})")
            return False
        return True

    def post(text, what):
        try:
            return f.reload_http(text, timeout=30)
        except Exception as e:  # noqa: BLE001
            if alive(what):
                violation(f"{what}: reload request failed: {e!r}")
            return None, None

    def settle_and_sample(label):
        """Pauses the chaos, reloads to U alone, waits until U's worker is
        the only one, samples ferryd's fds and RSS, restores the model."""
        chaos.pause_ev.set()
        try:
            only_u = f.render(spec={"U": f.spec["U"]}, clusters={"U": f.clusters["U"]})
            code, body = post(f"; settle {label}\n" + only_u, f"settle {label}")
            if code is None:
                return False
            if code != 200:
                violation(f"settle {label}: reload to U alone answered {code} {body}")
            try:
                wait_for(lambda: set(workers_of(f.proc.pid)) == {u_pid}
                         and [c["name"] for c in f.status()["clusters"]] == ["U"],
                         REAP_BOUND + 4, what=f"U alone ({label})")
            except AssertionError as e:
                left = {p: (n, proc_state(p)) for p, n in workers_of(f.proc.pid).items()}
                violation(f"settle {label}: {e}; workers: {left}")
            time.sleep(0.5)
            samples[label] = (fd_count(f.proc.pid), rss_kib(f.proc.pid))
            code, body = post(f"; restore {label}\n" + f.render(), f"restore {label}")
            return code is not None
        finally:
            chaos.pause_ev.clear()

    chaos.start()
    loop.start()
    prod.start()
    try:
        wait_for(lambda: len(prod.delivered) >= 20 and loop.ok >= 20, 30,
                 what="producer and connect loop flowing through U")
        for i in range(N_RELOADS):
            ops = model.mutate()
            text = f"; chaos reload {i}: {', '.join(ops)}\n" + f.render()
            t0 = time.monotonic()
            code, body = post(text, f"reload {i} ({ops})")
            if code is None:
                break
            durations.append(time.monotonic() - t0)
            now = time.monotonic()
            for n in (body or {}).get("clustersRemoved") or []:
                model.removed_at[n] = now
            if code == 409:
                held = [n for n, t in model.removed_at.items()
                        if now - t > NAME_FREE and f"[cluster {n}]" in text
                        and any(n in e for e in body.get("errors", []))]
                if held:
                    violation(f"reload {i}: rejected because of {held}, removed more than "
                              f"{NAME_FREE}s ago: {body.get('errors')}")
            if not alive(f"after reload {i}"):
                break
            try:
                st = f.config_status()
                last = st["lastReloadAttempt"]
                outcomes[last["status"]] += 1
                if last.get("requestedVersion") != sha256_version(text):
                    violation(f"reload {i} ({ops}): lastReloadAttempt is not this reload: {last}")
                elif last["status"] not in EXPECTED_STATUS.get(code, ()):
                    violation(f"reload {i} ({ops}): HTTP {code} but recorded {last['status']}")
                if code == 409 and "inProgressSince" in body:
                    violation(f"reload {i}: 409 'in progress' though the previous reload answered")
                if st.get("reloadInProgress"):
                    violation(f"reload {i}: still in progress after its answer")
                clusters = f.status()["clusters"]
                dup = shared_addresses([c for c in clusters if c["state"] in LISTENING])
                if dup and dup != last_dup:
                    violation(f"reload {i} ({ops}): addresses listed by two clusters: {dup}")
                last_dup = dup
                u = [c for c in clusters if c["name"] == "U"][0]
                if serving_pids(u) != [u_pid] or u["generation"] != u_gen:
                    violation(f"reload {i}: U touched: {u['workers']}")
            except Exception as e:  # noqa: BLE001
                if alive(f"status after reload {i}"):
                    violation(f"status after reload {i}: {e!r}")
                break
            if i + 1 in (WARMUP, (N_RELOADS + WARMUP) // 2) and \
                    not settle_and_sample("warm-up" if i + 1 == WARMUP else "middle"):
                break
            time.sleep(rng.uniform(0, 0.05))
    finally:
        reloads_done = sum(outcomes.values())
        chaos.finish()
    try:
        if f.proc.poll() is None:
            # ferryd must reap what was left stopped, within REAP_BOUND.
            deadline = max([t for _, t in chaos.left.values()], default=0) + REAP_BOUND + 0.5
            while time.monotonic() < deadline and any(pid_alive(p, s) for p, (s, _) in chaos.left.items()):
                time.sleep(0.1)
            for p, (s, t) in chaos.left.items():
                if pid_alive(p, s):
                    chaos.unreaped.setdefault(p, round(time.monotonic() - t, 1))
            if chaos.unreaped:
                violation(f"workers left SIGSTOPped not reaped by ferryd within {REAP_BOUND}s: "
                          f"{chaos.unreaped}")
            reg.cleanup()
            if alive("end"):
                settle_and_sample("end")
    finally:
        loop.stop()
        prod.stop()
        reg.cleanup()
    run_s = time.monotonic() - t_start

    # U's traffic.
    r = kcat(["-C", "-b", f.bootstrap("U"), "-t", TOPIC, "-o", "beginning", "-e", "-q",
              "-c", str(len(prod.produced)), "-f", "%k\n"], timeout=120) \
        if f.proc.poll() is None else None
    got = collections.Counter(r.stdout.split()) if r is not None and r.returncode == 0 else None

    # ferryd stops cleanly and leaves nothing behind.
    with chaos.lock:
        seen = dict(chaos.seen)
    rc = None
    if f.proc.poll() is None:
        f.proc.send_signal(signal.SIGTERM)
        try:
            rc = f.proc.wait(30)
        except Exception:  # noqa: BLE001
            violation("ferryd did not exit within 30 s of SIGTERM")
    else:
        rc = f.proc.returncode
    try:
        wait_for(lambda: not any(pid_alive(p, s) for p, (s, _) in seen.items()), 5,
                 what="every worker gone")
    except AssertionError:
        left = [(p, n, proc_state(p)) for p, (s, n) in seen.items() if pid_alive(p, s)]
        violation(f"workers left behind after ferryd stopped: {left}")
    reports = sanitizer_reports(f.log_text())

    summary = {
        "seed": seed, "run_s": round(run_s, 1), "reloads": reloads_done,
        "outcomes": dict(outcomes), "ops": dict(model.ops),
        "reload_s": {"median": round(statistics.median(durations), 3) if durations else None,
                     "max": round(max(durations), 3) if durations else None},
        "chaos": dict(chaos.actions), "workers_seen": len(seen),
        "fds_rss_kib": samples,
        "connects": loop.connects, "connect_ok": loop.ok,
        "connect_failures": len(loop.connect_failures),
        "exchange_failures": len(loop.exchange_failures),
        "produced": len(prod.produced), "delivered": len(prod.delivered),
        "delivery_errors": len(prod.errors), "ferryd_exit": rc,
        "sanitizer_reports": len(reports),
    }
    print("chaos summary: " + json.dumps(summary))

    assert chaos.exc is None, f"chaos thread failed: {chaos.exc}"
    assert not reports, "sanitizer report(s) in ferryd's log:\n" + "\n---\n".join(reports[:3])
    assert not violations, f"{len(violations)} violation(s):\n  " + "\n  ".join(violations[:15]) \
        + f"\n{json.dumps(summary)}"
    assert reloads_done == N_RELOADS, summary
    assert rc == 0, f"ferryd exited with {rc} on SIGTERM"
    fds0, rss0 = samples["warm-up"]
    fds1, rss1 = samples["end"]
    assert abs(fds1 - fds0) <= FDS_SLACK, f"ferryd's open fds {fds0} after warm-up, {fds1} at the end"
    assert rss1 <= rss0 * RSS_GROWTH, f"ferryd's RSS {rss0} KiB after warm-up, {rss1} KiB at the end"
    assert loop.connect_failures == [], f"failed connects to U: {loop.connect_failures[:5]}"
    assert loop.exchange_failures == [], f"failed ApiVersions on U: {loop.exchange_failures[:5]}"
    assert loop.ok > 200, f"connect loop too slow to mean anything: {summary}"
    assert prod.exc is None, prod.exc
    assert prod.left == 0 and prod.errors == [], \
        f"{prod.left} undelivered, errors {prod.errors[:5]} ({summary})"
    assert sorted(prod.delivered) == prod.produced, summary
    assert got is not None, f"kcat consume through U failed: {r.stderr[-1500:] if r else 'ferryd gone'}"
    dups = {k: n for k, n in got.items() if n > 1}
    missing = sorted(set(prod.produced) - set(got))
    assert not dups and not missing, \
        f"{len(missing)} messages lost (e.g. {missing[:5]}), {len(dups)} duplicated"
