"""A seeded simulation of a replicated partition with leader changes, for the pure core
:class:`~odradek.replication.partition.PartitionState`.

The world: ``replicas`` brokers, each with a real ``PartitionState`` over a real
:class:`~odradek.storage.log.Log` on its own
:class:`~odradek.storage.memfs.MemoryFileSystem`, one
:class:`~odradek.common.clock.ManualClock`, and a small controller written here in
plain Python after Kafka's KRaft rules for one partition:

* the partition record is (leader, leader epoch, partition epoch, ISR); every
  change bumps the partition epoch, every leader change the leader epoch too;
* ISR changes come from the leader as AlterPartition requests, refused with
  FENCED_LEADER_EPOCH (not the leader, or an older leader epoch),
  INVALID_UPDATE_VERSION (an older partition epoch) or INELIGIBLE_REPLICA (a
  member to add that is fenced, or whose broker epoch as of its last fetch is
  not its current one: KIP-903; a broker gets a new epoch at each restart);
* a fenced broker (crashed, or cut off from the controller) leaves the ISR
  unless it is its last member; a fenced leader is replaced by a live ISR
  member (clean elections only), or by none (leader -1) until the last member
  comes back; the controller also moves leadership between live ISR members
  now and then (a preferred-leader election);
* it pushes the metadata (a version, the partition record, the live brokers
  with their epochs) to every broker on each change and now and then to one;
  a broker ignores a push older than one it applied, and applies the
  partition record only when its partition epoch is newer than its own.

Brokers act as the IO shell would. Followers fetch from the leader they know
(fetch offset = log end, last fetched epoch, their broker epoch and current
leader epoch; the leader answers FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH to
another leader epoch, since :meth:`PartitionState.read_for_follower` does not
look at it), truncate on a diverging epoch or OFFSET_OUT_OF_RANGE, and append
an answer only if it is still wanted (same leader, epoch and log end as when
asked). Leaders propose ISR changes (:meth:`PartitionState.propose_isr`, on a
fetch that says ``expand`` and on ticks, with the live brokers' epochs as
``eligible``), resend an AlterPartition whose request or answer was lost,
drop a proposal the controller refused as INELIGIBLE_REPLICA or that a newer
partition epoch overtook, and delete records now and then (never past the
idempotent producer's last batch: a producer whose state is gone may have a
retry written twice, in Kafka too), so followers meet OFFSET_OUT_OF_RANGE
and log starts inside batches. The shell keeps the log start in its
log-start-offset checkpoint whenever it moves (``durable_log_start``; with
Kafka's periodic checkpoint a crash can bring deleted records back, and
records deleted before they were reconciled can then differ between
replicas), and flushes a log when an append says ``flush_due`` (a segment
was rolled) before anything else is written to it (``flush_on_roll``;
otherwise a crash can lose an older segment's unsynced tail and keep a newer
one's: a hole below the log end that no divergence check sees).

Producers write to any broker that believes it leads (a zombie too): plain
batches with acks=1 and acks=-1, and an idempotent producer (acks=-1) that
resends its batch until it is acknowledged. An acks=-1 write is acknowledged
when :meth:`PartitionState.replicated` says 0 on the broker it went to, that
broker still leading in the epoch it appended in; the client looks now and
then, so the ISR may have shrunk meanwhile (NOT_ENOUGH_REPLICAS_AFTER_APPEND).

Faults: every message (metadata, fetches, AlterPartition) is delayed,
reordered or dropped; brokers crash (losing what they had not synced, torn
tails included: the crash model of ``partition_sim.py``; in-flight messages
to and from them die with their connections), stay down a while and restart
with recovery; the controller fences live brokers (zombies) and unfences
them, and moves leadership; the clock jumps past
``replica.lag.time.max.ms`` so ISRs shrink; logs are flushed now and then.
One fault is left out on purpose: the last member of the ISR never loses
its unsynced tail (it is flushed before it crashes). Kafka loses
acknowledged records then too (its ISR cannot shrink further; KIP-966's
eligible leader replicas address it).

After every event :meth:`ReplicationSim.check` asserts, with the seed:

* every broker: ``log start <= HW <= log end``;
* at most one broker ever leads in a leader epoch, the one the controller
  elected; a leader's HW never moves back while it leads in that epoch, and
  is a batch boundary;
* the committed prefix (every batch below any leader's HW, zombies'
  included) never changes or shrinks: each broker's log below its own HW is
  that prefix, byte for byte, and a prefix of the current leader's log;
  every live broker in the controller's ISR (the current leader among them)
  holds all of it from its log start;
* every acknowledged acks=-1 write is in the committed prefix, with its bytes.

:meth:`ReplicationSim.heal` then stops the faults, restarts and unfences every
broker and runs until the ISR is every replica, every HW is the log end and
the logs are identical (the same batches from the later log start on); every
acknowledged write is then in the log, and the idempotent producer's batches
once each. A failure raises :class:`SimFailure` naming the seed, with the last
events; ``python -m tests.support.replication_sim SEED`` replays a seed and
prints the whole trace.
"""

from __future__ import annotations

import random
import sys
from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from odradek.common.clock import ManualClock
from odradek.replication.partition import Origin, PartitionState
from odradek.storage import Log, LogConfig, MemoryFileSystem
from odradek.wire.batch import read_batch_header
from odradek.wire.errors import ErrorCode
from odradek.wire.records import Record, build_batch

