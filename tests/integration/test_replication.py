"""Replicated partitions with real processes: three ``odradek serve`` nodes, topics
with replication factor 3 and ``min.insync.replicas`` 2, the three clients
producing with ``acks=all`` while the leader is killed with SIGKILL, the ISR
shrinking and growing, a group's offsets and a transaction's state surviving
the loss of the broker that coordinated them."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import LocalCluster, assert_no_tracebacks, wait_for

pytestmark = pytest.mark.timeout(300)

FAST = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.backoff.ms": "200",
    "replica.fetch.wait.max.ms": "200",
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "group.initial.rebalance.delay.ms": "0",
    "follower.replication.throttled.rate": "300000",
    "replication.quota.window.num": "2",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("repl"), 3, overrides=FAST)
    c.format()
    c.start()
    try:
        wait_for("three live brokers", lambda: len(_admin(c).list_topics(timeout=5).brokers) == 3,
                 60, 0.5)
        yield c
    except BaseException:
        print(c.logs())
        raise
    finally:
        c.stop()
    assert_no_tracebacks(c)


def _admin(c: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": c.bootstrap})


def create(c: LocalCluster, name: str, partitions: int = 1, rf: int = 3,
           configs: dict[str, str] | None = None) -> None:
    admin = _admin(c)

    def attempt() -> bool:
        futures = admin.create_topics([NewTopic(name, partitions, rf, config=configs or {})])
        try:
            futures[name].result(10)
            return True
        except Exception as exc:  # a dead broker is listed until fenced: retry
            return "already exists" in str(exc)
    wait_for(f"topic {name}", attempt, 60, 0.5)
    wait_for(f"{name} has full ISRs", lambda: all(
        len(p[2]) == rf for p in partitions_of(c, name).values()), 30, 0.2)


def partitions_of(c: LocalCluster, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr) as the cluster's Metadata says."""
    md = _admin(c).list_topics(topic, timeout=5).topics[topic]
    return {p: (pm.leader, list(pm.replicas), list(pm.isrs)) for p, pm in md.partitions.items()}


def restart_and_wait(c: LocalCluster, node_id: int, topic: str) -> None:
    c.start(node_id)
    wait_for(f"node {node_id} back in every ISR of {topic}", lambda: all(
        node_id in p[2] for p in partitions_of(c, topic).values()), 60, 0.3)


def read_all(c: LocalCluster, topic: str, partitions: int,
             expected: int) -> list[tuple[int, int, bytes]]:
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"read-{uuid.uuid4()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + 60
    try:
        while len(out) < expected and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                out.append((m.partition(), m.offset(), m.value()))
    finally:
        consumer.close()
    return out


def leader_of(c: LocalCluster, topic: str, partition: int = 0) -> int:
    return wait_for(f"a leader for {topic}-{partition}",
                    lambda: (lead := partitions_of(c, topic)[partition][0]) >= 0 and lead, 30)


# -- replication ----------------------------------------------------------------------


def test_a_replicated_topic_lists_three_replicas_in_sync(cluster: LocalCluster) -> None:
    create(cluster, "rf3", partitions=3)
    parts = partitions_of(cluster, "rf3")
    assert {len(p[1]) for p in parts.values()} == {3}
    assert {p[0] for p in parts.values()} == {1, 2, 3}, "leaders spread over the brokers"
    for leader, replicas, isr in parts.values():
        assert sorted(isr) == sorted(replicas) and leader == replicas[0]


def _produce_across_kill(cluster: LocalCluster, topic: str,
                         produce: Callable[[list[bytes], list[str], list[bytes]], None]) -> None:
    """Produce 600 values, killing the leader of partition 0 (SIGKILL) after the
    first 200 were acknowledged; every acknowledged value must be readable after,
    once, and the client must report no error."""
    create(cluster, topic)
    victim = leader_of(cluster, topic)
    values = [f"v{i}".encode() for i in range(600)]
    errors: list[str] = []
    acked: list[bytes] = []
    done = threading.Event()

    def run() -> None:
        try:
            produce(values, errors, acked)
        finally:
            done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    wait_for("200 acknowledged", lambda: len(acked) >= 200 or done.is_set(), 60, 0.05)
    assert not done.is_set(), "the producer finished before the kill"
    cluster.kill(victim)
    thread.join(120)
    assert not thread.is_alive(), "the producer never finished"
    assert errors == []
    assert sorted(acked) == sorted(values)
    new_leader = leader_of(cluster, topic)
    assert new_leader != victim
    got = read_all(cluster, topic, 1, len(values))
    assert sorted(v for _, _, v in got) == sorted(values), "an acknowledged record is missing"
    assert len({o for _, o, _ in got}) == len(got)
    restart_and_wait(cluster, victim, topic)


