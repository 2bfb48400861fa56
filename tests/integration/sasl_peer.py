"""
The scripted SASL broker (tests/peers/sasl_broker.py) as a test fixture:
SaslPeer starts one by PID through the ProcessKeeper, knows its bootstrap
address (so it can stand where a MockCluster does: Ferry(..., {"A": peer}))
and reads the events it logs ("AUTH ok user=...", "PRODUCE ...").

    peer = SaslPeer(keeper, workdir, "S", users=["alice:secret"])
    peer = SaslPeer(keeper, workdir, "S", extra=["--preauth-metadata"])

The peer module itself is importable for its wire and SCRAM helpers:
`from sasl_peer import broker` (tests/peers/sasl_broker.py).
"""

import importlib.util
import subprocess
import time
from pathlib import Path

from conftest import REPO, _readline, tail_file

PEER = REPO / "tests" / "peers" / "sasl_broker.py"
PYTHON = "/usr/bin/python3"

_spec = importlib.util.spec_from_file_location("sasl_broker", PEER)
broker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(broker)


class SaslPeer:
    def __init__(self, keeper, workdir, name, users=("alice:secret",), extra=(),
                 node_id=1, topics=("t",)):
        self.name = name
        self.log_path = Path(workdir) / f"sasl-{name}.log"
        argv = [PYTHON, PEER, "--node-id", str(node_id)]
        for u in users:
            argv += ["--user", u]
        for t in topics:
            argv += ["--topic", t]
        argv += list(extra)
        self.log = open(self.log_path, "wb")
        self.proc = keeper.spawn(f"sasl-{name}", argv, stdout=subprocess.PIPE,
                                 stderr=self.log)
        line = _readline(self.proc.stdout, 15.0)
        if not line or not line.startswith("BOOTSTRAP="):
            raise RuntimeError(f"sasl peer {name}: no BOOTSTRAP line (got {line!r}); "
                               f"log:\n{tail_file(self.log_path)}")
        self.bootstrap = line[len("BOOTSTRAP="):].strip()
        self.port = int(self.bootstrap.rsplit(":", 1)[1])

    def log_text(self):
        return self.log_path.read_text(errors="replace")

    def count(self, needle):
        return self.log_text().count(needle)

    def wait_log(self, needle, n=1, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.count(needle) >= n:
                return
            time.sleep(0.05)
        raise AssertionError(f"sasl peer {self.name}: {needle!r} not seen {n} time(s); log:\n"
                             + tail_file(self.log_path))
