"""Broker-level configs as Kafka 4.0 defines them: name, type, and whether a
running broker can change them (Kafka's *dynamic update mode*), plus the
controller's decision for a dynamic change (KIP-226).

Only configs Odradek honours are listed. A config is one of:

* ``read-only``: read at start-up from ``server.properties`` / ``--override``
  (STATIC_BROKER_CONFIG) or Kafka's default (DEFAULT_CONFIG);
* ``cluster-wide``: may also be set while the broker runs, for one broker
  (resource name ``"<node.id>"``, DYNAMIC_BROKER_CONFIG) or as the cluster
  default (resource name ``""``, DYNAMIC_DEFAULT_BROKER_CONFIG);
* ``per-broker``: dynamic, but only for one broker: the keystore of the TLS
  listeners (``ssl.keystore.*``, ``ssl.key.password``, with or without a
  ``listener.name.<l>.`` prefix; :mod:`odradek.metadata.ssl_configs`). Kafka's
  other per-broker ones (listeners, the rest of ``ssl.*``) Odradek cannot
  change while it runs, so it lists them as read-only.

The effective value of a config is, in order: the broker's dynamic value, the
cluster default, the static value, the default. Dynamic values are
``ConfigRecord``\\ s of resource type BROKER (4) in the metadata log, named by
the resource name, as Kafka's KRaft controller writes them.

Synonyms are Kafka's: ``log.retention.ms``, ``log.retention.minutes`` and
``log.retention.hours`` name one setting (the finer unit wins); so do
``log.roll.ms``/``log.roll.hours`` and ``log.flush.interval.ms``/
``log.flush.scheduler.interval.ms``. Only the first of each list is dynamic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from odradek.metadata.image import BROKER_RESOURCE, MetadataImage
from odradek.metadata.outcome import Outcome
from odradek.metadata.ssl_configs import base_key, is_dynamic_ssl_key, is_password_key, is_ssl_key
from odradek.metadata.topic_configs import TOPIC_CONFIGS, validate_topic_config
from odradek.wire.errors import ErrorCode
from odradek.wire.internal.config_record import ConfigRecord

READ_ONLY = "read-only"
CLUSTER_WIDE = "cluster-wide"
PER_BROKER = "per-broker"

# Kafka's ConfigSource numbers (DescribeConfigs v1+).
SOURCE_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

# Kafka's ConfigType numbers (DescribeConfigs v3+); 0 is UNKNOWN.
CONFIG_TYPE = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6,
               "list": 7, "password": 9, "replicas": 7}


@dataclass(frozen=True, slots=True)
class BrokerConfigDef:
    name: str
    kind: str
    """Kafka's type: boolean, string, int, short, long, double or list."""
    mode: str = READ_ONLY
    """``read-only``, ``cluster-wide`` or ``per-broker`` (module docstring)."""
    kafka: bool = True
    """False for Odradek's own settings (``odradek.*`` and a few more)."""


def _defs(kind: str, mode: str, *names: str, kafka: bool = True) -> list[BrokerConfigDef]:
    return [BrokerConfigDef(n, kind, mode, kafka) for n in names]


