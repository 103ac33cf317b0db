"""``/admin/loggers`` changes the Python loggers' levels: Kafka's level names
map to Python's, a namespace's level reaches the loggers under it, and what
was set reads back with the time it was set."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from odradek.connect.runtime.loggers import kafka_level
from tests.integration.connect.conftest import Running
from tests.integration.connect.support import call

NAME = "odradek.connect.loggers-check"


@pytest.fixture
def fresh() -> Iterator[list[logging.Logger]]:
    made = [logging.getLogger(NAME), logging.getLogger(NAME + ".a"),
            logging.getLogger(NAME + ".a.b")]
    yield made
    for lg in made:
        lg.setLevel(logging.NOTSET)


@pytest.mark.parametrize(("kafka", "python"), [
    ("TRACE", 5), ("DEBUG", logging.DEBUG), ("INFO", logging.INFO),
    ("WARN", logging.WARNING), ("ERROR", logging.ERROR), ("FATAL", logging.CRITICAL),
    ("OFF", logging.CRITICAL + 10)])
def test_kafka_levels_map_to_python_levels(connect: Running, fresh: list[logging.Logger],
                                           kafka: str, python: int) -> None:
    before = int(time.time() * 1000)
    status, body = call("PUT", f"{connect.url}/admin/loggers/{NAME}", {"level": kafka})
    assert status == 200
    assert body == [NAME, NAME + ".a", NAME + ".a.b"]
    assert [lg.level for lg in fresh] == [python] * 3
    status, body = call("GET", f"{connect.url}/admin/loggers/{NAME}.a.b")
    assert status == 200 and body["level"] == kafka
    assert before <= body["last_modified"] <= int(time.time() * 1000)


def test_a_python_level_between_two_names_reads_as_the_more_severe() -> None:
    assert kafka_level(logging.INFO + 5) == "WARN"
    assert kafka_level(logging.NOTSET) == "ALL"
