"""
Installation and packaging: `meson install --destdir` puts the binaries
(ferry-admin in <libexecdir>/ferry, where ferryd finds it), man
pages, example config, systemd unit and bash completion in place; the man
pages render without warnings and document every config key; the unit
passes `systemd-analyze verify`; the completion offers ferryctl's commands.

    FERRY_BUILD=$PWD/build /usr/bin/python3 -m pytest -q tests/integration/test_install.py
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, FERRYCTL, FERRYD, REPO

MAN_PAGES = {"ferryd.8": "man8", "ferryctl.8": "man8", "ferry.ini.5": "man5"}


def run(argv, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 120)
    kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run([str(a) for a in argv], **kw)


def build_options():
    r = run(["meson", "introspect", BUILD, "--buildoptions"])
    assert r.returncode == 0, r.stderr
    return {o["name"]: o["value"] for o in json.loads(r.stdout)}


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(destdir, {name: absolute path inside destdir}) after meson install."""
    dest = tmp_path_factory.mktemp("destdir")
    r = run(["meson", "install", "-C", BUILD, "--no-rebuild", "--destdir", dest])
    assert r.returncode == 0, f"meson install failed:\n{r.stdout}\n{r.stderr}"
    o = build_options()
    prefix = Path(o["prefix"])

    def at(opt, *rest):
        return dest / (prefix / o[opt]).relative_to("/") / Path(*rest)

    unitdir = o["systemdunitdir"] or str(prefix / "lib/systemd/system")
    paths = {
        "ferryd": at("sbindir", "ferryd"),
        "ferryctl": at("bindir", "ferryctl"),
        "ferry-admin": at("libexecdir", "ferry", "ferry-admin"),
        "example": at("datadir", "doc", "ferry", "ferry.ini"),
        "operations": at("datadir", "doc", "ferry", "operations.md"),
        "security": at("datadir", "doc", "ferry", "security.md"),
        "completion": at("datadir", "bash-completion", "completions", "ferryctl"),
        "unit": dest / Path(unitdir).relative_to("/") / "ferryd.service",
        "mandir": at("mandir"),
    }
    for page, sect in MAN_PAGES.items():
        paths[page] = at("mandir", sect, page)
    return dest, prefix, o, paths


def test_install_puts_everything_in_place(installed):
    dest, prefix, o, p = installed
    for name, path in p.items():
        assert path.exists(), f"{name} not installed at {path}"
    for exe in ("ferryd", "ferryctl"):
        assert os.access(p[exe], os.X_OK), p[exe]
        r = run([p[exe], "--version"])
        assert r.returncode == 0 and "0." in r.stdout, (exe, r.stdout, r.stderr)
    assert p["example"].read_text() == (REPO / "conf" / "ferry.ini").read_text()
    # The example config is valid as shipped.
    r = run([p["ferryd"], "-t", "-c", p["example"]])
    assert r.returncode == 0, r.stderr
    for page in MAN_PAGES:
        assert p[page].read_bytes() == (REPO / "docs" / page).read_bytes()


def test_installed_ferryd_finds_ferry_admin(installed):
    """ferry-admin sits in <libexecdir>/ferry, where the installed ferryd
    looks for it (after its own directory); run by hand it refuses."""
    dest, prefix, o, p = installed
    assert os.access(p["ferry-admin"], os.X_OK), p["ferry-admin"]
    want = str(prefix / o["libexecdir"] / "ferry" / "ferry-admin")
    assert want.encode() in p["ferryd"].read_bytes(), want
    r = run([p["ferry-admin"]])
    assert r.returncode == 2 and "started by ferryd" in r.stderr, (r.returncode, r.stderr)


def test_installed_unit_names_installed_paths(installed):
    dest, prefix, o, p = installed
    unit = p["unit"].read_text()
    sbin = prefix / o["sbindir"] / "ferryd"
    bindir = prefix / o["bindir"] / "ferryctl"
    conf = prefix / o["sysconfdir"] / "ferry" / "ferry.ini"
    assert f"ExecStartPre={sbin} -t -c {conf}\n" in unit
    assert f"ExecStart={sbin} -c {conf}\n" in unit
    assert f"ExecReload={bindir} reload\n" in unit


