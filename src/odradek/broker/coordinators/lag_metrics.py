"""Consumer lag and the group coordinator's gauges, in the broker's metrics registry.

:class:`LagMetrics` registers gauge families whose values are computed when
the registry is rendered (a scrape of the metrics endpoint), from the group
coordinator's groups (:mod:`odradek.coordinator.lag` does the arithmetic):
nothing is done on the commit path, and nothing at all while nobody scrapes.
One computation serves every family of a scrape (kept :data:`MEMO_MS`); it
runs on the broker's loop and costs a pass over the served groups' committed
offsets and their topics' partitions.
The families, as kafka-exporter and jmx_exporter name them::

    kafka_consumergroup_lag{consumergroup,topic,partition}          HW - committed (-1: none)
    kafka_consumergroup_lag_sum{consumergroup,topic}
    kafka_consumergroup_current_offset{consumergroup,topic,partition}   committed (-1: none)
    kafka_consumergroup_members{consumergroup}
    odradek_consumergroup_lag_stable{consumergroup,topic,partition}     LSO - committed
    odradek_consumergroup_lag_stable_sum{consumergroup,topic}
    kafka_coordinator_group_groupmetadatamanager_numgroups               every group
    kafka_coordinator_group_groupmetadatamanager_numgroups<state>        classic groups by state
    kafka_coordinator_group_groupmetadatamanager_numoffsets              committed offsets
    kafka_server_group_coordinator_metrics_consumer_group_count{state}   KIP-848 groups by state
    kafka_server_group_coordinator_metrics_group_rebalance_count{protocol}  rebalances begun

Only the groups this broker coordinates (its loaded ``__consumer_offsets``
partitions) are reported: in a cluster, summing the series of every node
counts each group once.

Where the end offsets come from. A partition this broker leads: its partition
state, exact at the scrape. A partition led elsewhere (a cluster, where the
coordinator of a group need not host its partitions): :class:`RemoteEnds`, a
cache filled by ListOffsets (LATEST, read_uncommitted for the HW and
read_committed for the LSO) sent to the leaders in the background, as
kafka-exporter asks ListOffsets. A scrape never waits for it: it reads the
cache and, when the last refresh started at least ``refresh_s`` ago, starts
another for the partitions it needed; each request is bounded by
``timeout_s``; an entry older than ``max_age_s`` is dropped (its lag is then
not reported rather than stale). So remote lags are at most a refresh period
plus a request old, and the first scrape after a start reports committed
offsets without lag for remote partitions.

We build on :mod:`odradek.common.metrics` (a registry per broker already,
dependency-free, gauge callbacks read at rendering), not ``prometheus_client``:
the broker's other series are there, and the endpoint serves that registry.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from odradek.broker.peers import Peers
from odradek.common.clock import Clock
from odradek.common.metrics import Labels, Registry
from odradek.coordinator.group import Group
from odradek.coordinator.lag import CLASSIC_STATES, Ends, LagReport, consumer_lag, group_counts
from odradek.metadata.image import MetadataImage
from odradek.wire.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)

if TYPE_CHECKING:
    from odradek.broker.coordinators.group_runtime import GroupRuntime
    from odradek.broker.replica.partitions import PartitionManager

log = logging.getLogger("odradek.groups")

LATEST = -1
"""ListOffsets' timestamp for the end of the partition (HW or LSO by isolation)."""
LIST_OFFSETS_VERSION = 5
MEMO_MS = 500
"""How long one computation of the rows serves (the families of one scrape
read it in turn; two scrapers at once share it)."""
Key = tuple[str, int]
Counts = tuple[int, dict[str, int], dict[str, int]]


