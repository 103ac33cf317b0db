"""RemoteEnds (broker/coordinators/lag_metrics.py): the end offsets of partitions led
elsewhere come from a background ListOffsets, bounded and throttled; a scrape
reads the cache only."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from odradek.broker.coordinators.lag_metrics import RemoteEnds
from odradek.broker.peers import BrokerUnavailable
from odradek.common.clock import ManualClock
from odradek.coordinator.lag import Ends
from odradek.metadata.image import MetadataImage, PartitionImage, TopicImage
from odradek.wire.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)


def _image() -> MetadataImage:
    image = MetadataImage()
    topic = TopicImage("t", uuid.uuid4())
    for p, leader in ((0, 2), (1, 3), (2, 4)):
        topic.partitions[p] = PartitionImage(p, [leader], [leader], leader, 0, 0)
    image.topics["t"] = topic
    return image


class FakePeers:
    """Broker 2 answers (HW 100, LSO 90 + asks), 3 never answers, 4 is down."""

    def __init__(self) -> None:
        self.asked: list[tuple[int, int]] = []
        self.hang = asyncio.Event()

    async def request(self, node_id: int, body: Any, version: int) -> Any:
        self.asked.append((node_id, body.isolation_level))
        if node_id == 3:
            await self.hang.wait()
        if node_id == 4:
            raise BrokerUnavailable("broker 4: down")
        offset = (90 if body.isolation_level else 100) + len(self.asked)
        return ListOffsetsResponse(topics=[ListOffsetsTopicResponse(t.name, [
            ListOffsetsPartitionResponse(p.partition_index, offset=offset)
            for p in t.partitions]) for t in body.topics])

    async def close(self) -> None:
        pass


def test_refresh_is_bounded_throttled_and_only_in_the_background() -> None:
    async def main() -> None:
        clock = ManualClock()
        peers = FakePeers()
        image = _image()
        remote = RemoteEnds(peers, lambda: image, clock, refresh_s=5.0, timeout_s=0.2,
                            max_age_s=30.0)
        keys = {("t", 0), ("t", 1), ("t", 2)}
        assert remote.get("t", 0) is None  # nothing known before the first refresh
        remote.want(keys)  # returns at once: the refresh runs in the background
        task = remote._task
        assert task is not None and not task.done()
        await task  # broker 3's silence costs at most timeout_s; broker 4's failure nothing
        first = remote.get("t", 0)
        assert first is not None and first.high_watermark > first.last_stable_offset
        assert remote.get("t", 1) is None and remote.get("t", 2) is None
        asked = len(peers.asked)
        remote.want(keys)  # within refresh_s of the last start: no new requests
        assert remote._task is task and len(peers.asked) == asked
        clock.advance(5_000)
        remote.want(keys)
        assert remote._task is not task
        await remote._task
        assert len(peers.asked) > asked and remote.get("t", 0) != first
        clock.advance(5_000)
        remote.want({("t", 1)})  # t-0 no longer needed: it leaves the cache
        await remote._task
        assert ("t", 0) not in remote.cache
        remote.cache[("t", 0)] = (Ends(1, 1), clock.monotonic_ms())
        clock.advance(30_001)  # too old: not reported rather than stale
        assert remote.get("t", 0) is None
        await remote.close()

    asyncio.run(main())


def test_close_cancels_a_refresh_in_flight() -> None:
    async def main() -> None:
        peers = FakePeers()
        image = _image()
        remote = RemoteEnds(peers, lambda: image, ManualClock(), timeout_s=60.0)
        remote.want({("t", 1)})
        await asyncio.sleep(0)
        task = remote._task
        await remote.close()
        assert task is not None and task.cancelled()
        assert remote.get("t", 1) is None

    asyncio.run(main())


def test_want_outside_a_loop_does_nothing() -> None:
    remote = RemoteEnds(FakePeers(), MetadataImage, ManualClock())
    remote.cache[("t", 0)] = (Ends(5, 5), 0)
    remote.want({("t", 0)})
    assert remote._task is None and remote.get("t", 0) == Ends(5, 5)
