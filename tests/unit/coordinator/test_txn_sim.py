"""Transactions under the seeded simulation (tests/support/txn_sim.py): the pure
coordinator drives real partitions, with crashes between every pair of steps;
invariants after every event, and no transaction half committed at the end.

``TXN_SIM_SEEDS=500`` runs more seeds locally; a seed that fails becomes an
explicit case here.
"""

from __future__ import annotations

import os

import pytest

from tests.support.txn_sim import run

SEEDS = range(int(os.environ.get("TXN_SIM_SEEDS", "30")))


@pytest.mark.parametrize("seed", SEEDS)
def test_no_transaction_ends_half_committed(seed: int) -> None:
    sim = run(seed)
    kinds = {e.split()[0] for e in sim.events}
    assert "crash" in kinds or len(sim.events) < 50, f"seed {seed}: no crash happened"
    assert sim.marks, f"seed {seed}: no transaction was decided"
