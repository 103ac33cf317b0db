"""``odradek connect standalone``'s errors are one line and exit 1, no
traceback; SIGTERM or Ctrl-C (SIGINT) stops the tasks, flushes offsets and
exits 0."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.testing.broker import Broker
from tests.integration.connect.support import (
    ROOT,
    WorkerProcess,
    env,
    running,
    wait_for,
    worker_props,
    write_properties,
)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", "connect", "standalone", *args],
                          capture_output=True, text=True, env=env(), cwd=ROOT, timeout=60)


def _one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 1, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for w in words:
        assert w in lines[0], lines[0]


@pytest.mark.slow
def test_errors_are_one_line(tmp_path: Path) -> None:
    _one_line_error(_run(str(tmp_path / "missing.properties")), "missing.properties")
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    no_broker = f"127.0.0.1:{free.getsockname()[1]}"
    free.close()
    with Broker() as broker:
        good = worker_props(broker.bootstrap_servers, tmp_path)
        bad = write_properties(tmp_path / "bad.properties",
                               {**good, "offset.flush.interval.ms": "soon"})
        _one_line_error(_run(str(bad)), "offset.flush.interval.ms")
        missing = write_properties(tmp_path / "nokey.properties",
                                   {k: v for k, v in good.items() if k != "value.converter"})
        _one_line_error(_run(str(missing)), "value.converter")
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        try:
            port = taken.getsockname()[1]
            busy = write_properties(tmp_path / "busy.properties",
                                    {**good, "listeners": f"http://127.0.0.1:{port}"})
            _one_line_error(_run(str(busy)), "cannot listen", str(port))
        finally:
            taken.close()
        worker = write_properties(tmp_path / "w.properties", good)
        conn = write_properties(tmp_path / "c.properties", {
            "name": "c", "connector.class": "FileStreamSource", "topic": "t"})
        _one_line_error(_run(str(worker), str(conn)), "connector c", "file")
    nobroker = write_properties(tmp_path / "nb.properties",
                                worker_props(no_broker, tmp_path))
    _one_line_error(_run(str(nobroker)), "no broker", no_broker)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_flushes_offsets_and_exits_0(tmp_path: Path, sig: int) -> None:
    source = tmp_path / "in.txt"
    source.write_text("one\ntwo\nthree\n", encoding="utf-8")
    with Broker() as broker:
        props = {**worker_props(broker.bootstrap_servers, tmp_path),
                 "offset.flush.interval.ms": "600000"}  # only the stop flushes
        worker = write_properties(tmp_path / "worker.properties", props)
        src = write_properties(tmp_path / "src.properties", {
            "name": "src", "connector.class": "FileStreamSource", "file": str(source),
            "topic": "lines"})
        proc = WorkerProcess(worker, [src])
        wait_for("src running", lambda: running(proc.url, "src"))
        assert not (tmp_path / "connect.offsets").exists() or json.loads(
            (tmp_path / "connect.offsets").read_text()) == []
        assert proc.terminate(sig) == 0
    assert json.loads((tmp_path / "connect.offsets").read_text()) == [
        [["src", {"filename": str(source)}], {"position": 14}]]
