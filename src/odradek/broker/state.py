"""The broker's state: configuration, the metadata image and its journal.

Controller decisions (``odradek.metadata.controller``) come back as records;
:meth:`BrokerState.commit` writes them to the metadata journal and only then
replays them into the image, so what is served is always what is durable.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from odradek.broker.config import BrokerConfig, Listener
from odradek.broker.partitions import PartitionManager
from odradek.common.clock import Clock, SystemClock
from odradek.metadata.image import MetadataImage

if TYPE_CHECKING:
    from odradek.broker.groups import GroupRuntime


class MetadataJournal(Protocol):
    """Where committed metadata records live (the ``__cluster_metadata`` log)."""

    def append(self, records: list[Any]) -> None: ...

    def replay(self) -> Iterable[Any]: ...

    def close(self) -> None: ...


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


@dataclass(slots=True)
class BrokerState:
    config: BrokerConfig
    journal: MetadataJournal
    cluster_id: str
    clock: Clock
    image: MetadataImage
    advertised: list[Listener]
    partitions: PartitionManager
    producer_ids: list[int] = field(default_factory=list)
    """Reserved, not yet handed out producer ids (popped from the end)."""
    groups: GroupRuntime | None = None
    """The group coordinator's shell, set once the broker starts serving."""

    @classmethod
    def open(
        cls,
        config: BrokerConfig,
        journal: MetadataJournal,
        partitions: PartitionManager,
        clock: Clock | None = None,
    ) -> BrokerState:
        image = MetadataImage()
        for record in journal.replay():
            image.replay(record)
        cluster_id = config.get("cluster.id") or _cluster_id_from(config)
        partitions.reconcile(image, remove=False)
        return cls(config, journal, cluster_id, clock or SystemClock(), image, [], partitions)

    @property
    def node_id(self) -> int:
        return self.config.node_id

    def commit(self, records: list[Any]) -> None:
        if not records:
            return
        self.journal.append(records)
        for record in records:
            self.image.replay(record)
        self.partitions.reconcile(self.image)


def _cluster_id_from(config: BrokerConfig) -> str:
    """A stable id per data directory, in Kafka's base64 form of a UUID."""
    import base64

    path = config.log_dir / "meta.properties"
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("cluster.id="):
                return line.split("=", 1)[1].strip()
    raw = uuid.uuid4().bytes
    cluster_id = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"version=1\ncluster.id={cluster_id}\nnode.id={config.node_id}\n", encoding="utf-8"
    )
    return cluster_id
