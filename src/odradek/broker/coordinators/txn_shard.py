"""The transaction coordinator as a shard of the coordinator runtime.

:class:`TxnShard` adapts the pure
:class:`~odradek.coordinator.txn.coordinator.TransactionCoordinator` to
:class:`~odradek.broker.coordinators.coordinator_runtime.CoordinatorShard`:
records are Kafka's ``__transaction_state`` records
(:mod:`odradek.coordinator.txn.records`, a record without a key is skipped);
a partition that loads or unloads forgets its transactions; once a partition
is loaded, the transactions it holds decided but not completed (PrepareCommit,
PrepareAbort) get their markers again (``resume``: the transaction shell's
marker jobs).
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.coordinator.txn import records as trecords
from odradek.coordinator.txn.coordinator import MarkerJob, TransactionCoordinator
from odradek.coordinator.txn.records import TxnRecord
from odradek.metadata.image import MetadataImage


class TxnShard:
    def __init__(self, coordinator: TransactionCoordinator,
                 resume: Callable[[MarkerJob], None]) -> None:
        self.coordinator = coordinator
        self.resume = resume

    def encode(self, record: TxnRecord) -> tuple[bytes | None, bytes | None]:
        return trecords.encode(record)

    def decode(self, key: bytes | None, value: bytes | None) -> TxnRecord | None:
        return None if key is None else trecords.decode(key, value)

    def replay(self, index: int, offset: int, producer_id: int, producer_epoch: int,
               record: TxnRecord) -> None:
        self.coordinator.replay(record)

    def replay_marker(self, index: int, producer_id: int, commit: bool, offset: int) -> None:
        """(``__transaction_state`` holds no transactions of its own.)"""

    def on_loading(self, index: int) -> None:
        self.coordinator.unload(index)

    def on_loaded(self, index: int) -> None:
        for job in self.coordinator.pending_markers(index):
            self.resume(job)

    def on_unloaded(self, index: int) -> None:
        self.coordinator.unload(index)

    def on_metadata(self, image: MetadataImage) -> None:
        """Nothing yet."""
