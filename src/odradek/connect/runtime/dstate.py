"""The cluster's shared state as one worker sees it: the config and status topics.

:class:`ClusterState` owns two :class:`KafkaLog`s. The config topic's records
go through :class:`ConfigState` (the pure state machine); each event it
yields is queued for the herder (:meth:`events`) and wakes it
(``on_change``). The status topic's records go through :class:`StatusState`.
Both are read by their logs' threads and by REST threads, so every access
holds one lock. Writes wait for the brokers' acknowledgement and then for
this worker to have read them back, so a write is visible in this worker's
view when the call returns.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from odradek.connect.distributed.configstate import ConfigSnapshot, ConfigState, Event
from odradek.connect.distributed.protocol import ConnectorTaskId
from odradek.connect.distributed.statusrecords import (
    Status,
    StatusState,
    TopicStatus,
    connector_status_key,
    encode_status,
    encode_topic_status,
    task_status_key,
    topic_status_key,
)
from odradek.connect.runtime.dconfig import DistributedConfig
from odradek.connect.runtime.kafkalog import KafkaLog, ensure_topic

log = logging.getLogger(__name__)
QUIET = 3
"""librdkafka's log level for the internal topics' clients: errors only (no info
lines such as a closing producer's on stderr)."""


class ClusterState:
    def __init__(self, config: DistributedConfig, on_change: Callable[[], None]) -> None:
        self.config = config
        w = config.worker
        self._lock = threading.Lock()
        self._configs = ConfigState()
        self._statuses = StatusState()
        self._events: list[Event] = []
        self._on_change = on_change
        consumer = {**w.client_config("consumer"), "log_level": QUIET}
        producer = {**w.client_config("producer"), "log_level": QUIET}
        self.config_log = KafkaLog(config.config_topic, consumer, producer, self._on_config)
        self.status_log = KafkaLog(config.status_topic, consumer, producer, self._on_status)

    def ensure_topics(self) -> None:
        """Create or check the config and status topics (KafkaLogError, one line)."""
        admin = {**self.config.worker.client_config("consumer"), "log_level": QUIET}
        ensure_topic(admin, self.config.config_topic, partitions=1,
                     replication_factor=self.config.config_rf, exactly_one_partition=True)
        ensure_topic(admin, self.config.status_topic,
                     partitions=self.config.status_partitions,
                     replication_factor=self.config.status_rf)

    def start(self) -> None:
        self.config_log.start()
        self.status_log.start()

    def stop(self) -> None:
        self.config_log.stop()
        self.status_log.stop()

    # -- the config topic -------------------------------------------------------

    def _on_config(self, _partition: int, offset: int, key: bytes | None,
                   value: bytes | None) -> None:
        if key is None:
            return
        with self._lock:
            event = self._configs.apply(offset, key.decode("utf-8", "replace"), value)
            if event is not None:
                self._events.append(event)
        if event is not None:
            self._on_change()

    def snapshot(self) -> ConfigSnapshot:
        with self._lock:
            return self._configs.snapshot()

    def events(self) -> list[Event]:
        """The config events read since the last call, in order."""
        with self._lock:
            out, self._events = self._events, []
            return out

    def write_configs(self, records: list[tuple[str, bytes | None]]) -> None:
        """Write config records in order, then read the topic to its end."""
        for key, value in records:
            self.config_log.send(key, value)
        self.config_log.flush()
        self.config_log.read_to_end()

    # -- the status topic -------------------------------------------------------

    def _on_status(self, _partition: int, _offset: int, key: bytes | None,
                   value: bytes | None) -> None:
        if key is not None:
            with self._lock:
                self._statuses.apply(key.decode("utf-8", "replace"), value)

    def put_status(self, connector: str, task: int | None, status: Status) -> None:
        """Write one status (task None: the connector's); no wait for the ack."""
        key = (connector_status_key(connector) if task is None
               else task_status_key(ConnectorTaskId(connector, task)))
        value = encode_status(status)
        with self._lock:
            self._statuses.apply(key, value)
        self.status_log.send(key, value)

    def put_safe(self, connector: str, task: int | None, status: Status) -> None:
        """Write ``status`` unless another worker wrote one in a newer generation
        (it runs the work now), or the connector is gone (Kafka's putSafe)."""
        ident = connector if task is None else ConnectorTaskId(connector, task)
        with self._lock:
            gone = connector not in self._configs.snapshot().connectors
            if gone or not self._statuses.can_write_safely(ident, status):
                return
        self.put_status(connector, task, status)

    def put_topic(self, status: TopicStatus) -> None:
        key = topic_status_key(status.topic, status.connector)
        value = encode_topic_status(status)
        with self._lock:
            self._statuses.apply(key, value)
        self.status_log.send(key, value)

    def forget_statuses(self, connector: str, tasks: int) -> None:
        """Tombstones for a deleted connector's statuses."""
        keys = [connector_status_key(connector)] + [
            task_status_key(ConnectorTaskId(connector, n)) for n in range(tasks)]
        for key in keys:
            with self._lock:
                self._statuses.apply(key, None)
            self.status_log.send(key, None)

    def connector_status(self, name: str) -> Status | None:
        with self._lock:
            return self._statuses.connector(name)

    def task_statuses(self, name: str) -> dict[int, Status]:
        with self._lock:
            return self._statuses.tasks(name)

    def topics(self, name: str) -> list[str]:
        with self._lock:
            return self._statuses.topics(name)

    def forget_topics(self, name: str) -> None:
        """Tombstones for the topics a connector was seen using (KIP-558's reset)."""
        for topic in self.topics(name):
            key = topic_status_key(topic, name)
            with self._lock:
                self._statuses.apply(key, None)
            self.status_log.send(key, None)
