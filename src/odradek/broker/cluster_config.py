"""KRaft-style cluster settings: process roles, the controller quorum, and which
listener serves whom, parsed and checked the way Kafka 4's ``KafkaConfig`` does.

``controller.quorum.voters`` is Kafka's static quorum, ``id@host:port`` entries
separated by commas (an IPv6 host in brackets: ``1@[::1]:9093``).
``controller.listener.names`` names the listeners that speak to controllers;
the others serve clients, and only those are advertised to clients.

One departure from Kafka, on purpose: a node with
``process.roles=broker,controller`` and neither ``controller.quorum.voters`` nor
``controller.quorum.bootstrap.servers`` is Odradek's single-node mode (the
default), not a configuration error. It needs no controller listener. Every
rule about controller listeners applies once a quorum is configured, and a
broker-only or controller-only node must have one.

Security: PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL listeners are served
(TLS: ``broker/net/tls.py``; SASL: :mod:`odradek.broker.net.sasl`).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Protocol

from odradek.broker.listeners import ConfigError, Listener


class KraftSettings(Protocol):
    """What the KRaft rules read of a configuration (``BrokerConfig``)."""

    explicit: dict[str, str]

    @property
    def node_id(self) -> int: ...

    def get(self, key: str) -> str: ...

    def process_roles(self) -> frozenset[str]: ...

    def quorum_voters(self) -> list[QuorumVoter]: ...

    def quorum_bootstrap_servers(self) -> list[tuple[str, int]]: ...

    def controller_listener_names(self) -> list[str]: ...

    def listeners(self) -> list[Listener]: ...

    def advertised_listeners(self) -> list[Listener]: ...

    def client_advertised_listeners(self) -> list[Listener]: ...

ROLES = ("broker", "controller")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SERVED_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})

VOTERS = "controller.quorum.voters"
BOOTSTRAP = "controller.quorum.bootstrap.servers"
CONTROLLER_NAMES = "controller.listener.names"
PROTOCOL_MAP = "listener.security.protocol.map"
INTER_BROKER = "inter.broker.listener.name"
INTER_BROKER_PROTOCOL = "security.inter.broker.protocol"
ROLES_KEY = "process.roles"

_HOST_NAME = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass(frozen=True, slots=True)
class QuorumVoter:
    """One entry of ``controller.quorum.voters``."""

    node_id: int
    host: str
    port: int


def _items(text: str) -> list[str]:
    """A Kafka list value: comma separated, blanks around items ignored."""
    return [x.strip() for x in text.split(",") if x.strip()]


def parse_host_port(address: str, key: str, entry: str) -> tuple[str, int]:
    """``host:port`` or ``[ipv6]:port`` → (host, port); ConfigError naming ``key``."""
    shape = f"{key}: bad address in {entry!r}, expected HOST:PORT (an IPv6 host in brackets)"
    if address.startswith("["):
        host, sep, port_text = address[1:].partition("]:")
        if not sep:
            raise ConfigError(shape)
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ConfigError(f"{key}: {host!r} in {entry!r} is not an IPv6 address") from None
    else:
        host, sep, port_text = address.rpartition(":")
        if not sep or not _HOST_NAME.fullmatch(host):
            raise ConfigError(shape)
    if not (port_text.isascii() and port_text.isdigit()) or not 0 < int(port_text) < 65536:
        raise ConfigError(f"{key}: bad port in {entry!r}, expected 1-65535")
    return host, int(port_text)


def parse_voters(text: str) -> list[QuorumVoter]:
    """``1@host:9093,2@[::1]:9093`` → voters in the order given."""
    voters: list[QuorumVoter] = []
    for entry in _items(text):
        id_text, sep, address = entry.partition("@")
        if not sep or "@" in address:
            raise ConfigError(f"{VOTERS}: bad entry {entry!r}, expected ID@HOST:PORT")
        id_text = id_text.strip()
        if not (id_text.isascii() and id_text.isdigit()):
            raise ConfigError(f"{VOTERS}: bad node id in {entry!r}, expected an integer >= 0")
        node_id = int(id_text)
        host, port = parse_host_port(address.strip(), VOTERS, entry)
        if host == "0.0.0.0":  # a voter must be reachable
            raise ConfigError(f"{VOTERS}: {entry!r} is not a routable address")
        if any(v.node_id == node_id for v in voters):
            raise ConfigError(f"{VOTERS}: node id {node_id} is listed twice")
        voters.append(QuorumVoter(node_id, host, port))
    return voters


def parse_bootstrap_servers(text: str) -> list[tuple[str, int]]:
    """``host:port,host:port`` → addresses (KIP-853's dynamic quorum)."""
    return [parse_host_port(entry, BOOTSTRAP, entry) for entry in _items(text)]


def parse_roles(text: str) -> frozenset[str]:
    """``broker,controller`` → the roles; empty or unknown → ConfigError."""
    roles = [r.lower() for r in _items(text)]
    if not roles:
        raise ConfigError(f"{ROLES_KEY}: must name broker, controller or both")
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        raise ConfigError(f"{ROLES_KEY}: unknown role {unknown[0]!r} (broker or controller)")
    return frozenset(roles)


def parse_listener_names(text: str) -> list[str]:
    """Listener names, upper-cased as Kafka normalises them, in the order given."""
    return [name.upper() for name in _items(text)]


def parse_protocol_map(text: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` → {NAME: PROTOCOL}, both upper-cased."""
    out: dict[str, str] = {}
    for entry in _items(text):
        name, sep, protocol = (x.strip().upper() for x in entry.partition(":"))
        if not sep or not name:
            raise ConfigError(f"{PROTOCOL_MAP}: bad entry {entry!r}, expected NAME:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"{PROTOCOL_MAP}: unknown security protocol {protocol!r} "
                              f"in {entry!r} ({', '.join(SECURITY_PROTOCOLS)})")
        if name in out:
            raise ConfigError(f"{PROTOCOL_MAP}: listener {name} is mapped twice")
        out[name] = protocol
    return out


def effective_protocol_map(config: KraftSettings) -> dict[str, str]:
    """The map, plus, when it is left at its default, PLAINTEXT for every controller
    listener it does not name (Kafka's convenience for KRaft)."""
    mapping = parse_protocol_map(config.get(PROTOCOL_MAP))
    if PROTOCOL_MAP not in config.explicit:
        for name in config.controller_listener_names():
            mapping.setdefault(name, "PLAINTEXT")
    return mapping


def validate(config: KraftSettings) -> None:
    """Kafka's KRaft rules for roles, quorum and listeners; ConfigError, one line."""
    roles = config.process_roles()
    voter_ids = {v.node_id for v in config.quorum_voters()}
    has_quorum = bool(config.quorum_bootstrap_servers()) or bool(voter_ids)
    names = config.controller_listener_names()
    listener_names = [lis.name for lis in config.listeners()]
    node = config.node_id
    if roles != frozenset(ROLES) and not has_quorum:
        raise ConfigError(
            f"{VOTERS}: process.roles={','.join(sorted(roles))} needs a controller quorum: set "
            f"{VOTERS} or {BOOTSTRAP} (only broker,controller runs as a single node without one)")
    if "controller" in roles:
        if voter_ids and node not in voter_ids:
            raise ConfigError(f"{VOTERS}: node.id={node} must be one of the voters "
                              f"{sorted(voter_ids)} when process.roles contains controller")
        if has_quorum and not names:
            raise ConfigError(f"{CONTROLLER_NAMES}: must name a listener when process.roles "
                              f"contains controller and a controller quorum is configured")
        missing = [n for n in names if n not in listener_names]
        if missing:
            raise ConfigError(f"{CONTROLLER_NAMES}: {missing[0]} is not one of the listeners "
                              f"({', '.join(listener_names)}), as a controller needs")
    if roles == {"controller"}:
        others = [n for n in listener_names if n not in names]
        if others:
            raise ConfigError(f"listeners: {others[0]} is not in {CONTROLLER_NAMES}; a "
                              f"controller-only node has only controller listeners")
    if roles == {"broker"}:
        if node in voter_ids:
            raise ConfigError(f"{VOTERS}: node.id={node} must not be a voter when "
                              f"process.roles=broker")
        if not names:
            raise ConfigError(f"{CONTROLLER_NAMES}: must name the controllers' listener when "
                              f"process.roles=broker")
        inside = [n for n in names if n in listener_names]
        if inside:
            raise ConfigError(f"listeners: {inside[0]} is a controller listener "
                              f"({CONTROLLER_NAMES}); a broker-only node must not listen on it")
    if "broker" in roles and not config.client_advertised_listeners():
        raise ConfigError(f"listeners: only controller listeners ({', '.join(names)}) are "
                          f"configured; add a listener for the broker")
    _validate_protocols(config, names)
    _validate_inter_broker(config, names)


def _validate_protocols(config: KraftSettings, controller_names: list[str]) -> None:
    mapping = effective_protocol_map(config)
    named = [lis.name for lis in config.listeners() + config.advertised_listeners()]
    for name in dict.fromkeys(named + controller_names):
        protocol = mapping.get(name)
        if protocol is None:
            raise ConfigError(f"{PROTOCOL_MAP}: no security protocol for listener {name}")
        if protocol not in SERVED_PROTOCOLS:
            raise ConfigError(f"{PROTOCOL_MAP}: listener {name} uses {protocol}, which Odradek "
                              f"does not support yet ({', '.join(sorted(SERVED_PROTOCOLS))})")


def _validate_inter_broker(config: KraftSettings, controller_names: list[str]) -> None:
    name = config.get(INTER_BROKER).strip().upper()
    protocol = config.get(INTER_BROKER_PROTOCOL).strip().upper()
    if protocol and name:
        raise ConfigError(f"{INTER_BROKER}: set either it or {INTER_BROKER_PROTOCOL}, not both")
    if protocol:
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"{INTER_BROKER_PROTOCOL}: unknown security protocol "
                              f"{protocol!r} ({', '.join(SECURITY_PROTOCOLS)})")
        mapping = effective_protocol_map(config)
        if not any(mapping.get(lis.name) == protocol
                   for lis in config.client_advertised_listeners()):
            raise ConfigError(f"{INTER_BROKER_PROTOCOL}: no advertised broker listener uses "
                              f"{protocol}")
    if not name:
        return
    if name in controller_names:
        raise ConfigError(f"{INTER_BROKER}: {name} is a controller listener "
                          f"({CONTROLLER_NAMES}); brokers talk to each other on a broker listener")
    advertised = [lis.name for lis in config.client_advertised_listeners()]
    if name not in advertised:
        raise ConfigError(f"{INTER_BROKER}: {name} is not an advertised broker listener "
                          f"({', '.join(advertised)})")


def split_listeners(
    listeners: list[Listener], controller_names: list[str]
) -> tuple[list[Listener], list[Listener]]:
    """(controller listeners in ``controller.listener.names`` order, the others in order)."""
    by_name = {lis.name: lis for lis in listeners}
    controllers = [by_name[n] for n in controller_names if n in by_name]
    return controllers, [lis for lis in listeners if lis.name not in controller_names]