def test_confluent_kafka_acks_all_across_a_leader_kill(cluster: LocalCluster) -> None:
    def produce(values: list[bytes], errors: list[str], acked: list[bytes]) -> None:
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                      "enable.idempotence": True, "linger.ms": 5,
                      "message.timeout.ms": 60000})

        def cb(err: KafkaError | None, msg) -> None:  # type: ignore[no-untyped-def]
            if err is not None:
                errors.append(str(err))
            else:
                acked.append(msg.value())
        for v in values:
            p.produce("confluent-kill", v, on_delivery=cb)
            p.poll(0)
            time.sleep(0.005)
        p.flush(90)
    _produce_across_kill(cluster, "confluent-kill", produce)


def test_kafka_python_acks_all_across_a_leader_kill(cluster: LocalCluster) -> None:
    from kafka import KafkaProducer

    def produce(values: list[bytes], errors: list[str], acked: list[bytes]) -> None:
        p = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", retries=1000,
                          enable_idempotence=True, retry_backoff_ms=100,
                          request_timeout_ms=10000, max_block_ms=60000,
                          delivery_timeout_ms=90000)
        futures = []
        for v in values:
            f = p.send("kafka-python-kill", v)
            f.add_callback(lambda _md, v=v: acked.append(v))
            f.add_errback(lambda exc: errors.append(repr(exc)))
            futures.append(f)
            time.sleep(0.005)
        p.flush(90)
        p.close(10)
    _produce_across_kill(cluster, "kafka-python-kill", produce)


def test_aiokafka_acks_all_across_a_leader_kill(cluster: LocalCluster) -> None:
    from aiokafka import AIOKafkaProducer

    def produce(values: list[bytes], errors: list[str], acked: list[bytes]) -> None:

        async def go() -> None:
            p = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all",
                                 enable_idempotence=True, request_timeout_ms=10000,
                                 retry_backoff_ms=100)
            await p.start()
            try:
                for v in values:
                    # send_and_wait retries inside the client until the record is
                    # acknowledged or its delivery timeout ends.
                    try:
                        await p.send_and_wait("aiokafka-kill", v)
                        acked.append(v)
                    except Exception as exc:
                        errors.append(repr(exc))
            finally:
                await p.stop()
        asyncio.run(go())
    _produce_across_kill(cluster, "aiokafka-kill", produce)


def test_not_enough_replicas_when_the_isr_is_below_min_insync(cluster: LocalCluster) -> None:
    create(cluster, "min-isr", rf=2)
    leader, replicas, _ = partitions_of(cluster, "min-isr")[0]
    follower = next(r for r in replicas if r != leader)
    cluster.kill(follower)
    wait_for("the ISR shrinks to the leader", lambda: partitions_of(
        cluster, "min-isr")[0][2] == [leader], 30, 0.2)
    errors: list[KafkaError] = []
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                  "message.timeout.ms": 3000, "retries": 0})
    p.produce("min-isr", b"x", on_delivery=lambda err, _m: errors.append(err))
    p.flush(20)
    assert [e.code() for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS]
    ok: list[KafkaError | None] = []
    p1 = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "1"})
    p1.produce("min-isr", b"y", on_delivery=lambda err, _m: ok.append(err))
    p1.flush(20)
    assert ok == [None], "acks=1 does not need min.insync.replicas"
    restart_and_wait(cluster, follower, "min-isr")


def test_a_paused_follower_leaves_the_isr_and_returns(cluster: LocalCluster) -> None:
    create(cluster, "lagging")
    leader, replicas, _ = partitions_of(cluster, "lagging")[0]
    follower = next(r for r in replicas if r != leader)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    cluster.pause(follower)
    try:
        for i in range(50):
            p.produce("lagging", f"{i}".encode())
        assert p.flush(30) == 0  # min ISR 2 of 3: the two others acknowledge
        wait_for("the paused follower leaves the ISR", lambda: follower not in partitions_of(
            cluster, "lagging")[0][2], 30, 0.2)
    except AssertionError:
        print(f"leader {leader}, paused {follower}\n" + cluster.logs())
        raise
    finally:
        cluster.resume(follower)
    wait_for("the follower rejoins the ISR", lambda: follower in partitions_of(
        cluster, "lagging")[0][2], 60, 0.2)


