"""The coordinator runtime with a toy shard over in-memory partitions.

:class:`KeyValueShard` is the smallest coordinator there is: per partition, a
dict of string keys to string values (a record with no value deletes its key).
:class:`MemoryPartitions` implements the runtime's partition-writer port with
lists of records, a high watermark the test moves by hand, and leadership the
test flips; one "byte" of a read is one record, so ``load_chunk_bytes`` counts
records. Time is a :class:`ManualClock`. Nothing sleeps: each test waits on
conditions (:func:`until`), a bounded number of event loop turns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from odradek.broker.coordinators.coordinator_runtime import (
    LOAD_ATTEMPTS,
    CoordinatorLoadingError,
    CoordinatorRuntime,
    Entry,
    Marker,
    ReadChunk,
    Written,
)
from odradek.broker.ports import CoordinatorWriteError
from odradek.common.clock import ManualClock
from odradek.common.ids import SeededIds
from odradek.metadata import controller
from odradek.metadata.controller import Outcome
from odradek.metadata.image import MetadataImage
from odradek.storage.errors import CorruptRecordError, OffsetOutOfRangeError
from odradek.wire.batch import NO_PRODUCER_ID

TOPIC = "__toy_state"
KV = tuple[str, str | None]
T = TypeVar("T")


async def until(condition: Callable[[], bool], what: str, turns: int = 2000) -> None:
    """Let the event loop run until ``condition`` holds (at most ``turns`` turns)."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


async def spin(turns: int = 50) -> None:
    """Let every ready task run for a while (to show something did NOT happen)."""
    for _ in range(turns):
        await asyncio.sleep(0)


# -- the port, in memory --------------------------------------------------------------


@dataclass
class MemoryPartition:
    records: list[Entry | Marker] = field(default_factory=list)
    leader: bool = True
    hw: int = 0
    waiters: list[tuple[int, asyncio.Future[None]]] = field(default_factory=list)


class MemoryPartitions:
    """The partition-writer port over lists; the test commits (moves the HW),
    fails writes, truncates and moves leadership by hand."""

    def __init__(self, count: int) -> None:
        self.parts = {i: MemoryPartition() for i in range(count)}
        self.reads: list[tuple[int, int]] = []
        self.read_faults: list[tuple[int, Exception, bool]] = []
        """(offset, error, raised): the next read at or past that offset fails with
        the error, raised or in the chunk after the records before it."""

    # (the port)

    def is_leader(self, index: int) -> bool:
        return index in self.parts and self.parts[index].leader

    def leader_epoch(self, index: int) -> int:
        return 0

    def log_start(self, index: int) -> int:
        return 0

    def log_end(self, index: int) -> int | None:
        part = self.parts.get(index)
        return len(part.records) if part is not None else None

    def high_watermark(self, index: int) -> int | None:
        part = self.parts.get(index)
        return part.hw if part is not None else None

    def read(self, index: int, offset: int, max_bytes: int) -> ReadChunk:
        self.reads.append((index, offset))
        chunk = self.parts[index].records[offset:offset + max_bytes]
        if self.read_faults and offset + len(chunk) > self.read_faults[0][0]:
            at, error, raised = self.read_faults.pop(0)
            if raised:
                raise error
            return ReadChunk(list(chunk[:at - offset]), at, error)
        return ReadChunk(list(chunk), offset + len(chunk))

    def append(
        self, index: int, records: Sequence[tuple[bytes | None, bytes | None]], now_ms: int,
        *, producer_id: int = NO_PRODUCER_ID, producer_epoch: int = -1,
        base_sequence: int = -1, transactional: bool = False,
    ) -> Written:
        part = self.parts[index]
        if not part.leader:
            raise CoordinatorWriteError(f"{TOPIC}-{index} moved")
        first = len(part.records)
        for key, value in records:
            part.records.append(Entry(len(part.records), producer_id, producer_epoch, key, value))
        return Written(index, first, len(part.records) - 1)

    async def completed(self, written: Written) -> None:
        await self.wait_for_high_watermark(written.index, written.last_offset)

    async def wait_for_high_watermark(self, index: int, offset: int) -> None:
        part = self.parts[index]
        if not part.leader:
            raise CoordinatorWriteError(f"{TOPIC}-{index} moved")
        if offset < part.hw:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        part.waiters.append((offset, fut))
        await fut

    # (the test's hands)

    def put(self, index: int, *records: KV | Marker) -> None:
        """Records already in the log, committed."""
        part = self.parts[index]
        for r in records:
            offset = len(part.records)
            part.records.append(
                Marker(offset, r.producer_id, r.producer_epoch, r.committed)
                if isinstance(r, Marker) else
                Entry(offset, NO_PRODUCER_ID, -1, r[0].encode(),
                      None if r[1] is None else r[1].encode()))
        part.hw = len(part.records)

    def commit(self, index: int) -> None:
        """The HW reaches the log end."""
        part = self.parts[index]
        part.hw = len(part.records)
        self._wake(part, lambda offset: offset < part.hw, None)

    def fail_pending(self, index: int) -> None:
        """Every write waiting on ``index`` fails (its fsync failed, an ISR timeout)."""
        part = self.parts[index]
        self._wake(part, lambda offset: True, CoordinatorWriteError(f"{TOPIC}-{index}: failed"))

    def truncate(self, index: int, end: int) -> None:
        part = self.parts[index]
        del part.records[end:]
        self._wake(part, lambda offset: offset >= end,
                   CoordinatorWriteError(f"{TOPIC}-{index}: truncated"))

    def set_leader(self, index: int, leader: bool) -> None:
        part = self.parts[index]
        part.leader = leader
        if not leader:
            self._wake(part, lambda offset: True, CoordinatorWriteError(f"{TOPIC}-{index} moved"))

    @staticmethod
    def _wake(part: MemoryPartition, which: Callable[[int], bool],
              error: Exception | None) -> None:
        keep = []
        for offset, fut in part.waiters:
            if not which(offset):
                keep.append((offset, fut))
            elif not fut.done():
                if error is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(error)
        part.waiters = keep


