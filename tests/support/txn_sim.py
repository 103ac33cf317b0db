"""A seeded simulation of transactions: the pure transaction coordinator driving
real partition state machines, with crashes between every pair of steps.

The world: producers with transactional ids, three data partitions
(:class:`~odradek.replication.partition.PartitionState` on a
:class:`~odradek.storage.memfs.MemoryFileSystem`, every append flushed), and
the coordinator's log (the list of ``__transaction_state`` records that were
committed). Each event is one step a real broker takes, in the order
:mod:`odradek.broker.coordinators.txn_runtime` takes them:

* a client call: InitProducerId, AddPartitionsToTxn, a transactional produce
  (only to a partition of the ongoing transaction, as verification demands),
  EndTxn commit or abort — each decided by the coordinator, its record
  appended to the coordinator log, then replayed;
* one marker of a decided transaction written to one partition;
* CompleteX once a transaction's markers are all written;
* the clock passing a transaction's timeout (fence and abort);
* a **crash**: the coordinator's memory, the marker jobs in flight and the
  partitions' memory are lost; the coordinator is rebuilt by replaying its
  log, the partitions reopen from their files, and PrepareX transactions get
  their marker jobs again.

Each decision is named by the position of its PrepareX record in the
coordinator log. After every event :meth:`TxnSim.check` holds: every marker
written for a decision has that decision's type (a crash never turns a
commit into an abort or back), and the LSO never passes an open
transaction. :meth:`TxnSim.quiesce` then runs every pending job and timeout
to the end and checks that every decision reached every one of its
partitions (no transaction ends half committed), that nothing is left open
(LSO == HW everywhere), and that a read_committed reader, filtering with
the Fetch answer's aborted transactions as clients do, sees exactly the
records followed in their partition by their producer's COMMIT marker.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from odradek.common.clock import ManualClock
from odradek.coordinator.txn.coordinator import (
    Decision,
    MarkerJob,
    TransactionCoordinator,
    TxnConfig,
    TxnState,
)
from odradek.coordinator.txn.records import TxnRecord, decode, encode
from odradek.replication.partition import READ_COMMITTED, Origin, PartitionState
from odradek.storage import Log, LogConfig, MemoryFileSystem
from odradek.wire.batch import BatchHeader
from odradek.wire.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    Record,
    build_batch,
    control_record,
    decode_batches,
)
from odradek.wire.records import read_marker as wire_read_marker

PARTITIONS = 3
IDS = ("a", "b", "c")
NOW = 1_700_000_000_000


@dataclass
class Producer:
    tid: str
    pid: int = -1
    epoch: int = -1
    seq: dict[int, int] = field(default_factory=dict)
    added: set[int] = field(default_factory=set)
    v2: bool = False
    """This client instance runs transactions v2 (txn_sim_v2)."""


@dataclass
class TxnSim:
    seed: int
    rng: random.Random = field(init=False)
    clock: ManualClock = field(init=False)
    fs: MemoryFileSystem = field(init=False)
    coordinator: TransactionCoordinator = field(init=False)
    txn_log: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    parts: list[PartitionState] = field(default_factory=list)
    jobs: list[tuple[MarkerJob, set[int], int]] = field(default_factory=list)
    """Decided transactions, the partitions still without their marker, and the
    decision's position in the coordinator log."""
    marks: dict[int, dict[int, bool]] = field(default_factory=dict)
    """Decision position -> partition -> commit? of the markers written for it."""
    producers: dict[str, Producer] = field(default_factory=dict)
    next_pid: int = 1000
    events: list[str] = field(default_factory=list)
    written: dict[tuple[int, int], list[bytes]] = field(default_factory=dict)
    """(pid, epoch) -> values written in that transaction (all partitions)."""

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.clock = ManualClock(NOW)
        self.fs = MemoryFileSystem(self.clock)
        self.coordinator = self._new_coordinator()
        self.parts = [self._open(i) for i in range(PARTITIONS)]
        self.producers = {t: Producer(t) for t in IDS}

    def _new_coordinator(self) -> TransactionCoordinator:
        return TransactionCoordinator(TxnConfig(max_timeout_ms=60_000))

    def _open(self, index: int) -> PartitionState:
        log = Log.open(self.fs, f"/d/t-{index}", LogConfig(), self.clock)
        return PartitionState("t", index, log, local_id=1)

    # -- events ---------------------------------------------------------------------

    def step(self) -> str:
        roll = self.rng.random()
        if roll < 0.04:
            event = self._crash()
        elif roll < 0.30 and self.jobs:
            event = self._marker_step()
        elif roll < 0.33:
            self.clock.advance(self.rng.choice((50, 200, 1000, 1000, 7000)))
            event = self._timeouts()
        else:
            event = self._client_step(self.producers[self.rng.choice(IDS)])
        self.events.append(event)
        self.check(event)
        return event

    def _run(self, decision: Decision) -> None:
        """The shell's ``run``: append the record, replay it, start its markers."""
        if decision.record is not None:
            key, value = encode(decision.record)
            self.txn_log.append((key, value))
            self.coordinator.replay(decode(key, value))
        if decision.markers is not None:
            assert decision.record is not None
            self.jobs.append((decision.markers, self._indexes(decision.markers),
                              len(self.txn_log) - 1))

    @staticmethod
    def _indexes(job: MarkerJob) -> set[int]:
        return {i for _, i in job.partitions}

    def _client_step(self, p: Producer) -> str:
        now = self.clock.now_ms()
        c = self.coordinator
        choice = self.rng.random()
        if p.pid < 0 or choice < 0.08:
            d = c.init_producer_id(p.tid, 5000, now, self._new_pid)
            self._run(d)
            if d.error == 0:
                p.pid, p.epoch, p.seq, p.added = d.producer_id, d.producer_epoch, {}, set()
            return f"init {p.tid} -> {d.error.name} {d.producer_id}/{d.producer_epoch}"
        if choice < 0.30:
            index = self.rng.randrange(PARTITIONS)
            d = c.add_partitions(p.tid, p.pid, p.epoch, [("t", index)], now)
            self._run(d)
            if d.error == 0:
                p.added.add(index)
            else:
                p.pid = -1  # fenced or confused: a real client starts over with init
            return f"add {p.tid} t-{index} -> {d.error.name}"
        if choice < 0.85:
            return self._produce(p)
        commit = self.rng.random() < 0.7
        d = c.end_transaction(p.tid, p.pid, p.epoch, commit, now)
        self._run(d)
        p.added = set()
        if d.error:
            p.pid = -1
        return f"end {p.tid} commit={commit} -> {d.error.name}"

    def _new_pid(self) -> int:
        self.next_pid += 1
        return self.next_pid

    def _produce(self, p: Producer) -> str:
        if not p.added:
            return f"produce {p.tid}: nothing added"
        return self._append(p, self.rng.choice(sorted(p.added)))

    def _append(self, p: Producer, index: int, verify: bool = True) -> str:
        """A transactional batch of ``p`` to partition ``index``, verified first
        unless ``verify`` is false (a broker whose transaction coordinator is
        another one does not verify); its value names the producer, epoch,
        partition, sequence, and ``-v2`` for a transactions v2 client."""
        part = self.parts[index]
        entry = part.producers.producers.get(p.pid)
        open_here = entry is not None and entry.txn_first_offset >= 0 and entry.epoch == p.epoch
        if verify and not open_here and self.coordinator.verify(p.pid, p.epoch, ("t", index)):
            p.pid = -1
            return f"produce {p.tid} t-{index}: not verified"
        seq = p.seq.get(index, 0)
        value = f"{p.tid}-{p.pid}-{p.epoch}-{index}-{seq}{'-v2' if p.v2 else ''}".encode()
        batch = build_batch([Record(0, self.clock.now_ms(), None, value)], producer_id=p.pid,
                            producer_epoch=p.epoch, base_sequence=seq, transactional=True)
        result = part.append_as_leader(memoryview(batch), Origin.CLIENT)
        if result.error_code == 0:
            p.seq[index] = seq + 1
            self.written.setdefault((p.pid, p.epoch), []).append(value)
            part.log.flush()
        return f"produce {p.tid} t-{index} -> {result.error_code}"

    def _marker_step(self) -> str:
        job, left, pos = self.jobs[0]
        if left:
            index = min(left)
            kind = CONTROL_COMMIT if job.commit else CONTROL_ABORT
            batch = build_batch([control_record(kind, offset=0, timestamp=self.clock.now_ms())],
                                producer_id=job.producer_id, producer_epoch=job.producer_epoch,
                                transactional=True, control=True)
            result = self.parts[index].append_as_leader(memoryview(batch), Origin.COORDINATOR)
            assert result.error_code in (0, 47), result  # 47: a newer epoch got there first
            self.parts[index].log.flush()
            left.discard(index)
            if result.error_code == 0:
                self.marks.setdefault(pos, {})[index] = job.commit
            return f"marker {job.transactional_id} commit={job.commit} t-{index}"
        self.jobs.pop(0)
        self._run(self.coordinator.complete(job, self.clock.now_ms()))
        return f"complete {job.transactional_id} commit={job.commit}"

    def _timeouts(self) -> str:
        decisions = self.coordinator.abort_expired(self.clock.now_ms())
        for d in decisions:
            self._run(d)
        return f"clock {self.clock.now_ms() - NOW}: {len(decisions)} aborted"

    def _crash(self) -> str:
        self.jobs = []
        for part in self.parts:
            part.log.close()
        self.parts = [self._open(i) for i in range(PARTITIONS)]
        self.coordinator = self._new_coordinator()
        for key, value in self.txn_log:
            self.coordinator.replay(decode(key, value))
        self.jobs = [(j, self._indexes(j), self._decision_of(j.transactional_id))
                     for j in self.coordinator.pending_markers()]
        return "crash"

    def _decision_of(self, tid: str) -> int:
        """Position of the last PrepareX record of ``tid`` in the coordinator log."""
        for pos in range(len(self.txn_log) - 1, -1, -1):
            record = decode(*self.txn_log[pos])
            if record.transactional_id == tid and record.value is not None and (
                    record.value.transaction_status in (2, 3)):
                return pos
        raise AssertionError(f"no decision of {tid} in the log")

    def _decided(self, pos: int) -> tuple[bool, set[int]]:
        """Commit? and the partitions of the decision at ``pos``."""
        value = decode(*self.txn_log[pos]).value
        assert value is not None
        return value.transaction_status == 2, {
            i for t in value.transaction_partitions or () for i in t.partition_ids}

    # -- invariants -----------------------------------------------------------------

    def check(self, event: str) -> None:
        where = f"seed {self.seed}, after {len(self.events)} events ({event!r})"
        for part in self.parts:
            assert part.last_stable_offset <= part.high_watermark, where
            for first in part.producers.ongoing.values():
                assert part.last_stable_offset <= first, where
        for pos, marks in self.marks.items():
            commit, partitions = self._decided(pos)
            assert set(marks) <= partitions, where
            assert set(marks.values()) == {commit}, f"{where}: decision {pos} split: {marks}"

    def quiesce(self) -> None:
        """Run every job and timeout to the end, then check the outcome."""
        for _ in range(10_000):
            if self.jobs:
                self.check(self._marker_step())
                continue
            self.clock.advance(10_000)
            if not self.coordinator.abort_expired(self.clock.now_ms()):
                break
            self._timeouts()
        where = f"seed {self.seed}"
        assert not self.jobs, where
        for meta in self.coordinator.transactions.values():
            assert meta.state not in (TxnState.ONGOING, TxnState.PREPARE_COMMIT,
                                      TxnState.PREPARE_ABORT), (where, meta)
        for pos in {p for p, (k, v) in enumerate(self.txn_log)
                    if v is not None and decode(k, v).value is not None
                    and decode(k, v).value.transaction_status in (2, 3)}:  # type: ignore[union-attr]
            commit, partitions = self._decided(pos)
            written = self.marks.get(pos, {})
            # A partition may refuse a marker of an older epoch (a later fence
            # already ended that transaction there): nothing of it is left open.
            assert set(written) <= partitions, where
            assert set(written.values()) <= {commit}, f"{where}: decision {pos} split"
        for part in self.parts:
            assert part.last_stable_offset == part.high_watermark, where
            assert self._read_committed(part) == self._committed_in_log(part), (
                f"{where}: t-{part.index} read_committed differs from the log's decisions")

    @staticmethod
    def _read_committed(part: PartitionState) -> list[bytes]:
        """What a client reading with isolation_level=1 keeps (aiokafka's filter)."""
        read = part.read(0, 1 << 30, READ_COMMITTED)
        pending = sorted((a.first_offset, a.producer_id) for a in read.aborted or ())
        data = part.log.read_records(0, 1 << 30, max_offset=part.last_stable_offset)
        aborted: set[int] = set()
        out: list[bytes] = []
        for header, records in decode_batches(data):
            while pending and pending[0][0] <= header.base_offset:
                aborted.add(pending.pop(0)[1])
            if header.is_control:
                kind = wire_read_marker(encode_batch_bytes(header, records), 0)[0]
                if kind == CONTROL_ABORT:
                    aborted.discard(header.producer_id)
                continue
            if header.is_transactional and header.producer_id in aborted:
                continue
            out.extend(r.value for r in records if r.value is not None)
        return out

    @staticmethod
    def _committed_in_log(part: PartitionState) -> list[bytes]:
        """The truth: records whose producer's next marker in this partition commits."""
        data = part.log.read_records(0, 1 << 30, max_offset=part.high_watermark)
        batches = decode_batches(data)
        out: list[bytes] = []
        for i, (header, records) in enumerate(batches):
            if header.is_control:
                continue
            if not header.is_transactional:
                out.extend(r.value for r in records if r.value is not None)
                continue
            for later, later_records in batches[i + 1:]:
                if later.is_control and later.producer_id == header.producer_id:
                    kind = wire_read_marker(encode_batch_bytes(later, later_records), 0)[0]
                    if kind == CONTROL_COMMIT:
                        out.extend(r.value for r in records if r.value is not None)
                    break
        return out


def encode_batch_bytes(header: BatchHeader, records: list[Record]) -> bytes:
    """A control batch again as bytes (to read its marker type)."""
    return build_batch(records, base_offset=header.base_offset,
                       producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                       transactional=True, control=True)


def run(seed: int, steps: int = 300) -> TxnSim:
    sim = TxnSim(seed)
    try:
        for _ in range(steps):
            sim.step()
        sim.quiesce()
    except AssertionError as exc:
        raise AssertionError(f"seed {seed}: {exc}\nlast events: {sim.events[-15:]}") from exc
    return sim


__all__ = ["TxnRecord", "TxnSim", "run"]
