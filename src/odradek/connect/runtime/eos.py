"""Exactly-once source tasks (KIP-618): records and their offsets in one transaction.

:class:`ExactlyOnceSourceRunner` runs a source task with a transactional
producer whose ``transactional.id`` is :func:`transactional_id`
(``<group.id>-<connector>-<task>``, Kafka's ``Worker.taskTransactionalId``; a
standalone worker has no group, so ``group.id`` from the worker's settings or
``connect-standalone``). ``init_transactions`` at start fences any earlier
producer of the same id (a zombie of the task: its next commit fails). Then,
per transaction:

1. begin (lazily, with the first record after a commit),
2. produce the converted records (a record a transform drops or
   ``errors.tolerance=all`` skips produces nothing, its offset still counts),
3. at the boundary produce one offset record per source partition (the last
   offset of the transaction, :func:`offset_topic.offset_record`) to the
   offsets topic, and commit. A failed produce or commit aborts and fails the
   task.

Only after the commit are ``commit_record`` (with each record's metadata) and
``commit`` called and the offsets visible to ``offset_storage_reader`` (the
runner remembers what it committed; the store reads the topic
``read_committed``, so an aborted transaction's offsets are never seen).
Boundaries (``transaction.boundary``): ``poll`` after each non-empty batch;
``interval`` every ``transaction.boundary.interval.ms`` (the worker's
``offset.flush.interval.ms`` when unset); ``connector`` where the task's
:class:`TransactionContext` says. On stop an open transaction is committed if
the task's records were all handled, else aborted.

The offsets topic is the connector's ``offsets.storage.topic`` if set (read
first, then the worker's store), else the worker's (``self.offsets``, which
must be a :class:`TopicOffsets`). The caller (a herder) sets ``offsets`` and
may set ``transactional_id`` before :meth:`start`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from confluent_kafka import KafkaException, Producer

from odradek.connect.api import (
    OffsetStorageReader,
    RecordMetadata,
    SourceConnector,
    TransactionContext,
)
from odradek.connect.data import SourceRecord
from odradek.connect.errors import ErrorHandler, Skip
from odradek.connect.runtime.config import WorkerConfig, prefixed
from odradek.connect.runtime.offset_topic import TopicOffsets, offset_key, offset_record
from odradek.connect.runtime.offsets import OffsetStore
from odradek.connect.runtime.pipeline import converter, header_converter
from odradek.connect.runtime.producing import produce, record_kwargs
from odradek.connect.runtime.tasks import (
    KAFKA_LOG,
    RUNNING,
    STOP_TIMEOUT_S,
    SourceRunner,
    _headers,
    _SourceContext,
)
from odradek.connect.runtime.topics import TopicCreator
from odradek.connect.transforms.chain import TransformChain

TXN_TIMEOUT_S = 30.0
STANDALONE_GROUP = "connect-standalone"


def transactional_id(worker: Mapping[str, str], connector: str, task: int) -> str:
    """Kafka's ``<group.id>-<connector>-<task>``."""
    return f"{worker.get('group.id') or STANDALONE_GROUP}-{connector}-{task}"


def enabled(worker: WorkerConfig) -> bool:
    return worker.exactly_once == "enabled"


def offsets_topic(worker: WorkerConfig, topic: str | None = None) -> TopicOffsets:
    """An offsets topic (the worker's ``offset.storage.topic`` by default),
    created with the worker's ``offset.storage.partitions`` / ``.replication.factor``."""
    props = worker.props
    return TopicOffsets(topic or props.get("offset.storage.topic") or "connect-offsets",
                        worker.client_config("consumer"), worker.client_config("producer"),
                        partitions=int(props.get("offset.storage.partitions", "25")),
                        replication_factor=int(props.get(
                            "offset.storage.replication.factor", "3")))


