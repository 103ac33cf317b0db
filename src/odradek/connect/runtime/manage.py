"""KIP-875 offsets and the plugin listings, on top of the herder.

Offsets are shown as ``{"offsets": [{"partition": {...}, "offset": {...}}]}``:
a source connector's own maps (from the offsets file); a sink's partition
``{"kafka_topic", "kafka_partition"}`` and offset ``{"kafka_offset"}`` (its
consumer group ``connect-<name>``'s committed offsets). PATCH (``"offset":
null`` resets one partition) and DELETE need the connector STOPPED (400
otherwise); GET works in any state, as Kafka's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka import TopicPartition as KTopicPartition
from confluent_kafka.admin import AdminClient

from odradek.connect import connectors, converters, plugins, transforms
from odradek.connect.api import SinkConnector, SourceConnector, TopicPartition
from odradek.connect.converters.base import Converter, HeaderConverter
from odradek.connect.runtime.herder import STOPPED_TARGET, FrozenDict, Herder
from odradek.connect.runtime.validation import RestError
from odradek.connect.transforms.base import Predicate, Transformation

TIMEOUT_S = 10.0


def _version() -> str:
    try:
        return version("odradek")
    except PackageNotFoundError:
        return "unknown"


def _group(herder: Herder, name: str) -> str:
    return herder.config(name).get("consumer.override.group.id", f"connect-{name}")


def _admin(herder: Herder) -> AdminClient:
    return AdminClient(herder.worker.client_config("consumer"))


def get_offsets(herder: Herder, name: str) -> dict[str, Any]:
    entry = herder._get(name)
    if entry.type == "source":
        return {"offsets": [{"partition": p, "offset": o}
                            for p, o in herder.offsets.of(name)]}
    admin = _admin(herder)  # kept referenced: a collected client never completes its futures
    future = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(_group(herder, name))])
    out = []
    try:
        for f in future.values():
            for tp in f.result(TIMEOUT_S).topic_partitions or []:
                if tp.offset >= 0:
                    out.append({"partition": {"kafka_topic": tp.topic,
                                              "kafka_partition": tp.partition},
                                "offset": {"kafka_offset": tp.offset}})
    except KafkaException as e:
        raise RestError(500, f"Failed to read the sink's offsets: {e}") from None
    return {"offsets": out}


def _stopped(herder: Herder, name: str) -> None:
    if herder._get(name).target != STOPPED_TARGET:
        raise RestError(400, f"Connectors must be in the STOPPED state before their offsets "
                             f"can be modified. This can be done for the specified connector "
                             f"by issuing a 'PUT' request to the '/connectors/{name}/stop' "
                             f"endpoint")
    if herder.tasks_shutting_down(name):
        # 409, as during a rebalance: the tasks' workers are about to rebalance
        # them away; an alteration now could be overwritten by their last commit.
        raise RestError(409, f"The tasks of connector {name} are still shutting down; "
                             f"try again once they have stopped")


def alter_offsets(herder: Herder, name: str, body: Any) -> dict[str, str]:
    if not isinstance(body, dict) or not isinstance(body.get("offsets"), list):
        raise RestError(400, "The request body must be {\"offsets\": [...]}")
    with herder.lock:
        _stopped(herder, name)
        entry = herder._get(name)
        items: list[tuple[FrozenDict, Any]] = []
        for item in body["offsets"]:
            if not isinstance(item, dict) or not isinstance(item.get("partition"), dict):
                raise RestError(400, "Each offset must be {\"partition\": {...}, \"offset\": "
                                     "{...} or null}")
            offset = item.get("offset")
            if offset is not None and not isinstance(offset, dict):
                raise RestError(400, "An offset must be a JSON object or null")
            items.append((FrozenDict(item["partition"]), offset))
        instance = entry.cls()
        try:
            if isinstance(instance, SourceConnector):
                instance.alter_offsets(entry.config, dict(items))
                herder.offsets.put(name, items)
            else:
                assert isinstance(instance, SinkConnector)
                sink = _sink_offsets(items)
                instance.alter_offsets(entry.config, sink)
                _alter_group(herder, name, sink)
        except ValueError as e:
            raise RestError(400, f"Failed to alter the offsets: {e}") from None
    return {"message": "The offsets for this connector have been altered successfully"}


def _sink_offsets(items: list[tuple[FrozenDict, Any]]) -> dict[TopicPartition, int | None]:
    out: dict[TopicPartition, int | None] = {}
    for partition, offset in items:
        topic, n = partition.get("kafka_topic"), partition.get("kafka_partition")
        if not isinstance(topic, str) or not isinstance(n, int):
            raise ValueError("a sink partition is {\"kafka_topic\": str, \"kafka_partition\": int}")
        value = None if offset is None else offset.get("kafka_offset")
        if offset is not None and (not isinstance(value, int) or value < 0):
            raise ValueError("a sink offset is {\"kafka_offset\": <non-negative integer>}")
        out[TopicPartition(topic, n)] = value
    return out


def _alter_group(herder: Herder, name: str, offsets: Mapping[TopicPartition, int | None]
                 ) -> None:
    admin = _admin(herder)
    group = _group(herder, name)
    # a reset (null) partition goes back to the start: auto.offset.reset=earliest
    tps = [KTopicPartition(tp.topic, tp.partition, 0 if o is None else o)
           for tp, o in offsets.items()]
    try:
        for f in admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, tps)]).values():
            f.result(TIMEOUT_S)
    except KafkaException as e:
        raise RestError(500, f"Failed to alter the sink's consumer group offsets: {e}") from None


def reset_offsets(herder: Herder, name: str) -> dict[str, str]:
    with herder.lock:
        _stopped(herder, name)
        entry = herder._get(name)
        if entry.type == "source":
            herder.offsets.remove(name)
        else:
            admin = _admin(herder)
            try:
                for f in admin.delete_consumer_groups([_group(herder, name)]).values():
                    try:
                        f.result(TIMEOUT_S)
                    except KafkaException as e:
                        if "GROUP_ID_NOT_FOUND" not in str(e):
                            raise
            except KafkaException as e:
                raise RestError(500, f"Failed to reset the sink's offsets: {e}") from None
    return {"message": "The offsets for this connector have been reset successfully"}


def _kind(cls: type) -> str | None:
    for base, kind in ((SourceConnector, "source"), (SinkConnector, "sink"),
                       (Converter, "converter"), (HeaderConverter, "header_converter"),
                       (Transformation, "transformation"), (Predicate, "predicate")):
        if issubclass(cls, base):
            return kind
    return None


def plugin_list(connectors_only: bool) -> list[dict[str, str]]:
    out = []
    for p in plugins.plugins():
        if connectors_only and p.name not in connectors.BUILTIN and (
                p.name in converters.BUILTIN or p.name in transforms.BUILTIN):
            continue
        try:
            cls = p.load()
        except (ImportError, AttributeError):
            continue
        kind = _kind(cls)
        if kind is None or (connectors_only and kind not in ("source", "sink")):
            continue
        ver = _version()
        if kind in ("source", "sink"):
            with contextlib.suppress(Exception):  # best effort
                ver = cls().version()
        out.append({"class": p.name, "type": kind, "version": ver})
    return out


def plugin_class(name: str) -> type:
    try:
        return plugins.load(name)
    except plugins.PluginNotFound as e:
        raise RestError(404, str(e)) from None
