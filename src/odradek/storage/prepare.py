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
- the partition directory synced, covering both renames.

The log itself (the first segment and its indexes) is still created by the
open, which now finds the directory and both files and writes neither again;
the segment files' entries are synced by the log's first flush as for any
new segment (the log's directory is marked dirty at open). A directory whose
preparation failed is left to the open, which repeats the work itself and
takes the log offline if the disk fails it again.

Only a directory that does not exist yet is prepared: an existing one (a log
on disk that the broker did not open, a directory moved aside) is the open's
to judge.
"""

from __future__ import annotations

import logging
import posixpath
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from odradek.storage.checkpoint import format_partition_metadata
from odradek.storage.epochs import format_epochs
from odradek.storage.fs import FileSystem
from odradek.storage.names import LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA_FILE, TMP_SUFFIX

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


def prepare_dirs(fs: FileSystem, dirs: Sequence[NewDir], threads: int = THREADS) -> int:
    """Create ``dirs`` (those that do not exist yet) durably, in parallel; the
    number prepared. Failures are logged and left to the open."""
    todo = [d for d in dirs if not fs.exists(d.path)]
    if not todo:
        return 0
    with ThreadPoolExecutor(min(threads, len(todo)),
                            thread_name_prefix="odradek-prepare") as pool:
        done = list(pool.map(lambda d: _prepare(fs, d), todo))
    # Every parent, also of a directory whose files failed: the open finds that
    # directory existing and does not sync its entry again.
    for parent in sorted({posixpath.dirname(d.path) for d in todo}):
        try:
            fs.sync_dir(parent)
        except OSError as e:
            log.warning("syncing %s after creating partition directories: %s", parent, e)
            return 0
    return sum(done)


def _prepare(fs: FileSystem, new: NewDir) -> bool:
    try:
        fs.makedirs(new.path)
        if new.topic_id is not None:
            _write(fs, posixpath.join(new.path, PARTITION_METADATA_FILE),
                   format_partition_metadata(new.topic_id))
        if new.first_epoch is not None:
            _write(fs, posixpath.join(new.path, LEADER_EPOCH_CHECKPOINT),
                   format_epochs([(new.first_epoch, 0)]))
        fs.sync_dir(new.path)
    except OSError as e:
        log.warning("preparing %s: %s (the log's open tries again)", new.path, e)
        return False
    return True


def _write(fs: FileSystem, path: str, data: bytes) -> None:
    """``path`` replaced by ``data``, the file fsynced; its entry is synced with
    the directory."""
    tmp = path + TMP_SUFFIX
    fs.write_file(tmp, data)
    fs.fsync(tmp)
    fs.rename(tmp, path)
