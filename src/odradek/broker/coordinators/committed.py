"""What a coordinator has written that is committed: waits on the high watermark.

A shard applies its records when they are appended (its next decisions build
on them), so its state runs ahead of the high watermark by the writes in
flight. :class:`Commits` keeps, per partition, where this coordinator's
writes end, and answers through the partition-writer port:

* :meth:`Commits.completed`: a batch is written, fsynced where due and at or
  below the HW (only then is its request answered), bounded by a timeout
  (Kafka's ``offsets.commit.timeout.ms``: an ISR below ``min.insync.replicas``
  holds the HW, and the request gets a retriable error rather than no answer);
* :meth:`Commits.settled`: every record written to a partition is committed
  (a read then sees only committed state; one that cannot settle answers a
  retriable error instead of state that may never commit);
* :meth:`Commits.log_committed`: the partition's HW reached its log end (a
  load then reverts nothing committed).

Every wait ends (False, or CoordinatorWriteError) when this broker stops
leading the partition.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from odradek.broker.ports import CoordinatorWriteError

if TYPE_CHECKING:
    from odradek.broker.coordinators.coordinator_runtime import PartitionWriter, Written


class Commits:
    def __init__(self, topic: str, writer: PartitionWriter) -> None:
        self.topic = topic
        self.writer = writer
        self.written_end: dict[int, int] = {}
        """Per partition index: the offset after the last batch written there."""

    def wrote(self, index: int, end: int) -> None:
        self.written_end[index] = max(self.written_end.get(index, 0), end)

    def written(self, index: int) -> int:
        """Where the writes to ``index`` end, as far as the log still holds them: a
        log truncated since (leadership moved and came back) no longer has what
        was appended past its end, and nothing waits for it."""
        end = self.written_end.get(index, 0)
        log_end = self.writer.log_end(index)
        return min(end, log_end) if log_end is not None else end

    async def completed(self, written: Sequence[Written], timeout_s: float | None) -> None:
        """Wait until every batch is fsynced where due and at or below the HW.
        Raises CoordinatorWriteError if one fails, its partition goes, or
        ``timeout_s`` passes first."""
        async def wait() -> None:
            for w in written:
                await self.writer.completed(w)

        try:
            if timeout_s is None:
                await wait()
            else:
                await asyncio.wait_for(wait(), timeout_s)
        except TimeoutError:
            raise CoordinatorWriteError(
                f"{self.topic}: not committed within {timeout_s:g} s") from None

    def is_settled(self, index: int) -> bool:
        """Is every record written to ``index`` committed?"""
        hw = self.writer.high_watermark(index)
        return hw is not None and hw >= self.written(index)

    async def settled(self, index: int, timeout_s: float) -> bool:
        """Wait until the HW of ``index`` passes every record written to it (True),
        or until ``timeout_s`` pass or this broker stops leading it (False)."""
        return await self._hw_reaches(index, lambda: self.written(index), timeout_s)

    async def log_committed(self, index: int, timeout_s: float) -> bool:
        """Wait until the HW of ``index`` reaches its log end: what the log holds
        is then committed, and loading it reverts nothing committed."""
        return await self._hw_reaches(index, lambda: self.writer.log_end(index) or 0, timeout_s)

    async def _hw_reaches(self, index: int, target: Callable[[], int], timeout_s: float,
                          ) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            if not self.writer.is_leader(index):
                return False
            want = target()
            hw = self.writer.high_watermark(index)
            if hw is not None and hw >= want:
                return True
            left = deadline - loop.time()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(self.writer.wait_for_high_watermark(index, want - 1), left)
            except (TimeoutError, CoordinatorWriteError):
                return False
