"""Client quotas as plain code: rates and throttle times on given clocks, Kafka's
resolution order, AlterClientQuotas validation and DescribeClientQuotas matching."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.broker.net.quotas import QuotaManager, Rate, throttle_ms
from odradek.metadata import quotas as q
from odradek.metadata.image import MetadataImage
from odradek.wire.errors import ErrorCode


def test_rate_counts_at_least_num_minus_one_windows() -> None:
    rate = Rate(window_ms=1000, num=11)
    rate.record(10_000, now_ms=0)
    # A new sensor is measured over 10 whole windows, not over its first instant.
    assert rate.span_ms(0) == 10_000
    assert rate.measure(0) == pytest.approx(1000.0)
    rate.record(10_000, now_ms=10_500)
    # 10.5 s later the first sample is still inside the 11 windows.
    assert rate.measure(10_500) == pytest.approx(20_000 / 10.5)


def test_rate_forgets_samples_older_than_the_window() -> None:
    rate = Rate(window_ms=1000, num=3)
    rate.record(5000, now_ms=0)
    rate.record(1000, now_ms=2500)
    # The sample started at 0 started 3 windows or more before 3000: gone.
    assert rate.measure(3000) == pytest.approx(1000 * 1000 / 2000)


def test_throttle_time_is_kafkas_formula_capped() -> None:
    assert throttle_ms(900, 1000, 10_000, 11_000) == 0
    assert throttle_ms(1500, 1000, 10_000, 11_000) == 5000
    assert throttle_ms(100_000, 1000, 10_000, 11_000) == 11_000


@settings(max_examples=15, deadline=None, derandomize=True)
@given(quota=st.integers(1000, 10**7),
       fractions=st.lists(st.floats(0.01, 0.1), min_size=20, max_size=200))
def test_a_client_that_waits_its_throttle_stays_near_its_quota(
    quota: int, fractions: list[float]
) -> None:
    """Simulated: a producer sends whenever it is not muted, each request between a
    hundredth and a tenth of a second's quota (1 ms each, so it could go ten
    times faster than its quota); over a long run the bytes it gets through, past
    the first windows' burst, match its quota within 10 %. (With requests much
    larger than the quota, Kafka's windowed rate lets through up to num/(num-1)
    of it; that is Kafka's behaviour too.)"""
    image = MetadataImage()
    image.client_quotas[(("client-id", "p"),)] = {q.PRODUCE: float(quota)}
    manager = QuotaManager(lambda: image, 1000, 11)
    sizes = [max(1, int(f * quota)) for f in fractions]
    now = 0.0
    sent = 0
    while now < 30_000:
        for size in sizes:
            sent += size
            now += manager.charge(q.PRODUCE, "p", size, now, user="u") + 1
    burst = 10 * quota  # the first (num - 1) windows
    assert sent <= 1.1 * quota * now / 1000 + burst
    assert sent >= 0.9 * quota * now / 1000


def test_unlimited_clients_are_never_charged() -> None:
    image = MetadataImage()
    manager = QuotaManager(lambda: image, 1000, 11)
    assert manager.charge(q.PRODUCE, "anyone", 10**12, 0, user="u") == 0
    image.client_quotas[(("client-id", "other"),)] = {q.PRODUCE: 1.0}
    image.derived.clear()
    assert manager.charge(q.PRODUCE, "anyone", 10**12, 0, user="u") == 0
    assert manager.charge(q.PRODUCE, "other", 10**12, 0, user="u") > 0
    assert manager.charge(q.FETCH, "other", 10**12, 0, user="u") == 0  # another key