# -- the shard ------------------------------------------------------------------------


class KeyValueShard:
    """Per partition, key -> value; every call the runtime makes is in ``events``."""

    def __init__(self) -> None:
        self.state: dict[int, dict[str, str]] = {}
        self.replayed: dict[int, list[int]] = {}
        self.markers: list[tuple[int, int, bool, int]] = []
        self.events: list[str] = []
        self.images: list[MetadataImage] = []

    def encode(self, record: KV) -> tuple[bytes | None, bytes | None]:
        key, value = record
        return key.encode(), None if value is None else value.encode()

    def decode(self, key: bytes | None, value: bytes | None) -> KV | None:
        return None if key is None else (key.decode(), None if value is None else value.decode())

    def replay(self, index: int, offset: int, producer_id: int, producer_epoch: int,
               record: KV) -> None:
        self.replayed.setdefault(index, []).append(offset)
        key, value = record
        state = self.state.setdefault(index, {})
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value

    def replay_marker(self, index: int, producer_id: int, commit: bool, offset: int) -> None:
        self.markers.append((index, producer_id, commit, offset))

    def on_loading(self, index: int) -> None:
        self.events.append(f"loading {index}")
        self.state.pop(index, None)
        self.replayed.pop(index, None)

    def on_loaded(self, index: int) -> None:
        self.events.append(f"loaded {index}")

    def on_unloaded(self, index: int) -> None:
        self.events.append(f"unloaded {index}")
        self.state.pop(index, None)

    def on_metadata(self, image: MetadataImage) -> None:
        self.images.append(image)


class Metadata:
    """The metadata the runtime needs, applied at once (no journal)."""

    def __init__(self) -> None:
        self.image = MetadataImage()
        self.node_id = 1
        self.ids = SeededIds(7)

    async def write(self, decide: Callable[[MetadataImage], Outcome]) -> Outcome:
        outcome = decide(self.image)
        for r in outcome.records:
            self.image.replay(r)
        return outcome

    async def create_topic_at_controller(self, name: str, partitions: int,
                                         configs: dict[str, str],
                                         replication_factor: int = -1) -> bool:
        raise AssertionError("one node is its own controller")


@dataclass
class World:
    runtime: CoordinatorRuntime[KV]
    partitions: MemoryPartitions
    shard: KeyValueShard
    metadata: Metadata
    clock: ManualClock