def validate(cls: type, config: Mapping[str, str], worker: Mapping[str, str]
             ) -> dict[str, list[str]]:
    """``exactly.once.support`` and ``transaction.boundary`` checked against
    the connector's declarations (only when the worker has exactly-once on, as Kafka)."""
    if not (issubclass(cls, SourceConnector)
            and worker.get("exactly.once.source.support") == "enabled"):
        return {}
    errors: dict[str, list[str]] = {}
    try:
        instance = cls()
        support = instance.exactly_once_support(config)
        boundaries = instance.can_define_transaction_boundaries(config)
    except Exception as e:
        return {"exactly.once.support": [f"the connector's exactly_once_support failed: {e}"]}
    if config.get("exactly.once.support", "requested") == "required" and support is not True:
        said = "does not support" if support is False else "does not declare"
        errors["exactly.once.support"] = [
            f"exactly.once.support=required but the connector {said} exactly-once "
            "semantics for this configuration"]
    if config.get("transaction.boundary", "poll") == "connector" and not boundaries:
        errors["transaction.boundary"] = [
            "transaction.boundary=connector but the connector cannot define its own "
            "transaction boundaries for this configuration"]
    return errors


class _Reader(OffsetStorageReader):
    """What this runner committed, then the connector's topic, then the worker's store."""

    def __init__(self, connector: str, stores: list[OffsetStore]) -> None:
        self.connector = connector
        self.stores = stores
        self.committed: dict[bytes, Mapping[str, Any]] = {}

    def offset(self, partition: Mapping[str, Any]) -> Mapping[str, Any] | None:
        mine = self.committed.get(offset_key(self.connector, partition))
        if mine is not None:
            return dict(mine)
        for store in self.stores:
            found = store.get(self.connector, partition)
            if found is not None:
                return found
        return None


class _Transactions(TransactionContext):
    """Requests of the task (``transaction.boundary=connector``)."""

    def __init__(self) -> None:
        self.batch: str | None = None  # "commit"/"abort" after the current batch
        self.records: dict[int, tuple[SourceRecord, str]] = {}

    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        self._request("commit", record)

    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        self._request("abort", record)

    def _request(self, what: str, record: SourceRecord | None) -> None:
        if record is None:
            self.batch = what
        else:
            self.records[id(record)] = (record, what)

    def after(self, record: SourceRecord) -> str | None:
        got = self.records.pop(id(record), None)
        return got[1] if got is not None and got[0] is record else None


class _Context(_SourceContext):
    def __init__(self, configs: Mapping[str, str], reader: OffsetStorageReader,
                 transactions: TransactionContext | None) -> None:
        super().__init__(configs, reader)
        self._transactions = transactions

    @property
    def transaction_context(self) -> TransactionContext | None:
        return self._transactions


