#!/usr/bin/env python3
"""
The kcat test peer (Debian's kcat, i.e. Debian's librdkafka): drives kcat
with the same arguments as the other peers and prints the same JSON line
(tests/peers/kafka/README.md).

  produce   kcat -P -v -v (one "Message delivered" line per acknowledged
            record), idempotence and acks through -X
  consume   kcat -C -G GROUP -e: the balanced consumer, offsets committed by
            librdkafka's auto-commit and on close; exits at the end of every
            assigned partition
  metadata  kcat -L -J
Brokers seen: kcat -L -J after the run (librdkafka's view of the metadata).
"""

import json
import re
import subprocess
import sys
import time

import peer_args


def parse():
    ap = peer_args.parser("ferry-kcat-peer")
    ap.add_argument("--kcat", default="kcat")
    return ap.parse_args()


def common(a):
    x = {"client.id": "ferry-kcat-peer", "security.protocol": a.security_protocol}
    if a.security_protocol.startswith("SASL"):
        x.update({"sasl.mechanism": a.sasl_mechanism, "sasl.username": a.sasl_user,
                  "sasl.password": a.sasl_password})
    if a.ca:
        x["ssl.ca.location"] = a.ca
    if a.cert:
        x.update({"ssl.certificate.location": a.cert, "ssl.key.location": a.key})
    if not a.no_verify_name and a.security_protocol.endswith("SSL"):
        x["ssl.endpoint.identification.algorithm"] = "https"
    x.update(kv.split("=", 1) for kv in a.prop)
    argv = [a.kcat, "-b", a.bootstrap]
    for k, v in x.items():
        argv += ["-X", f"{k}={v}"]
    return argv


def version(a):
    r = subprocess.run([a.kcat, "-V"], capture_output=True, text=True, timeout=10)
    m = re.search(r"kcat - .*?(\d+\.\d+\.\d+)", r.stdout + r.stderr)
    lib = re.search(r"librdkafka version (\S+)", r.stdout + r.stderr)
    return f"{m.group(1) if m else '?'} (librdkafka {lib.group(1) if lib else '?'})"


def main():
    a = parse()
    t0 = time.monotonic()
    out = {"client": "kcat", "lib_version": version(a), "mode": a.mode, "topic": a.topic}
    errors = []
    brokers = set()
    deadline = t0 + a.timeout

    def left():
        return max(1.0, deadline - time.monotonic())

    def error_lines(text):
        for line in text.splitlines():
            if re.search(r"ERROR|[Ff]ailed|FAIL", line) and "Message delivered" not in line:
                errors.append(line.strip())

    try:
        if a.group_protocol != "classic":
            raise ValueError(f"group.protocol={a.group_protocol}: librdkafka 2.0.2 speaks only "
                             f"the classic group protocol")
        if a.mode == "produce":
            argv = common(a) + ["-P", "-v", "-v", "-t", a.topic, "-K", ":",
                                "-X", f"enable.idempotence={a.idempotent}", "-X", f"acks={a.acks}",
                                "-X", f"message.timeout.ms={int(a.timeout * 1000)}"]
            data = "".join(f"{i}:{a.run_id}-{i}\n" for i in range(a.count))
            r = subprocess.run(argv, input=data, capture_output=True, text=True, timeout=left())
            out["produced"] = a.count
            out["acked"] = sum(1 for ln in r.stderr.splitlines() if ln.startswith("% Message delivered"))
            error_lines(r.stderr)
            if r.returncode != 0:
                errors.append(f"kcat exited with {r.returncode}")
        elif a.mode == "consume":
            argv = common(a) + ["-C", "-G", a.group, "-e", "-f", "%s\\n",
                                "-X", "auto.offset.reset=earliest", a.topic]
            r = subprocess.run(argv, capture_output=True, text=True, timeout=left())
            error_lines(r.stderr)
            if r.returncode != 0:
                errors.append(f"kcat exited with {r.returncode}")
            prefix = a.run_id + "-"
            seen, consumed, foreign = set(), 0, 0
            for v in r.stdout.splitlines():
                consumed += 1
                tail = v[len(prefix):] if v.startswith(prefix) else ""
                if tail.isdigit() and int(tail) < a.count:
                    seen.add(int(tail))
                else:
                    foreign += 1
            if len(seen) < a.count:
                errors.append(f"kcat reached the end with {len(seen)} of {a.count} records")
            out.update(consumed=consumed, unique=len(seen), duplicates=consumed - foreign - len(seen),
                       missing=a.count - len(seen), foreign=foreign)
        r = subprocess.run(common(a) + ["-L", "-J"] + (["-t", a.topic] if a.topic else []),
                           capture_output=True, text=True, timeout=left())
        if r.returncode != 0:
            errors.append(f"kcat -L: {r.stderr.strip()[-300:]}")
        else:
            for b in json.loads(r.stdout)["brokers"]:
                brokers.add(b["name"])
    except subprocess.TimeoutExpired as e:
        errors.append(f"timed out: {' '.join(e.cmd[:3])}...")
    except Exception as e:  # noqa: BLE001 -- a fatal error is still a result line
        errors.append(f"fatal: {e!r}")
    out.update(brokers=sorted(brokers), errors=errors[:20], error_count=len(errors),
               elapsed_ms=int((time.monotonic() - t0) * 1000))
    print(json.dumps(out), flush=True)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
