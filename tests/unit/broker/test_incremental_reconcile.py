"""A broker reconciles only the topics a metadata batch touched
(``PartitionManager.reconcile(topics=...)``): after any sequence of
controller decisions its partitions, their leadership and its logs are
exactly what a reconcile of every partition gives."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from odradek.broker.config import BrokerConfig
from odradek.broker.replica.partitions import Partition, PartitionManager
from odradek.common.clock import ManualClock
from odradek.common.ids import SeededIds
from odradek.metadata.image import MetadataImage
from odradek.storage import MemoryFileSystem
from tests.support.metadata_ops import cluster_image, decide, operations

NODE = 1


class Node:
    """A partition manager of node 1 and the partitions each reconcile moved."""

    def __init__(self, clock: ManualClock) -> None:
        config = BrokerConfig.from_sources(None, {"log.dirs": "/d", "node.id": str(NODE)})
        self.fs = MemoryFileSystem(clock)
        self.moved: list[list[tuple[str, int]]] = []
        self.manager = PartitionManager(
            ["/d"], config.props, clock, self.fs, node_id=NODE, ids=SeededIds(1),
            on_leadership=lambda parts: self.moved.append(_keys(parts)))
        self.manager.startup()

    def state(self) -> dict[str, Any]:
        """Everything a reconcile decides, as values to compare."""
        m = self.manager
        return {
            "partitions": {k: (p.state.is_leader, p.state.leader_id, p.state.leader_epoch,
                               p.state.partition_epoch, sorted(p.state.isr), p.state.min_isr,
                               p.log.config, p.log.topic_id)
                           for k, p in m.partitions.items()},
            "logs": sorted(m.logs.logs()),
            "dirs": sorted(d for d in self.fs.listdir("/d")
                           if not d.endswith(("-delete", "-stray")) and "-" in d),
        }


def _keys(parts: list[Partition]) -> list[tuple[str, int]]:
    return sorted((p.topic, p.index) for p in parts)


@given(st.lists(operations, max_size=40))
def test_reconciling_the_touched_topics_equals_reconciling_all(
        ops: list[tuple[Any, ...]]) -> None:
    """Also reconciling only the touched partitions of a topic whose records
    were all elections, ISR or replica changes
    (:meth:`MetadataImage.replay_scoped`, as a broker applies a batch)."""
    clock = ManualClock()
    image: MetadataImage = cluster_image()
    incremental, scoped, full = Node(clock), Node(clock), Node(clock)
    for node in (incremental, scoped, full):
        node.manager.reconcile(image)
    for serial, op in enumerate(ops):
        scope = image.replay_scoped(decide(image, op, serial))
        incremental.manager.reconcile(image, topics=None if scope is None else set(scope))
        scoped.manager.reconcile(image, topics=scope, only=None if scope is None else {
            n: i for n, i in scope.items() if i is not None})
        full.manager.reconcile(image)
        clock.advance(10)
        assert incremental.state() == full.state(), op
        assert scoped.state() == full.state(), op
        assert incremental.moved[-1] == full.moved[-1], op
        assert scoped.moved[-1] == full.moved[-1], op


def test_a_batch_naming_one_topic_leaves_the_others_alone() -> None:
    """The incremental reconcile does not look at an untouched topic's partitions."""
    clock = ManualClock()
    image = cluster_image()  # topics a and b, both with replicas on node 1
    node = Node(clock)
    node.manager.reconcile(image)
    looked: list[str] = []
    original = node.manager.config_for

    def counting(overrides: dict[str, str]) -> Any:
        looked.append("topic")
        return original(overrides)

    node.manager.config_for = counting  # type: ignore[method-assign]
    touched = image.replay_all(decide(image, ("config", "a", "retention.ms", "5000"), 9))
    assert touched == {"a"}
    node.manager.reconcile(image, topics=touched)
    assert looked == ["topic"]  # topic a only
    configs = {k: p.log.config.retention_ms for k, p in node.manager.partitions.items()}
    assert {k[0] for k in configs} == {"a", "b"}
    assert all((ms == 5000) == (k[0] == "a") for k, ms in configs.items()), configs


def test_letting_partitions_go_is_reported_once_per_reconcile() -> None:
    """``on_released`` (``odradek serve`` unfreezes the collector then) is called by a
    reconcile that removes partitions, not by one that keeps them all."""
    clock = ManualClock()
    node = Node(clock)
    released: list[int] = []
    node.manager.on_released = lambda: released.append(1)
    image = cluster_image()
    node.manager.reconcile(image)
    node.manager.reconcile(image)
    assert released == [] and node.manager.partitions
    node.manager.reconcile(MetadataImage())
    assert released == [1] and not node.manager.partitions


def test_a_log_that_cannot_be_opened_is_tried_again_at_the_next_change() -> None:
    """A new partition whose directory cannot be written (a full disk) is not
    hosted for now; the reconcile goes on with the others and does not raise
    into the metadata apply; the next metadata change, of any topic, opens it."""
    import uuid

    from odradek.metadata import controller

    clock = ManualClock()
    image = cluster_image()
    node = Node(clock)
    node.manager.reconcile(image)
    hosted = set(node.manager.partitions)
    assert hosted
    image.replay_all(controller.create_topic(
        image, "c", 1, 3, {}, node_id=1, default_partitions=1,
        topic_id=uuid.UUID(int=7)).records)
    for _ in range(8):  # every write there fails: preparing it, then opening it
        node.fs.fail_next_write("/d/c-0/")
    node.manager.reconcile(image, topics={"c"})
    assert ("c", 0) not in node.manager.partitions
    assert hosted <= set(node.manager.partitions)
    node.fs.clear_faults()
    node.manager.reconcile(image, topics={"a"})  # a change of another topic
    assert ("c", 0) in node.manager.partitions
    assert node.manager.partitions[("c", 0)].log.topic_id == uuid.UUID(int=7)
