"""Enforcing client quotas: windowed rates and throttle times, Kafka's way.

Each (quota key, entity) has a sensor: a :class:`Rate` over
``quota.window.num`` samples of ``quota.window.size.seconds`` (11 x 1 s by
default). Produce requests are charged their size, Fetch responses theirs,
and with a ``request_percentage`` quota every request is charged the time its
handler ran (waits for long polls and fsyncs excluded), as a percentage of one
thread. When a charge takes a rate over its quota, the throttle time is
Kafka's ``(rate - quota) / quota * window span``, capped at the whole window.
The broker sends the answer at once with ``throttle_time_ms`` set and then
mutes the connection (reads and serves nothing on it) for that long, as Kafka
does since KIP-219. A Fetch from a client already over its quota is answered
with no records (so a muted consumer gets no data it was not owed); any other
Fetch is answered whole and then charged, so a response larger than the quota
allows in a window cannot starve its consumer.

The user of a quota is the name of the connection's principal
(:func:`odradek.metadata.quotas.user_of`): ``User:alice`` after SASL is
``alice``; on a PLAINTEXT listener every client is ``User:ANONYMOUS``, so user
quotas apply through the user ``ANONYMOUS`` or the default user. A user-level
quota is one sensor shared by all of that user's client-ids; under a default
each user (or client-id) gets its own.

Cost on the produce/fetch path: with no quota of a key configured, a charge
costs one set lookup; otherwise the resolution of ``(key, user, client-id)``
is cached in the metadata image's ``derived`` dict, which every replay empties
(so an AlterClientQuotas takes effect with the next request).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from odradek.common.windowed import Windowed
from odradek.metadata import quotas as model
from odradek.metadata.image import MetadataImage

ANONYMOUS = model.ANONYMOUS


class Rate:
    """A sum over time windows, as Kafka's ``Rate`` over a ``SampledStat``.

    Samples are ``[start_ms, value]``; a sample ends ``window_ms`` after it
    starts; samples that started ``num * window_ms`` or more ago are dropped.
    The rate is the total divided by the time since the oldest sample started,
    counted as at least ``num - 1`` whole windows, so a new client is measured
    over the full span rather than its first few milliseconds.
    """

    __slots__ = ("num", "samples", "window_ms")

    def __init__(self, window_ms: int, num: int) -> None:
        self.window_ms = window_ms
        self.num = num
        self.samples: deque[list[float]] = deque()

    def record(self, value: float, now_ms: float) -> None:
        self._purge(now_ms)
        samples = self.samples
        if not samples or now_ms >= samples[-1][0] + self.window_ms:
            samples.append([now_ms, 0.0])
        samples[-1][1] += value

    def _purge(self, now_ms: float) -> None:
        horizon = now_ms - self.num * self.window_ms
        samples = self.samples
        while samples and samples[0][0] <= horizon:
            samples.popleft()

    def span_ms(self, now_ms: float) -> float:
        oldest = self.samples[0][0] if self.samples else now_ms
        return max(now_ms - oldest, (self.num - 1) * self.window_ms, 1.0)

    def measure(self, now_ms: float) -> float:
        """Per second."""
        self._purge(now_ms)
        total = sum(v for _, v in self.samples)
        return total * 1000 / self.span_ms(now_ms)

    @property
    def idle_since_ms(self) -> float:
        return self.samples[-1][0] if self.samples else 0.0


def throttle_ms(rate: float, quota: float, span_ms: float, cap_ms: float) -> int:
    """Kafka's throttle time for a rate over its quota (0 when within it)."""
    if rate <= quota:
        return 0
    return int(min((rate - quota) / quota * span_ms, cap_ms))


