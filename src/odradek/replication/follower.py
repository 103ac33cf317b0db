"""A follower's side of a partition: appending what it fetched, and truncating.

Called by :class:`~odradek.replication.partition.PartitionState` (these are its
follower methods; the state is passed in): a fetch is scanned once
(:func:`~odradek.storage.batch_scan.scan_replica`: framing and CRC; a bad batch
refuses all of it, as Kafka's follower does), appended in segment-sized parts
with the leader's offsets, and its batches noted in the producer state
(:mod:`odradek.replication.producer_log`); the leader's high watermark is
taken as far as this log reaches, and its log start once below the HW.
Truncation (a divergence the leader reported, an offset out of its range) cuts
the log and rebuilds the producer state from what is left.
"""

from __future__ import annotations

import contextlib
from typing import Protocol

from odradek.replication import producer_log
from odradek.replication.effects import Appended
from odradek.replication.producer_state import ProducerStateTable
from odradek.storage.batch_scan import BatchRow, scan_replica, segment_parts
from odradek.storage.errors import StorageError
from odradek.storage.log import Log


class FollowerState(Protocol):
    """What these functions use of a partition's state."""

    log: Log
    producers: ProducerStateTable
    leader_high_watermark: int

    @property
    def high_watermark(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def delete_records(self, offset: int) -> int: ...

    def reload_producers(self) -> None: ...


def append(state: FollowerState, records: memoryview, leader_hw: int,
           leader_log_start: int = -1) -> Appended:
    """Append batches fetched from the leader (offsets kept, gaps allowed), then
    take the leader's HW as far as this log reaches, and its log start (records
    the leader deleted go here too, once below the HW). The fetch is scanned
    once (framing and CRC; a bad batch refuses all of it, as Kafka's follower
    does); one larger than ``segment.bytes`` is appended in parts at batch
    boundaries (each part fits a segment), so a small segment size never
    stalls a follower."""
    state.leader_high_watermark = leader_hw
    first, last, flush_due, start = -1, -1, False, state.log_start_offset
    write = None
    try:
        table = scan_replica(records)
    except StorageError as exc:
        return Appended(exc.error_code, str(exc))
    if table.rows:
        _cut_inside(state, table.rows[0])
    for chunk, rows in segment_parts(records, table, state.log.config.segment_bytes):
        try:
            info = state.log.append_replicated(chunk, rows)
        except StorageError as exc:
            return Appended(exc.error_code, str(exc), first_offset=first,
                            last_offset=last, write=write)
        first = info.first_offset if first < 0 else first
        last, start = info.last_offset, info.log_start_offset
        flush_due |= info.flush_due
        write = info.write or write
        producer_log.record_replicated(state.producers, state.log, records, rows)
    moved = state.log.advance_high_watermark(min(leader_hw, state.log_end_offset))
    if moved:
        state.producers.high_watermark_moved(state.high_watermark)
    if state.log_start_offset < leader_log_start <= state.high_watermark:
        with contextlib.suppress(StorageError):
            state.delete_records(leader_log_start)
    return Appended(first_offset=first, last_offset=last, log_start_offset=start,
                    hw_moved=moved, flush_due=flush_due, write=write)


def _cut_inside(state: FollowerState, first: BatchRow) -> None:
    """The first batch fetched starts below this log's end and ends at or past it:
    the fetch was from inside one of the leader's batches, so what this log
    holds from that batch's base on is not the leader's (an empty log starts
    over at the base). A follower gets there after starting over at, or
    truncating to, a leader's log start that DeleteRecords moved inside a
    batch; the leader's log start is taken again once below the HW."""
    if first.base_offset < state.log.next_offset <= first.last_offset:
        truncate_to(state, first.base_offset)


def truncate_to_divergence(state: FollowerState, epoch: int, end_offset: int) -> int:
    """The leader says this log diverges after (``epoch``, ``end_offset``): cut it
    where it stops agreeing (the end of the same epoch here, or of the
    largest one below; the next fetch checks again). Returns the new log end."""
    state.log.drain_writes()
    mine, my_end = state.log.epochs.end_offset_for(epoch, state.log_end_offset)
    if mine < 0:
        entries = state.log.epochs.entries
        my_end = entries[0][1] if entries else state.log_end_offset
    truncate_to(state, min(end_offset, my_end))
    return state.log_end_offset


def truncate_to(state: FollowerState, offset: int) -> None:
    """Cut the log at ``offset`` (a follower's truncation) and rebuild the
    producer state from what is left. At or past the log end no batch goes, but
    leader epochs starting at the log end do (:meth:`Log.truncate_to`): this
    replica led in them and appended nothing, and a follower naming such an
    epoch as its last fetched one would be told to truncate forever."""
    state.log.drain_writes()
    if offset >= state.log_end_offset:
        state.log.truncate_to(state.log_end_offset)
        return
    state.log.truncate_to(offset)
    state.reload_producers()


def truncate_fully_and_start_at(state: FollowerState, offset: int) -> None:
    """A follower below the leader's log start: start over there, empty."""
    state.log.truncate_fully_and_start_at(offset)
    state.reload_producers()


def out_of_range(state: FollowerState, leader_log_start: int, leader_hw: int) -> None:
    """The leader answered OFFSET_OUT_OF_RANGE to this follower's fetch: below the
    leader's log start, start over there, empty; past its end, cut back to
    its HW (Kafka's ``fetchOffsetAndTruncate``)."""
    state.log.drain_writes()
    if state.log_end_offset < leader_log_start:
        truncate_fully_and_start_at(state, leader_log_start)
    else:
        truncate_to(state, max(leader_hw, 0))
