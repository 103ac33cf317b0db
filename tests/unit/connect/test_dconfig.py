"""DistributedConfig: Kafka's names and defaults, the required settings, the
example file in config/."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.broker.config import read_properties
from odradek.connect.config import ConfigError
from odradek.connect.runtime.dconfig import DistributedConfig

ROOT = Path(__file__).resolve().parents[3]
BASE = {"group.id": "g", "config.storage.topic": "c", "offset.storage.topic": "o",
        "status.storage.topic": "s",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "listeners": "http://127.0.0.1:8083"}


def test_kafkas_defaults() -> None:
    c = DistributedConfig.parse(BASE)
    assert (c.group_id, c.config_topic, c.offset_topic, c.status_topic) == ("g", "c", "o", "s")
    assert (c.config_rf, c.offset_rf, c.status_rf) == (3, 3, 3)
    assert (c.offset_partitions, c.status_partitions) == (25, 5)
    assert c.connect_protocol == "sessioned"
    assert c.max_delay_ms == 300000
    assert (c.session_timeout_ms, c.heartbeat_interval_ms, c.rebalance_timeout_ms) == (
        10000, 3000, 60000)
    assert c.worker.flush_interval_ms == 60000
    assert c.advertised_url("127.0.0.1", 8083) == "http://127.0.0.1:8083"


def test_advertised_host_and_port_win() -> None:
    c = DistributedConfig.parse({**BASE, "rest.advertised.host.name": "w1.example",
                                 "rest.advertised.port": "9000"})
    assert c.advertised_url("127.0.0.1", 8083) == "http://w1.example:9000"


@pytest.mark.parametrize("key", ["group.id", "config.storage.topic", "offset.storage.topic",
                                 "status.storage.topic", "value.converter"])
def test_a_missing_required_setting_is_named(key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        DistributedConfig.parse({k: v for k, v in BASE.items() if k != key})


@pytest.mark.parametrize(("key", "value"), [
    ("connect.protocol", "chatty"), ("offset.storage.replication.factor", "-2"),
    ("status.storage.partitions", "0"), ("heartbeat.interval.ms", "often"),
    ("rest.advertised.listener", "https")])
def test_a_bad_value_is_named(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        DistributedConfig.parse({**BASE, key: value})


def test_the_example_file_is_a_one_broker_dev_cluster() -> None:
    c = DistributedConfig.parse(read_properties(ROOT / "config" / "connect-distributed.properties"))
    assert (c.config_rf, c.offset_rf, c.status_rf) == (1, 1, 1)
    assert c.worker.port == 8083
