"""Checking a connector's config: its class, the common settings merged with
the connector's own (``definition``), the connector's ``validate``, the
transforms and predicates, the converters, and a sink's topics. Errors are
by setting name, as ``/config/validate`` shows them; :class:`RestError`
carries an HTTP status and Kafka Connect's message."""

from __future__ import annotations

import re
from collections.abc import Mapping

from odradek.connect import plugins
from odradek.connect.api import Connector, SinkConnector, SourceConnector
from odradek.connect.config import ConfigDef, ConfigError
from odradek.connect.runtime import eos, topics
from odradek.connect.runtime.config import SINK_COMMON, SOURCE_COMMON
from odradek.connect.runtime.pipeline import converter
from odradek.connect.transforms.chain import validate_transforms


class RestError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def definition(cls: type) -> ConfigDef:
    """The common settings merged with the connector's own."""
    common = SINK_COMMON if issubclass(cls, SinkConnector) else SOURCE_COMMON
    return common + getattr(cls, "CONFIG", ConfigDef())


def connector_class(config: Mapping[str, str]) -> type[Connector]:
    name = config.get("connector.class", "").strip()
    if not name:
        raise RestError(400, "connector.class: Missing required configuration "
                             "\"connector.class\" which has no default value.")
    try:
        cls = plugins.load(name)
    except plugins.PluginNotFound as e:
        raise RestError(400, f"connector.class: {e}") from None
    if not (isinstance(cls, type) and issubclass(cls, SourceConnector | SinkConnector)):
        raise RestError(400, f"connector.class: {name} is not a connector")
    return cls


def config_errors(cls: type[Connector], config: Mapping[str, str],
                  worker: Mapping[str, str], *, own: bool = True) -> dict[str, list[str]]:
    """Errors by setting name: the merged ConfigDef's (unless ``own`` is false),
    the connector's ``validate``, the transforms', the converters' and the
    sink's topics."""
    errors: dict[str, list[str]] = {}

    def add(name: str, message: str) -> None:
        errors.setdefault(name, []).append(message)

    for name, errs in (definition(cls).validate(config) if own else {}).items():
        for e in errs:
            add(name, e)
    try:
        for name, errs in cls().validate(config).items():
            for e in errs:
                add(name, e)
    except Exception as e:
        add("connector.class", f"validate failed: {e}")
    for name, errs in validate_transforms(config).items():
        for message in errs:
            add(name, message)
    for which in ("key", "value"):
        if config.get(f"{which}.converter"):
            try:
                converter(which, config, worker)
            except ConfigError as e:
                add(e.name, e.message)
    if issubclass(cls, SourceConnector):
        for name, errs in topics.errors(config, worker).items():
            for message in errs:
                add(name, message)
    for name, errs in eos.validate(cls, config, worker).items():
        for message in errs:
            add(name, message)
    if issubclass(cls, SinkConnector):
        has_topics = bool(config.get("topics", "").strip())
        has_regex = bool(config.get("topics.regex", "").strip())
        if has_topics == has_regex:
            add("topics", "Must configure one of topics or topics.regex")
        for message in _dlq_errors(config):
            add("errors.deadletterqueue.topic.name", message)
    return {k: v for k, v in errors.items() if v}


def _dlq_errors(config: Mapping[str, str]) -> list[str]:
    """A sink may not consume its own dead letter queue (Kafka's check)."""
    dlq = config.get("errors.deadletterqueue.topic.name", "").strip()
    if not dlq:
        return []
    topics = config.get("topics", "")
    if dlq in [t.strip() for t in topics.split(",")]:
        return [f"The DLQ topic '{dlq}' may not be included in the list of topics "
                f"('topics={topics}') consumed by the connector"]
    regex = config.get("topics.regex", "").strip()
    try:
        matched = bool(regex) and re.fullmatch(regex, dlq) is not None
    except re.error:
        return []  # not a pattern: nothing it could match
    if matched:
        return [f"The DLQ topic '{dlq}' may not be included in the regex matching the "
                f"topics ('topics.regex={regex}') consumed by the connector"]
    return []
