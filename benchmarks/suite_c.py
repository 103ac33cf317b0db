"""The C-client phase of the suite: librdkafka from C, so the broker is the limit.

``c/rdkbench.c`` is compiled at benchmark time with ``gcc -O2 ... -lrdkafka``
into ``$TMPDIR/odradek-bench-c/`` (the binary's name carries a hash of the
source, so an edit recompiles and nothing is downloaded). It needs gcc and
librdkafka's headers (Debian: ``apt-get install librdkafka-dev``); without
them :func:`build` says what is missing and the phase is skipped.

Measured against each target (``odradek serve`` and librdkafka's mock cluster,
both reached over loopback TCP from separate processes):

- produce: ``count`` records of 100 B or 1 KiB round-robin over 6
  partitions, flat out, acks=1 or acks=all with idempotence; msg/s, MB/s of
  values, and the broker's CPU seconds per GB of values (``/proc`` of the
  broker process; the mock's own threads);
- consume: a fresh consumer reads the newest ``window`` records of each
  partition of what was just produced (the mock keeps only ~5 MiB per
  partition);
- end-to-end latency: a consumer process assigned to a fresh 6-partition
  topic, then a paced producer process (acks=1, linger.ms=0) stamping
  ``CLOCK_MONOTONIC`` into each 100 B value; p50/p99/p99.9 of arrival minus
  stamp. Once unloaded, and once with a third process producing 100 B
  records (acks=1, linger.ms=5) to another topic at half the target's
  measured flat-out 100 B acks=1 rate.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from suite_kafka import Latency, Rate, Target

SOURCE = Path(__file__).resolve().parent / "c" / "rdkbench.c"
HEADER = "librdkafka/rdkafka.h"
PARTITIONS = 6


def build() -> tuple[Path | None, str]:
    """(the compiled rdkbench, "") or (None, why it cannot be built here)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        return None, "gcc not found"
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    out = Path(tempfile.gettempdir()) / "odradek-bench-c" / f"rdkbench-{digest}"
    if out.is_file():
        return out, ""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    proc = subprocess.run([gcc, "-O2", "-o", str(tmp), str(SOURCE), "-lrdkafka"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        if HEADER in proc.stderr or "-lrdkafka" in proc.stderr or "lrdkafka" in proc.stderr:
            return None, ("librdkafka headers or library not found "
                          "(apt-get install librdkafka-dev)")
        return None, f"gcc failed: {proc.stderr.strip().splitlines()[-1:]}"
    tmp.rename(out)
    return out, ""


def librdkafka_version(exe: Path) -> str:
    """The version of the librdkafka ``exe`` runs on."""
    return subprocess.run([str(exe), "version"], capture_output=True, text=True,
                          check=True).stdout.strip()


def _run(cmd: list[str], timeout_s: float = 300) -> dict[str, Any]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"{Path(cmd[0]).name} {cmd[1]} failed: {proc.stderr.strip()[-500:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def produce(exe: Path, target: Target, topic: str, count: int, size: int, acks: str,
            idempotent: bool) -> Rate:
    cpu0 = target.cpu_seconds()
    got = _run([str(exe), "produce", target.bootstrap, topic, str(PARTITIONS), str(count),
                str(size), acks, str(int(idempotent)), "0", "0"])
    cpu = target.cpu_seconds() - cpu0
    return Rate(got["seconds"], got["records"], got["bytes"], cpu)


def file_floor(total_bytes: int, window: int, files: int = PARTITIONS) -> float:
    """CPU seconds per 10^9 bytes of writing ``total_bytes`` into ``files`` fresh
    files in 1 MiB writes, round-robin, from this thread: the page cache's own
    cost, below any broker that stores what it is sent. With ``window`` >= 0 each
    file keeps only its newest ``window`` bytes cached, as the broker's
    drop-behind does (odradek.storage.pagecache); below 0 the kernel decides."""
    from odradek.storage.fs import OsFileSystem

    fs = OsFileSystem()
    chunk = bytes(1 << 20)
    with tempfile.TemporaryDirectory(prefix="odradek-floor-") as tmp:
        paths = [str(Path(tmp) / f"{i}.log") for i in range(files)]
        fds = [os.open(p, os.O_WRONLY | os.O_CREAT, 0o644) for p in paths]
        sizes = [0] * files
        dropped = [0] * files
        cpu0 = time.thread_time()
        try:
            for n in range(total_bytes // len(chunk)):
                i = n % files
                os.write(fds[i], chunk)
                sizes[i] += len(chunk)
                if window >= 0 and sizes[i] - dropped[i] - window >= 4 << 20:
                    fs.drop_cache(paths[i], dropped[i], sizes[i] - window)
                    dropped[i] = sizes[i] - window
            cpu = time.thread_time() - cpu0
        finally:
            for fd in fds:
                os.close(fd)
    return cpu / total_bytes * 1e9


def consume(exe: Path, target: Target, topic: str, window: int) -> Rate:
    cpu0 = target.cpu_seconds()
    got = _run([str(exe), "consume", target.bootstrap, topic, str(PARTITIONS), str(window)])
    return Rate(got["seconds"], got["records"], got["bytes"], target.cpu_seconds() - cpu0)


def latency(exe: Path, target: Target, topic: str, rate: int, seconds: float,
            load_topic: str | None = None, load_rate: int = 0) -> tuple[Latency, float]:
    """Latency of ``rate`` records/s for ``seconds``; with ``load_topic``, while
    another process produces ``load_rate`` records/s there. Returns the latency
    and the load's achieved rate (0 without load)."""
    expect = int(rate * seconds)
    consumer = subprocess.Popen(
        [str(exe), "latency", target.bootstrap, topic, str(PARTITIONS), str(expect),
         str(seconds + 60)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    loader: subprocess.Popen[str] | None = None
    try:
        warm = Producer({"bootstrap.servers": target.bootstrap, "linger.ms": 0})
        for p in range(PARTITIONS):
            warm.produce(topic, b"W" * 16, partition=p)
        if warm.flush(30):
            raise RuntimeError(f"{target.name} latency warm-up not acknowledged")
        del warm
        assert consumer.stdout is not None
        if consumer.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{target.name} latency consumer: {consumer.communicate()[1]}")
        if load_topic is not None:
            # long enough to outlast the measurement (~1 s ramp, margin after)
            total = int(load_rate * (seconds + 3))
            loader = subprocess.Popen(
                [str(exe), "produce", target.bootstrap, load_topic, str(PARTITIONS),
                 str(total), "100", "1", "0", str(load_rate), "0"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(1.0)  # the load is running at its rate before the clock starts
        sent = _run([str(exe), "produce", target.bootstrap, topic, str(PARTITIONS),
                     str(expect), "100", "1", "0", str(rate), "1"])
        out, err = consumer.communicate(timeout=seconds + 90)
        if consumer.returncode != 0:
            raise RuntimeError(f"{target.name} latency consumer failed: {err.strip()[-500:]}")
        got = json.loads(out.strip().splitlines()[-1])
        load_achieved = 0.0
        if loader is not None:
            lout, lerr = loader.communicate(timeout=300)
            if loader.returncode != 0:
                raise RuntimeError(f"{target.name} load producer failed: {lerr.strip()[-500:]}")
            load_achieved = float(json.loads(lout.strip().splitlines()[-1])["rate"])
        return (Latency(got["p50_ms"], got["p99_ms"], got["p999_ms"], float(sent["rate"])),
                load_achieved)
    finally:
        for proc in (consumer, loader):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
