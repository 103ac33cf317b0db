"""kcat (librdkafka's command-line client) lists, produces and consumes."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from odradek.testing.broker import Broker

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
pytestmark = pytest.mark.skipif(
    KCAT is None, reason="kcat not installed (scripts/test.sh installs it)"
)


def _kcat(*args: str, stdin: str | None = None) -> str:
    assert KCAT is not None
    out = subprocess.run([KCAT, *args], input=stdin, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_kcat_produce_consume_and_list(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    lines = [f"key{i}:value {i}" for i in range(100)]
    _kcat("-b", bs, "-P", "-t", "kc", "-K", ":", "-z", "lz4", stdin="\n".join(lines) + "\n")
    listing = _kcat("-b", bs, "-L", "-t", "kc")
    assert 'topic "kc" with 1 partitions' in listing
    consumed = _kcat("-b", bs, "-C", "-t", "kc", "-e", "-f", "%k:%s:%o\n")
    assert consumed.splitlines() == [f"key{i}:value {i}:{i}" for i in range(100)]
    # from an offset, with headers and timestamps in the format
    tail = _kcat("-b", bs, "-C", "-t", "kc", "-o", "95", "-e", "-f", "%o %T\n")
    offsets = [int(line.split()[0]) for line in tail.splitlines()]
    assert offsets == [95, 96, 97, 98, 99]
