"""Config descriptions shared by DescribeConfigs, CreateTopics and the alters.

Sources are Kafka's ConfigSource numbers: 1 topic config, 2 dynamic config of
this broker, 3 dynamic cluster default, 4 static broker config
(server.properties or --override), 5 default. Synonyms are listed as Kafka
lists them (:func:`odradek.metadata.broker_configs.synonyms`): source by
source, highest precedence first, each source in synonym order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from odradek.broker.config import DEFAULTS
from odradek.broker.ports import ConfigPort, MetadataPort
from odradek.metadata.broker_configs import (
    BROKER_CONFIGS,
    CONFIG_TYPE,
    READ_ONLY,
    SOURCE_DEFAULT,
    SOURCE_DYNAMIC_BROKER,
    SOURCE_DYNAMIC_DEFAULT,
    SOURCE_STATIC_BROKER,
    SOURCE_TOPIC,
    Layer,
    broker_synonyms,
    config_def,
    synonyms,
)
from odradek.metadata.topic_configs import TOPIC_CONFIGS

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4

Synonym = tuple[str, str | None, int]
"""(name, value, source)."""

# Kafka's null defaults that Odradek's table keeps as "" (unset).
_NULL_WHEN_UNSET = frozenset({"advertised.listeners", "metadata.log.dir",
                              "inter.broker.listener.name", "broker.rack",
                              "controller.listener.names"})
# The coarser synonyms, in milliseconds per unit.
_UNIT_MS = {"log.retention.minutes": 60_000, "log.retention.hours": 3_600_000,
            "log.roll.hours": 3_600_000}


@dataclass(frozen=True, slots=True)
class Entry:
    """One config as DescribeConfigs (and CreateTopics v5+) reports it."""

    name: str
    value: str | None
    source: int
    config_type: int
    read_only: bool
    synonyms: list[Synonym]
    sensitive: bool = False
    """A password (Kafka's type PASSWORD): reported without its value."""


def broker_layers(config: ConfigPort) -> list[Layer]:
    """The sources of a broker config, highest precedence first."""
    defaults = {k: v for k, v in DEFAULTS.items() if v or k not in _NULL_WHEN_UNSET}
    return [(SOURCE_DYNAMIC_BROKER, config.dynamic_broker),
            (SOURCE_DYNAMIC_DEFAULT, config.dynamic_default),
            (SOURCE_STATIC_BROKER, config.explicit), (SOURCE_DEFAULT, defaults)]


def _broker_value(name: str, config: ConfigPort) -> str | None:
    for _, layer in broker_layers(config):
        if name in layer:
            return layer[name]
    return None


def _topic_default(synonym: str, config: ConfigPort) -> str | None:
    """The broker's effective value for a topic config's synonym: the first of its
    synonyms that any source sets (``log.retention.ms`` over ``.minutes`` over
    ``.hours``), converted to the topic config's unit."""
    for name in broker_synonyms(synonym):
        value = _broker_value(name, config)
        if value is not None and value.strip():
            return str(int(value) * _UNIT_MS[name]) if name in _UNIT_MS else value
    return None


def topic_config_entries(overrides: Mapping[str, str], config: ConfigPort) -> list[Entry]:
    """Every topic config, sorted by name: its value, source and synonyms. A config
    the topic sets is a topic config (source 1) whatever its value."""
    layers = broker_layers(config)
    out = []
    for name, d in sorted(TOPIC_CONFIGS.items()):
        syn: list[Synonym] = synonyms(d.synonym, layers) if d.synonym else []
        if name in overrides:
            syn.insert(0, (name, overrides[name], SOURCE_TOPIC))
            value: str | None = overrides[name]
        else:
            value = (_topic_default(d.synonym, config) if d.synonym else None) or d.default
        source = syn[0][2] if syn else SOURCE_DEFAULT
        out.append(Entry(name, value, source, CONFIG_TYPE.get(d.kind, 0), False, syn))
    return out


def broker_config_entries(config: ConfigPort) -> list[Entry]:
    """This broker's configs (resource ``"<node.id>"``), sorted by name: every config
    Odradek honours, and any other key its static config sets."""
    layers = broker_layers(config)
    names = set(BROKER_CONFIGS) | set(config.explicit) | set(config.dynamic_default) | set(
        config.dynamic_broker)
    out = []
    for name in sorted(names):
        d = config_def(name)
        syn = synonyms(name, layers)
        value = _broker_value(name, config)
        secret = d is not None and d.kind == "password"
        if secret:
            value, syn = None, [(n, None, s) for n, _, s in syn]
        out.append(Entry(name, value, syn[0][2] if syn else SOURCE_DEFAULT,
                         CONFIG_TYPE.get(d.kind, 0) if d else 0,
                         d is None or d.mode == READ_ONLY, syn, secret))
    return out


def default_config_entries(config: ConfigPort) -> list[Entry]:
    """The cluster default (resource ``""``): only the dynamic defaults that are set,
    with their synonyms among the dynamic defaults, as Kafka lists them."""
    layers = broker_layers(config)
    out = []
    for name, value in sorted(config.dynamic_default.items()):
        d = config_def(name)
        syn = [s for s in synonyms(name, layers) if s[2] == SOURCE_DYNAMIC_DEFAULT]
        ctype = CONFIG_TYPE.get(d.kind, 0) if d else 0
        out.append(Entry(name, value, SOURCE_DYNAMIC_DEFAULT, ctype,
                         d is None or d.mode == READ_ONLY, syn))
    return out


def broker_resource_error(name: str, node_id: int, *, any_broker: bool = False) -> str | None:
    """Why a broker resource name is not one this node answers for (None: it is):
    ``""`` (the cluster default) or this node's id — or, with ``any_broker`` (a
    controller deciding an alter forwarded by another broker), any node id.
    Kafka's words."""
    if name == "":
        return None
    if not (name.isascii() and name.lstrip("-").isdigit()):
        return f"Broker id must be an integer, but it is: {name}"
    if int(name) != node_id and not any_broker:
        return f"Unexpected broker id, expected {node_id} or empty string, but received {name}"
    return None


def accepts_broker_resource(state: MetadataPort, name: str) -> str | None:
    """Why this node does not alter broker resource ``name`` (None: it does). A
    cluster's controller also takes the ids of other registered brokers: their
    alters reach it forwarded, as the client sent them."""
    registered = name.isdigit() and int(name) in state.image.brokers  # one node: itself only
    return broker_resource_error(name, state.node_id, any_broker=registered)
