"""LogConfig by Kafka's names and defaults."""

from __future__ import annotations

import pytest

from odradek.storage import LogConfig, LogManagerConfig, log_config_from_server
from odradek.storage.config import LONG_MAX


def test_kafka_defaults() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1 << 30
    assert c.segment_ms == 604_800_000
    assert c.segment_index_bytes == 10 << 20
    assert c.index_interval_bytes == 4096
    assert c.retention_ms == 604_800_000 and c.retention_bytes == -1
    assert c.max_message_bytes == 1_048_588
    assert c.flush_messages == LONG_MAX and c.flush_ms == LONG_MAX
    assert c.message_timestamp_type == "CreateTime"
    assert c.file_delete_delay_ms == 60_000


def test_topic_properties() -> None:
    c = LogConfig.from_properties(
        {
            "segment.bytes": "1048576",
            "retention.ms": -1,
            "message.timestamp.type": "LogAppendTime",
            "flush.messages": "1",
            "unrelated.thing": "x",
            "preallocate": "true",
        }
    )
    assert c.segment_bytes == 1 << 20 and c.retention_ms == -1 and c.log_append_time
    assert c.flush_messages == 1 and c.preallocate
    assert LogConfig.from_properties(c.to_properties()) == c


def test_server_properties_supply_the_defaults() -> None:
    c = log_config_from_server(
        {
            "log.segment.bytes": "2048",
            "log.retention.hours": "1",
            "log.roll.hours": "2",
            "message.max.bytes": "999",
            "log.flush.interval.ms": "",
        }
    )
    assert c.segment_bytes == 2048 and c.retention_ms == 3_600_000
    assert c.segment_ms == 7_200_000 and c.max_message_bytes == 999
    assert (
        log_config_from_server(
            {"log.retention.hours": "1", "log.retention.minutes": "2", "log.retention.ms": "3"}
        ).retention_ms
        == 3
    )
    m = LogManagerConfig.from_properties(
        {"log.dirs": "/a,/b", "log.retention.check.interval.ms": 5}
    )
    assert m.log_dir == "/a" and m.retention_check_interval_ms == 5


@pytest.mark.parametrize(
    "props",
    [
        {"segment.bytes": "ten"},
        {"segment.bytes": "10"},
        {"message.timestamp.type": "Now"},
        {"retention.ms": "-2"},
        {"flush.messages": "0"},
        {"preallocate": "yes"},
    ],
)
def test_bad_values_are_refused(props: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        LogConfig.from_properties(props)
