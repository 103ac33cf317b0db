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


# -- PostgreSQL (the PostgreSQL connectors' tests) -----------------------------

import itertools  # noqa: E402

from odradek.testing.postgres import BIN_DIRS, PostgresServer, find_bin_dir  # noqa: E402

_dbs = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    if find_bin_dir() is None:
        pytest.skip(f"PostgreSQL server binaries not installed (looked in {', '.join(BIN_DIRS)};"
                    " Debian: apt-get install postgresql-15)")
    with PostgresServer() as server:
        yield server


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> str:
    """The URL of a new, empty database on the session's server."""
    psycopg2 = pytest.importorskip("psycopg2")
    name = f"t{next(_dbs)}"
    conn = psycopg2.connect(postgres_server.url)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
    conn.close()
    return postgres_server.url.rsplit("/", 1)[0] + "/" + name
