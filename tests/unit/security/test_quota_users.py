"""Client quotas keyed by user: the principal's name, Kafka's eight-level
precedence with users and client-ids together, one sensor per matched entity
(a user's quota shared by all its client-ids, a default's not shared), and
the per-(user, client-id) cache emptied when quotas change."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

import pytest

from odradek.broker.net.context import RequestContext
from odradek.broker.net.pipeline import Call, RequestQuota
from odradek.broker.net.quotas import QuotaManager
from odradek.metadata import quotas as q
from odradek.metadata.image import MetadataImage
from odradek.wire.frames import Request
from odradek.wire.internal.client_quota_record import ClientQuotaRecord, EntityData
from odradek.wire.messages.request_header import RequestHeader

# Kafka's order, most specific first (docs/design.html "Quotas").
ORDER: list[q.Entity] = [
    (("client-id", "c"), ("user", "u")),
    (("client-id", None), ("user", "u")),
    (("user", "u"),),
    (("client-id", "c"), ("user", None)),
    (("client-id", None), ("user", None)),
    (("user", None),),
    (("client-id", "c"),),
    (("client-id", None),),
]


@pytest.mark.parametrize("principal, user", [
    ("User:alice", "alice"),
    ("User:ANONYMOUS", "ANONYMOUS"),
    ("User:CN=writer,OU=Unit,O=org", "CN=writer,OU=Unit,O=org"),
    ("User:a:b", "a:b"),
    ("Group:ops", "ops"),
    ("bare", "bare"),
])
def test_the_quota_user_is_the_principals_name(principal: str, user: str) -> None:
    assert q.user_of(principal) == user


def test_a_plaintext_request_is_the_anonymous_user() -> None:
    ctx = RequestContext(broker=None, api_version=0,  # type: ignore[arg-type]
                         header=RequestHeader(0, 0, 1, "c"), client_host="127.0.0.1")
    assert ctx.principal == "User:ANONYMOUS" and ctx.user == "ANONYMOUS"
    ctx.principal = "User:alice"
    assert ctx.user == "alice"


def test_every_level_loses_to_each_more_specific_one() -> None:
    """With all eight entities set, removing the winner each time hands the key to
    the next level down, in Kafka's order."""
    quotas: q.Quotas = {e: {q.PRODUCE: float(i + 1)} for i, e in enumerate(ORDER)}
    for i, entity in enumerate(ORDER):
        found = q.resolve(quotas, q.PRODUCE, "u", "c")
        assert found is not None and found[0] == i + 1, entity
        del quotas[entity]
    assert q.resolve(quotas, q.PRODUCE, "u", "c") is None


@pytest.mark.parametrize("user, client, value", [
    ("u", "c", 1.0),        # /users/u/clients/c
    ("u", "other", 2.0),    # /users/u/clients/<default>
    ("v", "c", 4.0),        # /users/<default>/clients/c
    ("v", "other", 5.0),    # /users/<default>/clients/<default>
])
def test_the_most_specific_match_for_each_client(user: str, client: str, value: float) -> None:
    quotas: q.Quotas = {e: {q.PRODUCE: float(i + 1)} for i, e in enumerate(ORDER)}
    found = q.resolve(quotas, q.PRODUCE, user, client)
    assert found is not None and found[0] == value


def test_a_user_quota_is_shared_by_all_of_the_users_clients() -> None:
    image = MetadataImage()
    image.client_quotas[(("user", "alice"),)] = {q.PRODUCE: 1000.0}
    manager = QuotaManager(lambda: image, 1000, 2)
    # 1000 B/s over a 1 s span: 600 bytes from each of two client-ids is 1200.
    assert manager.charge(q.PRODUCE, "one", 600, 0, user="alice") == 0
    assert manager.charge(q.PRODUCE, "two", 600, 0, user="alice") > 0
    # Another user is not limited at all.
    assert manager.charge(q.PRODUCE, "one", 10**9, 0, user="bob") == 0


