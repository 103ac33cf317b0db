"""The metadata journal on disk: the ``__cluster_metadata-0`` log.

Each committed group of metadata records is one RecordBatch v2 appended to the
log and fsynced before the change is applied or answered. Each record has a
null key and a value framed as KRaft frames it::

    frame version  unsigned varint  (1)
    api key        unsigned varint  (TopicRecord = 2, PartitionRecord = 3, ...)
    version        unsigned varint
    data           the record in that version (``odradek.wire.internal``)

Start-up reads the log from its start and replays every record. Today the
fsync runs on the event loop: metadata changes are rare (topic admin), and the
Raft quorum replaces this file when clusters arrive.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

from odradek.common.clock import Clock
from odradek.replication.partition import Origin, PartitionState
from odradek.wire.codec import decode_from
from odradek.wire.internal.record_table import METADATA_RECORDS
from odradek.wire.primitives import DecodeError, read_uvarint, write_uvarint
from odradek.wire.records import Record, build_batch, decode_batch
from odradek.wire.schema import Message

FRAME_VERSION = 1


class JournalWriteError(Exception):
    """A metadata change could not be written; nothing was applied."""


_record_classes: dict[int, type[Message]] = {}
"""The metadata record classes imported so far, by api key."""


def record_class(key: int) -> type[Message] | None:
    """The metadata record type ``key``, its module imported on first use (a
    replay imports the few types it meets, not all of ``wire/internal``)."""
    cls = _record_classes.get(key)
    if cls is None and key in METADATA_RECORDS:
        module, name = METADATA_RECORDS[key]
        cls = getattr(importlib.import_module(f"odradek.wire.internal.{module}"), name)
        _record_classes[key] = cls
    return cls


def encode_record(record: Message) -> bytes:
    version = record.VALID_VERSIONS[1]
    out = bytearray()
    write_uvarint(out, FRAME_VERSION)
    write_uvarint(out, record.API_KEY)
    write_uvarint(out, version)
    out += record.encode(version)
    return bytes(out)


def decode_record(value: bytes) -> Message:
    """The record a framed value holds (DecodeError when it is not one).

    The record's decoder is handed the value and the position after the
    frame (:func:`~odradek.wire.codec.decode_from`), without the slice of
    :meth:`Struct.decode` on every call: a restart at 100k partitions decodes
    ~200k records on each node (its snapshot, then the elections)."""
    if len(value) >= 3 and value[0] == FRAME_VERSION and value[1] < 0x80 and value[2] < 0x80:
        key, version, pos = value[1], value[2], 3  # one byte each: every record today
    else:
        frame, pos = read_uvarint(value, 0)
        if frame != FRAME_VERSION:
            raise DecodeError(f"unknown metadata frame version {frame}")
        key, pos = read_uvarint(value, pos)
        version, pos = read_uvarint(value, pos)
    cls = record_class(key)
    if cls is None:
        raise DecodeError(f"unknown metadata record type {key}")
    record, end = decode_from(cls, value, pos, version)
    if end != len(value):
        raise DecodeError(f"{len(value) - end} trailing bytes after {cls.__name__}")
    return record


class LogJournal:
    """Journal on the metadata partition (its log is owned by the LogManager, which
    closes it). Appends go through the partition layer like every other write."""

    def __init__(self, metadata: PartitionState, clock: Clock) -> None:
        self.clock = clock
        self.partition = metadata
        self.log = metadata.log

    def append(self, records: list[Any]) -> None:
        now = self.clock.now_ms()
        batch = build_batch(
            [Record(i, now, None, encode_record(r)) for i, r in enumerate(records)]
        )
        result = self.partition.append_as_leader(memoryview(batch), Origin.COORDINATOR)
        if result.error_code:
            raise JournalWriteError(f"metadata journal append failed: {result.error_message}")
        self.log.flush()

    def replay(self) -> Iterable[Any]:
        data = self.log.read_records(self.log.log_start_offset, 1 << 62)
        pos = 0
        while pos < len(data):
            header, records = decode_batch(data, pos)
            for r in records:
                if r.value is not None:
                    yield decode_record(r.value)
            pos += header.size

    def close(self) -> None:
        if not self.log.offline:
            self.log.flush()

    def end_offset(self) -> int:
        return self.log.log_end_offset
