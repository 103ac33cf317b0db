"""Helpers shared by the end-to-end benchmarks: the broker as a subprocess,
librdkafka's mock cluster, /proc readings and run statistics.

Nothing here imports odradek: the benchmarks treat the broker as a black box
reached over TCP, the way a user would. The subprocess broker is the one the
integration tests use, ``tests.support.process.ServerProcess`` (re-exported
here with ``serve_command``); the repository root goes on ``sys.path`` so
that also works when a benchmark is run as a script.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import glob
import os
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root

from tests.support.process import ServerProcess, serve_command

__all__ = [
    "MockCluster",
    "ServerProcess",
    "broker_process",
    "percentile",
    "proc_cpu_seconds",
    "proc_memory_mib",
    "serve_command",
    "thread_ids",
]


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


def broker_process(*overrides: str) -> ServerProcess:
    """``odradek serve`` for a benchmark (not started): the repository's one
    subprocess-broker helper, :class:`tests.support.process.ServerProcess`, on
    127.0.0.1 with a private temporary data directory (removed by ``stop()``),
    log level WARNING, stderr in a temporary file so a chatty broker never
    blocks on a pipe, and ``ready_s`` from just before ``Popen`` to the
    ``odradek: serving on HOST:PORT`` line."""
    return ServerProcess(None, *overrides, stderr_to_file=True)


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


