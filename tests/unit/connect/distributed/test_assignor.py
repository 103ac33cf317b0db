"""The incremental cooperative assignor, case by case (KIP-415 behaviour)."""

from __future__ import annotations

import pytest

from odradek.connect.distributed.assignor import IncrementalCooperativeAssignor, eager_assign
from odradek.connect.distributed.protocol import (
    CONFIG_MISMATCH,
    NO_ERROR,
    Assignment,
    ConnectorTaskId,
    WorkerState,
)
from tests.unit.connect.distributed.groupsim import Group

DELAY = 300_000


def three_workers(tasks: int = 6) -> Group:
    g = Group(DELAY, {"orders": tasks})
    for m in ("w1", "w2", "w3"):
        g.join(m)
    return g


def test_first_assignment_spreads_six_tasks_two_two_two() -> None:
    g = three_workers()
    answers = g.round(now_ms=0)
    assert g.task_counts() == {"w1": 2, "w2": 2, "w3": 2}
    assert g.connector_counts() == {"w1": 1, "w2": 0, "w3": 0}
    assert g.running() == g.wanted()
    assert all(a.error == NO_ERROR and a.delay_ms == 0 for a in answers.values())
    assert all(not a.revoked_tasks and not a.revoked_connectors for a in answers.values())
    assert {a.leader for a in answers.values()} == {"w1"}


def test_a_lost_worker_s_tasks_wait_for_the_delay_then_spread_one_one() -> None:
    g = three_workers()
    g.round(now_ms=0)
    lost = g.workers["w3"].tasks
    g.crash("w3")

    answers = g.round(now_ms=1_000)
    assert all(a.delay_ms == DELAY for a in answers.values())
    assert all(not a.tasks and not a.connectors for a in answers.values())
    assert g.task_counts() == {"w1": 2, "w2": 2}

    answers = g.round(now_ms=200_000)  # someone rejoined early: still held back
    assert all(a.delay_ms == DELAY + 1_000 - 200_000 for a in answers.values())
    assert g.task_counts() == {"w1": 2, "w2": 2}

    answers = g.round(now_ms=1_000 + DELAY)
    assert all(a.delay_ms == 0 for a in answers.values())
    assert g.task_counts() == {"w1": 3, "w2": 3}
    assert {t for a in answers.values() for t in a.tasks} == lost
    assert g.running() == g.wanted()


def test_a_worker_that_returns_within_the_delay_gets_its_tasks_back() -> None:
    g = three_workers()
    g.round(now_ms=0)
    lost = g.workers["w3"].tasks
    g.crash("w3")
    g.round(now_ms=1_000)
    # The restarted process joins with a new member id, the same REST URL and nothing running.
    g.join("w3-again", url="http://w3:8083")
    answers = g.round(now_ms=5_000)
    assert set(answers["w3-again"].tasks) == lost
    assert all(a.delay_ms == 0 for a in answers.values())
    assert g.task_counts() == {"w1": 2, "w2": 2, "w3-again": 2}


def test_a_member_rejoining_with_its_old_id_gets_its_work_back() -> None:
    g = three_workers()
    g.round(now_ms=0)
    lost = g.workers["w2"].tasks
    g.crash("w2")
    g.round(now_ms=10)
    g.join("w2", url="http://elsewhere:8083")
    answers = g.round(now_ms=20)
    assert set(answers["w2"].tasks) == lost


def test_a_fourth_worker_joins_revoke_first_then_assign_next_round() -> None:
    g = three_workers()
    g.round(now_ms=0)
    g.join("w4")

    first = g.round(now_ms=10)  # the revoking round: nothing is handed out
    revoked = {t for a in first.values() for t in a.revoked_tasks}
    assert len(revoked) == 1
    assert all(not a.tasks for a in first.values())
    assert g.task_counts() == {"w1": 2, "w2": 2, "w3": 1, "w4": 0}

    second = g.round(now_ms=20)  # the revokers rejoined without it
    assert set(second["w4"].tasks) == revoked
    assert all(not a.revoked_tasks for a in second.values())
    assert sorted(g.task_counts().values()) == [1, 1, 2, 2]
    assert g.running() == g.wanted()

    third = g.round(now_ms=30)  # settled: nothing moves any more
    assert all(a == Assignment(NO_ERROR, "w1", "http://w1:8083", g.config_offset)
               for a in third.values())


