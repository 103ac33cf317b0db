"""The log cleaner against raw file IO, and produce throughput while it runs.

    python benchmarks/cleaner_bench.py [--gb 1.0] [--keys 100000] [--value-bytes 1024]
                                       [--segment-mib 128] [--runs 3]
                                       [--produce-mb 500] [--produce-keys 10000]
                                       [--skip clean,produce]

(a) One cleaner pass: a compacted log of about ``--gb`` 10^9 bytes is built on
    real disk (a temporary directory under /tmp, ``--segment-mib`` segments,
    ``--keys`` distinct keys written round-robin, so every key appears about
    gb*10^9 / (keys * value) times, 100 records a batch, no compression). Then,
    after ``sync()``, ``plan_pass(force=True)`` + ``run()`` (offset map and
    cleaned files, fsynced) + ``complete()`` (the swap) is timed, with a dedupe
    buffer sized for every key (24 bytes a key, doubled). MB/s = bytes of log
    read by the pass / seconds. Baseline, same files, same run, just before
    the pass: read every segment file in 1 MiB pieces and write a copy,
    fsyncing each copy. Both read from the page cache (the log was just
    written; the machine has the memory), so the ratio compares the cleaner's
    CPU work plus its writes to a plain copy. Goal: cleaner/raw >= 0.5.
(b) Produce throughput into a subprocess broker (``odradek serve``), one
    compacted topic, one partition, 8 MiB segments,
    ``min.cleanable.dirty.ratio=0.01``: ``--produce-mb`` of ~1 KiB values over
    ``--produce-keys`` keys with the confluent-kafka producer, acks=1, with
    ``log.cleaner.backoff.ms=100`` (the cleaner cleans continuously behind the
    producer) against ``log.cleaner.enable=false``. The cleaner's passes are
    counted from the broker's ``cleaner-offset-checkpoint`` moving.

Median of ``--runs`` runs with min-max. The temporary data is removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _common, when run as a script

from _common import ServerProcess, broker_process

from odradek.common.clock import SystemClock
from odradek.storage.cleaner import CleanerView, CleanJob, plan_pass
from odradek.storage.config import MAP_SLOT_BYTES, CleanerSettings, LogConfig
from odradek.storage.fs import OsFileSystem
from odradek.storage.log import Log
from odradek.wire.records import Record, build_batch

MiB = 1 << 20
MB = 10**6
RECORDS_PER_BATCH = 100


# ------------------------------------------------------------------------- (a) one pass


def build_log(path: str, total_bytes: int, keys: int, value_bytes: int,
              segment_bytes: int) -> tuple[Log, int]:
    """A compacted log of about ``total_bytes``, every key written in turn."""
    config = LogConfig(segment_bytes=segment_bytes, cleanup_policy="compact")
    log = Log.open(OsFileSystem(), path, config, SystemClock())
    value = (os.urandom(value_bytes // 2) + b"v" * value_bytes)[:value_bytes]
    now = int(time.time() * 1000)
    # One cycle over every key, built once; appending it again rewrites each key.
    cycle = [
        build_batch([Record(j, now, b"key-%08d" % k, value)
                     for j, k in enumerate(range(first, min(first + RECORDS_PER_BATCH, keys)))])
        for first in range(0, keys, RECORDS_PER_BATCH)
    ]
    i = 0
    while log.size_bytes < total_bytes:
        log.append(cycle[i % len(cycle)])
        i += 1
    log.roll()  # every segment inactive, so every one is cleanable
    log.flush()  # the recovery point passes them (the cleaner only takes flushed segments)
    log.advance_high_watermark(log.log_end_offset)
    return log, i * RECORDS_PER_BATCH


def raw_copy(log: Log, out_dir: str) -> tuple[float, int]:
    """Read every segment file of ``log`` and write a copy, fsynced: (seconds, bytes)."""
    os.makedirs(out_dir)
    os.sync()
    copied = 0
    t0 = time.perf_counter()
    for seg in log.segments[:-1]:
        src = os.open(seg.log_path, os.O_RDONLY)
        dst = os.open(os.path.join(out_dir, os.path.basename(seg.log_path)),
                      os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            pos = 0
            while chunk := os.pread(src, MiB, pos):
                os.write(dst, chunk)
                pos += len(chunk)
            os.fsync(dst)
            copied += pos
        finally:
            os.close(src)
            os.close(dst)
    elapsed = time.perf_counter() - t0
    shutil.rmtree(out_dir)
    return elapsed, copied


def clean_once(log: Log, keys: int) -> tuple[float, CleanJob]:
    """One whole pass (plan, run, complete): (seconds, the job)."""
    settings = CleanerSettings(dedupe_buffer_size=2 * keys * MAP_SLOT_BYTES)
    view = CleanerView(last_stable_offset=log.log_end_offset, aborted=())
    errors: list[BaseException] = []

    def done(_job: CleanJob, error: BaseException | None) -> None:
        if error is not None:
            errors.append(error)

    os.sync()
    t0 = time.perf_counter()
    job = plan_pass(log, view, settings, int(time.time() * 1000), done, force=True)
    if job is None:
        raise RuntimeError("nothing to clean")
    job.run()
    job.complete()
    elapsed = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"the pass failed: {errors[0]}")
    if job.swapped != len(job.plan.groups) or job.plan.map_end != log.active_segment.base_offset:
        raise RuntimeError(f"partial pass: swapped {job.swapped}/{len(job.plan.groups)}, "
                           f"map end {job.plan.map_end}")
    return elapsed, job


def bench_clean(root: str, args: argparse.Namespace) -> None:
    cleaner, raw, ratios = [], [], []
    for r in range(args.runs):
        path = os.path.join(root, f"clean-{r}", "bench-0")
        t0 = time.perf_counter()
        log, records = build_log(path, int(args.gb * 1e9), args.keys, args.value_bytes,
                                 args.segment_mib * MiB)
        built_s = time.perf_counter() - t0
        segments = len(log.segments) - 1
        size = log.size_bytes
        t_raw, copied = raw_copy(log, os.path.join(root, f"copy-{r}"))
        t_clean, job = clean_once(log, args.keys)
        st = job.plan.stats
        assert st.bytes_read == copied, (st.bytes_read, copied)
        raw.append(copied / MB / t_raw)
        cleaner.append(st.bytes_read / MB / t_clean)
        ratios.append(cleaner[-1] / raw[-1])
        print(f"  run {r + 1}: {size / MB:.0f} MB in {segments} segments, {records:,} records "
              f"(built in {built_s:.1f} s); pass {t_clean:.1f} s: read {st.bytes_read / MB:.0f} "
              f"MB, wrote {st.bytes_written / MB:.1f} MB, kept {st.records_kept:,} of "
              f"{st.records_read:,} records in {len(job.plan.groups)} segment(s); "
              f"raw copy {t_raw:.1f} s", flush=True)
        log.close()
        shutil.rmtree(os.path.join(root, f"clean-{r}"))
    print(f"cleaner pass {_s(cleaner, 'MB/s')}  raw read+write+fsync {_s(raw, 'MB/s')}  "
          f"cleaner/raw {statistics.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}] "
          f"(goal >= 0.5)")


# --------------------------------------------------------- (b) produce while it cleans


def produce_run(cleaner_on: bool, args: argparse.Namespace) -> tuple[float, int, int]:
    """msg/s of one produce run, the cleaner checkpoint (first dirty offset) in the
    broker's ``cleaner-offset-checkpoint`` when the last record was acknowledged,
    and the number of records."""
    overrides = ["log.cleaner.backoff.ms=100"] if cleaner_on else ["log.cleaner.enable=false"]
    broker = broker_process(*overrides).start()
    try:
        return _produce(broker, args)
    finally:
        broker.stop()


def _produce(broker: ServerProcess, args: argparse.Namespace,
             ) -> tuple[float, int, int]:
    from confluent_kafka import KafkaError, Message, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    # log_level 2: no notices when the broker stops under a client not yet freed
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 2})
    topic = f"compacted-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": str(8 * MiB),
        "min.cleanable.dirty.ratio": "0.01",
    })])[topic].result(60)
    acked, errors = 0, []

    def delivered(err: KafkaError | None, _msg: Message) -> None:
        nonlocal acked
        if err is None:
            acked += 1
        elif len(errors) < 5:
            errors.append(err)

    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "acks": "1", "linger.ms": 5, "log_level": 2,
        "batch.size": MiB, "batch.num.messages": 1_000_000,
        "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_097_151,
    })
    producer.list_topics(topic, timeout=10)
    value = (os.urandom(args.value_bytes // 2) + b"v" * args.value_bytes)[:args.value_bytes]
    keys = [b"key-%08d" % k for k in range(args.produce_keys)]
    count = args.produce_mb * MB // args.value_bytes
    checkpoint = broker.data_dir / "cleaner-offset-checkpoint"
    t0 = time.perf_counter()
    for i in range(count):
        key = keys[i % len(keys)]
        try:
            producer.produce(topic, value, key, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
            producer.produce(topic, value, key, on_delivery=delivered)
        if not i & 4095:
            producer.poll(0)
    left = producer.flush(120)
    elapsed = time.perf_counter() - t0
    if left or errors or acked != count:
        raise RuntimeError(f"produce: {acked}/{count} acked, errors {errors}")
    return count / elapsed, _first_dirty(checkpoint, topic), count


def _first_dirty(checkpoint: Path, topic: str) -> int:
    """The topic's entry in the broker's cleaner-offset-checkpoint (-1: none yet)."""
    try:
        lines = checkpoint.read_text().splitlines()[2:]
    except FileNotFoundError:
        return -1
    for line in lines:
        name, partition, offset = line.split()
        if name == topic and partition == "0":
            return int(offset)
    return -1


def bench_produce(args: argparse.Namespace) -> None:
    on: list[float] = []
    off: list[float] = []
    for r in range(args.runs):
        for cleaner_on, out in ((False, off), (True, on)):
            rate, first_dirty, count = produce_run(cleaner_on, args)
            out.append(rate)
            what = (f"cleaner on (cleaned up to offset {first_dirty:,} of {count:,} by the "
                    f"last ack)" if cleaner_on else "cleaner off")
            print(f"  run {r + 1}: {what}: {rate:,.0f} msg/s", flush=True)
    print(f"produce {args.produce_mb} MB, {args.value_bytes} B values, "
          f"{args.produce_keys} keys: cleaner on {_s(on, 'msg/s')}  cleaner off "
          f"{_s(off, 'msg/s')}  on/off {statistics.median(on) / statistics.median(off):.2f}")


def _s(values: list[float], unit: str) -> str:
    return f"{statistics.median(values):,.1f} {unit} [{min(values):,.1f}-{max(values):,.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--gb", type=float, default=1.0, help="log size, 10^9 bytes")
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--segment-mib", type=int, default=128)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--produce-mb", type=int, default=500)
    parser.add_argument("--produce-keys", type=int, default=10_000)
    parser.add_argument("--skip", default="", help="comma-separated: clean, produce")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    root = tempfile.mkdtemp(prefix="odradek-cleaner-bench-", dir="/tmp")
    try:
        if "clean" not in skip:
            print(f"(a) one cleaner pass over {args.gb:g} GB, {args.keys:,} keys, "
                  f"{args.value_bytes} B values, {args.segment_mib} MiB segments, "
                  f"median of {args.runs}", flush=True)
            bench_clean(root, args)
        if "produce" not in skip:
            print(f"(b) produce into a compacted topic, cleaner on vs off, median of "
                  f"{args.runs}", flush=True)
            bench_produce(args)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
