"""Transaction admin requests of the client (what ``kafka-transactions.sh`` sends).

* :func:`list_transactions`: ListTransactions to every broker (each lists the
  transactions it coordinates), as Kafka's admin client does;
* :func:`describe_transaction`: DescribeTransactions to the id's transaction
  coordinator (FindCoordinator key type 1);
* :func:`describe_producers`: DescribeProducers to each partition's leader;
* :func:`abort_transaction`: WriteTxnMarkers with an ABORT marker to the
  partition's leader (KIP-664: closing a hanging transaction by hand);
* :func:`find_hanging`: open transactions of partitions (DescribeProducers)
  older than a bound whose coordinator does not hold them, as
  ``kafka-transactions.sh find-hanging`` finds them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from odradek.client.client import KafkaClient
from odradek.client.connection import ClientError, KafkaError, check
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.describe_producers_request import (
    DescribeProducersRequest,
    TopicRequest,
)
from odradek.wire.messages.describe_transactions_request import DescribeTransactionsRequest
from odradek.wire.messages.list_transactions_request import ListTransactionsRequest
from odradek.wire.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)

RETRIES, RETRY_BACKOFF_S = 50, 0.2
"""A coordinator still loading is asked again for up to 10 s."""

# The newest version of each API this client is tested with.
MAX_VERSIONS = {
    "write_txn_markers": 1, "describe_producers": 0, "describe_transactions": 0,
    "list_transactions": 1,
}


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int
    partitions: list[tuple[str, int]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


async def list_transactions(
    client: KafkaClient, states: list[str] | None = None,
    producer_ids: list[int] | None = None, duration_ms: int | None = None,
) -> tuple[list[TransactionListing], list[str]]:
    """Every transaction of every broker, filtered, and the state filters the
    brokers did not know."""
    resp = await client.metadata([])
    listings: list[TransactionListing] = []
    unknown: list[str] = []
    for broker in sorted(resp.brokers, key=lambda b: b.node_id):
        conn = await client.node(broker.node_id)
        request = ListTransactionsRequest(
            state_filters=list(states or []), producer_id_filters=list(producer_ids or []),
            duration_filter=-1 if duration_ms is None else duration_ms)
        for _ in range(RETRIES):  # a coordinator loading its partitions, as Kafka's admin
            answer = await conn.request(request, MAX_VERSIONS["list_transactions"],
                                        0 if duration_ms is None else 1)
            if answer.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                break
            await asyncio.sleep(RETRY_BACKOFF_S)
        check(answer.error_code, f"listing transactions of broker {broker.node_id}")
        unknown += [s for s in answer.unknown_state_filters if s not in unknown]
        listings += [TransactionListing(t.transactional_id, t.producer_id, t.transaction_state,
                                        broker.node_id)
                     for t in answer.transaction_states]
    return sorted(listings, key=lambda t: t.transactional_id), unknown


async def describe_transaction(client: KafkaClient, transactional_id: str
                               ) -> TransactionDescription:
    """What the coordinator of ``transactional_id`` holds; KafkaError
    (TRANSACTIONAL_ID_NOT_FOUND) for an unknown id."""
    if not transactional_id:
        raise ClientError("the transactional id is empty")
    conn = await client.coordinator(transactional_id, key_type=1)
    resp = await conn.request(DescribeTransactionsRequest(transactional_ids=[transactional_id]),
                              MAX_VERSIONS["describe_transactions"])
    (t,) = resp.transaction_states
    check(t.error_code, f"transactional id {transactional_id!r}")
    node = next((n for n, a in client._nodes.items() if a == conn.address), -1)
    return TransactionDescription(
        t.transactional_id, node, t.transaction_state, t.producer_id, t.producer_epoch,
        t.transaction_timeout_ms, t.transaction_start_time_ms,
        sorted((d.topic, p) for d in t.topics for p in d.partitions))


async def describe_producers(
    client: KafkaClient, topic: str, leaders: dict[int, int]
) -> dict[int, list[ActiveProducer]]:
    """partition -> its active producers, asked of each partition's leader
    (``leaders``: partition -> leader id, from :meth:`KafkaClient.partitions`)."""
    out: dict[int, list[ActiveProducer]] = {}
    for leader in sorted(set(leaders.values())):
        if leader < 0:
            raise ClientError(f"a partition of {topic!r} has no leader")
        conn = await client.node(leader)
        parts = sorted(p for p, node in leaders.items() if node == leader)
        resp = await conn.request(DescribeProducersRequest(topics=[
            TopicRequest(name=topic, partition_indexes=parts)]),
            MAX_VERSIONS["describe_producers"])
        for t in resp.topics:
            for p in t.partitions:
                check(p.error_code, p.error_message or f"{topic}-{p.partition_index}")
                out[p.partition_index] = [ActiveProducer(
                    s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                    s.coordinator_epoch, s.current_txn_start_offset,
                ) for s in p.active_producers]
    return out


async def abort_transaction(
    client: KafkaClient, topic: str, partition: int, producer_id: int, producer_epoch: int,
    coordinator_epoch: int,
) -> None:
    """Write an ABORT marker of ``producer_id`` at ``producer_epoch`` to
    ``topic``-``partition`` through its leader."""
    leaders = await client.partitions(topic)
    if partition not in leaders:
        raise ClientError(f"topic {topic!r} has no partition {partition}")
    conn = await client.node(leaders[partition])
    resp = await conn.request(WriteTxnMarkersRequest(markers=[WritableTxnMarker(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
        coordinator_epoch=coordinator_epoch,
        topics=[WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])],
    )]), MAX_VERSIONS["write_txn_markers"], 1)
    for marker in resp.markers:
        for t in marker.topics:
            for p in t.partitions:
                check(p.error_code, f"abort marker for {t.name}-{p.partition_index}")


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """An open transaction of one partition (from its leader's DescribeProducers)."""

    topic: str
    partition: int
    producer: ActiveProducer


async def find_hanging(
    client: KafkaClient, leaders: dict[str, dict[int, int]], older_than_ms: int, now_ms: int,
) -> list[OpenTransaction]:
    """The hanging transactions of ``leaders`` (topic -> partition -> leader): a
    partition's open transaction (its producer's current transaction start
    offset is set) whose last write is older than ``older_than_ms`` and which
    its producer's transaction coordinator does not hold: no transactional id
    has the producer id, or the one that has it is at another epoch, not in an
    open state, or does not name this partition. Such a transaction holds the
    partition's last stable offset back until an ABORT marker is written
    (:func:`abort_transaction`)."""
    candidates = []
    for topic, parts in sorted(leaders.items()):
        described = await describe_producers(client, topic, parts)
        for partition, producers in sorted(described.items()):
            candidates += [OpenTransaction(topic, partition, pr) for pr in producers
                           if pr.current_txn_start_offset >= 0
                           and now_ms - pr.last_timestamp >= older_than_ms]
    if not candidates:
        return []
    listed, _ = await list_transactions(
        client, producer_ids=sorted({c.producer.producer_id for c in candidates}))
    holders = {}
    for t in listed:
        try:
            holders[t.producer_id] = await describe_transaction(client, t.transactional_id)
        except KafkaError:
            continue  # gone between the two requests: nothing holds the producer
    hanging = []
    for c in candidates:
        d = holders.get(c.producer.producer_id)
        held = (d is not None and d.producer_epoch == c.producer.producer_epoch
                and d.state in ("Ongoing", "PrepareCommit", "PrepareAbort")
                and (c.topic, c.partition) in d.partitions)
        if not held:
            hanging.append(c)
    return hanging
