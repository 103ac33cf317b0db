"""Task threads: each task of a connector runs its loop in a thread of its own
(sinks: :mod:`odradek.connect.runtime.sink`).

A **source** task: ``poll`` → transforms → key/value/header converters →
produce (an idempotent producer, ``acks=all``). Records are remembered in the
order they were polled; an offset becomes committable once its record and
every record polled before it were acknowledged (or dropped by a transform or
skipped by ``errors.tolerance=all``), so the offsets file never runs ahead of
what the topic holds. Committable offsets are written every
``offset.flush.interval.ms`` and when the task stops (after the producer is
flushed).

States (Kafka's): UNASSIGNED → RUNNING ⇄ PAUSED; an exception from the task
makes it FAILED with its trace; a stopped runner is gone (its status with it).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from confluent_kafka import KafkaException, Producer

from odradek.connect.api import OffsetStorageReader as _Reader
from odradek.connect.api import (
    RecordMetadata,
    SourceTask,
    SourceTaskContext,
)
from odradek.connect.converters.base import HeaderConverter
from odradek.connect.data import ConnectRecord, SourceRecord
from odradek.connect.errors import ErrorHandler, Skip
from odradek.connect.runtime.config import WorkerConfig, prefixed
from odradek.connect.runtime.offsets import OffsetStore, Reader
from odradek.connect.runtime.pipeline import converter, header_converter
from odradek.connect.runtime.producing import produce, record_kwargs
from odradek.connect.runtime.topics import TopicCreator
from odradek.connect.transforms.chain import TransformChain

UNASSIGNED, RUNNING, PAUSED, FAILED, RESTARTING, STOPPED = (
    "UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "RESTARTING", "STOPPED")
STOP_TIMEOUT_S = 10.0
KAFKA_LOG = logging.getLogger("odradek.connect.kafka")
"""Where librdkafka's own log lines go (not stderr)."""


class TaskRunner:
    """One task's thread and status. ``on_topic`` is told each topic used."""

    def __init__(self, connector: str, task_id: int, task_cls: type, config: Mapping[str, str],
                 connector_config: Mapping[str, str], worker: WorkerConfig,
                 on_topic: Callable[[str], None], paused: bool = False) -> None:
        self.connector = connector
        self.id = task_id
        self.task_cls = task_cls
        self.config = dict(config)
        self.cconfig = dict(connector_config)
        self.worker = worker
        self.on_topic = on_topic
        self.state = UNASSIGNED
        self.trace: str | None = None
        self._stop = threading.Event()
        self._running = threading.Event()
        if not paused:
            self._running.set()
        self.task: Any = None
        self.thread = threading.Thread(target=self._main, daemon=True,
                                       name=f"connect-{connector}-{task_id}")

    def start(self) -> None:
        self.thread.start()

    def pause(self) -> None:
        self._running.clear()
        if self.state == RUNNING:
            self.state = PAUSED

    def resume(self) -> None:
        self._running.set()
        if self.state == PAUSED:
            self.state = RUNNING

    def stop(self, join: bool = True) -> None:
        self._stop.set()
        self._running.set()
        self.interrupt()
        if join and self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join(STOP_TIMEOUT_S)

    def interrupt(self) -> None:
        """Make the task's loop return soon (called from another thread)."""

    def _main(self) -> None:
        try:
            self.task = self.task_cls()
            self.run()
        except Exception:
            self.trace = traceback.format_exc()
            self.state = FAILED

    def _wait_running(self) -> bool:
        """Block while paused; False once stopping."""
        if not self._running.is_set():
            self.state = PAUSED
            self._running.wait()
        if self.state == PAUSED and not self._stop.is_set():
            self.state = RUNNING
        return not self._stop.is_set()

    def run(self) -> None:
        raise NotImplementedError


class _SourceContext(SourceTaskContext):
    def __init__(self, configs: Mapping[str, str], reader: _Reader) -> None:
        self.configs = configs
        self._reader = reader

    @property
    def offset_storage_reader(self) -> _Reader:
        return self._reader


