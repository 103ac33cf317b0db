"""How a cleaner pass touches the disk: reading segments, pacing, and stopping.

A pass (:mod:`odradek.storage.cleaner_pass`) runs off the event loop, often in
a worker process (:mod:`odradek.storage.cleaner_worker`), so what it needs of
the log is here in picklable form:

* :class:`SegmentFile`, an inactive segment's paths and extent, and
  :func:`segment_batches`, which reads its batches through a handle of the
  pass's own, not the log's handle cache (the pass runs off the event loop).
* :class:`Throttle`, ``log.cleaner.io.max.bytes.per.second``.
* :func:`check_parent`, which stops a worker whose broker is gone
  (:func:`watch_parent` arms it in the worker).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

from odradek.storage.fs import FileSystem
from odradek.storage.segment import Segment
from odradek.wire.batch import BatchHeader, read_batch_header, validate_batch


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """What a pass needs of an inactive segment (picklable: a pass may run in a
    worker process)."""

    base_offset: int
    log_path: str
    dir_path: str
    size: int
    next_offset: int

    @classmethod
    def of(cls, seg: Segment) -> SegmentFile:
        return cls(seg.base_offset, seg.log_path, seg.dir_path, seg.size, seg.next_offset)


class Throttle:
    """``log.cleaner.io.max.bytes.per.second``: after each read or write the pass
    sleeps as long as it is ahead of the rate (read and write bytes count
    together, as in Kafka)."""

    def __init__(self, bytes_per_second: float) -> None:
        self.rate = bytes_per_second
        self.start = time.monotonic()
        self.spent = 0

    def spend(self, n: int) -> None:
        if self.rate <= 0 or self.rate == float("inf"):
            return
        self.spent += n
        ahead = self.spent / self.rate - (time.monotonic() - self.start)
        if ahead > 0.001:
            time.sleep(ahead)


def segment_batches(
    fs: FileSystem, seg: SegmentFile, *, headers_only: bool = False
) -> Iterator[tuple[BatchHeader, bytes]]:
    """(header, bytes) of each batch of an inactive segment (bytes empty with
    ``headers_only``), read with a handle of our own: the cleaner runs off the
    event loop. Recovery already accepted these bytes; a batch that does not
    check out raises DecodeError and the pass is abandoned."""
    handle = fs.open(seg.log_path)
    try:
        size = handle.size()
        pos = 0
        while pos < size:
            head = handle.pread(pos, 61)
            if len(head) < 61:
                return
            h = read_batch_header(head, 0)
            if headers_only:
                yield h, b""
            else:
                data = handle.pread(pos, h.size)
                if len(data) < h.size:
                    return
                validate_batch(data, 0)
                yield h, data
            pos += h.size
    finally:
        handle.close()


_PARENT: int | None = None
"""In a cleaner worker: the broker's pid (the worker stops if the broker is gone)."""


def check_parent() -> None:
    """A worker whose broker died (kill -9 leaves it running) stops writing at
    once: the restarted broker removes its files and cleans again."""
    if _PARENT is not None and os.getppid() != _PARENT:
        raise SystemExit("the broker is gone")


def watch_parent(parent: int) -> None:
    """In a cleaner worker: from now on :func:`check_parent` stops this process once
    ``parent`` (the broker) is no longer its parent."""
    global _PARENT
    _PARENT = parent
