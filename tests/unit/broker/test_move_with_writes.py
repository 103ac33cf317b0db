"""A move between log directories (broker/replica/log_mover.py) while appends are still being
written (writer threads, storage/writes.py): the copy stops at the written end,
the final swap waits for the pending writes, and the moved log holds them and
takes the next appends through the writer."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from odradek.broker.config import BrokerConfig
from odradek.broker.replica.partitions import Partition, PartitionManager
from odradek.common.clock import ManualClock
from odradek.metadata import controller
from odradek.metadata.image import MetadataImage
from odradek.replication.partition import Origin
from odradek.storage import MemoryFileSystem
from odradek.storage.writes import AppendJob
from odradek.wire.records import Record, build_batch, decode_batches

A, B = "/disk-a", "/disk-b"
DEADLINE_S = 10.0


class HeldSink:
    """A write sink that keeps every job until the test runs it (a stalled writer)."""

    def __init__(self) -> None:
        self.jobs: list[AppendJob] = []

    def submit(self, job: AppendJob) -> None:
        self.jobs.append(job)


def batch(value: bytes) -> memoryview:
    return memoryview(build_batch([Record(0, 0, None, value)]))


def values(part: Partition) -> list[bytes | None]:
    data = part.log.read_records(part.log.log_start_offset, 1 << 20)
    return [r.value for _, b in decode_batches(data) for r in b]


async def until(condition: object, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while not condition():  # type: ignore[operator]
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.001)


@pytest.mark.timeout(30)  # a swap that does not wait blocks the loop on the held write
def test_the_swap_waits_for_pending_writes_and_the_moved_log_keeps_them() -> None:
    async def main() -> None:
        clock = ManualClock()
        config = BrokerConfig.from_sources(None, {"log.dirs": f"{A},{B}",
                                                  "odradek.log.writer.threads": "1"})
        manager = PartitionManager([A, B], config.props, clock, MemoryFileSystem(clock),
                                   node_id=1)
        manager.startup()
        image = MetadataImage()
        out = controller.create_topic(image, "t", 1, 1, {}, node_id=1, default_partitions=1,
                                      topic_id=uuid.UUID(int=7))
        for record in out.records:
            image.replay(record)
        manager.reconcile(image)
        part = manager.partitions[("t", 0)]
        source = part.log.parent_dir
        target = B if source == A else A
        await manager.append(part, batch(b"w0"), Origin.CLIENT, acks=1)
        writer_sink = part.log.write_sink
        assert writer_sink is not None  # the writer thread's
        sink = HeldSink()
        part.log.write_sink = sink
        held = manager.append_now(part, batch(b"held"), Origin.CLIENT, acks=0)
        assert held.write is not None and part.log.log_end_offset == 1
        assert part.log.next_offset == 2

        manager.mover.alter(part, target)
        future = part.state.future
        assert future is not None
        # The mover waits for the held write: it asked for its completion.
        await until(lambda: isinstance(held.write.token, asyncio.Future),  # type: ignore[union-attr]
                    "the mover to wait for the pending write")
        assert future.log.log_end_offset == 1  # the copy never goes past the written end
        assert manager.mover.completed == 0 and part.log.parent_dir == source

        # The write completes (as a writer thread would report it): the move finishes
        # with the record in the moved log.
        job = sink.jobs.pop()
        job.run()
        manager._written([(part, [job])])
        await until(lambda: manager.mover.completed == 1, "the move to finish")
        assert part.log.parent_dir == target and part.state.future is None
        assert values(part) == [b"w0", b"held"]
        assert part.log.write_sink == writer_sink  # appends go to the writer thread again
        after = await manager.append(part, batch(b"after"), Origin.CLIENT, acks=1)
        assert after.write is not None and after.write.done
        assert values(part) == [b"w0", b"held", b"after"]
        await manager.close()

    asyncio.run(main())
