"""Drop-behind: what a log wrote long enough ago leaves the page cache.

A partition log writes with ``pwritev`` into the page cache and leaves the rest
to the kernel (Kafka does the same): dirty pages are written back when the
kernel decides, and the page cache grows until memory runs short. Two costs
follow, both measured in ``docs/decisions.md``:

- every page cache page a write fills is a page the kernel must find. On a
  virtual machine whose free memory goes back to the host (free page
  reporting, as on the machines this project runs on) that is a host page
  fault per fresh page, and it made ~80 % of the broker's CPU time at 1 KiB
  records: the copy into a recycled page costs a tenth of that;
- dirty pages pile up until the kernel throttles the writer, a stall of the
  event loop that every connection feels.

So each log keeps only its newest ``window`` bytes in the page cache (per
partition; ``odradek.log.page.cache.window.bytes``): once more than
``window + step`` bytes are cached, the oldest are written back and dropped,
on a background thread, ``step`` bytes or more at a time. The pages come back
to the kernel's free lists warm and the next writes reuse them; dirty data
never exceeds about ``window + step`` per partition.

Nothing here touches what a log *means*: the bytes stay in the files, a drop
is advice to the kernel (``sync_file_range`` then ``POSIX_FADV_DONTNEED``,
:meth:`~odradek.storage.fs.FileSystem.drop_cache`), its failure is ignored,
and an fsync still decides durability (the recovery point). A read of dropped
bytes reads the disk; the fetch path warms such reads off the event loop
(:mod:`odradek.broker.net.transfer`). A window below 0 turns this off: the page
cache is the kernel's alone, as in Kafka.

Invariants of a :class:`CacheWindow` (one per log, touched on the loop only)::

    its spans are (path, dropped_to, written_end), oldest first; only the last
    may still grow; dropped_to <= written_end
    cached = sum(written_end - dropped_to) <= window + step after each note
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from odradek.storage.fs import FileSystem

_log = logging.getLogger("odradek.storage")

DEFAULT_WINDOW_BYTES = 16 << 20
"""Newest bytes per partition kept in the page cache (consumers reading the
tail, followers, the latency path are served from memory)."""
DEFAULT_STEP_BYTES = 4 << 20
"""Bytes past the window before a drop is started (one drop covers them all)."""

Runner = Callable[[str, int, int], None]
"""Drops [start, end) of a file from the page cache, somewhere (a thread)."""


class _Span:
    __slots__ = ("end", "path", "start")

    def __init__(self, path: str, start: int, end: int) -> None:
        self.path, self.start, self.end = path, start, end


class CacheWindow:
    """The page cache bytes of one log (see the module docstring)."""

    __slots__ = ("_cached", "_drop", "_spans", "step", "window")

    def __init__(self, window: int, step: int, drop: Runner) -> None:
        self.window = window
        self.step = step
        self._drop = drop
        self._spans: list[_Span] = []
        """Oldest first; a list, not a deque (an empty deque costs 600 bytes, and
        a log has one span per segment written since its last trim: few)."""
        self._cached = 0

    @property
    def cached_bytes(self) -> int:
        """Bytes written and not yet handed to a drop."""
        return self._cached

    def wrote(self, path: str, end: int) -> None:
        """Bytes up to ``end`` of ``path`` (the active segment) are written."""
        spans = self._spans
        last = spans[-1] if spans else None
        if last is None or last.path != path:
            spans.append(_Span(path, 0, end))
            self._cached += end
        elif end >= last.end:
            self._cached += end - last.end
            last.end = end
        else:  # truncated, then written again: what is cached ends at ``end``
            self._cached -= last.end - last.start
            last.start = min(last.start, end)
            last.end = end
            self._cached += end - last.start
        excess = self._cached - self.window
        if excess >= self.step:
            self._trim(excess)

    def _trim(self, excess: int) -> None:
        spans = self._spans
        while excess > 0 and spans:
            span = spans[0]
            upto = min(span.end, span.start + excess)
            if upto > span.start:
                self._drop(span.path, span.start, upto)
                self._cached -= upto - span.start
                excess -= upto - span.start
                span.start = upto
            if upto < span.end or len(spans) == 1:
                break
            del spans[0]


class PageCacheTrimmer:
    """Runs the drops of every log of a manager on one daemon thread (started on
    first use), in the order asked. ``window`` < 0 makes :meth:`window_for`
    return None: nothing is tracked."""

    def __init__(self, fs: FileSystem, window: int = DEFAULT_WINDOW_BYTES,
                 step: int = DEFAULT_STEP_BYTES) -> None:
        self.fs = fs
        self.window = window
        self.step = max(step, 1)
        self.dropped_bytes = 0
        self._queue: queue.SimpleQueue[tuple[str, int, int] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def window_for(self) -> CacheWindow | None:
        if self.window < 0:
            return None
        return CacheWindow(self.window, self.step, self.submit)

    def submit(self, path: str, start: int, end: int) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, daemon=True,
                                                    name="odradek-page-cache")
                    self._thread.start()
        self._queue.put((path, start, end))

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            path, start, end = item
            try:
                self.fs.drop_cache(path, start, end)
            except FileNotFoundError:
                pass  # deleted (retention, a swap) meanwhile: its pages went with it
            except OSError as e:  # advice only: the bytes are in the file either way
                _log.debug("page cache drop of %s [%d, %d) failed: %s", path, start, end, e)
            self.dropped_bytes += end - start

    def close(self) -> None:
        """Stop the thread after the drops already asked for."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout=10)
