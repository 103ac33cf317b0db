"""Broker liveness in cluster mode: heartbeats, fencing, controlled shutdown.

**Broker side** (:func:`heartbeat_forever`): every ``broker.heartbeat.interval.ms``
a registered broker sends BrokerHeartbeat (63) to the active controller with its
broker epoch and how far it has applied the metadata log. On SIGTERM it sends
one last heartbeat with ``WantShutDown`` (controlled shutdown): the controller
fences it at once, so its partitions stop being advertised before it goes.

**Controller side** (:class:`Sessions`): the active controller keeps each
broker's last heartbeat time as soft state (a new active controller starts
every clock afresh, as Kafka's does). Every half second it fences the brokers
not heard from for ``broker.session.timeout.ms`` (a fencing
BrokerRegistrationChangeRecord, and the partitions they led move or go
leaderless: ``controller.fence_broker``). A fenced broker that registers
again is unfenced and takes back its leaderless partitions
(``controller.register_broker``). A registration's broker epoch is the offset
of its RegisterBrokerRecord in the metadata log (Kafka's); a heartbeat with
another epoch (a previous incarnation's) is refused with STALE_BROKER_EPOCH.

On becoming active, the controller writes the bootstrap metadata
(:mod:`odradek.broker.control.bootstrap`, read once at start-up) if the log has
no ``metadata.version`` yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from typing import TYPE_CHECKING

from odradek.broker.control.bootstrap import read_bootstrap
from odradek.broker.control.controller_channel import ControllerUnavailable
from odradek.broker.control.meta_properties import DataDirError
from odradek.broker.ports import NotControllerError
from odradek.metadata import controller
from odradek.metadata.image import Endpoint
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from odradek.wire.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from odradek.wire.messages.broker_registration_request import BrokerRegistrationRequest
from odradek.wire.messages.broker_registration_response import BrokerRegistrationResponse

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
        try:  # read (and checked) once, at start-up: a damaged file stops the start
            self.bootstrap = read_bootstrap(state.config.metadata_dir)
        except ValueError as exc:
            raise DataDirError(str(exc)) from None

    def _now(self) -> int:
        return self.state.clock.monotonic_ms()

    def heard(self, broker_id: int) -> None:
        self.last_seen[broker_id] = self._now()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            metadata = self.state.metadata
            if not metadata.is_leader:
                self._epoch = -1
                continue
            now = self._now()
            if metadata.epoch != self._epoch:  # newly active: every clock starts now
                self._epoch = metadata.epoch
                self.last_seen = {b: now for b in self.state.image.brokers}
                with contextlib.suppress(NotControllerError):
                    await self.finalize()
                    await self.state.write(controller.elect_leaderless)
            for broker in list(self.state.image.brokers.values()):
                seen = self.last_seen.setdefault(broker.node_id, now)
                if not broker.fenced and now - seen > self.session_ms:
                    log.warning("broker %d missed heartbeats for %d ms: fenced",
                                broker.node_id, now - seen)
                    await self.fence(broker.node_id)

    async def finalize(self) -> None:
        """Write the bootstrap metadata if the log has none yet (a new cluster's
        first active controller, before any other record of its own or a
        broker's registration). NotControllerError on a node that is not active."""
        if controller.METADATA_VERSION_FEATURE not in self.state.image.features:
            await self.state.write(
                functools.partial(controller.finalize_features, bootstrap=self.bootstrap))

    async def fence(self, broker_id: int) -> None:
        with contextlib.suppress(NotControllerError):
            await self.state.write(lambda image: controller.fence_broker(image, broker_id))

    async def register(self, request: BrokerRegistrationRequest) -> BrokerRegistrationResponse:
        """A broker's registration: a new incarnation of ``broker_id`` with its
        listeners (fencing the previous one), answered with its broker epoch."""
        state = self.state
        if request.cluster_id != state.cluster_id:
            return BrokerRegistrationResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)
        if request.broker_id < 0 or not request.listeners:
            return BrokerRegistrationResponse(error_code=ErrorCode.INVALID_REQUEST)
        endpoints = [Endpoint(x.name, x.host, x.port, x.security_protocol)
                     for x in request.listeners]
        # A registration is a sign of life: the session clock starts now, so the
        # fencing check cannot fence the new incarnation on the old one's silence.
        self.heard(request.broker_id)
        # The broker epoch is the offset of the RegisterBrokerRecord: decided on
        # the log's end, where the append right after the decision puts it.
        try:
            await self.finalize()  # a new cluster's bootstrap records come first
            outcome = await state.write(lambda image: controller.register_broker(
                image, request.broker_id, endpoints, request.incarnation_id,
                request.rack or None, fence_previous=True,
                log_dirs=list(request.log_dirs or []),
                at_offset=state.metadata.next_offset()))
        except NotControllerError:
            return BrokerRegistrationResponse(error_code=ErrorCode.NOT_CONTROLLER)
        if outcome.error:
            return BrokerRegistrationResponse(error_code=outcome.error)
        broker = state.image.brokers.get(request.broker_id)
        return BrokerRegistrationResponse(broker_epoch=broker.epoch if broker else -1)

    async def heartbeat(self, request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse:
        """A broker's heartbeat: its session goes on; ``WantShutDown`` fences it
        now (controlled shutdown); a fenced broker that heartbeats again (it was
        cut off, not dead) is unfenced."""
        state = self.state
        if not state.metadata.is_leader:
            return BrokerHeartbeatResponse(error_code=ErrorCode.NOT_CONTROLLER)
        broker = state.image.brokers.get(request.broker_id)
        if broker is None:
            return BrokerHeartbeatResponse(error_code=ErrorCode.BROKER_ID_NOT_REGISTERED)
        if request.broker_epoch != broker.epoch:
            return BrokerHeartbeatResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
        self.heard(request.broker_id)
        if request.want_shut_down:
            await self.fence(request.broker_id)
            return BrokerHeartbeatResponse(is_caught_up=True, is_fenced=True,
                                           should_shut_down=True)
        if broker.fenced:
            try:
                await state.write(lambda image: controller.unfence_broker(
                    image, request.broker_id))
            except NotControllerError:
                return BrokerHeartbeatResponse(error_code=ErrorCode.NOT_CONTROLLER)
        fenced = state.image.brokers[request.broker_id].fenced
        return BrokerHeartbeatResponse(is_caught_up=True, is_fenced=fenced)


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
    if broker is None:
        return False
    request = BrokerHeartbeatRequest(broker_id=state.node_id, broker_epoch=broker.epoch,
                                     current_metadata_offset=state.metadata.applied,
                                     want_shut_down=want_shut_down)
    try:
        response = await state.heartbeats.request(request, 0)
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
        if not state.metadata.is_leader:
            continue
        wanted = pc.preferred_imbalance(state.image)
        if wanted:
            log.info("preferred leader election for %d partitions", len(wanted))
            with contextlib.suppress(NotControllerError):
                await state.write(lambda image: pc.elect_leaders(
                    image, pc.PREFERRED, pc.preferred_imbalance(image))[1])
