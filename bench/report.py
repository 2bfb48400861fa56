#!/usr/bin/env python3
"""Turn scripts/bench's results.tsv into bench.md, bench.json and bench.png.

    python3 bench/report.py build-bench/results.tsv build-bench

Each line of results.tsv is KIND<TAB>key=value<TAB>...; KIND is meta, tput
(one kload run: path, round, test = saturate|rate|fetch), mem, reload or
workers (test = balance: per-worker connection counts; test = produce8: one
kload -n 8 run through direct, haproxy_t1/t2, ferry_w1/w2), handover (one
bench/handover.c run per mode = on|off: a reload of a cluster carrying idle
and busy connections) or tls (path = haproxy|ferry terminating TLS; test =
produce|fetch: one kload run over TLS, hs_full|hs_resumed: one bench/tlshs.c
run, idle: 1,000 idle TLS connections; test = meta / unsupported).
Per path the median over rounds is reported; ratios are ferry / HAProxy
(nbthread 1). An A/B run (scripts/bench --compare-rev REV; meta compare=REV)
has the paths ferry ("after", this tree) and ferry_b ("before", REV): the
report gives after/before per round, the median and the spread. MB = 10^6 bytes of message payload. Standard library only;
the plot needs gnuplot (skipped with a note when it is missing).
"""
import json
import os
import shutil
import statistics
import subprocess
import sys

PATHS = ["direct", "haproxy", "ferry_b", "ferry", "haproxy_mt"]
LABEL = {
    "direct": "direct (no proxy)",
    "haproxy": "HAProxy, nbthread 1",
    "ferry": "ferry (1 worker)",
    "ferry_b": "ferry before (1 worker)",
    "haproxy_mt": "HAProxy, default threads (1 round)",
}
MIB = 1024.0
WPATHS = ["direct", "haproxy_t1", "haproxy_t2", "ferry_w1", "ferry_w2"]
WLABEL = {
    "direct": "direct (no proxy)",
    "haproxy_t1": "HAProxy, nbthread 1",
    "haproxy_t2": "HAProxy, nbthread 2",
    "ferry_w1": "ferry, workers = 1",
    "ferry_w2": "ferry, workers = 2",
}


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


def counts_of(v):
    """'334/333/333' -> [334, 333, 333] (a single count arrives as a float)."""
    if isinstance(v, float):
        return [int(v)]
    try:
        return [int(x) for x in str(v).split("/") if x != ""]
    except ValueError:
        return []


def load(path):
    meta, tput, mem, reload, workers, handover, tls, scale, admin = {}, [], {}, [], [], [], [], [], []
    with open(path) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            kv = {}
            for fld in fields[1:]:
                k, _, v = fld.partition("=")
                kv[k] = num(v)
            kind = fields[0]
            if kind == "meta":
                meta.update(kv)
            elif kind == "tput":
                tput.append(kv)
            elif kind == "mem":
                mem[kv.get("name")] = kv
            elif kind == "reload":
                reload.append(kv)
            elif kind == "workers":
                workers.append(kv)
            elif kind == "handover":
                handover.append(kv)
            elif kind == "tls":
                tls.append(kv)
            elif kind == "scale":
                scale.append(kv)
            elif kind == "admin":
                admin.append(kv)
    return meta, tput, mem, reload, workers, handover, tls, scale, admin


def med(xs):
    xs = [x for x in xs if isinstance(x, float) and x >= 0]
    return statistics.median(xs) if xs else None


def per_path(tput):
    """path -> metric -> (median, [per-round values])"""
    out = {}
    for p in PATHS:
        runs = [r for r in tput if r.get("path") == p]
        if not runs:
            continue
        m = {}

        def put(name, test, fn):
            by_round = {}
            for r in runs:
                if r.get("test") == test and "mbps" in r:
                    v = fn(r)
                    if isinstance(v, float):
                        by_round[int(r.get("round", 0))] = v
            m[name] = {"median": med(list(by_round.values())), "runs": list(by_round.values()),
                       "by_round": by_round}

        def cpu_per_mb(r):
            mb = r["bytes"] / 1e6
            return r["cpu_ms"] / mb if mb > 0 and p != "direct" else None

        put("produce_mbps", "saturate", lambda r: r["mbps"])
        put("produce_cpu_ms_per_mb", "saturate", cpu_per_mb)
        put("produce_client_cpu_ms_per_mb", "saturate",
            lambda r: r["self_cpu_ms"] / (r["bytes"] / 1e6) if r["bytes"] else None)
        put("rate_mbps", "rate", lambda r: r["mbps"])
        put("rtt_p50_us", "rate", lambda r: r["rtt_p50_us"])
        put("rtt_p99_us", "rate", lambda r: r["rtt_p99_us"])
        put("rtt_p99_max_us", "rate", lambda r: r["rtt_p99_max_us"])
        put("delivery_p50_ms", "rate", lambda r: r.get("dr_p50_us", -1000) / 1000)
        put("delivery_p99_ms", "rate", lambda r: r.get("dr_p99_us", -1000) / 1000)
        put("rate_cpu_ms_per_mb", "rate", cpu_per_mb)
        put("fetch_mbps", "fetch", lambda r: r["mbps"])
        put("fetch_cpu_ms_per_mb", "fetch", cpu_per_mb)

        def sc_per_mb(r):
            sc = r.get("syscalls")
            return sc / (r["bytes"] / 1e6) if isinstance(sc, float) and sc >= 0 and r["bytes"] else None

        put("produce_syscalls_per_mb", "saturate", sc_per_mb)
        put("fetch_syscalls_per_mb", "fetch", sc_per_mb)
        m["errors"] = sum(int(r.get("all_errors", 0)) + int(r.get("failed", 0)) for r in runs)
        m["runs"] = len(runs)
        out[p] = m
    return out


def v(res, path, metric):
    return res.get(path, {}).get(metric, {}).get("median")


