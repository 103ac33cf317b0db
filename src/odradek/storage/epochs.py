"""The leader-epoch cache of a partition and its ``leader-epoch-checkpoint`` file.

Each entry says "leader epoch E wrote its first record at offset S". Followers
and a new leader use it to find where two logs diverge (OffsetsForLeaderEpoch,
Fetch's diverging epoch): the end offset of epoch E is the start offset of the
next larger epoch, or the log end for the latest one.

File format (Kafka's, in the partition directory), UTF-8 lines ended by ``\\n``::

    0                 version
    2                 number of entries
    0 0               epoch, start offset, separated by one space
    3 1200

Invariants: epochs strictly increase down the file and so do start offsets;
every start offset is at most the log end. The file is replaced atomically
(:func:`~odradek.storage.checkpoint.write_atomically`) whenever an entry is
added or the cache is truncated, which happens when the first batch of a new
epoch is appended and when the log is truncated (from the end by a follower,
from the start by retention or DeleteRecords).

When the file is missing or unreadable the cache is rebuilt from the
``partitionLeaderEpoch`` of every batch header (see
:meth:`LeaderEpochCache.rebuild_from`), which is what Kafka's recovery does for
the batches it validates.
"""

from __future__ import annotations

import contextlib
import functools
import posixpath
import threading
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from itertools import pairwise

from odradek.common.intern import Interner, identity_interner
from odradek.storage.checkpoint import CheckpointFormatError, write_atomically
from odradek.storage.fs import FileSystem
from odradek.storage.names import LEADER_EPOCH_CHECKPOINT

VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


def format_epochs(entries: list[tuple[int, int]]) -> bytes:
    lines = [str(VERSION), str(len(entries))]
    lines += [f"{epoch} {start}" for epoch, start in entries]
    return ("\n".join(lines) + "\n").encode()


def parse_epochs(data: bytes) -> list[tuple[int, int]]:
    """Entries of a ``leader-epoch-checkpoint`` file; CheckpointFormatError if damaged."""
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise CheckpointFormatError("leader-epoch-checkpoint is not text") from e
    if len(lines) < 2 or lines[0].strip() != str(VERSION):
        raise CheckpointFormatError("missing or unknown leader-epoch-checkpoint version")
    try:
        count = int(lines[1])
        entries = [line.split(" ") for line in lines[2:] if line.strip()]
        out = [(int(e[0]), int(e[1])) for e in entries if len(e) == 2]
    except ValueError as e:
        raise CheckpointFormatError("malformed leader-epoch-checkpoint line") from e
    if len(out) != count or len(entries) != count:
        raise CheckpointFormatError(f"expected {count} epoch entries, found {len(out)}")
    for (e1, s1), (e2, s2) in pairwise(out):
        if e2 <= e1 or s2 < s1:
            raise CheckpointFormatError("leader epochs or start offsets go backwards")
    return out


@functools.lru_cache(maxsize=1024)
def _parsed(data: bytes) -> tuple[tuple[int, int], ...]:
    """:func:`parse_epochs`, once per distinct file: at start-up most partitions'
    checkpoints are alike (one epoch from offset 0)."""
    return tuple(parse_epochs(data))


_shared: Interner[tuple[int, ...], tuple[int, ...]] = identity_interner()
"""The one tuple of these values that every epoch cache holding them shares
(most hold ``(0,)`` or another single epoch; two lists of one entry cost ~180
bytes a partition; :mod:`odradek.common.intern`)."""


