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

Adaptive (issue 39): a fixed window makes a consumer catching up on a backlog
read the disk even when memory is plentiful, where Kafka reads the page cache.
So the window is applied only while the kernel reports memory pressure
(:mod:`odradek.storage.mempressure`: PSI, else ``MemAvailable``, read at most
once a second) or when ``retain`` is 0; otherwise a log keeps what it wrote,
up to a total bound over every log of the trimmer
(``odradek.log.page.cache.retain.bytes``): past it, the oldest bytes of all
logs are dropped first, never a log's newest ``window``. When pressure starts,
every log is cut to its window at the next step of any log's writes. What a
log keeps beyond its window is still written back early (``sync_file_range``
starting the write, no wait, no drop), so dirty pages stay bounded as with the
fixed window and a later drop is cheap. The decision is the pure :func:`plan`.

Invariants of a :class:`CacheWindow` (one per log, touched on the loop only)::

    its spans are (path, dropped_to, written_end), oldest first; only the last
    may still grow; dropped_to <= written_end
    cached = sum(written_end - dropped_to) = added - gone (positions in the
    stream of bytes the log wrote: gone is its oldest byte still cached)
    fixed window (no trimmer, retain 0, or pressure): cached <= window + step
    after each note

Invariants of a :class:`PageCacheTrimmer` with ``retain`` > 0::

    total = sum of its windows' cached bytes
    marks are (window, position), in the order they were written: the bytes
    of that window before that position were written before every later mark's
    after each note without pressure, total < retain + step, or every byte
    over retain lies in some window's newest window bytes (marks first, oldest
    first; then what no mark covers yet, a step or less per log)
