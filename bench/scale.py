#!/usr/bin/env python3
"""Probes of the `scale` part of scripts/bench (many idle clusters on one
ferryd). Standard library only. Each subcommand prints one line of
key=value pairs (the bench records it in results.tsv as it is):

  scale.py accept PORTS_FILE T0_NS TIMEOUT_S [PID]
      Connects to every port of PORTS_FILE (one per line, 127.0.0.1) until
      a worker has accepted it: a refused connect is retried every 20 ms; a
      connected socket sends a Kafka frame header announcing 2 GiB, which a
      worker closes at once (frame too large), so the close proves that a
      worker accepted the connection (the supervisor binds the listeners
      before any worker runs: a connect alone proves nothing). Times are
      from T0_NS (CLOCK_REALTIME ns, taken before ferryd started); gives up
      at TIMEOUT_S or when PID (ferryd) has gone.
  scale.py poll SOCK PERIOD_MS
      GET /admin/health over the control socket every PERIOD_MS until
      SIGTERM or SIGINT (a request that takes longer delays the next one);
      latency of each from connect to the end of the response. Requests
      before the socket first answers are not counted (ferryd starting).
  scale.py get SOCK PATH [OUT]
      One GET: wall time, status and body size (body saved to OUT).
  scale.py procs PID
      The supervisor PID and its children (the workers): RSS (and its
      anon/file/shmem parts), PSS from smaps_rollup, descriptors by kind.
  scale.py clusters STATUS_JSON [BEFORE_JSON]
      Counts of `ferryctl --json status`: clusters by state, workers alive,
      and (with BEFORE_JSON) clusters whose generation advanced.
  scale.py reload RELOAD_JSON
      The outcome of `ferryctl --json reload`: success, counts of clusters
      added / modified / removed, durationMs, errors.
"""
import json
import os
import selectors
import signal
import socket
import statistics
import sys
import time


def out(**kv):
    print(" ".join(f"{k}={v}" for k, v in kv.items()), flush=True)


def ms(x):
    return f"{x * 1000:.1f}"


# ---- accept ------------------------------------------------------------------

FRAME_TOO_LARGE = b"\x7f\xff\xff\xff"


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def accept(ports_file, t0_ns, timeout_s, pid=None):
    t0 = int(t0_ns) / 1e9
    deadline = time.time() + float(timeout_s)
    with open(ports_file) as f:
        ports = [int(x) for x in f.read().split()]
    sel = selectors.DefaultSelector()
    retry = list(ports)          # ports to (re)connect now
    later = []                   # refused: retried 20 ms on
    done = {}                    # port -> seconds from t0
    refused = 0
    while len(done) < len(ports) and time.time() < deadline:
        if pid and not pid_alive(pid):
            break
        for port in retry:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            err = s.connect_ex(("127.0.0.1", port))
            if err not in (0, 115):  # EINPROGRESS
                s.close()
                refused += 1
                later.append(port)
                continue
            sel.register(s, selectors.EVENT_WRITE, (port, "connecting"))
        retry = []
        t_loop = time.monotonic()
        while time.monotonic() - t_loop < 0.02:
            if not sel.get_map():
                time.sleep(0.02)
                break
            for key, ev in sel.select(timeout=0.02):
                s, (port, st) = key.fileobj, key.data
                if st == "connecting":
                    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    sel.unregister(s)
                    if err:
                        s.close()
                        refused += 1
                        later.append(port)
                        continue
                    try:
                        s.send(FRAME_TOO_LARGE)
                    except OSError:
                        s.close()
                        later.append(port)
                        continue
                    sel.register(s, selectors.EVENT_READ, (port, "sent"))
                else:
                    try:
                        data = s.recv(4096)
                    except OSError:
                        data = b""
                    if data:
                        continue  # not expected; keep waiting for the close
                    sel.unregister(s)
                    s.close()
                    done[port] = time.time() - t0
        retry, later = later, []
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    ts = sorted(done.values())
    out(ok=len(done), failed=len(ports) - len(done), refused_connects=refused,
        first_ms=ms(ts[0]) if ts else -1, p50_ms=ms(statistics.median(ts)) if ts else -1,
        all_ms=ms(ts[-1]) if len(ts) == len(ports) else -1)


# ---- HTTP over the control socket -----------------------------------------------


def http_get(sock_path, path, timeout=10.0):
    """(status, body bytes, seconds); raises OSError on failure."""
    t = time.monotonic()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(sock_path)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
        chunks = []
        while True:
            b = s.recv(1 << 16)
            if not b:
                break
            chunks.append(b)
    finally:
        s.close()
    dt = time.monotonic() - t
    raw = b"".join(chunks)
    head, _, body = raw.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        raise OSError("malformed response")
    return status, body, dt


