"""The Raft core's messages as Kafka's KRaft RPCs, and back.

| core message | Kafka API (version used between Odradek nodes) |
|---|---|
| VoteRequest/Response | Vote (52) v2: ``PreVote`` (KIP-996) |
| BeginEpochRequest/Response | BeginQuorumEpoch (53) v1: ``LeaderEndpoints`` (3) |
| EndEpochRequest/Response | EndQuorumEpoch (54) v0 |
| FetchRequest/Response | Fetch (1) v17 on ``__cluster_metadata-0`` (1); v12–16 served |
| FetchSnapshotRequest/Response | FetchSnapshot (59) v0, the whole snapshot in one answer |
| UpdateVoterRequest/Response | UpdateRaftVoter (82) v0 (2) |

(1) As Kafka 4's KRaft sends it: the topic by id (``METADATA_TOPIC_ID``, KIP-516),
``ReplicaState`` (``ReplicaId``, ``ReplicaEpoch`` -1; KIP-903), the partition's
``LastFetchedEpoch`` and ``ReplicaDirectoryId`` (the fetcher's directory id,
KIP-853, recorded by the leader for its voters), ``ClusterId``. Answers carry the
topic by id and by name (each version writes the one it has), ``HighWatermark``,
``DivergingEpoch``, ``CurrentLeader``, ``SnapshotId`` and, from v16, the
leader's CONTROLLER endpoint in ``NodeEndpoints``. A request of v12 (the topic by
name, the top-level ``ReplicaId``, no directory id: an earlier Odradek) is
served too; its fetcher's directory id is then the zero id (unknown).

(2) The answer's ``CurrentLeader`` names the leader, with its CONTROLLER endpoint.
(3) The new leader's own controller endpoints (KIP-853): a voter that moved
(restarted on another port) and won an election before its voter record was
updated is reached there for this epoch (:func:`announced_endpoint`).

Every request carries the cluster id (Vote, BeginQuorumEpoch, EndQuorumEpoch,
Fetch, FetchSnapshot and UpdateRaftVoter all have ``ClusterId``); a node answers a different one
with INCONSISTENT_CLUSTER_ID and does not let the core see the request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from odradek.broker.ports import METADATA_TOPIC, METADATA_TOPIC_ID
from odradek.raft import messages as rm
from odradek.raft.codec import decode_entries, encode_entries, encode_entry
from odradek.raft.log import Entry, Snapshot
from odradek.raft.voters import Endpoint
from odradek.wire.messages import begin_quorum_epoch_request as bq
from odradek.wire.messages import begin_quorum_epoch_response as bqr
from odradek.wire.messages import end_quorum_epoch_request as eq
from odradek.wire.messages import end_quorum_epoch_response as eqr
from odradek.wire.messages import fetch_request as fq
from odradek.wire.messages import fetch_response as fr
from odradek.wire.messages import fetch_snapshot_request as sq
from odradek.wire.messages import fetch_snapshot_response as sr
from odradek.wire.messages import update_raft_voter_request as uq
from odradek.wire.messages import update_raft_voter_response as ur
from odradek.wire.messages import vote_request as vq
from odradek.wire.messages import vote_response as vr

VERSIONS = {52: 2, 53: 1, 54: 0, 1: 17, 59: 0, 82: 0}
"""The version each API is sent at (the peers are Odradek nodes of this release)."""


def request_to_kafka(msg: Any, cluster_id: str,
                     own: tuple[Endpoint, ...] = ()) -> tuple[int, Any]:
    """(api key, Kafka request) for a core request; ``own``: the sender's
    controller endpoints (a BeginQuorumEpoch's ``LeaderEndpoints``)."""
    if isinstance(msg, rm.VoteRequest):
        return 52, vq.VoteRequest(cluster_id, msg.dst, [vq.TopicData(METADATA_TOPIC, [
            vq.PartitionData(0, msg.epoch, msg.src, last_offset_epoch=msg.last_epoch,
                             last_offset=msg.end_offset, pre_vote=msg.pre_vote,
                             voter_directory_id=msg.voter_directory_id)])])
    if isinstance(msg, rm.BeginEpochRequest):
        return 53, bq.BeginQuorumEpochRequest(cluster_id, msg.dst, [bq.TopicData(
            METADATA_TOPIC, [bq.PartitionData(0, leader_id=msg.src, leader_epoch=msg.epoch)])],
            [bq.LeaderEndpoint(e.name, e.host, e.port) for e in own])
    if isinstance(msg, rm.EndEpochRequest):
        return 54, eq.EndQuorumEpochRequest(cluster_id, [eq.TopicData(METADATA_TOPIC, [
            eq.PartitionData(0, msg.src, msg.epoch, list(msg.successors))])])
    if isinstance(msg, rm.FetchRequest):
        return 1, fetch_request(msg, cluster_id, VERSIONS[1])
    if isinstance(msg, rm.FetchSnapshotRequest):
        end, epoch = msg.snapshot_id
        return 59, sq.FetchSnapshotRequest(cluster_id, msg.src, topics=[sq.TopicSnapshot(
            METADATA_TOPIC, [sq.PartitionSnapshot(0, msg.epoch, sq.SnapshotId(end, epoch))])])
    if isinstance(msg, rm.UpdateVoterRequest):
        return 82, uq.UpdateRaftVoterRequest(
            cluster_id, msg.epoch, msg.src, msg.directory_id,
            [uq.Listener(e.name, e.host, e.port) for e in msg.endpoints],
            uq.KRaftVersionFeature(*msg.kraft_versions))
    raise TypeError(f"not a request: {msg!r}")


def fetch_request(msg: rm.FetchRequest, cluster_id: str, version: int) -> fq.FetchRequest:
    """The Kafka Fetch (v12 or later) for a core one, encodable at ``version``: the
    topic by name below v13, by id from it; ``ReplicaId`` below v15, ``ReplicaState``
    from it; the directory id from v17."""
    if version < 12:
        raise ValueError(f"Fetch v{version} cannot carry a Raft fetch (v12 at least)")
    part = fq.FetchPartition(0, msg.epoch, msg.fetch_offset, msg.last_fetched_epoch,
                             partition_max_bytes=1 << 20)
    if version >= 17:
        part.replica_directory_id = msg.directory_id
    topic = (fq.FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=[part]) if version >= 13
             else fq.FetchTopic(METADATA_TOPIC, partitions=[part]))
    req = fq.FetchRequest(cluster_id, max_wait_ms=0, min_bytes=0, topics=[topic])
    if version >= 15:
        req.replica_state = fq.ReplicaState(msg.src, -1)
    else:
        req.replica_id = msg.src
    return req