class SourceRunner(TaskRunner):
    offsets: OffsetStore

    def interrupt(self) -> None:
        task = self.task
        if task is not None:  # SourceTask.stop is called from another thread, as Kafka's
            with contextlib.suppress(Exception):  # best effort
                task.stop()

    def run(self) -> None:
        task: SourceTask = self.task
        task.initialize(_SourceContext(self.config, Reader(self.offsets, self.connector)))
        handler = ErrorHandler(self.cconfig, sink=False)
        kconv = converter("key", self.cconfig, self.worker.props)
        vconv = converter("value", self.cconfig, self.worker.props)
        hconv = header_converter(self.cconfig, self.worker.props)
        transforms = TransformChain.from_props(self.cconfig)
        producer = Producer({**self.worker.client_config(
            "producer", prefixed(self.cconfig, "producer.override.")),
            "enable.idempotence": "true", "acks": "all", "linger.ms": "5", "logger": KAFKA_LOG})
        # [record, acked] in poll order; acked when produced, dropped or skipped
        outstanding: collections.deque[list[Any]] = collections.deque()
        committable: dict[str, tuple[Mapping[str, Any], Mapping[str, Any]]] = {}
        failure: list[BaseException] = []
        seen_topics: set[str] = set()
        creator = TopicCreator(self.worker, self.cconfig)

        def delivered(entry: list[Any]) -> Callable[[Any, Any], None]:
            def cb(err: Any, msg: Any) -> None:
                if err is not None:
                    failure.append(KafkaException(err))
                    return
                entry[1] = True
                task.commit_record(entry[0], RecordMetadata(msg.topic(), msg.partition(),
                                                            msg.offset()))
            return cb

        last: list[Any] = [None, ""]  # the previous record's partition map and its key

        def flush_offsets() -> None:
            while outstanding and outstanding[0][1]:
                record: SourceRecord = outstanding.popleft()[0]
                partition = record.source_partition
                if partition:
                    if partition is not last[0]:  # most records share their task's map
                        last[0], last[1] = partition, repr(sorted(partition.items()))
                    committable[last[1]] = (partition, record.source_offset)
            if committable:
                self.offsets.put(self.connector, list(committable.values()))
                committable.clear()
                task.commit()

        task.start(self.config)
        self.state = RUNNING
        next_flush = time.monotonic() + self.worker.flush_interval_ms / 1000
        try:
            while True:
                if not self._running.is_set():  # paused: what was sent is committed first
                    producer.flush(STOP_TIMEOUT_S)
                    flush_offsets()
                if not self._wait_running():
                    break
                records = task.poll() or []
                for record in records:
                    entry: list[Any] = [record, False]
                    outstanding.append(entry)
                    try:
                        out = transforms.apply(record, partial(
                            handler.run, "TRANSFORMATION")) if transforms.stages else record
                        if out is None:
                            entry[1] = True
                            task.commit_record(record, None)
                            continue
                        topic = out.topic
                        key = handler.run("KEY_CONVERTER", type(kconv).__name__, partial(
                            kconv.from_connect_data, out.topic, out.key_schema, out.key))
                        value = handler.run("VALUE_CONVERTER", type(vconv).__name__, partial(
                            vconv.from_connect_data, out.topic, out.value_schema, out.value))
                        headers = handler.run("HEADER_CONVERTER", type(hconv).__name__,
                                              partial(_headers, hconv, out)
                                              ) if out.headers else []
                    except Skip:
                        entry[1] = True
                        continue
                    if topic not in seen_topics:
                        creator.ensure(topic)
                        seen_topics.add(topic)
                        self.on_topic(topic)
                    produce(producer, topic,
                            **record_kwargs(out, key, value, headers, delivered(entry)))
                producer.poll(0)
                if failure:
                    raise failure[0]
                if time.monotonic() >= next_flush:
                    flush_offsets()
                    next_flush = time.monotonic() + self.worker.flush_interval_ms / 1000
        finally:
            producer.flush(STOP_TIMEOUT_S)
            if not failure:
                flush_offsets()
            transforms.close()
        if failure:
            raise failure[0]


def _headers(conv: HeaderConverter, record: ConnectRecord
             ) -> list[tuple[str, bytes | None]]:
    return [(h.key, conv.from_connect_header(record.topic, h.key, h.schema, h.value))
            for h in record.headers]

