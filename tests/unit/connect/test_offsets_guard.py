"""Altering a stopped connector's offsets waits for its tasks to have stopped.

A STOPPED connector's task configs are emptied at once, but its tasks stop
(and commit their last offsets) only when their workers rebalance, after
which they report UNASSIGNED. An alteration in between could be overwritten
by such a last commit, so it is answered 409 (try again), as in a rebalance.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from odradek.connect.distributed.statusrecords import Status
from odradek.connect.runtime import manage
from odradek.connect.runtime.dherder import DistributedHerder
from odradek.connect.runtime.herder import STARTED, STOPPED_TARGET
from odradek.connect.runtime.validation import RestError


def herder_with(statuses: dict[int, str]) -> DistributedHerder:
    """A distributed herder whose status topic holds ``statuses`` (task -> state)."""
    herder = object.__new__(DistributedHerder)
    table = {n: Status(state, None, "w:1", 3) for n, state in statuses.items()}
    herder.cluster = cast(Any, SimpleNamespace(task_statuses=lambda name: table))
    return herder


@pytest.mark.parametrize("states, shutting", [
    ({}, False),
    ({0: "UNASSIGNED", 1: "UNASSIGNED"}, False),
    ({0: "FAILED", 1: "UNASSIGNED"}, False),
    ({0: "UNASSIGNED", 1: "RUNNING"}, True),
    ({0: "PAUSED"}, True),
    ({0: "RESTARTING"}, True),
])
def test_a_task_still_reporting_running_or_paused_is_shutting_down(
        states: dict[int, str], shutting: bool) -> None:
    assert herder_with(states).tasks_shutting_down("c") is shutting


class Stub:
    """What manage's STOPPED check reads of a herder."""

    def __init__(self, target: str, shutting: bool) -> None:
        self.target, self.shutting = target, shutting

    def _get(self, name: str) -> Any:
        return SimpleNamespace(target=self.target)

    def tasks_shutting_down(self, name: str) -> bool:
        return self.shutting


def test_an_alteration_while_tasks_shut_down_is_answered_409() -> None:
    with pytest.raises(RestError) as err:
        manage._stopped(cast(Any, Stub(STOPPED_TARGET, shutting=True)), "c")
    assert err.value.code == 409 and "still shutting down" in str(err.value)


def test_a_running_connector_is_answered_400_and_a_stopped_one_passes() -> None:
    with pytest.raises(RestError) as err:
        manage._stopped(cast(Any, Stub(STARTED, shutting=False)), "c")
    assert err.value.code == 400 and "STOPPED" in str(err.value)
    manage._stopped(cast(Any, Stub(STOPPED_TARGET, shutting=False)), "c")
