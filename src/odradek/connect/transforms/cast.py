"""Kafka's ``Cast`` SMT (``Cast$Key``/``Cast$Value``).

``spec``: a list of ``field:type`` casts, or a single ``type`` that casts the
whole key/value. Target types: ``int8 int16 int32 int64 float32 float64
boolean string``. Sources: the primitive types, Decimal (to any target) and,
to ``string`` only, BYTES (base64), Date/Time/Timestamp, arrays, maps and
STRUCTs (as :func:`values.to_text` writes them). Casts follow Java's: integer
targets wrap around (floats are truncated toward zero and first clamped to
int/long, NaN is 0), strings are parsed (out of range is an error),
booleans are 1/0; to boolean, a number is ``!= 0`` after truncation and a
string is true only when it is ``true`` (any case); to string, numbers are
written by Python's ``repr`` (``1e-05`` where Java writes ``1.0E-5``).
A schema'd cast changes the field's (or value's) schema type, keeping its
optionality; a null value or field stays null.
"""

from __future__ import annotations

import decimal
import math
import struct
from collections.abc import Mapping
from typing import Any

from odradek.connect import data as d
from odradek.connect.config import LIST, ConfigDef, ConfigError, ConfigKey
from odradek.connect.converters.simple import DataError
from odradek.connect.converters.values import to_text
from odradek.connect.data import ConnectRecord, Schema
from odradek.connect.transforms.util import (
    SideTransformation,
    check_non_empty,
    require_map,
    require_struct,
    struct_like,
)

TARGETS = (d.INT8, d.INT16, d.INT32, d.INT64, d.FLOAT32, d.FLOAT64, d.BOOLEAN, d.STRING)
_BITS = {d.INT8: 8, d.INT16: 16, d.INT32: 32, d.INT64: 64}
WHOLE = ""


def _wrap(n: int, bits: int) -> int:
    n &= (1 << bits) - 1
    return n - (1 << bits) if n >> (bits - 1) else n


def _float_to_int(x: float, bits: int) -> int:
    if math.isnan(x):
        return 0
    wide = 64 if bits == 64 else 32
    lo, hi = -(1 << (wide - 1)), (1 << (wide - 1)) - 1
    n = hi if x >= hi else lo if x <= lo else int(x)
    return _wrap(n, bits)


def cast(value: Any, target: str) -> Any:
    """``value`` (a Python value of a Connect type) cast to ``target``."""
    if value is None:
        return None
    if target == d.STRING:
        if isinstance(value, float):
            return repr(value)
        return to_text(value)
    if isinstance(value, bytes | bytearray | list | dict) or not isinstance(
            value, bool | int | float | str | decimal.Decimal):
        raise DataError(f"Cast transformation does not support casting "
                        f"{type(value).__name__} to {target}")
    if target in _BITS:
        bits = _BITS[target]
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, int):
            return _wrap(value, bits)
        if isinstance(value, float):
            return _float_to_int(value, bits)
        if isinstance(value, decimal.Decimal):
            return _wrap(int(value), bits) if value.is_finite() else 0
        try:
            n = int(value.strip())
        except ValueError:
            raise DataError(f"Value {value!r} is not a valid {target}") from None
        if _wrap(n, bits) != n:
            raise DataError(f"Value {value!r} out of range for {target}")
        return n
    if target in (d.FLOAT32, d.FLOAT64):
        try:
            x = float(value)
        except ValueError:
            raise DataError(f"Value {value!r} is not a valid {target}") from None
        if target == d.FLOAT32:
            try:
                x = struct.unpack(">f", struct.pack(">f", x))[0]
            except OverflowError:
                x = math.copysign(math.inf, x)
        return x
    # boolean
    if isinstance(value, str):
        return value.strip().lower() == "true"
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        return _float_to_int(value, 64) != 0
    return int(value) != 0


def _check_source(schema: Schema, target: str, field: str) -> None:
    if schema.name == d.DECIMAL or target == d.STRING:
        return
    if (schema.name is not None and schema.name in (d.DATE, d.TIME, d.TIMESTAMP)) or \
            schema.type not in TARGETS:
        raise DataError(f"Cast transformation does not support casting from "
                        f"{schema.name or schema.type} to {target}"
                        + (f" (field {field})" if field else ""))


def _cast_schema(schema: Schema, target: str) -> Schema:
    return Schema(target, optional=schema.optional,
                  default=cast(schema.default, target))


class Cast(SideTransformation):
    CONFIG = ConfigDef((ConfigKey("spec", LIST, documentation=(
        "field:type pairs, or one type for the whole value; types int8, int16, int32, "
        "int64, float32, float64, boolean, string.")),))

    def configure(self, props: Mapping[str, str]) -> None:
        spec: list[str] = self.CONFIG.parse(props)["spec"]
        check_non_empty("spec", spec)
        self.casts: dict[str, str] = {}
        for entry in spec:
            field, sep, type_ = entry.rpartition(":")
            type_ = type_.strip().lower()
            if type_ not in TARGETS:
                raise ConfigError("spec", f"Invalid value {','.join(spec)} for "
                                  f"configuration spec: Invalid type found in casting "
                                  f"spec: {type_}")
            self.casts[field.strip() if sep else WHOLE] = type_
        if WHOLE in self.casts and len(self.casts) > 1:
            raise ConfigError("spec", "Cast transformations that specify a type to cast "
                              "the entire value to may only specify a single cast in their "
                              "spec")

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value, schema = self.value_of(record), self.schema_of(record)
        if value is None:
            return record
        whole = self.casts.get(WHOLE)
        if schema is None:
            if whole is not None:
                return self.with_side(record, None, cast(value, whole))
            m = require_map(value, "cast types")
            for f, t in self.casts.items():
                if f in m:
                    m[f] = cast(m[f], t)
            return self.with_side(record, None, m)
        if whole is not None:
            _check_source(schema, whole, "")
            return self.with_side(record, _cast_schema(schema, whole), cast(value, whole))
        struct_value = require_struct(schema, value, "cast types")
        fields = []
        for fld in schema.fields:
            target = self.casts.get(fld.name)
            if target is None:
                fields.append((fld.name, fld.schema))
                continue
            _check_source(fld.schema, target, fld.name)
            fields.append((fld.name, _cast_schema(fld.schema, target)))
            struct_value[fld.name] = cast(struct_value.get(fld.name), target)
        return self.with_side(record, struct_like(schema, fields), struct_value)


class CastKey(Cast):
    IS_KEY = True


class CastValue(Cast):
    IS_KEY = False
