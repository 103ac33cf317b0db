"""A 3-node cluster stopped and started again keeps every acknowledged record,
every committed offset and every partition directory; it is ready in seconds;
and transactional offset commits work whichever brokers coordinate the group
and the transaction.

Real processes (``odradek serve`` per node, formatted as a user would) and real
clients. The restart tests are the reproduction of issue 40: before the fix a
restarted node took the first high watermark a new quorum leader sent (its log
start, not a committed offset of the new epoch) as "caught up", reconciled an
empty image and moved every partition aside as ``-stray``; the others then
truncated to the emptied leaders.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.broker.config import DEFAULTS
from odradek.wire.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from odradek.wire.messages.find_coordinator_request import FindCoordinatorRequest
from tests.support.cluster import LocalCluster, active_controller, wait_for
from tests.support.rawclient import RawClient

pytestmark = pytest.mark.timeout(300)

REPLICATED = {
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "min.insync.replicas": "2",
}
RECORDS = 3000
#: How long a broker holds a request for the controller when none is known
#: (broker/app.py sets the forward stage's wait from these three defaults).
FORWARD_WAIT_S = sum(int(DEFAULTS[key]) for key in (
    "controller.quorum.fetch.timeout.ms", "controller.quorum.election.timeout.ms",
    "controller.quorum.election.backoff.max.ms")) / 1000


def strays(cluster: LocalCluster) -> list[Path]:
    return sorted(cluster.tmp.rglob("*-stray"))


def create(cluster: LocalCluster, topic: str, partitions: int, rf: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf)],
                        request_timeout=20)[topic].result(30)


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    failed: list[object] = []
    for i in range(count):
        producer.produce(topic, str(i).encode(), partition=i % partitions,
                         on_delivery=lambda err, _m: err and failed.append(err))
    assert producer.flush(60) == 0 and not failed, failed


def read_all(bootstrap: str, topic: str, partitions: int, expect: int,
             timeout_s: float = 60) -> dict[int, list[bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-unused",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + timeout_s
    try:
        while sum(map(len, got.values())) < expect and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got[msg.partition()].append(msg.value())
    finally:
        consumer.close()
    return got


def consume_and_commit(bootstrap: str, topic: str, group: str, count: int) -> dict[int, int]:
    """A group member reads ``count`` records and commits; the committed offsets."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 60
    try:
        while seen < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen += 1
        assert seen == count
        consumer.commit(asynchronous=False)
        parts = consumer.assignment()
        return {tp.partition: tp.offset for tp in consumer.committed(parts, 20)
                if tp.offset >= 0}
    finally:
        consumer.close()


def committed(bootstrap: str, topic: str, group: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 20)
        return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}
    finally:
        consumer.close()


@pytest.mark.parametrize("how", ["sigterm", "kill-9"])
def test_a_full_restart_keeps_every_record_offset_and_directory(tmp_path: Path,
                                                                 how: str) -> None:
    """Issue 40's reproduction: 3,000 acks=all records in an RF=3 topic and a
    group's committed offsets; all three nodes stopped at once (SIGTERM, or
    kill -9) and started again: every record and offset is there, no directory
    was moved aside, and clients are served again within 30 s."""
    cluster = LocalCluster(tmp_path, controllers=3, overrides=REPLICATED)
    cluster.format()
    cluster.start()
    try:
        create(cluster, "keep", 3)
        produce(cluster.bootstrap, "keep", RECORDS, 3)
        offsets = consume_and_commit(cluster.bootstrap, "keep", "kg", 1000)
        assert sum(offsets.values()) == 1000
        if how == "kill-9":
            cluster.stop_all(clean=False)
        else:
            procs = [n.proc for n in cluster.nodes.values()]
            cluster.stop_all(clean=True)
            assert all(p is not None and p.returncode == 0 for p in procs)
        started = time.monotonic()
        cluster.start()
        got = read_all(cluster.bootstrap, "keep", 3, RECORDS)
        served_s = time.monotonic() - started
        assert {p: len(v) for p, v in got.items()} == {0: 1000, 1: 1000, 2: 1000}
        assert sorted(int(v) for vs in got.values() for v in vs) == list(range(RECORDS))
        assert served_s < 30, served_s
        assert committed(cluster.bootstrap, "keep", "kg", 3) == offsets
        assert strays(cluster) == []
        assert "moved aside" not in cluster.logs()
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


