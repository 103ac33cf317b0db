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
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from odradek.common.clock import Clock
from odradek.metadata.image import MetadataImage
from odradek.replication.producer_state import ProducerStateTable
from odradek.storage.config import LogConfig, log_config_from_server
from odradek.storage.fs import FileSystem, OsFileSystem
from odradek.storage.handles import HandleCache
from odradek.storage.log import Log
from odradek.storage.names import partition_dir_name
from odradek.wire.batch import BatchHeader, read_batch_header
from odradek.wire.primitives import DecodeError
from odradek.wire.records import decode_batch

log = logging.getLogger("odradek.broker")


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
    def __init__(
        self, log_dir: str, server_props: dict[str, str], clock: Clock,
        fs: FileSystem | None = None, max_open_files: int = 4096,
    ) -> None:
        self.log_dir = log_dir
        self.fs = fs or OsFileSystem()
        self.clock = clock
        self.handles = HandleCache(self.fs, max_open_files)
        self.defaults = log_config_from_server(server_props)
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._flushing: dict[tuple[str, int], asyncio.Future[None]] = {}
        self.fs.makedirs(log_dir)

    def config_for(self, overrides: dict[str, str]) -> LogConfig:
        return LogConfig.from_properties(overrides, self.defaults)

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def reconcile(self, image: MetadataImage) -> None:
        """Open logs for new partitions, apply config changes, drop removed topics."""
        wanted: set[tuple[str, int]] = set()
        for topic in image.topics.values():
            config = self.config_for(topic.configs)
            for p in topic.partitions.values():
                key = (topic.name, p.partition)
                wanted.add(key)
                part = self.partitions.get(key)
                if part is None:
                    self.partitions[key] = self._open(topic.name, p.partition, config,
                                                      topic.topic_id, p.leader_epoch)
                elif part.log.config != config:
                    part.log.update_config(config)
        for key in [k for k in self.partitions if k not in wanted]:
            self._delete(self.partitions.pop(key))

    def _open(self, topic: str, index: int, config: LogConfig, topic_id: object,
              leader_epoch: int) -> Partition:
        path = os.path.join(self.log_dir, partition_dir_name(topic, index))
        plog = Log.open(self.fs, path, config, self.clock, handles=self.handles,
                        topic_id=topic_id)  # type: ignore[arg-type]
        # Nothing else checkpoints the high watermark yet: on one node every
        # recovered batch was acknowledged or is the tail of one being written.
        plog.advance_high_watermark(plog.log_end_offset)
        part = Partition(topic, index, plog, leader_epoch)
        for h in self._iter_headers(plog):
            part.producers.record(h)
        return part

    @staticmethod
    def _iter_headers(plog: Log) -> Iterable[BatchHeader]:
        for seg in plog.segments:
            for _, header in seg.iter_headers(0):
                if header.last_offset >= plog.log_start_offset:
                    yield header

    def _delete(self, part: Partition) -> None:
        part.notify()
        part.log.close()
        self.handles.discard_under(part.log.dir_path)
        self.fs.rmtree(part.log.dir_path)

    async def flush(self, part: Partition) -> None:
        """fsync everything appended to ``part`` so far, on a worker thread.

        Concurrent callers share one fsync when it starts after their append.
        """
        key = (part.topic, part.index)
        while True:
            running = self._flushing.get(key)
            if running is None:
                break
            await asyncio.shield(running)
        job = part.log.begin_flush()
        if job is None:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._flushing[key] = fut
        try:
            error: BaseException | None = None
            try:
                await asyncio.to_thread(job.run)
            except OSError as exc:
                error = exc
            job.complete(error)
        finally:
            del self._flushing[key]
            fut.set_result(None)

    async def flush_all(self) -> None:
        for part in list(self.partitions.values()):
            try:
                await self.flush(part)
            except Exception:  # one bad log must not stop the others
                log.exception("flush of %s-%d failed", part.topic, part.index)

    def close(self) -> None:
        for part in self.partitions.values():
            part.notify()
            part.log.close()
        self.handles.close_all()