R, C = READ_ONLY, CLUSTER_WIDE
_DEFS = [
    # Dynamic, cluster-wide: the broker defaults of topic configs (Kafka's
    # ServerTopicConfigSynonyms, first synonym of each) ...
    *_defs("int", C, "log.segment.bytes", "log.index.size.max.bytes",
           "log.index.interval.bytes", "message.max.bytes", "min.insync.replicas"),
    *_defs("long", C, "log.roll.ms", "log.flush.interval.messages", "log.flush.interval.ms",
           "log.retention.bytes", "log.retention.ms", "log.cleaner.delete.retention.ms",
           "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms",
           "log.segment.delete.delay.ms", "log.message.timestamp.before.max.ms",
           "log.message.timestamp.after.max.ms"),
    *_defs("double", C, "log.cleaner.min.cleanable.ratio"),
    *_defs("list", C, "log.cleanup.policy"),
    *_defs("string", C, "compression.type", "log.message.timestamp.type"),
    *_defs("boolean", C, "log.preallocate", "unclean.leader.election.enable"),
    # ... the log cleaner (LogCleaner.ReconfigurableConfigs) ...
    *_defs("int", C, "log.cleaner.threads"),
    *_defs("long", C, "log.cleaner.dedupe.buffer.size", "log.cleaner.backoff.ms"),
    *_defs("double", C, "log.cleaner.io.max.bytes.per.second"),
    # ... connection limits (SocketServer.ReconfigurableConfigs) ...
    *_defs("int", C, "max.connections", "max.connections.per.ip", "max.connection.creation.rate"),
    *_defs("string", C, "max.connections.per.ip.overrides"),
    # ... and the replication throttle (a broker quota config: dynamic only in Kafka).
    *_defs("long", C, "leader.replication.throttled.rate",
           "follower.replication.throttled.rate"),
    # Read-only. Kafka lets listeners, advertised.listeners,
    # listener.security.protocol.map (per-broker) and num.replica.fetchers
    # (cluster-wide) change at run time; Odradek binds and sizes them at start-up.
    *_defs("int", R, "node.id", "num.partitions", "default.replication.factor",
           "socket.request.max.bytes", "log.retention.hours", "log.retention.minutes",
           "log.roll.hours", "log.flush.offset.checkpoint.interval.ms",
           "log.flush.start.offset.checkpoint.interval.ms",
           "offsets.topic.num.partitions", "offsets.topic.segment.bytes",
           "group.initial.rebalance.delay.ms", "group.min.session.timeout.ms",
           "group.max.session.timeout.ms", "group.max.size", "offset.metadata.max.bytes",
           "group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms",
           "group.consumer.max.size",
           "offsets.retention.minutes", "transaction.state.log.num.partitions",
           "transaction.state.log.segment.bytes", "transaction.max.timeout.ms",
           "transactional.id.expiration.ms",
           "transaction.abort.timed.out.transaction.cleanup.interval.ms",
           "transaction.remove.expired.transaction.cleanup.interval.ms",
           "queued.max.requests", "quota.window.num", "quota.window.size.seconds",
           "replication.quota.window.num", "replication.quota.window.size.seconds",
           "controller.quorum.election.timeout.ms", "controller.quorum.fetch.timeout.ms",
           "controller.quorum.election.backoff.max.ms", "controller.quorum.request.timeout.ms",
           "controller.quorum.append.linger.ms", "broker.heartbeat.interval.ms",
           "broker.session.timeout.ms", "metadata.max.idle.interval.ms",
           "replica.fetch.wait.max.ms", "replica.fetch.min.bytes", "replica.fetch.max.bytes",
           "replica.fetch.response.max.bytes", "replica.fetch.backoff.ms",
           "num.replica.fetchers", "transaction.state.log.min.isr"),
    *_defs("short", R, "offsets.topic.replication.factor",
           "transaction.state.log.replication.factor"),
    *_defs("long", R, "log.retention.check.interval.ms", "log.flush.scheduler.interval.ms",
           "offsets.retention.check.interval.ms", "connections.max.idle.ms",
           "queued.max.request.bytes", "metadata.log.max.record.bytes.between.snapshots",
           "metadata.log.max.snapshot.interval.ms", "replica.lag.time.max.ms",
           "replica.high.watermark.checkpoint.interval.ms",
           "leader.imbalance.check.interval.seconds"),
    *_defs("list", R, "group.consumer.assignors"),
    *_defs("boolean", R, "auto.create.topics.enable", "delete.topic.enable",
           "auto.leader.rebalance.enable", "log.cleaner.enable"),
    *_defs("list", R, "process.roles", "controller.quorum.voters",
           "controller.quorum.bootstrap.servers"),
    *_defs("string", R, "listeners", "advertised.listeners", "log.dirs", "metadata.log.dir",
           "controller.listener.names", "listener.security.protocol.map",
           "inter.broker.listener.name", "broker.rack"),
    # Odradek's own (docs/durability.md, docs/cluster.md, docs/limits.md,
    # docs/operations.md).
    *_defs("string", R, "cluster.id", "log.recovery.damaged.batches",
           "odradek.inter.broker.address.overrides", "odradek.metrics.listener",
           kafka=False),
    *_defs("int", R, "odradek.log.max.open.files", "odradek.log.writer.threads", kafka=False),
    *_defs("long", R, "odradek.log.page.cache.window.bytes",
           "odradek.log.page.cache.retain.bytes", "odradek.log.preallocate.bytes",
           kafka=False),
    *_defs("boolean", R, "odradek.accept.missing.metadata", kafka=False),
]
del R, C

BROKER_CONFIGS: dict[str, BrokerConfigDef] = {d.name: d for d in _DEFS}
DYNAMIC = frozenset(n for n, d in BROKER_CONFIGS.items() if d.mode != READ_ONLY)
"""The dynamic names of :data:`BROKER_CONFIGS` (and :func:`is_dynamic` adds the
keystore keys, by pattern)."""


def config_def(name: str) -> BrokerConfigDef | None:
    """The definition of a broker config: :data:`BROKER_CONFIGS`, or for an
    ``ssl.*`` key (listener-prefixed or not) its keystore keys per-broker, the
    others read-only, the passwords of Kafka's type ``password``."""
    d = BROKER_CONFIGS.get(name)
    if d is not None or not is_ssl_key(name):
        return d
    kind = "password" if is_password_key(name) else (
        "list" if base_key(name) in ("ssl.enabled.protocols", "ssl.cipher.suites") else "string")
    return BrokerConfigDef(name, kind, PER_BROKER if is_dynamic_ssl_key(name) else READ_ONLY)


