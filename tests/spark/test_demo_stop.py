"""``python pipelines/demo.py`` stops cleanly: on Ctrl-C (SIGINT to the whole
foreground process group, as a terminal sends it) within seconds, with results
printed and no stack trace, Java exception or librdkafka error line (before:
25 s and 576 lines of py4j tracebacks on Ctrl-C, a TaskKilledException at
every normal stop). ``--seconds`` ends through the same path (the stop event:
Spark's queries between two batches, then the clients, then the broker), so
one run covers both."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[2] / "pipelines" / "demo.py"
NOISE = ("Traceback", "Exception", "|FAIL|", "ERROR", "py4j")

pytestmark = [pytest.mark.timeout(300), pytest.mark.timing]


def start(*args: str) -> subprocess.Popen[str]:
    # its own process group, as a shell's foreground job is
    return subprocess.Popen([sys.executable, str(DEMO), "logs", "--rate", "200", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def read_until(proc: subprocess.Popen[str], marker: str, timeout_s: float) -> list[str]:
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    os.set_blocking(proc.stdout.fileno(), False)
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line:
            lines.append(line)
            if marker in line:
                return lines
        elif proc.poll() is not None:
            break
        else:
            time.sleep(0.05)
    raise AssertionError(f"{marker!r} not seen in {timeout_s} s:\n{''.join(lines)[-3000:]}")


def finish(proc: subprocess.Popen[str], timeout_s: float) -> str:
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), True)
    out, _ = proc.communicate(timeout=timeout_s)
    return out


def test_ctrl_c_stops_everything_in_order_without_noise() -> None:
    proc = start("--seconds", "600")
    try:
        lines = read_until(proc, "starting Spark", 60)
        lines += read_until(proc, "result", 120)  # Spark's queries are writing results
        os.killpg(proc.pid, signal.SIGINT)  # the terminal's Ctrl-C
        t0 = time.monotonic()
        out = "".join(lines) + finish(proc, 90)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, out[-3000:]
    assert "demo: stopped" in out and took < 20, (took, out[-3000:])
    noisy = [line for line in out.splitlines() if any(n in line for n in NOISE)]
    assert not noisy, noisy[:20]
