"""Exactly-once source tasks in distributed mode (KIP-618): two worker processes
with ``exactly.once.source.support=enabled``; one is killed with SIGKILL in the
middle of its transactions, its tasks move to the other after the delay, and a
``read_committed`` reader sees every task's numbers exactly once, in order:
each task's producer (``transactional.id`` ``<group.id>-<connector>-<task>``)
wrote its records and their offsets in one transaction, and the moved task's
new producer fenced the dead one's open transaction."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.testing.broker import Broker
from tests.integration.connect.dsupport import (
    DELAY_MS,
    create,
    sequences,
    spread,
    start_cluster,
    values,
)
from tests.integration.connect.support import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def broker() -> Iterator[Broker]:
    overrides: dict[str, Any] = {"group.initial.rebalance.delay.ms": "0"}
    with Broker(**overrides) as b:
        yield b


def test_a_killed_workers_tasks_move_and_write_each_record_once(
        broker: Broker, tmp_path: Path) -> None:
    workers = start_cluster(broker, tmp_path, n=2, **{"exactly.once.source.support": "enabled"})
    try:
        create(workers[0].url, **{"tasks.max": "4", "interval.ms": "5"})
        placed = wait_for("4 tasks RUNNING 2/2", lambda: (
            p if (p := spread(workers[1].url, 4)) and sorted(
                list(p.values()).count(w.worker_id) for w in workers) == [2, 2] else None), 90)
        victim, survivor = workers
        moving = [t for t, w in placed.items() if w == victim.worker_id]
        wait_for("every task to write 100 records", lambda: all(
            len(sequences(values(broker.bootstrap_servers, "out")).get(t, [])) >= 100
            for t in range(4)), 60)
        before = sequences(values(broker.bootstrap_servers, "out"))
        victim.kill()  # mid-transaction: its open transactions are never committed
        wait_for("the victim's tasks RUNNING on the survivor", lambda: (
            p if (p := spread(survivor.url, 4)) and set(p.values()) == {survivor.worker_id}
            else None), 60 + DELAY_MS / 1000)
        wait_for("the moved tasks to write 100 more", lambda: all(
            max(sequences(values(broker.bootstrap_servers, "out")).get(t, [-1]))
            > max(before[t]) + 100 for t in moving), 60)
        survivor.stop()
        seqs = sequences(values(broker.bootstrap_servers, "out"))  # read_committed
        for t in range(4):
            assert seqs[t] == list(range(len(seqs[t]))), (
                f"task {t}: not each number once and in order "
                f"(first difference at {next(i for i, v in enumerate(seqs[t]) if v != i)})")
    finally:
        for w in workers:
            w.kill()
            print(w.worker_id, "".join(w.lines))
