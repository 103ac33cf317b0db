"""The PostgreSQL sink: records from topics into tables (the JDBC sink's settings).

Each record's value is a row: a STRUCT (a dict with its schema) or a
schemaless dict. ``table.name.format`` names the table (``${topic}`` is
replaced by the record's topic). ``pk.mode``:

- ``none``: no key; rows are only inserted;
- ``record_key``: the key is the primary key, a STRUCT/dict (``pk.fields``
  picks fields, default all) or a primitive (column ``pk.fields[0]``, default
  ``__connect_key``); the key's columns are added to the row;
- ``record_value``: ``pk.fields`` of the value are the key.

``insert.mode`` ``insert`` issues ``INSERT``; ``upsert`` issues
``INSERT ... ON CONFLICT (pk) DO UPDATE``. With ``delete.enabled`` (needs
``pk.mode=record_key``) a tombstone (null value) deletes its key's row.
``auto.create`` creates missing tables (with the primary key), ``auto.evolve``
adds missing columns (nullable). Types: :func:`common.pg_type`.

Each ``put`` is one database transaction, written in statements of at most
``batch.size`` rows. Within a put an upsert's batch holds a key once: later
records for a key merge into its row (a delete in between deletes first), so
the table ends as if every record had been applied in order.

Exactly once (``exactly.once.enabled``): the next offset of each topic
partition is stored in ``offsets.table.name`` (columns ``connector, topic,
kafka_partition, next_offset``) in the same transaction as the rows; ``open``
reads it back and resets the consumer there (``context.offset``); records below
it are ignored; ``pre_commit`` returns the stored offsets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from psycopg2.extras import execute_values

from odradek.connect import config as cfg
from odradek.connect.api import SinkConnector, SinkTask, Task, TopicPartition
from odradek.connect.config import ConfigDef, ConfigKey, one_of
from odradek.connect.connectors.postgres import common
from odradek.connect.connectors.postgres.common import ident, table_ident
from odradek.connect.data import STRUCT, Schema, SinkRecord

VERSION = "1.0.0"

CONFIG = common.CONNECTION_CONFIG + ConfigDef((
    ConfigKey("topics", cfg.LIST, [], documentation="Topics to consume."),
    ConfigKey("table.name.format", cfg.STRING, "${topic}",
              documentation="Destination table; ${topic} is the record's topic."),
    ConfigKey("insert.mode", cfg.STRING, "insert", validator=one_of("insert", "upsert"),
              documentation="insert or upsert (INSERT ... ON CONFLICT DO UPDATE)."),
    ConfigKey("pk.mode", cfg.STRING, "none",
              validator=one_of("none", "record_key", "record_value"),
              documentation="Where the primary key comes from."),
    ConfigKey("pk.fields", cfg.LIST, [], documentation="Primary key field names."),
    ConfigKey("auto.create", cfg.BOOLEAN, False, documentation="Create missing tables."),
    ConfigKey("auto.evolve", cfg.BOOLEAN, False, documentation="Add missing columns."),
    ConfigKey("batch.size", cfg.INT, 3000, validator=cfg.at_least(1),
              documentation="Rows per INSERT statement."),
    ConfigKey("delete.enabled", cfg.BOOLEAN, False,
              documentation="Tombstones delete their key's row (pk.mode=record_key)."),
    ConfigKey("exactly.once.enabled", cfg.BOOLEAN, False,
              documentation="Store consumed offsets with the rows, in one transaction."),
    ConfigKey("offsets.table.name", cfg.STRING, "__odradek_connect_offsets",
              documentation="The table exactly-once offsets are stored in."),
))

Row = dict[str, Any]


class PostgresSinkConnector(SinkConnector):
    CONFIG = CONFIG

    def version(self) -> str:
        return VERSION

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        CONFIG.parse(props)

    def task_class(self) -> type[Task]:
        return PostgresSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass

    def validate(self, props: Mapping[str, str]) -> Mapping[str, list[str]]:
        if (props.get("delete.enabled", "false").lower() == "true"
                and props.get("pk.mode") != "record_key"):
            return {"delete.enabled": ["delete.enabled requires pk.mode=record_key"]}
        return {}


class _Table:
    """What is known of a destination table: its columns and their types."""

    def __init__(self, name: str, columns: dict[str, str]) -> None:
        self.name = name
        self.columns = columns


class PostgresSinkTask(SinkTask):
    def version(self) -> str:
        return VERSION

    def start(self, props: Mapping[str, str]) -> None:
        c = CONFIG.parse(props)
        self.c = c
        self.connector = props.get("name", "postgres-sink")
        self.upsert = c["insert.mode"] == "upsert"
        self.pk_mode = str(c["pk.mode"])
        self.pk_fields = list(c["pk.fields"])
        self.eos = bool(c["exactly.once.enabled"])
        self.conn = common.connect(c)
        self.tables: dict[str, _Table] = {}
        self._key_memo: dict[int, tuple[Any, list[str], dict[str, Schema | None]]] = {}
        self._schema_memo: dict[tuple[int, int], tuple[Any, Any, dict[str, Schema | None]]] = {}
        self.stored: dict[TopicPartition, int] = {}
        if self.eos:
            with self.conn.cursor() as cur:
                cur.execute(f"CREATE TABLE IF NOT EXISTS {table_ident(c['offsets.table.name'])}"
                            " (connector text, topic text, kafka_partition integer,"
                            " next_offset bigint NOT NULL,"
                            " PRIMARY KEY (connector, topic, kafka_partition))")
            self.conn.commit()

    def stop(self) -> None:
        self.conn.close()

    # -- offsets (exactly once) ---------------------------------------------

    def open(self, partitions: Sequence[TopicPartition]) -> None:
        if not self.eos:
            return
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT topic, kafka_partition, next_offset FROM "
                        f"{table_ident(self.c['offsets.table.name'])} WHERE connector = %s",
                        (self.connector,))
            found = {TopicPartition(t, p): o for t, p, o in cur.fetchall()}
        self.conn.commit()
        resume = {tp: found[tp] for tp in partitions if tp in found}
        self.stored.update(resume)
        if resume:
            self.context.offset(resume)

    def close(self, partitions: Sequence[TopicPartition]) -> None:
        for tp in partitions:
            self.stored.pop(tp, None)

    def pre_commit(self, offsets: Mapping[TopicPartition, int]
                   ) -> Mapping[TopicPartition, int]:
        if self.eos:
            return {tp: o for tp, o in self.stored.items() if tp in offsets}
        return offsets

    # -- rows -----------------------------------------------------------------

    def put(self, records: Sequence[SinkRecord]) -> None:
        if self.eos:
            records = [r for r in records if r.kafka_offset >= self.stored.get(
                TopicPartition(r.topic, r.kafka_partition or 0), 0)]
        if not records:
            return
        try:
            self._write(records)
            if self.eos:
                self._store_offsets(records)
            self.conn.commit()
        except BaseException:
            self.conn.rollback()
            raise
        if self.eos:
            for r in records:
                tp = TopicPartition(r.topic, r.kafka_partition or 0)
                self.stored[tp] = max(self.stored.get(tp, 0), r.kafka_offset + 1)

    def _store_offsets(self, records: Sequence[SinkRecord]) -> None:
        nxt: dict[tuple[str, int], int] = {}
        for r in records:
            k = (r.topic, r.kafka_partition or 0)
            nxt[k] = max(nxt.get(k, 0), r.kafka_offset + 1)
        with self.conn.cursor() as cur:
            execute_values(cur, f"INSERT INTO {table_ident(self.c['offsets.table.name'])} "
                           "(connector, topic, kafka_partition, next_offset) VALUES %s "
                           "ON CONFLICT (connector, topic, kafka_partition) DO UPDATE SET "
                           "next_offset = EXCLUDED.next_offset",
                           [(self.connector, t, p, o) for (t, p), o in nxt.items()])

    def _key_row(self, r: SinkRecord) -> tuple[Row, dict[str, Schema | None]]:
        """The primary key columns of ``r`` and their schemas."""
        if self.pk_mode == "record_key":
            if isinstance(r.key, dict):
                names = self.pk_fields or list(r.key)
                memo = self._key_memo.get(id(r.key_schema))
                if memo is not None and memo[0] is r.key_schema and memo[1] == names:
                    schemas = memo[2]
                else:
                    schemas = {n: _field_schema(r.key_schema, n) for n in names}
                    if r.key_schema is not None:
                        self._key_memo[id(r.key_schema)] = (r.key_schema, names, schemas)
                return {n: r.key.get(n) for n in names}, schemas
            name = self.pk_fields[0] if self.pk_fields else "__connect_key"
            return {name: r.key}, {name: r.key_schema}
        if self.pk_mode == "record_value":
            value = r.value or {}
            return ({n: value.get(n) for n in self.pk_fields},
                    {n: _field_schema(r.value_schema, n) for n in self.pk_fields})
        return {}, {}

    def _schemas(self, r: SinkRecord, key_schemas: dict[str, Schema | None], row: Row
                 ) -> dict[str, Schema | None]:
        """Every column's schema; one shared dict per pair of schemas (records
        from one converter share their schema objects)."""
        if r.value_schema is None:
            return {**{n: None for n in row}, **key_schemas}
        memo = self._schema_memo.get((id(r.key_schema), id(r.value_schema)))
        if memo is not None and memo[0] is r.key_schema and memo[1] is r.value_schema:
            return memo[2]
        schemas = dict(key_schemas)
        for f in r.value_schema.fields:
            schemas.setdefault(f.name, f.schema)
        for n in row:
            schemas.setdefault(n, None)
        self._schema_memo[(id(r.key_schema), id(r.value_schema))] = (
            r.key_schema, r.value_schema, schemas)
        return schemas

    def _write(self, records: Sequence[SinkRecord]) -> None:
        # Per table, in order: (op, key tuple, row, schemas); collapsed per key on upsert.
        by_table: dict[str, list[tuple[str, Row, Row, dict[str, Schema | None]]]] = {}
        for r in records:
            table = str(self.c["table.name.format"]).replace("${topic}", r.topic)
            key, schemas = self._key_row(r)
            if r.value is None:
                if self.c["delete.enabled"] and key:
                    by_table.setdefault(table, []).append(("delete", key, {}, schemas))
                continue
            if not isinstance(r.value, dict):
                raise ValueError(f"{r.topic}/{r.kafka_partition}@{r.kafka_offset}: the value "
                                 f"must be a struct or map, not {type(r.value).__name__}")
            row = dict(key)
            for n, v in r.value.items():
                row.setdefault(n, v)
            by_table.setdefault(table, []).append(("upsert", key, row,
                                                   self._schemas(r, schemas, row)))
        for table, ops in by_table.items():
            self._apply(table, ops)

    def _apply(self, table: str, ops: list[tuple[str, Row, Row, dict[str, Schema | None]]]
               ) -> None:
        schemas: dict[str, Schema | None] = {}
        seen: set[int] = set()
        for _, _, _, s in ops:
            if id(s) not in seen:
                seen.add(id(s))
                for n, sch in s.items():
                    if schemas.get(n) is None:
                        schemas[n] = sch

        def sample(name: str) -> Any:
            """The first non-null value of a column (types schemaless columns)."""
            return next((row[name] for _, _, row, _ in ops if row.get(name) is not None), None)

        pk = list(ops[0][1]) if ops[0][1] else []
        t = self._table(table, schemas, sample, pk)
        if not (self.upsert and pk):
            run: list[Row] = []  # consecutive records of one kind, applied in order
            for i, (op, key, row, _) in enumerate(ops):
                run.append(key if op == "delete" else row)
                if i + 1 == len(ops) or ops[i + 1][0] != op:
                    if op == "delete":
                        self._delete(t, pk, run)
                    else:
                        self._insert(t, run, schemas, pk)
                    run = []
            return
        final: dict[tuple[Any, ...], tuple[bool, Row | None]] = {}
        for op, key, row, _ in ops:
            k = tuple(key[n] for n in pk)
            deleted, prev = final.get(k, (False, None))
            if op == "delete":
                final[k] = (True, None)
            else:
                final[k] = (deleted, {**prev, **row} if prev else row)
        self._delete(t, pk, [dict(zip(pk, k, strict=True)) for k, (d, _) in final.items() if d])
        self._insert(t, [row for _, row in final.values() if row is not None], schemas, pk)

    def _delete(self, t: _Table, pk: list[str], keys: list[Row]) -> None:
        if not keys:
            return
        cols = ", ".join(ident(n) for n in pk)
        with self.conn.cursor() as cur:
            execute_values(cur, f"DELETE FROM {table_ident(t.name)} WHERE ({cols}) IN (VALUES %s)",
                           [tuple(k[n] for n in pk) for k in keys],
                           page_size=int(self.c["batch.size"]))

    def _insert(self, t: _Table, rows: list[Row], schemas: dict[str, Schema | None],
                pk: list[str]) -> None:
        if not rows:
            return
        groups: dict[tuple[str, ...], list[Row]] = {}
        for row in rows:
            groups.setdefault(tuple(row), []).append(row)
        for names, group in groups.items():
            cols = ", ".join(ident(n) for n in names)
            sql = f"INSERT INTO {table_ident(t.name)} ({cols}) VALUES %s"
            if self.upsert and pk:
                rest = [n for n in names if n not in pk]
                action = ("DO UPDATE SET " + ", ".join(f"{ident(n)} = EXCLUDED.{ident(n)}"
                                                       for n in rest)) if rest else "DO NOTHING"
                sql += f" ON CONFLICT ({', '.join(ident(n) for n in pk)}) {action}"
            values = [tuple(common.to_pg(schemas.get(n), row[n]) for n in names)
                      for row in group]
            with self.conn.cursor() as cur:
                execute_values(cur, sql, values, page_size=int(self.c["batch.size"]))

    def _table(self, name: str, schemas: Mapping[str, Schema | None],
               sample: Callable[[str], Any], pk: list[str]) -> _Table:
        t = self.tables.get(name) or self._describe(name)
        if t is None:
            if not self.c["auto.create"]:
                raise ValueError(f"table {name} does not exist and auto.create is false")
            cols = [f"{ident(n)} {common.pg_type(schemas.get(n), sample(n))}"
                    + (" NOT NULL" if n in pk else "") for n in schemas]
            if pk:
                cols.append(f"PRIMARY KEY ({', '.join(ident(n) for n in pk)})")
            with self.conn.cursor() as cur:
                cur.execute(f"CREATE TABLE IF NOT EXISTS {table_ident(name)} ({', '.join(cols)})")
            t = self._describe(name)
            assert t is not None
        missing = [n for n in schemas if n not in t.columns]
        if missing:
            if not self.c["auto.evolve"]:
                raise ValueError(f"table {name} has no column(s) {', '.join(missing)} and "
                                 "auto.evolve is false")
            with self.conn.cursor() as cur:
                for n in missing:
                    cur.execute(f"ALTER TABLE {table_ident(name)} ADD COLUMN IF NOT EXISTS "
                                f"{ident(n)} {common.pg_type(schemas.get(n), sample(n))}")
            t = self._describe(name)
            assert t is not None
        self.tables[name] = t
        return t

    def _describe(self, name: str) -> _Table | None:
        schema, _, table = name.rpartition(".")
        with self.conn.cursor() as cur:
            cur.execute("SELECT column_name, data_type FROM information_schema.columns "
                        "WHERE table_name = %s AND table_schema = COALESCE(%s, current_schema())"
                        " ORDER BY ordinal_position", (table, schema or None))
            cols = dict(cur.fetchall())
        return _Table(name, cols) if cols else None


def _field_schema(schema: Schema | None, name: str) -> Schema | None:
    if schema is None or schema.type != STRUCT:
        return None
    f = schema.field(name)
    return f.schema if f is not None else None
