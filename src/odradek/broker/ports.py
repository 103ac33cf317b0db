"""The ports a request handler sees (broker/handlers/): narrow, typed views of
the wings, so that a handler is a function of its request and these, and a
handler test can build fakes of them with no broker (tests/unit/broker/test_wings.py).

- :class:`MetadataPort`: the metadata service (the image, the controller
  queue, this node's registration), implemented by
  ``control/broker_state.BrokerState``;
- :class:`ReplicaPort` and :class:`PartitionPort`: the partitions this node
  hosts, implemented by ``replica/partitions.PartitionManager`` and
  ``Partition``;
- :class:`GroupPort` and :class:`TxnPort`: the coordinators' runtimes
  (``coordinators/group_runtime.GroupRuntime``, ``coordinators/txn_runtime.TxnRuntime``);
- :class:`MetadataLogPort`, :class:`SessionsPort`, :class:`QuotaPort`: what a
  handler asks of the metadata log, of broker sessions and of client quotas.

The errors the wings raise to handlers are defined here too, so a handler
imports no wing (an import-linter contract in pyproject.toml keeps it so). This
module imports only the pure layers.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from odradek.common.clock import Clock
from odradek.common.ids import Ids
from odradek.coordinator.coordinator import GroupCoordinator
from odradek.coordinator.txn.coordinator import TransactionCoordinator
from odradek.metadata.image import Endpoint, MetadataImage
from odradek.replication.partition import Appended, Origin, PartitionState

if TYPE_CHECKING:
    from odradek.raft.voters import Voter
    from odradek.wire.messages.broker_heartbeat_request import BrokerHeartbeatRequest
    from odradek.wire.messages.broker_heartbeat_response import BrokerHeartbeatResponse
    from odradek.wire.messages.broker_registration_request import BrokerRegistrationRequest
    from odradek.wire.messages.broker_registration_response import (
        BrokerRegistrationResponse,
    )

METADATA_TOPIC = "__cluster_metadata"
"""The metadata log's topic: the journal on a single node, the quorum's log in a cluster."""
METADATA_TOPIC_ID = uuid.UUID(int=1)
"""Kafka's fixed id of ``__cluster_metadata`` (most significant bits 0, least 1;
``AAAAAAAAAAAAAAAAAAAAAQ`` in base64): a Raft Fetch of v13+ names it so."""


class NotControllerError(Exception):
    """A metadata write on a node that is not the active controller (cluster mode);
    the caller forwards the request to the controller, or answers NOT_CONTROLLER."""

    def __init__(self, controller_id: int) -> None:
        super().__init__(f"this node is not the active controller (controller: {controller_id})")
        self.controller_id = controller_id


class PartitionGoneError(Exception):
    """A produce or coordinator write waited for a partition that was removed."""


class NotLeaderError(PartitionGoneError):
    """A produce or coordinator write waited for the HW of a partition whose
    leadership moved to another broker (NOT_LEADER_OR_FOLLOWER)."""


class BrokerStopping(NotLeaderError):
    """A produce or coordinator write waited for the HW when the broker began to
    stop. Its records may be in the log and on followers: the produce is not
    answered, its connection closes, as Kafka's do when a broker shuts down.
    An error answer would say more than is known: librdkafka takes
    NOT_LEADER_OR_FOLLOWER and UNKNOWN_TOPIC_OR_PARTITION as "not persisted",
    and an idempotent producer that bumps its epoch meanwhile sends such records
    again under new sequence numbers (a duplicate the chaos harness found after
    a clean restart of the whole cluster); a closed connection is "possibly
    persisted", retried with the same sequence, which the next leader knows."""


class CoordinatorWriteError(Exception):
    """A coordinator's records could not be written or committed (the client
    gets a retriable error)."""


# -- the replica manager: what produce and fetch handlers hand it, and get back -----------

