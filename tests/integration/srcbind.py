"""
Clients from another loopback address: tests/peers/srcbind.c (an LD_PRELOAD
shim binding every IPv4 TCP socket to $FERRY_SRCBIND before its connect)
compiled into $FERRY_BUILD/test-peers/srcbind.so, without the sanitizers
(it is preloaded into kcat and Python, which are built without them), and
rebuilt when older than its source.

    env = srcbind_env("127.0.0.2")   # os.environ plus LD_PRELOAD, FERRY_SRCBIND
    subprocess.run(["kcat", ...], env=env)
"""

import os
import subprocess

from conftest import BUILD, REPO

SRC = REPO / "tests" / "peers" / "srcbind.c"
LIB = BUILD / "test-peers" / "srcbind.so"


def build_srcbind():
    if LIB.exists() and LIB.stat().st_mtime >= SRC.stat().st_mtime:
        return LIB
    LIB.parent.mkdir(parents=True, exist_ok=True)
    tmp = LIB.with_name(f"srcbind.{os.getpid()}.tmp")
    argv = [os.environ.get("CC", "cc"), "-std=c11", "-O1", "-Wall", "-Werror", "-shared",
            "-fPIC", str(SRC), "-o", str(tmp), "-ldl"]
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, f"{' '.join(argv)}:\n{r.stderr[-3000:]}"
    os.replace(tmp, LIB)
    return LIB


def srcbind_env(addr, base=None):
    env = dict(os.environ if base is None else base)
    env["LD_PRELOAD"] = str(build_srcbind())
    env["FERRY_SRCBIND"] = addr
    return env
