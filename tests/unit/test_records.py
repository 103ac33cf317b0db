"""Tests for odradek.wire.records and odradek.wire.legacy.

Three kinds: Hypothesis round trips of our own builder and decoder; cross-checks
with kafka-python's independent record code in both directions; and bad input
(truncation, flips, lying lengths behind a valid CRC, decompression bombs).
kafka-python's snappy support needs python-snappy, which is not installed; the
tests give it a two-function shim over cramjam's raw snappy, so kafka-python's
own xerial framing code still runs.
"""

from __future__ import annotations

import struct
import types
import zlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import cramjam
import kafka.codec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from odradek.wire import compression as comp
from odradek.wire.batch import CorruptBatchError, compute_crc, encode_batch_header
from odradek.wire.legacy import decode_legacy_message_set
from odradek.wire.primitives import DecodeError, EncodeError, write_varint
from odradek.wire.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    Record,
    build_batch,
    control_record,
    control_record_type,
    decode_batch,
    decode_batches,
    detect_magic,
)

CODECS = [0, 1, 2, 3, 4]
MiB = 1024 * 1024
FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module", autouse=True)
def kafka_python_snappy() -> Iterator[None]:
    shim = types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(data)),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(data)),
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kafka.codec, "snappy", shim)
        yield


# -- strategies ----------------------------------------------------------------

maybe_bytes = st.none() | st.binary(max_size=40)
headers_st = st.lists(st.tuples(st.text(max_size=6), maybe_bytes), max_size=3).map(tuple)


@st.composite
def record_lists(draw: st.DrawFn, base_offset: int, with_attributes: bool = True) -> list[Record]:
    n = draw(st.integers(1, 10))
    gaps = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    first_ts = draw(st.integers(0, 2**42))
    offset = base_offset - 1
    records = []
    for gap in gaps:
        offset += gap
        records.append(
            Record(
                offset=offset,
                timestamp=first_ts + draw(st.integers(-(10**6), 10**6)),
                key=draw(maybe_bytes),
                value=draw(maybe_bytes),
                headers=draw(headers_st),
                attributes=draw(st.integers(-128, 127)) if with_attributes else 0,
            )
        )
    return records


batch_options = st.fixed_dictionaries(
    {
        "base_offset": st.integers(0, 2**50),
        "compression": st.sampled_from(CODECS),
        "producer_id": st.integers(-1, 2**63 - 1),
        "producer_epoch": st.integers(-1, 2**15 - 1),
        "base_sequence": st.integers(-1, 2**31 - 1),
        "transactional": st.booleans(),
        "control": st.booleans(),
        "partition_leader_epoch": st.integers(-1, 2**31 - 1),
        "log_append_time": st.booleans(),
    }
)


def expected(records: list[Record], log_append_time: bool) -> list[Record]:
    if not log_append_time:
        return records
    latest = max(r.timestamp for r in records)
    return [replace(r, timestamp=latest) for r in records]


# -- round trips -----------------------------------------------------------------


@FAST
@given(data=st.data(), options=batch_options)
def test_build_decode_round_trip(data: st.DataObject, options: dict[str, Any]) -> None:
    records = data.draw(record_lists(options["base_offset"]))
    batch = build_batch(records, **options)
    junk = data.draw(st.binary(max_size=5))
    header, out = decode_batch(junk + batch, len(junk))
    assert out == expected(records, options["log_append_time"])
    assert header.size == len(batch)
    assert header.base_offset == options["base_offset"]
    assert header.last_offset == records[-1].offset
    assert header.base_timestamp == records[0].timestamp
    assert header.max_timestamp == max(r.timestamp for r in records)
    assert header.records_count == len(records)
    assert header.compression == options["compression"]
    assert header.is_transactional == options["transactional"]
    assert header.is_control == options["control"]
    assert header.log_append_time == options["log_append_time"]
    for name in ("producer_id", "producer_epoch", "base_sequence", "partition_leader_epoch"):
        assert getattr(header, name) == options[name]


def _kafka_python_view(batch: bytes) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    theirs = DefaultRecordBatch(batch)
    assert theirs.validate_crc()
    fields = {
        "base_offset": theirs.base_offset,
        "compression": theirs.compression_type,
        "producer_id": theirs.producer_id,
        "producer_epoch": theirs.producer_epoch,
        "base_sequence": theirs.base_sequence,
        "transactional": theirs.is_transactional,
        "control": theirs.is_control_batch,
        "partition_leader_epoch": theirs.leader_epoch,
        "log_append_time": theirs.timestamp_type == 1,
    }
    rows = [(r.offset, r.timestamp, r.key, r.value, tuple(map(tuple, r.headers))) for r in theirs]
    return fields, rows


