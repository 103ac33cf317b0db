"""Helpers of the Connect tests: HTTP calls, waiting on conditions, worker
settings, and a standalone worker run as ``odradek connect standalone`` in a
subprocess (``python -m odradek``, so this tree's code)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[3]


def call(method: str, url: str, body: Any = None, *, raw: bytes | None = None,
         content_type: str = "application/json") -> tuple[int, Any]:
    """(status, JSON body or None)."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            status, text = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read()
    return status, json.loads(text) if text else None


def wait_for(what: str, fn: Callable[[], T | None], timeout: float = 30.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def worker_props(bootstrap: str, tmp: Path, **extra: str) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "offset.storage.file.filename": str(tmp / "connect.offsets"),
            "offset.flush.interval.ms": "200",
            "listeners": "http://127.0.0.1:0", **extra}


def write_properties(path: Path, props: Mapping[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    return path


def state(url: str, name: str) -> tuple[str, list[str]]:
    """(connector state, task states), ("", []) while it is unknown."""
    status, body = call("GET", f"{url}/connectors/{name}/status")
    if status != 200:
        return "", []
    return body["connector"]["state"], [t["state"] for t in body["tasks"]]


def running(url: str, name: str, tasks: int = 1) -> bool:
    s, ts = state(url, name)
    return s == "RUNNING" and ts == ["RUNNING"] * tasks


def env() -> dict[str, str]:
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path}


class WorkerProcess:
    """``odradek connect standalone WORKER CONNECTOR...`` as a subprocess."""

    def __init__(self, worker: Path, connectors: Sequence[Path] = ()) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "odradek", "connect", "standalone", str(worker),
             *map(str, connectors)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env(), cwd=ROOT)
        self.lines: list[str] = []
        self._ready = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()
        self._ready.wait(30)
        self.url = next((line.split(" at ")[1].split()[0] for line in self.lines
                         if "Odradek Connect" in line), "")
        if not self.url:
            self.proc.kill()
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"worker did not start: {err}")

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            self._ready.set()
        self._ready.set()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)

    def terminate(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(30)
