"""Every (message, version) Kafka's specs define survives encode → decode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.wire.schema import Message
from tests.support.strategies import all_message_versions, message_strategy
from tools.codegen.spec import parse_versions, strip_comments

PAIRS = all_message_versions()


SPECS = Path(__file__).resolve().parents[3] / "shared" / "kafka-protocol"


def test_every_spec_is_generated() -> None:
    names = {cls.__name__ for cls, _ in PAIRS}
    assert {"ProduceRequest", "FetchResponse", "RequestHeader", "ResponseHeader"} <= names
    assert {"OffsetCommitValue", "GroupMetadataValue", "ConsumerProtocolAssignment"} <= names
    if not (SPECS / "messages").is_dir():
        pytest.skip(f"Kafka's message specs are not at {SPECS} (a checkout not beside "
                    "shared/): that every spec has a generated class was not checked")
    expected = set()
    for path in (SPECS / "messages").glob("*.json"):
        spec = json.loads(strip_comments(path.read_text()))
        lo, hi = parse_versions(spec["validVersions"]) or (0, -1)
        expected |= {(spec["name"], v) for v in range(lo, hi + 1)}
    generated = {(cls.__name__, v) for cls, v in PAIRS}
    assert expected <= generated


@pytest.mark.parametrize(
    ("cls", "version"), PAIRS, ids=[f"{c.__name__}-v{v}" for c, v in PAIRS]
)
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_round_trip(cls: type[Message], version: int, data: Any) -> None:
    msg = data.draw(message_strategy(cls, version))
    encoded = msg.encode(version)
    assert cls.decode(encoded, version) == msg