def request_from_kafka(api_key: int, req: Any, dst: int) -> Any:
    """The core request for a Kafka one addressed to node ``dst``; ValueError if it
    does not name ``__cluster_metadata-0``."""
    if api_key == 52:
        p = _only(req.topics, "topic_name", "partitions")
        return rm.VoteRequest(p.candidate_id, dst, p.candidate_epoch, p.last_offset_epoch,
                              p.last_offset, bool(getattr(p, "pre_vote", False)),
                              p.voter_directory_id)
    if api_key == 53:
        p = _only(req.topics, "topic_name", "partitions")
        return rm.BeginEpochRequest(p.leader_id, dst, p.leader_epoch)
    if api_key == 54:
        p = _only(req.topics, "topic_name", "partitions")
        return rm.EndEpochRequest(p.leader_id, dst, p.leader_epoch,
                                  tuple(p.preferred_successors))
    if api_key == 1:
        p = _only(req.topics, "topic", "partitions")
        src = req.replica_id if req.replica_id >= 0 else req.replica_state.replica_id
        return rm.FetchRequest(src, dst, p.current_leader_epoch, p.fetch_offset,
                               p.last_fetched_epoch, p.replica_directory_id)
    if api_key == 59:
        p = _only(req.topics, "name", "partitions")
        return rm.FetchSnapshotRequest(req.replica_id, dst, p.current_leader_epoch,
                                       (p.snapshot_id.end_offset, p.snapshot_id.epoch))
    if api_key == 82:
        feature = req.k_raft_version_feature
        return rm.UpdateVoterRequest(
            req.voter_id, dst, req.current_leader_epoch, req.voter_directory_id,
            tuple(Endpoint(x.name, x.host, x.port) for x in req.listeners),
            (feature.min_supported_version, feature.max_supported_version))
    raise ValueError(f"API {api_key} is not a Raft request")


def announced_endpoint(req: bq.BeginQuorumEpochRequest, listener: str,
                       ) -> tuple[int, int, tuple[str, int]] | None:
    """(leader id, epoch, (host, port)) a BeginQuorumEpoch v1 announces: the
    leader's endpoint on ``listener`` (else its first); None without one."""
    if not req.leader_endpoints or not req.topics or not req.topics[0].partitions:
        return None
    part = req.topics[0].partitions[0]
    found = next((e for e in req.leader_endpoints if e.name == listener),
                 req.leader_endpoints[0])
    return part.leader_id, part.leader_epoch, (found.host, found.port)


