"""Topic-level configs: Kafka's names, types, broker synonyms and defaults.

A topic config's effective value is, in order: the topic's own override, the
broker's synonym (e.g. ``log.retention.ms`` for ``retention.ms``), Kafka's
default. DescribeConfigs reports which of these supplied it.
"""

from __future__ import annotations

from dataclasses import dataclass

LONG_MAX = 9223372036854775807


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    name: str
    kind: str  # "long", "int", "double", "boolean", "string", "list", "replicas"
    """``replicas`` is Kafka's throttled-replica list (:func:`parse_throttled_replicas`);
    DescribeConfigs reports it as a LIST."""
    default: str
    synonym: str | None = None
    choices: tuple[str, ...] = ()
    min_value: float | None = None


_DEFS = [
    TopicConfigDef("cleanup.policy", "list", "delete", "log.cleanup.policy", ("delete", "compact")),
    TopicConfigDef("compression.type", "string", "producer", "compression.type",
                   ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")),
    TopicConfigDef("delete.retention.ms", "long", "86400000",
                   "log.cleaner.delete.retention.ms", min_value=0),
    TopicConfigDef("file.delete.delay.ms", "long", "60000", "log.segment.delete.delay.ms",
                   min_value=0),
    TopicConfigDef("flush.messages", "long", str(LONG_MAX), "log.flush.interval.messages",
                   min_value=1),
    TopicConfigDef("flush.ms", "long", str(LONG_MAX), "log.flush.interval.ms", min_value=0),
    TopicConfigDef("follower.replication.throttled.replicas", "replicas", ""),
    TopicConfigDef("index.interval.bytes", "int", "4096", "log.index.interval.bytes",
                   min_value=0),
    TopicConfigDef("leader.replication.throttled.replicas", "replicas", ""),
    TopicConfigDef("max.compaction.lag.ms", "long", str(LONG_MAX),
                   "log.cleaner.max.compaction.lag.ms", min_value=1),
    TopicConfigDef("max.message.bytes", "int", "1048588", "message.max.bytes", min_value=0),
    TopicConfigDef("message.timestamp.type", "string", "CreateTime",
                   "log.message.timestamp.type", ("CreateTime", "LogAppendTime")),
    TopicConfigDef("message.timestamp.before.max.ms", "long", str(LONG_MAX),
                   "log.message.timestamp.before.max.ms", min_value=0),
    TopicConfigDef("message.timestamp.after.max.ms", "long", "3600000",
                   "log.message.timestamp.after.max.ms", min_value=0),
    TopicConfigDef("min.cleanable.dirty.ratio", "double", "0.5",
                   "log.cleaner.min.cleanable.ratio", min_value=0),
    TopicConfigDef("min.compaction.lag.ms", "long", "0", "log.cleaner.min.compaction.lag.ms",
                   min_value=0),
    TopicConfigDef("min.insync.replicas", "int", "1", "min.insync.replicas", min_value=1),
    TopicConfigDef("preallocate", "boolean", "false", "log.preallocate"),
    TopicConfigDef("retention.bytes", "long", "-1", "log.retention.bytes"),
    TopicConfigDef("retention.ms", "long", "604800000", "log.retention.ms", min_value=-1),
    TopicConfigDef("segment.bytes", "int", "1073741824", "log.segment.bytes", min_value=14),
    TopicConfigDef("segment.index.bytes", "int", "10485760", "log.index.size.max.bytes",
                   min_value=4),
    TopicConfigDef("segment.jitter.ms", "long", "0", "log.roll.jitter.ms", min_value=0),
    TopicConfigDef("segment.ms", "long", "604800000", "log.roll.ms", min_value=1),
    TopicConfigDef("unclean.leader.election.enable", "boolean", "false",
                   "unclean.leader.election.enable"),
]

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in _DEFS}


def validate_topic_config(name: str, value: str | None) -> str | None:
    """None if ``name=value`` is acceptable, else a one-line reason."""
    d = TOPIC_CONFIGS.get(name)
    if d is None:
        return f"unknown topic config {name}"
    if value is None:
        return None
    if d.kind in ("long", "int", "double"):
        try:
            number = float(value) if d.kind == "double" else int(value)
        except ValueError:
            return f"{name}: expected a number, got {value!r}"
        if d.min_value is not None and number < d.min_value:
            return f"{name}: must be at least {d.min_value:g}"
        if d.kind == "int" and not -(2**31) <= number < 2**31:
            return f"{name}: out of int range"
    elif d.kind == "boolean":
        if value.lower() not in ("true", "false"):
            return f"{name}: expected true or false"
    elif d.kind == "replicas":
        return _replicas_error(name, value)
    elif d.kind == "list":
        items = [x.strip() for x in value.split(",") if x.strip()]
        if not items or any(x not in d.choices for x in items):
            return f"{name}: expected a list of {', '.join(d.choices)}"
    elif d.choices and value not in d.choices:
        return f"{name}: expected one of {', '.join(d.choices)}"
    return None


ALL_REPLICAS = "*"


def _replicas_error(name: str, value: str) -> str | None:
    items = [x.strip() for x in value.split(",") if x.strip()]
    if items == [ALL_REPLICAS]:
        return None
    for item in items:
        partition, sep, broker = item.partition(":")
        if not sep or not partition.strip().isdigit() or not broker.strip().isdigit():
            return (f"{name} must be the literal '*' or a list of replicas in the form "
                    f"[PartitionId]:[BrokerId],[PartitionId]:[BrokerId],..., got {item!r}")
    return None


def parse_throttled_replicas(value: str, broker_id: int) -> frozenset[int] | None:
    """The partitions a ``*.replication.throttled.replicas`` value throttles on
    ``broker_id``, as Kafka reads it: ``*`` is every partition (None here), else
    the ``partition:broker`` entries naming this broker. An invalid value (which
    the controller refuses) throttles nothing."""
    items = [x.strip() for x in value.split(",") if x.strip()]
    if items == [ALL_REPLICAS]:
        return None
    out = set()
    for item in items:
        partition, _, broker = item.partition(":")
        if partition.strip().isdigit() and broker.strip().isdigit() and int(broker) == broker_id:
            out.add(int(partition))
    return frozenset(out)
