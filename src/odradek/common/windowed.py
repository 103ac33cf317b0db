"""Average and maximum over time windows, as Kafka's ``Avg`` and ``Max``
``SampledStat`` s measure (``metrics.sample.window.ms`` = 30 s,
``metrics.num.samples`` = 2 by default).

A :class:`Windowed` keeps at most ``num`` samples, each ``[start_ms, count,
sum, max]``; a sample ends ``window_ms`` after it starts, and samples that
started ``num * window_ms`` or more ago are dropped when recorded or read. So
what is read covers between ``(num - 1) * window_ms`` and ``num * window_ms``
of the past, and memory stays bounded however often it is recorded. With
nothing in the windows, :meth:`Windowed.avg` and :meth:`Windowed.max` are 0
(Kafka's are NaN; a gauge at 0 reads better on a dashboard and is what a
quiet sensor means). Pure: ``now_ms`` is passed in.
"""

from __future__ import annotations

from collections import deque

KAFKA_WINDOW_MS = 30_000
KAFKA_NUM_SAMPLES = 2


class Windowed:
    """Count, sum and maximum of recorded values over the last windows."""

    __slots__ = ("num", "samples", "total", "window_ms")

    def __init__(self, window_ms: int = KAFKA_WINDOW_MS, num: int = KAFKA_NUM_SAMPLES) -> None:
        self.window_ms = window_ms
        self.num = num
        self.samples: deque[list[float]] = deque()
        self.total = 0
        """Values ever recorded (not windowed)."""

    def record(self, value: float, now_ms: float) -> None:
        self._purge(now_ms)
        samples = self.samples
        if not samples or now_ms >= samples[-1][0] + self.window_ms:
            samples.append([now_ms, 0.0, 0.0, value])
        sample = samples[-1]
        sample[1] += 1
        sample[2] += value
        sample[3] = max(sample[3], value)
        self.total += 1

    def _purge(self, now_ms: float) -> None:
        horizon = now_ms - self.num * self.window_ms
        samples = self.samples
        while samples and samples[0][0] <= horizon:
            samples.popleft()

    def avg(self, now_ms: float) -> float:
        self._purge(now_ms)
        count = sum(s[1] for s in self.samples)
        return sum(s[2] for s in self.samples) / count if count else 0.0

    def max(self, now_ms: float) -> float:
        self._purge(now_ms)
        return max((s[3] for s in self.samples), default=0.0)

    def rate(self, now_ms: float) -> float:
        """Recordings per second over the windows (the span counted as at least
        ``num - 1`` whole windows, as Kafka's ``Rate`` does)."""
        self._purge(now_ms)
        if not self.samples:
            return 0.0
        span = max(now_ms - self.samples[0][0], (self.num - 1) * self.window_ms, 1.0)
        return sum(s[1] for s in self.samples) * 1000 / span
