"""The per-turn budget of a connection (odradek.broker.net.turns)."""

from __future__ import annotations

from odradek.broker.net.turns import TurnBudget


def serve(budget: TurnBudget, times: list[float]) -> list[bool]:
    """For each request beginning at one of ``times``: was the budget spent first?"""
    out = []
    for now in times:
        out.append(budget.spent(now))
        budget.begin()
    return out


def test_spent_after_max_requests_when_they_are_quick() -> None:
    budget = TurnBudget(max_requests=3, max_s=1.0)
    budget.start(10.0)
    assert serve(budget, [10.0, 10.0001, 10.0002, 10.0003]) == [False, False, False, True]


def test_spent_once_the_time_is_up() -> None:
    budget = TurnBudget(max_requests=100, max_s=0.001)
    budget.start(5.0)
    assert serve(budget, [5.0, 5.0005, 5.001]) == [False, False, True]


def test_a_turn_always_serves_its_first_request() -> None:
    budget = TurnBudget(max_requests=100, max_s=0.001)
    budget.start(5.0)
    assert not budget.spent(7.0)  # woken late: the first request still begins


def test_start_gives_a_fresh_budget() -> None:
    budget = TurnBudget(max_requests=2, max_s=0.001)
    budget.start(0.0)
    assert serve(budget, [0.0, 0.0, 0.0]) == [False, False, True]
    budget.start(1.0)
    assert budget.served == 0
    assert serve(budget, [1.0, 1.0]) == [False, False]


def test_defaults_bound_both() -> None:
    budget = TurnBudget()
    assert 1 < budget.max_requests <= 1000 and 0 < budget.max_s <= 0.01
    budget.start(0.0)
    spent = serve(budget, [0.0] * (budget.max_requests + 1))
    assert spent[-1] and not any(spent[:-1])
