"""Named points where a crash test has the broker kill itself with SIGKILL.

``ODRADEK_CRASH_AT=<point>`` in the broker's environment makes the first
arrival at :func:`reach` ``(<point>)`` send SIGKILL to the broker's own
process: the same abrupt end as ``kill -9`` from outside, but at an exact step
(between two writes of a transaction, say) that no outside timing can hit
reliably. Without the variable :func:`reach` is one comparison. It lives in
``odradek.common`` so that every layer (storage included) can name points;
``odradek.broker.crashpoints`` re-exports it. Points:

``txn.after_prepare``
    PrepareCommit/PrepareAbort is committed in ``__transaction_state``; no
    marker is written and EndTxn is not answered.
``txn.after_first_marker``
    One partition of the transaction has its marker, the others not.
``txn.before_complete``
    Every marker is written; CompleteCommit/CompleteAbort is not.
``cleaner.after_write``
    A cleaner pass's ``<base>.log.cleaned`` is written and fsynced; the swap
    (:meth:`odradek.storage.log.Log.replace_segments`) has not begun.
``cleaner.after_decide``
    The cleaned file is renamed ``<base>.log.swap`` (the decision, durable);
    the old segments are still live.
``cleaner.after_delete``
    The old segments are renamed ``*.deleted``; the swap file is not yet live.
``cleaner.after_rename``
    The swap file is ``<base>.log``; its indexes are not rebuilt yet.
``logdir.copying``
    A partition moving to another log directory (AlterReplicaLogDirs): a round
    of the copy into its ``-future`` log is appended.
``logdir.before_decide``
    The future log holds every record of the current one; nothing is renamed.
``logdir.after_decide``
    The current log's directory is renamed ``-delete`` (synced); the future
    log is not renamed yet (start-up finishes the move).
``logdir.after_rename``
    The future log is renamed ``<topic>-<partition>`` (synced); the old
    directory still waits for its deletion.

A slow disk, for chaos tests (``odradek dev chaos``): with
``ODRADEK_TEST_FSYNC_DELAY_FILE=<path>`` in the broker's environment, every
fsync of :class:`odradek.storage.fs.OsFileSystem` (files and directories, on
whatever thread runs it) first sleeps for the number of milliseconds written
in that file (:func:`fsync_delay`); a missing, empty or unreadable file means
no delay. The file is read at each fsync, so a test turns the slow disk on and
off while the broker runs, without a restart. Without the variable it is one
comparison.
"""

from __future__ import annotations

import os
import signal
import time

_TARGET = os.environ.get("ODRADEK_CRASH_AT", "")
_FSYNC_DELAY_FILE = os.environ.get("ODRADEK_TEST_FSYNC_DELAY_FILE", "")


def reach(point: str) -> None:
    if _TARGET and point == _TARGET:
        os.kill(os.getpid(), signal.SIGKILL)


def fsync_delay() -> None:
    """Sleep as long as ``ODRADEK_TEST_FSYNC_DELAY_FILE`` says (see above)."""
    if not _FSYNC_DELAY_FILE:
        return
    try:
        with open(_FSYNC_DELAY_FILE, encoding="ascii") as f:
            delay_ms = int(f.read().strip() or "0")
    except (OSError, ValueError):
        return
    if delay_ms > 0:
        time.sleep(delay_ms / 1000)