def _verify(unit_path, env=None, man=True):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze not installed (Debian: systemd; scripts/install-deps)")
    argv = ["systemd-analyze", "verify"] + ([] if man else ["--man=no"]) + [unit_path]
    r = run(argv, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "" and r.stderr.strip() == "", \
        f"systemd-analyze verify {unit_path}: rc={r.returncode}\n{r.stdout}\n{r.stderr}"


def test_systemd_analyze_verify_source_unit(tmp_path):
    """conf/ferryd.service names /usr/sbin and /usr/bin, which verify wants
    to exist: check a copy naming this build's binaries (no other change)."""
    text = (REPO / "conf" / "ferryd.service").read_text()
    for key in ("Type=notify\n", "KillMode=mixed\n", "RuntimeDirectory=ferry\n",
                "NoNewPrivileges=yes\n", "ProtectSystem=strict\n",
                "ExecStartPre=/usr/sbin/ferryd -t -c /etc/ferry/ferry.ini\n",
                "ExecReload=/usr/bin/ferryctl reload\n"):
        assert key in text, key
    caps = re.search(r"^CapabilityBoundingSet=(.*)$", text, re.M).group(1).split()
    assert sorted(caps) == sorted(["CAP_NET_BIND_SERVICE", "CAP_SETUID", "CAP_SETGID", "CAP_KILL"])
    text = text.replace("/usr/sbin/ferryd", str(FERRYD)).replace("/usr/bin/ferryctl", str(FERRYCTL))
    unit = tmp_path / "ferryd.service"
    unit.write_text(text)
    _verify(unit, man=False)


def test_systemd_analyze_verify_installed_unit(installed, tmp_path):
    """The installed unit with its paths moved into the destdir, its
    Documentation= man pages found through MANPATH in the destdir."""
    dest, prefix, o, p = installed
    text = p["unit"].read_text().replace(f"{prefix}/", f"{dest}{prefix}/")
    unit = tmp_path / "ferryd.service"
    unit.write_text(text)
    env = dict(os.environ, MANPATH=str(p["mandir"]))
    _verify(unit, env=env)


@pytest.mark.parametrize("page", sorted(MAN_PAGES))
def test_man_page_renders_without_warnings(page):
    if shutil.which("man") is None:
        pytest.skip("man not installed")
    r = run(["man", "--warnings", "-l", REPO / "docs" / page],
            env=dict(os.environ, MANWIDTH="80", MAN_KEEP_FORMATTING="0"))
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "", f"{page}: {r.stderr}"
    assert len(r.stdout.splitlines()) > 40


def _config_keys():
    # the key tables: common/config_ferry.c and common/config_cluster.c
    src = "".join(f.read_text() for f in sorted((REPO / "common").glob("config*.c")))
    ferry = re.findall(r'\[FK_\w+\] = \{ "(\w+)"', src)
    cluster = re.findall(r'\[CK_\w+\] = \{ "(\w+)"', src)
    assert len(ferry) >= 12 and len(cluster) >= 10, (ferry, cluster)
    return ferry, cluster


def test_ferry_ini_5_documents_every_key():
    text = (REPO / "docs" / "ferry.ini.5").read_text()
    ferry, cluster = _config_keys()
    ferry_sec = text.split('.SH "[cluster NAME] SECTION"')[0]
    cluster_sec = text.split('.SH "[cluster NAME] SECTION"')[1]
    restart = {"control_socket", "admin_listen", "user", "log_format",
               "control_socket_mode", "control_socket_group"}
    for key in ferry:
        m = re.search(rf"^\.TP\n\.B {key}\n(.*?)(?=^\.TP|^\.SH|\Z)", ferry_sec, re.M | re.S)
        assert m, f"[ferry] {key} not documented in ferry.ini.5"
        body = m.group(1)
        assert "Default:" in body, f"{key}: no default"
        assert "Reload:" in body, f"{key}: reload behaviour not stated"
        assert ("Reload:\n.BR restart" in body) == (key in restart), key
    for key in cluster:
        assert re.search(rf"^\.B {key}$", cluster_sec, re.M), f"[cluster] {key} not documented"


def _ferryctl_commands():
    r = run([FERRYCTL, "--help"])
    assert r.returncode == 0
    block = r.stdout.split("commands:")[1].split("options:")[0]
    cmds = [line.split()[0] for line in block.splitlines() if line.strip()]
    assert "reload" in cmds and len(cmds) >= 9, cmds
    return cmds


def _complete(words, completion):
    """COMPREPLY for the command line `words` (the last one being completed)."""
    script = (f"source {completion}\n"
              f"COMP_WORDS=({' '.join(repr(w) for w in words)})\n"
              f"COMP_CWORD={len(words) - 1}\n"
              "_ferryctl\n"
              'printf "%s\\n" "${COMPREPLY[@]}"\n')
    r = run(["bash", "--norc", "--noprofile", "-c", script])
    assert r.returncode == 0, r.stderr
    return sorted(x for x in r.stdout.splitlines() if x)


def test_bash_completion(installed):
    comp = installed[3]["completion"]
    cmds = _ferryctl_commands()
    assert _complete(["ferryctl", ""], comp) == sorted(cmds)
    assert _complete(["ferryctl", "re"], comp) == ["ready", "reload", "restart"]
    assert _complete(["ferryctl", "-s", "/x", "--json", "st"], comp) == ["status"]
    assert "--json" in _complete(["ferryctl", "--"], comp)
    assert "--socket" in _complete(["ferryctl", "--"], comp)
    # validate/reload complete file names
    got = _complete(["ferryctl", "validate", str(REPO / "conf" / "ferry.i")], comp)
    assert got == [str(REPO / "conf" / "ferry.ini")]
    # only one argument per command
    assert _complete(["ferryctl", "drain", "a", ""], comp) == []
    # status's filters
    assert _complete(["ferryctl", "status", "--state", "fa"], comp) == ["failed"]
    assert _complete(["ferryctl", "status", "--state", "failed,un"], comp) == ["failed,unresponsive"]
    assert _complete(["ferryctl", "status", "--sort", "con"], comp) == ["connections"]
    assert "--state" in _complete(["ferryctl", "status", "--s"], comp)
