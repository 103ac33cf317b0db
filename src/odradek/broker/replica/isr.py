"""Leaders: keeping each partition's ISR true, through the controller (KIP-497).

Every ``replica.lag.time.max.ms / 2`` (and at once when a follower's fetch
makes it eligible to join), each partition this broker leads is asked for the
ISR change it wants (:meth:`PartitionState.propose_isr`: members that have
not been caught up for ``replica.lag.time.max.ms`` out, replicas that reached
the HW and this epoch's start in). The changes go to the active controller in
one AlterPartition request (v1: by topic name), with the leader epoch and the
partition epoch they were decided on. Only one change per partition is in
flight: an added member counts for the HW at once, a removed one until the
controller confirms.

The answer, per partition: success sets the ISR and partition epoch the
controller committed (the metadata log brings the same record later);
INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH, INELIGIBLE_REPLICA and others
drop the pending change, to be decided again on the next round with fresh
metadata; a controller that cannot be reached drops them all the same.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from odradek.broker.aio import cancel_and_wait, wait_event
from odradek.broker.replica.partitions import Partition
from odradek.replication.effects import Changed, hw_change
from odradek.wire.messages import alter_partition_request as ap
from odradek.wire.messages import alter_partition_response as apr

if TYPE_CHECKING:
    from odradek.broker.replica.ports import AlterPartition, MetadataView

log = logging.getLogger("odradek.replication")


class IsrManager:
    def __init__(self, state: MetadataView, alter_partition: AlterPartition) -> None:
        self.state = state
        self.alter_partition = alter_partition
        self.lag_ms = state.config.get_int("replica.lag.time.max.ms")
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.sent = 0
        """AlterPartition requests sent (for tests and metrics)."""

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    def poke(self) -> None:
        """A follower may join an ISR: decide now rather than at the next tick."""
        self._wake.set()

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def _loop(self) -> None:
        interval = max(self.lag_ms / 2000, 0.05)
        while True:
            await wait_event(self._wake, interval)
            self._wake.clear()
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("ISR check failed")

    async def check(self) -> None:
        """One round: propose every wanted ISR change and send them."""
        state = self.state
        now = state.clock.now_ms()
        # Live brokers with their registration epochs: a replica joins an ISR only
        # on a log end fetched in its current registration (KIP-903).
        live = {b.node_id: b.epoch for b in state.image.brokers.values() if not b.fenced}
        proposals: list[tuple[Partition, frozenset[int]]] = []
        for part in state.partitions.partitions.values():
            st = part.state
            if not st.is_leader or len(st.replicas) < 2:
                continue
            proposal = st.propose_isr(now, self.lag_ms, live)
            if proposal is not None:
                proposals.append((part, proposal))
                # An added member counts for the HW at once (the maximal ISR).
                state.partitions.act(part, Changed.HW)
        if proposals:
            await self._send(proposals)

    async def _send(self, proposals: list[tuple[Partition, frozenset[int]]]) -> None:
        state = self.state
        topics: dict[str, list[ap.PartitionData]] = {}
        for part, isr in proposals:
            log.info("%s-%d: proposing ISR %s (was %s) at leader epoch %d",
                     part.topic, part.index, sorted(isr), sorted(part.state.isr),
                     part.state.leader_epoch)
            topics.setdefault(part.topic, []).append(ap.PartitionData(
                partition_index=part.index, leader_epoch=part.state.leader_epoch,
                new_isr=sorted(isr), partition_epoch=part.state.partition_epoch))
        broker = state.image.brokers.get(state.node_id)
        request = ap.AlterPartitionRequest(
            broker_id=state.node_id, broker_epoch=broker.epoch if broker else -1,
            topics=[ap.TopicData(topic_name=t, partitions=ps) for t, ps in topics.items()])
        self.sent += 1
        response = await self.alter_partition(request)
        answered: dict[tuple[str, int], apr.PartitionData] = {}
        if response is not None and not response.error_code:
            for topic in response.topics:
                for data in topic.partitions:
                    answered[(topic.topic_name, data.partition_index)] = data
        for part, _ in proposals:
            p = answered.get((part.topic, part.index))
            st = part.state
            if p is None or p.error_code:
                if p is not None:
                    log.info("%s-%d: ISR change refused (error %d)", part.topic, part.index,
                             p.error_code)
                st.isr_change_failed()
                continue
            if st.is_leader and p.leader_epoch == st.leader_epoch:
                moved = st.become_leader(st.leader_epoch, st.replicas, p.isr,
                                         partition_epoch=p.partition_epoch,
                                         now_ms=state.clock.now_ms())
                st.pending_isr = None
                state.partitions.act(part, hw_change(moved))
