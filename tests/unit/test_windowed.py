"""Windowed average, maximum and rate (:mod:`odradek.common.windowed`) against a
trivial model: every recording kept with its time, those in the windows still
held (started less than ``num`` windows ago) averaged, maxed and counted."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.common.windowed import Windowed

WINDOW_MS, NUM = 100, 3


def _model_window(events: list[tuple[int, float]], now: int) -> list[float]:
    """The values :class:`Windowed` still holds at ``now``: those in samples that
    started after ``now - NUM * WINDOW_MS`` (a sample starts at the first
    recording at least one window after the previous sample's start)."""
    starts: list[int] = []
    owner: list[int] = []
    for t, _ in events:
        if not starts or t >= starts[-1] + WINDOW_MS:
            starts.append(t)
        owner.append(starts[-1])
    return [v for (_, v), s in zip(events, owner, strict=True) if s > now - NUM * WINDOW_MS]


@given(st.lists(st.tuples(st.integers(0, 150), st.floats(0, 1000)), max_size=40),
       st.integers(0, 400))
def test_avg_max_and_rate_match_a_model(steps: list[tuple[int, float]], wait: int) -> None:
    w = Windowed(WINDOW_MS, NUM)
    now = 0
    events = []
    for gap, value in steps:
        now += gap
        w.record(value, now)
        events.append((now, value))
    now += wait
    held = _model_window(events, now)
    assert w.avg(now) == pytest.approx(sum(held) / len(held) if held else 0.0)
    assert w.max(now) == max(held, default=0.0)
    assert w.total == len(events)
    assert len(w.samples) <= NUM
    if held:
        assert w.rate(now) > 0
    else:
        assert w.rate(now) == 0.0


def test_the_rate_counts_at_least_num_minus_one_windows() -> None:
    w = Windowed(1000, 2)
    for _ in range(10):
        w.record(1, 0)
    assert w.rate(0) == 10.0  # ten in a span counted as one whole second
    assert w.rate(1500) == 10 * 1000 / 1500
    assert w.rate(2000) == 0.0  # the sample started two windows ago: gone
