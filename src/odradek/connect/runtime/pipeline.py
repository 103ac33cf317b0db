"""Building a connector's converters from its settings (its transform chain is
:class:`odradek.connect.transforms.chain.TransformChain`).

A connector's ``key.converter`` / ``value.converter`` / ``header.converter``
(with their prefixed settings) override the worker's.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.connect import plugins
from odradek.connect.config import ConfigError
from odradek.connect.converters.base import Converter, HeaderConverter
from odradek.connect.runtime.config import prefixed


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


def header_converter(connector: Mapping[str, str], worker: Mapping[str, str]
                     ) -> HeaderConverter:
    """The connector's ``header.converter`` (the worker's when unset; Kafka's
    SimpleHeaderConverter by default), configured with its prefixed settings."""
    name = "header.converter"
    source = connector if connector.get(name) else worker
    class_name = source.get(name) or "org.apache.kafka.connect.storage.SimpleHeaderConverter"
    try:
        conv = plugins.load(class_name)()
    except plugins.PluginNotFound:
        raise ConfigError(name, f"Class {class_name} could not be found.") from None
    if not isinstance(conv, HeaderConverter):
        raise ConfigError(name, f"{class_name} is not a header converter")
    try:
        conv.configure(prefixed(source, name + "."))
    except ValueError as e:
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(name, str(e)) from None
    return conv