class LeaderEpochCache:
    """Sorted (epoch, start offset) entries of one partition, kept in its checkpoint."""

    __slots__ = ("_epochs", "_starts", "dir_path", "fs", "loaded", "persist", "unwritten")

    def __init__(self, fs: FileSystem, dir_path: str, *, persist: bool = True) -> None:
        self.unwritten = False
        """True while the newest entry was noted (:meth:`note`) and not yet written."""
        self.fs = fs
        self.dir_path = dir_path
        """The partition directory (the log's own string: no path kept per log)."""
        self.persist = persist
        self._epochs: tuple[int, ...] = ()
        self._starts: tuple[int, ...] = ()
        """The entries as two tuples, replaced whenever they change (rarely: a new
        epoch, a truncation), each the one shared tuple of its values
        (:func:`_shared`): most partitions hold the same few."""
        self.loaded = False
        """True when the entries came from a readable file (else they must be rebuilt)."""

    @property
    def path(self) -> str:
        return posixpath.join(self.dir_path, LEADER_EPOCH_CHECKPOINT)

    def load(self) -> None:
        try:
            data = self.fs.read_file(self.path)
        except FileNotFoundError:
            return
        self.load_bytes(data)

    def load_bytes(self, data: bytes | None) -> None:
        """:meth:`load` from the file's bytes read elsewhere (None: no file)."""
        if data is None:
            return
        try:
            entries = _parsed(data)
        except CheckpointFormatError:
            return
        self._epochs = _shared(tuple(e for e, _ in entries))
        self._starts = _shared(tuple(s for _, s in entries))
        self.loaded = True

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Note that ``epoch`` wrote its first record at ``start_offset``, and write
        the file if that added an entry or one :meth:`note` added is not written
        yet. Adds nothing unless ``epoch`` is newer than every entry; returns
        whether it added one."""
        added = self.note(epoch, start_offset)
        if added or self.unwritten:
            self._write()
        return added

    def note(self, epoch: int, start_offset: int) -> bool:
        """:meth:`assign` without writing the file (whether it was added): a new
        leader's epoch, noted
        before its first append so that a follower asking for the epoch's end
        finds it. The file gets it with the first append in the epoch
        (:meth:`assign`) or any other change; an epoch in which nothing was
        appended before a crash is missing from the file after it, which no
        replica can tell from an epoch never held (none of them has a batch of
        it). A restart whose re-election gives a broker back thousands of
        partitions writes no file for them until they are written to."""
        if epoch < 0 or epoch <= self.latest_epoch:
            return False
        if self._starts and start_offset < self._starts[-1]:
            return False
        self._epochs = _shared((*self._epochs, epoch))
        self._starts = _shared((*self._starts, start_offset))
        self.unwritten = True
        return True

    def rebuild_from(self, headers: Iterable[tuple[int, int]]) -> None:
        """Rebuild from the (partitionLeaderEpoch, base offset) of every batch, in
        offset order, and write the file."""
        epochs: list[int] = []
        starts: list[int] = []
        for epoch, base in headers:
            if epoch >= 0 and epoch > (epochs[-1] if epochs else UNDEFINED_EPOCH):
                epochs.append(epoch)
                starts.append(base)
        self._epochs, self._starts = _shared(tuple(epochs)), _shared(tuple(starts))
        # No entries and no file (a new or empty log): nothing to write, and a
        # missing file is rebuilt the same way at the next open (one fsync and
        # a directory sync fewer for every partition created).
        if self._epochs or self.fs.exists(self.path):
            self._write()
        self.loaded = True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(the largest epoch <= ``epoch``, the offset where it ended), as Kafka's
        OffsetsForLeaderEpoch answers; (-1, -1) below the first entry."""
        i = bisect_right(self._epochs, epoch)
        if i == 0:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if i == len(self._epochs):
            return self._epochs[-1], log_end_offset
        return self._epochs[i - 1], self._starts[i]

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was cut at ``end_offset``: drop epochs that start at or after it."""
        keep = len(self._starts)
        while keep and self._starts[keep - 1] >= end_offset:
            keep -= 1
        if keep != len(self._starts):
            self._epochs = _shared(self._epochs[:keep])
            self._starts = _shared(self._starts[:keep])
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: drop epochs wholly below it and move
        the start of the one containing it up to it."""
        i = bisect_right(self._starts, start_offset)
        if i == 0 or (i == 1 and self._starts[0] == start_offset):
            return
        self._epochs = _shared(self._epochs[i - 1:])
        self._starts = _shared((start_offset, *self._starts[i:]))
        self._write()

    def clear(self) -> None:
        if self._epochs:
            self._epochs, self._starts = (), ()
            self._write()

    def _write(self) -> None:
        self.unwritten = False
        if not self.persist:
            return
        pending = getattr(_DEFERRED, "pending", None)
        if pending is not None:
            pending[id(self)] = self
            return
        self.write_now()

    def write_now(self) -> None:
        """Replace the file with the entries (write, fsync, rename, directory sync)."""
        write_atomically(self.fs, self.path, format_epochs(self.entries))


_DEFERRED = threading.local()
"""``pending``: the dict of the :func:`deferred_writes` block running on this
thread. Thread-local, not a context variable: a task created inside the
block (a fetcher started by the leadership change) would carry a context
variable's value on after the block, and its writes would never be made."""


@contextlib.contextmanager
def deferred_writes() -> Iterator[dict[int, LeaderEpochCache]]:
    """Within the block (on this thread, while it runs), a cache that changes records
    itself in the yielded dict instead of writing its file; the caller writes
    them all (:meth:`LeaderEpochCache.write_now`, on threads if it likes) before
    anything can be appended in the epochs they note, as Kafka's ``assign``
    flushes before the leader's first append. Used where many partitions change
    leader at once (a metadata change, a restart's re-election), whose writes
    then wait together instead of one after another."""
    pending: dict[int, LeaderEpochCache] = {}
    outer = getattr(_DEFERRED, "pending", None)
    _DEFERRED.pending = pending
    try:
        yield pending
    finally:
        _DEFERRED.pending = outer
