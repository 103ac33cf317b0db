"""The replica manager: what produce and fetch do with the partitions this node hosts.

The Produce and Fetch handlers translate requests and answers; the rest is
here, as in Kafka's ``ReplicaManager.appendRecords`` and ``fetchMessages``.

Produce (:meth:`ReplicaManager.append`, :meth:`ReplicaManager.completed`):
the append as the leader, synchronous (validation, the idempotent-producer
checks, offsets), the answer kept for a producer's pipelined batch after a
retriable refusal, and the delayed produce: the write, the fsync
``flush.messages`` wants and, with acks=-1, the high watermark past the records,
within the request's timeout.

Fetch (:meth:`ReplicaManager.fetch_records`):

- which partitions answer: a consumer's only where this node leads them
  (:meth:`Leadership.serving`), a follower's where this replica leads, once
  this process's registration is in the metadata;
- the leader-epoch check (KIP-320) and, for a follower, the divergence check
  and the record of its log end, which may move the high watermark (waking
  consumers and completing acks=all produces) and make it eligible to join
  the ISR;
- the byte budget: ``max_bytes`` over the whole request, ``partition_max_bytes``
  each, and at least one whole batch from the first partition that has one
  (KIP-74);
- reads that never block the event loop: a lookup that needs bytes not in the
  page cache is retried after a thread has read them in
  (:func:`~odradek.broker.net.transfer.collect_without_waiting`), and the
  slices of an answer are warmed before it is written;
- the leader's replication throttle (:mod:`~odradek.broker.replica.throttle`):
  a throttled partition answers no records to an out-of-sync follower while
  the leader quota is exceeded, and the bytes sent for throttled partitions
  are recorded against it;
- the long poll: with fewer than ``min_bytes`` ready, wait up to ``max_wait_ms``
  for an append to any of the partitions read.

Invariant: a partition's answer is read in one pass on the event loop, after
its checks, with no await in between: what is answered is a consistent view
of that partition.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable

from odradek.broker.net.transfer import FileRecords, collect_without_waiting, warm
from odradek.broker.ports import (
    BrokerStopping,
    FetchedPartition,
    FetchParams,
    FetchResult,
    NotLeaderError,
    PartitionFetch,
    PartitionGoneError,
    Produced,
    ProduceEntry,
)
from odradek.broker.replica.partitions import Partition, PartitionManager
from odradek.broker.replica.ports import Leadership
from odradek.broker.replica.throttle import ReplicationQuota
from odradek.broker.replica.traffic import TopicTraffic
from odradek.replication.partition import Appended, Origin, leader_epoch_error
from odradek.storage.errors import StorageError
from odradek.wire.batch import BATCH_HEADER_SIZE, read_batch_header
from odradek.wire.errors import ErrorCode

log = logging.getLogger("odradek.broker")

MAX_WAIT_MS_CAP = 300_000
"""The longest long poll, whatever ``max_wait_ms`` asks."""


IN_SERVICE_WAIT_S = 5.0
"""How long a produce to a node that is not yet in service waits for it."""


class ReplicaManager:
    def __init__(self, partitions: PartitionManager, leadership: Leadership,
                 now_ms: Callable[[], int], leader_quota: ReplicationQuota | None = None,
                 ) -> None:
        self.partitions = partitions
        self.leadership = leadership
        self.now_ms = now_ms
        self.leader_quota = leader_quota
        """The leader's replication throttle (cluster nodes; broker/replica/throttle.py)."""
        self.traffic = TopicTraffic()
        """Clients' messages and bytes in and out, by topic (the metrics endpoint's)."""

    # -- produce -----------------------------------------------------------------------

    async def ready_to_append(self, timeout_s: float) -> None:
        """Before a produce is appended: a cluster node that has just started leads
        nothing until it is registered, while the other nodes' metadata may
        already name it the leader. The produce then waits for that (at most
        ``IN_SERVICE_WAIT_S`` and its own timeout), as this node's Metadata
        answers do, instead of being refused: a refused request followed by the
        same producer's next one, taken once this node leads, answers that one
        OUT_OF_ORDER_SEQUENCE_NUMBER, and librdkafka then bumps its epoch and
        sends its unacknowledged records again as new ones."""
        await self.leadership.wait_in_service(min(IN_SERVICE_WAIT_S, timeout_s))

    def append_records(self, entries: list[ProduceEntry], acks: int,
                       internal_topics: frozenset[str],
                       verify: Callable[[int, int, tuple[str, int]], int],
                       client_id: str | None = None) -> list[Produced]:
        """Append each entry's records (:meth:`append`), in order, with nothing
        else running in between: a partition this node does not lead gets the
        metadata service's error, an internal topic INVALID_TOPIC_EXCEPTION (only
        coordinators write there, as Kafka's "Cannot append to internal topic"),
        a missing records field CORRUPT_MESSAGE, and ``verify(producer id, epoch,
        (topic, partition))`` (the transaction coordinator's KIP-890 check of a
        transactional batch, asked once the batch is scanned, unless the
        producer's transaction is already open on the partition at that epoch)
        its error before anything is appended."""
        out = []
        for entry in entries:
            part = self.leadership.serving(entry.topic, entry.index)
            if entry.topic in internal_topics:
                out.append(Produced(ErrorCode.INVALID_TOPIC_EXCEPTION))
            elif part is None:
                out.append(Produced(self.leadership.missing_partition_error(
                    entry.topic, entry.index)))
            elif entry.records is None:
                out.append(Produced(ErrorCode.CORRUPT_MESSAGE))
            else:
                result = self.append(part, entry.records, acks, client_id,
                                     functools.partial(_verify_unless_open, part, verify))
                if result.appended:
                    self.traffic.produced(entry.topic, result.last_offset - result.first_offset
                                          + 1, len(entry.records))
                out.append(Produced(
                    result.error_code, result.error_message,
                    -1 if result.error_code else result.first_offset,
                    result.log_append_time_ms, result.log_start_offset, part, result))
        return out

    def append(self, part: Partition, records: memoryview, acks: int,
               client_id: str | None = None,
               verify: Callable[[int, int], int] | None = None) -> Appended:
        """Append a client's records as the leader (validated, checked against the
        idempotent-producer state, offsets assigned) and wake the fetches waiting
        on ``part``. Synchronous: nothing else runs between the checks and the
        append. A retriable refusal made before the sequence check is kept, so
        the producer's next batch, already in flight, is answered alike
        (:func:`_pipelined_refusal`)."""
        result = self.partitions.append_now(part, records, Origin.CLIENT, acks, verify)
        result = _pipelined_refusal(part, records, result)
        if result.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            # Rare, and what makes an idempotent client bump its epoch (librdkafka
            # then sends its unacknowledged records again as new ones): logged
            # with the leader epoch so that a duplicate can be traced to it.
            log.info("%s-%d: %s (leader epoch %d, client %s)", part.topic, part.index,
                     result.error_message, part.state.leader_epoch, client_id)
        return result

    async def completed(self, part: Partition, result: Appended, acks: int,
                        timeout_s: float | None) -> int:
        """Wait for what ``acks`` asks of an append (the delayed produce): its
        write, the fsync ``flush.messages`` wants and, with acks=-1, the high
        watermark past its records. The error to answer with: REQUEST_TIMED_OUT
        after ``timeout_s`` (acks=-1), NOT_LEADER_OR_FOLLOWER if the leadership
        moved, UNKNOWN_TOPIC_OR_PARTITION if the partition was deleted,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
        ``min.insync.replicas`` meanwhile, a storage error if the write failed;
        0 once done. Raises BrokerStopping when the broker stops first (the
        records may be persisted: the produce is not answered). The records stay
        in the log whatever the answer."""
        st = part.state
        try:
            if acks == -1 and not (st.is_leader and st.leader_epoch == result.leader_epoch):
                # The leadership moved since the append: the offsets may hold
                # other records by now, so no HW may vouch for them.
                raise NotLeaderError(f"{part.topic}-{part.index} moved")
            if acks != -1:
                await self.partitions.complete(part, result, acks)
            elif result.write is not None or result.flush_due or (
                    st.replicated(result.last_offset) is None):
                await asyncio.wait_for(self.partitions.complete(part, result, acks), timeout_s)
        except TimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT
        except StorageError as exc:  # the write failed (a full disk, an IO error)
            return exc.error_code
        except BrokerStopping:
            raise
        except NotLeaderError:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        except PartitionGoneError:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        code = st.replicated(result.last_offset) if acks == -1 else 0
        return code or 0

    # -- fetch -------------------------------------------------------------------------

    async def fetch_records(self, params: FetchParams, wanted: list[PartitionFetch],
                            ) -> FetchResult:
        """Read ``wanted`` as ``params`` say, long-polling for ``min_bytes``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(max(params.max_wait_ms, 0), MAX_WAIT_MS_CAP) / 1000
        waited = 0.0
        collect = self._collect_follower if params.from_follower else self._collect
        while True:
            # The lookups read indexes and batch headers: a thread reads in what
            # is not cached, and the collection runs again (both change nothing
            # before a partition's read).
            answers, total, watched = await collect_without_waiting(
                lambda: collect(params, wanted))
            remaining_ms = (deadline - loop.time()) * 1000
            if total >= params.min_bytes or remaining_ms <= 0 or not watched:
                if total:
                    await warm([a.records for a in answers if a.records is not None])
                    if not params.from_follower:
                        for w, a in zip(wanted, answers, strict=True):
                            if a.size:
                                self.traffic.fetched(w.topic, a.size)
                return FetchResult(answers, total, waited)
            before = loop.time()
            await _wait_for_append(watched, remaining_ms, params.from_follower)
            waited += loop.time() - before

    def _collect(self, params: FetchParams, wanted: list[PartitionFetch],
                 ) -> tuple[list[FetchedPartition], int, list[Partition]]:
        """A consumer's fetch: each partition this node leads, up to its high
        watermark (or last stable offset)."""
        budget = params.max_bytes if params.max_bytes > 0 else 0
        total = 0
        answers: list[FetchedPartition] = []
        watched: list[Partition] = []
        for w in wanted:
            part = self.leadership.serving(w.topic, w.index)
            if part is None:
                answers.append(FetchedPartition(
                    self.leadership.missing_partition_error(w.topic, w.index)))
                continue
            code = leader_epoch_error(part.state.leader_epoch, w.current_leader_epoch)
            if code:
                answers.append(FetchedPartition(code))
                continue
            watched.append(part)
            answer = _read(part, w, budget - total, total == 0, params.isolation)
            total += answer.size
            answers.append(answer)
        return answers, total, watched

    def _collect_follower(self, params: FetchParams, wanted: list[PartitionFetch],
                          ) -> tuple[list[FetchedPartition], int, list[Partition]]:
        """A follower's fetch: each partition read up to the log end, or told where
        its log diverges; the follower's log end recorded (moving the HW, perhaps)."""
        now_ms = self.now_ms()
        budget = params.max_bytes if params.max_bytes > 0 else 0
        total = 0
        answers: list[FetchedPartition] = []
        watched: list[Partition] = []
        registered = self.leadership.registered
        quota = self.leader_quota
        # Kafka's shouldLeaderThrottle: decided once per fetch, before reading.
        over = quota is not None and quota.exceeded(quota.now_ms())
        throttled_bytes = 0
        for w in wanted:
            part = self.partitions.get(w.topic, w.index)
            code = (ErrorCode.NOT_LEADER_OR_FOLLOWER
                    if part is None or not part.state.is_leader or not registered
                    else leader_epoch_error(part.state.leader_epoch, w.current_leader_epoch))
            if part is None or code:
                answers.append(FetchedPartition(code))
                continue
            watched.append(part)
            limit = min(w.max_bytes, max(budget - total, 0))
            throttled = quota is not None and quota.is_throttled(w.topic, w.index)
            if throttled and over and params.replica_id not in part.state.isr:
                limit = -1  # held back: offsets only, the follower's fetch recorded
            read = part.state.read_for_follower(params.replica_id, w.fetch_offset,
                                                w.last_fetched_epoch, limit, now_ms,
                                                params.broker_epoch)
            self.partitions.act(part, read.changed)
            answer = FetchedPartition(
                read.error_code, read.high_watermark, read.high_watermark,
                read.log_start_offset, read=True)
            if read.diverging_epoch >= 0 or read.diverging_end_offset >= 0:
                answer.diverging_epoch = read.diverging_epoch
                answer.diverging_end_offset = read.diverging_end_offset
            elif read.size:
                answer.records = FileRecords(tuple(read.slices))
                answer.size = read.size
                total += read.size
                if throttled:
                    throttled_bytes += read.size
            answers.append(answer)
        if quota is not None:
            quota.record(throttled_bytes, quota.now_ms())
        return answers, total, watched


