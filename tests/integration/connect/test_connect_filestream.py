"""FileStream source → topic → sink through ``odradek connect standalone``
(a real worker process and a real broker): the file comes back byte for byte,
and offsets survive a kill -9 (at-least-once: no line lost, only lines after
the committed position may come twice)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from odradek.testing.broker import Broker
from tests.integration.connect.support import (
    WorkerProcess,
    running,
    wait_for,
    worker_props,
    write_properties,
)


def _lines(n: int, start: int = 0) -> str:
    samples = ["plain ascii", "non-ASCII: žluťoučký kůň, 東京, ✓", "", "tab\there", "emoji 🦀"]
    return "".join(f"{i} {samples[i % len(samples)]}\n" for i in range(start, start + n))


def test_round_trip_byte_for_byte(tmp_path: Path) -> None:
    text = _lines(20000)
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text(text, encoding="utf-8")
    with Broker() as broker:
        broker.create_topic("lines", partitions=1)
        worker = write_properties(tmp_path / "worker.properties",
                                  worker_props(broker.bootstrap_servers, tmp_path))
        src = write_properties(tmp_path / "src.properties", {
            "name": "local-file-source", "connector.class": "FileStreamSource",
            "tasks.max": "1", "file": str(source), "topic": "lines", "batch.size": "500"})
        snk = write_properties(tmp_path / "sink.properties", {
            "name": "local-file-sink", "connector.class": "FileStreamSink",
            "tasks.max": "1", "file": str(sink), "topics": "lines"})
        proc = WorkerProcess(worker, [src, snk])
        try:
            wait_for("both running", lambda: running(proc.url, "local-file-source")
                     and running(proc.url, "local-file-sink"))
            wait_for("the sink file complete", lambda: sink.exists()
                     and sink.stat().st_size >= len(text.encode()), timeout=60)
            with source.open("a", encoding="utf-8") as f:  # a tail: later lines follow
                f.write("appended ✓\n")
            wait_for("the appended line", lambda: sink.read_bytes().endswith(
                "appended ✓\n".encode()), timeout=30)
        finally:
            assert proc.terminate() == 0
    assert sink.read_bytes() == source.read_bytes()
    offsets = json.loads((tmp_path / "connect.offsets").read_text())
    assert offsets == [[["local-file-source", {"filename": str(source)}],
                        {"position": source.stat().st_size}]]


def _consume_all(bootstrap: str, topic: str, want: set[str]) -> list[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check",
                         "auto.offset.reset": "earliest", "enable.auto.commit": "false"})
    consumer.subscribe([topic])
    seen: list[str] = []
    try:
        def done() -> bool:
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is None:
                    seen.append((msg.value() or b"").decode())
            return want <= set(seen)
        wait_for("every line in the topic", done, timeout=60)
    finally:
        consumer.close()
    return seen


@pytest.mark.slow
def test_offsets_resume_after_kill_9(tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    first = _lines(100000)
    source.write_text(first, encoding="utf-8")
    offsets_file = tmp_path / "connect.offsets"
    with Broker() as broker:
        broker.create_topic("lines", partitions=1)
        worker = write_properties(tmp_path / "worker.properties",
                                  worker_props(broker.bootstrap_servers, tmp_path))
        src = write_properties(tmp_path / "src.properties", {
            "name": "src", "connector.class": "FileStreamSource", "file": str(source),
            "topic": "lines", "batch.size": "200"})
        proc = WorkerProcess(worker, [src])
        wait_for("a committed offset", lambda: offsets_file.exists()
                 and offsets_file.read_text().strip() not in ("", "[]"), timeout=60)
        proc.kill()
        committed = json.loads(offsets_file.read_text())[0][1]["position"]
        assert 0 < committed <= len(first.encode())
        with source.open("a", encoding="utf-8") as f:
            f.write(_lines(1000, start=100000))
        proc = WorkerProcess(worker, [src])
        try:
            every = source.read_text(encoding="utf-8").splitlines()
            seen = _consume_all(broker.bootstrap_servers, "lines", set(every))
        finally:
            assert proc.terminate() == 0
    # at-least-once: every line; lines wholly before the committed position exactly once
    before = first.encode()[:committed].decode().splitlines()
    counts: dict[str, int] = {}
    for line in seen:
        counts[line] = counts.get(line, 0) + 1
    assert all(counts[line] == 1 for line in before)
    assert all(counts.get(line, 0) >= 1 for line in every)
    assert len(seen) >= len(every)
