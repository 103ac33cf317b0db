"""Fake task contexts for driving the PostgreSQL tasks directly, as a worker would."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from odradek.connect.api import (
    OffsetStorageReader,
    SinkTaskContext,
    SourceTaskContext,
    TopicPartition,
)


class FakeSinkContext(SinkTaskContext):
    def __init__(self, assignment: set[TopicPartition]) -> None:
        self.configs: Mapping[str, str] = {}
        self._assignment = assignment
        self.resets: dict[TopicPartition, int] = {}

    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        self.resets.update(offsets)

    def assignment(self) -> set[TopicPartition]:
        return self._assignment

    def pause(self, *partitions: TopicPartition) -> None:
        pass

    def resume(self, *partitions: TopicPartition) -> None:
        pass

    def request_commit(self) -> None:
        pass


class MemoryOffsets(OffsetStorageReader):
    """Committed source offsets, by source partition (as JSON-able maps)."""

    def __init__(self) -> None:
        self.offsets: dict[str, Mapping[str, Any]] = {}

    @staticmethod
    def _k(partition: Mapping[str, Any]) -> str:
        return repr(sorted(partition.items()))

    def commit(self, partition: Mapping[str, Any], offset: Mapping[str, Any]) -> None:
        self.offsets[self._k(partition)] = dict(offset)

    def offset(self, partition: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return self.offsets.get(self._k(partition))


class FakeSourceContext(SourceTaskContext):
    def __init__(self, reader: MemoryOffsets) -> None:
        self.configs: Mapping[str, str] = {}
        self._reader = reader

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        return self._reader
