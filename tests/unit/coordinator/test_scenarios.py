"""Rebalance scenarios as text: the group command set (commands.py) run by the
generic scenario runner (tests/support/scenarios.py)."""

from __future__ import annotations

from pathlib import Path

from tests.support import scenarios
from tests.unit.coordinator.commands import GroupCommands

SCENARIO_DIR = Path(__file__).parent / "scenarios"


@scenarios.parametrize(SCENARIO_DIR)
def test_scenario(path: Path) -> None:
    scenarios.check(path, GroupCommands())


def test_scenarios_exist() -> None:
    assert len(scenarios.files(SCENARIO_DIR)) >= 8
