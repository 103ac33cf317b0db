"""Offset and time indexes against sorted lists (floor lookups), and their files."""

from __future__ import annotations

import bisect
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.storage.errors import CorruptIndexError
from odradek.storage.index import OffsetIndex, TimeIndex

BASE = 1_000


@st.composite
def offset_entries(draw: st.DrawFn) -> list[tuple[int, int]]:
    gaps = draw(st.lists(st.tuples(st.integers(1, 50), st.integers(1, 5000)), max_size=60))
    out, offset, pos = [], BASE - 1, -1
    for d_off, d_pos in gaps:
        offset += d_off
        pos += d_pos
        out.append((offset, pos))
    return out


@given(offset_entries(), st.lists(st.integers(BASE - 5, BASE + 3000), max_size=40))
def test_offset_lookup_is_the_floor_entry(
    entries: list[tuple[int, int]], targets: list[int]
) -> None:
    index = OffsetIndex(BASE, 10 * 1024 * 1024)
    for offset, pos in entries:
        assert index.append(offset, pos)
    keys = [o for o, _ in entries]
    for target in targets + keys:
        i = bisect.bisect_right(keys, target) - 1
        assert index.lookup(target) == (entries[i] if i >= 0 else None)
    for _, pos in entries:
        assert index.floor_position(pos) is not None


@given(offset_entries(), st.integers(BASE - 5, BASE + 3000))
def test_offset_index_file_round_trip_and_truncation(
    entries: list[tuple[int, int]], cut: int
) -> None:
    index = OffsetIndex(BASE, 1 << 20)
    for offset, pos in entries:
        index.append(offset, pos)
    data = index.to_bytes()
    assert len(data) == 8 * len(entries)
    # Kafka's layout: int32 relative offset, int32 position, big-endian.
    assert [struct.unpack_from(">ii", data, 8 * i) for i in range(len(entries))] == [
        (o - BASE, p) for o, p in entries
    ]
    position, needs_cut, pending = index.pending_write()
    assert (position, needs_cut, pending) == (0, False, data)
    index.mark_written()
    index.truncate_to_offset(cut)
    kept = [e for e in entries if e[0] < cut]
    assert index.entries() == kept
    position, needs_cut, pending = index.pending_write()
    assert position == 8 * len(kept) and pending == b""
    assert needs_cut == (len(kept) < len(entries))
    loaded = OffsetIndex(BASE, 1 << 20)
    loaded.load(data, log_size=10**9)
    assert loaded.entries() == entries


def test_offset_index_refuses_bad_files() -> None:
    index = OffsetIndex(BASE, 1 << 20)
    with pytest.raises(CorruptIndexError):
        index.load(b"\x00" * 7, log_size=100)
    with pytest.raises(CorruptIndexError):  # not increasing
        index.load(struct.pack(">iiii", 5, 10, 5, 20), log_size=100)
    with pytest.raises(CorruptIndexError):  # points past the log
        index.load(struct.pack(">ii", 5, 100), log_size=100)
    with pytest.raises(CorruptIndexError):  # below the base offset
        index.load(struct.pack(">ii", -1, 0), log_size=100)


def test_offset_index_full_refuses_entries() -> None:
    index = OffsetIndex(BASE, 16)
    assert index.append(BASE, 0) and index.append(BASE + 1, 10)
    assert index.is_full
    assert not index.append(BASE + 2, 20)
    idx = OffsetIndex(BASE, 64)
    idx.append(BASE + 3, 5)
    with pytest.raises(ValueError):
        idx.append(BASE + 3, 9)


@given(st.lists(st.tuples(st.integers(-1, 10_000), st.integers(0, 3)), max_size=60))
def test_time_index_keeps_running_maximum(appends: list[tuple[int, int]]) -> None:
    """maybe_append keeps only strictly newer timestamps; lookup_before is the last
    entry strictly older than the target."""
    index = TimeIndex(BASE, 1 << 20)
    model: list[tuple[int, int]] = []
    offset = BASE
    for ts, step in appends:
        offset += step
        index.maybe_append(ts, offset)
        if ts > (model[-1][0] if model else -1):
            model.append((ts, offset))
    assert index.entries() == model
    stamps = [t for t, _ in model]
    for target in range(-2, 10_002, 97):
        i = bisect.bisect_left(stamps, target) - 1
        assert index.lookup_before(target) == (model[i] if i >= 0 else None)
    loaded = TimeIndex(BASE, 1 << 20)
    position, _, data = index.pending_write()
    assert position == 0
    loaded.load(data)
    assert loaded.entries() == model
    # Kafka's layout: int64 timestamp, int32 relative offset, big-endian.
    assert [struct.unpack_from(">qi", data, 12 * i) for i in range(len(model))] == [
        (t, o - BASE) for t, o in model
    ]


def test_time_index_is_full_one_early_and_takes_a_forced_final_entry() -> None:
    index = TimeIndex(BASE, 36)  # 3 entries
    index.maybe_append(10, BASE)
    index.maybe_append(20, BASE + 1)
    assert index.is_full
    index.maybe_append(30, BASE + 2)
    assert len(index) == 2
    index.maybe_append(30, BASE + 2, force=True)
    assert index.last() == (30, BASE + 2)
    index.maybe_append(40, BASE + 3, force=True)
    assert len(index) == 3


def test_time_index_refuses_bad_files() -> None:
    index = TimeIndex(BASE, 1 << 20)
    with pytest.raises(CorruptIndexError):
        index.load(b"\x00" * 13)
    with pytest.raises(CorruptIndexError):
        index.load(struct.pack(">qiqi", 20, 1, 10, 2))
    with pytest.raises(CorruptIndexError):
        index.load(struct.pack(">qiqi", 10, 3, 20, 2))
