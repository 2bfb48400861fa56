"""
Admin API access control (issue 11, item 8): the bearer token of
admin_token_file on admin_listen (401 without it or with a wrong one, 200
with it, the admin_open_paths readable without it, ferryctl with FERRY_TOKEN
and --token-file), the control socket's mode and group (0600 by default,
widened by control_socket_mode / control_socket_group, checked with stat and
with a client running as another user), the caller's uid and pid logged for
a mutating call, the refusal to start with a non-loopback admin_listen and
no credentials, the token file re-read on reload, and HTTPS on admin_listen
with server and client certificates made by the `openssl` CLI in the test.

    FERRY_BUILD=$PWD/build /usr/bin/python3 -m pytest -q tests/integration/test_admin_auth.py
"""

import grp
import http.client
import json
import os
import pwd
import re
import shutil
import socket
import ssl
import stat
import subprocess
import time

import pytest

from conftest import FERRYD, FERRYCTL, allocate_ports, http_request, tail_file, wait_for

TOKEN = "t0ken-" + "a1b2c3d4e5f6a7b8c9d0" * 2
OPEN_PATHS = ("/admin/health", "/admin/ready", "/metrics")
SETPRIV = shutil.which("setpriv")
OPENSSL = shutil.which("openssl")
CURL = shutil.which("curl")


def write_token(path, token=TOKEN, mode=0o600):
    path.write_text(token + "\n")
    os.chmod(path, mode)
    return path


