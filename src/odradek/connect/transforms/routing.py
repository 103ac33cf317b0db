"""Kafka's ``RegexRouter`` and ``Filter``.

RegexRouter: ``regex`` (Java regex syntax, which Python's ``re`` shares for
common patterns) must match the whole topic; the topic becomes
``replacement`` with Java's ``$1``/``${name}`` group references (``\\$`` a
literal dollar). Topics that do not match are unchanged.

Filter drops every record: it is meant to run under a predicate.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from odradek.connect.config import STRING, ConfigDef, ConfigError, ConfigKey
from odradek.connect.data import ConnectRecord
from odradek.connect.transforms.base import Transformation

_GROUP = re.compile(r"\\(.)|\$(\d+)|\$\{(\w+)\}|\$")


_JAVA_NAMED = re.compile(r"(?<!\\)\(\?<(?=[A-Za-z])")


def compile_regex(name: str, pattern: str) -> re.Pattern[str]:
    """A Java regex compiled by Python's ``re`` (Java's named groups
    ``(?<name>...)`` are rewritten to Python's ``(?P<name>...)``; Java-only
    syntax such as possessive quantifiers or ``\\p{Alpha}`` is refused)."""
    try:
        return re.compile(_JAVA_NAMED.sub("(?P<", pattern))
    except re.error as e:
        raise ConfigError(name, f"Invalid value {pattern} for configuration {name}: "
                          f"Invalid regex: {e}") from None


def java_expand(match: re.Match[str], replacement: str) -> str:
    """``replacement`` with Java's group references filled from ``match``."""
    def sub(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            return m.group(1)
        ref = m.group(2) or m.group(3)
        if ref is None:
            raise ValueError("Illegal group reference: group index is missing")
        group = match.group(int(ref) if ref.isdigit() else ref)
        return group or ""
    return _GROUP.sub(sub, replacement)


class RegexRouter(Transformation[ConnectRecord]):
    CONFIG = ConfigDef((
        ConfigKey("regex", STRING, documentation="Matched against the whole topic."),
        ConfigKey("replacement", STRING, documentation="The new topic ($1: a group)."),
    ))

    def configure(self, props: Mapping[str, str]) -> None:
        v = self.CONFIG.parse(props)
        self.regex = compile_regex("regex", v["regex"])
        self.replacement: str = v["replacement"]

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        m = self.regex.fullmatch(record.topic)
        if m is None:
            return record
        try:
            return record.new_record(topic=java_expand(m, self.replacement))
        except (IndexError, ValueError) as e:
            raise ConfigError("replacement", f"Invalid replacement {self.replacement!r}: "
                              f"{e}") from None


class Filter(Transformation[ConnectRecord]):
    def configure(self, props: Mapping[str, str]) -> None:
        pass

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        return None
