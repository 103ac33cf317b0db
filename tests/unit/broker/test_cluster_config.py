"""KRaft cluster settings: the quorum voters, process roles and Kafka's listener
rules, checked through :class:`BrokerConfig` as ``odradek serve`` builds it."""

from __future__ import annotations

import pytest

from odradek.broker.cluster_config import QuorumVoter, parse_voters
from odradek.broker.config import DEFAULTS, BrokerConfig, ConfigError, Listener

# A three-node combined cluster, as Kafka's config/server.properties sets one up.
CLUSTER = {
    "node.id": "1",
    "process.roles": "broker,controller",
    "controller.quorum.voters": "1@localhost:9093,2@localhost:9095,3@localhost:9097",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
}
BROKER_ONLY = {
    "node.id": "4",
    "process.roles": "broker",
    "controller.quorum.voters": "1@localhost:9093",
    "listeners": "PLAINTEXT://127.0.0.1:9094",
    "controller.listener.names": "CONTROLLER",
}
CONTROLLER_ONLY = {
    "node.id": "1",
    "process.roles": "controller",
    "controller.quorum.voters": "1@localhost:9093",
    "listeners": "CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
}


def config(base: dict[str, str] | None = None, **changes: str) -> BrokerConfig:
    props = dict(base or {})
    props.update({k.replace("_", "."): v for k, v in changes.items()})
    return BrokerConfig.from_sources(props)


def error(base: dict[str, str] | None = None, **changes: str) -> str:
    with pytest.raises(ConfigError) as info:
        config(base, **changes)
    message = str(info.value)
    assert "\n" not in message
    return message


# -- the default stays a valid single node -------------------------------------------


def test_the_default_is_a_valid_single_node() -> None:
    c = BrokerConfig.from_sources()
    assert not c.is_cluster
    assert c.quorum_voters() == [] and c.quorum_bootstrap_servers() == []
    assert c.process_roles() == {"broker", "controller"}
    assert c.controller_listeners() == []
    assert c.client_listeners() == c.listeners() == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert c.client_advertised_listeners() == c.advertised_listeners()


def test_kafka_defaults_of_the_new_keys() -> None:
    c = BrokerConfig.from_sources()
    assert c.get_int("controller.quorum.election.timeout.ms") == 1000
    assert c.get_int("controller.quorum.fetch.timeout.ms") == 2000
    assert c.get_int("controller.quorum.election.backoff.max.ms") == 1000
    assert c.get_int("controller.quorum.request.timeout.ms") == 2000
    assert c.get_int("controller.quorum.append.linger.ms") == 25
    assert c.get_int("broker.heartbeat.interval.ms") == 2000
    assert c.get_int("broker.session.timeout.ms") == 9000
    assert c.get_int("metadata.max.idle.interval.ms") == 500
    assert c.get_int("metadata.log.max.record.bytes.between.snapshots") == 20971520
    assert c.get_int("metadata.log.max.snapshot.interval.ms") == 3600000
    assert DEFAULTS["listener.security.protocol.map"] == (
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
        "SASL_SSL:SASL_SSL")
    for key in ("controller.quorum.voters", "controller.quorum.bootstrap.servers",
                "controller.listener.names", "inter.broker.listener.name", "broker.rack",
                "metadata.log.dir"):
        assert c.get(key) == ""
    assert c.metadata_log_dir is None


@pytest.mark.parametrize("key", [
    "controller.quorum.election.timeout.ms", "controller.quorum.fetch.timeout.ms",
    "controller.quorum.election.backoff.max.ms", "controller.quorum.request.timeout.ms",
    "controller.quorum.append.linger.ms", "broker.heartbeat.interval.ms",
    "broker.session.timeout.ms", "metadata.max.idle.interval.ms",
    "metadata.log.max.record.bytes.between.snapshots", "metadata.log.max.snapshot.interval.ms",
])
def test_kraft_int_keys_must_be_integers(key: str) -> None:
    assert error(**{key: "soon"}) == f"{key}: expected an integer, got 'soon'"
    assert error(**{key: "-1"}).startswith(f"{key}: must")


# -- controller.quorum.voters ---------------------------------------------------------


def test_voters_parse_in_order() -> None:
    assert parse_voters(" 3@kafka-3:9093 , 1@10.0.0.1:19093,2@[::1]:9093") == [
        QuorumVoter(3, "kafka-3", 9093), QuorumVoter(1, "10.0.0.1", 19093),
        QuorumVoter(2, "::1", 9093),
    ]
    assert parse_voters("") == [] and parse_voters(" , ") == []


def test_voters_through_the_config() -> None:
    c = config(CLUSTER)
    assert c.is_cluster
    assert [v.node_id for v in c.quorum_voters()] == [1, 2, 3]
    assert c.quorum_voters()[1] == QuorumVoter(2, "localhost", 9095)


def test_ipv6_voter_in_brackets() -> None:
    c = config(CLUSTER, controller_quorum_voters="1@[fe80::1]:9093,2@[::1]:9095")
    assert c.quorum_voters() == [QuorumVoter(1, "fe80::1", 9093), QuorumVoter(2, "::1", 9095)]


