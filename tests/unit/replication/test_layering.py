"""Nothing outside the partition layer appends to a log or moves its high watermark.

import-linter keeps ``odradek.storage.log`` out of every module but the partition
layer (pyproject.toml); this test covers what imports cannot show: calls made on
a log object reached through an attribute (``part.log.append(...)``).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src" / "odradek"
# The partition layer: the state machine, its follower side (replication/follower.py:
# a follower's appends and truncation), and the future replica it owns (the copy
# of its log being filled in another log directory).
OWNERS = {SRC / "replication" / "partition.py", SRC / "replication" / "follower.py",
          SRC / "replication" / "future.py"}
LOG_MUTATORS = {
    "advance_high_watermark", "append_replicated", "truncate_to",
    "truncate_fully_and_start_at", "delete_records_before",
}


def _calls_on_a_log(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name, target = node.func.attr, node.func.value
        target_name = (target.attr if isinstance(target, ast.Attribute)
                       else target.id if isinstance(target, ast.Name) else "")
        if name in LOG_MUTATORS or (name == "append" and target_name.endswith("log")):
            found.append((node.lineno, f"{target_name}.{name}"))
    return found


def test_only_the_partition_state_machine_mutates_a_log() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        # raft/ appends to and truncates its own log (the metadata quorum's,
        # odradek.raft.log), never a partition's.
        if path in OWNERS or (SRC / "storage") in path.parents or (SRC / "raft") in path.parents:
            continue
        for line, call in _calls_on_a_log(ast.parse(path.read_text(), str(path))):
            offenders.append(f"{path.relative_to(SRC)}:{line}: {call}")
    assert offenders == []


def test_the_check_sees_a_mutation() -> None:
    tree = ast.parse("part.log.append(b'x')\nplog.advance_high_watermark(3)\nxs.append(1)\n")
    assert [c for _, c in _calls_on_a_log(tree)] == ["log.append",
                                                      "plog.advance_high_watermark"]
