"""Damaged files on disk: the real broker starts, serves every record outside the
damage exactly once, hands out fresh offsets, and names the damage.

Each case writes a topic through a real ``odradek serve`` (several segments),
stops it cleanly or with kill -9, damages files, and starts the broker again.
Damage is placed from a seed (printed on failure through the test id) so a
failure replays.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.storage.checkpoint import read_offsets
from odradek.storage.fs import OsFileSystem
from odradek.testing.broker import Broker
from odradek.wire.batch import iter_batches
from tests.support.process import ServerProcess

RECORDS = 6000
SEGMENT_BYTES = 60_000


def produce(bootstrap: str, topic: str, start: int, count: int, *, batch_bytes: int = 8192) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2,
                         "batch.size": batch_bytes, "enable.idempotence": True})
    failed: list[object] = []
    for i in range(start, start + count):
        producer.produce(topic, f"record-{i:06d}".encode() * 3, partition=0,
                         on_delivery=lambda err, _m: failed.append(err) if err else None)
        producer.poll(0)
    assert producer.flush(30) == 0 and not failed


def read_all(bootstrap: str, topic: str) -> tuple[list[tuple[int, bytes]], list[str]]:
    """(offset, value) of every record readable from offset 0, and the errors seen;
    stops at the high watermark, or after errors that do not go away."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check",
                         "enable.auto.commit": False, "check.crcs": True})
    out: list[tuple[int, bytes]] = []
    errors: list[str] = []
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        if high == 0:
            return out, errors
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                if m.error() is not None:
                    errors.append(str(m.error()))
                    continue
                out.append((m.offset(), m.value()))
            if len(errors) >= 2:
                break
    finally:
        consumer.close()
    return out, errors


def value(i: int) -> bytes:
    return f"record-{i:06d}".encode() * 3


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory whose topic ``t`` holds RECORDS records over several
    segments, written once per module by a real broker and stopped cleanly."""
    data = tmp_path_factory.mktemp("pristine")
    server = ServerProcess(data, f"log.segment.bytes={SEGMENT_BYTES}", "num.partitions=1")
    server.start()
    try:
        produce(server.bootstrap, "t", 0, RECORDS)
    finally:
        assert server.stop() == 0
    return data


@pytest.fixture
def written(pristine: Path, tmp_path: Path) -> Iterator[Path]:
    """A copy of ``pristine`` for one test to damage (tests make the stop unclean
    by removing the clean-shutdown marker and checkpoints as they need)."""
    import shutil

    data = tmp_path / "data"
    shutil.copytree(pristine, data)
    yield data


def segments(data: Path) -> list[Path]:
    return sorted((data / "t-0").glob("*.log"))


def batch_positions(path: Path) -> list[tuple[int, int, int]]:
    """(position, base offset, last offset) of every batch of a segment file."""
    return [(p, h.base_offset, h.last_offset) for p, h in iter_batches(path.read_bytes())]


def batch_end(batches: list[tuple[int, int, int]], position: int, path: Path) -> int:
    """End position of the batch starting at ``position`` in a segment (before damage)."""
    later = [p for p, _, _ in batches if p > position]
    return later[0] if later else path.stat().st_size


def flip(path: Path, position: int, count: int = 16) -> None:
    with path.open("r+b") as f:
        f.seek(position)
        old = f.read(count)
        f.seek(position)
        f.write(bytes(b ^ 0xFF for b in old))


@pytest.mark.parametrize("interval_ms", [200, 60_000], ids=["interval-200ms", "default-60s"])
def test_kill_9_after_a_checkpoint_recovers_only_the_tail(
    tmp_path: Path, interval_ms: int
) -> None:
    """With the default 60 s interval only the checkpoint written after each
    rolled segment's fsync can bring the recovery point up in time."""
    server = ServerProcess(tmp_path, f"log.segment.bytes={SEGMENT_BYTES}", "num.partitions=1",
                           f"log.flush.offset.checkpoint.interval.ms={interval_ms}")
    server.start()
    try:
        produce(server.bootstrap, "t", 0, RECORDS)
        active = segments(tmp_path)[-1]
        active_base = int(active.stem)
        checkpoint = str(tmp_path / "recovery-point-offset-checkpoint")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # the rolled segments are fsynced and checkpointed
            if os.path.exists(checkpoint):
                points = read_offsets(OsFileSystem(), checkpoint)
                if points.get(("t", 0), -1) >= active_base:
                    break
            time.sleep(0.05)
        else:
            pytest.fail(f"recovery point never reached the active segment at {active_base}")
        produce(server.bootstrap, "t", RECORDS, 100, batch_bytes=200)  # an unflushed tail
    finally:
        server.kill()
    point = read_offsets(OsFileSystem(), str(tmp_path / "recovery-point-offset-checkpoint"))
    rp = point[("t", 0)]
    files = segments(tmp_path)
    total_batches = sum(len(batch_positions(s)) for s in files)
    # Batches in the segment holding the checkpointed recovery point and after it.
    first = max(i for i, f in enumerate(files) if int(f.stem) <= rp)
    tail_batches = sum(len(batch_positions(f)) for f in files[first:])
    with Broker(data_dir=str(tmp_path)) as broker:
        assert broker.app.partitions is not None
        log = broker.app.partitions.logs.get_log("t", 0)
        assert log is not None
        report = log.load_report
        assert not report.clean
        # Only the tail past the recovery point was validated, not the whole log.
        assert 0 < report.validated_batches <= tail_batches
        assert first >= len(files) - 2 and total_batches - tail_batches >= 20
        got, errors = read_all(broker.bootstrap_servers, "t")
    assert not errors
    assert [v for _, v in got] == [value(i) for i in range(RECORDS + 100)]


