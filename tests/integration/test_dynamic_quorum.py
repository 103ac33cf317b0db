"""Dynamic controller quorums (KIP-853) on real multi-process clusters, changed
with ``odradek metadata-quorum`` as an operator would.

* A controller formatted ``--standalone`` grows to three with ``add-controller``
  (the others formatted ``--no-initial-controllers``); a full restart keeps the
  voter set (it lives in the metadata log).
* Three controllers grow to five and shrink to three (the first two, the leader
  possibly among them, removed) while an idempotent ``acks=all`` producer
  writes: every acknowledged record is read back. Then a voter's disk is wiped
  and formatted again (a new directory id): it is removed by its old directory
  id and added again with the new one.
* A voter restarted on a new port tells the leader (UpdateRaftVoter): the
  voter set and DescribeQuorum show its new endpoint, and the other voters
  reach it there (the leader is stopped next, and the two left elect one).
* A voter that moved while the quorum was down, started with one other voter
  only: the other cannot reach it for votes (its record names the old port),
  so the moved one must lead, and its follower finds it at the new port from
  its BeginQuorumEpoch (``LeaderEndpoints``) until the leader has updated its
  own record.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import (
    LocalCluster,
    assert_no_tracebacks,
    free_port,
    serve_command,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

FAST = {"controller.quorum.election.timeout.ms": "1000",
        "controller.quorum.fetch.timeout.ms": "2000"}


def mq(cluster: LocalCluster, *args: str, via: int | None = None) -> str:
    """``odradek metadata-quorum ARGS`` against a broker (or controller ``via``'s
    listener); its output, asserting exit status 0."""
    if via is not None:
        target = ["--bootstrap-controller", f"127.0.0.1:{cluster.nodes[via].controller_port}"]
    else:
        target = ["--bootstrap-server", cluster.bootstrap.split(",")[0]]
    # Kafka's order: the target before the verb (test_cli_dynamic_quorum puts it after).
    proc = subprocess.run([*serve_command()[:-1], "metadata-quorum", *target, *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"metadata-quorum {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def status(cluster: LocalCluster, via: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(mq(cluster, "describe", "--status", "--json", via=via))
    return out


def voters(cluster: LocalCluster, via: int | None = None) -> dict[int, str]:
    """Voter id → directory id, as the active controller describes them."""
    return {v["id"]: v["directoryId"] for v in status(cluster, via)["CurrentVoters"]}


def wait_voters(cluster: LocalCluster, ids: set[int], via: int | None = None,
                timeout_s: float = 60) -> dict[int, str]:
    def check() -> dict[int, str] | None:
        found = voters(cluster, via)
        st = status(cluster, via)
        return found if set(found) == ids and st["LeaderId"] in ids else None
    return wait_for(f"voters {sorted(ids)}", check, timeout_s, interval_s=0.5)


def add(cluster: LocalCluster, node_id: int) -> None:
    out = mq(cluster, "add-controller", "--command-config", str(cluster.nodes[node_id].properties))
    assert f"Added controller {node_id}" in out


def remove(cluster: LocalCluster, node_id: int, directory_id: str) -> None:
    out = mq(cluster, "remove-controller", "--controller-id", str(node_id),
             "--controller-directory-id", directory_id)
    assert f"Removed controller {node_id}" in out


def meta_directory_id(cluster: LocalCluster, node_id: int) -> str:
    text = (cluster.nodes[node_id].directory / "data" / "meta.properties").read_text()
    return next(line.split("=", 1)[1] for line in text.splitlines()
                if line.startswith("directory.id="))


def test_a_standalone_controller_grows_to_three_and_a_restart_keeps_them(
        tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, controllers=3, overrides=FAST, dynamic=True)
    cluster.format(initial=[1])
    cluster.start()
    try:
        assert set(wait_voters(cluster, {1})) == {1}
        # Fetch v17 carries each fetcher's directory id: the leader knows its
        # observers by the ids they were formatted with.
        want = {n: meta_directory_id(cluster, n) for n in (2, 3)}

        def observers() -> dict[int, str] | None:
            seen = {o["id"]: o["directoryId"] for o in status(cluster)["CurrentObservers"]}
            return seen if all(seen.get(n) == d for n, d in want.items()) else None
        wait_for("observers 2 and 3 with their directory ids", observers, 60, interval_s=0.5)
        add(cluster, 2)
        add(cluster, 3)
        grown = wait_voters(cluster, {1, 2, 3})
        assert grown == {n: meta_directory_id(cluster, n) for n in (1, 2, 3)}
        row = status(cluster)
        assert {v["endpoints"] for v in row["CurrentVoters"]} == {
            f"CONTROLLER://127.0.0.1:{cluster.nodes[n].controller_port}" for n in (1, 2, 3)}
        cluster.stop_all(clean=True)
        cluster.start()
        assert wait_voters(cluster, {1, 2, 3}) == grown  # the voter set is in the log
        # A controller that does not lead sends the tool on to the leader.
        follower = next(n for n in (1, 2, 3) if n != status(cluster)["LeaderId"])
        assert set(voters(cluster, via=follower)) == {1, 2, 3}
        assert_no_tracebacks(cluster)
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


class Writer(threading.Thread):
    """An idempotent acks=all producer writing numbered records until stopped;
    :attr:`acked` are the values it had acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 5,
                                  "message.timeout.ms": 120_000})
        self.topic = topic
        self.acked: list[int] = []
        self.errors: list[str] = []
        self.halt = threading.Event()

    def _done(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.append(int(msg.value()))

    def run(self) -> None:
        i = 0
        while not self.halt.is_set():
            self.producer.produce(self.topic, str(i).encode(), partition=i % 2,
                                  on_delivery=self._done)
            i += 1
            self.producer.poll(0.005)
        self.producer.flush(120)


def read_values(bootstrap: str, topic: str, expect: int) -> set[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dq-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    got: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(got) < expect and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.add(int(msg.value()))
    finally:
        consumer.close()
    return got


def test_three_controllers_grow_to_five_and_shrink_to_three_while_producers_write(
        tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, controllers=5, brokers=2, overrides=FAST, dynamic=True)
    cluster.format(initial=[1, 2, 3])
    cluster.start()
    writer: Writer | None = None
    try:
        first = wait_voters(cluster, {1, 2, 3})
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        wait_for("both brokers registered",
                 lambda: len(admin.list_topics(timeout=5).brokers) == 2, 60, interval_s=0.5)
        admin.create_topics([NewTopic("dq", 2, 2)], request_timeout=30)["dq"].result(60)
        writer = Writer(cluster.bootstrap, "dq")
        writer.start()
        wait_for("first acks", lambda: len(writer.acked) > 100, 60)  # type: ignore[union-attr]
        add(cluster, 4)
        add(cluster, 5)
        wait_voters(cluster, {1, 2, 3, 4, 5})
        remove(cluster, 1, first[1])
        remove(cluster, 2, first[2])
        shrunk = wait_voters(cluster, {3, 4, 5})
        mark = len(writer.acked)
        wait_for("acks after the shrink", lambda: len(writer.acked) > mark + 100, 60)  # type: ignore[union-attr]
        writer.halt.set()
        writer.join(150)
        assert not writer.is_alive() and not writer.errors, writer.errors[:3]
        acked = set(writer.acked)
        got = read_values(cluster.bootstrap, "dq", len(acked))
        assert acked <= got, f"{len(acked - got)} acknowledged records lost"

        # Controller 3's disk is replaced: formatted again, it has a new directory id.
        cluster.terminate(3)
        cluster.wipe(3)
        cluster.start(3)
        new_id = meta_directory_id(cluster, 3)
        assert new_id != shrunk[3]
        remove(cluster, 3, shrunk[3])
        wait_voters(cluster, {4, 5})
        add(cluster, 3)
        assert wait_voters(cluster, {3, 4, 5}) == {3: new_id, 4: shrunk[4], 5: shrunk[5]}
        # The quorum still decides: a new topic is created and written.
        admin.create_topics([NewTopic("after", 1, 2)], request_timeout=30)["after"].result(60)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "enable.idempotence": True})
        producer.produce("after", b"1")
        assert producer.flush(60) == 0
        assert_no_tracebacks(cluster)
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        if writer is not None:
            writer.halt.set()
        cluster.stop()


