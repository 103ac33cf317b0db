"""Kafka's number converters (``org.apache.kafka.connect.converters.*``).

Each writes one number in the fixed-size big-endian form of Kafka's
serializers — ShortConverter 2 bytes, IntegerConverter 4, LongConverter 8
(two's complement), FloatConverter 4 and DoubleConverter 8 (IEEE 754) — and
reads it back with an optional schema of its type. ``None`` is ``None`` both
ways. Integers out of the type's range, non-numbers and bytes of the wrong
size are a :class:`DataError`.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, ClassVar

from odradek.connect import data as d
from odradek.connect.converters.base import Converter
from odradek.connect.converters.simple import DataError
from odradek.connect.data import Schema


class NumberConverter(Converter):
    FORMAT: ClassVar[str]
    SCHEMA: ClassVar[Schema]

    def configure(self, props: Mapping[str, str], is_key: bool) -> None:
        pass

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any
                          ) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise DataError(f"Failed to serialize to {self.SCHEMA.type} (was "
                            f"{type(value).__name__}): {value!r}")
        if self.FORMAT in "hiq" and not isinstance(value, int):
            raise DataError(f"Failed to serialize to {self.SCHEMA.type}: {value!r} is "
                            "not an integer")
        try:
            return struct.pack(">" + self.FORMAT, value)
        except (struct.error, OverflowError) as e:
            raise DataError(f"Failed to serialize to {self.SCHEMA.type}: {e}") from None

    def to_connect_data(self, topic: str, data: bytes | None
                        ) -> tuple[Schema | None, Any]:
        if data is None:
            return self.SCHEMA, None
        size = struct.calcsize(">" + self.FORMAT)
        if len(data) != size:
            raise DataError(f"Size of data received by {type(self).__name__} is not "
                            f"{size}")
        return self.SCHEMA, struct.unpack(">" + self.FORMAT, data)[0]


class ShortConverter(NumberConverter):
    FORMAT = "h"
    SCHEMA = Schema(d.INT16, optional=True)


class IntegerConverter(NumberConverter):
    FORMAT = "i"
    SCHEMA = Schema(d.INT32, optional=True)


class LongConverter(NumberConverter):
    FORMAT = "q"
    SCHEMA = Schema(d.INT64, optional=True)


class FloatConverter(NumberConverter):
    FORMAT = "f"
    SCHEMA = Schema(d.FLOAT32, optional=True)


class DoubleConverter(NumberConverter):
    FORMAT = "d"
    SCHEMA = Schema(d.FLOAT64, optional=True)
