"""Several log directories (log.dirs, JBOD): placement, DescribeLogDirs per directory,
AlterReplicaLogDirs moving a partition while it is served, restarts and kill -9
mid-move, and the refusal of a partition found in two directories."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, TopicPartitionReplica

from odradek.testing import Broker
from odradek.wire.messages.alter_replica_log_dirs_request import (
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirTopic,
)
from odradek.wire.messages.describe_log_dirs_request import DescribeLogDirsRequest
from tests.support.process import ServerProcess, serve_command
from tests.support.rawclient import RawClient

LOG_DIR_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION = 57, 3


def _wait(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _layout(bootstrap: str, version: int = 4) -> dict[str, dict[tuple[str, int], Any]]:
    """DescribeLogDirs over a raw socket: directory → (topic, partition) → partition
    result (futures keyed with partition + 1000)."""
    client = RawClient(bootstrap)
    try:
        resp = client.request(DescribeLogDirsRequest(topics=None), version)
    finally:
        client.close()
    out: dict[str, dict[tuple[str, int], Any]] = {}
    for result in resp.results:
        assert result.error_code == 0
        assert (result.total_bytes > 0) == (version >= 4)
        out[result.log_dir] = {
            (t.name, p.partition_index + (1000 if p.is_future_key else 0)): p
            for t in result.topics for p in t.partitions}
    return out


def _where(bootstrap: str, topic: str, partition: int) -> tuple[str | None, str | None]:
    """(directory of the current log, directory of the future log) per DescribeLogDirs."""
    current = future = None
    for directory, parts in _layout(bootstrap).items():
        if (topic, partition) in parts:
            current = directory
        if (topic, partition + 1000) in parts:
            future = directory
    return current, future


def _alter(bootstrap: str, path: str, topic: str, partitions: list[int],
           version: int = 2) -> dict[int, int]:
    client = RawClient(bootstrap)
    try:
        resp = client.request(AlterReplicaLogDirsRequest(dirs=[AlterReplicaLogDir(
            path, [AlterReplicaLogDirTopic(topic, partitions)])]), version)
    finally:
        client.close()
    return {p.partition_index: p.error_code for t in resp.results for p in t.partitions}


def _read_all(bootstrap: str, topic: str, partition: int = 0) -> list[tuple[int, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                         "enable.auto.commit": False})
    out: list[tuple[int, bytes]] = []
    try:
        end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
        consumer.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + 30
        while len(out) < end and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                assert m.error() is None
                out.append((m.offset(), m.value()))
    finally:
        consumer.close()
    return out


class _Load:
    """A confluent-kafka producer (acks=all) sending to one partition in a thread until
    stopped; ``acked`` maps each acknowledged value to its offset."""

    def __init__(self, bootstrap: str, topic: str, *, value_bytes: int = 200) -> None:
        self.acked: dict[bytes, int] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                   "linger.ms": 2, "enable.idempotence": True,
                                   "message.timeout.ms": 5000})
        self._topic, self._pad = topic, b"." * value_bytes
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err: object, msg: Any) -> None:
        with self._lock:
            if err is None:
                self.acked[msg.value()] = msg.offset()
            else:
                self.errors.append(str(err))

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            try:
                self._producer.produce(self._topic, b"v%08d" % i + self._pad, partition=0,
                                       on_delivery=self._delivered)
                i += 1
            except BufferError:
                self._producer.poll(0.01)
            self._producer.poll(0)
            if i % 10 == 0:
                time.sleep(0.005)  # at most ~2000 records (400 kB) a second
        self._producer.flush(30)

    def __enter__(self) -> _Load:
        self._thread.start()
        return self

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def stop(self) -> dict[bytes, int]:
        self._stop.set()
        self._thread.join(60)
        with self._lock:
            return dict(self.acked)

    def __exit__(self, *exc: object) -> None:
        if self._thread.is_alive():
            self.stop()


def _preload(bootstrap: str, topic: str, n: int, size: int = 1000) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, b"p%08d" % i + b"-" * size, partition=0)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


@pytest.fixture
def two_dirs(tmp_path: Path) -> Iterator[tuple[str, str]]:
    a, b = tmp_path / "a", tmp_path / "b"
    yield str(a), str(b)


def test_partitions_and_internal_topics_spread_over_the_log_dirs(
        two_dirs: tuple[str, str]) -> None:
    a, b = two_dirs
    with Broker(data_dir=a, **{"log.dirs": f"{a},{b}", "offsets.topic.num.partitions": "4"}
                ) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("spread", 4, 1)])["spread"].result(10)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition("spread", 0, 0)])
        consumer.commit(offsets=[TopicPartition("spread", 0, 0)], asynchronous=False)
        consumer.close()
        layout = _layout(broker.bootstrap_servers)
        assert list(layout) == [a, b]
        in_a = {tp for tp in layout[a]}
        in_b = {tp for tp in layout[b]}
        assert {p for t, p in in_a if t == "spread"} == {0, 2}
        assert {p for t, p in in_b if t == "spread"} == {1, 3}
        assert {p for t, p in in_a | in_b if t == "__consumer_offsets"} == {0, 1, 2, 3}
        assert {t for t, _ in in_a} == {t for t, _ in in_b} == {"spread", "__consumer_offsets"}
        assert sorted(n for n in os.listdir(a) if n.startswith("spread-")) == [
            "spread-0", "spread-2"]
        assert "__cluster_metadata-0" in os.listdir(a)  # the metadata log: the first dir
        assert "__cluster_metadata-0" not in os.listdir(b)
        assert _layout(broker.bootstrap_servers, version=1).keys() == layout.keys()
        # kafka-python's describe_log_dirs sees both directories too
        kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            dirs = kp.describe_log_dirs()[0]["log_dirs"]
        finally:
            kp.close()
        assert [d["log_dir"] for d in dirs] == [a, b]


def test_alter_replica_log_dirs_errors_are_kafkas(two_dirs: tuple[str, str]) -> None:
    a, b = two_dirs
    with Broker(data_dir=a, **{"log.dirs": f"{a},{b}"}) as broker:
        broker.create_topic("known", 1)
        boot = broker.bootstrap_servers
        for version in (1, 2):
            assert _alter(boot, "/no/such/dir", "known", [0], version) == {0: LOG_DIR_NOT_FOUND}
            relative = os.path.relpath(b)
            assert _alter(boot, relative, "known", [0], version) == {0: LOG_DIR_NOT_FOUND}
            assert _alter(boot, b, "unknown", [0], version) == {0: UNKNOWN_TOPIC_OR_PARTITION}
            assert _alter(boot, b, "known", [7], version) == {7: UNKNOWN_TOPIC_OR_PARTITION}
            # the directory it is in already: nothing to do
            assert _alter(boot, a, "known", [0], version) == {0: 0}
            assert _where(boot, "known", 0) == (a, None)


def test_a_partition_moves_under_acks_all_load_and_loses_nothing(
        two_dirs: tuple[str, str]) -> None:
    a, b = two_dirs
    # 2 MB/s: the ~4 MB already there take about two seconds to copy, long enough to
    # see the future log in DescribeLogDirs while the producer keeps appending.
    with Broker(data_dir=a, **{"log.dirs": f"{a},{b}", "log.segment.bytes": "1048576",
                               "replica.alter.log.dirs.io.max.bytes.per.second": "2000000"}
                ) as broker:
        boot = broker.bootstrap_servers
        broker.create_topic("moving", 1)
        _preload(boot, "moving", 4000)
        before = _layout(boot)
        assert ("moving", 0) in before[a] and not before[b]
        size_before = before[a][("moving", 0)].partition_size
        assert size_before > 4_000_000
        with _Load(boot, "moving") as load:
            _wait(lambda: load.count() > 200, "the producer to get going")
            kp = KafkaAdminClient(bootstrap_servers=boot)
            try:
                answer = kp.alter_replica_log_dirs({TopicPartitionReplica("moving", 0, 1): b})
            finally:
                kp.close()
            assert [e.__name__ for e in answer.values()] == ["NoError"]
            seen_future = _layout(boot)[b].get(("moving", 1000))
            assert seen_future is not None, "the future log shows while the copy runs"
            assert seen_future.is_future_key and seen_future.offset_lag > 0
            _wait(lambda: _where(boot, "moving", 0) == (b, None), "the move to finish")
            during = load.count()
            _wait(lambda: load.count() > during + 200, "produce to go on after the move")
            acked = load.stop()
        assert not load.errors
        after = _layout(boot)
        assert ("moving", 0) not in after[a] and ("moving", 1000) not in after[b]
        assert after[b][("moving", 0)].partition_size >= size_before
        assert after[b][("moving", 0)].offset_lag == 0
        stored = _read_all(boot, "moving")
        assert [o for o, _ in stored] == list(range(len(stored)))
        by_value = {v: o for o, v in stored}
        missing = [v for v, o in acked.items() if by_value.get(v) != o]
        assert not missing, f"{len(missing)} acknowledged records lost or moved"
        assert len(acked) > 400
        assert [n for n in os.listdir(b) if n.startswith("moving")] == ["moving-0"]
        assert not [n for n in os.listdir(a) if n.startswith("moving") and
                    not n.endswith("-delete")]


def _create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the result
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)


def _server(tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> ServerProcess:
    a, b = tmp_path / "a", tmp_path / "b"
    return ServerProcess(a, f"log.dirs={a},{b}", "log.segment.bytes=1048576", *extra,
                         env=env)


def test_a_restart_after_the_move_finds_the_partition_in_the_new_directory(
        tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    server = _server(tmp_path).start()
    try:
        _create(server.bootstrap, "kept")
        _preload(server.bootstrap, "kept", 3000, 500)
        assert _where(server.bootstrap, "kept", 0) == (a, None)
        assert _alter(server.bootstrap, b, "kept", [0]) == {0: 0}
        _wait(lambda: _where(server.bootstrap, "kept", 0) == (b, None), "the move")
        assert server.stop() == 0
        assert os.path.isdir(os.path.join(b, "kept-0"))
        server = _server(tmp_path).start()
        assert _where(server.bootstrap, "kept", 0) == (b, None)
        assert not [n for n in os.listdir(a) if n.startswith("kept")]  # -delete removed
        stored = _read_all(server.bootstrap, "kept")
        assert [v for _, v in stored] == [b"p%08d" % i + b"-" * 500 for i in range(3000)]
    finally:
        server.kill()


@pytest.mark.slow  # long for the fast tier (scripts/test.sh --fast)
def test_kill_9_mid_move_loses_nothing_and_the_move_resumes(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    # 1 MB/s: the copy of ~5 MB is mid-way when the broker is killed.
    server = _server(tmp_path, "replica.alter.log.dirs.io.max.bytes.per.second=1000000",
                     "log.flush.interval.messages=1").start()
    try:
        _create(server.bootstrap, "crash")
        _preload(server.bootstrap, "crash", 5000)
        with _Load(server.bootstrap, "crash") as load:
            _wait(lambda: load.count() > 100, "the producer to get going")
            assert _alter(server.bootstrap, b, "crash", [0]) == {0: 0}
            _wait(lambda: (_where(server.bootstrap, "crash", 0)[1] == b
                           and _layout(server.bootstrap)[b][("crash", 1000)].partition_size
                           > 1_000_000), "the copy to be under way")
            server.kill()
            acked = load.stop()
        assert next(n for n in os.listdir(b) if n.startswith("crash")).endswith("-future")
        server = _server(tmp_path).start()  # no throttle now: the move resumes and ends
        _wait(lambda: _where(server.bootstrap, "crash", 0) == (b, None), "the resumed move")
        stored = _read_all(server.bootstrap, "crash")
        by_value = {v: o for o, v in stored}
        assert all(by_value.get(v) == o for v, o in acked.items())
        assert [o for o, _ in stored] == list(range(len(stored)))
        assert len(stored) >= 5000 + len(acked)
        assert [n for n in os.listdir(b) if n.startswith("crash")] == ["crash-0"]
        assert all(n.endswith("-delete") for n in os.listdir(a) if n.startswith("crash"))
    finally:
        server.kill()


@pytest.mark.parametrize("point", ["logdir.before_decide", "logdir.after_decide",
                                   "logdir.after_rename"])
def test_kill_9_at_each_step_of_the_swap_keeps_every_acknowledged_record(
        tmp_path: Path, point: str) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    server = _server(tmp_path, env={"ODRADEK_CRASH_AT": point}).start()
    try:
        _create(server.bootstrap, "swap")
        _preload(server.bootstrap, "swap", 2000, 300)
        assert _alter(server.bootstrap, b, "swap", [0]) == {0: 0}
        assert server.proc is not None
        server.proc.wait(30)  # the broker kills itself at the point
        server.kill()
        server = _server(tmp_path).start()
        _wait(lambda: _where(server.bootstrap, "swap", 0) == (b, None), "the move to end")
        stored = _read_all(server.bootstrap, "swap")
        assert [v for _, v in stored] == [b"p%08d" % i + b"-" * 300 for i in range(2000)]
        assert [n for n in os.listdir(b) if n.startswith("swap")] == ["swap-0"]
        # before the decision the move resumed and left its old copy for deletion;
        # after it, start-up removed the old copy
        left = [n for n in os.listdir(a) if n.startswith("swap")]
        assert all(n.endswith("-delete") for n in left)
        assert not left or point == "logdir.before_decide"
    finally:
        server.kill()


def test_a_partition_in_two_directories_stops_the_broker_with_one_line(
        tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    server = _server(tmp_path).start()
    try:
        _create(server.bootstrap, "twice")
        assert server.stop() == 0
        shutil.copytree(a / "twice-0", b / "twice-0")
        with pytest.raises(RuntimeError) as err:
            _server(tmp_path).start()
        lines = str(err.value).split("broker did not start: ", 1)[1].splitlines()
        assert lines == [f"odradek: twice-0 is in two log directories: {a}/twice-0 and "
                         f"{b}/twice-0; keep the one you want (move the other out of "
                         f"log.dirs) and start again"]
    finally:
        server.kill()


def test_serve_log_dirs_flag_formats_and_uses_every_directory(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    proc = subprocess.Popen(
        [*serve_command(), "--log-dirs", f"{a},{b}", "--override",
         "listeners=PLAINTEXT://127.0.0.1:0", "--log-level", "WARNING"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the ready line (or EOF if it failed)
        assert line.startswith("odradek: serving on "), proc.stderr.read() if proc.stderr else ""
        ids = {}
        for d in (a, b):
            props = dict(x.split("=", 1) for x in (d / "meta.properties").read_text()
                         .splitlines() if "=" in x)
            ids[d] = props["directory.id"]
            assert props["node.id"] == "1"
        assert ids[a] != ids[b]
        assert (a / "__cluster_metadata-0").is_dir() and not (b / "__cluster_metadata-0").exists()
    finally:
        proc.terminate()
        proc.wait(20)
