"""What a coordinator is to the coordinator runtime: a shard, and the records it replays.

A :class:`CoordinatorShard` is a coordinator's pure state machine as
:class:`~odradek.broker.coordinators.coordinator_runtime.CoordinatorRuntime`
drives it (after Kafka's ``CoordinatorShard``): records of its internal topic
(decoded by the shard itself from the :class:`Entry` the partition-writer
port reads) and transaction :class:`Marker`\\ s are replayed in offset order;
``on_loading``, ``on_loaded`` and ``on_unloaded`` say where each partition
stands; ``on_metadata`` hands over a new metadata image. A shard does no IO:
whatever it needs to do later it asks of its shell.

Invariant: a shard's state for a partition is the replay of that partition's
records, those it wrote included (the runtime replays a batch as soon as it is
appended); between ``on_loading`` and ``on_loaded`` its requests are held
(COORDINATOR_LOAD_IN_PROGRESS), after ``on_unloaded`` they are another
broker's (NOT_COORDINATOR).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar

from odradek.metadata.image import MetadataImage

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Entry:
    """One data record of a coordinator partition."""

    offset: int
    producer_id: int
    producer_epoch: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Marker:
    """A transaction marker: ``producer_id``'s transaction ended at ``offset``."""

    offset: int
    producer_id: int
    producer_epoch: int
    committed: bool


class CoordinatorShard(Protocol[R]):
    """A coordinator's state machine, with records of type ``R``."""

    def encode(self, record: R) -> tuple[bytes | None, bytes | None]: ...

    def decode(self, key: bytes | None, value: bytes | None) -> R | None:
        """The record of a (key, value) pair; None to skip it. Raises DecodeError."""
        ...

    def replay(self, index: int, offset: int, producer_id: int, producer_epoch: int,
               record: R) -> None: ...

    def replay_marker(self, index: int, producer_id: int, commit: bool, offset: int) -> None: ...

    def on_loading(self, index: int) -> None:
        """``index`` is about to be replayed: drop its state, hold its requests."""
        ...

    def on_loaded(self, index: int) -> None:
        """``index`` is replayed (or new and empty): serve it."""
        ...

    def on_unloaded(self, index: int) -> None:
        """Another broker leads ``index``: drop its state (NOT_COORDINATOR)."""
        ...

    def on_metadata(self, image: MetadataImage) -> None: ...
