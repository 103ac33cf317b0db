"""Broker liveness in cluster mode: heartbeats, fencing, controlled shutdown.

**Broker side** (:func:`heartbeat_forever`): every ``broker.heartbeat.interval.ms``
a registered broker sends BrokerHeartbeat (63) to the active controller with its
broker epoch and how far it has applied the metadata log. On SIGTERM it sends
one last heartbeat with ``WantShutDown`` (controlled shutdown): the controller
fences it at once, so its partitions stop being advertised before it goes.

**Controller side** (:class:`Sessions`): the active controller keeps each
broker's last heartbeat time as soft state (a new active controller starts
every clock afresh, as Kafka's does). Every half second it fences the brokers
not heard from for ``broker.session.timeout.ms`` (FenceBrokerRecord, and the
partitions they led move or go leaderless: ``controller.fence_broker``). A
fenced broker that registers again is unfenced and takes back its
leaderless partitions (``controller.register_broker``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from odradek.broker.control.broker_state import NotControllerError, heartbeat_channel
from odradek.broker.control.controller_channel import ControllerUnavailable
from odradek.metadata import controller
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.broker_heartbeat_request import BrokerHeartbeatRequest

if TYPE_CHECKING:
    from odradek.broker.control.broker_state import BrokerState

log = logging.getLogger("odradek.cluster")


class Sessions:
    """The active controller's view of which brokers are alive."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state
        self.session_ms = state.config.get_int("broker.session.timeout.ms")
        self.last_seen: dict[int, int] = {}
        self._epoch = -1

    def _now(self) -> int:
        return self.state.clock.monotonic_ms()

    def heard(self, broker_id: int) -> None:
        self.last_seen[broker_id] = self._now()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            quorum = self.state.quorum
            if quorum is None or not quorum.is_leader:
                self._epoch = -1
                continue
            now = self._now()
            if quorum.raft.epoch != self._epoch:  # newly active: every clock starts now
                self._epoch = quorum.raft.epoch
                self.last_seen = {b: now for b in self.state.image.brokers}
                with contextlib.suppress(NotControllerError):
                    await self.state.write(controller.finalize_features)
            for broker in list(self.state.image.brokers.values()):
                seen = self.last_seen.setdefault(broker.node_id, now)
                if not broker.fenced and now - seen > self.session_ms:
                    log.warning("broker %d missed heartbeats for %d ms: fenced",
                                broker.node_id, now - seen)
                    await self.fence(broker.node_id)

    async def fence(self, broker_id: int) -> None:
        with contextlib.suppress(NotControllerError):
            await self.state.write(lambda image: controller.fence_broker(image, broker_id))


async def heartbeat_forever(state: BrokerState) -> None:
    """Heartbeat every ``broker.heartbeat.interval.ms``; after a failed one (no
    controller, a dead one, or one that just moved) try again within a tenth
    of the interval, so a new active controller hears every live broker soon
    after its election."""
    interval_s = state.config.get_int("broker.heartbeat.interval.ms") / 1000
    loop = asyncio.get_running_loop()
    while True:
        started = loop.time()
        if await send_heartbeat(state, want_shut_down=False):
            await asyncio.sleep(max(0.0, started + interval_s - loop.time()))
        else:
            await asyncio.sleep(interval_s / 10)


async def send_heartbeat(state: BrokerState, *, want_shut_down: bool) -> bool:
    """One heartbeat; True if the controller answered without error."""
    broker = state.image.brokers.get(state.node_id)
    quorum = state.quorum
    if broker is None or quorum is None:
        return False
    request = BrokerHeartbeatRequest(broker_id=state.node_id, broker_epoch=broker.epoch,
                                     current_metadata_offset=quorum.applied,
                                     want_shut_down=want_shut_down)
    try:
        response = await heartbeat_channel(state).request(request, 0)
    except ControllerUnavailable:
        return False
    return bool(response.error_code == ErrorCode.NONE)


async def rebalance_forever(state: BrokerState) -> None:
    """``auto.leader.rebalance.enable``: every ``leader.imbalance.check.interval.seconds``
    the active controller moves each partition whose first (preferred) replica is
    live and in sync but not leading back to it (a preferred election)."""
    from odradek.metadata import partition_changes as pc

    interval_s = max(state.config.get_int("leader.imbalance.check.interval.seconds"), 1)
    while True:
        await asyncio.sleep(interval_s)
        quorum = state.quorum
        if quorum is None or not quorum.is_leader:
            continue
        wanted = pc.preferred_imbalance(state.image)
        if wanted:
            log.info("preferred leader election for %d partitions", len(wanted))
            with contextlib.suppress(NotControllerError):
                await state.write(lambda image: pc.elect_leaders(
                    image, pc.PREFERRED, pc.preferred_imbalance(image))[1])
