"""The controller's leadership decisions under a seeded simulation of restarts
and wiped disks.

The world: three brokers and one partition (RF 3, ``min.insync.replicas`` 2)
run by the real controller functions (``odradek.metadata.controller`` and
``partition_changes``) on a real :class:`MetadataImage`, records replayed as
the quorum would. Each broker's log is modelled by its length (replicas copy
their leader, so logs are prefixes of one history). Events, drawn from the
seed: produce (acknowledged once every ISR member has the record and the ISR
has at least 2 members, as acks=all), a follower catching up and its leader
adding it to the ISR (AlterPartition), a leader dropping a dead member from
the ISR, a broker crashing (fenced), restarting on its disk (registered
again), or restarting with its disk wiped and formatted again (a new
directory id, an empty log), every broker restarting at once, and, in some
runs, an unclean election.

After every event:

* with unclean elections off, the leader (if any) holds every acknowledged
  record that some replica still holds (wiping every disk that had a record
  loses it; no decision may): nothing acknowledged is lost to an election;
* the leader is never a replica that lost its log (LOST) while a live replica
  of the partition did not;
* a LOST replica is never in the ISR.

A failure names the seed and the events before it.
"""

from __future__ import annotations

import copy
import random
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from odradek.common.ids import SeededIds
from odradek.metadata import controller, directories, partition_changes
from odradek.metadata.image import Endpoint, MetadataImage, PartitionImage
from odradek.wire.errors import ErrorCode

BROKERS = (1, 2, 3)
MIN_ISR = 2


