"""Run ``odradek serve`` as a real subprocess on an ephemeral port."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

_READY = re.compile(r"odradek: serving on (\S+)")


class ServerProcess:
    def __init__(self, data_dir: Path, *overrides: str) -> None:
        self.data_dir = data_dir
        self.overrides = list(overrides)
        self.proc: subprocess.Popen[str] | None = None
        self.bootstrap = ""

    def start(self, timeout_s: float = 20.0) -> ServerProcess:
        args = [sys.executable, "-m", "odradek", "serve",
                "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                "--override", f"log.dirs={self.data_dir}", "--log-level", "WARNING"]
        for o in self.overrides:
            args += ["--override", o]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            match = _READY.search(line)
            if match:
                self.bootstrap = match.group(1)
                return self
        self.kill()
        err = self.proc.stderr.read() if self.proc.stderr else ""
        raise RuntimeError(f"broker did not start: {err}")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(20)
