"""odradek.common.intern: one shared value per key, the table bounded."""

from __future__ import annotations

from odradek.common.intern import Interner, identity_interner


def test_equal_keys_get_the_one_value_made_once() -> None:
    made: list[tuple[int, ...]] = []

    def make(key: tuple[int, ...]) -> list[int]:
        made.append(key)
        return list(key)

    lists: Interner[tuple[int, ...], list[int]] = Interner(make)
    first = lists((1, 2))
    assert lists(tuple([1, 2])) is first and first == [1, 2]
    assert lists((2, 1)) is not first
    assert made == [(1, 2), (2, 1)]


def test_the_first_key_seen_is_the_shared_value() -> None:
    sets: Interner[frozenset[int], frozenset[int]] = identity_interner()
    a = frozenset({1, 2})
    assert sets(a) is a and sets(frozenset([2, 1])) is a


def test_the_table_is_emptied_at_its_bound_and_old_values_stay_as_they_were() -> None:
    tuples: Interner[tuple[int, ...], tuple[int, ...]] = identity_interner(max_entries=2)
    a, b = tuples((1,)), tuples((2,))
    c = tuples((3,))  # the table was full: emptied, then holds (3,)
    assert a == (1,) and b == (2,) and c == (3,)
    assert tuples((3,)) is c
    fresh = (1, *())
    assert tuples(fresh) is fresh  # (1,) is no longer in the table: the new key is kept
