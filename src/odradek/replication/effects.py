"""What calls on a partition's state return: the effects its IO shell acts on.

:class:`~odradek.replication.partition.PartitionState` is plain code; each of
its calls that a request makes returns a value saying what happened and what
the shell (:mod:`odradek.broker.replica.partitions`) must now do:

* :class:`Appended` (an append as leader or follower): the offsets, whether the
  high watermark moved (wake consumers' fetches, complete delayed produces),
  whether a flush is due (fsync before answering), the write still pending;
* :class:`Read` (a consumer's fetch): byte ranges and the bounds to report;
* :class:`ReplicaRead` (a follower's fetch): byte ranges or the divergence,
  whether the HW moved, whether the follower may join the ISR (propose it).

Each says what changed as :class:`Changed` bits (``changed``), as do the calls that
return nothing else (``update_follower``, ``writes_completed``); the shell acts
on it in one place (:meth:`odradek.broker.replica.partitions.PartitionManager.act`).

Also the isolation levels a read is bounded by, and KIP-320's leader-epoch check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final

from odradek.replication.producer_state import AbortedTxn
from odradek.storage.batch_scan import BatchRow
from odradek.storage.slices import FileSlice
from odradek.storage.writes import AppendJob
from odradek.wire.errors import ErrorCode

READ_UNCOMMITTED = 0
"""Consumers: up to the high watermark (Kafka's isolation level 0)."""
READ_COMMITTED = 1
"""Consumers: up to the last stable offset (isolation level 1)."""
LOG_END = -1
"""Followers: up to the log end (Kafka's FetchIsolation.LOG_END)."""


def leader_epoch_error(leader_epoch: int, current_leader_epoch: int) -> int:
    """KIP-320: a fetcher that knows a newer leader epoch than this replica's
    (``leader_epoch``) gets UNKNOWN_LEADER_EPOCH (this broker's metadata is
    behind), an older one FENCED_LEADER_EPOCH (its own metadata is); -1 skips
    the check."""
    if current_leader_epoch < 0 or current_leader_epoch == leader_epoch:
        return 0
    if current_leader_epoch > leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.FENCED_LEADER_EPOCH


class Changed:
    """What a call on a partition's state changed, for its shell to act on: bits of
    an ``int`` (0 when nothing did). Plain ints, not an ``IntFlag``: these are
    combined on every append and fetch, where an enum's operators cost
    microseconds each."""

    NONE: Final = 0
    HW: Final = 1
    """The high watermark moved: wake consumers' long polls, complete the waits
    for it (acks=all produces, coordinator writes)."""
    READABLE: Final = 2
    """Bytes were published at the log end: wake the long polls (followers')."""
    ISR_ELIGIBLE: Final = 4
    """A follower may join the ISR: the ISR manager proposes it."""
    FLUSH: Final = 8
    """``flush.messages`` was reached: whoever answers for the append waits for an
    fsync (a producer's answer, a follower's next fetch)."""


def hw_change(moved: bool) -> int:
    return Changed.HW if moved else Changed.NONE


class Origin(Enum):
    """Who appends (Kafka's AppendOrigin). Both get every check, except that
    transaction markers (control batches, which a client may never send) are
    let through for ``COORDINATOR`` only. Coordinators append to
    ``__consumer_offsets``, the metadata journal and ``__transaction_state``,
    and the transaction coordinator writes markers to any partition."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


@dataclass(frozen=True, slots=True)
class Appended:
    """What an append did. ``error_code`` 0 means the records are in the log (or, with
    ``duplicate``, were already: the offsets are the original ones)."""

    error_code: int = 0
    error_message: str | None = None
    first_offset: int = -1
    last_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    duplicate: bool = False
    hw_moved: bool = False
    """The HW moved: fetches waiting on this partition can be answered."""
    flush_due: bool = False
    """``flush.messages`` was reached: the answer waits for an fsync."""
    leader_epoch: int = -1
    """The leader epoch the records were appended (or found, for a duplicate) at:
    an answer that waits for the HW is only valid while this replica still leads
    at that epoch (after a change the offsets may hold other records)."""
    write: AppendJob | None = None
    """The write still pending for these records (the log has a write sink): the
    answer waits for it, and carries its failure if it fails. None: written."""
    first_batch: BatchRow | None = None
    """The first batch's header as the scan read it (None: refused before the scan,
    or an empty field): what later looks at the producer read instead of bytes."""

    @property
    def appended(self) -> bool:
        return self.error_code == 0 and not self.duplicate and self.last_offset >= 0

    @property
    def changed(self) -> int:
        """:class:`Changed` bits. (A pending write publishes its bytes when it
        completes, not now.)"""
        change = Changed.HW if self.hw_moved else Changed.NONE
        if self.appended and self.write is None:
            change |= Changed.READABLE
        if self.flush_due:
            change |= Changed.FLUSH
        return change


@dataclass(frozen=True, slots=True)
class Read:
    """A fetch's view of the partition: byte ranges of whole batches, bounded by the
    HW (read_uncommitted) or the LSO (read_committed)."""

    error_code: int
    slices: Sequence[FileSlice]
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: Sequence[AbortedTxn] | None = None
    """READ_COMMITTED only: the aborted transactions the data may include."""

    @property
    def size(self) -> int:
        return sum(s.length for s in self.slices)


@dataclass(frozen=True, slots=True)
class ReplicaRead:
    """The leader's answer to a follower's fetch: batches up to the log end, or the
    epoch where the follower's log diverges (``diverging_epoch`` >= 0: truncate
    to ``diverging_end_offset`` or below, nothing else in the answer)."""

    error_code: int
    slices: Sequence[FileSlice]
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    diverging_epoch: int = -1
    diverging_end_offset: int = -1
    hw_moved: bool = False
    expand: bool = False
    """The follower is now eligible to join the ISR: the shell proposes it."""

    @property
    def size(self) -> int:
        return sum(s.length for s in self.slices)

    @property
    def changed(self) -> int:
        """:class:`Changed` bits."""
        change = Changed.HW if self.hw_moved else Changed.NONE
        return change | Changed.ISR_ELIGIBLE if self.expand else change
