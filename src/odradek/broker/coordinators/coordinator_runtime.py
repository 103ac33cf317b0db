"""The coordinator runtime: what every coordinator needs from its partitions.

A coordinator (the group coordinator on ``__consumer_offsets`` today, the
transaction coordinator on ``__transaction_state`` next) is a pure state
machine whose state is the replay of its records. :class:`CoordinatorRuntime`
is the shell part they share, after Kafka's ``CoordinatorRuntime``:

* **loading**: :meth:`CoordinatorRuntime.read_partition` yields a coordinator
  partition's records up to its high watermark as :class:`Entry` (offset,
  producer id and epoch, key, value) and transaction markers as :class:`Marker`
  (the batch's producer, commit or abort), in offset order, for the
  coordinator to replay;
* **writing**: :meth:`CoordinatorRuntime.append` appends one batch of records
  to a coordinator partition through the partition layer
  (:class:`~odradek.replication.partition.Origin` ``COORDINATOR``) and returns a
  :class:`Pending`; the caller replays the records at once (append and replay
  run with nothing in between, so the state follows the log's order), and
  :meth:`CoordinatorRuntime.committed` waits until the records are at or below
  the high watermark (and fsynced if ``flush.messages`` asks) — only then may
  the request be answered. On one node the HW passes at once; in a cluster it
  waits for the ISR.

* **reading only what is committed**: a coordinator applies its records to
  its state when it appends them (its next decisions build on them), so its
  state runs ahead of the high watermark by the writes in flight.
  :meth:`CoordinatorRuntime.settled` waits (bounded) until a partition's HW
  has passed every record this coordinator appended to it: what a read then
  sees is committed. A read that cannot settle (the partition lost its ISR, or
  this broker is cut off from it) answers a retriable error instead of state
  that may never commit (Kafka's runtime reads at the last committed offset of
  its timeline structures). After a write that failed while this broker still
  leads the partition, the coordinator drops the partition's state and loads
  it again from the log once the log is committed up to its end
  (:meth:`CoordinatorRuntime.log_committed`), which reverts what never committed.

Control batches hold one record whose key is ``version:int16, type:int16``
(type 0 abort, 1 commit) and whose value is ``version:int16,
coordinatorEpoch:int32``.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from odradek.broker.ports import CoordinatorWriteError, NotControllerError, PartitionGoneError
from odradek.broker.replica.partitions import Partition, PartitionManager
from odradek.common.ids import Ids
from odradek.metadata import controller
from odradek.metadata.controller import Outcome
from odradek.metadata.image import MetadataImage
from odradek.replication.partition import Appended, Origin
from odradek.storage.errors import StorageError
from odradek.wire.batch import NO_PRODUCER_ID
from odradek.wire.records import Record, build_batch, decode_batch

log = logging.getLogger("odradek.coordinators")
_LOAD_CHUNK_BYTES = 1 << 20
_CONTROL_KEY = struct.Struct(">hh")
CONTROL_ABORT = 0
CONTROL_COMMIT = 1


@dataclass(frozen=True, slots=True)
class Entry:
    """One data record of a coordinator partition."""

    offset: int
    producer_id: int
    producer_epoch: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Marker:
    """A transaction marker: ``producer_id``'s transaction ended at ``offset``."""

    offset: int
    producer_id: int
    producer_epoch: int
    committed: bool


@dataclass(frozen=True, slots=True)
class Pending:
    """Records appended to a coordinator partition, not yet known to be committed."""

    partition: Partition
    result: Appended


class Metadata(Protocol):
    """What a coordinator's shell needs of the broker's metadata (BrokerState has it)."""

    @property
    def image(self) -> MetadataImage: ...

    @property
    def node_id(self) -> int: ...

    @property
    def ids(self) -> Ids: ...

    async def write(self, decide: Callable[[MetadataImage], Outcome]) -> Outcome: ...

    async def create_topic_at_controller(self, name: str, partitions: int,
                                         configs: dict[str, str],
                                         replication_factor: int = -1) -> bool: ...


async def ensure_internal_topic(
    metadata: Metadata, topic: str, partitions: int, configs: Mapping[str, str],
    replication_factor: int = -1,
) -> bool:
    """Create a coordinator's internal topic if it does not exist; True when it does
    (also when another request created it meanwhile)."""
    if topic in metadata.image.topics:
        return True
    try:
        outcome = await metadata.write(lambda image: controller.create_topic(
            image, topic, partitions, replication_factor, configs, node_id=metadata.node_id,
            default_partitions=1, topic_id=metadata.ids.uuid(),
        ))
    except NotControllerError:  # cluster mode: the controller creates it
        return await metadata.create_topic_at_controller(topic, partitions, dict(configs),
                                                         replication_factor)
    if outcome.error and topic not in metadata.image.topics:
        log.error("cannot create %s: %s", topic, outcome.message)
        return False
    return True


