"""
The harness itself, without ferry: every reference client reaches the real
cluster's secured listeners directly with the options the scenarios pass
through ferry (SASL/PLAIN on SASL_PLAINTEXT, SCRAM-SHA-512 on SASL_SSL with
the broker's name verified, TLS with a client certificate on SSL). A
scenario that fails through ferry but passes here points at ferry.
"""

import pytest

from .conftest import clients

KCAT_SCRAM = pytest.mark.xfail(
    strict=True,
    reason="Debian's kcat links librdkafka 2.0.2, whose SCRAM client-final-message repeats the "
           "client nonce; Kafka 4.x checks the nonce strictly (CVE-2024-56128) and refuses it. "
           "Fixed in librdkafka 2.6.1 (confluent-kafka's 2.16 here passes)")

SECURITY = {
    "sasl-plain": {"security-protocol": "SASL_PLAINTEXT", "sasl-mechanism": "PLAIN",
                   "sasl-user": "alice", "sasl-password": "alice-secret"},
    "sasl-ssl-scram512": {"security-protocol": "SASL_SSL", "sasl-mechanism": "SCRAM-SHA-512",
                          "sasl-user": "alice", "sasl-password": "alice-secret", "ca": "CA"},
    "ssl-client-cert": {"security-protocol": "SSL", "ca": "CA", "cert": "CERT", "key": "KEY"},
}


def cases():
    for sec in SECURITY:
        for name in clients.CLIENTS:
            marks = [KCAT_SCRAM] if name == "kcat" and "scram" in sec else []
            yield pytest.param(name, sec, marks=marks, id=f"{name}-{sec}")


@pytest.mark.parametrize("client,security", list(cases()))
def test_client_reaches_secured_listener(kafka_cluster, client, security):
    why = clients.problem(client)
    if why:
        pytest.fail(why)
    tls = kafka_cluster.dir / "tls"
    files = {"CA": tls / "ca.crt", "CERT": tls / "client.crt", "KEY": tls / "client.key"}
    opts = {k: str(files.get(v, v)) for k, v in SECURITY[security].items()}
    listener = opts["security-protocol"]
    r = clients.run(client, {"bootstrap": kafka_cluster.bootstrap(listener), "mode": "metadata",
                             "timeout": 30, **opts}, strace=False, timeout=90)
    assert r.result and r.result["error_count"] == 0 and r.rc == 0, r.describe()
    want = {f"localhost:{p}" for p in kafka_cluster.broker_ports(listener).values()}
    assert set(r.result["brokers"]) == want, r.describe()