class RemoteEnds:
    """End offsets of partitions other brokers lead, refreshed in the background.

    Invariant: at most one refresh runs at a time; a refresh starts at most every
    ``refresh_s``; :meth:`get` answers from the cache only, entries at most
    ``max_age_s`` old.
    """

    def __init__(self, peers: Peers, image: Callable[[], MetadataImage], clock: Clock,
                 refresh_s: float = 5.0, timeout_s: float = 2.0,
                 max_age_s: float = 30.0) -> None:
        self.peers = peers
        self.image = image
        self.clock = clock
        self.refresh_s = refresh_s
        self.timeout_s = timeout_s
        self.max_age_s = max_age_s
        self.cache: dict[Key, tuple[Ends, int]] = {}
        """(topic, partition) -> (its ends, when they were fetched: the monotonic clock, ms)."""
        self._task: asyncio.Task[None] | None = None
        self._started_ms: int | None = None

    def get(self, topic: str, partition: int) -> Ends | None:
        entry = self.cache.get((topic, partition))
        if entry is None:
            return None
        if self.clock.monotonic_ms() - entry[1] > self.max_age_s * 1000:
            del self.cache[(topic, partition)]
            return None
        return entry[0]

    def want(self, keys: set[Key]) -> None:
        """The scrape needed these: refresh them in the background when due."""
        if not keys or (self._task is not None and not self._task.done()):
            return
        now = self.clock.monotonic_ms()
        if self._started_ms is not None and now - self._started_ms < self.refresh_s * 1000:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # rendered outside the broker's loop: nothing to refresh with
        self._started_ms = now
        self._task = loop.create_task(self.refresh(set(keys)))

    async def refresh(self, keys: set[Key]) -> None:
        """ListOffsets to the leader of each partition in ``keys``, concurrently,
        each bounded by ``timeout_s``; what answers goes into the cache, and what
        the scrape no longer needs goes out of it."""
        for key in [k for k in self.cache if k not in keys]:
            del self.cache[key]
        image = self.image()
        by_leader: dict[int, dict[str, list[int]]] = {}
        for topic, partition in keys:
            t = image.topics.get(topic)
            p = t.partitions.get(partition) if t is not None else None
            if p is not None and p.leader >= 0:
                by_leader.setdefault(p.leader, {}).setdefault(topic, []).append(partition)
        await asyncio.gather(*(self._ask(leader, parts) for leader, parts in by_leader.items()))

    async def _ask(self, leader: int, parts: dict[str, list[int]]) -> None:
        try:
            hw, lso = await asyncio.wait_for(asyncio.gather(
                self._list(leader, parts, 0), self._list(leader, parts, 1)), self.timeout_s)
        except Exception as exc:  # unreachable, slow, or an odd answer: try again later
            log.debug("lag: end offsets from broker %d: %s", leader, exc)
            return
        now = self.clock.monotonic_ms()
        for key, high in hw.items():
            if key in lso:
                self.cache[key] = (Ends(high, lso[key]), now)

    async def _list(self, leader: int, parts: dict[str, list[int]], isolation: int,
                    ) -> dict[Key, int]:
        request = ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
            ListOffsetsTopic(name=t, partitions=[
                ListOffsetsPartition(partition_index=p, timestamp=LATEST) for p in sorted(ps)])
            for t, ps in sorted(parts.items())])
        response = await self.peers.request(leader, request, LIST_OFFSETS_VERSION)
        return {(t.name, p.partition_index): p.offset
                for t in response.topics for p in t.partitions
                if p.error_code == 0 and p.offset >= 0}

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


