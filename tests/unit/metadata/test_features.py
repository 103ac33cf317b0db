"""Finalized feature levels: a new cluster's, UpdateFeatures' rules (Kafka's
``FeatureControlManager``), ``--feature`` parsing."""

from __future__ import annotations

import pytest

from odradek.metadata import controller, features
from odradek.metadata.features import SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, FeatureUpdate
from odradek.metadata.image import MetadataImage
from odradek.wire.errors import ErrorCode as E
from odradek.wire.internal.feature_level_record import FeatureLevelRecord
from odradek.wire.internal.user_scram_credential_record import UserScramCredentialRecord


def new_image(bootstrap: list[object] | None = None) -> MetadataImage:
    image = MetadataImage()
    for record in controller.finalize_features(image, bootstrap or []).records:
        image.replay(record)
    return image


def test_a_new_cluster_finalizes_transaction_version_2() -> None:
    image = new_image()
    assert features.finalized(image) == {
        "metadata.version": 25, "group.version": 1, "transaction.version": 2}


def test_storage_formats_feature_overrides_the_default_and_keeps_other_records() -> None:
    scram = UserScramCredentialRecord("alice", 1, b"s", b"k", b"v", 4096)
    image = new_image([FeatureLevelRecord("transaction.version", 0), scram])
    assert features.level(image, "transaction.version") == 0
    assert image.features == {"metadata.version": 25, "group.version": 1}
    assert image.scram.get("alice", "SCRAM-SHA-256") is not None


def test_group_version_is_one_for_a_new_cluster_and_for_a_log_without_its_record() -> None:
    assert features.level(new_image(), "group.version") == 1
    assert features.consumer_protocol_enabled(new_image())
    # A log formatted before group.version was written (no record at all).
    old = MetadataImage()
    old.replay(FeatureLevelRecord("metadata.version", 25))
    assert features.level(old, "group.version") == 1


def test_group_version_zero_is_kept_as_a_record_and_turns_the_consumer_protocol_off() -> None:
    records = features.new_cluster_records({"group.version": 0})
    assert FeatureLevelRecord("group.version", 0) in records  # written, not left out
    image = new_image([FeatureLevelRecord("group.version", 0)])
    assert features.level(image, "group.version") == 0
    assert not features.consumer_protocol_enabled(image)
    assert "group.version" not in features.finalized(image)
    # A snapshot keeps the 0, with metadata.version first among the features.
    again = MetadataImage()
    for r in image.to_records():
        again.replay(r)
    assert not features.consumer_protocol_enabled(again)
    levels = [r.name for r in image.to_records() if isinstance(r, FeatureLevelRecord)]
    assert levels[0] == "metadata.version"
    # UpdateFeatures may turn it on again (and off with a downgrade type).
    assert features.update(image, [FeatureUpdate("group.version", 1)]).records == [
        FeatureLevelRecord("group.version", 1)]
    assert features.update(new_image(), [FeatureUpdate("group.version", 0)]).error == \
        E.INVALID_UPDATE_VERSION
    assert features.update(new_image(), [
        FeatureUpdate("group.version", 0, SAFE_DOWNGRADE)]).records == [
        FeatureLevelRecord("group.version", 0)]


def test_upgrade_and_downgrade_rules() -> None:
    image = new_image()

    def decide(*updates: FeatureUpdate) -> tuple[E, list[object]]:
        outcome = features.update(image, list(updates))
        return outcome.error, outcome.records

    assert decide(FeatureUpdate("transaction.version", 1))[0] == E.INVALID_UPDATE_VERSION
    assert decide(FeatureUpdate("transaction.version", 1, SAFE_DOWNGRADE)) == (
        E.NONE, [FeatureLevelRecord("transaction.version", 1)])
    assert decide(FeatureUpdate("transaction.version", 0, UNSAFE_DOWNGRADE)) == (
        E.NONE, [FeatureLevelRecord("transaction.version", 0)])
    assert decide(FeatureUpdate("transaction.version", 2)) == (E.NONE, [])  # already there
    assert decide(FeatureUpdate("transaction.version", 3))[0] == E.INVALID_UPDATE_VERSION
    assert decide(FeatureUpdate("no.such.feature", 1))[0] == E.INVALID_UPDATE_VERSION
    assert decide(FeatureUpdate("metadata.version", 25))[0] == E.INVALID_UPDATE_VERSION
    assert decide(FeatureUpdate("transaction.version", 1, SAFE_DOWNGRADE),
                  FeatureUpdate("transaction.version", 2))[0] == E.INVALID_REQUEST
    image.replay(FeatureLevelRecord("transaction.version", 0))
    assert features.level(image, "transaction.version") == 0
    assert decide(FeatureUpdate("transaction.version", 2)) == (
        E.NONE, [FeatureLevelRecord("transaction.version", 2)])


@pytest.mark.parametrize(("text", "expected"), [
    ("transaction.version=1", ("transaction.version", 1)),
    (" transaction.version=0", ("transaction.version", 0)),
])
def test_parse_level(text: str, expected: tuple[str, int]) -> None:
    assert features.parse_level(text) == expected


@pytest.mark.parametrize(("text", "problem"), [
    ("transaction.version", "expected name=level"),
    ("transaction.version=x", "whole number"),
    ("transaction.version=3", "not supported (supported: 0-2)"),
    ("nope=1", "unknown feature 'nope'"),
])
def test_parse_level_refusals_are_one_line(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        features.parse_level(text)
