"""Client traffic by topic: what Kafka's ``BrokerTopicMetrics`` meters count.

Per topic, three running totals, only ever added to: messages appended by
clients' produces (``MessagesInPerSec``: records of the batches appended,
duplicates of an idempotent producer's retries not counted), the bytes of
those batches (``BytesInPerSec``) and the record bytes answered to consumers'
fetches (``BytesOutPerSec``; followers' fetches are replication, not counted,
as in Kafka). The all-topics total is the sum, kept alongside so that it does
not fall when a topic is deleted. Plain integers on the hot path; the metrics
endpoint reads them when scraped.
"""

from __future__ import annotations


class TopicTraffic:
    """Running totals by topic (see the module)."""

    __slots__ = ("by_topic", "total")

    def __init__(self) -> None:
        self.by_topic: dict[str, list[int]] = {}
        """topic → [messages in, bytes in, bytes out]."""
        self.total: list[int] = [0, 0, 0]
        """[messages in, bytes in, bytes out] over all topics, deleted ones too."""

    def _row(self, topic: str) -> list[int]:
        row = self.by_topic.get(topic)
        if row is None:
            row = self.by_topic[topic] = [0, 0, 0]
        return row

    def produced(self, topic: str, messages: int, size: int) -> None:
        row = self._row(topic)
        row[0] += messages
        row[1] += size
        self.total[0] += messages
        self.total[1] += size

    def fetched(self, topic: str, size: int) -> None:
        self._row(topic)[2] += size
        self.total[2] += size

    def forget(self, topics: set[str]) -> None:
        """Drop the series of deleted topics (the all-topics totals keep them)."""
        for topic in topics:
            self.by_topic.pop(topic, None)
