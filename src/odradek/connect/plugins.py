"""Finding plugins (connectors, converters, transforms, predicates) by name.

A name resolves, in order, as:

1. a Kafka class name of a built-in plugin (``BUILTIN`` of ``connectors``,
   ``converters``, ``transforms``), e.g.
   ``org.apache.kafka.connect.file.FileStreamSourceConnector`` or
   ``org.apache.kafka.connect.transforms.InsertField$Value``, so configs written
   for Kafka Connect work unchanged;
2. a plugin registered under the entry point group ``odradek.connect`` (the
   entry point's name is the plugin's name), how third-party packages add
   connectors;
3. the simple class name of either (``FileStreamSourceConnector``), or that
   name without its ``Connector`` suffix (``FileStreamSource``), as Kafka's
   aliases;
4. a Python path ``package.module:Class`` or ``package.module.Class``.

A name that resolves to nothing raises :class:`PluginNotFound`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points

from odradek.connect import connectors, converters, transforms

ENTRY_POINT_GROUP = "odradek.connect"


class PluginNotFound(LookupError):
    def __init__(self, name: str) -> None:
        super().__init__(f"Failed to find any class that implements Connector and which "
                         f"name matches {name}")
        self.name = name


@dataclass(frozen=True, slots=True)
class Plugin:
    name: str
    """The name it is listed under (Kafka's class name for built-ins)."""
    target: str
    """``python.module:Class``."""

    def load(self) -> type:
        module, _, attr = self.target.partition(":")
        obj: object = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        assert isinstance(obj, type), self.target
        return obj

    @property
    def simple_name(self) -> str:
        return self.name.rsplit(".", 1)[-1]


@cache
def plugins() -> tuple[Plugin, ...]:
    """Every known plugin: built-ins first, then entry points."""
    found = [Plugin(n, t) for table in (connectors.BUILTIN, converters.BUILTIN,
                                         transforms.BUILTIN) for n, t in table.items()]
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.append(Plugin(ep.name, ep.value))
    return tuple(found)


def find(name: str) -> Plugin:
    name = name.strip()
    every = plugins()
    for p in every:
        if p.name == name:
            return p
    for p in every:
        if name in (p.simple_name, p.simple_name.removesuffix("Connector")):
            return p
    if ":" in name:
        return Plugin(name, name)
    module, _, attr = name.rpartition(".")
    if module:
        try:
            importlib.import_module(module)
        except ImportError:
            raise PluginNotFound(name) from None
        return Plugin(name, f"{module}:{attr}")
    raise PluginNotFound(name)


def load(name: str) -> type:
    """The class ``name`` resolves to."""
    plugin = find(name)
    try:
        return plugin.load()
    except (ImportError, AttributeError):
        raise PluginNotFound(name) from None