def fmt(x, nd=0):
    if x is None:
        return "–"
    return f"{x:.{nd}f}"


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def main():
    tsv, outdir = sys.argv[1], sys.argv[2]
    meta, tput, mem, reload, wk, ho, tl, sc, ad = load(tsv)
    res = per_path(tput)
    # added p50: per round, path minus direct of the same round; then the median
    direct_r = res.get("direct", {}).get("rtt_p50_us", {}).get("by_round", {})
    for p in res:
        mine = res[p].get("rtt_p50_us", {}).get("by_round", {})
        diffs = {k: mine[k] - direct_r[k] for k in mine if k in direct_r}
        res[p]["added_p50_us"] = {"median": statistics.median(diffs.values()) if diffs else None,
                                  "by_round": diffs}

    lines = []
    add = lines.append
    if meta.get("compare") is not None:
        LABEL["ferry"] = f"ferry after, {meta.get('git')} (1 worker)"
        LABEL["ferry_b"] = f"ferry before, {meta.get('compare')} (1 worker)"
    add(f"## Benchmark {'(quick) ' if meta.get('quick') == 1.0 else ''}— preliminary\n")
    add(f"{meta.get('date')} · git {meta.get('git')} · {int(meta.get('nproc', 0))} CPU "
        f"({meta.get('cpu')}) · kernel {meta.get('kernel')} · librdkafka {meta.get('librdkafka')} · "
        f"HAProxy {meta.get('haproxy')} · load average {meta.get('loadavg_start')} → "
        f"{meta.get('loadavg_end')} · median of {int(meta.get('rounds', 0))} rounds of "
        f"{meta.get('duration_s'):g} s\n")
    add("Per path: median over rounds. Ratios: ferry/HAProxy within each round, median over rounds.\n")
    add("Load generator, mock cluster (3 brokers, 3 partitions, 1 KiB messages, acks=1, linger.ms=5) "
        "and proxy share the same cores: saturation MB/s measures total CPU efficiency. "
        "ferry's worker and `nbthread 1` HAProxy are single-threaded. MB = 10^6 bytes of payload.\n")
    add("| path | produce MB/s | fetch MB/s | RTT p50 µs @20 MB/s | RTT p99 µs | added p50 µs | "
        "delivery p50 / p99 ms | proxy CPU ms/MB produce | @20 MB/s | fetch | errors |")
    add("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p in PATHS:
        if p not in res:
            continue
        add(f"| {LABEL[p]} | {fmt(v(res, p, 'produce_mbps'))} | {fmt(v(res, p, 'fetch_mbps'))} | "
            f"{fmt(v(res, p, 'rtt_p50_us'))} | {fmt(v(res, p, 'rtt_p99_us'))} | "
            f"{fmt(v(res, p, 'added_p50_us'))} | "
            f"{fmt(v(res, p, 'delivery_p50_ms'), 2)} / {fmt(v(res, p, 'delivery_p99_ms'), 2)} | "
            f"{fmt(v(res, p, 'produce_cpu_ms_per_mb'), 3)} | {fmt(v(res, p, 'rate_cpu_ms_per_mb'), 2)} | "
            f"{fmt(v(res, p, 'fetch_cpu_ms_per_mb'), 3)} | {res[p]['errors']} |")

    # ferry / HAProxy: the ratio within each round (the two ran minutes apart at
    # most, so drift in the machine's load cancels), then the median of those
    ratios = {}
    for k in ["produce_mbps", "fetch_mbps", "produce_cpu_ms_per_mb", "rate_cpu_ms_per_mb",
              "fetch_cpu_ms_per_mb", "produce_syscalls_per_mb", "fetch_syscalls_per_mb",
              "added_p50_us", "rtt_p50_us", "rtt_p99_us"]:
        f = res.get("ferry", {}).get(k, {}).get("by_round", {})
        h = res.get("haproxy", {}).get(k, {}).get("by_round", {})
        rs = [ratio(f[i], h[i]) for i in f if i in h and ratio(f[i], h[i]) is not None]
        ratios[k] = statistics.median(rs) if rs else None
    fa = res.get("ferry", {}).get("added_p50_us", {}).get("by_round", {})
    ha = res.get("haproxy", {}).get("added_p50_us", {}).get("by_round", {})
    p50_diff = [fa[i] - ha[i] for i in fa if i in ha]
    ferry_minus_haproxy_p50 = statistics.median(p50_diff) if p50_diff else None
    if "haproxy" in res and "ferry" in res:
        add("")
        add("ferry / HAProxy (nbthread 1), median of the per-round ratios: " + ", ".join(
            f"{k} ×{fmt(r, 2)}" for k, r in ratios.items()) +
            f"; ferry − HAProxy RTT p50, median per round: {fmt(ferry_minus_haproxy_p50)} µs")
    ab = compare_section(res, meta, add)
    sp, sf = v(res, "ferry", "produce_syscalls_per_mb"), v(res, "ferry", "fetch_syscalls_per_mb")
    hp, hf = v(res, "haproxy", "produce_syscalls_per_mb"), v(res, "haproxy", "fetch_syscalls_per_mb")
    if (sp is not None or hp is not None) and ab is None:
        add("")
        add(f"Proxy syscalls per MB (perf, raw_syscalls): produce ferry {fmt(sp)}, HAProxy {fmt(hp)}; "
            f"fetch ferry {fmt(sf)}, HAProxy {fmt(hf)}.")

    # memory
    def g(name, key):
        return mem.get(name, {}).get(key)

    fresh = g("ferry_worker_fresh", "rss_kb")
    idle_rss = g("ferry_idle_worker", "rss_kb")
    memo = {"ferry_worker_fresh_kb": fresh, "ferry_worker_fresh_anon_kb": g("ferry_worker_fresh", "rss_anon_kb"),
            "ferry_worker_after_load_kb": g("ferry_worker_after_load", "rss_kb"),
            "ferry_idle_worker_kb": idle_rss, "haproxy_rss_kb": g("haproxy_idle", "rss_kb")}

    def per1k(name, base=None):
        m = mem.get(name)
        if not m or not m.get("n"):
            return None
        return (m["rss_after_kb"] - (base or m["rss_before_kb"])) / m["n"] * 1000 / MIB

    memo["haproxy_mib_per_1k"] = per1k("haproxy_1k")
    memo["ferry_mib_per_1k"] = per1k("ferry_1k")
    # against the worker's RSS before any connection: the 1,000-connection run
    # before it left freed memory in the heap that this run reuses
    memo["ferry_mib_per_1k_at_many"] = per1k("ferry_many", idle_rss)
    many = mem.get("ferry_many", {})
    errs = mem.get("ferry_many_errors", {})
    memo["many"] = many
    memo["many_errors"] = errs
    if mem:
        add("")
        add("| memory | value |")
        add("|---|---:|")
        add(f"| ferry worker RSS, fresh (anon) | {fmt(fresh and fresh / MIB, 2)} MiB "
            f"({fmt(memo['ferry_worker_fresh_anon_kb'], 0)} KiB anon) |")
        add(f"| ferry worker RSS after the load runs (buffer pool kept) | "
            f"{fmt(memo['ferry_worker_after_load_kb'] and memo['ferry_worker_after_load_kb'] / MIB, 2)} MiB |")
        add(f"| HAProxy RSS (fresh, nbthread 1) | {fmt(memo['haproxy_rss_kb'] and memo['haproxy_rss_kb'] / MIB, 1)} MiB |")
        add(f"| per 1,000 idle client connections (each with its upstream connection): HAProxy | "
            f"{fmt(memo['haproxy_mib_per_1k'], 2)} MiB |")
        add(f"| same, ferry worker, 1,000 held | {fmt(memo['ferry_mib_per_1k'], 2)} MiB |")
        if many:
            add(f"| same, ferry worker, {int(many['n']):,} held | {fmt(memo['ferry_mib_per_1k_at_many'], 2)} MiB |")
            add(f"| {int(many['n']):,} connections to one worker | opened {int(many.get('opened', 0))}, "
                f"failed {int(many.get('failed', 0))}, closed by ferry {int(many.get('closed', 0))}, "
                f"upstream conns {int(many.get('upstream_conns', 0))}, ferry active {fmt(many.get('proxy_conns'))}, "
                f"rejected {fmt(errs.get('rejected'))}, accept pauses {fmt(errs.get('accept_paused'))} |")
            if errs.get("wanted") and errs["wanted"] > many["n"]:
                add(f"| {int(errs['wanted']):,} connections | not run: they need {int(2 * errs['wanted'] + 100):,} "
                    f"descriptors in the worker (client + upstream side), the hard `ulimit -n` here is "
                    f"{int(errs['nofile']):,} |")

    # reload
    rel = {}
    for r in reload:
        n = int(r["n"])
        d = rel.setdefault(n, {"start_ms": None, "reload_wall_ms": [], "reload_server_ms": [],
                               "reload_rc": [], "c0_after": None})
        if r.get("start_failed"):
            d["start_failed"] = True
        elif r.get("test") == "start":
            d["start_ms"] = r["ms"]
        elif r.get("test") == "reload":
            d["reload_wall_ms"].append(r["wall_ms"])
            d["reload_server_ms"].append(r["server_ms"])
            d["reload_rc"].append(int(r["rc"]))
            d["c0_after"] = r.get("c0")
    if rel:
        add("")
        add("| clusters | start → ready ms | reload of 1 modified: ferryd ms (median of 3) | "
            "`ferryctl reload` wall ms | failures | c0 after |")
        add("|---:|---:|---:|---:|---:|---|")
        for n in sorted(rel):
            d = rel[n]
            add(f"| {n} | {fmt(d['start_ms'])} | {fmt(med(d['reload_server_ms']))} | "
                f"{fmt(med(d['reload_wall_ms']))} | {sum(1 for x in d['reload_rc'] if x)} | {d['c0_after']} |")

    # several workers per cluster
    wres = workers_section(wk, add)

    # live connection handover
    hres = handover_section(ho, add)

    # TLS termination, ferry against HAProxy
    tres = tls_section(tl, add)

    # many idle clusters on one ferryd
    sres = scale_section(sc, add)

    # the admin API: ferryctl status, before and after
    ares = admin_section(ad, add)

    # targets
    targets = []

    def target(name, value, ok, shown):
        if value is None or value == [None, None, None]:
            return  # that part was not run (--only)
        targets.append({"target": name, "value": value, "met": ok, "shown": shown})

    r = ratios["produce_cpu_ms_per_mb"]
    target("CPU per MB ≤ HAProxy's (produce, saturating)", r, r is not None and r <= 1.0, f"×{fmt(r, 2)}")
    r2 = ratios["fetch_cpu_ms_per_mb"]
    target("CPU per MB ≤ HAProxy's (fetch)", r2, r2 is not None and r2 <= 1.0, f"×{fmt(r2, 2)}")
    r = ratios["produce_mbps"]
    target("produce throughput ≥ 0.9× HAProxy's", r, r is not None and r >= 0.9, f"×{fmt(r, 2)}")
    r = ratios["fetch_mbps"]
    target("fetch throughput ≥ 0.9× HAProxy's", r, r is not None and r >= 0.9, f"×{fmt(r, 2)}")
    fa, ha = v(res, "ferry", "added_p50_us"), v(res, "haproxy", "added_p50_us")
    d = ferry_minus_haproxy_p50
    target("added p50 latency ≤ HAProxy's", [fa, ha, d], d is not None and d <= 0,
           f"+{fmt(fa)} µs vs +{fmt(ha)} µs over direct; ferry − HAProxy per round: {fmt(d)} µs")
    target("idle worker RSS ≤ 4 MiB", fresh, fresh is not None and fresh <= 4 * MIB,
           f"{fmt(fresh and fresh / MIB, 2)} MiB")
    worst = max([x for x in (memo["ferry_mib_per_1k"], memo["ferry_mib_per_1k_at_many"]) if x is not None],
                default=None)
    target("≤ 4 MiB per 1,000 idle connections", worst, worst is not None and worst <= 4,
           f"{fmt(worst, 2)} MiB")
    if many:
        ok = (int(many.get("opened", 0)) == int(many["n"]) and int(many.get("failed", 1)) == 0
              and int(many.get("closed", 1)) == 0 and int(errs.get("rejected", 1)) == 0
              and int(many.get("upstream_conns", 0)) >= int(many["n"]))
        target(f"{int(many['n']):,} connections, no errors", ok, ok,
               "yes" if ok else "no (see the memory table)")
    worst_reload = max([med(d["reload_server_ms"]) or 0 for d in rel.values()], default=None)
    worst_wall = max([med(d["reload_wall_ms"]) or 0 for d in rel.values()], default=None)
    if rel:
        okr = worst_reload is not None and worst_reload < 100 and all(
            not any(d["reload_rc"]) for d in rel.values())
        target("reload commit < 100 ms regardless of cluster count", worst_reload, okr,
               f"worst {fmt(worst_reload)} ms in ferryd, {fmt(worst_wall)} ms wall "
               f"(n = {', '.join(str(n) for n in sorted(rel))})")
        big = max(rel)
        s = rel[big]["start_ms"]
        target(f"{big} clusters start < 2 s", s, s is not None and s < 2000, f"{fmt(s)} ms")
    hon = (hres or {}).get("on")
    if hon:
        n = hon.get("connections")
        ok = (hon.get("client_disconnects") == 0 and hon.get("handed_over") == n
              and hon.get("idle_check_ok") == hon.get("idle") and not hon.get("error"))
        target(f"reload of a cluster with {n:,} connections: no client-visible disconnect", ok, ok,
               f"{hon.get('client_disconnects')} disconnects, {hon.get('handed_over')} of {n:,} "
               f"handed over in {fmt(hon.get('duration_ms'))} ms")
    for via, d in (ares or {}).items():
        diff = d.get("after_minus_before_ms")
        if diff is not None:
            target(f"`ferryctl status` over {ADMIN_VIA[via]} within 3 ms of before", diff,
                   diff <= 3.0, f"{fmt(d['after_p50_ms'], 2)} ms vs {fmt(d['before_p50_ms'], 2)} ms "
                   f"({'+' if diff >= 0 else ''}{fmt(diff, 2)} ms)")
    add("")
    add("| target | result | met |")
    add("|---|---|---|")
    for t in targets:
        add(f"| {t['target']} | {t['shown']} | {'yes' if t['met'] else '**no**'} |")

    md = "\n".join(lines) + "\n"
    with open(os.path.join(outdir, "bench.md"), "w") as f:
        f.write(md)
    out = {"preliminary": True, "meta": meta, "paths": res, "ratios_ferry_over_haproxy": ratios,
           "ab_after_over_before": ab,
           "ferry_minus_haproxy_rtt_p50_us": ferry_minus_haproxy_p50,
           "memory": memo, "workers": wres, "handover": hres, "tls": tres, "scale": sres, "admin": ares, "reload": {str(k): d for k, d in sorted(rel.items())}, "targets": targets,
           "units": {"mbps": "10^6 bytes of payload per second", "cpu_ms_per_mb": "proxy utime+stime ms per 10^6 payload bytes",
                     "rtt": "librdkafka broker rtt window (request sent -> response), µs"}}
    with open(os.path.join(outdir, "bench.json"), "w") as f:
        json.dump(out, f, indent=1, default=str)
        f.write("\n")

    # plot
    dat = os.path.join(outdir, "bench.dat")
    with open(dat, "w") as f:
        f.write("# path produce_mbps fetch_mbps produce_cpu_ms_per_mb fetch_cpu_ms_per_mb\n")
        for p in PATHS:
            if p in res:
                f.write('"%s" %s %s %s %s\n' % (
                    LABEL[p].replace(" (1 round)", "").replace(", ", "\\n"),
                    *[fmt(v(res, p, k), 3) if v(res, p, k) is not None else "NaN"
                      for k in ("produce_mbps", "fetch_mbps", "produce_cpu_ms_per_mb", "fetch_cpu_ms_per_mb")]))
    png = os.path.join(outdir, "bench.png")
    gp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plot.gp")
    if not res:
        md += "\n(no plain-TCP throughput runs: no plot)\n"
    elif shutil.which("gnuplot"):
        subprocess.run(["gnuplot", "-e", f"dat='{dat}'; png='{png}'", gp], check=False)
        md += f"\nPlot: {png}\n"
    else:
        md += "\n(gnuplot not installed: no plot)\n"
    sys.stdout.write(md)
    print(f"\nraw: {tsv}\njson: {os.path.join(outdir, 'bench.json')}")


AB_KEYS = [("produce_mbps", "produce MB/s"), ("produce_cpu_ms_per_mb", "CPU ms/MB produce"),
           ("rate_cpu_ms_per_mb", "CPU ms/MB @20 MB/s"), ("fetch_mbps", "fetch MB/s"),
           ("fetch_cpu_ms_per_mb", "CPU ms/MB fetch"), ("rtt_p50_us", "RTT p50 @20 MB/s"),
           ("produce_syscalls_per_mb", "syscalls/MB produce"), ("fetch_syscalls_per_mb", "syscalls/MB fetch")]


def compare_section(res, meta, add):
    """A/B run: after (ferry) / before (ferry_b) within each round, the
    median and the range of those ratios; None without an A/B run."""
    if "ferry_b" not in res or "ferry" not in res:
        return None
    out = {"before": meta.get("compare"), "after": meta.get("git"), "metrics": {}}
    add("")
    add(f"A/B: after = {meta.get('git')}, before = {meta.get('compare')}: after / before within each "
        "round (the two ran back to back, order alternating), then the median and the range over "
        "rounds. Below 1: less CPU per MB or RTT, fewer MB/s.\n")
    rounds = sorted(set(res["ferry"]["produce_mbps"]["by_round"]) | set(res["ferry_b"]["produce_mbps"]["by_round"]))
    add("| metric | before (median) | after (median) | " + " | ".join(f"round {r}" for r in rounds) +
        " | median ratio | range |")
    add("|---|---:|---:|" + "---:|" * (len(rounds) + 2))
    for k, name in AB_KEYS:
        a = res["ferry"].get(k, {}).get("by_round", {})
        b = res["ferry_b"].get(k, {}).get("by_round", {})
        per = {r: ratio(a.get(r), b.get(r)) for r in rounds}
        xs = [x for x in per.values() if x is not None]
        m = statistics.median(xs) if xs else None
        out["metrics"][k] = {"by_round": per, "median": m, "min": min(xs) if xs else None,
                             "max": max(xs) if xs else None,
                             "after_median": v(res, "ferry", k), "before_median": v(res, "ferry_b", k)}
        nd = 3 if "cpu" in k else 0
        add(f"| {name} | {fmt(v(res, 'ferry_b', k), nd)} | {fmt(v(res, 'ferry', k), nd)} | " + " | ".join(f"×{fmt(per[r], 3)}" if per[r] is not None else "–" for r in rounds) +
            f" | **×{fmt(m, 3)}** | {fmt(min(xs) if xs else None, 3)} – {fmt(max(xs) if xs else None, 3)} |")
    return out


def workers_section(wk, add):
    """Balance and 8-producer throughput tables of the workers runs; returns
    their figures for bench.json (None when the section was not run)."""
    if not wk:
        return None
    out = {"kernel": [], "balance": [], "produce8": {}, "ratios": {}}

    def dev_of(c, n):
        even = sum(c) / n if n and c else None
        return max(abs(x - even) for x in c) / even * 100 if even and len(c) == n else None

    kern = [r for r in wk if r.get("test") == "kernel"]
    if kern:
        add("")
        add("The kernel alone (`bench/acceptq.c`, no ferry): idle processes accepting 1,000 "
            "connections, one per ms; `-kill`: one of two processes does not accept while 1,000 "
            "arrive at once, then exits; lost = connections reset by the kernel.\n")
        add("| socket(s) | processes | accepted per process | max deviation from even | lost |")
        add("|---|---:|---|---:|---:|")
        for r in kern:
            c = counts_of(r.get("counts"))
            n = int(r.get("n", 0))
            kill = str(r.get("mode", "")).endswith("-kill")
            dev = None if kill else dev_of(c, n)
            out["kernel"].append({"mode": r.get("mode"), "n": n, "counts": c, "max_dev_pct": dev,
                                  "lost": r.get("lost"), "failed": r.get("failed")})
            add(f"| {r.get('mode')} | {n} | {' / '.join(map(str, c)) or '–'} | "
                f"{fmt(dev, 1) + ' %' if dev is not None else '–'} | "
                f"{fmt(r.get('lost')) if kill else '–'} |")
    bal = [r for r in wk if r.get("test") == "balance"]
    if bal:
        add("")
        add("Several workers per cluster: 1,000 connections held, counted per worker "
            "(`ferryctl status`). Burst: 200 connects every 10 ms; paced: 10 every 10 ms.\n")
        add("| cluster | workers | arrival | connections per worker | max deviation from even |")
        add("|---|---:|---|---|---:|")
        for r in bal:
            c = counts_of(r.get("counts"))
            n = int(r.get("workers", 0))
            dev = dev_of(c, n)
            out["balance"].append({"cluster": r.get("cluster"), "workers": n, "pace": r.get("pace"),
                                   "counts": c, "total": sum(c), "max_dev_pct": dev,
                                   "opened": r.get("opened"), "failed": r.get("failed")})
            add(f"| {r.get('cluster')} | {n} | {r.get('pace')} | {' / '.join(map(str, c)) or '–'} | "
                f"{fmt(dev, 1)} % |")
    runs = [r for r in wk if r.get("test") == "produce8"]
    if runs:
        res = {}
        for p in WPATHS:
            pr = [r for r in runs if r.get("path") == p and "mbps" in r]
            if not pr:
                continue
            by_round = {}
            for r in pr:
                mb = r["bytes"] / 1e6
                by_round[int(r["round"])] = {
                    "mbps": r["mbps"],
                    "cpu_ms_per_mb": r["cpu_ms"] / mb if mb > 0 and p != "direct" else None,
                    "client_cpu_ms_per_mb": r["self_cpu_ms"] / mb if mb > 0 else None,
                    "conns": counts_of(r["conns"]) if "conns" in r else None,
                    "proc_ticks": counts_of(r.get("proc_ticks")),
                }
            res[p] = {"by_round": by_round,
                      "mbps": med([x["mbps"] for x in by_round.values()]),
                      "cpu_ms_per_mb": med([x["cpu_ms_per_mb"] for x in by_round.values()
                                            if x["cpu_ms_per_mb"] is not None]),
                      "errors": sum(int(r.get("all_errors", 0)) + int(r.get("failed", 0)) for r in pr)}
        out["produce8"] = res

        def rr(a, b, k):
            A, B = res.get(a, {}).get("by_round", {}), res.get(b, {}).get("by_round", {})
            xs = [ratio(A[i][k], B[i][k]) for i in A if i in B]
            xs = [x for x in xs if x is not None]
            return statistics.median(xs) if xs else None

        add("")
        add("8 producer connections (`kload -n 8`: eight producers in one process, each on one "
            "partition of `bench`): median over rounds; proxy CPU = utime+stime of the proxy's "
            "processes (ferry: supervisor and workers) per MB.\n")
        add("| path | produce MB/s | proxy CPU ms/MB | connections per worker (mid-run) | "
            "CPU split, ticks (ferry: supervisor / workers) | errors |")
        add("|---|---:|---:|---|---|---:|")
        for p in WPATHS:
            if p not in res:
                continue
            last = res[p]["by_round"][max(res[p]["by_round"])]
            add(f"| {WLABEL[p]} | {fmt(res[p]['mbps'])} | {fmt(res[p]['cpu_ms_per_mb'], 3)} | "
                f"{' / '.join(map(str, last['conns'])) if last['conns'] else '–'} | "
                f"{' / '.join(map(str, last['proc_ticks'])) if p != 'direct' else '–'} | "
                f"{res[p]['errors']} |")
        ratios = {
            "ferry_w2_over_w1_mbps": rr("ferry_w2", "ferry_w1", "mbps"),
            "ferry_w2_over_w1_cpu_per_mb": rr("ferry_w2", "ferry_w1", "cpu_ms_per_mb"),
            "haproxy_t2_over_t1_mbps": rr("haproxy_t2", "haproxy_t1", "mbps"),
            "haproxy_t2_over_t1_cpu_per_mb": rr("haproxy_t2", "haproxy_t1", "cpu_ms_per_mb"),
            "ferry_w2_over_haproxy_t2_mbps": rr("ferry_w2", "haproxy_t2", "mbps"),
            "ferry_w2_over_haproxy_t2_cpu_per_mb": rr("ferry_w2", "haproxy_t2", "cpu_ms_per_mb"),
            "ferry_w1_over_direct_mbps": rr("ferry_w1", "direct", "mbps"),
        }
        out["ratios"] = ratios
        add("")
        add("Median of the per-round ratios: "
            f"ferry workers 2/1: MB/s ×{fmt(ratios['ferry_w2_over_w1_mbps'], 2)}, "
            f"CPU/MB ×{fmt(ratios['ferry_w2_over_w1_cpu_per_mb'], 2)}; "
            f"HAProxy nbthread 2/1: MB/s ×{fmt(ratios['haproxy_t2_over_t1_mbps'], 2)}, "
            f"CPU/MB ×{fmt(ratios['haproxy_t2_over_t1_cpu_per_mb'], 2)}; "
            f"ferry workers 2 / HAProxy nbthread 2: MB/s ×{fmt(ratios['ferry_w2_over_haproxy_t2_mbps'], 2)}, "
            f"CPU/MB ×{fmt(ratios['ferry_w2_over_haproxy_t2_cpu_per_mb'], 2)}; "
            f"ferry workers 1 / direct: MB/s ×{fmt(ratios['ferry_w1_over_direct_mbps'], 2)}.")
    return out


def handover_section(ho, add):
    """The table of the handover runs (handover = on and off side by side);
    returns their figures for bench.json (None when not run)."""
    if not ho:
        return None
    out = {}
    for r in ho:
        mode = r.get("mode")
        if mode not in ("on", "off", "upgrade"):
            continue
        d = {k: (int(x) if isinstance(x, float) and x == int(x) else x) for k, x in r.items()}
        d["connections"] = int(r.get("idle", 0)) + int(r.get("busy", 0))
        for q in ("p50", "p99", "max"):
            b, du = r.get(f"before_{q}_us"), r.get(f"during_{q}_us")
            ok = isinstance(b, float) and isinstance(du, float) and b > 0 and du >= 0
            d[f"{q}_during_over_before"] = du / b if ok else None
        out[mode] = d
    if not out:
        return None
    modes = [m for m in ("on", "off", "upgrade") if m in out]
    label = {"on": "reload, `handover = on`", "off": "reload, `handover = off` (clients reconnect)",
             "upgrade": "`ferryctl upgrade` (ferryd itself)"}
    if "upgrade" in out and "on" in out:
        u, o = out["upgrade"], out["on"]
        g = (u.get("gone_ms"), o.get("gone_ms"))
        out["upgrade"]["gone_over_reload"] = g[0] / g[1] if all(
            isinstance(x, (int, float)) and x > 0 for x in g) else None

    def row(name, fn):
        add(f"| {name} | " + " | ".join(fn(out[m]) for m in modes) + " |")

    def ms(x):
        return f"{fmt(x)} ms" if isinstance(x, (int, float)) and x >= 0 else "–"

    def us(x):
        return f"{fmt(x / 1000, 2)} ms" if isinstance(x, (int, float)) and x >= 0 else "–"

    def x_(v):
        return f"×{fmt(v, 2)}" if v is not None else "–"

    def n_(d, k):
        return "–" if d.get(k) is None else str(d[k])

    first = out[modes[0]]
    add("")
    add(f"Live connection handover (`bench/handover.c`): a modifying reload (`idle_timeout` changed) "
        f"of one cluster carrying {int(first.get('idle', 0)):,} idle connections (each did one "
        f"ApiVersions) and {int(first.get('busy', 0))} busy ones (one ApiVersions or Metadata "
        f"round trip every {int(first.get('interval_ms', 0))} ms each, one in flight), "
        f"`handover = on` then `off` in one ferryd, and (`bench/handover.c -U`) an upgrade of "
        f"ferryd itself (`ferryctl upgrade`, docs/design.md §11) carrying the same load in "
        f"another. During = every request in flight at any moment "
        f"from the request until the old generation (the old ferryd) is gone; before = the "
        f"{fmt(first.get('before_window_ms', 0) / 1000)} s before it; after = the "
        f"{fmt(first.get('after_window_ms', 0) / 1000)} s after. A disconnect is an EOF or reset "
        f"the client sees (clients reconnect at once, as Kafka clients do: busy ones resend "
        f"the request outstanding, idle ones their ApiVersions; every idle connection sends one more "
        f"ApiVersions at the end). The during windows differ in length (first row): with handover "
        f"the whole disturbance is packed into a short window, so its p99 covers few requests; the "
        f"last row compares what one client sees (its slowest request of the window).\n")
    add("| | " + " | ".join(label[m] for m in modes) + " |")
    add("|---|" + "---:|" * len(modes))
    row("request → old generation / old ferryd gone", lambda d: ms(d.get("gone_ms")))
    row("reload: lastReplacement durationMs (commit → old generation gone); upgrade: "
        "durationMs (request → commit)", lambda d: ms(d.get("duration_ms")))
    row("`ferryctl reload` / `upgrade` returned after", lambda d: ms(d.get("reload_ms")))
    if "upgrade" in out:
        row("upgrade time / reload time (request → gone)",
            lambda d: x_(d.get("gone_over_reload")) if "gone_over_reload" in d else "–")
    row("handed over / drained / forced",
        lambda d: f"{n_(d, 'handed_over')} / {n_(d, 'drained')} / {n_(d, 'forced')}")
    row("`ferry_connections_handed_over_total` afterwards", lambda d: n_(d, "metric_handed_over"))
    row(f"client-visible disconnects of {first['connections']:,} (busy / idle)",
        lambda d: f"**{n_(d, 'client_disconnects')}** ({n_(d, 'busy_disconnects')} / "
        f"{int(d.get('idle_disconnects', 0)) + int(d.get('idle_check_unanswered', 0))})")
    row("idle connections answering afterwards", lambda d: f"{n_(d, 'idle_check_ok')} of {n_(d, 'idle')}")
    row("requests before / during / after",
        lambda d: f"{n_(d, 'before_n')} / {n_(d, 'during_n')} / {n_(d, 'after_n')}")
    row("latency p50 before → during", lambda d: f"{us(d.get('before_p50_us'))} → {us(d.get('during_p50_us'))} "
        f"({x_(d.get('p50_during_over_before'))})")
    row("latency p99 before → during", lambda d: f"{us(d.get('before_p99_us'))} → {us(d.get('during_p99_us'))} "
        f"(**{x_(d.get('p99_during_over_before'))}**)")
    row("latency max before → during", lambda d: f"{us(d.get('before_max_us'))} → {us(d.get('during_max_us'))}")
    row("latency p99 after", lambda d: us(d.get("after_p99_us")))
    row("each busy client's slowest request during: median / worst client",
        lambda d: f"{us(d.get('during_conn_worst_p50_us'))} / {us(d.get('during_conn_worst_max_us'))}")
    errs = [f"{m}: the load client failed (see run/{'upgrade' if m == 'upgrade' else 'handover-' + m}.err)"
            for m in modes if out[m].get("failed")]
    errs += [f"{m}: {out[m]['error']}" for m in modes if out[m].get("error")]
    errs += [f"{m}: {out[m]['setup_errors']} set-up errors" for m in modes if out[m].get("setup_errors")]
    errs += [f"{m}: {out[m]['bad_responses']} bad responses" for m in modes if out[m].get("bad_responses")]
    if errs:
        add("")
        add("Errors: " + "; ".join(map(str, errs)) + ".")
    return out


TLS_PATHS = ["haproxy", "ferry"]
TLS_LABEL = {"haproxy": "HAProxy, nbthread 1", "ferry": "ferry, 1 worker"}
# metric, label, decimals, better ("hi"/"lo")
TLS_METRICS = [
    ("produce_mbps", "produce MB/s (saturating)", 0),
    ("produce_cpu_ms_per_mb", "proxy CPU ms per MB, produce", 3),
    ("produce_rtt_p50_ms", "request RTT p50, saturating produce, ms", 1),
    ("produce_rtt_p99_ms", "request RTT p99, saturating produce, ms", 1),
    ("produce_rate_rtt_p50_ms", "request RTT p50, produce at 20 MB/s, ms", 2),
    ("produce_rate_rtt_p99_ms", "request RTT p99, produce at 20 MB/s, ms", 2),
    ("fetch_mbps", "fetch MB/s", 0),
    ("fetch_cpu_ms_per_mb", "proxy CPU ms per MB, fetch", 3),
    ("hs_full_per_s", "full handshakes per s", 0),
    ("hs_full_cpu_us", "proxy CPU µs per full handshake", 0),
    ("hs_resumed_per_s", "resumed handshakes per s", 0),
    ("hs_resumed_cpu_us", "proxy CPU µs per resumed handshake", 0),
    ("idle_mib_per_1k", "RSS per 1,000 idle TLS connections, MiB", 2),
]
# Below this share of resumed handshakes the server is taken not to resume.
RESUMED_MIN = 0.9


def tls_section(rows, add):
    """The TLS table (ferry against HAProxy, both terminating TLS with the
    same certificate and cipher); returns its figures for bench.json (None
    when the part was not run)."""
    if not rows:
        return None
    uns = [r for r in rows if r.get("test") == "unsupported"]
    if uns:
        add("")
        add(f"TLS: not run, ferry with `tls_cert` did not start ({uns[0].get('reason')}).")
        return {"unsupported": uns[0].get("reason")}
    meta = next((r for r in rows if r.get("test") == "meta"), {})
    out = {"meta": meta, "paths": {}, "ratios_ferry_over_haproxy": {}, "resumption": {}}
    for p in TLS_PATHS:
        by = {k: {} for k, _, _ in TLS_METRICS}
        resumed = {"handshakes": 0, "resumed": 0}
        errors = 0
        for r in rows:
            if r.get("path") != p:
                continue
            t, rnd = r.get("test"), int(r.get("round", 0))
            errors += int(r.get("all_errors", 0)) + int(r.get("failed", 0))
            if t in ("produce", "fetch") and "mbps" in r:
                by[f"{t}_mbps"][rnd] = r["mbps"]
                mb = r["bytes"] / 1e6
                if mb > 0:
                    by[f"{t}_cpu_ms_per_mb"][rnd] = r["cpu_ms"] / mb
                if t == "produce" and r.get("rtt_windows"):
                    by["produce_rtt_p50_ms"][rnd] = r["rtt_p50_us"] / 1000
                    by["produce_rtt_p99_ms"][rnd] = r["rtt_p99_us"] / 1000
            elif t == "produce_rate" and r.get("rtt_windows"):
                by["produce_rate_rtt_p50_ms"][rnd] = r["rtt_p50_us"] / 1000
                by["produce_rate_rtt_p99_ms"][rnd] = r["rtt_p99_us"] / 1000
            elif t in ("hs_full", "hs_resumed") and r.get("handshakes"):
                n = r["handshakes"]
                by[f"{t}_per_s"][rnd] = r["hs_per_s"]
                by[f"{t}_cpu_us"][rnd] = r["cpu_ms"] * 1000 / n
                if t == "hs_resumed":
                    resumed["handshakes"] += int(n)
                    resumed["resumed"] += int(r.get("resumed", 0))
            elif t == "idle" and r.get("n"):
                by["idle_mib_per_1k"][0] = (r["rss_after_kb"] - r["rss_before_kb"]) / r["n"] * 1000 / MIB
                out.setdefault("idle", {})[p] = {k: r.get(k) for k in (
                    "n", "opened", "failed", "closed", "upstream_conns", "rss_before_kb", "rss_after_kb")}
        share = resumed["resumed"] / resumed["handshakes"] if resumed["handshakes"] else None
        resumed["share"] = share
        out["resumption"][p] = resumed
        if share is None or share < RESUMED_MIN:
            # what was measured were full handshakes: not a resumption figure
            by["hs_resumed_per_s"], by["hs_resumed_cpu_us"] = {}, {}
        out["paths"][p] = {k: {"median": med(list(d.values())), "by_round": d} for k, d in by.items()}
        out["paths"][p]["errors"] = errors
    fp, hp = out["paths"]["ferry"], out["paths"]["haproxy"]
    for k, _, _ in TLS_METRICS:
        f, h = fp[k]["by_round"], hp[k]["by_round"]
        rs = [ratio(f[i], h[i]) for i in f if i in h and ratio(f[i], h[i]) is not None]
        out["ratios_ferry_over_haproxy"][k] = statistics.median(rs) if rs else None
    add("")
    add(f"TLS termination: {meta.get('version', '?')}, {meta.get('cipher', '?')} pinned on both "
        f"servers, the same {meta.get('key', '?')} certificate, X25519 key exchange; the same "
        "upstream (mock cluster; the idle sink for handshakes and idle connections). Median over "
        "rounds; ferry / HAProxy: median of the per-round ratios. Proxy CPU = utime+stime of the "
        "proxy's processes (ferry: supervisor and worker). Handshakes: 4 client processes, each "
        "connection a handshake, close_notify and close; resumed: by session ticket.\n")
    add("| | " + " | ".join(TLS_LABEL[p] for p in TLS_PATHS) + " | ferry / HAProxy |")
    add("|---|---:|---:|---:|")
    for k, label, nd in TLS_METRICS:
        cells = []
        for p in TLS_PATHS:
            m = out["paths"][p][k]["median"]
            res = out["resumption"][p]
            if k.startswith("hs_resumed") and m is None and res["handshakes"]:
                cells.append(f"not resumed ({res['resumed']} of {res['handshakes']})")
            else:
                cells.append(fmt(m, nd))
        r = out["ratios_ferry_over_haproxy"][k]
        add(f"| {label} | " + " | ".join(cells) + f" | {'×' + fmt(r, 2) if r is not None else '–'} |")
    idle = out.get("idle", {})
    add(f"| errors (failed runs, client errors) | {hp['errors']} | {fp['errors']} | |")
    if idle:
        add("")
        add("1,000 idle TLS connections: " + "; ".join(
            f"{TLS_LABEL[p]}: opened {int(d.get('opened') or 0)}, failed {int(d.get('failed') or 0)}, "
            f"closed by the proxy {int(d.get('closed') or 0)}, upstream connections {int(d.get('upstream_conns') or 0)}"
            for p, d in idle.items()) + ".")
    return out


ADMIN_VIA = {"unix": "the control socket", "https": "HTTPS with a token"}


def admin_section(rows, add):
    """`ferryctl status` latency per transport and build: the median over
    rounds of each round's p50, and after - before paired by round."""
    rows = [r for r in rows if r.get("via") in ADMIN_VIA]
    if not rows:
        return None
    out = {}
    for via in ADMIN_VIA:
        by = {}
        for r in rows:
            if r["via"] == via and r.get("p50_ms") is not None:
                by.setdefault(r["build"], {})[r["round"]] = r["p50_ms"]
        if not by:
            continue
        d = {"after_p50_ms": med(list(by.get("after", {}).values())),
             "before_p50_ms": med(list(by.get("before", {}).values())),
             "failed_runs": sum(int(r.get("failed") or 0) for r in rows if r["via"] == via)}
        pairs = [by["after"][k] - by["before"][k] for k in by.get("after", {})
                 if k in by.get("before", {})]
        d["after_minus_before_ms"] = statistics.median(pairs) if pairs else None
        out[via] = d
    add("")
    add("### Admin API: `ferryctl status`\n")
    add("A whole client run (exec, connect, request, answer, exit), median of 50 runs per round, "
        "then the median over rounds; after − before paired within each round.\n")
    add("| transport | after p50 ms | before p50 ms | after − before ms | failed runs |")
    add("|---|---:|---:|---:|---:|")
    for via, d in out.items():
        add(f"| {ADMIN_VIA[via]} | {fmt(d['after_p50_ms'], 2)} | {fmt(d['before_p50_ms'], 2)} | "
            f"{fmt(d['after_minus_before_ms'], 2)} | {d['failed_runs']} |")
    return out


# Below this many clusters the scaled budgets are not judged (the
# supervisor's fixed cost would dominate them).
SCALE_JUDGE_MIN = 100


def scale_section(rows, add):
    """Per number of clusters, the measured costs against the budget (set
    for 1,000 clusters; the absolute ones scale with N/1000). Returns the
    figures for bench.json (None when the part was not run)."""
    if not rows:
        return None
    out = {}
    for n in sorted({int(r["n"]) for r in rows}):
        rs = [r for r in rows if int(r["n"]) == n]

        def one(test, **match):
            for r in rs:
                if r.get("test") == test and all(r.get(k) == v for k, v in match.items()):
                    return r
            return {}

        def all_of(test, **match):
            return [r for r in rs if r.get("test") == test and all(r.get(k) == v for k, v in match.items())]

        k = n / 1000.0
        judge = n >= SCALE_JUDGE_MIN
        st, p0 = one("start"), one("procs", phase="started")
        pa, ps = one("procs", phase="after_reload"), one("procs", phase="settled")
        r1 = all_of("reload_one")
        ra, oc = one("reload_all"), one("outcome")
        mt = all_of("metrics", phase="started")
        mt_after = one("metrics", phase="after_reload")
        stt, stop = one("status"), one("stop")
        ad0, ad1 = one("admin_start"), one("admin_reload")

        def num_(r, key):
            x = r.get(key)
            return x if isinstance(x, float) and x >= 0 else None

        def kib2mib(x):
            return None if x is None else x / MIB

        rows_out = []

        def row(label, budget, value, shown, ok):
            rows_out.append({"measure": label, "budget": budget, "value": value, "shown": shown,
                             "met": None if ok is None or not judge else bool(ok)})

        def le(v, lim):
            return None if v is None else v <= lim

        a = num_(st, "all_ms")
        row("every bootstrap accepting after start", f"≤ {fmt(10000 * k)} ms", a,
            f"{fmt(a)} ms (median {fmt(num_(st, 'p50_ms'))} ms, {fmt(st.get('failed'))} failed)",
            le(a, 10000 * k) if st else None)
        m0 = num_(ad0, "max_ms")
        row("admin API during start, slowest of GET /admin/health every 20 ms", "≤ 100 ms", m0,
            f"{fmt(m0, 1)} ms (p99 {fmt(num_(ad0, 'p99_ms'), 1)}, {fmt(ad0.get('requests'))} requests, "
            f"{fmt(ad0.get('failed'))} failed)", le(m0, 100))
        for label, p in (("after start", p0), ("right after the reload of all", pa),
                         ("5 s after the reload of all", ps)):
            rss, fds = kib2mib(num_(p, "sup_rss_kb")), num_(p, "sup_fds")
            strict = p is ps
            row(f"supervisor RSS, {label}", f"≤ {fmt(64 * k)} MiB" if strict else "", rss,
                f"{fmt(rss, 1)} MiB (anon {fmt(kib2mib(num_(p, 'sup_anon_kb')), 1)}, shmem "
                f"{fmt(kib2mib(num_(p, 'sup_shmem_kb')), 1)})", le(rss, 64 * k) if strict else None)
            row(f"supervisor descriptors, {label}", f"≤ {16 * n:,} (16 per cluster)" if strict else "",
                fds, f"{fmt(fds)} ({fmt(fds / n if fds else None, 1)} per cluster: "
                f"{str(p.get('sup_fd_kinds', '')).replace(',', ', ')})",
                le(fds, 16 * n) if strict else None)
        wmax, wmed = kib2mib(num_(p0, "w_rss_kb_max")), kib2mib(num_(p0, "w_rss_kb_med"))
        row("idle worker RSS, max (median)", "≤ 2 MiB", wmax,
            f"{fmt(wmax, 2)} MiB ({fmt(wmed, 2)}); PSS median {fmt(kib2mib(num_(p0, 'w_pss_kb_med')), 2)}, "
            f"max {fmt(kib2mib(num_(p0, 'w_pss_kb_max')), 2)} MiB; anon median "
            f"{fmt(kib2mib(num_(p0, 'w_anon_kb_med')), 2)} MiB; {fmt(p0.get('workers'))} workers, "
            f"{fmt(p0.get('w_fds_med'))} descriptors each", le(wmax, 2))
        s_med, s_max = num_(stt, "med"), num_(stt, "max")
        row("`ferryctl status` wall, median of 3 (max)", "≤ 200 ms", s_med,
            f"{fmt(s_med)} ms ({fmt(s_max)})", le(s_med, 200))
        w1 = [x["wall_ms"] for x in r1 if isinstance(x.get("wall_ms"), float)]
        d1 = [x["duration_ms"] for x in r1 if isinstance(x.get("duration_ms"), float)]
        ok1 = all(int(x.get("success", 0)) == 1 and int(x.get("modified", 0)) == 1 for x in r1)
        # judged on the wall time: ferryd's durationMs reads the clock of
        # the loop's wake-up and misses the work of the same turn
        row("reload modifying 1 cluster, `ferryctl reload` wall, median of 3", "≤ 50 ms", med(w1),
            f"{fmt(med(w1))} ms (durationMs {fmt(med(d1))} ms); "
            f"{'each modified 1, success' if ok1 and r1 else 'not all succeeded'}",
            (le(med(w1), 50) and ok1) if r1 else None)
        da, wa = num_(ra, "duration_ms"), num_(ra, "wall_ms")
        okc = (int(ra.get("success", 0)) == 1 and int(ra.get("modified", -1)) == n
               and int(oc.get("advanced", -1)) == n and oc.get("states") == f"accepting:{n}")
        row(f"reload modifying all {n:,}: completes, outcome per cluster", "all modified and accepting",
            da, f"{fmt(da)} ms in ferryd ({fmt(wa)} ms wall); success {fmt(ra.get('success'))}, "
                f"modified {fmt(ra.get('modified'))}, errors {fmt(ra.get('errors'))}; afterwards "
                f"{oc.get('states', '?')}, new generation {fmt(oc.get('advanced'))}", okc if ra else None)
        m1 = num_(ad1, "max_ms")
        row("admin API during the reload of all, slowest", "≤ 100 ms", m1,
            f"{fmt(m1, 1)} ms (p99 {fmt(num_(ad1, 'p99_ms'), 1)}, {fmt(ad1.get('requests'))} requests, "
            f"{fmt(ad1.get('failed'))} failed, {fmt(ad1.get('over_100ms'))} over 100 ms)", le(m1, 100))
        mts = [x["ms"] for x in mt if isinstance(x.get("ms"), float)]
        mb = num_(mt[-1], "bytes") if mt else None
        row("/metrics scrape, median of 3", "≤ 1,000 ms", med(mts),
            f"{fmt(med(mts))} ms, {fmt(mb and mb / 1e6, 2)} MB, {fmt(mt[-1].get('lines') if mt else None)} "
            f"lines ({fmt(mb and mb / n)} bytes per cluster); after the reload of all "
            f"{fmt(num_(mt_after, 'ms'))} ms, {fmt(num_(mt_after, 'bytes') and num_(mt_after, 'bytes') / 1e6, 2)} MB",
            le(med(mts), 1000))
        sm = num_(stop, "ms")
        row("SIGTERM → ferryd exited", "≤ 10,000 ms", sm,
            f"{fmt(sm)} ms, {fmt(stop.get('left'))} of its processes left", le(sm, 10000) and
            int(stop.get("left", 1)) == 0 if stop else None)
        fw = one("fdlimit_warnings").get("lines")
        out[n] = {"rows": rows_out, "fdlimit_warnings": fw}
        add("")
        add(f"Scale: {n:,} idle clusters on one ferryd (each `workers = 1`, plaintext, a bootstrap and "
            f"one broker port, upstream a one-broker mock cluster). Budgets are the issue's for 1,000 clusters, "
            f"absolute ones scaled by {k:g}"
            f"{'' if judge else f' (not judged below {SCALE_JUDGE_MIN} clusters: a fixed cost dominates)'}. Start-up warnings \"file descriptor limit below "
            f"max_connections\": {fmt(fw)}.\n")
        add("| measure | budget | measured | met |")
        add("|---|---|---|---|")
        for r in rows_out:
            met = "" if r["met"] is None else ("yes" if r["met"] else "**no**")
            add(f"| {r['measure']} | {r['budget']} | {r['shown']} | {met} |")
    return out


if __name__ == "__main__":
    main()
