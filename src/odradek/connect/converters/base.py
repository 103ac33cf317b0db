"""The converter interface.

``key.converter``/``value.converter`` (worker defaults, overridable per
connector) turn a record's key or value and its schema into bytes for the
producer, and consumed bytes back into ``(schema, value)`` for sinks. They are
configured with ``key.converter.*``/``value.converter.*`` settings, prefix
removed, plus ``converter.type`` = ``key`` or ``value``. ``None`` data is
``None`` bytes (a tombstone) both ways.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from odradek.connect.config import ConfigDef
from odradek.connect.data import Schema


class Converter(ABC):
    CONFIG: ClassVar[ConfigDef] = ConfigDef()

    @abstractmethod
    def configure(self, props: Mapping[str, str], is_key: bool) -> None: ...

    @abstractmethod
    def from_connect_data(self, topic: str, schema: Schema | None, value: Any
                          ) -> bytes | None: ...

    @abstractmethod
    def to_connect_data(self, topic: str, data: bytes | None
                        ) -> tuple[Schema | None, Any]: ...


class HeaderConverter(ABC):
    """Header values to and from bytes (Kafka's ``SimpleHeaderConverter`` by default)."""

    @abstractmethod
    def configure(self, props: Mapping[str, str]) -> None: ...

    @abstractmethod
    def from_connect_header(self, topic: str, key: str, schema: Schema | None, value: Any
                            ) -> bytes | None: ...

    @abstractmethod
    def to_connect_header(self, topic: str, key: str, data: bytes | None
                          ) -> tuple[Schema | None, Any]: ...