def is_dynamic(name: str) -> bool:
    """May a running broker take ``name`` from a dynamic config?"""
    d = config_def(name)
    return d is not None and d.mode != READ_ONLY

_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
# broker config -> the topic config it is the default of
_TOPIC_OF = {d.synonym: d.name for d in TOPIC_CONFIGS.values() if d.synonym}


def broker_synonyms(name: str) -> tuple[str, ...]:
    """Kafka's ``brokerConfigSynonyms``: the names of one setting, highest
    precedence first (``log.retention.ms`` → ms, minutes, hours)."""
    for group in _SYNONYM_GROUPS:
        if name in group:
            return group
    return (name,)


Layer = tuple[int, Mapping[str, str | None]]
"""(config source, name → value) of one source; a None value is Kafka's null."""


def synonyms(name: str, layers: list[Layer]) -> list[tuple[str, str | None, int]]:
    """Kafka's ``configSynonyms``: (name, value, source) for every synonym of
    ``name`` set in each layer, layer by layer (``layers`` in precedence order:
    dynamic broker, dynamic default, static, default), then the leading entries
    that are not ``name`` itself dropped — as Kafka does, so a
    ``log.retention.ms`` left unset lists no synonyms even where
    ``log.retention.hours`` is set."""
    names = broker_synonyms(name)
    out = [(n, layer[n], source) for source, layer in layers for n in names if n in layer]
    while out and out[0][0] != name:
        out.pop(0)
    return out


def broker_config_error(name: str, value: str | None) -> tuple[ErrorCode, str] | None:
    """Why ``name=value`` cannot be set dynamically (None: it can; a None value
    deletes). Kafka's answers: INVALID_REQUEST with "Cannot update these configs
    dynamically: Set(...)" for a read-only config and for a value that does not
    parse. A name Odradek does not know gets INVALID_CONFIG (Kafka stores any
    name, for plugins; Odradek has none, so it is a typo)."""
    d = config_def(name)
    if d is None:
        return ErrorCode.INVALID_CONFIG, f"Unknown broker config: {name}"
    if d.mode == READ_ONLY:
        return ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: Set({name})"
    if value is None:
        return None
    problem = _value_error(d, value)
    if problem:
        return (ErrorCode.INVALID_REQUEST,
                f"Invalid value {value} for configuration {name}: {problem}")
    return None


def _value_error(d: BrokerConfigDef, value: str) -> str | None:
    topic = _TOPIC_OF.get(d.name)
    if topic is not None:  # the same rules as the topic config it defaults
        return validate_topic_config(topic, value)
    if d.kind in ("int", "short", "long"):
        try:
            number = int(value.strip())
        except ValueError:
            return f"Not a number of type {d.kind.upper()}"
        if number < 0 or (d.name == "log.cleaner.threads" and number < 1):
            return "Value must be at least 1" if d.name == "log.cleaner.threads" else \
                "Value must be at least 0"
    elif d.kind == "double":
        try:
            if float(value.strip()) < 0:
                return "Value must be at least 0"
        except ValueError:
            return "Not a number of type DOUBLE"
    elif d.kind == "boolean" and value.strip().lower() not in ("true", "false"):
        return "Expected value to be either true or false"
    elif d.name == "max.connections.per.ip.overrides":
        for item in filter(None, (x.strip() for x in value.split(","))):
            host, sep, count = item.rpartition(":")
            if not sep or not host or not count.strip().isdigit():
                return f"expected HOST:COUNT entries, got {item!r}"
    return None


def alter_broker_configs(
    image: MetadataImage, resource_name: str, changes: Mapping[str, str | None]
) -> Outcome:
    """Records for dynamic broker config changes of ``resource_name`` (``""``:
    the cluster default, else a node id); ``changes`` maps a config to its new
    value, or None to delete it (the next source then applies). Every change is
    checked first; the first bad one fails them all (:func:`broker_config_error`).
    Read-only names are reported together, in Kafka's words."""
    defs = {n: config_def(n) for n in changes}
    read_only = sorted(n for n, d in defs.items() if d is not None and d.mode == READ_ONLY)
    if read_only:
        return Outcome.fail(ErrorCode.INVALID_REQUEST,
                            f"Cannot update these configs dynamically: Set({', '.join(read_only)})")
    per_broker = sorted(n for n, d in defs.items() if d is not None and d.mode == PER_BROKER)
    if per_broker and resource_name == "":
        return Outcome.fail(ErrorCode.INVALID_REQUEST,
                            "Cannot update these configs at default cluster level, broker id "
                            f"must be specified: Set({', '.join(per_broker)})")
    for name, value in changes.items():
        problem = broker_config_error(name, value)
        if problem:
            return Outcome.fail(*problem)
    current = image.broker_configs.get(resource_name, {})
    return Outcome(records=[
        ConfigRecord(BROKER_RESOURCE, resource_name, k, v) for k, v in sorted(changes.items())
        if v is not None or k in current])
