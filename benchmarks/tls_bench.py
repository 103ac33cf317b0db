"""TLS against plaintext: the C producer (c/rdkbench.c on librdkafka) at 1 KiB,
acks=1, flat out, into one ``odradek serve`` with a PLAINTEXT and an SSL
listener, alternating between them in one run; the SSL figure over the
plaintext one is the cost of TLS (goal: at least 0.7).

    python benchmarks/tls_bench.py [--runs 5] [--count 300000]

Also the suite's ``tls`` phase (``python -m benchmarks``). The SSL client
verifies the broker's certificate (``odradek dev certs`` style, PEM keystore)
and presents none (``ssl.client.auth=none``, Kafka's default).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import suite_c
import suite_kafka as kafka
from _common import broker_process
from confluent_kafka.admin import AdminClient, NewTopic

SIZE = 1024


def measure(runs: int, count: int) -> dict[str, list[float]]:
    """msg/s of each run, by listener ("plaintext", "ssl")."""
    from odradek.testing.certs import write_dev_certs

    exe, why = suite_c.build()
    if exe is None:
        raise RuntimeError(f"TLS benchmark skipped: {why}")
    with tempfile.TemporaryDirectory(prefix="odradek-tls-bench-") as tmp:
        certs = write_dev_certs(tmp)
        broker = broker_process(
            "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "advertised.listeners=PLAINTEXT://127.0.0.1:0,SSL://localhost:0",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={certs.path('broker-keystore.pem')}",
            *os.environ.get("ODRADEK_BENCH_OVERRIDES", "").split())
        broker.start()
        try:
            plain, secure = broker.bootstrap.split(",")
            admin = AdminClient({"bootstrap.servers": plain, "log_level": "0"})
            env = {"plaintext": "", "ssl": f"security.protocol=SSL\nssl.ca.location={certs.ca}"}
            where = {"plaintext": plain, "ssl": secure}
            out: dict[str, list[float]] = {"plaintext": [], "ssl": []}
            for run in range(runs):
                order = ["plaintext", "ssl"] if run % 2 == 0 else ["ssl", "plaintext"]
                for kind in order:
                    topic = kafka.fresh_topic("tls")
                    admin.create_topics([NewTopic(topic, suite_c.PARTITIONS, 1)])[topic].result(60)
                    os.sync()
                    os.environ["RDKBENCH_CONF"] = env[kind]
                    try:
                        rate = suite_c.produce(exe, _At(where[kind]), topic, count, SIZE, "1",
                                               False)
                    finally:
                        os.environ.pop("RDKBENCH_CONF", None)
                    admin.delete_topics([topic])[topic].result(60)
                    out[kind].append(rate.msg_per_s)
                    print(f"tls run {run + 1} {kind:9} produce 1 KiB acks=1: "
                          f"{rate.msg_per_s:,.0f}/s {rate.mb_per_s:.0f} MB/s", file=sys.stderr,
                          flush=True)
            return out
        finally:
            broker.stop()


class _At:
    """A target for suite_c.produce: an address (CPU is not measured here)."""

    name = "odradek"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def cpu_seconds(self) -> float:
        return 0.0


def summary(rates: dict[str, list[float]]) -> str:
    plain, secure = statistics.median(rates["plaintext"]), statistics.median(rates["ssl"])
    return (f"C producer 1 KiB acks=1, median of {len(rates['ssl'])} runs: plaintext "
            f"{plain:,.0f} msg/s, SSL {secure:,.0f} msg/s, SSL/plaintext {secure / plain:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--count", type=int, default=300_000, help="records per run")
    args = parser.parse_args(argv)
    rates = measure(args.runs, args.count)
    print(summary(rates))
    return 0


if __name__ == "__main__":
    sys.exit(main())
