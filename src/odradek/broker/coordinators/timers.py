"""A coordinator's timer table: keyed callbacks at deadlines, one task.

A shard (or the shell around it) asks :meth:`Timers.schedule` for a callback
at a deadline on the injected clock (``clock.now_ms()``, the time its state
machine computes deadlines in); :meth:`Timers.run` is the one task that sleeps
until the earliest deadline and starts every callback due.

Invariants:

* one entry per key: scheduling a key already due at or before the new
  deadline keeps the earlier one (a timer that fires early finds nothing to
  do and asks again), a later one is moved forward;
* a callback runs as its own task (``spawn``), so a slow one (a write waiting
  for its commit) delays no other timer; a periodic job re-arms itself when
  it is done, so two passes of it never overlap;
* time is read only from the clock: with a
  :class:`~odradek.common.clock.ManualClock` nothing fires until the clock is
  advanced and :meth:`Timers.wake` is called (tests).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from odradek.broker.aio import wait_event
from odradek.common.clock import Clock

Fire = Callable[[], Coroutine[Any, Any, None]]
"""A timer's callback: a coroutine function, run as a task when it is due."""

IDLE_S = 3600.0
"""How long the task sleeps with nothing scheduled (woken by :meth:`Timers.schedule`)."""


class Timers:
    def __init__(self, clock: Clock,
                 spawn: Callable[[Coroutine[Any, Any, None]], object]) -> None:
        self.clock = clock
        self._spawn = spawn
        self._due: dict[str, tuple[int, Fire]] = {}
        self._wake = asyncio.Event()

    def schedule(self, key: str, deadline_ms: int, fire: Fire) -> None:
        """Call ``fire`` at ``deadline_ms``, unless ``key`` is already due no later."""
        current = self._due.get(key)
        if current is not None and current[0] <= deadline_ms:
            return
        self._due[key] = (deadline_ms, fire)
        self._wake.set()

    def cancel(self, key: str) -> None:
        self._due.pop(key, None)

    def deadline(self, key: str) -> int | None:
        entry = self._due.get(key)
        return entry[0] if entry is not None else None

    def wake(self) -> None:
        """Look at the clock now (after a :class:`ManualClock` moved)."""
        self._wake.set()

    def fire_due(self) -> int:
        """Start every callback due by now; how many."""
        now = self.clock.now_ms()
        due = [(at, key) for key, (at, _) in self._due.items() if at <= now]
        for _, key in sorted(due):
            _, fire = self._due.pop(key)
            self._spawn(fire())
        return len(due)

    async def run(self) -> None:
        """The timer task: fire what is due, sleep until the next deadline (or a wake)."""
        while True:
            self._wake.clear()
            self.fire_due()
            nxt = min((at for at, _ in self._due.values()), default=None)
            # (+1 ms: the loop's timers may fire a little early; see fire_due)
            delay_s = IDLE_S if nxt is None else max(
                0.0, (nxt - self.clock.now_ms()) / 1000) + 0.001
            await wait_event(self._wake, delay_s)
