"""``odradek dev cluster`` stops on Ctrl-C even when it was started with SIGINT
ignored, as a background job of a non-interactive shell is."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from tests.support.cluster import free_port


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_sigint_stops_a_dev_cluster_started_with_sigint_ignored(tmp_path: Path) -> None:
    base = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "odradek", "dev", "cluster", "--nodes", "1",
         "--dir", str(tmp_path / "dev"), "--base-port", str(base)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        preexec_fn=_ignore_sigint)
    try:
        assert proc.stdout is not None
        pids = []
        while True:
            line = proc.stdout.readline()
            assert line, "the dev cluster ended before it served"
            if line.startswith("node "):
                pids.append(int(line.split("pid ")[1].split(",")[0]))
            if line.startswith("bootstrap: "):
                break
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
        for pid in pids:  # its node stopped with it
            assert subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
