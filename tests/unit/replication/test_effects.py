"""What a partition's state says changed (replication/effects.py ``Changed``), which
its shell acts on in one place (PartitionManager.act)."""

from __future__ import annotations

from odradek.replication.effects import Appended, Changed, ReplicaRead, hw_change


def test_an_append_written_at_once_is_readable_and_says_whether_the_hw_moved() -> None:
    assert Appended(first_offset=0, last_offset=0).changed == Changed.READABLE
    assert Appended(first_offset=0, last_offset=0, hw_moved=True).changed == (
        Changed.HW | Changed.READABLE)


def test_an_append_still_being_written_is_not_readable_yet() -> None:
    pending = Appended(first_offset=0, last_offset=0, write=object())  # type: ignore[arg-type]
    assert pending.changed == Changed.NONE and not pending.changed


def test_a_refused_or_duplicate_append_changes_nothing() -> None:
    assert Appended(error_code=47).changed == Changed.NONE
    assert Appended(first_offset=0, last_offset=0, duplicate=True).changed == Changed.NONE


def test_flush_messages_reached_is_said() -> None:
    assert Appended(first_offset=0, last_offset=3, flush_due=True).changed & Changed.FLUSH


def test_a_follower_fetch_says_whether_the_hw_moved_and_the_follower_may_join() -> None:
    assert ReplicaRead(0, (), 5, 0, 5).changed == Changed.NONE
    assert ReplicaRead(0, (), 5, 0, 5, hw_moved=True).changed == Changed.HW
    assert ReplicaRead(0, (), 5, 0, 5, hw_moved=True, expand=True).changed == (
        Changed.HW | Changed.ISR_ELIGIBLE)
    assert ReplicaRead(0, (), 5, 0, 5, expand=True).changed == Changed.ISR_ELIGIBLE
    assert hw_change(True) == Changed.HW and hw_change(False) == Changed.NONE
