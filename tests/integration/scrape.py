"""Series read back from a broker's rendered metrics registry (Prometheus text)."""

from __future__ import annotations

import re

from odradek.testing.broker import Broker

LINE = re.compile(r'^(\w+)\{([^}]*)\} (-?[0-9.e+]+)$')
LABEL = re.compile(r'(\w+)="([^"]*)"')


def series(broker: Broker, name: str) -> dict[tuple[str, ...], float]:
    """{label values, in order: value} of the family ``name``, rendered now."""
    out: dict[tuple[str, ...], float] = {}
    for line in broker.render_metrics().splitlines():
        m = LINE.match(line)
        if m and m.group(1) == name:
            out[tuple(v for _, v in LABEL.findall(m.group(2)))] = float(m.group(3))
    return out


def scalar(broker: Broker, name: str) -> float:
    """The value of ``name``, a family without labels."""
    for line in broker.render_metrics().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not rendered")
