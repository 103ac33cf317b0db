"""``bootstrap.checkpoint``: the metadata snapshot file ``odradek storage format``
writes (Kafka's format: header and footer control records around the records),
what a new cluster's first controller makes of it, and the older
``bootstrap.records`` it replaces."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from odradek.broker.control import bootstrap as bs
from odradek.broker.control.journal import decode_record, encode_record
from odradek.metadata import controller, features
from odradek.metadata.image import MetadataImage
from odradek.wire.internal.feature_level_record import FeatureLevelRecord
from odradek.wire.internal.user_scram_credential_record import UserScramCredentialRecord
from odradek.wire.records import decode_batches

NOW = 1_700_000_000_000


def scram_user() -> UserScramCredentialRecord:
    return UserScramCredentialRecord(name="alice", mechanism=1, salt=b"s" * 16,
                                     stored_key=b"k" * 32, server_key=b"v" * 32,
                                     iterations=4096)


def test_format_records_name_metadata_version_first_and_the_chosen_levels() -> None:
    records = bs.bootstrap_records({"transaction.version": 1}, [scram_user()])
    assert records[0] == FeatureLevelRecord(features.METADATA_VERSION,
                                            features.METADATA_VERSION_LEVEL)
    assert records[1:] == [FeatureLevelRecord("group.version", 1),
                           FeatureLevelRecord("transaction.version", 1), scram_user()]
    assert FeatureLevelRecord("transaction.version", 2) in bs.bootstrap_records({})
    # Level 0 is "off": no record (but group.version's 0 is written: a log
    # without its record means 1).
    assert [r.name for r in bs.bootstrap_records({"transaction.version": 0})] == [
        features.METADATA_VERSION, "group.version"]
    assert FeatureLevelRecord("group.version", 0) in bs.bootstrap_records({"group.version": 0})


def test_the_file_is_a_snapshot_with_header_records_and_footer() -> None:
    records = bs.bootstrap_records({"transaction.version": 1})
    batches = decode_batches(bs.encode_checkpoint(records, NOW))
    assert len(batches) == 3
    (head, head_records), (data, data_records), (foot, foot_records) = batches
    assert head.is_control and head.base_offset == 0 and head.partition_leader_epoch == 0
    key = head_records[0].key
    assert key is not None and struct.unpack(">hh", bytes(key)) == (0, 3)
    assert bytes(head_records[0].value or b"") == struct.pack(">hqB", 0, NOW, 0)
    assert not data.is_control and data.base_offset == 1
    assert [r.offset for r in data_records] == [1, 2, 3]
    assert [decode_record(bytes(r.value or b"")) for r in data_records] == records
    assert [bytes(r.value or b"") for r in data_records] == [encode_record(r) for r in records]
    assert foot.is_control and foot.base_offset == 4
    key = foot_records[0].key
    assert key is not None and struct.unpack(">hh", bytes(key)) == (0, 4)


def test_write_then_read_gives_the_records_back(tmp_path: Path) -> None:
    records = bs.bootstrap_records({"transaction.version": 1}, [scram_user()])
    path = bs.write_bootstrap(tmp_path, records, NOW)
    assert path == tmp_path / "bootstrap.checkpoint"
    assert not list(tmp_path.glob("*.tmp"))
    assert bs.read_bootstrap(tmp_path) == records


def test_a_torn_or_damaged_file_is_refused_with_its_name(tmp_path: Path) -> None:
    data = bs.encode_checkpoint(bs.bootstrap_records({}), NOW)
    (tmp_path / "bootstrap.checkpoint").write_bytes(data[:-5])
    with pytest.raises(ValueError, match=r"bootstrap\.checkpoint is not a bootstrap checkpoint"):
        bs.read_bootstrap(tmp_path)
    head_size = decode_batches(data)[0][0].size
    foot_size = decode_batches(data)[-1][0].size
    with pytest.raises(ValueError, match="no snapshot footer"):
        bs.decode_checkpoint(data[:-foot_size])
    flipped = bytearray(data)
    flipped[head_size + 70] ^= 0xFF  # inside the data batch: its CRC no longer matches
    with pytest.raises(ValueError, match="CRC"):
        bs.decode_checkpoint(bytes(flipped))


def test_a_file_without_metadata_version_or_with_an_unknown_level_is_refused() -> None:
    with pytest.raises(ValueError, match=r"no metadata\.version"):
        bs.decode_checkpoint(bs.encode_checkpoint(
            [FeatureLevelRecord("transaction.version", 1)], NOW))
    with pytest.raises(ValueError, match="not supported"):
        bs.decode_checkpoint(bs.encode_checkpoint(
            [FeatureLevelRecord(features.METADATA_VERSION, 99)], NOW))


def test_an_older_format_bootstrap_records_file_is_still_read(tmp_path: Path) -> None:
    records = [FeatureLevelRecord("transaction.version", 1), scram_user()]
    (tmp_path / "bootstrap.records").write_bytes(b"".join(
        struct.pack(">i", len(e)) + e for e in map(encode_record, records)))
    assert bs.read_bootstrap(tmp_path) == records
    assert bs.read_bootstrap(tmp_path / "nothing-here") == []


def test_the_first_controller_writes_the_checkpoint_as_it_is() -> None:
    # A checkpoint that leaves transaction.version out (formatted with level 0)
    # finalizes no transaction.version: the file, not the defaults, decides.
    checkpoint = bs.bootstrap_records({"transaction.version": 0}, [scram_user()])
    outcome = controller.finalize_features(MetadataImage(), checkpoint)
    assert outcome.records == checkpoint
    image = MetadataImage()
    for record in outcome.records:
        image.replay(record)
    assert image.features == {features.METADATA_VERSION: features.METADATA_VERSION_LEVEL,
                              "group.version": 1}
    assert "transaction.version" not in features.finalized(image)
    assert controller.finalize_features(image, checkpoint).records == []  # once only
    # metadata.version comes first whatever order the file has.
    reordered = [checkpoint[1], checkpoint[0], *checkpoint[2:]]
    assert controller.new_cluster_features(reordered) == checkpoint


def test_an_older_bootstrap_or_none_gets_the_default_levels() -> None:
    older = controller.new_cluster_features([FeatureLevelRecord("transaction.version", 1),
                                             scram_user()])
    assert older == [FeatureLevelRecord(features.METADATA_VERSION,
                                        features.METADATA_VERSION_LEVEL),
                     FeatureLevelRecord("group.version", 1),
                     FeatureLevelRecord("transaction.version", 1), scram_user()]
    assert controller.new_cluster_features([]) == features.new_cluster_records()
