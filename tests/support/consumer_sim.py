"""A seeded simulation of a KIP-848 consumer group: the pure
:class:`~odradek.coordinator.coordinator.GroupCoordinator` driven by simulated
clients, with loss, delay, silence, topic changes and coordinator crashes.

The world: one group (``GROUP``), a cluster's topics (name -> (topic id,
partition count)) that change between events, the coordinator's log (every
record an operation returned, encoded in Kafka's format as the IO shell
appends it) and 2-6 clients. Everything happens on a simulated clock in a
discrete-event loop; the next event is the earliest of the clients' timers,
messages in flight and the coordinator's :meth:`next_deadline_ms`.

Clients follow the client side of KIP-848 as librdkafka and the Java client
do, with at most one heartbeat in flight:

* join with epoch 0 (v1: the client's own member id, rebalance timeout, topic
  names or a regular expression, ``topic_partitions=[]``), then heartbeat every
  interval with their epoch and no optional field;
* an answer carrying an assignment is acted on at once: the client revokes the
  partitions no longer in it and takes the new ones (the coordinator hands a
  partition over only once no one else holds it), then acks with a full
  request (rebalance timeout, subscription, ``topic_partitions`` = what it owns),
  now or after a delay, sometimes longer than its rebalance timeout;
* a request whose answer is lost times out; the client retries with its old
  epoch and a full request (as both clients do after an error, so the
  coordinator sends the assignment again);
* FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: drop every partition, rejoin with
  epoch 0 under the same member id; GROUP_ID_NOT_FOUND (the group is a classic
  one it cannot upgrade now, see :mod:`tests.support.consumer_sim_classic`) the
  same, a heartbeat interval later;
* leaving: a dynamic member drops its partitions and leaves with -1 (and comes
  back later as a new consumer, with a new member id); a static member leaves
  with -2 and comes back with the same instance id under a new member id;
* going silent for a while (shorter or longer than the session timeout): the
  coordinator's :meth:`poll` expires it; it learns so at its next heartbeat.

Faults: answers lost (the coordinator applied the request), requests and
answers delayed, acks delayed beyond the rebalance timeout, silent clients,
topics created, grown and deleted (and names reused under new ids), and
coordinator crashes: a fresh coordinator replays the decoded log while the
group's partition loads, then :meth:`loaded`; sometimes the crash happens
after an operation but before its records were appended (its answer is then
never sent).

Classic clients and the online upgrade: :mod:`tests.support.consumer_sim_classic`
(hooks here: :meth:`ConsumerSim._dispatch`, :meth:`ConsumerSim._check_more`,
:meth:`ConsumerSim._on_poll`, :meth:`ConsumerSim._disturb_one`).

Checked after every event (:meth:`ConsumerSim.check`):

* the coordinator's invariants of :mod:`odradek.coordinator.consumer.model`;
* what a client owns is within what the coordinator has its member holding
  (assigned or pending revocation) while the member exists, so no partition is
  owned by two clients at once. A client the coordinator removed (session or
  revocation timeout) before it heard is a *zombie* until its next heartbeat:
  only members removed by :meth:`poll` can leave one, and a zombie's offset
  commits (OffsetCommit through the facade) are refused (Kafka's model: the
  fence is on commits);
* after a crash, the rebuilt group equals the live one.

Not modelled by default (``stale_requests``): a request delivered after its
client timed out on it and sent the next one. Clients keep one heartbeat in
flight on one connection, so the coordinator sees a client's requests in
order; a late duplicate of an older request is indistinguishable from a
retry (Kafka's coordinator has the same rule: a previous epoch with owned
partitions within the assignment, or epoch 0 under a known member id, is
accepted) and can make the coordinator believe partitions were revoked that
the client still owns.

Then :meth:`ConsumerSim.quiesce` stops the faults, brings every client back and
lets them heartbeat: the group must reach Stable with every partition of a
subscribed topic owned by exactly one client, and (uniform assignor) members
with the same subscription within one partition of each other.
"""

from __future__ import annotations

import heapq
import random
import uuid
from dataclasses import dataclass, field
from typing import Any

import re2