@pytest.mark.parametrize(("voters", "says"), [
    ("localhost:9093", "bad entry 'localhost:9093', expected ID@HOST:PORT"),
    ("1@a@b:9093", "expected ID@HOST:PORT"),
    ("x@localhost:9093", "bad node id in 'x@localhost:9093'"),
    ("-1@localhost:9093", "bad node id"),
    ("1@localhost", "bad address in '1@localhost'"),
    ("1@localhost:", "bad port"),
    ("1@localhost:http", "bad port"),
    ("1@localhost:70000", "bad port in '1@localhost:70000', expected 1-65535"),
    ("1@localhost:0", "bad port"),
    ("1@:9093", "bad address"),
    ("1@::1:9093", "bad address"),  # IPv6 needs brackets
    ("1@[::1:9093", "bad address"),
    ("1@[nope]:9093", "'nope' in '1@[nope]:9093' is not an IPv6 address"),
    ("1@0.0.0.0:9093", "is not a routable address"),
])
def test_bad_voters(voters: str, says: str) -> None:
    message = error(CLUSTER, controller_quorum_voters=voters)
    assert message.startswith("controller.quorum.voters: ") and says in message


def test_duplicate_voter_ids() -> None:
    message = error(CLUSTER, controller_quorum_voters="1@a:9093,2@b:9093,1@c:9093")
    assert message == "controller.quorum.voters: node id 1 is listed twice"


def test_bootstrap_servers_parse() -> None:
    c = config(CLUSTER, controller_quorum_voters="",
               controller_quorum_bootstrap_servers="a:9093,[::1]:9094")
    assert c.is_cluster and not c.quorum_voters()  # a dynamic quorum (KIP-853)
    assert c.quorum_bootstrap_servers() == [("a", 9093), ("::1", 9094)]
    assert error(CLUSTER, controller_quorum_bootstrap_servers="a").startswith(
        "controller.quorum.bootstrap.servers: bad address")


# -- process.roles ----------------------------------------------------------------------


@pytest.mark.parametrize(("roles", "expected"), [
    ("broker,controller", {"broker", "controller"}),
    ("controller, broker", {"broker", "controller"}),
    ("BROKER,controller", {"broker", "controller"}),
])
def test_roles(roles: str, expected: set[str]) -> None:
    assert config(process_roles=roles).process_roles() == expected


def test_single_roles() -> None:
    assert config(BROKER_ONLY).process_roles() == {"broker"}
    assert config(CONTROLLER_ONLY).process_roles() == {"controller"}


@pytest.mark.parametrize(("roles", "says"), [
    ("", "process.roles: must name broker, controller or both"),
    (" , ", "process.roles: must name broker, controller or both"),
    ("broker,zookeeper", "process.roles: unknown role 'zookeeper' (broker or controller)"),
])
def test_bad_roles(roles: str, says: str) -> None:
    assert error(process_roles=roles) == says


def test_a_single_role_needs_a_quorum() -> None:
    for base in (BROKER_ONLY, CONTROLLER_ONLY):
        message = error(base, controller_quorum_voters="")
        assert message.startswith("controller.quorum.voters: process.roles=")
        assert "needs a controller quorum" in message
    # A dynamic quorum (bootstrap servers) is a quorum too.
    c = config(BROKER_ONLY, controller_quorum_voters="",
               controller_quorum_bootstrap_servers="localhost:9093")
    assert c.process_roles() == {"broker"}


# -- Kafka's listener and quorum rules ------------------------------------------------


def test_a_controller_must_be_a_voter() -> None:
    message = error(CLUSTER, node_id="5")
    assert message == ("controller.quorum.voters: node.id=5 must be one of the voters [1, 2, 3] "
                       "when process.roles contains controller")
    assert "node.id=7 must be one of the voters" in error(CONTROLLER_ONLY, node_id="7")


def test_a_cluster_controller_needs_controller_listener_names() -> None:
    message = error(CLUSTER, controller_listener_names="")
    assert message.startswith("controller.listener.names: must name a listener")
    # the same for a dynamic quorum
    message = error(CLUSTER, controller_listener_names="", controller_quorum_voters="",
                    controller_quorum_bootstrap_servers="localhost:9093")
    assert message.startswith("controller.listener.names: must name a listener")


def test_controller_listener_names_must_be_listeners_of_a_controller() -> None:
    message = error(CLUSTER, controller_listener_names="RAFT")
    assert message.startswith("controller.listener.names: RAFT is not one of the listeners")
    # Every name, not only the first (Kafka's rule), and names are case-insensitive.
    assert "SASL_SSL is not one of" in error(
        CLUSTER, controller_listener_names="controller,SASL_SSL")
    assert config(CLUSTER, controller_listener_names="controller").controller_listeners() == [
        Listener("CONTROLLER", "127.0.0.1", 9093)]


def test_controller_only_listens_only_for_controllers() -> None:
    message = error(CONTROLLER_ONLY, listeners="CONTROLLER://:9093,PLAINTEXT://:9092")
    assert message.startswith("listeners: PLAINTEXT is not in controller.listener.names")


