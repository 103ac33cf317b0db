"""Client quotas as metadata: validation of AlterClientQuotas, DescribeClientQuotas
matching, and the resolution of a client's limits (Kafka's quota model).

An *entity* is a sorted tuple of ``(entity type, name)`` pairs, a name of None
meaning the type's default: ``(("client-id", "app"),)``,
``(("client-id", None), ("user", "alice"))``, ``(("ip", "10.0.0.1"),)``.
Quotas are stored per entity as ``{key: value}`` in
:attr:`MetadataImage.client_quotas`, changed only by replaying
``ClientQuotaRecord`` (so they live in the metadata journal and survive
restarts, and will reach every broker once the metadata is a Raft log).

Keys: ``producer_byte_rate``, ``consumer_byte_rate`` (bytes/s, whole
numbers), ``request_percentage`` (percent of one thread),
``controller_mutation_rate`` for user and client-id entities;
``connection_creation_rate`` (connections/s, whole number) for ip entities,
which cannot be combined with the others.

Resolution (:func:`resolve`) follows Kafka's precedence, per key, from the
most specific entity that sets it:
``user+client-id``, ``user+default client-id``, ``user``,
``default user+client-id``, ``default user+default client-id``,
``default user``, ``client-id``, ``default client-id``.

The *user* of a client is the name part of its principal (:func:`user_of`):
``User:alice`` → ``alice``; an unauthenticated client is ``User:ANONYMOUS``,
user ``ANONYMOUS``, as in Kafka.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from typing import Any

from odradek.wire.errors import ErrorCode
from odradek.wire.internal.client_quota_record import ClientQuotaRecord
from odradek.wire.internal.client_quota_record import EntityData as RecordEntity

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)
PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
CONNECTION_RATE = "connection_creation_rate"
WHOLE_NUMBER_KEYS = {PRODUCE, FETCH, CONNECTION_RATE}
CLIENT_KEYS = {PRODUCE, FETCH, REQUEST, "controller_mutation_rate"}
IP_KEYS = {CONNECTION_RATE}
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
ANONYMOUS = "ANONYMOUS"

Entity = tuple[tuple[str, str | None], ...]
Quotas = dict[Entity, dict[str, float]]


@dataclass(frozen=True, slots=True)
class Alteration:
    """The outcome for one entry of an AlterClientQuotas request."""

    entity: Entity
    error: int
    message: str | None
    records: list[Any]


def entity_of(pairs: list[tuple[str, str | None]]) -> Entity | str:
    """The canonical entity, or an error message (Kafka's INVALID_REQUEST cases)."""
    if not pairs:
        return "Invalid empty client quota entity"
    types = [t for t, _ in pairs]
    for t in types:
        if t not in ENTITY_TYPES:
            return f"Unhandled client quota entity type: {t}"
    if len(set(types)) != len(types):
        return "Invalid duplicate entity type in client quota entity"
    if IP in types and len(types) > 1:
        return "Invalid quota entity combination, IP entity should not be combined with " \
               "User or ClientId"
    for t, name in pairs:
        if t == IP and name is not None:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                return f"{name} is not a valid IP or resolvable host."
    return tuple(sorted(pairs, key=lambda p: p[0]))


def alter(quotas: Quotas, pairs: list[tuple[str, str | None]],
          ops: list[tuple[str, float, bool]]) -> Alteration:
    """Validate one entry (entity and ``(key, value, remove)`` ops) and return the
    records that apply it; nothing is changed here (replay does that)."""
    entity = entity_of(pairs)
    if isinstance(entity, str):
        return Alteration((), ErrorCode.INVALID_REQUEST, entity, [])
    allowed = IP_KEYS if entity[0][0] == IP else CLIENT_KEYS
    seen: set[str] = set()
    records: list[Any] = []
    for key, value, remove in ops:
        if key in seen:
            return Alteration(entity, ErrorCode.INVALID_REQUEST,
                              f"Duplicate quota key {key} not updating quota for {_show(entity)}",
                              [])
        seen.add(key)
        if key not in allowed:
            return Alteration(entity, ErrorCode.INVALID_REQUEST,
                              f"Invalid configuration key {key}", [])
        if not remove:
            if not math.isfinite(value) or value <= 0:
                return Alteration(entity, ErrorCode.INVALID_REQUEST,
                                  f"Quota {key} must be greater than 0, got {value}", [])
            if key in WHOLE_NUMBER_KEYS and value != int(value):
                return Alteration(entity, ErrorCode.INVALID_REQUEST,
                                  f"Quota {key} must be a whole number, got {value}", [])
        records.append(ClientQuotaRecord(
            entity=[RecordEntity(entity_type=t, entity_name=n) for t, n in entity],
            key=key, value=0.0 if remove else float(value), remove=remove,
        ))
    return Alteration(entity, 0, None, records)


def replay(quotas: Quotas, record: ClientQuotaRecord) -> None:
    entity = tuple(sorted(((e.entity_type, e.entity_name) for e in record.entity),
                          key=lambda p: p[0]))
    if record.remove:
        values = quotas.get(entity)
        if values is not None:
            values.pop(record.key, None)
            if not values:
                del quotas[entity]
    else:
        quotas.setdefault(entity, {})[record.key] = record.value


def describe(
    quotas: Quotas, components: list[tuple[str, int, str | None]], strict: bool
) -> list[tuple[Entity, dict[str, float]]] | str:
    """Entities matching every component (type, match type, name), Kafka's rules;
    with ``strict`` an entity may have no type the filter does not name. An error
    message for a bad filter."""
    types = [t for t, _, _ in components]
    if len(set(types)) != len(types):
        return "Duplicate entity type in filter"
    for t, match_type, name in components:
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            return f"Unknown match type {match_type}"
        if match_type == MATCH_EXACT and name is None:
            return f"Request specified exact match for {t} with no name"
    if IP in types and (USER in types or CLIENT_ID in types):
        return "Invalid entity filter component combination, IP filter component should " \
               "not be used with User or ClientId filter component."
    out = []
    for entity, values in sorted(quotas.items(), key=lambda kv: str(kv[0])):
        names = dict(entity)
        if strict and set(names) != set(types):
            continue
        ok = True
        for t, match_type, name in components:
            if t not in names:
                ok = False
            elif match_type == MATCH_EXACT:
                ok = names[t] == name
            elif match_type == MATCH_DEFAULT:
                ok = names[t] is None
            else:
                ok = names[t] is not None
            if not ok:
                break
        if ok and values:
            out.append((entity, dict(values)))
    return out


def user_of(principal: str) -> str:
    """The quota user of a principal ``Type:name``: its name (Kafka keys user quotas
    by the principal's name whatever its type); a string with no type is a name."""
    _, sep, name = principal.partition(":")
    return name if sep else principal


def resolve(quotas: Quotas, key: str, user: str, client_id: str) -> tuple[float, Entity] | None:
    """The ``key`` quota of a client, and the entity whose sensor it is charged to
    (the defaults replaced by the client's own names, so that every client-id
    under a default quota has its own rate); None when unlimited."""
    candidates: tuple[tuple[tuple[str, str | None], ...], ...] = (
        ((CLIENT_ID, client_id), (USER, user)),
        ((CLIENT_ID, None), (USER, user)),
        ((USER, user),),
        ((CLIENT_ID, client_id), (USER, None)),
        ((CLIENT_ID, None), (USER, None)),
        ((USER, None),),
        ((CLIENT_ID, client_id),),
        ((CLIENT_ID, None),),
    )
    for entity in candidates:
        values = quotas.get(entity)
        if values is not None and key in values:
            names = {CLIENT_ID: client_id, USER: user}
            return values[key], tuple((t, names[t]) for t, _ in entity)
    return None


def resolve_ip(quotas: Quotas, ip: str) -> float | None:
    """``connection_creation_rate`` for connections from ``ip`` (exact, then default)."""
    for entity in (((IP, ip),), ((IP, None),)):
        values = quotas.get(entity)
        if values is not None and CONNECTION_RATE in values:
            return values[CONNECTION_RATE]
    return None


def _show(entity: Entity) -> str:
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)
