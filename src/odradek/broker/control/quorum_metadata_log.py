"""A cluster node's metadata log: the Raft quorum's (broker/control/quorum_driver.py).

Records travel the quorum encoded as KRaft frames them (broker/control/journal.py:
``encode_record``); a snapshot's payload is the image's records framed as
entries (``odradek.raft.codec``), 500 records an entry. Committed entries reach
the listener in log order, on every node, the active controller included: an
append returns once its own entry has been applied here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any

from odradek.broker.control.journal import decode_record, encode_record
from odradek.broker.control.metadata_log import (
    MetadataListener,
    QuorumDescription,
    ReplicaRow,
)
from odradek.broker.control.quorum_driver import CommitLostError, QuorumDriver
from odradek.broker.ports import NotControllerError
from odradek.client.security import PLAINTEXT, ClientSecurity
from odradek.common.clock import Clock
from odradek.raft.codec import decode_entries, encode_entries
from odradek.raft.log import Entry, RaftLog
from odradek.raft.node import NotLeaderError, RaftConfig, Role
from odradek.raft.quorum_state import QuorumStateStore
from odradek.raft.voters import NO_DIRECTORY, Endpoint, Voter, VoterSet

SNAPSHOT_CHUNK = 500
MAX_RECORDS_PER_ENTRY = 10_000
"""A decision that is not atomic is committed in entries of at most this many
records (Kafka's controller likewise appends a non-atomic result in batches
of at most 10,000):
each entry is applied on its own, the loop running between, so fencing or
unfencing a broker that leads 33k partitions does not hold any node's loop
past the quorum's fetch timeout."""
"""Records per entry of a snapshot's payload."""


