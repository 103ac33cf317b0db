"""Future logs: the copies through which a partition moves between log directories.

A move (AlterReplicaLogDirs) fills a ``<topic>-<partition>.<hex>-future`` log
in the target directory, then renames it in; the on-disk states, and what
start-up makes of each, are in :mod:`odradek.storage.logdirs`. This module
holds the two file-level steps the log manager takes on the event loop:

* :func:`open_future_log` (step 1): an empty future log with the current
  log's config, topic id and log start offset, opened through a handle cache
  of its own (:data:`FUTURE_HANDLES` files): the mover fills it on a worker
  thread, not through the cache the loop serves.
* :func:`swap_in_future` (steps 2 and 3): the current log is closed and
  renamed ``...-delete`` (the decision, synced), then the future log's
  directory is renamed ``<topic>-<partition>`` (synced) and its files are
  reached through the shared handle cache from then on.

Which log is current and which is future, and the checkpoints naming them,
stay with :class:`odradek.storage.manager.LogManager`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from typing import Final

from odradek.common import crashpoints
from odradek.common.clock import Clock
from odradek.common.ids import Ids
from odradek.storage.fs import FileSystem
from odradek.storage.handles import HandleCache
from odradek.storage.log import Log
from odradek.storage.names import future_dir_name, partition_dir_name

FUTURE_HANDLES: Final = 16
"""Files a future log keeps open (its own handle cache)."""


def open_future_log(fs: FileSystem, clock: Clock, ids: Ids, current: Log, directory: str, *,
                    skip_damage: bool) -> Log:
    """An empty future log of ``current``'s partition in ``directory``."""
    path = posixpath.join(directory, future_dir_name(current.topic, current.partition,
                                                     ids.uuid()))
    return Log.open(fs, path, current.config, clock,
                    handles=HandleCache(fs, FUTURE_HANDLES), topic_id=current.topic_id,
                    log_start_offset=current.log_start_offset, skip_damage=skip_damage)


def swap_in_future(fs: FileSystem, old: Log, new: Log, handles: HandleCache,
                   rename_for_deletion: Callable[[Log], None]) -> None:
    """Close ``old`` and have ``rename_for_deletion`` rename it ``...-delete`` (the
    decision), then rename ``new`` in as the partition's directory, its files
    now opened through ``handles``."""
    parent = new.parent_dir
    old.attach(None)  # its producer snapshot would go to the -delete dir
    old.close()
    rename_for_deletion(old)  # the decision (synced)
    crashpoints.reach("logdir.after_decide")
    target = posixpath.join(parent, partition_dir_name(new.topic, new.partition))
    fs.rename(new.dir_path, target)
    fs.sync_dir(parent)
    crashpoints.reach("logdir.after_rename")
    private = new.handles
    new.relocate(target, handles)
    private.close_all()