def start_logged(data: Path, *overrides: str) -> ServerProcess:
    """A broker logging at WARNING, whose stderr the test reads after ``stop()``."""
    return ServerProcess(data, f"log.segment.bytes={SEGMENT_BYTES}", *overrides).start()


def stderr_of(server: ServerProcess) -> str:
    server.stop()
    assert server.proc is not None and server.proc.stderr is not None
    return server.proc.stderr.read()


def check_served(
    bootstrap: str, expected: list[int], *, gap_ok: bool
) -> list[tuple[int, bytes]]:
    """Every expected record is served once, in order, nothing else, no errors
    once consumption skips past damage."""
    got, errors = read_all(bootstrap, "t")
    values = [v for _, v in got]
    assert values == [value(i) for i in expected], errors[:2]
    offsets = [o for o, _ in got]
    assert offsets == sorted(set(offsets))  # increasing, no duplicate
    if not gap_ok:
        assert offsets == list(range(len(offsets)))
    return got


SEEDS = [0, 1, 2]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("where", ["header", "body"])
def test_unclean_stop_damage_in_an_old_segment_costs_only_the_damaged_batch(
    written: Path, seed: int, where: str
) -> None:
    """kill -9 with no recovery point on disk (the issue's case): recovery
    validates every segment; the damaged batch is cut out and every later
    segment kept."""
    rng = random.Random(seed)
    (written / ".kafka_cleanshutdown").unlink(missing_ok=True)
    (written / "recovery-point-offset-checkpoint").unlink()
    files = segments(written)
    victim_file = files[rng.randrange(len(files) - 1)]  # not the active segment
    batches = batch_positions(victim_file)
    position, first, last = batches[rng.randrange(len(batches))]
    flip(victim_file, position + (8 if where == "header" else 61 + rng.randrange(20)))
    server = start_logged(written)
    try:
        expected = [i for i in range(RECORDS) if not first <= i <= last]
        check_served(server.bootstrap, expected, gap_ok=True)
        produce(server.bootstrap, "t", RECORDS, 10)  # fresh offsets after the old end
        got, _ = read_all(server.bootstrap, "t")
        assert [o for o, _ in got[-10:]] == list(range(RECORDS, RECORDS + 10))
    finally:
        log_text = stderr_of(server)
    assert victim_file.name in log_text and "damaged" in log_text
    assert list(victim_file.parent.glob(f"{victim_file.name}.*.damaged"))  # kept for inspection


@pytest.mark.parametrize("seed", SEEDS)
def test_clean_stop_damage_in_an_old_segment_starts_and_reports_it(
    written: Path, seed: int
) -> None:
    """After a clean shutdown old segments are not read at start (as in Kafka):
    the broker starts, everything before and after the damage is served, and a
    fetch that reaches the damage gets CORRUPT_MESSAGE."""
    rng = random.Random(seed)
    files = segments(written)
    victim_file = files[rng.randrange(len(files) - 1)]
    batches = batch_positions(victim_file)
    position, first, _ = batches[rng.randrange(len(batches))]
    flip(victim_file, position + 8)  # the batch length: framing is broken
    assert (written / ".kafka_cleanshutdown").exists()
    server = start_logged(written)
    try:
        got, errors = read_all(server.bootstrap, "t")
        assert [v for _, v in got] == [value(i) for i in range(first)]
        assert errors and any("Invalid message" in e or "CORRUPT" in e.upper() for e in errors)
        # Past the damaged segment everything is served.
        next_base = int(files[files.index(victim_file) + 1].stem)
        consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "past",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition("t", 0, next_base)])
        rest: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(rest) < RECORDS - next_base and time.monotonic() < deadline:
            rest += [m.value() for m in consumer.consume(1000, 0.5) if m.error() is None]
        consumer.close()
        assert rest == [value(i) for i in range(next_base, RECORDS)]
        produce(server.bootstrap, "t", RECORDS, 5)
        _, high = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "w"}
                           ).get_watermark_offsets(TopicPartition("t", 0), timeout=10)
        assert high == RECORDS + 5
    finally:
        log_text = stderr_of(server)
    assert victim_file.name in log_text and "damaged" in log_text


