"""Making many new partition directories durable at once, on threads.

Opening a new partition's log one at a time (:func:`odradek.storage.loader.open_dir`)
costs, on the thread that opens it, a sync of the log directory for the new
directory's entry, an fsync of ``partition.metadata`` and a sync of the
partition directory for its entry, and for a partition led here at once an
fsync of the ``leader-epoch-checkpoint`` holding its first epoch and another
directory sync. A CreateTopics of a thousand partitions paid those five
waits in a row a thousand times.

:func:`prepare_dirs` writes the same files for a batch of new partitions on a
pool of threads (the waits overlap, and the file system's journal commits
them together), then syncs each log directory once. What it leaves, per
directory, is exactly what the one-at-a-time open would have left, and every
entry is durable when it returns:

- the directory ``<log dir>/<topic>-<partition>``, its entry synced in the log
  directory;
- ``partition.metadata`` naming the topic id (written to ``.tmp``, fsynced,
  renamed: :mod:`odradek.storage.checkpoint`'s format);
- for a partition whose leader epoch ``E`` starts here, ``leader-epoch-checkpoint``
  holding the one entry ``E 0`` (written the same way): the entry the new
  leader notes before its first append, so the open finds it and writes nothing;
- the first segment at offset 0: ``00000000000000000000.log``, ``.index`` and
  ``.timeindex``, all empty (what :meth:`~odradek.storage.segment.Segment.create`
  makes);
- the partition directory synced, covering every entry above.

A prepared directory is therefore a clean empty log, and the log manager opens
it as after a clean shutdown with a recovery point of 0: nothing is written or
read but the two small files. A directory whose preparation failed is left
to the open, which repeats the work itself (as for an unclean start) and
takes the log offline if the disk fails it again.

Only a directory that does not exist yet is prepared: an existing one (a log
on disk that the broker did not open, a directory moved aside) is the open's
to judge.
"""

from __future__ import annotations

import logging
import posixpath
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass

from odradek.storage import batchsync
from odradek.storage.checkpoint import format_partition_metadata, write_atomically
from odradek.storage.epochs import LeaderEpochCache, format_epochs
from odradek.storage.fs import FileSystem
from odradek.storage.names import (
    INDEX_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_SUFFIX,
    PARTITION_METADATA_FILE,
    TIME_INDEX_SUFFIX,
    partition_dir_name,
    segment_path,
)

log = logging.getLogger("odradek.storage")

THREADS = 16
"""Threads writing at once: past ~16 this machine's disk gains nothing."""

MIN_BATCH = 8
"""Fewer new directories than this are left to the open, one at a time."""


@dataclass(frozen=True, slots=True)
class NewDir:
    """A partition directory to create: where, its topic id, and the leader epoch
    that starts at offset 0 in it (None: not led here at creation)."""

    path: str
    topic_id: uuid.UUID | None
    first_epoch: int | None = None


def prepare_pool() -> ThreadPoolExecutor:
    """The threads :func:`prepare_dirs` writes on (kept by the log manager:
    starting 16 threads for every batch cost the loop more than the writes)."""
    return ThreadPoolExecutor(THREADS, thread_name_prefix="odradek-prepare")


def prepare_dirs(fs: FileSystem, dirs: Sequence[NewDir], pool: Executor) -> set[str]:
    """Create ``dirs`` (those that do not exist yet) durably, on ``pool``; the
    paths prepared whole. Failures are logged and left to the open."""
    todo = [d for d in dirs if not fs.exists(d.path)]
    if not todo:
        return set()
    done = list(pool.map(lambda d: _prepare(fs, d), todo))
    # Every parent, also of a directory whose files failed: the open finds that
    # directory existing and does not sync its entry again.
    for parent in sorted({posixpath.dirname(d.path) for d in todo}):
        try:
            fs.sync_dir(parent)
        except OSError as e:
            log.warning("syncing %s after creating partition directories: %s", parent, e)
            return set()
    return {d.path for d, ok in zip(todo, done, strict=True) if ok}


def _prepare(fs: FileSystem, new: NewDir) -> bool:
    try:
        fs.makedirs(new.path)
        if new.topic_id is not None:
            write_atomically(fs, posixpath.join(new.path, PARTITION_METADATA_FILE),
                             format_partition_metadata(new.topic_id), sync_dir=False)
        if new.first_epoch is not None:
            write_atomically(fs, posixpath.join(new.path, LEADER_EPOCH_CHECKPOINT),
                             format_epochs([(new.first_epoch, 0)]), sync_dir=False)
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            fs.write_file(segment_path(new.path, 0, suffix), b"")
        fs.sync_dir(new.path)
    except OSError as e:
        log.warning("preparing %s: %s (the log's open tries again)", new.path, e)
        return False
    return True


def place(todo: Sequence[tuple[tuple[str, int], uuid.UUID | None, int | None]],
          log_dirs: Sequence[str], pinned: Mapping[tuple[str, int], str],
          unpinned_parents: Iterable[str]) -> list[NewDir]:
    """Where each new log of ``todo`` (partition, topic id, first epoch) goes:
    its pinned directory, else the log directory holding the fewest unpinned
    logs (``unpinned_parents``: the parent of each), counting those placed
    before it, as opening them one by one would choose."""
    counts = dict.fromkeys(log_dirs, 0)
    for parent in unpinned_parents:
        if parent in counts:
            counts[parent] += 1
    out: list[NewDir] = []
    for tp, topic_id, epoch in todo:
        directory = pinned.get(tp)
        if directory is None:
            directory = min(log_dirs, key=counts.__getitem__)
            counts[directory] += 1
        out.append(NewDir(posixpath.join(directory, partition_dir_name(*tp)), topic_id, epoch))
    return out


def write_epoch_files(fs: FileSystem, caches: Sequence[LeaderEpochCache], roots: Sequence[str],
                      dirty: Callable[[], int | None], pool: Callable[[], Executor]
                      ) -> dict[int, OSError]:
    """Write the leader-epoch checkpoints of ``caches``, each durable on return:
    with two file-system syncs when there are many and little is dirty
    (:mod:`odradek.storage.batchsync`; ``roots``: the log directories), else
    each on its own, on ``pool``'s threads when there are many. A cache whose
    directory is gone (its log deleted meanwhile) is skipped. The failures, by
    ``id`` of the cache."""
    live = [c for c in caches if fs.exists(c.dir_path)]
    if not live:
        return {}
    if len(live) >= batchsync.MIN_FILES and batchsync.worth_it(len(live), dirty()) and (
            batchsync.replace_all(
                fs, [(c.path, format_epochs(c.entries)) for c in live], roots)):
        return {}

    def write(cache: LeaderEpochCache) -> OSError | None:
        try:
            cache.write_now()
        except OSError as e:
            return e
        return None

    errors = (list(pool().map(write, live)) if len(live) >= MIN_BATCH
              else [write(c) for c in live])
    return {id(c): e for c, e in zip(live, errors, strict=True) if e is not None}
