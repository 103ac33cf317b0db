"""Followers: the replica fetchers that copy each partition from its leader.

A broker that hosts a replica it does not lead fetches it from the leader,
as Kafka's ``ReplicaFetcherThread`` does: one fetcher (a task with one
connection) per leader broker and per ``num.replica.fetchers`` bucket, each
sending sessionless Fetch v12 requests with ``replica_id`` = this node, and for
every partition its log end (``fetch_offset``), the newest leader epoch in its
log (``last_fetched_epoch``) and the leader epoch it believes current. The
leader answers (see ``handlers/k01_fetch.py``) with batches up to its log end
and its high watermark, or with the epoch where this log diverges.

For each partition of an answer:

* batches: appended as they are (:meth:`PartitionState.append_as_follower`,
  offsets kept, gaps allowed), the HW taken as far as the log reaches; when
  ``flush.messages`` is reached the fsync runs before the next fetch;
* ``diverging_epoch``: the log is cut where it stops agreeing
  (:meth:`PartitionState.truncate_to_divergence`) and fetched again;
* OFFSET_OUT_OF_RANGE: below the leader's log start the log starts over there,
  empty; past the leader's end it is cut to the leader's HW;
* NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION (the
  leader's metadata a little behind this broker's, as for a new partition):
  the partition is asked again after 50 ms; FENCED_LEADER_EPOCH (this broker's
  metadata is behind) and other errors wait ``replica.fetch.backoff.ms``; the
  metadata log will move the partition to its new leader.

The follower's replication throttle (:mod:`~odradek.broker.replica.throttle`):
a partition ``follower.replication.throttled.replicas`` lists for this broker
is left out of the fetches while ``follower.replication.throttled.rate`` is
exceeded, unless it is caught up (its log end at the leader's high watermark
as last answered); the bytes fetched for listed partitions are recorded
against the rate. A listed partition asks for at most one second of the rate
per fetch (Odradek's, so one fetch cannot overshoot a low rate by a whole
``replica.fetch.max.bytes``); when every partition of a fetcher is held back
it looks again after 50 ms.

An answer is applied only if the partition is still followed from that leader
at the same epoch and its log end is still the offset fetched from.

``odradek.inter.broker.address.overrides`` (``ID=HOST:PORT,...``) sends this
node's fetches for a leader somewhere else than its registered listener: the
chaos harness puts a proxy it controls on each link that way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from odradek.broker.aio import cancel_and_wait, wait_event
from odradek.broker.net.tls import broker_client_security, inter_broker_listener
from odradek.broker.peers import OVERRIDES, broker_address, parse_overrides
from odradek.broker.replica.partitions import Partition
from odradek.broker.replica.throttle import FOLLOWER, ReplicationQuota
from odradek.client.connection import Connection
from odradek.replication.effects import Changed
from odradek.wire.errors import ErrorCode
from odradek.wire.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from odradek.wire.messages.fetch_response import PartitionData

if TYPE_CHECKING:
    from odradek.broker.replica.ports import MetadataView

log = logging.getLogger("odradek.replication")
FETCH_VERSION = 12
_METADATA_LAG = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH,
                           ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})


@dataclass(slots=True)
class _Fetcher:
    leader: int
    parts: dict[tuple[str, int], Partition] = field(default_factory=dict)
    delayed: dict[tuple[str, int], float] = field(default_factory=dict)
    """Partitions in back-off after an error, until this loop time."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    conn: Connection | None = None


