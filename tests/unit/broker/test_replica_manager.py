"""The replica manager's fetch against in-memory logs and a manual clock (no
broker, no sockets): the long poll, a delayed acks=all produce completed by the
followers' fetches, and the checks made before a partition is read."""

from __future__ import annotations

import asyncio
import time

from odradek.broker.ports import FetchParams, PartitionFetch, ProduceEntry
from odradek.broker.replica.manager import ReplicaManager
from odradek.broker.replica.partitions import Partition, PartitionManager
from odradek.common.clock import ManualClock
from odradek.replication.partition import Origin, leader_epoch_error
from odradek.wire.errors import ErrorCode
from odradek.wire.records import Record, build_batch
from tests.unit.broker.test_wings import batch, three_replica_topic


class Leads:
    """The metadata service's answer to which partitions this node serves."""

    def __init__(self, partitions: PartitionManager, serving: bool = True) -> None:
        self.partitions = partitions
        self.serves = serving
        self.registered = True

    def serving(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get(topic, index) if self.serves else None

    def missing_partition_error(self, topic: str, index: int) -> int:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER


def setup(clock: ManualClock) -> tuple[ReplicaManager, Partition, int]:
    view = three_replica_topic(clock)
    part = view.partitions.partitions[("t", 0)]
    return ReplicaManager(view.partitions, Leads(view.partitions), clock.now_ms), part, view.node_id


def consumer(offset: int, wait_ms: int = 0, min_bytes: int = 0) -> tuple[FetchParams,
                                                                          list[PartitionFetch]]:
    return (FetchParams(max_wait_ms=wait_ms, min_bytes=min_bytes, max_bytes=1 << 20),
            [PartitionFetch("t", 0, offset, 1 << 20)])


def followers_of(leader: int) -> list[int]:
    return [b for b in (1, 2, 3) if b != leader]


def test_a_long_poll_returns_when_an_append_makes_records_readable() -> None:
    async def main() -> None:
        clock = ManualClock()
        manager, part, leader = setup(clock)
        manager.partitions.append_now(part, batch(b"a"), Origin.CLIENT, 1)
        for f in followers_of(leader):  # the followers copy it: the HW passes it
            await manager.fetch_records(FetchParams(replica_id=f, max_bytes=1 << 20),
                                        [PartitionFetch("t", 0, 1, 1 << 20)])
        assert part.state.high_watermark == 1
        params, wanted = consumer(1, wait_ms=10_000, min_bytes=1)
        started = time.monotonic()
        fetch = asyncio.ensure_future(manager.fetch_records(params, wanted))
        await asyncio.sleep(0.05)
        assert not fetch.done()  # nothing past offset 1 yet: it waits
        manager.partitions.append_now(part, batch(b"b"), Origin.CLIENT, 1)
        for f in followers_of(leader):
            await manager.fetch_records(FetchParams(replica_id=f, max_bytes=1 << 20),
                                        [PartitionFetch("t", 0, 2, 1 << 20)])
        result = await asyncio.wait_for(fetch, 5)
        assert time.monotonic() - started < 5  # woken by the HW, not the deadline
        [answer] = result.partitions
        assert answer.error_code == 0 and answer.high_watermark == 2 and result.size > 0
        assert result.waited_s > 0
        await manager.partitions.close()

    asyncio.run(main())


def test_an_append_wakes_a_followers_long_poll_and_a_consumers_only_at_the_hw() -> None:
    """A consumer reads no further than the HW, so an append the followers have
    not copied yet must not run its parked fetch again (a wasted collection per
    record); the HW's move must. A follower's parked fetch wakes at the append."""
    async def main() -> None:
        clock = ManualClock()
        manager, part, leader = setup(clock)
        first, second = followers_of(leader)
        params, wanted = consumer(0, wait_ms=10_000, min_bytes=1)
        fetch = asyncio.ensure_future(manager.fetch_records(params, wanted))
        follower = asyncio.ensure_future(manager.fetch_records(
            FetchParams(replica_id=first, max_wait_ms=10_000, min_bytes=1, max_bytes=1 << 20),
            [PartitionFetch("t", 0, 0, 1 << 20)]))
        await asyncio.sleep(0.02)
        assert len(part.readers) == 1 and len(part.waiters) == 1
        manager.partitions.append_now(part, batch(b"a"), Origin.CLIENT, -1)
        copied = await asyncio.wait_for(follower, 5)  # woken by the append
        assert copied.size > 0
        await asyncio.sleep(0.02)
        assert not fetch.done() and len(part.readers) == 1  # still parked, not re-run
        for f in (first, second):  # the followers copy it: the HW passes it
            await manager.fetch_records(FetchParams(replica_id=f, max_bytes=1 << 20),
                                        [PartitionFetch("t", 0, 1, 1 << 20)])
        result = await asyncio.wait_for(fetch, 5)
        assert result.size > 0 and result.partitions[0].high_watermark == 1
        assert not part.readers and not part.waiters
        await manager.partitions.close()

    asyncio.run(main())


def test_a_long_poll_with_nothing_appended_ends_at_its_deadline_empty() -> None:
    async def main() -> None:
        manager, _, _ = setup(ManualClock())
        params, wanted = consumer(0, wait_ms=100, min_bytes=1)
        started = time.monotonic()
        result = await manager.fetch_records(params, wanted)
        assert time.monotonic() - started >= 0.09
        assert result.size == 0 and result.partitions[0].records is None
        assert result.partitions[0].high_watermark == 0
        await manager.partitions.close()

    asyncio.run(main())


def test_followers_fetching_past_an_acks_all_append_complete_it() -> None:
    async def main() -> None:
        clock = ManualClock()
        manager, part, leader = setup(clock)
        appended = manager.partitions.append_now(part, batch(b"v"), Origin.CLIENT, -1)
        produce = asyncio.ensure_future(manager.partitions.complete(part, appended, -1))
        first, second = followers_of(leader)
        copied = await manager.fetch_records(FetchParams(replica_id=first, max_bytes=1 << 20),
                                             [PartitionFetch("t", 0, 0, 1 << 20)])
        assert copied.size > 0  # the follower is sent the record
        await manager.fetch_records(FetchParams(replica_id=first, max_bytes=1 << 20),
                                    [PartitionFetch("t", 0, 1, 1 << 20)])
        await asyncio.sleep(0)
        assert not produce.done() and part.state.high_watermark == 0  # one ISR member short
        await manager.fetch_records(FetchParams(replica_id=second, max_bytes=1 << 20),
                                    [PartitionFetch("t", 0, 1, 1 << 20)])
        await asyncio.wait_for(produce, 5)  # the HW passed the record
        assert part.state.high_watermark == 1
        await manager.partitions.close()

    asyncio.run(main())


def test_a_follower_whose_log_diverges_is_told_where_and_sent_nothing() -> None:
    async def main() -> None:
        manager, part, leader = setup(ManualClock())
        manager.partitions.append_now(part, batch(b"v"), Origin.CLIENT, 1)
        f = followers_of(leader)[0]
        epoch = part.state.leader_epoch
        result = await manager.fetch_records(
            FetchParams(replica_id=f, max_bytes=1 << 20),
            [PartitionFetch("t", 0, 5, 1 << 20, last_fetched_epoch=epoch + 1)])
        [answer] = result.partitions
        assert answer.diverges and answer.records is None and result.size == 0
        await manager.partitions.close()

    asyncio.run(main())


def test_checks_before_a_read_answer_without_reading() -> None:
    async def main() -> None:
        manager, part, _ = setup(ManualClock())
        epoch = part.state.leader_epoch
        ahead = await manager.fetch_records(FetchParams(), [
            PartitionFetch("t", 0, 0, 100, current_leader_epoch=epoch + 1),
            PartitionFetch("t", 0, 0, 100, current_leader_epoch=epoch)])
        assert [(a.error_code, a.read) for a in ahead.partitions] == [
            (ErrorCode.UNKNOWN_LEADER_EPOCH, False), (0, True)]
        elsewhere = ReplicaManager(manager.partitions, Leads(manager.partitions, False),
                                   lambda: 0)
        moved = await elsewhere.fetch_records(*consumer(0))
        assert [(a.error_code, a.read) for a in moved.partitions] == [
            (ErrorCode.NOT_LEADER_OR_FOLLOWER, False)]
        await manager.partitions.close()

    asyncio.run(main())


def test_a_fetcher_behind_on_leader_epochs_is_fenced() -> None:
    assert leader_epoch_error(3, 2) == ErrorCode.FENCED_LEADER_EPOCH
    assert leader_epoch_error(3, 4) == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert leader_epoch_error(3, 3) == leader_epoch_error(3, -1) == 0


def test_the_first_partition_with_records_is_read_whole_past_the_budget() -> None:
    async def main() -> None:
        clock = ManualClock()
        manager, part, leader = setup(clock)
        manager.partitions.append_now(part, batch(b"x" * 500), Origin.CLIENT, 1)
        for f in followers_of(leader):
            await manager.fetch_records(FetchParams(replica_id=f, max_bytes=1 << 20),
                                        [PartitionFetch("t", 0, 1, 1 << 20)])
        tiny = await manager.fetch_records(FetchParams(max_bytes=10),
                                           [PartitionFetch("t", 0, 0, 10),
                                            PartitionFetch("t", 0, 0, 10)])
        first, second = tiny.partitions
        assert first.size > 500 and tiny.size == first.size  # KIP-74: one whole batch
        assert second.read and second.records is None  # the budget is spent
        await manager.partitions.close()

    asyncio.run(main())


def test_append_records_refuses_before_appending_and_appends_the_rest_in_order() -> None:
    async def main() -> None:
        manager, part, _ = setup(ManualClock())
        verified: list[tuple[str, int, int, int]] = []

        def verify(producer_id: int, producer_epoch: int, partition: tuple[str, int]) -> int:
            verified.append((*partition, producer_id, producer_epoch))
            return ErrorCode.INVALID_TXN_STATE if producer_id == 7 else 0

        def txn(producer_id: int) -> memoryview:
            return memoryview(build_batch([Record(0, 0, None, b"t")], producer_id=producer_id,
                                          producer_epoch=3, base_sequence=0,
                                          transactional=True))

        out = manager.append_records([
            ProduceEntry("__consumer_offsets", 0, batch(b"x")),
            ProduceEntry("nope", 0, batch(b"x")),
            ProduceEntry("t", 0, None),
            ProduceEntry("t", 0, txn(7)),
            ProduceEntry("t", 0, batch(b"a")),
            ProduceEntry("t", 0, txn(8)),
        ], 1, frozenset({"__consumer_offsets"}), verify)
        assert [p.error_code for p in out] == [
            ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
            ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_TXN_STATE, 0, 0]
        assert all(p.result is None for p in out[:3])
        assert out[3].result is not None and not out[3].result.appended
        assert all(p.base_offset == -1 for p in out[:4])
        assert [p.base_offset for p in out[4:]] == [0, 1]  # the refused batch took no offset
        # Asked only of transactional batches that reach the partition, with the
        # producer the scan read.
        assert verified == [("t", 0, 7, 3), ("t", 0, 8, 3)]
        assert part.state.log_end_offset == 2
        await manager.partitions.close()

    asyncio.run(main())
