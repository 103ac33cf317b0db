"""Raft entries as record batches (odradek/raft/codec.py): the short path that
reads an entry's values without building records agrees with the general
decoder on every batch, and refuses what the general decoder refuses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.raft import codec
from odradek.raft.log import Entry
from odradek.wire.primitives import DecodeError
from odradek.wire.records import Record, build_batch

_VALUES = st.lists(st.binary(max_size=300), min_size=1, max_size=20)


@given(values=_VALUES, offset=st.integers(0, 2**40), epoch=st.integers(0, 2**31 - 1),
       timestamp=st.integers(0, 2**45))
def test_an_entry_comes_back_as_written(values: list[bytes], offset: int, epoch: int,
                                        timestamp: int) -> None:
    entry = Entry(offset, epoch, tuple(values))
    data = codec.encode_entry(entry, timestamp)
    assert codec.decode_entry(data, 0) == (entry, len(data))
    assert codec._decode_entry(data, 0) == (entry, len(data))  # the general path agrees


@given(values=_VALUES, keyed=st.integers(0, 19), headed=st.integers(0, 19))
def test_records_of_another_shape_take_the_general_path(values: list[bytes], keyed: int,
                                                         headed: int) -> None:
    """A key (which a data entry ignores) or headers: the same entry as the
    general decoder makes of it."""
    records = [Record(100 + i, 0, b"k" if i == keyed else None, v,
                      headers=(("h", b"x"),) if i == headed else ())
               for i, v in enumerate(values)]
    data = build_batch(records, base_offset=100, partition_leader_epoch=3)
    assert codec.decode_entry(data, 0) == codec._decode_entry(data, 0)


def test_a_null_value_or_a_gap_is_not_an_entry() -> None:
    null = build_batch([Record(0, 0, None, b"a"), Record(1, 0, None, None)], base_offset=0)
    gap = build_batch([Record(0, 0, None, b"a"), Record(2, 0, None, b"b")], base_offset=0)
    for data in (null, gap):
        with pytest.raises(DecodeError):
            codec.decode_entry(data, 0)


@given(values=_VALUES, cut=st.integers(1, 60), flip=st.integers(0, 10_000))
def test_a_damaged_batch_is_refused(values: list[bytes], cut: int, flip: int) -> None:
    data = codec.encode_entry(Entry(5, 1, tuple(values)))
    with pytest.raises(DecodeError):
        codec.decode_entry(data[:-cut], 0)
    damaged = bytearray(data)
    damaged[21 + flip % (len(data) - 21)] ^= 0x40  # after the CRC field: the CRC catches it
    with pytest.raises(DecodeError):
        codec.decode_entry(bytes(damaged), 0)
