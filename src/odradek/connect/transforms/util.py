"""What the SMTs share: the ``$Key``/``$Value`` side a transform works on,
the checks Kafka's ``Requirements`` make, and building STRUCT schemas.

A transform class with a side defines ``IS_KEY``; its variants are the module-
level classes ``<Name>Key`` and ``<Name>Value`` (Kafka's ``<Name>$Key`` and
``<Name>$Value`` in ``transforms.BUILTIN``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from odradek.connect.config import ConfigDef, ConfigError
from odradek.connect.converters.simple import DataError
from odradek.connect.data import STRUCT, ConnectRecord, Field, Schema
from odradek.connect.transforms.base import Transformation


def parse_config(config: ConfigDef, props: Mapping[str, Any]) -> dict[str, Any]:
    """``config.parse`` restricted to the keys it defines (raises ConfigError)."""
    return config.parse(props)


class SideTransformation(Transformation[ConnectRecord]):
    """A transform of either the key or the value of a record."""

    IS_KEY: ClassVar[bool] = False

    def schema_of(self, record: ConnectRecord) -> Schema | None:
        return record.key_schema if self.IS_KEY else record.value_schema

    def value_of(self, record: ConnectRecord) -> Any:
        return record.key if self.IS_KEY else record.value

    def with_side(self, record: ConnectRecord, schema: Schema | None, value: Any
                  ) -> ConnectRecord:
        if self.IS_KEY:
            return record.new_record(key_schema=schema, key=value)
        return record.new_record(value_schema=schema, value=value)


def require_map(value: Any, purpose: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise DataError(f"Only Map objects supported in absence of schema for [{purpose}], "
                        f"found: {type(value).__name__ if value is not None else 'null'}")
    return dict(value)


def require_struct(schema: Schema, value: Any, purpose: str) -> dict[str, Any]:
    if schema.type != STRUCT or not isinstance(value, Mapping):
        raise DataError(f"Only Struct objects supported for [{purpose}], found: "
                        f"{type(value).__name__ if value is not None else 'null'}")
    return dict(value)


def require_struct_schema(schema: Schema, purpose: str) -> None:
    if schema.type != STRUCT:
        raise DataError(f"Only Struct objects supported for [{purpose}], found schema "
                        f"type {schema.type}")


def struct_like(schema: Schema, fields: list[tuple[str, Schema]]) -> Schema:
    """A STRUCT with ``schema``'s name, version, doc, parameters and
    optionality, and ``fields`` (renumbered)."""
    return replace(schema, type=STRUCT, default=None,
                   fields=tuple(Field(n, i, s) for i, (n, s) in enumerate(fields)),
                   key_schema=None, value_schema=None)


def field_list(schema: Schema) -> list[tuple[str, Schema]]:
    return [(f.name, f.schema) for f in schema.fields]


def check_non_empty(name: str, value: list[str]) -> None:
    if not value:
        raise ConfigError(name, f"Invalid value [] for configuration {name}: "
                          "List must not be empty")
