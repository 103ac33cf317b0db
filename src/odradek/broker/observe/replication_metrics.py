"""The replication quotas' sensors under the names jmx_exporter gives Kafka's
``kafka.server:type=LeaderReplication`` and ``type=FollowerReplication``
MBeans (attribute ``byte-rate``, dashes as underscores):

- ``kafka_server_leaderreplication_byte_rate``: bytes per second this broker
  sent to followers for partitions its ``leader.replication.throttled.replicas``
  lists, over the replication quota windows;
- ``kafka_server_followerreplication_byte_rate``: bytes per second it fetched
  for partitions its ``follower.replication.throttled.replicas`` lists.

Read at scrape time from the two
:class:`~odradek.broker.replica.throttle.ReplicationQuota`\\ s (cluster nodes
only; a single node has no replication and exports nothing here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from odradek.broker.observe.kafka_metrics import Series
from odradek.common.metrics import Registry

if TYPE_CHECKING:
    from odradek.broker.replica.fetchers import ReplicaFetchers
    from odradek.broker.replica.manager import ReplicaManager
    from odradek.broker.replica.throttle import ReplicationQuota


class ReplicationView(Protocol):
    @property
    def replicas(self) -> ReplicaManager | None: ...
    @property
    def fetchers(self) -> ReplicaFetchers | None: ...


def register(registry: Registry, broker: ReplicationView) -> None:
    """Add the families of the module docstring to ``registry``."""
    def leader() -> Series:
        replicas = broker.replicas
        return _rate(replicas.leader_quota if replicas is not None else None)

    def follower() -> Series:
        fetchers = broker.fetchers
        return _rate(fetchers.quota if fetchers is not None else None)

    registry.gauge("kafka_server_leaderreplication_byte_rate",
                   "Bytes/s sent to followers for throttled replicas (Kafka's "
                   "LeaderReplication byte-rate)", read=leader)
    registry.gauge("kafka_server_followerreplication_byte_rate",
                   "Bytes/s fetched for throttled replicas (Kafka's FollowerReplication "
                   "byte-rate)", read=follower)


def _rate(quota: ReplicationQuota | None) -> Series:
    if quota is None:
        return []
    return [((), quota.measured(quota.now_ms()))]
