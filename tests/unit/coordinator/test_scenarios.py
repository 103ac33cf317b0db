"""Rebalance scenarios as text (see harness.py for the command language)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.unit.coordinator.harness import Harness

SCENARIOS = sorted((Path(__file__).parent / "scenarios").glob("*.txt"))


def run_scenario(text: str) -> str:
    """The file with every command's trace replaced by what the coordinator does."""
    harness = Harness()
    out: list[str] = []
    for line in text.splitlines():
        if line.startswith("> "):
            out.append(line)
            out.extend(harness.run(line[2:]))
        elif line.startswith("#") or not line.strip():
            out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path) -> None:
    text = path.read_text()
    produced = run_scenario(text)
    if os.environ.get("ODRADEK_REWRITE") == "1":
        path.write_text(produced)
        return
    assert produced == text, f"{path.name}: the trace differs (ODRADEK_REWRITE=1 rewrites)"


def test_scenarios_exist() -> None:
    assert len(SCENARIOS) >= 8