def is_metadata_topic(topic: Any, name_attr: str = "topic") -> bool:
    """Does a request's topic entry name ``__cluster_metadata``, by name (Fetch below
    v13, the other RPCs) or by id (Fetch v13+)?"""
    return (getattr(topic, name_attr) == METADATA_TOPIC
            or getattr(topic, "topic_id", None) == METADATA_TOPIC_ID)


def _only(topics: list[Any], name_attr: str, parts_attr: str) -> Any:
    if len(topics) != 1 or not is_metadata_topic(topics[0], name_attr):
        raise ValueError(f"expected exactly the {METADATA_TOPIC} topic")
    parts = getattr(topics[0], parts_attr)
    if len(parts) != 1:
        raise ValueError(f"expected exactly partition {METADATA_TOPIC}-0")
    part = parts[0]
    index = next(getattr(part, a) for a in ("partition_index", "partition", "index")
                 if hasattr(part, a))
    if index != 0:
        raise ValueError(f"expected exactly partition {METADATA_TOPIC}-0")
    return part


class EncodedEntries:
    """Entries as Fetch carries them, each encoded once and kept for the next
    follower asking (a leader with two followers encoded every entry twice: at
    100k partitions a restart's elections are ~100k records). An entry is
    looked up by value (a Raft log holds one entry per offset and epoch, but
    two quorums can share a process, as in the test suites), so a hit is always
    the same bytes; its batch carries the timestamp of its first send. Holds
    at most ``max_bytes`` of batches, the oldest let go first."""

    def __init__(self, max_bytes: int = 8 << 20) -> None:
        self.max_bytes = max_bytes
        self._batches: dict[Entry, bytes] = {}
        self._bytes = 0

    def __call__(self, entries: Sequence[Entry], now_ms: int) -> bytes:
        out = []
        for entry in entries:
            batch = self._batches.get(entry)
            if batch is None:
                batch = encode_entry(entry, now_ms)
                self._batches[entry] = batch
                self._bytes += len(batch)
                while self._bytes > self.max_bytes and len(self._batches) > 1:
                    oldest = next(iter(self._batches))
                    self._bytes -= len(self._batches.pop(oldest))
            out.append(batch)
        return b"".join(out)


def response_to_kafka(msg: Any, now_ms: int, version: int,
                      leader_endpoint: tuple[str, int] | None = None,
                      encode: Callable[[Sequence[Entry], int], bytes] = encode_entries,
                      ) -> Any:
    """The Kafka response, encodable at ``version``, for a core response.
    ``leader_endpoint`` (host, port) is the CONTROLLER endpoint of the leader the
    answer names, sent in a Fetch answer's ``NodeEndpoints`` from v16 (KIP-853:
    a fetcher learns where the leader is). ``encode`` makes a Fetch answer's
    records (:class:`EncodedEntries` keeps them for the next follower)."""
    if isinstance(msg, rm.VoteResponse):
        return vr.VoteResponse(0, [vr.TopicData(METADATA_TOPIC, [vr.PartitionData(
            0, msg.error, msg.leader_id, msg.epoch, msg.granted)])])
    if isinstance(msg, rm.BeginEpochResponse):
        return bqr.BeginQuorumEpochResponse(0, [bqr.TopicData(METADATA_TOPIC, [
            bqr.PartitionData(0, msg.error, msg.leader_id, msg.epoch)])])
    if isinstance(msg, rm.EndEpochResponse):
        return eqr.EndQuorumEpochResponse(0, [eqr.TopicData(METADATA_TOPIC, [
            eqr.PartitionData(0, msg.error, msg.leader_id, msg.epoch)])])
    if isinstance(msg, rm.FetchResponse):
        part = fr.PartitionData(
            0, msg.error, high_watermark=msg.high_watermark,
            current_leader=fr.LeaderIdAndEpoch(msg.leader_id, msg.epoch),
            records=encode(msg.entries, now_ms) if msg.entries else None)
        if msg.diverging is not None:
            part.diverging_epoch = fr.EpochEndOffset(*msg.diverging)
        if msg.snapshot_id is not None:
            part.snapshot_id = fr.SnapshotId(*msg.snapshot_id)
        answer = fr.FetchResponse(responses=[fr.FetchableTopicResponse(
            METADATA_TOPIC, METADATA_TOPIC_ID, partitions=[part])])
        if version >= 16 and leader_endpoint is not None and msg.leader_id >= 0:
            host, port = leader_endpoint
            answer.node_endpoints = [fr.NodeEndpoint(msg.leader_id, host, port)]
        return answer
    if isinstance(msg, rm.FetchSnapshotResponse):
        snap = msg.snapshot
        spart = sr.PartitionSnapshot(0, msg.error, current_leader=sr.LeaderIdAndEpoch(
            msg.leader_id, msg.epoch), unaligned_records=b"")
        if snap is not None:
            spart.snapshot_id = sr.SnapshotId(snap.end_offset, snap.epoch)
            spart.size = len(snap.payload)
            spart.unaligned_records = snap.payload
        return sr.FetchSnapshotResponse(topics=[sr.TopicSnapshot(METADATA_TOPIC, [spart])])
    if isinstance(msg, rm.UpdateVoterResponse):
        leader = ur.CurrentLeader(msg.leader_id, msg.epoch)
        if leader_endpoint is not None and msg.leader_id >= 0:
            leader.host, leader.port = leader_endpoint
        return ur.UpdateRaftVoterResponse(error_code=msg.error, current_leader=leader)
    raise TypeError(f"not a response: {msg!r}")


