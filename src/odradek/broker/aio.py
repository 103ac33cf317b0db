"""asyncio helpers that keep a stopping broker from hanging on Python 3.11.

On 3.11, ``asyncio.wait_for(aw, timeout)`` returns the inner result and drops
a cancellation that arrives just as ``aw`` finishes (CPython gh-86296, fixed
in 3.12). A background loop such as ``while True: await wait_for(event.wait(),
t)`` then runs on after ``task.cancel()``, and ``await task`` never returns:
a node took 20 s to stop (killed by the test harness) when its Raft driver's
wake-up event was set in the same loop iteration as its cancellation.

Two rules follow: loops wait on events with :func:`wait_event` (built on
``asyncio.wait``, which never drops a cancellation), and tasks are stopped
with :func:`cancel_and_wait`, which cancels again while a task runs on.
"""

from __future__ import annotations

import asyncio
from typing import Any

RECANCEL_S = 1.0
"""How long a cancelled task may run on before it is cancelled again. Long
enough for a task's own clean-up (closing a connection) to finish first."""


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait until ``event`` is set or ``timeout_s`` has passed; True if it is set.
    A cancellation of the caller is always raised, never dropped."""
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait((waiter,), timeout=timeout_s)
    finally:
        waiter.cancel()
    return event.is_set()


async def cancel_and_wait(*tasks: asyncio.Future[Any] | None) -> None:
    """Cancel ``tasks`` (None entries are skipped) and wait until every one has
    ended, cancelling again each :data:`RECANCEL_S` one runs on. Their results
    and exceptions are dropped; the caller's own cancellation is raised."""
    pending = {t for t in tasks if t is not None and not t.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=RECANCEL_S)
    for ended in tasks:
        if ended is not None and ended.done() and not ended.cancelled():
            ended.exception()  # retrieved, so asyncio does not log it as never retrieved