class ExactlyOnceSourceRunner(SourceRunner):
    transactional_id: str | None = None

    def run(self) -> None:
        cc = self.cconfig
        own_topic = cc.get("offsets.storage.topic", "").strip()
        store = self.offsets
        own: TopicOffsets | None = None
        if own_topic:
            own = offsets_topic(self.worker, own_topic)
            own.start()
        elif not isinstance(store, TopicOffsets):
            raise RuntimeError("exactly-once source tasks need an offsets topic "
                               "(offset.storage.topic), not an offsets file")
        try:
            if own is not None:
                self._run(own, [own, store])
            else:
                assert isinstance(store, TopicOffsets)
                self._run(store, [store])
        finally:
            if own is not None:
                own.stop()

    def _run(self, target: TopicOffsets, stores: list[OffsetStore]) -> None:
        for s in stores:
            if isinstance(s, TopicOffsets):
                s.refresh()  # what earlier runs of the task committed
        topic = target.topic
        tid = self.transactional_id or transactional_id(self.worker.props, self.connector,
                                                        self.id)
        producer = Producer({**self.worker.client_config(
            "producer", prefixed(self.cconfig, "producer.override.")),
            "transactional.id": tid, "enable.idempotence": "true", "acks": "all",
            "linger.ms": "5", "partitioner": "murmur2_random", "logger": KAFKA_LOG})
        producer.init_transactions(TXN_TIMEOUT_S)  # fences an older producer of the task
        boundary = self.cconfig.get("transaction.boundary", "poll")
        interval_ms = int(self.cconfig.get("transaction.boundary.interval.ms")
                          or self.worker.flush_interval_ms)
        txns = _Transactions() if boundary == "connector" else None
        reader = _Reader(self.connector, stores)
        task = self.task
        task.initialize(_Context(self.config, reader, txns))
        handler = ErrorHandler(self.cconfig, sink=False)
        kconv = converter("key", self.cconfig, self.worker.props)
        vconv = converter("value", self.cconfig, self.worker.props)
        hconv = header_converter(self.cconfig, self.worker.props)
        transforms = TransformChain.from_props(self.cconfig)
        # the open transaction: [record, metadata] in order, offsets by partition key
        entries: list[list[Any]] = []
        offsets: dict[bytes, tuple[Mapping[str, Any], Mapping[str, Any]]] = {}
        failure: list[BaseException] = []
        seen_topics: set[str] = set()
        creator = TopicCreator(self.worker, self.cconfig)
        state = {"open": False}

        def delivered(entry: list[Any]) -> Callable[[Any, Any], None]:
            def cb(err: Any, msg: Any) -> None:
                if err is not None:
                    failure.append(KafkaException(err))
                else:
                    entry[1] = (msg.topic(), msg.partition(), msg.offset())
            return cb

        def begin() -> None:
            if not state["open"]:
                producer.begin_transaction()
                state["open"] = True

        def commit() -> None:
            if not state["open"]:
                return
            for partition, offset in offsets.values():
                k, v = offset_record(self.connector, partition, offset)
                produce(producer, topic, key=k, value=v,
                        on_delivery=lambda err, _m: failure.append(
                            KafkaException(err)) if err is not None else None)
            producer.flush(TXN_TIMEOUT_S)
            if failure:
                raise failure[0]
            producer.commit_transaction(TXN_TIMEOUT_S)
            state["open"] = False
            for key, (_partition, offset) in offsets.items():
                reader.committed[key] = offset
            done, entries[:] = list(entries), []
            offsets.clear()
            for record, meta in done:
                task.commit_record(record, _metadata(meta))
            task.commit()

        def abort() -> None:
            if state["open"]:
                producer.abort_transaction(TXN_TIMEOUT_S)
                state["open"] = False
            entries.clear()
            offsets.clear()

        def handle(record: SourceRecord) -> None:
            begin()
            entry: list[Any] = [record, None]
            entries.append(entry)
            if record.source_partition:
                offsets[offset_key(self.connector, record.source_partition)] = (
                    record.source_partition, record.source_offset)
            try:
                out = transforms.apply(record, partial(
                    handler.run, "TRANSFORMATION")) if transforms.stages else record
                if out is None:
                    return
                key = handler.run("KEY_CONVERTER", type(kconv).__name__, partial(
                    kconv.from_connect_data, out.topic, out.key_schema, out.key))
                value = handler.run("VALUE_CONVERTER", type(vconv).__name__, partial(
                    vconv.from_connect_data, out.topic, out.value_schema, out.value))
                headers = handler.run("HEADER_CONVERTER", type(hconv).__name__, partial(
                    _headers, hconv, out)) if out.headers else []
            except Skip:
                return
            if out.topic not in seen_topics:
                creator.ensure(out.topic)  # topic.creation.* (KIP-158)
                seen_topics.add(out.topic)
                self.on_topic(out.topic)
            produce(producer, out.topic,
                    **record_kwargs(out, key, value, headers, delivered(entry)))

        task.start(self.config)
        self.state = RUNNING
        next_commit = time.monotonic() + interval_ms / 1000
        try:
            while True:
                if not self._running.is_set():  # paused: what was polled is committed first
                    commit()
                if not self._wait_running():
                    break
                records = task.poll() or []
                for record in records:
                    handle(record)
                    what = txns.after(record) if txns is not None else None
                    if what == "commit":
                        commit()
                    elif what == "abort":
                        abort()
                producer.poll(0)
                if failure:
                    raise failure[0]
                if boundary == "poll" and records:
                    commit()
                elif boundary == "interval" and time.monotonic() >= next_commit:
                    commit()
                    next_commit = time.monotonic() + interval_ms / 1000
                elif txns is not None and txns.batch is not None:
                    what, txns.batch = txns.batch, None
                    if what == "commit":
                        commit()
                    else:
                        abort()
        except BaseException:
            with contextlib.suppress(Exception):  # the producer may be fenced or failed
                abort()
            raise
        else:  # stopped between polls: every record returned was handled
            commit()
        finally:
            transforms.close()
            producer.flush(STOP_TIMEOUT_S)


def _metadata(meta: tuple[str, int, int] | None) -> RecordMetadata | None:
    return None if meta is None else RecordMetadata(*meta)
