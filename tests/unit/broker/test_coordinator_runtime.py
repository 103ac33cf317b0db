"""The coordinator runtime answers a request only once its records are committed.

A real group runtime, partition manager and ``__consumer_offsets`` log on the
memory file system; the partition's ISR is made {1, 2} so the high watermark
waits for follower 2. An OffsetCommit is appended and replayed at once, but its
answer comes only when the follower's fetch moves the HW past the record.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from odradek.broker.config import BrokerConfig
from odradek.broker.coordinators.coordinator_runtime import Entry, Marker
from odradek.broker.coordinators.group_runtime import GroupRuntime
from odradek.broker.coordinators.partition_writer import PartitionManagerWriter
from odradek.broker.ports import NotLeaderError
from odradek.broker.replica.partitions import PartitionManager
from odradek.common.clock import ManualClock
from odradek.common.ids import SeededIds
from odradek.coordinator.coordinator import Commit, CommitRequest
from odradek.coordinator.core import Effects
from odradek.coordinator.records import OFFSETS_TOPIC
from odradek.metadata.controller import Outcome
from odradek.metadata.image import MetadataImage
from odradek.replication.partition import Origin
from odradek.storage import MemoryFileSystem
from odradek.wire.errors import ErrorCode
from odradek.wire.records import Record, build_batch


class Metadata:
    """The metadata a group runtime needs, applied at once (no journal)."""

    def __init__(self, partitions: PartitionManager) -> None:
        self.image = MetadataImage()
        self.node_id = 1
        self.ids = SeededIds(13)
        self.partitions = partitions

    async def write(self, decide: Callable[[MetadataImage], Outcome]) -> Outcome:
        outcome = decide(self.image)
        for r in outcome.records:
            self.image.replay(r)
        self.partitions.reconcile(self.image)
        return outcome


async def make_runtime(writer_threads: int = 0) -> tuple[GroupRuntime, PartitionManager]:
    clock = ManualClock()
    config = BrokerConfig.from_sources(None, {"offsets.topic.num.partitions": "1",
                                              "odradek.log.writer.threads": str(writer_threads)})
    partitions = PartitionManager("/data", config.props, clock, MemoryFileSystem(clock),
                                  node_id=1)
    runtime = GroupRuntime(Metadata(partitions), partitions, config, clock)
    runtime.start()
    assert await runtime.ensure_topic()
    return runtime, partitions


def commit_request(offset: int) -> CommitRequest:
    # Generation -1 and no member: an admin tool's commit, accepted for any group.
    return CommitRequest("g", -1, "", None, -1, [Commit("t", 0, offset, -1, None)])


def test_a_commit_is_answered_only_when_the_high_watermark_passes_its_record() -> None:
    async def scenario() -> None:
        runtime, partitions = await make_runtime()
        part = partitions.get(OFFSETS_TOPIC, 0)
        assert part is not None
        part.state.become_leader(1, replicas=[1, 2], isr=[1, 2])  # HW waits for 2
        call = asyncio.ensure_future(runtime.call(lambda token: runtime.coordinator.commit_offsets(
            token, 0, commit_request(42), lambda topic, p: True)))
        for _ in range(20):
            await asyncio.sleep(0)
        assert part.log.log_end_offset == 1  # appended ...
        assert runtime.coordinator.fetch_offsets("g", None)  # ... and replayed
        assert not call.done()  # ... but not answered: the HW is 0
        assert part.state.high_watermark == 0
        partitions.act(part, part.state.update_follower(2, 1, partitions.clock.now_ms()))
        errors = await asyncio.wait_for(call, 5)
        assert errors == {("t", 0): ErrorCode.NONE}
        assert part.state.high_watermark == 1

    asyncio.run(scenario())


def test_an_answer_waiting_behind_a_write_leaves_after_that_writes_answers() -> None:
    """A SyncGroup that writes nothing (a follower's, after the leader's) waits
    for the write in flight on its partition and is answered after it, as
    Kafka completes the members' SyncGroups together in member order: here the
    first write's disk write is still pending (writer threads) when the second
    call arrives, so the second's wait for the HW was registered first."""
    async def scenario() -> None:
        runtime, partitions = await make_runtime(writer_threads=1)
        part = partitions.get(OFFSETS_TOPIC, 0)
        assert part is not None
        part.state.become_leader(1, replicas=[1, 2], isr=[1, 2])  # HW waits for 2
        order: list[str] = []
        first = asyncio.ensure_future(runtime.call(
            lambda token: runtime.coordinator.commit_offsets(
                token, 0, commit_request(42), lambda topic, p: True)))
        first.add_done_callback(lambda _: order.append("write"))
        for _ in range(3):
            await asyncio.sleep(0)
        second = asyncio.ensure_future(runtime.call(
            lambda token: Effects().reply(token, "after"), group_id="g"))
        second.add_done_callback(lambda _: order.append("behind"))
        await asyncio.sleep(0.05)  # the write lands; the HW still waits for follower 2
        assert part.log.log_end_offset == 1 and not first.done() and not second.done()
        partitions.act(part, part.state.update_follower(2, 1, partitions.clock.now_ms()))
        assert await asyncio.wait_for(second, 5) == "after"
        await asyncio.wait_for(first, 5)
        assert order == ["write", "behind"]
        await partitions.close()

    asyncio.run(scenario())


