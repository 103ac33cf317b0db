"""Several log directories (``log.dirs``, Kafka's JBOD): what start-up finds in them.

Each directory of ``log.dirs`` is laid out as one log directory (see
:mod:`odradek.storage.manager`): its own checkpoint files, its own
``.kafka_cleanshutdown`` marker, its own ``meta.properties`` (the broker's,
with the directory's ``directory.id``, KIP-858). A partition lives in exactly
one of them. A new partition goes to the directory holding the fewest
partitions (current and future logs counted, ties broken by the order of
``log.dirs``), as Kafka's ``LogManager.nextLogDirs``.

**Moving a partition between directories** (AlterReplicaLogDirs) goes through
these on-disk states, ``A`` the directory it is in and ``B`` the target; every
rename is followed by a sync of its parent directory, in this order:

====  ===========================================  ===================================
step  on disk                                      what start-up does
====  ===========================================  ===================================
0     ``A/t-0``                                    opens ``A/t-0``
1     ``A/t-0``, ``B/t-0.<id>-future`` (filling)   opens both; the copy resumes from
                                                   the future log's end (a future log
                                                   ahead of the current one, or of
                                                   another topic id, starts over)
2     ``A/t-0.<id2>-delete``, ``B/t-0.<id>-future``  removes the ``-delete`` directory
      (the decision: the future log had every      and renames the future log
      record of ``A/t-0`` when ``A/t-0`` was       ``B/t-0``: the move completes
      renamed)
3     ``A/t-0.<id2>-delete``, ``B/t-0``             removes the ``-delete`` directory
4     ``B/t-0``                                    opens ``B/t-0``
====  ===========================================  ===================================

So a ``-future`` directory with no current log anywhere is a move that had
decided, and only that: deleting a partition (or moving it aside) renames its
future log away first, and a move to a third directory drops the first future
log before creating the next. The future log only ever holds copies of records
of the current log, and is renamed in (step 2) only once it holds all of them,
synced as far as the current log was: whichever of the two start-up keeps, no
acknowledged record is lost.

Refusals (one line each, naming the directories, for the operator): the same
partition as a current log in two directories (Kafka's "Duplicate log
directories found"), or two future logs of one partition.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from odradek.storage.checkpoint import TopicPartition
from odradek.storage.fs import FileSystem
from odradek.storage.names import (
    DELETE_DIR_SUFFIX,
    parse_future_dir_name,
    parse_partition_dir_name,
    partition_dir_name,
)

_log = logging.getLogger("odradek.storage")


class LogDirsError(Exception):
    """What is on disk stops start-up; the message is one line naming the paths and
    the way out."""


@dataclass(slots=True)
class Found:
    """Partition directories found by :func:`scan`, by partition: paths."""

    current: dict[TopicPartition, str] = field(default_factory=dict)
    futures: dict[TopicPartition, str] = field(default_factory=dict)
    promoted: list[str] = field(default_factory=list)
    """Future logs renamed current at start-up (step 2 of a move finished)."""


def scan(fs: FileSystem, dirs: Sequence[str],
         skip: Iterable[TopicPartition] = ()) -> Found:
    """List every log directory: remove ``-delete`` directories, collect current and
    future partition logs (``skip``: partitions another owner keeps), refuse
    duplicates, and finish decided moves (see the module docstring)."""
    skipped = set(skip)
    current: dict[TopicPartition, list[str]] = {}
    futures: dict[TopicPartition, list[str]] = {}
    for directory in dirs:
        for name in sorted(fs.subdirs(directory)):
            path = posixpath.join(directory, name)
            if name.endswith(DELETE_DIR_SUFFIX):
                fs.rmtree(path)
                continue
            tp = parse_partition_dir_name(name)
            if tp is not None:
                if tp not in skipped:
                    current.setdefault(tp, []).append(path)
                continue
            tp = parse_future_dir_name(name)
            if tp is not None and tp not in skipped:
                futures.setdefault(tp, []).append(path)
    for tp, paths in sorted(current.items()):
        if len(paths) > 1:
            raise LogDirsError(
                f"{tp[0]}-{tp[1]} is in two log directories: {paths[0]} and {paths[1]}; keep "
                f"the one you want (move the other out of log.dirs) and start again")
    for tp, paths in sorted(futures.items()):
        if len(paths) > 1:
            raise LogDirsError(
                f"{tp[0]}-{tp[1]} has two future logs: {paths[0]} and {paths[1]}; remove "
                f"one and start again")
    found = Found({tp: p[0] for tp, p in current.items()},
                  {tp: p[0] for tp, p in futures.items()})
    for tp, path in sorted(found.futures.items()):
        if tp in found.current:
            continue
        directory = posixpath.dirname(path)
        target = posixpath.join(directory, partition_dir_name(*tp))
        fs.rename(path, target)
        fs.sync_dir(directory)
        _log.warning("%s-%d: finished moving it to %s (the old log directory's copy was "
                     "already renamed for deletion)", *tp, directory)
        del found.futures[tp]
        found.current[tp] = target
        found.promoted.append(target)
    return found


def choose_dir(dirs: Sequence[str], parents: Iterable[str]) -> str:
    """The directory of ``dirs`` holding the fewest of the logs whose parent
    directories are ``parents`` (ties: the first in ``dirs``)."""
    counts: dict[str, int] = dict.fromkeys(dirs, 0)
    for parent in parents:
        if parent in counts:
            counts[parent] += 1
    return min(dirs, key=lambda d: counts[d])