class LagMetrics:
    """The gauges of the module docstring over one broker's group coordinator."""

    def __init__(self, groups: Callable[[], GroupRuntime | None], partitions: PartitionManager,
                 image: Callable[[], MetadataImage], remote: RemoteEnds) -> None:
        """``groups``: the running group coordinator (None once stopped: no series)."""
        self.groups = groups
        self.partitions = partitions
        self.image = image
        self.remote = remote
        self._memo: tuple[int, LagReport, Counts] | None = None

    def served(self) -> list[Group]:
        """The groups this broker coordinates now (their partitions loaded)."""
        runtime = self.groups()
        if runtime is None:
            return []
        store = runtime.coordinator.store
        return [g for gid, g in store.groups.items() if not store.is_loading(gid)
                and store.partition_of(gid) not in store.foreign]

    def report(self) -> LagReport:
        """The lag rows now; one computation serves every family of one scrape
        (kept :data:`MEMO_MS`)."""
        return self._current_memo()[1]

    def counts(self) -> Counts:
        """(every group, classic groups by state, consumer groups by state)."""
        return self._current_memo()[2]

    def _current_memo(self) -> tuple[int, LagReport, Counts]:
        now = self.remote.clock.monotonic_ms()
        memo = self._memo
        if memo is None or now - memo[0] >= MEMO_MS or now < memo[0]:
            memo = self._memo = (now, self._compute(), group_counts(self.served()))
        return memo

    def _compute(self) -> LagReport:
        image = self.image()
        remote: set[Key] = set()

        def count(topic: str) -> int | None:
            t = image.topics.get(topic)
            return len(t.partitions) if t is not None else None

        def ends(topic: str, partition: int) -> Ends | None:
            part = self.partitions.get(topic, partition)
            if part is not None and part.state.is_leader:
                state = part.state
                return Ends(state.high_watermark, state.last_stable_offset)
            remote.add((topic, partition))
            return self.remote.get(topic, partition)

        report = consumer_lag(self.served(), count, ends)
        self.remote.want(remote)
        return report

    # -- the families' readers -------------------------------------------------------

    def _lag(self, stable: bool) -> Iterable[tuple[Labels, float]]:
        for row in self.report().partitions:
            lag = row.stable_lag if stable else row.lag
            if lag is not None:
                yield (row.group, row.topic, str(row.partition)), lag

    def _sums(self, stable: bool) -> Iterable[tuple[Labels, float]]:
        yield from self.report().sums(stable).items()

    def _current(self) -> Iterable[tuple[Labels, float]]:
        for row in self.report().partitions:
            yield (row.group, row.topic, str(row.partition)), row.committed

    def _members(self) -> Iterable[tuple[Labels, float]]:
        for group, n in self.report().members.items():
            yield (group,), n

    def _rebalances(self) -> Iterable[tuple[Labels, float]]:
        runtime = self.groups()
        if runtime is not None:
            for protocol, n in sorted(runtime.coordinator.store.rebalances.items()):
                yield (protocol,), n

    def _in_state(self, state: str) -> Callable[[], Iterable[tuple[Labels, float]]]:
        return lambda: [((), self.counts()[1][state])]

    def register(self, registry: Registry) -> None:
        part = ("consumergroup", "topic", "partition")
        gauge = registry.gauge
        gauge("kafka_consumergroup_lag", "Consumer group lag: high watermark minus committed "
              "offset (-1: nothing committed)", part, lambda: self._lag(False))
        gauge("kafka_consumergroup_lag_sum", "Consumer group lag summed over a topic's "
              "committed partitions", part[:2], lambda: self._sums(False))
        gauge("odradek_consumergroup_lag_stable", "Consumer group lag of a read_committed "
              "consumer: last stable offset minus committed offset (-1: nothing committed)",
              part, lambda: self._lag(True))
        gauge("odradek_consumergroup_lag_stable_sum", "Read_committed lag summed over a "
              "topic's committed partitions", part[:2], lambda: self._sums(True))
        gauge("kafka_consumergroup_current_offset", "Committed offset of a consumer group "
              "(-1: nothing committed)", part, self._current)
        gauge("kafka_consumergroup_members", "Members of a consumer group", ("consumergroup",),
              self._members)
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        gauge(prefix + "numgroups", "Groups this broker coordinates", (),
              lambda: [((), self.counts()[0])])
        for state in CLASSIC_STATES:
            gauge(prefix + "numgroups" + state.value.lower(),
                  f"Classic groups in state {state.value}", (), self._in_state(state.value))
        gauge(prefix + "numoffsets", "Committed offsets of the groups this broker coordinates",
              (), lambda: [((), sum(len(g.offsets) for g in self.served()))])
        gauge("kafka_server_group_coordinator_metrics_group_rebalance_count",
              "Rebalances begun on this broker since it started, by group protocol "
              "(cumulative)", ("protocol",), self._rebalances)
        gauge("kafka_server_group_coordinator_metrics_consumer_group_count",
              "Consumer (KIP-848) groups by state", ("state",),
              lambda: [((s.lower(),), n)
                       for s, n in self.counts()[2].items()])
