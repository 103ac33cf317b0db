"""Fixtures: a real broker and an in-process standalone worker (its REST API
on a free port of 127.0.0.1, its tasks on threads)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from odradek.connect.runtime.worker import StandaloneWorker
from odradek.testing.broker import Broker
from tests.integration.connect.support import worker_props


@dataclass
class Running:
    broker: Broker
    worker: StandaloneWorker
    url: str
    tmp: Path


@pytest.fixture
def connect(tmp_path: Path) -> Iterator[Running]:
    with Broker() as broker:
        worker = StandaloneWorker(worker_props(broker.bootstrap_servers, tmp_path))
        url = worker.start_in_thread()
        try:
            yield Running(broker, worker, url, tmp_path)
        finally:
            worker.stop_thread()
