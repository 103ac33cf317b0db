"""The polling PostgreSQL source (the JDBC source's settings and offsets).

Every ``poll.interval.ms`` each table of ``table.whitelist`` (or the one
``query``) is queried for new rows, by ``mode``:

- ``bulk``: the whole table every time (no offset);
- ``incrementing``: ``WHERE inc > last ORDER BY inc`` — new rows only;
- ``timestamp``: ``WHERE ts > last AND ts < now() - delay ORDER BY ts`` — new
  and updated rows (a later row with the same timestamp as the last one read is
  missed, as in the JDBC source; all matching rows are read at once);
- ``timestamp+incrementing``: ``WHERE (ts = last_ts AND inc > last_inc OR ts >
  last_ts) AND ts < now() - delay ORDER BY ts, inc`` — complete and without
  duplicates.

``timestamp.delay.interval.ms`` leaves rows younger than that for a later poll
(transactions still in flight). At most ``batch.max.rows`` rows are read per
query (not in plain ``timestamp`` mode).

Records: topic ``topic.prefix`` + table name (the prefix alone for a query),
null key, a STRUCT value whose schema (named after the table, fields optional)
comes from the result's columns (:mod:`.common`). Source partition
``{"table": name}`` or ``{"query": q}``; offset ``{"incrementing": n}``,
``{"timestamp": ms, "timestamp_nanos": ns}`` (ns: the fraction of the second,
as ``java.sql.Timestamp.getNanos``) or both. A task starts from the committed
offset (``context.offset_storage_reader``); timestamps are compared in UTC.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from odradek.connect import config as cfg
from odradek.connect.api import SourceConnector, SourceTask, Task
from odradek.connect.config import ConfigDef, ConfigKey, one_of
from odradek.connect.connectors.postgres import common
from odradek.connect.connectors.postgres.common import EPOCH, ident, table_ident
from odradek.connect.data import SourceRecord, struct

VERSION = "1.0.0"
MODES = ("bulk", "incrementing", "timestamp", "timestamp+incrementing")

CONFIG = common.CONNECTION_CONFIG + ConfigDef((
    ConfigKey("mode", cfg.STRING, validator=one_of(*MODES), importance="HIGH",
              documentation="bulk, incrementing, timestamp or timestamp+incrementing."),
    ConfigKey("incrementing.column.name", cfg.STRING, "",
              documentation="A strictly increasing column (incrementing modes)."),
    ConfigKey("timestamp.column.name", cfg.STRING, "",
              documentation="A column updated on every change (timestamp modes)."),
    ConfigKey("table.whitelist", cfg.LIST, [], documentation="Tables to copy."),
    ConfigKey("query", cfg.STRING, "", documentation="A query to copy (instead of tables)."),
    ConfigKey("topic.prefix", cfg.STRING, validator=cfg.non_empty,
              documentation="Prefix of the topic names (the topic itself for a query)."),
    ConfigKey("poll.interval.ms", cfg.INT, 5000, validator=cfg.at_least(1),
              documentation="How often each table is queried (ms)."),
    ConfigKey("batch.max.rows", cfg.INT, 100, validator=cfg.at_least(1),
              documentation="The most rows read per query."),
    ConfigKey("timestamp.delay.interval.ms", cfg.LONG, 0, validator=cfg.at_least(0),
              documentation="How old (ms) a row's timestamp must be to be read."),
))


def _check(props: Mapping[str, str]) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    mode = props.get("mode", "")
    if "incrementing" in mode and not props.get("incrementing.column.name"):
        errors["incrementing.column.name"] = [f"required in mode {mode}"]
    if "timestamp" in mode and not props.get("timestamp.column.name"):
        errors["timestamp.column.name"] = [f"required in mode {mode}"]
    if bool(props.get("table.whitelist")) == bool(props.get("query")):
        errors["table.whitelist"] = ["exactly one of table.whitelist and query must be set"]
    return errors


class PostgresSourceConnector(SourceConnector):
    CONFIG = CONFIG

    def version(self) -> str:
        return VERSION

    def start(self, props: Mapping[str, str]) -> None:
        errors = _check(props)
        if errors:
            name, msgs = next(iter(errors.items()))
            raise cfg.ConfigError(name, msgs[0])
        self.props = dict(props)
        self.tables = list(CONFIG.parse(props)["table.whitelist"])

    def task_class(self) -> type[Task]:
        return PostgresSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        if not self.tables:
            return [dict(self.props)]
        n = max(1, min(max_tasks, len(self.tables)))
        return [{**self.props, "table.whitelist": ",".join(self.tables[i::n])}
                for i in range(n)]

    def stop(self) -> None:
        pass

    def exactly_once_support(self, props: Mapping[str, str]) -> bool | None:
        """A row's offset says exactly which rows are done: a resumed task repeats nothing."""
        return True

    def validate(self, props: Mapping[str, str]) -> Mapping[str, list[str]]:
        return _check(props)


def ts_offset(ts: dt.datetime) -> dict[str, int]:
    """``{"timestamp": ms, "timestamp_nanos": ns}`` of a UTC timestamp."""
    ts = ts.replace(tzinfo=dt.UTC) if ts.tzinfo is None else ts.astimezone(dt.UTC)
    delta = ts - EPOCH
    ms = (delta.days * 86400 + delta.seconds) * 1000 + delta.microseconds // 1000
    return {"timestamp": ms, "timestamp_nanos": ts.microsecond * 1000}


