"""The cluster harness of the tests: :mod:`odradek.testing.cluster`, re-exported
(it lives in the package so that users, and ``odradek dev chaos``, can run it)."""

from __future__ import annotations

import time

from odradek.testing.cluster import (
    LinkProxy,
    LocalCluster,
    Node,
    free_port,
    serve_command,
    wait_for,
)

__all__ = ["LinkProxy", "LocalCluster", "Node", "active_controller", "free_port",
           "serve_command", "wait_for"]


def active_controller(bootstrap: str, timeout_s: float = 30.0) -> int:
    """The quorum's active controller, as DescribeQuorum names it (asked of the
    first broker of ``bootstrap``, which forwards it to the controller). Metadata
    and DescribeCluster name a live broker instead, as Kafka's KRaft brokers do.
    Waits (up to ``timeout_s``) while no controller answers."""
    from odradek.wire.messages import describe_quorum_request as dq
    from tests.support.rawclient import RawClient

    request = dq.DescribeQuorumRequest([dq.TopicData("__cluster_metadata",
                                                     [dq.PartitionData(0)])])
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            raw = RawClient(bootstrap, timeout_s=10)
            try:
                resp = raw.request(request, 1)
            finally:
                raw.close()
            part = resp.topics[0].partitions[0] if resp.topics else None
            if not resp.error_code and part is not None and not part.error_code and (
                    part.leader_id >= 0):
                return int(part.leader_id)
            last = resp
        except (OSError, ConnectionError) as exc:
            last = exc
        time.sleep(0.1)
    raise AssertionError(f"no active controller named within {timeout_s:g} s: {last}")
