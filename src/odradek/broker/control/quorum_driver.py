"""The IO shell around the Raft core: timers, sockets, and applying what commits.

:class:`QuorumDriver` owns one :class:`~odradek.raft.node.RaftNode`. It

* runs the core's timers: one task sleeps until :meth:`RaftNode.next_deadline`
  (or until woken by a message or a proposal), polls the core and dispatches
  its outbox;
* sends the core's requests to the other voters' CONTROLLER listeners as
  Kafka's KRaft RPCs (``quorum_wire``), one connection per peer, and hands
  each answer back to the core; a failed request is simply lost (the core
  retries on its own timers, exactly as it does for a lost message);
* serves the same RPCs from peers: :meth:`serve` gives the request to the core
  and waits for the core's answer to that peer (a Fetch the leader parks as a
  long poll is answered when data or a new high watermark arrives, or at the
  wait's end);
* applies committed entries in order: every record below the high watermark
  goes to ``apply`` exactly once, in offset order, on every node (voters and
  observers alike), and a snapshot installed from the leader goes to
  ``restore``. Entries are applied in slices of at most
  :data:`APPLY_SLICE_S` (a slice ends after the entry that passes it; an
  entry, one controller decision, is applied whole), the loop running between
  them: a node replaying a long log at start, or far behind, keeps answering
  its peers' fetches and votes, so the quorum keeps its leader (a loop held
  past ``controller.quorum.fetch.timeout.ms`` made followers elect another);
* lets the active controller :meth:`propose` records and wait until they are
  committed and applied here.

Addresses (KIP-853): the voters' CONTROLLER endpoints are the latest
VotersRecord's in the log (``kraft.version`` 1), else the static
``controller.quorum.voters``. ``controller.quorum.bootstrap.servers`` get
negative pseudo ids (-2, -3, …, as Kafka's) that an observer without a voter
set fetches from; a successful Fetch answer names the real leader, whose
address is then learned. The leader of the current epoch is reached where its
BeginQuorumEpoch (``LeaderEndpoints``) or a Fetch answer naming it
(``NodeEndpoints``) said, before the voter set's (a leader that moved before its
record was updated); this node's own address is its own endpoint. Both only
with ``kraft.version`` 1: static voters are reached where
``controller.quorum.voters`` says (which may be a proxy, as in the partition tests).

The core runs on monotonic milliseconds; DescribeQuorum's timestamps are wall
clock, converted with the offset between the two taken at start.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import time
import uuid
from collections.abc import Callable
from typing import Any

from odradek.broker.aio import cancel_and_wait, wait_event
from odradek.broker.control import quorum_wire as qw
from odradek.broker.peers import PeerConnections
from odradek.client.connection import Connection
from odradek.client.security import PLAINTEXT, ClientSecurity
from odradek.common.clock import Clock
from odradek.raft import messages as rm
from odradek.raft.log import RaftLog
from odradek.raft.membership import VoterChangeError
from odradek.raft.node import NotLeaderError, RaftConfig, RaftNode, Role
from odradek.raft.quorum_state import QuorumStateStore
from odradek.raft.voters import NO_DIRECTORY, Endpoint, VoterSet
from odradek.wire.errors import ErrorCode

log = logging.getLogger("odradek.quorum")

_RESPONSES = (rm.VoteResponse, rm.BeginEpochResponse, rm.EndEpochResponse, rm.FetchResponse,
              rm.FetchSnapshotResponse, rm.UpdateVoterResponse)
_ANSWER_TO = {rm.VoteRequest: rm.VoteResponse, rm.BeginEpochRequest: rm.BeginEpochResponse,
              rm.EndEpochRequest: rm.EndEpochResponse, rm.FetchRequest: rm.FetchResponse,
              rm.FetchSnapshotRequest: rm.FetchSnapshotResponse,
              rm.UpdateVoterRequest: rm.UpdateVoterResponse}


APPLY_SLICE_S = 0.05
"""The most time one catch-up spends applying entries before it lets the loop run."""
STOP_SNAPSHOT_BYTES = 1 << 20
"""A clean stop snapshots the image when at least this much was applied since
the last snapshot."""


class CommitLostError(Exception):
    """A proposal was not committed: leadership moved before the quorum had it."""


class QuorumDriver:
    def __init__(
        self, node_id: int, voters: dict[int, tuple[str, int]], cluster_id: str,
        raft_log: RaftLog, store: QuorumStateStore, config: RaftConfig, clock: Clock,
        apply: Callable[[int, list[bytes]], None], restore: Callable[[bytes], None],
        on_ready: Callable[[], None] | None = None,
        snapshot: Callable[[], bytes] | None = None, snapshot_bytes: int = 20 << 20,
        snapshot_interval_ms: int = 3_600_000, security: ClientSecurity = PLAINTEXT, *,
        bootstrap_voters: VoterSet | None = None, directory_id: uuid.UUID = NO_DIRECTORY,
        bootstrap_servers: list[tuple[str, int]] | None = None,
        endpoints: tuple[Endpoint, ...] = (),
    ) -> None:
        """``security``: TLS settings of the connections to the other voters (their
        controller listener). ``bootstrap_voters``: a dynamic quorum's (see
        :mod:`odradek.broker.control.quorum_bootstrap`), with this controller's
        metadata ``directory_id``. ``endpoints``: this controller's own (its
        controller listeners, advertised), which a voter keeps in the voter set
        with UpdateRaftVoter (KIP-853)."""
        self.node_id = node_id
        self.static_voters = voters
        self._bootstrap = {-2 - i: a for i, a in enumerate(bootstrap_servers or [])}
        self._learned: dict[int, tuple[str, int]] = {}
        self._announced: dict[int, tuple[int, tuple[str, int]]] = {}
        """Leader id → (epoch, endpoint) its BeginQuorumEpoch, or a Fetch answer
        naming it leader of that epoch, gave: used in that epoch before the voter
        set's (a leader that moved, its record not updated or not yet replicated
        here), as Kafka's followers keep the endpoints the leader was announced with."""
        self.cluster_id = cluster_id
        self.log = raft_log
        self.config = config
        self.clock = clock
        self._apply = apply
        self._restore = restore
        self._on_ready = on_ready
        self._snapshot = snapshot
        self.snapshot_bytes = snapshot_bytes
        """Take a snapshot once this many record bytes were applied since the last
        (``metadata.log.max.record.bytes.between.snapshots``)."""
        self._since_snapshot = 0
        self.snapshot_interval_ms = snapshot_interval_ms
        """... or once this long has passed with anything applied since the last
        (``metadata.log.max.snapshot.interval.ms``)."""
        self._last_snapshot_ms = clock.monotonic_ms()
        self.ready = False
        """Caught up (:meth:`RaftNode.caught_up`): everything committed when a leader
        that had committed in its epoch was first heard is applied, and at least
        what the local log held at start. Nothing acts on the image before."""
        self._ready_event = asyncio.Event()
        self._wall_offset = clock.now_ms() - clock.monotonic_ms()
        self.raft = RaftNode(node_id, bootstrap_voters if bootstrap_voters is not None
                             else frozenset(voters), raft_log, store, random.Random(),
                             config, clock.monotonic_ms(), directory_id=directory_id,
                             bootstrap_ids=frozenset(self._bootstrap), endpoints=endpoints)
        self.applied = 0
        """Every entry below this offset has been applied (or restored)."""
        self._behind = False
        """The last catch-up ended its slice with committed entries left to apply."""
        self._wake = asyncio.Event()
        self._progress = asyncio.Event()
        """Set on every dispatch: a voter change waiting for its turn looks again."""
        self._answers: dict[tuple[int, type], asyncio.Future[Any]] = {}
        self._commits: list[tuple[int, int, asyncio.Future[None]]] = []
        self._conns = PeerConnections(f"odradek-raft-{node_id}", security)
        self._encoded = qw.EncodedEntries()
        """Entries as this leader last sent them, for the next follower."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._runner: asyncio.Task[None] | None = None
        self.on_change: Callable[[], None] | None = None
        """Called after a role or leader change (the broker moves coordinators)."""
        self._last_view = (Role.UNATTACHED, -1, -1)
        self._view_waiters: list[asyncio.Future[None]] = []
        self._last_active = False
        self.active_since_ms = -1
        """Monotonic ms at which this node last became the quorum's leader (-1: it
        does not lead)."""
        self.failed: BaseException | None = None
        """Set when the node stopped itself on a fatal error (see _fatal)."""

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        self._catch_up()
        self._runner = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop; at a clean stop (not after a fatal error), first snapshot the
        image when at least :data:`STOP_SNAPSHOT_BYTES` of records were applied
        since the last snapshot (those replayed at this start included), so the
        next start restores one snapshot instead of reading and replaying the
        whole log: at 100k partitions every restart added ~200k leader changes
        to a log no snapshot had cut, and replaying it took longer each time."""
        if self.failed is None and self._since_snapshot >= STOP_SNAPSHOT_BYTES:
            try:
                self._take_snapshot()
            except Exception as exc:  # the stop goes on: the log is still whole
                log.warning("quorum: node %d took no snapshot at stop: %s", self.node_id, exc)
        await cancel_and_wait(self._runner, *self._tasks)
        self._runner = None
        await self._conns.close()
        for _, _, fut in self._commits:
            if not fut.done():
                fut.set_exception(CommitLostError("the node is stopping"))
        self._commits.clear()

    async def resign(self) -> None:
        """Hand leadership over before stopping (controlled shutdown). Writes
        still waiting for their commit fail at once with CommitLostError (the
        caller answers NOT_CONTROLLER), as Kafka's controller fails its pending
        operations when it renounces: the next leader may or may not commit them."""
        if self.raft.role is Role.LEADER:
            self.raft.resign(self._now())
            self._dispatch()
            for _, _, fut in self._commits:
                if not fut.done():
                    fut.set_exception(CommitLostError("the controller resigned"))
            self._commits.clear()
            await asyncio.sleep(0.05)  # let EndQuorumEpoch reach the wire

    def majority_in_touch(self, within_ms: int) -> bool:
        """False only for a leader that has not had a Fetch from a majority of
        the voters (itself counted) in the last ``within_ms``: its writes cannot
        commit, so nobody should wait on them. True on any other node."""
        state = self.raft.leader_state
        if self.raft.role is not Role.LEADER or state is None:
            return True
        now = self._now()
        heard = 1 + sum(1 for v, p in state.progress.items()
                        if v in state.voters and v != self.node_id
                        and p.last_fetch_ms >= 0 and now - p.last_fetch_ms <= within_ms)
        return heard > len(state.voters) // 2

    # -- views -----------------------------------------------------------------------

    @property
    def voters(self) -> dict[int, tuple[str, int]]:
        """The voters' CONTROLLER endpoints, by node id: the log's voter set's
        (``kraft.version`` 1), else the static ones."""
        if self.raft.kraft_version == 0:
            return self.static_voters
        return {v.node_id: (v.endpoints[0].host, v.endpoints[0].port)
                for v in self.raft.voter_set.voters if v.endpoints}

    def static_endpoints(self) -> dict[int, tuple[Endpoint, ...]]:
        """The static voters' endpoints (``controller.quorum.voters``), named as this
        node's controller listener, for a ``kraft.version`` upgrade."""
        name = self.raft.endpoints[0].name if self.raft.endpoints else "CONTROLLER"
        return {n: (Endpoint(name, host, port),) for n, (host, port) in self.static_voters.items()}

    def address(self, node_id: int) -> tuple[str, int] | None:
        if self.raft.kraft_version == 1:  # static voters: the configured addresses rule
            if node_id == self.node_id and self.raft.endpoints:
                own = self.raft.endpoints[0]  # what this node tells others it is reached on
                return own.host, own.port
            announced = self._announced.get(node_id)
            if announced is not None and announced[0] == self.raft.epoch:
                return announced[1]
        return (self.voters.get(node_id) or self.static_voters.get(node_id)
                or self._bootstrap.get(node_id) or self._learned.get(node_id))

    @property
    def is_leader(self) -> bool:
        return self.raft.role is Role.LEADER and self.raft.high_watermark > 0 and (
            self.applied >= self._epoch_start())

    @property
    def leader_id(self) -> int:
        return self.raft.leader_id if self.raft.role in (Role.LEADER, Role.FOLLOWER) else -1

    def _epoch_start(self) -> int:
        state = self.raft.leader_state
        return state.epoch_start_offset + 1 if state is not None else 1 << 62

    def _now(self) -> int:
        return self.clock.monotonic_ms()

    def wall_ms(self, monotonic_ms: int) -> int:
        return monotonic_ms + self._wall_offset if monotonic_ms >= 0 else -1

    # -- the loop --------------------------------------------------------------------

    def _fatal(self, exc: BaseException) -> None:
        """The core or its log failed (a safety rule would break, or the disk
        failed): stop the node rather than go on with a quorum member in an unknown
        state, as Kafka's controllers do. SIGTERM runs the normal, orderly stop."""
        import os
        import signal

        if self.failed is None:
            self.failed = exc
            log.critical("quorum: node %d stops: %s: %s", self.node_id, type(exc).__name__, exc)
            os.kill(os.getpid(), signal.SIGTERM)

    def _handle(self, message: Any) -> None:
        try:
            self.raft.handle(message, self._now())
            self._dispatch()
        except Exception as exc:
            self._fatal(exc)
            raise

    async def _run(self) -> None:
        try:
            await self._loop()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._fatal(exc)

    async def _loop(self) -> None:
        while True:
            now = self._now()
            self.raft.poll(now)
            self._dispatch()
            if self._behind:  # more to apply: let the loop run, then the next slice
                self._wake.clear()
                await asyncio.sleep(0)
                continue
            delay = max(0, self.raft.next_deadline() - self._now()) / 1000
            self._wake.clear()
            await wait_event(self._wake, min(delay, 1.0))

    def _dispatch(self) -> None:
        """Send the core's outbox, answer waiting peers, apply commits."""
        for msg in self.raft.take_outbox():
            if isinstance(msg, _RESPONSES):
                fut = self._answers.pop((msg.dst, type(msg)), None)
                if fut is not None and not fut.done():
                    fut.set_result(msg)
            elif msg.dst != self.node_id and self.address(msg.dst) is not None:
                task = asyncio.get_running_loop().create_task(self._send(msg))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        self._catch_up()
        self._progress.set()
        view = (self.raft.role, self.raft.epoch, self.raft.leader_id)
        active = self.is_leader
        if active != self._last_active:
            # An elected leader becomes active once it has committed in its
            # epoch: not a change of view, but one that callers wait for.
            self._last_active = active
            self._wake_view_waiters()
        if view != self._last_view:
            self._last_view = view
            self.active_since_ms = self._now() if view[0] is Role.LEADER else -1
            log.info("quorum: node %d is %s in epoch %d (leader %d)", self.node_id,
                     view[0].value, view[1], view[2])
            if self.on_change is not None:
                self.on_change()
            self._wake_view_waiters()
        self._wake.set()

    def _wake_view_waiters(self) -> None:
        waiters, self._view_waiters = self._view_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    async def view_change(self, timeout_s: float) -> bool:
        """Wait until this node's view of the quorum (role, epoch, leader, and
        whether it is the active controller) next changes, at most ``timeout_s``;
        whether it did."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._view_waiters.append(fut)
        try:
            await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            return False
        finally:
            if fut in self._view_waiters:
                self._view_waiters.remove(fut)
        return True

    def _catch_up(self) -> None:
        """Apply committed entries not yet applied, in order, for at most one
        slice (:data:`APPLY_SLICE_S`); ``_behind`` says whether any are left."""
        hw = self.raft.high_watermark
        until = time.perf_counter() + APPLY_SLICE_S
        out_of_time = False
        if self.log.start_offset > self.applied:
            snap = self.log.snapshot()
            payload = self.raft.snapshot_payload()  # without the core's voter set frame
            if snap is not None and payload is not None:
                self._restore(payload)
                self.applied = snap.end_offset
        while self.applied < hw:
            entries = self.log.read(self.applied, 256)
            progressed = False
            for entry in entries:
                if entry.offset != self.applied or entry.end > hw:
                    break
                if not entry.control:
                    self._apply(entry.offset, list(entry.records))
                    self._since_snapshot += sum(map(len, entry.records))
                self.applied = entry.end
                progressed = True
                if time.perf_counter() >= until:
                    out_of_time = True
                    break
            if not progressed or out_of_time:
                break
        self._behind = out_of_time and self.applied < hw
        if not self.ready and self.raft.caught_up(self.applied):
            self.ready = True
            self._ready_event.set()
            if self._on_ready is not None:
                self._on_ready()
        due = self._since_snapshot >= self.snapshot_bytes or (
            self._since_snapshot > 0
            and self._now() - self._last_snapshot_ms >= self.snapshot_interval_ms)
        if due:
            self._take_snapshot()
        self._settle_commits()

    def _take_snapshot(self) -> bool:
        """Snapshot the image at ``applied`` if anything was applied past the
        last snapshot (and the node is caught up); whether it did."""
        if not (self.ready and self._snapshot is not None
                and self.applied > self.log.start_offset):
            return False
        # Every node snapshots its own image; the log before it is dropped, and
        # a follower behind it catches up with FetchSnapshot.
        self.raft.take_snapshot(self.applied, self._snapshot())
        self._since_snapshot = 0
        self._last_snapshot_ms = self._now()
        log.info("quorum: node %d took a metadata snapshot at offset %d", self.node_id,
                 self.applied)
        return True

    async def wait_ready(self) -> None:
        """Until the metadata log is applied up to the high watermark a leader gave."""
        await self._ready_event.wait()

    def _settle_commits(self) -> None:
        keep = []
        for end, epoch, fut in self._commits:
            if fut.done():
                continue
            if self.applied >= end:
                entry = self.log.entry_at(end - 1)
                held = self.log.start_offset >= end or (entry is not None and entry.epoch == epoch)
                if held:
                    fut.set_result(None)
                else:
                    fut.set_exception(CommitLostError("the entry was replaced"))
            elif self.raft.epoch != epoch:
                fut.set_exception(CommitLostError("leadership moved before the commit"))
            else:
                keep.append((end, epoch, fut))
        self._commits = keep

    # -- outbound --------------------------------------------------------------------

    async def _connection(self, peer: int) -> Connection:
        def address() -> str:
            found = self.address(peer)
            if found is None:
                raise ConnectionError(f"no address known for node {peer}")
            return f"{found[0]}:{found[1]}"

        return await self._conns.get(peer, address, self.config.request_timeout_ms / 1000)

    async def _send(self, msg: Any) -> None:
        api_key, body = qw.request_to_kafka(msg, self.cluster_id, self.raft.endpoints)
        version = qw.VERSIONS[api_key]
        timeout = (self.config.request_timeout_ms + self.config.fetch_max_wait_ms) / 1000
        try:
            conn = await self._connection(msg.dst)
            resp = await asyncio.wait_for(conn.request(body, version, version), timeout)
        except (OSError, TimeoutError, Exception) as exc:  # lost: the core retries
            log.debug("quorum: %s to %d failed: %s", type(msg).__name__, msg.dst, exc)
            await self._conns.drop(msg.dst)
            return
        try:
            answer = qw.response_from_kafka(api_key, resp, msg)
        except Exception as exc:  # a peer that speaks nonsense: ignore the answer
            log.warning("quorum: bad answer from %d: %s", msg.dst, exc)
            return
        if api_key == 1:  # Fetch v16+ names the leader's endpoint (KIP-853)
            self._learned.update(qw.node_endpoints(resp))
            if (hint := qw.leader_hint(resp)) is not None:
                self._announced[hint[0]] = hint[1:]
        if msg.dst < 0 and isinstance(answer, rm.FetchResponse):
            answer = self._from_bootstrap(msg.dst, answer)
        with contextlib.suppress(Exception):  # _handle stops the node on failure
            self._handle(answer)

    def _from_bootstrap(self, pseudo: int, answer: rm.FetchResponse) -> rm.FetchResponse:
        """An answer from a bootstrap server: only the leader answers a Fetch without
        error, so that address is the leader's; an error naming a leader whose
        address is unknown is not passed on (the observer tries another server)."""
        leader = answer.leader_id
        if not answer.error and leader >= 0:
            self._learned[leader] = self._bootstrap[pseudo]
            return dataclasses.replace(answer, src=leader)
        if leader >= 0 and self.address(leader) is None:
            return dataclasses.replace(answer, leader_id=-1)
        return answer

    # -- inbound ---------------------------------------------------------------------

    async def serve(self, api_key: int, request: Any, version: int) -> Any:
        """The Kafka answer, encodable at ``version``, to a peer's Raft request."""
        cluster_id = getattr(request, "cluster_id", None)
        if cluster_id is not None and cluster_id != self.cluster_id:
            return self._refusal(api_key, ErrorCode.INCONSISTENT_CLUSTER_ID)
        try:
            core = qw.request_from_kafka(api_key, request, self.node_id)
        except (ValueError, AttributeError, StopIteration):
            return self._refusal(api_key, ErrorCode.INVALID_REQUEST)
        if api_key == 53 and (announced := qw.announced_endpoint(
                request, self.raft.endpoints[0].name if self.raft.endpoints else "CONTROLLER")):
            self._announced[announced[0]] = announced[1:]
        kind = _ANSWER_TO[type(core)]
        old = self._answers.pop((core.src, kind), None)
        if old is not None and not old.done():
            old.set_result(None)  # superseded (a fetch after a timed-out one)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._answers[(core.src, kind)] = fut
        self._handle(core)
        wait = (self.config.fetch_max_wait_ms + self.config.request_timeout_ms) / 1000
        try:
            answer = await asyncio.wait_for(fut, wait)
        except TimeoutError:
            answer = None
        finally:
            if self._answers.get((core.src, kind)) is fut:
                del self._answers[(core.src, kind)]
        if answer is None:
            answer = self._empty_answer(core)
        leader = getattr(answer, "leader_id", -1)
        endpoint = self.address(leader) if leader >= 0 else None
        return qw.response_to_kafka(answer, self.clock.now_ms(), version, endpoint,
                                    self._encoded)

    def _empty_answer(self, core: Any) -> Any:
        leader = self.leader_id
        if isinstance(core, rm.FetchRequest):
            return rm.FetchResponse(self.node_id, core.src, self.raft.epoch, leader,
                                    core.fetch_offset, self.raft.advertised_high_watermark)
        return _ANSWER_TO[type(core)](self.node_id, core.src, self.raft.epoch, leader,
                                      error=ErrorCode.REQUEST_TIMED_OUT)

    def _refusal(self, api_key: int, error: int) -> Any:
        from odradek.wire import api

        return api.response_class(api_key)(error_code=error)  # type: ignore[call-arg]

    # -- voter changes (KIP-853) -----------------------------------------------------

    async def change_voters(self, change: Callable[[int], int], timeout_s: float) -> None:
        """Apply one voter change (``change(now_ms)`` calls the core's add_voter,
        remove_voter or upgrade_kraft_version and returns the offset after its
        record, -1 when there is nothing to write), retrying while the
        core says "not now" (REQUEST_TIMED_OUT: the leader has not committed in its
        epoch, another change is pending, the new voter is not caught up), then
        wait until it is committed. VoterChangeError (with Kafka's code), or
        NotLeaderError / CommitLostError when leadership moves."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            if not self.is_leader:
                raise NotLeaderError(self.leader_id, self.raft.epoch)
            try:
                end = change(self._now())
                if end < 0:
                    return  # nothing to write (validate only, or already done)
                break
            except VoterChangeError as exc:
                left = deadline - loop.time()
                if exc.code != ErrorCode.REQUEST_TIMED_OUT or left <= 0:
                    raise
                # Wait for the quorum to move (a fetch, a commit), at most 100 ms.
                self._progress.clear()
                await wait_event(self._progress, min(left, 0.1))
        epoch = self.raft.epoch
        fut: asyncio.Future[None] = loop.create_future()
        self._commits.append((end, epoch, fut))
        self._dispatch()
        await asyncio.wait_for(fut, max(0.1, deadline - loop.time()))

    # -- proposals -------------------------------------------------------------------

    async def propose(self, records: list[bytes], max_entry_records: int | None = None) -> int:
        """Append ``records`` as one entry, or as entries of at most
        ``max_entry_records`` (active controller only), and wait until the last
        is committed and applied here. NotLeaderError, or CommitLostError if
        leadership moves first (the records may or may not be in the log then:
        the caller's client retries, and controller decisions are idempotent
        against the image they are made on)."""
        if not self.is_leader:
            raise NotLeaderError(self.leader_id, self.raft.epoch)
        step = max_entry_records or len(records) or 1
        chunks = [records[i:i + step] for i in range(0, len(records), step)] or [records]
        try:
            for chunk in chunks:  # (no await between: all in this leader's log, in order)
                end = self.raft.propose(chunk, self._now())
        except NotLeaderError:
            raise
        except Exception as exc:  # the log could not take it: stop the node
            self._fatal(exc)
            raise
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._commits.append((end, self.raft.epoch, fut))
        self._dispatch()
        await fut
        return end
