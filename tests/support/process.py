"""Run ``odradek serve`` as a real subprocess on 127.0.0.1, on an ephemeral port.

The one subprocess-broker helper of the repository: the integration tests use
:class:`ServerProcess` directly, the benchmarks through
``benchmarks/_common.py`` (which re-exports it). It imports nothing from
odradek but :func:`odradek.testing.cluster.serve_command`: the broker is a
black box started the way a user starts it (the ``odradek`` console script
beside this interpreter) and reached over TCP.

``start()`` waits for the ``odradek: serving on HOST:PORT`` line on stdout
(with a deadline, even if the broker prints nothing), records the address in
``bootstrap`` and the time from just before ``Popen`` to that line in
``ready_s``, then keeps draining stdout so the broker never blocks on a full
pipe. If the broker exits or the deadline passes first, it raises
``RuntimeError("broker did not start: <stderr>")``.

Its stderr is either a pipe (the default; tests read ``proc.stderr`` after
``stop()``, ``proc`` being a text-mode ``Popen``) or, with
``stderr_to_file=True``, an anonymous temporary file, for a chatty broker
that must never block on an undrained pipe (the benchmarks);
:meth:`ServerProcess.stderr_text` reads it in both cases once the broker has
exited.

With ``data_dir=None`` the data directory is a private temporary one, removed
by ``stop()`` and ``kill()``; a given ``data_dir`` is never removed.

``properties`` names a ``server.properties`` file, passed as ``odradek serve
FILE``; the listener, ``log.dirs`` and ``overrides`` still override it.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import IO

from odradek.testing.cluster import serve_command

__all__ = ["ServerProcess", "serve_command"]

_READY = re.compile(rb"odradek: serving on (\S+)")


class ServerProcess:
    """``odradek serve`` on ``127.0.0.1:0`` with ``--override`` settings; see the module docstring.

    ``overrides`` (``"key=value"`` strings) may still be changed before
    ``start()``. ``stop()`` sends SIGTERM, then SIGKILL after
    ``term_timeout_s`` (setting ``killed``), and returns the exit code;
    ``kill()`` sends SIGKILL at once. Both are safe to call more than once,
    before ``start()`` and from ``finally``; ``start()`` may be called again
    after either (a restart on the same data directory, if one was given).
    """

    def __init__(
        self,
        data_dir: Path | None = None,
        *overrides: str,
        log_level: str = "WARNING",
        stderr_to_file: bool = False,
        env: dict[str, str] | None = None,
        properties: Path | None = None,
    ) -> None:
        self.overrides = list(overrides)
        self.properties = properties
        self.env = dict(env or {})
        """Extra environment of the broker (may be changed before a restart)."""
        self.log_level = log_level
        self.stderr_to_file = stderr_to_file
        self.proc: subprocess.Popen[str] | None = None
        self.bootstrap = ""
        self.ready_s = 0.0
        self.exit_code: int | None = None
        self.killed = False
        self._data_dir = data_dir
        self._tmp: Path | None = None
        self._stderr_file: IO[bytes] | None = None
        self._drain_thread: threading.Thread | None = None

    @property
    def data_dir(self) -> Path:
        """The broker's ``log.dirs`` (a private temporary directory if none was given)."""
        if self._data_dir is not None:
            return self._data_dir
        if self._tmp is None:
            self._tmp = Path(tempfile.mkdtemp(prefix="odradek-serve-"))
        return self._tmp / "data"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout_s: float = 30.0) -> ServerProcess:
        """Start the broker and wait until it serves; returns ``self``."""
        data_dir = self.data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        args = [*serve_command(), *([str(self.properties)] if self.properties else []),
                "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                "--override", f"log.dirs={data_dir}",
                "--log-level", self.log_level]
        for override in self.overrides:
            args += ["--override", override]
        stderr: IO[bytes] | int = subprocess.PIPE
        if self._stderr_file is not None:
            self._stderr_file.close()
            self._stderr_file = None
        if self.stderr_to_file:
            self._stderr_file = stderr = tempfile.TemporaryFile(prefix="odradek-stderr-")  # noqa: SIM115
        self.exit_code, self.killed, self.bootstrap = None, False, ""
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=stderr,
                                     stdin=subprocess.DEVNULL, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env})
        try:
            self.bootstrap = self._await_ready(t0 + timeout_s)
        except RuntimeError as exc:
            self.kill()
            raise RuntimeError(f"broker did not start: {self.stderr_text()}") from exc
        except BaseException:
            self.kill()
            raise
        self.ready_s = time.perf_counter() - t0
        self._drain_thread = threading.Thread(target=self._drain, daemon=True,
                                              name="odradek-serve-stdout")
        self._drain_thread.start()
        return self

    def _await_ready(self, deadline: float) -> str:
        """Read stdout until the ready line; raise RuntimeError on exit or timeout."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        poller = select.poll()  # not select(): descriptors above 1023 must work too
        poller.register(fd, select.POLLIN | select.POLLHUP)
        buf = b""
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise RuntimeError("not ready in time")
            if not poller.poll(left * 1000):
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                # stdout closed: the broker is exiting; let it finish so its exit
                # code is its own, not our SIGKILL's.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(10)
                raise RuntimeError(f"exited with {self.proc.returncode}")
            buf += chunk
            match = _READY.search(buf)
            if match:
                return match.group(1).decode()

    def _drain(self) -> None:
        proc = self.proc
        if proc is None or proc.stdout is None:
            return
        with contextlib.suppress(OSError, ValueError):
            while os.read(proc.stdout.fileno(), 65536):
                pass

    def stderr_text(self) -> str:
        """What the broker wrote to stderr; blocks until it closes stderr (exits) in pipe mode."""
        if self._stderr_file is not None:
            self._stderr_file.flush()
            self._stderr_file.seek(0)
            return self._stderr_file.read().decode(errors="replace").strip()
        if self.proc is not None and self.proc.stderr is not None:
            with contextlib.suppress(OSError, ValueError):
                return self.proc.stderr.read().strip()
        return ""

    def kill(self) -> None:
        """SIGKILL (an unclean stop), then release what ``stop()`` releases."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.killed = True
        self._finish(10.0)

    def stop(self, term_timeout_s: float = 20.0) -> int | None:
        """SIGTERM (a clean stop), SIGKILL after ``term_timeout_s``; the exit code.

        None if the broker was never started.
        """
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self._finish(term_timeout_s)

    def _finish(self, timeout_s: float) -> int | None:
        """Wait for the exit (SIGKILL after ``timeout_s``), close stdout, remove a
        private data directory; stderr stays readable."""
        try:
            if self.proc is not None:
                try:
                    self.proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    self.killed = True
                    self.proc.kill()
                    self.proc.wait(10)
                self.exit_code = self.proc.returncode
                if self._drain_thread is not None:
                    self._drain_thread.join(5)
                    self._drain_thread = None
                if self.proc.stdout is not None:
                    self.proc.stdout.close()
        finally:
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None
        return self.exit_code

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