from odradek.coordinator.consumer.membership import Caller
from odradek.coordinator.consumer.model import (
    Assignment,
    ConsumerGroup,
    ConsumerGroupState,
    MemberState,
    pairs,
)
from odradek.coordinator.coordinator import Commit, CommitRequest, GroupCoordinator
from odradek.coordinator.core import GroupConfig
from odradek.coordinator.records import decode, encode
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.consumer_group_heartbeat_request import (
    ConsumerGroupHeartbeatRequest,
    TopicPartitions,
)
from odradek.wire.messages.consumer_group_heartbeat_response import (
    ConsumerGroupHeartbeatResponse,
)

GROUP = "g"
NAMES = ("t0", "t1", "t2", "t3", "t4")
REGEXES = ("t[0-9]+", "t[13]", "t[0-2]")
SESSION_MS = 10_000
INTERVAL_MS = 1_000
REQUEST_TIMEOUT_MS = 3_000
CONFIG = GroupConfig(consumer_session_timeout_ms=SESSION_MS,
                     consumer_heartbeat_interval_ms=INTERVAL_MS)
CALLER = Caller("sim", "/127.0.0.1", 1)


@dataclass
class Client:
    name: str
    member_id: str
    instance_id: str | None
    names: list[str] | None
    regex: str | None
    assignor: str | None
    rebalance_timeout_ms: int
    epoch: int = 0
    owned: Assignment = field(default_factory=dict)
    status: str = "active"
    """active | silent (no heartbeats until ``wake_at``) | away (left; back at ``wake_at``)."""
    wake_at: int = 0
    in_flight: bool = False
    full: bool = True
    """The next request is a full one (join, after a lost answer, an ack)."""
    ack_at: int | None = None
    """Owned partitions changed: ack (a full request) not before this time."""
    hb_at: int = 0
    incarnation: int = 0
    partial_acks: bool = False
    """Ack with ``topic_partitions`` alone, as the Java client does (else a full request)."""
    resubscribed: bool = False
    """The subscription changed: the next request says so."""

    def subscription(self, topics: dict[str, tuple[uuid.UUID, int]]) -> frozenset[str]:
        got = {n for n in self.names or () if n in topics}
        if self.regex:
            pattern = re2.compile(self.regex)
            got |= {n for n in topics if pattern.fullmatch(n) is not None}
        return frozenset(got)


