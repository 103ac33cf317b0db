"""``odradek serve --processes 2``: two broker processes on this host, one
cluster. Real processes (the supervisor as a user starts it) and confluent-kafka
clients; every wait has a deadline."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.main import main
from tests.support.cluster import wait_for
from tests.support.processes import Supervised, alive, port_block, processes_naming

pytestmark = pytest.mark.timeout(120)

RECORDS = 400


@pytest.fixture
def two(tmp_path: Path) -> Iterator[Supervised]:
    sup = Supervised(tmp_path / "data", 2)
    try:
        yield sup.start()
    finally:
        sup.kill_all()


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _leaders(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Partition → leader node, once the broker at ``bootstrap`` knows all of them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def known() -> dict[int, int] | None:
        meta = admin.list_topics(topic, timeout=5).topics.get(topic)
        if meta is None or meta.error is not None or len(meta.partitions) != partitions:
            return None
        if any(p.leader < 0 for p in meta.partitions.values()):
            return None
        return {i: p.leader for i, p in meta.partitions.items()}

    return wait_for(f"{topic}'s leaders at {bootstrap}", known, 30)


def _produce(bootstrap: str, topic: str, count: int, tag: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failed: list[object] = []
    for i in range(count):
        producer.produce(topic, key=str(i).encode(), value=f"{tag}-{i}".encode(),
                         on_delivery=lambda err, _msg: failed.append(err) if err else None)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert failed == []


def _consume(bootstrap: str, topic: str, count: int, group: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 45
    try:
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            values.append(msg.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values


def test_metadata_lists_both_processes_and_partitions_spread_over_them(
        two: Supervised) -> None:
    assert len(two.addresses) == 2 and set(two.pids) == {1, 2}
    for address in two.addresses:  # either port bootstraps the whole cluster
        brokers = AdminClient({"bootstrap.servers": address}).list_topics(timeout=10).brokers
        assert {b.id: f"{b.host}:{b.port}" for b in brokers.values()} == {
            1: two.addresses[0], 2: two.addresses[1]}
    _create(two.addresses[1], "spread", 4)
    leaders = _leaders(two.addresses[0], "spread", 4)
    assert sorted(leaders.values()) == [1, 1, 2, 2]


def test_produce_consume_and_a_consumer_group_through_either_port(two: Supervised) -> None:
    first, second = two.addresses
    _create(first, "either", 4)
    _leaders(second, "either", 4)
    _produce(first, "either", RECORDS, "a")
    _produce(second, "either", RECORDS, "b")
    values = _consume(second, "either", 2 * RECORDS, "g1")
    assert sorted(values) == sorted([f"a-{i}".encode() for i in range(RECORDS)]
                                    + [f"b-{i}".encode() for i in range(RECORDS)])
    # the group's commit is seen through the other port (its coordinator may be either)
    consumer = Consumer({"bootstrap.servers": first, "group.id": "g1"})
    try:
        committed = consumer.committed([TopicPartition("either", p) for p in range(4)],
                                       timeout=20)
    finally:
        consumer.close()
    assert sum(tp.offset for tp in committed) == 2 * RECORDS


def test_sigterm_stops_every_process_and_a_restart_keeps_every_record(
        tmp_path: Path) -> None:
    sup = Supervised(tmp_path / "data", 2)
    try:
        sup.start()
        _create(sup.addresses[0], "kept", 4)
        _leaders(sup.addresses[1], "kept", 4)
        _produce(sup.bootstrap, "kept", RECORDS, "k")
        pids = dict(sup.pids)
        assert sup.stop(signal.SIGTERM) == 0
        assert not [pid for pid in pids.values() if alive(pid)]
        assert processes_naming(str(sup.data)) == []
        sup.start()
        assert sup.pids.keys() == pids.keys()
        _leaders(sup.addresses[1], "kept", 4)
        values = _consume(sup.addresses[1], "kept", RECORDS, "after-restart")
        assert sorted(values) == sorted(f"k-{i}".encode() for i in range(RECORDS))
        assert sup.stop(signal.SIGINT) == 0
        assert not [pid for pid in sup.pids.values() if alive(pid)]
    finally:
        sup.kill_all()


def test_a_process_killed_is_reported_and_started_again(two: Supervised) -> None:
    victim = two.pids[2]
    subprocess.run(["kill", "-9", str(victim)], check=True)
    wait_for("node 2 started again", lambda: two.pids[2] != victim or None, 30)
    assert any("(started again)" in line for line in two.lines)
    assert "node 2" in two.log.read_text() and "killed by SIGKILL" in two.log.read_text()
    assert alive(two.pids[1])  # the other kept running
    _create(two.addresses[0], "after-kill", 2)
    assert sorted(_leaders(two.addresses[1], "after-kill", 2).values()) == [1, 2]


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", "serve", *args],
                          capture_output=True, text=True, timeout=60)


def _one_line_failure(done: subprocess.CompletedProcess[str], words: str) -> None:
    assert done.returncode == 1, done
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("odradek: "), done.stderr
    assert "Traceback" not in done.stderr
    assert words in done.stderr, done.stderr


def _serve_here(capsys: pytest.CaptureFixture[str], *args: str
                ) -> subprocess.CompletedProcess[str]:
    """``odradek serve ARGS`` through the command's own entry point in this
    process (each case below fails before any process is started or any
    signal handler installed), as a completed process."""
    code = main(["serve", *args])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["odradek", "serve", *args], code, out, err)


def test_bad_input_is_one_line_and_a_non_zero_exit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = port_block(4)
    data = str(tmp_path / "data")
    listeners = f"listeners=PLAINTEXT://127.0.0.1:{port}"
    # a real process once: what a user sees
    _one_line_failure(_serve("--processes", "0", "--log-dirs", data, "--override", listeners),
                      "--processes must be between 1 and 256, got 0")
    # two listeners one port apart: process 1's first would be process 0's second
    _one_line_failure(
        _serve_here(capsys, "--processes", "2", "--log-dirs", data, "--override",
                    f"listeners=PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{port + 1}"),
        f"port {port + 1} would serve both")
    # a port of the range held by another program
    with socket.create_server(("127.0.0.1", port + 1)):
        _one_line_failure(_serve_here(capsys, "--processes", "2", "--log-dirs", data,
                                      "--override", listeners),
                          f"port {port + 1} (listener port of process 1) is not free")
    # data that 2 processes served is not served by fewer (their partitions would go offline)
    served = tmp_path / "served"
    served.mkdir()
    (served / "processes.properties").write_text("processes=2\n")
    _one_line_failure(_serve_here(capsys, "--processes", "1", "--log-dirs", str(served),
                                  "--override", listeners),
                      "this data was served by 2 processes; fewer")
    # nor by a single `odradek serve`, which would take process-<i> for partitions
    _one_line_failure(_serve_here(capsys, "--log-dirs", str(served), "--override", listeners),
                      f"{served} holds the data of `odradek serve --processes 2`; start it")
    assert sorted(p.name for p in served.iterdir()) == ["processes.properties"]
    # the data of a single `odradek serve` is not taken over
    single = tmp_path / "single"
    single.mkdir()
    (single / "meta.properties").write_text("version=1\n")
    _one_line_failure(_serve_here(capsys, "--processes", "2", "--log-dirs", str(single),
                                  "--override", listeners),
                      "holds the data of a single `odradek serve`")
    assert not (tmp_path / "data").exists()  # nothing was written for the refused starts


def test_a_process_that_fails_to_start_stops_the_others_with_one_line(tmp_path: Path) -> None:
    # process 1's directory formatted for another node id: that broker refuses it
    data = tmp_path / "data"
    (data / "process-1").mkdir(parents=True)
    (data / "process-1" / "meta.properties").write_text(
        "version=1\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAQ\nnode.id=7\n"
        "cluster.id=MkU3OEVBNTcwNTJENDM2Qg\n")
    sup = Supervised(data, 2)
    try:
        with pytest.raises(RuntimeError, match=r"exited \(1\) before serving"):
            sup.start()
        lines = sup.log.read_text().splitlines()
        ours = [line for line in lines if not line.startswith("[node ")]
        assert len(ours) == 1 and ours[0].startswith(
            "odradek: process 1 (node 2) did not start: exited with status 1: "), lines[-5:]
        assert "Traceback" not in sup.log.read_text()
        assert processes_naming(str(data)) == []  # the other process was stopped
    finally:
        sup.kill_all()


def test_the_processes_stop_when_the_supervisor_is_killed(two: Supervised) -> None:
    assert two.stop(signal.SIGKILL) == -signal.SIGKILL
    # each process got SIGTERM from the kernel (PR_SET_PDEATHSIG): a controlled shutdown
    wait_for("no process left", lambda: processes_naming(str(two.data)) == [] or None, 45)
