"""Request frames captured from real clients decode to what the clients were told to send.

The frames in ``tests/golden`` were recorded by ``tools/capture_frames.py``
(its docstring says how to re-run it) from confluent-kafka (librdkafka),
kafka-python and aiokafka, through its recording proxy in front of a real
broker advertising Kafka 4.0's ranges (or wider). ``manifest.json`` holds the
values each run was configured with (topic, group, client id, codec,
records, committed offset) and those the broker gave the client (producer
id, member id, generation, topic id), never values
read back from the request frames, so every check below compares our
decoding with an independent expectation.

Each frame is checked three ways: ``frames.parse_request`` decodes it to the
API and version the manifest names, with the configured values in it; for
Produce, ``odradek.wire.records`` decodes the record batches to exactly the
produced records, for every codec; and re-encoding the decoded header and
body at the same version gives back the captured bytes.

All captured frames round-trip byte-exactly: none of these clients writes a
tagged field (known or unknown) in these requests, and every field they write
is in Kafka's spec for that version. Should a re-capture bring one that is
not (our decoder drops unknown tags), list it in ``NOT_BYTE_EXACT`` with the
reason; the round-trip test then asserts semantic equality for it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from odradek.wire import api
from odradek.wire.batch import ATTR_COMPRESSION_MASK
from odradek.wire.compression import CODEC_NAMES
from odradek.wire.frames import Request, parse_request
from odradek.wire.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from odradek.wire.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from odradek.wire.messages.request_header import RequestHeader
from odradek.wire.records import decode_batches

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
MANIFEST: dict[str, Any] = json.loads((GOLDEN / "manifest.json").read_text())
FRAMES: list[dict[str, Any]] = MANIFEST["frames"]
RUNS: dict[str, dict[str, Any]] = MANIFEST["runs"]
CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")

# file -> why it cannot round-trip byte-exactly (empty: every frame does).
NOT_BYTE_EXACT: dict[str, str] = {}

# The (API, version) each client picked against the broker's advertisement (the
# "advertised" block of the manifest; Kafka 4.0's ranges or wider): the highest
# version both sides know. kafka-python 3 opens with ApiVersions v4, which the
# broker serves (it used to answer error 35 with the full list, KIP-511, and get
# v3); aiokafka knows only non-flexible versions (ApiVersions 0, Metadata 5,
# Produce 7 for its record format, Fetch 11, ListOffsets 3,
# OffsetCommit/OffsetFetch 3, JoinGroup 5, SyncGroup 3). No client sends
# CreateTopics: the drivers use no admin client (the capture tool creates the
# topic itself, not through the proxy).
NEGOTIATED: dict[str, dict[str, set[int]]] = {
    "confluent-kafka": {
        "ApiVersions": {3}, "Metadata": {13}, "Produce": {10}, "Fetch": {16},
        "ListOffsets": {7}, "FindCoordinator": {2}, "JoinGroup": {5}, "SyncGroup": {3},
        "Heartbeat": {3}, "LeaveGroup": {1}, "OffsetCommit": {8}, "OffsetFetch": {8},
        "InitProducerId": {4},
    },
    "kafka-python": {
        "ApiVersions": {4}, "Metadata": {13}, "Produce": {9}, "Fetch": {12},
        "ListOffsets": {10}, "FindCoordinator": {6}, "JoinGroup": {7}, "SyncGroup": {5},
        "Heartbeat": {4}, "LeaveGroup": {5}, "OffsetCommit": {8}, "OffsetFetch": {8},
        "InitProducerId": {4},
    },
    "aiokafka": {
        "ApiVersions": {0}, "Metadata": {5}, "Produce": {7}, "Fetch": {11},
        "ListOffsets": {3}, "FindCoordinator": {1}, "JoinGroup": {5}, "SyncGroup": {3},
        "Heartbeat": {1}, "LeaveGroup": {1}, "OffsetCommit": {3}, "OffsetFetch": {3},
        "InitProducerId": {0},
    },
}

# ApiVersions v3+ client software names (KIP-511), as each client reports itself.
SOFTWARE_NAMES = {"confluent-kafka": "confluent-kafka-python", "kafka-python": "kafka-python"}
KIP_511_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")

# confluent-kafka-python 2.16.1 passes the commit metadata to librdkafka with
# its C string terminator counted, so the wire carries "golden-meta\x00".
METADATA_SUFFIX = {"confluent-kafka": "\x00"}

CODEC_IDS = {name: codec for codec, name in CODEC_NAMES.items()}


def _ids(entries: list[dict[str, Any]]) -> list[str]:
    return [e["file"] for e in entries]


@cache
def _load(file: str) -> tuple[bytes, Request]:
    frame = (GOLDEN / file).read_bytes()
    req = parse_request(frame)
    assert isinstance(req, Request), req
    return frame, req


def _run(entry: dict[str, Any]) -> dict[str, Any]:
    return RUNS[entry["run"]]


# -- coverage -------------------------------------------------------------------


def test_the_set_is_small() -> None:
    total = sum((GOLDEN / e["file"]).stat().st_size for e in FRAMES)
    assert 2_000 < total < 64_000
    assert len({e["file"] for e in FRAMES}) == len(FRAMES)


@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_sent_the_core_apis_at_the_negotiated_versions(client: str) -> None:
    got: dict[str, set[int]] = {}
    for e in FRAMES:
        if _run(e)["client"] == client:
            got.setdefault(e["api"], set()).add(e["version"])
    assert {"ApiVersions", "Metadata", "Produce", "Fetch", "JoinGroup"} <= set(got)
    assert got == NEGOTIATED[client]


def test_confluent_produced_with_every_codec() -> None:
    codecs = {
        _run(e)["codec"]
        for e in FRAMES
        if e["api"] == "Produce" and _run(e)["client"] == "confluent-kafka"
    }
    assert codecs == {"none", "gzip", "snappy", "lz4", "zstd"}


# -- decoding -------------------------------------------------------------------


@pytest.mark.parametrize("entry", FRAMES, ids=_ids(FRAMES))
def test_frame_decodes_to_the_configured_values(entry: dict[str, Any]) -> None:
    _, req = _load(entry["file"])
    run = _run(entry)
    assert (req.api_key, req.api_version) == (entry["api_key"], entry["version"])
    assert api.api_name(req.api_key) == entry["api"]
    assert req.header.client_id == run["client_id"]
    assert req.correlation_id >= 0
    CHECKS[entry["api"]](req.body, req.api_version, run)


def _check_api_versions(body: Any, v: int, run: dict[str, Any]) -> None:
    if v < 3:
        assert (body.client_software_name, body.client_software_version) == ("", "")
        return
    assert body.client_software_name == SOFTWARE_NAMES[run["client"]]
    for value in (body.client_software_name, body.client_software_version):
        assert KIP_511_NAME.fullmatch(value), value
    library_version = MANIFEST["clients"][run["client"]].split()[0]
    assert body.client_software_version.startswith(library_version)


def _check_metadata(body: Any, v: int, run: dict[str, Any]) -> None:
    assert [t.name for t in body.topics] == [run["topic"]]
    if v >= 10:
        assert all(t.topic_id.int == 0 for t in body.topics)  # asked by name
    if v >= 4:
        assert body.allow_auto_topic_creation is True  # every client's default


def _check_produce(body: Any, v: int, run: dict[str, Any]) -> None:
    assert body.acks == run["acks"]
    assert body.timeout_ms > 0
    if v >= 3:
        assert body.transactional_id is None
    [topic] = body.topic_data
    assert topic.name == run["topic"]
    [partition] = topic.partition_data
    assert partition.index == run["partition"]
    batches = decode_batches(partition.records)
    assert batches
    records = []
    for i, (header, batch_records) in enumerate(batches):
        assert header.magic == 2
        assert header.attributes & ATTR_COMPRESSION_MASK == CODEC_IDS[run["codec"]]
        assert not (header.is_transactional or header.is_control)
        assert (header.producer_id, header.producer_epoch) == (
            run["producer_id"],
            run["producer_epoch"],
        )
        if i == 0:
            assert header.base_offset == 0
            assert header.base_sequence == run["base_sequence"]
        assert header.base_timestamp == batch_records[0].timestamp
        assert header.max_timestamp == max(r.timestamp for r in batch_records)
        records += batch_records
    assert [r.offset for r in records] == list(range(len(run["records"])))
    assert [_record_json(r) for r in records] == run["records"]


def _record_json(r: Any) -> dict[str, Any]:
    def text(b: bytes | None) -> str | None:
        return None if b is None else b.decode("ascii")

    return {
        "key": text(r.key),
        "value": text(r.value),
        "headers": [[k, text(val)] for k, val in r.headers],
        "timestamp_ms": r.timestamp,
    }


def _check_fetch(body: Any, v: int, run: dict[str, Any]) -> None:
    assert body.replica_id == -1
    assert body.max_wait_ms == run["max_wait_ms"]
    assert body.min_bytes >= 1
    assert body.isolation_level == run["isolation_level"]
    if v >= 7:
        assert body.session_id == 0  # the first fetch: no session yet
        assert body.forgotten_topics_data == []
    [topic] = body.topics
    if v >= 13:  # by topic id, the one the broker's Metadata answer gave
        assert (topic.topic, str(topic.topic_id)) == ("", run["topic_id"])
    else:
        assert topic.topic == run["topic"]
    indexes = [p.partition for p in topic.partitions]
    assert indexes and set(indexes) <= set(range(run["partitions"]))
    assert len(set(indexes)) == len(indexes)
    # No committed offset and ListOffsets said 0, so every fetch starts at 0.
    assert all(p.fetch_offset == 0 and p.partition_max_bytes > 0 for p in topic.partitions)


def _check_list_offsets(body: Any, v: int, run: dict[str, Any]) -> None:
    assert body.replica_id == -1
    if v >= 2:
        assert body.isolation_level == run["isolation_level"]
    [topic] = body.topics
    assert topic.name == run["topic"]
    assert {p.partition_index for p in topic.partitions} <= set(range(run["partitions"]))
    assert all(p.timestamp == -2 for p in topic.partitions)  # auto.offset.reset=earliest


def _check_find_coordinator(body: Any, v: int, run: dict[str, Any]) -> None:
    if v >= 4:
        assert body.coordinator_keys == [run["group_id"]]
    else:
        assert body.key == run["group_id"]
    assert body.key_type == 0  # a consumer group


def _check_join_group(body: Any, v: int, run: dict[str, Any]) -> None:
    assert body.group_id == run["group_id"]
    assert body.member_id == ""  # the first join (the one kept)
    assert body.group_instance_id is None
    assert body.protocol_type == "consumer"
    assert body.session_timeout_ms > 0
    assert body.protocols
    for protocol in body.protocols:
        assert protocol.name in {"range", "roundrobin", "sticky", "cooperative-sticky"}
        version = int.from_bytes(protocol.metadata[:2], "big", signed=True)
        sub, _ = ConsumerProtocolSubscription.decode_from(protocol.metadata, 2, min(version, 3))
        assert sub.topics == [run["topic"]]


def _check_sync_group(body: Any, v: int, run: dict[str, Any]) -> None:
    _check_member(body, run)
    [assignment] = body.assignments
    assert assignment.member_id == run["member_id"]
    data = assignment.assignment
    version = int.from_bytes(data[:2], "big", signed=True)
    value, _ = ConsumerProtocolAssignment.decode_from(data, 2, min(version, 3))
    assigned = {(tp.topic, p) for tp in value.assigned_partitions for p in tp.partitions}
    assert assigned == {(run["topic"], p) for p in range(run["partitions"])}


def _check_member(body: Any, run: dict[str, Any]) -> None:
    assert body.group_id == run["group_id"]
    assert body.generation_id == run["generation_id"]
    assert body.member_id == run["member_id"]


def _check_heartbeat(body: Any, v: int, run: dict[str, Any]) -> None:
    _check_member(body, run)


def _check_leave_group(body: Any, v: int, run: dict[str, Any]) -> None:
    assert body.group_id == run["group_id"]
    if v >= 3:
        assert [m.member_id for m in body.members] == [run["member_id"]]
    else:
        assert body.member_id == run["member_id"]


def _check_offset_commit(body: Any, v: int, run: dict[str, Any]) -> None:
    assert body.group_id == run["group_id"]
    assert body.generation_id_or_member_epoch == run["generation_id"]
    assert body.member_id == run["member_id"]
    commit = run["commit"]
    [topic] = body.topics
    assert topic.name == run["topic"]
    [partition] = topic.partitions
    assert (partition.partition_index, partition.committed_offset) == (
        commit["partition"],
        commit["offset"],
    )
    suffix = METADATA_SUFFIX.get(run["client"], "")
    assert partition.committed_metadata == commit["metadata"] + suffix


def _check_offset_fetch(body: Any, v: int, run: dict[str, Any]) -> None:
    if v >= 8:
        [group] = body.groups
        group_id, topics = group.group_id, group.topics
    else:
        group_id, topics = body.group_id, body.topics
    assert group_id == run["group_id"]
    [topic] = topics
    assert topic.name == run["topic"]
    assert topic.partition_indexes
    assert set(topic.partition_indexes) <= set(range(run["partitions"]))


def _check_init_producer_id(body: Any, v: int, run: dict[str, Any]) -> None:
    assert body.transactional_id is None  # idempotent, not transactional
    if v >= 3:
        assert (body.producer_id, body.producer_epoch) == (-1, -1)  # a fresh producer


CHECKS: dict[str, Callable[[Any, int, dict[str, Any]], None]] = {
    "ApiVersions": _check_api_versions,
    "Metadata": _check_metadata,
    "Produce": _check_produce,
    "Fetch": _check_fetch,
    "ListOffsets": _check_list_offsets,
    "FindCoordinator": _check_find_coordinator,
    "JoinGroup": _check_join_group,
    "SyncGroup": _check_sync_group,
    "Heartbeat": _check_heartbeat,
    "LeaveGroup": _check_leave_group,
    "OffsetCommit": _check_offset_commit,
    "OffsetFetch": _check_offset_fetch,
    "InitProducerId": _check_init_producer_id,
}


# -- re-encoding ------------------------------------------------------------------


@pytest.mark.parametrize("entry", FRAMES, ids=_ids(FRAMES))
def test_reencoding_gives_back_the_captured_bytes(entry: dict[str, Any]) -> None:
    frame, req = _load(entry["file"])
    header_version = api.request_header_version(req.api_key, req.api_version)
    header_bytes = req.header.encode(header_version)
    reencoded = header_bytes + req.body.encode(req.api_version)
    if entry["file"] in NOT_BYTE_EXACT:
        again = parse_request(reencoded)
        assert isinstance(again, Request)
        assert (again.header, again.body) == (req.header, req.body)
        return
    assert frame[: len(header_bytes)] == header_bytes
    assert reencoded == frame


@pytest.mark.parametrize("entry", FRAMES, ids=_ids(FRAMES))
def test_header_alone_decodes_strictly(entry: dict[str, Any]) -> None:
    # The header is a prefix of the frame; decoding it alone leaves exactly the body.
    frame, req = _load(entry["file"])
    header_version = api.request_header_version(req.api_key, req.api_version)
    header, pos = RequestHeader.decode_from(frame, 0, header_version)
    assert header == req.header
    body = api.request_class(req.api_key).decode(frame[pos:], req.api_version)
    assert body == req.body
