"""
ferry's Kafka API version policy as its codec holds it (the table of
worker/kafka/apiversions.c, printed by the test peer tests/peers/api_policy),
and what it means for one broker's ApiVersions answer: which range ferry
must advertise for each key, and which differences lack a written reason.
Shared by test_apiversions.py (Kafka 4.4) and older/ (Kafka 3.9).
"""

import json
import os
import re
import subprocess

from conftest import BUILD

TOOL = BUILD / "tests" / "peers" / "api_policy"


class Policy:
    def __init__(self, rows, newer):
        self.rows = rows          # {key: row} for 0..max_known
        self.newer = newer        # the row of the keys above the codec's table
        self.max_known = max(rows)

    def row(self, key):
        return self.rows.get(key, self.newer)

    def expected(self, key, broker_range):
        """The range ferry must advertise for a key the broker advertises as
        broker_range: None when ferry drops it."""
        r = self.row(key)
        if r["policy"] == "refused":
            return None
        lo, hi = broker_range
        if r["policy"] == "cap":
            lo, hi = max(lo, r["min"]), min(hi, r["max"])
            if lo > hi:
                return None
        return (lo, hi)

    def unexplained(self, broker):
        """Where ferry's policy takes something from what `broker` (an
        ApiVersions answer, {key: (min, max)}) advertises without a written
        reason: [(key, name, what)]."""
        out = []
        for k, (lo, hi) in sorted(broker.items()):
            r = self.row(k)
            if r["policy"] == "refused":
                if not r.get("why"):
                    out.append((k, r["name"], f"v{lo}-{hi} dropped: key {k} is unknown to "
                                f"ferry's codec (add it and decide: forward, cap or refuse)"))
            elif r["policy"] == "cap" and hi > r["max"] and not r.get("held"):
                out.append((k, r["name"], f"the broker advertises v{hi}, ferry caps at "
                            f"v{r['max']} without a written reason (check the schema of "
                            f"v{r['max'] + 1}-{hi}, then raise the cap or write why not)"))
        return out


def load():
    """The policy of the build under test ($FERRY_BUILD)."""
    out = subprocess.run([str(TOOL)], capture_output=True, text=True, timeout=10, check=True).stdout
    rows, newer = {}, None
    for line in out.splitlines():
        d = json.loads(line)
        if "key" in d:
            rows[d["key"]] = d
        else:
            newer = d
    assert rows and newer is not None, f"{TOOL} printed {out!r}"
    return Policy(rows, newer)


def compare(policy, broker, ferry):
    """(rows for the report, problems): every key of either answer, with
    what ferry advertises against what the policy says it must."""
    rows, problems = [], []
    fmt = (lambda r: f"v{r[0]}-{r[1]}" if r else "-")
    for k in sorted(set(broker) | set(ferry)):
        b, f = broker.get(k), ferry.get(k)
        want = policy.expected(k, b) if b else None
        r = policy.row(k)
        if f != want:
            problems.append(f"key {k} {r['name']}: broker {fmt(b)}, ferry {fmt(f)}, "
                            f"the policy says {fmt(want)}")
        if b != f:
            why = r.get("held") if r["policy"] == "cap" and b and b[1] > r["max"] else r.get("why")
            rows.append((k, r["name"], fmt(b), fmt(f), why or "NO REASON"))
    return rows, problems


# --------------------------------------------------------------------------
# the versions a Java client sends
# --------------------------------------------------------------------------

JAVA_DEBUG_LOG4J2 = """\
status = warn
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
logger.nc.name = org.apache.kafka.clients.NetworkClient
logger.nc.level = DEBUG
"""

_SENDING = re.compile(r"Sending (\w+) request with header RequestHeader\(apiKey=(\w+), "
                      r"apiVersion=(\d+)")


def java_debug_env(workdir):
    """The environment of a Java peer that logs every request it sends
    (NetworkClient at DEBUG, to stderr) without changing its command line."""
    cfg = workdir / "log4j2-requests.properties"
    cfg.write_text(JAVA_DEBUG_LOG4J2)
    return {**os.environ, "JAVA_TOOL_OPTIONS": f"-Dlog4j2.configurationFile={cfg}"}


def sent_versions(stderr):
    """{API name as Kafka spells it (PRODUCE, FETCH, ...): {versions sent}}
    from a Java client's NetworkClient debug log."""
    out = {}
    for m in _SENDING.finditer(stderr):
        out.setdefault(m.group(2), set()).add(int(m.group(3)))
    return out
