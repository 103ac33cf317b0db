"""``odradek serve --processes N``: the layout of N processes (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.broker.config import BrokerConfig, ConfigError
from odradek.cli.processes_layout import check_growth, controllers, plan


def _config(**props: str) -> BrokerConfig:
    return BrokerConfig.from_sources({k.replace("_", "."): v for k, v in props.items()})


def test_defaults_spread_over_consecutive_ports_and_subdirectories() -> None:
    plans = plan(BrokerConfig.from_sources(), 2)
    assert [p.node_id for p in plans] == [1, 2]
    assert [p.client_ports for p in plans] == [(9092,), (9093,)]
    # one controller below 3 processes: two voters would stop at either's loss
    assert plans[0].overrides["listeners"] == (
        "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9094")
    assert plans[1].overrides["listeners"] == "PLAINTEXT://127.0.0.1:9093"
    assert [p.overrides["process.roles"] for p in plans] == ["broker,controller", "broker"]
    assert all(p.overrides["controller.quorum.voters"] == "1@127.0.0.1:9094" for p in plans)
    assert [p.log_dirs for p in plans] == [[Path("odradek-data/process-0")],
                                           [Path("odradek-data/process-1")]]
    # the configuration is valid for each process as `odradek serve` reads it
    for p in plans:
        BrokerConfig.from_sources({}, p.overrides)


def test_three_controllers_at_most_the_rest_brokers() -> None:
    plans = plan(_config(node_id="10"), 5)
    assert [p.node_id for p in plans] == [10, 11, 12, 13, 14]
    assert [p.overrides["process.roles"] for p in plans] == (
        ["broker,controller"] * 3 + ["broker"] * 2)
    assert plans[0].overrides["controller.quorum.voters"] == (
        "10@127.0.0.1:9097,11@127.0.0.1:9098,12@127.0.0.1:9099")
    assert "CONTROLLER" not in plans[4].overrides["listeners"]
    assert [controllers(n) for n in (1, 2, 3, 16)] == [1, 1, 3, 3]


def test_every_listener_log_dir_advertised_and_metrics_port_moves() -> None:
    config = _config(
        listeners="PLAINTEXT://0.0.0.0:9092,SSL://:9192",
        advertised_listeners="PLAINTEXT://broker.example:9092,SSL://broker.example:9192",
        log_dirs="/a,/b", metadata_log_dir="/m",
        **{"odradek_metrics_listener": "127.0.0.1:8080"})
    p = plan(config, 3)[2]
    assert p.client_ports == (9094, 9194)
    assert p.overrides["listeners"] == (
        "PLAINTEXT://0.0.0.0:9094,SSL://:9194,CONTROLLER://127.0.0.1:9197")
    assert p.overrides["advertised.listeners"] == (
        "PLAINTEXT://broker.example:9094,SSL://broker.example:9194")
    assert p.overrides["log.dirs"] == "/a/process-2,/b/process-2"
    assert p.overrides["metadata.log.dir"] == "/m/process-2"
    assert p.overrides["odradek.metrics.listener"] == "127.0.0.1:8082"


def test_an_explicit_protocol_map_gets_the_controller_listener() -> None:
    config = _config(listeners="CLIENTS://127.0.0.1:9092",
                     listener_security_protocol_map="CLIENTS:PLAINTEXT")
    assert plan(config, 1)[0].overrides["listener.security.protocol.map"] == (
        "CLIENTS:PLAINTEXT,CONTROLLER:PLAINTEXT")


@pytest.mark.parametrize(("n", "props", "message"), [
    (0, {}, "--processes must be between 1 and 256, got 0"),
    (300, {}, "--processes must be between 1 and 256"),
    (2, {"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093"},
     "port 9093 would serve both listener SSL of process 0 and listener PLAINTEXT "
     "of process 1; choose ports at least 2 apart"),
    (2, {"listeners": "PLAINTEXT://127.0.0.1:9092", "odradek.metrics.listener": ":9094"},
     "port 9094 would serve both the controller listener of process 0 and the metrics"),
    (2, {"listeners": "PLAINTEXT://127.0.0.1:65535"}, "(above 65535)"),
    (2, {"listeners": "PLAINTEXT://127.0.0.1:0"}, "needs fixed ports"),
    (2, {"listeners": "CONTROLLER://127.0.0.1:9092"}, "a listener is named CONTROLLER"),
    (2, {"controller.quorum.voters": "1@127.0.0.1:9093", "process.roles": "broker,controller",
         "controller.listener.names": "C",
         "listeners": "PLAINTEXT://127.0.0.1:9092,C://127.0.0.1:9093"},
     "controller.quorum.voters is set"),
])
def test_bad_layouts_are_one_line(n: int, props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        plan(BrokerConfig.from_sources(props), n)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_growth_keeps_the_static_quorum() -> None:
    check_growth(2, 2)
    check_growth(1, 2)
    check_growth(3, 8)
    check_growth(4, 16)
    with pytest.raises(ConfigError, match="fewer would leave"):
        check_growth(4, 3)
    with pytest.raises(ConfigError, match=r"1 voter\(s\) and 3 would have 3"):
        check_growth(2, 3)
