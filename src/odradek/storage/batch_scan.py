"""One pass over a records field: every batch header read once, into a table.

A records field (a produce request's, or a follower's fetch) is RecordBatch v2
batches back to back; the 61-byte header layout is in :mod:`odradek.wire.batch`.
:func:`scan_client` and :func:`scan_replica` read each header with one
``struct`` unpack, check it, and return a :class:`BatchTable` that later stages
(offset assignment, producer state, KIP-890 verification, a follower's
segment-sized parts) read instead of the bytes.

The table::

    rows           one BatchRow per batch, in field order
    records        sum of the rows' records_count
    max_timestamp  largest maxTimestamp of the rows, -1 without rows
    batches        (pos, size, records_count, max_timestamp) per row: the shape of
                   odradek.storage.append.Checked.batches, so a table can stand
                   where a Checked is taken today

Invariants of a table returned by either scan (anything else raises):

* the rows tile the field: the first ``pos`` is 0, each row's ``pos + size`` is
  the next row's ``pos``, and the last row ends at ``len(view)`` (an empty field
  gives no rows);
* every row's ``size`` is at least 61 and its batch has magic 2 and a matching
  CRC-32C, so the row's fields are the batch's header as written;
* rows are never patched: a row describes the bytes as received (the offsets
  the log assigns and the LogAppendTime it stamps are applied elsewhere; see
  :meth:`BatchRow.header`'s ``base_offset``).

The verdicts are those of the checks this replaces, in the same order and with
the same messages: :func:`scan_client` is
:func:`odradek.storage.append.check_client_batches` (plus, with
``require_keys``, the partition layer's refusal of keyless records on compacted
topics), :func:`scan_replica` the ``check_batch`` loop of
:meth:`odradek.storage.log.Log.append_replicated`. The first failing batch
decides; the key rule runs only once every header has passed.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from crc32c import crc32c

from odradek.storage.config import LogConfig
from odradek.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
)
from odradek.wire.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    BATCH_HEADER_SIZE,
    CRC_START,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
)
from odradek.wire.primitives import DecodeError
from odradek.wire.records import DEFAULT_MAX_DECOMPRESSED_BYTES, decode_records

# The whole header in one unpack, fields in the order of odradek.wire.batch.
_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_FRAMING: Final = struct.Struct(">qi")  # baseOffset, batchLength: a short tail's claim
_MIN_RECORD_BYTES: Final = 7  # length, attributes, ts delta, offset delta, key, value, headers
_FAR: Final = 2**62
_MAGIC: Final = 2


class BatchRow(NamedTuple):
    """One batch of a scanned field: where it is and its header fields as written.
    ``size`` is the whole batch (batchLength + 12)."""

    pos: int
    size: int
    base_offset: int
    partition_leader_epoch: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def end(self) -> int:
        """Position just past the batch (the next row's ``pos``)."""
        return self.pos + self.size

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_TIMESTAMP_TYPE)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def is_stateful(self) -> bool:
        """Touches producer state: has a producer id, or is a control batch."""
        return self.producer_id >= 0 or bool(self.attributes & ATTR_CONTROL)

    def header(self, base_offset: int | None = None) -> BatchHeader:
        """The batch's header from the row's fields (no bytes read); equal to
        ``read_batch_header(view, self.pos)``. ``base_offset`` replaces the
        written one (the offset the log assigned)."""
        return BatchHeader(
            self.base_offset if base_offset is None else base_offset,
            self.size - LOG_OVERHEAD, self.partition_leader_epoch, _MAGIC, self.crc,
            self.attributes, self.last_offset_delta, self.base_timestamp,
            self.max_timestamp, self.producer_id, self.producer_epoch,
            self.base_sequence, self.records_count,
        )  # fmt: skip


_new_row: Final = tuple.__new__  # BatchRow(...) without the keyword-handling __new__


class BatchTable:
    """The rows of a scanned field and their totals; see the module docstring."""

    __slots__ = ("batches", "max_timestamp", "records", "rows")

    def __init__(self, rows: list[BatchRow], batches: list[tuple[int, int, int, int]],
                 records: int, max_timestamp: int) -> None:
        self.rows = rows
        # (pos, size, records_count, max_timestamp) per row, as Checked.batches. Built
        # during the scan (a 4-tuple per batch), not from the rows on demand: what
        # Log.append reads must cost no more than it does today.
        self.batches = batches
        self.records = records
        self.max_timestamp = max_timestamp

    def stateful_at(self) -> list[tuple[int, BatchRow]]:
        """Each stateful row with the number of records before it in the field: its
        first offset relative to the field's first (the log assigns offsets to a
        client's field in order, one per record)."""
        out: list[tuple[int, BatchRow]] = []
        rel = 0
        for r in self.rows:
            if r.is_stateful:
                out.append((rel, r))
            rel += r.records_count
        return out

    def __repr__(self) -> str:
        return (f"BatchTable({len(self.rows)} rows, records={self.records}, "
                f"max_timestamp={self.max_timestamp})")


