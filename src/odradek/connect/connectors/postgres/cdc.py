"""The change data capture source: logical decoding with ``pgoutput``
(Debezium's PostgreSQL connector's settings and event shapes, one task).

The task ensures the publication ``publication.name``
(``publication.autocreate.mode``: ``all_tables``, ``filtered`` — the tables
of ``table.include.list`` — or ``disabled``: it must exist) and the logical
replication slot ``slot.name``. With ``snapshot.mode=initial`` and no
committed offset it creates the slot, takes the snapshot the slot exports
(every included table, ``op: r``), then streams changes from the slot's
consistent point (``START_REPLICATION ... (proto_version '1',
publication_names ...)``), decoded by :mod:`.pgoutput`. Events:
:mod:`.cdc_events`. ``table.include.list`` is a list of regular expressions
matched against ``schema.table``. An update that changes the key is a delete
(with its tombstone) of the old key and a create of the new one, as Debezium
sends it. Each transaction is held in memory until its Commit message. TRUNCATE
is not sent as an event (Debezium's default, ``skipped.operations=t``).

Source partition ``{"server": topic.prefix}``. A streamed record's offset is
``{"lsn": its transaction's end LSN, "txId", "ts_usec": commit time,
"lsn_commit", "event": its number in the transaction}`` where ``lsn_commit``
is the end LSN of the last transaction whose records all come at or before
this one. Snapshot records have ``{"lsn": consistent point, "snapshot": true,
"event": n, "last_snapshot_record": bool}`` (``lsn_commit`` on the last only). A task
started with a committed offset streams from its ``lsn_commit`` and skips the
events of its transaction numbered up to ``event``: nothing is lost or repeated;
an unfinished snapshot is taken again (from a new slot).

The slot's confirmed flush LSN is never ahead of what is acknowledged:
``commit_record`` marks records acknowledged and the flush position is the
``lsn_commit`` of the longest acknowledged prefix of the records returned;
``commit`` also takes the committed offset's ``lsn_commit``. ``poll`` (the only
thread that uses the replication connection) sends it to the server. With
``heartbeat.interval.ms`` > 0 a quiet task returns a heartbeat record (topic
``__debezium-heartbeat.<prefix>``) whose offset moves ``lsn_commit`` to the
server's current position, so an idle slot does not hold WAL.
"""

from __future__ import annotations

import re
import select
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from psycopg2.extras import LogicalReplicationConnection, ReplicationCursor

from odradek.connect import config as cfg
from odradek.connect.api import RecordMetadata, SourceConnector, SourceTask, Task
from odradek.connect.config import ConfigDef, ConfigKey, one_of
from odradek.connect.connectors.postgres import cdc_events as ev
from odradek.connect.connectors.postgres import common, pgoutput
from odradek.connect.connectors.postgres.acks import Acks
from odradek.connect.connectors.postgres.common import ident, table_ident
from odradek.connect.data import SourceRecord

CONFIG = common.CONNECTION_CONFIG + ConfigDef((
    ConfigKey("topic.prefix", cfg.STRING, validator=cfg.non_empty, importance="HIGH",
              documentation="Names the server: topics are <prefix>.<schema>.<table>."),
    ConfigKey("slot.name", cfg.STRING, "debezium", documentation="The replication slot."),
    ConfigKey("publication.name", cfg.STRING, "dbz_publication",
              documentation="The publication the slot streams."),
    ConfigKey("publication.autocreate.mode", cfg.STRING, "all_tables",
              validator=one_of("all_tables", "filtered", "disabled"),
              documentation="Create the publication for all tables, the included ones, "
                            "or not at all."),
    ConfigKey("snapshot.mode", cfg.STRING, "initial", validator=one_of("initial", "never"),
              documentation="initial: read the tables first; never: stream only."),
    ConfigKey("table.include.list", cfg.LIST, [],
              documentation="Regular expressions of schema.table to capture (empty: all)."),
    ConfigKey("heartbeat.interval.ms", cfg.INT, 0, validator=cfg.at_least(0),
              documentation="Emit a heartbeat after this long without events (0: never)."),
    ConfigKey("max.batch.size", cfg.INT, 2048, validator=cfg.at_least(1),
              documentation="The most records one poll returns."),
    ConfigKey("poll.interval.ms", cfg.INT, 500, validator=cfg.at_least(1),
              documentation="How long a poll waits for changes."),
))


