"""The metadata log: one protocol, two backends.

Every metadata change is a list of records (``odradek.wire.internal``) appended
to the ``__cluster_metadata`` log; a record is applied to the image only once
it is committed there. Where the log lives is the one thing a single node and
a cluster node do differently, and the composition root (broker/app.py) picks
the backend once:

- :class:`JournalMetadataLog`, a single node: the log is the local journal
  (broker/control/journal.py, fsynced per append). This node is the whole
  quorum: always the active controller, an append is committed once written;
- ``QuorumMetadataLog`` (broker/control/quorum_metadata_log.py), a cluster
  node: the log is the Raft quorum's; an append is committed once a majority
  of the voters has it, and every node applies it as its entry comes.

Either backend hands committed records to a :class:`MetadataListener` (the
broker's metadata service, broker/control/broker_state.py) in log order:
``apply`` for each committed group, ``restore`` for a snapshot that replaces
the image, ``caught_up`` once the image holds everything the log had
committed when this node started.

Starting the quorum, resigning its leadership and asking whether a majority
is still in touch are the quorum backend's own: the composition root calls them
on it directly, and a journal has nothing of the kind.

Invariant: the image a listener holds is always a prefix of the committed log;
no backend applies a record before it is durable where the backend keeps it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from odradek.common.clock import Clock
from odradek.wire import api
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.raft.voters import Voter

_NO_DIRECTORY = uuid.UUID(int=0)

@dataclass(frozen=True, slots=True)
class ReplicaRow:
    """One member of the quorum as its leader sees it (DescribeQuorum)."""

    node_id: int
    end_offset: int
    last_fetch_ms: int
    """Wall-clock ms of its last fetch (-1: never)."""
    last_caught_up_ms: int
    voter: bool
    directory_id: uuid.UUID = _NO_DIRECTORY
    """Its metadata directory id (KIP-853; zero when unknown)."""


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    """What DescribeQuorum answers about the metadata log."""

    leader_id: int
    epoch: int
    high_watermark: int
    error_message: str | None = None
    """Set on a node that does not lead the quorum (it cannot describe its members)."""
    replicas: list[ReplicaRow] = field(default_factory=list)
    nodes: list[tuple[int, str, str, int]] = field(default_factory=list)
    """(node id, listener name, host, port) of each voter."""


class MetadataListener(Protocol):
    """Who the backend hands committed records to (the metadata service)."""

    def apply(self, records: list[Any]) -> None:
        """Committed records, in log order."""
        ...

    def restore(self, records: Iterable[Any]) -> None:
        """A snapshot: the image starts over from these records."""
        ...

    def caught_up(self, offset: int) -> None:
        """Everything committed when this node started is applied (``offset``: the
        log's applied end, -1 if unknown)."""
        ...

    def image_records(self) -> list[Any]:
        """The image as records (what a snapshot holds)."""
        ...

    def listener_endpoints(self) -> list[tuple[str, str, int]]:
        """(name, host, port) this node advertises."""
        ...


class MetadataLog(Protocol):
    """The ``__cluster_metadata`` log as the metadata service uses it."""

    @property
    def is_local(self) -> bool:
        """True when this node is the whole quorum (a single node): it is always
        the active controller and is registered from its first write."""
        ...

    @property
    def leader_id(self) -> int:
        """The active controller's node id (-1: none known)."""
        ...

    @property
    def is_leader(self) -> bool:
        """Whether this node is the active controller (may append now)."""
        ...

    @property
    def voters(self) -> dict[int, tuple[str, int]]:
        """The voters' CONTROLLER endpoints, by node id (empty on a single node)."""
        ...

    @property
    def epoch(self) -> int: ...

    @property
    def applied(self) -> int:
        """Every record below this offset has been handed to the listener."""
        ...

    @property
    def active_since_ms(self) -> int:
        """Monotonic ms since which this node has been a newly elected controller
        (-1: it is not, or it never was elected)."""
        ...

    def replay(self) -> Iterable[Any]:
        """The records committed before this start that the image begins from
        (the journal's; a quorum brings its own through the listener)."""
        ...

    async def append(self, records: list[Any], *, atomic: bool = True) -> None:
        """Commit ``records`` as one group (unless not ``atomic``: see
        :attr:`~odradek.metadata.outcome.Outcome.atomic`; one node's journal
        commits every group whole), and return once the listener has
        applied them here. NotControllerError on a node that is not (or stopped
        being) the active controller: the records may then still be committed
        by the next one, so callers decide against the image, idempotently."""
        ...

    def end_offset(self) -> int: ...

    def next_offset(self) -> int:
        """The offset the next appended record takes (on the active controller:
        :meth:`append` gives its records this offset and the ones after, in
        order, when it is called with no ``await`` between; a broker's epoch is
        the offset of its RegisterBrokerRecord)."""
        ...

    def describe(self) -> QuorumDescription: ...

    async def add_voter(self, voter: Voter, timeout_s: float) -> None:
        """KIP-853: add ``voter`` to the controller quorum (active controller only;
        done once committed). VoterChangeError with Kafka's error code, or
        NotControllerError."""
        ...

    async def remove_voter(self, node_id: int, directory_id: uuid.UUID,
                           timeout_s: float) -> None: ...

    @property
    def kraft_version(self) -> int:
        """0: static voters (or no quorum); 1: the voters are in the log (KIP-853)."""
        ...

    async def upgrade_kraft_version(self, level: int, validate_only: bool,
                                    timeout_s: float) -> None:
        """Raise ``kraft.version`` (active controller; done once committed):
        VoterChangeError with Kafka's error code, NotControllerError."""
        ...

    async def serve(self, api_key: int, request: Any, version: int) -> Any:
        """The answer, encodable at ``version`` (the request's), to a peer's KRaft
        request (Vote, BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot, Fetch of
        ``__cluster_metadata``)."""
        ...

    async def wait_ready(self) -> None:
        """Until the image has caught up (at once on a single node)."""
        ...

    async def view_change(self, timeout_s: float) -> bool:
        """Until the leader or this node's role changes (at most ``timeout_s``);
        whether it did."""
        ...

    async def stop(self) -> None: ...


class MetadataJournal(Protocol):
    """Where a single node's committed metadata records live."""

    def append(self, records: list[Any]) -> None: ...

    def replay(self) -> Iterable[Any]: ...

    def close(self) -> None: ...

    def end_offset(self) -> int:
        """The offset the next record gets."""
        ...


class MemoryJournal:
    """A journal that forgets everything on restart (tests, in-memory brokers)."""

    def __init__(self) -> None:
        self.records: list[Any] = []

    def append(self, records: list[Any]) -> None:
        self.records.extend(records)

    def replay(self) -> Iterable[Any]:
        return list(self.records)

    def close(self) -> None:
        pass

    def end_offset(self) -> int:
        return len(self.records)


class JournalMetadataLog:
    """A single node's metadata log: its journal. The node is its own quorum of
    one, leader at epoch 1; an append is committed once the journal has it
    (fsynced, for :class:`LogJournal`)."""

    EPOCH = 1

    def __init__(self, journal: MetadataJournal, node_id: int, clock: Clock,
                 listener: MetadataListener) -> None:
        self.journal = journal
        self.node_id = node_id
        self.clock = clock
        self.listener = listener

    is_local = True
    is_leader = True
    active_since_ms = -1
    epoch = EPOCH

    @property
    def leader_id(self) -> int:
        return self.node_id

    @property
    def voters(self) -> dict[int, tuple[str, int]]:
        return {}

    @property
    def applied(self) -> int:
        return self.journal.end_offset()

    def replay(self) -> Iterable[Any]:
        return self.journal.replay()

    async def append(self, records: list[Any], *, atomic: bool = True) -> None:
        if records:
            self.journal.append(records)
            self.listener.apply(records)

    def end_offset(self) -> int:
        return self.journal.end_offset()

    def next_offset(self) -> int:
        return self.journal.end_offset()

    def describe(self) -> QuorumDescription:
        end, now = self.journal.end_offset(), self.clock.now_ms()
        return QuorumDescription(
            self.node_id, self.EPOCH, end,
            replicas=[ReplicaRow(self.node_id, end, now, now, voter=True)],
            nodes=[(self.node_id, *e) for e in self.listener.listener_endpoints()[:1]])

    async def add_voter(self, voter: Voter, timeout_s: float) -> None:
        from odradek.raft.membership import VoterChangeError  # not loaded at a node's start

        raise VoterChangeError(ErrorCode.UNSUPPORTED_VERSION,
                               "a single node runs no controller quorum")

    async def remove_voter(self, node_id: int, directory_id: uuid.UUID,
                           timeout_s: float) -> None:
        from odradek.raft.voters import Voter

        await self.add_voter(Voter(node_id, directory_id), timeout_s)

    @property
    def kraft_version(self) -> int:
        return 0

    async def upgrade_kraft_version(self, level: int, validate_only: bool,
                                    timeout_s: float) -> None:
        from odradek.raft.membership import VoterChangeError

        if level != 0:
            raise VoterChangeError(ErrorCode.INVALID_UPDATE_VERSION,
                                   "a single node runs no controller quorum")

    async def serve(self, api_key: int, request: Any, version: int) -> Any:
        # No quorum runs here: a peer's KRaft request is a mistake.
        return api.response_class(api_key)(  # type: ignore[call-arg]
            error_code=ErrorCode.INVALID_REQUEST)

    async def wait_ready(self) -> None:
        pass

    async def view_change(self, timeout_s: float) -> bool:
        await asyncio.sleep(timeout_s)  # the leader never changes
        return False

    async def stop(self) -> None:
        self.journal.close()
