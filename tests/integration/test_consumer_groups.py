"""Consumer groups with real clients: partitions shared out, rebalances on join,
leave and crash, independent groups, committed offsets across restarts, reset
policies and static membership."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.testing.broker import Broker
from tests.integration.groupclients import CLIENTS, Runner, check, wait_until
from tests.support.process import ServerProcess

SETTINGS = {"group.min.session.timeout.ms": "1000", "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(**SETTINGS) as b:
        yield b


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        producer.produce(topic, v, key=str(i).encode())
    assert producer.flush(30) == 0


def owners(runners: list[Runner]) -> list[frozenset[int]]:
    return [r.owned for r in runners]


def shared_out(runners: list[Runner], sizes: list[int], partitions: int = 6) -> bool:
    check(runners)
    owned = owners(runners)
    every = [p for o in owned for p in o]
    return sorted(len(o) for o in owned) == sorted(sizes) and sorted(every) == list(
        range(partitions)
    )


@pytest.mark.parametrize("client", CLIENTS)
def test_three_consumers_share_six_partitions_and_rebalance(broker: Broker, client: str) -> None:
    topic, group = f"share-{client}", f"share-{client}"
    broker.create_topic(topic, 6)
    runners = [Runner(client, broker.bootstrap_servers, group, topic) for _ in range(3)]
    extra: Runner | None = None
    try:
        wait_until(lambda: shared_out(runners, [2, 2, 2]), 60, "2 partitions each",
                   lambda: [r.history for r in runners])
        values = [f"{client}-{i}".encode() for i in range(600)]
        produce(broker.bootstrap_servers, topic, values)
        wait_until(lambda: sum(len(r.values) for r in runners) >= 600, 60, "all 600 records",
                   lambda: ([len(r.values) for r in runners], [r.history for r in runners]))
        received = Counter(v for r in runners for v in r.values)
        assert set(received) == set(values) and max(received.values()) == 1
        # A 4th member joins: 2/2/1/1, every partition owned once.
        extra = Runner(client, broker.bootstrap_servers, group, topic)
        everyone = [*runners, extra]
        wait_until(lambda: shared_out(everyone, [2, 2, 1, 1]), 60, "2/2/1/1 after a join")
        # One leaves: the other three cover all 6 again.
        runners[0].stop()
        rest = [*runners[1:], extra]
        wait_until(lambda: shared_out(rest, [2, 2, 2]), 60, "2/2/2 after a leave")
    finally:
        for r in [*runners, *([extra] if extra else [])]:
            if not r._stop.is_set():
                r.stop()


def test_two_groups_each_see_every_record(broker: Broker) -> None:
    broker.create_topic("fanout", 3)
    values = [f"f{i}".encode() for i in range(90)]
    a = Runner("confluent-range", broker.bootstrap_servers, "fan-a", "fanout")
    b = Runner("kafka-python", broker.bootstrap_servers, "fan-b", "fanout")
    try:
        produce(broker.bootstrap_servers, "fanout", values)
        wait_until(lambda: len(a.values) >= 90 and len(b.values) >= 90, 60, "both groups",
                   lambda: (len(a.values), len(b.values), a.history, b.history))
        assert sorted(a.values) == sorted(values) == sorted(b.values)
    finally:
        a.stop()
        b.stop()


def test_auto_offset_reset_earliest_and_latest(broker: Broker) -> None:
    broker.create_topic("reset", 1)
    produce(broker.bootstrap_servers, "reset", [b"old"])
    conf = {"bootstrap.servers": broker.bootstrap_servers}
    early = Consumer({**conf, "group.id": "reset-early", "auto.offset.reset": "earliest"})
    late = Consumer({**conf, "group.id": "reset-late", "auto.offset.reset": "latest"})
    seen: dict[str, list[bytes]] = {"early": [], "late": []}

    def drain() -> None:
        for name, c in (("early", early), ("late", late)):
            msg = c.poll(0.05)
            if msg is not None and not msg.error():
                seen[name].append(msg.value())

    try:
        early.subscribe(["reset"])
        late.subscribe(["reset"])

        def assigned() -> bool:
            drain()
            return len(early.assignment()) == 1 and len(late.assignment()) == 1

        wait_until(assigned, 30, "both assigned")
        # "latest" resolves its start at some point after assignment: keep adding
        # records until it gets one; it must never see the record from before.
        produced = 0

        def both() -> bool:
            nonlocal produced
            produce(broker.bootstrap_servers, "reset", [f"new-{produced}".encode()])
            produced += 1
            for _ in range(4):
                drain()
            return len(seen["early"]) >= 2 and len(seen["late"]) >= 1

        wait_until(both, 30, "records under each reset policy")
        assert seen["early"][:2] == [b"old", b"new-0"]
        assert seen["late"] and b"old" not in seen["late"]
        assert all(v.startswith(b"new-") for v in seen["late"])
    finally:
        early.close()
        late.close()


CRASHING_CONSUMER = textwrap.dedent("""
    import sys
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                  "session.timeout.ms": 3000, "heartbeat.interval.ms": 300,
                  "auto.offset.reset": "earliest"})
    c.subscribe([sys.argv[3]])
    while True:
        c.poll(0.1)
        if c.assignment():
            print("assigned", flush=True)
