"""A 3-node (or N-node) Odradek cluster for a client library's own test suite,
in the shape of :class:`tools.client_suites.broker.OdradekServer`.

The runner's ``--cluster N`` sets ``ODRADEK_SUITES_CLUSTER=N`` (and
``ODRADEK_SUITES_CONTROLLERS=separate`` for ``--controllers separate``); the
suites' plugins then build their brokers with :func:`make_server`, which gives
an :class:`OdradekClusterServer` instead of one ``odradek serve``: a
:class:`odradek.testing.cluster.LocalCluster` (each node ``odradek storage
format`` then ``odradek serve FILE`` in its own process), either N combined
nodes (``broker,controller``) or three controller-only nodes and N
broker-only ones, PLAINTEXT, with :data:`CLUSTER_SETTINGS`: the suites'
topics (auto-created, and ``__consumer_offsets`` and ``__transaction_state``)
at replication factor 3 with ``min.insync.replicas=2``; each broker
advertises its client listener as ``localhost:PORT`` (as one node does), and
the ACL rows of :mod:`tools.client_suites.security` are added when that
feature is on.

:meth:`OdradekClusterServer.start` returns once every broker answers
ApiVersions and one of them lists all N brokers in a Metadata answer (so a
topic at RF=3 can be placed). Only the PLAINTEXT transport is built as a
cluster; the plugins skip a test asking for another one, saying so.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

from tools.client_suites.broker import (
    BASE,
    OdradekServer,
    api_versions_answered,
    features_from_env,
)
from tools.client_suites.security import ACL, Login, render

ENV_CLUSTER = "ODRADEK_SUITES_CLUSTER"
"""Number of brokers the suites get (unset or 1: one ``odradek serve``)."""
ENV_CONTROLLERS = "ODRADEK_SUITES_CONTROLLERS"
"""``combined`` (the default: every node broker and controller) or ``separate``
(three controller-only nodes besides the brokers)."""

CLUSTER_SETTINGS = {
    **BASE,
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "min.insync.replicas": "2",
}
"""Every cluster node's settings besides the listeners and the quorum."""


def cluster_size() -> int:
    """The number of brokers the runner asked for (1 when not a cluster run)."""
    return max(1, int(os.environ.get(ENV_CLUSTER, "1") or "1"))


class OdradekClusterServer:
    """A :class:`LocalCluster` answering :class:`OdradekServer`'s interface:
    ``start()``, ``stop()``, ``bootstrap`` (every broker), ``port`` (the
    first broker's client port), ``log_tail()``."""

    def __init__(self, folder: Path, brokers: int, *, partitions: int = 4,
                 separate: bool = False, extra: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.brokers = brokers
        self.partitions = partitions
        self.separate = separate
        self.extra = extra or {}
        self.transport = "PLAINTEXT"
        self.certs = folder / "ssl"
        self._cluster: Any = None

    @property
    def port(self) -> int:
        assert self._cluster is not None, "start() first"
        port: int = self._cluster.brokers[0].client_port
        return port

    @property
    def ports(self) -> list[int]:
        assert self._cluster is not None, "start() first"
        return [n.client_port for n in self._cluster.brokers]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"localhost:{p}" for p in self.ports)

    def properties(self) -> dict[str, str]:
        """Every node's settings: :data:`CLUSTER_SETTINGS`, and the security
        table's ACL rows when that feature is on (as on one node)."""
        props = {"num.partitions": str(self.partitions), **CLUSTER_SETTINGS}
        if "acl" in features_from_env():
            login = Login()
            props.update(render(ACL, user=login.user, password=login.password))
        props.update(self.extra)
        return props

    def start(self, timeout_s: float = 90.0) -> OdradekClusterServer:
        from odradek.testing.cluster import LocalCluster

        self.folder.mkdir(parents=True, exist_ok=True)
        if self.separate:
            cluster = LocalCluster(self.folder, controllers=3, brokers=self.brokers,
                                   overrides=self.properties())
        else:
            cluster = LocalCluster(self.folder, controllers=self.brokers,
                                   overrides=self.properties())
        self._cluster = cluster
        for node in cluster.brokers:
            # As on one node (and Kafka's fixtures): the client listener is
            # advertised, so DescribeConfigs reports it as a static setting.
            with node.properties.open("a") as props:
                props.write(f"advertised.listeners=PLAINTEXT://localhost:{node.client_port}\n")
        cluster.format()
        cluster.start()
        deadline = time.monotonic() + timeout_s
        while not self._ready():
            dead = [n.node_id for n in cluster.nodes.values()
                    if n.proc is not None and n.proc.poll() is not None]
            if dead:
                tail = self.log_tail()
                self.stop()
                raise RuntimeError(f"cluster nodes {dead} exited:\n{tail}")
            if time.monotonic() > deadline:
                tail = self.log_tail()
                self.stop()
                raise RuntimeError(f"the cluster was not ready in {timeout_s:.0f} s:\n{tail}")
            time.sleep(0.2)
        return self

    def _ready(self) -> bool:
        """Every broker answers ApiVersions and the first lists all of them."""
        if not all(api_versions_answered(p, 1.0) for p in self.ports):
            return False
        return metadata_broker_count(self.port) >= self.brokers

    def stop(self) -> None:
        cluster, self._cluster = self._cluster, None
        if cluster is not None:
            cluster.stop()

    def log_tail(self, lines: int = 40) -> str:
        if self._cluster is None:
            return "(not running)"
        text: str = self._cluster.logs()
        return text