LEVELS: list[q.Entity] = [
    (("client-id", "c"), ("user", "u")),
    (("client-id", None), ("user", "u")),
    (("user", "u"),),
    (("client-id", "c"), ("user", None)),
    (("client-id", None), ("user", None)),
    (("user", None),),
    (("client-id", "c"),),
    (("client-id", None),),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_resolution_follows_kafkas_precedence(level: int) -> None:
    quotas: q.Quotas = {entity: {q.PRODUCE: float(i + 1)} for i, entity in
                        enumerate(LEVELS[level:], start=level)}
    found = q.resolve(quotas, q.PRODUCE, "u", "c")
    assert found is not None
    value, sensor = found
    assert value == level + 1
    # The sensor names the client's own user and client-id where the entity has them.
    assert dict(sensor) == {t: {"user": "u", "client-id": "c"}[t] for t, _ in LEVELS[level]}
    assert q.resolve(quotas, q.FETCH, "u", "c") is None


def test_each_key_resolves_on_its_own() -> None:
    quotas: q.Quotas = {
        (("client-id", "c"),): {q.PRODUCE: 1.0},
        (("user", None),): {q.FETCH: 2.0},
    }
    assert q.resolve(quotas, q.PRODUCE, "u", "c") == (1.0, (("client-id", "c"),))
    assert q.resolve(quotas, q.FETCH, "u", "c") == (2.0, (("user", "u"),))


@pytest.mark.parametrize("pairs, ops, message", [
    ([], [(q.PRODUCE, 1.0, False)], "empty"),
    ([("group", "g")], [(q.PRODUCE, 1.0, False)], "Unhandled client quota entity type"),
    ([("user", "a"), ("user", "b")], [(q.PRODUCE, 1.0, False)], "duplicate entity type"),
    ([("ip", "1.2.3.4"), ("user", "a")], [(q.CONNECTION_RATE, 1.0, False)], "IP entity"),
    ([("ip", "not-an-ip")], [(q.CONNECTION_RATE, 1.0, False)], "not a valid IP"),
    ([("user", "a")], [("bogus", 1.0, False)], "Invalid configuration key bogus"),
    ([("user", "a")], [(q.CONNECTION_RATE, 1.0, False)], "Invalid configuration key"),
    ([("ip", None)], [(q.PRODUCE, 1.0, False)], "Invalid configuration key"),
    ([("user", "a")], [(q.PRODUCE, 1.0, False), (q.PRODUCE, 2.0, False)], "Duplicate quota"),
    ([("user", "a")], [(q.PRODUCE, -5.0, False)], "greater than 0"),
    ([("user", "a")], [(q.PRODUCE, math.nan, False)], "greater than 0"),
    ([("user", "a")], [(q.PRODUCE, 1.5, False)], "whole number"),
])
def test_invalid_alterations_are_refused_with_kafkas_error(
    pairs: list[tuple[str, str | None]], ops: list[tuple[str, float, bool]], message: str
) -> None:
    result = q.alter({}, pairs, ops)
    assert result.error == ErrorCode.INVALID_REQUEST and not result.records
    assert result.message is not None and message.lower() in result.message.lower()


def test_alter_then_replay_sets_and_removes() -> None:
    image = MetadataImage()
    result = q.alter(image.client_quotas, [("user", "u"), ("client-id", None)],
                     [(q.PRODUCE, 100.0, False), (q.REQUEST, 12.5, False)])
    assert result.error == 0
    for record in result.records:
        image.replay(record)
    entity = (("client-id", None), ("user", "u"))
    assert image.client_quotas == {entity: {q.PRODUCE: 100.0, q.REQUEST: 12.5}}
    for record in q.alter(image.client_quotas, [("client-id", None), ("user", "u")],
                          [(q.PRODUCE, 0, True), (q.REQUEST, 0, True)]).records:
        image.replay(record)
    assert image.client_quotas == {}


QUOTAS: q.Quotas = {
    (("client-id", "a"),): {q.PRODUCE: 1.0},
    (("client-id", None),): {q.PRODUCE: 2.0},
    (("client-id", "a"), ("user", "u")): {q.FETCH: 3.0},
    (("user", None),): {q.REQUEST: 4.0},
    (("ip", "1.2.3.4"),): {q.CONNECTION_RATE: 5.0},
}


@pytest.mark.parametrize("components, strict, expected", [
    ([], False, len(QUOTAS)),
    ([("client-id", q.MATCH_EXACT, "a")], True, 1),
    ([("client-id", q.MATCH_EXACT, "a")], False, 2),
    ([("client-id", q.MATCH_DEFAULT, None)], False, 1),
    ([("client-id", q.MATCH_SPECIFIED, None)], False, 2),
    ([("user", q.MATCH_SPECIFIED, None)], False, 1),
    ([("user", q.MATCH_DEFAULT, None)], True, 1),
    ([("ip", q.MATCH_EXACT, "1.2.3.4")], True, 1),
    ([("client-id", q.MATCH_EXACT, "zzz")], False, 0),
])
def test_describe_matches_as_kafka_does(
    components: list[tuple[str, int, str | None]], strict: bool, expected: int
) -> None:
    found = q.describe(QUOTAS, components, strict)
    assert not isinstance(found, str)
    assert len(found) == expected


@pytest.mark.parametrize("components", [
    [("user", 0, "a"), ("user", 1, None)],
    [("ip", 1, None), ("user", 1, None)],
    [("user", 0, None)],
    [("user", 7, "a")],
])
def test_describe_refuses_bad_filters(components: list[tuple[str, int, str | None]]) -> None:
    assert isinstance(q.describe(QUOTAS, components, False), str)


def test_ip_connection_rate_resolves_exact_then_default() -> None:
    quotas: q.Quotas = {(("ip", None),): {q.CONNECTION_RATE: 3.0},
                        (("ip", "10.0.0.1"),): {q.CONNECTION_RATE: 7.0}}
    assert q.resolve_ip(quotas, "10.0.0.1") == 7.0
    assert q.resolve_ip(quotas, "10.0.0.2") == 3.0
    assert q.resolve_ip({}, "10.0.0.2") is None


def test_throttles_given_are_kept_per_sensor_for_the_metrics_and_expire_with_it() -> None:
    image = MetadataImage()
    image.client_quotas[(("client-id", "p"),)] = {q.PRODUCE: 1000.0}
    manager = QuotaManager(lambda: image, 1000, 3)
    key = (q.PRODUCE, (("client-id", "p"),))
    assert manager.charge(q.PRODUCE, "p", 500, 0, user="u") == 0
    assert manager.throttles == {} and set(manager.sensors) == {key}
    first = manager.charge(q.PRODUCE, "p", 5000, 10, user="u")
    due = manager.pending(q.PRODUCE, "p", 20, user="u")
    assert first > 0 and due > 0
    assert manager.throttles[key].avg(20) == pytest.approx((first + due) / 2)
    assert manager.charge(q.PRODUCE, "other", 10**6, 20, user="u") == 0  # no quota: no sensor
    assert set(manager.sensors) == {key}
    manager._expire(10 + 2 * 3 * 1000 + 1)  # idle for two spans
    assert manager.sensors == {} and manager.throttles == {}
