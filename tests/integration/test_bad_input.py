"""Hostile bytes over a real socket: the connection closes, the broker keeps serving."""

from __future__ import annotations

import os
import struct

import pytest

from odradek.testing.broker import Broker
from odradek.wire.messages.api_versions_request import ApiVersionsRequest
from odradek.wire.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from tests.support.rawclient import RawClient


def _frame(api_key: int, version: int, corr: int, body: bytes, flexible: bool = False) -> bytes:
    header = struct.pack(">hhih", api_key, version, corr, 4) + b"test"
    if flexible:
        header += b"\x00"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


CASES = {
    # A random tail behind a prefix that frames it, so the frame completes and
    # the broker must judge it (an incomplete one would rightly be waited for).
    "garbage": struct.pack(">ih", 62, 0x7FFF) + os.urandom(60),
    "all_ones": b"\xff" * 64,
    "two_gib_length": struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 16,
    "negative_length": struct.pack(">i", -5) + b"\x00" * 16,
    "short_header": struct.pack(">i", 3) + b"\x00\x03\x00",
    "unknown_api_key": _frame(999, 0, 1, b""),
    "unserved_fetch_version": _frame(1, 17, 2, b"\x00" * 40, flexible=True),
    "truncated_metadata_body": _frame(3, 1, 3, b"\x00\x00\x00\x05\x00"),
    "metadata_array_length_lies": _frame(3, 1, 4, struct.pack(">i", 2_000_000_000)),
    "metadata_string_overruns": _frame(3, 1, 5, struct.pack(">ih", 1, 3000) + b"abc"),
}


def _still_serving(broker: Broker) -> None:
    other = RawClient(broker.bootstrap_servers)
    try:
        assert other.request(ApiVersionsRequest(), 3).error_code == 0
        req = MetadataRequest(topics=[MetadataRequestTopic(name="alive")])
        assert other.request(req, 9).topics[0].error_code == 0
    finally:
        other.close()


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_frame_closes_the_connection_and_broker_serves_on(broker: Broker, case: str) -> None:
    client = RawClient(broker.bootstrap_servers, timeout_s=5)
    try:
        client.send_raw(CASES[case])
        assert client.is_closed_by_peer(), f"{case}: the broker did not close the connection"
    finally:
        client.close()
    _still_serving(broker)


def test_over_the_configured_request_limit_is_refused_before_buffering() -> None:
    with Broker(**{"socket.request.max.bytes": "1024"}) as b:
        client = RawClient(b.bootstrap_servers, timeout_s=5)
        try:
            client.send_raw(struct.pack(">i", 1025) + b"\x00" * 1025)
            assert client.is_closed_by_peer()
        finally:
            client.close()
        _still_serving(b)


def test_many_bad_connections_in_a_row_do_not_hurt_a_good_one(broker: Broker) -> None:
    good = RawClient(broker.bootstrap_servers)
    try:
        for i in range(50):
            bad = RawClient(broker.bootstrap_servers, timeout_s=5)
            bad.send_raw(struct.pack(">ih", 30 + i, -1 - i) + os.urandom(28 + i))
            assert bad.is_closed_by_peer()
            bad.close()
            assert good.request(ApiVersionsRequest(), 2).error_code == 0
    finally:
        good.close()