SLOT_NAME = re.compile(r"[a-z0-9_]{1,63}")


class PostgresCdcSourceConnector(SourceConnector):
    CONFIG = CONFIG

    def version(self) -> str:
        return ev.VERSION

    def start(self, props: Mapping[str, str]) -> None:
        CONFIG.parse(props)
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return PostgresCdcSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass

    def exactly_once_support(self, props: Mapping[str, str]) -> bool | None:
        """Streamed events resume after the committed one (an unfinished snapshot is retaken)."""
        return True

    def validate(self, props: Mapping[str, str]) -> Mapping[str, list[str]]:
        errors: dict[str, list[str]] = {}
        if not SLOT_NAME.fullmatch(props.get("slot.name", "debezium")):
            errors["slot.name"] = ["a slot name is lower-case letters, digits and _ "
                                   "(at most 63)"]
        if (props.get("publication.autocreate.mode") == "filtered"
                and not props.get("table.include.list", "").strip()):
            errors["table.include.list"] = ["publication.autocreate.mode=filtered needs the "
                                            "tables listed"]
        for p in cfg.parse("table.include.list", cfg.LIST, props.get("table.include.list", "")):
            try:
                re.compile(p)
            except re.error as e:
                errors.setdefault("table.include.list", []).append(f"{p}: {e}")
        return errors


