"""The options of the ``odradek`` Spark source and sink, parsed and checked.

Option names and meanings are those of Spark's Kafka connector
(``structured-streaming-kafka-integration``), so a job moves between the two
by changing ``format(...)`` only. Everything here is pure: the parsed form is
a frozen, picklable value built once on the driver and shipped to executors.

Invariants:
- exactly one of ``assign``, ``subscribe``, ``subscribePattern``;
- ``kafka.bootstrap.servers`` is required;
- starting positions have the precedence startingTimestamp >
  startingOffsetsByTimestamp > startingOffsets, as in Spark;
- ``endingOffsets`` is refused by streaming queries, ``latest`` as a starting
  position by batch queries (as Spark does);
- ``kafka.*`` options reach the client with the prefix removed, except the
  ones the source must own (offset reset, auto commit, (de)serialisers);
  Java's security names are rewritten as librdkafka's (:mod:`odradek.spark.security`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.spark.security import SecurityOptionError, to_librdkafka

EARLIEST = -2
LATEST = -1

# kafka.* options the connector owns (the same list Spark refuses).
_FORBIDDEN_SOURCE = ("auto.offset.reset", "enable.auto.commit", "key.deserializer",
                     "value.deserializer", "interceptor.classes")
_FORBIDDEN_SINK = ("key.serializer", "value.serializer", "interceptor.classes")
# The exactly-once sink names and owns its transactions.
_OWNED_BY_EXACTLY_ONCE = ("transactional.id", "enable.idempotence")

_DURATION = re.compile(r"^\s*(\d+)\s*(us|ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000,
                "h": 3_600_000, "d": 86_400_000}


class OptionError(ValueError):
    """An option is missing, unknown in form, or contradicts another."""


@dataclass(frozen=True)
class Subscription:
    """Which topic-partitions a query reads.

    ``kind`` is ``assign`` (``assigned`` lists the fixed partitions),
    ``subscribe`` (``topics``) or ``subscribePattern`` (``pattern``, a Python
    regular expression matched against the whole topic name).
    """

    kind: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            assert self.pattern is not None
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)

    def describe(self) -> str:
        if self.kind == "subscribe":
            return ",".join(self.topics)
        if self.kind == "subscribePattern":
            return f"pattern {self.pattern}"
        return json.dumps({t: list(ps) for t, ps in self.assigned}, sort_keys=True)


@dataclass(frozen=True)
class Position:
    """A starting or ending position.

    ``kind``: ``earliest``, ``latest``, ``offsets`` (``offsets`` maps
    (topic, partition) to an offset, -2 earliest, -1 latest), ``timestamp``
    (one ``timestamp`` in ms for every partition) or ``timestamps``
    (``timestamps`` per partition). ``strategy`` says what happens when no
    offset has a timestamp that late: ``error`` or ``latest``.
    """

    kind: str
    offsets: tuple[tuple[tuple[str, int], int], ...] = ()
    timestamp: int | None = None
    timestamps: tuple[tuple[tuple[str, int], int], ...] = ()
    strategy: str = "error"


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    subscription: Subscription
    starting: Position
    ending: Position
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    min_partitions: int | None = None
    include_headers: bool = False
    poll_timeout_ms: int = 120_000
    commit_group: str | None = None
    client_config: tuple[tuple[str, str], ...] = field(default=())

    def config(self) -> dict[str, str]:
        """The client configuration: bootstrap servers and the user's kafka.* options."""
        return dict(self.client_config)


@dataclass(frozen=True)
class SinkOptions:
    """``exactly_once``: streaming writes go through transactions and skip a
    replayed batch (see ``sink.py``); ``transactional_prefix`` names the
    transactional ids, None meaning one derived from Spark's query id."""

    bootstrap_servers: str
    topic: str | None
    client_config: tuple[tuple[str, str], ...] = ()
    exactly_once: bool = False
    transactional_prefix: str | None = None

    def config(self) -> dict[str, str]:
        return dict(self.client_config)


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"option {name!r} must be true or false, not {raw!r}")
    return value == "true"


def _int(options: Mapping[str, str], name: str, minimum: int = 1) -> int | None:
    raw = options.get(name)
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(f"option {name!r} must be an integer, not {raw!r}") from None
    if value < minimum:
        raise OptionError(f"option {name!r} must be at least {minimum}, not {value}")
    return value


def parse_duration_ms(raw: str, name: str = "maxTriggerDelay") -> int:
    """Spark's time strings: ``15m``, ``10s``, ``250ms``, ``1h``; bare numbers are ms."""
    m = _DURATION.match(raw)
    if m is None:
        raise OptionError(f"option {name!r} must be a duration such as 10s or 5m, not {raw!r}")
    return int(int(m.group(1)) * _DURATION_MS[(m.group(2) or "ms").lower()])


