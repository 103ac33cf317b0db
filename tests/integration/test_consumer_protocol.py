"""KIP-848's consumer group protocol with librdkafka's ``group.protocol=consumer``:
server-side assignment, incremental reassignment as members come and go,
commits that survive a restart, regex subscriptions, and a classic group
converted when empty."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from odradek.testing.broker import Broker
from odradek.wire.messages.consumer_group_describe_request import ConsumerGroupDescribeRequest
from odradek.wire.messages.list_groups_request import ListGroupsRequest
from tests.integration.groupclients import wait_until
from tests.support.rawclient import RawClient

FAST = {"group.consumer.heartbeat.interval.ms": "300",
        "group.consumer.session.timeout.ms": "6000",
        "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(**FAST) as b:
        yield b


#: Commit errors a Kafka application takes in its stride: the group moved on
#: while the commit was in flight (librdkafka rejoins by itself). The record
#: stays uncommitted, so whoever owns its partition next may read it again.
REBALANCE_ERRORS = frozenset({KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS,
                              KafkaError.UNKNOWN_MEMBER_ID, KafkaError.STALE_MEMBER_EPOCH})


class Member:
    """A ``group.protocol=consumer`` consumer on a thread of its own, committing
    each record before it takes the next (so a partition that moves is resumed
    where it was left). A commit the group refuses because it rebalanced is
    noted in ``refused`` (that record may then be read twice); any other error
    stops the member and fails the test."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], **conf: Any) -> None:
        self.conf = {"bootstrap.servers": bootstrap, "group.id": group,
                     "group.protocol": "consumer", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, **conf}
        self.topics = topics
        self.values: list[bytes] = []
        self.refused: list[bytes] = []
        self.owned: frozenset[tuple[str, int]] = frozenset()
        self.history: list[frozenset[tuple[str, int]]] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        try:
            consumer = Consumer(self.conf)
            consumer.subscribe(self.topics)
            try:
                while not self._stop.is_set():
                    msg = consumer.poll(0.05)
                    if msg is not None and not msg.error():
                        self.values.append(msg.value())
                        try:
                            consumer.commit(msg, asynchronous=False)
                        except KafkaException as exc:
                            if exc.args[0].code() not in REBALANCE_ERRORS:
                                raise
                            self.refused.append(msg.value())
                    owned = frozenset((tp.topic, tp.partition) for tp in consumer.assignment())
                    if owned != self.owned:
                        self.owned = owned
                        self.history.append(owned)
            finally:
                consumer.close()
        except BaseException as exc:  # surfaced by the test
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "consumer did not stop"
        if self.error is not None:
            raise AssertionError(f"consumer failed: {self.error!r}")


