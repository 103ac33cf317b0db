"""One partition's replicated state: leadership, the ISR and the high watermark.

After Kafka's split (``LocalLog`` under ``UnifiedLog`` under ``Partition``), a
:class:`PartitionState` owns, for one partition: its log
(:class:`~odradek.storage.log.Log`), the producer table (fed by
:mod:`~odradek.replication.producer_log`), the leader epoch, the replicas with
each one's log end, the ISR, the high watermark (HW) and the last stable
offset (LSO: the HW held back by the earliest open transaction, and by a
decided one whose marker the HW has not passed). A follower's appends and
truncation are in :mod:`~odradek.replication.follower`.

Everything that appends to a partition's log or moves its HW goes through
here (import-linter and ``tests/unit/replication/test_layering.py`` hold the
rest of the code to that). It is plain code: no asyncio, no clock reads; calls
return effects (:mod:`~odradek.replication.effects`) that the IO shell
(:mod:`odradek.broker.replica.partitions`) acts on: answer, wake fetches, fsync.

Invariants, checked by the simulation tests after every step::

    log_start_offset <= high_watermark <= log_end_offset
    high_watermark == min(LEO of every ISR member)   (never moving back on a leader)
    local replica in ISR while leader; ISR is a subset of the replicas
    last_stable_offset <= high_watermark

A leader's append (:meth:`PartitionState.append_as_leader`), in order: the
batch scan (:meth:`Log.check`: sizes, framing, CRC, counts, timestamps; first,
so a retried batch with a bad CRC is CORRUPT_MESSAGE, never a duplicate),
KIP-890 verification, the producer-state check, the append (offsets from the
next offset, this leader's epoch in each batch), producer state recorded with
the real offsets, the HW recomputed (with one replica it follows the LEO).
"""

from __future__ import annotations

__all__ = ["LOG_END", "READ_COMMITTED", "READ_UNCOMMITTED", "Appended", "Changed", "Origin",
           "PartitionState", "Read", "Replica", "ReplicaRead", "leader_epoch_error"]

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from odradek.common.intern import Interner, identity_interner
from odradek.replication import follower, producer_log
from odradek.replication.effects import (
    LOG_END,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    Appended,
    Changed,
    Origin,
    Read,
    ReplicaRead,
    hw_change,
    leader_epoch_error,
)
from odradek.replication.future import FutureReplica
from odradek.replication.producer_state import ProducerStateTable
from odradek.storage.batch_scan import BatchRow
from odradek.storage.errors import StorageError
from odradek.storage.log import AppendInfo, Log
from odradek.wire.errors import ErrorCode

_ISRS: Interner[frozenset[int], frozenset[int]] = identity_interner()


def interned(members: Iterable[int]) -> frozenset[int]:
    """The one frozenset of these broker ids: every partition with the same ISR
    holds the same object (an ISR set costs 216 bytes; a broker holding 100k
    partitions has a handful of distinct ones; :mod:`odradek.common.intern`)."""
    return _ISRS(frozenset(members))


@dataclass(slots=True)
class Replica:
    """What the leader knows of one replica (Kafka's ``Replica``): its log end and
    broker epoch as of its last fetch, when it was last caught up, and the
    leader's log end and the time at that fetch (a follower fetching from the
    leader's log end of its previous fetch was caught up then)."""

    broker_id: int
    log_end_offset: int = 0
    last_caught_up_ms: int = -1
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = -1
    broker_epoch: int = -1
    """The follower's broker epoch (its registration) as of that fetch (-1: not
    told). What it says of the log end holds for that incarnation only."""


class ReplicaMap(Mapping[int, Replica]):
    """broker id -> :class:`Replica`, in broker-id order: a mapping over a tuple
    (a partition has a few replicas; a dict of one costs ~220 bytes, this ~100).
    Never changed in place: the partition puts a new one when its replica set
    changes (the :class:`Replica` objects in it are updated in place)."""

    __slots__ = ("_replicas",)

    def __init__(self, replicas: Iterable[Replica] = ()) -> None:
        self._replicas = tuple(sorted(replicas, key=lambda r: r.broker_id))

    def __getitem__(self, broker_id: int) -> Replica:
        for replica in self._replicas:
            if replica.broker_id == broker_id:
                return replica
        raise KeyError(broker_id)

    def __contains__(self, broker_id: object) -> bool:
        return any(r.broker_id == broker_id for r in self._replicas)

    def __iter__(self) -> Iterator[int]:
        return (r.broker_id for r in self._replicas)

    def __len__(self) -> int:
        return len(self._replicas)

    def __repr__(self) -> str:
        return f"ReplicaMap({list(self._replicas)!r})"


