"""``odradek dump-log`` on files a real broker wrote (and on damaged copies)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from odradek.testing.broker import Broker

SEGMENT = "00000000000000000000"


@pytest.fixture(scope="module")
def partition_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("data")
    with Broker(data_dir=str(data), **{"log.index.interval.bytes": "150"}) as b:
        b.create_topic("dumped", 1)
        producer = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0,
                             "compression.type": "gzip"})
        for i in range(40):
            producer.produce("dumped", f"value-{i} {'x' * 300}".encode(), key=f"key-{i}".encode(),
                             headers=[("n", str(i).encode())])
            producer.flush(10)  # one batch per record: the indexes get entries
    return data / "dumped-0"  # a clean stop wrote the indexes out


def dump(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "odradek", "dump-log", *args],
                          capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_log_with_records(partition_dir: Path) -> None:
    out = dump(str(partition_dir / f"{SEGMENT}.log"), "--records").stdout
    assert out.count("baseOffset:") == 40 and "compression: gzip" in out
    for i in (0, 17, 39):
        assert f"key: key-{i} value: value-{i} {'x' * 300} headers: n={i}" in out
    assert "PROBLEM" not in out


def test_json_parses_back(partition_dir: Path) -> None:
    (log,) = json.loads(dump(str(partition_dir / f"{SEGMENT}.log"), "--json").stdout)
    assert [b["base_offset"] for b in log["batches"]] == list(range(40))
    assert all(b["crc_valid"] and b["count"] == 1 for b in log["batches"])
    assert log["problems"] == []
    limited = json.loads(dump(str(partition_dir / f"{SEGMENT}.log"), "--json",
                              "--max-batches", "5").stdout)
    assert len(limited[0]["batches"]) == 5


def test_indexes_are_listed_and_checked(partition_dir: Path) -> None:
    index, timeindex = json.loads(dump(str(partition_dir / f"{SEGMENT}.index"),
                                       str(partition_dir / f"{SEGMENT}.timeindex"),
                                       "--json").stdout)
    assert len(index["entries"]) >= 5 and index["problems"] == []
    offsets = [e["offset"] for e in index["entries"]]
    assert offsets == sorted(set(offsets))
    assert timeindex["entries"] and timeindex["problems"] == []


def test_torn_and_corrupt_logs_are_reported(partition_dir: Path, tmp_path: Path) -> None:
    original = (partition_dir / f"{SEGMENT}.log").read_bytes()
    torn = tmp_path / f"{SEGMENT}.log"
    torn.write_bytes(original[: len(original) - 10])
    out = dump(str(torn)).stdout
    assert out.count("baseOffset:") == 39 and "PROBLEM: torn batch at position" in out
    (log,) = json.loads(dump(str(partition_dir / f"{SEGMENT}.log"), "--json").stdout)
    third = log["batches"][2]["position"]
    flipped = bytearray(original)
    flipped[third + 40] ^= 0xFF  # inside the CRC-covered part of the third batch
    torn.write_bytes(bytes(flipped))
    (result,) = json.loads(dump(str(torn), "--json").stdout)
    # The damaged batch is reported and skipped; reading resumes at the next one.
    fourth = log["batches"][3]["position"]
    assert [b["position"] for b in result["batches"]] == [
        b["position"] for i, b in enumerate(log["batches"]) if i != 2]
    assert any(f"damaged bytes at positions {third}..{fourth - 1}" in p
               and f"resume at position {fourth}" in p for p in result["problems"])
    moved = bytearray(original)
    moved[third + 7] ^= 0x01  # baseOffset is outside the CRC: caught by the offset check
    torn.write_bytes(bytes(moved))
    (result,) = json.loads(dump(str(torn), "--json").stdout)
    assert any("does not follow" in p for p in result["problems"])


def test_a_bad_index_entry_is_reported(partition_dir: Path, tmp_path: Path) -> None:
    for suffix in (".log", ".index"):
        shutil.copy(partition_dir / f"{SEGMENT}{suffix}", tmp_path / f"{SEGMENT}{suffix}")
    index = tmp_path / f"{SEGMENT}.index"
    data = bytearray(index.read_bytes())
    data[7] ^= 0x01  # the first entry's position no longer starts a batch
    index.write_bytes(bytes(data) + b"\x00\x01")
    (result,) = json.loads(dump(str(index), "--json").stdout)
    assert any("no batch ending at offset" in p for p in result["problems"])
    assert any("trailing bytes" in p for p in result["problems"])


def test_errors_are_one_line(tmp_path: Path) -> None:
    missing = dump(str(tmp_path / f"{SEGMENT}.log"), ok=False)
    assert missing.returncode == 1 and missing.stderr.startswith("odradek: cannot read")
    odd = tmp_path / "notes.txt"
    odd.write_text("x")
    wrong = dump(str(odd), ok=False)
    assert wrong.returncode == 1 and "not a segment file" in wrong.stderr
    assert len(wrong.stderr.strip().splitlines()) == 1


def test_markers_txnindex_and_producer_snapshot(tmp_path: Path) -> None:
    with Broker(data_dir=str(tmp_path)) as b:
        b.create_topic("txn", 1)
        producer = Producer({"bootstrap.servers": b.bootstrap_servers,
                             "transactional.id": "dump"})
        producer.init_transactions(10)
        producer.begin_transaction()
        producer.produce("txn", b"kept")
        producer.commit_transaction(10)
        producer.begin_transaction()
        producer.produce("txn", b"dropped")
        producer.flush(10)
        producer.abort_transaction(10)
    part = tmp_path / "txn-0"
    log = dump("--records", str(part / f"{SEGMENT}.log")).stdout
    assert "| offset: 1 endTxnMarker: COMMIT coordinatorEpoch: 0" in log
    assert "| offset: 3 endTxnMarker: ABORT coordinatorEpoch: 0" in log
    index = dump(str(part / f"{SEGMENT}.txnindex")).stdout
    assert "firstOffset: 2 lastOffset: 3 lastStableOffset: 4" in index
    (snapshot,) = part.glob("*.snapshot")
    assert snapshot.name == "00000000000000000004.snapshot"  # written at the clean stop
    data = json.loads(dump("--json", str(snapshot)).stdout)
    (entry,) = data[0]["entries"]
    assert (entry["last_sequence"], entry["last_offset"], entry["current_txn_first_offset"]) == (
        1, 2, -1)
    damaged = tmp_path / "00000000000000000004.snapshot"
    damaged.write_bytes(snapshot.read_bytes()[:-3])
    assert "PROBLEM: producer snapshot of" in dump(str(damaged)).stdout


def test_compacted_log_shows_gaps_and_tombstones(tmp_path: Path) -> None:
    """After a cleaner pass: the offsets it removed are INFO gaps (between batches,
    before the first batch, inside a rebuilt batch), never problems, and a null
    value is marked as a tombstone."""
    with Broker(data_dir=str(tmp_path), **{"log.cleaner.backoff.ms": "50"}) as b:
        b.create_topic("table", 1, {"cleanup.policy": "compact", "segment.ms": "100",
                                    "min.cleanable.dirty.ratio": "0.01"})
        producer = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 50})
        for rnd in range(4):  # one batch a round, one segment a round
            for k in range(10):
                producer.produce("table", f"v{rnd}-{k}".encode(), key=f"key-{k}".encode())
            if rnd == 3:
                producer.produce("table", None, key=b"key-0")  # offset 40
            producer.flush(10)
            time.sleep(0.11)  # segment.ms passes: the next append rolls
        producer.produce("table", b"x", key=b"nudge")  # rolls the last round's segment
        producer.flush(10)
        checkpoint = tmp_path / "cleaner-offset-checkpoint"
        deadline = time.monotonic() + 30
        while not (checkpoint.exists() and "table 0 41" in checkpoint.read_text()):
            assert time.monotonic() < deadline, "the cleaner did not run"
            time.sleep(0.05)
    segment = tmp_path / "table-0" / f"{SEGMENT}.log"
    (result,) = json.loads(dump(str(segment), "--records", "--json").stdout)
    assert result["problems"] == []
    assert [(b["base_offset"], b["last_offset"], b["count"]) for b in result["batches"]] == [
        (30, 40, 10)]  # rounds 0-2 vanished; key-0's value at 30 went for its tombstone
    assert result["gaps"] == [
        {"first_offset": 0, "last_offset": 29, "position": 0, "inside_batch": False},
        {"first_offset": 30, "last_offset": 30, "position": 0, "inside_batch": True},
    ]
    records = result["batches"][0]["records"]
    assert [r["offset"] for r in records] == list(range(31, 41))
    assert [r["tombstone"] for r in records] == [False] * 9 + [True]
    out = dump(str(segment), "--records").stdout
    assert "INFO: gap: offsets 0..29 absent before the batch at position 0" in out
    assert "INFO: gap: offset 30 absent inside the batch at position 0" in out
    assert "| offset: 40 " in out and "key: key-0 value: null tombstone: true" in out
    assert "key: key-1 value: v3-1 headers:" in out and "PROBLEM" not in out
    assert out.index("INFO: gap: offsets 0..29") < out.index("baseOffset: 30")
