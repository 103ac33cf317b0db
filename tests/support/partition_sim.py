"""A seeded simulation of one replicated partition, for the partition state machine.

Three replicas of one partition, each a real
:class:`~odradek.replication.partition.PartitionState` over a real
:class:`~odradek.storage.log.Log` on its own
:class:`~odradek.storage.memfs.MemoryFileSystem`, on one
:class:`~odradek.common.clock.ManualClock`. Replica 1 leads (leader election is
the replication issue's); 2 and 3 follow by fetching, as Kafka followers do:
a fetch names the follower's log end, the leader records it
(:meth:`PartitionState.update_follower`) and answers with the batches from
there and its high watermark; the follower appends them
(:meth:`PartitionState.append_as_follower`) if it still wants that offset.

Every message goes through a network that delays, reorders and drops;
followers crash (losing what they had not synced, torn tails included) and
restart with recovery; producers send plain batches, idempotent batches,
retries of those (some with a damaged CRC) and batches from a fenced epoch.
After every event :meth:`PartitionSim.check` asserts the invariants:

* leader: ``log start <= HW <= LEO``; the HW never moves back; when it moves
  it is at most the log end the leader has recorded for each ISR member;
* every acknowledged record (the HW passed it) is in the leader's log, once,
  at the offset it was acknowledged with;
* each follower's log is byte for byte a prefix of the leader's, and its HW is
  at most its log end and the leader's HW.

:meth:`PartitionSim.heal` then stops losses and crashes and runs until every
follower has the whole log. A failing run is repeated by its seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from odradek.common.clock import ManualClock
from odradek.replication.partition import LOG_END, Origin, PartitionState
from odradek.storage import Log, LogConfig, MemoryFileSystem
from odradek.wire.batch import iter_batches
from odradek.wire.errors import ErrorCode
from odradek.wire.records import Record, build_batch, decode_batch

LEADER = 1
FOLLOWERS = (2, 3)
DIR = "/data/sim-0"


@dataclass(frozen=True, slots=True)
class FetchRequest:
    follower: int
    offset: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    follower: int
    offset: int
    data: bytes
    high_watermark: int


Message = FetchRequest | FetchResponse


@dataclass(slots=True)
class Producer:
    pid: int
    epoch: int = 0
    seq: int = 0
    last: bytes | None = None
    """The last batch sent, for retries."""


@dataclass(slots=True)
class PartitionSim:
    seed: int
    loss: float = 0.1
    crash_rate: float = 0.02
    rng: random.Random = field(init=False)
    clock: ManualClock = field(default_factory=ManualClock)
    fs: dict[int, MemoryFileSystem] = field(default_factory=dict)
    nodes: dict[int, PartitionState] = field(default_factory=dict)
    network: list[tuple[int, int, Message]] = field(default_factory=list)
    waiting: dict[int, bool] = field(default_factory=dict)
    acked: dict[int, bytes] = field(default_factory=dict)
    """offset -> value of every acknowledged record."""
    unacked: list[tuple[int, list[bytes]]] = field(default_factory=list)
    producers: list[Producer] = field(default_factory=list)
    hw_seen: int = 0
    events: int = 0
    _serial: int = 0
    _value: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        for node in (LEADER, *FOLLOWERS):
            self.fs[node] = MemoryFileSystem(self.clock)
            self.nodes[node] = self._open(node, clean=True)
        self.nodes[LEADER].become_leader(1, [LEADER, *FOLLOWERS], [LEADER, *FOLLOWERS])
        for f in FOLLOWERS:
            self.nodes[f].become_follower(1, LEADER)
            self.waiting[f] = False
        self.producers = [Producer(pid) for pid in (100, 101)]

    def _open(self, node: int, *, clean: bool) -> PartitionState:
        log = Log.open(self.fs[node], DIR, LogConfig(segment_bytes=4096), self.clock,
                       clean_shutdown=clean)
        return PartitionState("sim", 0, log, local_id=node, leader_epoch=1,
                              leader_id=LEADER if node != LEADER else -2)

    # -- events --------------------------------------------------------------------

    def step(self) -> str:
        self.events += 1
        self.clock.advance(self.rng.randint(0, 5))
        roll = self.rng.random()
        if roll < 0.3:
            what = self._produce()
        elif roll < 0.5:
            what = self._send_fetch(self.rng.choice(FOLLOWERS))
        elif roll < 1 - self.crash_rate:
            what = self._deliver()
        else:
            what = self._crash(self.rng.choice(FOLLOWERS))
        self.check(what)
        return what

    def _value_bytes(self) -> bytes:
        self._value += 1
        return f"v{self._value}".encode()

    def _produce(self) -> str:
        leader = self.nodes[LEADER]
        kind = self.rng.choice(["plain", "idem", "retry", "bad-retry", "bump", "fenced"])
        values = [self._value_bytes() for _ in range(self.rng.randint(1, 4))]
        p = self.rng.choice(self.producers)
        if kind in ("retry", "bad-retry") and p.last is None:
            kind = "idem"
        if kind == "fenced" and (p.epoch == 0 or p.last is None):
            kind = "idem"
        if kind == "bump":  # InitProducerId again: a new epoch starts at sequence 0
            p.epoch, p.seq = p.epoch + 1, 0
        if kind == "plain":
            batch = build_batch([Record(i, 1, None, v) for i, v in enumerate(values)])
        elif kind in ("idem", "bump"):
            batch = build_batch([Record(i, 1, None, v) for i, v in enumerate(values)],
                                producer_id=p.pid, producer_epoch=p.epoch, base_sequence=p.seq)
            p.seq += len(values)
            p.last = batch
        elif kind == "fenced":  # a zombie of the epoch before
            batch = build_batch([Record(0, 1, None, b"zombie")], producer_id=p.pid,
                                producer_epoch=p.epoch - 1, base_sequence=p.seq)
        else:
            assert p.last is not None
            batch = p.last
            if kind == "bad-retry":
                damaged = bytearray(batch)
                damaged[-1] ^= 0x55  # a record byte: the CRC no longer matches
                batch = bytes(damaged)
        result = leader.append_as_leader(memoryview(batch), Origin.CLIENT)
        if kind == "bad-retry":
            assert result.error_code == ErrorCode.CORRUPT_MESSAGE, result
        elif kind == "fenced":
            assert result.error_code == ErrorCode.INVALID_PRODUCER_EPOCH, result
        elif kind == "retry":
            assert result.duplicate, result
        else:
            assert result.error_code == 0 and result.appended, result
            _, records = decode_batch(batch)
            self.unacked.append((result.first_offset, [r.value or b"" for r in records]))
        self._acknowledge()
        return f"produce {kind}: {result.error_code}"

    def _send_fetch(self, follower: int) -> str:
        if self.waiting[follower]:
            return f"fetch {follower}: waiting"
        self.waiting[follower] = True
        self._send(FetchRequest(follower, self.nodes[follower].log_end_offset))
        return f"fetch {follower} from {self.nodes[follower].log_end_offset}"

    def _send(self, msg: Message) -> None:
        self._serial += 1
        self.network.append((self.clock.monotonic_ms() + self.rng.randint(0, 20),
                             self._serial, msg))

    def _deliver(self) -> str:
        if not self.network:
            return "idle"
        i = self.rng.randrange(len(self.network))  # any message: reordering
        _, _, msg = self.network.pop(i)
        if self.rng.random() < self.loss:
            self.waiting[msg.follower] = False  # the follower's request times out
            return f"lost {msg}"
        if isinstance(msg, FetchRequest):
            leader = self.nodes[LEADER]
            leader.update_follower(msg.follower, msg.offset, self.clock.now_ms())
            self._acknowledge()
            read = leader.read(msg.offset, self.rng.choice([200, 1000, 1 << 20]), LOG_END,
                               min_one_batch=True)
            data = leader.log.read_bytes(read.slices) if read.error_code == 0 else b""
            self._send(FetchResponse(msg.follower, msg.offset, data, read.high_watermark))
            return f"leader answers {msg.follower} at {msg.offset}: {len(data)} bytes"
        follower = self.nodes[msg.follower]
        self.waiting[msg.follower] = False
        if msg.offset != follower.log_end_offset:
            return f"stale answer to {msg.follower}"
        result = follower.append_as_follower(memoryview(msg.data), msg.high_watermark)
        assert result.error_code == 0, result
        return f"follower {msg.follower} appends {len(msg.data)} bytes"

    def _crash(self, follower: int) -> str:
        self.fs[follower].crash(self.rng)
        self.nodes[follower] = self._open(follower, clean=False)
        self.network = [m for m in self.network if m[2].follower != follower]
        self.waiting[follower] = False
        return f"crash {follower}: restarts at {self.nodes[follower].log_end_offset}"

    def _acknowledge(self) -> None:
        hw = self.nodes[LEADER].high_watermark
        keep = []
        for first, values in self.unacked:
            if first + len(values) <= hw:
                for i, v in enumerate(values):
                    self.acked[first + i] = v
            else:
                keep.append((first, values))
        self.unacked = keep

    # -- invariants ----------------------------------------------------------------

    def check(self, event: str) -> None:
        leader = self.nodes[LEADER]
        where = f"seed {self.seed}, event {self.events} ({event})"
        hw, leo = leader.high_watermark, leader.log_end_offset
        assert leader.log_start_offset <= hw <= leo, where
        assert hw >= self.hw_seen, f"{where}: HW moved back {self.hw_seen} -> {hw}"
        if hw > self.hw_seen:
            # When it moves. (A follower that crashed and lost its unsynced tail
            # reports a lower log end later; the HW stays, as in Kafka.)
            for b in leader.isr:
                assert hw <= leader.replicas[b].log_end_offset, f"{where}: HW past {b}"
        self.hw_seen = hw
        leader_bytes = leader.log.read_records(0, 1 << 30) if leo else b""
        for f in FOLLOWERS:
            node = self.nodes[f]
            assert node.high_watermark <= node.log_end_offset, where
            assert node.high_watermark <= hw, f"{where}: follower {f} HW ahead of leader"
            mine = node.log.read_records(0, 1 << 30) if node.log_end_offset else b""
            assert leader_bytes[: len(mine)] == mine, f"{where}: follower {f} diverged"
        if self.events % 25 == 0 or event.startswith("final"):
            self._check_acked(leader_bytes, where)

    def _check_acked(self, data: bytes, where: str) -> None:
        found: dict[int, bytes] = {}
        for pos, h in iter_batches(data):
            _, records = decode_batch(data, pos)
            assert h.base_offset not in found, where
            for r in records:
                found[r.offset] = r.value or b""
        for offset, value in self.acked.items():
            assert found.get(offset) == value, f"{where}: acked offset {offset} lost"
        values = list(found.values())
        assert len(values) == len(set(values)), f"{where}: a record was written twice"

    # -- the end -------------------------------------------------------------------

    def heal(self, max_events: int = 20_000) -> None:
        """No more loss or crashes: fetch until every follower has the whole log and
        the leader's HW is its log end."""
        self.loss = 0.0
        leader = self.nodes[LEADER]
        for _ in range(max_events):
            done = all(self.nodes[f].log_end_offset == leader.log_end_offset
                       for f in FOLLOWERS) and leader.high_watermark == leader.log_end_offset
            if done and not self.network:
                break
            self.events += 1
            if self.network:
                what = self._deliver()
            else:
                for f in FOLLOWERS:
                    self._send_fetch(f)
                what = "fetch all"
            self.check(what)
        else:
            raise AssertionError(f"seed {self.seed}: did not converge")
        self.check("final")
        assert not self.unacked, f"seed {self.seed}: records never acknowledged"
        assert set(self.acked) == set(range(leader.log_end_offset)), f"seed {self.seed}"
