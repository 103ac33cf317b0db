"""Source offsets in a compacted topic (``offset.storage.topic``), as distributed workers keep them.

Record key: the JSON array ``["<connector>", {<source partition>}]`` (UTF-8,
no spaces, the partition's keys sorted); value: the JSON source offset map,
or null to forget the partition. Keys are partitioned with murmur2 as the
Java worker's producer does (25 partitions by default). This is the format
Kafka's ``KafkaOffsetBackingStore`` writes, so Java tooling reads it.

:class:`TopicOffsets` keeps what it has read in memory: the last value of each
key wins, tombstones remove it. :meth:`TopicOffsets.put` waits for the
acknowledgement of every record it writes, so an offset is on the brokers
(``acks=all``) before ``put`` returns, and in the memory view at once.
An exactly-once source task writes the same records through its own
transactional producer instead (:func:`offset_record`), in the transaction
that holds the data they cover; the store sees them when it reads them back
(read ``read_committed``, so aborted offsets are never seen).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from odradek.connect.runtime.config import ClientConfig
from odradek.connect.runtime.kafkalog import KafkaLog, ensure_topic

log = logging.getLogger(__name__)


def offset_key(connector: str, partition: Mapping[str, Any]) -> bytes:
    return json.dumps([connector, partition], sort_keys=True,
                      separators=(",", ":")).encode()


def offset_record(connector: str, partition: Mapping[str, Any],
                  offset: Mapping[str, Any] | None) -> tuple[bytes, bytes | None]:
    """(key, value) of one offset record; value None forgets the partition."""
    value = None if offset is None else json.dumps(dict(offset), separators=(",", ":")).encode()
    return offset_key(connector, partition), value


class TopicOffsets:
    """The offsets topic's content; thread-safe (tasks write, REST reads)."""

    def __init__(self, topic: str, consumer_config: ClientConfig,
                 producer_config: ClientConfig, *, partitions: int = 25,
                 replication_factor: int = 3, admin_config: ClientConfig | None = None) -> None:
        self.topic = topic
        self._data: dict[bytes, tuple[str, dict[str, Any], dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._admin_config = admin_config if admin_config is not None else consumer_config
        self._partitions = partitions
        self._replication_factor = replication_factor
        self.log = KafkaLog(topic, consumer_config, producer_config, self._apply,
                            read_committed=True)

    def start(self) -> None:
        ensure_topic(self._admin_config, self.topic, partitions=self._partitions,
                     replication_factor=self._replication_factor)
        self.log.start()

    def stop(self) -> None:
        self.log.stop()

    def _apply(self, _partition: int, _offset: int, key: bytes | None,
               value: bytes | None) -> None:
        if key is None:
            return
        try:
            connector, partition = json.loads(key)
            offset = None if value is None else json.loads(value)
            if not isinstance(connector, str) or not isinstance(partition, dict) or not (
                    offset is None or isinstance(offset, dict)):
                raise ValueError("not [connector, {partition}] -> {offset}")
        except (ValueError, TypeError) as e:
            log.warning("ignoring a malformed record in %s: %s", self.topic, e)
            return
        canonical = offset_key(connector, partition)
        with self._lock:
            if offset is None:
                self._data.pop(canonical, None)
            else:
                self._data[canonical] = (connector, partition, offset)

    # -- the OffsetFile interface ---------------------------------------------

    def get(self, connector: str, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        with self._lock:
            entry = self._data.get(offset_key(connector, partition))
            return dict(entry[2]) if entry is not None else None

    def of(self, connector: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        with self._lock:
            return [(dict(p), dict(o)) for c, p, o in self._data.values() if c == connector]

    def put(self, connector: str,
            offsets: Iterable[tuple[Mapping[str, Any], Mapping[str, Any] | None]]) -> None:
        """Write (partition, offset) pairs (offset None forgets) and wait for their acks."""
        records = [offset_record(connector, p, o) for p, o in offsets]
        if not records:
            return
        for key, value in records:
            self.log.send(key, value)
        self.log.flush()
        for key, value in records:
            self._apply(0, 0, key, value)

    def remove(self, connector: str) -> None:
        self.put(connector, [(p, None) for p, _ in self.of(connector)])

    def refresh(self) -> None:
        """Read what others wrote (e.g. a task's transactions) up to now."""
        self.log.read_to_end()