@pytest.mark.timing
def test_a_fresh_cluster_accepts_a_replicated_topic_within_seconds(tmp_path: Path) -> None:
    """Nodes listening → an RF=3 topic accepted within 5 s (it took 15.5 s: the
    first Metadata named no controller and librdkafka waited a request timeout
    for one). A CreateTopics sent the moment the first node listens, before any
    controller is elected, waits for the first controller as Kafka's forwarding
    does, but no longer than the forward stage's wait (fetch timeout, election
    timeout and backoff): it is answered (created, or NOT_CONTROLLER to retry)
    within that and a second, never held to the client's 30 s timeout."""
    cluster = LocalCluster(tmp_path, controllers=3, overrides=REPLICATED)
    cluster.format()
    cluster.start()
    try:
        first = cluster.brokers[0]
        raw = wait_for("the first node listening", lambda: _raw(first.address), 30, 0.01)
        sent = time.monotonic()
        answer = raw.request(CreateTopicsRequest(
            [CreatableTopic("early", 1, 3, [], [])], timeout_ms=30_000), 5)
        answered_s = time.monotonic() - sent
        raw.close()
        assert answer.topics[0].error_code in (0, 41), answer  # 41: NOT_CONTROLLER
        assert answered_s < FORWARD_WAIT_S + 1, answered_s
        wait_for("every node listening", lambda: all(_raw(n.address) for n in cluster.brokers),
                 30, 0.01)
        listening = time.monotonic()
        create(cluster, "soon", 3)
        took = time.monotonic() - listening
        assert took < 5, f"an RF=3 topic took {took:.1f} s after the nodes listened"
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


def _raw(address: str) -> RawClient | None:
    try:
        return RawClient(address, timeout_s=30)
    except OSError:
        return None


def _coordinator(bootstrap: str, key: str, key_type: int) -> int:
    raw = RawClient(bootstrap)
    try:
        resp = raw.request(FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]), 4)
        coordinator = resp.coordinators[0]
        assert coordinator.error_code == 0, coordinator
        return int(coordinator.node_id)
    finally:
        raw.close()


