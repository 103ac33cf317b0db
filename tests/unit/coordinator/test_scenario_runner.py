"""The generic scenario runner (tests/support/scenarios.py) with a toy command
set: parsing, comparing, the failure report and ODRADEK_REWRITE. (Here until
tests/unit has a home for tests of tests/support.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import scenarios
from tests.support.scenarios import Command, CommandSet


class Counter(CommandSet):
    def __init__(self) -> None:
        self.n = 0

    def cmd_add(self, cmd: Command) -> None:
        for word in cmd.pos:
            self.n += int(word)
        self.emit(f"n={self.n} by={cmd.kw.get('by', '-')}")

    def cmd_quiet(self, cmd: Command) -> None:
        pass


GOOD = """# a comment
> add 1 2 by=me
n=3 by=me

> quiet
> add 4 t:0=1
n=7 by=-
"""


def test_parse_command_splits_words_positions_and_keywords() -> None:
    c = scenarios.parse_command("commit g 'a b' gen=3 t:0=5")
    assert (c.name, c.pos, c.kw) == ("commit", ["g", "a b"], {"gen": "3"})
    assert c.args == ["g", "a b", "gen=3", "t:0=5"]


def test_a_scenario_that_reproduces_itself_passes(tmp_path: Path) -> None:
    path = tmp_path / "good.txt"
    path.write_text(GOOD)
    scenarios.check(path, Counter())
    items, stray = scenarios.parse(GOOD)
    steps = [i for i in items if isinstance(i, scenarios.Step)]
    assert [(s.command, s.lineno, s.expected) for s in steps] == [
        ("add 1 2 by=me", 2, ["n=3 by=me"]), ("quiet", 5, []), ("add 4 t:0=1", 6, ["n=7 by=-"]),
    ]
    assert stray == []


def test_a_differing_trace_names_the_first_differing_command(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(GOOD.replace("n=7", "n=8"))
    with pytest.raises(AssertionError) as info:
        scenarios.check(path, Counter())
    report = str(info.value)
    assert "first at line 6: > add 4 t:0=1" in report
    assert "    n=8 by=-" in report and "    n=7 by=-" in report
    assert "-n=8 by=-" in report and "+n=7 by=-" in report


def test_output_after_no_command_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "stray.txt"
    path.write_text("stray\n" + GOOD)
    with pytest.raises(AssertionError, match=r"after no command: lines \[1\]"):
        scenarios.check(path, Counter())


def test_rewrite_writes_the_produced_traces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "old.txt"
    path.write_text("> add 1\nstale\nn=0 by=-\n# kept\n> quiet\nstale too\n")
    monkeypatch.setenv(scenarios.REWRITE_ENV, "1")
    scenarios.check(path, Counter())
    assert path.read_text() == "> add 1\nn=1 by=-\n# kept\n> quiet\n"


def test_a_failing_command_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "unknown.txt"
    path.write_text("> add 1\nn=1 by=-\n> nope\n")
    with pytest.raises(ValueError, match="unknown command 'nope'") as info:
        scenarios.check(path, Counter())
    assert "unknown.txt:3: > nope" in info.value.__notes__
