"""What the PostgreSQL connectors share: connection settings, identifier
quoting, and the mapping between PostgreSQL and Connect types.

Connection settings (the JDBC connectors' names): ``connection.url``
(``postgresql://host:port/db``; a ``jdbc:`` prefix is dropped),
``connection.user``, ``connection.password`` (override the URL's). Sessions run
with ``TimeZone=UTC``, so ``timestamp`` columns are read and written as UTC.

Types, PostgreSQL -> Connect (sources; by type OID): ``bool`` BOOLEAN,
``int2`` INT16, ``int4`` INT32, ``int8`` INT64, ``float4`` FLOAT32, ``float8``
FLOAT64, ``numeric(p,s)`` Decimal (scale ``s``; unconstrained ``numeric`` is a
STRING), ``bytea`` BYTES, ``date``/``time``/``timestamp``/``timestamptz``
Connect's Date/Time/Timestamp (values ``datetime`` objects, timestamps UTC),
anything else STRING (its text form). Connect -> PostgreSQL (the sink):
:func:`pg_type`.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

import psycopg2
import psycopg2.extensions

from odradek.connect import data
from odradek.connect.config import PASSWORD, STRING, ConfigDef, ConfigKey, non_empty
from odradek.connect.data import Schema

CONNECTION_CONFIG = ConfigDef((
    ConfigKey("connection.url", STRING, validator=non_empty, importance="HIGH",
              documentation="postgresql://host:port/database", group="Database"),
    ConfigKey("connection.user", STRING, None, importance="HIGH",
              documentation="The database user (overrides the URL's).", group="Database"),
    ConfigKey("connection.password", PASSWORD, None, importance="HIGH",
              documentation="The user's password.", group="Database"),
))

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def dsn(props: Mapping[str, Any]) -> dict[str, Any]:
    """psycopg2 connection keywords from the connection settings."""
    url = str(props["connection.url"]).removeprefix("jdbc:")
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"connection.url must be postgresql://..., not {url!r}")
    kw: dict[str, Any] = {"host": parts.hostname or "localhost", "port": parts.port or 5432,
                          "dbname": unquote(parts.path.lstrip("/")) or "postgres"}
    if parts.username:
        kw["user"] = unquote(parts.username)
    if parts.password:
        kw["password"] = unquote(parts.password)
    if props.get("connection.user"):
        kw["user"] = props["connection.user"]
    if props.get("connection.password"):
        kw["password"] = props["connection.password"]
    kw["options"] = "-c TimeZone=UTC"
    return kw


def connect(props: Mapping[str, Any], **extra: Any) -> psycopg2.extensions.connection:
    return psycopg2.connect(**dsn(props), **extra)


def ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def table_ident(name: str) -> str:
    """``schema.table`` or ``table`` quoted part by part."""
    return ".".join(ident(p) for p in name.split(".", 1))


# -- PostgreSQL -> Connect ---------------------------------------------------

BOOL, BYTEA, INT8, INT2, INT4, TEXT, OID = 16, 17, 20, 21, 23, 25, 26
FLOAT4, FLOAT8, NUMERIC = 700, 701, 1700
DATE, TIME, TIMESTAMP, TIMESTAMPTZ = 1082, 1083, 1114, 1184

_SIMPLE = {BOOL: data.BOOLEAN, INT2: data.INT16, INT4: data.INT32, INT8: data.INT64,
           OID: data.INT64, FLOAT4: data.FLOAT32, FLOAT8: data.FLOAT64, BYTEA: data.BYTES}


def numeric_scale(typmod: int) -> int | None:
    return None if typmod < 0 else (typmod - 4) & 0xFFFF


def connect_schema(type_oid: int, typmod: int = -1, *, optional: bool = True) -> Schema:
    """The Connect schema of a column of type ``type_oid`` (``typmod`` as in pg_attribute)."""
    if type_oid in _SIMPLE:
        return Schema(_SIMPLE[type_oid], optional=optional)
    if type_oid == NUMERIC and (scale := numeric_scale(typmod)) is not None:
        return Schema(data.BYTES, optional=optional, name=data.DECIMAL, version=1,
                      parameters={"scale": str(scale)})
    if type_oid == DATE:
        return Schema(data.INT32, optional=optional, name=data.DATE, version=1)
    if type_oid == TIME:
        return Schema(data.INT32, optional=optional, name=data.TIME, version=1)
    if type_oid in (TIMESTAMP, TIMESTAMPTZ):
        return Schema(data.INT64, optional=optional, name=data.TIMESTAMP, version=1)
    return Schema(data.STRING, optional=optional)


def _utc(v: dt.datetime) -> dt.datetime:
    return v.replace(tzinfo=dt.UTC) if v.tzinfo is None else v.astimezone(dt.UTC)


def from_pg(schema: Schema, value: Any) -> Any:
    """A value psycopg2 read, as the Connect value of ``schema``."""
    if value is None:
        return None
    if schema.name == data.TIMESTAMP:
        return _utc(value)
    if schema.type == data.BYTES and schema.name is None:
        return bytes(value)
    if schema.type == data.STRING and not isinstance(value, str):
        return json.dumps(value) if isinstance(value, dict | list) else str(value)
    return value


def _bytea(text: str) -> bytes:
    return bytes.fromhex(text[2:]) if text.startswith("\\x") else text.encode()


_PARSERS: dict[int, Callable[[str], Any]] = {
    BOOL: lambda t: t == "t", INT2: int, INT4: int, INT8: int, OID: int,
    FLOAT4: float, FLOAT8: float, BYTEA: _bytea, DATE: dt.date.fromisoformat,
    TIME: dt.time.fromisoformat,
    TIMESTAMP: lambda t: _utc(dt.datetime.fromisoformat(t)),
    TIMESTAMPTZ: lambda t: _utc(dt.datetime.fromisoformat(t)),
}


def from_text(type_oid: int, typmod: int, text: str | None) -> Any:
    """A column's text form (pgoutput's TupleData, or ``col::text``) as a Connect value."""
    if text is None:
        return None
    if type_oid == NUMERIC:
        return decimal.Decimal(text) if numeric_scale(typmod) is not None else text
    parser = _PARSERS.get(type_oid)
    return parser(text) if parser is not None else text


# -- Connect -> PostgreSQL ---------------------------------------------------

_PG_TYPES = {data.INT8: "smallint", data.INT16: "smallint", data.INT32: "integer",
             data.INT64: "bigint", data.FLOAT32: "real", data.FLOAT64: "double precision",
             data.BOOLEAN: "boolean", data.STRING: "text", data.BYTES: "bytea",
             data.ARRAY: "jsonb", data.MAP: "jsonb", data.STRUCT: "jsonb"}
_LOGICAL = {data.DECIMAL: "numeric", data.DATE: "date", data.TIME: "time",
            data.TIMESTAMP: "timestamp"}


def pg_type(schema: Schema | None, sample: Any = None) -> str:
    """The column type for a Connect schema, or, schemaless, for a sample value."""
    if schema is not None:
        if schema.name in _LOGICAL:
            return _LOGICAL[schema.name]
        return _PG_TYPES[schema.type]
    if isinstance(sample, bool):
        return "boolean"
    if isinstance(sample, int):
        return "bigint"
    if isinstance(sample, float):
        return "double precision"
    if isinstance(sample, bytes | bytearray):
        return "bytea"
    if isinstance(sample, decimal.Decimal):
        return "numeric"
    if isinstance(sample, dt.datetime):
        return "timestamp"
    if isinstance(sample, dt.date):
        return "date"
    if isinstance(sample, dt.time):
        return "time"
    if isinstance(sample, dict | list):
        return "jsonb"
    return "text"


_PLAIN = (str, int, float, bool)


def to_pg(schema: Schema | None, value: Any) -> Any:
    """A Connect value as a psycopg2 parameter for a column of :func:`pg_type`."""
    if value is None or (type(value) in _PLAIN and (schema is None or schema.name is None)):
        return value
    name = schema.name if schema is not None else None
    if name == data.TIMESTAMP and isinstance(value, int):
        return (EPOCH + dt.timedelta(milliseconds=value)).replace(tzinfo=None)
    if name == data.DATE and isinstance(value, int):
        return dt.date(1970, 1, 1) + dt.timedelta(days=value)
    if name == data.TIME and isinstance(value, int):
        return (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=value)).time()
    if name == data.DECIMAL and isinstance(value, bytes):
        scale = int((schema.parameters or {}).get("scale", "0")) if schema else 0
        return decimal.Decimal(int.from_bytes(value, "big", signed=True)).scaleb(-scale)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    if isinstance(value, bytearray):
        return bytes(value)
    return value
