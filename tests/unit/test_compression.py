"""Tests for odradek.wire.compression: round trips, foreign framings, bombs, garbage."""

from __future__ import annotations

import contextlib
import gzip
import struct
import tracemalloc

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.wire import compression as c
from odradek.wire.primitives import DecodeError, EncodeError

CODECS = [c.NONE, c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD]
COMPRESSED = [c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD]
MiB = 1024 * 1024

FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

payloads = st.one_of(
    st.binary(max_size=2048),
    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=64), st.integers(1, 2000)),
)


@FAST
@given(codec=st.sampled_from(CODECS), data=payloads)
def test_round_trip(codec: int, data: bytes) -> None:
    packed = c.compress(codec, data)
    assert c.decompress(codec, packed, len(data)) == data
    assert c.decompress(codec, memoryview(bytearray(packed)), len(data) + 10) == data
    if data:
        with pytest.raises(DecodeError):
            c.decompress(codec, packed, len(data) - 1)


@pytest.mark.parametrize(("codec", "level"), [(c.GZIP, 1), (c.GZIP, 9), (c.LZ4, 9), (c.ZSTD, 19)])
def test_levels(codec: int, level: int) -> None:
    data = b"odradek " * 5000
    assert c.decompress(codec, c.compress(codec, data, level), len(data)) == data


def test_unknown_codec() -> None:
    for codec in (5, 6, 7, -1):
        with pytest.raises(DecodeError):
            c.decompress(codec, b"abc", 100)
    with pytest.raises(EncodeError):
        c.compress(5, b"abc")


@FAST
@given(codec=st.sampled_from(COMPRESSED), junk=st.binary(max_size=300))
def test_garbage_raises_decode_error_only(codec: int, junk: bytes) -> None:
    with contextlib.suppress(DecodeError):
        c.decompress(codec, junk, 1 << 20)


@pytest.mark.parametrize("codec", [c.GZIP, c.LZ4, c.ZSTD])
def test_every_truncation_is_an_error(codec: int) -> None:
    data = bytes(range(256)) * 300
    packed = c.compress(codec, data)
    for cut in range(len(packed)):
        with pytest.raises(DecodeError):
            c.decompress(codec, packed[:cut], len(data))


def test_snappy_truncation_is_an_error_or_a_prefix() -> None:
    # xerial framing has no end marker: a cut at a block boundary is a valid shorter stream.
    data = bytes(range(256)) * 300
    packed = c.compress(c.SNAPPY, data)
    for cut in range(len(packed)):
        try:
            out = c.decompress(c.SNAPPY, packed[:cut], len(data))
        except DecodeError:
            continue
        assert data.startswith(out)


# -- snappy framings ---------------------------------------------------------


def test_snappy_writes_xerial_blocks_of_32k() -> None:
    data = bytes(range(256)) * 1000  # 256000 bytes -> 8 blocks
    packed = c.compress(c.SNAPPY, data)
    assert packed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, 0
    while pos < len(packed):
        (length,) = struct.unpack_from(">i", packed, pos)
        assert len(bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + length]))) <= (
            32 * 1024
        )
        pos += 4 + length
        blocks += 1
    assert blocks == 8


def test_snappy_reads_raw_blocks_as_librdkafka_writes() -> None:
    data = b"librdkafka " * 3000
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert c.decompress(c.SNAPPY, raw, len(data)) == data


def test_snappy_ignores_xerial_version_fields() -> None:
    data = b"redpanda " * 100
    framed = bytearray(c.compress(c.SNAPPY, data))
    framed[8:16] = struct.pack("<ii", 1, 1)  # little-endian, as some writers do
    assert c.decompress(c.SNAPPY, bytes(framed), len(data)) == data


@pytest.mark.parametrize("length", [-1, 1 << 30, 1000])
def test_snappy_xerial_block_length_lies(length: int) -> None:
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", length) + b"\x05abc"
    with pytest.raises(DecodeError):
        c.decompress(c.SNAPPY, framed, 1 << 20)


def test_snappy_declared_length_checked_before_decompressing() -> None:
    # Raw snappy claiming 2 GiB of output in a few bytes.
    lie = bytes([0x80, 0x80, 0x80, 0x80, 0x08]) + b"\x00" * 8
    with pytest.raises(DecodeError, match="budget"):
        c.decompress(c.SNAPPY, lie, MiB)


# -- lz4 ---------------------------------------------------------------------