# -- coordinators fail over with their partitions ----------------------------------------


def _coordinator(cluster: LocalCluster, key: str, key_type: int) -> int:
    """The coordinator FindCoordinator (v2) names for a group (0) or a
    transactional id (1), asked of any live broker; 0 (falsy) while none."""
    from odradek.client.connection import Connection
    from odradek.wire.messages.find_coordinator_request import FindCoordinatorRequest

    async def ask() -> int:
        for node in cluster.brokers:
            if not node.alive:
                continue
            conn = await Connection.open(node.address, "test", timeout_s=5)
            try:
                resp = await conn.request(FindCoordinatorRequest(key=key, key_type=key_type), 2, 2)
                return int(resp.node_id) if not resp.error_code else 0
            finally:
                await conn.close()
        return 0
    return asyncio.run(ask())


def test_committed_offsets_survive_the_loss_of_the_group_coordinator(cluster: LocalCluster) -> None:
    create(cluster, "grouped")
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(20):
        p.produce("grouped", f"{i}".encode())
    p.flush(30)
    group = "survivors"
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.subscribe(["grouped"])
    got = 0
    deadline = time.monotonic() + 60
    while got < 12 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
            if got == 12:
                c.commit(m, asynchronous=False)
    c.close()
    assert got == 12
    coordinator = wait_for("the group's coordinator", lambda: _coordinator(cluster, group, 0), 30)
    cluster.kill(coordinator)
    try:
        def committed() -> int | None:
            c2 = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
            try:
                tp = c2.committed([TopicPartition("grouped", 0)], timeout=5)[0]
                return tp.offset if tp.offset >= 0 else None
            finally:
                c2.close()
        assert wait_for("the offset from the new coordinator", committed, 60, 0.5) == 12
        assert _coordinator(cluster, group, 0) != coordinator
    finally:
        restart_and_wait(cluster, coordinator, "grouped")


def test_a_transaction_survives_the_loss_of_its_coordinator(cluster: LocalCluster) -> None:
    create(cluster, "txn-out")
    tid = "survivor-txn"
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("txn-out", b"first")
    p.commit_transaction(30)
    coordinator = wait_for("the transaction coordinator", lambda: _coordinator(cluster, tid, 1), 30)
    cluster.kill(coordinator)
    try:
        p.begin_transaction()
        p.produce("txn-out", b"second")
        p.commit_transaction(60)  # the new coordinator knows the producer's epoch
        # A new instance with the same id fences the old one through the new coordinator.
        p2 = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid})
        p2.init_transactions(60)
        p.begin_transaction()
        p.produce("txn-out", b"zombie")
        with pytest.raises(Exception, match=r"(?i)fenced"):
            p.commit_transaction(30)
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"rc-{uuid.uuid4()}",
                      "isolation.level": "read_committed", "enable.auto.commit": False})
        c.assign([TopicPartition("txn-out", 0, 0)])
        seen: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(seen) < 2 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                seen.append(m.value())
        c.close()
        assert seen == [b"first", b"second"]
    finally:
        restart_and_wait(cluster, coordinator, "txn-out")


# -- operations: the CLI, preferred election, reassignment -------------------------------


def odradek(cluster: LocalCluster, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "odradek", *args, "--bootstrap-server",
                           cluster.bootstrap], capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_describe_shows_under_replicated_and_preferred_election_restores_leaders(
        cluster: LocalCluster) -> None:
    create(cluster, "preferred", partitions=3)
    before = partitions_of(cluster, "preferred")
    victim = before[0][0]
    cluster.kill(victim)
    wait_for("partition 0 moves", lambda: partitions_of(cluster, "preferred")[0][0] not in (
        victim, -1), 30, 0.2)
    out = json.loads(odradek(cluster, "topics", "describe", "preferred",
                             "--under-replicated-partitions", "--json").stdout)
    shown = {p["partition"]: p["status"] for p in out[0]["partitions"]}
    assert shown and set(shown.values()) == {"under-replicated"}
    assert 0 in shown
    restart_and_wait(cluster, victim, "preferred")
    assert partitions_of(cluster, "preferred")[0][0] != victim
    result = json.loads(odradek(cluster, "leaders", "elect", "--topic", "preferred",
                                "--json").stdout)
    assert {r["partition"]: r["result"] for r in result}[0] == "elected"
    wait_for("the preferred leader leads again", lambda: partitions_of(
        cluster, "preferred")[0][0] == before[0][1][0], 30, 0.2)
    again = json.loads(odradek(cluster, "leaders", "elect", "--topic", "preferred",
                               "--partition", "0", "--json").stdout)
    assert again == [{"topic": "preferred", "partition": 0, "result": "ELECTION_NOT_NEEDED",
                      "message": again[0]["message"]}]