def _json_object(raw: str, name: str) -> dict[str, object]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option {name!r} is not valid JSON ({exc.msg}): {raw!r}") from None
    if not isinstance(value, dict):
        raise OptionError(f"option {name!r} must be a JSON object, not {raw!r}")
    return value


def _partition_map(raw: str, name: str) -> tuple[tuple[tuple[str, int], int], ...]:
    """``{"topic": {"0": 23, "1": -1}}`` -> (((topic, 0), 23), ((topic, 1), -1))."""
    out: list[tuple[tuple[str, int], int]] = []
    for topic, parts in _json_object(raw, name).items():
        if not isinstance(parts, dict):
            raise OptionError(f"option {name!r}: topic {topic!r} must map partitions to numbers")
        for partition, value in parts.items():
            try:
                p = int(partition)
            except ValueError:
                raise OptionError(f"option {name!r}: {partition!r} is not a partition") from None
            if not isinstance(value, int) or isinstance(value, bool):
                raise OptionError(f"option {name!r}: {topic}-{p} must be an integer")
            out.append(((topic, p), value))
    return tuple(sorted(out))


def _subscription(options: Mapping[str, str]) -> Subscription:
    given = [k for k in ("assign", "subscribe", "subscribePattern") if options.get(k)]
    if len(given) != 1:
        raise OptionError(
            "exactly one of the options 'assign', 'subscribe' or 'subscribePattern' must be "
            f"given (got {', '.join(given) or 'none'})"
        )
    kind = given[0]
    raw = str(options[kind])
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError("option 'subscribe' names no topic")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribePattern":
        try:
            re.compile(raw)
        except re.error as exc:
            raise OptionError(f"option 'subscribePattern' is not a valid pattern: {exc}") from None
        return Subscription("subscribePattern", pattern=raw)
    assigned: list[tuple[str, tuple[int, ...]]] = []
    for topic, parts in _json_object(raw, "assign").items():
        if not isinstance(parts, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts
        ):
            raise OptionError(f"option 'assign': topic {topic!r} must list partition numbers")
        assigned.append((topic, tuple(sorted(set(parts)))))
    if not any(ps for _, ps in assigned):
        raise OptionError("option 'assign' names no partition")
    return Subscription("assign", assigned=tuple(sorted(assigned)))


def _starting(options: Mapping[str, str], streaming: bool | None) -> Position:
    strategy = str(options.get("startingOffsetsByTimestampStrategy", "error")).lower()
    if strategy not in ("error", "latest"):
        raise OptionError("option 'startingOffsetsByTimestampStrategy' must be error or latest")
    if options.get("startingTimestamp") is not None:
        ts = _int(options, "startingTimestamp", minimum=0)
        return Position("timestamp", timestamp=ts, strategy=strategy)
    if options.get("startingOffsetsByTimestamp") is not None:
        stamps = _partition_map(str(options["startingOffsetsByTimestamp"]),
                                "startingOffsetsByTimestamp")
        return Position("timestamps", timestamps=stamps, strategy=strategy)
    raw = options.get("startingOffsets")
    if raw is None:
        return Position("latest" if streaming else "earliest")
    value = str(raw).strip()
    if value.lower() == "earliest":
        return Position("earliest")
    if value.lower() == "latest":
        if streaming is False:
            raise OptionError("startingOffsets 'latest' is not valid for batch queries")
        return Position("latest")
    offsets = _partition_map(value, "startingOffsets")
    for (topic, p), o in offsets:
        if o < EARLIEST or (streaming is False and o == LATEST):
            raise OptionError(f"startingOffsets for {topic}-{p} is not valid: {o}")
    return Position("offsets", offsets=offsets)


def _ending(options: Mapping[str, str], streaming: bool | None) -> Position:
    raw = options.get("endingOffsets")
    if raw is None:
        return Position("latest")
    if streaming is True:
        raise OptionError("option 'endingOffsets' is not valid in streaming queries")
    value = str(raw).strip()
    if value.lower() == "latest":
        return Position("latest")
    if value.lower() == "earliest":
        raise OptionError("endingOffsets 'earliest' is not valid")
    offsets = _partition_map(value, "endingOffsets")
    for (topic, p), o in offsets:
        if o < LATEST:
            raise OptionError(f"endingOffsets for {topic}-{p} is not valid: {o}")
    return Position("offsets", offsets=offsets)


