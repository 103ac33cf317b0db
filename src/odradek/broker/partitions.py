"""The partitions this node leads: their logs, producer state and waiting fetches.

:class:`PartitionManager` keeps one :class:`Partition` per partition of the
metadata image, opening (or creating) its log under ``log.dirs`` and deleting
the logs of removed topics. It is the IO shell around the pure pieces: the log
(:mod:`odradek.storage.log`) and the idempotent-producer table
(:mod:`odradek.replication.producer_state`).

Durability at ack time (see docs/durability.md): an append is in the page
cache when Produce answers; if ``flush.messages`` is reached by the append the
answer waits for the fsync, which runs on a worker thread and covers every
append made before it started (group commit). Single node: the high watermark
moves to the log end right after each append (the ISR is this node).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from odradek.common.clock import Clock
from odradek.metadata.image import MetadataImage
from odradek.replication.producer_state import ProducerStateTable
from odradek.storage.config import LogConfig, LogManagerConfig, log_config_from_server
from odradek.storage.flush import FlushJob, IoJob
from odradek.storage.fs import FileSystem, OsFileSystem
from odradek.storage.handles import HandleCache
from odradek.storage.log import Log
from odradek.storage.manager import LogManager
from odradek.wire.batch import BatchHeader, read_batch_header
from odradek.wire.primitives import DecodeError
from odradek.wire.records import decode_batch

log = logging.getLogger("odradek.broker")

METADATA_TOPIC = "__cluster_metadata"


@dataclass(slots=True)
class Partition:
    topic: str
    index: int
    log: Log
    leader_epoch: int
    producers: ProducerStateTable = field(default_factory=ProducerStateTable)
    waiters: set[asyncio.Future[None]] = field(default_factory=set)

    def notify(self) -> None:
        """Wake every fetch long-polling this partition."""
        for fut in self.waiters:
            if not fut.done():
                fut.set_result(None)
        self.waiters.clear()

    def record_appended(self, headers: list[BatchHeader], first_offset: int) -> None:
        """Apply the producer state of just-appended batches, with their real offsets."""
        offset = first_offset
        for h in headers:
            self.producers.record(replace(h, base_offset=offset))
            offset += h.last_offset_delta + 1


def batch_headers(records: memoryview) -> list[BatchHeader]:
    """Headers of the batches of a records field; framing only (the log checks CRCs)."""
    out = []
    pos = 0
    while pos < len(records):
        h = read_batch_header(records, pos)
        if h.batch_length <= 0:
            raise DecodeError("impossible batch length")
        out.append(h)
        pos += h.size
    return out


def first_record_at_or_after(batch: bytes, target_timestamp: int) -> tuple[int, int] | None:
    """Offset and timestamp of the first record with timestamp >= target (ListOffsets)."""
    _, records = decode_batch(batch)
    for r in records:
        if r.timestamp >= target_timestamp:
            return r.offset, r.timestamp
    return None


class PartitionManager:
    """The broker's view of the log directory, on top of storage's LogManager."""

    def __init__(
        self, log_dir: str, server_props: dict[str, str], clock: Clock,
        fs: FileSystem | None = None,
    ) -> None:
        self.log_dir = log_dir
        self.fs = fs or OsFileSystem()
        self.clock = clock
        self.defaults = log_config_from_server(server_props)
        props = dict(server_props)
        props["log.dir"] = props["log.dirs"] = log_dir
        self.logs = LogManager(
            self.fs, clock, LogManagerConfig.from_properties(props), self.defaults
        )
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._flushing: dict[tuple[str, int], asyncio.Future[None]] = {}
        self._housekeeping: asyncio.Task[None] | None = None

    @property
    def handles(self) -> HandleCache:
        return self.logs.handles

    def startup(self) -> None:
        """Open every log on disk: after a clean stop trust it, else recover its tail."""
        self.logs.startup()

    def metadata_log(self) -> Log:
        return self.logs.get_or_create_log(METADATA_TOPIC, 0)

    def config_for(self, overrides: dict[str, str]) -> LogConfig:
        return LogConfig.from_properties(overrides, self.defaults)

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def reconcile(self, image: MetadataImage, *, remove: bool = True) -> None:
        """Open logs for new partitions, apply config changes, drop removed topics.

        With ``remove`` false (start-up), logs the image does not know are moved
        aside (``-stray``) and reported rather than deleted: a lost journal must
        not delete data. A log whose topic id (``partition.metadata``) is not the
        image's is another topic's data: it is moved aside too, before the
        image's topic gets a fresh directory, so two topics' data never mix.
        """
        wanted: set[tuple[str, int]] = set()
        for topic in image.topics.values():
            config = self.config_for(topic.configs)
            for p in topic.partitions.values():
                key = (topic.name, p.partition)
                wanted.add(key)
                part = self.partitions.get(key)
                existing = self.logs.get_log(*key) if part is None else None
                if existing is not None and existing.topic_id not in (None, topic.topic_id):
                    where = self.logs.move_aside(*key)
                    log.warning(
                        "%s-%d on disk belongs to topic id %s, not to %s's %s: moved aside "
                        "to %s (nothing deleted)", *key, existing.topic_id, topic.name,
                        topic.topic_id, where)
                if part is None:
                    plog = self.logs.get_or_create_log(
                        topic.name, p.partition, config, topic_id=topic.topic_id
                    )
                    if plog.config != config:
                        plog.update_config(config)
                    self.partitions[key] = self._adopt(topic.name, p.partition, plog,
                                                       p.leader_epoch)
                elif part.log.config != config:
                    part.log.update_config(config)
        for key in [k for k in self.partitions if k not in wanted]:
            part = self.partitions.pop(key)
            part.notify()
            self.logs.delete_log(*key)
        strays = [tp for tp in self.logs.logs() if tp not in wanted and tp[0] != METADATA_TOPIC]
        for tp in strays:
            if remove:
                self.logs.delete_log(*tp)
            else:
                where = self.logs.move_aside(*tp)
                log.warning("%s-%d has no topic in the metadata: moved aside to %s "
                            "(nothing deleted)", *tp, where)

    def _adopt(self, topic: str, index: int, plog: Log, leader_epoch: int) -> Partition:
        # One node: every batch on disk was acknowledged or is the recovered tail
        # of one being written, so the high watermark is the log end.
        plog.advance_high_watermark(plog.log_end_offset)
        part = Partition(topic, index, plog, leader_epoch)
        for h in self._iter_headers(plog):
            part.producers.record(h)
        return part

    @staticmethod
    def _iter_headers(plog: Log) -> Iterable[BatchHeader]:
        """Every batch header of the log, for the producer table. A segment whose
        framing is damaged (found here after a clean shutdown, when nothing was
        validated) is recorded on the log and skipped from the damage on: the
        broker starts, and only fetches that reach the damage fail."""
        for seg in plog.segments:
            offset = seg.base_offset
            try:
                for _, header in seg.iter_headers(0):
                    offset = header.next_offset
                    if header.last_offset >= plog.log_start_offset:
                        yield header
            except DecodeError as exc:
                plog.note_damage(seg.log_path, offset, exc)

    # -- fsync and housekeeping, off the event loop -----------------------------------

    async def _run_job(self, job: IoJob, key: tuple[str, int] | None) -> None:
        fut: asyncio.Future[None] | None = None
        if key is not None:
            fut = asyncio.get_running_loop().create_future()
            self._flushing[key] = fut
        try:
            error: BaseException | None = None
            try:
                await asyncio.to_thread(job.run)
            except OSError as exc:
                error = exc
            job.complete(error)
        finally:
            if key is not None and fut is not None:
                del self._flushing[key]
                fut.set_result(None)

    async def flush(self, part: Partition) -> None:
        """fsync everything appended to ``part`` so far, on a worker thread.

        Waits for a flush already running (started before this append) and
        then flushes what it did not cover; concurrent appends share fsyncs.
        """
        key = (part.topic, part.index)
        while (running := self._flushing.get(key)) is not None:
            await asyncio.shield(running)
        job = part.log.begin_flush()
        if job is not None:
            await self._run_job(job, key)

    async def _housekeep(self) -> None:
        while True:
            tick = self.logs.tick()
            for job in tick.jobs:
                key = None
                if isinstance(job, FlushJob):
                    owner = job.owner
                    assert isinstance(owner, Log)
                    key = (owner.topic, owner.partition)
                await self._run_job(job, key)
            wait_ms = tick.next_deadline_ms - self.clock.monotonic_ms()
            await asyncio.sleep(min(max(wait_ms, 1), 1000) / 1000)

    def start_housekeeping(self) -> None:
        self._housekeeping = asyncio.get_running_loop().create_task(self._housekeep())

    async def close(self) -> None:
        """Stop housekeeping, wait for running fsyncs, then close cleanly
        (flush, checkpoints, clean-shutdown marker)."""
        if self._housekeeping is not None:
            self._housekeeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._housekeeping
            self._housekeeping = None
        for fut in list(self._flushing.values()):
            await asyncio.shield(fut)
        for part in self.partitions.values():
            part.notify()
        await asyncio.to_thread(self.logs.close)