@pytest.mark.parametrize("seed", SEEDS)
def test_unclean_stop_damage_in_the_active_segment_cuts_the_tail(
    written: Path, seed: int
) -> None:
    """In the active segment damage is taken for a torn write, as Kafka does:
    the log is cut there; nothing before it is lost, no offset is reused."""
    rng = random.Random(seed)
    (written / ".kafka_cleanshutdown").unlink()
    (written / "recovery-point-offset-checkpoint").unlink()
    active = segments(written)[-1]
    batches = batch_positions(active)
    position, first, _ = batches[rng.randrange(len(batches))]
    flip(active, position + 61 + rng.randrange(20))
    server = start_logged(written)
    try:
        check_served(server.bootstrap, list(range(first)), gap_ok=False)
        produce(server.bootstrap, "t", RECORDS, 3)
        got, _ = read_all(server.bootstrap, "t")
        assert [o for o, _ in got[-3:]] == [first, first + 1, first + 2]
    finally:
        stderr_of(server)


def test_garbage_meta_properties_is_a_one_line_error(written: Path) -> None:
    (written / "meta.properties").write_bytes(random.Random(7).randbytes(200) + b"\xff")
    server = ServerProcess(written)
    with pytest.raises(RuntimeError) as info:
        server.start()
    lines = [ln for ln in str(info.value).split("broker did not start: ", 1)[1].splitlines()
             if ln.strip()]
    assert len(lines) == 1, lines
    assert "meta.properties is damaged" in lines[0] and "restore it" in lines[0]
    assert "Traceback" not in str(info.value)
    assert server.proc is not None and server.proc.wait(10) == 1


def test_meta_properties_of_another_node_is_refused(written: Path) -> None:
    server = ServerProcess(written, "node.id=7")
    with pytest.raises(RuntimeError, match=r"belongs to node.id=1 but this broker has node.id=7"):
        server.start()


def test_lost_metadata_journal_refuses_to_start_then_moves_partitions_aside(
    written: Path,
) -> None:
    import shutil

    shutil.rmtree(written / "__cluster_metadata-0")
    server = ServerProcess(written)
    with pytest.raises(RuntimeError, match=r"metadata journal .* is empty or missing but"):
        server.start()
    assert (written / "t-0").is_dir()  # nothing moved or deleted by the refusal
    server = ServerProcess(written, "num.partitions=1")
    server.overrides.append("odradek.accept.missing.metadata=true")
    server.start()
    try:
        produce(server.bootstrap, "t", 0, 5)  # a new topic t: fresh offsets, old data apart
        got, errors = read_all(server.bootstrap, "t")
        assert not errors and [o for o, _ in got] == [0, 1, 2, 3, 4]
    finally:
        log_text = stderr_of(server)
    strays = list(written.glob("t-0.*-stray"))
    assert len(strays) == 1 and "moved aside" in log_text
    old = sum(len(batch_positions(f)) for f in strays[0].glob("*.log"))
    assert old > 0  # the old records are all still there, apart


def test_partition_of_another_topic_id_is_moved_aside(written: Path) -> None:
    import uuid

    from odradek.storage.checkpoint import format_partition_metadata

    (written / "t-0" / "partition.metadata").write_bytes(
        format_partition_metadata(uuid.UUID(int=42)))
    server = start_logged(written)
    try:
        got, errors = read_all(server.bootstrap, "t")
        assert got == [] and not errors  # t starts empty: the other topic's data is apart
    finally:
        log_text = stderr_of(server)
    assert len(list(written.glob("t-0.*-stray"))) == 1 and "moved aside" in log_text


@pytest.mark.parametrize("seed", SEEDS)
def test_truncated_old_segment_after_an_unclean_stop_keeps_later_segments(
    written: Path, seed: int
) -> None:
    """An old segment cut short (a lost write-back, a bad copy): the batches it
    lost are gone, its whole batches and every later segment are served."""
    rng = random.Random(seed)
    (written / ".kafka_cleanshutdown").unlink()
    (written / "recovery-point-offset-checkpoint").unlink()
    files = segments(written)
    victim = files[rng.randrange(len(files) - 1)]
    batches = batch_positions(victim)
    cut = rng.randrange(batches[1][0], victim.stat().st_size)
    # The first record lost: that of the first batch the cut does not leave whole.
    torn = next(first for p, first, _ in batches if batch_end(batches, p, victim) > cut)
    os.truncate(victim, cut)
    next_base = int(files[files.index(victim) + 1].stem)
    server = start_logged(written)
    try:
        got, errors = read_all(server.bootstrap, "t")
        assert not errors
        offsets = [o for o, _ in got]
        # Everything below the torn batch, nothing from it up to the next segment,
        # everything from the next segment on.
        assert set(range(RECORDS)) - set(offsets) == set(range(torn, next_base))
        assert [v for o, v in got] == [value(o) for o in offsets]
        assert offsets == sorted(set(offsets)) and offsets[-1] == RECORDS - 1
    finally:
        log_text = stderr_of(server)
    assert victim.name in log_text


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
def test_garbage_checkpoints_mean_recover_everything(written: Path, clean: bool) -> None:
    rng = random.Random(11)
    if not clean:
        (written / ".kafka_cleanshutdown").unlink()
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                 "replication-offset-checkpoint"):
        (written / name).write_bytes(rng.randbytes(64))
    server = start_logged(written)
    try:
        check_served(server.bootstrap, list(range(RECORDS)), gap_ok=False)
    finally:
        stderr_of(server)
