"""Connection set-ups per second: SASL against plaintext, in one run.

    python benchmarks/sasl_bench.py [--connections 300] [--runs 3]

(also the suite's ``sasl`` phase: ``python -m benchmarks``)

One ``odradek serve`` subprocess with two listeners: PLAINTEXT and
SASL_PLAINTEXT (PLAIN and SCRAM-SHA-256; a SCRAM user with 4096 iterations,
Kafka's default). A set-up is, one connection after the other from one
client process (this package's client, ``odradek.client.connection``):
TCP connect + ApiVersions (plaintext), + SaslHandshake v1 + SaslAuthenticate
(PLAIN: one token; SCRAM: client-first and client-final), then close. Rows:

- ``plaintext``: connect + ApiVersions, the baseline;
- ``PLAIN``;
- ``SCRAM-SHA-256``: the client derives SaltedPassword (PBKDF2, 4096
  iterations) for every connection, as librdkafka and the Java client do;
- ``SCRAM-SHA-256, salted password cached``: the client reuses it, so the
  row shows the broker's cost (its side is HMACs only: it stores StoredKey
  and ServerKey, never derives them).

Median set-ups per second of ``--runs`` runs with min-max, after 20
unmeasured set-ups of each kind.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _common, when run as a script

from _common import broker_process

from odradek.client import sasl as client_sasl
from odradek.client.connection import Connection, check
from odradek.client.security import PLAINTEXT, ClientSecurity
from odradek.wire import scram
from odradek.wire.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialUpsertion,
)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_bench="bench-secret";')


async def _add_user(address: str) -> None:
    conn = await Connection.open(address)
    salt = os.urandom(16)
    salted = scram.salted_password("sha256", "bench-secret", salt, 4096)
    resp = await conn.request(AlterUserScramCredentialsRequest(upsertions=[
        ScramCredentialUpsertion("bench", 1, 4096, salt, salted)]), 0)
    for r in resp.results:
        check(r.error_code, r.error_message)
    await conn.close()


async def _setups(address: str, security: ClientSecurity, count: int) -> float:
    """Set-ups per second over ``count`` sequential connections."""
    start = time.perf_counter()
    for _ in range(count):
        conn = await Connection.open(address, security=security)
        await conn.close()
    return count / (time.perf_counter() - start)


LABELS = {"plaintext": "plaintext (connect + ApiVersions)", "PLAIN": "PLAIN",
          "SCRAM-SHA-256": "SCRAM-SHA-256 (client derives its key each time)",
          "cached": "SCRAM-SHA-256 (client caches its salted password)"}
"""Row names, in the order measured; ``plaintext`` is the baseline."""


def measure(connections: int, runs: int) -> dict[str, list[float]]:
    """Set-ups per second of each row of :data:`LABELS`, ``runs`` values each."""
    broker = broker_process(
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}")
    broker.start()
    try:
        plain_address, sasl_address = broker.bootstrap.split(",")[:2]
        asyncio.run(_add_user(plain_address))
        user = {"sasl_username": "bench", "sasl_password": "bench-secret"}
        rows = {
            "plaintext": (plain_address, PLAINTEXT),
            "PLAIN": (sasl_address, ClientSecurity("SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                                   **user)),
            "SCRAM-SHA-256": (sasl_address, ClientSecurity(
                "SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256", **user)),
        }
        results: dict[str, list[float]] = {name: [] for name in LABELS}
        derive = scram.salted_password
        for address, security in rows.values():  # warm-up: imports, handler loading
            asyncio.run(_setups(address, security, 20))
        for _ in range(runs):
            for name, (address, security) in rows.items():
                results[name].append(asyncio.run(_setups(address, security, connections)))
            client_sasl.scram.salted_password = functools.lru_cache(derive)  # type: ignore[assignment]
            try:
                address, security = rows["SCRAM-SHA-256"]
                results["cached"].append(asyncio.run(_setups(address, security,
                                                             connections)))
            finally:
                client_sasl.scram.salted_password = derive  # type: ignore[assignment]
        return results
    finally:
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/sasl_bench.py")
    parser.add_argument("--connections", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    results = measure(args.connections, args.runs)
    base = statistics.median(results["plaintext"])
    print(f"| set-up ({args.connections} connections, median of {args.runs}) "
          f"| set-ups/s (min-max) | vs plaintext |")
    print("|---|---|---|")
    for name, values in results.items():
        med = statistics.median(values)
        print(f"| {LABELS[name]} | {med:,.0f} ({min(values):,.0f}-{max(values):,.0f})"
              f" | {med / base:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
