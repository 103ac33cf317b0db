"""Text scenarios: tests written as commands and the trace each must produce.

A scenario file is a list of steps. A step is a line starting with ``> `` (the
command) followed by the lines it must output (its trace). Lines starting with
``#`` and blank lines are comments, kept as they are; they end a trace::

    # Two members form a group.
    > join g a
    a <- join OK gen=1 ...

What a command means is not this module's business: a *command set* runs one
command line and returns its output lines (:class:`Runner`). Each subsystem
plugs in its own — the group coordinator's is
``tests/unit/coordinator/commands.py``; Raft, transactions or replication can
add theirs the same way. A command set usually subclasses :class:`CommandSet`,
which parses a line into a :class:`Command` and calls ``cmd_<name>(command)``.

Running a scenario rebuilds the file: every comment and command as it is, each
command followed by what it output now (old trace lines are dropped). The file
passes when the rebuilt text equals it, byte for byte. Set
``ODRADEK_REWRITE=1`` to write the rebuilt text back instead of comparing
(then review the diff). One command set instance runs a whole file, in order,
so state carries from step to step.

A test module needs only::

    @scenarios.parametrize(Path(__file__).parent / "scenarios")
    def test_scenario(path: Path) -> None:
        scenarios.check(path, MyCommands())
"""

from __future__ import annotations

import difflib
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest

REWRITE_ENV = "ODRADEK_REWRITE"
"""Set to ``1`` to rewrite scenario files with the traces produced."""

COMMAND_PREFIX = "> "


class Runner(Protocol):
    """A command set: runs one command line (without ``> ``), returns its output."""

    def run(self, line: str) -> list[str]: ...


# -- commands ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Command:
    """One command line, split as a shell would (:func:`shlex.split`).

    ``args`` are the words after the name; ``pos`` those without ``=``; ``kw``
    the ``key=value`` words whose key has no ``:`` (a ``topic:0=5`` word is in
    ``args`` only, for commands that take such pairs).
    """

    line: str
    name: str
    args: list[str]
    pos: list[str]
    kw: dict[str, str]


def parse_command(line: str) -> Command:
    words = shlex.split(line)
    if not words:
        raise ValueError("empty command")
    name, args = words[0], words[1:]
    pos = [a for a in args if "=" not in a]
    kw = dict(a.split("=", 1) for a in args if "=" in a and ":" not in a.split("=")[0])
    return Command(line, name, args, pos, kw)


class CommandSet:
    """Base of a command set: ``name args...`` calls ``self.cmd_name(command)``,
    which reports output with :meth:`emit`."""

    out: list[str]

    def run(self, line: str) -> list[str]:
        self.out = []
        command = parse_command(line)
        handler: Callable[[Command], Any] | None = getattr(self, f"cmd_{command.name}", None)
        if handler is None:
            known = sorted(n[4:] for n in dir(self) if n.startswith("cmd_"))
            raise ValueError(f"unknown command {command.name!r} (known: {', '.join(known)})")
        handler(command)
        return self.out

    def emit(self, line: str) -> None:
        self.out.append(line)


# -- the file format -----------------------------------------------------------------------


@dataclass(slots=True)
class Step:
    command: str
    """The command line without ``> ``."""
    lineno: int
    expected: list[str] = field(default_factory=list)


Item = Step | str
"""A step, or a comment or blank line kept verbatim."""


def parse(text: str) -> tuple[list[Item], list[int]]:
    """The steps and comments of a scenario, and the line numbers of output lines
    that follow no command (they are dropped when the file is rebuilt)."""
    items: list[Item] = []
    stray: list[int] = []
    step: Step | None = None
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith(COMMAND_PREFIX):
            step = Step(line[len(COMMAND_PREFIX):], n)
            items.append(step)
        elif line.startswith("#") or not line.strip():
            step = None
            items.append(line)
        elif step is not None:
            step.expected.append(line)
        else:
            stray.append(n)
    return items, stray


def play(items: list[Item], runner: Runner, name: str = "<scenario>") -> list[list[str]]:
    """The output of every step, in order, run by one ``runner``."""
    outputs = []
    for item in items:
        if isinstance(item, Step):
            try:
                outputs.append(runner.run(item.command))
            except Exception as exc:
                exc.add_note(f"{name}:{item.lineno}: {COMMAND_PREFIX}{item.command}")
                raise
    return outputs


def render(items: list[Item], outputs: list[list[str]]) -> str:
    """The scenario text with each step followed by its output."""
    lines: list[str] = []
    produced = iter(outputs)
    for item in items:
        if isinstance(item, Step):
            lines.append(COMMAND_PREFIX + item.command)
            lines.extend(next(produced))
        else:
            lines.append(item)
    return "\n".join(lines) + "\n"


def run_scenario(text: str, runner: Runner, name: str = "<scenario>") -> str:
    """``text`` with every command's trace replaced by what ``runner`` outputs."""
    items, _ = parse(text)
    return render(items, play(items, runner, name))


# -- checking ------------------------------------------------------------------------------


def check(path: Path, runner: Runner) -> None:
    """Run the scenario file at ``path``: fail unless it reproduces itself
    (with ``ODRADEK_REWRITE=1``, write what it produced instead)."""
    text = path.read_text()
    items, stray = parse(text)
    outputs = play(items, runner, path.name)
    produced = render(items, outputs)
    if os.environ.get(REWRITE_ENV) == "1":
        if produced != text:
            path.write_text(produced)
        return
    if produced == text:
        return
    raise AssertionError(_explain(path, text, produced, items, outputs, stray))


def _explain(
    path: Path, text: str, produced: str, items: list[Item], outputs: list[list[str]],
    stray: list[int],
) -> str:
    msg = [f"{path.name}: the trace differs ({REWRITE_ENV}=1 rewrites the file)"]
    steps = [i for i in items if isinstance(i, Step)]
    for step, got in zip(steps, outputs, strict=True):
        if step.expected != got:
            msg.append(f"first at line {step.lineno}: {COMMAND_PREFIX}{step.command}")
            msg += ["  expected:", *_indent(step.expected), "  produced:", *_indent(got)]
            break
    else:
        if stray:
            msg.append(f"output lines after no command: lines {stray}")
    msg += difflib.unified_diff(
        text.splitlines(), produced.splitlines(), "expected", "produced", lineterm=""
    )
    return "\n".join(msg)


def _indent(lines: list[str]) -> list[str]:
    return [f"    {x}" for x in lines] or ["    (nothing)"]


def files(directory: Path, pattern: str = "*.txt") -> list[Path]:
    return sorted(directory.glob(pattern))


def parametrize(directory: Path, pattern: str = "*.txt") -> pytest.MarkDecorator:
    """Parametrize a test's ``path`` argument over the scenario files, named by stem."""
    found = files(directory, pattern)
    return pytest.mark.parametrize("path", found, ids=[p.stem for p in found])