def test_reassignment_moves_a_partition_and_keeps_its_records(cluster: LocalCluster) -> None:
    create(cluster, "moving", rf=2)
    _, replicas, _ = partitions_of(cluster, "moving")[0]
    spare = next(b for b in (1, 2, 3) if b not in replicas)
    target = [spare, replicas[0]]
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(100):
        p.produce("moving", f"{i}".encode())
    assert p.flush(30) == 0
    odradek(cluster, "topics", "reassign", "moving", "--partition", "0", "--replicas",
            ",".join(map(str, target)))
    wait_for("the reassignment completes", lambda: partitions_of(cluster, "moving")[0][1] == target
             and sorted(partitions_of(cluster, "moving")[0][2]) == sorted(target), 60, 0.3)
    listed = json.loads(odradek(cluster, "topics", "reassign", "--list", "--json").stdout)
    assert listed == []
    got = read_all(cluster, "moving", 1, 100)
    assert [v for _, _, v in got] == [f"{i}".encode() for i in range(100)]
    bad = odradek(cluster, "topics", "reassign", "moving", "--partition", "0", "--replicas",
                  "1,1", ok=False)
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1


# -- bad input on the replication paths ------------------------------------------------


def test_bad_replication_requests_get_kafka_errors_and_the_cluster_serves_on(
        cluster: LocalCluster) -> None:
    """Forged AlterPartition, ElectLeaders, reassignment, OffsetForLeaderEpoch and
    replica Fetch requests get Kafka's error codes; nothing changes and every
    acknowledged record stays readable."""
    from odradek.client.connection import Connection
    from odradek.wire.errors import ErrorCode as E
    from odradek.wire.messages import alter_partition_reassignments_request as apr
    from odradek.wire.messages import alter_partition_request as ap
    from odradek.wire.messages import elect_leaders_request as el
    from odradek.wire.messages import fetch_request as fr
    from odradek.wire.messages import offset_for_leader_epoch_request as ofl

    create(cluster, "forged")
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(10):
        p.produce("forged", f"{i}".encode())
    assert p.flush(30) == 0
    leader, replicas, isr = partitions_of(cluster, "forged")[0]
    follower = next(r for r in replicas if r != leader)
    address = {n.node_id: n.address for n in cluster.brokers}

    async def go() -> None:
        conn = await Connection.open(address[follower], "forger", timeout_s=10)
        try:
            # AlterPartition from a broker that does not lead, with bogus epochs.
            resp = await conn.request(ap.AlterPartitionRequest(follower, -1, [ap.TopicData(
                "forged", partitions=[ap.PartitionData(0, 0, [follower], partition_epoch=0)])]),
                1, 1)
            codes = [resp.error_code] + [q.error_code for t in resp.topics for q in t.partitions]
            assert any(c in (E.INVALID_REQUEST, E.NOT_CONTROLLER, E.FENCED_LEADER_EPOCH,
                             E.INVALID_UPDATE_VERSION) for c in codes), codes
            resp = await conn.request(ap.AlterPartitionRequest(99, 7, []), 1, 1)
            assert resp.error_code in (E.STALE_BROKER_EPOCH, E.NOT_CONTROLLER)
            # ElectLeaders for a partition that does not exist.
            resp = await conn.request(el.ElectLeadersRequest(0, [el.TopicPartitions(
                "no-such-topic", [0])], 5000), 2, 1)
            assert resp.replica_election_results[0].partition_result[0].error_code == (
                E.UNKNOWN_TOPIC_OR_PARTITION)
            # A reassignment to a broker that does not exist, and a duplicate list.
            for target in ([1, 42], [1, 1], []):
                resp = await conn.request(apr.AlterPartitionReassignmentsRequest(5000, [
                    apr.ReassignableTopic("forged", [apr.ReassignablePartition(0, target)])]), 0)
                assert resp.responses[0].partitions[0].error_code == (
                    E.INVALID_REPLICA_ASSIGNMENT), target
            # OffsetForLeaderEpoch at a follower, and with a future leader epoch.
            resp = await conn.request(ofl.OffsetForLeaderEpochRequest(-1, [ofl.OffsetForLeaderTopic(
                "forged", [ofl.OffsetForLeaderPartition(0, -1, 0)])]), 4, 2)
            assert resp.topics[0].partitions[0].error_code == E.NOT_LEADER_OR_FOLLOWER
            # A replica fetch from a broker id that is not a replica, and one at the
            # follower (which leads nothing).
            lead = await Connection.open(address[leader], "forger", timeout_s=10)
            try:
                resp = await lead.request(ofl.OffsetForLeaderEpochRequest(-1, [
                    ofl.OffsetForLeaderTopic("forged", [ofl.OffsetForLeaderPartition(0, 999, 0)])
                ]), 4, 2)
                assert resp.topics[0].partitions[0].error_code == E.UNKNOWN_LEADER_EPOCH
                resp = await lead.request(fr.FetchRequest(
                    replica_id=77, max_wait_ms=0, min_bytes=0, session_epoch=-1,
                    topics=[fr.FetchTopic("forged", partitions=[fr.FetchPartition(
                        0, fetch_offset=0, last_fetched_epoch=-1,
                        partition_max_bytes=1 << 20)])]), 12, 12)
                assert resp.responses[0].partitions[0].error_code == E.NOT_LEADER_OR_FOLLOWER
                resp = await lead.request(fr.FetchRequest(
                    replica_id=follower, max_wait_ms=0, min_bytes=0, session_epoch=-1,
                    topics=[fr.FetchTopic("forged", partitions=[fr.FetchPartition(
                        0, fetch_offset=10 ** 12, last_fetched_epoch=-1,
                        partition_max_bytes=1 << 20)])]), 12, 12)
                assert resp.responses[0].partitions[0].error_code == E.OFFSET_OUT_OF_RANGE
            finally:
                await lead.close()
        finally:
            await conn.close()

    asyncio.run(go())
    after = partitions_of(cluster, "forged")[0]
    assert (after[0], after[1], sorted(after[2])) == (leader, replicas, sorted(isr))
    got = read_all(cluster, "forged", 1, 10)
    assert [v for _, _, v in got] == [f"{i}".encode() for i in range(10)]