CONTROLLER = 0
DIR = "/data/sim-0"
LAG_MS = 300
"""``replica.lag.time.max.ms``."""
SEGMENT_BYTES = 4096
IDEMPOTENT_PID = 77
STEPS = 4000
"""Events per run before :meth:`ReplicationSim.heal` (the tests' and ``main``'s)."""


class SimFailure(AssertionError):
    pass


class _CountedLog(Log):
    """A :class:`Log` whose instances take attributes (``Log`` has ``__slots__``):
    the sim wraps their truncations to count them."""


# -- messages ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    """The controller's record of the partition."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: frozenset[int]


@dataclass(frozen=True, slots=True)
class MetadataPush:
    src: int
    dst: int
    version: int
    partition: PartitionRecord
    live: tuple[tuple[int, int], ...]
    """(broker, broker epoch) of every live (registered, unfenced) broker."""


@dataclass(frozen=True, slots=True)
class FetchRequest:
    src: int
    dst: int
    serial: int
    leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_bytes: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    src: int
    dst: int
    serial: int
    leader_epoch: int
    fetch_offset: int
    error: int
    data: bytes = b""
    high_watermark: int = -1
    log_start: int = -1
    log_end: int = -1
    diverging_epoch: int = -1
    diverging_end_offset: int = -1


@dataclass(frozen=True, slots=True)
class AlterPartition:
    src: int
    dst: int
    serial: int
    leader_epoch: int
    partition_epoch: int
    isr: frozenset[int]
    broker_epochs: tuple[tuple[int, int], ...]
    """(member, its broker epoch at its last fetch), as KIP-903 sends them."""


@dataclass(frozen=True, slots=True)
class AlterPartitionResponse:
    src: int
    dst: int
    serial: int
    error: int
    partition: PartitionRecord | None


Message = MetadataPush | FetchRequest | FetchResponse | AlterPartition | AlterPartitionResponse


# -- actors --------------------------------------------------------------------------


@dataclass(slots=True)
class Controller:
    replicas: tuple[int, ...]
    leader: int
    isr: set[int]
    live: set[int]
    leader_epoch: int = 1
    partition_epoch: int = 1
    version: int = 1
    """Bumped by every change (the metadata log's offset, in effect)."""
    epoch_leaders: dict[int, int] = field(default_factory=dict)
    broker_epochs: dict[int, int] = field(default_factory=dict)
    """Each broker's epoch: a new one at every registration (restart)."""
    next_broker_epoch: int = 1

    def register(self, broker: int) -> int:
        self.broker_epochs[broker] = self.next_broker_epoch
        self.next_broker_epoch += 1
        return self.broker_epochs[broker]

    def live_epochs(self) -> tuple[tuple[int, int], ...]:
        return tuple(sorted((b, self.broker_epochs[b]) for b in self.live))

    def record(self) -> PartitionRecord:
        return PartitionRecord(self.leader, self.leader_epoch, self.partition_epoch,
                               frozenset(self.isr))


@dataclass(slots=True)
class Broker:
    id: int
    fs: MemoryFileSystem
    state: PartitionState
    alive: bool = True
    incarnation: int = 0
    broker_epoch: int = -1
    metadata_version: int = 0
    live: dict[int, int] = field(default_factory=dict)
    """The live brokers and their epochs as of the last metadata applied
    (``eligible`` for ISR joins)."""
    fetching: int = 0
    """Serial of the fetch in flight (0: none)."""
    alter: AlterPartition | None = None
    """The AlterPartition in flight for ``state.pending_isr``."""
    alter_lost: bool = False
    log_start_checkpoint: int = 0
    """The log start as the shell's log-start-offset-checkpoint has it."""


@dataclass(slots=True)
class Pending:
    """An acks=-1 write waiting for :meth:`PartitionState.replicated`."""

    broker: int
    incarnation: int
    leader_epoch: int
    first_offset: int
    last_offset: int
    batch: bytes
    idempotent: bool


@dataclass(slots=True)
class LogView:
    """One broker's log as bytes from its first batch on, with each batch's base
    offset and position (rebuilt when the log was cut, extended when it grew)."""

    key: tuple[int, int, int]
    data: bytearray
    bases: list[int]
    positions: list[int]
    end: int

    def extend(self, more: bytes) -> None:
        pos = 0
        while pos < len(more):
            h = read_batch_header(more, pos)
            self.bases.append(h.base_offset)
            self.positions.append(len(self.data) + pos)
            pos += h.size
            self.end = h.next_offset
        self.data += more

    @property
    def first(self) -> int:
        return self.bases[0] if self.bases else self.end

    def span(self, lo: int, hi: int) -> bytes | None:
        """The bytes of the batches based in [lo, hi); None if no batch starts at
        ``lo`` (when ``lo`` is below the log end)."""
        if lo >= hi:
            return b""
        i = bisect_left(self.bases, lo)
        if i == len(self.bases):
            return b""
        if self.bases[i] != lo:
            return None
        j = bisect_left(self.bases, hi)
        end = self.positions[j] if j < len(self.positions) else len(self.data)
        return bytes(self.data[self.positions[i]:end])

    def is_boundary(self, offset: int) -> bool:
        """Whether a batch starts at ``offset`` or the log ends there."""
        if offset >= self.end:
            return offset == self.end
        i = bisect_left(self.bases, offset)
        return i < len(self.bases) and self.bases[i] == offset


def _empty_view(key: tuple[int, int, int], start: int) -> LogView:
    return LogView(key, bytearray(), [], [], start)


# -- the simulation ------------------------------------------------------------------