class ReplicaFetchers:
    """Every fetcher of this broker, kept in line with the metadata image."""

    def __init__(self, state: MetadataView) -> None:
        config = state.config
        self.state = state
        self.buckets = max(1, config.get_int("num.replica.fetchers"))
        self.wait_ms = config.get_int("replica.fetch.wait.max.ms")
        self.min_bytes = config.get_int("replica.fetch.min.bytes")
        self.max_bytes = config.get_int("replica.fetch.max.bytes")
        self.response_max_bytes = config.get_int("replica.fetch.response.max.bytes")
        self.backoff_s = config.get_int("replica.fetch.backoff.ms") / 1000
        self.overrides = parse_overrides(config.get(OVERRIDES))
        self.security = broker_client_security(config, inter_broker_listener(config))
        """TLS towards the leaders' inter-broker listener."""
        self.quota = ReplicationQuota(state, FOLLOWER)
        self.lag: dict[tuple[str, int], int] = {}
        """Per partition: the leader's high watermark minus this log's end, as of
        the last answer (absent: unknown, so not caught up)."""
        self.fetchers: dict[tuple[int, int], _Fetcher] = {}
        self._closed = False

    def follow_all(self) -> None:
        """Start fetching every partition this broker follows (start-up)."""
        self.update(self.state.partitions.partitions.values())

    def update(self, moved: Iterable[Partition]) -> None:
        """The leaders of ``moved`` changed: follow each from its new leader, or stop
        if this broker leads it now (or it has no leader)."""
        if self._closed:
            return
        for part in moved:
            key = (part.topic, part.index)
            for other in self.fetchers.values():
                if other.parts.pop(key, None) is not None:
                    other.delayed.pop(key, None)
            st = part.state
            if st.is_leader or st.leader_id < 0:
                continue
            bucket = (st.leader_id, hash(key) % self.buckets)
            fetcher = self.fetchers.get(bucket)
            if fetcher is None:
                fetcher = self.fetchers[bucket] = _Fetcher(st.leader_id)
                fetcher.task = asyncio.get_running_loop().create_task(self._run(fetcher))
            fetcher.parts[key] = part
            fetcher.wake.set()

    def forget(self, key: tuple[str, int]) -> None:
        self.lag.pop(key, None)
        for fetcher in self.fetchers.values():
            fetcher.parts.pop(key, None)

    async def close(self) -> None:
        self._closed = True
        await cancel_and_wait(*(f.task for f in self.fetchers.values()))
        for fetcher in self.fetchers.values():
            if fetcher.conn is not None:
                with contextlib.suppress(Exception):
                    await fetcher.conn.close()
        self.fetchers.clear()

    # -- one fetcher --------------------------------------------------------------------

    def _throttled(self, ready: dict[tuple[str, int], Partition]) -> set[tuple[str, int]]:
        """The partitions of ``ready`` the follower quota covers."""
        quota = self.quota
        if quota.bound <= 0:
            return set()
        return {key for key in ready if quota.is_throttled(*key)}

    def _held_back(self, throttled: set[tuple[str, int]]) -> set[tuple[str, int]]:
        """Kafka's shouldFollowerThrottle: listed, not caught up, quota exceeded."""
        if not throttled or not self.quota.exceeded(self.quota.now_ms()):
            return set()
        return {key for key in throttled if self.lag.get(key, 1) > 0}

    def _address(self, leader: int) -> str | None:
        return broker_address(self.state.image, self.state.config, leader, self.overrides)

    async def _run(self, fetcher: _Fetcher) -> None:
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            ready = {k: p for k, p in fetcher.parts.items() if fetcher.delayed.get(k, 0) <= now}
            if not ready:
                fetcher.wake.clear()
                soonest = min(fetcher.delayed.values(), default=now + 1) - now
                await wait_event(fetcher.wake, max(soonest, 0.01))
                continue
            try:
                await self._fetch_once(fetcher, ready)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure: reconnect after back-off
                log.debug("replica fetch from %d failed: %s", fetcher.leader, exc)
                if fetcher.conn is not None:
                    with contextlib.suppress(Exception):
                        await fetcher.conn.close()
                    fetcher.conn = None
                await asyncio.sleep(self.backoff_s)

    async def _fetch_once(self, fetcher: _Fetcher, ready: dict[tuple[str, int], Partition]) -> None:
        if fetcher.conn is None:
            address = self._address(fetcher.leader)
            if address is None:
                raise ConnectionError(f"broker {fetcher.leader} has no endpoint")
            fetcher.conn = await Connection.open(
                address, f"odradek-replica-{self.state.node_id}", timeout_s=5,
                security=self.security)
        # A fetch offset says "I have everything below": writes still pending (this
        # replica led until just now) complete first.
        for part in ready.values():
            if part.log.writes_pending:
                await self.state.partitions.writes_done(part)
        asked: dict[tuple[str, int], tuple[int, int]] = {}
        topics: dict[str, list[FetchPartition]] = {}
        throttled = self._throttled(ready)
        held = self._held_back(throttled)
        if held and len(held) == len(ready):
            await asyncio.sleep(0.05)
            return
        for key, part in ready.items():
            if key in held:
                continue
            st = part.state
            asked[key] = (st.leader_epoch, st.log_end_offset)
            limit = self.max_bytes if key not in throttled else max(
                1, min(self.max_bytes, self.quota.bound))
            topics.setdefault(key[0], []).append(FetchPartition(
                partition=key[1], current_leader_epoch=st.leader_epoch,
                fetch_offset=st.log_end_offset, last_fetched_epoch=st.last_fetched_epoch,
                log_start_offset=st.log_start_offset, partition_max_bytes=limit))
        request = FetchRequest(
            replica_id=self.state.node_id, max_wait_ms=self.wait_ms, min_bytes=self.min_bytes,
            max_bytes=self.response_max_bytes, isolation_level=0, session_id=0,
            session_epoch=-1,
            topics=[FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()])
        timeout = self.wait_ms / 1000 + 10
        response = await asyncio.wait_for(
            fetcher.conn.request(request, FETCH_VERSION, FETCH_VERSION), timeout)
        if response.error_code:
            raise ConnectionError(f"fetch error {response.error_code}")
        loop = asyncio.get_running_loop()
        flush_due: list[Partition] = []
        appended: list[Partition] = []
        for topic in response.responses:
            for data in topic.partitions:
                key = (topic.topic, data.partition_index)
                followed = fetcher.parts.get(key)
                if followed is None or key not in asked:
                    continue
                part = followed
                st = part.state
                if (st.leader_epoch, st.log_end_offset) != asked[key] or st.is_leader:
                    continue  # moved on meanwhile: this answer is stale
                if key in throttled and data.records:
                    self.quota.record(len(data.records), self.quota.now_ms())
                if not self._apply(part, data, flush_due, appended):
                    # The leader not knowing it leads yet (a new partition, or its
                    # metadata a few ms behind ours) is retried soon; anything
                    # else waits replica.fetch.backoff.ms.
                    soon = data.error_code in _METADATA_LAG
                    fetcher.delayed[key] = loop.time() + (
                        min(self.backoff_s, 0.05) if soon else self.backoff_s)
                else:
                    fetcher.delayed.pop(key, None)
                    if data.high_watermark >= 0:
                        self.lag[key] = data.high_watermark - part.state.log_end_offset
        # The next fetch tells the leader this log's end: the writes (on the writer
        # threads) complete first, and with flush.messages reached the fsync
        # too, which is what moves the leader's HW past these records
        # (docs/durability.md).
        for part in appended:
            await self.state.partitions.writes_done(part)
        for part in flush_due:
            await self.state.partitions.flush(part)

    def _apply(self, part: Partition, data: PartitionData, flush_due: list[Partition],
               appended: list[Partition]) -> bool:
        """One partition of the leader's answer; False to back off."""
        st = part.state
        code = data.error_code
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            st.out_of_range(data.log_start_offset, data.high_watermark)
            return True
        if code:
            return False
        diverging = data.diverging_epoch
        if diverging.epoch >= 0 or diverging.end_offset >= 0:
            before = st.log_end_offset
            after = st.truncate_to_divergence(diverging.epoch, diverging.end_offset)
            log.info("%s-%d: log diverges from leader %d after epoch %d; truncated %d -> %d",
                     part.topic, part.index, st.leader_id, diverging.epoch, before, after)
            return True
        records = data.records or b""
        assert isinstance(records, (bytes, bytearray, memoryview))
        result = self.state.partitions.append_as_follower(
            part, memoryview(records), data.high_watermark, data.log_start_offset)
        if result.write is not None:
            appended.append(part)
        if result.error_code:
            log.warning("%s-%d: cannot append the leader's batches: %s", part.topic,
                        part.index, result.error_message)
            return False
        if result.changed & Changed.FLUSH:
            flush_due.append(part)
        return True
