"""Topic creation by source tasks (KIP-158).

Worker setting ``topic.creation.enable`` (default true). Connector settings:

- ``topic.creation.groups``: names of groups besides ``default``;
- ``topic.creation.default.replication.factor`` and
  ``topic.creation.default.partitions`` (-1: the broker's default, else at
  least 1): once any ``topic.creation.*`` setting is given, both are required;
- ``topic.creation.<group>.include`` / ``.exclude``: regular expressions
  matched against a whole topic name (exclude wins); the ``default`` group
  takes every topic no other group claims and has neither;
- ``topic.creation.<group>.replication.factor`` / ``.partitions``: the
  default group's when unset;
- any other ``topic.creation.<group>.<name>``: the topic config ``<name>``
  (``cleanup.policy``, ``retention.ms``...), of that group only.

A topic belongs to the first group of ``topic.creation.groups`` (in order)
that includes it and does not exclude it, else to ``default``. Before a
source task first produces to a topic, :meth:`TopicCreator.ensure` looks it
up (metadata) and creates it with its group's settings when it is missing;
each topic is checked once per task run. Without the default group's
settings (or with ``topic.creation.enable=false``) nothing is created here
and the broker's auto-creation applies as before.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from odradek.connect.config import INT, LIST, ConfigDef, ConfigKey

if TYPE_CHECKING:
    from odradek.connect.runtime.config import WorkerConfig

log = logging.getLogger("odradek.connect.topics")
PREFIX = "topic.creation."
DEFAULT = "default"
TIMEOUT_S = 30.0
_OWN = ("include", "exclude", "replication.factor", "partitions")


def _minus_one_or_positive(name: str, value: Any) -> None:
    if value is not None and not (value == -1 or value >= 1):
        raise ValueError("Value must be -1 (the broker's default) or at least 1")


def _regexes(name: str, value: Any) -> None:
    for pattern in value or []:
        try:
            re.compile(pattern)
        except re.error as e:
            raise ValueError(f"Syntax error in regular expression {pattern!r}: {e}") from None


def _group_keys(group: str) -> tuple[ConfigKey, ...]:
    p = f"{PREFIX}{group}."
    where = "Topic Creation"
    sizes = (
        ConfigKey(p + "replication.factor", INT, None, validator=_minus_one_or_positive,
                  documentation="Replication factor of the topics this group creates "
                                "(-1: the broker's default).", group=where),
        ConfigKey(p + "partitions", INT, None, validator=_minus_one_or_positive,
                  documentation="Partitions of the topics this group creates "
                                "(-1: the broker's default).", group=where),
    )
    if group == DEFAULT:
        return sizes
    return (
        ConfigKey(p + "include", LIST, [], validator=_regexes,
                  documentation="Regular expressions of the topics in this group.", group=where),
        ConfigKey(p + "exclude", LIST, [], validator=_regexes,
                  documentation="Regular expressions of topics left out of this group.",
                  group=where),
        *sizes,
    )


CONFIG = ConfigDef((
    ConfigKey(PREFIX + "groups", LIST, [], group="Topic Creation",
              documentation="Groups of topic creation settings besides 'default'."),
    *_group_keys(DEFAULT),
))
"""The settings every source connector has (``/config/validate`` shows them)."""


def groups_of(config: Mapping[str, str]) -> list[str]:
    raw = config.get(PREFIX + "groups", "")
    out: list[str] = []
    for g in (s.strip() for s in raw.split(",")):
        if g and g != DEFAULT and g not in out:
            out.append(g)
    return out


def enabled(config: Mapping[str, str], worker: Mapping[str, str]) -> bool:
    """Whether the connector's tasks create topics."""
    return (worker.get("topic.creation.enable", "true").strip().lower() == "true"
            and any(k.startswith(PREFIX) for k in config))


def errors(config: Mapping[str, str], worker: Mapping[str, str]) -> dict[str, list[str]]:
    """Errors by setting name: the groups' settings, and the default group's
    two sizes being required once topic creation is used."""
    if not enabled(config, worker):
        return {}
    keys = ConfigDef(tuple(k for g in groups_of(config) for k in _group_keys(g)))
    out = {k: v for k, v in keys.validate(config).items() if v}
    for name in ("replication.factor", "partitions"):
        key = f"{PREFIX}{DEFAULT}.{name}"
        if not config.get(key, "").strip():
            out.setdefault(key, []).append(
                f"Missing required configuration \"{key}\" which has no default value.")
    return out


@dataclass(frozen=True)
class TopicGroup:
    name: str
    partitions: int
    replication_factor: int
    include: tuple[re.Pattern[str], ...] = ()
    exclude: tuple[re.Pattern[str], ...] = ()
    configs: dict[str, str] = field(default_factory=dict)

    def matches(self, topic: str) -> bool:
        if self.name == DEFAULT:
            return True
        return (any(p.fullmatch(topic) for p in self.include)
                and not any(p.fullmatch(topic) for p in self.exclude))


def parse_groups(config: Mapping[str, str]) -> list[TopicGroup]:
    """The groups in matching order, ``default`` last (its settings present)."""
    def value(group: str, name: str, fallback: int) -> int:
        raw = config.get(f"{PREFIX}{group}.{name}", "").strip()
        return int(raw) if raw else fallback

    partitions = value(DEFAULT, "partitions", -1)
    replication = value(DEFAULT, "replication.factor", -1)
    out = []
    for g in [*groups_of(config), DEFAULT]:
        p = f"{PREFIX}{g}."
        patterns = {which: tuple(re.compile(s.strip()) for s in config.get(
            p + which, "").split(",") if s.strip()) for which in ("include", "exclude")}
        configs = {k[len(p):]: v for k, v in config.items()
                   if k.startswith(p) and k[len(p):] not in _OWN}
        out.append(TopicGroup(g, value(g, "partitions", partitions),
                              value(g, "replication.factor", replication),
                              patterns["include"], patterns["exclude"], configs))
    return out


class TopicCreator:
    """One per source task run: creates each missing topic it is shown once."""

    def __init__(self, worker: WorkerConfig, config: Mapping[str, str]) -> None:
        self.worker = worker
        self.groups = parse_groups(config) if enabled(config, worker.props) else []
        self.checked: set[str] = set()
        self._admin: Any = None

    def group(self, topic: str) -> TopicGroup | None:
        return next((g for g in self.groups if g.matches(topic)), None)

    def ensure(self, topic: str) -> None:
        """Create ``topic`` with its group's settings unless it exists.
        Raises KafkaException when it can be neither found nor created."""
        if not self.groups or topic in self.checked:
            return
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        if self._admin is None:
            self._admin = AdminClient({**self.worker.client_config("producer"),
                                       "log_level": 3})
        if topic in self._admin.list_topics(timeout=TIMEOUT_S).topics:
            self.checked.add(topic)
            return
        group = self.group(topic)
        assert group is not None  # the default group takes every topic
        new = NewTopic(topic, group.partitions, group.replication_factor,
                       config=dict(group.configs))
        try:
            self._admin.create_topics([new])[topic].result(TIMEOUT_S)
            log.info("Created topic %s (group %s: %d partitions, replication factor %d, "
                     "configs %s)", topic, group.name, group.partitions,
                     group.replication_factor, group.configs)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
        self.checked.add(topic)
