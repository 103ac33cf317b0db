"""Turn the suite's measurements into a markdown table and PNG charts.

``Results`` maps section -> config -> target -> list of values (one per run).
Tables show the median with min-max for every target, and the ratios of
Odradek to each baseline; charts are drawn with matplotlib's Agg backend.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

TARGETS = ("odradek", "mock", "redis", "nats", "baseline")
LABEL = {"odradek": "Odradek", "mock": "librdkafka mock", "redis": "Redis Streams",
         "nats": "NATS JetStream", "baseline": "Spark alone"}


class Results:
    def __init__(self) -> None:
        self.data: dict[str, dict[str, dict[str, list[float]]]] = defaultdict(
            lambda: defaultdict(lambda: defaultdict(list)))
        self.units: dict[str, str] = {}
        self.higher_is_better: dict[str, bool] = {}
        self.notes: list[str] = []

    def add(self, section: str, config: str, target: str, value: float, unit: str,
            higher_is_better: bool = True) -> None:
        self.data[section][config][target].append(value)
        self.units[section] = unit
        self.higher_is_better[section] = higher_is_better

    def median(self, section: str, config: str, target: str) -> float | None:
        values = self.data.get(section, {}).get(config, {}).get(target)
        return statistics.median(values) if values else None

    def to_json(self) -> dict[str, Any]:
        return {"sections": {s: {c: dict(t) for c, t in cs.items()}
                             for s, cs in self.data.items()},
                "units": self.units, "notes": self.notes}


def _fmt(v: float) -> str:
    if v >= 100_000:
        return f"{v / 1000:.0f}k"
    if v >= 1000:
        return f"{v / 1000:.1f}k"
    if v >= 10:
        return f"{v:.0f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def _cell(values: list[float]) -> str:
    if not values:
        return ""
    m = statistics.median(values)
    if len(values) == 1:
        return _fmt(m)
    return f"{_fmt(m)} ({_fmt(min(values))}–{_fmt(max(values))})"


def markdown(results: Results, header: str) -> str:
    out = [header, ""]
    for section, configs in results.data.items():
        present = [t for t in TARGETS if any(t in row for row in configs.values())]
        baselines = [t for t in present if t != "odradek"]
        better = "higher" if results.higher_is_better[section] else "lower"
        out.append(f"### {section} ({results.units[section]}, {better} is better)")
        out.append("")
        cols = ["config", *[LABEL[t] for t in present],
                *[f"Odradek / {LABEL[t]}" for t in baselines if "odradek" in present]]
        out.append("| " + " | ".join(cols) + " |")
        out.append("|" + "---|" * len(cols))
        for config, row in configs.items():
            cells = [config, *[_cell(row.get(t, [])) for t in present]]
            if "odradek" in present:
                for t in baselines:
                    o, b = row.get("odradek"), row.get(t)
                    cells.append(f"{statistics.median(o) / statistics.median(b):.2f}"
                                 if o and b and statistics.median(b) else "")
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    out.extend(f"- {n}" for n in results.notes)
    return "\n".join(out) + "\n"


def charts(results: Results, folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for section in results.data:
        configs = results.data[section]
        present = [t for t in TARGETS if any(t in row for row in configs.values())]
        if len(configs) < 1 or not present:
            continue
        fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(configs) + 2), 4.2))
        width = 0.8 / len(present)
        for i, target in enumerate(present):
            xs, ys, lo, hi = [], [], [], []
            for j, row in enumerate(configs.values()):
                values = row.get(target)
                if not values:
                    continue
                m = statistics.median(values)
                xs.append(j + i * width)
                ys.append(m)
                lo.append(m - min(values))
                hi.append(max(values) - m)
            ax.bar(xs, ys, width, yerr=[lo, hi], label=LABEL[target], capsize=2)
        ax.set_xticks([j + width * (len(present) - 1) / 2 for j in range(len(configs))])
        ax.set_xticklabels(list(configs), rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(results.units[section])
        ax.set_title(section)
        if results.units[section] in ("ms",):
            ax.set_yscale("log")
        ax.legend(fontsize=8)
        fig.tight_layout()
        name = "".join(c if c.isalnum() else "-" for c in section.lower()).strip("-")
        path = folder / f"{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def write(results: Results, folder: Path, header: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    text = markdown(results, header)
    (folder / "results.md").write_text(text)
    (folder / "results.json").write_text(json.dumps(results.to_json(), indent=1))
    pngs = charts(results, folder)
    text += "\n" + "\n".join(f"![{p.stem}]({p.name})" for p in pngs) + "\n"
    (folder / "results.md").write_text(text)
    return text
