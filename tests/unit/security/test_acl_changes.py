"""CreateAcls / DeleteAcls as controller decisions (metadata/acl_changes.py):
validation, idempotence, removal, and the image's replay and snapshot of them."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable

from odradek.metadata.acl_changes import create_acls, delete_acls
from odradek.metadata.acls import AclBinding, AclFilter, PatternType, ResourceType
from odradek.metadata.image import MetadataImage
from odradek.wire.errors import ErrorCode
from odradek.wire.internal.access_control_entry_record import AccessControlEntryRecord
from odradek.wire.internal.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)

GOOD = AclBinding(2, "t", 3, "User:alice", "*", 3, 3)


def new_id_source() -> Callable[[], uuid.UUID]:
    counter = itertools.count(1)
    return lambda: uuid.UUID(int=next(counter))


def test_invalid_bindings_are_refused_with_invalid_request() -> None:
    bad = [
        AclBinding(0, "t", 3, "User:a", "*", 3, 3),   # UNKNOWN resource type
        AclBinding(1, "t", 3, "User:a", "*", 3, 3),   # ANY resource type
        AclBinding(2, "t", 1, "User:a", "*", 3, 3),   # ANY pattern
        AclBinding(2, "t", 2, "User:a", "*", 3, 3),   # MATCH pattern
        AclBinding(2, "t", 3, "User:a", "*", 1, 3),   # ANY operation
        AclBinding(2, "t", 3, "User:a", "*", 3, 1),   # ANY permission
        AclBinding(2, "", 3, "User:a", "*", 3, 3),    # empty name
        AclBinding(2, "t", 3, "alice", "*", 3, 3),    # no principal type
    ]
    outcome = create_acls(MetadataImage().acls, [*bad, GOOD], new_id_source())
    assert [r.error for r in outcome.results] == [ErrorCode.INVALID_REQUEST] * len(bad) + [0]
    assert all(r.message for r in outcome.results[:-1])
    assert len(outcome.records) == 1


def test_an_existing_binding_again_is_a_success_that_writes_nothing() -> None:
    image = MetadataImage()
    outcome = create_acls(image.acls, [GOOD, GOOD], new_id_source())
    assert [r.error for r in outcome.results] == [0, 0] and len(outcome.records) == 1
    for record in outcome.records:
        image.replay(record)
    again = create_acls(image.acls, [GOOD], new_id_source())
    assert again.results[0].error == 0 and again.records == []


def test_delete_reports_and_removes_matches_once() -> None:
    image = MetadataImage()
    other = AclBinding(3, "g", 4, "User:bob", "*", 2, 2)
    for r in create_acls(image.acls, [GOOD, other], new_id_source()).records:
        image.replay(r)
    outcome = delete_acls(image.acls, [AclFilter(), AclFilter(ResourceType.GROUP),
                                       AclFilter(pattern_type=PatternType.UNKNOWN)])
    assert [set(r.removed) for r in outcome.results[:2]] == [{GOOD, other}, {other}]
    assert outcome.results[2].error == ErrorCode.INVALID_REQUEST
    assert len(outcome.records) == 2
    assert all(isinstance(r, RemoveAccessControlEntryRecord) for r in outcome.records)
    for r in outcome.records:
        image.replay(r)
    assert len(image.acls) == 0


def test_snapshot_keeps_the_acls_with_their_ids() -> None:
    image = MetadataImage()
    for r in create_acls(image.acls, [GOOD], new_id_source()).records:
        image.replay(r)
    records = [r for r in image.to_records() if isinstance(r, AccessControlEntryRecord)]
    assert records == [AccessControlEntryRecord(uuid.UUID(int=1), 2, "t", 3, "User:alice",
                                                 "*", 3, 3)]
    copy = MetadataImage()
    for r in image.to_records():
        copy.replay(r)
    assert copy.acls.by_id == image.acls.by_id