@dataclass
class World:
    seed: int
    unclean: bool
    rng: random.Random = field(init=False)
    image: MetadataImage = field(default_factory=MetadataImage)
    ids: SeededIds = field(init=False)
    log: dict[int, int] = field(default_factory=lambda: dict.fromkeys(BROKERS, 0))
    alive: dict[int, bool] = field(default_factory=lambda: dict.fromkeys(BROKERS, True))
    dirs: dict[int, uuid.UUID] = field(default_factory=dict)
    acked: int = 0
    trace: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.ids = SeededIds(self.seed)
        for b in BROKERS:
            self.dirs[b] = self.ids.uuid()
            self._register(b)
        configs = {"unclean.leader.election.enable": "true"} if self.unclean else {}
        self._apply(controller.create_topic(self.image, "t", 1, 3, configs, node_id=1,
                                            default_partitions=1, topic_id=self.ids.uuid()))

    @property
    def p(self) -> PartitionImage:
        return self.image.topics["t"].partitions[0]

    def fail(self, why: str) -> AssertionError:
        return AssertionError(f"election sim seed={self.seed} unclean={self.unclean}: {why}\n"
                              + "\n".join(self.trace[-25:]))

    def _apply(self, outcome: Any) -> None:
        assert outcome.error == ErrorCode.NONE, outcome.message
        for record in outcome.records:
            self.image.replay(record)

    def _register(self, b: int) -> None:
        self._apply(controller.register_broker(
            self.image, b, [Endpoint("PLAINTEXT", "h", 9000 + b)], self.ids.uuid(),
            fence_previous=True, log_dirs=[self.dirs[b]]))

    def _alter(self, isr: list[int]) -> None:
        p, leader = self.p, self.p.leader
        outcome, _ = controller.alter_partition(
            self.image, leader, self.image.brokers[leader].epoch, "t", 0, p.leader_epoch,
            p.partition_epoch, isr)
        if not outcome.error:
            self._apply(outcome)

    # -- events -------------------------------------------------------------------

    def step(self) -> None:
        roll = self.rng.random()
        p = self.p
        leader = p.leader
        if roll < 0.35 and leader >= 0 and self.alive[leader]:
            self.log[leader] += 1  # produce; ISR members copy it if they are alive
            if len(p.isr) >= MIN_ISR and all(self.alive[r] for r in p.isr):
                for r in p.isr:
                    self.log[r] = self.log[leader]
                self.acked = max(self.acked, self.log[leader])
                self.trace.append(f"produce -> acked {self.acked}")
            else:
                self.trace.append(f"produce on {leader} (not acknowledged, ISR {p.isr})")
        elif roll < 0.5 and leader >= 0 and self.alive[leader]:
            out = [r for r in p.replicas if r not in p.isr and self.alive[r]
                   and partition_changes.live_brokers(self.image) >= {r}]
            if out:
                r = self.rng.choice(out)
                self.log[r] = self.log[leader]  # truncate where it diverges, then copy
                self._alter(sorted([*p.isr, r]))
                self.trace.append(f"{r} caught up from {leader}, ISR {self.p.isr}")
        elif roll < 0.6 and leader >= 0 and self.alive[leader]:
            dead = [r for r in p.isr if not self.alive[r] and r != leader]
            if dead:
                self._alter([r for r in p.isr if r not in dead])
                self.trace.append(f"leader {leader} dropped {dead}, ISR {self.p.isr}")
        elif roll < 0.72:
            b = self.rng.choice(BROKERS)
            if self.alive[b]:
                self.alive[b] = False
                self._apply(controller.fence_broker(self.image, b))
                self.trace.append(f"{b} crashed; leader {self.p.leader} ISR {self.p.isr}")
        elif roll < 0.84:
            b = self.rng.choice(BROKERS)
            if not self.alive[b]:
                self.alive[b] = True
                self._register(b)
                self.trace.append(f"{b} restarted; leader {self.p.leader} ISR {self.p.isr}")
        elif roll < 0.9:
            b = self.rng.choice(BROKERS)
            self.alive[b] = True
            self.log[b] = 0
            # Records no replica holds any more are gone with the disks, not lost
            # by a decision: what the leader must hold is what some replica has.
            self.acked = min(self.acked, max(self.log.values()))
            self.dirs[b] = self.ids.uuid()
            self._register(b)
            self.trace.append(f"{b} came back WIPED; leader {self.p.leader} ISR {self.p.isr}")
        elif roll < 0.93:
            for b in BROKERS:
                self.alive[b] = False
                self._apply(controller.fence_broker(self.image, b))
            for b in self.rng.sample(BROKERS, len(BROKERS)):
                self.alive[b] = True
                self._register(b)
            self.trace.append(f"every broker restarted; leader {self.p.leader} ISR {self.p.isr}")
        elif roll < 0.96 and self.unclean and leader < 0:
            results, outcome = partition_changes.elect_leaders(
                self.image, partition_changes.UNCLEAN, [("t", 0)])
            if results[("t", 0)][0] == ErrorCode.NONE:
                self._apply(outcome)
                self.acked = min(self.acked, self.log[self.p.leader])  # unclean: may lose
                self.trace.append(f"unclean election: {self.p.leader}")
        self.check()

    def check(self) -> None:
        p = self.p
        lost = directories.lost_replicas(p)
        if lost & set(p.isr):
            raise self.fail(f"LOST replicas {lost} in the ISR {p.isr}")
        if p.leader < 0:
            return
        live = partition_changes.live_brokers(self.image)
        if p.leader in lost and any(r in live and r not in lost for r in p.replicas):
            raise self.fail(f"LOST replica {p.leader} leads while {sorted(live - lost)} live")
        if not self.unclean and self.log[p.leader] < self.acked:
            raise self.fail(f"leader {p.leader} has {self.log[p.leader]} records, "
                            f"{self.acked} were acknowledged")

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step()


@pytest.mark.parametrize("unclean", [False, True])
@pytest.mark.parametrize("chunk", range(2))
def test_no_acknowledged_record_is_lost_to_an_election(chunk: int, unclean: bool) -> None:
    for seed in range(chunk * 100, chunk * 100 + 100):
        World(seed, unclean).run(300)


def test_without_the_lost_rule_a_wiped_replica_would_lose_acknowledged_records(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulation finds the bug it guards against: with brokers registering
    no directory (so no replica is ever marked LOST), a wiped broker that was
    the last ISR member is elected with its empty log."""
    real = controller.register_broker

    def no_dirs(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("log_dirs", None)
        return real(*args, **kwargs)

    monkeypatch.setattr(controller, "register_broker", no_dirs)
    failures = 0
    for seed in range(100):
        try:
            World(seed, unclean=False).run(300)
        except AssertionError as exc:
            failures += "acknowledged" in str(exc)
    assert failures > 0


def test_world_copies_are_independent() -> None:
    a = World(1, False)
    b = copy.deepcopy(a)
    a.run(50)
    assert b.acked == 0
