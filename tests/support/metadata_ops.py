"""Random controller decisions over a small cluster, for property tests of what
replaying their records does (the image's touched topics, a broker's
incremental reconcile).

An operation is a tuple drawn by :data:`operations`; :func:`decide` turns it
into the records the controller would commit for it on ``image`` (none when
the controller refuses it, e.g. a topic that exists).
"""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import strategies as st

from odradek.metadata import controller
from odradek.metadata.image import Endpoint, MetadataImage
from odradek.wire.internal.config_record import ConfigRecord

NODES = (1, 2, 3)
TOPICS = ("a", "b", "c", "d.e", "d_e")
BROKER_RESOURCE = 4

Op = tuple[Any, ...]

operations: st.SearchStrategy[Op] = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(TOPICS), st.integers(1, 4),
              st.integers(1, 3)),
    st.tuples(st.just("delete"), st.sampled_from(TOPICS)),
    st.tuples(st.just("grow"), st.sampled_from(TOPICS), st.integers(1, 6)),
    st.tuples(st.just("config"), st.sampled_from(TOPICS),
              st.sampled_from(("min.insync.replicas", "retention.ms", "flush.messages")),
              st.sampled_from(("1", "2", "5000", None))),
    st.tuples(st.just("broker-config"),
              st.sampled_from(("min.insync.replicas", "log.retention.ms")),
              st.sampled_from(("1", "2", "60000", None))),
    st.tuples(st.just("fence"), st.sampled_from(NODES)),
    st.tuples(st.just("unfence"), st.sampled_from(NODES)),
    st.tuples(st.just("register"), st.sampled_from(NODES)),
    st.tuples(st.just("elect"), st.sampled_from(TOPICS)),
    st.tuples(st.just("rejoin"), st.sampled_from(NODES)),
    st.tuples(st.just("reassign"), st.sampled_from(TOPICS), st.integers(0, 3),
              st.permutations(NODES), st.integers(1, 3)),
    st.tuples(st.just("producer-ids")),
)


def cluster_image() -> MetadataImage:
    """Brokers 1, 2 and 3 registered and unfenced; topics ``a`` (3 partitions,
    2 replicas each) and ``b`` (2 partitions, 3 replicas each)."""
    image = MetadataImage()
    for node in NODES:
        image.replay_all(controller.register_broker(
            image, node, [Endpoint("PLAINTEXT", "h", 9000 + node)],
            uuid.UUID(int=node)).records)
        image.replay_all(controller.unfence_broker(image, node).records)
    for serial, (name, partitions, rf) in enumerate((("a", 3, 2), ("b", 2, 3))):
        image.replay_all(controller.create_topic(
            image, name, partitions, rf, {}, node_id=1, default_partitions=1,
            topic_id=uuid.UUID(int=100_000 + serial)).records)
    return image


def decide(image: MetadataImage, op: Op, serial: int) -> list[Any]:
    """The records the controller commits for ``op`` on ``image`` (``serial``
    makes topic ids and incarnations unique)."""
    kind = op[0]
    if kind == "create":
        out = controller.create_topic(image, op[1], op[2], op[3], {}, node_id=1,
                                      default_partitions=1, topic_id=uuid.UUID(int=serial))
    elif kind == "delete":
        out = controller.delete_topic(image, op[1])
    elif kind == "grow":
        topic = image.topics.get(op[1])
        if topic is None:
            return []
        out = controller.create_partitions(image, op[1], len(topic.partitions) + op[2],
                                           node_id=1)
    elif kind == "config":
        if op[1] not in image.topics:
            return []
        out = controller.alter_topic_configs(image, op[1], {op[2]: op[3]})
    elif kind == "broker-config":
        return [ConfigRecord(BROKER_RESOURCE, "", op[1], op[2])]
    elif kind == "fence":
        out = controller.fence_broker(image, op[1])
    elif kind == "unfence":
        out = controller.unfence_broker(image, op[1])
    elif kind == "register":
        out = controller.register_broker(
            image, op[1], [Endpoint("PLAINTEXT", "h", 9000 + op[1])],
            uuid.UUID(int=1000 + serial))
    elif kind == "rejoin":  # a new incarnation over an unfenced one (kill -9, restart)
        out = controller.register_broker(
            image, op[1], [Endpoint("PLAINTEXT", "h", 9000 + op[1])],
            uuid.UUID(int=1000 + serial), fence_previous=True)
    elif kind == "reassign":
        topic = image.topics.get(op[1])
        if topic is None or op[2] not in topic.partitions:
            return []
        out = controller.alter_reassignment(image, op[1], op[2], list(op[3][:op[4]]))
    elif kind == "elect":
        if op[1] not in image.topics:
            return []
        _, out = controller.elect_leaders(image, controller.UNCLEAN, [
            (op[1], i) for i in image.topics[op[1]].partitions])
    else:
        _, out = controller.allocate_producer_ids(image, 1)
    return [] if out.error else list(out.records)