class CoordinatorRuntime:
    """Loading and writing for the coordinator of one internal ``topic``."""

    def __init__(self, topic: str, partitions: PartitionManager) -> None:
        self.topic = topic
        self.partitions = partitions
        self.written_end: dict[int, int] = {}
        """Per partition index: the offset after the last batch this coordinator
        appended there."""

    def partition(self, index: int) -> Partition:
        part = self.partitions.get(self.topic, index)
        if part is None:
            raise CoordinatorWriteError(f"{self.topic}-{index} does not exist")
        return part

    # -- loading --------------------------------------------------------------------

    def read_partition(self, index: int) -> Iterator[Entry | Marker]:
        """The records of ``topic-index`` from its log start up to its log end (a new
        leader's HW may lag behind it for a moment, but what its log holds is
        what its followers will hold; on one node the HW is the log end). Raises
        StorageError or DecodeError where the log cannot be read on."""
        part = self.partitions.get(self.topic, index)
        if part is None:
            return
        plog = part.log
        offset = plog.log_start_offset
        while offset < part.state.log_end_offset:
            end = part.state.log_end_offset
            data = plog.read_records(offset, _LOAD_CHUNK_BYTES, max_offset=end)
            if not data:
                break
            pos = 0
            while pos < len(data):
                header, batch = decode_batch(data, pos)
                pos += header.size
                offset = header.next_offset
                pid, epoch = header.producer_id, header.producer_epoch
                if header.is_control:
                    for r in batch:
                        if r.key is not None and len(r.key) >= _CONTROL_KEY.size:
                            _, kind = _CONTROL_KEY.unpack_from(r.key)
                            yield Marker(r.offset, pid, epoch, kind == CONTROL_COMMIT)
                    continue
                for r in batch:
                    yield Entry(r.offset, pid, epoch, r.key, r.value)

    # -- writing --------------------------------------------------------------------

    def append(
        self, index: int, records: Sequence[tuple[bytes | None, bytes | None]], now_ms: int,
        *, producer_id: int = NO_PRODUCER_ID, producer_epoch: int = -1,
        base_sequence: int = -1, transactional: bool = False,
    ) -> Pending:
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
        self.written_end[index] = max(self.written_end.get(index, 0), result.last_offset + 1)
        return Pending(part, result)

    def _written(self, index: int) -> int:
        """Where this coordinator's appends to ``index`` end, as far as the log
        still holds them: a log truncated since (leadership moved and came back)
        no longer has what was appended past its end, and nothing waits for it."""
        part = self.partitions.get(self.topic, index)
        end = self.written_end.get(index, 0)
        return min(end, part.state.log_end_offset) if part is not None else end

    def is_settled(self, index: int) -> bool:
        """Is every record this coordinator appended to ``index`` committed?"""
        part = self.partitions.get(self.topic, index)
        return part is not None and part.state.high_watermark >= self._written(index)

    async def settled(self, index: int, timeout_s: float) -> bool:
        """Wait until the partition's high watermark passes every record this
        coordinator appended to it (True), or until ``timeout_s`` pass or this
        broker stops leading it (False)."""
        return await self._hw_reaches(index, lambda: self._written(index), timeout_s)

    async def log_committed(self, index: int, timeout_s: float) -> bool:
        """Wait until the partition's high watermark reaches its log end: what the
        log holds is then committed, and loading it reverts nothing committed."""
        return await self._hw_reaches(index, lambda: self._log_end(index), timeout_s)

    def _log_end(self, index: int) -> int:
        part = self.partitions.get(self.topic, index)
        return part.state.log_end_offset if part is not None else 0

    async def _hw_reaches(self, index: int, target: Callable[[], int], timeout_s: float,
                          ) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            part = self.partitions.get(self.topic, index)
            if part is None or not part.state.is_leader:
                return False
            want = target()
            if part.state.high_watermark >= want:
                return True
            left = deadline - loop.time()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(part.wait_for_high_watermark(want - 1), left)
            except (TimeoutError, PartitionGoneError):
                return False

    async def committed(self, pending: Sequence[Pending], timeout_s: float | None = None,
                        ) -> None:
        """Wait until every pending append is fsynced where due and at or below the
        HW. Raises CoordinatorWriteError if an fsync fails, a partition goes, or
        ``timeout_s`` passes first (Kafka's ``offsets.commit.timeout.ms``: an ISR
        below ``min.insync.replicas`` holds the HW, and the request is answered
        with a retriable error rather than never)."""
        async def wait() -> None:
            for p in pending:
                await self.partitions.complete(p.partition, p.result, acks=-1)

        try:
            if timeout_s is None:
                await wait()
            else:
                await asyncio.wait_for(wait(), timeout_s)
        except TimeoutError:
            raise CoordinatorWriteError(
                f"{self.topic}: not committed within {timeout_s:g} s") from None
        except (OSError, StorageError, PartitionGoneError) as exc:
            raise CoordinatorWriteError(str(exc)) from exc