def _client_config(
    options: Mapping[str, str], forbidden: tuple[str, ...]
) -> tuple[str, tuple[tuple[str, str], ...]]:
    config: dict[str, str] = {}
    for key, value in options.items():
        if not key.lower().startswith("kafka."):
            continue
        name = key[len("kafka."):]
        if name.lower() in forbidden:
            raise OptionError(
                f"option {key!r} is not supported: the odradek connector manages it itself"
            )
        config[name] = str(value)
    bootstrap = config.get("bootstrap.servers", "").strip()
    if not bootstrap:
        raise OptionError("option 'kafka.bootstrap.servers' must be specified")
    try:
        config = to_librdkafka(config)
    except SecurityOptionError as exc:
        raise OptionError(str(exc)) from None
    return bootstrap, tuple(sorted(config.items()))


def parse_source(options: Mapping[str, str], streaming: bool | None) -> SourceOptions:
    """Check every option of a read; OptionError names the first wrong one.

    ``streaming`` None checks what holds for both kinds of read (at ``load()``,
    before Spark says which it is)."""
    bootstrap, config = _client_config(options, _FORBIDDEN_SOURCE)
    level = dict(config).get("isolation.level", "read_uncommitted")
    if level not in ("read_uncommitted", "read_committed"):
        raise OptionError(
            f"option 'kafka.isolation.level' must be read_uncommitted or read_committed, "
            f"not {level!r}"
        )
    subscription = _subscription(options)
    starting = _starting(options, streaming)
    if starting.kind == "offsets" and subscription.kind == "assign":
        wanted = {(t, p) for t, ps in subscription.assigned for p in ps}
        given = {tp for tp, _ in starting.offsets}
        if missing := sorted(wanted - given):
            raise OptionError(
                "startingOffsets must list every assigned partition; missing "
                + ", ".join(f"{t}-{p}" for t, p in missing)
            )
    max_offsets = _int(options, "maxOffsetsPerTrigger")
    min_offsets = _int(options, "minOffsetsPerTrigger")
    if max_offsets is not None and min_offsets is not None and min_offsets > max_offsets:
        raise OptionError("minOffsetsPerTrigger must not be greater than maxOffsetsPerTrigger")
    delay = parse_duration_ms(str(options.get("maxTriggerDelay", "15m")))
    commit = _bool(options, "commitOffsetsToGroup", True)
    group = None
    if commit:
        group = dict(config).get("group.id") or (
            f"{options.get('groupIdPrefix', 'spark-odradek-source')}-"
            f"{_stable_hash(subscription.describe())}"
        )
    return SourceOptions(
        bootstrap_servers=bootstrap,
        subscription=subscription,
        starting=starting,
        ending=_ending(options, streaming),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=delay,
        min_partitions=_int(options, "minPartitions"),
        include_headers=_bool(options, "includeHeaders", False),
        poll_timeout_ms=_int(options, "kafkaConsumer.pollTimeoutMs") or 120_000,
        commit_group=group,
        client_config=config,
    )


# The prefix also names the bookkeeping topic, so it must be a legal topic name part.
_PREFIX = re.compile(r"^[A-Za-z0-9._-]{1,200}$")


def parse_sink(options: Mapping[str, str], streaming: bool | None = None) -> SinkOptions:
    """Check a write's options. ``streaming`` False refuses ``exactlyOnce``
    (a batch write has no batch id to recognise a rerun by)."""
    exactly_once = _bool(options, "exactlyOnce", False)
    forbidden = _FORBIDDEN_SINK + (_OWNED_BY_EXACTLY_ONCE if exactly_once else ())
    bootstrap, config = _client_config(options, forbidden)
    topic = options.get("topic")
    if topic is not None and not str(topic).strip():
        raise OptionError("option 'topic' is empty")
    prefix = options.get("transactional.id.prefix")
    if prefix is not None:
        prefix = str(prefix).strip()
        if not exactly_once:
            raise OptionError("option 'transactional.id.prefix' needs exactlyOnce=true")
        if not _PREFIX.match(prefix):
            raise OptionError(
                "option 'transactional.id.prefix' must be 1 to 200 characters of "
                f"[A-Za-z0-9._-] (it also names a topic), not {prefix!r}"
            )
    if exactly_once and streaming is False:
        raise OptionError(
            "exactlyOnce applies to streaming writes (writeStream) only: a batch write has "
            "no batch id by which a rerun could be recognised"
        )
    return SinkOptions(bootstrap, None if topic is None else str(topic).strip(), config,
                       exactly_once=exactly_once, transactional_prefix=prefix)


def _stable_hash(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:10]
