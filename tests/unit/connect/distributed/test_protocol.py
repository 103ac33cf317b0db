"""The Connect group protocol's bytes: round trips, hand-built golden bytes, bad input."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.connect.distributed.protocol import (
    CONFIG_MISMATCH,
    CONNECT_PROTOCOL_TYPE,
    NO_ERROR,
    Assignment,
    ConnectorTaskId,
    WorkerState,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
    protocols,
    version_of,
)

# -- spec-level builders (written from the format, independent of the module) --


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s(v: str) -> bytes:
    b = v.encode()
    return i16(len(b)) + b


URL = "http://w1:8083"
LEADER = "connect-1-5f0c"
LEADER_URL = "http://w0:8083"


def test_protocol_type_and_offers() -> None:
    assert CONNECT_PROTOCOL_TYPE == "connect"
    assert protocols("sessioned") == [("sessioned", 2), ("compatible", 1)]
    assert protocols("compatible") == [("compatible", 1), ("default", 0)]
    assert protocols("eager") == [("default", 0)]
    assert [version_of(n) for n in ("default", "compatible", "sessioned")] == [0, 1, 2]
    with pytest.raises(ValueError, match=r"connect\.protocol"):
        protocols("turbo")


def test_golden_metadata_v0() -> None:
    golden = i16(0) + s(URL) + i64(42)
    state = WorkerState(URL, 42)
    assert encode_metadata(state, 0) == golden
    assert decode_metadata(golden) == (0, state)


def test_golden_metadata_v0_leaves_out_the_allocation() -> None:
    state = WorkerState(URL, 42, Assignment(NO_ERROR, LEADER, LEADER_URL, 42, ("a",)))
    assert encode_metadata(state, 0) == i16(0) + s(URL) + i64(42)


def test_golden_metadata_v1_without_allocation() -> None:
    golden = i16(1) + s(URL) + i64(-1) + i32(-1)
    state = WorkerState(URL, -1)
    assert encode_metadata(state, 1) == golden
    assert decode_metadata(golden) == (1, state)


def test_golden_metadata_v2_with_allocation() -> None:
    # The allocation is a whole assignment with its own version header.
    allocation = (i16(2) + i16(0) + s(LEADER) + s(LEADER_URL) + i64(9)
                  + i32(1) + s("orders") + i32(2) + i32(-1) + i32(3)
                  + i32(0)
                  + i32(0))
    golden = i16(2) + s(URL) + i64(9) + i32(len(allocation)) + allocation
    state = WorkerState(URL, 9, Assignment(NO_ERROR, LEADER, LEADER_URL, 9, ("orders",),
                                           (ConnectorTaskId("orders", 3),)))
    assert encode_metadata(state, 2) == golden
    assert decode_metadata(golden) == (2, state)


def test_golden_assignment_v0() -> None:
    golden = (i16(0) + i16(0) + s(LEADER) + s(LEADER_URL) + i64(17)
              + i32(2)
              + s("a") + i32(3) + i32(-1) + i32(0) + i32(2)
              + s("b") + i32(1) + i32(1))
    a = Assignment(NO_ERROR, LEADER, LEADER_URL, 17, ("a",),
                   (ConnectorTaskId("a", 0), ConnectorTaskId("a", 2), ConnectorTaskId("b", 1)))
    assert encode_assignment(a, 0) == golden
    assert decode_assignment(golden) == a


def test_golden_assignment_v1() -> None:
    golden = (i16(1) + i16(CONFIG_MISMATCH) + s(LEADER) + s(LEADER_URL) + i64(5)
              + i32(1) + s("a") + i32(1) + i32(4)
              + i32(2) + s("a") + i32(1) + i32(-1) + s("z") + i32(2) + i32(0) + i32(1)
              + i32(300000))
    a = Assignment(CONFIG_MISMATCH, LEADER, LEADER_URL, 5, (), (ConnectorTaskId("a", 4),),
                   ("a",), (ConnectorTaskId("z", 0), ConnectorTaskId("z", 1)), 300000)
    assert encode_assignment(a, 1) == golden
    assert decode_assignment(golden) == a


def test_golden_assignment_v2() -> None:
    golden = (i16(2) + i16(0) + s(LEADER) + s(LEADER_URL) + i64(0)
              + i32(0) + i32(0) + i32(1234))
    a = Assignment(NO_ERROR, LEADER, LEADER_URL, 0, delay_ms=1234)
    assert encode_assignment(a, 2) == golden
    assert decode_assignment(golden) == a


def test_decoder_accepts_any_entry_order_and_null_arrays() -> None:
    data = (i16(1) + i16(0) + s(LEADER) + s(LEADER_URL) + i64(1)
            + i32(1) + s("c") + i32(3) + i32(2) + i32(-1) + i32(0)
            + i32(-1) + i32(0))
    a = decode_assignment(data)
    assert a.connectors == ("c",)
    assert set(a.tasks) == {ConnectorTaskId("c", 0), ConnectorTaskId("c", 2)}
    assert a.revoked_connectors == () and a.revoked_tasks == ()


def test_newer_versions_are_read_with_the_v1_layout() -> None:
    data = i16(3) + s(URL) + i64(8) + i32(-1) + b"future fields"
    assert decode_metadata(data) == (3, WorkerState(URL, 8))


def test_eager_assignment_refuses_revocations() -> None:
    with pytest.raises(ValueError, match="eager"):
        encode_assignment(Assignment(0, LEADER, LEADER_URL, 0, revoked_connectors=("a",)), 0)


def test_encoders_raise_value_error_for_numbers_out_of_range() -> None:
    with pytest.raises(ValueError, match="out of range"):
        encode_assignment(Assignment(0, LEADER, LEADER_URL, 0, delay_ms=2**31), 1)
    with pytest.raises(ValueError, match="out of range"):
        encode_metadata(WorkerState(URL, 2**63), 0)


# -- round trips and garbage ------------------------------------------------------

names = st.text(min_size=0, max_size=12)
task_ids = st.builds(ConnectorTaskId, names, st.integers(0, 2**31 - 1))


def _assignments(version: int) -> st.SearchStrategy[Assignment]:
    unique_names = st.lists(names, unique=True, max_size=4).map(tuple)
    unique_tasks = st.lists(task_ids, unique=True, max_size=6).map(lambda t: tuple(sorted(t)))
    if version == 0:
        return st.builds(Assignment, st.integers(-(2**15), 2**15 - 1), names, names,
                         st.integers(-(2**63), 2**63 - 1), unique_names.map(sorted).map(tuple),
                         unique_tasks)
    return st.builds(Assignment, st.integers(-(2**15), 2**15 - 1), names, names,
                     st.integers(-(2**63), 2**63 - 1), unique_names.map(sorted).map(tuple),
                     unique_tasks, unique_names.map(sorted).map(tuple), unique_tasks,
                     st.integers(-(2**31), 2**31 - 1))


@pytest.mark.parametrize("version", [0, 1, 2])
@given(data=st.data())
def test_assignment_round_trip(version: int, data: st.DataObject) -> None:
    a = data.draw(_assignments(version))
    assert decode_assignment(encode_assignment(a, version)) == a


@pytest.mark.parametrize("version", [0, 1, 2])
@given(data=st.data())
def test_metadata_round_trip(version: int, data: st.DataObject) -> None:
    allocation = data.draw(st.none() | _assignments(version)) if version else None
    state = WorkerState(data.draw(names), data.draw(st.integers(-(2**63), 2**63 - 1)),
                        allocation)
    assert decode_metadata(encode_metadata(state, version)) == (version, state)


@pytest.mark.parametrize("version", [0, 1, 2])
@settings(max_examples=25)
@given(data=st.data())
def test_every_truncation_raises_value_error(version: int, data: st.DataObject) -> None:
    a = data.draw(_assignments(version))
    encoded = encode_assignment(a, version)
    metadata = encode_metadata(WorkerState(URL, 3, a if version else None), version)
    for blob, decode in ((encoded, decode_assignment), (metadata, decode_metadata)):
        for cut in range(len(blob)):
            with pytest.raises(ValueError):
                decode(blob[:cut])  # type: ignore[operator]
        if version <= 2:
            with pytest.raises(ValueError, match="trailing"):
                decode(blob + b"\0")  # type: ignore[operator]


@given(st.binary(max_size=200))
def test_garbage_raises_only_value_error(blob: bytes) -> None:
    for decode in (decode_assignment, decode_metadata):
        with contextlib.suppress(ValueError):  # anything else fails the test
            decode(blob)  # type: ignore[operator]


@pytest.mark.parametrize("blob", [
    b"",
    i16(-1) + s(URL) + i64(0),                                 # negative version
    i16(0) + i16(-5) + b"xx",                                  # negative string length
    i16(0) + i16(2) + b"\xff\xfe" + i64(0),                    # not UTF-8
    i16(1) + s(URL) + i64(0) + i32(-7),                        # negative bytes length
    i16(1) + s(URL) + i64(0) + i32(4) + b"\x00\x01\x00",       # allocation cut short
])
def test_malformed_metadata(blob: bytes) -> None:
    with pytest.raises(ValueError):
        decode_metadata(blob)


@pytest.mark.parametrize("blob", [
    i16(0) + i16(0) + s("l") + s("u") + i64(0) + i32(2**30),            # absurd count
    i16(0) + i16(0) + s("l") + s("u") + i64(0) + i32(-2),               # negative count
    i16(0) + i16(0) + s("l") + s("u") + i64(0) + i32(1) + s("c") + i32(1) + i32(-2),
])
def test_malformed_assignment(blob: bytes) -> None:
    with pytest.raises(ValueError):
        decode_assignment(blob)