def poll(sock_path, period_ms):
    period = float(period_ms) / 1000
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    lat, failed, not_up, t_max_at = [], 0, 0, 0.0
    t_start = time.monotonic()
    nxt = time.monotonic()
    while not stop:
        try:
            status, _, dt = http_get(sock_path, "/admin/health", timeout=10.0)
            if status != 200:
                failed += 1
            else:
                if not lat or dt > max(lat):
                    t_max_at = time.monotonic() - t_start
                lat.append(dt)
        except OSError:
            if lat:
                failed += 1
            else:
                not_up += 1
        nxt += period
        d = nxt - time.monotonic()
        if d > 0:
            time.sleep(d)
        else:
            nxt = time.monotonic()
    lat.sort()
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else -1
    out(requests=len(lat), failed=failed, before_up=not_up,
        max_ms=ms(lat[-1]) if lat else -1, p99_ms=ms(p99) if lat else -1,
        p50_ms=ms(statistics.median(lat)) if lat else -1,
        max_at_s=f"{t_max_at:.2f}", over_100ms=sum(1 for x in lat if x > 0.1))


def get(sock_path, path, save=None):
    status, body, dt = http_get(sock_path, path, timeout=60.0)
    if save:
        with open(save, "wb") as f:
            f.write(body)
    out(status=status, ms=ms(dt), bytes=len(body),
        lines=body.count(b"\n"))


# ---- processes -------------------------------------------------------------------


def status_kb(pid):
    d = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmSize"):
                    d[k] = int(v.split()[0])
    except OSError:
        pass
    return d


def pss_kb(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def fd_kinds(pid):
    kinds = {}
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return kinds
    for n in names:
        try:
            t = os.readlink(f"/proc/{pid}/fd/{n}")
        except OSError:
            continue
        if t.startswith("socket:"):
            k = "socket"
        elif t.startswith("/memfd:"):
            k = "memfd_" + t[len("/memfd:"):].split(" ")[0].replace("ferry-", "")
        elif t.startswith("anon_inode:"):
            k = t[len("anon_inode:"):].strip("[]")
        elif t.startswith("pipe:"):
            k = "pipe"
        else:
            k = "file"
        kinds[k] = kinds.get(k, 0) + 1
    return kinds


def children(pid):
    kids = []
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/children") as f:
                kids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return kids


def procs(pid):
    st = status_kb(pid)
    kinds = fd_kinds(pid)
    kv = {"sup_rss_kb": st.get("VmRSS", -1), "sup_anon_kb": st.get("RssAnon", -1),
          "sup_file_kb": st.get("RssFile", -1), "sup_shmem_kb": st.get("RssShmem", -1),
          "sup_vsz_kb": st.get("VmSize", -1), "sup_pss_kb": pss_kb(pid) or -1,
          "sup_fds": sum(kinds.values()),
          "sup_fd_kinds": ",".join(f"{k}:{v}" for k, v in sorted(kinds.items()))}
    ws = children(pid)
    rss, pss, anon, shm, fds = [], [], [], [], []
    for w in ws:
        s = status_kb(w)
        if "VmRSS" not in s:
            continue
        rss.append(s["VmRSS"])
        anon.append(s.get("RssAnon", 0))
        shm.append(s.get("RssShmem", 0))
        p = pss_kb(w)
        if p is not None:
            pss.append(p)
        try:
            fds.append(len(os.listdir(f"/proc/{w}/fd")))
        except OSError:
            pass

    def mm(xs, name):
        kv[f"w_{name}_med"] = int(statistics.median(xs)) if xs else -1
        kv[f"w_{name}_max"] = max(xs) if xs else -1

    kv["workers"] = len(rss)
    mm(rss, "rss_kb")
    mm(pss, "pss_kb")
    mm(anon, "anon_kb")
    mm(shm, "shmem_kb")
    mm(fds, "fds")
    kv["w_rss_sum_kb"] = sum(rss)
    kv["w_pss_sum_kb"] = sum(pss)
    out(**kv)


# ---- status and reload ------------------------------------------------------------


def clusters(path, before=None):
    with open(path) as f:
        cs = json.load(f)["clusters"]
    gen0 = {}
    if before:
        with open(before) as f:
            gen0 = {c["name"]: c.get("generation", 0) for c in json.load(f)["clusters"]}
    states = {}
    alive = advanced = 0
    for c in cs:
        states[c.get("state")] = states.get(c.get("state"), 0) + 1
        alive += sum(1 for w in c.get("workers", []) if w.get("pid"))
        if c["name"] in gen0 and (c.get("generation") or 0) > gen0[c["name"]]:
            advanced += 1
    kv = {"clusters": len(cs), "workers_listed": alive,
          "states": ",".join(f"{k}:{v}" for k, v in sorted(states.items(), key=str))}
    if before:
        kv["advanced"] = advanced
    out(**kv)


def reload_outcome(path):
    with open(path) as f:
        raw = f.read()
    try:
        j = json.loads(raw)
    except ValueError:
        out(parsed=0, bytes=len(raw))
        return
    out(parsed=1, success=int(bool(j.get("success"))), status=j.get("status"),
        duration_ms=j.get("durationMs", -1), added=len(j.get("clustersAdded") or []),
        modified=len(j.get("clustersModified") or []), removed=len(j.get("clustersRemoved") or []),
        errors=len(j.get("errors") or []))


def main():
    a = sys.argv[1:]
    cmds = {"accept": accept, "poll": poll, "get": get, "procs": procs, "clusters": clusters,
            "reload": reload_outcome}
    if not a or a[0] not in cmds:
        sys.stderr.write(__doc__)
        sys.exit(2)
    cmds[a[0]](*a[1:])


if __name__ == "__main__":
    main()