class QuorumMetadataLog:
    """The metadata log of a node of a controller quorum."""

    is_local = False

    def __init__(
        self, listener: MetadataListener, node_id: int, voters: dict[int, tuple[str, int]],
        cluster_id: str, raft_log: RaftLog, store: QuorumStateStore, config: RaftConfig,
        clock: Clock, snapshot_bytes: int, snapshot_interval_ms: int,
        security: ClientSecurity = PLAINTEXT, *, bootstrap_voters: VoterSet | None = None,
        directory_id: uuid.UUID = NO_DIRECTORY,
        bootstrap_servers: list[tuple[str, int]] | None = None,
        endpoints: tuple[Endpoint, ...] = (),
    ) -> None:
        self.listener = listener
        self.clock = clock
        self.driver = QuorumDriver(
            node_id, voters, cluster_id, raft_log, store, config, clock,
            self._apply_entry, self._restore, self._caught_up, self._snapshot,
            snapshot_bytes, snapshot_interval_ms, security, bootstrap_voters=bootstrap_voters,
            directory_id=directory_id, bootstrap_servers=bootstrap_servers,
            endpoints=endpoints)

    # -- views -----------------------------------------------------------------------

    @property
    def leader_id(self) -> int:
        return self.driver.leader_id

    @property
    def is_leader(self) -> bool:
        return self.driver.is_leader

    @property
    def voters(self) -> dict[int, tuple[str, int]]:
        return self.driver.voters

    @property
    def epoch(self) -> int:
        return self.driver.raft.epoch

    @property
    def applied(self) -> int:
        return self.driver.applied

    @property
    def active_since_ms(self) -> int:
        return self.driver.active_since_ms

    @property
    def fetch_max_wait_ms(self) -> int:
        return self.driver.config.fetch_max_wait_ms

    def end_offset(self) -> int:
        return self.driver.raft.high_watermark

    def next_offset(self) -> int:
        return self.driver.raft.log.end_offset  # where RaftNode.propose puts the next entry

    def describe(self) -> QuorumDescription:
        driver, raft = self.driver, self.driver.raft
        if raft.kraft_version == 1:
            nodes = [(v.node_id, e.name, e.host, e.port) for v in raft.voter_set.voters
                     for e in v.endpoints]
        else:
            nodes = [(n, "CONTROLLER", host, port)
                     for n, (host, port) in sorted(driver.voters.items())]
        if raft.role is not Role.LEADER:
            return QuorumDescription(driver.leader_id, raft.epoch, raft.high_watermark,
                                     f"ask the leader, node {driver.leader_id}", nodes=nodes)
        rows = [ReplicaRow(row.node_id, row.end_offset, driver.wall_ms(row.last_fetch_ms),
                           driver.wall_ms(row.last_caught_up_ms), row.node_id in raft.voters,
                           row.directory_id)
                for row in raft.describe(self.clock.monotonic_ms())]
        return QuorumDescription(driver.leader_id, raft.epoch, raft.high_watermark,
                                 replicas=rows, nodes=nodes)

    # -- the log ---------------------------------------------------------------------

    def replay(self) -> Iterable[Any]:
        return ()  # the quorum brings committed entries through the listener

    async def append(self, records: list[Any], *, atomic: bool = True) -> None:
        if not records:
            if not self.driver.is_leader:
                raise NotControllerError(self.driver.leader_id)
            return
        try:
            await self.driver.propose([encode_record(r) for r in records],
                                      None if atomic else MAX_RECORDS_PER_ENTRY)
        except (CommitLostError, NotLeaderError):
            # Leadership moved first: the records may or may not be committed
            # by the next leader; the client retries, as with Kafka.
            raise NotControllerError(self.driver.leader_id) from None

    async def add_voter(self, voter: Voter, timeout_s: float) -> None:
        """KIP-853 AddRaftVoter at the active controller (see QuorumDriver.change_voters):
        NotControllerError elsewhere or when leadership moves, VoterChangeError."""
        raft = self.driver.raft
        await self._change(lambda now: raft.add_voter(voter, now), timeout_s)

    async def remove_voter(self, node_id: int, directory_id: uuid.UUID,
                           timeout_s: float) -> None:
        raft = self.driver.raft
        await self._change(lambda now: raft.remove_voter(node_id, directory_id, now), timeout_s)

    @property
    def kraft_version(self) -> int:
        return self.driver.raft.kraft_version

    async def upgrade_kraft_version(self, level: int, validate_only: bool,
                                    timeout_s: float) -> None:
        """kraft.version 0 -> 1 at the active controller: the static voters, with
        their directory ids (from their fetches) and their CONTROLLER endpoints
        from ``controller.quorum.voters``, become the log's voter set."""
        raft = self.driver.raft
        endpoints = self.driver.static_endpoints()
        await self._change(lambda now: raft.upgrade_kraft_version(
            level, endpoints, now, validate_only=validate_only), timeout_s)

    async def _change(self, change: Callable[[int], int], timeout_s: float) -> None:
        try:
            await self.driver.change_voters(change, timeout_s)
        except (CommitLostError, NotLeaderError):
            raise NotControllerError(self.driver.leader_id) from None

    async def serve(self, api_key: int, request: Any, version: int) -> Any:
        return await self.driver.serve(api_key, request, version)

    def _apply_entry(self, offset: int, values: list[bytes]) -> None:
        self.listener.apply([decode_record(v) for v in values])

    def _restore(self, payload: bytes) -> None:
        self.listener.restore(decode_record(value) for entry in decode_entries(payload)
                              for value in entry.records)

    def _caught_up(self) -> None:
        self.listener.caught_up(self.driver.applied)

    def _snapshot(self) -> bytes:
        records = [encode_record(r) for r in self.listener.image_records()]
        entries, offset = [], 0
        for i in range(0, len(records), SNAPSHOT_CHUNK):
            chunk = tuple(records[i:i + SNAPSHOT_CHUNK])
            entries.append(Entry(offset, 0, chunk))
            offset += len(chunk)
        return encode_entries(entries, self.clock.now_ms()) if entries else b""

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        self.driver.start()

    async def wait_ready(self) -> None:
        await self.driver.wait_ready()

    async def view_change(self, timeout_s: float) -> bool:
        return await self.driver.view_change(timeout_s)

    def majority_in_touch(self, within_ms: int) -> bool:
        return self.driver.majority_in_touch(within_ms)

    async def resign(self) -> None:
        await self.driver.resign()

    async def stop(self) -> None:
        await self.driver.stop()
