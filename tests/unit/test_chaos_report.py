"""The chaos run's report prints a node's traceback whole (testing/chaos_model.py):
the check's own line shows a few hundred characters, and a failed run's node
logs may be gone before anyone reads them."""

from __future__ import annotations

from pathlib import Path

from odradek.testing.chaos_model import ChaosReport, History, check_history


def test_a_traceback_in_a_node_log_fails_check_g_and_is_printed_whole() -> None:
    history = History()
    frames = "\n".join(f'  File "/src/odradek/x{i}.py", line {i}, in f{i}' for i in range(40))
    history.tracebacks[2] = (f"INFO before\nTraceback (most recent call last):\n{frames}\n"
                             "ValueError: boom")
    checks = check_history(history)
    (g,) = [c for c in checks if c.name.startswith("(g)")]
    assert not g.ok
    text = ChaosReport(7, history, checks, 1.0, Path("/tmp/x")).format()
    assert "node 2's log around its first traceback:" in text
    assert '  |   File "/src/odradek/x39.py", line 39, in f39' in text
    assert "  | ValueError: boom" in text
    assert text.rstrip().endswith("(seed 7)")