# -- a produce request's field -----------------------------------------------------


def scan_client(
    view: memoryview, config: LogConfig, now_ms: int, *,
    allow_control: bool = False, require_keys: bool = False,
) -> BatchTable:
    """Check a produce request's records field and return its table. The checks
    and their order are :func:`odradek.storage.append.check_client_batches`'s:
    per batch, framing (a header's worth of bytes), ``max.message.bytes`` (only
    for a batch whose bytes are all there), framing (the length), magic, CRC,
    recordsCount/lastOffsetDelta, room for the records when uncompressed,
    control batches and producer ids without a sequence (both let through with
    ``allow_control``: a coordinator's markers and offset commits), CreateTime
    bounds (not for LogAppendTime topics: "after" on maxTimestamp, "before" on
    the first timestamp when it is not negative).

    ``require_keys`` (a client's field for a compacted topic): once every header
    has passed, the records are decoded and a record without a key refused;
    records that do not decode are refused too (both INVALID_RECORD).
    """
    rows: list[BatchRow] = []
    batches: list[tuple[int, int, int, int]] = []
    unpack = _HEADER.unpack_from
    records = 0
    max_ts = -1
    pos = 0
    end = len(view)
    limit = config.max_message_bytes
    create_time = not config.log_append_time
    newest = now_ms + min(config.message_timestamp_after_max_ms, _FAR)
    oldest = now_ms - min(config.message_timestamp_before_max_ms, _FAR)
    while pos < end:
        if end - pos < BATCH_HEADER_SIZE:
            raise CorruptRecordError(f"{end - pos} bytes at {pos} cannot hold a batch header")
        (base, length, epoch, magic, crc, attributes, delta, first_ts, batch_ts, producer_id,
         producer_epoch, sequence, count) = unpack(view, pos)  # fmt: skip
        size = length + LOG_OVERHEAD
        stop = pos + size
        if size > limit and stop <= end:
            raise RecordTooLargeError(f"batch of {size} bytes exceeds max.message.bytes {limit}")
        if length < MIN_BATCH_LENGTH or stop > end:
            raise CorruptRecordError(f"batch at {pos} claims {size} bytes, {end - pos} present")
        if magic != _MAGIC:
            raise CorruptRecordError(f"unsupported magic {magic}")
        if crc32c(view[pos + CRC_START : stop]) != crc:
            raise CorruptRecordError(f"CRC mismatch in the batch at {pos}")
        if count <= 0 or delta != count - 1:
            raise InvalidRecordError(
                f"inconsistent batch: lastOffsetDelta {delta}, recordsCount {count}"
            )
        if (
            not attributes & ATTR_COMPRESSION_MASK
            and count * _MIN_RECORD_BYTES > size - BATCH_HEADER_SIZE
        ):
            raise InvalidRecordError(f"{count} records cannot fit in {size} bytes")
        if attributes & ATTR_CONTROL:
            if not allow_control:
                raise InvalidRecordError("clients may not write control batches")
        elif producer_id >= 0 and sequence < 0 and not allow_control:
            raise InvalidRecordError(f"producer id {producer_id} with base sequence {sequence}")
        if create_time:
            if batch_ts > newest:
                raise InvalidTimestampError(
                    f"timestamp {batch_ts} is more than "
                    f"{config.message_timestamp_after_max_ms} ms after {now_ms}"
                )
            if 0 <= first_ts < oldest:
                raise InvalidTimestampError(
                    f"timestamp {first_ts} is more than "
                    f"{config.message_timestamp_before_max_ms} ms before {now_ms}"
                )
        rows.append(_new_row(BatchRow, (pos, size, base, epoch, crc, attributes, delta,
                                        first_ts, batch_ts, producer_id, producer_epoch,
                                        sequence, count)))
        batches.append((pos, size, count, batch_ts))
        records += count
        if batch_ts > max_ts:
            max_ts = batch_ts
        pos = stop
    if require_keys and rows:
        _require_keys(view, rows)
    return BatchTable(rows, batches, records, max_ts)


