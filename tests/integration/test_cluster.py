"""Cluster mode with real processes: a KRaft quorum of ``odradek serve`` nodes,
configured with Kafka's settings, formatted with ``odradek storage format``,
used by the three clients as one cluster; kill -9 of the active controller."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from odradek.client.connection import Connection
from odradek.wire.errors import ErrorCode
from odradek.wire.messages import vote_request as vq
from odradek.wire.messages.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from tests.support.cluster import (
    LocalCluster,
    active_controller,
    assert_no_tracebacks,
    quorum_leader,
    wait_for,
)

pytestmark = pytest.mark.timeout(240)


def describe_cluster(bootstrap: str) -> dict:  # type: ignore[type-arg]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        result: dict = admin.describe_cluster()  # type: ignore[type-arg]
        # kafka-python asks DescribeCluster v2 to include fenced brokers (KIP-1073):
        # the live ones are those not fenced.
        result["brokers"] = [b for b in result["brokers"] if not b.get("is_fenced")]
        return result
    finally:
        admin.close()


def ready(cluster: LocalCluster, brokers: int, via: str | None = None) -> dict:  # type: ignore[type-arg]
    """Wait until a controller is elected and every broker is registered."""
    def check() -> dict | None:  # type: ignore[type-arg]
        info = describe_cluster(via or cluster.bootstrap)
        ok = info["controller_id"] >= 0 and len(info["brokers"]) == brokers
        return info if ok else None
    return wait_for(f"{brokers} registered brokers and a controller", check, 60)  # type: ignore[no-any-return]


@pytest.fixture
def combined(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path, controllers=3)
    cluster.format()
    cluster.start()
    try:
        ready(cluster, 3)
        yield cluster
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()
    # No node hit an internal error on the way (a traceback in a node's log is a bug).
    assert_no_tracebacks(cluster)


def _leaders_kafka_python(bootstrap: str, topic: str) -> dict[int, int]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        consumer.topics()
        cluster = consumer._client.cluster
        return {p: cluster.leader_for_partition(_tp(topic, p))
                for p in cluster.partitions_for_topic(topic) or ()}
    finally:
        consumer.close()


def _tp(topic: str, p: int):  # type: ignore[no-untyped-def]
    from kafka.structs import TopicPartition

    return TopicPartition(topic, p)


def run_confluent(bootstrap: str, topic: str, n: int) -> tuple[dict[int, int], list[str]]:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 12, 1)])[topic].result(30)
    md = wait_for("the topic in metadata", lambda: (
        m := admin.list_topics(topic, timeout=5)).topics[topic].partitions and m, 20)
    leaders = {p.id: p.leader for p in md.topics[topic].partitions.values()}
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(n):
        producer.produce(topic, key=str(i).encode(), value=f"confluent-{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[str] = []
    deadline = time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value().decode())
    consumer.commit(asynchronous=False)
    committed = consumer.committed(consumer.assignment(), timeout=10)
    consumer.close()
    assert sum(tp.offset for tp in committed) == n  # the group's offsets, across brokers
    return leaders, got


def run_kafka_python(bootstrap: str, topic: str, n: int) -> tuple[dict[int, int], list[str]]:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    admin.create_topics([NewTopic(topic, 12, 1)])
    admin.close()
    leaders = wait_for("12 leaders", lambda: (
        ls := _leaders_kafka_python(bootstrap, topic)) and len(ls) == 12 and ls, 20)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(n):
        producer.send(topic, key=str(i).encode(), value=f"kafka-python-{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"g-{topic}",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=2000)
    got: list[str] = []
    deadline = time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        for batch in consumer.poll(500).values():
            got.extend(r.value.decode() for r in batch)
    consumer.commit()
    total = sum(consumer.committed(tp) or 0 for tp in consumer.assignment())
    consumer.close()
    assert total == n
    return leaders, got


def run_aiokafka(bootstrap: str, topic: str, n: int) -> tuple[dict[int, int], list[str]]:
    async def go() -> tuple[dict[int, int], list[str]]:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        await admin.create_topics([NewTopic(topic, 12, 1)])
        await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await producer.start()
        for i in range(n):
            await producer.send(topic, key=str(i).encode(), value=f"aiokafka-{i}".encode())
        await producer.flush()
        cluster = producer.client.cluster
        leaders = {p: cluster.leader_for_partition(_tp(topic, p))
                   for p in cluster.partitions_for_topic(topic) or ()}
        await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"g-{topic}",
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        got: list[str] = []
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                got.extend(r.value.decode() for r in batch)
        await consumer.commit()
        total = 0
        for tp in consumer.assignment():
            total += await consumer.committed(tp) or 0
        await consumer.stop()
        assert total == n
        return leaders, got
    return asyncio.run(go())


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_each_client_uses_three_nodes_as_one_cluster(combined: LocalCluster, client: str) -> None:
    run = {"confluent": run_confluent, "kafka-python": run_kafka_python,
           "aiokafka": run_aiokafka}[client]
    topic = f"t-{client}"
    n = 60
    leaders, got = run(combined.bootstrap, topic, n)
    assert len(leaders) == 12
    assert set(leaders.values()) == {1, 2, 3}  # every broker leads some partitions
    assert sorted(got) == sorted(f"{client}-{i}" for i in range(n))


def test_killing_the_active_controller_elects_another(combined: LocalCluster) -> None:
    old = active_controller(combined.bootstrap)
    combined.kill(old)
    survivors = ",".join(n.address for n in combined.brokers if n.node_id != old)
    started = time.monotonic()
    new = wait_for("a new active controller", lambda: (
        c := quorum_leader(survivors)) not in (-1, old) and c, 30)
    elected_s = time.monotonic() - started
    assert elected_s < 15, elected_s
    # Topic creation works again. (Until the dead broker is fenced, after
    # broker.session.timeout.ms, metadata still lists it and a client may try it
    # first; like any Kafka client user, retry.)
    create_with_retries(survivors, "after-failover", 4)
    assert new != old
    combined.start(old)
    wait_for("the killed node back as a broker", lambda: len(
        describe_cluster(survivors)["brokers"]) == 3, 60)
    # The restarted node follows the new leader and has the topic created without it.
    rejoined = combined.nodes[old].address
    wait_for("the new topic on the restarted node", lambda: "after-failover" in set(
        _topics(rejoined)), 30)


def create_with_retries(bootstrap: str, topic: str, partitions: int) -> None:
    """Create ``topic`` with kafka-python's admin client, retrying on the errors a
    client meets while the cluster changes (a listed broker that is dead or cut
    off, a controller that moved)."""
    from kafka.admin import NewTopic
    from kafka.errors import KafkaError, TopicAlreadyExistsError

    def attempt() -> bool:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)])
        except TopicAlreadyExistsError:
            pass  # an earlier attempt got through
        except KafkaError:
            return False
        finally:
            admin.close()
        return True

    wait_for(f"creating {topic}", attempt, 60, interval_s=0.5)


def _topics(bootstrap: str) -> list[str]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        return list(consumer.topics())
    finally:
        consumer.close()


def _raft_request(address: str, body, api_key: int, version: int):  # type: ignore[no-untyped-def]
    async def go():  # type: ignore[no-untyped-def]
        conn = await Connection.open(address, "raft-test")
        try:
            return await conn.request(body, version, version)
        finally:
            await conn.close()
    return asyncio.run(go())


def test_describe_quorum_and_bad_raft_requests(combined: LocalCluster) -> None:
    leader = combined.nodes[active_controller(combined.bootstrap)]
    controller = f"127.0.0.1:{leader.controller_port}"
    request = DescribeQuorumRequest([TopicData("__cluster_metadata", [PartitionData(0)])])
    resp = _raft_request(controller, request, 55, 1)
    part = resp.topics[0].partitions[0]
    assert part.error_code == 0 and part.leader_id == leader.node_id
    assert sorted(v.replica_id for v in part.current_voters) == [1, 2, 3]
    assert part.high_watermark > 0
    epoch = part.leader_epoch
    # A vote from another cluster, and one from a node that is not a voter.
    for cluster_id, candidate, expect in [
        (str(uuid.uuid4()), 2, ErrorCode.INCONSISTENT_CLUSTER_ID),
        (combined.cluster_id, 9, ErrorCode.INCONSISTENT_VOTER_SET),
    ]:
        vote = vq.VoteRequest(cluster_id, leader.node_id, [vq.TopicData("__cluster_metadata", [
            vq.PartitionData(0, epoch + 5, candidate, last_offset_epoch=epoch + 4,
                             last_offset=1 << 40, pre_vote=False)])])
        answer = _raft_request(controller, vote, 52, 2)
        code = answer.error_code or answer.topics[0].partitions[0].error_code
        assert code == expect
        assert not (answer.topics and answer.topics[0].partitions[0].vote_granted)
    # Broker registration and heartbeats from strangers, and a stale metadata fetch.
    from odradek.wire.messages import broker_heartbeat_request as hb
    from odradek.wire.messages import broker_registration_request as br
    from odradek.wire.messages import fetch_request as fq

    reg = br.BrokerRegistrationRequest(broker_id=7, cluster_id="another-cluster",
                                       incarnation_id=uuid.uuid4(),
                                       listeners=[br.Listener("PLAINTEXT", "h", 1, 0)])
    assert _raft_request(controller, reg, 62, 2).error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
    for broker_id, broker_epoch, expect in [
        (42, 0, ErrorCode.BROKER_ID_NOT_REGISTERED),
        (leader.node_id, 10**6, ErrorCode.STALE_BROKER_EPOCH),
    ]:
        beat = hb.BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=broker_epoch)
        assert _raft_request(controller, beat, 63, 0).error_code == expect
    stale = fq.FetchRequest(combined.cluster_id, replica_id=2, topics=[fq.FetchTopic(
        "__cluster_metadata", partitions=[fq.FetchPartition(0, epoch - 1, 0, 0)])])
    answer = _raft_request(controller, stale, 1, 12)  # v12 by name, as earlier releases sent
    assert answer.responses[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert answer.responses[0].topic == "__cluster_metadata"
    # The same at v17, as Kafka 4's KRaft sends it: by topic id, with ReplicaState and
    # the fetcher's directory id; the answer names the topic by id and the leader's
    # CONTROLLER endpoint.
    stale17 = fq.FetchRequest(combined.cluster_id, replica_state=fq.ReplicaState(2, -1),
                              topics=[fq.FetchTopic(topic_id=uuid.UUID(int=1), partitions=[
                                  fq.FetchPartition(0, epoch - 1, 0, 0,
                                                    replica_directory_id=uuid.uuid4())])])
    answer = _raft_request(controller, stale17, 1, 17)
    assert answer.responses[0].topic_id == uuid.UUID(int=1)
    stale_part = answer.responses[0].partitions[0]
    assert stale_part.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert stale_part.current_leader.leader_id == leader.node_id
    assert [(e.node_id, e.port) for e in answer.node_endpoints] == [
        (leader.node_id, leader.controller_port)]
    # Nothing moved: the same leader in the same epoch, still three brokers.
    after = _raft_request(controller, request, 55, 1).topics[0].partitions[0]
    assert (after.leader_id, after.leader_epoch) == (leader.node_id, epoch)
    assert len(describe_cluster(combined.bootstrap)["brokers"]) == 3


def test_separate_controllers_and_brokers(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, controllers=3, brokers=2,
                           overrides={"broker.rack": "rack-a"})
    cluster.format()
    cluster.start()
    try:
        info = ready(cluster, 2)
        assert sorted(b["broker_id"] for b in info["brokers"]) == [4, 5]
        assert {b["rack"] for b in info["brokers"]} == {"rack-a"}
        assert info["controller_id"] in (4, 5)  # a live broker, as Kafka's KRaft brokers name
        leaders, got = run_kafka_python(cluster.bootstrap, "split-roles", 40)
        assert set(leaders.values()) == {4, 5}
        assert sorted(got) == sorted(f"kafka-python-{i}" for i in range(40))
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


def test_a_damaged_quorum_state_stops_the_node_with_one_line(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, controllers=3)
    cluster.format()
    state = cluster.nodes[1].directory / "data" / "__cluster_metadata-0" / "quorum-state"
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text("{not json")
    cluster.start(1)
    proc = cluster.nodes[1].proc
    assert proc is not None
    assert proc.wait(30) != 0
    text = cluster.nodes[1].log_path.read_text()
    errors = [line for line in text.splitlines() if line.startswith("odradek:")]
    assert errors and "quorum-state is damaged" in errors[-1], text
    assert "unexpected" not in errors[-1] and "Traceback" not in text


def test_dev_cluster_runs_three_nodes_until_interrupted(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    from tests.support.cluster import free_port

    base = free_port()
    while True:  # base..base+5 must be free
        try:
            import socket

            for p in range(base, base + 6):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            break
        except OSError:
            base = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "odradek", "dev", "cluster", "--nodes", "3",
         "--dir", str(tmp_path / "dev"), "--base-port", str(base)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        pids, bootstrap = [], ""
        while not bootstrap:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else ""
            if line.startswith("node "):
                pids.append(int(line.split("pid ")[1].split(",")[0]))
            if line.startswith("bootstrap: "):
                bootstrap = line.split(": ", 1)[1].strip()
        info = wait_for("three brokers", lambda: (i := describe_cluster(bootstrap)) and len(
            i["brokers"]) == 3 and i, 60)
        assert info["controller_id"] in (1, 2, 3)
        out = subprocess.run([sys.executable, "-m", "odradek", "cluster", "describe",
                              "--bootstrap-server", bootstrap.split(",")[0]],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "Quorum: leader" in out.stdout and out.stdout.count("voter") >= 2
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
        import os

        for pid in pids:  # every node stopped with it
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=5)
    return {p.id: p.leader for p in md.topics[topic].partitions.values()}


def test_a_killed_broker_is_fenced_after_its_session_and_rejoins(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, controllers=3, overrides={
        "broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "1000"})
    cluster.format()
    cluster.start()
    try:
        ready(cluster, 3)
        controller = active_controller(cluster.bootstrap)
        victim = next(n for n in (1, 2, 3) if n != controller)
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("fenced", 6, 1)])["fenced"].result(30)
        before = wait_for("leaders", lambda: (ls := _leaders(cluster.bootstrap, "fenced"))
                          and -1 not in ls.values() and ls, 20)
        owned = {p for p, leader in before.items() if leader == victim}
        assert owned
        cluster.kill(victim)
        others = ",".join(n.address for n in cluster.brokers if n.node_id != victim)
        killed_at = time.monotonic()
        # RF=1: its partitions go offline (leader -1), the others keep theirs.
        after = wait_for("the victim's partitions offline", lambda: (
            ls := _leaders(others, "fenced")) and all(ls[p] == -1 for p in owned) and ls, 30)
        fenced_s = time.monotonic() - killed_at
        assert fenced_s >= 3.0, fenced_s  # not before its session timeout (4 s, less polling)
        assert all(after[p] == before[p] for p in before if p not in owned)
        wait_for("two live brokers", lambda: len(describe_cluster(others)["brokers"]) == 2, 20)
        cluster.start(victim)
        wait_for("the victim back as leader of its partitions", lambda: _leaders(
            others, "fenced") == before, 60)
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


def test_sigterm_is_a_controlled_shutdown(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, controllers=3, overrides={
        "broker.session.timeout.ms": "30000"})
    cluster.format()
    cluster.start()
    try:
        ready(cluster, 3)
        controller = active_controller(cluster.bootstrap)
        victim = next(n for n in (1, 2, 3) if n != controller)
        others = ",".join(n.address for n in cluster.brokers if n.node_id != victim)
        assert cluster.terminate(victim) == 0
        # Fenced at once, long before the 30 s session would have run out.
        wait_for("the stopped broker gone from the cluster", lambda: len(
            describe_cluster(others)["brokers"]) == 2, 10)
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


@pytest.mark.timing
def test_stopping_the_whole_cluster_at_once_does_not_wait_for_a_fence(
        combined: LocalCluster) -> None:
    """SIGTERM to every node together (a cluster taken down): the active
    controller's own controlled shutdown can no longer commit once its voters
    have gone, so it goes without it instead of waiting out its 5 s. Every node
    exits cleanly (status 0, not killed) well inside that."""
    import signal

    procs = [n.proc for n in combined.nodes.values()]
    assert all(p is not None and p.poll() is None for p in procs)
    started = time.monotonic()
    for p in procs:
        assert p is not None
        p.send_signal(signal.SIGTERM)
    codes = []
    for p in procs:
        assert p is not None
        codes.append(p.wait(30))
    took = time.monotonic() - started
    assert codes == [0, 0, 0]
    assert took < 4.5, f"the cluster took {took:.1f} s to stop"
    assert "stop is slow" not in combined.logs()


def test_a_node_behind_the_snapshot_catches_up_and_keeps_its_data(tmp_path: Path) -> None:
    """Snapshots every ~2 KiB of metadata: a node down while many topics are
    created restarts behind the leader's log start, installs the leader's
    snapshot (FetchSnapshot) and serves its own partitions' data again."""
    cluster = LocalCluster(tmp_path, controllers=3, overrides={
        "metadata.log.max.record.bytes.between.snapshots": "2048",
        "broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "1000"})
    cluster.format()
    cluster.start()
    try:
        ready(cluster, 3)
        controller = active_controller(cluster.bootstrap)
        victim = next(n for n in (1, 2, 3) if n != controller)
        from confluent_kafka import Consumer, Producer, TopicPartition
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("kept", 3, 1)])["kept"].result(30)
        producer = Producer({"bootstrap.servers": cluster.bootstrap})
        for i in range(30):
            producer.produce("kept", key=str(i).encode(), value=f"v{i}".encode())
        assert producer.flush(30) == 0
        leaders = _leaders(cluster.bootstrap, "kept")
        cluster.kill(victim)
        others = ",".join(n.address for n in cluster.brokers if n.node_id != victim)
        admin = AdminClient({"bootstrap.servers": others})
        for i in range(40):
            admin.create_topics([NewTopic(f"more-{i}", 1, 1)])[f"more-{i}"].result(30)
        snapshots = list((cluster.nodes[controller].directory / "data"
                          / "__cluster_metadata-0").glob("*.checkpoint"))
        assert snapshots, "the leader took no snapshot"
        cluster.start(victim)
        wait_for("the victim's partitions led again", lambda: _leaders(
            others, "kept") == leaders, 60)
        mine = cluster.nodes[victim].address
        wait_for("all topics on the restarted node", lambda: {
            f"more-{i}" for i in range(40)} <= set(_topics(mine)), 30)
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "snap",
                             "auto.offset.reset": "earliest"})
        consumer.assign([TopicPartition("kept", p, 0) for p in range(3)])
        got: set[bytes] = set()
        deadline = time.monotonic() + 30
        while len(got) < 30 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.add(m.value())
        consumer.close()
        assert got == {f"v{i}".encode() for i in range(30)}  # nothing lost or moved aside
        # Offline, the leader's metadata log (snapshot + log) shows the same image.
        import json
        import subprocess
        import sys

        meta = cluster.nodes[controller].directory / "data" / "__cluster_metadata-0"
        out = subprocess.run([sys.executable, "-m", "odradek", "metadata", "dump", str(meta),
                              "--image", "--json"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        image = json.loads(out.stdout)
        names = {t["name"] for t in image["topics"]}
        assert {"kept"} | {f"more-{i}" for i in range(40)} <= names
        assert sorted(b["id"] for b in image["brokers"]) == [1, 2, 3]
        records = subprocess.run([sys.executable, "-m", "odradek", "metadata", "dump",
                                  str(meta)], capture_output=True, text=True, timeout=60)
        assert records.returncode == 0
        assert "snapshot TopicRecord" in records.stdout  # the part from the snapshot
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


def test_a_damaged_snapshot_stops_the_node_with_one_line(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, controllers=3, overrides={
        "metadata.log.max.record.bytes.between.snapshots": "1024"})
    cluster.format()
    cluster.start()
    try:
        ready(cluster, 3)
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for i in range(20):
            admin.create_topics([NewTopic(f"s-{i}", 1, 1)])[f"s-{i}"].result(30)
        meta = cluster.nodes[1].directory / "data" / "__cluster_metadata-0"
        wait_for("a snapshot on node 1", lambda: list(meta.glob("*.checkpoint")), 20)
        cluster.stop()
        for snap in meta.glob("*.checkpoint"):
            data = bytearray(snap.read_bytes())
            data[len(data) // 2] ^= 0xFF
            snap.write_bytes(bytes(data))
        cluster.start(1)
        proc = cluster.nodes[1].proc
        assert proc is not None and proc.wait(30) != 0
        text = cluster.nodes[1].log_path.read_text()
        errors = [line for line in text.splitlines() if line.startswith("odradek:")]
        assert errors and ".checkpoint" in errors[-1], text
        assert "unexpected" not in errors[-1] and "Traceback" not in text
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


def _quorum_views(cluster: LocalCluster) -> dict[int, tuple[int, int, int]]:
    """node -> (leader it names, epoch, error) from DescribeQuorum on each live voter."""
    request = DescribeQuorumRequest([TopicData("__cluster_metadata", [PartitionData(0)])])
    views = {}
    for node in cluster.nodes.values():
        if node.controller_port and node.alive:
            try:
                p = _raft_request(f"127.0.0.1:{node.controller_port}", request, 55,
                                  1).topics[0].partitions[0]
            except Exception:
                continue
            views[node.node_id] = (p.leader_id, p.leader_epoch, p.error_code)
    return views


def _one_leader(cluster: LocalCluster, not_: int | None = None) -> tuple[int, int] | None:
    """(leader, epoch) if exactly one node answers as leader (error 0) and it is
    not ``not_``; None otherwise."""
    leaders = {(lead, epoch) for lead, epoch, err in _quorum_views(cluster).values()
               if err == 0}
    if len(leaders) != 1:
        return None
    (leader,) = leaders
    return leader if leader[0] != not_ else None


def test_sigstop_of_the_active_controller(tmp_path: Path) -> None:
    """SIGSTOP freezes the leader: the others elect a new one; after SIGCONT the
    old leader learns the newer epoch and follows, and only one leader is left."""
    cluster = LocalCluster(tmp_path, controllers=3)
    cluster.format()
    cluster.start()
    try:
        ready(cluster, 3)
        old, epoch = wait_for("a leader", lambda: _one_leader(cluster), 30)
        cluster.pause(old)
        new, new_epoch = wait_for("another leader", lambda: _one_leader(cluster, not_=old), 30)
        assert new_epoch > epoch
        cluster.resume(old)
        views = wait_for("every voter following the new leader", lambda: (
            v := _quorum_views(cluster)) and len(v) == 3 and all(
            lead == new and ep == new_epoch for lead, ep, _ in v.values()) and v, 30)
        # Asked on their CONTROLLER listeners, only the leader answers without error.
        assert [n for n, (_, _, err) in views.items() if err == 0] == [new]
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


def test_an_isolated_leader_is_replaced_and_rejoins_after_the_partition(
        tmp_path: Path) -> None:
    """The active controller is cut off (quorum links both ways; clients can
    still reach it). The majority elects a new leader and keeps creating
    topics; the isolated node resigns (check-quorum) and, its heartbeats lost,
    is fenced. When the network heals it follows the new leader, is unfenced,
    and sees what was created without it."""
    cluster = LocalCluster(tmp_path, controllers=3, links=True, overrides={
        "broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "1000"})
    cluster.format()
    cluster.start()
    try:
        ready(cluster, 3)
        old, epoch = wait_for("a leader", lambda: _one_leader(cluster), 30)
        cluster.isolate(old)
        new, new_epoch = wait_for("a leader on the majority side", lambda: (
            leader := _majority_leader(cluster, old)) and leader, 30)
        assert new != old and new_epoch > epoch
        # The isolated node stops claiming leadership (check-quorum: 1.5 x fetch timeout).
        wait_for("the isolated node to resign", lambda: _quorum_views(cluster).get(
            old, (0, 0, 0))[2] != 0, 15)
        majority = ",".join(n.address for n in cluster.brokers if n.node_id != old)
        create_with_retries(majority, "during-partition", 2)
        wait_for("the isolated broker fenced", lambda: old not in {
            b["broker_id"] for b in describe_cluster(majority)["brokers"]}, 30)
        cluster.heal()
        wait_for("every voter following the new leader", lambda: (
            v := _quorum_views(cluster)) and len(v) == 3 and all(
            lead == new and ep == new_epoch for lead, ep, _ in v.values()), 30)
        wait_for("the rejoined broker unfenced", lambda: len(
            describe_cluster(majority)["brokers"]) == 3, 30)
        wait_for("the topic created during the partition on the rejoined node", lambda:
                 "during-partition" in set(_topics(cluster.nodes[old].address)), 30)
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


def _majority_leader(cluster: LocalCluster, isolated: int) -> tuple[int, int] | None:
    views = {n: v for n, v in _quorum_views(cluster).items() if n != isolated}
    leaders = {(lead, ep) for lead, ep, err in views.values() if err == 0}
    if len(leaders) == 1:
        (leader,) = leaders
        if leader[0] != isolated:
            return leader
    return None


def test_kcat_lists_produces_and_consumes_through_the_cluster(combined: LocalCluster) -> None:
    import shutil
    import subprocess

    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.skip("kcat not installed (scripts/test.sh installs it)")

    def run(*args: str, stdin: str | None = None) -> str:
        out = subprocess.run([kcat, "-b", combined.bootstrap, *args], input=stdin,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout

    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": combined.bootstrap})  # kept alive for result()
    admin.create_topics([NewTopic("kc", 6, 1)])["kc"].result(30)
    listing = wait_for("kcat seeing 3 brokers and 6 leaders", lambda: (
        text := run("-L", "-t", "kc")) and "3 brokers" in text and text.count(
        "leader ") == 6 and text, 30)
    leaders = {line.split("leader ")[1].split(",")[0] for line in listing.splitlines()
               if "partition" in line and "leader " in line}
    assert leaders == {"1", "2", "3"}
    lines = [f"k{i}:v{i}" for i in range(60)]
    run("-P", "-t", "kc", "-K", ":", stdin="\n".join(lines) + "\n")
    consumed = wait_for("all 60 records", lambda: (out := run(
        "-C", "-t", "kc", "-e", "-f", "%k:%s\n")).count("\n") == 60 and out, 30)
    assert sorted(consumed.splitlines()) == sorted(lines)


def test_snapshots_are_also_taken_by_time(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, controllers=3, overrides={
        "metadata.log.max.record.bytes.between.snapshots": str(1 << 30),
        "metadata.log.max.snapshot.interval.ms": "500"})
    cluster.format()
    cluster.start()
    try:
        ready(cluster, 3)
        metas = [n.directory / "data" / "__cluster_metadata-0" for n in cluster.nodes.values()]
        # Far below the byte threshold, yet every node snapshots within the interval.
        wait_for("a snapshot on every node", lambda: all(
            list(m.glob("*.checkpoint")) for m in metas), 20)
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()