def _rows(records: list[Record]) -> list[tuple[Any, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


@FAST
@given(data=st.data(), options=batch_options)
def test_kafka_python_reads_our_batches(data: st.DataObject, options: dict[str, Any]) -> None:
    # kafka-python reads record attributes as a varint, so they stay 0 here, and
    # it parses every record of a control batch as a marker (covered separately).
    options = {**options, "control": False}
    records = data.draw(record_lists(options["base_offset"], with_attributes=False))
    fields, rows = _kafka_python_view(build_batch(records, **options))
    assert fields == options
    assert rows == _rows(expected(records, options["log_append_time"]))


def _kafka_python_batch(records: list[Record], codec: int, transactional: bool = False) -> bytes:
    builder = DefaultRecordBatchBuilder(2, codec, transactional, 42, 3, 17, batch_size=1 << 30)
    for r in records:
        builder.append(r.offset, r.timestamp, r.key, r.value, list(r.headers))
    return bytes(builder.build())


@FAST
@given(data=st.data(), codec=st.sampled_from(CODECS), transactional=st.booleans())
def test_we_read_kafka_python_batches(data: st.DataObject, codec: int, transactional: bool) -> None:
    records = data.draw(record_lists(0, with_attributes=False))
    header, out = decode_batch(_kafka_python_batch(records, codec, transactional))
    assert out == records
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 17)
    assert header.is_transactional == transactional


def sample_records(n: int = 30, base_offset: int = 0) -> list[Record]:
    return [
        Record(
            offset=base_offset + i,
            timestamp=1_700_000_000_000 + 7 * i,
            key=None if i % 4 == 0 else b"key-%d" % (i % 5),
            value=None if i % 7 == 3 else b"value " * (i % 9),
            headers=(("trace", b"abc"), ("empty", None)) if i % 3 == 0 else (),
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_each_codec_both_directions_with_kafka_python(codec: int) -> None:
    records = sample_records()
    theirs = _kafka_python_batch(records, codec)
    header, out = decode_batch(theirs)
    assert header.compression == codec  # the data compresses, so kafka-python kept the codec
    assert out == records
    ours = build_batch(records, compression=codec)
    assert _kafka_python_view(ours)[1] == _rows(records)
    assert len(list(MemoryRecords(ours + theirs))) == 2


def test_decode_batches_and_shared_budget() -> None:
    first = build_batch(sample_records(10), compression=comp.ZSTD)
    second = build_batch(sample_records(10, base_offset=10), compression=comp.GZIP)
    decoded = decode_batches(first + second)
    assert [len(records) for _, records in decoded] == [10, 10]
    assert decoded[1][1][0].offset == 10
    inflated = len(comp.decompress(4, first[61:], MiB)) + len(comp.decompress(1, second[61:], MiB))
    assert len(decode_batches(first + second, max_decompressed_bytes=inflated)) == 2
    with pytest.raises(DecodeError):
        decode_batches(first + second, max_decompressed_bytes=inflated - 1)


# -- control records ---------------------------------------------------------------


@pytest.mark.parametrize("kind", [CONTROL_ABORT, CONTROL_COMMIT])
def test_control_batch(kind: int) -> None:
    marker = control_record(kind, offset=7, timestamp=123, coordinator_epoch=5)
    batch = build_batch(
        [marker], base_offset=7, producer_id=9, producer_epoch=1, transactional=True, control=True
    )
    header, (record,) = decode_batch(batch)
    assert header.is_control and header.is_transactional
    assert control_record_type(record) == kind
    assert record.value == struct.pack(">hi", 0, 5)
    (theirs,) = list(DefaultRecordBatch(batch))
    assert theirs.type == kind


@pytest.mark.parametrize("key", [None, b"", b"\x00\x00\x00", b"\xff\xff\x00\x01"])
def test_control_record_type_rejects_bad_keys(key: bytes | None) -> None:
    with pytest.raises(DecodeError):
        control_record_type(Record(0, 0, key, None))


# -- builder checks ----------------------------------------------------------------


def test_builder_header_fields() -> None:
    records = [Record(5, 300, None, b"a"), Record(6, 100, None, b"b"), Record(9, 200, None, b"c")]
    header, out = decode_batch(build_batch(records, base_offset=5))
    assert (header.last_offset_delta, header.base_timestamp, header.max_timestamp) == (4, 300, 300)
    assert out == records


@pytest.mark.parametrize(
    ("records", "kwargs"),
    [
        ([], {}),
        ([Record(0, 0, None, None), Record(0, 0, None, None)], {}),
        ([Record(3, 0, None, None)], {"base_offset": 4}),
        ([Record(0, 0, None, None, attributes=128)], {}),
        ([Record(0, 0, None, None)], {"compression": 5}),
        ([Record(0, 0, None, None), Record(2**31, 0, None, None)], {}),
        ([Record(0, 0, None, None)], {"producer_epoch": 2**15}),
    ],
)
def test_builder_rejects(records: list[Record], kwargs: dict[str, Any]) -> None:
    with pytest.raises(EncodeError):
        build_batch(records, **kwargs)


def test_detect_magic() -> None:
    assert detect_magic(build_batch(sample_records(1))) == 2
    assert detect_magic(legacy_message(0, 0, None, b"x")) == 0
    assert detect_magic(b"\x00" * 20 + legacy_message(0, 1, None, b"x"), 20) == 1
    with pytest.raises(DecodeError):
        detect_magic(b"\x00" * 16)


# -- bad input: flips and cuts -----------------------------------------------------

SAMPLES = {codec: build_batch(sample_records(8), compression=codec) for codec in CODECS}


@pytest.mark.parametrize("codec", CODECS)
def test_every_truncation_raises(codec: int) -> None:
    batch = SAMPLES[codec]
    for cut in range(len(batch)):
        with pytest.raises(DecodeError):
            decode_batch(batch[:cut])


@FAST
@given(codec=st.sampled_from(CODECS), data=st.data(), mask=st.integers(1, 255))
def test_single_byte_flip(codec: int, data: st.DataObject, mask: int) -> None:
    batch = bytearray(SAMPLES[codec])
    at = data.draw(st.integers(0, len(batch) - 1))
    batch[at] ^= mask
    if at < 8 or 12 <= at < 16:  # baseOffset and partitionLeaderEpoch are outside the CRC
        header, records = decode_batch(batch)
        assert [r.offset - header.base_offset for r in records] == list(range(8))
    elif at < 16:  # batchLength: a shorter span fails the CRC, a longer one overruns
        with pytest.raises(DecodeError):
            decode_batch(batch)
    else:
        with pytest.raises(CorruptBatchError):
            decode_batch(batch)


def reseal(template: bytes, body: bytes, **fields: int) -> bytes:
    """A batch with ``template``'s header (``fields`` overriding), ``body`` and a valid CRC."""
    header = replace(decode_batch(template)[0], batch_length=49 + len(body), crc=0, **fields)
    raw = encode_batch_header(header) + body
    return encode_batch_header(replace(header, crc=compute_crc(raw, 0, len(raw)))) + body


def _mutate(body: bytes, edits: list[tuple[int, int, int]]) -> bytes:
    out = bytearray(body)
    for kind, where, value in edits:
        at = where % (len(out) + 1)
        if kind == 0 and at < len(out):
            out[at] ^= value or 1
        elif kind == 1:
            out.insert(at, value)
        elif kind == 2:
            del out[at : at + 1 + value % 4]
        else:
            del out[at:]
    return bytes(out)


edit = st.tuples(st.integers(0, 3), st.integers(0, 10**6), st.integers(0, 255))
edits_st = st.lists(edit, min_size=1, max_size=4)


@settings(max_examples=500, deadline=None)
@given(codec=st.sampled_from(CODECS), edits=edits_st)
def test_mutated_records_behind_a_valid_crc(codec: int, edits: list[tuple[int, int, int]]) -> None:
    """The record parser itself, not the CRC, must catch every inconsistency."""
    plain = build_batch(sample_records(8))
    body = _mutate(plain[61:], edits)
    batch = reseal(SAMPLES[codec], comp.compress(codec, body) if codec else body)
    try:
        header, records = decode_batch(batch)
    except DecodeError:
        return
    assert len(records) == header.records_count


def zz(value: int) -> bytes:
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def raw_record(
    *, length: int | None = None, delta: int = 0, key: bytes = zz(-1), tail: bytes = zz(-1) + zz(0)
) -> bytes:
    inner = b"\x00" + zz(0) + zz(delta) + key + tail
    return zz(len(inner) if length is None else length) + inner


GOOD = raw_record()
LIES = {
    "record longer than the batch": (raw_record(length=50), {}),
    "record shorter than its fields": (raw_record(length=5) + b"\x00", {}),
    "key overruns the record": (raw_record(key=zz(30) + b"abc"), {}),
    "key length -2": (raw_record(key=zz(-2)), {}),
    "header count huge": (raw_record(tail=zz(-1) + zz(2**31 - 1)), {}),
    "negative header count": (raw_record(tail=zz(-1) + zz(-1)), {}),
    "null header key": (raw_record(tail=zz(-1) + zz(1) + zz(-1) + zz(-1)), {}),
    "header key not UTF-8": (raw_record(tail=zz(-1) + zz(1) + zz(1) + b"\xff" + zz(-1)), {}),
    "count above records": (GOOD, {"records_count": 2}),
    "count below records": (GOOD + GOOD, {"records_count": 1, "last_offset_delta": 1}),
    "count absurd": (GOOD, {"records_count": 2**31 - 1}),
    "offset delta repeats": (GOOD + GOOD, {"records_count": 2, "last_offset_delta": 1}),
    "offset delta past lastOffsetDelta": (raw_record(delta=3), {}),
    "negative offset delta": (raw_record(delta=-1), {}),
    "overlong varint": (b"\x80" * 11, {}),
    "trailing byte": (GOOD + b"\x00", {}),
}


@pytest.mark.parametrize("codec", [0, comp.ZSTD])
@pytest.mark.parametrize("case", sorted(LIES))
def test_lying_fields_behind_a_valid_crc(case: str, codec: int) -> None:
    body, fields = LIES[case]
    fields = {"records_count": 1, "last_offset_delta": 0, **fields}
    template = SAMPLES[codec]
    batch = reseal(template, comp.compress(codec, body) if codec else body, **fields)
    with pytest.raises(DecodeError):
        decode_batch(batch)


@pytest.mark.parametrize("codec", [0, comp.ZSTD])
def test_hand_made_record_decodes(codec: int) -> None:
    """The control case for the lies above: the honest record passes."""
    body = comp.compress(codec, GOOD + GOOD[:3] + zz(1) + GOOD[4:]) if codec else GOOD
    batch = reseal(SAMPLES[codec], body, records_count=2 if codec else 1, last_offset_delta=1)
    _, records = decode_batch(batch)
    assert [r.offset for r in records] == ([0, 1] if codec else [0])
    assert records[0] == Record(0, records[0].timestamp, None, None)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompression_bomb_in_a_batch(codec: int) -> None:
    batch = build_batch([Record(0, 0, None, b"\x00" * (8 * MiB))], compression=codec)
    assert len(batch) < MiB
    with pytest.raises(DecodeError):
        decode_batch(batch, max_decompressed_bytes=MiB)


def test_corrupt_compressed_body() -> None:
    batch = reseal(SAMPLES[comp.GZIP], b"\x1f\x8b garbage")
    with pytest.raises(DecodeError):
        decode_batch(batch)


# -- legacy message sets -------------------------------------------------------------


def legacy_message(
    offset: int,
    magic: int,
    key: bytes | None,
    value: bytes | None,
    *,
    attributes: int = 0,
    timestamp: int = 0,
) -> bytes:
    body = bytes([magic, attributes]) + (struct.pack(">q", timestamp) if magic == 1 else b"")
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


LEGACY_CASES = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3)]


@pytest.mark.parametrize(("magic", "codec"), LEGACY_CASES)
def test_legacy_from_kafka_python(magic: int, codec: int) -> None:
    builder = LegacyRecordBatchBuilder(magic, codec, batch_size=1 << 30)
    for r in sample_records(12):
        builder.append(r.offset, r.timestamp, r.key, r.value)
    data = bytes(builder.build())
    mine = decode_legacy_message_set(data)
    theirs = [(r.offset, r.timestamp, r.key, r.value) for b in MemoryRecords(data) for r in b]
    assert [(r.offset, r.timestamp, r.key, r.value) for r in mine] == [
        (o, -1 if t is None else t, k, v) for o, t, k, v in theirs
    ]
    assert len(mine) == 12


def _inner(magic: int, n: int = 5) -> bytes:
    return b"".join(legacy_message(i, magic, None, b"m%d" % i, timestamp=10 + i) for i in range(n))


def test_legacy_v1_relative_offsets_and_log_append_time() -> None:
    wrapper = legacy_message(104, 1, None, comp.compress(comp.GZIP, _inner(1)), attributes=1)
    assert [r.offset for r in decode_legacy_message_set(wrapper)] == [100, 101, 102, 103, 104]
    appended = legacy_message(
        104, 1, None, comp.compress(comp.GZIP, _inner(1)), attributes=1 | 8, timestamp=999
    )
    records = decode_legacy_message_set(appended)
    assert {r.timestamp for r in records} == {999}
    assert all(r.attributes & 8 for r in records)


def test_legacy_v0_lz4_with_kafka3160_checksum() -> None:
    frame = bytearray(comp.compress(comp.LZ4, _inner(0)))
    frame[6] = (comp.xxh32_small(bytes(frame[0:6])) >> 8) & 0xFF
    records = decode_legacy_message_set(legacy_message(4, 0, None, bytes(frame), attributes=3))
    assert [(r.offset, r.value, r.timestamp) for r in records] == [
        (i, b"m%d" % i, -1) for i in range(5)
    ]


LEGACY_BAD = {
    "nested compression": legacy_message(
        0, 1, None, comp.compress(1, legacy_message(0, 1, None, b"x", attributes=1)), attributes=1
    ),
    "inner magic differs": legacy_message(0, 1, None, comp.compress(1, _inner(0)), attributes=1),
    "zstd in legacy": legacy_message(0, 1, None, comp.compress(4, _inner(1)), attributes=4),
    "null wrapper value": legacy_message(0, 1, None, None, attributes=1),
    "magic 2": legacy_message(0, 2, None, b"x"),
    "bomb": legacy_message(0, 1, None, comp.compress(1, b"\x00" * (8 * MiB)), attributes=1),
    "key overruns": legacy_message(0, 0, b"k", b"v")[:-6] + b"\x00\x00\x00\x09v",
}


@pytest.mark.parametrize("case", sorted(LEGACY_BAD))
def test_legacy_bad_input(case: str) -> None:
    with pytest.raises(DecodeError):
        decode_legacy_message_set(LEGACY_BAD[case], max_decompressed_bytes=MiB)


def test_legacy_truncation_and_partial_tail() -> None:
    entries = [legacy_message(i, 1, b"k", b"v" * i) for i in range(3)]
    entries.append(legacy_message(9, 1, None, comp.compress(2, _inner(1)), attributes=2))
    data = b"".join(entries)
    whole = decode_legacy_message_set(data)
    assert len(whole) == 8
    # A cut between entries leaves a valid, shorter set: the first i entries' messages.
    messages_before = {sum(map(len, entries[:i])): [0, 1, 2, 3, 8][i] for i in range(5)}
    for cut in range(len(data)):
        if cut in messages_before:
            assert decode_legacy_message_set(data[:cut]) == whole[: messages_before[cut]]
        else:
            with pytest.raises(DecodeError):
                decode_legacy_message_set(data[:cut])
        partial = decode_legacy_message_set(data[:cut], allow_partial_tail=True)
        assert partial == whole[: len(partial)]


@pytest.mark.parametrize(
    "entry",
    [
        legacy_message(3, 0, b"k", b"value"),
        legacy_message(3, 1, None, b"value", timestamp=5),
        legacy_message(4, 1, None, comp.compress(3, _inner(1)), attributes=3),
    ],
)
def test_legacy_flips_after_the_offset_are_caught(entry: bytes) -> None:
    for at in range(8, len(entry)):
        flipped = bytearray(entry)
        flipped[at] ^= 0x40
        with pytest.raises(DecodeError):
            decode_legacy_message_set(bytes(flipped))


@FAST
@given(data=st.data(), codec=st.sampled_from(CODECS))
def test_batch_keys_agrees_with_a_full_decode(data: st.DataObject, codec: int) -> None:
    from odradek.wire.records import batch_keys

    base = data.draw(st.integers(0, 2**40))
    records = data.draw(record_lists(base))
    batch = build_batch(records, base_offset=base, compression=codec)
    header, keys = batch_keys(batch)
    assert header == decode_batch(batch)[0]
    assert keys == [(r.offset, r.key, r.value is None) for r in records]


@FAST
@given(data=st.data(), codec=st.sampled_from(CODECS))
def test_keep_records_copies_the_chosen_records_unchanged(data: st.DataObject, codec: int) -> None:
    from odradek.wire.records import keep_records, scan_batch

    base = data.draw(st.integers(0, 2**40))
    records = data.draw(record_lists(base))
    batch = build_batch(records, base_offset=base, compression=codec, producer_id=7,
                        producer_epoch=2, base_sequence=5, partition_leader_epoch=3)
    header, section, spans = scan_batch(batch)
    chosen = data.draw(st.lists(st.sampled_from(range(len(spans))), min_size=1, unique=True))
    kept = [spans[i] for i in sorted(chosen)]
    rebuilt = keep_records(header, section, kept)
    new_header, new_records = decode_batch(rebuilt)
    assert new_records == [records[i] for i in sorted(chosen)]
    assert (new_header.base_offset, new_header.last_offset_delta, new_header.producer_id,
            new_header.base_sequence, new_header.max_timestamp, new_header.compression) == (
        header.base_offset, header.last_offset_delta, 7, 5, header.max_timestamp, codec)
    assert new_header.records_count == len(kept)
