"""Option parsing of the odradek Spark source and sink (no Spark needed)."""

from __future__ import annotations

import pytest

from odradek.spark.options import (
    OptionError,
    parse_duration_ms,
    parse_sink,
    parse_source,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_defaults_follow_sparks_kafka_source() -> None:
    stream = parse_source({**BASE, "subscribe": "a, b"}, streaming=True)
    assert stream.subscription.topics == ("a", "b")
    assert stream.starting.kind == "latest"
    assert stream.fail_on_data_loss is True
    assert stream.max_trigger_delay_ms == 15 * 60_000
    assert stream.include_headers is False
    assert parse_source({**BASE, "subscribe": "a"}, streaming=False).starting.kind == "earliest"


def test_kafka_options_reach_the_client_without_prefix() -> None:
    opts = parse_source({**BASE, "subscribe": "a", "kafka.security.protocol": "SSL",
                         "kafka.isolation.level": "read_committed"}, streaming=True)
    assert opts.config() == {"bootstrap.servers": "127.0.0.1:9092",
                             "security.protocol": "SSL", "isolation.level": "read_committed"}


def test_starting_position_precedence() -> None:
    opts = parse_source({**BASE, "subscribe": "a", "startingOffsets": "earliest",
                         "startingOffsetsByTimestamp": '{"a": {"0": 5}}',
                         "startingTimestamp": "1000"}, streaming=True)
    assert (opts.starting.kind, opts.starting.timestamp) == ("timestamp", 1000)
    opts = parse_source({**BASE, "subscribe": "a", "startingOffsets": "earliest",
                         "startingOffsetsByTimestamp": '{"a": {"0": 5}}'}, streaming=True)
    assert opts.starting.timestamps == ((("a", 0), 5),)


def test_commit_group_is_stable_and_can_be_named_or_turned_off() -> None:
    one = parse_source({**BASE, "subscribe": "a"}, streaming=True).commit_group
    two = parse_source({**BASE, "subscribe": "a"}, streaming=True).commit_group
    other = parse_source({**BASE, "subscribe": "b"}, streaming=True).commit_group
    assert one == two and one != other and one and one.startswith("spark-odradek-source-")
    named = parse_source({**BASE, "subscribe": "a", "kafka.group.id": "g"}, streaming=True)
    assert named.commit_group == "g"
    off = parse_source({**BASE, "subscribe": "a", "commitOffsetsToGroup": "false"},
                       streaming=True)
    assert off.commit_group is None


@pytest.mark.parametrize(("options", "streaming", "message"), [
    ({"subscribe": "a", "endingOffsets": "latest"}, True, "not valid in streaming"),
    ({"subscribe": "a", "startingOffsets": "latest"}, False, "not valid for batch"),
    ({"subscribe": "a", "startingOffsets": '{"a": {"0": -1}}'}, False, "not valid"),
    ({"subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, False, "not valid"),
    ({"subscribe": "a", "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"}, True,
     "must not be greater"),
    ({"subscribe": "a", "maxTriggerDelay": "soon"}, True, "must be a duration"),
    ({"subscribePattern": "(unclosed"}, True, "not a valid pattern"),
    ({"assign": '{"a": "zero"}'}, True, "must list partition numbers"),
    ({"assign": "[1]"}, True, "must be a JSON object"),
    ({"subscribe": " , "}, True, "names no topic"),
    ({"subscribe": "a", "kafka.enable.auto.commit": "true"}, True, "manages it itself"),
    ({"subscribe": "a", "kafka.isolation.level": "dirty"}, True, "read_uncommitted or"),
    ({"subscribe": "a", "minPartitions": "0"}, True, "at least 1"),
    ({"subscribe": "a", "startingOffsets": '{"a": {"x": 1}}'}, True, "is not a partition"),
])
def test_bad_options_are_named(options: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_source({**BASE, **options}, streaming=streaming)


def test_durations() -> None:
    assert parse_duration_ms("15m") == 900_000
    assert parse_duration_ms("10s") == 10_000
    assert parse_duration_ms("250") == 250
    assert parse_duration_ms("2 h") == 7_200_000


def test_sink_options() -> None:
    assert parse_sink({**BASE, "topic": "out"}).topic == "out"
    assert parse_sink(BASE).topic is None
    with pytest.raises(OptionError, match="manages it itself"):
        parse_sink({**BASE, "kafka.value.serializer": "x"})
    with pytest.raises(OptionError, match="bootstrap"):
        parse_sink({"topic": "x"})