class PostgresCdcSourceTask(SourceTask):
    def version(self) -> str:
        return ev.VERSION

    def start(self, props: Mapping[str, str]) -> None:
        c = CONFIG.parse(props)
        self.c = c
        self.prefix = str(c["topic.prefix"])
        self.slot = str(c["slot.name"])
        self.pub = str(c["publication.name"])
        self.include = [re.compile(p) for p in c["table.include.list"]]
        self.partition = {"server": self.prefix}
        self.stopping = threading.Event()
        self.poll_lock = threading.Lock()
        self.acks = Acks()
        self.snap_count = 0
        self.sent_lsn = 0
        self.tables: dict[int, ev.Table] = {}
        self.txn: list[tuple[ev.Table, str, dict[str, Any] | None, dict[str, Any] | None]] = []
        self.begin: pgoutput.Begin | None = None
        self.last_commit = 0
        self.last_emit = time.monotonic()
        self.streaming = False
        self.snap: Any = None
        self.snap_tables: list[ev.Table] = []
        self.snap_cursor: Any = None
        self.snap_held: SourceRecord | None = None
        self.repl: Any = None
        self.meta = common.connect(c)
        try:
            self._setup()
        except BaseException:
            self._close()
            raise

    def _setup(self) -> None:
        c = self.c
        self.meta.autocommit = True
        self.db = str(self.meta.get_dsn_parameters().get("dbname", ""))
        self._ensure_publication()
        self.repl = common.connect(c, connection_factory=LogicalReplicationConnection)
        self.cur: ReplicationCursor = self.repl.cursor()
        stored = self.context.offset_storage_reader.offset(self.partition)
        self.skip_lsn, self.skip_event = 0, 0
        self.start_lsn = 0
        snapshot_done = stored is not None and (
            not stored.get("snapshot") or bool(stored.get("last_snapshot_record")))
        exists = self._slot_exists()
        if c["snapshot.mode"] == "initial" and not snapshot_done:
            if exists:
                self._sql("SELECT pg_drop_replication_slot(%s)", self.slot)
            self._create_slot(snapshot=True)
        elif not exists:
            self._create_slot(snapshot=False)
        if stored is not None and snapshot_done:
            self.start_lsn = int(stored.get("lsn_commit") or 0)
            if not stored.get("snapshot"):
                self.skip_lsn, self.skip_event = int(stored["lsn"]), int(stored.get("event", 0))

    # -- setup ----------------------------------------------------------------

    def _sql(self, statement: str, *args: Any) -> list[tuple[Any, ...]]:
        with self.meta.cursor() as cur:
            cur.execute(statement, args)
            return list(cur.fetchall()) if cur.description else []

    def _ensure_publication(self) -> None:
        if self._sql("SELECT 1 FROM pg_publication WHERE pubname = %s", self.pub):
            return
        mode = self.c["publication.autocreate.mode"]
        if mode == "disabled":
            raise ValueError(f"publication {self.pub} does not exist and "
                             "publication.autocreate.mode is disabled")
        if mode == "all_tables":
            self._sql(f"CREATE PUBLICATION {ident(self.pub)} FOR ALL TABLES")
            return
        names = [p.pattern for p in self.include]
        self._sql(f"CREATE PUBLICATION {ident(self.pub)} FOR TABLE "
                  + ", ".join(table_ident(n) for n in names))

    def _slot_exists(self) -> bool:
        return bool(self._sql("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s",
                              self.slot))

    def _create_slot(self, *, snapshot: bool) -> None:
        self.cur.create_replication_slot(self.slot, output_plugin="pgoutput")
        _, consistent, snapshot_name, _ = self.cur.fetchone()
        self.consistent = pgoutput.lsn_int(consistent)
        if not snapshot:
            return
        # Import the exported snapshot before the replication connection runs
        # anything else; the rows are read later, in polls.
        self.snap = common.connect(self.c)
        self.snap.set_session(isolation_level="REPEATABLE READ", readonly=True)
        with self.snap.cursor() as cur:
            cur.execute("SET TRANSACTION SNAPSHOT %s", (snapshot_name,))
            cur.execute("SELECT schemaname, tablename FROM pg_publication_tables"
                        " WHERE pubname = %s ORDER BY 1, 2", (self.pub,))
            names = [f"{s}.{t}" for s, t in cur.fetchall()]
        for name in names:
            if self._included(name):
                self.snap_tables.append(self._catalog_table(name))

    def _included(self, qualified: str) -> bool:
        return not self.include or any(p.fullmatch(qualified) for p in self.include)

    def _primary_key(self, relid: int) -> list[str]:
        return [r[0] for r in self._sql(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
            " AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s AND i.indisprimary"
            " ORDER BY array_position(i.indkey::int2[], a.attnum)", relid)]

    def _catalog_table(self, qualified: str) -> ev.Table:
        """What a Relation message would say of ``qualified``, from the catalog."""
        schema, name = qualified.split(".", 1)
        ((relid, ident_),) = self._sql(
            "SELECT c.oid, c.relreplident FROM pg_class c JOIN pg_namespace n"
            " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s", schema, name)
        cols = tuple(pgoutput.Column(n, t, m, False) for n, t, m in self._sql(
            "SELECT attname, atttypid, atttypmod FROM pg_attribute WHERE attrelid = %s"
            " AND attnum > 0 AND NOT attisdropped ORDER BY attnum", relid))
        rel = pgoutput.Relation(int(relid), schema, name, str(ident_), cols)
        return ev.table(rel, self._primary_key(int(relid)), self.prefix)

    # -- acknowledgements -----------------------------------------------------

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        self.acks.ack(record.source_offset)

    def commit(self) -> None:
        """The committed offset's ``lsn_commit`` is safe to flush; records up to it
        need no acknowledgement any more (a worker that drops a record without
        calling ``commit_record`` does not stall the slot)."""
        stored = self.context.offset_storage_reader.offset(self.partition)
        if stored and stored.get("lsn_commit"):
            self.acks.committed(int(stored["lsn_commit"]))

    @property
    def flushed_lsn(self) -> int:
        """The confirmed flush LSN last sent to the server."""
        return self.sent_lsn

    # -- polling --------------------------------------------------------------

    def stop(self) -> None:
        self.stopping.set()
        if self.poll_lock.acquire(timeout=10):
            try:
                self._close()
            finally:
                self.poll_lock.release()

    def _close(self) -> None:
        for conn in (self.snap, self.repl, self.meta):
            if conn is not None and not conn.closed:
                conn.close()

    def poll(self) -> Sequence[SourceRecord] | None:
        with self.poll_lock:
            if self.stopping.is_set():
                return None
            out = self._snapshot_batch() if self.snap is not None else self._stream()
            for r in out:
                self.acks.track(r.source_offset)
            if out:
                self.last_emit = time.monotonic()
            return out

    def _snapshot_batch(self) -> list[SourceRecord]:
        assert self.snap is not None
        batch = int(self.c["max.batch.size"])
        out: list[SourceRecord] = []
        while len(out) < batch and self.snap_tables:
            t = self.snap_tables[0]
            if self.snap_cursor is None:
                self.snap_cursor = self.snap.cursor(name="odradek_snapshot")
                cols = ", ".join(f"{ident(c.name)}::text" for c in t.relation.columns)
                self.snap_cursor.execute(f"SELECT {cols} FROM {table_ident(t.qualified)}")
            rows = self.snap_cursor.fetchmany(batch - len(out))
            if not rows:
                self.snap_cursor.close()
                self.snap_cursor = None
                self.snap_tables.pop(0)
                continue
            now = int(time.time() * 1000)
            for values in rows:
                after = ev.row(t, list(values))
                self.snap_count += 1
                out.append(self._record(t, "r", None, after, now, {
                    "lsn": self.consistent, "snapshot": True, "ts_usec": now * 1000,
                    "event": self.snap_count, "last_snapshot_record": False},
                    snapshot="true"))
        # The last record read is held back until it is known whether it is
        # the snapshot's last (it must carry the marker).
        out = ([self.snap_held] if self.snap_held is not None else []) + out
        self.snap_held = None
        if self.snap_tables:
            if out:
                self.snap_held = out.pop()
        else:
            self.snap.commit()
            self.snap.close()
            self.snap = None
            self.start_lsn = self.consistent
            if out:
                last = out[-1]
                value = dict(last.value)
                value["source"] = {**value["source"], "snapshot": "last"}
                out[-1] = replace(last, value=value, source_offset={
                    **last.source_offset, "last_snapshot_record": True,
                    "lsn_commit": self.consistent})
        return out

    def _record(self, t: ev.Table, op: str, before: dict[str, Any] | None,
                after: dict[str, Any] | None, ts_ms: int, offset: dict[str, Any], *,
                snapshot: str = "false", tx_id: int | None = None,
                lsn: int | None = None) -> SourceRecord:
        value = ev.envelope(t, op, before, after, server=self.prefix, db=self.db, ts_ms=ts_ms,
                            now_ms=int(time.time() * 1000), snapshot=snapshot, tx_id=tx_id,
                            lsn=lsn if lsn is not None else offset.get("lsn"))
        return SourceRecord(t.topic, None, t.key_schema, ev.key(t, after or before),
                            t.envelope, value, timestamp=ts_ms,
                            source_partition=self.partition, source_offset=offset)

    def _start_streaming(self) -> None:
        self.cur.start_replication(
            slot_name=self.slot, start_lsn=self.start_lsn, decode=False,
            options={"proto_version": "1", "publication_names": self.pub})
        self.streaming = True
        self.sent_lsn = max(self.sent_lsn, self.start_lsn)
        self.last_commit = max(self.last_commit, self.start_lsn)
        self.last_emit = time.monotonic()

    def _feedback(self) -> None:
        lsn = self.acks.lsn
        if lsn > self.sent_lsn:
            self.cur.send_feedback(flush_lsn=lsn, reply=True)
            self.sent_lsn = lsn

    def _stream(self) -> list[SourceRecord]:
        if not self.streaming:
            self._start_streaming()
        self._feedback()
        deadline = time.monotonic() + int(self.c["poll.interval.ms"]) / 1000
        out: list[SourceRecord] = []
        while not self.stopping.is_set() and len(out) < int(self.c["max.batch.size"]):
            msg = self.cur.read_message()
            if msg is None:
                left = deadline - time.monotonic()
                if out or left <= 0:
                    break
                select.select([self.cur], [], [], min(left, 0.1))
                continue
            out.extend(self._handle(pgoutput.decode(msg.payload)))
        hb = int(self.c["heartbeat.interval.ms"])
        if (not out and hb and self.begin is None
                and time.monotonic() - self.last_emit >= hb / 1000):
            out.append(self._heartbeat())
        return out

    def _heartbeat(self) -> SourceRecord:
        lsn = max(int(self.cur.wal_end), self.last_commit)
        now = int(time.time() * 1000)
        return SourceRecord(f"__debezium-heartbeat.{self.prefix}", None, ev.HEARTBEAT_KEY,
                            {"serverName": self.prefix}, ev.HEARTBEAT_VALUE, {"ts_ms": now},
                            source_partition=self.partition,
                            source_offset={"lsn": lsn, "ts_usec": now * 1000,
                                           "lsn_commit": lsn, "event": 0})

    def _handle(self, m: pgoutput.Decoded) -> list[SourceRecord]:
        if isinstance(m, pgoutput.Begin):
            self.begin, self.txn = m, []
        elif isinstance(m, pgoutput.Relation):
            self.tables[m.relid] = ev.table(m, self._primary_key(m.relid), self.prefix)
        elif isinstance(m, pgoutput.Insert | pgoutput.Update | pgoutput.Delete):
            t = self.tables[m.relid]
            if self._included(t.qualified):
                if isinstance(m, pgoutput.Insert):
                    self.txn.append((t, "c", None, ev.row(t, m.new)))
                elif isinstance(m, pgoutput.Update):
                    before, after = ev.row(t, m.old), ev.row(t, m.new)
                    if before is not None and ev.key(t, before) != ev.key(t, after):
                        # The key changed: the old key's row is gone (as Debezium).
                        self.txn.append((t, "d", before, None))
                        self.txn.append((t, "c", None, after))
                    else:
                        self.txn.append((t, "u", before, after))
                else:
                    self.txn.append((t, "d", ev.row(t, m.old), None))
        elif isinstance(m, pgoutput.Commit):
            return self._commit(m)
        return []

    def _commit(self, m: pgoutput.Commit) -> list[SourceRecord]:
        begin, self.begin = self.begin, None
        assert begin is not None
        out: list[SourceRecord] = []
        n = 0
        prev, self.last_commit = self.last_commit, m.end_lsn
        if m.end_lsn <= self.start_lsn:
            return out
        count = sum(2 if op == "d" else 1 for _, op, _, _ in self.txn)
        for t, op, before, after in self.txn:
            for tombstone in ((False, True) if op == "d" else (False,)):
                n += 1
                if m.end_lsn == self.skip_lsn and n <= self.skip_event:
                    continue
                offset = {"lsn": m.end_lsn, "txId": begin.xid, "ts_usec": m.commit_ts,
                          "lsn_commit": m.end_lsn if n == count else prev, "event": n}
                r = self._record(t, op, before, after, m.commit_ts // 1000, offset,
                                 tx_id=begin.xid, lsn=m.commit_lsn)
                if tombstone:
                    r = replace(r, value=None, value_schema=None)
                out.append(r)
        self.txn = []
        return out