def tcp_request(ferry, method, path, token=None, body=None, header=None):
    conn = http.client.HTTPConnection("127.0.0.1", ferry.admin_port, timeout=10)
    headers = {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if header:
        headers.update(header)
    try:
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def ctl_tcp(ferry, *args, env_token=None, timeout=15):
    env = {k: v for k, v in os.environ.items() if k != "FERRY_TOKEN"}
    if env_token is not None:
        env["FERRY_TOKEN"] = env_token
    return subprocess.run([str(FERRYCTL), "-a", f"127.0.0.1:{ferry.admin_port}", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=env,
                          stdin=subprocess.DEVNULL)


@pytest.fixture
def token_ferry(mock_factory, ferry_factory, workdir):
    tok = write_token(workdir / "admin.token")
    m = mock_factory("A", 3)
    return ferry_factory({"A": m}, extra_ferry=f"admin_token_file = {tok}")


# --------------------------------------------------------------------------
# bearer token on admin_listen
# --------------------------------------------------------------------------

def test_token_required_on_admin_listen(token_ferry):
    f = token_ferry
    # no token: 401 with a JSON error and a Bearer challenge
    code, hdrs, body = tcp_request(f, "GET", "/admin/clusters")
    assert code == 401, body
    assert hdrs["www-authenticate"] == 'Bearer realm="ferry"'
    assert hdrs["content-type"] == "application/json"
    assert "authentication required" in json.loads(body)["error"]
    # the right token: 200
    code, _, body = tcp_request(f, "GET", "/admin/clusters", token=TOKEN)
    assert code == 200, body
    assert [c["name"] for c in json.loads(body)["clusters"]] == ["A"]
    # a wrong token (same length, one character off; and a prefix): 401 invalid_token
    for wrong in (TOKEN[:-1] + "X", TOKEN[:-1]):
        code, hdrs, body = tcp_request(f, "GET", "/admin/clusters", token=wrong)
        assert code == 401, body
        assert 'error="invalid_token"' in hdrs["www-authenticate"]
        assert json.loads(body)["error"] == "invalid token"
    # not a bearer token
    code, hdrs, body = tcp_request(f, "GET", "/admin/clusters",
                                   header={"Authorization": "Basic dXNlcjpwYXNz"})
    assert code == 401 and 'error="invalid_request"' in hdrs["www-authenticate"], body
    # status and mutating endpoints, and unknown paths, are all behind the token
    for method, path in (("GET", "/admin/config/status"), ("GET", "/admin/clusters/A"),
                         ("GET", "/"), ("GET", "/nope"), ("POST", "/admin/config/reload"),
                         ("POST", "/admin/config/validate"), ("POST", "/admin/clusters/A/drain"),
                         ("POST", "/admin/clusters/A/restart")):
        code, _, body = tcp_request(f, method, path, body=b"" if method == "POST" else None)
        assert code == 401, (method, path, body)
    # the open paths answer without a token (HEAD too)
    for path in OPEN_PATHS:
        code, _, body = tcp_request(f, "GET", path)
        assert code == 200, (path, body)
        code, _, _ = tcp_request(f, "HEAD", path)
        assert code == 200, path
    # the refused reload/drain did nothing
    st = f.http("/admin/config/status")
    assert json.loads(st[2]).get("lastReloadAttempt") in (None, {}) or \
        json.loads(st[2])["lastReloadAttempt"].get("status") in (None, "")
    assert f.cluster("A")["state"] == "accepting"
    # the control socket needs no token
    code, _, body = f.http("/admin/clusters")
    assert code == 200, body
    # and counted in /metrics (valid for promtool)
    code, _, body = tcp_request(f, "GET", "/metrics")
    text = body.decode()
    assert 'ferry_admin_requests_refused_total{reason="missing"} ' in text
    def refused(reason):
        return int(re.search(rf'^ferry_admin_requests_refused_total{{reason="{reason}"}} (\d+)$',
                             text, re.M).group(1))
    missing, wrong = refused("missing"), refused("wrong-token")
    assert missing >= 9 and wrong == 2, text[-800:]
    if shutil.which("promtool"):
        r = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True,
                           timeout=30)
        assert r.returncode == 0, r.stdout + r.stderr
    # refusals are logged with the peer address, without the token
    log = f.log_path.read_text()
    assert "admin request refused" in log and "reason=missing" in log
    assert "reason=wrong-token" in log and "peer=127.0.0.1:" in log
    assert TOKEN not in log


def test_token_with_authorized_mutation(token_ferry):
    f = token_ferry
    code, _, body = tcp_request(f, "POST", "/admin/config/reload", token=TOKEN, body=b"")
    assert code == 200, body
    log = f.log_path.read_text()
    assert "admin call" in log and "listener=http" in log and "auth=token" in log
    assert TOKEN not in log


def test_ferryctl_token_env_and_file(token_ferry, workdir):
    f = token_ferry
    # no token: exit 1 (rejected), the message says what to do
    r = ctl_tcp(f, "status")
    assert r.returncode == 1, r
    assert "HTTP 401" in r.stderr and "FERRY_TOKEN" in r.stderr and "--token-file" in r.stderr
    r = ctl_tcp(f, "--json", "status")
    assert r.returncode == 1 and "error" in json.loads(r.stdout), r
    for live in (["status", "-w", "-n", "1"], ["top", "-n", "1"]):
        r = ctl_tcp(f, *live)
        assert r.returncode == 1 and "HTTP 401" in r.stderr, (live, r)
        r = ctl_tcp(f, *live, env_token=TOKEN)
        assert r.returncode == 0 and "accepting" in r.stdout, (live, r)
    # FERRY_TOKEN
    r = ctl_tcp(f, "status", env_token=TOKEN)
    assert r.returncode == 0, r
    assert "A" in r.stdout
    r = ctl_tcp(f, "reload", env_token=TOKEN)
    assert r.returncode == 0, r
    # --token-file (it wins over FERRY_TOKEN)
    tf = write_token(workdir / "ctl.token")
    r = ctl_tcp(f, "--token-file", tf, "--json", "status", env_token="wrong-wrong-wrong-wrong")
    assert r.returncode == 0, r
    assert json.loads(r.stdout)["clusters"][0]["name"] == "A"
    # a wrong token: exit 1, "invalid token"
    r = ctl_tcp(f, "status", env_token="wrong-wrong-wrong-wrong")
    assert r.returncode == 1 and "invalid token" in r.stderr, r
    # an unreadable or empty token file is a usage error
    r = ctl_tcp(f, "--token-file", workdir / "missing.token", "status")
    assert r.returncode == 2 and "missing.token" in r.stderr, r
    (workdir / "empty.token").write_text("\n")
    r = ctl_tcp(f, "--token-file", workdir / "empty.token", "status")
    assert r.returncode == 2 and "empty" in r.stderr, r
    # the open paths need none
    r = ctl_tcp(f, "health")
    assert r.returncode == 0, r
    r = ctl_tcp(f, "ready")
    assert r.returncode == 0, r
    # the control socket needs none, and FERRY_TOKEN is not sent there
    r = f.ctl("status", env={**os.environ, "FERRY_TOKEN": "wrong-wrong-wrong-wrong"})
    assert r.returncode == 0, r


def test_open_paths_configurable(mock_factory, ferry_factory, workdir):
    tok = write_token(workdir / "admin.token")
    m = mock_factory("A", 3)
    f = ferry_factory({"A": m}, extra_ferry=f"admin_token_file = {tok}\n"
                      "admin_open_paths = /admin/health, /admin/clusters")
    assert tcp_request(f, "GET", "/admin/clusters")[0] == 200
    assert tcp_request(f, "GET", "/admin/health")[0] == 200
    assert tcp_request(f, "GET", "/metrics")[0] == 401
    assert tcp_request(f, "GET", "/admin/ready")[0] == 401
    assert tcp_request(f, "GET", "/admin/clusters/A")[0] == 401


def test_token_file_reread_on_reload(token_ferry, workdir):
    f = token_ferry
    tok = workdir / "admin.token"
    new = "n3w-" + "f" * 40
    write_token(tok, new)
    # the config is unchanged: the reload still re-reads the token file
    r = f.ctl("--json", "reload", check=False)
    assert r.returncode == 0, r
    assert json.loads(r.stdout)["changed"] is False
    assert tcp_request(f, "GET", "/admin/clusters", token=new)[0] == 200
    assert tcp_request(f, "GET", "/admin/clusters", token=TOKEN)[0] == 401
    assert "admin access settings applied" in f.log_path.read_text()
    # a token file others can read is refused: the reload is rejected and
    # the running token stays
    write_token(tok, "l00se-" + "e" * 40, mode=0o644)
    r = f.ctl("--json", "reload", check=False)
    assert r.returncode == 1, r
    errors = json.loads(r.stdout)["errors"]
    assert any(f"admin_token_file: {tok}: mode 0644 lets other users read" in e
               for e in errors), errors
    assert any(e.startswith(f"{f.config_path}:") for e in errors), errors
    assert tcp_request(f, "GET", "/admin/clusters", token=new)[0] == 200
    # validate says so too
    r = f.ctl("--json", "validate", check=False)
    assert r.returncode == 1 and "mode 0644 lets other users read" in r.stdout, r
    # an empty one too
    write_token(tok, "", mode=0o600)
    r = f.ctl("--json", "reload", check=False)
    assert r.returncode == 1 and "the token file is empty" in r.stdout, r
    # removing admin_token_file on a loopback listener opens it (reload)
    f.config_path.write_text(f.config_text.replace(f"admin_token_file = {tok}\n", ""))
    r = f.ctl("reload", check=False)
    assert r.returncode == 0, r
    assert tcp_request(f, "GET", "/admin/clusters")[0] == 200


def test_bad_token_file_refuses_start(mock_factory, ferry_factory, workdir):
    tok = write_token(workdir / "admin.token", "short")
    m = mock_factory("A", 3)
    f = ferry_factory({"A": m}, start=False, extra_ferry=f"admin_token_file = {tok}")
    # ferryd -t reads it too
    r = subprocess.run([str(FERRYD), "-t", "-c", str(f.config_path)], capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 1, r
    assert f"{f.config_path}:9: admin_token_file: {tok}: the token is 5 characters" in r.stderr, r
    f.start(wait=False)
    assert f.proc.wait(timeout=30) == 1
    log = f.log_path.read_text()
    assert "cannot start admin API" in log
    assert f"admin_token_file: {tok}: the token is 5 characters long" in log, log


# --------------------------------------------------------------------------
# the control socket: mode, group, caller identity
# --------------------------------------------------------------------------

def _nobody():
    try:
        pw = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody")
    return pw.pw_uid, pw.pw_gid


def _as_nobody(argv, gid=None):
    uid, pgid = _nobody()
    if SETPRIV is None:
        pytest.skip("setpriv not installed")
    return subprocess.run([SETPRIV, f"--reuid={uid}", f"--regid={gid if gid is not None else pgid}",
                           "--clear-groups", *map(str, argv)],
                          capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)


def test_control_socket_default_mode_0600(mock_factory, ferry_factory):
    m = mock_factory("A", 3)
    f = ferry_factory({"A": m})
    st = os.stat(f.sock)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    assert st.st_uid == os.getuid()
    if os.getuid() == 0:
        # another user cannot connect
        r = _as_nobody([FERRYCTL, "-s", f.sock, "health"])
        assert r.returncode == 3, r
        assert "Permission denied" in r.stderr and "control_socket_mode" in r.stderr, r.stderr


def test_control_socket_mode_and_group(mock_factory, ferry_factory):
    if os.getuid() == 0:
        uid, gid = _nobody()
        group = grp.getgrgid(gid).gr_name
    else:
        gid = os.getgid()
        group = str(gid)
    m = mock_factory("A", 3)
    f = ferry_factory({"A": m}, extra_ferry=f"control_socket_mode = 0660\n"
                      f"control_socket_group = {group}")
    st = os.stat(f.sock)
    assert stat.S_IMODE(st.st_mode) == 0o660, oct(st.st_mode)
    assert st.st_gid == gid
    assert "mode=0660" in f.log_path.read_text()
    if os.getuid() == 0:
        # a member of the group may use it (and its mutating calls are
        # logged with its own uid)
        r = _as_nobody([FERRYCTL, "-s", f.sock, "health"], gid=gid)
        assert r.returncode == 0, r
        r = _as_nobody([FERRYCTL, "-s", f.sock, "reload"], gid=gid)
        assert r.returncode == 0, r
        wait_for(lambda: f"uid={uid} gid={gid}" in f.log_path.read_text(), 5,
                 what="the caller's uid in the log")


def test_control_socket_unknown_group_refuses_start(mock_factory, ferry_factory):
    m = mock_factory("A", 3)
    f = ferry_factory({"A": m}, start=False,
                      extra_ferry="control_socket_group = no-such-group-ferry")
    f.start(wait=False)
    assert f.proc.wait(timeout=30) == 1
    assert "control_socket_group 'no-such-group-ferry': no such group" in f.log_path.read_text()


def test_mutating_call_logs_uid_and_pid(mock_factory, ferry_factory):
    m = mock_factory("A", 3)
    f = ferry_factory({"A": m})
    for args in (["reload"], ["drain", "A"]):
        p = subprocess.Popen([str(FERRYCTL), "-s", f.sock, *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        p.communicate(timeout=30)
        assert p.returncode == 0, args
        path = "/admin/config/reload" if args[0] == "reload" else "/admin/clusters/A/drain"
        want = (f'listener=control method=POST path="{path}" auth=local '
                f"uid={os.getuid()} gid={os.getgid()} pid={p.pid}")
        wait_for(lambda: want in f.log_path.read_text(), 5, what=want)
    # reads are not logged as calls
    f.ctl("status")
    assert 'path="/admin/clusters" auth' not in f.log_path.read_text()


# --------------------------------------------------------------------------
# non-loopback admin_listen
# --------------------------------------------------------------------------

def _wildcard_ferry(mock_factory, ferry_factory, extra):
    m = mock_factory("A", 3)
    f = ferry_factory({"A": m}, start=False)
    text = f.config_text.replace(f"admin_listen = 127.0.0.1:{f.admin_port}",
                                 f"admin_listen = 0.0.0.0:{f.admin_port}\n{extra}")
    f.config_text = text
    f.config_path.write_text(text)
    return f


def test_non_loopback_admin_listen_without_credentials_refused(mock_factory, ferry_factory):
    f = _wildcard_ferry(mock_factory, ferry_factory, "")
    msg = (f"admin_listen 0.0.0.0:{f.admin_port} is not a loopback address and the admin "
           "API has no credentials")
    # ferryd -t says so, with file:line
    r = subprocess.run([str(FERRYD), "-t", "-c", str(f.config_path)], capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 1
    assert f"{f.config_path}:3: {msg}" in r.stderr + r.stdout, r
    # and ferryd refuses to start
    f.start(wait=False)
    assert f.proc.wait(timeout=30) == 1
    log = f.log_path.read_text()
    assert msg in log and "admin_insecure = on" in log, log
    assert not os.path.exists(f.sock)


def test_non_loopback_admin_listen_with_insecure(mock_factory, ferry_factory):
    f = _wildcard_ferry(mock_factory, ferry_factory, "admin_insecure = on")
    f.start()
    assert "admin API open to the network without credentials" in f.log_path.read_text()
    assert tcp_request(f, "GET", "/admin/clusters")[0] == 200


def test_non_loopback_admin_listen_with_token(mock_factory, ferry_factory, workdir):
    tok = write_token(workdir / "admin.token")
    f = _wildcard_ferry(mock_factory, ferry_factory, f"admin_token_file = {tok}")
    f.start()
    assert tcp_request(f, "GET", "/admin/clusters")[0] == 401
    assert tcp_request(f, "GET", "/admin/clusters", token=TOKEN)[0] == 200
    # removing the token by reload would open it to the network: rejected
    f.config_path.write_text(f.config_text.replace(f"admin_token_file = {tok}\n", ""))
    r = f.ctl("--json", "reload", check=False)
    assert r.returncode == 1
    assert "is not a loopback address" in r.stdout, r.stdout
    assert tcp_request(f, "GET", "/admin/clusters")[0] == 401


# --------------------------------------------------------------------------
# HTTPS on admin_listen (certificates from the openssl CLI)
# --------------------------------------------------------------------------

def _openssl(*args, cwd):
    r = subprocess.run([OPENSSL, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (args, r.stderr)


def _make_ca(d, name):
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "30",
             "-subj", f"/CN={name}", cwd=d)


def _make_cert(d, name, ca, cn, san=None):
    args = ["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}"]
    if san:
        args += ["-addext", f"subjectAltName={san}"]
    _openssl(*args, cwd=d)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-days", "30", "-copy_extensions", "copy", "-out", f"{name}.crt",
             cwd=d)
    os.chmod(d / f"{name}.key", 0o600)


@pytest.fixture
def pki(workdir):
    if OPENSSL is None:
        pytest.fail("openssl CLI not installed (scripts/install-deps installs it)")
    d = workdir / "pki"
    d.mkdir()
    _make_ca(d, "ca")
    _make_ca(d, "rogue")
    _make_cert(d, "server", "ca", "ferry-admin", "IP:127.0.0.1,DNS:localhost")
    _make_cert(d, "other", "ca", "ferry-other", "DNS:other.example")
    _make_cert(d, "operator", "ca", "operator")
    _make_cert(d, "intruder", "rogue", "intruder")
    return d


def _tls_keys(pki, client_ca=False):
    keys = (f"admin_tls_cert = {pki / 'server.crt'}\n"
            f"admin_tls_key = {pki / 'server.key'}")
    if client_ca:
        keys += f"\nadmin_tls_client_ca = {pki / 'ca.crt'}"
    return keys


def curl(ferry, path, pki, *extra):
    if CURL is None:
        pytest.fail("curl not installed")
    r = subprocess.run([CURL, "-sS", "-o", "-", "-w", "\n%{http_code}", "--max-time", "10",
                        "--cacert", str(pki / "ca.crt"), *map(str, extra),
                        f"https://127.0.0.1:{ferry.admin_port}{path}"],
                       capture_output=True, text=True, timeout=20)
    return r


def ctl_https(ferry, pki, *args, cacert=True, env_token=None, address=None):
    env = {k: v for k, v in os.environ.items() if k != "FERRY_TOKEN"}
    if env_token is not None:
        env["FERRY_TOKEN"] = env_token
    argv = [str(FERRYCTL), "-a", address or f"https://127.0.0.1:{ferry.admin_port}"]
    if cacert:
        argv += ["--cacert", str(pki / "ca.crt")]
    return subprocess.run(argv + [str(a) for a in args], capture_output=True, text=True,
                          timeout=20, env=env, stdin=subprocess.DEVNULL)


def _peer_cert_der(ferry, pki):
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.check_hostname = False
    with socket.create_connection(("127.0.0.1", ferry.admin_port), timeout=5) as s:
        with ctx.wrap_socket(s) as t:
            return t.getpeercert(binary_form=True)


def test_https_with_token(mock_factory, ferry_factory, workdir, pki):
    tok = write_token(workdir / "admin.token")
    m = mock_factory("A", 3)
    f = ferry_factory({"A": m}, extra_ferry=f"admin_token_file = {tok}\n" + _tls_keys(pki))
    log = f.log_path.read_text()
    assert "https=on" in log and 'msg="admin HTTPS certificate" subject="CN=ferry-admin"' in log
    # curl: 401 without the token, 200 with it, open paths without
    r = curl(f, "/admin/clusters", pki)
    assert r.returncode == 0 and r.stdout.endswith("\n401"), r
    r = curl(f, "/admin/clusters", pki, "-H", f"Authorization: Bearer {TOKEN}")
    assert r.returncode == 0 and r.stdout.endswith("\n200"), r
    assert json.loads(r.stdout.rsplit("\n", 1)[0])["clusters"][0]["name"] == "A"
    r = curl(f, "/admin/health", pki)
    assert r.stdout.endswith("\n200"), r
    # a POST with a body and Expect: 100-continue over TLS
    r = curl(f, "/admin/config/validate", pki, "-H", f"Authorization: Bearer {TOKEN}",
             "-H", "Expect: 100-continue", "--data-binary", f"@{f.config_path}")
    assert r.stdout.endswith("\n200") and '"valid":true' in r.stdout, r
    # ferryctl over HTTPS with --cacert and the token
    r = ctl_https(f, pki, "--token-file", tok, "status")
    assert r.returncode == 0 and "accepting" in r.stdout, r
    r = ctl_https(f, pki, "reload", env_token=TOKEN)
    assert r.returncode == 0, r
    r = ctl_https(f, pki, "status")
    assert r.returncode == 1 and "HTTP 401" in r.stderr, r
    # --cacert FILE is enough to mean HTTPS
    r = ctl_https(f, pki, "health", address=f"127.0.0.1:{f.admin_port}")
    assert r.returncode == 0, r
    # without --cacert the certificate is not trusted: exit 3, says why
    r = ctl_https(f, pki, "health", cacert=False)
    assert r.returncode == 3, r
    assert "not trusted" in r.stderr and "--cacert" in r.stderr, r.stderr
    # plain HTTP on the HTTPS port: a plain 400 that says so, then the close
    r = ctl_tcp(f, "health")
    assert r.returncode in (1, 3) and "speaks HTTPS" in r.stderr, r
    code, _, body = tcp_request(f, "GET", "/admin/health")
    assert code == 400 and b"speaks HTTPS" in body, body
    r = curl(f, "/metrics", pki)
    assert "ferry_admin_tls_handshake_failures_total " in r.stdout, r
    failures = int(re.search(r"^ferry_admin_tls_handshake_failures_total (\d+)$", r.stdout,
                             re.M).group(1))
    assert failures >= 3, failures
    # the control socket is unchanged
    assert f.ctl("status").returncode == 0


def test_https_certificate_name_and_rotation(mock_factory, ferry_factory, workdir, pki):
    tok = write_token(workdir / "admin.token")
    m = mock_factory("A", 3)
    f = ferry_factory({"A": m}, extra_ferry=f"admin_token_file = {tok}\n" + _tls_keys(pki))
    before = _peer_cert_der(f, pki)
    # rotate: a certificate that does not name 127.0.0.1, then reload
    shutil.copy(pki / "other.crt", pki / "server.crt")
    shutil.copy(pki / "other.key", pki / "server.key")
    r = f.ctl("--json", "reload", check=False)
    assert r.returncode == 0, r
    assert _peer_cert_der(f, pki) != before
    r = ctl_https(f, pki, "health")
    assert r.returncode == 3 and "mismatch" in r.stderr.lower(), r
    r = curl(f, "/admin/health", pki)
    assert r.returncode != 0, r
    # a key that does not match its certificate: reload rejected, the
    # running certificate stays
    shutil.copy(pki / "operator.key", pki / "server.key")
    r = f.ctl("--json", "reload", check=False)
    assert r.returncode == 1, r
    assert "admin_tls_key:" in r.stdout and "does not match the certificate" in r.stdout, r.stdout
    assert _peer_cert_der(f, pki) != before
    shutil.copy(pki / "other.key", pki / "server.key")


def test_https_client_certificates(mock_factory, ferry_factory, pki):
    m = mock_factory("A", 3)
    f = ferry_factory({"A": m}, extra_ferry=_tls_keys(pki, client_ca=True))
    # no certificate: 401 (the handshake completes; the token could still do)
    r = curl(f, "/admin/clusters", pki)
    assert r.returncode == 0 and r.stdout.endswith("\n401"), r
    assert "client certificate is required" in r.stdout
    r = curl(f, "/admin/ready", pki)
    assert r.stdout.endswith("\n200"), r
    # a certificate of the client CA: 200
    r = curl(f, "/admin/clusters", pki, "--cert", pki / "operator.crt", "--key", pki / "operator.key")
    assert r.returncode == 0 and r.stdout.endswith("\n200"), r
    # a certificate of another CA: the handshake is refused
    r = curl(f, "/admin/clusters", pki, "--cert", pki / "intruder.crt", "--key",
             pki / "intruder.key")
    assert r.returncode != 0 and not r.stdout.endswith("\n200"), r
    # ferryctl: --cert/--key authorize a mutating call, logged with the subject
    r = ctl_https(f, pki, "--cert", pki / "operator.crt", "--key", pki / "operator.key", "reload")
    assert r.returncode == 0, r
    wait_for(lambda: 'auth=certificate peer=127.0.0.1:' in f.log_path.read_text()
             and 'subject="CN=operator"' in f.log_path.read_text(), 5, what="subject logged")
    r = ctl_https(f, pki, "status")
    assert r.returncode == 1 and "HTTP 401" in r.stderr and "--cert" in r.stderr, r
    r = ctl_https(f, pki, "--cert", pki / "intruder.crt", "--key", pki / "intruder.key", "status")
    assert r.returncode in (1, 3) and r.returncode != 0, r
    assert "TLS" in r.stderr or "certificate" in r.stderr, r.stderr
    # a token is not accepted where only certificates are configured
    r = ctl_https(f, pki, "status", env_token=TOKEN)
    assert r.returncode == 1 and "client certificate" in r.stderr, r


def test_https_non_loopback_with_client_ca_accepted(mock_factory, ferry_factory, pki):
    f = _wildcard_ferry(mock_factory, ferry_factory, _tls_keys(pki, client_ca=True))
    f.start()
    r = curl(f, "/admin/clusters", pki, "--cert", pki / "operator.crt", "--key", pki / "operator.key")
    assert r.stdout.endswith("\n200"), r


def test_https_stalled_handshake_is_closed(mock_factory, ferry_factory, workdir, pki):
    tok = write_token(workdir / "admin.token")
    m = mock_factory("A", 3)
    f = ferry_factory({"A": m}, extra_ferry=f"admin_token_file = {tok}\n" + _tls_keys(pki))
    stalled = []
    for i in range(20):
        s = socket.create_connection(("127.0.0.1", f.admin_port), timeout=10)
        if i % 2:
            s.sendall(b"\x16\x03\x01\x02\x00\x01")   # half a ClientHello record
        stalled.append(s)
    t0 = time.monotonic()
    # meanwhile a real client is served at once
    r = ctl_https(f, pki, "--token-file", tok, "status")
    assert r.returncode == 0, r
    assert time.monotonic() - t0 < 2.0
    # each stalled handshake is closed by the head deadline (2.5 s): EOF or
    # a reset, nothing else
    for s in stalled:
        s.settimeout(10)
        try:
            got = s.recv(100)
        except ConnectionResetError:
            got = b""
        assert got == b"", got
        s.close()
    took = time.monotonic() - t0
    assert 1.5 < took < 8.0, took
    assert f.proc.poll() is None
    assert ctl_https(f, pki, "--token-file", tok, "status").returncode == 0


def test_fleet_reload_sends_the_token(token_ferry, workdir):
    """scripts/ferry-fleet-reload against a replica with admin_token_file."""
    f = token_ferry
    script = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "ferry-fleet-reload")
    new = f.config_text.replace("drain_timeout = 2s", "drain_timeout = 3s")
    cfg = workdir / "new.ini"
    cfg.write_text(new)
    env = {k: v for k, v in os.environ.items() if k != "FERRY_TOKEN"}

    def run(*extra, token=None):
        e = dict(env, **({"FERRY_TOKEN": token} if token else {}))
        return subprocess.run(["/usr/bin/python3", script, "--targets",
                               f"127.0.0.1:{f.admin_port}", *map(str, extra), str(cfg)],
                              capture_output=True, text=True, timeout=60, env=e)
    r = run()
    assert r.returncode == 1 and "authentication required" in r.stdout + r.stderr, r
    tf = write_token(workdir / "fleet.token")
    r = run("--token-file", tf)
    assert r.returncode == 0, r
    r = run(token=TOKEN)
    assert r.returncode == 0, r


def _raise_nofile():
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


ADMIN_MAX_CONNS = 1024           # ADMIN_LISTEN_MAX_CONNS, supervisor/admin_listen.h


def test_https_full_listener_evicts_stalled_handshakes(mock_factory, ferry_factory, workdir, pki):
    """A full HTTPS listener evicts connections stuck before or in the TLS
    handshake (they get no 503: it would not be TLS), oldest-silent first,
    and answers the new client."""
    if _raise_nofile() < 2 * ADMIN_MAX_CONNS + 512:
        pytest.skip("RLIMIT_NOFILE too low for a full listener")
    tok = write_token(workdir / "admin.token")
    m = mock_factory("A", 1)
    f = ferry_factory({"A": m}, extra_ferry=f"admin_token_file = {tok}\n" + _tls_keys(pki))
    conns = []
    try:
        for i in range(ADMIN_MAX_CONNS):
            s = socket.create_connection(("127.0.0.1", f.admin_port), timeout=10)
            if i >= 8:
                s.sendall(b"\x16\x03\x01")   # a few bytes of a ClientHello
            conns.append(s)
        time.sleep(0.3)
        t0 = time.monotonic()
        for _ in range(3):
            r = ctl_https(f, pki, "--token-file", tok, "status")
            assert r.returncode == 0, r
        assert time.monotonic() - t0 < 3.0
        # the oldest went first: EOF or reset, no bytes (a 503 would not be
        # TLS). Each ferryctl evicts one connection: a silent one, or the
        # previous ferryctl's if it is still lingering after its answer.
        s = conns[0]
        s.settimeout(2)
        try:
            got = s.recv(100)
        except ConnectionResetError:
            got = b""
        assert got == b"", got
        # younger ones are still open
        for s in (conns[3], conns[100], conns[-1]):
            s.setblocking(False)
            with pytest.raises(BlockingIOError):
                s.recv(1)
    finally:
        for s in conns:
            s.close()
    assert "admin listener full" in f.log_path.read_text()