"""

from __future__ import annotations

import logging
import queue
import threading
import weakref
from collections import deque
from collections.abc import Callable

from odradek.storage.fs import FileSystem
from odradek.storage.mempressure import PressureGauge

_log = logging.getLogger("odradek.storage")

DEFAULT_WINDOW_BYTES = 16 << 20
"""Newest bytes per partition kept in the page cache under memory pressure
(consumers reading the tail, followers, the latency path are served from memory)."""
DEFAULT_STEP_BYTES = 4 << 20
"""Bytes written between two looks at the policy; past the window, bytes before
a drop is started (one drop covers them all)."""
RETAIN_FRACTION = 0.5
"""The default ``retain``: this share of ``MemTotal``."""

Runner = Callable[[str, int, int], None]
"""Drops [start, end) of a file from the page cache, somewhere (a thread)."""


def default_retain(total_memory: int) -> int:
    """``odradek.log.page.cache.retain.bytes`` when not set: half the machine's
    memory; 0 (a fixed window) when the memory is unknown."""
    return max(int(total_memory * RETAIN_FRACTION), 0)


def plan(cached: int, total: int, *, window: int, step: int, retain: int,
         pressure: bool) -> tuple[int, int]:
    """What one look at a log drops: (bytes of this log's oldest, then bytes of
    the oldest of every log's).

    ``cached``: the log's bytes in the page cache; ``total``: every log's. Under
    pressure, or with ``retain`` 0, the log is cut to its ``window`` once it
    holds ``step`` more (the fixed window). Otherwise nothing of its own, and
    once ``total`` is ``step`` or more over ``retain`` (> 0), the excess goes,
    oldest first."""
    own = 0
    if pressure or retain <= 0:
        if cached - window >= step:
            own = cached - window
        return own, 0
    over = total - retain
    return 0, over if over >= step else 0


class _Span:
    __slots__ = ("end", "path", "start")

    def __init__(self, path: str, start: int, end: int) -> None:
        self.path, self.start, self.end = path, start, end


class CacheWindow:
    """The page cache bytes of one log (see the module docstring). Without a
    ``trimmer`` the window is fixed."""

    __slots__ = ("__weakref__", "_added", "_cached", "_clean_to", "_drop", "_gone",
                 "_next_note", "_spans", "_trimmer", "step", "window")

    def __init__(self, window: int, step: int, drop: Runner,
                 trimmer: PageCacheTrimmer | None = None) -> None:
        self.window = window
        self.step = step
        self._drop = drop
        self._trimmer = trimmer
        self._spans: list[_Span] = []
        """Oldest first; a list, not a deque (an empty deque costs 600 bytes, and
        a log has one span per segment written since its last trim: few)."""
        self._cached = 0
        self._added = 0
        self._gone = 0
        self._clean_to = 0
        """Where the write-back of the last span's file was started up to."""
        self._next_note = window + step

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
            grown = end
            self._clean_to = 0
        elif end >= last.end:
            grown = end - last.end
            last.end = end
        else:  # truncated, then written again: what is cached ends at ``end``
            before = last.end - last.start
            last.start = min(last.start, end)
            last.end = end
            grown = (end - last.start) - before
            self._clean_to = min(self._clean_to, end)
        self._cached += grown
        self._added += grown
        trimmer = self._trimmer
        if trimmer is None:
            excess = self._cached - self.window
            if excess >= self.step:
                self.trim(excess)
            return
        trimmer.total += grown
        if self._added >= self._next_note:
            trimmer.note(self)

    def forget(self) -> None:
        """The log was deleted: its bytes count no more (their pages go with its
        files) and its marks are passed."""
        if self._trimmer is not None:
            self._trimmer.total -= self._cached
        self._gone = self._added
        self._cached = 0
        self._spans.clear()

    def trim(self, excess: int) -> int:
        """Drop up to ``excess`` of the oldest bytes; returns how many."""
        spans = self._spans
        done = 0
        while excess > 0 and spans:
            span = spans[0]
            upto = min(span.end, span.start + excess)
            if upto > span.start:
                self._drop(span.path, span.start, upto)
                done += upto - span.start
                excess -= upto - span.start
                span.start = upto
            if upto < span.end or len(spans) == 1:
                break
            del spans[0]
        self._cached -= done
        self._gone += done
        if self._trimmer is not None:
            self._trimmer.total -= done
        return done

    def clean_behind(self, write_back: Runner) -> None:
        """Start the write-back of the active segment's bytes older than the
        window, a step or more at a time, keeping them cached (dirty pages stay
        about a window per log, as with the fixed window; an older segment was
        fsynced when it rolled)."""
        if not self._spans:
            return
        last = self._spans[-1]
        start = max(self._clean_to, last.start)
        upto = last.end - max(self.window, 0)
        if upto - start >= self.step:
            write_back(last.path, start, upto)
            self._clean_to = upto

    def trim_through(self, position: int, most: int) -> int:
        """Drop the oldest bytes before ``position`` (at most ``most``), never the
        newest ``window``; returns how many."""
        upto = min(position, self._added - max(self.window, 0))
        return self.trim(min(upto - self._gone, most)) if upto > self._gone else 0


class PageCacheTrimmer:
    """The drop-behind policy of every log of a manager, and their drops, run on
    one daemon thread (started on first use) in the order asked. ``window`` < 0
    makes :meth:`window_for` return None: nothing is tracked. ``retain`` 0 (or
    no ``gauge``) is a fixed window per log; above 0, logs keep what they wrote
    while ``gauge`` reports no pressure, up to ``retain`` bytes in all."""

    def __init__(self, fs: FileSystem, window: int = DEFAULT_WINDOW_BYTES,
                 step: int = DEFAULT_STEP_BYTES, retain: int = 0,
                 gauge: PressureGauge | None = None) -> None:
        self.fs = fs
        self.window = window
        self.step = max(step, 1)
        self.retain = retain if gauge is not None else 0
        self.gauge = gauge
        self.dropped_bytes = 0
        self.written_back_bytes = 0
        """Bytes whose write-back was started, kept cached."""
        self.total = 0
        """Bytes the windows hold (the page cache the broker keeps)."""
        self.pressed = False
        """The gauge's answer at the last note."""
        self._windows: weakref.WeakSet[CacheWindow] = weakref.WeakSet()
        self._marks: deque[tuple[CacheWindow, int]] = deque()
        self._queue: queue.SimpleQueue[tuple[str, int, int, bool] | None] = (
            queue.SimpleQueue())
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def window_for(self) -> CacheWindow | None:
        if self.window < 0:
            return None
        if self.retain <= 0:
            return CacheWindow(self.window, self.step, self.submit)
        win = CacheWindow(self.window, self.step, self.submit, self)
        win._next_note = self.step
        self._windows.add(win)
        return win

    def note(self, win: CacheWindow) -> None:
        """``win`` wrote another ``step``: apply :func:`plan`, note where it is."""
        assert self.gauge is not None
        pressure = self.gauge.under_pressure()
        if pressure and not self.pressed:
            self._cut_all()
        self.pressed = pressure
        own, oldest = plan(win._cached, self.total, window=self.window, step=self.step,
                           retain=self.retain, pressure=pressure)
        if own:
            win.trim(own)
        if pressure:
            win._next_note = win._gone + self.window + self.step
        else:
            self._marks.append((win, win._added))
            win._next_note = win._added + self.step
            win.clean_behind(self.write_back)
            if oldest:
                self._drop_oldest(oldest)

    def _cut_all(self) -> None:
        """Pressure began: every log down to its window, forget marks passed."""
        for win in list(self._windows):
            if win._cached > self.window:
                win.trim(win._cached - self.window)
        self._marks = deque((w, at) for w, at in self._marks if at > w._gone)

    def _drop_oldest(self, most: int) -> None:
        marks = self._marks
        while most > 0 and marks:
            win, at = marks[0]
            most -= win.trim_through(at, most)
            if win._gone < at and most <= 0:
                break  # partly dropped: the rest of this mark goes next time
            marks.popleft()
        for win in list(self._windows) if most > 0 else ():
            # what no mark covers yet (less than a step per log) beyond the windows
            most -= win.trim_through(win._added, most)
            if most <= 0:
                break

    def submit(self, path: str, start: int, end: int, keep: bool = False) -> None:
        """Drop [start, end) of ``path`` on the thread; with ``keep``, only start its
        write-back there."""
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, daemon=True,
                                                    name="odradek-page-cache")
                    self._thread.start()
        self._queue.put((path, start, end, keep))

    def write_back(self, path: str, start: int, end: int) -> None:
        """Start the write-back of [start, end) of ``path`` on the thread, keeping it
        cached."""
        self.submit(path, start, end, True)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            path, start, end, keep = item
            try:
                self.fs.drop_cache(path, start, end, keep)
            except FileNotFoundError:
                pass  # deleted (retention, a swap) meanwhile: its pages went with it
            except OSError as e:  # advice only: the bytes are in the file either way
                _log.debug("page cache drop of %s [%d, %d) failed: %s", path, start, end, e)
            if keep:
                self.written_back_bytes += end - start
            else:
                self.dropped_bytes += end - start

    def close(self) -> None:
        """Stop the thread after the drops already asked for."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout=10)