def test_under_a_default_user_each_user_has_its_own_rate() -> None:
    image = MetadataImage()
    image.client_quotas[(("user", None),)] = {q.PRODUCE: 1000.0}
    manager = QuotaManager(lambda: image, 1000, 2)
    assert manager.charge(q.PRODUCE, "c", 600, 0, user="alice") == 0
    assert manager.charge(q.PRODUCE, "c", 600, 0, user="bob") == 0
    assert manager.charge(q.PRODUCE, "c", 600, 0, user="alice") > 0


def test_a_user_and_client_id_quota_overrides_the_users_for_that_client_only() -> None:
    image = MetadataImage()
    image.client_quotas[(("user", "ANONYMOUS"),)] = {q.PRODUCE: 1000.0}
    image.client_quotas[(("client-id", "bulk"), ("user", "ANONYMOUS"))] = {q.PRODUCE: 10**6}
    manager = QuotaManager(lambda: image, 1000, 2)
    assert manager.charge(q.PRODUCE, "bulk", 500_000, 0, user="ANONYMOUS") == 0
    assert manager.charge(q.PRODUCE, "small", 600, 0, user="ANONYMOUS") == 0
    assert manager.charge(q.PRODUCE, "tiny", 600, 0, user="ANONYMOUS") > 0  # shares "small"'s


def _record(entity: list[tuple[str, str | None]], key: str, value: float,
            remove: bool = False) -> ClientQuotaRecord:
    return ClientQuotaRecord(entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
                             key=key, value=value, remove=remove)


def test_replaying_a_quota_change_empties_the_cached_resolution() -> None:
    image = MetadataImage()
    image.replay(_record([("client-id", "c")], q.PRODUCE, 10.0))
    manager = QuotaManager(lambda: image, 1000, 2)
    assert manager.pending(q.PRODUCE, "c", 0, user="u") == 0
    assert manager.charge(q.PRODUCE, "c", 10**6, 0, user="u") > 0  # cached: client-id c
    image.replay(_record([("user", "u")], q.PRODUCE, 10.0**9))
    # The user's quota now wins: a new sensor, far from its limit.
    assert manager.charge(q.PRODUCE, "c", 10**6, 0, user="u") == 0
    image.replay(_record([("user", "u")], q.PRODUCE, 0.0, remove=True))
    assert manager.charge(q.PRODUCE, "c", 1, 0, user="u") > 0  # back on client-id c's sensor


def test_the_resolution_is_computed_once_per_user_and_client(
        monkeypatch: pytest.MonkeyPatch) -> None:
    image = MetadataImage()
    image.client_quotas[(("user", None),)] = {q.PRODUCE: 10.0**9}
    calls: list[tuple[str, str, str]] = []
    real = q.resolve

    def counting(quotas: q.Quotas, key: str, user: str, client_id: str) -> object:
        calls.append((key, user, client_id))
        return real(quotas, key, user, client_id)

    monkeypatch.setattr(q, "resolve", counting)
    manager = QuotaManager(lambda: image, 1000, 2)
    for _ in range(100):
        manager.charge(q.PRODUCE, "c", 1, 0, user="u")
        manager.charge(q.PRODUCE, "d", 1, 0, user="u")
    assert sorted(calls) == [(q.PRODUCE, "u", "c"), (q.PRODUCE, "u", "d")]


def test_the_request_quota_stage_charges_the_principals_user() -> None:
    """The pipeline's quota stage charges request time to ``ctx.user``: an
    authenticated ``User:alice`` is held by alice's quota, ``User:bob`` is not."""
    image = MetadataImage()
    image.client_quotas[(("user", "alice"),)] = {q.REQUEST: 0.001}
    stage = RequestQuota(QuotaManager(lambda: image, 1000, 2), lambda: 0.0)

    async def busy_handler(c: Call) -> Any:
        end = time.perf_counter() + 0.002
        while time.perf_counter() < end:
            pass
        return None

    def throttle_of(principal: str) -> int:
        header = RequestHeader(request_api_key=3, request_api_version=1, client_id="c")
        ctx = RequestContext(cast(Any, None), 1, header, "127.0.0.1", 10, principal=principal)
        c = Call(Request(3, 1, 1, header, None, 10), None, ctx)
        asyncio.run(stage(c, busy_handler))
        return ctx.throttle_ms

    assert throttle_of("User:alice") > 0
    assert throttle_of("User:bob") == 0