def _metadata(port: int, topics: list[str], timeout_s: float = 2.0) -> Any:
    """A Metadata v12 answer from 127.0.0.1:``port`` for ``topics`` (no
    auto-creation), or None on any failure."""
    from odradek.wire.frames import ClientConnection
    from odradek.wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic

    conn = ClientConnection("client-suites-setup")
    request = MetadataRequest(topics=[MetadataRequestTopic(name=t) for t in topics],
                              allow_auto_topic_creation=False)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
            sock.sendall(conn.send(request, 12))
            while (got := conn.next_response()) is None:
                data = sock.recv(65536)
                if not data:
                    return None
                conn.receive_data(data)
    except OSError:
        return None
    return got[1]


def metadata_broker_count(port: int) -> int:
    """How many brokers 127.0.0.1:``port`` lists in its Metadata (0 on failure)."""
    answer = _metadata(port, [])
    return 0 if answer is None else len(answer.brokers)


def topic_ready(ports: list[int], topic: str) -> bool:
    """Does every broker of ``ports`` know ``topic`` with a leader for each
    partition?"""
    for port in ports:
        answer = _metadata(port, [topic])
        if answer is None or not answer.topics:
            return False
        (found,) = answer.topics
        if found.error_code or not found.partitions or \
                any(p.error_code or p.leader_id < 0 for p in found.partitions):
            return False
    return True


def make_server(folder: Path, transport: str = "PLAINTEXT", *, mechanism: str | None = None,
                partitions: int = 4, single: dict[str, str] | None = None,
                ) -> OdradekServer | OdradekClusterServer:
    """The suite's broker: one ``odradek serve`` (with ``single``'s settings
    besides the usual ones), or a cluster when the runner asked for one
    (:data:`ENV_CLUSTER`; PLAINTEXT only)."""
    size = cluster_size()
    if size > 1:
        if transport.upper() != "PLAINTEXT":
            raise ValueError(f"a {transport} cluster is not built by the runner")
        return OdradekClusterServer(folder, size, partitions=partitions,
                                    separate=os.environ.get(ENV_CONTROLLERS) == "separate")
    return OdradekServer(folder, transport, mechanism=mechanism, partitions=partitions,
                         extra=single)


__all__ = ["CLUSTER_SETTINGS", "ENV_CLUSTER", "ENV_CONTROLLERS", "OdradekClusterServer",
           "cluster_size", "make_server", "metadata_broker_count", "topic_ready"]