@dataclass(frozen=True, slots=True)
class FetchParams:
    """What a whole fetch asks."""

    replica_id: int = -1
    """The follower fetching (-1: a consumer)."""
    broker_epoch: int = -1
    """A follower's registration epoch as of this fetch (its log end counts for
    the ISR only while that registration lasts)."""
    max_wait_ms: int = 0
    min_bytes: int = 0
    max_bytes: int = 0
    """The whole answer's budget (≤ 0: none but the first batch, KIP-74)."""
    isolation: int = 0
    """0 read_uncommitted (up to the high watermark), 1 read_committed (up to the
    last stable offset, with the aborted transactions listed)."""

    @property
    def from_follower(self) -> bool:
        return self.replica_id >= 0


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """One partition of a fetch."""

    topic: str
    index: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1


@dataclass(slots=True)
class FetchedPartition:
    """One partition's answer. An error before the read leaves every offset at -1."""

    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted: list[tuple[int, int]] | None = None
    """(producer id, first offset) of the aborted transactions the records may
    hold (read_committed); None otherwise."""
    records: Any = None
    """The records (a ``FileRecords`` of file slices, broker/net/transfer.py), or None."""
    size: int = 0
    diverging_epoch: int = -1
    """A follower's log diverges from this leader's: the epoch and end offset
    to truncate to (no records then)."""
    diverging_end_offset: int = -1
    read: bool = False
    """Whether the partition was read (an error before the read: false)."""

    @property
    def diverges(self) -> bool:
        return self.diverging_epoch >= 0 or self.diverging_end_offset >= 0


@dataclass(slots=True)
class FetchResult:
    partitions: list[FetchedPartition]
    """One answer per :class:`PartitionFetch` asked, in order."""
    size: int
    """The bytes of records in the answer."""
    waited_s: float = 0.0
    """Time spent in the long poll."""


@dataclass(frozen=True, slots=True)
class ProduceEntry:
    """One partition's records in a Produce request."""

    topic: str
    index: int
    records: memoryview | None


@dataclass(slots=True)
class Produced:
    """One partition's append: its answer, and what its completion waits on."""

    error_code: int = 0
    error_message: str | None = None
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    part: Any = None
    """The partition appended to (a :class:`PartitionPort`); None if refused first."""
    result: Appended | None = None
    """The append (None: refused before it)."""


class ReplicaManagerPort(Protocol):
    """Produce and fetch (broker/replica/manager.py)."""

    async def ready_to_append(self, timeout_s: float) -> None:
        """Wait (bounded) until this node is in service, before appending."""
        ...

    def append_records(self, entries: list[ProduceEntry], acks: int,
                       internal_topics: frozenset[str],
                       verify: Callable[[int, int, tuple[str, int]], int],
                       client_id: str | None = None) -> list[Produced]:
        """Append each entry's records where this node leads the partition,
        synchronously, in order; one answer per entry."""
        ...

    async def completed(self, part: Any, result: Appended, acks: int,
                        timeout_s: float | None) -> int:
        """Wait for what ``acks`` asks of ``result``; the error to answer (0: none)."""
        ...

    async def fetch_records(self, params: FetchParams, wanted: list[PartitionFetch],
                            ) -> FetchResult: ...


class Decision(Protocol):
    """What a controller call returns: an error code (0: none) and records."""

    @property
    def error(self) -> int: ...

    @property
    def records(self) -> list[Any]: ...


D = TypeVar("D", bound=Decision)


class ConfigPort(Protocol):
    """The broker's configuration (``broker/config.BrokerConfig``)."""

    @property
    def node_id(self) -> int: ...

    @property
    def props(self) -> dict[str, str]:
        """The effective configuration."""
        ...

    @property
    def explicit(self) -> dict[str, str]:
        """What the properties file and overrides set."""
        ...

    @property
    def dynamic_default(self) -> dict[str, str]:
        """The cluster-wide dynamic broker configs."""
        ...

    @property
    def dynamic_broker(self) -> dict[str, str]:
        """This broker's dynamic configs."""
        ...

    def get(self, name: str) -> str: ...

    def get_int(self, name: str) -> int: ...

    def get_bool(self, name: str) -> bool: ...