class QuotaManager:
    """The sensors of one broker; quota values are read from the metadata image."""

    def __init__(self, image: Callable[[], MetadataImage], window_ms: int, num: int) -> None:
        self._image = image
        self.window_ms = window_ms
        self.num = num
        self._sensors: dict[tuple[str, model.Entity], Rate] = {}
        self.throttles: dict[tuple[str, model.Entity], Windowed] = {}
        """The throttle times (ms) given to each sensor's clients, over the quota's
        windows (Kafka's ``throttle-time`` sensor; read by the metrics)."""
        self._charges = 0

    def active(self, key: str) -> bool:
        """Is any quota of ``key`` configured? (Cheap; cached per metadata change.)"""
        image = self._image()
        if not image.client_quotas:
            return False
        cache = image.derived
        found = cache.get("quota-keys")
        if found is None:
            found = cache["quota-keys"] = {
                k for values in image.client_quotas.values() for k in values}
        return key in found

    @property
    def sensors(self) -> dict[tuple[str, model.Entity], Rate]:
        """Every live sensor, by (quota key, entity charged); read by the metrics."""
        return self._sensors

    def _sensor(self, key: str, client_id: str, user: str
                ) -> tuple[float, Rate, model.Entity] | None:
        image = self._image()
        cache: dict[tuple[str, str, str], tuple[float, model.Entity] | None] | None = \
            image.derived.get("quota-resolved")
        if cache is None:
            cache = image.derived["quota-resolved"] = {}
        cache_key = (key, user, client_id)
        if cache_key in cache:
            resolved = cache[cache_key]
        else:
            resolved = cache[cache_key] = model.resolve(
                image.client_quotas, key, user, client_id)
        if resolved is None:
            return None
        quota, entity = resolved
        sensor = self._sensors.get((key, entity))
        if sensor is None:
            sensor = self._sensors[(key, entity)] = Rate(self.window_ms, self.num)
        return quota, sensor, entity

    def _throttled(self, key: str, entity: model.Entity, ms: int, now_ms: float) -> int:
        if ms:
            stat = self.throttles.get((key, entity))
            if stat is None:
                stat = self.throttles[(key, entity)] = Windowed(self.window_ms, self.num)
            stat.record(ms, now_ms)
        return ms

    def charge(self, key: str, client_id: str | None, value: float, now_ms: float, *,
               user: str) -> int:
        """Record ``value`` against the ``key`` quota of ``(user, client_id)`` (``user``
        being the principal's name, :func:`odradek.metadata.quotas.user_of`); the
        throttle time in ms."""
        if not self.active(key):
            return 0
        found = self._sensor(key, client_id or "", user)
        if found is None:
            return 0
        quota, sensor, entity = found
        sensor.record(value, now_ms)
        self._charges += 1
        if self._charges % 1024 == 0:
            self._expire(now_ms)
        return self._throttled(key, entity, throttle_ms(
            sensor.measure(now_ms), quota, sensor.span_ms(now_ms), self.window_ms * self.num),
            now_ms)

    def pending(self, key: str, client_id: str | None, now_ms: float, *, user: str) -> int:
        """The throttle time the client is already due, charging nothing (when
        not 0, the answer is throttled by it: it counts in :attr:`throttles`)."""
        found = self._sensor(key, client_id or "", user) if self.active(key) else None
        if found is None:
            return 0
        quota, sensor, entity = found
        return self._throttled(key, entity, throttle_ms(
            sensor.measure(now_ms), quota, sensor.span_ms(now_ms), self.window_ms * self.num),
            now_ms)

    def _expire(self, now_ms: float) -> None:
        """Drop sensors with no charge for two whole spans (clients that went away)."""
        horizon = now_ms - 2 * self.num * self.window_ms
        for k in [k for k, s in self._sensors.items() if s.idle_since_ms < horizon]:
            del self._sensors[k]
            self.throttles.pop(k, None)

    def connection_rate(self, ip: str) -> float | None:
        """The ``connection_creation_rate`` quota of connections from ``ip``, if any."""
        image = self._image()
        if not image.client_quotas:
            return None
        return model.resolve_ip(image.client_quotas, ip)