def test_transactional_offset_commits_whichever_brokers_coordinate(tmp_path: Path) -> None:
    """Consume-transform-produce on a cluster: for 20 group / transactional-id
    pairs, confluent-kafka's and kafka-python's send_offsets_to_transaction
    commit (it failed with a fatal INVALID_TXN_STATE whenever the group's
    coordinator was not the transaction's: TxnOffsetCommit was verified with the
    local transaction coordinator, which does not hold the transaction).
    The pairs are drawn from a fixed seed; most put the two coordinators on
    different brokers, which the test checks."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KTP

    cluster = LocalCluster(tmp_path, controllers=3, overrides=REPLICATED)
    cluster.format()
    cluster.start()
    rng = random.Random(40)
    try:
        create(cluster, "src", 1)
        create(cluster, "dst", 1)
        produce(cluster.bootstrap, "src", 100, 1)
        apart = 0
        for i in range(20):
            group, tid = f"g-{rng.getrandbits(32):08x}", f"t-{rng.getrandbits(32):08x}"
            apart += (_coordinator(cluster.bootstrap, group, 0)
                      != _coordinator(cluster.bootstrap, tid, 1))
            offset = i + 1
            if i % 2 == 0:  # confluent-kafka
                consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                                     "enable.auto.commit": False})
                consumer.subscribe(["src"])
                wait_for("an assignment", lambda c=consumer: c.poll(0.2) is not None
                         or c.assignment(), 30, 0)
                producer = Producer({"bootstrap.servers": cluster.bootstrap,
                                     "transactional.id": tid})
                producer.init_transactions(30)
                producer.begin_transaction()
                producer.produce("dst", str(i).encode())
                producer.send_offsets_to_transaction(
                    [TopicPartition("src", 0, offset)], consumer.consumer_group_metadata(), 30)
                producer.commit_transaction(30)
                consumer.close()
            else:  # kafka-python
                kproducer = KafkaProducer(bootstrap_servers=cluster.bootstrap,
                                          transactional_id=tid)
                kproducer.init_transactions()
                kproducer.begin_transaction()
                kproducer.send("dst", str(i).encode())
                kproducer.send_offsets_to_transaction(
                    {KTP("src", 0): OffsetAndMetadata(offset, "", -1)}, group)
                kproducer.commit_transaction()
                kproducer.close()
            assert committed(cluster.bootstrap, "src", group, 1) == {0: offset}, (group, tid)
        assert apart >= 8, f"only {apart} of 20 pairs had their coordinators apart"
        check = KafkaConsumer("dst", bootstrap_servers=cluster.bootstrap,
                              isolation_level="read_committed", auto_offset_reset="earliest")
        values: list[int] = []
        deadline = time.monotonic() + 30
        while len(values) < 20 and time.monotonic() < deadline:
            for records in check.poll(500).values():
                values.extend(int(m.value) for m in records)
        values.extend(int(m.value) for r in check.poll(500).values() for m in r)  # no more
        check.close()
        assert sorted(values) == list(range(20))
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


def test_a_topic_deleted_while_a_node_was_down_is_moved_aside_and_can_be_put_back(
        tmp_path: Path) -> None:
    """The one case where a restarted node moves a directory aside: its caught-up
    metadata says the topic was deleted meanwhile. The log names the topic id
    and the metadata offset that decided it; `odradek storage strays` lists the
    directory and `odradek storage restore-stray` puts it back (the broker then
    moves it aside again, since the topic is still deleted)."""
    import subprocess

    from tests.support.cluster import serve_command

    cluster = LocalCluster(tmp_path, controllers=3, overrides=REPLICATED)
    cluster.format()
    cluster.start()
    odradek = serve_command()[:-1]
    try:
        create(cluster, "gone", 1)
        create(cluster, "kept", 1)
        produce(cluster.bootstrap, "gone", 10, 1)
        produce(cluster.bootstrap, "kept", 10, 1)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        # librdkafka prints a topic id in standard base64; Kafka's form (and the
        # broker's log) is URL-safe base64, "-" and "_" for "+" and "/".
        topic_id = str(admin.describe_topics(
            TopicCollection(["gone"]))["gone"].result(20).topic_id).translate(
                str.maketrans("+/", "-_"))
        assert cluster.terminate(3) == 0
        others = ",".join(n.address for n in cluster.brokers if n.node_id != 3)
        admin_others = AdminClient({"bootstrap.servers": others})
        admin_others.delete_topics(["gone"])["gone"].result(30)
        cluster.start(3)
        node3 = cluster.nodes[3]
        line = wait_for("node 3 moving gone-0 aside", lambda: next(
            (x for x in node3.log_path.read_text().splitlines() if "gone-0" in x
             and "moved aside" in x), None), 60)
        assert "the topic was deleted" in line and "metadata offset" in line
        assert f"topic id {topic_id}" in line, line
        assert "kept-0" not in node3.log_path.read_text().split("moved aside")[0][-200:]
        assert [p.name.split(".")[0] for p in strays(cluster)] == ["gone-0"]
        listed = subprocess.run([*odradek, "storage", "strays", "-c", str(node3.properties)],
                                capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0 and "gone-0" in listed.stdout, listed
        assert read_all(cluster.bootstrap, "kept", 1, 10)[0] == [str(i).encode()
                                                                for i in range(10)]
        assert cluster.terminate(3) == 0
        (stray,) = strays(cluster)
        done = subprocess.run([*odradek, "storage", "restore-stray", str(stray), "-c",
                               str(node3.properties)], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done
        assert (stray.parent / "gone-0").is_dir() and not stray.exists()
        again = subprocess.run([*odradek, "storage", "restore-stray", str(stray), "-c",
                                str(node3.properties)], capture_output=True, text=True,
                               timeout=60)
        assert again.returncode != 0 and len(again.stderr.strip().splitlines()) == 1
        assert "Traceback" not in again.stderr
        cluster.start(3)
        wait_for("gone-0 moved aside again", lambda: len(strays(cluster)) == 1
                 and not (stray.parent / "gone-0").exists(), 60)
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


def test_dev_cluster_is_a_failover_playground(tmp_path: Path) -> None:
    """`odradek dev cluster` with --override: `kill 2` on its console kills one
    node, which is reported while the others keep serving acks=all records;
    `start 2` brings it back; `quit` stops all; run again on the same
    directory, it keeps its edited server.properties and every record. Each
    node serves its metrics endpoint where the start says."""
    import socket
    import subprocess
    import sys
    import threading

    from tests.support.cluster import free_port

    base = free_port()
    while True:  # base..base+8 must be free (clients, quorum, metrics)
        try:
            for p in range(base, base + 9):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            break
        except OSError:
            base = free_port()
    out: list[str] = []

    def launch() -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "odradek", "dev", "cluster", "--dir", str(tmp_path / "dev"),
             "--base-port", str(base), "--override", "broker.session.timeout.ms=4000",
             "--override", "broker.heartbeat.interval.ms=1000"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                out.append(line.rstrip())
        threading.Thread(target=pump, daemon=True).start()
        return proc

    def say(proc: subprocess.Popen[str], command: str) -> None:
        assert proc.stdin is not None
        proc.stdin.write(command + "\n")
        proc.stdin.flush()

    def said(text: str, timeout_s: float = 60) -> str:
        return wait_for(f"{text!r} from dev cluster", lambda: next(
            (x for x in out if text in x), None), timeout_s)

    proc = launch()
    try:
        bootstrap = said("bootstrap: ").split(": ", 1)[1]
        metrics = said("metrics: ")
        assert f"node 3: http://127.0.0.1:{base + 8}/metrics" in metrics, metrics
        import urllib.request

        def ready() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{base + 6}/readyz", timeout=10) as r:
                return r.status == 200
        wait_for("node 1's /readyz", ready, 60)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("play", 3, 3)])["play"].result(30)
        produce(bootstrap, "play", 300, 3)
        say(proc, "kill 2")
        said("node 2 killed by SIGKILL")
        produce(bootstrap, "play", 300, 3)
        assert proc.poll() is None
        say(proc, "start 2")
        said("node 2: pid", 10)
        say(proc, "status")
        said("node 3: running")
        say(proc, "quit")
        assert proc.wait(60) == 0
        assert "cluster stopped" in out
        props = tmp_path / "dev" / "node1" / "server.properties"
        props.write_text(props.read_text() + "# edited by hand\n")
        out.clear()
        proc = launch()
        said("bootstrap: ")
        got = read_all(bootstrap, "play", 3, 600)
        assert sum(map(len, got.values())) == 600
        assert "# edited by hand" in props.read_text()
        say(proc, "quit")
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(60)


def _epochs(node_dir: Path, partition: str) -> list[str]:
    """The entries of a replica's leader-epoch-checkpoint (after the two header lines)."""
    path = node_dir / "data" / partition / "leader-epoch-checkpoint"
    return path.read_text().splitlines()[2:] if path.exists() else []