@pytest.mark.parametrize("store_size", [False, True])
@pytest.mark.parametrize("block_size", [lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX4MB])
def test_xxh32_matches_lz4_header_checksum(store_size: bool, block_size: int) -> None:
    frame = lz4.frame.compress(b"abc" * 100, store_size=store_size, block_size=block_size)
    end = 6 + (8 if store_size else 0)
    assert frame[end] == (c.xxh32_small(frame[4:end]) >> 8) & 0xFF


def test_xxh32_known_values() -> None:
    # Reference values of xxHash32 with seed 0.
    assert c.xxh32_small(b"") == 0x02CC5D05
    assert c.xxh32_small(b"a") == 0x550D7456
    assert c.xxh32_small(b"abc") == 0x32D153FF


def _kafka3160(frame: bytes) -> bytes:
    """Re-create old Kafka's header checksum: xxh32 taken over magic + descriptor."""
    broken = bytearray(frame)
    broken[6] = (c.xxh32_small(frame[0:6]) >> 8) & 0xFF
    return bytes(broken)


def test_lz4_legacy_header_checksum_repair() -> None:
    data = b"kafka 0.8 " * 200
    frame = c.compress(c.LZ4, data)
    broken = _kafka3160(frame)
    assert broken != frame
    with pytest.raises(DecodeError):
        c.decompress(c.LZ4, broken, len(data))
    assert c.decompress(c.LZ4, broken, len(data), lz4_fix_header_checksum=True) == data
    assert c.decompress(c.LZ4, frame, len(data), lz4_fix_header_checksum=True) == data


def test_lz4_concatenated_frames() -> None:
    assert c.decompress(c.LZ4, c.compress(c.LZ4, b"ab") + c.compress(c.LZ4, b"cd"), 4) == b"abcd"


# -- gzip / zstd -----------------------------------------------------------------


def test_gzip_reads_multiple_members_and_stdlib_output() -> None:
    blob = gzip.compress(b"first ") + gzip.compress(b"second")
    assert c.decompress(c.GZIP, blob, 100) == b"first second"


def test_gzip_refuses_zlib_container() -> None:
    import zlib

    with pytest.raises(DecodeError):
        c.decompress(c.GZIP, zlib.compress(b"not gzip"), 100)


def test_zstd_concatenated_frames_and_unknown_size() -> None:
    streaming = zstandard.ZstdCompressor(write_content_size=False)
    blob = streaming.compress(b"abc" * 10) + zstandard.ZstdCompressor().compress(b"xyz")
    assert c.decompress(c.ZSTD, blob, 33) == b"abc" * 10 + b"xyz"


def test_zstd_refuses_a_huge_window() -> None:
    frame = bytearray(zstandard.ZstdCompressor(write_content_size=False).compress(b"x" * 100))
    assert not frame[4] & 0x20  # not single segment: a window descriptor follows
    frame[5] = (30 - 10) << 3  # claim a 1 GiB window
    with pytest.raises(DecodeError):
        c.decompress(c.ZSTD, bytes(frame), MiB)


def test_zstd_declared_size_over_budget_is_refused_early() -> None:
    frame = zstandard.ZstdCompressor().compress(b"\x00" * (2 * MiB))
    with pytest.raises(DecodeError, match="limit"):
        c.decompress(c.ZSTD, frame, MiB)


# -- bombs ---------------------------------------------------------------------


def _bomb(codec: int, size: int) -> bytes:
    zeros = b"\x00" * size
    if codec == c.ZSTD:  # hide the size so the streaming limit, not the header check, trips
        return zstandard.ZstdCompressor(write_content_size=False).compress(zeros)
    if codec == c.SNAPPY:
        return c.compress(codec, zeros)
    return c.compress(codec, zeros, 9 if codec == c.GZIP else None)


@pytest.fixture(scope="module")
def bombs() -> dict[int, bytes]:
    return {codec: _bomb(codec, 64 * MiB) for codec in COMPRESSED}


@pytest.mark.parametrize("codec", COMPRESSED)
def test_decompression_bomb_stops_at_the_limit(codec: int, bombs: dict[int, bytes]) -> None:
    bomb = bombs[codec]
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError, match=r"limit|budget"):
            c.decompress(codec, bomb, MiB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Output kept is at most the limit plus one step; allow for copies of it.
    assert peak < 4 * MiB, f"peak {peak} bytes while refusing a {len(bomb)}-byte bomb"
