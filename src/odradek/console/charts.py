"""Inline SVG line charts: points scaled into a fixed box, drawn by the
``chart`` macro of ``templates/_macros.html`` (no script, no library)."""

from __future__ import annotations

import time
from dataclasses import dataclass

WIDTH, HEIGHT, PAD = 600, 160, 4


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    points: str
    """The SVG polyline's ``points`` ("x,y x,y ..."); empty: nothing to draw yet."""
    latest: str
    peak: str
    span: str
    """How much time the chart covers, for its caption."""
    width: int = WIDTH
    height: int = HEIGHT
    others: tuple[tuple[str, str], ...] = ()
    """(label, points) of further series drawn in the same box and scale."""


def _fmt(value: float) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.1f}{unit}"
    return f"{value:.0f}" if value == int(value) else f"{value:.2f}"


def line_chart(title: str, series: list[tuple[float, float]],
               others: dict[str, list[tuple[float, float]]] | None = None) -> Chart:
    """``series``: (unix time, value) oldest first; ``others``: more series by
    label (e.g. each partition's lag under the total), scaled alike."""
    if not series:
        return Chart(title, "", "-", "-", "no samples yet")
    t0, t1 = series[0][0], series[-1][0]
    top = max(v for s in (series, *(others or {}).values()) for _, v in s) or 1.0
    dt = (t1 - t0) or 1.0

    def points(data: list[tuple[float, float]]) -> str:
        pts = [f"{PAD + (t - t0) / dt * (WIDTH - 2 * PAD):.1f},"
               f"{HEIGHT - PAD - v / top * (HEIGHT - 2 * PAD):.1f}" for t, v in data]
        if len(pts) == 1:
            y = pts[0].split(",")[1]
            pts = [f"{PAD},{y}", f"{WIDTH - PAD},{y}"]
        return " ".join(pts)

    span = f"last {int(t1 - t0)} s, {len(series)} samples, to " + time.strftime(
        "%H:%M:%S", time.localtime(t1))
    return Chart(title, points(series), _fmt(series[-1][1]), _fmt(max(v for _, v in series)),
                 span, others=tuple((label, points(data))
                                    for label, data in (others or {}).items() if data))