""")


def test_a_killed_consumer_loses_its_partitions_after_the_session_timeout(
    broker: Broker,
) -> None:
    broker.create_topic("crash", 6)
    survivor = Runner("confluent-range", broker.bootstrap_servers, "crash-g", "crash",
                      **{"session.timeout.ms": 3000})
    proc = subprocess.Popen(
        [sys.executable, "-c", CRASHING_CONSUMER, broker.bootstrap_servers, "crash-g", "crash"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "assigned"
        wait_until(lambda: len(survivor.owned) == 3, 30, "3 and 3 with the other process")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        wait_until(lambda: len(survivor.owned) == 6, 30, "all 6 after the session timeout")
        check([survivor])
    finally:
        if proc.poll() is None:
            proc.kill()
        survivor.stop()


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_commits_survive_a_broker_restart(tmp_path: Path, how: str) -> None:
    overrides = [f"{k}={v}" for k, v in SETTINGS.items()]
    server = ServerProcess(tmp_path, *overrides).start()
    try:
        produce(server.bootstrap, "durable", [f"d{i}".encode() for i in range(20)])
        consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "durable-g",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(["durable"])
        got = []

        def twelve() -> bool:
            msg = consumer.poll(0.1)
            if msg is not None and not msg.error():
                got.append(msg)
            return len(got) >= 12

        wait_until(twelve, 30, "12 records")
        consumer.commit(message=got[11], asynchronous=False)  # committed offset 12
        consumer.close()
        if how == "sigkill":
            server.kill()
        else:
            assert server.stop() == 0
        port = server.bootstrap.rsplit(":", 1)[1]
        server = ServerProcess(tmp_path, *overrides, f"listeners=PLAINTEXT://127.0.0.1:{port}")
        server.start()
        consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "durable-g",
                             "auto.offset.reset": "earliest"})
        try:
            wait_until(lambda: _committed(consumer) == 12, 30, "the committed offset back")
            consumer.subscribe(["durable"])
            first = None
            while first is None:
                msg = consumer.poll(1)
                first = msg if msg is not None and not msg.error() else None
            assert first.offset() == 12 and first.value() == b"d12"
        finally:
            consumer.close()
    finally:
        server.kill()


def _committed(consumer: Consumer) -> int:
    (tp,) = consumer.committed([TopicPartition("durable", 0)], timeout=5)
    return int(tp.offset)


def test_a_static_member_restarting_within_its_session_causes_no_rebalance(
    broker: Broker,
) -> None:
    broker.create_topic("static", 4)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})

    def static(instance: str) -> Runner:
        return Runner("confluent-range", broker.bootstrap_servers, "static-g", "static",
                      **{"group.instance.id": instance, "session.timeout.ms": 10000})

    a, b = static("instance-a"), static("instance-b")
    try:
        wait_until(lambda: shared_out([a, b], [2, 2], 4), 60, "2 and 2")
        before = admin.describe_consumer_groups(["static-g"])["static-g"].result()
        groups = broker.app.groups
        assert groups is not None
        generation = groups.coordinator.groups["static-g"].generation
        a_owned, b_history = a.owned, len(b.history)
        a.stop()  # a static member's close sends no LeaveGroup
        a = static("instance-a")
        wait_until(lambda: a.owned == a_owned, 30, "the same partitions back")
        after = admin.describe_consumer_groups(["static-g"])["static-g"].result()
        assert str(after.state) == str(before.state)
        assert {m.group_instance_id for m in after.members} == {"instance-a", "instance-b"}
        assert b.owned == frozenset(range(4)) - a_owned
        assert len(b.history) == b_history  # b's assignment never changed
        assert groups.coordinator.groups["static-g"].generation == generation
    finally:
        a.stop()
        b.stop()