async def world(count: int = 2, *, topic: bool = True, chunk: int = 1 << 20) -> World:
    clock = ManualClock()
    metadata = Metadata()
    if topic:
        await metadata.write(lambda image: controller.create_topic(
            image, TOPIC, count, 1, {}, node_id=1, default_partitions=1,
            topic_id=metadata.ids.uuid()))
    partitions = MemoryPartitions(count)
    shard = KeyValueShard()
    runtime: CoordinatorRuntime[KV] = CoordinatorRuntime(
        TOPIC, count, partitions, shard, metadata, clock, load_chunk_bytes=chunk,
        load_retry_s=0.0)
    return World(runtime, partitions, shard, metadata, clock)


def run(scenario: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(scenario())


# -- the tests ------------------------------------------------------------------------


def test_load_replays_a_partition_in_offset_order_a_chunk_at_a_time() -> None:
    async def scenario() -> None:
        w = await world(2, chunk=3)
        w.partitions.put(0, *[(f"k{i % 4}", f"v{i}") for i in range(9)], ("k0", None),
                         Marker(0, 7, 0, True))
        w.partitions.set_leader(1, False)  # another broker leads partition 1
        seen: list[int] = []
        refused: list[Exception] = []

        async def probe() -> None:
            while not w.runtime.loaded.is_set():
                n = len(w.shard.replayed.get(0, []))
                seen.append(n)
                if 0 < n < 10 and not refused:
                    with pytest.raises(CoordinatorLoadingError) as info:
                        w.runtime.write(0, [("x", "1")])
                    refused.append(info.value)
                await asyncio.sleep(0)

        w.runtime.start()
        assert w.runtime.is_loading(0) and not w.runtime.is_loading(1)
        await asyncio.gather(probe(), w.runtime.loaded.wait())
        assert w.shard.replayed[0] == list(range(10))  # in offset order
        assert w.shard.markers == [(0, 7, True, 10)]
        assert w.shard.state[0] == {"k1": "v5", "k2": "v6", "k3": "v7"}  # k0 deleted last
        assert w.partitions.reads == [(0, 0), (0, 3), (0, 6), (0, 9)]  # chunks of 3
        assert any(0 < n < 10 for n in seen), seen  # other tasks ran between chunks
        assert refused  # no write to a loading partition
        assert w.shard.events == ["loading 0", "unloaded 1", "loaded 0"]
        assert not w.runtime.is_loading(0)
        await w.runtime.close()

    run(scenario)


def test_a_load_that_fails_starts_again_and_never_serves_a_partial_state() -> None:
    """A read failing under a load (the log moved, an IO error, anything raised)
    must not leave the partition loading forever, nor serve the records before
    the failure as if they were all: the load starts again from the log start."""
    async def scenario() -> None:
        w = await world(2, chunk=2)
        for index in (0, 1):
            w.partitions.put(index, *[(f"k{i}", f"v{i}") for i in range(6)])
        w.partitions.read_faults = [
            (3, OffsetOutOfRangeError("the log start moved"), False),
            (1, RuntimeError("anything at all"), True)]
        w.runtime.start()
        await w.runtime.loaded.wait()
        expected = {f"k{i}": f"v{i}" for i in range(6)}
        assert w.shard.state[0] == expected and w.shard.state[1] == expected
        assert w.shard.events == ["loading 0", "loading 1", "loading 0", "loading 0",
                                  "loaded 0", "loaded 1"]
        assert not w.runtime.is_loading(0) and not w.runtime.is_loading(1)
        await w.runtime.close()

    run(scenario)


def test_records_that_stay_unreadable_are_given_up_on_after_some_attempts() -> None:
    async def scenario() -> None:
        w = await world(1, chunk=2)
        w.partitions.put(0, *[(f"k{i}", f"v{i}") for i in range(6)])
        w.partitions.read_faults = [(4, CorruptRecordError("bad crc"), False)] * LOAD_ATTEMPTS
        w.runtime.start()
        await w.runtime.loaded.wait()
        assert w.shard.state[0] == {f"k{i}": f"v{i}" for i in range(4)}
        assert w.shard.events == ["loading 0"] * LOAD_ATTEMPTS + ["loaded 0"]
        await w.runtime.close()

    run(scenario)


def test_a_write_is_replayed_at_once_and_answered_only_once_committed() -> None:
    async def scenario() -> None:
        w = await world(1)
        w.runtime.start()
        await w.runtime.loaded.wait()
        written = w.runtime.write(0, [("a", "1"), ("b", "2")])
        assert (written.first_offset, written.end) == (0, 2)
        assert w.shard.state[0] == {"a": "1", "b": "2"}  # replayed with the append
        assert w.shard.replayed[0] == [0, 1]
        answer = asyncio.ensure_future(w.runtime.committed([written], timeout_s=None))
        settled = asyncio.ensure_future(w.runtime.settled(0, 30))
        await spin()
        assert not answer.done() and not settled.done()  # the HW is still 0
        assert not w.runtime.is_settled(0)
        w.partitions.commit(0)
        await until(answer.done, "the answer")
        answer.result()
        assert await settled and w.runtime.is_settled(0)
        await w.runtime.close()

    run(scenario)


def test_a_write_not_committed_in_time_fails_with_a_retriable_error() -> None:
    async def scenario() -> None:
        w = await world(1)
        w.runtime.start()
        await w.runtime.loaded.wait()
        written = w.runtime.write(0, [("a", "1")])
        with pytest.raises(CoordinatorWriteError, match="not committed within"):
            await w.runtime.committed([written], timeout_s=0.01)
        await w.runtime.close()

    run(scenario)


def test_a_failed_write_while_leader_reloads_the_partition_from_the_committed_log() -> None:
    async def scenario() -> None:
        w = await world(1)
        w.partitions.put(0, ("a", "1"))
        w.runtime.start()
        await w.runtime.loaded.wait()
        assert w.shard.state[0] == {"a": "1"}
        written = w.runtime.write(0, [("a", "2")])
        assert w.shard.state[0] == {"a": "2"}  # ahead of the HW
        answer = asyncio.ensure_future(w.runtime.committed([written], timeout_s=None))
        await spin()
        w.partitions.fail_pending(0)
        with pytest.raises(CoordinatorWriteError):
            await answer
        # Still the leader, with a record in the log that is not committed: the
        # state is dropped and requests wait ...
        assert w.runtime.is_loading(0)
        assert 0 not in w.shard.state
        with pytest.raises(CoordinatorLoadingError):
            w.runtime.write(0, [("b", "1")])
        await spin()
        assert w.runtime.is_loading(0)  # ... until the log is committed to its end
        w.partitions.truncate(0, 1)  # the record that never committed goes
        await until(lambda: not w.runtime.is_loading(0), "the reload")
        assert w.shard.state[0] == {"a": "1"}  # what is committed, and nothing else
        assert w.shard.events == ["loading 0", "loaded 0", "loading 0", "loaded 0"]
        await w.runtime.close()

    run(scenario)


def test_a_failed_write_reloads_nothing_when_the_log_holds_nothing_uncommitted() -> None:
    async def scenario() -> None:
        w = await world(1)
        w.runtime.start()
        await w.runtime.loaded.wait()
        w.partitions.set_leader(0, False)
        with pytest.raises(CoordinatorWriteError, match="moved"):
            w.runtime.write(0, [("a", "1")])
        assert not w.runtime.is_loading(0)
        assert w.shard.events == ["loading 0", "loaded 0"]
        await w.runtime.close()

    run(scenario)


def test_leadership_moving_away_unloads_a_partition_and_stops_its_load() -> None:
    async def scenario() -> None:
        w = await world(1, chunk=1)
        w.partitions.put(0, *[(f"k{i}", "v") for i in range(50)])
        w.runtime.start()
        await until(lambda: len(w.shard.replayed.get(0, [])) >= 2, "the load under way")
        w.partitions.set_leader(0, False)
        w.runtime.leadership_changed([0])
        assert w.shard.events == ["loading 0", "unloaded 0"]
        assert 0 not in w.shard.state
        await w.runtime.loaded.wait()
        await spin()
        assert w.shard.events == ["loading 0", "unloaded 0"]  # the load stopped
        assert len(w.shard.replayed[0]) < 50
        assert w.runtime.leads(0) is False
        # Led here again: loaded again, from the start.
        w.partitions.set_leader(0, True)
        w.runtime.leadership_changed([0])
        await until(lambda: w.shard.events[-1] == "loaded 0", "the second load")
        assert w.shard.replayed[0] == list(range(50))
        assert len(w.shard.state[0]) == 50
        await w.runtime.close()

    run(scenario)


def test_a_marker_another_coordinator_writes_during_a_load_is_replayed_once() -> None:
    async def scenario() -> None:
        w = await world(1, chunk=1)
        w.partitions.put(0, *[(f"k{i}", "v") for i in range(5)])
        w.runtime.start()
        await until(lambda: len(w.shard.replayed.get(0, [])) >= 2, "the load under way")
        w.partitions.put(0, Marker(0, 9, 0, False))  # (at offset 5)
        w.runtime.note_marker(0, 9, False, 6)
        assert w.shard.markers == []  # not into a partition half loaded
        await w.runtime.loaded.wait()
        assert w.shard.markers == [(0, 9, False, 5)]  # read by the load, once
        w.partitions.put(0, Marker(0, 9, 0, True))
        w.runtime.note_marker(0, 9, True, 7)  # loaded: replayed at once
        assert w.shard.markers[-1] == (0, 9, True, 6)
        await w.runtime.close()

    run(scenario)


def test_timers_fire_at_their_deadlines() -> None:
    async def scenario() -> None:
        w = await world(1)
        w.runtime.start()
        fired: list[str] = []

        def note(name: str) -> Callable[[], Awaitable[None]]:
            async def fire() -> None:
                fired.append(name)
            return fire

        now = w.clock.now_ms()
        w.runtime.schedule("a", now + 1000, note("a"))
        w.runtime.schedule("b", now + 500, note("b"))
        w.runtime.schedule("b", now + 900, note("b-later"))  # an earlier one stays
        w.runtime.schedule("c", now + 2000, note("c"))
        w.runtime.schedule("c", now + 1500, note("c-sooner"))  # moved forward
        w.clock.advance(499)
        w.runtime.timers.wake()
        await spin()
        assert fired == []
        w.clock.advance(1)
        w.runtime.timers.wake()
        await until(lambda: fired == ["b"], "b at 500 ms")
        w.clock.advance(499)
        w.runtime.timers.wake()
        await spin()
        assert fired == ["b"]
        w.clock.advance(1)
        w.runtime.timers.wake()
        await until(lambda: fired == ["b", "a"], "a at 1000 ms")
        w.clock.advance(10_000)
        w.runtime.timers.wake()
        await until(lambda: fired == ["b", "a", "c-sooner"], "c at 1500 ms")
        assert w.runtime.timers.deadline("c") is None
        await w.runtime.close()

    run(scenario)


def test_metadata_reaches_the_shard() -> None:
    async def scenario() -> None:
        w = await world(1)
        w.runtime.start()
        image = MetadataImage()
        w.runtime.on_metadata(image)
        assert w.shard.images == [image]
        await w.runtime.close()

    run(scenario)


def test_the_topic_created_after_start_is_served_where_it_is_led() -> None:
    async def scenario() -> None:
        w = await world(2, topic=False)
        w.partitions.set_leader(1, False)
        w.runtime.start()
        await w.runtime.loaded.wait()
        assert w.shard.events == ["loaded 0", "loaded 1"]  # no topic: served empty
        assert await w.runtime.ensure_topic({"cleanup.policy": "compact"})
        topic = w.metadata.image.topics[TOPIC]
        assert sorted(topic.partitions) == [0, 1]
        assert w.shard.events[2:] == ["loaded 0", "unloaded 1"]
        assert await w.runtime.ensure_topic({})  # there: nothing more
        assert len(w.shard.events) == 4
        written = w.runtime.write(0, [("a", "1")])
        w.partitions.commit(0)
        await w.runtime.committed([written], 5)
        await w.runtime.close()

    run(scenario)


def test_close_stops_the_tasks_a_shard_started() -> None:
    async def scenario() -> None:
        w = await world(1)
        w.runtime.start()
        forever = asyncio.Event()

        async def wait_forever() -> None:
            await forever.wait()

        task = w.runtime.spawn(wait_forever())
        await w.runtime.close()
        assert task.cancelled()

    run(scenario)
