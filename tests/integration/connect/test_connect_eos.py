"""Exactly-once source tasks (KIP-618) against a real broker: transaction
boundaries seen through the transaction markers' offsets, zombie fencing,
``exactly.once.support=required`` refused, and a FileStream source whose
worker process is killed with SIGKILL again and again writing every line once."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from odradek.connect.runtime.config import WorkerConfig
from odradek.connect.runtime.eos import (
    ExactlyOnceSourceRunner,
    offsets_topic,
    transactional_id,
)
from odradek.connect.runtime.tasks import FAILED, RUNNING
from odradek.connect.runtime.worker import StandaloneWorker
from odradek.testing.broker import Broker
from tests.integration.connect.eos_plugins import CounterTask
from tests.integration.connect.support import (
    WorkerProcess,
    call,
    running,
    state,
    wait_for,
    worker_props,
    write_properties,
)
from tests.integration.connect.test_connect_cli import _one_line_error, _run

COUNTER = "tests.integration.connect.eos_plugins.CounterSource"
UNDECLARED = "tests.integration.connect.eos_plugins.UndeclaredSource"
EOS = {"exactly.once.source.support": "enabled", "offset.storage.replication.factor": "1",
       "offset.storage.partitions": "3"}


@dataclass
class Eos:
    broker: Broker
    worker: StandaloneWorker
    url: str
    tmp: Path


@pytest.fixture
def eos(tmp_path: Path) -> Iterator[Eos]:
    with Broker() as broker:
        worker = StandaloneWorker(worker_props(broker.bootstrap_servers, tmp_path, **EOS))
        url = worker.start_in_thread()
        try:
            yield Eos(broker, worker, url, tmp_path)
        finally:
            worker.stop_thread()


class Reader:
    """A ``read_committed`` consumer of partition 0 of ``topic``: (offset, value) pairs."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-check",
                                  "isolation.level": "read_committed",
                                  "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.got: list[tuple[int, str]] = []
        self.stamps: list[int] = []  # the records' timestamps (ms)

    def read(self) -> list[tuple[int, str]]:
        for m in self.consumer.consume(1000, timeout=0.2):
            if m.error() is None:
                self.got.append((m.offset() or 0, (m.value() or b"").decode()))
                self.stamps.append(m.timestamp()[1])
        return self.got

    def until(self, what: str, n: int, timeout: float = 60) -> list[tuple[int, str]]:
        return wait_for(what, lambda: len(self.read()) >= n and self.got, timeout)

    def close(self) -> None:
        self.consumer.close()


def runs(got: list[tuple[int, str]]) -> list[int]:
    """Sizes of the runs of consecutive offsets: each transaction's records are
    consecutive and its commit marker takes the next offset."""
    sizes: list[int] = []
    prev = -2
    for offset, _ in got:
        if offset == prev + 1:
            sizes[-1] += 1
        else:
            sizes.append(1)
        prev = offset
    return sizes


def _create(url: str, name: str, config: dict[str, str]) -> None:
    status, body = call("POST", url + "/connectors", {"name": name, "config": config})
    assert status == 201, body
    wait_for(f"{name} running", lambda: running(url, name))


# -- transaction boundaries ---------------------------------------------------

def test_poll_boundary_commits_each_batch(eos: Eos) -> None:
    eos.broker.create_topic("nums", partitions=1)
    reader = Reader(eos.broker.bootstrap_servers, "nums")
    try:
        _create(eos.url, "c", {"connector.class": COUNTER, "topic": "nums", "batch": "3",
                               "count": "30"})
        got = reader.until("30 numbers", 30)
    finally:
        reader.close()
    assert [v for _, v in got] == [str(i) for i in range(30)]
    assert runs(got) == [3] * 10


def test_connector_boundary_commits_where_the_task_says(eos: Eos) -> None:
    eos.broker.create_topic("nums", partitions=1)
    reader = Reader(eos.broker.bootstrap_servers, "nums")
    try:
        _create(eos.url, "c", {"connector.class": COUNTER, "topic": "nums", "batch": "4",
                               "count": "35", "commit.every": "7",
                               "transaction.boundary": "connector"})
        got = reader.until("35 numbers", 35)
    finally:
        reader.close()
    assert [v for _, v in got] == [str(i) for i in range(35)]
    assert runs(got) == [7] * 5  # batches of 4 split where the task asked


