"""Replication throttles: the quotas a reassignment's copying is held to.

Kafka's ``ReplicationQuotaManager``, one per side of a replica fetch:

* the **leader** quota, ``leader.replication.throttled.rate`` bytes per second
  (this broker's dynamic config, else the cluster default, else the static
  value; 0, Odradek's default, is no limit), over the partitions the topic
  config ``leader.replication.throttled.replicas`` lists for this broker;
* the **follower** quota, ``follower.replication.throttled.rate``, over the
  partitions ``follower.replication.throttled.replicas`` lists for it.

A list is ``*`` (every partition of the topic, on every broker) or
``partition:broker`` entries (:func:`~odradek.metadata.topic_configs.parse_throttled_replicas`).

What a quota does, as Kafka's (``ReplicaManager.shouldLeaderThrottle``,
``ReplicaFetcherThread.shouldFollowerThrottle``):

* the rate is a :class:`~odradek.broker.net.quotas.Rate` over
  ``replication.quota.window.num`` (11) windows of
  ``replication.quota.window.size.seconds`` (1), measured over at least all
  but one of them; the quota is *exceeded* once that rate is above the bound.
  (So, as in Kafka, a quiet quota lets about ``num - 1`` windows' worth through
  at once before it holds back; operators who want a smoother copy lower
  ``replication.quota.window.num``.)
* the leader, answering a follower's fetch, reads nothing for a throttled
  partition while the quota is exceeded **unless that follower is in the
  ISR**, and records the bytes it sends for throttled partitions (in-sync
  followers' too);
* the follower leaves a throttled partition out of its fetches while its
  quota is exceeded **unless it is caught up** (its log end at the leader's
  high watermark as last answered), and records the bytes it gets for
  throttled partitions.

Clients are never throttled by these quotas, and a caught-up replica keeps
replicating at full speed, so producers with acks=all are not held back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.net.quotas import Rate
from odradek.metadata.topic_configs import parse_throttled_replicas

if TYPE_CHECKING:
    from odradek.broker.replica.ports import MetadataView

LEADER = "leader"
FOLLOWER = "follower"


class ReplicationQuota:
    """One side's (``leader`` or ``follower``) replication quota on this broker."""

    def __init__(self, state: MetadataView, side: str) -> None:
        self.state = state
        self.rate_key = f"{side}.replication.throttled.rate"
        self.replicas_key = f"{side}.replication.throttled.replicas"
        config = state.config
        self.rate = Rate(config.get_int("replication.quota.window.size.seconds") * 1000,
                         max(2, config.get_int("replication.quota.window.num")))
        self.bound = config.get_int(self.rate_key)
        """Bytes per second; 0 or less is no limit."""
        self.recorded_bytes = 0
        """Every byte recorded, for tests and metrics."""
        self._parsed: dict[tuple[str, str], frozenset[int] | None] = {}
        state.on_config_change.append(self._config_changed)

    def _config_changed(self, names: set[str]) -> None:
        if self.rate_key in names:
            self.bound = self.state.config.get_int(self.rate_key)

    def is_throttled(self, topic: str, index: int) -> bool:
        """Does this topic's throttled-replica list name ``index`` on this broker?"""
        t = self.state.image.topics.get(topic)
        value = t.configs.get(self.replicas_key) if t is not None else None
        if not value:
            return False
        key = (topic, value)
        parsed = self._parsed.get(key, ())
        if parsed == ():
            if len(self._parsed) > 10_000:
                self._parsed.clear()
            parsed = self._parsed[key] = parse_throttled_replicas(value, self.state.node_id)
        return parsed is None or (isinstance(parsed, frozenset) and index in parsed)

    def now_ms(self) -> float:
        """The quota's time: the monotonic clock (wall-clock steps must not move rates)."""
        return self.state.clock.monotonic_ms()

    def exceeded(self, now_ms: float) -> bool:
        """Is the measured rate over the bound (never, with no bound)?"""
        return self.bound > 0 and self.rate.measure(now_ms) > self.bound

    def record(self, size: int, now_ms: float) -> None:
        if size > 0:
            self.rate.record(size, now_ms)
            self.recorded_bytes += size

    def measured(self, now_ms: float) -> float:
        """Bytes per second recorded lately (the metric)."""
        return self.rate.measure(now_ms)
