"""``odradek serve`` starts with cyclic collection paused, then freezes what the
start made (left out of later collections); the collector's state is restored."""

from __future__ import annotations

import gc

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
