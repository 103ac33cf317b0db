"""The reassignment throttle configs: Kafka's names, validation and parsing."""

from __future__ import annotations

import pytest

from odradek.metadata.broker_configs import broker_config_error, is_dynamic
from odradek.metadata.topic_configs import (
    TOPIC_CONFIGS,
    parse_throttled_replicas,
    validate_topic_config,
)

LISTS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


@pytest.mark.parametrize("value", ["*", "0:1", "0:1,1:2", " 0:101 , 1:102 ", ""])
def test_valid_throttled_replica_lists_are_accepted(value: str) -> None:
    for name in LISTS:
        assert validate_topic_config(name, value) is None


@pytest.mark.parametrize("value", ["0", "a:1", "0:b", "*,0:1", "0:1:2", "-1:1"])
def test_invalid_throttled_replica_lists_say_the_form(value: str) -> None:
    for name in LISTS:
        problem = validate_topic_config(name, value)
        assert problem is not None and "[PartitionId]:[BrokerId]" in problem


def test_a_list_names_the_partitions_of_one_broker_and_star_all() -> None:
    assert parse_throttled_replicas("0:1,1:2,2:1", 1) == frozenset({0, 2})
    assert parse_throttled_replicas("0:1,1:2", 3) == frozenset()
    assert parse_throttled_replicas(" * ", 3) is None


def test_the_lists_default_to_empty_and_the_rates_are_dynamic() -> None:
    assert all(TOPIC_CONFIGS[n].default == "" for n in LISTS)
    for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate"):
        assert is_dynamic(name)
        assert broker_config_error(name, "4000000") is None
        assert broker_config_error(name, "-5") is not None
    assert not is_dynamic("replication.quota.window.num")
