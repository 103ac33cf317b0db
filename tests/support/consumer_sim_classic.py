"""Classic clients in the seeded consumer-group simulation: KIP-848's online
upgrade (:mod:`odradek.coordinator.consumer.classic_members`) under the faults of
:mod:`tests.support.consumer_sim`.

:class:`UpgradeSim` adds 1-4 classic clients (JoinGroup v7, SyncGroup,
Heartbeat, LeaveGroup; protocol type ``consumer``) to the world of
:class:`~tests.support.consumer_sim.ConsumerSim`. Most start at once and form a
classic group; the consumer-protocol clients (0-3) start later, and the first
one to join a Stable classic group upgrades it. Some classic clients start late
and join the consumer group as new classic members; when the last
consumer-protocol client leaves or expires while classic ones remain, the group
is downgraded online to a classic group they rejoin; when every member is gone
a JoinGroup turns the empty consumer group classic again.

Classic clients follow the Java client's ConsumerCoordinator, one request in
flight at a time:

* a JoinGroup with no member id gets MEMBER_ID_REQUIRED and an id to join with;
* two kinds. EAGER (protocol ``range``, ConsumerProtocolSubscription v0, no
  owned partitions) revokes everything before each JoinGroup. COOPERATIVE
  (``cooperative-sticky`` then ``range``, v1 with ``owned_partitions``) keeps its
  partitions across the JoinGroup and, at the SyncGroup answer, revokes what it
  no longer has and rejoins at once if it revoked anything. A cooperative client
  in a group that chose ``range`` behaves eagerly (as the Java client does);
* the leader of a classic generation assigns: range per topic over the members
  subscribed to it (by member id), and, as the cooperative protocol requires, a
  partition another member still owns is withheld this generation (it comes at
  the rebalance its owner's revocation triggers). The leader also rejoins when
  the metadata of the members' topics changed since it assigned;
* Heartbeat every second while stable: REBALANCE_IN_PROGRESS -> rejoin;
  ILLEGAL_GENERATION -> every partition lost, rejoin under the same member id;
  UNKNOWN_MEMBER_ID -> every partition lost, rejoin with no member id;
* the same errors from SyncGroup and JoinGroup likewise; COORDINATOR_LOAD_IN_PROGRESS
  -> retry;
* a stable client commits its partitions now and then (OffsetCommit at its
  generation); a commit the coordinator accepts must come from a member at
  that generation (or epoch);
* leaving: a dynamic client drops its partitions and sends LeaveGroup, and
  comes back later as a new consumer; a static one (``group.instance.id``)
  just stops, as the Java client does, and comes back under its instance id;
* silent for a while (longer or shorter than its classic session timeout).

Faults as in the base simulation: lost answers (the client times out: a
JoinGroup after its rebalance timeout + 5 s, others after the request
timeout), delayed requests and answers, crashes (requests parked in the
coordinator — a JoinGroup waiting for the others, a SyncGroup waiting for the
leader — are lost with it; a crash may also come between an operation and the
append of its records), topics created, grown and deleted. A deleted topic's
name is never reused here: the classic protocol names topics, and a name
reused under a new id would be the same partition to a classic client.

Checked after every event, besides the base checks: no partition owned by two
clients of either kind (a zombie — a client whose member the coordinator's
timers removed — aside, whose commits are refused); what a classic client
owns is within what its member holds (in a consumer group: assigned or pending
revocation; in a classic group: its assignment or what its JoinGroup said it
still owns); after a crash the rebuilt group equals the live one (a consumer
group in full, classic metadata included; a classic group when Stable).
:meth:`UpgradeSim.quiesce`: the group settles Stable with every subscribed
partition owned by exactly one client.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from odradek.coordinator.classic.membership import Leaving
from odradek.coordinator.consumer.model import (
    Assignment,
    ConsumerGroupState,
    MemberState,
    normalized,
    pairs,
)
from odradek.coordinator.group import GroupState
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from odradek.wire.messages.consumer_protocol_assignment import (
    TopicPartition as AssignedTopic,
)
from odradek.wire.messages.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
)
from odradek.wire.messages.consumer_protocol_subscription import (
    TopicPartition as OwnedTopic,
)
from odradek.wire.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from odradek.wire.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment
from tests.support.consumer_sim import (
    GROUP,
    INTERVAL_MS,
    NAMES,
    REQUEST_TIMEOUT_MS,
    ConsumerSim,
)

JOIN_VERSION = 7
EAGER, COOPERATIVE = "range", "cooperative-sticky"


@dataclass
class ClassicClient:
    name: str
    instance_id: str | None
    names: list[str]
    cooperative: bool
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str = ""
    generation: int = -1
    protocol: str | None = None
    """The protocol of the last JoinGroup answer: ``range`` means eager behaviour."""
    owned: Assignment = field(default_factory=dict)
    phase: str = "join"
    """join (a JoinGroup is due) | sync (a SyncGroup is due) | stable (heartbeating)."""
    status: str = "active"
    wake_at: int = 0
    in_flight: int | None = None
    """The sequence number of the request in flight (answers to others are dropped)."""
    hb_at: int = 0
    incarnation: int = 0
    leader_of: dict[str, tuple[uuid.UUID, int]] | None = None
    """As leader: the members' topics' metadata it assigned with."""
    join_members: list[Any] = field(default_factory=list)
    """The members the last JoinGroup answer gave this client as leader."""

    @property
    def eager(self) -> bool:
        return self.protocol == EAGER if self.protocol else not self.cooperative

    def protocols(self, names: dict[str, uuid.UUID]) -> list[JoinGroupRequestProtocol]:
        if not self.cooperative:
            data = ConsumerProtocolSubscription(topics=list(self.names))
            meta = (0).to_bytes(2, "big") + data.encode(0)
            return [JoinGroupRequestProtocol(EAGER, meta)]
        by_id = {tid: n for n, tid in names.items()}
        owned = [OwnedTopic(by_id[t], sorted(ps)) for t, ps in sorted(
            self.owned.items(), key=lambda kv: by_id[kv[0]])]
        data = ConsumerProtocolSubscription(topics=list(self.names), owned_partitions=owned)
        meta = (1).to_bytes(2, "big") + data.encode(1)
        return [JoinGroupRequestProtocol(COOPERATIVE, meta), JoinGroupRequestProtocol(EAGER, meta)]


def _subscription(data: bytes) -> ConsumerProtocolSubscription:
    version = int.from_bytes(data[:2], "big", signed=True)
    return ConsumerProtocolSubscription.decode(memoryview(data)[2:], min(version, 3))


class UpgradeSim(ConsumerSim):
    """:class:`ConsumerSim` with classic clients that are upgraded online."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.classics: dict[str, ClassicClient] = {}
        self._consumer_group = False  # the group had consumer-protocol members
        self.name_ids = {n: tid for n, (tid, _) in self.topics.items()}
        """Every topic name ever created -> its id (names are never reused here)."""
        self.parked: dict[object, tuple[str, int]] = {}
        """Classic requests waiting in the coordinator: token -> (client, seq)."""
        self.requests: dict[object, tuple[str, int, str]] = {}
        # The consumer-protocol clients: 0-3 of the base's, starting later.
        keep = self.rng.randint(0, min(3, len(self.clients)))
        for name in sorted(self.clients)[keep:]:
            del self.clients[name]
        for c in self.clients.values():
            c.incarnation += 1
            c.hb_at = self.now + self.rng.randint(6_000, 40_000)
            self._wake(c, c.hb_at)
        # One kind per seed: a classic group's record keeps only the chosen
        # protocol, so after a replay an eager client could not join a group
        # that chose cooperative-sticky (INCONSISTENT_GROUP_PROTOCOL, as in Kafka).
        cooperative = self.rng.random() < 0.5
        for i in range(self.rng.randint(1, 4)):
            session = self.rng.choice((6_000, 10_000, 20_000))
            k = ClassicClient(
                f"k{i}", f"s{i}" if self.rng.random() < 0.25 else None,
                sorted(self.rng.sample(NAMES, self.rng.randint(1, 3))),
                cooperative, session,
                self.rng.choice((session, 15_000, 30_000)))
            late = self.rng.random() < 0.3
            k.hb_at = self.now + (self.rng.randint(5_000, 60_000) if late
                                  else self.rng.randint(0, 2_000))
            self.classics[k.name] = k
            self._kwake(k, k.hb_at)

    # -- plumbing -------------------------------------------------------------------

    def _kwake(self, k: ClassicClient, when: int) -> None:
        k.incarnation += 1
        self._at(max(when, self.now), "wake", k.name, k.incarnation)

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def _topic_change(self) -> None:
        roll = self.rng.random()
        fresh = [n for n in NAMES if n not in self.name_ids]
        if fresh and roll < 0.3:
            name = self.rng.choice(fresh)
            self.topics[name] = (self._uuid(), self.rng.randint(1, 5))
            self.name_ids[name] = self.topics[name][0]
            self._note(f"topic create {name} {self.topics[name][1]}")
        elif self.topics and roll < 0.85:
            name = self.rng.choice(sorted(self.topics))
            tid, n = self.topics[name]
            self.topics[name] = (tid, n + self.rng.randint(1, 3))
            self._note(f"topic grow {name} {self.topics[name][1]}")
        elif self.topics:
            name = self.rng.choice(sorted(self.topics))
            del self.topics[name]
            self._note(f"topic delete {name}")

    def _decode_assignment(self, data: bytes) -> Assignment:
        if len(data) < 2:
            return {}
        version = int.from_bytes(data[:2], "big", signed=True)
        a = ConsumerProtocolAssignment.decode(memoryview(data)[2:], min(version, 3))
        return normalized((self.name_ids[tp.topic], tp.partitions)
                          for tp in a.assigned_partitions)

    def _existing(self, owned: Assignment) -> Assignment:
        ids = {tid for tid, _ in self.topics.values()}
        return {t: ps for t, ps in owned.items() if t in ids}

    # -- events ---------------------------------------------------------------------

    def _disturb_one(self) -> None:
        name = self.rng.choice(sorted([*self.clients, *self.classics]))
        if name in self.classics:
            self._kdisturb(self.classics[name])
        else:
            self._disturb(name)

    def _dispatch(self, kind: str, name: str, payload: Any) -> None:
        k = self.classics.get(name)
        if k is None:
            if name in self.clients:  # (not one of the base's clients left out)
                super()._dispatch(kind, name, payload)
        elif kind == "wake":
            if payload == k.incarnation:
                self._kon_wake(k)
        elif kind == "carrive":
            self._karrive(k, *payload)
        elif kind == "canswer":
            self._kanswer(k, *payload)
        elif kind == "ctimeout" and payload == k.in_flight:
            k.in_flight = None
            self._note(f"ctimeout {k.name}")
            self._count("timeout")
            if k.phase == "sync":
                k.phase = "join"
            self._kwake(k, self.now + 100)

    def _kon_wake(self, k: ClassicClient) -> None:
        if k.status in ("silent", "away"):
            if self.now < k.wake_at:
                self._kwake(k, k.wake_at)
                return
            if k.status == "away":
                k.member_id, k.generation, k.owned, k.phase = "", -1, {}, "join"
            k.status = "active"
            self._note(f"back {k.name}")
        if k.in_flight is not None:
            return
        if k.phase == "stable":
            if self.now < k.hb_at:
                self._kwake(k, k.hb_at)
                return
            if k.leader_of is not None and k.leader_of != self._metadata(k.join_members):
                self._note(f"metadata changed: {k.name} rejoins")
                k.phase = "join"
            elif self.faults and self.rng.random() < 0.2:
                self._kcommit(k)
        if k.phase == "join":
            self._kjoin(k)
        elif k.phase == "sync":
            self._ksync(k)
        else:
            self._ksend(k, "hb", (k.member_id, k.generation))

    def _kcommit(self, k: ClassicClient) -> None:
        code = self.commit(k.member_id, k.generation, k.instance_id, k.owned)
        self._count(f"commit-{code.name if code is not None else 'none'}")
        if code is ErrorCode.NONE:
            group = self.coordinator.groups.get(GROUP)
            assert group is not None
            if group.consumer is not None:
                m = group.consumer.members.get(k.member_id)
                assert m is not None and m.member_epoch == k.generation and m.classic, (
                    f"seed {self.seed}: commit of {k.name} at {k.generation} accepted")
            else:
                assert k.member_id in group.members and group.generation == k.generation, (
                    f"seed {self.seed}: commit of {k.name} at {k.generation} accepted")

    def _kjoin(self, k: ClassicClient) -> None:
        k.owned = self._existing(k.owned)  # partitions of deleted topics are lost
        if k.eager and k.owned:  # the eager protocol revokes everything first
            k.owned = {}
            self._count("eager-revoke")
        req = JoinGroupRequest(
            group_id=GROUP, session_timeout_ms=k.session_timeout_ms,
            rebalance_timeout_ms=k.rebalance_timeout_ms, member_id=k.member_id,
            group_instance_id=k.instance_id, protocol_type="consumer",
            protocols=k.protocols(self.name_ids))
        self._ksend(k, "join", req)

    def _ksync(self, k: ClassicClient) -> None:
        assignments: list[SyncGroupRequestAssignment] = []
        if k.join_members:
            assignments = self._leader_assign(k)
        req = SyncGroupRequest(
            group_id=GROUP, generation_id=k.generation, member_id=k.member_id,
            group_instance_id=k.instance_id, protocol_type="consumer",
            protocol_name=k.protocol, assignments=assignments)
        self._ksend(k, "sync", req)

    def _metadata(self, members: list[Any]) -> dict[str, tuple[uuid.UUID, int]]:
        wanted = {t for m in members for t in _subscription(bytes(m.metadata)).topics}
        return {n: self.topics[n] for n in sorted(wanted) if n in self.topics}

    def _leader_assign(self, k: ClassicClient) -> list[SyncGroupRequestAssignment]:
        """Range per topic; a partition another member still owns is withheld."""
        subs = {m.member_id: _subscription(bytes(m.metadata)) for m in k.join_members}
        owner = {(tp.topic, p): mid for mid, s in subs.items()
                 for tp in s.owned_partitions for p in tp.partitions}
        k.leader_of = self._metadata(k.join_members)
        out: dict[str, dict[str, list[int]]] = {mid: {} for mid in subs}
        for topic, (_, n) in k.leader_of.items():
            ms = sorted(mid for mid, s in subs.items() if topic in s.topics)
            per, extra = divmod(n, len(ms))
            start = 0
            for i, mid in enumerate(ms):
                count = per + (1 if i < extra else 0)
                for p in range(start, start + count):
                    if owner.get((topic, p), mid) == mid:
                        out[mid].setdefault(topic, []).append(p)
                    else:
                        self._count("withheld")
                start += count
        result = []
        for mid, topics in out.items():
            body = ConsumerProtocolAssignment(assigned_partitions=[
                AssignedTopic(t, ps) for t, ps in sorted(topics.items())])
            result.append(SyncGroupRequestAssignment(
                mid, (1).to_bytes(2, "big") + body.encode(1)))
        return result

    def _ksend(self, k: ClassicClient, api: str, req: Any) -> None:
        self._seq += 1
        k.in_flight = self._seq
        delay = self.rng.choice((0, 0, 5, 50, 400)) if self.faults else 0
        self._at(self.now + delay, "carrive", k.name, (self._seq, api, req))

    def _timeout_ms(self, k: ClassicClient, api: str) -> int:
        return k.rebalance_timeout_ms + 5_000 if api == "join" else REQUEST_TIMEOUT_MS

    def _karrive(self, k: ClassicClient, seq: int, api: str, req: Any) -> None:
        token = object()
        topics = dict(self.topics)
        if api == "join":
            fx = self.coordinator.join(token, self.now, JOIN_VERSION, req, "sim", "/127.0.0.1",
                                       lambda: topics)
        elif api == "sync":
            fx = self.coordinator.sync(token, self.now, req, lambda: topics)
        elif api == "hb":
            fx = self.coordinator.heartbeat(token, self.now, GROUP, req[0], k.instance_id,
                                            req[1], lambda: topics)
        else:  # leave: the client does not wait for the answer
            fx = self.coordinator.leave(token, self.now, GROUP, [Leaving(req, None)])
        self.requests[token] = (k.name, seq, api)
        what = f"{api} {k.name} {k.member_id or '-'} g{k.generation}"
        if self.faults and fx.records and self.rng.random() < 0.02:
            self._note(what + " (crash before append)")
            self._count("crash-before-append")
            self.requests.pop(token)
            self._crash(before_append=None, lost=True)
            if api != "leave":
                self._at(self.now + self._timeout_ms(k, api), "ctimeout", k.name, seq)
            return
        self._append(fx.records)
        if api == "leave":  # (its answer is not awaited; others' may come with it)
            self.requests.pop(token)
            self._note(what)
        elif not any(t is token for t, _ in fx.replies):
            self.parked[token] = (k.name, seq)
            self._note(what + " (parked)")
        self._deliver(fx.replies, what)

    def _on_poll(self, fx: Any) -> None:
        self._deliver(fx.replies, "poll")

    def _deliver(self, replies: list[tuple[object, Any]], what: str) -> None:
        for token, resp in replies:
            if token not in self.requests:
                continue
            name, seq, api = self.requests.pop(token)
            self.parked.pop(token, None)
            k = self.classics[name]
            code = ErrorCode(resp.error_code)
            self._count(f"{api}-{code.name}")
            self._note(f"{what}: {api} {name} -> {code.name}")
            decoded = None
            if api == "sync" and not code:
                decoded = self._decode_assignment(bytes(resp.assignment))
            if self.faults and self.rng.random() < 0.07:
                self._note(f"  lost answer to {name}")
                self._at(self.now + self._timeout_ms(k, api), "ctimeout", name, seq)
                continue
            delay = self.rng.choice((0, 0, 5, 50, 400)) if self.faults else 0
            self._at(self.now + delay, "canswer", name, (seq, api, resp, decoded))

    def _lose_all(self, k: ClassicClient, reset_id: bool) -> None:
        k.owned, k.generation, k.phase, k.leader_of = {}, -1, "join", None
        if reset_id:
            k.member_id = ""

    def _kanswer(self, k: ClassicClient, seq: int, api: str, resp: Any,
                 decoded: Assignment | None) -> None:
        if seq != k.in_flight:
            return
        k.in_flight = None
        code = ErrorCode(resp.error_code)
        if code is ErrorCode.UNKNOWN_MEMBER_ID:
            self._lose_all(k, reset_id=True)
        elif code is ErrorCode.ILLEGAL_GENERATION:
            self._lose_all(k, reset_id=False)
        elif code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR,
                      ErrorCode.COORDINATOR_NOT_AVAILABLE):
            self._kwake(k, self.now + 200)
            return
        elif code is ErrorCode.REBALANCE_IN_PROGRESS:
            k.phase = "join"
        elif api == "join" and code is ErrorCode.MEMBER_ID_REQUIRED:
            k.member_id = resp.member_id
        elif code:
            raise AssertionError(f"{k.name}: unexpected {code.name} to {api}")
        elif api == "join":
            k.member_id, k.generation, k.protocol = resp.member_id, resp.generation_id, (
                resp.protocol_name)
            k.join_members = list(resp.members) if resp.leader == k.member_id else []
            k.leader_of = None
            k.phase = "sync"
        elif api == "sync":
            assert decoded is not None
            revoked = {t: ps - decoded.get(t, frozenset()) for t, ps in k.owned.items()}
            revoked = {t: ps for t, ps in revoked.items() if ps}
            k.owned = decoded  # (eager: it revoked before joining, or the group just
            # chose the eager protocol: the leader withheld what it owned)
            k.phase = "stable"
            if revoked and not k.eager:
                self._count("cooperative-revoke")
                k.phase = "join"
            k.hb_at = self.now + INTERVAL_MS
            self._kwake(k, k.hb_at)
            return
        else:
            k.hb_at = self.now + INTERVAL_MS
            self._kwake(k, k.hb_at)
            return
        self._kwake(k, self.now)

    def _kdisturb(self, k: ClassicClient) -> None:
        if k.status != "active" or k.in_flight is not None:
            return
        if self.rng.random() < 0.6:
            pause = self.rng.choice((2_000, k.session_timeout_ms + 2_000,
                                     k.session_timeout_ms * 2))
            k.status, k.wake_at = "silent", self.now + pause
            self._note(f"silent {k.name} {pause}")
            self._kwake(k, k.wake_at)
            return
        self._note(f"leave {k.name} {k.member_id or '-'}")
        if k.instance_id is None and k.member_id:
            self._ksend(k, "leave", k.member_id)
        k.owned, k.in_flight = {}, None
        k.status, k.wake_at = "away", self.now + self.rng.choice(
            (500, 5_000, k.session_timeout_ms * 2))
        self._kwake(k, k.wake_at)
        self.check("leave")

    def _crash(self, before_append: Any, lost: bool = False) -> None:
        group = self.coordinator.groups.get(GROUP)
        classic = None
        if group is not None and group.consumer is None and group.state is GroupState.STABLE:
            classic = (group.generation, group.protocol_name,
                       {mid: m.assignment for mid, m in group.members.items()})
        for _, (name, seq) in self.parked.items():
            k = self.classics[name]
            self._at(self.now + self._timeout_ms(k, "join"), "ctimeout", name, seq)
        self.parked.clear()
        self.requests.clear()
        super()._crash(before_append, lost)
        if classic is not None and not lost:
            rebuilt = self.coordinator.groups.get(GROUP)
            assert rebuilt is not None and rebuilt.consumer is None, (
                f"seed {self.seed}: classic group lost in replay")
            got = (rebuilt.generation, rebuilt.protocol_name,
                   {mid: m.assignment for mid, m in rebuilt.members.items()})
            assert got == classic, f"seed {self.seed}: classic group differs after replay"

    # -- invariants -----------------------------------------------------------------

    def _check_more(self, where: str, owners: dict[tuple[uuid.UUID, int], str]) -> None:
        group = self.coordinator.groups.get(GROUP)
        if group is not None and group.consumer is not None:
            self._consumer_group = bool(group.consumer.members)
        elif group is not None and self._consumer_group and group.members:
            self._count("downgrade")  # the last consumer-protocol member left
            self._consumer_group = False
        for k in self.classics.values():
            owned = self._existing(k.owned)
            if not owned:
                continue
            held: Assignment | None = None
            if group is not None and group.consumer is not None:
                m = group.consumer.members.get(k.member_id)
                if m is not None:
                    assert m.classic is not None, f"{where}: {k.name}'s member is not classic"
                    held = normalized([*m.assigned.items(), *m.pending_revocation.items()])
            elif group is not None and k.member_id in group.members:
                cm = group.members[k.member_id]
                said = _subscription(cm.metadata(group.protocol_name) or cm.protocols[0][1])
                held = normalized([
                    *self._decode_assignment(cm.assignment).items(),
                    *((self.name_ids[tp.topic], tp.partitions) for tp in said.owned_partitions)])
            if held is None:
                assert k.member_id in self.expired, (
                    f"{where}: {k.name} owns {owned} but {k.member_id} was not expired")
                assert self.commit(k.member_id, k.generation, k.instance_id, owned) != (
                    ErrorCode.NONE), f"{where}: zombie {k.name} may commit"
                self._count("zombie")
                continue
            for key in pairs(owned):
                assert key[1] in held.get(key[0], ()), (
                    f"{where}: {k.name} owns {key} which {k.member_id} does not hold ({held})")
                assert key not in owners, f"{where}: {key} owned by {owners[key]} and {k.name}"
                owners[key] = k.name

    def quiesce(self, limit_ms: int = 180_000) -> None:
        """No more faults; every client back until the group settles: Stable,
        every subscribed partition owned by exactly one client."""
        self.faults = False
        for c in self.clients.values():
            if c.status != "active":
                c.wake_at = self.now
                c.incarnation += 1
                self._wake(c, self.now)
        for k in self.classics.values():
            if k.status != "active":
                k.wake_at = self.now
                self._kwake(k, self.now)
        end = self.now + limit_ms
        while self.now < end:
            self._next_event()
            if self._settled():
                break
        where = f"seed {self.seed}: not settled after {limit_ms} ms"
        group = self.coordinator.groups.get(GROUP)
        assert group is not None, where
        if group.consumer is not None:
            assert group.consumer.state() is ConsumerGroupState.STABLE, (
                f"{where}: {group.consumer.state()}")
        else:
            assert group.state is GroupState.STABLE, f"{where}: classic {group.state}"
        wanted = {(tid, p) for sub in self._subscriptions() for name in sub
                  for tid, n in [self.topics[name]] for p in range(n)}
        owned: dict[tuple[uuid.UUID, int], str] = {}
        for name, a in self._owned():
            for key in pairs(a):
                assert key not in owned, f"{where}: {key} owned twice"
                owned[key] = name
        assert set(owned) == wanted, (
            f"{where}: unowned {wanted - set(owned)}, owned but not subscribed "
            f"{set(owned) - wanted}")

    def _subscriptions(self) -> list[frozenset[str]]:
        subs = [c.subscription(self.topics) for c in self.clients.values()]
        subs += [frozenset(n for n in k.names if n in self.topics)
                 for k in self.classics.values()]
        return subs

    def _owned(self) -> list[tuple[str, Assignment]]:
        return [*((c.name, c.owned) for c in self.clients.values()),
                *((k.name, k.owned) for k in self.classics.values())]

    def _settled(self) -> bool:
        group = self.coordinator.groups.get(GROUP)
        if group is None:
            return False
        if any(k.status != "active" or k.in_flight is not None or k.phase != "stable"
               for k in self.classics.values()):
            return False
        if group.consumer is None:
            if self.clients or group.state is not GroupState.STABLE:
                return False
            if set(group.members) != {k.member_id for k in self.classics.values()}:
                return False
            for k in self.classics.values():
                m = group.members[k.member_id]
                if k.generation != group.generation or (
                        k.owned != self._decode_assignment(m.assignment)):
                    return False
                if k.leader_of is not None and k.leader_of != self._metadata(k.join_members):
                    return False
            return True
        cg = group.consumer
        if cg.state() is not ConsumerGroupState.STABLE:
            return False
        if set(cg.members) != ({c.member_id for c in self.clients.values()}
                               | {k.member_id for k in self.classics.values()}):
            return False
        names = {n for sub in self._subscriptions() for n in sub}
        if cg.subscription != {n: self.topics[n] for n in names}:
            return False
        for k in self.classics.values():
            m = cg.members[k.member_id]
            if m.member_epoch != k.generation or m.assigned != k.owned or (
                    m.state is not MemberState.STABLE):
                return False
        for c in self.clients.values():
            m = cg.members[c.member_id]
            if c.status != "active" or c.ack_at is not None or c.in_flight:
                return False
            if m.member_epoch != c.epoch or m.assigned != c.owned:
                return False
        return True


def run(seed: int, steps: int = 1000) -> UpgradeSim:
    sim = UpgradeSim(seed)
    try:
        sim.start()
        for _ in range(steps):
            sim.step()
        sim.quiesce()
    except AssertionError as exc:
        raise AssertionError(f"seed {seed}: {exc}\nlast events:\n  "
                             + "\n  ".join(sim.events[-30:])) from exc
    return sim


__all__ = ["ClassicClient", "UpgradeSim", "run"]
