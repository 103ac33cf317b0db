"""Our message codec against kafka-python 3's own, both directions, whole frames.

kafka-python 3 builds its protocol classes from its own copy of Kafka's JSON
specs (``kafka/protocol/schemas/resources``, Kafka 4.3) with its own encoder
and decoder; ours come from ``tools/codegen`` and the Kafka specs beside the
checkout. For a sample of (API, version), requests and responses, Hypothesis
draws a message with ``message_strategy``; then:

* our frame (size, header, body) decodes with kafka-python to the same values;
* the same message built in kafka-python's object model encodes to a frame we
  decode to the same values;
* and both frames are the same bytes.

The converter between the object models maps fields by Kafka name and
smooths over representation only: kafka-python reads an all-zero UUID as
``None``, keeps ``records`` as plain bytes, patches Metadata's
``*AuthorizedOperations`` int32 into a set of bit numbers named
``authorized_operations`` (``{31}``, i.e. INT32_MIN, meaning "not requested",
is ``None``), and treats an absent tagged struct as ``None`` where we keep the
default struct (both omit it from the wire when it equals the default).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas.fields.base import BaseField

from odradek.wire import api
from odradek.wire.frames import Request, encode_request, encode_response, parse_request
from odradek.wire.messages.api_versions_response import ApiVersionsResponse
from odradek.wire.primitives import ZERO_UUID
from odradek.wire.schema import FieldDef, Message, Struct, in_range
from tests.support.strategies import message_strategy

SAMPLE: dict[str, tuple[int, ...]] = {
    "Produce": (3, 7, 9),
    "Fetch": (4, 11, 12),
    "Metadata": (0, 5, 9, 12),
    "ApiVersions": (0, 3),
    "JoinGroup": (0, 5, 7),
    "SyncGroup": (0, 4),
    "OffsetCommit": (2, 8),
    "OffsetFetch": (1, 6, 8),
    "ListOffsets": (1, 5, 7),
    "CreateTopics": (2, 5),
    "FindCoordinator": (0, 3, 4),
}
KEYS = {api.api_name(k): k for k in (0, 1, 2, 3, 8, 9, 10, 11, 14, 18, 19)}
CASES = [
    (name, kind, v)
    for name, versions in SAMPLE.items()
    for kind in ("request", "response")
    for v in versions
]
INT32_MIN = -(2**31)


# -- kafka-python's classes by API key ----------------------------------------------


def _subclasses(cls: Any) -> Iterator[Any]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


@cache
def _kp_classes() -> dict[tuple[int, str], Any]:
    for package in ("metadata", "consumer", "producer", "admin"):
        importlib.import_module(f"kafka.protocol.{package}")
    return {
        (cls._json["apiKey"], cls._json["type"]): cls
        for cls in _subclasses(ApiMessage)
        if cls.__dict__.get("_json") is not None and cls._class_version is None
    }


def _ours(name: str, kind: str) -> type[Message]:
    key = KEYS[name]
    return api.request_class(key) if kind == "request" else api.response_class(key)


# -- converting between the object models -------------------------------------------------


def _kp_field(kp_struct: Any, f: FieldDef) -> Any:
    fields = kp_struct.fields
    name = BaseField.underscore_name(f.kafka_name)
    if name not in fields and name.endswith("_authorized_operations"):
        name = "authorized_operations"  # kafka-python's MetadataResponse.json_patch
    return fields[name]


def _is_bitfield(kp_f: Any) -> bool:
    return getattr(kp_f, "type_str", None) == "bitfield"


def to_kp(obj: Struct, kp_struct: Any, version: int) -> Any:
    """Our struct as kafka-python's DataContainer for ``kp_struct`` (a class or a field)."""
    kwargs: dict[str, Any] = {}
    for f in type(obj).FIELDS:
        if not in_range(version, f.versions):
            continue
        value = getattr(obj, f.name)
        if in_range(version, f.tagged) and value == _default(f):
            continue  # absent from the wire on both sides
        kp_f = _kp_field(kp_struct, f)
        kwargs[kp_f.name] = _value_to_kp(f, kp_f, value, version)
    return kp_struct.data_class(version=version, **kwargs)


