"""Sequence and epoch checks of idempotent producers, against a simple model."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.replication.producer_state import (
    MAX_REMEMBERED,
    MAX_SEQUENCE,
    ProducerStateTable,
    Verdict,
    in_sequence,
)
from odradek.wire.batch import BatchHeader


def header(pid: int, epoch: int, seq: int, count: int, base_offset: int = 0) -> BatchHeader:
    return BatchHeader(
        base_offset=base_offset, batch_length=49, partition_leader_epoch=0, magic=2, crc=0,
        attributes=0, last_offset_delta=count - 1, base_timestamp=0, max_timestamp=0,
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, records_count=count,
    )


def append(table: ProducerStateTable, h: BatchHeader, offset: int) -> None:
    assert table.check(h).verdict is Verdict.APPEND
    table.record(header(h.producer_id, h.producer_epoch, h.base_sequence, h.records_count, offset))


def test_in_order_batches_append_and_a_retry_is_a_duplicate_with_original_offsets() -> None:
    t = ProducerStateTable()
    append(t, header(7, 0, 0, 3), 100)
    append(t, header(7, 0, 3, 2), 103)
    check = t.check(header(7, 0, 0, 3))
    assert check.verdict is Verdict.DUPLICATE
    assert check.duplicate_of is not None
    assert (check.duplicate_of.first_offset, check.duplicate_of.last_offset) == (100, 102)


def test_gap_is_out_of_order_and_old_epoch_is_fenced() -> None:
    t = ProducerStateTable()
    append(t, header(7, 1, 0, 1), 0)
    assert t.check(header(7, 1, 5, 1)).verdict is Verdict.OUT_OF_ORDER
    assert t.check(header(7, 0, 1, 1)).verdict is Verdict.INVALID_EPOCH
    assert t.check(header(7, 2, 3, 1)).verdict is Verdict.OUT_OF_ORDER  # new epoch must start at 0
    assert t.check(header(7, 2, 0, 1)).verdict is Verdict.APPEND


def test_only_the_last_five_batches_are_remembered() -> None:
    t = ProducerStateTable()
    for i in range(MAX_REMEMBERED + 1):
        append(t, header(1, 0, i, 1), i)
    assert t.check(header(1, 0, 0, 1)).verdict is Verdict.OUT_OF_ORDER  # evicted
    assert t.check(header(1, 0, 1, 1)).verdict is Verdict.DUPLICATE


def test_sequence_wraps_after_int_max() -> None:
    assert in_sequence(MAX_SEQUENCE, 0)
    assert not in_sequence(MAX_SEQUENCE, 1)
    assert not in_sequence(5, 5)


def test_forget_below_log_start_lets_a_producer_continue_anywhere() -> None:
    t = ProducerStateTable()
    append(t, header(3, 0, 0, 2), 0)
    t.forget_below(10)
    assert t.check(header(3, 0, 40, 1)).verdict is Verdict.APPEND


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(1, 4), st.booleans()), max_size=40))
def test_random_retries_never_append_twice(ops: list[tuple[int, int, bool]]) -> None:
    """A producer that retries any of its recent batches never gets it appended again."""
    t = ProducerStateTable()
    next_seq = 0
    offset = 0
    sent: list[tuple[int, int]] = []
    for back, count, retry in ops:
        if retry and sent:
            seq, n = sent[-1 - min(back, len(sent) - 1)]
            assert t.check(header(9, 0, seq, n)).verdict is Verdict.DUPLICATE
            continue
        h = header(9, 0, next_seq, count)
        append(t, h, offset)
        sent = [*sent, (next_seq, count)][-MAX_REMEMBERED:]
        next_seq += count
        offset += count
