"""Start-up of ``odradek serve``: from process spawn to the first ApiVersions answer.

    python benchmarks/startup_bench.py [--runs 5]

Each run spawns the ``odradek serve`` console script (as a user starts it) on
a free 127.0.0.1 port and, from just before ``Popen``, tries every 2 ms to
connect and send an ApiVersions v0 request; the time is taken when a
complete answer with error code 0 arrives. The broker is then stopped with
SIGTERM. Four cases, each the median (min-max) of ``--runs`` starts:

- data directory: *fresh* (a new empty directory each run: the node formats
  itself) or *existing* (one directory holding 10 topics of 6 partitions
  with 100,000 records of 100 B, written once before the timed runs and
  cleanly stopped after each);
- bytecode: *cached* (every module's ``.pyc`` present, as after ``pip
  install``; here under a private ``PYTHONPYCACHEPREFIX``) or *compiled*
  (odradek's own modules compiled from source at every start, as with
  ``PYTHONDONTWRITEBYTECODE=1`` and an editable install, which is how this
  repository's tests and benchmarks run; the standard library and other
  packages keep their cached bytecode).

The broker's CPU time (user + system, from ``/proc``) at the moment it
answered is reported for each case too: on a shared machine it varies less
than the wall time. So is the idle RSS one second after a fresh start.
Nothing here imports odradek: the broker is a black box reached over TCP.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import proc_cpu_seconds, proc_memory_mib, serve_command

FILL_TOPICS, FILL_PARTITIONS, FILL_RECORDS = 10, 6, 100_000
CASES = (
    ("fresh", "cached"), ("existing", "cached"), ("fresh", "compiled"), ("existing", "compiled"),
)


def case_label(data: str, bytecode: str) -> str:
    """The report's row name of a case (no mention of bytecode: cached)."""
    where = ("fresh data dir" if data == "fresh"
             else f"data dir with {FILL_TOPICS * FILL_PARTITIONS} partitions")
    return where if bytecode == "cached" else f"{where}, no .pyc (sources compiled)"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed before the answer was complete")
        out += chunk
    return out


def api_versions(port: int, timeout_s: float = 1.0) -> None:
    """One ApiVersions v0 round trip on a new connection; raises OSError if the
    broker is not serving yet (refused, closed, or an error code in the answer)."""
    with socket.create_connection(("127.0.0.1", port), timeout_s) as sock:
        # header v1: api key 18, version 0, correlation id 7, client id "startup"
        request = struct.pack(">hhih", 18, 0, 7, 7) + b"startup"
        sock.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
        correlation, error = struct.unpack(">ih", _recv_exactly(sock, size)[:6])
        if correlation != 7 or error != 0:
            raise ConnectionError(f"ApiVersions answer: correlation {correlation}, error {error}")


@contextmanager
def serving(data_dir: Path, env: dict[str, str],
            timeout_s: float = 30.0) -> Iterator[tuple[float, subprocess.Popen[bytes], int]]:
    """Start ``odradek serve`` on ``data_dir``; yields (seconds from spawn to the
    first ApiVersions answer, the process, its port); SIGTERM on exit."""
    port = _free_port()
    cmd = [*serve_command(), "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
           "--override", f"log.dirs={data_dir}", "--log-level", "WARNING"]
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err,
                                stdin=subprocess.DEVNULL, env=env)
        try:
            deadline = t0 + timeout_s
            while True:
                try:
                    api_versions(port)
                    break
                except OSError as exc:
                    if proc.poll() is not None or time.perf_counter() > deadline:
                        err.seek(0)
                        raise RuntimeError(f"broker did not serve ({exc}): "
                                           f"{err.read().decode(errors='replace')}") from None
                    time.sleep(0.002)
            yield time.perf_counter() - t0, proc, port
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def _fill(data_dir: Path, env: dict[str, str]) -> None:
    """10 topics x 6 partitions, 100,000 records of 100 B, then a clean stop."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    with serving(data_dir, env) as (_, _proc, port):
        bootstrap = f"127.0.0.1:{port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        names = [f"startup-{i}" for i in range(FILL_TOPICS)]
        for future in admin.create_topics(
                [NewTopic(n, FILL_PARTITIONS, 1) for n in names]).values():
            future.result(60)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        value = b"v" * 100
        for i in range(FILL_RECORDS):
            while True:
                try:
                    producer.produce(names[i % FILL_TOPICS], value)
                    break
                except BufferError:
                    producer.poll(0.05)
        left = producer.flush(60)
        del producer, admin  # closed before the broker stops (no disconnect warnings)
        if left:
            raise RuntimeError("fill: records not acknowledged")


def environments(cache: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(cached, compiled) environments sharing the bytecode cache ``cache``; call
    :func:`forget_odradek_bytecode` between the cached and the compiled runs."""
    cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cached["PYTHONPYCACHEPREFIX"] = str(cache)
    compiled = {**cached, "PYTHONDONTWRITEBYTECODE": "1"}
    return cached, compiled


def forget_odradek_bytecode(cache: Path) -> None:
    """Remove odradek's modules (only) from the bytecode cache ``cache``."""
    spec = importlib.util.find_spec("odradek")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("odradek is not importable")
    for location in spec.submodule_search_locations:
        shutil.rmtree(cache / Path(location).resolve().relative_to("/"), ignore_errors=True)


def measure(runs: int, log: object = None
            ) -> tuple[dict[str, list[float]], dict[str, list[float]], float]:
    """({case label: seconds to the answer per run}, {case label: the broker's
    CPU seconds by then per run}, the idle RSS in MiB one second after a fresh
    start with cached bytecode)."""
    say = log if callable(log) else (lambda _msg: None)
    out: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="odradek-startup-") as tmp:
        root = Path(tmp)
        cache = root / "pyc"
        cached, compiled = environments(cache)
        existing = root / "existing"
        _fill(existing, cached)  # also fills the bytecode cache
        with serving(root / "rss", cached) as (_, proc, _port):
            time.sleep(1)
            rss = proc_memory_mib(proc.pid)["VmRSS"]
        for data, bytecode in CASES:
            if bytecode == "compiled":
                forget_odradek_bytecode(cache)
            env = cached if bytecode == "cached" else compiled
            label = case_label(data, bytecode)
            for run in range(runs):
                where = existing if data == "existing" else root / f"fresh-{bytecode}-{run}"
                with serving(where, env) as (seconds, proc, _port):
                    cpu.setdefault(label, []).append(proc_cpu_seconds(proc.pid))
                    out.setdefault(label, []).append(seconds)
            values, used = out[label], cpu[label]
            say(f"startup {label}: median {statistics.median(values) * 1000:.0f} ms "
                f"({min(values) * 1000:.0f}-{max(values) * 1000:.0f}), CPU "
                f"{statistics.median(used) * 1000:.0f} ms "
                f"({min(used) * 1000:.0f}-{max(used) * 1000:.0f})")
    return out, cpu, rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    results, _cpu, rss = measure(args.runs, log=print)
    print(f"idle RSS after a fresh start: {rss:.1f} MiB")
    worst = max(statistics.median(v) for v in results.values())
    print(f"goal: every case <= 500 ms median: {'met' if worst <= 0.5 else 'NOT met'}")


if __name__ == "__main__":
    main()
