"""Every check of Kafka's authorization table, asked with raw requests over a
real socket (for the APIs no client library reaches, and to pin the error
each refusal carries): without the ACL the request gets Kafka's error (and
changes nothing); given the ACL, it gets past the check.

Each case: the request, the version, where its error code is in the answer,
the bindings given first (an earlier check passed), the bindings that let
it through, and the error of a refusal."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from odradek.metadata.acls import CLUSTER_NAME, AclBinding
from odradek.testing.broker import Broker
from odradek.wire import envelope
from odradek.wire.errors import ErrorCode
from odradek.wire.messages import add_offsets_to_txn_request as aot
from odradek.wire.messages import add_partitions_to_txn_request as apt
from odradek.wire.messages import allocate_producer_ids_request as apid
from odradek.wire.messages import alter_client_quotas_request as acq
from odradek.wire.messages import alter_configs_request as alc
from odradek.wire.messages import alter_partition_reassignments_request as apr
from odradek.wire.messages import alter_partition_request as altp
from odradek.wire.messages import alter_replica_log_dirs_request as arl
from odradek.wire.messages import broker_heartbeat_request as bh
from odradek.wire.messages import consumer_group_describe_request as cgd
from odradek.wire.messages import consumer_group_heartbeat_request as cgh
from odradek.wire.messages import create_acls_request as cacl
from odradek.wire.messages import delete_acls_request as dacl
from odradek.wire.messages import describe_client_quotas_request as dcq
from odradek.wire.messages import describe_groups_request as dg
from odradek.wire.messages import describe_log_dirs_request as dld
from odradek.wire.messages import describe_producers_request as dp
from odradek.wire.messages import describe_quorum_request as dq
from odradek.wire.messages import describe_topic_partitions_request as dtp
from odradek.wire.messages import describe_transactions_request as dtx
from odradek.wire.messages import elect_leaders_request as el
from odradek.wire.messages import end_txn_request as et
from odradek.wire.messages import fetch_request as fr
from odradek.wire.messages import find_coordinator_request as fc
from odradek.wire.messages import heartbeat_request as hb
from odradek.wire.messages import init_producer_id_request as ipid
from odradek.wire.messages import join_group_request as jg
from odradek.wire.messages import leave_group_request as lg
from odradek.wire.messages import list_offsets_request as lo
from odradek.wire.messages import list_partition_reassignments_request as lpr
from odradek.wire.messages import metadata_request as md
from odradek.wire.messages import offset_commit_request as oc
from odradek.wire.messages import offset_delete_request as od
from odradek.wire.messages import offset_fetch_request as of
from odradek.wire.messages import offset_for_leader_epoch_request as ofle
from odradek.wire.messages import produce_request as pr
from odradek.wire.messages import sync_group_request as sg
from odradek.wire.messages import txn_offset_commit_request as toc
from odradek.wire.messages import write_txn_markers_request as wtm
from tests.integration.security.aclsupport import CLUSTER, GROUP, TOPIC, TXN, Op, allow
from tests.support.rawclient import RawClient

T, G, X = "t", "g", "txn"
Grant = Callable[[str], list[AclBinding]]
A = ErrorCode


def topic(*ops: int) -> Grant:
    return lambda p: allow(p, TOPIC, T, *ops)


def group(*ops: int) -> Grant:
    return lambda p: allow(p, GROUP, G, *ops)


def txn(*ops: int) -> Grant:
    return lambda p: allow(p, TXN, X, *ops)


def cluster(*ops: int) -> Grant:
    return lambda p: allow(p, CLUSTER, CLUSTER_NAME, *ops)


@dataclass
class Case:
    name: str
    request: Callable[[], Any]
    version: int
    code: Callable[[Any], int]
    grant: list[Grant]
    refused: int
    given: list[Grant] = field(default_factory=list)
    unchanged: Callable[[Broker, str], bool] | None = None
    """After the refusal: True when nothing changed."""


def _commit_topics(offset: int) -> list[oc.OffsetCommitRequestTopic]:
    return [oc.OffsetCommitRequestTopic(T, [oc.OffsetCommitRequestPartition(0, offset)])]


def _txn_commit_topics() -> list[toc.TxnOffsetCommitRequestTopic]:
    return [toc.TxnOffsetCommitRequestTopic(T, [toc.TxnOffsetCommitRequestPartition(0, 5)])]


def _not_committed(offset: int) -> Callable[[Broker, str], bool]:
    return lambda b, principal: _committed(b, principal) != offset


def _committed(b: Broker, principal: str) -> int:
    """The group's committed offset of the partition (read with DESCRIBE given
    for the read, taken back after)."""
    from odradek.metadata.acls import AclFilter
    probe = [*allow(principal, GROUP, G, Op.DESCRIBE), *allow(principal, TOPIC, T, Op.DESCRIBE)]
    b.create_acls(*probe)
    raw = RawClient(b.bootstrap_servers)
    try:
        got = raw.request(of.OffsetFetchRequest(groups=[of.OffsetFetchRequestGroup(
            G, topics=[of.OffsetFetchRequestTopics(T, [0])])]), 8)
    finally:
        raw.close()
        b.delete_acls(*[AclFilter(a.resource_type, a.name, a.pattern_type, a.principal, a.host,
                                  a.operation, a.permission) for a in probe])
    assert got.groups[0].error_code == 0
    return int(got.groups[0].topics[0].partitions[0].committed_offset)


CASES = [
    Case("produce-topic", lambda: pr.ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[
        pr.TopicProduceData(T, [pr.PartitionProduceData(0, None)])]), 9,
         lambda r: r.responses[0].partition_responses[0].error_code, [topic(Op.WRITE)],
         A.TOPIC_AUTHORIZATION_FAILED),
    Case("produce-transactional", lambda: pr.ProduceRequest(
        transactional_id=X, acks=-1, timeout_ms=1000, topic_data=[
            pr.TopicProduceData(T, [pr.PartitionProduceData(0, None)])]), 9,
         lambda r: r.responses[0].partition_responses[0].error_code, [txn(Op.WRITE)],
         A.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, given=[topic(Op.WRITE)]),
    Case("fetch-consumer", lambda: fr.FetchRequest(max_wait_ms=0, topics=[
        fr.FetchTopic(T, partitions=[fr.FetchPartition(0, fetch_offset=0)])]), 12,
         lambda r: r.responses[0].partitions[0].error_code, [topic(Op.READ)],
         A.TOPIC_AUTHORIZATION_FAILED),
    Case("fetch-metadata-log", lambda: fr.FetchRequest(replica_id=7, max_wait_ms=0, topics=[
        fr.FetchTopic("__cluster_metadata", partitions=[fr.FetchPartition(0, fetch_offset=0)])]),
         12, lambda r: r.error_code, [cluster(Op.CLUSTER_ACTION)],
         A.CLUSTER_AUTHORIZATION_FAILED),
    Case("fetch-follower", lambda: fr.FetchRequest(replica_id=7, max_wait_ms=0, topics=[
        fr.FetchTopic(T, partitions=[fr.FetchPartition(0, fetch_offset=0)])]), 12,
         lambda r: r.responses[0].partitions[0].error_code, [cluster(Op.CLUSTER_ACTION)],
         A.TOPIC_AUTHORIZATION_FAILED, given=[topic(Op.ALL)]),
    Case("list-offsets", lambda: lo.ListOffsetsRequest(replica_id=-1, topics=[
        lo.ListOffsetsTopic(T, [lo.ListOffsetsPartition(0, timestamp=-1)])]), 7,
         lambda r: r.topics[0].partitions[0].error_code, [topic(Op.DESCRIBE)],
         A.TOPIC_AUTHORIZATION_FAILED),
    Case("offset-for-leader-epoch", lambda: ofle.OffsetForLeaderEpochRequest(
        replica_id=-1, topics=[ofle.OffsetForLeaderTopic(T, [ofle.OffsetForLeaderPartition(
            0, leader_epoch=0)])]), 4,
         lambda r: r.topics[0].partitions[0].error_code, [topic(Op.DESCRIBE)],
         A.TOPIC_AUTHORIZATION_FAILED),
    Case("metadata-named", lambda: md.MetadataRequest([md.MetadataRequestTopic(name=T)]), 12,
         lambda r: r.topics[0].error_code, [topic(Op.DESCRIBE)], A.TOPIC_AUTHORIZATION_FAILED),
    Case("offset-commit-group", lambda: oc.OffsetCommitRequest(
        G, -1, "", topics=_commit_topics(5)), 8,
         lambda r: r.topics[0].partitions[0].error_code, [group(Op.READ), topic(Op.READ)],
         A.GROUP_AUTHORIZATION_FAILED, unchanged=_not_committed(5)),
    Case("offset-commit-topic", lambda: oc.OffsetCommitRequest(
        G, -1, "", topics=_commit_topics(6)), 8,
         lambda r: r.topics[0].partitions[0].error_code, [topic(Op.READ)],
         A.TOPIC_AUTHORIZATION_FAILED, given=[group(Op.READ)], unchanged=_not_committed(6)),
    Case("offset-fetch-group", lambda: of.OffsetFetchRequest(groups=[of.OffsetFetchRequestGroup(
        G, topics=[of.OffsetFetchRequestTopics(T, [0])])]), 8,
         lambda r: r.groups[0].error_code, [group(Op.DESCRIBE)], A.GROUP_AUTHORIZATION_FAILED),
    Case("offset-fetch-topic", lambda: of.OffsetFetchRequest(groups=[of.OffsetFetchRequestGroup(
        G, topics=[of.OffsetFetchRequestTopics(T, [0])])]), 8,
         lambda r: r.groups[0].topics[0].partitions[0].error_code, [topic(Op.DESCRIBE)],
         A.TOPIC_AUTHORIZATION_FAILED, given=[group(Op.DESCRIBE)]),
    Case("offset-delete-group", lambda: od.OffsetDeleteRequest(G, [od.OffsetDeleteRequestTopic(
        T, [od.OffsetDeleteRequestPartition(0)])]), 0,
         lambda r: r.error_code, [group(Op.DELETE)], A.GROUP_AUTHORIZATION_FAILED),
    Case("find-coordinator-group", lambda: fc.FindCoordinatorRequest(
        key_type=0, coordinator_keys=[G]), 4,
         lambda r: r.coordinators[0].error_code, [group(Op.DESCRIBE)],
         A.GROUP_AUTHORIZATION_FAILED),
    Case("find-coordinator-txn", lambda: fc.FindCoordinatorRequest(
        key_type=1, coordinator_keys=[X]), 4,
         lambda r: r.coordinators[0].error_code, [txn(Op.DESCRIBE)],
         A.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    Case("join-group", lambda: jg.JoinGroupRequest(
        G, 10000, 10000, "", None, "consumer", [jg.JoinGroupRequestProtocol("range", b"")]), 9,
         lambda r: r.error_code, [group(Op.READ)], A.GROUP_AUTHORIZATION_FAILED),
    Case("heartbeat", lambda: hb.HeartbeatRequest(G, 1, "m"), 4, lambda r: r.error_code,
         [group(Op.READ)], A.GROUP_AUTHORIZATION_FAILED),
    Case("sync-group", lambda: sg.SyncGroupRequest(G, 1, "m"), 5, lambda r: r.error_code,
         [group(Op.READ)], A.GROUP_AUTHORIZATION_FAILED),
    Case("leave-group", lambda: lg.LeaveGroupRequest(G, members=[lg.MemberIdentity("m")]), 5,
         lambda r: r.error_code, [group(Op.READ)], A.GROUP_AUTHORIZATION_FAILED),
    Case("describe-groups", lambda: dg.DescribeGroupsRequest([G]), 5,
         lambda r: r.groups[0].error_code, [group(Op.DESCRIBE)], A.GROUP_AUTHORIZATION_FAILED),
    Case("consumer-group-heartbeat", lambda: cgh.ConsumerGroupHeartbeatRequest(
        G, str(uuid.uuid4()), 0, None, None, 30000, [T], None, None, []), 1,
         lambda r: r.error_code, [group(Op.READ)], A.GROUP_AUTHORIZATION_FAILED,
         given=[topic(Op.DESCRIBE)]),
    Case("consumer-group-heartbeat-topics", lambda: cgh.ConsumerGroupHeartbeatRequest(
        G, str(uuid.uuid4()), 0, None, None, 30000, [T], None, None, []), 1,
         lambda r: r.error_code, [topic(Op.DESCRIBE)], A.TOPIC_AUTHORIZATION_FAILED,
         given=[group(Op.READ)]),
    Case("consumer-group-describe", lambda: cgd.ConsumerGroupDescribeRequest([G]), 1,
         lambda r: r.groups[0].error_code, [group(Op.DESCRIBE)], A.GROUP_AUTHORIZATION_FAILED),
    Case("init-producer-id-transactional", lambda: ipid.InitProducerIdRequest(X, 60000, -1, -1),
         4, lambda r: r.error_code, [txn(Op.WRITE)], A.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    Case("init-producer-id-idempotent", lambda: ipid.InitProducerIdRequest(None, 60000, -1, -1),
         4, lambda r: r.error_code, [cluster(Op.IDEMPOTENT_WRITE)],
         A.CLUSTER_AUTHORIZATION_FAILED),
    Case("add-partitions-to-txn-id", lambda: apt.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=X, v3_and_below_producer_id=1,
        v3_and_below_producer_epoch=0,
        v3_and_below_topics=[apt.AddPartitionsToTxnTopic(T, [0])]), 3,
         lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
         [txn(Op.WRITE)], A.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, given=[topic(Op.WRITE)]),
    Case("add-partitions-to-txn-topic", lambda: apt.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=X, v3_and_below_producer_id=1,
        v3_and_below_producer_epoch=0,
        v3_and_below_topics=[apt.AddPartitionsToTxnTopic(T, [0])]), 3,
         lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
         [topic(Op.WRITE)], A.TOPIC_AUTHORIZATION_FAILED, given=[txn(Op.WRITE)]),
    Case("add-offsets-to-txn-id", lambda: aot.AddOffsetsToTxnRequest(X, 1, 0, G), 3,
         lambda r: r.error_code, [txn(Op.WRITE)], A.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
         given=[group(Op.READ)]),
    Case("add-offsets-to-txn-group", lambda: aot.AddOffsetsToTxnRequest(X, 1, 0, G), 3,
         lambda r: r.error_code, [group(Op.READ)], A.GROUP_AUTHORIZATION_FAILED,
         given=[txn(Op.WRITE)]),
    Case("end-txn", lambda: et.EndTxnRequest(X, 1, 0, True), 3, lambda r: r.error_code,
         [txn(Op.WRITE)], A.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    Case("txn-offset-commit-id", lambda: toc.TxnOffsetCommitRequest(
        X, G, 1, 0, topics=_txn_commit_topics()), 3,
         lambda r: r.topics[0].partitions[0].error_code, [txn(Op.WRITE)],
         A.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, given=[group(Op.READ), topic(Op.READ)]),
    Case("txn-offset-commit-group", lambda: toc.TxnOffsetCommitRequest(
        X, G, 1, 0, topics=_txn_commit_topics()), 3,
         lambda r: r.topics[0].partitions[0].error_code, [group(Op.READ)],
         A.GROUP_AUTHORIZATION_FAILED, given=[txn(Op.WRITE), topic(Op.READ)]),
    Case("txn-offset-commit-topic", lambda: toc.TxnOffsetCommitRequest(
        X, G, 1, 0, topics=_txn_commit_topics()), 3,
         lambda r: r.topics[0].partitions[0].error_code, [topic(Op.READ)],
         A.TOPIC_AUTHORIZATION_FAILED, given=[txn(Op.WRITE), group(Op.READ)]),
    Case("describe-producers", lambda: dp.DescribeProducersRequest([dp.TopicRequest(T, [0])]), 0,
         lambda r: r.topics[0].partitions[0].error_code, [topic(Op.READ)],
         A.TOPIC_AUTHORIZATION_FAILED),
    Case("describe-transactions", lambda: dtx.DescribeTransactionsRequest([X]), 0,
         lambda r: r.transaction_states[0].error_code, [txn(Op.DESCRIBE)],
         A.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    Case("describe-topic-partitions", lambda: dtp.DescribeTopicPartitionsRequest(
        [dtp.TopicRequest(T)], 100, None), 0,
         lambda r: r.topics[0].error_code, [topic(Op.DESCRIBE)], A.TOPIC_AUTHORIZATION_FAILED),
    Case("alter-configs-topic", lambda: alc.AlterConfigsRequest([alc.AlterConfigsResource(
        2, T, [alc.AlterableConfig("retention.ms", "1000")])]), 2,
         lambda r: r.responses[0].error_code, [topic(Op.ALTER_CONFIGS)],
         A.TOPIC_AUTHORIZATION_FAILED,
         unchanged=lambda b, _p: "retention.ms" not in b.app.state.image.topics[T].configs),
    Case("alter-configs-broker", lambda: alc.AlterConfigsRequest([alc.AlterConfigsResource(
        4, "", [alc.AlterableConfig("log.cleaner.threads", "2")])]), 2,
         lambda r: r.responses[0].error_code, [cluster(Op.ALTER_CONFIGS)],
         A.CLUSTER_AUTHORIZATION_FAILED),
    Case("describe-log-dirs", lambda: dld.DescribeLogDirsRequest(None), 4,
         lambda r: r.error_code, [cluster(Op.DESCRIBE)], A.CLUSTER_AUTHORIZATION_FAILED),
    Case("alter-replica-log-dirs", lambda: arl.AlterReplicaLogDirsRequest([arl.AlterReplicaLogDir(
        "/nowhere", [arl.AlterReplicaLogDirTopic(T, [0])])]), 2,
         lambda r: r.results[0].partitions[0].error_code, [cluster(Op.ALTER)],
         A.CLUSTER_AUTHORIZATION_FAILED),
    Case("elect-leaders", lambda: el.ElectLeadersRequest(0, [el.TopicPartitions(T, [0])]), 2,
         lambda r: r.error_code, [cluster(Op.ALTER)], A.CLUSTER_AUTHORIZATION_FAILED),
    Case("alter-partition-reassignments", lambda: apr.AlterPartitionReassignmentsRequest(
        topics=[apr.ReassignableTopic(T, [apr.ReassignablePartition(0, None)])]), 0,
         lambda r: r.error_code, [cluster(Op.ALTER)], A.CLUSTER_AUTHORIZATION_FAILED),
    Case("list-partition-reassignments", lambda: lpr.ListPartitionReassignmentsRequest(
        topics=None), 0, lambda r: r.error_code, [cluster(Op.DESCRIBE)],
         A.CLUSTER_AUTHORIZATION_FAILED),
    Case("describe-client-quotas", lambda: dcq.DescribeClientQuotasRequest([], False), 1,
         lambda r: r.error_code, [cluster(Op.DESCRIBE_CONFIGS)], A.CLUSTER_AUTHORIZATION_FAILED),
    Case("alter-client-quotas", lambda: acq.AlterClientQuotasRequest([acq.EntryData(
        [acq.EntityData("user", "u")], [acq.OpData("producer_byte_rate", 1000.0, False)])]), 1,
         lambda r: r.entries[0].error_code, [cluster(Op.ALTER_CONFIGS)],
         A.CLUSTER_AUTHORIZATION_FAILED,
         unchanged=lambda b, _p: not b.app.state.image.client_quotas),
    Case("write-txn-markers", lambda: wtm.WriteTxnMarkersRequest([wtm.WritableTxnMarker(
        1, 0, True, [wtm.WritableTxnMarkerTopic(T, [0])], 0)]), 1,
         lambda r: r.markers[0].topics[0].partitions[0].error_code,
         [cluster(Op.ALTER, Op.CLUSTER_ACTION)], A.CLUSTER_AUTHORIZATION_FAILED),
    Case("broker-heartbeat", lambda: bh.BrokerHeartbeatRequest(9, 1, 0, False, False), 1,
         lambda r: r.error_code, [cluster(Op.CLUSTER_ACTION)], A.CLUSTER_AUTHORIZATION_FAILED),
    Case("allocate-producer-ids", lambda: apid.AllocateProducerIdsRequest(9, 1), 0,
         lambda r: r.error_code, [cluster(Op.CLUSTER_ACTION)], A.CLUSTER_AUTHORIZATION_FAILED),
    Case("alter-partition", lambda: altp.AlterPartitionRequest(9, 1, []), 3,
         lambda r: r.error_code, [cluster(Op.CLUSTER_ACTION)], A.CLUSTER_AUTHORIZATION_FAILED),
    Case("describe-quorum", lambda: dq.DescribeQuorumRequest([dq.TopicData(
        "__cluster_metadata", [dq.PartitionData(0)])]), 2, lambda r: r.error_code,
         [cluster(Op.DESCRIBE)], A.CLUSTER_AUTHORIZATION_FAILED),
    Case("envelope", lambda: envelope.wrap(dcq.DescribeClientQuotasRequest([], False), 1, "c",
                                           "User:someone", "127.0.0.1"), 0,
         lambda r: r.error_code, [cluster(Op.CLUSTER_ACTION)], A.CLUSTER_AUTHORIZATION_FAILED),
    Case("create-acls", lambda: cacl.CreateAclsRequest([cacl.AclCreation(
        2, "x", 3, "User:bob", "*", 3, 3)]), 3, lambda r: r.results[0].error_code,
         [cluster(Op.ALTER)], A.CLUSTER_AUTHORIZATION_FAILED,
         unchanged=lambda b, _p: not any(a.principal == "User:bob"
                                     for _i, a in b.app.state.image.acls)),
    Case("delete-acls", lambda: dacl.DeleteAclsRequest([dacl.DeleteAclsFilter(
        2, "x", 1, None, None, 1, 1)]), 3, lambda r: r.filter_results[0].error_code,
         [cluster(Op.ALTER)], A.CLUSTER_AUTHORIZATION_FAILED),
]


@pytest.fixture(scope="module")
def shared() -> Iterator[Broker]:
    from tests.integration.security.aclsupport import STANDARD
    with Broker(**{"authorizer.class.name": STANDARD}) as b:
        b.create_topic(T)
        yield b


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_refused_without_the_acl_and_let_through_with_it(shared: Broker, principal: str,
                                                         case: Case) -> None:
    from odradek.metadata.acls import AclFilter
    shared.delete_acls(AclFilter())
    raw = RawClient(shared.bootstrap_servers)
    try:
        for g in case.given:
            shared.create_acls(*g(principal))
        refused = case.code(raw.request(case.request(), case.version))
        assert refused == case.refused, (ErrorCode(refused).name, case.refused.name)
        if case.unchanged is not None:
            assert case.unchanged(shared, principal)
        for g in case.grant:
            shared.create_acls(*g(principal))
        passed = case.code(raw.request(case.request(), case.version))
        assert passed != case.refused, ErrorCode(passed).name
    finally:
        raw.close()
        shared.delete_acls(AclFilter())


# -- authorized-operations fields and filtered lists ---------------------------------

def _bits(*ops: int) -> int:
    return sum(1 << op for op in ops)


def test_authorized_operations_fields(shared: Broker, principal: str) -> None:
    from odradek.metadata.acls import AclFilter
    shared.delete_acls(AclFilter())
    raw = RawClient(shared.bootstrap_servers)
    try:
        shared.create_acls(*topic(Op.READ)(principal), *cluster(Op.DESCRIBE)(principal),
                           *group(Op.DESCRIBE)(principal))
        answer = raw.request(md.MetadataRequest(
            [md.MetadataRequestTopic(name=T)], include_cluster_authorized_operations=True,
            include_topic_authorized_operations=True), 10)
        assert answer.topics[0].topic_authorized_operations == _bits(Op.READ, Op.DESCRIBE)
        assert answer.cluster_authorized_operations == _bits(Op.DESCRIBE)
        answer = raw.request(md.MetadataRequest(None), 12)  # not asked for: INT_MIN
        assert [t.topic_authorized_operations for t in answer.topics] == [-(2**31)]
        answer = raw.request(dg.DescribeGroupsRequest([G], include_authorized_operations=True),
                             5)
        assert answer.groups[0].authorized_operations == _bits(Op.DESCRIBE)
    finally:
        raw.close()
        shared.delete_acls(AclFilter())


def test_all_topics_metadata_leaves_out_undescribable_topics(shared: Broker,
                                                            principal: str) -> None:
    from odradek.metadata.acls import AclFilter
    shared.delete_acls(AclFilter())
    shared.create_topic("other")
    raw = RawClient(shared.bootstrap_servers)
    try:
        assert raw.request(md.MetadataRequest(None), 12).topics == []
        shared.create_acls(*allow(principal, TOPIC, "other", Op.DESCRIBE))
        assert [t.name for t in raw.request(md.MetadataRequest(None), 12).topics] == ["other"]
        answer = raw.request(dtp.DescribeTopicPartitionsRequest([], 100, None), 0)
        assert [t.name for t in answer.topics] == ["other"]
    finally:
        raw.close()
        shared.delete_acls(AclFilter())


def test_list_transactions_lists_only_describable_ids(shared: Broker, principal: str) -> None:
    from confluent_kafka import Producer

    from odradek.metadata.acls import AclFilter
    from odradek.wire.messages import list_transactions_request as ltx
    shared.delete_acls(AclFilter())
    shared.create_acls(*topic(Op.WRITE)(principal), *txn(Op.WRITE)(principal),
                       *allow(principal, TXN, "hidden", Op.WRITE))
    for tid in (X, "hidden"):
        p = Producer({"bootstrap.servers": shared.bootstrap_servers, "transactional.id": tid})
        p.init_transactions(15)
    shared.delete_acls(AclFilter(TXN, "hidden"))
    raw = RawClient(shared.bootstrap_servers)
    try:
        answer = raw.request(ltx.ListTransactionsRequest([], [], -1), 1)
        assert [s.transactional_id for s in answer.transaction_states] == [X]
    finally:
        raw.close()
        shared.delete_acls(AclFilter())


def test_auto_creation_needs_create(shared: Broker, principal: str) -> None:
    from odradek.metadata.acls import AclFilter
    shared.delete_acls(AclFilter())
    raw = RawClient(shared.bootstrap_servers)
    ask = md.MetadataRequest([md.MetadataRequestTopic(name="auto-made")],
                             allow_auto_topic_creation=True)
    try:
        shared.create_acls(*allow(principal, TOPIC, "auto-made", Op.DESCRIBE))
        assert raw.request(ask, 12).topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert "auto-made" not in shared.app.state.image.topics
        shared.create_acls(*allow(principal, TOPIC, "auto-", Op.CREATE, prefixed=True))
        raw.request(ask, 12)
        assert "auto-made" in shared.app.state.image.topics
    finally:
        raw.close()
        shared.delete_acls(AclFilter())