REFUSALS = frozenset({ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_LEADER_OR_FOLLOWER})
"""Retriable refusals made before the sequence check: nothing was appended."""
MAX_REFUSED = 10_000


def _pipelined_refusal(part: Partition, records: memoryview, result: Appended) -> Appended:
    """A producer's batch refused with a retriable error (NOT_ENOUGH_REPLICAS,
    say, just after a restart) is followed by its next batch, already in
    flight; if the refusal's cause ended meanwhile (a follower rejoined the
    ISR), that next batch meets a sequence gap. Kafka answers it
    OUT_OF_ORDER_SEQUENCE_NUMBER; the Java client then waits for the first
    batch's retry, but librdkafka bumps its epoch and sends every
    unacknowledged record again as new ones, duplicating those a previous
    leader had written. So a gap that starts at the batch this leader refused
    is answered with that refusal's error (retriable: the client retries both
    in order). Returns ``result``, or the refusal in its place. A partition
    with no refusal on record costs nothing more on the common path."""
    if (not part.refused and result.error_code not in REFUSALS) or (
            len(records) < BATCH_HEADER_SIZE):
        return result
    # The scan's row; a refusal made before the scan reads the header itself.
    header = result.first_batch or read_batch_header(records, 0)
    pid = header.producer_id
    if pid < 0 or header.is_control:
        return result
    if result.error_code in REFUSALS:
        if part.refused is None or len(part.refused) >= MAX_REFUSED:
            part.refused = {}
        part.refused[pid] = (header.producer_epoch, header.base_sequence, result.error_code)
    elif part.refused is None:
        return result
    elif result.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
        refused = part.refused.get(pid)
        if (refused is not None and refused[0] == header.producer_epoch
                and in_sequence_gap(refused[1], header.base_sequence)):
            log.info("%s-%d: producer %d's sequence %d follows its refused batch at %d: "
                     "answered %s, not OUT_OF_ORDER", part.topic, part.index, pid,
                     header.base_sequence, refused[1], ErrorCode(refused[2]).name)
            return dataclasses.replace(result, error_code=refused[2], error_message=None)
    elif not result.error_code:
        part.refused.pop(pid, None)
        if not part.refused:
            part.refused = None
    return result