def _value_to_kp(f: FieldDef, kp_f: Any, value: Any, version: int) -> Any:
    if value is None:
        return None
    if f.kind == "struct":
        if f.array:
            return [to_kp(v, kp_f, version) for v in value]
        return to_kp(value, kp_f, version)
    if _is_bitfield(kp_f):
        bits = {i for i in range(32) if value & (1 << i)}
        return None if bits == {31} else bits
    return value


def from_kp(kp_obj: Any, cls: type[Struct], version: int) -> Any:
    """kafka-python's DataContainer as our struct ``cls``."""
    kwargs: dict[str, Any] = {}
    for f in cls.FIELDS:
        if not in_range(version, f.versions):
            continue
        kp_f = _kp_field(kp_obj._struct, f)
        kwargs[f.name] = _value_from_kp(f, kp_f, getattr(kp_obj, kp_f.name), version)
    return cls(**kwargs)


def _value_from_kp(f: FieldDef, kp_f: Any, value: Any, version: int) -> Any:
    if f.kind == "struct":
        assert f.struct is not None
        if value is None:
            return _default(f) if in_range(version, f.tagged) else None
        if f.array:
            return [from_kp(v, f.struct, version) for v in value]
        return from_kp(value, f.struct, version)
    if _is_bitfield(kp_f):
        if value is None:
            return INT32_MIN
        raw = sum(1 << b for b in value)
        return raw - (1 << 32) if raw >= 1 << 31 else raw
    if f.kind == "uuid" and not f.array and value is None:
        return ZERO_UUID
    if isinstance(value, memoryview):
        return value.tobytes()
    return value


def _default(f: FieldDef) -> Any:
    if f.kind == "struct" and not f.array and f.default is not None:
        assert f.struct is not None
        return f.struct()
    return [] if f.array and f.default is not None else f.default


# -- the test -------------------------------------------------------------------------


def _strategy(cls: type[Message], version: int) -> st.SearchStrategy[Any]:
    strategy = message_strategy(cls, version)
    if cls is ApiVersionsResponse and version > 0:
        # kafka-python reads any ApiVersions error response as a v0 body (its
        # KIP-511 fallback), so errors are only comparable at v0.
        strategy = strategy.map(lambda m: dataclasses.replace(m, error_code=0))
    return strategy


@pytest.mark.parametrize(
    ("name", "kind", "version"), CASES, ids=[f"{n}{k.title()}-v{v}" for n, k, v in CASES]
)
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_frames_agree_both_ways(name: str, kind: str, version: int, data: st.DataObject) -> None:
    ours_cls = _ours(name, kind)
    kp_cls = _kp_classes()[(ours_cls.API_KEY, kind)]
    msg = data.draw(_strategy(ours_cls, version), label="message")
    correlation_id = data.draw(st.integers(0, 2**31 - 1), label="correlation_id")
    client_id = data.draw(st.none() | st.text(max_size=12), label="client_id")

    kp_msg = to_kp(msg, kp_cls._struct, version)
    if kind == "request":
        ours_frame = encode_request(ours_cls.API_KEY, version, correlation_id, msg, client_id)
        kp_msg.with_header(correlation_id=correlation_id, client_id=client_id)
    else:
        ours_frame = b"".join(encode_response(ours_cls.API_KEY, version, correlation_id, msg))
        kp_msg.with_header(correlation_id=correlation_id)
    # The version was fixed at construction: passing it to encode() again would make
    # kafka-python set request_api_version on a response header, which has none.
    kp_frame = kp_msg.encode(header=True, framed=True)

    # Ours -> kafka-python.
    theirs = kp_cls.decode(ours_frame, version=version, header=True, framed=True)
    assert theirs.header.correlation_id == correlation_id
    assert from_kp(theirs, ours_cls, version) == msg

    # kafka-python -> ours.
    if kind == "request":
        req = parse_request(kp_frame[4:])
        assert isinstance(req, Request), req
        assert (req.correlation_id, req.header.client_id) == (correlation_id, client_id)
        assert req.body == msg
    else:
        assert _decode_response(ours_cls, version, kp_frame) == (correlation_id, msg)

    assert kp_frame == ours_frame


def _decode_response(cls: type[Message], version: int, frame: bytes) -> tuple[int, Any]:
    from odradek.wire.messages.response_header import ResponseHeader

    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    header_version = api.response_header_version(cls.API_KEY, version)
    header, pos = ResponseHeader.decode_from(frame, 4, header_version)
    return header.correlation_id, cls.decode(frame[pos:], version)
