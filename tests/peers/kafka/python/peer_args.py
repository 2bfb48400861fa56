"""
The command line every test peer takes (tests/peers/kafka/README.md), for
the Python ones: client.py (confluent-kafka, kafka-python) and kcat_peer.py.
The Java and Go peers parse the same options themselves.
"""

import argparse


def parser(default_group):
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", default="localhost:9092")
    ap.add_argument("--topic")
    ap.add_argument("--mode", choices=("produce", "consume", "metadata"), default="produce")
    ap.add_argument("--run-id", default="r", help="record i has the value RUN_ID-i")
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--acks", default="all")
    ap.add_argument("--idempotent", default="true", choices=("true", "false"))
    ap.add_argument("--group", default=default_group)
    ap.add_argument("--group-protocol", default="classic")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--linger-ms", type=int, default=1000,
                    help="keep consuming this long after the last expected record (duplicates)")
    ap.add_argument("--security-protocol", default="PLAINTEXT")
    ap.add_argument("--sasl-mechanism", default="PLAIN")
    ap.add_argument("--sasl-user", default="")
    ap.add_argument("--sasl-password", default="")
    ap.add_argument("--ca")
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--no-verify-name", action="store_true")
    ap.add_argument("--prop", action="append", default=[], help="client property k=v")
    return ap
