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
"""

from __future__ import annotations

import os
import signal

_TARGET = os.environ.get("ODRADEK_CRASH_AT", "")


def reach(point: str) -> None:
    if _TARGET and point == _TARGET:
        os.kill(os.getpid(), signal.SIGKILL)
