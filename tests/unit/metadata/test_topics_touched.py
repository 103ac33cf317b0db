"""MetadataImage.topics_touched: every topic whose partitions or configs a record
changes is named (what a broker's incremental reconcile and the per-topic
caches rely on), and the per-topic caches are never stale."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from odradek.metadata.image import MetadataImage
from odradek.wire.internal.producer_ids_record import ProducerIdsRecord
from odradek.wire.internal.remove_topic_record import RemoveTopicRecord
from odradek.wire.internal.topic_record import TopicRecord
from tests.support.metadata_ops import cluster_image, decide, operations


def topic_states(image: MetadataImage) -> dict[str, Any]:
    """Each topic's id, configs and partitions, as values to compare."""
    return {name: (t.topic_id, dict(t.configs),
                   {i: (list(p.replicas), list(p.isr), p.leader, p.leader_epoch,
                        p.partition_epoch, list(p.adding_replicas), list(p.removing_replicas))
                    for i, p in t.partitions.items()})
            for name, t in image.topics.items()}


@given(st.lists(operations, max_size=40))
def test_a_record_names_every_topic_it_changes(ops: list[tuple[Any, ...]]) -> None:
    image = cluster_image()
    for serial, op in enumerate(ops):
        for record in decide(image, op, serial):
            before = topic_states(image)
            touched = image.topics_touched(record)
            image.replay(record)
            if touched is None:
                continue
            after = topic_states(image)
            changed = {n for n in before.keys() | after.keys() if before.get(n) != after.get(n)}
            assert changed <= touched, (record, changed, touched)


@given(st.lists(operations, max_size=40))
def test_a_topic_cache_entry_always_matches_its_topic(ops: list[tuple[Any, ...]]) -> None:
    """An entry computed from a topic and left in ``topic_derived`` by later
    replays still equals what the topic would give now."""
    image = cluster_image()
    for serial, op in enumerate(ops):
        image.replay_all(decide(image, op, serial))
        states = topic_states(image)
        for name, derived in image.topic_derived.items():
            assert derived["state"] == states.get(name), (op, name)
        for name, state in states.items():
            image.topic_derived.setdefault(name, {})["state"] = copy.deepcopy(state)


def test_replay_all_gives_the_union_and_none_when_any_record_may_touch_everything() -> None:
    image = cluster_image()
    import uuid

    tid = uuid.UUID(int=5)
    assert image.replay_all([TopicRecord("x", tid), ProducerIdsRecord(-1, -1, 1000)]) == {"x"}
    assert image.replay_all([ProducerIdsRecord(-1, -1, 2000)]) == set()
    assert image.topics_touched(RemoveTopicRecord(tid)) == frozenset({"x"})
    image.topic_derived["a"] = {"answer": 1}
    # Fencing names the topics whose partitions it changes (elections), but
    # empties every per-topic cache: readers combine topics with liveness.
    fenced = decide(image, ("fence", 2), 0)
    assert image.replay_all(fenced) == {
        image.by_id[r.topic_id] for r in fenced if hasattr(r, "topic_id")}
    assert image.topic_derived == {}
    assert image.replay_all(decide(image, ("broker-config", "log.retention.ms", "1"), 1)) is None
