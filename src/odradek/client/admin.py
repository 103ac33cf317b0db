"""Admin requests of the client, shared by the CLI and the web console.

Each function sends one Kafka admin request (CreateTopics, DeleteTopics,
CreatePartitions, IncrementalAlterConfigs, DescribeConfigs, DescribeCluster,
DescribeQuorum) and turns a refusal into :class:`~odradek.client.connection.KafkaError`
(its message names the topic or the broker's own message). They work against
any Kafka-compatible broker; none reads anything but the protocol's answers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from odradek.client.client import KafkaClient
from odradek.client.connection import check
from odradek.wire.messages import describe_quorum_request as dq
from odradek.wire.messages.create_partitions_request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from odradek.wire.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from odradek.wire.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from odradek.wire.messages.describe_cluster_request import DescribeClusterRequest
from odradek.wire.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from odradek.wire.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
"""Config resource types (DescribeConfigs, IncrementalAlterConfigs), Kafka's numbers."""
SET, DELETE = 0, 1
"""IncrementalAlterConfigs operations."""

CONFIG_SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG",
}
"""DescribeConfigs ``config_source`` numbers and Kafka's names for them."""
DEFAULT_SOURCE = 5


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: str
    """A :data:`CONFIG_SOURCES` name (``UNKNOWN`` for a number not listed)."""
    read_only: bool
    sensitive: bool


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None
    fenced: bool = False


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    cluster_id: str
    controller: int
    brokers: list[BrokerInfo]


@dataclass(frozen=True, slots=True)
class QuorumReplica:
    node_id: int
    role: str
    """``leader``, ``voter`` or ``observer``."""
    log_end_offset: int
    lag: int
    last_fetch_ms_ago: int | None


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    leader: int
    epoch: int
    high_watermark: int
    replicas: list[QuorumReplica] = field(default_factory=list)


async def create_topic(client: KafkaClient, name: str, partitions: int = -1,
                       replication_factor: int = -1,
                       configs: dict[str, str] | None = None) -> tuple[int, int]:
    """Create ``name`` (-1: the broker's default); its (partitions, replication factor)."""
    resp = await client.request(CreateTopicsRequest(timeout_ms=30000, topics=[CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor,
        configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
    )]), 7, 2)
    (result,) = resp.topics
    check(result.error_code, result.error_message)
    return result.num_partitions, result.replication_factor


async def delete_topics(client: KafkaClient, names: list[str]) -> None:
    resp = await client.request(DeleteTopicsRequest(
        topics=[DeleteTopicState(name=n) for n in names], topic_names=list(names),
        timeout_ms=30000,
    ), 6)
    for r in resp.responses:
        check(r.error_code, r.error_message or f"topic {r.name!r}")


async def create_partitions(client: KafkaClient, topic: str, count: int) -> None:
    """Grow ``topic`` to ``count`` partitions in total."""
    resp = await client.request(CreatePartitionsRequest(timeout_ms=30000, topics=[
        CreatePartitionsTopic(name=topic, count=count, assignments=None)
    ]), 3)
    check(resp.results[0].error_code, resp.results[0].error_message)


async def alter_configs(client: KafkaClient, resource_type: int, name: str,
                        set_: dict[str, str], delete: list[str]) -> None:
    """IncrementalAlterConfigs: set ``set_``'s keys, delete (back to default) ``delete``'s."""
    ops = [AlterableConfig(name=k, config_operation=SET, value=v) for k, v in set_.items()]
    ops += [AlterableConfig(name=k, config_operation=DELETE, value=None) for k in delete]
    resp = await client.request(IncrementalAlterConfigsRequest(resources=[
        AlterConfigsResource(resource_type=resource_type, resource_name=name, configs=ops)
    ]), 1)
    check(resp.responses[0].error_code, resp.responses[0].error_message)


async def describe_configs(client: KafkaClient, resource_type: int,
                           names: list[str]) -> dict[str, list[ConfigEntry]]:
    """Every config of each resource, with its source, sorted by name."""
    resp = await client.request(DescribeConfigsRequest(resources=[
        DescribeConfigsResource(resource_type=resource_type, resource_name=n,
                                configuration_keys=None)
        for n in names
    ]), 4, 1)
    out: dict[str, list[ConfigEntry]] = {}
    for r in resp.results:
        check(r.error_code, r.error_message or r.resource_name)
        out[r.resource_name] = sorted((ConfigEntry(
            c.name, c.value, CONFIG_SOURCES.get(c.config_source, "UNKNOWN"), c.read_only,
            c.is_sensitive) for c in r.configs), key=lambda c: c.name)
    return out


async def describe_cluster(client: KafkaClient) -> ClusterInfo:
    """Cluster id, controller and brokers: DescribeCluster where the broker serves
    it, else Metadata (older brokers)."""
    if 60 in client.bootstrap.versions:
        resp = await client.request(DescribeClusterRequest(), 1)
        check(resp.error_code, resp.error_message)
        return ClusterInfo(resp.cluster_id, resp.controller_id, sorted(
            (BrokerInfo(b.broker_id, b.host, b.port, b.rack, b.is_fenced) for b in resp.brokers),
            key=lambda b: b.node_id))
    meta = await client.metadata([])
    return ClusterInfo(meta.cluster_id or "", meta.controller_id, sorted(
        (BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in meta.brokers),
        key=lambda b: b.node_id))


async def describe_quorum(client: KafkaClient) -> QuorumInfo | None:
    """The metadata quorum (DescribeQuorum); None where the broker does not serve
    it or answers an error (a single node)."""
    if 55 not in client.bootstrap.versions:
        return None
    request = dq.DescribeQuorumRequest([dq.TopicData("__cluster_metadata", [dq.PartitionData(0)])])
    resp = await client.request(request, 1)
    if resp.error_code or not resp.topics or not resp.topics[0].partitions:
        return None
    part = resp.topics[0].partitions[0]
    if part.error_code:
        return None
    now = int(time.time() * 1000)
    replicas = []
    for role, members in (("voter", part.current_voters), ("observer", part.observers)):
        for r in members:
            replicas.append(QuorumReplica(
                r.replica_id, "leader" if r.replica_id == part.leader_id else role,
                r.log_end_offset, max(0, part.high_watermark - r.log_end_offset),
                now - r.last_fetch_timestamp if r.last_fetch_timestamp >= 0 else None))
    return QuorumInfo(part.leader_id, part.leader_epoch, part.high_watermark, replicas)
