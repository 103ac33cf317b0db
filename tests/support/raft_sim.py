"""A seeded, deterministic simulation of a KRaft quorum (Kafka's
``RaftEventSimulationTest`` is the model).

The world: ``voters`` pure :class:`~odradek.raft.node.RaftNode` s (plus optional
observers), each with a :class:`~odradek.raft.log.MemoryRaftLog` and a
quorum-state store, on simulated time. One priority queue holds every event:

* **deliver** a message. The network drops (``loss``), duplicates (``dup``)
  and delays each message by 1..``max_delay_ms`` (so it reorders them), and
  refuses delivery across a **partition** (groups of nodes, or one node cut
  off one way) in force when the message arrives;
* **poll** a node when its next deadline comes;
* **propose**: a client appends the next value of a counter to whoever leads;
* **fault**: crash a node (its unflushed log tail is lost, its quorum-state
  kept), restart it later, crash and restart every node at once, make the
  leader resign (EndQuorumEpoch), cut the network, heal it;
* **snapshot**: a node replaces the committed prefix of its log by a
  snapshot (so lagging and restarted nodes catch up through FetchSnapshot).

After every event :meth:`RaftSim.check` asserts the invariants: one leader per
epoch (``SingleLeader``); a node's persisted epoch never goes back
(``MonotonicEpoch``); a node says it caught up (:meth:`RaftNode.caught_up`,
what its shell waits for before acting on the metadata) only at a high
watermark at least what it had applied in earlier lives, and after a restart
of every node at least everything committed before it; a node's high
watermark never goes back while it lives
(``MonotonicHighWatermark``); every entry below any node's high watermark is
the one committed at that offset, the first time anyone committed it
(committed entries are never lost or changed); the committed prefix is
flushed on a majority of voters (``MajorityReachedHighWatermark``); every
leader's log holds the whole committed prefix. :meth:`RaftSim.heal_and_settle`
then heals everything and asserts liveness: within a bounded simulated time
one leader, known to every voter, whose commit reaches every voter (each of
them caught up), and all
logs equal up to the high watermark.

With ``dynamic`` (KIP-853) the quorum is bootstrapped with ``kraft.version`` 1
(a VotersRecord of the first ``voters`` nodes, each with a directory id) and
``spare`` more nodes start as controllers with no voter set
(``--no-initial-controllers``, observers); a **reconfig** fault asks the
leader to add a caught-up spare or remove a voter (itself included), so the
voter set moves under every other fault. Then the majority invariant is checked
against the voter set of the committed prefix (the latest VotersRecord in it)
or the change appended after it: the committed prefix is flushed on enough of
its voters that every majority includes one; and no leader ever holds two
uncommitted VotersRecords. Every node has a controller endpoint
(``CONTROLLER://nID:PORT``); a restart may move it to a new port (a
**readdress**), and the node, a voter, must get it into the voter set with
UpdateRaftVoter (the leader writes it as one more VotersRecord, under the same
one-change-at-a-time rule): settling also waits until the leader's voter set
shows every voter's current endpoint (once the log is at ``kraft.version`` 1).

With ``static_first`` as well the quorum starts static (``kraft.version`` 0:
``controller.quorum.voters``, each node knowing its directory id), and the
first reconfig asks the leader to upgrade ``kraft.version`` to 1 (a
KRaftVersionRecord and a VotersRecord of the same voters): voters are added and
removed only after that, all under the same faults and invariants.

A failure raises :class:`SimFailure` naming the seed, with the last events of
the trace; ``python -m tests.support.raft_sim SEED`` replays a seed and prints
the whole trace.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import random
import sys
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from odradek.raft.log import Entry, MemoryRaftLog, Snapshot
from odradek.raft.membership import VoterChangeError
from odradek.raft.messages import Message
from odradek.raft.node import RaftConfig, RaftFatalError, RaftNode, Role
from odradek.raft.quorum_state import MemoryQuorumStateStore
from odradek.raft.voters import (
    VOTERS_TAG,
    Endpoint,
    Voter,
    VoterSet,
    decode_voters,
    unframe_snapshot,
)

SIM_CONFIG = RaftConfig(
    election_timeout_ms=1000, fetch_timeout_ms=2000, request_timeout_ms=2000,
    fetch_max_wait_ms=100, election_backoff_max_ms=1000, max_fetch_entries=16,
)


class SimFailure(AssertionError):
    pass


@dataclass(slots=True)
class SimNode:
    node_id: int
    log: MemoryRaftLog
    store: MemoryQuorumStateStore
    raft: RaftNode | None
    alive: bool = True
    checked_upto: int = 0
    """Entries below this offset were checked against the committed record."""
    hw_seen: int = 0
    epoch_seen: int = 0
    poll_at: int = -1
    applied_before: int = 0
    """The highest high watermark of the node's earlier lives: what its shell had
    applied (the shell applies every entry below the high watermark at once)."""
    must_reach: int = 0
    """What the node must have applied before it says it caught up, this life: at
    least ``applied_before``, and after a restart of every node, everything
    committed before it."""
    ready: bool = False
    """Has :meth:`RaftNode.caught_up` been true in this life?"""
    port: int = 9000
    """The port of its controller endpoint (a readdress moves it)."""

    @property
    def endpoints(self) -> tuple[Endpoint, ...]:
        return (Endpoint("CONTROLLER", f"n{self.node_id}", self.port),)


@dataclass(slots=True)
class Faults:
    loss: float = 0.05
    dup: float = 0.02
    max_delay_ms: int = 20
    crash_every_ms: int = 3000
    full_restart_every_ms: int = 20_000
    partition_every_ms: int = 4000
    snapshot_every_ms: int = 2500
    propose_every_ms: int = 50
    reconfig_every_ms: int = 1500
    """Dynamic quorums only: how often the leader is asked to add or remove a voter."""


@dataclass(order=True, slots=True)
class _Event:
    at: int
    seq: int
    kind: str = field(compare=False)
    arg: Any = field(compare=False)


def entry_tuple(e: Entry) -> tuple[int, int, tuple[bytes, ...], bool]:
    return (e.offset, e.epoch, e.records, e.control)


def encode_snapshot(entries: list[tuple[int, int, tuple[bytes, ...], bool]]) -> bytes:
    return repr(entries).encode()


def decode_snapshot(payload: bytes) -> list[tuple[int, int, tuple[bytes, ...], bool]]:
    import ast

    body = unframe_snapshot(payload)[1]
    value: list[tuple[int, int, tuple[bytes, ...], bool]] = ast.literal_eval(body.decode())
    return value


class RaftSim:
    def __init__(self, seed: int, voters: int = 3, observers: int = 0,
                 faults: Faults | None = None, trace_len: int = 300, *,
                 dynamic: bool = False, spare: int = 0, static_first: bool = False) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.faults = faults or Faults()
        self.now = 0
        self._seq = 0
        self._queue: list[_Event] = []
        self.voter_ids = frozenset(range(1, voters + 1))
        self.dynamic = dynamic or static_first
        self.static_first = static_first
        self.upgrades = 0
        ids = list(range(1, voters + observers + spare + 1))
        self.dirs = {i: uuid.UUID(int=self.rng.getrandbits(128)) for i in ids}
        self.bootstrap = VoterSet.of(
            Voter(i, self.dirs[i], (Endpoint("CONTROLLER", f"n{i}", 9000),))
            for i in sorted(self.voter_ids))
        self.spare_ids = frozenset(ids[voters + observers:])
        self.reconfigs = 0
        self.readdresses = 0
        self.nodes: dict[int, SimNode] = {}
        for node_id in ids:
            node = SimNode(node_id, MemoryRaftLog(), MemoryQuorumStateStore(), None)
            self.nodes[node_id] = node
            self._start(node)
        self.committed: dict[int, tuple[int, int, tuple[bytes, ...], bool]] = {}
        """offset of an entry's start → the entry, as first committed anywhere."""
        self.committed_end = 0
        self.committed_offsets: list[int] = []
        """The keys of :attr:`committed`, increasing (entries commit in order)."""
        self._committed_voters: frozenset[int] | None = None
        """The voters of the newest VotersRecord in :attr:`committed`, if any."""
        self.leaders: dict[int, int] = {}
        self.leader_commit: dict[int, int] = {}
        """epoch → the highest high watermark its leader reached."""
        self.groups: list[frozenset[int]] | None = None
        self.cut_off: tuple[int, frozenset[int]] | None = None
        self.counter = 0
        self.events = 0
        self.trace: deque[str] = deque(maxlen=trace_len)
        self.full_trace: list[str] | None = None
        self.chaos_ms = 0

    # -- plumbing ---------------------------------------------------------------------

    def _push(self, at: int, kind: str, arg: Any) -> None:
        self._seq += 1
        heapq.heappush(self._queue, _Event(at, self._seq, kind, arg))

    def _log(self, text: str) -> None:
        line = f"{self.now:>7} {text}"
        self.trace.append(line)
        if self.full_trace is not None:
            self.full_trace.append(line)

    def fail(self, why: str) -> SimFailure:
        tail = "\n".join(self.trace)
        return SimFailure(
            f"raft simulation seed={self.seed}: {why}\n(replay: python -m tests.support.raft_sim "
            f"{self.seed} {len(self.voter_ids)} {len(self.nodes) - len(self.voter_ids)} "
            f"{self.chaos_ms}{' dynamic' if self.dynamic else ''})\nlast events:\n{tail}")

    def _start(self, node: SimNode) -> None:
        rng = random.Random(self.rng.getrandbits(64))
        if self.static_first:
            node.raft = RaftNode(node.node_id, self.voter_ids, node.log, node.store, rng,
                                 SIM_CONFIG, self.now, directory_id=self.dirs[node.node_id],
                                 endpoints=node.endpoints)
        elif self.dynamic:
            boot = VoterSet(()) if node.node_id in self.spare_ids else self.bootstrap
            node.raft = RaftNode(node.node_id, boot, node.log, node.store, rng, SIM_CONFIG,
                                 self.now, directory_id=self.dirs[node.node_id],
                                 bootstrap_ids=self.voter_ids, endpoints=node.endpoints)
        else:
            node.raft = RaftNode(node.node_id, self.voter_ids, node.log, node.store, rng,
                                 SIM_CONFIG, self.now)
        node.alive = True
        node.ready = False
        node.must_reach = max(node.must_reach, node.applied_before)
        node.hw_seen = node.raft.high_watermark
        node.checked_upto = node.log.start_offset
        node.poll_at = -1
        self._after(node)

    def _after(self, node: SimNode) -> None:
        """Send what the node produced and schedule its next poll."""
        raft = node.raft
        assert raft is not None
        for msg in raft.take_outbox():
            self._send(msg)
        due = max(self.now, raft.next_deadline())
        if node.poll_at < self.now or due < node.poll_at:
            node.poll_at = due
            self._push(due, "poll", (node.node_id, due))

    def _send(self, msg: Message) -> None:
        f = self.faults
        if self.rng.random() < f.loss:
            return
        copies = 2 if self.rng.random() < f.dup else 1
        for _ in range(copies):
            self._push(self.now + self.rng.randint(1, f.max_delay_ms), "deliver", msg)

    def _connected(self, src: int, dst: int) -> bool:
        if self.cut_off is not None:
            node, peers = self.cut_off
            if src == node and dst in peers:
                return False
        if self.groups is None:
            return True
        return any(src in g and dst in g for g in self.groups)

    # -- events -----------------------------------------------------------------------

    def step(self) -> None:
        ev = heapq.heappop(self._queue)
        self.now = max(self.now, ev.at)
        self.events += 1
        getattr(self, f"_on_{ev.kind}")(ev.arg)
        self.check()

    def _on_deliver(self, msg: Message) -> None:
        node = self.nodes[msg.dst]
        if not node.alive or not self._connected(msg.src, msg.dst):
            return
        assert node.raft is not None
        self._log(f"{msg.dst} <- {msg}")
        before = (node.raft.role, node.raft.epoch)
        try:
            node.raft.handle(msg, self.now)
        except RaftFatalError as exc:
            raise self.fail(str(exc)) from exc
        self._log_change(node, before)
        self._after(node)

    def _on_poll(self, arg: tuple[int, int]) -> None:
        node = self.nodes[arg[0]]
        if not node.alive or node.poll_at != arg[1]:
            return
        assert node.raft is not None
        before = (node.raft.role, node.raft.epoch)
        node.poll_at = -1
        node.raft.poll(self.now)
        self._log_change(node, before)
        self._after(node)

    def _log_change(self, node: SimNode, before: tuple[Role, int]) -> None:
        raft = node.raft
        assert raft is not None
        if (raft.role, raft.epoch) != before:
            self._log(f"{node.node_id} {before[0].value}@{before[1]} -> "
                      f"{raft.role.value}@{raft.epoch}")

    def _on_propose(self, _: None) -> None:
        leader = self.leader()
        if leader is not None:
            self.counter += 1
            assert leader.raft is not None
            end = leader.raft.propose([b"v%d" % self.counter], self.now)
            self._log(f"{leader.node_id} propose v{self.counter} (ends at {end})")
            self._after(leader)
        self._push(self.now + self.faults.propose_every_ms, "propose", None)

    def _on_crash(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if not node.alive:
            return
        node.alive = False
        node.raft = None
        node.applied_before = max(node.applied_before, node.hw_seen)
        node.log.crash()
        self._log(f"{node_id} CRASH (log kept to {node.log.end_offset})")
        self._push(self.now + self.rng.randint(200, 3000), "restart", node_id)

    def _on_full_restart(self, _: None) -> None:
        """Every node crashes at once and restarts (a whole cluster restarted): each
        must catch up to everything committed before, not to what a leader that
        has not committed in its new epoch reports."""
        self._log(f"FULL RESTART (committed end {self.committed_end})")
        for node in self.nodes.values():
            if node.alive:
                node.alive = False
                node.raft = None
                node.applied_before = max(node.applied_before, node.hw_seen)
                node.log.crash()
            node.must_reach = max(node.must_reach, self.committed_end)
        for node_id in sorted(self.nodes):
            self._push(self.now + self.rng.randint(10, 1500), "restart", node_id)

    def _on_restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.alive:
            return
        if self.dynamic and self.rng.random() < 0.3:
            node.port += 1
            self.readdresses += 1
            self._log(f"{node_id} RESTART on port {node.port} (readdress)")
        else:
            self._log(f"{node_id} RESTART")
        self._start(node)

    def _on_partition(self, _: None) -> None:
        ids = sorted(self.nodes)
        kind = self.rng.choice(["split", "isolate", "oneway", "heal"])
        self.groups, self.cut_off = None, None
        if kind == "split":
            self.rng.shuffle(ids)
            cut = self.rng.randint(1, len(ids) - 1)
            self.groups = [frozenset(ids[:cut]), frozenset(ids[cut:])]
        elif kind == "isolate":
            lone = self.rng.choice(ids)
            self.groups = [frozenset([lone]), frozenset(ids) - {lone}]
        elif kind == "oneway":
            node = self.rng.choice(ids)
            self.cut_off = (node, frozenset(ids) - {node})
        self._log(f"NETWORK {kind} groups={self.groups} cut_off={self.cut_off}")

    def _on_snapshot(self, node_id: int) -> None:
        node = self.nodes[node_id]
        raft = node.raft
        if node.alive and raft is not None and raft.high_watermark > node.log.start_offset:
            entries = self.prefix(node, raft.high_watermark)
            raft.take_snapshot(raft.high_watermark, encode_snapshot(entries))
            self._log(f"{node_id} SNAPSHOT at {raft.high_watermark}")

    def _on_chaos(self, _: None) -> None:
        f = self.faults
        roll = self.rng.random()
        total = (1 / f.crash_every_ms + 1 / f.partition_every_ms + 1 / f.snapshot_every_ms
                 + 1 / f.full_restart_every_ms)
        if self.dynamic:
            total += 1 / f.reconfig_every_ms
            if roll < (1 / f.reconfig_every_ms) / total:
                self._on_reconfig()
                self._push(self.now + int(self.rng.expovariate(total)), "chaos", None)
                return
            roll -= (1 / f.reconfig_every_ms) / total
        if roll < (1 / f.full_restart_every_ms) / total:
            self._on_full_restart(None)
        elif roll < (1 / f.crash_every_ms + 1 / f.full_restart_every_ms) / total:
            if self.rng.random() < 0.25 and (leader := self.leader()) is not None:
                assert leader.raft is not None  # a graceful hand-over instead of a crash
                self._log(f"{leader.node_id} RESIGN")
                leader.raft.resign(self.now)
                self._after(leader)
            else:
                self._on_crash(self.rng.choice(sorted(self.nodes)))
        elif roll < (1 / f.crash_every_ms + 1 / f.full_restart_every_ms
                     + 1 / f.partition_every_ms) / total:
            self._on_partition(None)
        else:
            self._on_snapshot(self.rng.choice(sorted(self.nodes)))
        self._push(self.now + int(self.rng.expovariate(total)), "chaos", None)

    def _on_stop(self, _: None) -> None:
        pass

    def _on_reconfig(self) -> None:
        """The leader is asked to add a node that is not a voter, or remove a voter."""
        leader = self.leader()
        if leader is None or leader.raft is None:
            return
        raft = leader.raft
        outside = sorted(set(self.nodes) - raft.voters)
        try:
            if raft.kraft_version == 0:
                end = raft.upgrade_kraft_version(
                    1, {i: self.nodes[i].endpoints for i in raft.voters}, self.now)
                self._log(f"{leader.node_id} UPGRADE kraft.version to 1 (ends at {end})")
                self.upgrades += 1
                self._after(leader)
                return
            if outside and (len(raft.voters) < 2 or self.rng.random() < 0.5):
                n = self.rng.choice(outside)
                # The operator may name an endpoint the node has since moved from.
                port = self.nodes[n].port - self.rng.randint(0, 1)
                end = raft.add_voter(
                    Voter(n, self.dirs[n], (Endpoint("CONTROLLER", f"n{n}", port),)), self.now)
                self._log(f"{leader.node_id} ADD VOTER {n} (ends at {end})")
            else:
                n = self.rng.choice(sorted(raft.voters))
                end = raft.remove_voter(n, self.dirs[n], self.now)
                self._log(f"{leader.node_id} REMOVE VOTER {n} (ends at {end})")
            self.reconfigs += 1
        except VoterChangeError as exc:
            self._log(f"{leader.node_id} voter change refused: {exc}")
        self._after(leader)

    def committed_voters(self) -> frozenset[int]:
        """The voter set of the committed prefix (the latest VotersRecord in it)."""
        return self.voter_ids if self._committed_voters is None else self._committed_voters

    def endpoint_updates(self) -> int:
        """Committed VotersRecords that changed endpoints only (UpdateRaftVoter's)."""
        sets = [decode_voters(r[len(VOTERS_TAG):]) for offset in sorted(self.committed)
                for r in self.committed[offset][2] if r.startswith(VOTERS_TAG)]
        return sum(1 for a, b in itertools.pairwise(sets)
                   if a.ids == b.ids and a != b)

    # -- views ------------------------------------------------------------------------

    def leader(self) -> SimNode | None:
        leaders = [n for n in self.nodes.values()
                   if n.alive and n.raft is not None and n.raft.role is Role.LEADER]
        return max(leaders, key=lambda n: n.raft.epoch if n.raft else -1, default=None)

    def prefix(self, node: SimNode, end: int) -> list[tuple[int, int, tuple[bytes, ...], bool]]:
        """Every entry of the node below ``end``: its snapshot's, then its log's."""
        out: list[tuple[int, int, tuple[bytes, ...], bool]] = []
        snap = node.log.snapshot()
        if snap is not None:
            out.extend(decode_snapshot(snap.payload))
        out.extend(entry_tuple(e) for e in node.log.entries() if e.offset < end)
        return out

    def _entry(self, node: SimNode, offset: int) -> tuple[int, int, tuple[bytes, ...], bool] | None:
        e = node.log.entry_at(offset)
        if e is not None:
            return entry_tuple(e) if e.offset == offset else None
        snap: Snapshot | None = node.log.snapshot()
        if snap is not None and offset < snap.end_offset:
            for t in decode_snapshot(snap.payload):
                if t[0] == offset:
                    return t
        return None

    # -- invariants -------------------------------------------------------------------

    def check(self) -> None:
        for node in self.nodes.values():
            state = node.store.state
            if state is not None:
                if state.epoch < node.epoch_seen:
                    raise self.fail(f"node {node.node_id} epoch went back "
                                    f"{node.epoch_seen} -> {state.epoch}")
                node.epoch_seen = state.epoch
            raft = node.raft
            if not node.alive or raft is None:
                continue
            if raft.role is Role.LEADER:
                other = self.leaders.setdefault(raft.epoch, node.node_id)
                if other != node.node_id:
                    raise self.fail(f"two leaders in epoch {raft.epoch}: {other} and "
                                    f"{node.node_id}")
                prev = self.leader_commit.get(raft.epoch, 0)
                self.leader_commit[raft.epoch] = max(prev, raft.high_watermark)
                self._check_complete(node, raft.epoch)
                if self.dynamic:
                    self._check_one_change(node)
            hw = raft.high_watermark
            if not node.ready and raft.caught_up(hw):
                node.ready = True
                if hw < node.must_reach:
                    raise self.fail(f"node {node.node_id} says it caught up at {hw}, below "
                                    f"{node.must_reach} (what it applied before, or what was "
                                    f"committed before every node restarted)")
            if hw < node.hw_seen:
                raise self.fail(f"node {node.node_id} high watermark went back "
                                f"{node.hw_seen} -> {hw}")
            node.hw_seen = hw
            if hw > node.checked_upto:
                self._check_committed(node, hw)
        self._check_majority()

    def _check_committed(self, node: SimNode, hw: int) -> None:
        offset = node.checked_upto
        while offset < hw:
            got = self._entry(node, offset)
            if got is None:
                raise self.fail(f"node {node.node_id} has no entry at {offset} below its "
                                f"high watermark {hw}")
            want = self.committed.get(offset)
            if want is None:
                if offset != self.committed_end:
                    raise self.fail(f"node {node.node_id} commits {offset} past the "
                                    f"committed end {self.committed_end}")
                self.committed[offset] = got
                self.committed_offsets.append(offset)
                self.committed_end = offset + len(got[2])
                for record in got[2]:
                    if record.startswith(VOTERS_TAG):
                        self._committed_voters = decode_voters(record[len(VOTERS_TAG):]).ids
            elif want != got:
                raise self.fail(f"node {node.node_id} committed {got} at {offset}, "
                                f"but {want} was committed there")
            offset += len(got[2])
        node.checked_upto = offset

    def _holds_committed(self, node: SimNode, durable: bool, end: int | None = None) -> bool:
        """Does the node's log (flushed part if ``durable``) hold the committed
        entries below ``end`` (default: all)? Log matching makes the last one enough."""
        end = self.committed_end if end is None else end
        if end == 0:
            return True
        have = node.log.flushed_offset if durable else node.log.end_offset
        if have < end:
            return False
        if end <= node.log.start_offset:
            return True  # below its snapshot, which holds only committed entries
        offsets = self.committed_offsets
        last = offsets[bisect.bisect_left(offsets, end) - 1]
        return self._entry(node, last) == self.committed[last]

    def _check_complete(self, node: SimNode, epoch: int) -> None:
        """A leader holds everything that leaders of earlier epochs committed."""
        need = max((hw for e, hw in self.leader_commit.items() if e < epoch), default=0)
        need = min(need, self.committed_end)
        if not self._holds_committed(node, durable=False, end=need):
            raise self.fail(f"leader {node.node_id} of epoch {epoch} lacks entries "
                            f"committed below {need}")

    def _check_one_change(self, node: SimNode) -> None:
        """A leader never holds more than one VotersRecord past the committed end
        (a leader appends one only once its high watermark passed the one before)."""
        hw = self.committed_end
        pending = sum(1 for e in node.log.entries() if e.control and e.offset >= hw
                      for r in e.records if r.startswith(VOTERS_TAG))
        if pending > 1:
            raise self.fail(f"leader {node.node_id} holds {pending} uncommitted voter changes")

    def _majority_sets(self) -> list[frozenset[int]]:
        """The voter sets a commit may have counted: the committed prefix's, or the
        one change a leader appended after it (a change counts from its append;
        the two sets differ by one voter, so their majorities overlap)."""
        sets = [self.committed_voters()]
        for node in self.nodes.values():
            for e in node.log.entries():
                if e.control and e.offset >= self.committed_end:
                    sets.extend(decode_voters(r[len(VOTERS_TAG):]).ids for r in e.records
                                if r.startswith(VOTERS_TAG))
        return sets

    def _check_majority(self) -> None:
        if self.committed_end == 0:
            return
        sets = self._majority_sets() if self.dynamic else [self.voter_ids]
        for voters in sets:
            holders = sum(1 for v in voters if self._holds_committed(self.nodes[v], True))
            # Enough holders that every majority of the set includes one (so no
            # leader can be elected without the entries): a majority of an odd
            # set, half of an even one (a set of four reached through a change
            # that was later truncated: what its three-voter successor committed
            # with two holders still meets every three of the four).
            if holders * 2 > len(voters) or (self.dynamic and holders * 2 >= len(voters)):
                return
        raise self.fail(f"committed end {self.committed_end} is flushed on no majority of "
                        f"{sets}")

    # -- runs -------------------------------------------------------------------------

    def run(self, chaos_ms: int = 20_000, settle_ms: int = 15_000) -> None:
        self.chaos_ms = chaos_ms
        self._push(0, "propose", None)
        self._push(self.rng.randint(500, 2000), "chaos", None)
        self.run_until(chaos_ms)
        self.heal_and_settle(settle_ms)

    def run_until(self, until_ms: int, max_events: int = 2_000_000) -> None:
        self._push(until_ms, "stop", None)
        while self._queue and self._queue[0].at <= until_ms:
            self.step()
            if self.events > max_events:
                raise self.fail("event budget exhausted")

    def heal_and_settle(self, settle_ms: int) -> None:
        """Heal the network, restart the dead, stop faults; a leader must emerge
        and its commits reach every node (observers too) within ``settle_ms``."""
        self.groups, self.cut_off = None, None
        self.faults.loss = self.faults.dup = 0.0
        self._queue = [e for e in self._queue if e.kind not in ("chaos", "restart", "propose")]
        heapq.heapify(self._queue)
        for node in self.nodes.values():
            if not node.alive:
                self._log(f"{node.node_id} RESTART (heal)")
                self._start(node)
        self._log("HEAL")
        deadline = self.now + settle_ms
        proposed_in = -1
        while self.now < deadline:
            self.run_until(min(deadline, self.now + 100))
            leader = self.leader()
            if leader is None or leader.raft is None:
                continue
            lr = leader.raft
            if proposed_in != lr.epoch:  # one value, written after the heal, must land
                proposed_in = lr.epoch
                self._on_propose_once(leader)
                continue
            settled = all(
                (r := self.nodes[v].raft) is not None and r.leader_id == leader.node_id
                and r.high_watermark == leader.log.end_offset and self.nodes[v].ready
                for v in self.nodes)
            if self.dynamic and lr.kraft_version == 1:  # each voter's current endpoint
                settled = settled and all(v.endpoints == self.nodes[v.node_id].endpoints
                                          for v in lr.voter_set.voters)
            if settled and lr.high_watermark == leader.log.end_offset:
                self._check_equal_logs(lr.high_watermark)
                return
        raise self.fail(f"no settled leader within {settle_ms} ms of healing")

    def _on_propose_once(self, leader: SimNode) -> None:
        assert leader.raft is not None
        self.counter += 1
        end = leader.raft.propose([b"v%d" % self.counter], self.now)
        self._log(f"{leader.node_id} propose v{self.counter} (ends at {end})")
        self._after(leader)

    def _check_equal_logs(self, hw: int) -> None:
        """Every voter's entries below the settled high watermark are the committed ones."""
        for v in sorted(self.committed_voters() if self.dynamic else self.voter_ids):
            for t in self.prefix(self.nodes[v], hw):
                if self.committed.get(t[0]) != t:
                    raise self.fail(f"node {v} holds {t} at {t[0]}, committed was "
                                    f"{self.committed.get(t[0])}")


def main(argv: list[str]) -> int:
    seed = int(argv[0])
    voters = int(argv[1]) if len(argv) > 1 else 3
    observers = int(argv[2]) if len(argv) > 2 else 0
    chaos_ms = int(argv[3]) if len(argv) > 3 else 20_000
    if len(argv) > 4 and argv[4] == "dynamic":  # the last nodes are spare controllers
        sim = RaftSim(seed, voters, 0, dynamic=True, spare=observers)
    else:
        sim = RaftSim(seed, voters, observers)
    sim.full_trace = []
    try:
        sim.run(chaos_ms)
    except SimFailure as exc:
        print("\n".join(sim.full_trace))
        print(exc.args[0].splitlines()[0])
        return 1
    print("\n".join(sim.full_trace))
    print(f"seed {seed}: ok, {sim.events} events, committed end {sim.committed_end}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