def _produce(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, v in enumerate(values):
        producer.produce(topic, v, partition=i % partitions)
    assert producer.flush(30) == 0


def _seen(members: list[Member]) -> Counter[bytes]:
    return Counter(v for m in members for v in m.values)


def _read_twice(members: list[Member]) -> list[bytes]:
    """Records read more than once, less those whose commit the group refused
    mid-rebalance (Kafka redelivers those by design)."""
    refused = {v for m in members for v in m.refused}
    return sorted(v for v, n in _seen(members).items() if n > 1 and v not in refused)


def _wait_split(members: list[Member], sizes: list[int], topic: str, partitions: int) -> None:
    def ok() -> bool:
        owned = [m.owned for m in members]
        union = frozenset().union(*owned)
        return (sorted(len(o) for o in owned) == sorted(sizes)
                and union == {(topic, p) for p in range(partitions)}
                and sum(len(o) for o in owned) == partitions)
    wait_until(ok, 30, f"assignment sizes {sizes}",
               lambda: [sorted(m.owned) for m in members])


def _describe(bootstrap: str, group: str) -> Any:
    raw = RawClient(bootstrap)
    try:
        return raw.request(ConsumerGroupDescribeRequest(group_ids=[group]), 1).groups[0]
    finally:
        raw.close()


def test_members_split_partitions_and_rebalance_incrementally(broker: Broker) -> None:
    topic, group = "cg-split", "g-split"
    broker.create_topic(topic, partitions=6)
    bootstrap = broker.bootstrap_servers
    first = [Member(bootstrap, group, [topic]) for _ in range(3)]
    members = list(first)
    try:
        _wait_split(members, [2, 2, 2], topic, 6)
        batch1 = [f"a{i}".encode() for i in range(60)]
        _produce(bootstrap, topic, batch1, 6)
        wait_until(lambda: len(_seen(members)) == 60, 30, "the first 60 records")

        fourth = Member(bootstrap, group, [topic])
        members.append(fourth)
        _wait_split(members, [1, 1, 2, 2], topic, 6)
        # Incremental: the three that were there kept partitions throughout; two
        # of them gave one up each, and nobody was emptied to rejoin.
        for m in first:
            assert all(h for h in m.history), m.history
        batch2 = [f"b{i}".encode() for i in range(60)]
        _produce(bootstrap, topic, batch2, 6)
        wait_until(lambda: len(_seen(members)) == 120, 30, "the next 60 records")

        leaving = members.pop(0)
        leaving.stop()
        _wait_split(members, [2, 2, 2], topic, 6)
        batch3 = [f"c{i}".encode() for i in range(60)]
        _produce(bootstrap, topic, batch3, 6)
        wait_until(lambda: len(_seen([*members, leaving])) == 180, 30, "the last 60 records")

        assert set(_seen([*members, leaving])) == set(batch1 + batch2 + batch3)
        assert _read_twice([*members, leaving]) == []  # every committed record read once

        # The clients may own their partitions a heartbeat before the coordinator
        # has every member at the new epoch: wait for the group to settle.
        wait_until(lambda: _describe(bootstrap, group).group_state == "Stable", 30,
                   "the group Stable", lambda: _describe(bootstrap, group))
        described = _describe(bootstrap, group)
        assert described.error_code == 0
        assert len(described.members) == 3
        assert {m.member_epoch for m in described.members} == {described.assignment_epoch}
        assert sorted(len(m.assignment.topic_partitions[0].partitions)
                      for m in described.members) == [2, 2, 2]
        assert described.assignor_name == "uniform"
    finally:
        for m in members:
            m.stop()


def test_committed_offsets_survive_a_restart(tmp_path: Any) -> None:
    topic, group = "cg-restart", "g-restart"
    with Broker(data_dir=str(tmp_path), **FAST) as b:
        b.create_topic(topic, partitions=3)
        _produce(b.bootstrap_servers, topic, [f"x{i}".encode() for i in range(30)], 3)
        m = Member(b.bootstrap_servers, group, [topic])
        try:
            wait_until(lambda: len(m.values) == 30, 30, "30 records")
        finally:
            m.stop()
        epoch_before = _describe(b.bootstrap_servers, group).group_epoch
    with Broker(data_dir=str(tmp_path), **FAST) as b:
        described = _describe(b.bootstrap_servers, group)
        assert described.error_code == 0
        assert described.group_state == "Empty"
        assert described.group_epoch == epoch_before
        _produce(b.bootstrap_servers, topic, [f"y{i}".encode() for i in range(30)], 3)
        m = Member(b.bootstrap_servers, group, [topic])
        try:
            wait_until(lambda: len(m.values) >= 30, 30, "the 30 new records")
        finally:
            m.stop()
        assert sorted(m.values) == sorted(f"y{i}".encode() for i in range(30))


def test_a_regex_subscription_picks_up_a_new_topic(broker: Broker) -> None:
    group = "g-regex"
    broker.create_topic("rx-one", partitions=2)
    broker.create_topic("other", partitions=1)
    bootstrap = broker.bootstrap_servers
    m = Member(bootstrap, group, ["^rx-.*"])
    try:
        wait_until(lambda: m.owned == {("rx-one", 0), ("rx-one", 1)}, 30, "rx-one's partitions",
                   lambda: m.owned)
        broker.create_topic("rx-two", partitions=2)
        _produce(bootstrap, "rx-two", [b"new-topic-0", b"new-topic-1"], 2)
        wait_until(lambda: {b"new-topic-0", b"new-topic-1"} <= set(m.values), 30,
                   "records of the new topic", lambda: (m.owned, m.values))
        assert ("other", 0) not in m.owned
        described = _describe(bootstrap, group)
        # librdkafka sends its regex subscriptions as one alternation: "(^rx-.*)".
        assert "^rx-.*" in (described.members[0].subscribed_topic_regex or "")
    finally:
        m.stop()


def test_an_empty_classic_group_converts_to_a_consumer_group(broker: Broker) -> None:
    topic, group = "cg-convert", "g-convert"
    broker.create_topic(topic, partitions=2)
    bootstrap = broker.bootstrap_servers
    _produce(bootstrap, topic, [f"old{i}".encode() for i in range(10)], 2)
    classic = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    classic.subscribe([topic])
    wait_until(lambda: _drain(classic, 10), 30, "the classic consumer's 10 records")
    classic.commit(asynchronous=False)
    classic.close()

    _produce(bootstrap, topic, [f"new{i}".encode() for i in range(10)], 2)
    m = Member(bootstrap, group, [topic])
    try:
        wait_until(lambda: len(m.values) >= 10, 30, "the 10 new records")
    finally:
        m.stop()
    assert sorted(m.values) == sorted(f"new{i}".encode() for i in range(10))
    raw = RawClient(bootstrap)
    try:
        listed = raw.request(ListGroupsRequest(types_filter=["consumer"]), 5).groups
    finally:
        raw.close()
    assert [(g.group_id, g.group_type, g.protocol_type) for g in listed] == [
        (group, "consumer", "consumer")]


_drained: dict[int, int] = {}


def _drain(consumer: Consumer, want: int) -> bool:
    msg = consumer.poll(0.1)
    if msg is not None and msg.error():
        raise KafkaException(msg.error())
    if msg is not None:
        _drained[id(consumer)] = _drained.get(id(consumer), 0) + 1
    return _drained.get(id(consumer), 0) >= want


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range"])
def test_a_classic_group_with_members_is_upgraded_online(broker: Broker, strategy: str) -> None:
    topic, group = f"cg-upgrade-{strategy}", f"g-upgrade-{strategy}"
    broker.create_topic(topic, partitions=6)
    bootstrap = broker.bootstrap_servers
    classic_conf = {"group.protocol": "classic", "partition.assignment.strategy": strategy,
                    "session.timeout.ms": 6000, "heartbeat.interval.ms": 300}
    classic = [Member(bootstrap, group, [topic], **classic_conf) for _ in range(2)]
    members = list(classic)
    try:
        _wait_split(members, [3, 3], topic, 6)
        _produce(bootstrap, topic, [f"u{i}".encode() for i in range(60)], 6)
        wait_until(lambda: len(_seen(members)) == 60, 30, "the first 60 records")

        newcomer = Member(bootstrap, group, [topic])  # group.protocol=consumer
        members.append(newcomer)
        _wait_split(members, [2, 2, 2], topic, 6)
        described = _describe(bootstrap, group)
        assert described.error_code == 0
        assert sorted(m.member_type for m in described.members) == [0, 0, 1]
        _produce(bootstrap, topic, [f"v{i}".encode() for i in range(60)], 6)
        wait_until(lambda: len(_seen(members)) == 120, 30, "the next 60 records")

        for m in classic:
            members.remove(m)
            m.stop()
        _wait_split(members, [6], topic, 6)
        _produce(bootstrap, topic, [f"w{i}".encode() for i in range(60)], 6)
        wait_until(lambda: len(_seen([*members, *classic])) == 180, 30, "the last 60 records")
        assert _read_twice([*members, *classic]) == []  # every committed record read once
    finally:
        for m in members:
            m.stop()


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range"])
def test_a_group_left_with_classic_members_is_downgraded_online(
        broker: Broker, strategy: str) -> None:
    """KIP-848's online downgrade with librdkafka on both protocols: the
    consumer-protocol member leaves, the group is classic again and its classic
    members share every partition, reading each committed record once."""
    topic, group = f"cg-down-{strategy}", f"g-down-{strategy}"
    broker.create_topic(topic, partitions=6)
    bootstrap = broker.bootstrap_servers
    classic_conf = {"group.protocol": "classic", "partition.assignment.strategy": strategy,
                    "session.timeout.ms": 6000, "heartbeat.interval.ms": 300}
    modern = Member(bootstrap, group, [topic])  # group.protocol=consumer
    members = [modern]
    try:
        _wait_split(members, [6], topic, 6)
        classic = [Member(bootstrap, group, [topic], **classic_conf) for _ in range(2)]
        members += classic
        _wait_split(members, [2, 2, 2], topic, 6)
        _produce(bootstrap, topic, [f"a{i}".encode() for i in range(60)], 6)
        wait_until(lambda: len(_seen(members)) == 60, 30, "the first 60 records")

        members.remove(modern)
        modern.stop()
        _wait_split(members, [3, 3], topic, 6)
        raw = RawClient(bootstrap)
        try:
            listed = raw.request(ListGroupsRequest(), 5).groups
        finally:
            raw.close()
        assert [(g.group_type, g.protocol_type) for g in listed if g.group_id == group] == [
            ("classic", "consumer")]
        _produce(bootstrap, topic, [f"b{i}".encode() for i in range(60)], 6)
        wait_until(lambda: len(_seen([*members, modern])) == 120, 30, "the next 60 records")
        assert _read_twice([*members, modern]) == []
    finally:
        for m in members:
            m.stop()
