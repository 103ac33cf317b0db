"""Errors the partition log raises, each carrying the Kafka error code it maps to.

The broker turns ``error.error_code`` into the partition-level error of a
Produce, Fetch, ListOffsets or DeleteRecords response; storage never builds
responses itself.
"""

from __future__ import annotations

from typing import ClassVar


class StorageError(Exception):
    """Base class. ``error_code`` is Kafka's numeric error code."""

    error_code: ClassVar[int] = -1  # UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(StorageError):
    """A read or DeleteRecords below the log start offset or beyond the end."""

    error_code = 1  # OFFSET_OUT_OF_RANGE


class CorruptRecordError(StorageError):
    """Bad framing, magic or CRC in produced (or replicated) bytes."""

    error_code = 2  # CORRUPT_MESSAGE


class RecordTooLargeError(StorageError):
    """One batch is larger than ``max.message.bytes``."""

    error_code = 10  # MESSAGE_TOO_LARGE


class RecordListTooLargeError(StorageError):
    """The records of one append are larger than ``segment.bytes``."""

    error_code = 18  # RECORD_LIST_TOO_LARGE


class InvalidTimestampError(StorageError):
    """A CreateTime batch outside ``message.timestamp.{before,after}.max.ms``."""

    error_code = 32  # INVALID_TIMESTAMP


class KafkaStorageError(StorageError):
    """An IO error: the log is offline until it is reopened (and recovered)."""

    error_code = 56  # KAFKA_STORAGE_ERROR


class InvalidRecordError(StorageError):
    """A batch that is well formed but breaks a rule Kafka's LogValidator checks:
    ``lastOffsetDelta != recordsCount - 1``, a control batch from a client, a
    producer id without a base sequence."""

    error_code = 87  # INVALID_RECORD


class CorruptIndexError(StorageError):
    """An index file fails its sanity checks; it is rebuilt from the log, never served."""
