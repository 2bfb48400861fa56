"""
Certificate expiry of TLS clusters (issue 11, item 4): `tls.notAfter` in the
cluster's status (RFC 3339 UTC, absent for plaintext clusters), in `ferryctl
status`, as `ferry_tls_cert_not_after_seconds{cluster}` (promtool-clean),
and a warning in the log at start and at every reload while the certificate
expires within 14 days. Certificates are made in the test with the
`openssl` CLI (a throwaway CA and server certificates).
"""

import datetime
import shutil
import subprocess

import pytest

from conftest import wait_for

PROMTOOL = shutil.which("promtool")


def openssl(*args, cwd):
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def make_ca(d):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "30", "-subj", "/CN=ferry test CA",
            cwd=d)


def make_server(d, name, days, serial):
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", "/CN=localhost", cwd=d)
    (d / f"{name}.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-set_serial", str(serial), "-days", str(days), "-extfile", f"{name}.ext",
            "-out", f"{name}.pem", cwd=d)
    end = openssl("x509", "-in", f"{name}.pem", "-noout", "-enddate", cwd=d).strip()
    # notAfter=Dec  3 23:40:00 2026 GMT
    t = datetime.datetime.strptime(end.split("=", 1)[1], "%b %d %H:%M:%S %Y %Z")
    return int(t.replace(tzinfo=datetime.timezone.utc).timestamp())


def rfc3339_to_unix(s):
    assert s.endswith("Z"), s
    base = s[:-1].split(".")[0]
    t = datetime.datetime.strptime(base, "%Y-%m-%dT%H:%M:%S")
    return int(t.replace(tzinfo=datetime.timezone.utc).timestamp())


def test_not_after_status_metric_warning(mock_factory, ferry_factory, workdir):
    d = workdir / "pki"
    d.mkdir()
    make_ca(d)
    soon = make_server(d, "soon", 10, 1001)      # within 14 days: warned
    later = make_server(d, "later", 400, 1002)   # not warned

    a = mock_factory("S", 3)
    b = mock_factory("P", 3)
    f = ferry_factory({"S": a, "P": b}, start=False)
    text = f.config_text.replace(
        "[cluster P]", "[cluster P]")  # P stays plaintext
    text = text.replace(
        "[cluster S]\n",
        f"[cluster S]\ntls_cert = {d / 'soon.pem'}\ntls_key = {d / 'soon.key'}\n")
    f.config_path.write_text(text)
    f.start()

    s = f.cluster("S")
    assert rfc3339_to_unix(s["tls"]["notAfter"]) == soon, s.get("tls")
    assert "tls" not in f.cluster("P")
    m = f.metrics()
    assert m[("ferry_tls_cert_not_after_seconds", "S")] == soon
    assert ("ferry_tls_cert_not_after_seconds", "P") not in m
    code, _, body = f.http("/metrics")
    if PROMTOOL:
        r = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True,
                           timeout=30)
        assert r.returncode == 0, (r.stdout + r.stderr).decode(errors="replace")
    out = f.ctl("status").stdout
    assert "S: TLS certificate valid until" in out and "renew it" in out, out
    assert "P: TLS" not in out, out

    def warnings():
        return [l for l in f.log_path.read_text().splitlines()
                if "TLS certificate expires soon" in l and "cluster=S" in l]
    start_warn = wait_for(warnings, 5, what="the start warning")
    assert len(start_warn) == 1, start_warn
    assert "days_left=9" in start_warn[0] or "days_left=10" in start_warn[0], start_warn[0]

    # A reload that changes nothing still warns again (every reload) ...
    f.ctl("reload")
    wait_for(lambda: len(warnings()) == 2, 5, what="the warning at the reload")
    # ... and renewing the certificate (same paths) shows the new notAfter,
    # with no more warnings.
    shutil.copy(d / "later.pem", d / "soon.pem")
    shutil.copy(d / "later.key", d / "soon.key")
    f.ctl("reload")
    wait_for(lambda: rfc3339_to_unix(f.cluster("S")["tls"]["notAfter"]) == later, 5,
             what="the renewed certificate's notAfter")
    assert f.metrics()[("ferry_tls_cert_not_after_seconds", "S")] == later
    assert len(warnings()) == 2
    out = f.ctl("status", "S").stdout
    assert "S: TLS certificate valid until" in out and "renew it" not in out, out
