"""One shared object per distinct value, for values many partitions hold alike.

A broker holding 100k partitions has a handful of distinct replica lists,
ISRs and leader-epoch entries; each partition keeping its own copy cost
hundreds of bytes. An :class:`Interner` hands out one object per key instead.

Invariants: a value handed out is shared, so nobody may change it in place (a
holder replaces it with another interned one). The table is emptied when it
reaches its bound; values handed out before stay valid, they are only shared
less from then on.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

DEFAULT_MAX = 4096


class Interner(Generic[K, V]):
    """``interner(key)``: the one value made of ``key`` (by ``make``) shared by
    every caller with an equal key."""

    __slots__ = ("_make", "_max", "_table")

    def __init__(self, make: Callable[[K], V], max_entries: int = DEFAULT_MAX) -> None:
        self._make = make
        self._max = max_entries
        self._table: dict[K, V] = {}

    def __call__(self, key: K) -> V:
        found = self._table.get(key)
        if found is None:
            if len(self._table) >= self._max:
                self._table.clear()
            self._table[key] = found = self._make(key)
        return found


def _same(value: V) -> V:
    return value


def identity_interner(max_entries: int = DEFAULT_MAX) -> Interner[K, K]:
    """An interner whose shared value is the first key seen (for immutable
    keys: tuples, frozensets)."""
    return Interner(_same, max_entries)