def test_interval_boundary_groups_many_polls(eos: Eos) -> None:
    eos.broker.create_topic("nums", partitions=1)
    reader = Reader(eos.broker.bootstrap_servers, "nums")
    interval_ms = 400
    try:
        _create(eos.url, "c", {"connector.class": COUNTER, "topic": "nums", "batch": "1",
                               "delay.ms": "10", "count": "150",
                               "transaction.boundary": "interval",
                               "transaction.boundary.interval.ms": str(interval_ms)})
        got = reader.until("150 numbers", 150)
    finally:
        reader.close()
    assert [v for _, v in got] == [str(i) for i in range(150)]
    sizes = runs(got)
    # one record per poll: a transaction holds many polls, and a new one starts
    # only once the interval has passed since the last commit
    assert len(sizes) >= 2 and max(sizes) > 1, sizes
    span_ms = reader.stamps[-1] - reader.stamps[0]
    assert (len(sizes) - 1) * interval_ms <= span_ms + 100, (sizes, span_ms)


def test_stop_commits_the_open_transaction(eos: Eos) -> None:
    eos.broker.create_topic("nums", partitions=1)
    _create(eos.url, "c", {"connector.class": COUNTER, "topic": "nums", "batch": "1",
                           "count": "7", "transaction.boundary": "interval",
                           "transaction.boundary.interval.ms": "30000"})
    uncommitted = Consumer({"bootstrap.servers": eos.broker.bootstrap_servers,
                            "group.id": "eos-peek", "isolation.level": "read_uncommitted"})
    uncommitted.assign([TopicPartition("nums", 0, 0)])
    peeked: list[bytes | None] = []

    def peek() -> bool:
        peeked.extend(m.value() for m in uncommitted.consume(100, timeout=0.2)
                      if m.error() is None)
        return len(peeked) >= 7
    try:
        wait_for("7 records produced in the open transaction", peek)
    finally:
        uncommitted.close()
    reader = Reader(eos.broker.bootstrap_servers, "nums")
    try:
        assert reader.read() == []  # not committed yet (the interval is 30 s)
        assert call("DELETE", f"{eos.url}/connectors/c")[0] == 204
        got = reader.until("the 7 records committed by the stop", 7, timeout=30)
    finally:
        reader.close()
    assert [v for _, v in got] == [str(i) for i in range(7)] and runs(got) == [7]


def test_a_failed_produce_aborts_and_fails_the_task(eos: Eos) -> None:
    eos.broker.create_topic("nums", partitions=1)
    status, body = call("POST", eos.url + "/connectors", {"name": "c", "config": {
        "connector.class": COUNTER, "topic": "nums", "batch": "3", "count": "9",
        "big.at": "5"}})
    assert status == 201, body
    wait_for("the task FAILED", lambda: state(eos.url, "c")[1] == ["FAILED"])
    status, body = call("GET", f"{eos.url}/connectors/c/tasks/0/status")
    assert "too large" in body["trace"].lower() or "size" in body["trace"].lower(), body
    reader = Reader(eos.broker.bootstrap_servers, "nums")
    try:  # 3 and 4 were in the aborted transaction: never visible
        got = reader.until("the first transaction", 3)
        assert [v for _, v in reader.read()] == ["0", "1", "2"]
    finally:
        reader.close()
    assert [v for _, v in got] == ["0", "1", "2"]


def test_offsets_committed_with_the_records(eos: Eos) -> None:
    eos.broker.create_topic("nums", partitions=1)
    reader = Reader(eos.broker.bootstrap_servers, "nums")
    try:
        _create(eos.url, "c", {"connector.class": COUNTER, "topic": "nums", "batch": "5",
                               "count": "20"})
        reader.until("20 numbers", 20)
    finally:
        reader.close()

    def offsets() -> object:
        status, body = call("GET", f"{eos.url}/connectors/c/offsets")
        return status == 200 and body["offsets"] == [
            {"partition": {"counter": "c"}, "offset": {"next": 20}}]
    eos.worker.offsets.refresh()  # type: ignore[union-attr]
    wait_for("offset next=20 in the offsets topic", offsets)


