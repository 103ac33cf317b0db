"""The partition-writer port of the coordinator runtime, over the replica wing.

:class:`PartitionManagerWriter` implements
:class:`~odradek.broker.coordinators.coordinator_runtime.PartitionWriter` for
one internal topic on the broker's
:class:`~odradek.broker.replica.partitions.PartitionManager`: it is the only
part of the coordinators that touches a :class:`Partition` of that topic.

* **read**: a partition's batches from an offset up to its written log end
  (a new leader's HW may lag behind it for a moment, but what its log holds is
  what its followers will hold; on one node the HW is the log end), decoded
  into data records (:class:`Entry`) and transaction markers (:class:`Marker`).
  Control batches hold one record whose key is ``version:int16, type:int16``
  (type 0 abort, 1 commit) and whose value is ``version:int16,
  coordinatorEpoch:int32``;
* **append**: one batch through the partition layer with
  :attr:`~odradek.replication.partition.Origin.COORDINATOR`;
* **completed**: the append's write, its fsync when ``flush.messages`` asks,
  and the HW passing it (``acks=all``); every failure is a
  :class:`~odradek.broker.ports.CoordinatorWriteError`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

from odradek.broker.coordinators.coordinator_runtime import Entry, Marker, ReadChunk, Written
from odradek.broker.ports import CoordinatorWriteError, PartitionGoneError
from odradek.broker.replica.partitions import Partition, PartitionManager
from odradek.replication.partition import Appended, Origin
from odradek.storage.errors import StorageError
from odradek.wire.batch import NO_PRODUCER_ID
from odradek.wire.primitives import DecodeError
from odradek.wire.records import CONTROL_COMMIT, Record, build_batch, decode_batch

_CONTROL_KEY = struct.Struct(">hh")


class PartitionManagerWriter:
    """The partitions of ``topic`` as the coordinator runtime sees them."""

    def __init__(self, topic: str, partitions: PartitionManager) -> None:
        self.topic = topic
        self.partitions = partitions

    def get(self, index: int) -> Partition | None:
        return self.partitions.get(self.topic, index)

    def partition(self, index: int) -> Partition:
        part = self.get(index)
        if part is None:
            raise CoordinatorWriteError(f"{self.topic}-{index} does not exist")
        return part

    # -- state --------------------------------------------------------------------------

    def is_leader(self, index: int) -> bool:
        part = self.get(index)
        return part is not None and part.state.is_leader

    def leader_epoch(self, index: int) -> int:
        part = self.get(index)
        return part.state.leader_epoch if part is not None else -1

    def log_start(self, index: int) -> int:
        part = self.get(index)
        return part.log.log_start_offset if part is not None else 0

    def log_end(self, index: int) -> int | None:
        part = self.get(index)
        return part.state.log_end_offset if part is not None else None

    def high_watermark(self, index: int) -> int | None:
        part = self.get(index)
        return part.state.high_watermark if part is not None else None

    # -- reading ------------------------------------------------------------------------

    def read(self, index: int, offset: int, max_bytes: int) -> ReadChunk:
        """The records of the batches from ``offset`` on (at least one batch, about
        ``max_bytes``), below the log end."""
        part = self.get(index)
        records: list[Entry | Marker] = []
        if part is None:
            return ReadChunk(records, offset)
        try:
            data = part.log.read_records(offset, max_bytes,
                                         max_offset=part.state.log_end_offset)
            pos = 0
            while pos < len(data):
                header, batch = decode_batch(data, pos)
                pos += header.size
                pid, epoch = header.producer_id, header.producer_epoch
                if header.is_control:
                    for r in batch:
                        if r.key is not None and len(r.key) >= _CONTROL_KEY.size:
                            _, kind = _CONTROL_KEY.unpack_from(r.key)
                            records.append(Marker(r.offset, pid, epoch, kind == CONTROL_COMMIT))
                else:
                    records.extend(Entry(r.offset, pid, epoch, r.key, r.value) for r in batch)
                offset = header.next_offset
        except (DecodeError, StorageError) as exc:
            return ReadChunk(records, offset, exc)
        return ReadChunk(records, offset)

    def read_partition(self, index: int) -> Iterator[Entry | Marker]:
        """Every record of ``topic-index`` from its log start to its log end (in one
        go: tests and tools). Raises StorageError or DecodeError where the log
        cannot be read on."""
        offset = self.log_start(index)
        while offset < (self.log_end(index) or 0):
            chunk = self.read(index, offset, 1 << 20)
            yield from chunk.records
            if chunk.error is not None:
                raise chunk.error
            if chunk.next_offset <= offset:
                return
            offset = chunk.next_offset

    # -- writing ------------------------------------------------------------------------

    def append(
        self, index: int, records: Sequence[tuple[bytes | None, bytes | None]], now_ms: int,
        *, producer_id: int = NO_PRODUCER_ID, producer_epoch: int = -1,
        base_sequence: int = -1, transactional: bool = False,
    ) -> Written:
        """Append ``records`` (key, value) as one batch to ``topic-index``. Raises
        CoordinatorWriteError if the partition is missing or the append fails."""
        part = self.partition(index)
        batch = build_batch(
            [Record(i, now_ms, k, v) for i, (k, v) in enumerate(records)],
            producer_id=producer_id, producer_epoch=producer_epoch,
            base_sequence=base_sequence, transactional=transactional,
        )
        try:
            result = self.partitions.append_now(part, memoryview(batch), Origin.COORDINATOR)
        except StorageError as exc:  # the partition layer answers codes; be safe
            raise CoordinatorWriteError(str(exc)) from exc
        if result.error_code:
            raise CoordinatorWriteError(
                f"{self.topic}-{index}: append failed ({result.error_code}): "
                f"{result.error_message}")
        first = result.last_offset - len(records) + 1
        return Written(index, first, result.last_offset, (part, result))

    async def completed(self, written: Written) -> None:
        part, result = written.handle
        assert isinstance(part, Partition) and isinstance(result, Appended)
        try:
            await self.partitions.complete(part, result, acks=-1)
        except (OSError, StorageError, PartitionGoneError) as exc:
            raise CoordinatorWriteError(str(exc)) from exc

    async def wait_for_high_watermark(self, index: int, offset: int) -> None:
        part = self.get(index)
        if part is None:
            raise CoordinatorWriteError(f"{self.topic}-{index} does not exist")
        try:
            await part.wait_for_high_watermark(offset)
        except PartitionGoneError as exc:
            raise CoordinatorWriteError(str(exc)) from exc
