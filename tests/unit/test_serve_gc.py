"""``odradek serve`` starts with cyclic collection paused, then freezes what the
start made (left out of later collections); the collector's state is restored."""

from __future__ import annotations

import contextlib
import gc
import weakref

from odradek.cli.serve import gc_paused


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


def test_the_start_runs_uncollected_and_what_it_made_is_frozen() -> None:
    assert gc.isenabled()
    gc.unfreeze()
    try:
        with gc_paused():
            assert not gc.isenabled()
            kept = [Node() for _ in range(1000)]
        assert gc.isenabled()
        assert gc.get_freeze_count() >= len(kept)
        # In no generation (frozen), so no collection walks it.
        assert not any(o is kept[0] for g in range(3) for o in gc.get_objects(g))
    finally:
        gc.unfreeze()


def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.unfreeze()
        gc.enable()


def test_a_cluster_node_collects_once_when_in_service() -> None:
    """After its start, a cluster node keeps collection paused until it is in
    service, then collects once (the cycles made meanwhile are freed) and
    freezes what is left; a timeout or a cancel ends the pause the same way."""
    import asyncio

    from odradek.cli.serve import collect_once_in_service

    async def scenario(outcome: str) -> None:
        ready = asyncio.Event()
        waited: list[float] = []

        async def wait_in_service(timeout_s: float) -> bool:
            waited.append(timeout_s)
            await ready.wait()  # (for a timeout: the time is up)
            return outcome == "ready"

        pause = asyncio.create_task(collect_once_in_service(wait_in_service, 7.0))
        await asyncio.sleep(0)
        assert not gc.isenabled()
        garbage = Node()
        probe = weakref.ref(garbage)
        del garbage
        kept = [Node() for _ in range(100)]
        assert probe() is not None  # a cycle: not collected while paused
        if outcome in ("ready", "timeout"):
            ready.set()
        elif outcome == "cancel":
            pause.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pause
        assert gc.isenabled() and waited == [7.0]
        assert probe() is None  # the one collection freed it
        assert not any(o is kept[0] for g in range(3) for o in gc.get_objects(g))  # frozen

    for outcome in ("ready", "timeout", "cancel"):
        gc.unfreeze()
        try:
            asyncio.run(scenario(outcome))
        finally:
            gc.unfreeze()
