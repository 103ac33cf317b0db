"""One broker per data directory (broker/control/dirlock.py), with real processes.

Two ``odradek serve`` on one ``log.dirs`` used to both start and append to the
same partition files: records acknowledged by the second were overwritten by
the first. Now the second exits 1 with one line naming the directory and the
process holding it, and the first keeps serving every acknowledged record.
The lock dies with its holder: after ``kill -9`` a new broker starts there.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support.cluster import serve_command
from tests.support.process import ServerProcess


def _produce(bootstrap: str, values: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for v in values:
        p.produce("locked", v.encode(), partition=0)
    assert p.flush(30) == 0


def _read(bootstrap: str, count: int) -> list[str]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check",
                  "enable.auto.commit": False})
    c.assign([TopicPartition("locked", 0, 0)])
    out: list[str] = []
    deadline = time.monotonic() + 30
    while len(out) < count and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            out.append(m.value().decode())
    c.close()
    return out


def test_a_second_broker_on_a_locked_directory_exits_and_the_first_keeps_serving(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = ServerProcess(data).start()
    try:
        _produce(first.bootstrap, [f"A-{i}" for i in range(1, 6)])
        second = subprocess.run(
            [*serve_command(), "--override", "listeners=PLAINTEXT://127.0.0.1:0",
             "--override", f"log.dirs={data}"],
            capture_output=True, text=True, timeout=60)
        assert second.returncode == 1, second
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, second.stderr
        assert str(data.resolve()) in lines[0] and f"process {first.pid}" in lines[0], lines
        assert "Traceback" not in second.stderr
        _produce(first.bootstrap, [f"A-{i}" for i in range(6, 9)])
        assert _read(first.bootstrap, 8) == [f"A-{i}" for i in range(1, 9)]
        first.kill()  # kill -9: the kernel drops the lock with the process
        again = ServerProcess(data).start()
        try:
            assert _read(again.bootstrap, 8) == [f"A-{i}" for i in range(1, 9)]
        finally:
            again.stop()
    finally:
        first.stop()


def test_storage_commands_refuse_a_directory_a_broker_runs_on(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = ServerProcess(data).start()
    try:
        props = tmp_path / "node.properties"
        props.write_text(f"log.dirs={data}\nnode.id=1\n")
        stray = data / "t-0.0123456789abcdef0123456789abcdef-stray"
        stray.mkdir()
        done = subprocess.run([*serve_command()[:-1], "storage", "restore-stray", str(stray),
                               "-c", str(props)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 1 and "in use by" in done.stderr, done
        assert stray.is_dir()
    finally:
        broker.stop()
