"""What a partition's log tells the partition layer, and asks of it.

The log (:class:`~odradek.storage.log.Log`) is opened from disk at start-up,
before the partition that wraps it exists; the partition then listens through
one :class:`LogListener` (:meth:`Log.attach
<odradek.storage.log.Log.attach>`), the producer state's side of the log
(:class:`odradek.replication.producer_log.Listener`). Storage imports nothing
of the layers above: this protocol is the seam.
"""

from __future__ import annotations

from typing import Protocol

from odradek.storage.cleaner_policy import CleanerView


class LogListener(Protocol):
    """The partition layer's side of its log (:class:`Log.attach`)."""

    def producer_snapshot(self) -> bytes:
        """The producer snapshot to store at a roll and at close."""

    def writes_rolled_back(self) -> None:
        """A failed write rolled the log back to its written end: state kept for the
        appends it undid (producers) must be rebuilt."""

    def cleaner_view(self) -> CleanerView:
        """The last stable offset and aborted transactions the cleaner obeys."""

    def aborts_removed(self, marker_offsets: set[int]) -> None:
        """The cleaner removed these ABORT markers (by offset): their aborted-
        transaction entries go too."""
