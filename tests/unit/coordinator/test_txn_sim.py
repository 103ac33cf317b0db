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
from tests.support.txn_sim_v2 import run_v2

SEEDS = range(int(os.environ.get("TXN_SIM_SEEDS", "30")))


@pytest.mark.parametrize("seed", SEEDS)
def test_no_transaction_ends_half_committed(seed: int) -> None:
    sim = run(seed)
    kinds = {e.split()[0] for e in sim.events}
    assert "crash" in kinds or len(sim.events) < 50, f"seed {seed}: no crash happened"
    assert sim.marks, f"seed {seed}: no transaction was decided"


@pytest.mark.parametrize("seed", SEEDS)
def test_v1_and_v2_clients_and_zombies_never_cross_transactions(seed: int) -> None:
    """Clients on transactions v1 and v2 (tests/support/txn_sim_v2.py): after every
    event, no zombie batch is in a partition and every v2 batch is ended by a
    marker at its epoch + 1; at the end, nothing is half committed."""
    sim = run_v2(seed)
    assert sim.marks, f"seed {seed}: no transaction was decided"
    assert sim.v2_ends, f"seed {seed}: no transactions v2 end happened"
    assert any(e.startswith("init") and "v2=False" in e for e in sim.events), (
        f"seed {seed}: no transactions v1 client")