@dataclass
class ConsumerSim:
    seed: int
    rng: random.Random = field(init=False)
    now: int = 1_000_000
    topics: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    log: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    clients: dict[str, Client] = field(default_factory=dict)
    queue: list[tuple[int, int, str, str, Any]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    expired: set[str] = field(default_factory=set)
    """Member ids :meth:`GroupCoordinator.poll` removed."""
    faults: bool = True
    stale_requests: bool = False
    """Also deliver a request after its client timed out on it and moved on."""
    _seq: int = 0
    _ids: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.coordinator = self._fresh()
        for name in self.rng.sample(NAMES, self.rng.randint(1, 3)):
            self.topics[name] = (self._uuid(), self.rng.randint(1, 6))
        uniform_only = self.rng.random() < 0.6
        for i in range(self.rng.randint(2, 6)):
            regex = self.rng.choice(REGEXES) if self.rng.random() < 0.25 else None
            names = None if regex else sorted(self.rng.sample(NAMES, self.rng.randint(1, 3)))
            c = Client(
                f"c{i}", self._member_id(), f"i{i}" if self.rng.random() < 0.3 else None,
                names, regex, None if uniform_only else self.rng.choice(("uniform", "range")),
                self.rng.choice((3_000, 5_000, 20_000)))
            c.hb_at = self.now + self.rng.randint(0, 2_000)
            c.partial_acks = self.rng.random() < 0.5
            self.clients[c.name] = c
            self._wake(c, c.hb_at)

    # -- plumbing -------------------------------------------------------------------

    def _uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128))

    def _member_id(self) -> str:
        self._ids += 1
        return f"m{self._ids}-{self.rng.getrandbits(32):08x}"

    def _fresh(self) -> GroupCoordinator:
        return GroupCoordinator(CONFIG, new_id=lambda: f"x{self.rng.getrandbits(32):08x}")

    def _at(self, when: int, kind: str, client: str, payload: Any = None) -> None:
        self._seq += 1
        heapq.heappush(self.queue, (when, self._seq, kind, client, payload))

    def _wake(self, c: Client, when: int) -> None:
        self._at(when, "wake", c.name, c.incarnation)

    def _note(self, event: str) -> None:
        self.events.append(f"{self.now} {event}")
        kind = event.split()[0]
        self.counts[kind] = self.counts.get(kind, 0) + 1

    @property
    def group(self) -> ConsumerGroup | None:
        g = self.coordinator.groups.get(GROUP)
        return None if g is None else g.consumer

    def _append(self, records: list[Any]) -> None:
        for r in records:
            self.log.append(encode(r))
        self.coordinator.replay(records, self.now)

    # -- events ---------------------------------------------------------------------

    def start(self) -> None:
        self.coordinator.loaded(self.coordinator.partition_of(GROUP), self.now)

    def step(self) -> None:
        roll = self.rng.random() if self.faults else 1.0
        if roll < 0.01:
            self._crash(before_append=None)
        elif roll < 0.03:
            self._topic_change()
        elif roll < 0.06:
            self._disturb_one()
        else:
            self._next_event()

    def _next_event(self) -> None:
        due = self.coordinator.next_deadline_ms()
        top = self.queue[0][0] if self.queue else None
        if due is not None and (top is None or due < top):
            self.now = max(self.now, due)
            before = self.member_ids()
            fx = self.coordinator.poll(self.now)
            self._append(fx.records)
            gone = before - self.member_ids()
            self.expired |= gone
            self._on_poll(fx)
            self._note(f"poll expired={sorted(gone)}")
            self.check("poll")
            return
        if top is None:
            return
        when, _, kind, name, payload = heapq.heappop(self.queue)
        self.now = max(self.now, when)
        if kind == "loaded":
            if payload is self.coordinator:
                self.coordinator.loaded(self.coordinator.partition_of(GROUP), self.now)
                self._note("loaded")
            return
        self._dispatch(kind, name, payload)
        self.check(kind)

    def member_ids(self) -> set[str]:
        """The group's members, of either protocol (a classic group's in ``members``)."""
        g = self.coordinator.groups.get(GROUP)
        if g is None:
            return set()
        return set(g.consumer.members) if g.consumer is not None else set(g.members)

    def _on_poll(self, fx: Any) -> None:
        """Hook: the answers :meth:`GroupCoordinator.poll` gave (classic clients)."""

    def _dispatch(self, kind: str, name: str, payload: Any) -> None:
        c = self.clients[name]
        if kind == "wake":
            if payload == c.incarnation:
                self._on_wake(c)
        elif kind == "arrive":
            self._arrive(c, payload)
        elif kind == "stale":
            fx = self.coordinator.consumer_heartbeat(
                object(), self.now, payload, CALLER, dict(self.topics))
            self._append(fx.records)
            self._note(f"stale {c.name} e{payload.member_epoch} -> "
                       f"{ErrorCode(fx.replies[0][1].error_code).name}")
        elif kind == "answer":
            self._answer(c, payload)
        elif kind == "timeout":
            c.in_flight = False
            c.full = True
            self._note(f"timeout {c.name}")
            self._schedule(c, self.now + 100)

    def _schedule(self, c: Client, hb_at: int | None = None) -> None:
        if hb_at is not None:
            c.hb_at = hb_at
        when = c.hb_at if c.ack_at is None else min(c.hb_at, c.ack_at)
        c.incarnation += 1
        self._wake(c, max(when, self.now))

    def _on_wake(self, c: Client) -> None:
        if c.status in ("silent", "away"):
            if self.now < c.wake_at:
                self._wake(c, c.wake_at)
                return
            if c.status == "away":  # back as a new consumer
                c.member_id = self._member_id()
                c.epoch, c.owned, c.full, c.ack_at = 0, {}, True, None
            c.status = "active"
            self._note(f"back {c.name} {c.member_id}")
        if c.in_flight:
            return
        if c.ack_at is not None and c.ack_at <= self.now:
            c.full = c.full or not c.partial_acks
        elif c.hb_at > self.now:
            self._schedule(c)
            return
        self._send(c, self._request(c))

    def _request(self, c: Client) -> ConsumerGroupHeartbeatRequest:
        req = ConsumerGroupHeartbeatRequest(
            group_id=GROUP, member_id=c.member_id, member_epoch=c.epoch,
            instance_id=c.instance_id)
        if c.epoch != 0 and not c.full and c.ack_at is not None and c.ack_at <= self.now:
            req.topic_partitions = [
                TopicPartitions(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(c.owned.items(), key=lambda kv: str(kv[0]))]
            c.ack_at = None
        if c.epoch == 0 or c.full:
            req.rebalance_timeout_ms = c.rebalance_timeout_ms
            req.subscribed_topic_names = list(c.names) if c.names is not None else None
            req.subscribed_topic_regex = c.regex
            req.server_assignor = c.assignor
            req.topic_partitions = [] if c.epoch == 0 else [
                TopicPartitions(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(c.owned.items(), key=lambda kv: str(kv[0]))]
            c.full, c.ack_at, c.resubscribed = False, None, False
        elif c.resubscribed:
            req.subscribed_topic_names = list(c.names) if c.names is not None else None
            req.subscribed_topic_regex = c.regex
            c.resubscribed = False
        return req

    def _send(self, c: Client, req: ConsumerGroupHeartbeatRequest) -> None:
        c.in_flight = True
        if self.faults and self.stale_requests and self.rng.random() < 0.03:
            self._at(self.now + REQUEST_TIMEOUT_MS, "timeout", c.name)
            self._at(self.now + REQUEST_TIMEOUT_MS + self.rng.randint(1, 8_000), "stale",
                     c.name, req)
            return
        delay = self.rng.choice((0, 0, 5, 50, 400)) if self.faults else 0
        self._at(self.now + delay, "arrive", c.name, req)

    def _arrive(self, c: Client, req: ConsumerGroupHeartbeatRequest) -> None:
        fx = self.coordinator.consumer_heartbeat(
            object(), self.now, req, CALLER, dict(self.topics))
        [(_, resp)] = fx.replies
        what = (f"hb {c.name} {req.member_id} e{req.member_epoch}"
                f"{' full' if req.rebalance_timeout_ms != -1 else ''}"
                f" -> {ErrorCode(resp.error_code).name} e{resp.member_epoch}")
        if self.faults and fx.records and self.rng.random() < 0.02:
            self._note(what + " (crash before append)")
            self.counts["crash-before-append"] = self.counts.get("crash-before-append", 0) + 1
            self._crash(before_append=c)
            return
        self._append(fx.records)
        if req.member_epoch < 0:  # a leave: the client does not wait for the answer
            self._note(what + " (leave)")
            return
        if self.faults and self.rng.random() < 0.07:
            self._note(what + " (lost)")
            self._at(self.now + REQUEST_TIMEOUT_MS, "timeout", c.name)
            return
        self._note(what)
        if resp.error_code:
            self.counts[ErrorCode(resp.error_code).name] = self.counts.get(
                ErrorCode(resp.error_code).name, 0) + 1
        member = self.group.members.get(req.member_id) if self.group else None
        if member is not None and member.state is not MemberState.STABLE:
            self.counts[member.state.name] = self.counts.get(member.state.name, 0) + 1
        delay = self.rng.choice((0, 0, 5, 50, 400)) if self.faults else 0
        self._at(self.now + delay, "answer", c.name, resp)

    def _answer(self, c: Client, resp: ConsumerGroupHeartbeatResponse) -> None:
        c.in_flight = False
        code = ErrorCode(resp.error_code)
        if code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            c.epoch, c.owned, c.full, c.ack_at = 0, {}, True, None
            self._schedule(c, self.now)
            return
        if code is ErrorCode.GROUP_ID_NOT_FOUND:
            # A classic group that cannot be upgraded now (in a rebalance), or one
            # that became classic again while this member was away: start over.
            c.epoch, c.owned, c.full, c.ack_at = 0, {}, True, None
            self._schedule(c, self.now + INTERVAL_MS)
            return
        if code is ErrorCode.UNRELEASED_INSTANCE_ID:
            self._schedule(c, self.now + INTERVAL_MS)
            return
        if code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            c.full = True
            self._schedule(c, self.now + 200)
            return
        assert code is ErrorCode.NONE, f"{c.name}: unexpected {code.name}: {resp.error_message}"
        c.epoch = resp.member_epoch
        assert c.member_id == resp.member_id
        if resp.assignment is not None:
            new = {tp.topic_id: frozenset(tp.partitions)
                   for tp in resp.assignment.topic_partitions if tp.partitions}
            if new != c.owned:
                c.owned = new
                late = self.faults and self.rng.random() < 0.05
                if late:
                    self.counts["late-ack"] = self.counts.get("late-ack", 0) + 1
                c.ack_at = self.now + (c.rebalance_timeout_ms + 1_000 if late else
                                       self.rng.choice((0, 0, 100, 800)) if self.faults else 0)
        self._schedule(c, self.now + resp.heartbeat_interval_ms)

    def _disturb_one(self) -> None:
        self._disturb(self.rng.choice(sorted(self.clients)))

    def _disturb(self, name: str) -> None:
        c = self.clients[name]
        if c.status != "active" or c.in_flight:
            return
        roll = self.rng.random()
        if roll < 0.2:
            if c.regex is not None:
                c.regex = self.rng.choice(REGEXES)
            else:
                c.names = sorted(self.rng.sample(NAMES, self.rng.randint(1, 3)))
            c.resubscribed = True
            self._note(f"subscribe {c.name} {c.names or c.regex}")
            return
        if roll < 0.55:
            pause = self.rng.choice((2_000, SESSION_MS + 2_000, SESSION_MS * 2))
            c.status, c.wake_at = "silent", self.now + pause
            self._note(f"silent {c.name} {pause}")
            c.incarnation += 1
            self._wake(c, c.wake_at)
            return
        static = c.instance_id is not None
        req = ConsumerGroupHeartbeatRequest(
            group_id=GROUP, member_id=c.member_id, member_epoch=-2 if static else -1,
            instance_id=c.instance_id)
        self._note(f"leave {c.name} {c.member_id} {req.member_epoch}")
        c.owned, c.ack_at = {}, None
        c.status, c.wake_at = "away", self.now + self.rng.choice((500, 5_000, SESSION_MS * 2))
        c.incarnation += 1
        self._wake(c, c.wake_at)
        self._at(self.now, "arrive", c.name, req)
        self.check("leave")

    def _topic_change(self) -> None:
        roll = self.rng.random()
        name = self.rng.choice(NAMES)
        if name not in self.topics:
            self.topics[name] = (self._uuid(), self.rng.randint(1, 5))
            self._note(f"topic create {name} {self.topics[name][1]}")
        elif roll < 0.6:
            tid, n = self.topics[name]
            self.topics[name] = (tid, n + self.rng.randint(1, 3))
            self._note(f"topic grow {name} {self.topics[name][1]}")
        else:
            del self.topics[name]
            self._note(f"topic delete {name}")

    def _crash(self, before_append: Client | None, lost: bool = False) -> None:
        """A fresh coordinator replays the log. ``before_append``: the last
        operation's records were not appended and its answer not sent (``lost``:
        the same for an operation of no client here)."""
        old = self.group
        self.coordinator = self._fresh()
        records = [r for r in (decode(k, v) for k, v in self.log) if r is not None]
        self.coordinator.replay(records, self.now)
        self._at(self.now + (self.rng.choice((0, 0, 300, 3_000)) if self.faults else 0),
                 "loaded", "", self.coordinator)
        if before_append is not None:
            self._at(self.now + REQUEST_TIMEOUT_MS, "timeout", before_append.name)
        elif not lost:
            self._note(f"crash ({len(records)} records)")
            same(old, self.group)
        self.check("crash")

    # -- invariants -----------------------------------------------------------------

    def check(self, event: str) -> None:
        where = f"seed {self.seed}, at {self.now} after {len(self.events)} events ({event})"
        cg = self.group
        coordinator_invariants(cg, where)
        members = cg.members if cg is not None else {}
        owners: dict[tuple[uuid.UUID, int], str] = {}
        for c in self.clients.values():
            m = members.get(c.member_id)
            if m is None or c.epoch == 0:
                if c.owned:
                    assert c.member_id in self.expired, (
                        f"{where}: {c.name} owns {c.owned} but {c.member_id} was not expired")
                    assert self.commit(c.member_id, c.epoch, c.instance_id, c.owned) != (
                        ErrorCode.NONE), f"{where}: zombie {c.name} may commit"
                    self.counts["zombie"] = self.counts.get("zombie", 0) + 1
                continue
            held = dict(m.assigned)
            for t, ps in m.pending_revocation.items():
                held[t] = held.get(t, frozenset()) | ps
            for key in pairs(c.owned):
                assert key[1] in held.get(key[0], ()), (
                    f"{where}: {c.name} owns {key} which {m.member_id} does not hold "
                    f"(assigned {m.assigned}, pending {m.pending_revocation})")
                assert key not in owners, f"{where}: {key} owned by {owners[key]} and {c.name}"
                owners[key] = c.name
        self._check_more(where, owners)

    def _check_more(self, where: str, owners: dict[tuple[uuid.UUID, int], str]) -> None:
        """Hook: more clients' claims (classic clients), against ``owners`` so far."""

    def commit(self, member_id: str, epoch: int, instance_id: str | None,
               owned: Assignment) -> ErrorCode | None:
        """An OffsetCommit (v9, through the facade) of ``owned`` (or, when none of
        it exists any more, of some partition) as this member at this epoch or
        generation: its error (NONE: accepted, and its records are appended);
        None when no topic exists."""
        names = {tid: name for name, (tid, _) in self.topics.items()}
        commits = [Commit(names[t], p, 1, -1, None) for t, p in sorted(
            pairs(owned), key=lambda k: (str(k[0]), k[1])) if t in names]
        if not commits and self.topics:
            commits = [Commit(min(self.topics), 0, 1, -1, None)]
        if not commits:
            return None
        req = CommitRequest(GROUP, epoch, member_id, instance_id, -1, commits)
        fx = self.coordinator.commit_offsets(
            object(), self.now, req,
            lambda t, p: t in self.topics and p < self.topics[t][1])
        [(_, errors)] = fx.replies
        codes = set(errors.values())
        assert len(codes) == 1, f"mixed answers to one commit: {errors}"
        code = ErrorCode(codes.pop())
        if not code:
            self._append(fx.records)
        return code

    def quiesce(self, limit_ms: int = 120_000) -> None:
        """No more faults; every client back and heartbeating until the group settles."""
        self.faults = False
        for c in self.clients.values():
            if c.status != "active":
                c.wake_at = self.now
                c.incarnation += 1
                self._wake(c, self.now)
        end = self.now + limit_ms
        while self.now < end:
            self._next_event()
            if self._settled():
                break
        where = f"seed {self.seed}: not settled after {limit_ms} ms"
        cg = self.group
        assert cg is not None and cg.state() is ConsumerGroupState.STABLE, (
            f"{where}: group {cg and cg.state()}")
        wanted = {(tid, p) for c in self.clients.values() for name in c.subscription(self.topics)
                  for tid, n in [self.topics[name]] for p in range(n)}
        owned: dict[tuple[uuid.UUID, int], str] = {}
        for c in self.clients.values():
            for key in pairs(c.owned):
                assert key not in owned, f"{where}: {key} owned twice"
                owned[key] = c.name
        assert set(owned) == wanted, (
            f"{where}: unowned {wanted - set(owned)}, owned but not subscribed "
            f"{set(owned) - wanted}")
        if cg.preferred_assignor(CONFIG.assignors[0]) == "uniform":
            by_sub: dict[frozenset[str], list[int]] = {}
            for c in self.clients.values():
                by_sub.setdefault(c.subscription(self.topics), []).append(
                    sum(len(ps) for ps in c.owned.values()))
            for sub, sizes in by_sub.items():
                assert max(sizes) - min(sizes) <= 1, f"{where}: {sorted(sub)} sizes {sizes}"

    def _settled(self) -> bool:
        cg = self.group
        if cg is None or cg.state() is not ConsumerGroupState.STABLE:
            return False
        if len(cg.members) != len(self.clients):
            return False
        names = {n for c in self.clients.values() for n in c.subscription(self.topics)}
        if cg.subscription != {n: self.topics[n] for n in names}:
            return False
        for c in self.clients.values():
            m = cg.members.get(c.member_id)
            if c.status != "active" or m is None or c.ack_at is not None or c.in_flight:
                return False
            if m.member_epoch != c.epoch or m.assigned != c.owned:
                return False
        return True


def coordinator_invariants(cg: ConsumerGroup | None, where: str) -> None:
    """The invariants of :mod:`odradek.coordinator.consumer.model`."""
    if cg is None:
        return
    held: dict[tuple[uuid.UUID, int], str] = {}
    for mid, m in cg.members.items():
        assert m.member_id == mid, where
        for key in [*pairs(m.assigned), *pairs(m.pending_revocation)]:
            assert key not in held or held[key] == mid, (
                f"{where}: {key} held by {held.get(key)} and {mid}")
            assert key not in held, f"{where}: {mid} has {key} assigned and pending"
            held[key] = mid
        if m.member_epoch >= 0:
            assert m.member_epoch <= cg.assignment_epoch <= cg.group_epoch, (
                f"{where}: {mid} epoch {m.member_epoch}, assignment {cg.assignment_epoch}, "
                f"group {cg.group_epoch}")
        assert (m.state is MemberState.UNREVOKED_PARTITIONS) == bool(m.pending_revocation), (
            f"{where}: {mid} {m.state.name} pending {m.pending_revocation}")
        if m.instance_id is not None:
            assert cg.static_members.get(m.instance_id) == mid, (
                f"{where}: static map {cg.static_members} lacks {m.instance_id} -> {mid}")
    for iid, mid in cg.static_members.items():
        assert mid in cg.members and cg.members[mid].instance_id == iid, (
            f"{where}: static map {iid} -> {mid}")
    assert set(cg.target) <= set(cg.members), f"{where}: target of non-members"


def same(live: ConsumerGroup | None, rebuilt: ConsumerGroup | None) -> None:
    """The group replayed from the log is the live one (timers aside)."""
    assert (live is None) == (rebuilt is None), f"live {live}, rebuilt {rebuilt}"
    if live is None or rebuilt is None:
        return
    assert (live.group_epoch, live.assignment_epoch) == (
        rebuilt.group_epoch, rebuilt.assignment_epoch), "epochs differ after replay"
    assert live.subscription == rebuilt.subscription, "subscription differs after replay"
    assert live.static_members == rebuilt.static_members, "static members differ after replay"
    assert {k: v for k, v in live.target.items() if v} == {
        k: v for k, v in rebuilt.target.items() if v}, "target differs after replay"
    assert sorted(live.members) == sorted(rebuilt.members), "members differ after replay"
    for mid, m in live.members.items():
        r = rebuilt.members[mid]
        assert m.metadata_key() == r.metadata_key(), f"{mid} metadata differs after replay"
        assert m.classic == r.classic, (
            f"{mid} classic metadata differs after replay: live {m.classic}, rebuilt {r.classic}")
        assert m.assignment_key() == r.assignment_key(), (
            f"{mid} assignment differs after replay: live {m.assignment_key()}, "
            f"rebuilt {r.assignment_key()}")


def run(seed: int, steps: int = 1000, *, stale_requests: bool = False) -> ConsumerSim:
    sim = ConsumerSim(seed)
    sim.stale_requests = stale_requests
    try:
        sim.start()
        for _ in range(steps):
            sim.step()
        sim.quiesce()
    except AssertionError as exc:
        raise AssertionError(f"seed {seed}: {exc}\nlast events:\n  "
                             + "\n  ".join(sim.events[-25:])) from exc
    return sim


__all__ = ["ConsumerSim", "coordinator_invariants", "run", "same"]
