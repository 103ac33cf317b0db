"""The metadata quorum's state under the names Strimzi's jmx_exporter rules
give Kafka's ``kafka.server:type=raft-metrics`` attributes
(``kafka_server_raftmetrics_<attribute>``, dashes as underscores; Kafka's
``kafka-2_0_0.yml`` example has no rule for them, so Strimzi's dashboards are
the reference), on every node:

- ``kafka_server_raftmetrics_current_state{current_state}``: 1 for this
  node's state, one of ``leader``, ``candidate``, ``prospective``,
  ``voted``, ``unattached``, ``follower``, ``observer`` (a node that is not a
  voter and follows or waits) and ``resigned``;
- ``kafka_server_raftmetrics_current_leader``: the quorum leader's node id
  (-1 unknown); ``…_current_vote``: the node voted for in this epoch (a
  leader or candidate: itself; -1 none); ``…_current_epoch``;
- ``kafka_server_raftmetrics_high_watermark`` and ``…_log_end_offset``:
  offsets of the ``__cluster_metadata`` log on this node;
- ``kafka_server_raftmetrics_commit_latency_avg`` / ``…_max``: ms from a
  metadata append to its commit, over the last 30-60 s (Kafka's 2 x 30 s
  windows; 0 when nothing was appended, as on a node that does not lead).

A cluster node reads its :class:`~odradek.raft.node.RaftNode` (through the
quorum driver); a single node's metadata log is a journal, a quorum of one
that it leads at its epoch, with high watermark and log end both the
journal's end. Read at scrape time; nothing is walked.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from odradek.broker.observe.kafka_metrics import BrokerView, Series
from odradek.common.metrics import Registry

if TYPE_CHECKING:
    from odradek.broker.control.broker_state import BrokerState

PREFIX = "kafka_server_raftmetrics_"
GAUGES = (
    ("current_leader", "The metadata quorum leader's node id (-1: unknown)"),
    ("current_vote", "The node this one voted for in the current epoch (-1: none)"),
    ("current_epoch", "The metadata quorum's epoch as this node knows it"),
    ("high_watermark", "The metadata log's high watermark on this node"),
    ("log_end_offset", "The metadata log's end offset on this node"),
    ("commit_latency_avg", "Average ms from a metadata append to its commit (2 x 30 s)"),
    ("commit_latency_max", "Largest ms from a metadata append to its commit (2 x 30 s)"),
)


def register(registry: Registry, broker: BrokerView) -> None:
    """Add the families of the module docstring to ``registry``."""
    registry.gauge(PREFIX + "current_state", "1 for this node's state in the metadata "
                   "quorum (Kafka's raft-metrics current-state)", ("current_state",),
                   read=lambda: _state(broker.state))
    for name, what in GAUGES:
        registry.gauge(PREFIX + name, what, read=functools.partial(_gauge, broker, name))


def _state(state: BrokerState | None) -> Series:
    view = quorum_view(state)
    return [] if view is None else [((view["current_state"],), 1.0)]


def _gauge(broker: BrokerView, name: str) -> Series:
    state = broker.state
    view = quorum_view(state)
    if view is None or state is None:
        return []
    if name.startswith("commit_latency_"):
        stat = state.controller_stats.commit_latency_ms
        now = state.clock.monotonic_ms()
        return [((), stat.avg(now) if name.endswith("avg") else stat.max(now))]
    return [((), float(view[name]))]


def quorum_view(state: BrokerState | None) -> dict[str, Any] | None:
    """This node's quorum state: ``current_state`` (a string), ``current_leader``,
    ``current_vote``, ``current_epoch``, ``high_watermark``, ``log_end_offset``;
    None before the metadata service is built."""
    if state is None:
        return None
    metadata = state.metadata
    driver = getattr(metadata, "driver", None)  # a cluster node's QuorumDriver
    if driver is None:  # a single node's journal: a quorum of one, led here
        end = metadata.end_offset()
        return {"current_state": "leader", "current_leader": state.node_id,
                "current_vote": state.node_id, "current_epoch": metadata.epoch,
                "high_watermark": end, "log_end_offset": end}
    from odradek.raft.node import Role

    raft = driver.raft
    role = raft.role
    voter = raft.is_voter
    if role is Role.LEADER:
        name, vote = "leader", raft.node_id
    elif role is Role.CANDIDATE:
        name, vote = "candidate", raft.node_id
    elif role is Role.PROSPECTIVE:
        name, vote = "prospective", raft.voted_id
    elif role is Role.RESIGNED:
        name, vote = "resigned", raft.voted_id
    elif not voter:
        name, vote = "observer", -1
    elif role is Role.FOLLOWER:
        name, vote = "follower", raft.voted_id
    else:
        name, vote = ("voted" if raft.voted_id >= 0 else "unattached"), raft.voted_id
    return {"current_state": name, "current_leader": driver.leader_id,
            "current_vote": vote, "current_epoch": raft.epoch,
            "high_watermark": raft.high_watermark, "log_end_offset": raft.log.end_offset}
