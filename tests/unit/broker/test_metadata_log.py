"""The metadata log's single-node backend, and handlers that answer from the
metadata log port alone, whichever backend is behind it (no broker, no sockets)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterable
from typing import Any, cast

from odradek.broker.control.broker_state import SingleNodeSessions
from odradek.broker.control.metadata_log import (
    JournalMetadataLog,
    MemoryJournal,
    QuorumDescription,
    ReplicaRow,
)
from odradek.broker.net.context import RequestContext
from odradek.common.clock import ManualClock
from odradek.metadata import controller
from odradek.metadata.image import Endpoint, MetadataImage
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from odradek.wire.messages.broker_registration_request import BrokerRegistrationRequest
from odradek.wire.messages.describe_quorum_request import DescribeQuorumRequest
from odradek.wire.messages.request_header import RequestHeader
from odradek.wire.messages.vote_request import VoteRequest


class Listener:
    """Records what the backend hands over, and what the journal held then."""

    def __init__(self, journal: MemoryJournal) -> None:
        self.journal = journal
        self.image = MetadataImage()
        self.applied: list[tuple[int, int]] = []
        """(records handed over, records in the journal at that moment)."""

    def apply(self, records: list[Any]) -> None:
        for record in records:
            self.image.replay(record)
        self.applied.append((len(records), len(self.journal.records)))

    def restore(self, records: Iterable[Any]) -> None:
        raise AssertionError("a journal has no snapshots")

    def caught_up(self, offset: int) -> None:
        pass

    def image_records(self) -> list[Any]:
        return list(self.image.to_records())

    def listener_endpoints(self) -> list[tuple[str, str, int]]:
        return [("PLAINTEXT", "h", 9092)]


def single_node() -> tuple[JournalMetadataLog, MemoryJournal, Listener]:
    journal = MemoryJournal()
    listener = Listener(journal)
    return JournalMetadataLog(journal, 1, ManualClock(1_000), listener), journal, listener


def registration() -> list[Any]:
    out = controller.register_broker(MetadataImage(), 1, [Endpoint("PLAINTEXT", "h", 9092)],
                                     uuid.UUID(int=1))
    assert not out.error
    return list(out.records)


def test_a_single_nodes_append_is_applied_only_once_the_journal_holds_it() -> None:
    log, _, listener = single_node()
    records = registration()
    asyncio.run(log.append(records))
    assert listener.applied == [(len(records), len(records))]  # journaled first
    assert 1 in listener.image.brokers
    assert log.end_offset() == log.applied == len(records)
    assert list(log.replay()) == records  # what the next start begins from


def test_a_single_nodes_next_offset_is_where_the_registration_lands() -> None:
    log, journal, listener = single_node()
    asyncio.run(log.append(registration()))  # a first incarnation
    at = log.next_offset()
    assert at == len(journal.records)
    outcome = controller.register_broker(listener.image, 1, [Endpoint("PLAINTEXT", "h", 1)],
                                         uuid.UUID(int=2), at_offset=at)
    asyncio.run(log.append(list(outcome.records)))
    offset = next(i for i, r in enumerate(journal.records)
                 if i >= at and type(r).__name__ == "RegisterBrokerRecord")
    assert listener.image.brokers[1].epoch == offset == at


def test_a_single_node_is_its_own_active_controller_and_names_no_voters() -> None:
    log, _, _ = single_node()
    assert log.is_local and log.is_leader and log.leader_id == 1
    assert log.voters == {} and log.active_since_ms == -1


def test_a_single_nodes_leader_never_changes() -> None:
    log, _, _ = single_node()
    started = time.monotonic()
    assert asyncio.run(log.view_change(0.05)) is False
    assert time.monotonic() - started >= 0.04  # it waited, it did not spin


def test_a_single_node_refuses_a_peers_raft_request() -> None:
    log, _, _ = single_node()
    answer = asyncio.run(log.serve(52, VoteRequest(), 2))
    assert answer.error_code == ErrorCode.INVALID_REQUEST


def test_a_single_node_refuses_other_brokers_registrations_and_heartbeats() -> None:
    sessions = SingleNodeSessions()
    reg = asyncio.run(sessions.register(BrokerRegistrationRequest(broker_id=2)))
    beat = asyncio.run(sessions.heartbeat(BrokerHeartbeatRequest(broker_id=2)))
    assert reg.error_code == beat.error_code == ErrorCode.INVALID_REQUEST


class FakeState:
    """The metadata port as DescribeQuorum reads it."""

    def __init__(self, metadata: Any) -> None:
        self.metadata = metadata


def describe(metadata: Any, version: int = 2) -> Any:
    from odradek.broker.handlers.k55_describe_quorum import handle

    ctx = RequestContext(cast(Any, FakeState(metadata)), version,
                         RequestHeader(request_api_key=55), "test")
    return asyncio.run(handle(ctx, DescribeQuorumRequest()))


def test_describe_quorum_on_a_single_node_answers_a_quorum_of_one() -> None:
    log, _, _ = single_node()
    asyncio.run(log.append(registration()))
    part = describe(log).topics[0].partitions[0]
    assert (part.error_code, part.leader_id, part.leader_epoch) == (0, 1, 1)
    assert part.high_watermark == log.end_offset() > 0
    assert [(v.replica_id, v.log_end_offset) for v in part.current_voters] == [
        (1, log.end_offset())]
    assert part.observers == []


class FakeQuorum:
    def __init__(self, view: QuorumDescription) -> None:
        self.view = view

    def describe(self) -> QuorumDescription:
        return self.view


def test_describe_quorum_answers_what_the_quorum_describes() -> None:
    nodes = [(1, "CONTROLLER", "h", 1), (2, "CONTROLLER", "h", 2)]
    view = QuorumDescription(1, 7, 42, replicas=[
        ReplicaRow(1, 42, 5, 5, voter=True), ReplicaRow(2, 40, 4, 3, voter=True),
        ReplicaRow(9, 41, 4, 4, voter=False)], nodes=nodes)
    answer = describe(FakeQuorum(view))
    part = answer.topics[0].partitions[0]
    assert (part.leader_id, part.leader_epoch, part.high_watermark) == (1, 7, 42)
    assert [v.replica_id for v in part.current_voters] == [1, 2]
    assert [(o.replica_id, o.log_end_offset) for o in part.observers] == [(9, 41)]
    assert [(n.node_id, n.listeners[0].port) for n in answer.nodes] == [(1, 1), (2, 2)]
    assert describe(FakeQuorum(view), version=1).nodes == []


def test_describe_quorum_on_a_follower_names_the_leader() -> None:
    view = QuorumDescription(3, 7, 42, "ask the leader, node 3")
    part = describe(FakeQuorum(view)).topics[0].partitions[0]
    assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert part.leader_id == 3 and part.current_voters == []