class PartitionPort(Protocol):
    """One partition this node hosts: its pure state and its log, and the
    waiters of the fetches long-polling it."""

    @property
    def state(self) -> PartitionState: ...

    @property
    def topic(self) -> str: ...

    @property
    def index(self) -> int: ...

    @property
    def log(self) -> Any:
        """Its log (``odradek.storage.log.Log``), for reads and inspection only:
        appends and the high watermark go through :attr:`state`."""
        ...

    @property
    def leader_epoch(self) -> int: ...

    @property
    def waiters(self) -> AbstractSet[asyncio.Future[None]]: ...

    @property
    def refused(self) -> dict[int, tuple[int, int, int]] | None:
        """producer id -> (epoch, first sequence, error code) of its last batch
        refused with a retriable error before the sequence check (None: none)."""
        ...

    def hw_moved(self) -> None: ...


class ReplicaPort(Protocol):
    """The partitions this node hosts."""

    @property
    def partitions(self) -> Mapping[tuple[str, int], PartitionPort]:
        """Every partition hosted here, by (topic, index)."""
        ...

    @property
    def log_dirs(self) -> list[str]:
        """``log.dirs``, as configured."""
        ...

    def get(self, topic: str, index: int) -> PartitionPort | None: ...

    def alter_log_dir(self, part: Any, directory: str) -> None:
        """Move ``part`` to ``directory`` (AlterReplicaLogDirs)."""
        ...

    def on_isr_eligible(self) -> None:
        """A follower may have caught up: the ISR manager looks again."""
        ...

    def append_now(self, part: Any, records: memoryview, origin: Origin,
                   acks: int = 1) -> Appended: ...

    async def complete(self, part: Any, result: Appended, acks: int = -1) -> None: ...


class MetadataLogPort(Protocol):
    """What a handler asks of the metadata log (broker/control/metadata_log.py)."""

    @property
    def active_since_ms(self) -> int: ...

    @property
    def applied(self) -> int:
        """Every record of the metadata log below this offset is in the image."""
        ...

    def describe(self) -> Any:
        """A ``QuorumDescription``."""
        ...

    async def serve(self, api_key: int, request: Any, version: int) -> Any: ...

    async def add_voter(self, voter: Voter, timeout_s: float) -> None:
        """KIP-853 (active controller): VoterChangeError, NotControllerError."""
        ...

    async def remove_voter(self, node_id: int, directory_id: uuid.UUID,
                           timeout_s: float) -> None: ...

    @property
    def kraft_version(self) -> int: ...

    async def upgrade_kraft_version(self, level: int, validate_only: bool,
                                    timeout_s: float) -> None:
        """kraft.version 0 -> 1 (active controller): VoterChangeError,
        NotControllerError, TimeoutError."""
        ...


