"""Kafka's predicates (KIP-585): TopicNameMatches (``pattern``, a regex the
whole topic must match), HasHeaderKey (``name``: at least one header with that
key) and RecordIsTombstone (the value is null)."""

from __future__ import annotations

from collections.abc import Mapping

from odradek.connect.config import STRING, ConfigDef, ConfigKey, non_empty
from odradek.connect.data import ConnectRecord
from odradek.connect.transforms.base import Predicate
from odradek.connect.transforms.routing import compile_regex


class TopicNameMatches(Predicate[ConnectRecord]):
    CONFIG = ConfigDef((ConfigKey("pattern", STRING, validator=non_empty,
                                  documentation="A regex matched against the whole topic."),))

    def configure(self, props: Mapping[str, str]) -> None:
        self.pattern = compile_regex("pattern", self.CONFIG.parse(props)["pattern"])

    def test(self, record: ConnectRecord) -> bool:
        return self.pattern.fullmatch(record.topic) is not None


class HasHeaderKey(Predicate[ConnectRecord]):
    CONFIG = ConfigDef((ConfigKey("name", STRING, validator=non_empty,
                                  documentation="The header key to look for."),))

    def configure(self, props: Mapping[str, str]) -> None:
        self.name: str = self.CONFIG.parse(props)["name"]

    def test(self, record: ConnectRecord) -> bool:
        return any(h.key == self.name for h in record.headers)


class RecordIsTombstone(Predicate[ConnectRecord]):
    def configure(self, props: Mapping[str, str]) -> None:
        pass

    def test(self, record: ConnectRecord) -> bool:
        return record.value is None
