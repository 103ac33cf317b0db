"""When to fsync, and the fsync itself as a job that can run on another thread.

The event loop must not block on ``fsync``. So a flush has three steps:

1. ``Log.begin_flush()`` on the loop: writes pending index entries (page cache
   only) and returns a :class:`FlushJob` naming the files and directories to
   sync and the offset the flush covers (the log end offset at that moment).
2. ``job.run()`` on an executor thread: only ``fsync`` calls, by path; it
   touches no log state.
3. ``job.complete(error)`` back on the loop: advances the recovery point, or on
   an error takes the log offline (after a failed fsync the page cache state is
   unknown, so nothing more is trusted until a reopen recovers the log).

Group commit falls out: a log runs at most one flush at a time; appends made
while it runs are covered by the next one, so many appends share one fsync.

:class:`FlushPolicy` answers "is a flush due?" for ``flush.messages`` and
``flush.ms`` and gives the next deadline instead of sleeping. A roll makes a
flush due at once, as in Kafka, which flushes a segment when it stops being
active whatever the policy says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from odradek.storage.config import LONG_MAX
from odradek.storage.fs import FileSystem


class IoJob(Protocol):
    """Blocking IO prepared on the loop: ``run`` on a thread, then ``complete`` on the loop."""

    def run(self) -> None: ...

    def complete(self, error: BaseException | None = None) -> None: ...


class _FlushOwner(Protocol):
    def complete_flush(self, job: FlushJob, error: BaseException | None) -> None: ...


@dataclass(frozen=True, slots=True)
class FlushPolicy:
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX

    def due(self, *, unflushed_messages: int, last_flush_ms: int, now_ms: int) -> bool:
        if unflushed_messages <= 0:
            return False
        if unflushed_messages >= self.flush_messages:
            return True
        return self.flush_ms != LONG_MAX and now_ms - last_flush_ms >= self.flush_ms

    def deadline_ms(self, *, unflushed_messages: int, last_flush_ms: int) -> int | None:
        """Monotonic time at which ``flush.ms`` makes a flush due, or None."""
        if unflushed_messages <= 0 or self.flush_ms == LONG_MAX:
            return None
        return last_flush_ms + self.flush_ms


@dataclass(slots=True)
class FlushJob:
    fs: FileSystem
    owner: _FlushOwner
    up_to_offset: int
    """Every offset below this is durable once the job completes without error."""
    files: Sequence[str]
    dirs: Sequence[str]
    messages: int
    started_ms: int
    done: bool = field(default=False)

    def run(self) -> None:
        """The blocking part. Safe on any thread; raises OSError on failure."""
        for path in self.files:
            try:
                self.fs.fsync(path)
            except FileNotFoundError:
                # Deleted (retention, truncation) since the job was prepared:
                # nothing of it needs to be durable any more.
                continue
        for path in self.dirs:
            self.fs.sync_dir(path)

    def complete(self, error: BaseException | None = None) -> None:
        """Report the outcome of :meth:`run` to the log (on the loop thread)."""
        if not self.done:
            self.done = True
            self.owner.complete_flush(self, error)
