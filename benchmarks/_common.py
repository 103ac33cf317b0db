"""Helpers shared by the end-to-end benchmarks: the broker as a subprocess,
librdkafka's mock cluster, /proc readings and run statistics.

Nothing here imports odradek: the benchmarks treat the broker as a black box
reached over TCP, the way a user would.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import glob
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_READY = re.compile(r"odradek: serving on (\S+)")


# --------------------------------------------------------------------------- statistics


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of an already sorted sequence."""
    if not sorted_values:
        raise ValueError("no samples")
    rank = max(1, min(len(sorted_values), round(q / 100 * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]


# --------------------------------------------------------------------------- /proc


def thread_ids() -> set[int]:
    """Kernel thread ids of this process."""
    return {int(t) for t in os.listdir("/proc/self/task")}


def proc_memory_mib(pid: int) -> dict[str, float]:
    """VmRSS (resident now) and VmHWM (resident peak) of ``pid``, in MiB."""
    out: dict[str, float] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0]) / 1024  # the kernel reports kB
    return out


def proc_cpu_seconds(pid: int, tid: int | None = None) -> float:
    """User + system CPU time consumed so far by ``pid`` (all its threads), or
    by its thread ``tid`` alone."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    with open(path, encoding="ascii") as f:
        fields = f.read().rpartition(")")[2].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- odradek serve


def serve_command() -> list[str]:
    """``odradek serve`` as installed next to this interpreter.

    The console script beside ``sys.executable`` is what a user runs; a pyenv
    shim on PATH would add a shell and ``pyenv exec`` to every start and would
    measure pyenv, not the broker. Falls back to ``python -m odradek``.
    """
    script = Path(sys.executable).parent / "odradek"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script), "serve"]
    return [sys.executable, "-m", "odradek", "serve"]


class BrokerProcess:
    """``odradek serve`` on 127.0.0.1 with a private temporary data directory.

    ``start()`` records ``ready_s``: from just before ``Popen`` to the moment
    the ``odradek: serving on HOST:PORT`` line is read. ``stop()`` sends
    SIGTERM, then SIGKILL after ``term_timeout_s``, and removes the data
    directory; it is safe to call more than once and from ``finally``.
    """

    def __init__(self, *overrides: str, log_level: str = "WARNING") -> None:
        self.overrides = list(overrides)
        self.log_level = log_level
        self.proc: subprocess.Popen[bytes] | None = None
        self.bootstrap = ""
        self.ready_s = 0.0
        self.exit_code: int | None = None
        self.killed = False
        self._tmp: str | None = None
        self._stderr: Any = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def data_dir(self) -> Path:
        assert self._tmp is not None
        return Path(self._tmp) / "data"

    def start(self, timeout_s: float = 30.0) -> BrokerProcess:
        self._tmp = tempfile.mkdtemp(prefix="odradek-bench-")
        self.data_dir.mkdir()
        args = [*serve_command(),
                "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                "--override", f"log.dirs={self.data_dir}",
                "--log-level", self.log_level]
        for override in self.overrides:
            args += ["--override", override]
        # stderr goes to a file: an undrained pipe would block a chatty broker.
        self._stderr = open(Path(self._tmp) / "stderr.log", "w+b")  # noqa: SIM115
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._stderr,
                                     stdin=subprocess.DEVNULL,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            self.bootstrap = self._await_ready(t0 + timeout_s)
        except BaseException:
            self.stop()
            raise
        self.ready_s = time.perf_counter() - t0
        # Keep draining stdout so the broker never blocks on a full pipe.
        threading.Thread(target=self._drain, daemon=True, name="odradek-stdout").start()
        return self

    def _await_ready(self, deadline: float) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        out = self.proc.stdout
        buf = b""
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise RuntimeError(f"odradek serve not ready in time: {self.stderr_tail()}")
            ready, _, _ = select.select([out], [], [], left)
            if not ready:
                continue
            chunk = os.read(out.fileno(), 4096)
            if not chunk:
                self.proc.wait(5)
                raise RuntimeError(f"odradek serve exited with {self.proc.returncode}: "
                                   f"{self.stderr_tail()}")
            buf += chunk
            match = _READY.search(buf.decode(errors="replace"))
            if match:
                return match.group(1)

    def _drain(self) -> None:
        proc = self.proc
        if proc is None or proc.stdout is None:
            return
        with contextlib.suppress(OSError, ValueError):
            while os.read(proc.stdout.fileno(), 65536):
                pass

    def stderr_tail(self, limit: int = 2000) -> str:
        if self._stderr is None:
            return ""
        self._stderr.flush()
        self._stderr.seek(0)
        return str(self._stderr.read().decode(errors="replace")[-limit:]).strip()

    def stop(self, term_timeout_s: float = 10.0) -> int | None:
        try:
            if self.proc is not None and self.exit_code is None:
                if self.proc.poll() is None:
                    self.proc.send_signal(signal.SIGTERM)
                    try:
                        self.proc.wait(term_timeout_s)
                    except subprocess.TimeoutExpired:
                        self.killed = True
                        self.proc.kill()
                        self.proc.wait(10)
                self.exit_code = self.proc.returncode
                if self.proc.stdout is not None:
                    self.proc.stdout.close()
        finally:
            if self._stderr is not None:
                self._stderr.close()
                self._stderr = None
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None
        return self.exit_code

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ------------------------------------------------------------------ librdkafka mock cluster


def _librdkafka() -> ctypes.CDLL:
    """The librdkafka that confluent-kafka itself loaded (its wheel bundles one)."""
    import confluent_kafka

    pkg = Path(confluent_kafka.__file__).parent
    candidates = sorted(glob.glob(str(pkg.parent / "confluent_kafka.libs" / "librdkafka*.so*")))
    if not candidates:
        found = ctypes.util.find_library("rdkafka")
        if found is None:
            raise RuntimeError("librdkafka shared library not found")
        candidates = [found]
    lib = ctypes.CDLL(candidates[0])
    lib.rd_kafka_version.restype = ctypes.c_int
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                      ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_conf_set.restype = ctypes.c_int
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_destroy.restype = None
    lib.rd_kafka_handle_mock_cluster.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_handle_mock_cluster.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                               ctypes.c_int, ctypes.c_int]
    lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
    lib.rd_kafka_mock_topic_delete.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.rd_kafka_mock_topic_delete.restype = ctypes.c_int
    return lib


class MockCluster:
    """librdkafka's in-process mock cluster, shared by any number of clients.

    A handle created with ``test.mock.num.brokers=1`` owns a mock cluster that
    listens on a real 127.0.0.1 port and runs on its own thread inside this
    process. confluent-kafka does not expose that cluster object, and the mock
    serves no CreateTopics (topics it auto-creates get 4 partitions), so the
    holder handle is made through librdkafka's C API with ctypes: that gives
    ``rd_kafka_handle_mock_cluster`` for ``rd_kafka_mock_topic_create(6
    partitions)`` and the bootstrap address. The benchmark's producers and
    consumers are ordinary confluent-kafka clients pointed at that address, so
    they reach one cluster exactly as they reach odradek: over TCP.

    ``cpu_seconds()`` is the CPU time of the threads the holder started (the
    mock cluster's own thread does all the serving; the holder's idle client
    threads add next to nothing): the mock's side of the work, comparable to
    the CPU time of the odradek process.
    """

    RD_KAFKA_PRODUCER = 0

    def __init__(self) -> None:
        self._lib = _librdkafka()
        self._rk: int | None = None
        self._cluster: int | None = None
        self._threads: set[int] = set()
        self.bootstrap = ""

    @property
    def librdkafka_version(self) -> str:
        v = int(self._lib.rd_kafka_version())
        return f"{(v >> 24) & 0xFF}.{(v >> 16) & 0xFF}.{(v >> 8) & 0xFF}"

    def start(self) -> MockCluster:
        lib = self._lib
        errstr = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        # log_level 4: keep the "Mock cluster enabled" notice off stderr.
        for key, value in (("test.mock.num.brokers", "1"), ("log_level", "4")):
            if lib.rd_kafka_conf_set(conf, key.encode(), value.encode(), errstr, 512) != 0:
                raise RuntimeError(f"librdkafka conf {key}: {errstr.value.decode()}")
        before = thread_ids()
        rk = lib.rd_kafka_new(self.RD_KAFKA_PRODUCER, conf, errstr, 512)  # takes conf
        if not rk:
            raise RuntimeError(f"rd_kafka_new: {errstr.value.decode()}")
        self._rk = rk
        self._threads = thread_ids() - before
        cluster = lib.rd_kafka_handle_mock_cluster(rk)
        if not cluster:
            self.stop()
            raise RuntimeError("test.mock.num.brokers=1 gave no mock cluster")
        self._cluster = cluster
        self.bootstrap = lib.rd_kafka_mock_cluster_bootstraps(cluster).decode()
        return self

    def create_topic(self, name: str, partitions: int) -> None:
        assert self._cluster is not None
        err = self._lib.rd_kafka_mock_topic_create(self._cluster, name.encode(), partitions, 1)
        if err:
            raise RuntimeError(f"mock topic create {name}: error {err}")

    def delete_topic(self, name: str) -> None:
        assert self._cluster is not None
        self._lib.rd_kafka_mock_topic_delete(self._cluster, name.encode())

    def cpu_seconds(self) -> float:
        total = 0.0
        for tid in self._threads:
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                total += proc_cpu_seconds(os.getpid(), tid)
        return total

    def stop(self) -> None:
        if self._rk is not None:
            # Destroying the holder destroys the cluster it created.
            self._lib.rd_kafka_destroy(self._rk)
            self._rk = None
            self._cluster = None

    def __enter__(self) -> MockCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


