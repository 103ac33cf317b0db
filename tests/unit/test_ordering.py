"""The parallel run's order (tests/support/ordering.py): every worker's share
starts with long tests, the longest spread first, and nothing is lost or doubled."""

from __future__ import annotations

from typing import Any, cast

import pytest

from tests.support.ordering import LONG_TESTS, spread_long_tests


class Item:
    def __init__(self, name: str, slow: bool = False) -> None:
        self.name = self.originalname = name
        self.slow = slow

    def get_closest_marker(self, mark: str) -> object | None:
        return object() if mark == "slow" and self.slow else None


def shares(order: list[Any], workers: int) -> list[list[str]]:
    """The contiguous slices worksteal hands out, as names."""
    out, left, pos = [], len(order), 0
    for n in range(workers, 0, -1):
        size = left // n
        out.append([i.name for i in order[pos:pos + size]])
        pos, left = pos + size, left - size
    return out


def test_the_longest_tests_open_different_shares() -> None:
    longest = sorted(LONG_TESTS, key=LONG_TESTS.__getitem__, reverse=True)
    items = [Item(f"fast{i}") for i in range(40)] + [Item(n, slow=True) for n in longest]
    items += [Item(f"slow{i}", slow=True) for i in range(6)]
    order = spread_long_tests(cast(Any, items), 4)
    assert sorted(i.name for i in order) == sorted(i.name for i in items)
    firsts = [share[0] for share in shares(order, 4)]
    assert sorted(firsts) == sorted(longest[:4])  # one of the four longest each
    for share in shares(order, 4):  # long ones first, then the rest in their order
        kinds = [n.startswith("fast") for n in share]
        assert kinds == sorted(kinds)
        fast = [int(n[4:]) for n in share if n.startswith("fast")]
        assert fast == sorted(fast)


@pytest.mark.parametrize("workers", [2, 3, 4, 7])
def test_more_long_tests_than_room_still_keeps_every_test_once(workers: int) -> None:
    items = [Item(f"slow{i}", slow=True) for i in range(10)] + [Item("fast")]
    order = spread_long_tests(cast(Any, items), workers)
    assert sorted(i.name for i in order) == sorted(i.name for i in items)
