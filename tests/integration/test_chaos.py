"""The chaos harness end to end (``odradek dev chaos``): one 3-node cluster under
load, each fault kind five times, every check of the history green.

The long runs go through the CLI in a process group of their own with a hard
deadline: a client library call that never returns (librdkafka's close or
``send_offsets_to_transaction`` after a restart) cannot be interrupted from
Python, so an in-process run could outlive pytest's timeout and, with its nodes
still running, the whole suite. On the deadline the group (the harness and its
nodes) is killed and the test fails with the output so far; otherwise the
history the run saved is checked again here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from odradek.testing.chaos import KINDS, schedule
from odradek.testing.chaos_model import RESTART_KINDS, History, check_history, load_history

pytestmark = pytest.mark.timeout(420)

SEED = int(os.environ.get("ODRADEK_CHAOS_SEED", "20251125"))


def test_the_same_seed_gives_the_same_schedule() -> None:
    assert schedule(7, 5) == schedule(7, 5)
    assert schedule(7, 5) != schedule(8, 5)
    kinds = [f.kind for f in schedule(7, 5)]
    assert sorted(kinds) == sorted(k for k in KINDS for _ in range(5))
    # pause and isolate outlast the broker session (3 s), so the node is fenced
    assert all(f.hold_s > 3 for f in schedule(7, 5) if f.kind in ("pause", "isolate"))


def run_chaos(directory: Path, *args: str, deadline_s: float) -> tuple[History, str]:
    """``odradek dev chaos ARGS --dir DIRECTORY`` in its own process group, killed
    whole at ``deadline_s``; asserts it passed and returns its saved history and
    its output."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "odradek", "dev", "chaos", *args, "--dir", str(directory)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"the chaos run passed its {deadline_s:.0f} s deadline:\n{out[-6000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    print(out[-6000:])
    print(f"test runtime {time.monotonic() - t0:.0f} s")
    assert proc.returncode == 0, out[-6000:]
    assert "result: every check passed" in out
    history = load_history(directory / "history.pickle")
    failed = [c for c in check_history(history) if not c.ok]
    assert not failed, failed
    return history, out


def test_every_fault_five_times_and_every_check_holds(tmp_path: Path) -> None:
    history, _ = run_chaos(tmp_path / "cluster", "--seed", str(SEED), "--rounds", "5",
                           deadline_s=360)
    kinds = {k: sum(f.fault.kind == k for f in history.faults) for k in KINDS}
    assert kinds == dict.fromkeys(KINDS, 5)
    assert len(history.acked) > 1000


def test_the_cli_refuses_bad_arguments_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("x")
    for args, message in ((["--faults", "kill,flood"], "unknown fault 'flood'"),
                          (["--rounds", "0"], "--rounds must be at least 1"),
                          (["--max-in-flight", "6"], "--max-in-flight must be between"),
                          (["--dir", str(tmp_path / "busy")], "not an empty directory")):
        done = subprocess.run([sys.executable, "-m", "odradek", "dev", "chaos", *args],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 1, done
        assert message in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_the_cli_runs_a_short_schedule_and_prints_the_report(tmp_path: Path) -> None:
    history, out = run_chaos(tmp_path / "cli", "--seed", "5", "--rounds", "1",
                             "--faults", "kill", deadline_s=300)
    assert out.startswith("seed 5\n")
    assert "kill 1" in out and [f.fault.kind for f in history.faults] == ["kill"]


def test_restarts_lose_nothing(tmp_path: Path) -> None:
    """Issue 40's restart matrix, one round of each kind: every node stopped
    cleanly and started, every node killed (-9) and started, a rolling
    restart, the active controller killed with another node, and a node whose
    data directory was wiped and formatted again. Every check of the history
    holds: no acknowledged record or committed offset lost, no duplicate, no
    directory moved aside, every committed transaction whole and no aborted
    record visible; the report gives each fault's time to recovery.
    (``odradek dev chaos --faults restart,restart9,rolling,ctlbroker,wipe
    --rounds 20`` is the full matrix.)"""
    # One request in flight per connection: librdkafka's epoch bump on an
    # OUT_OF_ORDER answer to a pipelined request renumbers records that may be
    # written already (the restart matrix found 2 duplicates in 100 faults
    # before the broker stopped causing the one such answer seen,
    # docs/durability.md); a client race like it must not fail this test at
    # random. The broker's own part, deduplicating retries, is what it checks.
    history, _ = run_chaos(tmp_path / "cluster", "--seed", str(SEED), "--rounds", "1",
                           "--faults", ",".join(RESTART_KINDS), "--max-in-flight", "1",
                           deadline_s=360)
    assert sorted(f.fault.kind for f in history.faults) == sorted(RESTART_KINDS)
    assert history.txn_committed and len(history.acked) > 1000
