"""Transactions v2 on a 3-node cluster (real processes): the partitions a
transaction writes are led by brokers other than its coordinator, so each
Produce v12 makes its leader add the partition with AddPartitionsToTxn v5 sent
to the coordinator, and the markers at the bumped epoch go out with
WriteTxnMarkers. A zombie's late batch to such a partition, once its
transaction's marker is there, is refused, and a read_committed consumer sees
exactly the committed transactions."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.wire.errors import ErrorCode
from odradek.wire.messages.end_txn_request import EndTxnRequest
from odradek.wire.messages.find_coordinator_request import FindCoordinatorRequest
from odradek.wire.messages.init_producer_id_request import InitProducerIdRequest
from odradek.wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from odradek.wire.records import Record, build_batch
from tests.integration.test_transactions_v2 import finalized
from tests.integration.txnclients import high_watermark, lso, produce_raw, read_confluent
from tests.support.cluster import LocalCluster, assert_no_tracebacks, running, wait_for
from tests.support.rawclient import RawClient

pytestmark = [pytest.mark.slow, pytest.mark.cluster, pytest.mark.timeout(240)]
E = ErrorCode
TOPIC = "v2-cluster"
TID = "v2-cluster-tid"


class Nodes:
    """A raw client per broker, and where things are (Metadata, FindCoordinator)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = RawClient(bootstrap)
        self.clients: dict[int, RawClient] = {}

    def address(self, node_id: int) -> str:
        resp = self.bootstrap.request(MetadataRequest(topics=[]), 12)
        broker = next(b for b in resp.brokers if b.node_id == node_id)
        return f"{broker.host}:{broker.port}"

    def client(self, node_id: int) -> RawClient:
        if node_id not in self.clients:
            self.clients[node_id] = RawClient(self.address(node_id))
        return self.clients[node_id]

    def leaders(self) -> dict[int, int]:
        def ask() -> dict[int, int] | None:
            resp = self.bootstrap.request(MetadataRequest(
                topics=[MetadataRequestTopic(name=TOPIC)]), 12)
            parts = {p.partition_index: p.leader_id for p in resp.topics[0].partitions}
            return parts if parts and all(v >= 0 for v in parts.values()) else None
        return wait_for("the topic's leaders", ask, 30)  # type: ignore[no-any-return]

    def coordinator(self, tid: str) -> int:
        def ask() -> int | None:
            resp = self.bootstrap.request(FindCoordinatorRequest(key=tid, key_type=1), 3)
            return int(resp.node_id) if resp.error_code == 0 else None
        return wait_for("the transaction coordinator", ask, 30)  # type: ignore[no-any-return]

    def close(self) -> None:
        for c in [self.bootstrap, *self.clients.values()]:
            c.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with running(LocalCluster(tmp_path, controllers=3)) as c:
        yield c
    assert_no_tracebacks(c)


def _retrying(call, what: str):  # type: ignore[no-untyped-def]
    """``call()`` again while it answers CONCURRENT_TRANSACTIONS or a coordinator
    that is still loading (as a client retries)."""
    retriable = {E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS,
                 E.COORDINATOR_NOT_AVAILABLE, E.NOT_ENOUGH_REPLICAS}
    deadline = time.monotonic() + 30
    while True:
        resp = call()
        code = resp if isinstance(resp, int) else resp.error_code
        if code not in retriable or time.monotonic() > deadline:
            return resp
        time.sleep(0.05)


def test_transactions_v2_across_brokers(cluster: LocalCluster) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 3, 1)])[TOPIC].result(30)
    # the first active controller finalizes the new cluster's levels
    wait_for("transaction.version 2", lambda: finalized(cluster.bootstrap)[0].get(
        "transaction.version") == 2, 30)
    nodes = Nodes(cluster.bootstrap)
    try:
        leaders = nodes.leaders()
        coordinator = nodes.coordinator(TID)
        txn = nodes.client(coordinator)
        init = _retrying(lambda: txn.request(InitProducerIdRequest(
            transactional_id=TID, transaction_timeout_ms=60000), 5), "init")
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch
        remote = [p for p, node in sorted(leaders.items()) if node != coordinator]
        assert remote, f"every partition is led by the coordinator {coordinator}: {leaders}"
        target = remote[0]
        leader = nodes.client(leaders[target])

        def produce(value: bytes, at_epoch: int, seq: int) -> int:
            batch = build_batch([Record(0, int(time.time() * 1000), None, value)],
                                producer_id=pid, producer_epoch=at_epoch, base_sequence=seq,
                                transactional=True)
            return int(_retrying(lambda: produce_raw(leader, TOPIC, target, batch, TID, 12)[0],
                                 "produce"))

        def end(commit: bool, at_epoch: int) -> tuple[int, int, int]:
            resp = _retrying(lambda: txn.request(EndTxnRequest(
                transactional_id=TID, producer_id=pid, producer_epoch=at_epoch,
                committed=commit), 5), "end")
            return resp.error_code, resp.producer_id, resp.producer_epoch

        # transaction 1 on a partition led elsewhere: added by its leader, committed
        assert produce(b"one", epoch, 0) == 0
        assert end(True, epoch) == (0, pid, epoch + 1)
        # the zombie of transaction 1, late (after its marker is in: before, the
        # partition takes a batch of the still open transaction unasked, as Kafka's)
        at = nodes.address(leaders[target])  # ListOffsets is answered by the leader
        wait_for("transaction 1's marker", lambda: lso(at, TOPIC, target)
                 == high_watermark(at, TOPIC, target), 30)
        assert produce(b"zombie", epoch, 1) == E.INVALID_PRODUCER_EPOCH
        # transaction 2 at the returned epoch, aborted; transaction 3 committed
        assert produce(b"two", epoch + 1, 0) == 0
        assert produce(b"zombie-2", epoch, 1) == E.INVALID_PRODUCER_EPOCH
        assert end(False, epoch + 1) == (0, pid, epoch + 2)
        assert produce(b"three", epoch + 2, 0) == 0
        assert end(True, epoch + 2) == (0, pid, epoch + 3)
    finally:
        nodes.close()
    from confluent_kafka import Producer

    plain = Producer({"bootstrap.servers": cluster.bootstrap})
    plain.produce(TOPIC, b"end", partition=target)
    assert plain.flush(20) == 0
    got = read_confluent(cluster.bootstrap, TOPIC, b"end", committed=True, partition=target,
                         timeout_s=60)
    assert [v for _, v in got] == [b"one", b"three", b"end"]