def test_a_deleted_connector_is_revoked_with_its_tasks() -> None:
    g = Group(DELAY, {"a": 2, "b": 2})
    g.join("w1")
    g.join("w2")
    g.round(now_ms=0)
    del g.configured["a"]
    answers = g.round(now_ms=10)
    revoked = {*(c for a in answers.values() for c in a.revoked_connectors),
               *(t for a in answers.values() for t in a.revoked_tasks)}
    assert revoked == {"a", ConnectorTaskId("a", 0), ConnectorTaskId("a", 1)}
    assert g.running() == g.wanted()


def test_fewer_tasks_revokes_the_extra_ones() -> None:
    g = three_workers()
    g.round(now_ms=0)
    g.configured["orders"] = 3
    answers = g.round(now_ms=10)
    revoked = {t for a in answers.values() for t in a.revoked_tasks}
    assert revoked == {ConnectorTaskId("orders", i) for i in (3, 4, 5)}
    assert g.running() == g.wanted()


def test_work_run_by_two_members_stays_with_one() -> None:
    assignor = IncrementalCooperativeAssignor(DELAY)
    both = Assignment(NO_ERROR, "w1", "u1", 1, ("c",), (ConnectorTaskId("c", 0),))
    members = {"w1": WorkerState("u1", 1, both), "w2": WorkerState("u2", 1, both)}
    answers = assignor.assign("w1", "u1", 1, members, {"c": 1}, now_ms=0)
    assert answers["w2"].revoked_connectors == ("c",)
    assert answers["w2"].revoked_tasks == (ConnectorTaskId("c", 0),)
    assert not answers["w1"].revoked_connectors and not answers["w1"].revoked_tasks


def test_a_leader_behind_a_member_answers_config_mismatch_and_changes_nothing() -> None:
    assignor = IncrementalCooperativeAssignor(DELAY)
    members = {"w1": WorkerState("u1", 5), "w2": WorkerState("u2", 9)}
    answers = assignor.assign("w1", "u1", 5, members, {"c": 2}, now_ms=0)
    assert answers == {m: Assignment(CONFIG_MISMATCH, "w1", "u1", 9) for m in members}


def test_zero_delay_reassigns_at_once() -> None:
    g = Group(0, {"c": 4})
    for m in ("w1", "w2"):
        g.join(m)
    g.round(now_ms=0)
    g.crash("w2")
    answers = g.round(now_ms=1)
    assert answers["w1"].delay_ms == 0
    assert g.running() == g.wanted()


def test_one_input_gives_one_output() -> None:
    members = {f"w{i}": WorkerState(f"http://w{i}", 3) for i in (3, 1, 2)}
    configured = {"b": 5, "a": 3, "c": 1}
    first = IncrementalCooperativeAssignor(DELAY).assign("w1", "u", 3, members, configured, 0)
    again = IncrementalCooperativeAssignor(DELAY).assign(
        "w1", "u", 3, dict(reversed(members.items())), dict(reversed(configured.items())), 0)
    assert first == again


def test_a_generation_gap_forgets_the_stale_history() -> None:
    g = three_workers()
    g.round(now_ms=0)
    w1 = g.workers["w1"].assignor
    g.crash("w3")
    # w1 did not lead generation 2: what it remembers from generation 1 is stale.
    members = g.metadata()
    answers = w1.assign("w1", "http://w1:8083", g.config_offset, members, g.configured,
                        now_ms=10, generation=3)
    assert all(a.delay_ms == 0 for a in answers.values())
    assert sum(len(a.tasks) for a in answers.values()) == 2


def test_negative_delay_is_refused() -> None:
    with pytest.raises(ValueError, match=r"scheduled\.rebalance\.max\.delay\.ms"):
        IncrementalCooperativeAssignor(-1)


def test_eager_assignment_deals_everything_round_robin() -> None:
    members = {m: WorkerState(f"http://{m}", 4) for m in ("w2", "w1", "w3")}
    answers = eager_assign("w1", "http://w1", 4, members, {"b": 2, "a": 3})
    # a, a-0, a-1, a-2, b, b-0, b-1 dealt to w1, w2, w3, w1, w2, w3, w1
    assert answers["w1"].connectors == ("a",)
    assert answers["w1"].tasks == (ConnectorTaskId("a", 2), ConnectorTaskId("b", 1))
    assert answers["w2"].connectors == ("b",)
    assert answers["w2"].tasks == (ConnectorTaskId("a", 0),)
    assert answers["w3"].tasks == (ConnectorTaskId("a", 1), ConnectorTaskId("b", 0))
    assert all(a.error == NO_ERROR and not a.revoked_tasks for a in answers.values())
    behind = eager_assign("w1", "http://w1", 3, members, {"a": 1})
    assert {a.error for a in behind.values()} == {CONFIG_MISMATCH}
