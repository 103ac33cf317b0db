"""The primitive readers and writers of ``odradek.wire.primitives``.

Readers must return ``(value, end)`` for valid input at any offset and raise
``DecodeError`` (and nothing else) for every truncation, over-long varints,
negative lengths and invalid UTF-8. Writers and readers must round trip every
value of each type, the bounds included.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from odradek.wire import primitives as p
from odradek.wire.primitives import Buffer, DecodeError, EncodeError

Reader = Callable[[Buffer, int], tuple[Any, int]]
Writer = Callable[[bytearray, Any], None]

INT_BOUNDS: dict[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}
FIXED: dict[str, tuple[Reader, Writer]] = {
    "int8": (p.read_int8, p.write_int8),
    "int16": (p.read_int16, p.write_int16),
    "int32": (p.read_int32, p.write_int32),
    "int64": (p.read_int64, p.write_int64),
    "uint16": (p.read_uint16, p.write_uint16),
    "uint32": (p.read_uint32, p.write_uint32),
}


def _uvarint(buf: Buffer, offset: int) -> tuple[int, int]:
    return p.read_uvarint(buf, offset)


def _uvarlong(buf: Buffer, offset: int) -> tuple[int, int]:
    return p.read_uvarint(buf, offset, 10)


# (name, reader, writer, strategy of valid values); every reader of the module.
CODECS: list[tuple[str, Reader, Writer, st.SearchStrategy[Any]]] = [
    *((name, r, w, st.integers(*INT_BOUNDS[name])) for name, (r, w) in FIXED.items()),
    ("float64", p.read_float64, p.write_float64, st.floats(allow_nan=False)),
    ("bool", p.read_bool, p.write_bool, st.booleans()),
    ("uvarint", _uvarint, p.write_uvarint, st.integers(0, 2**32 - 1)),
    ("uvarlong", _uvarlong, p.write_uvarint, st.integers(0, 2**64 - 1)),
    ("varint", p.read_varint, p.write_varint, st.integers(-(2**31), 2**31 - 1)),
    ("varlong", p.read_varlong, p.write_varlong, st.integers(-(2**63), 2**63 - 1)),
    ("string", p.read_string, p.write_nullable_string, st.text(max_size=40)),
    ("nullable_string", p.read_nullable_string, p.write_nullable_string,
     st.none() | st.text(max_size=40)),
    ("compact_string", p.read_compact_string, p.write_compact_nullable_string,
     st.text(max_size=200)),
    ("compact_nullable_string", p.read_compact_nullable_string,
     p.write_compact_nullable_string, st.none() | st.text(max_size=200)),
    ("nullable_bytes", p.read_nullable_bytes, p.write_nullable_bytes,
     st.none() | st.binary(max_size=40)),
    ("compact_nullable_bytes", p.read_compact_nullable_bytes, p.write_compact_nullable_bytes,
     st.none() | st.binary(max_size=200)),
    ("uuid", p.read_uuid, p.write_uuid,
     st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))),
]
CODEC_IDS = [c[0] for c in CODECS]


def _as_python(value: Any) -> Any:
    return bytes(value) if isinstance(value, memoryview) else value


def _encode(writer: Writer, value: Any) -> bytes:
    out = bytearray()
    writer(out, value)
    return bytes(out)


# -- valid input ---------------------------------------------------------------


@pytest.mark.parametrize(("name", "reader", "writer", "values"), CODECS, ids=CODEC_IDS)
@given(data=st.data())
def test_round_trip_at_any_offset_and_buffer_type(
    name: str, reader: Reader, writer: Writer, values: st.SearchStrategy[Any], data: Any
) -> None:
    value = data.draw(values, label="value")
    prefix = data.draw(st.binary(max_size=5), label="prefix")
    suffix = data.draw(st.binary(max_size=5), label="suffix")
    wrap = data.draw(st.sampled_from([bytes, bytearray, memoryview]), label="buffer type")
    encoded = _encode(writer, value)
    decoded, end = reader(wrap(prefix + encoded + suffix), len(prefix))
    assert end == len(prefix) + len(encoded)
    assert _as_python(decoded) == value


@pytest.mark.parametrize(("name", "lo", "hi"), [(n, *b) for n, b in INT_BOUNDS.items()])
def test_fixed_width_bounds_and_big_endian(name: str, lo: int, hi: int) -> None:
    reader, writer = FIXED[name]
    for value in (lo, hi, 0, 1, lo + 1, hi - 1):
        encoded = _encode(writer, value)
        assert reader(encoded, 0) == (value, len(encoded))
    width = len(_encode(writer, 0))
    assert _encode(writer, 1) == b"\x00" * (width - 1) + b"\x01"
    top_bit = b"\x80" + b"\x00" * (width - 1)
    assert reader(b"\xff" * width, 0)[0] == (hi if lo == 0 else -1)
    assert reader(top_bit, 0)[0] == (2 ** (8 * width - 1) if lo == 0 else lo)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-2, b"\x03"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_varint_zigzag_vectors(value: int, encoded: bytes) -> None:
    assert _encode(p.write_varint, value) == encoded
    assert p.read_varint(encoded, 0) == (value, len(encoded))
    assert p.read_varlong(encoded, 0) == (value, len(encoded))
    assert p.size_of_varint(value) == len(encoded)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
        (-(2**63), b"\xff" * 9 + b"\x01"),
        (2**31, b"\x80\x80\x80\x80\x10"),
    ],
)
def test_varlong_extremes(value: int, encoded: bytes) -> None:
    assert _encode(p.write_varlong, value) == encoded
    assert p.read_varlong(encoded, 0) == (value, len(encoded))
    assert p.size_of_varint(value) == len(encoded)


@given(st.integers(-(2**63), 2**63 - 1))
@example(2**63 - 1)
@example(-(2**63))
@example(0)
def test_size_of_varint_matches_the_writer(value: int) -> None:
    assert p.size_of_varint(value) == len(_encode(p.write_varlong, value))


def test_uvarint_extremes() -> None:
    assert _encode(p.write_uvarint, 0) == b"\x00"
    assert _encode(p.write_uvarint, 127) == b"\x7f"
    assert _encode(p.write_uvarint, 128) == b"\x80\x01"
    assert _encode(p.write_uvarint, 2**32 - 1) == b"\xff\xff\xff\xff\x0f"
    assert p.read_uvarint(b"\xff\xff\xff\xff\x0f", 0) == (2**32 - 1, 5)
    assert p.read_uvarint(b"\xff" * 9 + b"\x01", 0, 10) == (2**64 - 1, 10)
    # A non-minimal encoding is still the same value, as in Kafka.
    assert p.read_uvarint(b"\x81\x80\x00", 0) == (1, 3)


def test_strings_and_bytes_layout() -> None:
    assert _encode(p.write_nullable_string, None) == b"\xff\xff"
    assert _encode(p.write_nullable_string, "hé") == b"\x00\x03h\xc3\xa9"
    assert _encode(p.write_compact_nullable_string, None) == b"\x00"
    assert _encode(p.write_compact_nullable_string, "") == b"\x01"
    assert _encode(p.write_nullable_bytes, None) == b"\xff\xff\xff\xff"
    assert _encode(p.write_compact_nullable_bytes, b"ab") == b"\x03ab"
    assert p.read_nullable_string(b"\xff\xff", 0) == (None, 2)
    assert p.read_compact_nullable_string(b"\x00", 0) == (None, 1)
    assert p.read_nullable_bytes(b"\xff\xff\xff\xff", 0) == (None, 4)
    assert p.read_compact_nullable_bytes(b"\x00", 0) == (None, 1)
    assert p.read_string(b"\x00\x00", 0) == ("", 2)


def test_bytes_readers_do_not_copy() -> None:
    buf = bytearray(b"\x00\x00\x00\x03abc\x04xyz")
    value, end = p.read_nullable_bytes(buf, 0)
    assert isinstance(value, memoryview) and value.obj is buf and end == 7
    compact, end = p.read_compact_nullable_bytes(buf, 7)
    assert isinstance(compact, memoryview) and compact.obj is buf and end == 11
    buf[4] = ord("A")
    assert bytes(value) == b"Abc"


def test_bool_reads_any_non_zero_as_true() -> None:
    assert p.read_bool(b"\x00\x01\x02\xff", 0) == (False, 1)
    assert [p.read_bool(b"\x00\x01\x02\xff", i)[0] for i in (1, 2, 3)] == [True] * 3


# -- truncation ------------------------------------------------------------------


@pytest.mark.parametrize(("name", "reader", "writer", "values"), CODECS, ids=CODEC_IDS)
@given(data=st.data())
def test_every_truncation_raises_decode_error(
    name: str, reader: Reader, writer: Writer, values: st.SearchStrategy[Any], data: Any
) -> None:
    value = data.draw(values, label="value")
    prefix = data.draw(st.binary(max_size=3), label="prefix")
    encoded = prefix + _encode(writer, value)
    for cut in range(len(prefix), len(encoded)):
        with pytest.raises(DecodeError):
            reader(encoded[:cut], len(prefix))
        with pytest.raises(DecodeError):
            reader(memoryview(encoded)[:cut], len(prefix))


@pytest.mark.parametrize(("name", "reader", "writer", "values"), CODECS, ids=CODEC_IDS)
def test_reading_past_the_end_raises_decode_error(
    name: str, reader: Reader, writer: Writer, values: st.SearchStrategy[Any]
) -> None:
    for buf in (b"", b"\x01", b"\x00" * 20):
        with pytest.raises(DecodeError):
            reader(buf, len(buf))
        with pytest.raises(DecodeError):
            reader(buf, len(buf) + 7)


@pytest.mark.parametrize(("name", "reader"), [(n, FIXED[n][0]) for n in FIXED])
def test_fixed_readers_reject_negative_offsets(name: str, reader: Reader) -> None:
    with pytest.raises(DecodeError):
        reader(b"\x00" * 16, -1)


# -- over-long varints -----------------------------------------------------------


@pytest.mark.parametrize(
    ("reader", "encoded"),
    [
        (_uvarint, b"\x80" * 5 + b"\x00"),  # six bytes
        (_uvarint, b"\xff" * 6),
        (_uvarint, b"\x80" * 40),
        (p.read_varint, b"\x80" * 5 + b"\x00"),
        (p.read_varint, b"\xff" * 5 + b"\x01"),
        (_uvarlong, b"\x80" * 10 + b"\x00"),  # eleven bytes
        (p.read_varlong, b"\x80" * 10 + b"\x00"),
        (p.read_varlong, b"\xff" * 64),
    ],
)
def test_varints_longer_than_their_width_raise(reader: Reader, encoded: bytes) -> None:
    with pytest.raises(DecodeError, match="longer than"):
        reader(encoded, 0)


@pytest.mark.parametrize(
    ("reader", "encoded"),
    [
        (p.read_varint, b"\xff\xff\xff\xff\x1f"),  # 2**33 - 1: five bytes, but 33 bits
        (p.read_varint, b"\x80\x80\x80\x80\x10"),  # 2**32
        (p.read_varlong, b"\xff" * 9 + b"\x03"),  # 2**65 - 1
        (p.read_varlong, b"\x80" * 9 + b"\x02"),  # 2**64
    ],
)
def test_varints_out_of_range_raise(reader: Reader, encoded: bytes) -> None:
    with pytest.raises(DecodeError, match="range"):
        reader(encoded, 0)


def test_varint_writers_reject_out_of_range_values() -> None:
    for writer, bad in [
        (p.write_varint, 2**31),
        (p.write_varint, -(2**31) - 1),
        (p.write_varlong, 2**63),
        (p.write_varlong, -(2**63) - 1),
        (p.write_uvarint, -1),
    ]:
        out = bytearray()
        with pytest.raises(EncodeError):
            writer(out, bad)


def test_string_writer_rejects_lengths_beyond_int16() -> None:
    p.write_nullable_string(bytearray(), "x" * 0x7FFF)
    with pytest.raises(EncodeError):
        p.write_nullable_string(bytearray(), "x" * 0x8000)


# -- negative and lying lengths --------------------------------------------------


@pytest.mark.parametrize(
    ("reader", "encoded"),
    [
        (p.read_string, struct.pack(">h", -1)),  # null where null is not allowed
        (p.read_string, struct.pack(">h", -2) + b"ab"),
        (p.read_string, struct.pack(">h", -32768) + b"ab"),
        (p.read_nullable_string, struct.pack(">h", -2) + b"ab"),
        (p.read_nullable_string, struct.pack(">h", -32768)),
        (p.read_nullable_bytes, struct.pack(">i", -2) + b"abcd"),
        (p.read_nullable_bytes, struct.pack(">i", -(2**31))),
        (p.read_compact_string, b"\x00"),  # compact null where null is not allowed
    ],
)
def test_negative_lengths_raise(reader: Reader, encoded: bytes) -> None:
    with pytest.raises(DecodeError):
        reader(encoded, 0)


@pytest.mark.parametrize(
    ("reader", "encoded"),
    [
        (p.read_string, struct.pack(">h", 0x7FFF) + b"a"),
        (p.read_nullable_bytes, struct.pack(">i", 2**31 - 1) + b"a"),
        (p.read_compact_nullable_bytes, b"\xff\xff\xff\xff\x0f" + b"a"),
        (p.read_compact_string, b"\xff\xff\xff\xff\x0f" + b"a"),
        (p.read_compact_nullable_string, b"\x05abc"),
    ],
)
def test_lengths_beyond_the_input_raise(reader: Reader, encoded: bytes) -> None:
    with pytest.raises(DecodeError, match="overruns"):
        reader(encoded, 0)


# -- UTF-8 ---------------------------------------------------------------------

INVALID_UTF8 = [
    b"\xff",
    b"\xc3",  # a lead byte with its continuation cut off
    b"a\x80b",  # a lone continuation byte
    b"\xc0\x80",  # overlong NUL
    b"\xed\xa0\x80",  # an encoded surrogate
    b"\xf4\x90\x80\x80",  # beyond U+10FFFF
]


@pytest.mark.parametrize("raw", INVALID_UTF8)
def test_invalid_utf8_raises_decode_error(raw: bytes) -> None:
    cases: list[tuple[Reader, bytes]] = [
        (p.read_string, struct.pack(">h", len(raw)) + raw),
        (p.read_nullable_string, struct.pack(">h", len(raw)) + raw),
        (p.read_compact_string, p.uvarint_bytes(len(raw) + 1) + raw),
        (p.read_compact_nullable_string, p.uvarint_bytes(len(raw) + 1) + raw),
    ]
    for reader, encoded in cases:
        with pytest.raises(DecodeError, match="UTF-8"):
            reader(encoded, 0)
        with pytest.raises(DecodeError, match="UTF-8"):
            reader(memoryview(bytearray(encoded)), 0)


# -- arbitrary input ---------------------------------------------------------------


@pytest.mark.parametrize(("name", "reader", "writer", "values"), CODECS, ids=CODEC_IDS)
@given(buf=st.binary(max_size=24), offset=st.integers(0, 30))
def test_arbitrary_bytes_decode_or_raise_decode_error(
    name: str,
    reader: Reader,
    writer: Writer,
    values: st.SearchStrategy[Any],
    buf: bytes,
    offset: int,
) -> None:
    try:
        _, end = reader(buf, offset)
    except DecodeError:
        return
    assert offset < end <= len(buf)
