"""A partition's future replica: the copy of its log being filled in another log
directory (AlterReplicaLogDirs; Kafka's future log, which its
ReplicaAlterLogDirsThread fills).

The copy is taken the way a follower copies a leader, from the current log on
the same broker: whole batches, offsets kept, each appended with
:meth:`~odradek.storage.log.Log.append_replicated`; markers go through the
future's own producer-state table so its ``.txnindex`` files are written as a
follower's would be. The current log's high watermark and log start follow
into the copy. When the copy has every record of the current log, synced as
far as the current log is, the broker renames it in (see
:mod:`odradek.storage.logdirs` for the on-disk steps) and
:meth:`~odradek.replication.partition.PartitionState.future_promoted` makes it
the partition's log.

One round of the copy, driven by the broker's mover (``broker/replica/log_mover.py``):

1. :meth:`FutureReplica.plan` on the event loop: byte ranges of the current
   log from the copy's end on (no IO but index lookups), or None when the
   copy has caught up;
2. :meth:`FutureReplica.copy` on a worker thread: reads those ranges through
   file descriptors of its own (never the shared handle cache) and appends
   them to the copy;
3. :meth:`FutureReplica.copied` on the loop: the HW and log start follow.

A rewrite of the current log in place (a follower's truncation, a cleaner
swap: :attr:`Log.rewrites`) since the last round makes the next round start
the copy over, empty, at the current log start: bytes read across a rewrite
cannot be trusted, and what a truncation cut may have been copied already.
Only the mover touches a future replica, one call at a time (steps 2 runs
while the loop only reads its offsets), so it needs no lock.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.replication import producer_log
from odradek.replication.producer_state import ProducerStateTable
from odradek.storage.batch_scan import scan_replica
from odradek.storage.fs import FileSystem
from odradek.storage.log import AppendInfo, Log
from odradek.storage.slices import FileSlice


@dataclass(frozen=True, slots=True)
class CopyPlan:
    """One round of the copy: ``slices`` of the current log, to be appended at the
    copy's end ``start`` (after starting the copy over, empty, at ``restart_at``
    when that is >= 0)."""

    slices: tuple[FileSlice, ...]
    start: int
    restart_at: int = -1

    @property
    def size(self) -> int:
        return sum(s.length for s in self.slices)


class FutureReplica:
    """The future log of one partition and its producer state (see the module
    docstring)."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.producers = ProducerStateTable()
        self.seen_rewrites = -1
        """:attr:`Log.rewrites` of the current log when the copy was last planned
        (-1: never; the first plan starts over only if the copy is not a prefix)."""
        self.must_restart = False
        """The copy starts over at the next round (set by a plan that saw a rewrite
        or a copy that cannot be a prefix of the current log; cleared by the
        round that does it)."""
        self.copied_bytes = 0

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def lag(self, current: Log) -> int:
        """Offsets the copy still lacks (DescribeLogDirs' offset lag of a future log)."""
        return max(current.log_end_offset - self.log.log_end_offset, 0)

    # -- the rounds -------------------------------------------------------------------

    def plan(self, current: Log, max_bytes: int) -> CopyPlan | None:
        """Step 1 (event loop): what to copy next; None once caught up (same log end,
        no rewrite since the last round)."""
        end = self.log.log_end_offset
        if (self.seen_rewrites not in (-1, current.local.rewrites)
                or end > current.log_end_offset or end < current.log_start_offset):
            self.must_restart = True
        self.seen_rewrites = current.local.rewrites
        restart = -1
        if self.must_restart:
            restart = end = current.log_start_offset
        if restart < 0 and end == current.log_end_offset:
            return None
        slices: tuple[FileSlice, ...] = ()
        if end < current.log_end_offset:
            slices = tuple(current.read(end, max_bytes, max_offset=current.log_end_offset))
        return CopyPlan(slices, end, restart)

    def copy(self, plan: CopyPlan, fs: FileSystem) -> int:
        """Step 2 (worker thread): start over if planned, read the planned ranges
        with descriptors of its own and append them. Returns the bytes appended
        (0 when a range was gone: retention took it; the next round plans
        again). Storage errors propagate: the mover gives the move up."""
        if plan.restart_at >= 0:
            self.log.truncate_fully_and_start_at(plan.restart_at)
            self.producers = ProducerStateTable()
            self.must_restart = False
        if plan.start != self.log.log_end_offset and plan.restart_at < 0:
            return 0  # not planned against this copy's end (cannot happen: one mover)
        try:
            data = b"".join(_read_fresh(fs, s) for s in plan.slices)
        except (FileNotFoundError, _ShortRead):
            return 0
        self.append(data)
        return len(data)

    def copied(self, current: Log) -> None:
        """Step 3 (event loop): the copy's HW and log start follow the current log's
        as far as the copy reaches."""
        self.log.advance_high_watermark(min(current.high_watermark, self.log.log_end_offset))
        low = current.log_start_offset
        if self.log.log_start_offset < low <= self.log.high_watermark:
            self.log.delete_records_before(low)
            self.producers.forget_below(self.log.log_start_offset)

    def append(self, data: bytes) -> AppendInfo | None:
        """Append copied batches (offsets kept), noting markers in the copy's
        producer state. A first batch starting below the copy's end (the log
        start was inside it) restarts the copy at that batch."""
        if not data:
            return None
        view = memoryview(data)
        rows = scan_replica(view).rows  # the one read of the headers
        first = rows[0]
        if first.base_offset < self.log.log_end_offset <= first.last_offset:
            self.log.truncate_to(first.base_offset)
        info = self.log.append_replicated(view, rows)
        producer_log.record_replicated(self.producers, self.log, view, rows)
        self.copied_bytes += len(view)
        return info

    # -- the end ----------------------------------------------------------------------

    def sync(self, current_epochs: list[tuple[int, int]]) -> None:
        """(Worker thread, between rounds.) Take the current log's leader epochs and
        fsync the copy, so the final step on the loop has little left to do."""
        if self.log.epochs.entries != current_epochs:
            self.log.epochs.rebuild_from(current_epochs)
        self.log.flush()

    def finish(self, current: Log, max_bytes: int) -> bool:
        """The final step, on the event loop with nothing in between until the
        rename: copy what is left (at most ``max_bytes``, else False: another
        round first), take the HW, log start and leader epochs, and fsync the
        copy if the current log is synced further than it. True when the copy
        is then a whole copy of the current log, ready to be renamed in."""
        plan = self.plan(current, max_bytes)
        if plan is not None:
            if plan.restart_at >= 0 or plan.size > max_bytes:
                return False
            self.append(current.read_bytes(plan.slices))
            if self.log.log_end_offset != current.log_end_offset:
                return False
        self.copied(current)
        if self.log.log_start_offset != current.log_start_offset:
            return False
        if self.log.epochs.entries != current.epochs.entries:
            self.log.epochs.rebuild_from(current.epochs.entries)
        if self.log.recovery_point < current.recovery_point:
            self.log.flush()
        return True


class _ShortRead(Exception):
    """A range of the current log read back shorter than planned (truncated)."""


def _read_fresh(fs: FileSystem, part: FileSlice) -> bytes:
    handle = fs.open(part.path)
    try:
        data = handle.pread(part.position, part.length)
    finally:
        handle.close()
    if len(data) != part.length:
        raise _ShortRead(part.path)
    return data
