"""Exactly-once into Parquet across a SIGKILLed driver.

The driver (a separate process with its own JVM) is killed with SIGKILL,
whole process group, while a micro-batch is in flight (its offsets are
logged, its commit is not), with a producer still appending. A restart from
the checkpoint must replay that batch and go on: the Parquet table (read
through its ``_spark_metadata`` log, as any Spark reader does) must equal the
topic record for record, with no duplicate.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.spark.helpers import create_topic, produce, read_all, topic_name, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DRIVER = Path(__file__).with_name("copy_driver.py")


def _batches(directory: Path) -> set[int]:
    if not directory.is_dir():
        return set()
    return {int(p.name) for p in directory.iterdir() if p.name.isdigit()}


def _driver(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(DRIVER), *args], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": os.getcwd()})


def test_sigkilled_driver_restarts_exactly_once(spark: Any, kafka: Any, tmp_path: Path) -> None:
    bootstrap = kafka.bootstrap_servers
    topic = create_topic(bootstrap, topic_name("eo"), 4)
    produce(bootstrap, topic, ({"value": f"first-{i}".encode(), "partition": i % 4}
                               for i in range(12_000)))
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    driver = _driver(bootstrap, topic, str(out), str(checkpoint), "stream")
    stop_producing = threading.Event()

    def keep_producing() -> None:
        n = 0
        while not stop_producing.is_set():
            produce(bootstrap, topic, ({"value": f"live-{n + i}".encode()} for i in range(200)))
            n += 200
            stop_producing.wait(0.2)

    producer = threading.Thread(target=keep_producing)
    try:
        def in_flight() -> bool:
            assert driver.poll() is None, driver.stderr.read().decode()[-3000:]  # type: ignore[union-attr]
            done = _batches(checkpoint / "commits")
            return len(done) >= 3 and bool(_batches(checkpoint / "offsets") - done)

        wait_for(lambda: len(_batches(checkpoint / "commits")) >= 1, 240, "a first batch")
        producer.start()
        wait_for(in_flight, 240, "a batch in flight after three committed ones")
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
        logged, committed = _batches(checkpoint / "offsets"), _batches(checkpoint / "commits")
    finally:
        stop_producing.set()
        if producer.is_alive():
            producer.join(60)
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(30)
    assert max(logged) > max(committed), "the kill should catch a batch in flight"

    restart = _driver(bootstrap, topic, str(out), str(checkpoint), "available-now")
    _, err = restart.communicate(timeout=300)
    assert restart.returncode == 0, err.decode()[-3000:]
    assert max(_batches(checkpoint / "commits")) >= max(logged)

    table = [(r.partition, r.offset, bytes(r.value))
             for r in spark.read.parquet(str(out)).collect()]
    truth = read_all(bootstrap, topic, 4)
    assert len(table) == len(set(table)), "duplicates in the output"
    assert sorted(table) == truth
    assert len(truth) > 12_000  # the live producer's records are in too
