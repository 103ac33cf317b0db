"""Kafka's ``StringConverter`` and ``ByteArrayConverter``.

StringConverter: a value's ``str()`` in ``converter.encoding`` (UTF-8) bytes
(bytes values are passed through); bytes read back are decoded to a ``str``
with an optional STRING schema. ByteArrayConverter passes bytes through
unchanged (a ``bytearray``/``memoryview`` is copied to ``bytes``) and refuses
anything else, as Kafka's does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from odradek.connect.config import STRING, ConfigDef, ConfigKey
from odradek.connect.converters.base import Converter
from odradek.connect.data import OPTIONAL_BYTES, OPTIONAL_STRING, Schema


class DataError(ValueError):
    """Data that a converter cannot represent (Kafka's ``DataException``)."""


class StringConverter(Converter):
    CONFIG = ConfigDef((ConfigKey("converter.encoding", STRING, "UTF-8",
                                  documentation="The character encoding of strings."),))

    def __init__(self) -> None:
        self.encoding = "utf-8"

    def configure(self, props: Mapping[str, str], is_key: bool) -> None:
        self.encoding = str(self.CONFIG.parse(props)["converter.encoding"])

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any
                          ) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
        return str(value).encode(self.encoding)

    def to_connect_data(self, topic: str, data: bytes | None
                        ) -> tuple[Schema | None, Any]:
        if data is None:
            return OPTIONAL_STRING, None
        try:
            return OPTIONAL_STRING, data.decode(self.encoding)
        except UnicodeDecodeError as e:
            raise DataError(f"Failed to deserialize string: {e}") from None


class ByteArrayConverter(Converter):
    def configure(self, props: Mapping[str, str], is_key: bool) -> None:
        pass

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any
                          ) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
        raise DataError(f"ByteArrayConverter is not compatible with objects of type "
                        f"{type(value).__name__}")

    def to_connect_data(self, topic: str, data: bytes | None
                        ) -> tuple[Schema | None, Any]:
        return OPTIONAL_BYTES, data