def test_skipped_records_still_move_offsets(eos: Eos) -> None:
    eos.broker.create_topic("nums", partitions=1)
    # ExtractField on a string value fails; errors.tolerance=all skips every record
    _create(eos.url, "c", {"connector.class": COUNTER, "topic": "nums", "batch": "5",
                           "count": "20", "errors.tolerance": "all", "transforms": "x",
                           "transforms.x.type":
                               "org.apache.kafka.connect.transforms.ExtractField$Value",
                           "transforms.x.field": "a"})

    def offsets() -> object:
        status, body = call("GET", f"{eos.url}/connectors/c/offsets")
        return status == 200 and body["offsets"] == [
            {"partition": {"counter": "c"}, "offset": {"next": 20}}]
    wait_for("offset next=20 in the offsets topic", offsets)
    reader = Reader(eos.broker.bootstrap_servers, "nums")
    try:  # nothing at all was written to the topic (not even a marker)
        assert reader.consumer.get_watermark_offsets(
            TopicPartition("nums", 0), timeout=10, cached=False) == (0, 0)
    finally:
        reader.close()


def test_a_connector_offsets_topic_is_read_first_then_the_workers(eos: Eos) -> None:
    eos.broker.create_topic("nums", partitions=1)
    eos.broker.create_topic("c-offsets", partitions=1, configs={"cleanup.policy": "compact"})
    store = eos.worker.topic_offsets
    assert store is not None
    store.put("c", [({"counter": "c"}, {"next": 10})])  # e.g. from before the connector moved
    reader = Reader(eos.broker.bootstrap_servers, "nums")
    try:
        _create(eos.url, "c", {"connector.class": COUNTER, "topic": "nums", "batch": "5",
                               "count": "20", "offsets.storage.topic": "c-offsets"})
        got = reader.until("numbers 10 to 19", 10)
    finally:
        reader.close()
    assert [v for _, v in got] == [str(i) for i in range(10, 20)]
    own = Reader(eos.broker.bootstrap_servers, "c-offsets")
    try:
        wait_for("offsets in the connector's topic", lambda: any(
            v == '{"next":20}' for _, v in own.read()) or None, timeout=30)
    finally:
        own.close()
    assert store.get("c", {"counter": "c"}) == {"next": 10}  # the worker's is untouched


def test_topic_creation_with_exactly_once(eos: Eos) -> None:
    reader = Reader(eos.broker.bootstrap_servers, "made")
    try:
        _create(eos.url, "c", {"connector.class": COUNTER, "topic": "made", "batch": "2",
                               "count": "4", "topic.creation.default.partitions": "3",
                               "topic.creation.default.replication.factor": "1"})
        got = reader.until("4 numbers", 4)
    finally:
        reader.close()
    assert [v for _, v in got] == ["0", "1", "2", "3"]  # every record goes to partition 0
    admin = AdminClient({"bootstrap.servers": eos.broker.bootstrap_servers})
    assert len(admin.list_topics("made", timeout=10).topics["made"].partitions) == 3


# -- validation -----------------------------------------------------------------

def test_required_refused_when_the_connector_does_not_declare_support(eos: Eos) -> None:
    config = {"connector.class": UNDECLARED, "topic": "nums", "exactly.once.support": "required"}
    status, body = call("POST", eos.url + "/connectors", {"name": "u", "config": config})
    assert status == 400, body
    assert "exactly.once.support" in body["message"]
    status, body = call("PUT", f"{eos.url}/connector-plugins/{UNDECLARED}/config/validate",
                        {**config, "name": "u"})
    assert status == 200, body
    errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]}
    assert errors["exactly.once.support"] and "does not declare" in errors[
        "exactly.once.support"][0]
    status, body = call("PUT", f"{eos.url}/connector-plugins/{UNDECLARED}/config/validate",
                        {**config, "name": "u", "exactly.once.support": "requested",
                         "transaction.boundary": "connector"})
    errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]}
    assert errors["exactly.once.support"] == [] and errors["transaction.boundary"]
    status, body = call("POST", eos.url + "/connectors", {"name": "d", "config": {
        **config, "connector.class": COUNTER}})
    assert status == 201, body


