"""Idempotent-producer state of one partition: epochs and sequences.

For each producer id the table keeps the current epoch and the metadata of its
last :data:`MAX_REMEMBERED` batches (first/last sequence, first/last offset,
max timestamp). A produced batch with a producer id is checked against it
before it is appended:

* an epoch lower than the producer's current one: INVALID_PRODUCER_EPOCH
  (a zombie from before an epoch bump);
* a batch equal to a remembered one (same epoch, first and last sequence): a
  duplicate, acknowledged with the original offsets and not appended again;
* a new epoch must start at sequence 0 (unless the producer is unknown);
* otherwise the first sequence must follow the last one (wrapping after
  2^31-1 to 0): OUT_OF_ORDER_SEQUENCE_NUMBER if not. A producer whose state is
  gone (retention, DeleteRecords) may continue with any sequence, as Kafka allows.

The table is pure: :meth:`ProducerStateTable.check` decides, and
:meth:`ProducerStateTable.record` applies a batch once it is in the log. On
start-up the table is rebuilt by replaying the batch headers of the log
(:meth:`record` again), so the check survives restarts.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum

from odradek.wire.batch import NO_PRODUCER_ID, BatchHeader

MAX_REMEMBERED = 5
MAX_SEQUENCE = 0x7FFFFFFF


class Verdict(Enum):
    APPEND = "append"
    DUPLICATE = "duplicate"
    INVALID_EPOCH = "invalid_epoch"
    OUT_OF_ORDER = "out_of_order"


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=MAX_REMEMBERED))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


@dataclass(frozen=True, slots=True)
class Check:
    verdict: Verdict
    duplicate_of: BatchMetadata | None = None
    message: str = ""


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQUENCE)


class ProducerStateTable:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, header: BatchHeader) -> Check:
        """Decide what to do with a producer batch (the header's offsets are ignored)."""
        pid = header.producer_id
        if pid == NO_PRODUCER_ID:
            return Check(Verdict.APPEND)
        entry = self.producers.get(pid)
        if entry is None:
            return Check(Verdict.APPEND)
        epoch, first, last = header.producer_epoch, header.base_sequence, header.last_sequence
        if epoch < entry.epoch:
            return Check(
                Verdict.INVALID_EPOCH,
                message=f"Epoch {epoch} of producer {pid} is older than {entry.epoch}",
            )
        if epoch == entry.epoch:
            for b in entry.batches:
                if b.first_seq == first and b.last_seq == last:
                    return Check(Verdict.DUPLICATE, duplicate_of=b)
            if entry.batches and not in_sequence(entry.last_seq, first):
                return Check(
                    Verdict.OUT_OF_ORDER,
                    message=f"Out of order sequence {first} for producer {pid} "
                    f"at epoch {epoch}, expected {entry.last_seq + 1}",
                )
        elif first != 0:
            return Check(
                Verdict.OUT_OF_ORDER,
                message=f"Invalid sequence {first} for new epoch {epoch} of producer {pid}",
            )
        return Check(Verdict.APPEND)

    def record(self, header: BatchHeader) -> None:
        """Apply a batch that is now in the log (its header carries final offsets)."""
        pid = header.producer_id
        if pid == NO_PRODUCER_ID:
            return
        entry = self.producers.get(pid)
        if entry is None or header.producer_epoch != entry.epoch:
            entry = self.producers[pid] = ProducerEntry(header.producer_epoch)
        entry.batches.append(
            BatchMetadata(
                header.base_sequence, header.last_sequence,
                header.base_offset, header.last_offset, header.max_timestamp,
            )
        )

    def forget_below(self, log_start_offset: int) -> None:
        """Drop producers whose every remembered batch is below the log start."""
        gone = [
            pid for pid, e in self.producers.items()
            if e.batches and e.batches[-1].last_offset < log_start_offset
        ]
        for pid in gone:
            del self.producers[pid]
