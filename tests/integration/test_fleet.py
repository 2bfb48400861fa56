"""
Fleet: scripts/ferry-fleet-reload against three local ferryd replicas, and
the Kubernetes manifests of conf/k8s.

A fleet runs one config file on every replica. To run three replicas on one
machine with a byte-identical config (same checksum, same addresses), each
replica runs in its own mount namespace (`unshare -m`, we are root) where
/etc/hosts maps the name `ferry-replica` to its own loopback address
(127.0.0.2, .3, .4) -- as a pod's hostname maps to its pod IP -- and the
config's directory is bind-mounted from the replica's own directory, so the
control socket path in the config is the same for all and the socket lands
in each replica's directory.

    FERRY_BUILD=$PWD/build /usr/bin/python3 -m pytest -q tests/integration/test_fleet.py
"""

import hashlib
import json
import os
import shutil
import socket
import stat
import subprocess

import pytest

from conftest import (FERRYD, REPO, ReloadFerry, allocate_ports, http_request,
                      register_log)

FLEET_RELOAD = REPO / "scripts" / "ferry-fleet-reload"
K8S = REPO / "conf" / "k8s"
HOST = "ferry-replica"
IPS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]


def version_of(text):
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class Replica(ReloadFerry):
    """A ReloadFerry whose addresses are `ferry-replica` (its own loopback
    address inside its mount namespace) and whose config lives in the shared
    mount point `selfdir`, so every replica can run the very same text."""

    def __init__(self, keeper, rdir, selfdir, upstreams, ip, clusters, admin_port):
        rdir.mkdir()
        super().__init__(keeper, rdir, upstreams)
        self.ip = ip
        self.selfdir = selfdir
        self.clusters = {k: dict(v) for k, v in clusters.items()}
        self.admin_port = admin_port
        self.ferry_keys["control_socket"] = str(selfdir / "ferry.sock")
        self.ferry_keys["admin_listen"] = f"{HOST}:{admin_port}"
        self.hosts = rdir / "hosts"
        self.hosts.write_text(f"{ip} {HOST}\n127.0.0.1 localhost\n")
        self.write()

    @property
    def target(self):
        return f"{self.ip}:{self.admin_port}"

    def render(self, ferry_keys=None, spec=None, clusters=None):
        fk = self.ferry_keys if ferry_keys is None else ferry_keys
        sp = self.spec if spec is None else spec
        cl = self.clusters if clusters is None else clusters
        lines = ["[ferry]"] + [f"{k} = {v}" for k, v in fk.items()]
        for name, s in sp.items():
            c = cl[name]
            lines += ["", f"[cluster {name}]", f"upstream = {s['upstream']}",
                      f"bootstrap = {HOST}:{c['bootstrap']}",
                      f"broker_ports = {c['brokers'][0]}-{c['brokers'][-1]}",
                      f"node_ids = {c['node_ids'][0]}-{c['node_ids'][-1]}"]
            lines += [f"{k} = {v}" for k, v in s["extra"].items()]
        return "\n".join(lines) + "\n"

    def start(self, wait=True, env=None):
        self.log = open(self.log_path, "ab")
        script = ('mount --bind "$1" /etc/hosts && mount --bind "$2" "$3" && '
                  'exec "$4" -c "$3/ferry.ini"')
        argv = ["unshare", "-m", "sh", "-c", script, "replica", str(self.hosts),
                str(self.workdir), str(self.selfdir), str(FERRYD)]
        self.proc = self.keeper.spawn("ferryd", argv, stdout=self.log, stderr=self.log,
                                      cwd=str(self.workdir), env=env)
        if wait:
            self.wait_ready()
        return self

    def current_version(self):
        code, _, data = http_request("GET", "/admin/config/status",
                                     tcp=(self.ip, self.admin_port))
        assert code == 200, (code, data)
        return json.loads(data)["currentConfigVersion"]


@pytest.fixture
def fleet(keeper, workdir, mock_factory, request):
    return _start_fleet(keeper, workdir, mock_factory, request)


