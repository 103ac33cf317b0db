"""SCRAM credentials in the metadata image: AlterUserScramCredentials'
decisions, replay, describe, and snapshots (to_records) keeping them."""

from __future__ import annotations

from odradek.metadata.image import MetadataImage
from odradek.metadata.scram import Upsertion, alter, describe
from odradek.wire import scram
from odradek.wire.errors import ErrorCode

SHA256, SHA512 = 1, 2


def _up(name: str, mech: int = SHA256, iterations: int = 4096, pw: str = "pw") -> Upsertion:
    hash_name = scram.BY_ID[mech].hash_name if mech in scram.BY_ID else "sha256"
    return Upsertion(name, mech, iterations, b"salt",
                     scram.salted_password(hash_name, pw, b"salt", iterations))


def _apply(image: MetadataImage, deletions: list[tuple[str, int]],
           upsertions: list[Upsertion]) -> dict[str, tuple[int, str | None]]:
    decision = alter(image.scram, deletions, upsertions)
    for record in decision.records:
        image.replay(record)
    return decision.results


def test_upsert_derives_keys_and_replays() -> None:
    image = MetadataImage()
    assert _apply(image, [], [_up("alice"), _up("bob", SHA512, 8192)]) == {
        "alice": (0, None), "bob": (0, None)}
    cred = image.scram.get("alice", "SCRAM-SHA-256")
    assert cred == scram.credential("sha256", "pw", b"salt", 4096)
    assert image.scram.get("alice", "SCRAM-SHA-512") is None
    assert image.scram.get("bob", "SCRAM-SHA-512") is not None
    assert "pw" not in repr(image.scram)


def test_per_user_errors() -> None:
    image = MetadataImage()
    _apply(image, [], [_up("carol")])
    results = _apply(image, [("dan", SHA256), ("carol", SHA512)], [
        _up("eve"), _up("eve"),                 # twice: DUPLICATE_RESOURCE
        _up(""),                                # empty name
        _up("fay", 0),                          # unknown mechanism
        _up("gus", SHA256, 100),                # too few iterations
        _up("hal", SHA512, 20000),              # too many
        _up("ivy", SHA512),                     # fine
    ])
    assert results["eve"][0] == ErrorCode.DUPLICATE_RESOURCE
    assert results[""][0] == ErrorCode.UNACCEPTABLE_CREDENTIAL
    assert results["fay"][0] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert results["gus"] == (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
    assert results["hal"] == (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    assert results["dan"][0] == ErrorCode.RESOURCE_NOT_FOUND
    assert results["carol"][0] == ErrorCode.RESOURCE_NOT_FOUND
    assert results["ivy"] == (0, None)
    assert sorted(image.scram.by_user) == ["carol", "ivy"]


def test_a_users_changes_fail_together() -> None:
    image = MetadataImage()
    results = _apply(image, [("jo", SHA512)], [_up("jo")])  # the deletion fails
    assert results["jo"][0] == ErrorCode.RESOURCE_NOT_FOUND
    assert image.scram.by_user == {}


def test_delete_and_describe() -> None:
    image = MetadataImage()
    _apply(image, [], [_up("kim"), _up("lee")])
    _apply(image, [], [_up("kim", SHA512, 8192)])
    assert describe(image.scram, None) == [
        ("kim", 0, None, [(SHA256, 4096), (SHA512, 8192)]), ("lee", 0, None, [(SHA256, 4096)])]
    assert _apply(image, [("lee", SHA256)], []) == {"lee": (0, None)}
    assert describe(image.scram, ["lee", "kim", "kim"])[0][1] == ErrorCode.RESOURCE_NOT_FOUND
    assert describe(image.scram, ["kim", "kim"])[0][1] == ErrorCode.DUPLICATE_RESOURCE
    assert [u for u, *_ in describe(image.scram, [])] == ["kim"]


def test_snapshot_keeps_credentials() -> None:
    image = MetadataImage()
    _apply(image, [], [_up("mo"), _up("mo", SHA512)])
    rebuilt = MetadataImage()
    for record in image.to_records():
        rebuilt.replay(record)
    assert rebuilt.scram == image.scram
