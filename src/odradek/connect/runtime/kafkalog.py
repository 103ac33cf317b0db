"""A compacted topic read from the beginning and written to: Kafka's KafkaBasedLog.

Distributed workers keep their shared state in three such topics (configs,
source offsets, statuses; research note §3). A :class:`KafkaLog` owns one
consumer, assigned every partition of its topic from offset 0, and one
producer. A thread of its own polls the consumer and hands each record,
in offset order within a partition, to ``on_record(partition, offset, key,
value)``; a null value is a tombstone. The consumer lives on that thread
only: :meth:`read_to_end` asks the thread to note every partition's end
offset (the last stable offset when ``read_committed``) and waits until the
consumer's position has passed all of them, so that when it returns, every
record written before the call has been seen by ``on_record``.

Writes go through :meth:`send` (asynchronous, with an optional callback) and
:meth:`flush`. The producer is idempotent with ``acks=all`` and partitions
keys with murmur2, as Java clients do, so a key lands in the partition a Java
worker would choose. :func:`ensure_topic` creates the topic compacted if it is
absent and refuses one whose ``cleanup.policy`` is not exactly ``compact``
(what a Java worker does, so two runtimes can share a cluster).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
)

from odradek.connect.runtime.config import ClientConfig
from odradek.connect.runtime.producing import produce

log = logging.getLogger(__name__)

OnRecord = Callable[[int, int, bytes | None, bytes | None], None]
Delivered = Callable[[Exception | None], None]
POLL_S = 0.1
ADMIN_TIMEOUT_S = 30.0
LATEST = -1
"""ListOffsets' timestamp for a partition's end offset."""


class KafkaLogError(Exception):
    """The topic cannot be used (one line, for the worker's start-up error)."""


def ensure_topic(admin_config: ClientConfig, topic: str, *, partitions: int,
                 replication_factor: int, exactly_one_partition: bool = False) -> int:
    """Create ``topic`` compacted if absent; check it is usable. The partition count."""
    admin = AdminClient(dict(admin_config))
    meta = admin.list_topics(timeout=ADMIN_TIMEOUT_S)
    if topic not in meta.topics or meta.topics[topic].error is not None:
        new = NewTopic(topic, partitions, replication_factor,
                       config={"cleanup.policy": "compact"})
        try:
            admin.create_topics([new])[topic].result(ADMIN_TIMEOUT_S)
        except KafkaException as e:
            err = e.args[0]
            if err.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise KafkaLogError(f"cannot create topic {topic}: {err.str()}") from None
        meta = admin.list_topics(topic, timeout=ADMIN_TIMEOUT_S)
    count = len(meta.topics[topic].partitions)
    if exactly_one_partition and count != 1:
        raise KafkaLogError(f"topic {topic} has {count} partitions; it must have exactly 1")
    resource = ConfigResource("topic", topic)
    try:
        configs = admin.describe_configs([resource])[resource].result(ADMIN_TIMEOUT_S)
    except KafkaException as e:
        raise KafkaLogError(f"cannot describe topic {topic}: {e.args[0].str()}") from None
    policy = configs.get("cleanup.policy")
    if policy is not None and policy.value != "compact":
        raise KafkaLogError(f"topic {topic} has cleanup.policy={policy.value}; "
                            "Connect's internal topics must be compacted (compact only)")
    return count


class KafkaLog:
    """One internal topic, read by a thread of its own and written by anyone."""

    def __init__(self, topic: str, consumer_config: ClientConfig,
                 producer_config: ClientConfig | None, on_record: OnRecord, *,
                 read_committed: bool = False) -> None:
        self.topic = topic
        self.on_record = on_record
        self._consumer_config: dict[str, Any] = {
            **consumer_config, "group.id": f"odradek-connect-log-{topic}",
            "enable.auto.commit": False, "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed" if read_committed else "read_uncommitted"}
        self.producer: Producer | None = None
        if producer_config is not None:
            self.producer = Producer({**producer_config, "enable.idempotence": True,
                                      "acks": "all", "partitioner": "murmur2_random"})
        self._lock = threading.Condition()
        self._requests: list[threading.Event] = []
        self._error: Exception | None = None
        self._stopping = False
        self._thread: threading.Thread | None = None

    # -- reading --------------------------------------------------------------

    def start(self, timeout_s: float = ADMIN_TIMEOUT_S) -> None:
        """Start the reader and read the topic to its end."""
        self._thread = threading.Thread(target=self._run, name=f"kafkalog-{self.topic}",
                                        daemon=True)
        self._thread.start()
        self.read_to_end(timeout_s)

    def read_to_end(self, timeout_s: float = ADMIN_TIMEOUT_S) -> None:
        """Return once every record written before the call was handed to ``on_record``."""
        done = threading.Event()
        with self._lock:
            if self._error is not None:
                raise KafkaLogError(f"reading {self.topic}: {self._error}")
            self._requests.append(done)
        if not done.wait(timeout_s):
            raise KafkaLogError(f"reading {self.topic} to its end took over {timeout_s:.0f} s")
        with self._lock:
            if self._error is not None:
                raise KafkaLogError(f"reading {self.topic}: {self._error}")

    def _run(self) -> None:
        consumer = Consumer(self._consumer_config)
        # (end offsets, the waiters they answer) of requests in progress
        pending: list[tuple[dict[int, int], list[threading.Event]]] = []
        try:
            meta = consumer.list_topics(self.topic, timeout=ADMIN_TIMEOUT_S)
            parts = sorted(meta.topics[self.topic].partitions)
            tps = [TopicPartition(self.topic, p, 0) for p in parts]
            consumer.assign(tps)
            while not self._stopping:
                with self._lock:
                    waiters, self._requests = self._requests, []
                if waiters:
                    # one ListOffsets for every partition (timestamp -1: the end; the
                    # last stable offset when read_committed); a watermark query per
                    # partition costs a round trip each (seconds for 25 partitions)
                    latest = consumer.offsets_for_times(
                        [TopicPartition(self.topic, p, LATEST) for p in parts],
                        timeout=ADMIN_TIMEOUT_S)
                    ends = {tp.partition: tp.offset for tp in latest}
                    pending.append((ends, waiters))
                msg = consumer.poll(POLL_S if not pending else 0.01)
                if msg is not None:
                    err = msg.error()
                    if err is not None:
                        if err.code() != KafkaError._PARTITION_EOF:
                            log.warning("reading %s: %s", self.topic, err.str())
                        continue
                    self.on_record(msg.partition() or 0, msg.offset() or 0, msg.key(),
                                   msg.value())
                if pending:
                    pos = {tp.partition: tp.offset for tp in consumer.position(
                        [TopicPartition(self.topic, p) for p in parts])}
                    still = []
                    for ends, ws in pending:
                        if all(e <= 0 or pos.get(p, -1) >= e for p, e in ends.items()):
                            for w in ws:
                                w.set()
                        else:
                            still.append((ends, ws))
                    pending = still
        except Exception as e:  # the reader is dead: every waiter learns why
            log.exception("reading %s failed", self.topic)
            with self._lock:
                self._error = e
                for w in self._requests:
                    w.set()
            for _, ws in pending:
                for w in ws:
                    w.set()
        finally:
            consumer.close()

    # -- writing --------------------------------------------------------------

    def send(self, key: bytes | str, value: bytes | None,
             callback: Delivered | None = None) -> None:
        assert self.producer is not None, "a read-only log"

        def delivered(err: Any, _msg: Any) -> None:
            if callback is not None:
                callback(None if err is None else KafkaException(err))

        produce(self.producer, self.topic, key=key, value=value, on_delivery=delivered)
        self.producer.poll(0)

    def flush(self, timeout_s: float = ADMIN_TIMEOUT_S) -> None:
        """Wait for every send's acknowledgement; raises if some are left."""
        if self.producer is not None and self.producer.flush(timeout_s) > 0:
            raise KafkaLogError(f"writing {self.topic}: not acknowledged in {timeout_s:.0f} s")

    def write(self, key: bytes | str, value: bytes | None,
              timeout_s: float = ADMIN_TIMEOUT_S) -> None:
        """Send one record and wait for its acknowledgement; raises on failure."""
        errors: list[Exception] = []
        self.send(key, value, lambda e: errors.append(e) if e is not None else None)
        self.flush(timeout_s)
        if errors:
            raise KafkaLogError(f"writing {self.topic}: {errors[0]}")

    def stop(self) -> None:
        self._stopping = True
        if self._thread is not None:
            self._thread.join()
        if self.producer is not None:
            self.producer.flush(5.0)