class ReplicationSim:
    """See the module docstring. ``check_fetch_epoch=False`` drops the leader's check
    of a fetch's current leader epoch, ``durable_log_start=False`` restarts brokers
    at the log start their segments give, ``flush_on_roll=False`` leaves rolled
    segments unflushed, ``broker_epochs=False`` proposes and accepts ISR members
    without their broker epochs (to show what each guards against)."""

    def __init__(self, seed: int, replicas: int = 3, min_isr: int = 2, *,
                 loss: float = 0.1, crash_rate: float = 0.006,
                 check_fetch_epoch: bool = True, durable_log_start: bool = True,
                 flush_on_roll: bool = True, broker_epochs: bool = True,
                 trace_len: int = 200) -> None:
        self.seed = seed
        self.min_isr = min_isr
        self.loss = loss
        self.crash_rate = crash_rate
        self.check_fetch_epoch = check_fetch_epoch
        self.durable_log_start = durable_log_start
        self.flush_on_roll = flush_on_roll
        self.broker_epochs = broker_epochs
        self.faults = True
        self.rng = random.Random(seed)
        self.clock = ManualClock()
        self.ids = tuple(range(1, replicas + 1))
        self.brokers: dict[int, Broker] = {}
        self.cuts = dict.fromkeys(self.ids, 0)
        """How many times each broker's log was cut (see ``_open``)."""
        for b in self.ids:
            fs = MemoryFileSystem(self.clock)
            self.brokers[b] = Broker(b, fs, self._open(b, fs, clean=True))
        self.controller = Controller(self.ids, self.ids[0], set(self.ids), set(self.ids))
        self.controller.epoch_leaders[1] = self.ids[0]
        for br in self.brokers.values():
            br.broker_epoch = self.controller.register(br.id)
        self.network: list[tuple[int, Message]] = []
        self.serial = 0
        self.events = 0
        self.trace: deque[str] = deque(maxlen=trace_len)
        self.full_trace: list[str] | None = None
        # the client side
        self.value = 0
        self.pending: list[Pending] = []
        self.acked: dict[int, bytes] = {}
        """first offset -> the batch (from its magic byte on) of acknowledged acks=-1 writes."""
        self.idem_seq = 0
        self.idem_batch: bytes | None = None
        # what the checks remember
        self.views: dict[int, LogView] = {}
        self.committed = _empty_view((0, 0, 0), 0)
        self.leaders_seen: dict[int, int] = {}
        """leader epoch -> the broker seen leading in it."""
        self.leader_hw: dict[tuple[int, int, int], int] = {}
        """(broker, incarnation, leader epoch) -> its HW as last seen."""
        self.stats: dict[str, int] = {}
        self._push_all()

    def _open(self, b: int, fs: MemoryFileSystem, *, clean: bool,
              log_start: int = 0) -> PartitionState:
        log = _CountedLog.open(fs, DIR, LogConfig(segment_bytes=SEGMENT_BYTES), self.clock,
                               clean_shutdown=clean, log_start_offset=log_start)
        # The checks' view of a log is rebuilt after any cut, whoever makes it.
        for name in ("truncate_to", "truncate_fully_and_start_at"):
            setattr(log, name, self._counting(b, getattr(log, name)))
        # Followers of nobody until the controller's metadata says otherwise.
        return PartitionState("sim", 0, log, local_id=b, leader_id=-1, leader_epoch=0,
                              min_isr=self.min_isr)

    def _counting(self, b: int, cut: Callable[[int], None]) -> Callable[[int], None]:
        def counted(offset: int) -> None:
            self.cuts[b] += 1
            cut(offset)
        return counted

    # -- bookkeeping -------------------------------------------------------------------

    def note(self, line: str) -> None:
        text = f"{self.events:5d} t={self.clock.monotonic_ms():6d} {line}"
        self.trace.append(text)
        if self.full_trace is not None:
            self.full_trace.append(text)

    def fail(self, why: str) -> SimFailure:
        tail = "\n".join(self.trace)
        return SimFailure(f"seed {self.seed}, event {self.events}: {why}\n"
                          f"replay: python -m tests.support.replication_sim {self.seed}\n"
                          f"last events:\n{tail}")

    def _count(self, what: str) -> None:
        self.stats[what] = self.stats.get(what, 0) + 1

    def _send(self, msg: Message) -> None:
        self.network.append((self.clock.monotonic_ms() + self.rng.randint(0, 30), msg))

    def _next_serial(self) -> int:
        self.serial += 1
        return self.serial

    def _alive(self) -> list[Broker]:
        return [br for br in self.brokers.values() if br.alive]

    # -- events --------------------------------------------------------------------

    def step(self) -> None:
        """One event, chosen by weight (faults only while ``faults``), then the checks."""
        self.events += 1
        self.clock.advance(self.rng.randint(0, 5))
        choices = [
            (0.20, self._produce),
            (0.18, lambda: self._fetch(self.rng.choice(self.ids))),
            (0.37, self._deliver),
            (0.07, self._leader_tick),
            (0.04, lambda: self._push(self.rng.choice(self.ids))),
            (0.03, self._flush),
            (0.03, self._restart),
            (0.015, self._unfence),
        ]
        if self.faults:
            choices += [
                (0.004, self._clock_jump),
                (0.01, self._delete_records),
                (self.crash_rate, lambda: self._crash(self.rng.choice(self.ids))),
                (0.003, lambda: self._fence(self.rng.choice(self.ids))),
                (0.008, self._move_leader),
            ]
        roll = self.rng.random() * sum(w for w, _ in choices)
        event = choices[-1][1]
        for weight, candidate in choices:
            roll -= weight
            if roll < 0:
                event = candidate
                break
        what = event()
        self.note(what)
        self.check(what)

    def _clock_jump(self) -> str:
        self.clock.advance(LAG_MS + self.rng.randint(1, LAG_MS))
        return "clock jumps past replica.lag.time.max.ms"

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step()

    # producers

    def _value_bytes(self) -> bytes:
        self.value += 1
        return f"v{self.value}".encode()

    def _produce(self) -> str:
        leaders = [br for br in self._alive() if br.state.is_leader]
        if not leaders:
            return "produce: nobody leads"
        br = self.rng.choice(leaders)
        st = br.state
        kind = self.rng.choice(["acks=1", "acks=-1", "acks=-1", "idempotent"])
        if kind == "idempotent":
            if self.idem_batch is None:
                values = [self._value_bytes() for _ in range(self.rng.randint(1, 3))]
                self.idem_batch = build_batch(
                    [Record(i, 1, None, v) for i, v in enumerate(values)],
                    producer_id=IDEMPOTENT_PID, producer_epoch=0, base_sequence=self.idem_seq)
            batch = self.idem_batch
        else:
            values = [self._value_bytes() for _ in range(self.rng.randint(1, 3))]
            batch = build_batch([Record(i, 1, None, v) for i, v in enumerate(values)])
        acks = 1 if kind == "acks=1" else -1
        r = st.append_as_leader(memoryview(batch), Origin.CLIENT, required_acks=acks)
        if r.flush_due and self.flush_on_roll:
            st.log.flush()
        if r.error_code == ErrorCode.NOT_ENOUGH_REPLICAS:
            if acks != -1 or st.enough_replicas():
                raise self.fail(f"NOT_ENOUGH_REPLICAS with acks {acks}, ISR {st.isr}")
            self._count("not enough replicas")
            return f"produce {kind} to {br.id}: NOT_ENOUGH_REPLICAS (ISR {sorted(st.isr)})"
        c = self.controller
        zombie = br.id != c.leader or st.leader_epoch != c.leader_epoch
        if r.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and zombie:
            # A deposed leader may not have the batches its successor acknowledged.
            self._count("out of order on a zombie")
            return f"produce {kind} to {br.id} (deposed): OUT_OF_ORDER_SEQUENCE_NUMBER"
        if r.error_code != 0:
            raise self.fail(f"produce {kind} to {br.id} failed: {r}")
        if acks == -1:
            self.pending.append(Pending(br.id, br.incarnation, st.leader_epoch, r.first_offset,
                                        r.last_offset, batch, kind == "idempotent"))
        dup = " (duplicate)" if r.duplicate else ""
        return (f"produce {kind} to {br.id} at epoch {st.leader_epoch}: "
                f"{r.first_offset}..{r.last_offset}{dup}")

    def _observe_acks(self) -> None:
        keep = []
        for p in self.pending:
            br = self.brokers[p.broker]
            st = br.state
            if (not br.alive or br.incarnation != p.incarnation or not st.is_leader
                    or st.leader_epoch != p.leader_epoch):
                continue  # the client hears of an error or times out
            done = st.replicated(p.last_offset)
            if done is None:
                keep.append(p)
                continue
            if done != 0:
                self._count("not enough replicas after append")
                self.note(f"ack {p.first_offset}..{p.last_offset} from {p.broker}: {done}")
                continue
            self.acked[p.first_offset] = p.batch[16:]
            self._count("acked")
            mine = self.committed.span(p.first_offset, p.last_offset + 1)
            if mine is None or mine[16:] != p.batch[16:]:
                raise self.fail(f"acked write at {p.first_offset} from {p.broker} is not the "
                                f"committed batch there")
            if p.idempotent and p.batch is self.idem_batch:
                self.idem_seq += read_batch_header(p.batch).records_count
                self.idem_batch = None
            self.note(f"ack {p.first_offset}..{p.last_offset} from {p.broker}")
        self.pending = keep

    # followers

    def _fetch(self, b: int) -> str:
        br = self.brokers[b]
        st = br.state
        if not br.alive or br.fetching or st.is_leader or st.leader_id < 0:
            return f"fetch {b}: nothing to do"
        br.fetching = self._next_serial()
        req = FetchRequest(b, st.leader_id, br.fetching, st.leader_epoch, st.log_end_offset,
                           st.last_fetched_epoch, self.rng.choice([150, 600, 1 << 20]),
                           br.broker_epoch)
        self._send(req)
        return (f"{b} fetches from {st.leader_id} at {req.fetch_offset} "
                f"(epoch {req.leader_epoch}, last fetched epoch {req.last_fetched_epoch})")

    def _on_fetch(self, req: FetchRequest) -> str:
        br = self.brokers[req.dst]
        st = br.state
        now = self.clock.now_ms()
        if self.check_fetch_epoch and req.leader_epoch != st.leader_epoch:
            error = (ErrorCode.FENCED_LEADER_EPOCH if req.leader_epoch < st.leader_epoch
                     else ErrorCode.UNKNOWN_LEADER_EPOCH)
            self._send(FetchResponse(req.dst, req.src, req.serial, req.leader_epoch,
                                     req.fetch_offset, error))
            return f"{req.dst} refuses {req.src}'s fetch at epoch {req.leader_epoch}: {error}"
        rr = st.read_for_follower(req.src, req.fetch_offset, req.last_fetched_epoch,
                                  req.max_bytes, now, req.broker_epoch)
        data = st.log.read_bytes(rr.slices) if rr.slices else b""
        self._send(FetchResponse(req.dst, req.src, req.serial, req.leader_epoch,
                                 req.fetch_offset, rr.error_code, data, rr.high_watermark,
                                 rr.log_start_offset, rr.log_end_offset, rr.diverging_epoch,
                                 rr.diverging_end_offset))
        extra = ""
        if rr.expand:
            extra = " (may join the ISR) " + self._propose(br)
        if rr.diverging_epoch >= 0:
            return (f"{req.dst} answers {req.src}: diverging at epoch {rr.diverging_epoch} "
                    f"end {rr.diverging_end_offset}")
        return (f"{req.dst} answers {req.src} at {req.fetch_offset}: error {rr.error_code}, "
                f"{len(data)} bytes, HW {rr.high_watermark}{extra}")

    def _on_fetch_response(self, resp: FetchResponse) -> str:
        br = self.brokers[resp.dst]
        st = br.state
        if br.fetching == resp.serial:
            br.fetching = 0
        if (st.is_leader or st.leader_id != resp.src or st.leader_epoch != resp.leader_epoch
                or st.log_end_offset != resp.fetch_offset):
            return f"{resp.dst} drops a stale answer from {resp.src}"
        if resp.error == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._count("offset out of range")
            if resp.fetch_offset < resp.log_start:
                st.truncate_fully_and_start_at(resp.log_start)
                return (f"{resp.dst} is below {resp.src}'s log start: starts over at "
                        f"{resp.log_start}")
            st.truncate_to(resp.log_end)
            return f"{resp.dst} is past {resp.src}'s log end: truncates to {resp.log_end}"
        if resp.error:
            return f"{resp.dst} hears {resp.error} from {resp.src}"
        if resp.diverging_epoch >= 0:
            self._count("diverging")
            before = st.log_end_offset
            end = st.truncate_to_divergence(resp.diverging_epoch, resp.diverging_end_offset)
            return (f"{resp.dst} diverges from {resp.src} at epoch {resp.diverging_epoch} "
                    f"end {resp.diverging_end_offset}: log end {before} -> {end}")
        r = st.append_as_follower(memoryview(resp.data), resp.high_watermark, resp.log_start)
        if r.error_code:
            raise self.fail(f"{resp.dst} cannot append {resp.src}'s answer: {r}")
        if r.flush_due and self.flush_on_roll:
            st.log.flush()
        return (f"{resp.dst} appends {len(resp.data)} bytes from {resp.src}: log end "
                f"{st.log_end_offset}, HW {st.high_watermark}")

    # leaders and the ISR

    def _propose(self, br: Broker) -> str:
        st = br.state
        self._settle_alter(br)
        if not br.alive or not st.is_leader or br.alter is not None:
            return ""
        eligible = br.live if self.broker_epochs else set(br.live)
        isr = st.propose_isr(self.clock.now_ms(), LAG_MS, eligible)
        if isr is None:
            return ""
        epochs = tuple((b, st.replicas[b].broker_epoch) for b in sorted(isr)
                       if b != br.id and b in st.replicas)
        br.alter = AlterPartition(br.id, CONTROLLER, self._next_serial(), st.leader_epoch,
                                  st.partition_epoch, isr, epochs)
        br.alter_lost = False
        self._send(br.alter)
        self._count("isr proposals")
        return (f"{br.id} proposes ISR {sorted(isr)} (from {sorted(st.isr)}, "
                f"partition epoch {st.partition_epoch})")

    def _settle_alter(self, br: Broker) -> None:
        """Forget an AlterPartition that is over: its pending ISR is gone (confirmed, or
        a new term), or a newer partition epoch overtook it (the controller will
        never apply it: the pending change is dropped, as Kafka's new metadata
        replaces it)."""
        st, alter = br.state, br.alter
        if alter is None:
            return
        if st.pending_isr is None or st.leader_epoch != alter.leader_epoch:
            br.alter = None
        elif st.partition_epoch > alter.partition_epoch:
            st.isr_change_failed()
            br.alter = None

    def _leader_tick(self) -> str:
        leaders = [br for br in self._alive() if br.state.is_leader]
        if not leaders:
            return "tick: nobody leads"
        br = self.rng.choice(leaders)
        self._settle_alter(br)
        if br.alter is not None and br.alter_lost:
            br.alter_lost = False
            self._send(br.alter)
            return f"{br.id} resends AlterPartition {sorted(br.alter.isr)}"
        return f"tick {br.id}: " + (self._propose(br) or "no ISR change")

    def _on_alter(self, req: AlterPartition) -> str:
        c = self.controller
        error: int
        if req.src != c.leader or req.leader_epoch != c.leader_epoch:
            error = ErrorCode.FENCED_LEADER_EPOCH
        elif req.partition_epoch != c.partition_epoch:
            error = ErrorCode.INVALID_UPDATE_VERSION
        elif req.src not in req.isr or not req.isr <= set(c.replicas):
            error = ErrorCode.INVALID_REQUEST
        elif any(b not in c.live or (self.broker_epochs and dict(req.broker_epochs).get(b)
                                     != c.broker_epochs[b]) for b in req.isr - c.isr):
            error = ErrorCode.INELIGIBLE_REPLICA
        else:
            error = 0
            c.isr = set(req.isr)
            c.partition_epoch += 1
            c.version += 1
            self._push_all()
        self._send(AlterPartitionResponse(CONTROLLER, req.src, req.serial, error,
                                          c.record() if error == 0 else None))
        return (f"controller {'accepts' if not error else f'refuses ({error})'} ISR "
                f"{sorted(req.isr)} from {req.src}")

    def _on_alter_response(self, resp: AlterPartitionResponse) -> str:
        br = self.brokers[resp.dst]
        if br.alter is None or br.alter.serial != resp.serial:
            return f"{resp.dst} ignores a stale AlterPartition answer"
        if resp.error == 0:
            assert resp.partition is not None
            self._apply_partition(br, resp.partition)
        elif resp.error == ErrorCode.INELIGIBLE_REPLICA:
            br.state.isr_change_failed()  # not applied, and it never will be
            br.alter = None
        self._settle_alter(br)
        return f"{resp.dst} hears AlterPartition: {resp.error}"

    def _delete_records(self) -> str:
        leaders = [br for br in self._alive() if br.state.is_leader]
        if not leaders:
            return "delete records: nobody leads"
        br = self.rng.choice(leaders)
        st = br.state
        # Never past the idempotent producer's last batch: with its state forgotten
        # a retry would be written twice (so it is in Kafka).
        top = st.high_watermark
        entry = st.producers.producers.get(IDEMPOTENT_PID)
        if entry is not None and entry.batches:
            top = min(top, entry.batches[-1].last_offset)
        if top <= st.log_start_offset:
            return f"delete records on {br.id}: nothing to delete"
        offset = self.rng.randint(st.log_start_offset, top)
        low = st.delete_records(offset)
        self._count("delete records")
        return f"delete records on {br.id} below {offset}: log start {low}"

    def _flush(self) -> str:
        alive = self._alive()
        if not alive:
            return "flush: nobody"
        br = self.rng.choice(alive)
        br.state.log.flush()
        return f"flush {br.id} (log end {br.state.log_end_offset})"

    # metadata

    def _push(self, b: int) -> str:
        c = self.controller
        self._send(MetadataPush(CONTROLLER, b, c.version, c.record(), c.live_epochs()))
        return f"controller pushes metadata v{c.version} to {b}"

    def _push_all(self) -> None:
        for b in self.ids:
            self._push(b)

    def _on_metadata(self, msg: MetadataPush) -> str:
        br = self.brokers[msg.dst]
        if msg.version <= br.metadata_version:
            return f"{msg.dst} ignores metadata v{msg.version} (has v{br.metadata_version})"
        br.metadata_version = msg.version
        br.live = dict(msg.live)
        return f"{msg.dst} takes metadata v{msg.version}: " + self._apply_partition(
            br, msg.partition)

    def _apply_partition(self, br: Broker, p: PartitionRecord) -> str:
        st = br.state
        if p.partition_epoch <= st.partition_epoch:
            return f"partition epoch {p.partition_epoch} is not newer"
        changed = st.apply_metadata(p.leader, p.leader_epoch, p.partition_epoch,
                                    self.controller.replicas, p.isr, self.clock.now_ms())
        if changed:
            br.fetching = 0  # a fetch to the old leader is answered stale or not at all
        self._settle_alter(br)
        return (f"leader {p.leader} epoch {p.leader_epoch}, partition epoch "
                f"{p.partition_epoch}, ISR {sorted(p.isr)}"
                f"{' (role changed)' if changed else ''}")

    # controller decisions

    def _elect(self, exclude: int) -> None:
        c = self.controller
        candidates = [b for b in sorted(c.isr) if b in c.live and b != exclude]
        c.leader = self.rng.choice(candidates) if candidates else -1
        c.leader_epoch += 1
        c.epoch_leaders[c.leader_epoch] = c.leader

    def _controller_fence(self, b: int) -> str:
        c = self.controller
        if b not in c.live:
            return ""
        c.live.discard(b)
        c.version += 1
        changed = False
        if b in c.isr and len(c.isr) > 1:
            c.isr.discard(b)
            changed = True
        if c.leader == b:
            self._elect(b)
            changed = True
        if changed:
            c.partition_epoch += 1
        self._push_all()
        return (f"; controller fences {b}: leader {c.leader} epoch {c.leader_epoch}, "
                f"ISR {sorted(c.isr)}")

    def _controller_unfence(self, b: int) -> str:
        c = self.controller
        if b in c.live:
            return ""
        c.live.add(b)
        c.version += 1
        if c.leader == -1 and b in c.isr:
            c.leader = b
            c.leader_epoch += 1
            c.epoch_leaders[c.leader_epoch] = b
            c.partition_epoch += 1
        self._push_all()
        return f"; controller unfences {b}: leader {c.leader} epoch {c.leader_epoch}"

    def _fence(self, b: int) -> str:
        if not self.brokers[b].alive or b not in self.controller.live:
            return f"fence {b}: not live"
        self._count("fences")
        return f"{b} loses its controller session" + self._controller_fence(b)

    def _unfence(self) -> str:
        fenced = [br.id for br in self._alive() if br.id not in self.controller.live]
        if not fenced:
            return "unfence: none fenced"
        b = self.rng.choice(fenced)
        return f"{b} is back in touch" + self._controller_unfence(b)

    def _move_leader(self) -> str:
        c = self.controller
        others = [b for b in sorted(c.isr) if b in c.live and b != c.leader]
        if c.leader < 0 or not others:
            return "move leader: no other live ISR member"
        old = c.leader
        c.leader = self.rng.choice(others)
        c.leader_epoch += 1
        c.epoch_leaders[c.leader_epoch] = c.leader
        c.partition_epoch += 1
        c.version += 1
        self._push_all()
        self._count("leader moves")
        return f"controller moves leadership {old} -> {c.leader} (epoch {c.leader_epoch})"

    # crashes

    def _crash(self, b: int) -> str:
        br = self.brokers[b]
        if not br.alive:
            return f"crash {b}: already down"
        last = self.controller.isr == {b}
        if last:
            br.state.log.flush()  # see the module docstring
        br.fs.crash(self.rng)
        br.alive = False
        br.incarnation += 1
        self.network = [(t, m) for t, m in self.network if b not in (m.src, m.dst)]
        self._count("crashes")
        return (f"crash {b}{' (the last ISR member, flushed)' if last else ''}"
                + self._controller_fence(b))

    def _restart(self, br: Broker | None = None) -> str:
        if br is None:
            down = [x for x in self.brokers.values() if not x.alive]
            if not down:
                return "restart: nobody down"
            br = self.rng.choice(down)
        br.state = self._open(br.id, br.fs, clean=False, log_start=br.log_start_checkpoint)
        br.alive = True
        br.broker_epoch = self.controller.register(br.id)
        br.metadata_version = 0
        br.live = {}
        br.fetching = 0
        br.alter = None
        br.alter_lost = False
        return (f"restart {br.id}: recovered to log end {br.state.log_end_offset}"
                + self._controller_unfence(br.id))

    # the network

    def _deliver(self) -> str:
        if not self.network:
            return "idle"
        # Any message may go next (reordering), but one that is due is likelier.
        now = self.clock.monotonic_ms()
        due = [i for i, (t, _) in enumerate(self.network) if t <= now]
        i = self.rng.choice(due) if due and self.rng.random() < 0.8 else \
            self.rng.randrange(len(self.network))
        _, msg = self.network.pop(i)
        if self.rng.random() < self.loss:
            self._lost(msg)
            return f"lost {type(msg).__name__} {msg.src} -> {msg.dst}"
        if msg.dst != CONTROLLER and not self.brokers[msg.dst].alive:
            return f"{msg.dst} is down: {type(msg).__name__} dropped"
        if isinstance(msg, MetadataPush):
            return self._on_metadata(msg)
        if isinstance(msg, FetchRequest):
            return self._on_fetch(msg)
        if isinstance(msg, FetchResponse):
            return self._on_fetch_response(msg)
        if isinstance(msg, AlterPartition):
            return self._on_alter(msg)
        return self._on_alter_response(msg)

    def _lost(self, msg: Message) -> None:
        """A lost message's sender times out (a follower may fetch again, a leader
        resends its AlterPartition)."""
        if isinstance(msg, FetchRequest | FetchResponse):
            follower = self.brokers[msg.src if isinstance(msg, FetchRequest) else msg.dst]
            if follower.fetching == msg.serial:
                follower.fetching = 0
        elif isinstance(msg, AlterPartition | AlterPartitionResponse):
            leader = self.brokers[msg.src if isinstance(msg, AlterPartition) else msg.dst]
            if leader.alter is not None and leader.alter.serial == msg.serial:
                leader.alter_lost = True

    # -- invariants ----------------------------------------------------------------

    def view(self, br: Broker) -> LogView:
        """``br``'s log as a :class:`LogView`, kept up to date cheaply."""
        log = br.state.log
        key = (br.incarnation, self.cuts[br.id], log.log_start_offset)
        v = self.views.get(br.id)
        leo = log.log_end_offset
        if v is None or v.key != key or leo < v.end:
            v = _empty_view(key, log.log_start_offset)
            self.views[br.id] = v
            if leo > log.log_start_offset:
                v.extend(log.read_records(log.log_start_offset, 1 << 30))
        elif leo > v.end:
            v.extend(log.read_records(v.end, 1 << 30))
        if v.end != leo:
            raise self.fail(f"a hole in {br.id}'s log: its batches end at {v.end}, its log "
                            f"end is {leo}")
        return v

    def check(self, event: str) -> None:
        c = self.controller
        alive = self._alive()
        if self.durable_log_start:
            for br in alive:
                br.log_start_checkpoint = br.state.log_start_offset
        # Every broker's offsets are in order; leaders are the controller's, one per
        # epoch, and their HW never moves back while they lead.
        for br in alive:
            st = br.state
            if not st.log_start_offset <= st.high_watermark <= st.log_end_offset:
                raise self.fail(f"{br.id}: log start {st.log_start_offset}, HW "
                                f"{st.high_watermark}, log end {st.log_end_offset}")
            if not st.is_leader:
                continue
            epoch = st.leader_epoch
            seen = self.leaders_seen.setdefault(epoch, br.id)
            if seen != br.id:
                raise self.fail(f"{br.id} and {seen} both lead in epoch {epoch}")
            if c.epoch_leaders.get(epoch) != br.id:
                raise self.fail(f"{br.id} leads in epoch {epoch}, which the controller gave "
                                f"to {c.epoch_leaders.get(epoch)}")
            key = (br.id, br.incarnation, epoch)
            before = self.leader_hw.get(key, -1)
            if st.high_watermark < before:
                raise self.fail(f"leader {br.id}'s HW moved back {before} -> "
                                f"{st.high_watermark} in epoch {epoch}")
            self.leader_hw[key] = st.high_watermark
        # The committed prefix grows by what any leader's HW passed (after checking
        # that leader agrees with what was committed before).
        cv = self.committed
        for br in alive:
            st = br.state
            if not st.is_leader or st.high_watermark <= cv.end:
                continue
            v = self.view(br)
            self._agrees(br.id, v, cv.end)
            hw = st.high_watermark
            if hw != st.log_start_offset and not v.is_boundary(hw):
                raise self.fail(f"leader {br.id}'s HW {hw} is inside a batch")
            if v.first > cv.end:
                raise self.fail(f"leader {br.id} starts at {v.first}, past the committed "
                                f"end {cv.end}")
            more = v.span(cv.end, hw)
            if more is None:
                raise self.fail(f"leader {br.id} has no batch at the committed end {cv.end}")
            cv.extend(more)
            if cv.end != hw:
                raise self.fail(f"committed end {cv.end} is not leader {br.id}'s HW {hw}")
        # Each broker's log below its own HW is committed, and a prefix of the
        # current leader's; every live ISR member holds the whole committed prefix.
        for br in alive:
            st = br.state
            if st.high_watermark > cv.end:
                raise self.fail(f"{br.id}'s HW {st.high_watermark} is past the committed "
                                f"end {cv.end}")
            self._agrees(br.id, self.view(br), st.high_watermark)
        leader = self.brokers.get(c.leader)
        if leader is not None and leader.alive:
            lv = self.view(leader)
            for br in alive:
                v = self.view(br)
                lo = max(v.first, lv.first)
                hi = br.state.high_watermark
                if lo < hi and v.span(lo, hi) != lv.span(lo, hi):
                    raise self.fail(f"{br.id}'s log below its HW {hi} is not a prefix of "
                                    f"the leader {c.leader}'s")
        for b in sorted(c.isr):
            br = self.brokers[b]
            if br.alive:
                v = self.view(br)
                if v.end < cv.end:
                    raise self.fail(f"ISR member {b} ends at {v.end}, before the committed "
                                    f"end {cv.end}")
                self._agrees(b, v, cv.end)
        # The client hears of its acks=-1 writes now or later (the ISR may have
        # shrunk meanwhile: NOT_ENOUGH_REPLICAS_AFTER_APPEND).
        if self.rng.random() < 0.5 or not self.faults:
            self._observe_acks()

    def _agrees(self, b: int, v: LogView, hi: int) -> None:
        """``v``'s batches below ``hi`` are the committed ones, byte for byte."""
        lo = v.first
        hi = min(hi, self.committed.end, v.end)
        if lo >= hi:
            return
        mine, committed = v.span(lo, hi), self.committed.span(lo, hi)
        if mine is None or committed is None or mine != committed:
            raise self.fail(f"{b}'s log in [{lo}, {hi}) is not the committed one")

    # -- the end -------------------------------------------------------------------

    def converged(self) -> bool:
        c = self.controller
        if self.network or c.leader < 0 or c.isr != set(self.ids):
            return False
        leader = self.brokers[c.leader]
        lv = self.view(leader)
        for br in self.brokers.values():
            st = br.state
            if (not br.alive or st.leader_epoch != c.leader_epoch
                    or st.partition_epoch != c.partition_epoch
                    or st.high_watermark != st.log_end_offset or st.pending_isr is not None):
                return False
            # The same batches from the later log start on (a leader elected before
            # its HW passed its old leader's log start starts lower than followers).
            v = self.view(br)
            lo = max(v.first, lv.first)
            if v.end != lv.end or v.span(lo, v.end) != lv.span(lo, lv.end):
                return False
        return True

    def heal(self, max_events: int = 20_000) -> None:
        """Stop the faults, bring every broker back and in touch, and run until every
        log is the same, the ISR is every replica and every HW is the log end."""
        self.faults = False
        self.loss = 0.0
        for b in self.ids:
            br = self.brokers[b]
            if not br.alive:
                self.events += 1
                self.note(self._restart(br))
        for b in self.ids:
            if b not in self.controller.live:
                self.events += 1
                self.note(f"{b} is back in touch" + self._controller_unfence(b))
        for _ in range(max_events):
            if self.converged():
                break
            self.events += 1
            self.clock.advance(self.rng.randint(0, 5))
            if self.network:
                what = self._deliver()
            else:
                for b in self.ids:
                    self._fetch(b)
                    self._push(b)
                what = "fetch all; push all; " + self._leader_tick()
            self.note(what)
            self.check(what)
        else:
            raise self.fail("did not converge after healing")
        self.check("final")
        final = self.view(self.brokers[self.controller.leader])
        for first, batch in self.acked.items():
            if first < final.first:
                continue  # deleted by DeleteRecords
            mine = final.span(first, first + 1)
            if mine is None or mine[16:] != batch:
                raise self.fail(f"acknowledged write at {first} is not in the final log")
        sequences: list[int] = []
        pos = 0
        while pos < len(final.data):
            h = read_batch_header(final.data, pos)
            if h.producer_id == IDEMPOTENT_PID:
                sequences.append(h.base_sequence)
            pos += h.size
        if len(sequences) != len(set(sequences)):
            raise self.fail(f"the idempotent producer's batches were written twice: "
                            f"{sorted(sequences)}")


def main(argv: list[str]) -> int:
    seed = int(argv[0])
    steps = int(argv[1]) if len(argv) > 1 else STEPS
    sim = ReplicationSim(seed)
    sim.full_trace = []
    try:
        sim.run(steps)
        sim.heal()
    except SimFailure as exc:
        print("\n".join(sim.full_trace))
        print(exc.args[0].split("\nlast events:")[0])
        return 1
    print("\n".join(sim.full_trace))
    print(f"seed {seed}: ok, {sim.events} events, committed end {sim.committed.end}, "
          f"{len(sim.acked)} acks=-1 writes acknowledged, {sim.stats}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
