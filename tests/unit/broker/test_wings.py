"""Each wing built with fakes of its ports, no broker and no sockets: the
replica wing's ISR changes against a fake controller, a handler against a fake
request context."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any, cast

from odradek.broker.config import BrokerConfig
from odradek.broker.net.context import RequestContext
from odradek.broker.replica.isr import IsrManager
from odradek.broker.replica.partitions import PartitionManager
from odradek.common.clock import ManualClock
from odradek.metadata import controller
from odradek.metadata.image import Endpoint, MetadataImage
from odradek.replication.partition import Origin
from odradek.storage import MemoryFileSystem
from odradek.wire.messages import alter_partition_request as ap
from odradek.wire.messages import alter_partition_response as apr
from odradek.wire.messages.request_header import RequestHeader
from odradek.wire.records import Record, build_batch


def batch(value: bytes) -> memoryview:
    return memoryview(build_batch([Record(0, 0, None, value)]))


@dataclass
class FakeMetadata:
    """What the replica wing reads (replica/ports.MetadataView), without a broker."""

    config: BrokerConfig
    clock: ManualClock
    image: MetadataImage
    partitions: PartitionManager
    node_id: int
    on_config_change: list[Any] = field(default_factory=list)


def three_broker_image() -> MetadataImage:
    """Brokers 1, 2 and 3 registered, and topic ``t`` with one partition on all three."""
    image = MetadataImage()
    for node in (1, 2, 3):
        out = controller.register_broker(image, node, [Endpoint("PLAINTEXT", "h", 9000 + node)],
                                         uuid.UUID(int=node))
        for record in out.records:
            image.replay(record)
    out = controller.create_topic(image, "t", 1, 3, {}, node_id=1, default_partitions=1,
                                  topic_id=uuid.UUID(int=7))
    assert not out.error, out
    for record in out.records:
        image.replay(record)
    return image


def three_replica_topic(clock: ManualClock) -> FakeMetadata:
    image = three_broker_image()
    leader = image.topics["t"].partitions[0].leader
    config = BrokerConfig.from_sources(None, {"log.dirs": "/d", "node.id": str(leader),
                                              "replica.lag.time.max.ms": "1000"})
    manager = PartitionManager(["/d"], config.props, clock, MemoryFileSystem(clock),
                               node_id=leader)
    manager.startup()
    manager.reconcile(image)
    return FakeMetadata(config, clock, image, manager, leader)


def test_the_replica_wing_shrinks_an_isr_through_its_alter_partition_port() -> None:
    async def main() -> None:
        clock = ManualClock()
        view = three_replica_topic(clock)
        part = view.partitions.partitions[("t", 0)]
        assert part.state.is_leader and part.state.isr == {1, 2, 3}
        sent: list[ap.AlterPartitionRequest] = []

        async def controller_accepts(request: ap.AlterPartitionRequest
                                     ) -> apr.AlterPartitionResponse:
            sent.append(request)
            [topic] = request.topics
            [p] = topic.partitions
            return apr.AlterPartitionResponse(topics=[apr.TopicData(
                topic_name=topic.topic_name, partitions=[apr.PartitionData(
                    partition_index=p.partition_index, leader_id=view.node_id,
                    leader_epoch=p.leader_epoch, isr=p.new_isr,
                    partition_epoch=p.partition_epoch + 1)])])

        isr = IsrManager(view, controller_accepts)
        await view.partitions.append(part, batch(b"v"), Origin.CLIENT, acks=1)
        await isr.check()
        assert sent == []  # the followers are behind, but not for long yet
        clock.advance(1_500)  # they never fetched: past replica.lag.time.max.ms
        await isr.check()
        [request] = sent
        assert request.broker_id == view.node_id
        assert request.topics[0].partitions[0].new_isr == [view.node_id]
        assert part.state.isr == {view.node_id}
        await view.partitions.close()

    asyncio.run(main())


def test_no_controller_leaves_the_isr_as_it_was_and_the_change_is_decided_again() -> None:
    async def main() -> None:
        clock = ManualClock()
        view = three_replica_topic(clock)
        part = view.partitions.partitions[("t", 0)]
        calls = 0

        async def unreachable(request: ap.AlterPartitionRequest) -> None:
            nonlocal calls
            calls += 1
            return None

        isr = IsrManager(view, unreachable)
        await view.partitions.append(part, batch(b"v"), Origin.CLIENT, acks=1)
        clock.advance(1_500)
        await isr.check()
        assert part.state.isr == {1, 2, 3} and part.state.pending_isr is None
        await isr.check()  # proposed again on the next round
        assert calls == 2
        await view.partitions.close()

    asyncio.run(main())


def test_a_handler_runs_against_a_fake_context_with_no_broker() -> None:
    from odradek.broker.handlers.k60_describe_cluster import handle
    from odradek.wire.messages.describe_cluster_request import DescribeClusterRequest

    class FakeState:
        cluster_id = "fake-cluster"
        node_id = 1
        client_controller_id = 2
        image = three_broker_image()

        def live_endpoints(self, listener: str = "") -> list[tuple[int, Endpoint]]:
            return [(1, Endpoint("PLAINTEXT", "a", 1)), (2, Endpoint("PLAINTEXT", "b", 2))]

    ctx = RequestContext(cast(Any, FakeState()), 0, RequestHeader(request_api_key=60), "test")
    answer: Any = asyncio.run(handle(ctx, DescribeClusterRequest()))  # type: ignore[arg-type]
    assert answer.cluster_id == "fake-cluster" and answer.controller_id == 2
    assert [(b.broker_id, b.host, b.port) for b in answer.brokers] == [(1, "a", 1), (2, "b", 2)]
