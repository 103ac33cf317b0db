"""SCRAM credentials as cluster metadata (KIP-554): the model the image keeps,
and the controller's decision on AlterUserScramCredentials.

Credentials live in the metadata log as ``UserScramCredentialRecord`` (name,
mechanism id, salt, StoredKey, ServerKey, iterations; never a password) and
``RemoveUserScramCredentialRecord`` (name, mechanism), so every broker has
them and they survive restarts. :class:`ScramCredentials` is changed only by
:meth:`~ScramCredentials.replay`.

AlterUserScramCredentials rules (:func:`alter`), per user name (a user's
deletions and upsertions succeed or fail together, with one error):

- the same (user, mechanism) twice in the request → DUPLICATE_RESOURCE;
- an empty name → UNACCEPTABLE_CREDENTIAL;
- mechanism not SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2) → UNSUPPORTED_SASL_MECHANISM;
- iterations outside 4096..16384 → UNACCEPTABLE_CREDENTIAL;
- deleting a credential that does not exist → RESOURCE_NOT_FOUND.

The client sends the salted password; StoredKey and ServerKey are derived
here (:func:`odradek.wire.scram.credential_from_salted`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from odradek.wire import scram as scram_wire
from odradek.wire.errors import ErrorCode
from odradek.wire.scram import ScramCredential

USER_SCRAM_CREDENTIAL_RECORD = 11
REMOVE_USER_SCRAM_CREDENTIAL_RECORD = 22
"""Metadata record api keys; the record classes are imported when first needed
(a broker without SCRAM users never loads them)."""


@dataclass(slots=True)
class ScramCredentials:
    by_user: dict[str, dict[int, ScramCredential]] = field(default_factory=dict)
    """User name → mechanism id → credential."""

    def __repr__(self) -> str:
        return f"ScramCredentials(users={sorted(self.by_user)})"

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        mech = scram_wire.MECHANISMS.get(mechanism)
        if mech is None:
            return None
        return self.by_user.get(user, {}).get(mech.id)

    def replay(self, record: Any) -> None:
        """Apply a UserScramCredentialRecord or RemoveUserScramCredentialRecord
        (any other record is ignored)."""
        key = getattr(record, "API_KEY", -1)
        if key == USER_SCRAM_CREDENTIAL_RECORD:
            self.by_user.setdefault(record.name, {})[record.mechanism] = ScramCredential(
                bytes(record.salt), bytes(record.stored_key), bytes(record.server_key),
                record.iterations)
        elif key == REMOVE_USER_SCRAM_CREDENTIAL_RECORD:
            creds = self.by_user.get(record.name)
            if creds is not None:
                creds.pop(record.mechanism, None)
                if not creds:
                    del self.by_user[record.name]

    def to_records(self) -> list[Any]:
        if not self.by_user:
            return []
        from odradek.wire.internal.user_scram_credential_record import (
            UserScramCredentialRecord,
        )

        return [UserScramCredentialRecord(name=user, mechanism=mech, salt=c.salt,
                                          stored_key=c.stored_key, server_key=c.server_key,
                                          iterations=c.iterations)
                for user, creds in sorted(self.by_user.items())
                for mech, c in sorted(creds.items())]


@dataclass(frozen=True, slots=True)
class Upsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes = field(repr=False)


@dataclass(slots=True)
class Alteration:
    """Per user: (error, message); and the records of every user that succeeded."""

    results: dict[str, tuple[int, str | None]]
    records: list[Any]
    error: int = 0  # the controller queue's Outcome shape: nothing failed as a whole


def _check(creds: ScramCredentials, name: str, mechanism: int, iterations: int | None,
           deleting: bool) -> tuple[int, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    mech = scram_wire.BY_ID.get(mechanism)
    if mech is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if iterations is not None:
        if iterations < mech.min_iterations:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
        if iterations > mech.max_iterations:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if deleting and creds.by_user.get(name, {}).get(mechanism) is None:
        return (ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist")
    return None


def alter(creds: ScramCredentials, deletions: list[tuple[str, int]],
          upsertions: list[Upsertion]) -> Alteration:
    """The controller's decision on one AlterUserScramCredentials request."""
    seen: dict[tuple[str, int], int] = defaultdict(int)
    for name, mech in deletions:
        seen[(name, mech)] += 1
    for u in upsertions:
        seen[(u.name, u.mechanism)] += 1
    users = list(dict.fromkeys([n for n, _ in deletions] + [u.name for u in upsertions]))
    results: dict[str, tuple[int, str | None]] = {}
    for (name, _mech), count in seen.items():
        if count > 1:
            results[name] = (ErrorCode.DUPLICATE_RESOURCE,
                             "A user credential cannot be altered twice in the same request")
    for name, mech in deletions:
        if name not in results:
            problem = _check(creds, name, mech, None, True)
            if problem is not None:
                results[name] = problem
    for u in upsertions:
        if u.name not in results:
            problem = _check(creds, u.name, u.mechanism, u.iterations, False)
            if problem is not None:
                results[u.name] = problem
    from odradek.wire.internal.remove_user_scram_credential_record import (
        RemoveUserScramCredentialRecord,
    )
    from odradek.wire.internal.user_scram_credential_record import UserScramCredentialRecord

    records: list[Any] = []
    for name, mech in deletions:
        if name not in results:
            records.append(RemoveUserScramCredentialRecord(name=name, mechanism=mech))
    for u in upsertions:
        if u.name not in results:
            hash_name = scram_wire.BY_ID[u.mechanism].hash_name
            c = scram_wire.credential_from_salted(hash_name, u.salted_password, u.salt,
                                                  u.iterations)
            records.append(UserScramCredentialRecord(
                name=u.name, mechanism=u.mechanism, salt=c.salt, stored_key=c.stored_key,
                server_key=c.server_key, iterations=c.iterations))
    for name in users:
        results.setdefault(name, (ErrorCode.NONE, None))
    return Alteration(results, records)


def describe(creds: ScramCredentials, users: list[str] | None
             ) -> list[tuple[str, int, str | None, list[tuple[int, int]]]]:
    """(user, error, message, [(mechanism id, iterations)]) for the users named,
    or every user with a credential when ``users`` is None or empty; an
    unknown user gets RESOURCE_NOT_FOUND, one named twice DUPLICATE_RESOURCE."""
    if not users:
        users = sorted(creds.by_user)
    out: list[tuple[str, int, str | None, list[tuple[int, int]]]] = []
    counts: dict[str, int] = defaultdict(int)
    for name in users:
        counts[name] += 1
    for name in dict.fromkeys(users):
        if counts[name] > 1:
            out.append((name, ErrorCode.DUPLICATE_RESOURCE,
                        f"Cannot describe SCRAM credentials for the same user twice "
                        f"in a single request: {name}", []))
            continue
        found = creds.by_user.get(name)
        if not found:
            out.append((name, ErrorCode.RESOURCE_NOT_FOUND,
                        f"Attempt to describe nonexistent user: {name}", []))
            continue
        out.append((name, ErrorCode.NONE, None,
                    [(mech, c.iterations) for mech, c in sorted(found.items())]))
    return out
