"""Run ``odradek serve --processes N`` as a real subprocess (tests and
``benchmarks/processes_bench.py``).

:class:`Supervised` starts the supervisor on a block of consecutive free
ports of 127.0.0.1 (:func:`port_block`: the client ports P..P+N-1, then the
controllers' P+N..), with ``log.dirs`` the given directory, and waits (with a
deadline) for its ``odradek: serving on ADDR,...`` line, collecting the
``process I: node ID, pid PID, ADDR`` lines before it. Then a thread keeps
reading stdout into :attr:`Supervised.lines` (a process started again after
a crash prints another ``process ...`` line). stderr (every process's log,
prefixed ``[node ID]``) goes to ``supervisor.log`` beside the data directory.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from odradek.testing.cluster import free_port

_PROCESS = re.compile(r"process (\d+): node (\d+), pid (\d+), (\S+)")
_SERVING = "odradek: serving on "


def port_block(size: int) -> int:
    """The first of ``size`` consecutive ports free on 127.0.0.1 now (and handed
    out by :func:`free_port`, so no other test of this process takes them)."""
    for _ in range(50):
        ports = [free_port() for _ in range(size)]
        if ports == list(range(ports[0], ports[0] + size)):
            return ports[0]
    raise RuntimeError(f"no {size} consecutive free ports")


def alive(pid: int) -> bool:
    """Whether a process of that pid exists (zombies included: not reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class Supervised:
    """``odradek serve --processes N`` on ``data`` and a fixed port block."""

    def __init__(self, data: Path, processes: int, port: int | None = None,
                 overrides: list[str] | None = None, log_level: str = "INFO") -> None:
        self.data = data
        self.processes = processes
        self.port = port if port is not None else port_block(2 * processes)
        self.overrides = ["group.initial.rebalance.delay.ms=0", *(overrides or [])]
        self.log_level = log_level
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self.pids: dict[int, int] = {}
        """Node id → pid, as the supervisor announced them (the latest)."""
        self.bootstrap = ""
        self.log = data.parent / f"{data.name}-supervisor.log"
        self._changed = threading.Condition()

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "odradek", "serve", "--processes", str(self.processes),
               "--log-dirs", str(self.data), "--log-level", self.log_level,
               "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}"]
        for item in self.overrides:
            cmd += ["--override", item]
        return cmd

    def start(self, timeout_s: float = 60.0) -> Supervised:
        self.lines.clear()
        self.bootstrap = ""
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=err,
                                         stdin=subprocess.DEVNULL, text=True)
        ended = threading.Event()
        threading.Thread(target=self._drain, args=(self.proc, ended), daemon=True).start()
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not self.bootstrap:
                left = deadline - time.monotonic()
                if ended.is_set():
                    self.proc.wait()
                    raise RuntimeError(f"the supervisor exited ({self.proc.returncode}) "
                                       f"before serving: {self.tail()}")
                if left <= 0:
                    self.stop()
                    raise RuntimeError(f"not serving after {timeout_s} s: {self.tail()}")
                self._changed.wait(min(left, 0.5))
        return self

    def _drain(self, proc: subprocess.Popen[str], ended: threading.Event) -> None:
        """Every stdout line, as it comes (a thread: select() on a text pipe
        misses the lines already in its buffer)."""
        assert proc.stdout is not None
        for line in proc.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                if match := _PROCESS.match(line):
                    self.pids[int(match.group(2))] = int(match.group(3))
                elif line.startswith(_SERVING):
                    self.bootstrap = line[len(_SERVING):].split()[0]
                self._changed.notify_all()
        with self._changed:
            ended.set()
            self._changed.notify_all()

    @property
    def addresses(self) -> list[str]:
        return self.bootstrap.split(",")

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 60.0) -> int:
        """Signal the supervisor and wait for it; its exit status."""
        self.bootstrap = ""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        return self.proc.returncode

    def kill_all(self) -> None:
        """Clean-up after a failed test: the supervisor and every process it named."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in self.pids.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def processes_naming(text: str) -> list[int]:
    """Pids of the live processes whose command line contains ``text`` (a data
    directory: the supervisor's and its processes' arguments name it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(int(entry.name))
    return found