# -- fencing ------------------------------------------------------------------------

def test_a_second_runner_of_the_task_fences_the_first(tmp_path: Path) -> None:
    with Broker() as broker:
        broker.create_topic("nums", partitions=1)
        worker = WorkerConfig.parse(worker_props(broker.bootstrap_servers, tmp_path, **EOS))
        store = offsets_topic(worker)
        store.start()
        config = {"name": "c", "connector.class": COUNTER, "topic": "nums", "batch": "2",
                  "delay.ms": "20"}

        def runner() -> ExactlyOnceSourceRunner:
            r = ExactlyOnceSourceRunner("c", 0, CounterTask, config, config, worker,
                                        lambda _t: None)
            r.offsets = store
            return r

        reader = Reader(broker.bootstrap_servers, "nums")
        first, second = runner(), runner()
        try:
            first.start()
            reader.until("the first runner's records", 10)
            second.start()
            wait_for("the first runner fenced", lambda: first.state == FAILED, timeout=30)
            assert first.trace is not None and "fenc" in first.trace.lower(), first.trace
            wait_for("the second running", lambda: second.state == RUNNING)
            seen = len(reader.read())
            reader.until("the second runner's records", seen + 10)
            second.stop()
            got = [v for _, v in reader.read()]
        finally:
            first.stop()
            second.stop()
            reader.close()
            store.stop()
    # the zombie's open transaction was aborted: every number exactly once, in order
    assert got == [str(i) for i in range(len(got))]
    assert transactional_id(worker.props, "c", 0) == "connect-standalone-c-0"


# -- kill -9 --------------------------------------------------------------------------

def _lines(start: int, n: int) -> str:
    return "".join(f"line {i}\n" for i in range(start, start + n))


@pytest.mark.slow
@pytest.mark.parametrize("exactly_once", [True, False], ids=["eos", "at-least-once"])
def test_filestream_across_repeated_kill_9(tmp_path: Path, exactly_once: bool) -> None:
    source = tmp_path / "in.txt"
    source.write_text(_lines(0, 20000), encoding="utf-8")
    total = 20000
    with Broker() as broker:
        broker.create_topic("lines", partitions=1)
        props = worker_props(broker.bootstrap_servers, tmp_path, **(EOS if exactly_once else {}))
        worker = write_properties(tmp_path / "worker.properties", props)
        src = write_properties(tmp_path / "src.properties", {
            "name": "src", "connector.class": "FileStreamSource", "file": str(source),
            "topic": "lines", "batch.size": "100"})
        reader = Reader(broker.bootstrap_servers, "lines")
        try:
            for _ in range(3):
                proc = WorkerProcess(worker, [src])
                try:
                    seen = len(reader.read())
                    reader.until("more lines", seen + 1000)
                finally:
                    proc.kill()
                with source.open("a", encoding="utf-8") as f:
                    f.write(_lines(total, 5000))
                total += 5000
            proc = WorkerProcess(worker, [src])
            try:
                want = [f"line {i}" for i in range(total)]
                wait_for("every line", lambda: set(want) <= {v for _, v in reader.read()},
                         timeout=120)
            finally:
                assert proc.terminate() == 0
            got = [v for _, v in reader.read()]
        finally:
            reader.close()
    if exactly_once:
        assert got == want
    else:
        assert set(want) <= set(got)


def test_an_unusable_offsets_topic_is_one_line(tmp_path: Path) -> None:
    with Broker() as broker:
        props = worker_props(broker.bootstrap_servers, tmp_path, **EOS)
        props.pop("offset.storage.file.filename")  # not needed with exactly-once on
        three = write_properties(tmp_path / "w.properties", {
            **props, "offset.storage.replication.factor": "3"})
        _one_line_error(_run(str(three)), "connect-offsets")
        broker.create_topic("deleting", partitions=1, configs={"cleanup.policy": "delete"})
        deleting = write_properties(tmp_path / "d.properties", {
            **props, "offset.storage.topic": "deleting"})
        _one_line_error(_run(str(deleting)), "deleting", "compact")