def _verify_unless_open(part: Partition, verify: Callable[[int, int, tuple[str, int]], int],
                        producer_id: int, producer_epoch: int) -> int:
    """KIP-890: a producer whose transaction is open on ``part`` at this epoch (it
    wrote here in it already) needs no asking."""
    entry = part.state.producers.producers.get(producer_id)
    if entry is not None and entry.txn_first_offset >= 0 and entry.epoch == producer_epoch:
        return 0
    return verify(producer_id, producer_epoch, (part.topic, part.index))


def in_sequence_gap(refused_first: int, first: int) -> bool:
    """``first`` comes after ``refused_first`` (sequences wrap after 2^31-1)."""
    return 0 < (first - refused_first) % (1 << 31) < (1 << 30)


def _read(part: Partition, w: PartitionFetch, budget: int, first: bool,
          isolation: int) -> FetchedPartition:
    state = part.state
    limit = min(w.max_bytes, budget)
    if limit <= 0 and not first:  # the budget is spent: offsets only
        return FetchedPartition(0, state.high_watermark, state.last_stable_offset,
                                state.log_start_offset, read=True)
    read = state.read(w.fetch_offset, limit, isolation, min_one_batch=first)
    aborted = None
    if read.aborted is not None:
        aborted = [(a.producer_id, a.first_offset) for a in read.aborted]
    answer = FetchedPartition(read.error_code, read.high_watermark, read.last_stable_offset,
                              read.log_start_offset, aborted, read=True)
    if read.size:
        answer.records = FileRecords(tuple(read.slices))
        answer.size = read.size
    return answer


async def _wait_for_append(parts: list[Partition], timeout_ms: float,
                           follower: bool) -> None:
    """Park a fetch until one of ``parts`` has something for it: a follower's at
    the next append, a consumer's at the next move of the HW."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()
    for part in parts:
        part.park(fut, follower)
    try:
        await asyncio.wait_for(fut, timeout_ms / 1000)
    except TimeoutError:
        pass
    finally:
        for part in parts:
            part.unpark(fut, follower)