def response_from_kafka(api_key: int, resp: Any, request: Any) -> Any:
    """The core response to ``request`` (a core request) from its Kafka answer."""
    src, dst = request.dst, request.src
    if api_key == 52:
        p = _first(resp.topics, "partitions")
        err = resp.error_code or (p.error_code if p else 0)
        if p is None:
            return rm.VoteResponse(src, dst, -1, -1, False, request.pre_vote, err or 42)
        return rm.VoteResponse(src, dst, p.leader_epoch, p.leader_id, p.vote_granted,
                               request.pre_vote, err)
    if api_key in (53, 54):
        p = _first(resp.topics, "partitions")
        cls = rm.BeginEpochResponse if api_key == 53 else rm.EndEpochResponse
        if p is None:
            return cls(src, dst, -1, -1, resp.error_code or 42)
        return cls(src, dst, p.leader_epoch, p.leader_id, resp.error_code or p.error_code)
    if api_key == 1:
        p = _first(resp.responses, "partitions")
        if p is None or resp.error_code:
            return rm.FetchResponse(src, dst, -1, -1, request.fetch_offset,
                                    error=resp.error_code or 42)
        diverging = None
        if p.diverging_epoch.epoch >= 0 or p.diverging_epoch.end_offset >= 0:
            diverging = (p.diverging_epoch.epoch, p.diverging_epoch.end_offset)
        snapshot_id = None
        if p.snapshot_id.end_offset >= 0 and p.snapshot_id.epoch >= 0:
            snapshot_id = (p.snapshot_id.end_offset, p.snapshot_id.epoch)
        entries = tuple(decode_entries(bytes(p.records))) if p.records else ()
        return rm.FetchResponse(src, dst, p.current_leader.leader_epoch,
                                p.current_leader.leader_id, request.fetch_offset,
                                p.high_watermark, entries, diverging, snapshot_id, p.error_code)
    if api_key == 59:
        p = _first(resp.topics, "partitions")
        if p is None:
            return rm.FetchSnapshotResponse(src, dst, -1, -1, error=resp.error_code or 42)
        snap = None
        if not p.error_code and not resp.error_code:
            snap = Snapshot(p.snapshot_id.end_offset, p.snapshot_id.epoch,
                            bytes(p.unaligned_records or b""))
        return rm.FetchSnapshotResponse(src, dst, p.current_leader.leader_epoch,
                                        p.current_leader.leader_id, snap,
                                        resp.error_code or p.error_code)
    if api_key == 82:
        current = resp.current_leader
        return rm.UpdateVoterResponse(src, dst, current.leader_epoch, current.leader_id,
                                      resp.error_code)
    raise ValueError(f"API {api_key} is not a Raft response")


def leader_hint(resp: fr.FetchResponse) -> tuple[int, int, tuple[str, int]] | None:
    """(leader id, epoch, (host, port)) of the leader a Fetch answer (v16+) names
    with its endpoint; None when it names none."""
    p = _first(resp.responses, "partitions")
    if p is None or p.current_leader.leader_id < 0:
        return None
    found = node_endpoints(resp).get(p.current_leader.leader_id)
    return None if found is None else (p.current_leader.leader_id,
                                       p.current_leader.leader_epoch, found)


def node_endpoints(resp: fr.FetchResponse) -> dict[int, tuple[str, int]]:
    """The (host, port) of each node a Fetch answer's ``NodeEndpoints`` names (v16+;
    empty below)."""
    return {e.node_id: (e.host, e.port) for e in resp.node_endpoints if e.node_id >= 0}


def _first(topics: list[Any], parts_attr: str) -> Any:
    if not topics or not getattr(topics[0], parts_attr):
        return None
    return getattr(topics[0], parts_attr)[0]
