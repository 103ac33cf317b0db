"""Injected identifiers.

Topic ids, member ids, incarnation ids and the suffixes of moved-aside
directories come from an :class:`Ids` source instead of ``uuid.uuid4()``, so a
simulation with a seed names everything the same way on every run.
"""

from __future__ import annotations

import random
import uuid
from typing import Protocol


class Ids(Protocol):
    def uuid(self) -> uuid.UUID:
        """A fresh version-4 UUID, never the zero UUID."""
        ...


class RandomIds:
    """Ids from the operating system's randomness (a running broker)."""

    def uuid(self) -> uuid.UUID:
        return uuid.uuid4()


class SeededIds:
    """Ids from a seeded generator: the same seed gives the same sequence."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def uuid(self) -> uuid.UUID:
        while True:
            value = uuid.UUID(int=self._rng.getrandbits(128), version=4)
            if value.int:
                return value
