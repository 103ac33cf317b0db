"""One local SparkSession for the whole run and one real broker, shared.

Spark takes seconds to start, so the session is session-scoped (``local[2]``,
two shuffle partitions, no UI, UTC, a small serial-GC JVM); every test uses its
own topics, checkpoint and output directories, and query names. Workers run
this interpreter, where odradek is installed (``pip install -e .``), so they
import ``odradek.spark`` by reference.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator

import pytest

from odradek.testing.broker import Broker

pyspark = pytest.importorskip("pyspark", reason="pip install 'odradek[spark]' to run these")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs Java (apt-get install openjdk-17-jre-headless)",
                allow_module_level=True)

JVM_FLAGS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xss4m"


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("odradek-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.extraJavaOptions", JVM_FLAGS)
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


@pytest.fixture(scope="session")
def kafka() -> Iterator[Broker]:
    """A broker for every Spark test (and for driver subprocesses they start)."""
    with Broker(**{"num.partitions": "1"}) as broker:
        yield broker


@pytest.fixture(autouse=True)
def no_query_left_running(request: pytest.FixtureRequest) -> Iterator[None]:
    """Stop the streaming queries a test left running (one that failed before
    its own ``query.stop()``, or whose ``awaitTermination`` timed out), so they
    do not go on taking the session's two cores and time the next tests out."""
    yield
    if "spark" not in request.fixturenames:
        return
    session = request.getfixturevalue("spark")
    for query in session.streams.active:  # type: ignore[attr-defined]
        query.stop()
