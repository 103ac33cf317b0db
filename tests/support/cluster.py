"""The cluster harness of the tests: :mod:`odradek.testing.cluster`, re-exported
(it lives in the package so that users, and ``odradek dev chaos``, can run it)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from odradek.testing.cluster import (
    LinkProxy,
    LocalCluster,
    Node,
    free_port,
    serve_command,
    wait_for,
)

__all__ = ["LinkProxy", "LocalCluster", "Node", "active_controller",
           "assert_no_tracebacks", "free_port", "quorum_leader", "running", "serve_command",
           "wait_for"]


@contextmanager
def running(cluster: LocalCluster) -> Iterator[LocalCluster]:
    """Format and start ``cluster``; stop it at the end. When the body fails, its
    nodes' logs are printed first (pytest shows them with the failure)."""
    cluster.format()
    cluster.start()
    try:
        yield cluster
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


def assert_no_tracebacks(cluster: LocalCluster) -> None:
    """No node hit an internal error: a traceback in a node's log is a bug (its
    last 4000 characters are shown)."""
    for node in cluster.nodes.values():
        text = node.log_path.read_text(errors="replace")
        assert "Traceback" not in text, f"node {node.node_id}:\n{text[-4000:]}"


def quorum_leader(bootstrap: str) -> int:
    """The quorum's active controller as DescribeQuorum names it, asked once of
    each broker of ``bootstrap`` in turn (a broker forwards it to the
    controller); -1 when none names one now. Metadata and DescribeCluster name a
    live broker instead, as Kafka's KRaft brokers do."""
    from odradek.wire.messages import describe_quorum_request as dq
    from tests.support.rawclient import RawClient

    request = dq.DescribeQuorumRequest([dq.TopicData("__cluster_metadata",
                                                     [dq.PartitionData(0)])])
    for address in filter(None, bootstrap.split(",")):
        try:
            raw = RawClient(address, timeout_s=10)
            try:
                resp = raw.request(request, 1)
            finally:
                raw.close()
        except (OSError, ConnectionError):
            continue
        part = resp.topics[0].partitions[0] if resp.topics else None
        if not resp.error_code and part is not None and not part.error_code and (
                part.leader_id >= 0):
            return int(part.leader_id)
    return -1


def active_controller(bootstrap: str, timeout_s: float = 30.0) -> int:
    """:func:`quorum_leader`, waiting (up to ``timeout_s``) while none is named."""
    leader: int = wait_for("the active controller",
                           lambda: ((c := quorum_leader(bootstrap)) >= 0 and c) or None,
                           timeout_s, 0.1)
    return leader