def _start_fleet(keeper, workdir, mock_factory, request, ferry_extra=None):
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) not installed")
    r = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if r.returncode != 0 or os.geteuid() != 0:
        pytest.skip(f"cannot create mount namespaces here: {r.stderr!r}")
    up = mock_factory("up", brokers=3)
    p = allocate_ports(5)
    clusters = {"a": {"bootstrap": p[0], "brokers": p[1:4], "node_ids": [1, 2, 3]}}
    selfdir = workdir / "self"
    selfdir.mkdir()
    reps = []
    for i, ip in enumerate(IPS):
        rep = Replica(keeper, workdir / f"r{i + 1}", selfdir, {"a": up}, ip, clusters, p[4])
        if ferry_extra:
            rep.ferry_keys.update(ferry_extra)
            rep.write()
        register_log(request, f"ferryd r{i + 1}", rep.log_path)
        reps.append(rep)
    text = reps[0].render()
    assert all(r.render() == text for r in reps), "replicas must share one config"
    for rep in reps:
        rep.start(wait=False)
    for rep in reps:
        rep.wait_ready()
    return up, reps


def fleet_reload(*args, timeout=120):
    return subprocess.run(["/usr/bin/python3", str(FLEET_RELOAD)] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def targets(reps):
    return ",".join(r.target for r in reps)


def test_good_config_moves_every_replica(fleet, workdir):
    up, reps = fleet
    v0 = version_of(reps[0].render())
    assert [r.current_version() for r in reps] == [v0] * 3
    pids = [r.cluster("a")["workers"][0]["pid"] for r in reps]

    spec = {k: {"upstream": v["upstream"], "extra": dict(v["extra"])} for k, v in reps[0].spec.items()}
    spec["a"]["extra"]["max_connections"] = "5000"
    text = reps[0].render(spec=spec)
    new = workdir / "new.ini"
    new.write_text(text)
    v1 = version_of(text)

    r = fleet_reload("--targets", targets(reps), new)
    assert r.returncode == 0, f"rc={r.returncode}\n{r.stdout}\n{r.stderr}"
    assert [rep.current_version() for rep in reps] == [v1] * 3
    for rep in reps:
        assert rep.target in r.stdout
    assert f"3 of 3 replica(s) run {v1}" in r.stdout
    assert r.stdout.count(": reloaded\n") == 3, r.stdout
    # a modified cluster gets a new generation on every replica
    for rep, pid in zip(reps, pids):
        c = rep.cluster("a")
        assert c["state"] == "accepting"
        assert any(w["pid"] != pid and w["state"] == "accepting" for w in c["workers"]), c

    # the same config again: every replica reports "unchanged", JSON report
    r = fleet_reload("--json", "--targets", targets(reps), new)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["success"] is True and doc["configVersion"] == v1
    assert [x["result"] for x in doc["replicas"]] == ["unchanged"] * 3
    assert [x["configVersion"] for x in doc["replicas"]] == [v1] * 3


def test_replica_that_rejects_stops_the_rollout(fleet, workdir):
    up, reps = fleet
    v0 = version_of(reps[0].render())
    # A new cluster on ports that replica 2 cannot bind: the test holds the
    # bootstrap port on replica 2's address.
    pb = allocate_ports(4)
    clusters = dict(reps[0].clusters)
    clusters["b"] = {"bootstrap": pb[0], "brokers": pb[1:4], "node_ids": [1, 2, 3]}
    spec = dict(reps[0].spec)
    spec["b"] = {"upstream": up.bootstrap, "extra": {}}
    text = reps[0].render(spec=spec, clusters=clusters)
    bad = workdir / "bad.ini"
    bad.write_text(text)
    v1 = version_of(text)

    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        holder.bind((reps[1].ip, pb[0]))
        holder.listen(1)
        r = fleet_reload("--json", "--targets", targets(reps), bad)
    finally:
        holder.close()
    assert r.returncode == 1, f"rc={r.returncode}\n{r.stdout}\n{r.stderr}"
    doc = json.loads(r.stdout)
    assert doc["success"] is False
    rows = {x["target"]: x for x in doc["replicas"]}
    assert rows[reps[0].target]["result"] == "reloaded"
    assert rows[reps[0].target]["configVersion"] == v1
    assert rows[reps[1].target]["result"] == "failed"
    assert rows[reps[1].target]["configVersion"] == v0
    assert any(str(pb[0]) in e for e in rows[reps[1].target]["errors"]), rows[reps[1].target]
    assert rows[reps[2].target]["result"] == "skipped"
    assert rows[reps[2].target]["configVersion"] == v0
    assert "reload failed" in r.stderr
    # What the report says is what the replicas run.
    assert [rep.current_version() for rep in reps] == [v1, v0, v0]
    assert reps[1].cluster_doc("b") is None
    assert reps[2].cluster_doc("b") is None
    # The failed replica still serves its old config.
    assert reps[1].cluster("a")["state"] == "accepting"


def test_invalid_config_changes_nothing(fleet, workdir):
    up, reps = fleet
    v0 = version_of(reps[0].render())
    bad = workdir / "invalid.ini"
    bad.write_text(reps[0].render() + "bogus_key = 1\n")
    r = fleet_reload("--targets", targets(reps), bad)
    assert r.returncode == 1, f"{r.stdout}\n{r.stderr}"
    assert "bogus_key" in r.stdout
    assert "no replica was reloaded" in r.stderr
    assert [rep.current_version() for rep in reps] == [v0] * 3


def _fake_kubectl(path, log, admin_port, ips):
    """A kubectl stand-in: `get endpoints` returns the replicas as pod IPs,
    `annotate` is recorded. The real kubectl needs an API server."""
    endpoints = {"kind": "Endpoints", "subsets": [
        {"addresses": [{"ip": ip} for ip in ips[:-1]],
         "notReadyAddresses": [{"ip": ips[-1]}],
         "ports": [{"name": "admin", "port": admin_port}, {"name": "other", "port": 1}]}]}
    path.write_text(
        "#!/usr/bin/python3\n"
        "import json, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "a = sys.argv[1:]\n"
        "if 'get' in a and 'endpoints' in a:\n"
        f"    print(json.dumps({endpoints!r}))\n"
        "elif 'annotate' in a:\n"
        "    print('deployment.apps/ferry annotated')\n"
        "else:\n"
        "    sys.exit(1)\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_kubectl_mode_uses_endpoints_and_annotates(fleet, workdir):
    up, reps = fleet
    spec = {k: {"upstream": v["upstream"], "extra": dict(v["extra"])} for k, v in reps[0].spec.items()}
    spec["a"]["extra"]["idle_timeout"] = "5m"
    text = reps[0].render(spec=spec)
    new = workdir / "new.ini"
    new.write_text(text)
    v1 = version_of(text)
    kubectl, log = workdir / "kubectl", workdir / "kubectl.log"
    _fake_kubectl(kubectl, log, reps[0].admin_port, IPS)

    r = fleet_reload("--kubectl", kubectl, "-n", "kafka", new)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    assert [rep.current_version() for rep in reps] == [v1] * 3
    calls = [json.loads(x) for x in log.read_text().splitlines()]
    assert calls[0] == ["-n", "kafka", "get", "endpoints", "ferry-admin", "-o", "json"]
    assert calls[-1] == ["-n", "kafka", "annotate", "--overwrite", "deployment/ferry",
                         f"ferry/config-version={v1}"]
    assert f"annotated ferry/config-version={v1}" in r.stdout

    # A failed rollout records nothing.
    log.write_text("")
    bad = workdir / "invalid.ini"
    bad.write_text(text + "nope = 1\n")
    r = fleet_reload("--kubectl", kubectl, "-n", "kafka", bad)
    assert r.returncode == 1
    assert not any("annotate" in json.loads(x) for x in log.read_text().splitlines())


def _openssl(*args, cwd):
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"openssl {' '.join(args)}: {r.stderr}"


def _admin_pki(d):
    """ca.crt; server.crt naming every replica's address; operator.crt."""
    d.mkdir()
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "30", "-subj", "/CN=ca",
             cwd=d)
    for name, san in (("server", ",".join(f"IP:{ip}" for ip in IPS)), ("operator", None)):
        args = ["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}"]
        if san:
            args += ["-addext", f"subjectAltName={san}"]
        _openssl(*args, cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "30", "-copy_extensions", "copy",
                 "-out", f"{name}.crt", cwd=d)
        os.chmod(d / f"{name}.key", 0o600)
    return d


def test_fleet_reload_over_https(keeper, workdir, mock_factory, request):
    """admin_listen with TLS and client certificates on every replica: the
    script passes --cacert / --cert / --key as ferryctl takes them."""
    pki = _admin_pki(workdir / "pki")
    up, reps = _start_fleet(keeper, workdir, mock_factory, request, {
        "admin_tls_cert": pki / "server.crt", "admin_tls_key": pki / "server.key",
        "admin_tls_client_ca": pki / "ca.crt"})
    spec = {k: {"upstream": v["upstream"], "extra": dict(v["extra"])} for k, v in reps[0].spec.items()}
    spec["a"]["extra"]["max_connections"] = "5000"
    text = reps[0].render(spec=spec)
    new = workdir / "new.ini"
    new.write_text(text)
    v1 = version_of(text)
    pids = [r.cluster("a")["workers"][0]["pid"] for r in reps]
    cert = ["--cert", pki / "operator.crt", "--key", pki / "operator.key"]

    # HTTPS without a trusted CA: unreachable, says why and what to pass
    https = ",".join(f"https://{r.target}" for r in reps)
    r = fleet_reload("--targets", https, new)
    assert r.returncode == 3, f"rc={r.returncode}\n{r.stdout}\n{r.stderr}"
    assert "not trusted" in r.stderr and "--cacert" in r.stderr, r.stderr
    # plain HTTP to an HTTPS listener: not served, nothing reloaded
    r = fleet_reload("--targets", targets(reps), new)
    assert r.returncode in (1, 3) and "reloaded" not in r.stdout.replace("no replica was", ""), r
    # the CA but no client certificate: refused (401), nothing reloaded
    r = fleet_reload("--cacert", pki / "ca.crt", "--targets", targets(reps), new)
    assert r.returncode == 1, f"rc={r.returncode}\n{r.stdout}\n{r.stderr}"
    assert "no replica was reloaded" in r.stderr
    # --cert without --key: usage
    assert fleet_reload("--cacert", pki / "ca.crt", "--cert", pki / "operator.crt",
                        "--targets", targets(reps), new).returncode == 2

    r = fleet_reload("--json", "--cacert", pki / "ca.crt", *cert, "--targets", https, new)
    assert r.returncode == 0, f"rc={r.returncode}\n{r.stdout}\n{r.stderr}"
    doc = json.loads(r.stdout)
    assert [x["result"] for x in doc["replicas"]] == ["reloaded"] * 3, doc
    assert [x["configVersion"] for x in doc["replicas"]] == [v1] * 3, doc
    for rep, pid in zip(reps, pids):  # seen from the control socket too
        c = rep.cluster("a")
        assert any(w["pid"] != pid and w["state"] == "accepting" for w in c["workers"]), c


def test_fleet_reload_usage_and_unreachable(tmp_path):
    cfg = tmp_path / "f.ini"
    cfg.write_text("[ferry]\n")
    assert fleet_reload().returncode == 2
    assert fleet_reload("--targets", "nohostport", cfg).returncode == 2
    assert fleet_reload("--targets", "127.0.0.1:1", tmp_path / "missing.ini").returncode == 2
    port = allocate_ports(1)[0]
    r = fleet_reload("--targets", f"127.0.0.1:{port}", cfg)
    assert r.returncode == 3, r.stderr
    assert f"127.0.0.1:{port}" in r.stderr


# --------------------------------------------------------------------------
# conf/k8s manifests
# --------------------------------------------------------------------------

def _manifests():
    yaml = pytest.importorskip("yaml", reason="python3-yaml not installed")
    docs = []
    for f in sorted(K8S.glob("*.yaml")):
        if f.name == "kustomization.yaml":
            continue
        docs += [d for d in yaml.safe_load_all(f.read_text()) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def _ini(text):
    import configparser
    cp = configparser.ConfigParser(inline_comment_prefixes=(";",), comment_prefixes=(";", "#"))
    cp.read_string(text)
    return cp


def test_k8s_manifests_schema(tmp_path):
    m = _manifests()
    for (kind, name), d in m.items():
        for field in ("apiVersion", "kind", "metadata"):
            assert field in d, (kind, name, field)
    assert set(m) == {("ConfigMap", "ferry-config"), ("Deployment", "ferry"),
                      ("Service", "ferry-kafka"), ("Service", "ferry-admin"),
                      ("NetworkPolicy", "ferry")}

    # ConfigMap: a config ferryd accepts, sockets where the pod can write
    ini_text = m[("ConfigMap", "ferry-config")]["data"]["ferry.ini"]
    # the token comes from a Secret mounted in the pod: stand one in here
    tok_path = _ini(ini_text)["ferry"]["admin_token_file"]
    token = tmp_path / "token"
    token.write_text("k8s-secret-token-0123456789\n")
    token.chmod(0o600)
    (tmp_path / "ferry.ini").write_text(ini_text.replace(tok_path, str(token)))
    r = subprocess.run([str(FERRYD), "-t", "-c", str(tmp_path / "ferry.ini")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    ini = _ini(ini_text)
    admin_port = int(ini["ferry"]["admin_listen"].rsplit(":", 1)[1])
    cl = ini["cluster kafka"]
    kafka_ports = [int(cl["bootstrap"].rsplit(":", 1)[1])]
    lo, hi = (int(x) for x in cl["broker_ports"].split("-"))
    kafka_ports += list(range(lo, hi + 1))

    # Deployment
    dep = m[("Deployment", "ferry")]
    assert dep["apiVersion"] == "apps/v1"
    spec = dep["spec"]
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    (c,) = pod["containers"]
    assert c["image"] and c["command"][0] == "ferryd"
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"] and not sc["capabilities"].get("add")
    cports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert cports["admin"] == admin_port
    assert sorted(v for k, v in cports.items() if k != "admin") == kafka_ports
    assert c["readinessProbe"]["httpGet"]["path"] == "/admin/ready"
    assert c["livenessProbe"]["httpGet"]["path"] == "/admin/health"
    for probe in ("readinessProbe", "livenessProbe"):
        assert cports.get(c[probe]["httpGet"]["port"]) == admin_port
    mounts = {v["mountPath"]: v["name"] for v in c["volumeMounts"]}
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols[mounts["/etc/ferry"]]["configMap"]["name"] == "ferry-config"
    sock_dir = os.path.dirname(ini["ferry"]["control_socket"])
    assert "emptyDir" in vols[mounts[sock_dir]], "control socket needs a writable volume"
    assert pod["terminationGracePeriodSeconds"] > 30  # > drain_timeout

    # Services
    for name in ("ferry-kafka", "ferry-admin"):
        svc = m[("Service", name)]
        assert svc["spec"]["selector"].items() <= labels.items()
        assert svc["spec"].get("type", "ClusterIP") == "ClusterIP"
        for p in svc["spec"]["ports"]:
            assert p["targetPort"] in cports, p
    kp = sorted(cports[p["targetPort"]] for p in m[("Service", "ferry-kafka")]["spec"]["ports"])
    assert kp == kafka_ports
    ap = [cports[p["targetPort"]] for p in m[("Service", "ferry-admin")]["spec"]["ports"]]
    assert ap == [admin_port]

    # NetworkPolicy: Kafka ports open, admin port only from the management client
    np = m[("NetworkPolicy", "ferry")]
    assert np["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    assert np["spec"]["policyTypes"] == ["Ingress"]
    admin_rules, kafka_covered = [], set()
    for rule in np["spec"]["ingress"]:
        for p in rule["ports"]:
            ports = set(range(p["port"], p.get("endPort", p["port"]) + 1))
            if admin_port in ports:
                admin_rules.append(rule)
            kafka_covered |= ports & set(kafka_ports)
    assert kafka_covered == set(kafka_ports)
    assert admin_rules, "no rule admits the admin port"
    for rule in admin_rules:
        peers = rule.get("from")
        assert peers, "the admin port must not be open to every peer"
        for peer in peers:
            assert set(peer) == {"podSelector"}, peer
            assert peer["podSelector"]["matchLabels"] == {"ferry-management-client": "true"}


def _kubectl_cluster_reachable():
    try:
        r = subprocess.run(["kubectl", "version", "--request-timeout=3s"],
                           capture_output=True, timeout=10)
        return r.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def test_k8s_manifests_kubectl():
    """`kubectl apply --dry-run=client` when kubectl can reach an API server
    (it needs one for the resource mapping); else `kubectl kustomize`, which
    builds the set offline."""
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl not installed (Debian: kubernetes-client)")
    if _kubectl_cluster_reachable():
        argv = ["kubectl", "apply", "--dry-run=client", "-k", str(K8S)]
    else:
        argv = ["kubectl", "kustomize", str(K8S)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"{' '.join(argv)}:\n{r.stderr}"
    out = r.stdout
    for kind in ("ConfigMap", "Deployment", "Service", "NetworkPolicy"):
        assert kind in out, (kind, out[:500])