def test_a_single_replica_answers_at_once() -> None:
    async def scenario() -> None:
        runtime, _ = await make_runtime()
        errors = await asyncio.wait_for(runtime.call(
            lambda token: runtime.coordinator.commit_offsets(
                token, 0, commit_request(7), lambda topic, p: True)), 5)
        assert errors == {("t", 0): ErrorCode.NONE}

    asyncio.run(scenario())


def test_loading_yields_records_and_transaction_markers_in_offset_order() -> None:
    async def scenario() -> None:
        _, partitions = await make_runtime()
        runtime = PartitionManagerWriter(OFFSETS_TOPIC, partitions)
        runtime.append(0, [(b"k1", b"v1"), (b"k2", None)], 0, producer_id=9,
                       producer_epoch=2, base_sequence=0)
        part = runtime.partition(0)
        # A COMMIT marker (control key: version 0, type 1), as the transaction
        # coordinator will write it; put in the log as replication would.
        marker = build_batch([Record(2, 0, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05")],
                             base_offset=2, control=True, transactional=True, producer_id=9,
                             producer_epoch=2)
        part.log.append_replicated(marker)
        await partitions.writes_done(part)  # (written off the loop)
        part.state.become_leader(1, [1], [1])  # the HW follows the new log end
        assert list(runtime.read_partition(0)) == [
            Entry(0, 9, 2, b"k1", b"v1"), Entry(1, 9, 2, b"k2", None), Marker(2, 9, 2, True)]

    asyncio.run(scenario())


def test_before_start_a_topic_appearing_in_the_replay_does_not_make_groups_servable() -> None:
    """A restarted cluster node answers FindCoordinator while it still replays the
    metadata log: ``__consumer_offsets`` "appears" during the wait. Its groups
    must keep waiting for start() to load them; they were served from an empty
    state instead (seen in the chaos harness: a restarted node wrote group records
    before it had loaded its partition, 'group coordinator write failed ... moved')."""
    async def scenario() -> None:
        clock = ManualClock()
        config = BrokerConfig.from_sources(None, {"offsets.topic.num.partitions": "1"})
        partitions = PartitionManager("/data", config.props, clock, MemoryFileSystem(clock),
                                      node_id=1)
        runtime = GroupRuntime(Metadata(partitions), partitions, config, clock)
        assert await runtime.ensure_topic()  # created while not started (the replay)
        assert runtime.coordinator.loading == {0}
        early = await runtime.call(lambda token: runtime.coordinator.commit_offsets(
            token, 0, commit_request(7), lambda topic, p: True))
        assert early == {("t", 0): ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
        runtime.start()  # loads what this broker leads
        for _ in range(20):
            await asyncio.sleep(0)
        assert runtime.coordinator.loading == set()
        errors = await runtime.call(lambda token: runtime.coordinator.commit_offsets(
            token, 0, commit_request(7), lambda topic, p: True))
        assert errors == {("t", 0): ErrorCode.NONE}
        await runtime.close()

    asyncio.run(scenario())


def test_an_acks_all_wait_begun_after_the_leadership_moved_is_not_answered_ok() -> None:
    """The answer to an append is awaited in another task (or after an fsync), so
    the leadership can move in between, before the wait for the HW begins. That
    wait must fail (NOT_LEADER_OR_FOLLOWER), not be completed later by a HW
    reached at another leadership: the chaos harness saw acknowledgements for
    offsets that by then held another producer's records (acked data lost)."""
    async def scenario() -> None:
        _, partitions = await make_runtime()
        part = partitions.get(OFFSETS_TOPIC, 0)
        assert part is not None
        part.state.become_leader(1, replicas=[1, 2], isr=[1, 2])  # HW waits for 2
        batch = build_batch([Record(0, 0, b"k", b"v")])
        result = partitions.append_now(part, memoryview(batch), Origin.CLIENT, acks=-1)
        assert result.last_offset == 0 and result.leader_epoch == 1
        part.state.become_follower(2, leader_id=2)  # moved before the wait began ...
        part.leadership_lost()
        part.state.become_leader(3, replicas=[1, 2], isr=[1, 2])  # ... and came back
        wait = asyncio.ensure_future(partitions.complete(part, result, acks=-1))
        await asyncio.sleep(0)
        # The HW of the new term passes offset 0.
        partitions.act(part, part.state.update_follower(2, 1, partitions.clock.now_ms()))
        try:
            await asyncio.wait_for(wait, 1)
        except NotLeaderError:
            pass
        else:
            raise AssertionError("answered OK across a leadership change")

    asyncio.run(scenario())


def test_a_stable_offset_fetch_waits_for_the_commit_marker_to_commit() -> None:
    """Between a transaction's COMMIT marker being appended to
    ``__consumer_offsets`` and its commit, the committed state (the offsets from
    before the marker) still holds the transaction's offsets as pending: an
    OffsetFetch with RequireStable answers UNSTABLE_OFFSET_COMMIT, not the older
    offsets. The chaos harness's consume-transform-produce loop, rewinding
    after an abort, was given the older offsets and transformed 28 records twice."""
    async def scenario() -> None:
        runtime, partitions = await make_runtime()
        part = partitions.get(OFFSETS_TOPIC, 0)
        assert part is not None
        part.state.become_leader(1, replicas=[1, 2], isr=[1, 2])  # HW waits for 2
        coordinator = runtime.coordinator

        def fetch(stable: bool) -> tuple[int, int]:
            code, (got,) = coordinator.fetch_offsets(
                "g", [("t", 0)], stable, None, runtime.committed_offsets("g"),
                runtime.unstable_offsets("g") if stable else ())
            assert code == ErrorCode.NONE
            return got.offset, got.error

        async def follower_catches_up() -> None:
            partitions.act(part, part.state.update_follower(
                2, part.log.log_end_offset, partitions.clock.now_ms()))
            for _ in range(5):
                await asyncio.sleep(0)

        call = asyncio.ensure_future(runtime.call(lambda token: coordinator.commit_offsets(
            token, 0, commit_request(5), lambda topic, p: True)))
        await asyncio.sleep(0)
        await follower_catches_up()
        assert await asyncio.wait_for(call, 5) == {("t", 0): ErrorCode.NONE}
        txn = asyncio.ensure_future(runtime.txn_commit(
            commit_request(42), 9, 0, lambda topic, p: True))
        await asyncio.sleep(0)
        await follower_catches_up()
        assert await asyncio.wait_for(txn, 5) == {("t", 0): ErrorCode.NONE}
        assert fetch(True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)  # the txn is open
        assert fetch(False) == (5, ErrorCode.NONE)
        marker = build_batch([Record(0, 0, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x01")],
                             control=True, transactional=True, producer_id=9, producer_epoch=0)
        appended = partitions.append_now(part, memoryview(marker), Origin.COORDINATOR, acks=-1)
        runtime.txn_marker(0, 9, True, appended.last_offset + 1)
        assert part.state.high_watermark <= appended.last_offset  # the marker is in flight
        assert fetch(True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)  # not 5
        assert fetch(False) == (5, ErrorCode.NONE)  # the committed state
        await follower_catches_up()
        assert part.state.high_watermark == appended.last_offset + 1
        assert fetch(True) == (42, ErrorCode.NONE)
        assert fetch(False) == (42, ErrorCode.NONE)
        await runtime.close()

    asyncio.run(scenario())
