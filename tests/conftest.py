"""Settings for the whole suite.

Hypothesis runs derandomized by default (the ``ci`` profile): the examples of
each property test are a function of the test, so the suite cannot fail at
random, and a failure seen once is seen on every run. To hunt for new
failures locally, run with ``HYPOTHESIS_PROFILE=explore`` (random examples,
more of them); a failing example found that way becomes an explicit
``@example`` on the test.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, database=None,
                          print_blob=True)
settings.register_profile("explore", deadline=None, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

pytest_plugins = ["tests.support.ordering"]  # the long tests first, spread over workers


# -- tiers and parallel runs ---------------------------------------------------
#
# The suite runs under pytest-xdist (``scripts/test.sh``: ``-n 4``); most tests
# wait on sockets, so four workers on two cores keep both busy (each worker that
# runs a Spark test starts its own SparkSession). Tests marked ``timing`` assert
# a wall-clock bound, which four workers sharing two cores would stretch: the
# script runs them afterwards, alone. The fast tier (``scripts/test.sh --fast``)
# leaves out what is marked ``slow``: the Spark tests and the tests that run
# multi-node clusters (each node a process), listed here by file so a new test
# in those files is in the right tier without a marker of its own.

CLUSTER_FILES = frozenset({
    "test_chaos.py", "test_cluster.py", "test_cluster_restart.py",
    "test_controller_partition.py", "test_coordinator_partition.py",
    "test_replication.py",
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = item.path
        if "spark" in path.parts and "unit" not in path.parts:
            item.add_marker(pytest.mark.spark)
            item.add_marker(pytest.mark.slow)
        elif path.name in CLUSTER_FILES:
            item.add_marker(pytest.mark.cluster)
            item.add_marker(pytest.mark.slow)
