"""Debezium-shaped change events of the CDC source (pure: no database access).

For a table ``<schema>.<table>`` and ``topic.prefix`` P the topic is
``P.<schema>.<table>``; the key is the primary key (a STRUCT named
``<topic>.Key``; without a primary key the replica identity's key columns, and
without those a null key); the value is the envelope ``<topic>.Envelope``::

    {"before": Value|null, "after": Value|null,
     "source": {"version", "connector": "postgresql", "name": P, "ts_ms",
                "snapshot": "true"|"last"|"false", "db", "schema", "table",
                "txId", "lsn"},
     "op": "c"|"u"|"d"|"r", "ts_ms"}

``Value`` (``<topic>.Value``) has every column, optional, typed as in
:mod:`.common`. ``before`` is the old row for updates and deletes when the
server sends it (REPLICA IDENTITY FULL: the whole row; otherwise only key
columns, others null). A delete is followed by a tombstone (same key, null value).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from odradek.connect import data
from odradek.connect.connectors.postgres import common
from odradek.connect.connectors.postgres.pgoutput import UNCHANGED, Relation, Tuple
from odradek.connect.data import Schema, struct

VERSION = "1.0.0"

SOURCE = struct(
    ("version", Schema(data.STRING)), ("connector", Schema(data.STRING)),
    ("name", Schema(data.STRING)), ("ts_ms", Schema(data.INT64)),
    ("snapshot", Schema(data.STRING, optional=True, default="false")),
    ("db", Schema(data.STRING)), ("schema", Schema(data.STRING)),
    ("table", Schema(data.STRING)), ("txId", Schema(data.INT64, optional=True)),
    ("lsn", Schema(data.INT64, optional=True)),
    name="io.debezium.connector.postgresql.Source")

HEARTBEAT_KEY = struct(("serverName", Schema(data.STRING)),
                       name="io.debezium.connector.common.ServerNameKey")
HEARTBEAT_VALUE = struct(("ts_ms", Schema(data.INT64)),
                         name="io.debezium.connector.common.Heartbeat")


@dataclass(frozen=True)
class Table:
    """A relation as events need it."""

    relation: Relation
    key_columns: tuple[str, ...]
    topic: str
    key_schema: Schema | None
    value_schema: Schema
    envelope: Schema

    @property
    def qualified(self) -> str:
        return f"{self.relation.namespace}.{self.relation.name}"


def table(relation: Relation, primary_key: Sequence[str], prefix: str) -> Table:
    """The event schemas of ``relation`` (``primary_key``: its columns, maybe none)."""
    topic = f"{prefix}.{relation.namespace}.{relation.name}"
    by_name = {c.name: c for c in relation.columns}
    key_cols = tuple(primary_key) or (
        tuple(c.name for c in relation.columns if c.key)
        if relation.replica_identity not in ("f", "n") else ())
    key_schema = struct(*[(n, common.connect_schema(by_name[n].type_oid, by_name[n].typmod,
                                                    optional=False)) for n in key_cols],
                        name=f"{topic}.Key") if key_cols else None
    value = struct(*[(c.name, common.connect_schema(c.type_oid, c.typmod))
                     for c in relation.columns], name=f"{topic}.Value", optional=True)
    envelope = struct(("before", value), ("after", value), ("source", SOURCE),
                      ("op", Schema(data.STRING)), ("ts_ms", Schema(data.INT64, optional=True)),
                      name=f"{topic}.Envelope")
    return Table(relation, key_cols, topic, key_schema, value, envelope)


def row(t: Table, values: Tuple | None) -> dict[str, Any] | None:
    """A TupleData as a Value struct (unchanged TOASTed values are null)."""
    if values is None:
        return None
    return {c.name: None if v is None or v is UNCHANGED
            else common.from_text(c.type_oid, c.typmod, str(v))
            for c, v in zip(t.relation.columns, values, strict=True)}


def key(t: Table, image: dict[str, Any] | None) -> dict[str, Any] | None:
    if t.key_schema is None or image is None:
        return None
    return {n: image.get(n) for n in t.key_columns}


def envelope(t: Table, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None,
             *, server: str, db: str, ts_ms: int, now_ms: int, snapshot: str,
             tx_id: int | None, lsn: int | None) -> dict[str, Any]:
    return {"before": before, "after": after,
            "source": {"version": VERSION, "connector": "postgresql", "name": server,
                       "ts_ms": ts_ms, "snapshot": snapshot, "db": db,
                       "schema": t.relation.namespace, "table": t.relation.name,
                       "txId": tx_id, "lsn": lsn},
            "op": op, "ts_ms": now_ms}
