"""Dynamic broker configs: the table, Kafka's synonym order, and the controller's decision."""

from __future__ import annotations

from odradek.broker.config import DEFAULTS
from odradek.metadata.broker_configs import (
    BROKER_CONFIGS,
    DYNAMIC,
    alter_broker_configs,
    synonyms,
)
from odradek.metadata.image import BROKER_RESOURCE, MetadataImage
from odradek.wire.errors import ErrorCode
from odradek.wire.internal.config_record import ConfigRecord

# Kafka's null defaults: no entry in DEFAULTS, a coarser synonym supplies the value.
NULL_DEFAULTS = {"log.roll.ms", "log.retention.ms", "log.retention.minutes",
                 "log.flush.interval.ms"}


def test_every_listed_config_has_a_default_or_is_one_of_kafkas_nulls() -> None:
    missing = {n for n in BROKER_CONFIGS if n not in DEFAULTS} - NULL_DEFAULTS
    assert missing == set()
    assert NULL_DEFAULTS.isdisjoint(DEFAULTS)
    assert "log.retention.hours" not in DYNAMIC and "log.retention.ms" in DYNAMIC


def test_synonyms_are_listed_source_by_source_then_leading_others_dropped() -> None:
    layers = [(2, {"log.retention.ms": "7"}), (3, {}), (4, {"log.retention.hours": "24"}),
              (5, {"log.retention.hours": "168"})]
    assert synonyms("log.retention.ms", layers) == [
        ("log.retention.ms", "7", 2), ("log.retention.hours", "24", 4),
        ("log.retention.hours", "168", 5)]
    assert synonyms("log.retention.hours", layers) == [
        ("log.retention.hours", "24", 4), ("log.retention.hours", "168", 5)]
    # Unset log.retention.ms: Kafka lists no synonym at all.
    assert synonyms("log.retention.ms", layers[2:]) == []


def test_read_only_configs_are_refused_together_in_kafkas_words() -> None:
    out = alter_broker_configs(MetadataImage(), "1",
                               {"node.id": "2", "log.dirs": "/x", "message.max.bytes": "5"})
    assert (out.error, out.message) == (ErrorCode.INVALID_REQUEST,
                                        "Cannot update these configs dynamically: "
                                        "Set(log.dirs, node.id)")
    assert alter_broker_configs(MetadataImage(), "", {"x.y": "1"}).error == ErrorCode.INVALID_CONFIG
    bad = alter_broker_configs(MetadataImage(), "", {"log.cleaner.threads": "0"})
    assert bad.error == ErrorCode.INVALID_REQUEST and "log.cleaner.threads" in (bad.message or "")


def test_changes_are_records_per_resource_and_deletes_only_what_is_set() -> None:
    image = MetadataImage()
    out = alter_broker_configs(image, "", {"log.retention.ms": "5", "message.max.bytes": None})
    assert out.records == [ConfigRecord(BROKER_RESOURCE, "", "log.retention.ms", "5")]
    for record in [*out.records, ConfigRecord(BROKER_RESOURCE, "2", "log.retention.ms", "9")]:
        image.replay(record)
    assert image.broker_configs == {"": {"log.retention.ms": "5"}, "2": {"log.retention.ms": "9"}}
    out = alter_broker_configs(image, "2", {"log.retention.ms": None})
    assert out.records == [ConfigRecord(BROKER_RESOURCE, "2", "log.retention.ms", None)]
    image.replay(out.records[0])
    assert image.broker_configs == {"": {"log.retention.ms": "5"}}
    copy = MetadataImage()
    for record in image.to_records():
        copy.replay(record)
    assert copy.broker_configs == image.broker_configs