def endpoints(cluster: LocalCluster, via: int | None = None) -> dict[int, str]:
    """Voter id → its endpoints, as DescribeQuorum's nodes give them."""
    return {v["id"]: v["endpoints"] for v in status(cluster, via)["CurrentVoters"]}


def move(cluster: LocalCluster, node_id: int) -> str:
    """Give a stopped controller a new CONTROLLER port; its new endpoint."""
    node = cluster.nodes[node_id]
    old, new = node.controller_port, free_port()
    text = node.properties.read_text()
    assert f"listeners=CONTROLLER://127.0.0.1:{old}" in text
    node.properties.write_text(text.replace(f"listeners=CONTROLLER://127.0.0.1:{old}",
                                            f"listeners=CONTROLLER://127.0.0.1:{new}"))
    node.controller_port = new
    return f"CONTROLLER://127.0.0.1:{new}"


def create_topic(bootstrap: str, name: str) -> None:
    """Create ``name`` (one partition, RF 1) through the brokers, trying again
    on NOT_CONTROLLER within 60 s. A broker answers NOT_CONTROLLER (retriable)
    when it found no active controller within its forwarding wait, which a
    loaded machine can exceed just after the quorum's leader changed; Kafka's
    own admin client retries it, librdkafka's hands it to the application."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while True:
        try:
            admin.create_topics([NewTopic(name, 1, 1)], request_timeout=30)[name].result(60)
            return
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.NOT_CONTROLLER or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def test_a_voter_restarted_on_a_new_port_updates_its_endpoint(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, controllers=3, brokers=1, overrides=FAST, dynamic=True)
    cluster.format(initial=[1, 2, 3])
    cluster.start()
    try:
        dirs = wait_voters(cluster, {1, 2, 3})
        leader = status(cluster)["LeaderId"]
        moved = min(n for n in (1, 2, 3) if n != leader)
        cluster.terminate(moved)
        want = move(cluster, moved)
        cluster.start(moved)
        wait_for(f"node {moved}'s new endpoint in the voter set",
                 lambda: endpoints(cluster).get(moved) == want, 60, interval_s=0.5)
        assert voters(cluster) == dirs  # same voters, same directories
        assert endpoints(cluster, via=moved)[moved] == want  # asked on its new port

        def caught_up() -> bool:
            rows = json.loads(mq(cluster, "describe", "--replication", "--json"))
            row = next(r for r in rows if r["NodeId"] == moved)
            return row["Status"] == "Follower" and row["Lag"] == 0 and (
                row["DirectoryId"] == dirs[moved])
        wait_for(f"node {moved} following, caught up", caught_up, 60, interval_s=0.5)

        # The leader stops: the two left must reach each other, one on its new port.
        cluster.terminate(leader)
        after = wait_for("a new leader", lambda: (
            st if (st := status(cluster, via=moved))["LeaderId"] in set(dirs) - {leader}
            else None), 60, interval_s=0.5)
        assert after["LeaderId"] != leader
        create_topic(cluster.bootstrap, "moved")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "enable.idempotence": True})
        producer.produce("moved", b"1")
        assert producer.flush(60) == 0
        assert endpoints(cluster, via=moved)[moved] == want
        assert_no_tracebacks(cluster)
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


def test_a_moved_voter_that_must_lead_is_found_at_its_new_port(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, controllers=3, brokers=1, overrides=FAST, dynamic=True)
    cluster.format(initial=[1, 2, 3])
    cluster.start()
    try:
        dirs = wait_voters(cluster, {1, 2, 3})
        # The quorum's leader is the one moved, and stopped last: its log then
        # holds all the others have, so the one voter started with it must
        # grant its vote (Raft grants none to a shorter log; stopped in another
        # order, the voter could hold a record more, and with the moved node
        # unreachable at its old port nobody could be elected: a full run saw it).
        moving = status(cluster)["LeaderId"]
        voter, last = sorted(n for n in (1, 2, 3) if n != moving)
        for node_id in (4, last, voter, moving):
            cluster.terminate(node_id)
        want = move(cluster, moving)
        cluster.start(moving)
        cluster.start(voter)  # it can vote for the moved node, but cannot ask for its vote

        def led_by_moved() -> dict[str, Any] | None:
            st = status(cluster, via=moving)
            return st if st["LeaderId"] == moving and (
                endpoints(cluster, via=moving)[moving] == want) else None
        led = wait_for(f"node {moving} leading, its new endpoint in the voter set",
                       led_by_moved, 60, interval_s=0.5)
        cluster.start(last)
        cluster.start(4)
        assert wait_voters(cluster, {1, 2, 3}) == dirs
        assert endpoints(cluster)[moving] == want
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        wait_for("the broker registered",
                 lambda: len(admin.list_topics(timeout=5).brokers) == 1, 60, interval_s=0.5)
        create_topic(cluster.bootstrap, "led")
        assert status(cluster)["LeaderEpoch"] >= led["LeaderEpoch"]
        assert_no_tracebacks(cluster)
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()