def test_broker_only_rules() -> None:
    assert config(BROKER_ONLY).client_listeners() == [Listener("PLAINTEXT", "127.0.0.1", 9094)]
    assert error(BROKER_ONLY, node_id="1") == (
        "controller.quorum.voters: node.id=1 must not be a voter when process.roles=broker")
    assert error(BROKER_ONLY, controller_listener_names="").startswith(
        "controller.listener.names: must name the controllers' listener")
    message = error(BROKER_ONLY, listeners="PLAINTEXT://:9094,CONTROLLER://:9093")
    assert message.startswith("listeners: CONTROLLER is a controller listener")


def test_a_broker_needs_a_broker_listener() -> None:
    message = error(CLUSTER, listeners="CONTROLLER://127.0.0.1:9093")
    assert message.startswith("listeners: only controller listeners (CONTROLLER)")


def test_listeners_split_between_controllers_and_clients() -> None:
    c = config(CLUSTER)
    assert c.controller_listeners() == [Listener("CONTROLLER", "127.0.0.1", 9093)]
    assert c.client_listeners() == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    # advertised.listeners defaults to listeners; clients never see the controller's.
    assert [a.name for a in c.advertised_listeners()] == ["PLAINTEXT", "CONTROLLER"]
    assert c.client_advertised_listeners() == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    c = config(CLUSTER, advertised_listeners="PLAINTEXT://kafka-1:9092,CONTROLLER://kafka-1:9093")
    assert c.client_advertised_listeners() == [Listener("PLAINTEXT", "kafka-1", 9092)]


def test_every_listener_needs_a_security_protocol() -> None:
    message = error(listeners="INTERNAL://127.0.0.1:9092")
    assert message == "listener.security.protocol.map: no security protocol for listener INTERNAL"
    c = config(listeners="INTERNAL://127.0.0.1:9092",
               listener_security_protocol_map="INTERNAL:PLAINTEXT")
    assert c.client_listeners()[0].name == "INTERNAL"
    assert "listener EXTERNAL" in error(
        listeners="INTERNAL://127.0.0.1:9092", advertised_listeners="EXTERNAL://h:9092",
        listener_security_protocol_map="INTERNAL:PLAINTEXT")


def test_a_default_map_covers_controller_listeners_of_any_name() -> None:
    # Kafka's convenience: with the map left at its default, a controller listener
    # that it does not name is PLAINTEXT.
    c = config(CLUSTER, listeners="PLAINTEXT://127.0.0.1:9092,RAFT://127.0.0.1:9093",
               controller_listener_names="RAFT")
    assert [lis.name for lis in c.controller_listeners()] == ["RAFT"]
    message = error(CLUSTER, listeners="PLAINTEXT://127.0.0.1:9092,RAFT://127.0.0.1:9093",
                    controller_listener_names="RAFT",
                    listener_security_protocol_map="PLAINTEXT:PLAINTEXT")
    assert message == "listener.security.protocol.map: no security protocol for listener RAFT"


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"])
def test_every_kafka_security_protocol_is_served(protocol: str) -> None:
    c = config(listeners=f"{protocol}://127.0.0.1:9093")
    assert [lis.name for lis in c.listeners()] == [protocol]
    c = config(listeners="CLIENT://127.0.0.1:9093",
               listener_security_protocol_map=f"CLIENT:{protocol.lower()}")
    assert [lis.name for lis in c.listeners()] == ["CLIENT"]


def test_sasl_listeners_are_accepted() -> None:
    c = config(listeners="SASL_PLAINTEXT://127.0.0.1:9093")
    assert [lis.name for lis in c.listeners()] == ["SASL_PLAINTEXT"]


def test_bad_protocol_map() -> None:
    assert error(listener_security_protocol_map="PLAINTEXT").startswith(
        "listener.security.protocol.map: bad entry 'PLAINTEXT'")
    assert "unknown security protocol 'TLS'" in error(
        listener_security_protocol_map="PLAINTEXT:TLS")
    assert "listener PLAINTEXT is mapped twice" in error(
        listener_security_protocol_map="PLAINTEXT:PLAINTEXT,plaintext:PLAINTEXT")


def test_inter_broker_listener_name() -> None:
    assert config(CLUSTER, inter_broker_listener_name="plaintext").get(
        "inter.broker.listener.name") == "plaintext"
    assert error(CLUSTER, inter_broker_listener_name="CONTROLLER").startswith(
        "inter.broker.listener.name: CONTROLLER is a controller listener")
    assert error(CLUSTER, inter_broker_listener_name="REPLICATION").startswith(
        "inter.broker.listener.name: REPLICATION is not an advertised broker listener")


def test_a_valid_cluster_config() -> None:
    c = config(CLUSTER, broker_rack="eu-west-1a", metadata_log_dir="/var/kafka/meta")
    assert c.is_cluster and c.process_roles() == {"broker", "controller"}
    assert c.get("broker.rack") == "eu-west-1a"
    assert str(c.metadata_log_dir) == "/var/kafka/meta"
