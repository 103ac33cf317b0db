"""The order of a parallel run: long tests first, spread over the workers.

Under ``--dist worksteal`` (scripts/test.sh) xdist hands worker i the i-th of
``workers`` contiguous slices of the collection, and a worker that runs dry
steals from the end of the longest queue. Collected in file order, the longest
tests (the chaos schedules: five minutes for one of them) would start last and
leave the other workers idle at the end. So each slice begins with its share
of the long tests, dealt longest first to the slice with the least estimated
time (the estimates below are this machine's durations, rounded), and is
filled up with the rest in their order; the steals even out the remainder.
The order is a function of the collection alone, the same on every worker, as
xdist requires.
"""

from __future__ import annotations

import pytest

LONG_TESTS = {
    "test_every_fault_five_times_and_every_check_holds": 300.0,
    "test_consumer_offsets_shrinks_after_100000_commits": 70.0,
    "test_restarts_lose_nothing": 55.0,
    "test_transactional_offset_commits_whichever_brokers_coordinate": 55.0,
}
"""Estimated seconds of the longest tests, by function name."""


@pytest.hookimpl(trylast=True)  # after the tier markers and ``-m``'s deselection
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    workerinput = getattr(config, "workerinput", None)
    workers = int(workerinput["workercount"]) if workerinput is not None else 0
    if workers > 1:
        items[:] = spread_long_tests(items, workers)


def _estimate(item: pytest.Item) -> float:
    name = getattr(item, "originalname", None) or item.name
    if name in LONG_TESTS:
        return LONG_TESTS[name]
    if item.get_closest_marker("spark") is not None:
        return 15.0
    if item.get_closest_marker("slow") is not None:
        return 8.0
    return 0.0


def spread_long_tests(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """``items`` reordered for ``workers`` xdist workers (see the module docstring)."""
    long = sorted((i for i in items if _estimate(i) > 0), key=_estimate, reverse=True)
    rest = [i for i in items if _estimate(i) == 0]
    sizes, left = [], len(items)
    for n in range(workers, 0, -1):  # the slice sizes worksteal hands out
        sizes.append(left // n)
        left -= sizes[-1]
    slices: list[list[pytest.Item]] = [[] for _ in range(workers)]
    load = [0.0] * workers
    for item in long:
        room = [k for k in range(workers) if len(slices[k]) < sizes[k]]
        k = min(room, key=lambda j: load[j])
        slices[k].append(item)
        load[k] += _estimate(item)
    pos = 0
    for k in range(workers):
        take = sizes[k] - len(slices[k])
        slices[k].extend(rest[pos:pos + take])
        pos += take
    return [item for part in slices for item in part]
