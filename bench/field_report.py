"""The field part of scripts/bench's report (bench/field.sh): ferry against
Kroxylicious and HAProxy on a real Kafka cluster, loaded by Kafka's own
ProducerPerformance and ConsumerPerformance.

field_section(rows, add) takes the `field` lines of results.tsv (dicts of
key -> number or string), appends markdown through add(line) and returns
the figures for bench.json (None when the part was not run). Per path and
test the median over rounds is shown with the spread (min–max); ratios are
to direct of the same test (throughput, latency) or between proxies (CPU
per MB, RSS). MB here is the tools' MB: 2^20 bytes of payload. Standard
library only.
"""
import statistics

PATHS = ["direct", "haproxy", "ferry_w1", "ferry_w2", "krox_c1", "krox_c2"]
LABEL = {
    "direct": "direct (no proxy)",
    "haproxy": "HAProxy, nbthread 1",
    "ferry_w1": "ferry, 1 worker",
    "ferry_w2": "ferry, workers = 2",
    "krox_c1": "Kroxylicious, 1 core",
    "krox_c2": "Kroxylicious, 2 cores",
}
TESTS = [("p_sat1", "produce, saturating, acks=1"), ("p_satall", "produce, saturating, acks=all"),
         ("p_rate", "produce at 20 MiB/s, acks=all"), ("consume", "consume from the start")]


def _num(x):
    return x if isinstance(x, float) else None


def _fmt(x, nd=1):
    if x is None:
        return "–"
    return f"{x:,.{nd}f}"


