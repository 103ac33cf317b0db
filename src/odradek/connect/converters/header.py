"""Kafka's ``SimpleHeaderConverter`` (the default ``header.converter``).

A header value is written as UTF-8 text (:func:`values.to_text`: strings as
they are, other values as their literal) and read back by
:func:`values.parse_text`, which recovers booleans, integers, floats,
dates/times, JSON arrays and maps and null, and otherwise gives the text as a
STRING. Bytes that are not UTF-8 read back as BYTES, unchanged. ``None`` is
``None`` both ways.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from odradek.connect.converters.base import HeaderConverter
from odradek.connect.converters.values import parse_text, to_text
from odradek.connect.data import OPTIONAL_BYTES, Schema


class SimpleHeaderConverter(HeaderConverter):
    def configure(self, props: Mapping[str, str]) -> None:
        pass

    def from_connect_header(self, topic: str, key: str, schema: Schema | None, value: Any
                            ) -> bytes | None:
        text = to_text(value)
        return None if text is None else text.encode()

    def to_connect_header(self, topic: str, key: str, data: bytes | None
                          ) -> tuple[Schema | None, Any]:
        if data is None:
            return None, None
        try:
            text = data.decode()
        except UnicodeDecodeError:
            return OPTIONAL_BYTES, data
        return parse_text(text)