def ts_from_offset(offset: Mapping[str, Any]) -> dt.datetime:
    """The naive UTC timestamp an offset names (microsecond precision)."""
    ms = int(offset["timestamp"])
    nanos = int(offset.get("timestamp_nanos", (ms % 1000) * 1_000_000))
    ts = EPOCH + dt.timedelta(seconds=ms // 1000, microseconds=nanos // 1000)
    return ts.replace(tzinfo=None)


class _Querier:
    """One table (or the query): its partition, offset and next query time."""

    def __init__(self, table: str | None, query: str | None) -> None:
        self.table = table
        self.query = query
        self.partition: dict[str, str] = {"table": table} if table else {"query": query or ""}
        self.offset: dict[str, int] = {}
        self.next_at = 0.0


class PostgresSourceTask(SourceTask):
    def version(self) -> str:
        return VERSION

    def start(self, props: Mapping[str, str]) -> None:
        c = CONFIG.parse(props)
        self.c = c
        self.mode = str(c["mode"])
        self.inc = str(c["incrementing.column.name"])
        self.ts = str(c["timestamp.column.name"])
        self.interval = int(c["poll.interval.ms"]) / 1000
        self.stopping = threading.Event()
        self.poll_lock = threading.Lock()
        self.conn = common.connect(c)
        self.conn.autocommit = True
        self.queriers = ([_Querier(t, None) for t in c["table.whitelist"]]
                         or [_Querier(None, str(c["query"]))])
        reader = self.context.offset_storage_reader
        for q in self.queriers:
            stored = reader.offset(q.partition)
            if stored:
                q.offset = {k: int(v) for k, v in stored.items()}

    def stop(self) -> None:
        """Wakes a waiting ``poll``; the connection closes once no query runs."""
        self.stopping.set()
        if self.poll_lock.acquire(timeout=30):
            try:
                self.conn.close()
            finally:
                self.poll_lock.release()

    def poll(self) -> Sequence[SourceRecord] | None:
        due = min(q.next_at for q in self.queriers)
        wait = due - time.monotonic()
        if (wait > 0 and self.stopping.wait(wait)) or self.stopping.is_set():
            return None
        with self.poll_lock:
            if self.stopping.is_set():
                return None
            return self._poll_due()

    def _poll_due(self) -> list[SourceRecord]:
        now = time.monotonic()
        out: list[SourceRecord] = []
        for q in self.queriers:
            if q.next_at <= now:
                records = self._query(q)
                if len(records) < int(self.c["batch.max.rows"]) or self.mode in (
                        "bulk", "timestamp"):
                    q.next_at = now + self.interval
                out.extend(records)
        return out

    def _sql(self, q: _Querier) -> tuple[str, list[Any]]:
        source = table_ident(q.table) if q.table else f"({q.query}) AS odradek_query"
        sql = f"SELECT * FROM {source}"
        if self.mode == "bulk":
            return sql, []
        inc, ts = ident(self.inc), ident(self.ts)
        where: list[str] = []
        args: list[Any] = []
        if "timestamp" in self.mode:
            where.append(f"{ts} < (now() - %s * interval '1 millisecond')")
            args.append(int(self.c["timestamp.delay.interval.ms"]))
        if self.mode == "incrementing":
            where.append(f"{inc} > %s")
            args.append(q.offset.get("incrementing", -1))
            order = inc
        elif self.mode == "timestamp":
            if "timestamp" in q.offset:
                where.append(f"{ts} > %s")
                args.append(ts_from_offset(q.offset))
            order = ts
        else:
            if "timestamp" in q.offset:
                last = ts_from_offset(q.offset)
                where.append(f"(({ts} = %s AND {inc} > %s) OR {ts} > %s)")
                args += [last, q.offset.get("incrementing", -1), last]
            order = f"{ts}, {inc}"
        sql += " WHERE " + " AND ".join(where) + f" ORDER BY {order}"
        if self.mode != "timestamp":
            sql += f" LIMIT {int(self.c['batch.max.rows'])}"
        return sql, args

    def _query(self, q: _Querier) -> list[SourceRecord]:
        sql, args = self._sql(q)
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            rows = cur.fetchall()
            desc = cur.description
        name = q.table or None
        fields = [(d.name, common.connect_schema(d.type_code, _typmod(d))) for d in desc]
        schema = struct(*fields, name=name)
        topic = str(self.c["topic.prefix"]) + (q.table or "")
        out = []
        for row in rows:
            value = {f.name: common.from_pg(f.schema, v)
                     for f, v in zip(schema.fields, row, strict=True)}
            offset = dict(q.offset)
            if "incrementing" in self.mode:
                offset["incrementing"] = int(value[self.inc])
            if "timestamp" in self.mode:
                offset.update(ts_offset(value[self.ts]))
            q.offset = offset
            out.append(SourceRecord(topic, None, None, None, schema, value,
                                    source_partition=q.partition, source_offset=offset))
        return out


def _typmod(d: Any) -> int:
    """The typmod of a numeric result column (-1 when unconstrained)."""
    if d.type_code == common.NUMERIC and d.scale is not None and d.precision is not None:
        return ((int(d.precision) << 16) | int(d.scale)) + 4
    return -1
