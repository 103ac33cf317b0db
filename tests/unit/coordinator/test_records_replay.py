"""__consumer_offsets records: Kafka's byte format, and start-up by replay."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator import records
from odradek.coordinator.coordinator import GroupCoordinator
from odradek.coordinator.core import GroupConfig
from odradek.coordinator.group import GroupState
from odradek.coordinator.records import GroupRecord, OffsetRecord
from odradek.wire.internal.offset_commit_key import OffsetCommitKey
from odradek.wire.internal.offset_commit_value import OffsetCommitValue
from tests.unit.coordinator.commands import GroupCommands


def test_java_string_hash_matches_java() -> None:
    # Values of String.hashCode() in Java.
    assert records.java_string_hash("hello") == 99162322
    assert records.java_string_hash("") == 0
    assert records.java_string_hash("polygenelubricants") == -(2**31)
    assert records.partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) = 0
    assert records.partition_for("hello", 50) == 99162322 % 50


def test_offset_key_and_value_bytes_are_kafkas() -> None:
    value = OffsetCommitValue(offset=42, leader_epoch=3, metadata="m", commit_timestamp=7)
    key, raw = records.encode(OffsetRecord("g", "t", 1, value))
    # key: version 1, then group, topic (int16-length strings), partition (int32)
    assert key == struct.pack(">hh1sh1si", 1, 1, b"g", 1, b"t", 1)
    # value: version 3, offset, leader epoch, metadata, commit timestamp
    assert raw == struct.pack(">hqih1sq", 3, 42, 3, 1, b"m", 7)
    assert records.decode(key, raw) == OffsetRecord("g", "t", 1, value)
    assert records.decode(key, None) == OffsetRecord("g", "t", 1, None)


@given(st.text(max_size=30), st.text(max_size=30), st.integers(0, 2**31 - 1),
       st.integers(-1, 2**63 - 1), st.integers(-1, 2**31 - 1), st.text(max_size=50),
       st.integers(-1, 2**62), st.booleans())
def test_offset_records_round_trip_and_match_the_generated_codec(
    group: str, topic: str, p: int, off: int, epoch: int, meta: str, ts: int, expire: bool
) -> None:
    value = OffsetCommitValue(offset=off, leader_epoch=-1 if expire else epoch, metadata=meta,
                              commit_timestamp=ts, expire_timestamp=ts + 1 if expire else -1)
    r = OffsetRecord(group, topic, p, value)
    key, raw = records.encode(r)
    assert records.decode(key, raw) == r
    # The hand-packed bytes are exactly what the generated codec writes.
    assert key == struct.pack(">h", 1) + OffsetCommitKey(
        group=group, topic=topic, partition=p).encode(1)
    version = 1 if expire else 3
    assert raw == struct.pack(">h", version) + value.encode(version)


def test_unknown_key_versions_are_skipped() -> None:
    # 9-15: share groups; 16: Kafka 4's regular-expression records.
    assert records.decode(struct.pack(">h", 9) + b"xx", b"") is None
    assert records.decode(struct.pack(">h", 16) + b"xx", b"") is None


def _drive() -> tuple[GroupCommands, list[object]]:
    h = GroupCommands()
    written: list[object] = []
    original = h.apply

    def capture(fx):  # type: ignore[no-untyped-def]
        written.extend(fx.records)
        original(fx)

    h.apply = capture  # type: ignore[method-assign]
    for line in [
        "join g a version=5 instance=ia", "sync g a instance=ia assign=a:p0p1",
        "commit g a t:0=10 t:1=20", "commit g a t:0=11",
        "commit solo - x:0=5", "commit gone - x:0=1",
        "delete gone", "join h b version=3", "sync h b assign=b:x", "leave h b",
    ]:
        h.run(line)
    return h, written


def test_start_up_replay_rebuilds_offsets_and_groups() -> None:
    live, written = _drive()
    # What a restart reads back: the bytes of every record, in order.
    pairs = [records.encode(r) for r in written]  # type: ignore[arg-type]
    restarted = GroupCoordinator(GroupConfig(offsets_partitions=1))
    assert restarted.coordinator_error("g") != 0  # loading until replayed
    restarted.replay([records.decode(k, v) for k, v in pairs], now_ms=5)  # type: ignore[misc]
    restarted.loaded(0, now_ms=5)
    for gid in ("g", "solo", "h"):
        assert restarted.fetch_offsets(gid, None) == live.coordinator.fetch_offsets(gid, None)
    assert "gone" not in restarted.groups
    g = restarted.groups["g"]
    assert g.state is GroupState.STABLE and g.generation == 1
    (member,) = g.members.values()
    assert member.group_instance_id == "ia" and member.assignment == b"p0p1"
    assert member.heartbeat_deadline_ms == 5 + member.session_timeout_ms
    assert restarted.groups["h"].state is GroupState.EMPTY
    assert restarted.groups["h"].generation == 2


def test_group_records_after_loading_do_not_replace_live_groups() -> None:
    live, written = _drive()
    before = live.coordinator.groups["g"]
    live.coordinator.replay([r for r in written if isinstance(r, GroupRecord)])
    assert live.coordinator.groups["g"] is before
