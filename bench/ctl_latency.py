#!/usr/bin/env python3
"""
ctl_latency — wall-clock latency of one command line, run again and again
(scripts/bench, admin part: `ferryctl status` over the control socket and
over HTTPS with a token).

    ctl_latency.py [-n RUNS] [-w WARMUP] -- COMMAND [ARG...]

Runs COMMAND WARMUP times unmeasured, then RUNS times, one after the other,
each timed from spawn to exit; prints one line of key=value pairs:
n, failed, p50_ms, p90_ms, min_ms, max_ms. A run that exits non-zero counts
as failed (and is still timed).
"""
import argparse
import statistics
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=50)
    ap.add_argument("-w", type=int, default=5)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("no command")
    ms, failed = [], 0
    for i in range(a.w + a.n):
        t0 = time.perf_counter()
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        dt = (time.perf_counter() - t0) * 1000.0
        if i < a.w:
            continue
        ms.append(dt)
        failed += r.returncode != 0
    ms.sort()
    p90 = ms[min(len(ms) - 1, int(round(0.9 * (len(ms) - 1))))]
    print(f"n={len(ms)} failed={failed} p50_ms={statistics.median(ms):.3f} p90_ms={p90:.3f} "
          f"min_ms={ms[0]:.3f} max_ms={ms[-1]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
