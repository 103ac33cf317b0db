"""The IO shell of the group coordinator: ``__consumer_offsets``, waiting requests, timers.

:class:`GroupRuntime` owns the pure :class:`~odradek.coordinator.coordinator.GroupCoordinator`.
A handler calls :meth:`GroupRuntime.call` with the operation; the runtime hands
the operation a token, appends the records the operation returns to their
``__consumer_offsets`` partitions (one batch per partition, key and value in
Kafka's format, see :mod:`odradek.coordinator.records`), replays them into the
coordinator, and then resolves the futures of the answered tokens — the
caller's own, or, for a JoinGroup that completes a rebalance, every member's.
A timer runs :meth:`GroupCoordinator.poll` at the coordinator's next deadline
(session expiry, rebalance and sync timeouts, the initial rebalance delay).

Durability: a commit is acknowledged once its record is appended to the log
(in the page cache), the same as a Produce with acks=all on one node; the
topic's flush settings decide fsync. ``__consumer_offsets`` is created on the
first FindCoordinator (or at start-up when a group request finds it missing)
with ``offsets.topic.num.partitions`` partitions and ``cleanup.policy=compact``.
At start-up each existing partition is replayed in a background task; until a
group's partition is loaded its requests get COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from odradek.broker.partitions import Partition
from odradek.broker.state import BrokerState
from odradek.coordinator import records as crecords
from odradek.coordinator.coordinator import GroupCoordinator
from odradek.coordinator.core import Effects, GroupConfig
from odradek.coordinator.group import Token
from odradek.coordinator.records import OFFSETS_TOPIC, CoordinatorRecord
from odradek.metadata import controller
from odradek.storage.errors import StorageError
from odradek.wire.primitives import DecodeError
from odradek.wire.records import Record, build_batch, decode_batch

log = logging.getLogger("odradek.groups")

OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "104857600",
    "compression.type": "producer",
}
_LOAD_CHUNK_BYTES = 1 << 20


class CoordinatorWriteError(Exception):
    """The records of an operation could not be appended; nothing was acknowledged."""


class GroupRuntime:
    def __init__(self, state: BrokerState) -> None:
        self.state = state
        self.clock = state.clock
        self.coordinator = GroupCoordinator(GroupConfig.from_properties(state.config.get_int))
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._next_token = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at_ms: int | None = None
        self._load_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._expiry_task: asyncio.Task[None] | None = None

    # -- start-up and the offsets topic ---------------------------------------------------

    def start(self) -> None:
        """Begin replaying ``__consumer_offsets`` (in the background) if it exists,
        and expiring offsets every ``offsets.retention.check.interval.ms``."""
        loop = asyncio.get_running_loop()
        self._expiry_task = loop.create_task(self._expire_forever())
        if OFFSETS_TOPIC not in self.state.image.topics:
            self.coordinator.loading.clear()
            return
        self._load_task = asyncio.get_running_loop().create_task(self._load_all())

    def ensure_topic(self) -> bool:
        """Create ``__consumer_offsets`` if it does not exist; True when it does."""
        state = self.state
        if OFFSETS_TOPIC in state.image.topics:
            return True
        outcome = controller.create_topic(
            state.image, OFFSETS_TOPIC, self.coordinator.config.offsets_partitions, -1,
            OFFSETS_TOPIC_CONFIGS, node_id=state.node_id, default_partitions=1,
        )
        if outcome.error:
            log.error("cannot create %s: %s", OFFSETS_TOPIC, outcome.message)
            return False
        state.commit(outcome.records)
        self.coordinator.loading.clear()
        return True

    async def _load_all(self) -> None:
        for p in sorted(self.coordinator.loading):
            part = self.state.partitions.get(OFFSETS_TOPIC, p)
            if part is not None:
                try:
                    self._load(part)
                except (DecodeError, StorageError):
                    log.exception("%s-%d: unreadable records; loaded what came before",
                                  OFFSETS_TOPIC, p)
            self.coordinator.loaded(p, self.clock.now_ms())
            await asyncio.sleep(0)  # let requests in between partitions
        self._reschedule()

    def _load(self, part: Partition) -> None:
        plog = part.log
        offset = plog.log_start_offset
        now = self.clock.now_ms()
        while offset < plog.high_watermark:
            data = plog.read_records(offset, _LOAD_CHUNK_BYTES, max_offset=plog.high_watermark)
            if not data:
                break
            pos = 0
            while pos < len(data):
                header, batch = decode_batch(data, pos)
                pos += header.size
                offset = header.next_offset
                if header.is_control:
                    continue
                for r in batch:
                    try:
                        record = crecords.decode(r.key or b"", r.value)
                    except DecodeError:
                        log.warning("%s-%d offset %d: not a coordinator record; skipped",
                                    OFFSETS_TOPIC, part.index, r.offset)
                        continue
                    if record is not None:
                        self.coordinator.replay([record], now)

    async def _expire_forever(self) -> None:
        config = self.state.config
        interval_s = config.get_int("offsets.retention.check.interval.ms") / 1000
        retention_ms = config.get_int("offsets.retention.minutes") * 60_000
        while True:
            await asyncio.sleep(interval_s)
            await self.expire_offsets(retention_ms)

    async def expire_offsets(self, retention_ms: int) -> None:
        """One expiry pass (tombstones for expired offsets and emptied groups)."""
        if OFFSETS_TOPIC in self.state.image.topics:
            await self.apply(self.coordinator.expire_offsets(self.clock.now_ms(), retention_ms))

    async def topics_deleted(self, topics: set[str]) -> None:
        """Drop the committed offsets of deleted topics."""
        if OFFSETS_TOPIC in self.state.image.topics:
            await self.apply(self.coordinator.delete_topic_offsets(topics))

    # -- operations ---------------------------------------------------------------------

    async def call(self, op: Callable[[Token], Effects]) -> Any:
        """Run ``op`` with a new token and wait for the answer to that token."""
        token = self._next_token
        self._next_token += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[token] = fut
        try:
            await self.apply(op(token))
            return await fut
        finally:
            self._waiting.pop(token, None)

    async def apply(self, fx: Effects) -> None:
        """Append and replay ``fx.records``, then deliver ``fx.replies``."""
        error: CoordinatorWriteError | None = None
        if fx.records:
            try:
                flushes = self._write(fx.records)
                self.coordinator.replay(fx.records, self.clock.now_ms())
                for part in flushes:
                    await self.state.partitions.flush(part)
            except (StorageError, OSError) as exc:
                log.error("group coordinator write failed: %s", exc)
                error = CoordinatorWriteError(str(exc))
        for token, response in fx.replies:
            fut = self._waiting.get(token)  # type: ignore[call-overload]
            if fut is not None and not fut.done():
                if error is not None:
                    fut.set_exception(error)
                else:
                    fut.set_result(response)
        self._reschedule()

    def _write(self, records: list[CoordinatorRecord]) -> list[Partition]:
        """Append records, one batch per partition; the partitions that want an fsync."""
        by_partition: dict[int, list[CoordinatorRecord]] = {}
        for r in records:
            by_partition.setdefault(self.coordinator.partition_of(r.group), []).append(r)
        now = self.clock.now_ms()
        flushes = []
        for p, recs in by_partition.items():
            part = self.state.partitions.get(OFFSETS_TOPIC, p)
            if part is None:
                raise CoordinatorWriteError(f"{OFFSETS_TOPIC}-{p} does not exist")
            batch = build_batch([
                Record(i, now, *crecords.encode(r)) for i, r in enumerate(recs)
            ])
            info = part.log.append(batch, leader_epoch=part.leader_epoch)
            part.log.advance_high_watermark(part.log.log_end_offset)
            part.notify()
            if info.flush_due:
                flushes.append(part)
        return flushes

    # -- the timer ----------------------------------------------------------------------

    def _reschedule(self) -> None:
        due = self.coordinator.next_deadline_ms()
        if due is None or (self._timer_at_ms is not None and self._timer_at_ms <= due):
            return
        if self._timer is not None:
            self._timer.cancel()
        delay_s = max(0.0, (due - self.clock.now_ms()) / 1000) + 0.001
        self._timer_at_ms = due
        self._timer = asyncio.get_running_loop().call_later(delay_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at_ms = None
        task = asyncio.get_running_loop().create_task(
            self.apply(self.coordinator.poll(self.clock.now_ms()))
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiry_task
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._load_task is not None:
            self._load_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._load_task
        for task in list(self._tasks):
            with contextlib.suppress(Exception):
                await task