class SessionsPort(Protocol):
    """Broker registrations and heartbeats as the controller takes them."""

    async def register(self, request: BrokerRegistrationRequest) -> BrokerRegistrationResponse: ...

    async def heartbeat(self, request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse: ...


class QuotaPort(Protocol):
    """Client quota sensors (broker/net/quotas.py)."""

    def charge(self, key: str, client_id: str | None, value: float, now_ms: float, *,
               user: str) -> int:
        """Charge ``value`` to the ``key`` quota of ``(user, client_id)``, ``user`` being
        the principal's name (``RequestContext.user``); the throttle (ms) it earned."""
        ...

    def pending(self, key: str, client_id: str | None, now_ms: float, *, user: str) -> int:
        """The throttle (ms) the client is already due, charging nothing."""
        ...


class MetadataPort(Protocol):
    """The metadata service as handlers see it."""

    @property
    def config(self) -> ConfigPort: ...

    @property
    def node_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def image(self) -> MetadataImage: ...

    @property
    def ids(self) -> Ids: ...

    @property
    def advertised(self) -> list[Any]:
        """This node's advertised listeners."""
        ...

    @property
    def producer_ids(self) -> list[int]: ...

    @property
    def partitions(self) -> ReplicaPort: ...

    @property
    def metadata(self) -> MetadataLogPort: ...

    @property
    def sessions(self) -> SessionsPort: ...

    @property
    def quotas(self) -> QuotaPort: ...

    @property
    def metadata_ready(self) -> bool: ...

    @property
    def registered(self) -> bool: ...

    @property
    def in_service(self) -> asyncio.Event: ...

    @property
    def controller_id(self) -> int: ...

    @property
    def client_controller_id(self) -> int: ...

    async def write(self, decide: Callable[[MetadataImage], D], *, apply: bool = True) -> D: ...

    def serving(self, topic: str, index: int) -> PartitionPort | None:
        """The partition if this node leads it, else None."""
        ...

    def missing_partition_error(self, topic: str, index: int) -> int: ...

    def endpoint_of(self, node_id: int, listener: str = "") -> Endpoint | None: ...

    def live_endpoints(self, listener: str = "") -> list[tuple[int, Endpoint]]: ...

    async def wait_in_service(self, timeout_s: float) -> bool: ...

    async def create_topic_at_controller(self, name: str, partitions: int,
                                         configs: dict[str, str],
                                         replication_factor: int = -1) -> bool: ...

    async def producer_ids_from_controller(self) -> range: ...


class GroupPort(Protocol):
    """The group coordinator's runtime."""

    @property
    def coordinator(self) -> GroupCoordinator: ...

    @property
    def clock(self) -> Clock: ...

    async def ensure_topic(self) -> bool: ...

    async def topics_deleted(self, topics: set[str]) -> None: ...

    async def call(self, op: Callable[[Any], Any], group_id: str | None = None) -> Any: ...

    def committed_offsets(self, group_id: str) -> dict[Any, Any] | None: ...

    def unstable_offsets(self, group_id: str) -> set[tuple[str, int]]: ...

    async def settled(self, group_ids: Iterable[str] | None, timeout_s: float = 5.0,
                      ) -> set[str]:
        """Wait until the groups' writes are committed; the groups still unsettled."""
        ...

    def release_waiting(self) -> None:
        """Answer every request waiting on the coordinator (the broker stops)."""
        ...

    async def txn_commit(self, req: Any, producer_id: int, producer_epoch: int,
                         exists: Any) -> dict[tuple[str, int], int]: ...


class TxnPort(Protocol):
    """The transaction coordinator's runtime."""

    @property
    def coordinator(self) -> TransactionCoordinator: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def loaded(self) -> asyncio.Event: ...

    async def ensure_topic(self) -> bool: ...

    async def settled(self, timeout_s: float = ...) -> bool:
        """Wait until every write to the partitions led here is committed."""
        ...

    def coordinator_error(self, transactional_id: str) -> Any: ...

    def verify_produce(self, transactional_id: str | None, producer_id: int,
                       producer_epoch: int, partition: tuple[str, int]) -> int:
        """KIP-890's check of a transactional batch's producer (0: go on)."""
        ...

    async def run(self, transactional_id: str, decision: Any) -> Any: ...

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partition: tuple[str, int]) -> Any: ...

    async def add_implicitly(self, transactional_id: str, producer_id: int,
                             producer_epoch: int, partitions: list[tuple[str, int]],
                             timeout_s: float) -> dict[tuple[str, int], Any]:
        """Transactions v2: add ``partitions`` to the producer's transaction itself."""
        ...

    def write_marker(self, part: Any, producer_id: int, producer_epoch: int, commit: bool,
                     coordinator_epoch: int, now_ms: int) -> Appended:
        """Append one COMMIT/ABORT marker to ``part`` (a :class:`PartitionPort`)."""
        ...


__all__ = [
    "METADATA_TOPIC", "METADATA_TOPIC_ID", "BrokerStopping", "ConfigPort",
    "CoordinatorWriteError", "Decision",
    "FetchParams", "FetchResult", "FetchedPartition", "GroupPort",
    "MetadataLogPort", "MetadataPort", "NotControllerError", "NotLeaderError",
    "PartitionFetch", "PartitionGoneError", "PartitionPort", "ProduceEntry", "Produced",
    "QuotaPort", "ReplicaManagerPort", "ReplicaPort", "SessionsPort", "TxnPort",
]