@dataclass(slots=True)
class IsrChangeCounts:
    """ISR changes a leader applied, counted for Kafka's ``IsrShrinksPerSec`` and
    ``IsrExpandsPerSec``: one object shared by every partition of a broker
    (passed in), so the totals outlive a partition that moves away."""

    shrinks: int = 0
    expands: int = 0


@dataclass(slots=True)
class PartitionState:
    """The replicated state of one partition (see the module docstring)."""

    topic: str
    index: int
    log: Log
    local_id: int = 0
    leader_epoch: int = 0
    replicas: ReplicaMap = field(default_factory=ReplicaMap)
    isr: frozenset[int] = frozenset()
    """The in-sync replicas: an interned frozenset (:func:`interned`), one object
    shared by every partition with the same members."""
    producers: ProducerStateTable = field(default_factory=ProducerStateTable)
    leader_id: int = -2
    """The leader's broker id; -2 (the default) means this replica leads."""
    partition_epoch: int = 0
    """The controller's partition epoch for ``isr`` (bumped by every ISR change)."""
    min_isr: int = 1
    """``min.insync.replicas``: acks=all needs this many in the ISR, and the HW holds
    while the ISR is smaller than it (or than the replica count, if fewer)."""
    pending_isr: frozenset[int] | None = None
    """An ISR change sent to the controller and not yet seen in the metadata (one
    at a time). Members it adds count for the HW at once (Kafka's "maximal ISR");
    members it drops count until the controller confirms."""
    epoch_start_offset: int = 0
    """The log end when this replica took the leadership at ``leader_epoch``: a
    follower joins the ISR only once it has reached it."""
    leader_high_watermark: int = 0
    """A follower: the leader's HW as of its last answer (taken as far as the
    written log reaches, again whenever a write completes)."""
    isr_changes: IsrChangeCounts = field(default_factory=IsrChangeCounts)
    """Where this replica, staying leader, counts the ISR shrinking or growing
    (an AlterPartition it sent, or the controller's change in the metadata, e.g.
    a fenced broker dropped); a new leadership term counts nothing."""

    future: FutureReplica | None = None
    """The copy of the log being filled in another log directory
    (AlterReplicaLogDirs), if the partition is moving; see
    :mod:`odradek.replication.future`."""

    def __post_init__(self) -> None:
        self._hook(self.log)
        if self.leader_id == -2:
            self.leader_id = self.local_id
        if not self.replicas:
            self.replicas = ReplicaMap((Replica(self.local_id),))
        if not self.isr:
            self.isr = interned((self.local_id,))
        producer_log.rebuild(self.producers, self.log)
        if self.is_leader:
            self.epoch_start_offset = self.log.next_offset
            self._update_high_watermark()

    def _hook(self, log: Log) -> None:
        """Listen to ``log`` (its log at start, and the future log once renamed in)
        through :class:`~odradek.replication.producer_log.Listener`."""
        log.attach(producer_log.Listener(self))

    # -- moving between log directories ---------------------------------------------------

    def attach_future(self, log: Log) -> FutureReplica:
        """Start filling ``log`` (an empty or partly filled ``-future`` log in another
        directory) as this partition's future replica."""
        self.future = FutureReplica(log)
        return self.future

    def detach_future(self) -> FutureReplica | None:
        """The move is given up (or the partition goes): forget the future replica."""
        future, self.future = self.future, None
        return future

    def future_promoted(self, log: Log) -> None:
        """The future log was renamed in (:meth:`FutureReplica.finish` said it is a
        whole copy): it is this partition's log from now on. Producer state,
        epochs, ISR and HW stay as they are: the copy holds the same records."""
        assert self.future is not None and log is self.future.log
        self.future = None
        self.log = log
        self._hook(log)

    # -- views --------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """The first offset a read_committed consumer may not read."""
        return self.producers.last_stable_offset(self.log.high_watermark)

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_id

    @property
    def high_watermark_known(self) -> bool:
        """A new leader's HW is what it last heard as a follower (or read from its
        checkpoint at start-up), which can be below the HW the previous leader
        already gave clients; it is known again once it reaches the start of this
        leader's epoch, where every earlier entry is committed. Until then the
        latest offset must not be answered (Kafka: OFFSET_NOT_AVAILABLE)."""
        return not self.is_leader or self.high_watermark >= self.epoch_start_offset

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The ISR the HW is computed over: the committed one plus members a pending
        change adds."""
        return self.isr | self.pending_isr if self.pending_isr is not None else self.isr

    @property
    def last_fetched_epoch(self) -> int:
        """The newest leader epoch in this log (a follower's ``LastFetchedEpoch``)."""
        return self.log.epochs.latest_epoch

    # -- leadership and followers -------------------------------------------------------

    def become_leader(self, epoch: int, replicas: Iterable[int], isr: Iterable[int],
                      *, partition_epoch: int | None = None, now_ms: int = 0) -> bool:
        """Take the leadership at ``epoch`` with this replica set and ISR (the local
        replica is always in both). What the leader knew of followers is reset
        (their log ends are unknown until they fetch), ISR members counting as
        caught up now so none is dropped before it could fetch; the epoch's
        start offset is the log end. Returns whether the HW moved."""
        new_term = not self.is_leader or epoch != self.leader_epoch
        newer = partition_epoch is not None and partition_epoch > self.partition_epoch
        self.leader_epoch = epoch
        self.leader_id = self.local_id
        if partition_epoch is not None:
            self.partition_epoch = partition_epoch
        wanted = set(replicas) | {self.local_id}
        before = len(self.isr)
        self.isr = interned((set(isr) & wanted) | {self.local_id})
        if not new_term and len(self.isr) != before:
            if len(self.isr) < before:
                self.isr_changes.shrinks += 1
            else:
                self.isr_changes.expands += 1
        if new_term:
            self.replicas = ReplicaMap(
                Replica(b, last_caught_up_ms=now_ms if b in self.isr else -1) for b in wanted)
            self.pending_isr = None
            # Appends still being written belong to the epochs before this one.
            self.epoch_start_offset = self.log.next_offset
            if epoch > self.log.epochs.latest_epoch:
                self.log.assign_epoch(epoch, self.log.next_offset)
        else:
            self.replicas = ReplicaMap(self.replicas.get(b) or Replica(b) for b in wanted)
            # A newer partition epoch settles any pending change: the controller
            # took it (the ISR now says so) or decided otherwise (it will be
            # refused as stale; it is proposed again from the new state).
            if self.pending_isr is not None and (newer or set(self.pending_isr) == self.isr):
                self.pending_isr = None
        return self._update_high_watermark()

    def become_follower(self, epoch: int, leader_id: int,
                        *, partition_epoch: int | None = None) -> None:
        """Follow ``leader_id`` (-1: none yet) at ``epoch``: appends come only from
        :meth:`append_as_follower`, and the HW only from the leader."""
        self.leader_epoch = epoch
        self.leader_id = leader_id
        if partition_epoch is not None:
            self.partition_epoch = partition_epoch
        self.isr = interned(())
        self.pending_isr = None

    def apply_metadata(self, leader: int, leader_epoch: int, partition_epoch: int,
                       replicas: Iterable[int], isr: Iterable[int], now_ms: int) -> bool:
        """The controller's view of this partition changed (or is seen the first
        time): lead or follow accordingly. Returns True when this replica's role
        or leader changed (waiters on the old role must be answered)."""
        was = (self.is_leader, self.leader_id, self.leader_epoch)
        if leader == self.local_id:
            if leader_epoch < self.leader_epoch and self.is_leader:
                return False  # a stale view
            self.become_leader(leader_epoch, replicas, isr, partition_epoch=partition_epoch,
                               now_ms=now_ms)
        else:
            self.become_follower(leader_epoch, leader, partition_epoch=partition_epoch)
        return was != (self.is_leader, self.leader_id, self.leader_epoch)

    def update_follower(self, broker_id: int, log_end_offset: int, now_ms: int,
                        broker_epoch: int = -1) -> int:
        """A follower fetched from ``log_end_offset`` (its LEO) in its registration
        ``broker_epoch``. Returns whether the HW moved (:attr:`Changed.HW`). It was
        caught up now if it fetched from the leader's log end, or at its previous
        fetch if it fetched from the leader's log end as of then."""
        replica = self.replicas.get(broker_id)
        if replica is None or broker_id == self.local_id or not self.is_leader:
            return Changed.NONE
        leo = self.log_end_offset
        offset = min(log_end_offset, leo)
        if offset >= leo:
            replica.last_caught_up_ms = now_ms
        elif replica.last_fetch_leader_leo >= 0 and offset >= replica.last_fetch_leader_leo:
            replica.last_caught_up_ms = max(replica.last_caught_up_ms, replica.last_fetch_ms)
        replica.log_end_offset = offset
        replica.broker_epoch = broker_epoch
        replica.last_fetch_leader_leo = leo
        replica.last_fetch_ms = now_ms
        return hw_change(self._update_high_watermark())

    def read_for_follower(self, broker_id: int, fetch_offset: int, last_fetched_epoch: int,
                          max_bytes: int, now_ms: int, broker_epoch: int = -1) -> ReplicaRead:
        """A follower's fetch (Kafka's replica Fetch, v12+): first the divergence check
        (the follower's last epoch ends earlier here, or is unknown: it must
        truncate first, and nothing is recorded), then batches up to the log end
        (none when ``max_bytes`` is negative: a throttled replica)
        are read and the follower's log end is recorded (moving the HW, perhaps),
        in that order, as in Kafka: a read that raises (a read to do off the
        event loop first, :func:`odradek.broker.net.transfer.collect_without_waiting`)
        has recorded nothing, so the fetch can be served again from the start."""
        leo, start = self.log_end_offset, self.log_start_offset
        if not self.is_leader:
            return ReplicaRead(ErrorCode.NOT_LEADER_OR_FOLLOWER, (), -1, start, leo)
        if broker_id not in self.replicas or broker_id == self.local_id:
            return ReplicaRead(ErrorCode.NOT_LEADER_OR_FOLLOWER, (), -1, start, leo)
        if last_fetched_epoch >= 0:
            epoch, end = self.log.epochs.end_offset_for(last_fetched_epoch, leo)
            if epoch < 0:
                # Older than every epoch here: the follower's log agrees at most up
                # to where the first of them starts (Kafka answers so too).
                entries = self.log.epochs.entries
                epoch, end = last_fetched_epoch, entries[0][1] if entries else start
            if epoch < last_fetched_epoch or end < fetch_offset:
                return ReplicaRead(0, (), self.high_watermark, start, leo,
                                   diverging_epoch=epoch, diverging_end_offset=end)
        if fetch_offset > leo or fetch_offset < start:
            return ReplicaRead(ErrorCode.OFFSET_OUT_OF_RANGE, (), self.high_watermark, start, leo)
        try:
            # A negative max_bytes reads nothing: the leader's replication
            # throttle holds this partition back (broker/replica/throttle.py).
            slices = () if max_bytes < 0 else self.log.read(
                fetch_offset, max_bytes, max_offset=leo, min_one_batch=True)
        except StorageError as exc:
            moved = bool(self.update_follower(broker_id, fetch_offset, now_ms, broker_epoch))
            return ReplicaRead(exc.error_code, (), self.high_watermark, start, leo,
                               hw_moved=moved)
        moved = bool(self.update_follower(broker_id, fetch_offset, now_ms, broker_epoch))
        return ReplicaRead(0, slices, self.high_watermark, start, leo, hw_moved=moved,
                           expand=self._may_join_isr(broker_id))

    def _may_join_isr(self, broker_id: int) -> bool:
        replica = self.replicas[broker_id]
        return (broker_id not in self.maximal_isr and self.pending_isr is None
                and replica.log_end_offset >= max(self.high_watermark, self.epoch_start_offset))

    def out_of_sync(self, now_ms: int, lag_ms: int) -> set[int]:
        """ISR members that have not been caught up for ``replica.lag.time.max.ms``."""
        leo = self.log_end_offset
        return {b for b in self.isr if b != self.local_id
                and self.replicas[b].log_end_offset < leo
                and now_ms - self.replicas[b].last_caught_up_ms > lag_ms}

    def propose_isr(self, now_ms: int, lag_ms: int,
                    eligible: Iterable[int] | Mapping[int, int] | None = None
                    ) -> frozenset[int] | None:
        """The ISR change this leader should send the controller now, if any (none
        while one is pending): lagging members out, caught-up replicas in (of
        ``eligible``, the live brokers, when given). It is noted as pending.

        ``eligible`` as a mapping gives each live broker's epoch (Kafka's KIP-903):
        a replica joins only if its last fetch was made in that epoch, since a
        log end fetched before a restart says nothing of the log after it (the
        controller checks the epochs again: send ``replicas[b].broker_epoch``)."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        if isinstance(eligible, Mapping):
            epochs = dict(eligible)
            allowed: set[int] | None = {b for b, r in self.replicas.items()
                                        if b in epochs and r.broker_epoch == epochs[b]}
        else:
            allowed = set(eligible) if eligible is not None else None
        joining = {b for b in self.replicas if b not in self.isr and b != self.local_id
                   and (allowed is None or b in allowed) and self._may_join_isr(b)}
        new = (self.isr - self.out_of_sync(now_ms, lag_ms)) | joining
        if new == self.isr:
            return None
        self.pending_isr = frozenset(new)
        self._update_high_watermark()
        return self.pending_isr

    def isr_change_failed(self) -> None:
        """The controller refused (or never answered) the pending ISR change."""
        self.pending_isr = None

    def _update_high_watermark(self) -> bool:
        """The one place the HW moves on a leader: to min LEO over the maximal ISR,
        never back, and not at all while the ISR is below ``min.insync.replicas``
        (or the replica count, if smaller), as Kafka does since 3.7."""
        if not self.is_leader:
            return False
        leo = self.log.log_end_offset
        self.replicas[self.local_id].log_end_offset = leo
        isr = self.maximal_isr
        if len(self.isr) < min(self.min_isr, len(self.replicas)):
            return False
        if len(isr) == 1:  # the leader alone (it is always in its ISR)
            target = leo
        else:
            target = min(self.replicas[b].log_end_offset for b in isr if b in self.replicas)
        moved = self.log.advance_high_watermark(target)
        if moved:
            self.producers.high_watermark_moved(self.high_watermark)
        return moved

    def enough_replicas(self) -> bool:
        """Whether an acks=all append may be taken (else NOT_ENOUGH_REPLICAS)."""
        return len(self.isr) >= self.min_isr

    def replicated(self, last_offset: int) -> int | None:
        """Where an acks=all append ending at ``last_offset`` stands: None while the
        HW has not passed it, else 0 or NOT_ENOUGH_REPLICAS_AFTER_APPEND (the ISR
        shrank below ``min.insync.replicas`` meanwhile; the records stay)."""
        if self.high_watermark <= last_offset:
            return None
        if len(self.maximal_isr) < self.min_isr:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return 0

    # -- follower truncation -----------------------------------------------------------

    def truncate_to_divergence(self, epoch: int, end_offset: int) -> int:
        """The leader says this log diverges after (``epoch``, ``end_offset``); see
        :func:`odradek.replication.follower.truncate_to_divergence`."""
        return follower.truncate_to_divergence(self, epoch, end_offset)

    def truncate_to(self, offset: int) -> None:
        """Cut the log at ``offset``; see :func:`odradek.replication.follower.truncate_to`."""
        follower.truncate_to(self, offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """A follower below the leader's log start: start over there, empty."""
        follower.truncate_fully_and_start_at(self, offset)

    def out_of_range(self, leader_log_start: int, leader_hw: int) -> None:
        """The leader answered OFFSET_OUT_OF_RANGE; see
        :func:`odradek.replication.follower.out_of_range`."""
        follower.out_of_range(self, leader_log_start, leader_hw)

    def reload_producers(self) -> None:
        """The producer table again from the log (after truncation or a failed write)."""
        self.producers = ProducerStateTable()
        producer_log.rebuild(self.producers, self.log)
        self.producers.high_watermark_moved(self.high_watermark)

    # -- appends ------------------------------------------------------------------------

    def append_as_leader(self, records: memoryview, origin: Origin, required_acks: int = 1,
                         verify: Callable[[int, int], int] | None = None) -> Appended:
        """Validate and append a records field (one or more batches); see the module
        docstring for the order of checks. With ``required_acks`` -1 and an ISR
        below ``min.insync.replicas`` nothing is appended (NOT_ENOUGH_REPLICAS).
        ``verify(producer id, epoch)``: KIP-890's check of a transactional
        batch's producer, an error code or 0, asked after the batch scan. Never
        raises for bad input: errors come back as Kafka codes in :class:`Appended`."""
        plog = self.log
        if not self.is_leader:
            return Appended(ErrorCode.NOT_LEADER_OR_FOLLOWER, "not the leader")
        if required_acks == -1 and not self.enough_replicas():
            return Appended(ErrorCode.NOT_ENOUGH_REPLICAS,
                            f"the ISR has {len(self.isr)} of the {self.min_isr} replicas "
                            f"min.insync.replicas asks for")
        if not len(records):
            return self._appended(plog.append(records), None)
        try:  # the one read of the batch headers (odradek.storage.batch_scan)
            table = plog.check(records, allow_control=origin is Origin.COORDINATOR,
                               require_keys=origin is Origin.CLIENT and plog.config.compact)
        except StorageError as exc:
            return Appended(exc.error_code, str(exc))
        first = table.rows[0]
        if verify is not None and first.is_transactional and first.producer_id >= 0:
            code = verify(first.producer_id, first.producer_epoch)
            if code:
                return Appended(code, first_batch=first)
        # Only batches with a producer id (or markers) touch producer state.
        batches = producer_log.stateful(records, table)
        if isinstance(batches, Appended):
            return batches
        refused = producer_log.check(self.producers, plog, batches, len(table.rows) == 1,
                                     self.leader_epoch, first)
        if refused is not None:
            return refused
        try:
            info = plog.append(records, leader_epoch=self.leader_epoch, checked=table)
        except StorageError as exc:
            return Appended(exc.error_code, str(exc), first_batch=first)
        producer_log.record(self.producers, plog, batches, info.first_offset)
        return self._appended(info, first)

    def _appended(self, info: AppendInfo, first: BatchRow | None) -> Appended:
        return Appended(
            first_offset=info.first_offset, last_offset=info.last_offset,
            log_append_time_ms=info.log_append_time_ms,
            log_start_offset=info.log_start_offset,
            hw_moved=self._update_high_watermark(), flush_due=info.flush_due,
            leader_epoch=self.leader_epoch, write=info.write, first_batch=first)

    def append_as_follower(self, records: memoryview, leader_hw: int,
                           leader_log_start: int = -1) -> Appended:
        """Append batches fetched from the leader; see
        :func:`odradek.replication.follower.append`."""
        return follower.append(self, records, leader_hw, leader_log_start)

    def writes_completed(self) -> int:
        """Pending writes completed (the log end moved, or a failed one rolled it
        back): the leader's HW follows its log end, a follower's the leader's HW.
        Their bytes are readable now."""
        if self.is_leader:
            return hw_change(self._update_high_watermark()) | Changed.READABLE
        moved = self.log.advance_high_watermark(
            min(self.leader_high_watermark, self.log_end_offset))
        if moved:
            self.producers.high_watermark_moved(self.high_watermark)
        return hw_change(moved) | Changed.READABLE

    # -- reads and deletion ------------------------------------------------------------

    def read(self, fetch_offset: int, max_bytes: int, isolation: int = READ_UNCOMMITTED,
             *, min_one_batch: bool = True) -> Read:
        """Whole batches from ``fetch_offset`` on, at most ``max_bytes`` (the first
        batch whole when ``min_one_batch``), below the HW (READ_UNCOMMITTED), the
        LSO (READ_COMMITTED) or, for a follower, the log end (LOG_END)."""
        hw, lso = self.high_watermark, self.last_stable_offset
        limit = (lso if isolation == READ_COMMITTED
                 else self.log_end_offset if isolation == LOG_END else hw)
        try:
            slices = self.log.read(fetch_offset, max(max_bytes, 0), max_offset=limit,
                                   min_one_batch=min_one_batch)
        except StorageError as exc:
            return Read(exc.error_code, (), hw, lso, self.log_start_offset)
        aborted = None
        if isolation == READ_COMMITTED:
            # The data ends at or below the LSO: every aborted transaction it may
            # hold starts below it (a superset of Kafka's bound is harmless).
            aborted = self.producers.aborted_between(fetch_offset, limit) if slices else []
        return Read(0, slices, hw, lso, self.log_start_offset, aborted)

    def fetchable_offset(self, isolation: int = READ_UNCOMMITTED) -> int:
        return self.last_stable_offset if isolation == READ_COMMITTED else self.high_watermark

    def delete_records(self, offset: int) -> int:
        """DeleteRecords (``-1``: up to the HW). Returns the new log start; raises
        OffsetOutOfRangeError past the HW. Producers wholly below it are forgotten."""
        low = self.log.delete_records_before(self.high_watermark if offset == -1 else offset)
        self.producers.forget_below(low)
        return low
