"""Building a connector's converters and transform chain from its settings.

A connector's ``key.converter`` / ``value.converter`` (with their prefixed
settings) override the worker's. Headers are written as Kafka's
SimpleHeaderConverter writes simple values: bytes unchanged, strings UTF-8,
anything else its JSON text; read back as bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.connect import plugins
from odradek.connect.config import ConfigError
from odradek.connect.converters.base import Converter
from odradek.connect.data import ConnectRecord
from odradek.connect.runtime.config import prefixed
from odradek.connect.transforms.base import Predicate, Transformation


def converter(which: str, connector: Mapping[str, str], worker: Mapping[str, str]
              ) -> Converter:
    """``which``: ``key`` or ``value``; configured with its prefixed settings."""
    name = f"{which}.converter"
    source = connector if connector.get(name) else worker
    try:
        cls = plugins.load(source[name])
        conv = cls()
        if not isinstance(conv, Converter):
            raise ConfigError(name, f"{source[name]} is not a converter")
        conv.configure({**prefixed(source, name + "."), "converter.type": which},
                       which == "key")
    except plugins.PluginNotFound:
        raise ConfigError(name, f"Class {source[name]} could not be found.") from None
    except ValueError as e:
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(name, str(e)) from None
    return conv


def header_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value).encode()


@dataclass(slots=True)
class Step:
    alias: str
    transform: Transformation[Any]
    predicate: Predicate[Any] | None = None
    negate: bool = False

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if self.predicate is not None and self.predicate.test(record) == self.negate:
            return record
        result: ConnectRecord | None = self.transform.apply(record)
        return result


@dataclass(slots=True)
class Chain:
    steps: list[Step] = field(default_factory=list)

    def close(self) -> None:
        for s in self.steps:
            s.transform.close()
            if s.predicate is not None:
                s.predicate.close()


def _instance(name_key: str, props: Mapping[str, str], base: type) -> Any:
    type_name = props.get(name_key)
    if not type_name:
        raise ConfigError(name_key, f"Missing required configuration \"{name_key}\"")
    try:
        obj: Any = plugins.load(type_name)()
    except plugins.PluginNotFound:
        raise ConfigError(name_key, f"Class {type_name} could not be found.") from None
    if not isinstance(obj, base):
        raise ConfigError(name_key, f"{type_name} is not a {base.__name__}")
    prefix = name_key.removesuffix("type")
    configure: Any = getattr(obj, "configure")  # noqa: B009 (isinstance(type) narrows to object)
    try:
        configure({k: v for k, v in prefixed(props, prefix).items() if k != "type"})
    except ConfigError as e:  # named by the plugin's own key: give the full name
        raise ConfigError(prefix + e.name, e.message) from None
    except ValueError as e:
        raise ConfigError(name_key, str(e)) from None
    return obj


def chain(props: Mapping[str, str]) -> Chain:
    """The transforms of ``transforms=a,b`` with their predicates (raises
    :class:`ConfigError` naming the bad setting)."""
    aliases = [a.strip() for a in props.get("transforms", "").split(",") if a.strip()]
    declared = {p.strip() for p in props.get("predicates", "").split(",") if p.strip()}
    out = Chain()
    for alias in aliases:
        transform = _instance(f"transforms.{alias}.type", props, Transformation)
        step = Step(alias, transform)
        pname = props.get(f"transforms.{alias}.predicate", "").strip()
        if pname:
            if pname not in declared:
                raise ConfigError(f"transforms.{alias}.predicate",
                                  f"predicate {pname} is not listed in predicates")
            step.predicate = _instance(f"predicates.{pname}.type", props, Predicate)
            step.negate = props.get(f"transforms.{alias}.negate", "false").lower() == "true"
        out.steps.append(step)
    return out