def test_a_wiped_leader_back_within_its_session_copies_the_epochs_right(
        tmp_path: Path) -> None:
    """Found by the restart matrix (seed 40, round 80): a partition leader killed,
    its disk wiped and formatted, and started again before its session ran
    out. The metadata still named it leader; it became leader at that old
    epoch on its empty log, writing (old epoch, offset 0) into its
    leader-epoch cache, then copied the log back without the earlier epochs.
    Once it led again, a follower asking where its log diverges was told
    offset 0 and truncated 17,505 records, again and again, and ISRs never
    filled. Now it leads nothing until its new registration is in the
    metadata: after catching up, its cache equals the leader's."""
    cluster = LocalCluster(tmp_path, controllers=3, overrides=REPLICATED)
    cluster.format()
    cluster.start()
    try:
        create(cluster, "e", 1)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})

        def leader() -> int:
            return int(admin.list_topics("e", timeout=10).topics["e"].partitions[0].leader)

        def full_isr() -> bool:
            p = admin.list_topics("e", timeout=10).topics["e"].partitions[0]
            return p.leader >= 0 and len(p.isrs) == 3

        for _ in range(2):  # batches in several leader epochs
            produce(cluster.bootstrap, "e", 200, 1)
            first = leader()
            cluster.kill(first)
            cluster.start(first)
            wait_for("full ISR", full_isr, 60, 0.2)
        produce(cluster.bootstrap, "e", 200, 1)
        victim = leader()
        cluster.kill(victim)
        cluster.wipe(victim)
        cluster.start(victim)  # well within its 9 s session
        segment = cluster.nodes[victim].directory / "data" / "e-0" / f"{0:020d}.log"
        other = next(n for n in cluster.nodes if n != victim)
        size = (cluster.nodes[other].directory / "data" / "e-0" / f"{0:020d}.log").stat()
        wait_for("the wiped replica caught up, in a full ISR", lambda: segment.exists()
                 and segment.stat().st_size == size.st_size and full_isr(), 60, 0.2)
        got = read_all(cluster.bootstrap, "e", 1, 600)
        assert [int(v) for v in got[0]] == [i % 200 for i in range(600)]
        now = leader()
        cluster.stop_all(clean=True)  # the checkpoints are written
        # (an epoch the leader began at the log end has no batch to copy yet)
        # (and a node that led for a moment while the others stopped has an epoch
        # of its own at the log end: what is compared is the epochs of the batches
        # copied, below offset 600)
        def copied(node: int) -> list[str]:
            return [e for e in _epochs(cluster.nodes[node].directory, "e-0")
                    if int(e.split()[1]) < 600]

        want = copied(now)
        assert len(want) >= 3, want
        assert copied(victim) == want
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


def test_an_admin_request_sent_as_the_controller_stops_waits_for_the_next_one(
        tmp_path: Path) -> None:
    """The active controller is stopped (SIGTERM: it resigns) and a DeleteTopics
    goes at once to the other nodes, while the quorum has no leader yet. The
    node it reaches waits for the next controller and forwards the request
    there, as Kafka's forwarding waits, instead of answering NOT_CONTROLLER
    (which confluent-kafka's AdminClient hands to the application as is)."""
    cluster = LocalCluster(tmp_path, controllers=3, overrides=REPLICATED)
    cluster.format()
    cluster.start()
    try:
        create(cluster, "doomed", 1)
        controller = active_controller(cluster.bootstrap)
        assert cluster.terminate(controller) == 0
        others = ",".join(n.address for n in cluster.brokers if n.node_id != controller)
        survivors = AdminClient({"bootstrap.servers": others})
        survivors.delete_topics(["doomed"], request_timeout=20)["doomed"].result(30)
        # the answering broker's metadata may be a few records behind the
        # controller's commit: the deletion shows there within moments
        wait_for("the deletion in the survivors' metadata",
                 lambda: "doomed" not in survivors.list_topics(timeout=10).topics, 30)
    finally:
        cluster.stop()