def _require_keys(view: memoryview, rows: list[BatchRow]) -> None:
    """Kafka's refusal of a record without a key on a compacted topic (Kafka's
    LogValidator decodes the records for compacted topics too). Every batch is
    decoded (from its row: no header read again) before any key is looked at, so
    a field whose second batch does not decode is refused as undecodable even if
    its first has a keyless record; the decompression limit is shared by all
    batches of the field."""
    budget = DEFAULT_MAX_DECOMPRESSED_BYTES
    decoded = []
    try:
        for row in rows:
            records, inflated = decode_records(view, row.pos, row.header(), budget)
            budget -= inflated
            decoded.append(records)
    except DecodeError as exc:
        raise InvalidRecordError(f"records do not decode: {exc}") from exc
    for records in decoded:
        for r in records:
            if r.key is None:
                raise InvalidRecordError("Compacted topic cannot accept message without key")


# -- a follower's field ------------------------------------------------------------


def scan_replica(view: memoryview) -> BatchTable:
    """Framing, magic and CRC of every batch of a replicated field (a follower's
    fetch, a Raft log's): the verdicts of ``check_batch`` (that is,
    :func:`odradek.wire.batch.validate_batch`) on each batch in turn, all
    CORRUPT_MESSAGE. Not ``max.message.bytes``: the leader took the batches. A
    truncated last batch fails the whole field, as every other bad batch does;
    nothing about offsets is checked here (the log checks that they rise)."""
    rows: list[BatchRow] = []
    batches: list[tuple[int, int, int, int]] = []
    unpack = _HEADER.unpack_from
    records = 0
    max_ts = -1
    pos = 0
    end = len(view)
    while pos < end:
        if end - pos < BATCH_HEADER_SIZE:
            _short_tail(view, pos)
        (base, length, epoch, magic, crc, attributes, delta, first_ts, batch_ts, producer_id,
         producer_epoch, sequence, count) = unpack(view, pos)  # fmt: skip
        if length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"batch length {length} below the minimum {MIN_BATCH_LENGTH}")
        size = length + LOG_OVERHEAD
        stop = pos + size
        if stop > end:
            raise CorruptRecordError(
                f"batch at offset {pos} claims {length} bytes beyond the input")
        if magic != _MAGIC:
            raise CorruptRecordError(f"unsupported magic {magic} (only 2 is accepted)")
        if delta < 0 or count < 0:
            raise CorruptRecordError("negative lastOffsetDelta or recordsCount")
        computed = crc32c(view[pos + CRC_START : stop])
        if computed != crc:
            raise CorruptRecordError(
                f"CRC mismatch: stored {crc:#010x}, computed {computed:#010x}")
        rows.append(_new_row(BatchRow, (pos, size, base, epoch, crc, attributes, delta,
                                        first_ts, batch_ts, producer_id, producer_epoch,
                                        sequence, count)))
        batches.append((pos, size, count, batch_ts))
        records += count
        if batch_ts > max_ts:
            max_ts = batch_ts
        pos = stop
    return BatchTable(rows, batches, records, max_ts)


def _short_tail(view: memoryview, pos: int) -> None:
    """Raise for fewer than 61 bytes at ``pos`` (validate_batch's verdicts: the
    framing first, then the claimed length; neither can pass)."""
    if pos + LOG_OVERHEAD > len(view):
        raise CorruptRecordError(f"short input reading batch framing at offset {pos}")
    _, length = _FRAMING.unpack_from(view, pos)
    if length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batch length {length} below the minimum {MIN_BATCH_LENGTH}")
    raise CorruptRecordError(f"batch at offset {pos} claims {length} bytes beyond the input")


def segment_parts(view: memoryview, table: BatchTable, segment_bytes: int
                  ) -> list[tuple[memoryview, list[BatchRow]]]:
    """A scanned replicated field (``table`` is ``scan_replica(view)``) cut at batch
    boundaries into parts a segment can take, each with its rows, as a follower
    appends a fetch larger than ``segment.bytes``: a field that fits is one
    part, itself; otherwise a batch starts a new part when it would take the
    current one past ``segment_bytes`` (a batch larger than that is a part of
    its own). Only checked rows are read (the partition's old cut read each
    header again, unchecked, and looped forever on a batch claiming
    batchLength -12)."""
    rows = table.rows
    if len(view) <= segment_bytes:
        return [(view, rows)]
    parts: list[tuple[memoryview, list[BatchRow]]] = []
    begin, taken = 0, 0
    for i, row in enumerate(rows):
        pos = row.pos
        if pos > begin and pos + row.size - begin > segment_bytes:
            parts.append((view[begin:pos], rows[taken:i]))
            begin, taken = pos, i
    parts.append((view[begin:], rows[taken:]))
    return parts