def _stat(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def _show(st, nd=1):
    if st is None:
        return "–"
    if st["n"] == 1 or st["min"] == st["max"]:
        return _fmt(st["median"], nd)
    return f"{_fmt(st['median'], nd)} ({_fmt(st['min'], nd)}–{_fmt(st['max'], nd)})"


def _ratio(a, b, nd=2):
    if a is None or b is None or b == 0:
        return "–"
    return f"{a / b:.{nd}f}×"


def _runs(rows):
    """{test: {path: [row of each measured round]}} (round 0, the warm-up, left out)"""
    out = {}
    for r in rows:
        t, p = r.get("test"), r.get("path")
        if t in dict(TESTS) and p in LABEL and _num(r.get("round")) and r["round"] >= 1:
            out.setdefault(t, {}).setdefault(p, []).append(r)
    return out


def _mb(r):
    """MB (2^20 bytes) of payload the run moved"""
    if _num(r.get("mb")) is not None:
        return r["mb"]
    if _num(r.get("records")) is not None:
        return r["records"] * 1024 / 2**20
    return None


def _cpu_per_mb(r):
    mb, c = _mb(r), _num(r.get("cpu_ms"))
    if not mb or c is None or r.get("path") == "direct":
        return None
    return c / mb


def field_section(rows, add):
    if not rows:
        return None
    meta = next((r for r in rows if r.get("test") == "meta"), {})
    runs = _runs(rows)
    out = {"meta": meta, "tests": {}, "idle": {}, "churn": {}, "reload": {}}
    add("")
    add("## Field: ferry, Kroxylicious and HAProxy on real Kafka")
    add("")
    add(f"Kafka {meta.get('kafka', '?')} ({int(meta.get('nodes', 0) or 0)} node(s), KRaft), load from Kafka's "
        f"ProducerPerformance / ConsumerPerformance ({int(meta.get('records', 0) or 0):,} records of 1 KiB per "
        f"saturating run) on {meta.get('tools_java', '?')}; Kroxylicious {meta.get('kroxylicious', '?')} "
        f"(kroxylicious-runtime, no filters) on Java {meta.get('krox_java', '?')}, heap "
        f"{str(meta.get('krox_heap', '?')).replace('_', ' ')}. Medians over rounds, (min–max) the spread. "
        "CPU: utime+stime of all the proxy's processes/threads over the tool's run, per MiB moved. "
        "Latency: the producer tool's own percentiles (closed loop, from send() to the acknowledgement).")
    for test, title in TESTS:
        per = runs.get(test, {})
        if not per:
            continue
        add("")
        add(f"**{title}**")
        add("")
        add("| path | MB/s | ×direct | CPU ms/MB | p50 ms | p99 ms | p99.9 ms | proxy RSS MB | failed |")
        add("|---|---|---|---|---|---|---|---|---|")
        res = {}
        for p in PATHS:
            rs = per.get(p)
            if not rs:
                continue
            mbps = _stat([_num(r.get("fetch_mb_s")) if test == "consume" and _num(r.get("fetch_mb_s"))
                          else _num(r.get("mb_s")) for r in rs])
            res[p] = {
                "mb_s": mbps,
                "cpu_ms_per_mb": _stat([_cpu_per_mb(r) for r in rs]),
                "p50_ms": _stat([_num(r.get("p50_ms")) for r in rs]),
                "p99_ms": _stat([_num(r.get("p99_ms")) for r in rs]),
                "p999_ms": _stat([_num(r.get("p999_ms")) for r in rs]),
                "rss_mb": _stat([r["rss_kb"] / 1024 if _num(r.get("rss_kb")) else None for r in rs]),
                "failed": sum(1 for r in rs if r.get("failed")),
            }
        d = res.get("direct", {}).get("mb_s")
        for p, x in res.items():
            m = lambda k: x[k]["median"] if x[k] else None  # noqa: E731
            add(f"| {LABEL[p]} | {_show(x['mb_s'])} | {_ratio(m('mb_s'), d and d['median'])} | "
                f"{_show(x['cpu_ms_per_mb'], 2)} | {_show(x['p50_ms'], 0)} | {_show(x['p99_ms'], 0)} | "
                f"{_show(x['p999_ms'], 0)} | {_show(x['rss_mb'], 0) if p != 'direct' else '–'} | {x['failed']} |")
        out["tests"][test] = res
        # the ratios the issue asks for
        def med(p, k):
            return res.get(p, {}).get(k, {}) and res[p][k]["median"] if res.get(p, {}).get(k) else None
        pairs = [("ferry_w1", "krox_c1"), ("ferry_w1", "krox_c2"), ("ferry_w2", "krox_c2"), ("ferry_w1", "haproxy")]
        bits = []
        for a, b in pairs:
            if a in res and b in res:
                bits.append(f"{LABEL[a]} / {LABEL[b]}: CPU/MB {_ratio(med(a, 'cpu_ms_per_mb'), med(b, 'cpu_ms_per_mb'))}, "
                            f"MB/s {_ratio(med(a, 'mb_s'), med(b, 'mb_s'))}"
                            + (f", p99 {_ratio(med(a, 'p99_ms'), med(b, 'p99_ms'))}" if test != "consume" else ""))
        if bits:
            add("")
            add("Ratios: " + "; ".join(bits) + ".")

    idle = [r for r in rows if r.get("test") == "idle"]
    churn = {r["path"]: r for r in rows if r.get("test") == "churn"}
    if idle or churn:
        add("")
        add("**Idle connections and set-up rate** (each idle connection did one ApiVersions, so every proxy "
            "holds its upstream connection; set-up: connect, ApiVersions, close, 8 at a time)")
        add("")
        add("| proxy | connections | RSS before MB | RSS after MB | KiB per connection | MB per 1,000 | "
            "set-ups/s | set-up p50 ms | p99 ms | failed |")
        add("|---|---|---|---|---|---|---|---|---|---|")
        for r in idle:
            p = r["path"]
            n = r.get("opened") or 0
            b, a = _num(r.get("rss_before_kb")), _num(r.get("rss_after_kb"))
            per = (a - b) / n if n and a is not None and b is not None else None
            c = churn.get(p, {})
            out["idle"][p] = {"n": n, "rss_before_kb": b, "rss_after_kb": a, "kib_per_conn": per,
                              "failed": r.get("failed")}
            out["churn"][p] = c
            add(f"| {LABEL.get(p, p)} | {_fmt(n, 0)} | {_fmt(b and b / 1024)} | {_fmt(a and a / 1024)} | "
                f"{_fmt(per, 1)} | {_fmt(per and per * 1000 / 1024, 1)} | {_fmt(_num(c.get('rate')), 0)} | "
                f"{_fmt(_num(c.get('p50_ms')), 2)} | {_fmt(_num(c.get('p99_ms')), 2)} | "
                f"{_fmt(_num(r.get('failed')), 0)}/{_fmt(_num(c.get('failed')), 0)} |")
        f, k = out["idle"].get("ferry_w1", {}), out["idle"].get("krox_c2", {})
        if f.get("kib_per_conn") and k.get("kib_per_conn"):
            add("")
            add(f"RSS per idle connection, ferry / Kroxylicious: {_ratio(f['kib_per_conn'], k['kib_per_conn'], 3)}.")

    rel = {r["path"]: r for r in rows if r.get("test") == "reload"}
    if rel:
        what = {"direct": "none (baseline)", "ferry_w1": "`ferryctl reload` (cluster modified, handover on)",
                "krox_c2": "restart (SIGTERM, start again: it has no reload)",
                "haproxy": "`haproxy -sf` (new process; the old one keeps its connections)"}
        add("")
        rate = _num(meta.get("reload_rate_rec_s"))
        add(f"**Reload or restart under load** (ReloadLoad: producer paced at {_fmt(rate and rate / 1024, 0)} MiB/s, "
            "acks=all, latency from the intended send time; a consumer group member; windows of equal length "
            "before the event and from it, after a warm-up)")
        add("")
        add("| path | event | event took ms | produce failed | p99 before ms | p99 during ms | max during ms | "
            "producer reconnects | consumer reconnects | consumer rebalances |")
        add("|---|---|---|---|---|---|---|---|---|---|")
        for p in ("direct", "ferry_w1", "krox_c2", "haproxy"):
            r = rel.get(p)
            if not r:
                continue
            if r.get("failed") == 1.0 and "sent" not in r:
                add(f"| {LABEL[p]} | {what[p]} | – | run failed | | | | | | |")
                continue

            def d(a, b):
                x, y = _num(r.get(a)), _num(r.get(b))
                return None if x is None or y is None else y - x
            out["reload"][p] = r
            add(f"| {LABEL[p]} | {what[p]} | {_fmt(_num(r.get('event_ms')), 0)} | {_fmt(_num(r.get('failed')), 0)} | "
                f"{_fmt(_num(r.get('before_p99_ms')), 1)} | {_fmt(_num(r.get('during_p99_ms')), 1)} | "
                f"{_fmt(_num(r.get('during_max_ms')), 0)} | "
                f"{_fmt(d('producer_create_at_event', 'producer_create_end'), 0)} | "
                f"{_fmt(d('consumer_create_at_event', 'consumer_create_end'), 0)} | "
                f"{_fmt(_num(r.get('consumer_revoked')), 0)} |")
    return out