def test_create_topics_with_a_manual_replica_assignment(cluster: LocalCluster) -> None:
    admin = _admin(cluster)
    futures = admin.create_topics([NewTopic("placed", num_partitions=2,
                                            replica_assignment=[[3, 1], [2, 3]])])
    futures["placed"].result(30)
    wait_for("placed as asked", lambda: {p: (r[0], r[1]) for p, r in partitions_of(
        cluster, "placed").items()} == {0: (3, [3, 1]), 1: (2, [2, 3])}, 30, 0.2)
    bad = admin.create_topics([NewTopic("misplaced", num_partitions=1,
                                        replica_assignment=[[1, 7]])])
    with pytest.raises(Exception, match=r"INVALID_REPLICA_ASSIGNMENT|no such broker"):
        bad["misplaced"].result(30)


def test_a_reassignment_copies_at_the_throttled_rate(cluster: LocalCluster) -> None:
    """follower.replication.throttled.rate (300 kB/s here, measured over 2 windows
    of 1 s) bounds what a replica listed in follower.replication.throttled.replicas
    copies: 900 kB take at least two seconds to move, where unthrottled they move
    in a fraction of one."""
    create(cluster, "throttled", rf=1,
           configs={"follower.replication.throttled.replicas": "*"})
    _, (source,), _ = partitions_of(cluster, "throttled")[0]
    target = next(b for b in (1, 2, 3) if b != source)
    # acks=1: one replica cannot satisfy min.insync.replicas=2 (Kafka refuses acks=all)
    # Small batches: a fetch returns whole batches, so one batch of all 900 kB
    # would pass the quota in one go.
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "1", "linger.ms": 20,
                  "batch.size": 16384})
    for _ in range(900):
        p.produce("throttled", b"x" * 1000)
    assert p.flush(30) == 0
    started = time.monotonic()
    odradek(cluster, "topics", "reassign", "throttled", "--partition", "0", "--replicas",
            str(target))
    wait_for("the move completes", lambda: partitions_of(cluster, "throttled")[0][1] == [target],
             60, 0.1)
    assert time.monotonic() - started >= 1.8
    assert len(read_all(cluster, "throttled", 1, 900)) == 900
