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
    assert image.features == {"metadata.version": 25}
    assert image.scram.get("alice", "SCRAM-SHA-256") is not None


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
