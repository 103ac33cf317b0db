"""The real ``odradek`` executable against a real broker: every subcommand that
talks to a broker, its ``--json`` output parsed back, and its errors (one line,
non-zero exit, no traceback)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.testing.broker import Broker


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(num_partitions="1") as b:
        yield b


def odradek(
    broker: Broker | None, *args: str, stdin: str | None = None, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "odradek", *args]
    if broker is not None:
        cmd += ["--bootstrap-server", broker.bootstrap_servers]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def fails(broker: Broker | None, *args: str, stdin_text: str | None = None) -> str:
    proc = odradek(broker, *args, stdin=stdin_text, ok=False)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_topics_lifecycle(broker: Broker) -> None:
    odradek(broker, "topics", "create", "cli-t", "--partitions", "3",
            "--config", "retention.ms=60000")
    assert "cli-t" in json.loads(odradek(broker, "topics", "list", "--json").stdout)
    (desc,) = json.loads(odradek(broker, "topics", "describe", "cli-t", "--json").stdout)
    assert [p["partition"] for p in desc["partitions"]] == [0, 1, 2]
    assert desc["configs"] == {"retention.ms": "60000"}
    table = odradek(broker, "topics", "describe", "cli-t").stdout
    assert "PartitionCount: 3" in table and "retention.ms=60000" in table
    odradek(broker, "topics", "alter", "cli-t", "--partitions", "4",
            "--config", "cleanup.policy=compact", "--delete-config", "retention.ms")
    (desc,) = json.loads(odradek(broker, "topics", "describe", "cli-t", "--json").stdout)
    assert len(desc["partitions"]) == 4 and desc["configs"] == {"cleanup.policy": "compact"}
    odradek(broker, "topics", "delete", "cli-t")
    assert "cli-t" not in json.loads(odradek(broker, "topics", "list", "--json").stdout)


def test_topic_errors_are_one_line(broker: Broker) -> None:
    odradek(broker, "topics", "create", "cli-dup")
    assert "TOPIC_ALREADY_EXISTS" in fails(broker, "topics", "create", "cli-dup")
    assert "UNKNOWN_TOPIC_OR_PARTITION" in fails(broker, "topics", "describe", "cli-none")
    assert "INVALID_TOPIC_EXCEPTION" in fails(broker, "topics", "create", "bad name!")
    assert "KEY=VALUE" in fails(broker, "topics", "create", "cli-x", "--config", "novalue")
    assert "nothing to alter" in fails(broker, "topics", "alter", "cli-dup")


def test_unreachable_broker_and_bad_arguments() -> None:
    line = fails(None, "topics", "list", "--bootstrap-server", "127.0.0.1:1")
    assert line.startswith("odradek: cannot reach broker at 127.0.0.1:1")
    assert "HOST:PORT" in fails(None, "topics", "list", "--bootstrap-server", "nonsense")
    proc = odradek(None, "topics", "frobnicate", ok=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_produce_then_consume_with_keys_headers_and_compression(broker: Broker) -> None:
    odradek(broker, "topics", "create", "cli-pc", "--partitions", "3")
    lines = "".join(f"key{i}:value {i}\n" for i in range(50))
    out = odradek(broker, "produce", "cli-pc", "--key-separator", ":", "--header", "src=cli",
                  "--compression", "zstd", "--json", stdin=lines).stdout
    assert json.loads(out)["records"] == 50
    got = odradek(broker, "consume", "cli-pc", "--from-beginning", "--max-messages", "50",
                  "--format", "json").stdout.splitlines()
    records = [json.loads(line) for line in got]
    assert sorted(r["value"] for r in records) == sorted(f"value {i}" for i in range(50))
    assert all(r["headers"] == {"src": "cli"} for r in records)
    # Keys are placed by Kafka's partitioner: confluent-kafka (murmur2_random for
    # keyed records in Java-compatible mode) agrees on every key.
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                         "partitioner": "murmur2_random"})
    placed: dict[str, int] = {}
    for r in records[:10]:
        producer.produce("cli-pc", b"x", key=r["key"].encode(),
                         on_delivery=lambda err, msg: placed.__setitem__(
                             msg.key().decode(), msg.partition()))
    producer.flush(10)
    assert placed == {r["key"]: r["partition"] for r in records[:10]}


def test_a_refused_produce_creates_no_topic(broker: Broker) -> None:
    line = fails(broker, "produce", "cli-absent", "--partition", "7", stdin_text="x\n")
    assert "does not exist" in line and "--partitions 8" in line
    topics = json.loads(odradek(broker, "topics", "list", "--json").stdout)
    assert "cli-absent" not in topics


def test_produce_acks_0_returns_once_the_bytes_are_sent(broker: Broker) -> None:
    """The broker (correctly) answers no acks=0 Produce; the CLI used to wait for
    that answer forever."""
    started = time.monotonic()
    proc = odradek(broker, "produce", "cli-acks0", "--acks", "0",
                   stdin="\n".join(f"r{i}" for i in range(100)) + "\n")
    assert time.monotonic() - started < 15
    assert "Produced 100 records" in proc.stderr
    out = odradek(broker, "consume", "cli-acks0", "--from-beginning", "--max-messages", "100",
                  "--timeout-ms", "10000").stdout.splitlines()
    assert out == [f"r{i}" for i in range(100)]


def test_consume_formats_offsets_and_timeout(broker: Broker) -> None:
    odradek(broker, "topics", "create", "cli-fmt")
    odradek(broker, "produce", "cli-fmt", "--key-separator", "=", stdin="a=1\nb=2\nc=3\n")
    kv = odradek(broker, "consume", "cli-fmt", "--from-beginning", "--max-messages", "3",
                 "--format", "key-value").stdout
    assert kv.splitlines() == ["a\t1", "b\t2", "c\t3"]
    tail = odradek(broker, "consume", "cli-fmt", "--partition", "0", "--offset", "1",
                   "--max-messages", "2").stdout
    assert tail.splitlines() == ["2", "3"]
    proc = odradek(broker, "consume", "cli-fmt", "--timeout-ms", "300")  # from the end
    assert proc.stdout == "" and "Processed 0 messages" in proc.stderr
    assert "--offset needs --partition" in fails(broker, "consume", "cli-fmt", "--offset", "1")
    assert "line 2 has no key separator" in fails(broker, "produce", "cli-fmt",
                                                  "--key-separator", "=", stdin_text="a=1\nb\n")


def test_consume_isolation_level(broker: Broker) -> None:
    """read_committed prints committed transactions' records only and stops at
    the last stable offset (an open transaction); read_uncommitted prints them
    all and says aborted records were among them."""
    odradek(broker, "topics", "create", "cli-iso")
    conf = {"bootstrap.servers": broker.bootstrap_servers}
    txn = Producer({**conf, "transactional.id": "cli-iso"})
    txn.init_transactions(10)
    for values, commit in ((["c1", "c2"], True), (["a1"], False), (["c3"], True), (["o1"], None)):
        txn.begin_transaction()
        for v in values:
            txn.produce("cli-iso", v.encode())
        txn.flush(10)
        if commit is True:
            txn.commit_transaction(10)
        elif commit is False:
            txn.abort_transaction(10)
    plain = Producer(conf)
    plain.produce("cli-iso", b"n1")
    plain.flush(10)
    plain.close()
    read = odradek(broker, "consume", "cli-iso", "--from-beginning", "--timeout-ms", "1000",
                   "--isolation-level", "read_committed")
    assert read.stdout.splitlines() == ["c1", "c2", "c3"]  # o1 open: n1 is past the LSO
    assert "aborted" not in read.stderr
    read = odradek(broker, "consume", "cli-iso", "--from-beginning", "--timeout-ms", "1000")
    assert read.stdout.splitlines() == ["c1", "c2", "a1", "c3", "o1", "n1"]
    assert "include aborted transactions" in read.stderr
    txn.commit_transaction(10)
    txn.close()
    read = odradek(broker, "consume", "cli-iso", "--from-beginning", "--timeout-ms", "1000",
                   "--isolation-level", "read_committed")
    assert read.stdout.splitlines() == ["c1", "c2", "c3", "o1", "n1"]
    assert "invalid choice" in fails(broker, "consume", "cli-iso", "--isolation-level", "dirty")


def test_produce_from_a_file_with_progress(broker: Broker, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "lines.txt"
    path.write_text("".join(f"line {i}\n" for i in range(2000)))
    proc = odradek(broker, "produce", "cli-file", "--file", str(path), "--progress",
                   "--batch-records", "300")
    assert "100.0%" in proc.stderr and "Produced 2000 records" in proc.stderr
    got = odradek(broker, "consume", "cli-file", "--from-beginning", "--max-messages",
                  "2000").stdout.splitlines()
    assert got == [f"line {i}" for i in range(2000)]
    assert "cannot read" in fails(broker, "produce", "cli-file", "--file", "/nonexistent")
    assert "no partition 9" in fails(broker, "produce", "cli-file", "--partition", "9",
                                     "--file", str(path))


def test_a_failed_produce_says_how_far_it_got(broker: Broker, tmp_path: Path) -> None:
    """5,000 lines, one line larger than the topic takes, 5,000 more: the run
    stops at that line with the 5,000 before it acknowledged and says so."""
    odradek(broker, "topics", "create", "cli-half")
    path = tmp_path / "half-bad.txt"
    with path.open("w") as f:
        f.writelines(f"a{i}\n" for i in range(5000))
        f.write("x" * 1_100_000 + "\n")
        f.writelines(f"b{i}\n" for i in range(5000))
    line = fails(broker, "produce", "cli-half", "--file", str(path))
    assert "line 5001" in line and "too large" in line and "max.message.bytes" in line, line
    assert "5000 records were acknowledged" in line and "resume from line 5001" in line, line
    got = odradek(broker, "consume", "cli-half", "--from-beginning", "--timeout-ms",
                  "1000").stdout.splitlines()
    assert got == [f"a{i}" for i in range(5000)]
    # A refusal by the broker (acks=all with too few in-sync replicas) is reported the same way.
    odradek(broker, "topics", "create", "cli-isr", "--config", "min.insync.replicas=2")
    line = fails(broker, "produce", "cli-isr", stdin_text="one\ntwo\n")
    assert "NOT_ENOUGH_REPLICAS" in line and "0 records were acknowledged" in line, line
    assert "resume from line 1" in line


def test_produce_sizes_its_batches_to_the_topic(broker: Broker) -> None:
    """A topic with a small max.message.bytes takes the CLI's records in
    batches that fit it (the default 1,000-record batch would be refused)."""
    odradek(broker, "topics", "create", "cli-small", "--config", "max.message.bytes=2000")
    values = [f"{i:04d}" + "v" * 96 for i in range(300)]
    done = odradek(broker, "produce", "cli-small", stdin="\n".join(values) + "\n")
    assert "Produced 300 records" in done.stderr
    got = odradek(broker, "consume", "cli-small", "--from-beginning", "--max-messages",
                  "300").stdout.splitlines()
    assert got == values


def test_two_group_members_split_a_topic_and_commit_on_sigterm(broker: Broker) -> None:
    """Two ``consume --group`` processes share a 2-partition topic (one
    partition each, from the coordinator's assignment), and SIGTERM makes each
    commit what it printed: the group's committed offsets are where the two
    stopped, and the records they printed are every record once."""
    odradek(broker, "topics", "create", "cli-share", "--partitions", "2")
    conf = {"bootstrap.servers": broker.bootstrap_servers}
    p = Producer(conf)
    for i in range(200):
        p.produce("cli-share", f"r{i}".encode(), partition=i % 2)
    p.flush(10)
    cmd = [sys.executable, "-m", "odradek", "consume", "cli-share", "--group", "cli-share-g",
           "--from-beginning", "--format", "json", "--bootstrap-server",
           broker.bootstrap_servers]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    try:
        def owners() -> dict[int, str | None]:
            got = json.loads(odradek(broker, "groups", "describe", "cli-share-g",
                                     "--json", ok=False).stdout or "{}")
            return {r["partition"]: r["consumer_id"] for r in got.get("partitions", [])}
        deadline = time.monotonic() + 30
        while True:  # both members in, each with one partition of its own
            own = owners()
            if len(own) == 2 and None not in own.values() and len(set(own.values())) == 2:
                break
            assert time.monotonic() < deadline, own
            time.sleep(0.3)
        for i in range(200, 260):  # more records while both are members
            p.produce("cli-share", f"r{i}".encode(), partition=i % 2)
        p.flush(10)
        time.sleep(1.0)  # (only so that there is something left to print; not asserted on)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        outs = [proc.communicate(timeout=30) for proc in procs]
        p.close()
    printed: list[tuple[int, int]] = []
    late: list[set[int]] = []  # the partitions of the records written once both were in
    for (stdout, stderr), proc in zip(outs, procs, strict=True):
        assert proc.returncode == 0, stderr
        assert "Traceback" not in stderr and "Processed" in stderr
        rows = [json.loads(line) for line in stdout.splitlines()]
        printed += [(r["partition"], r["offset"]) for r in rows]
        late.append({r["partition"] for r in rows if r["offset"] >= 100})
    assert sorted(late, key=sorted) == [{0}, {1}]  # one partition each
    assert len(printed) == len(set(printed))
    assert sorted(printed) == sorted((i % 2, i // 2) for i in range(260))
    lag = json.loads(odradek(broker, "groups", "describe", "cli-share-g", "--json").stdout)
    committed = {row["partition"]: row["current_offset"] for row in lag["partitions"]}
    assert committed == {0: 130, 1: 130}
    assert lag["members"] == 0  # both left the group


def test_groups_describe_lag_reset_and_delete(broker: Broker) -> None:
    odradek(broker, "topics", "create", "cli-g", "--partitions", "2")
    odradek(broker, "produce", "cli-g", "--partition", "0", stdin="a\nb\nc\nd\n")
    odradek(broker, "produce", "cli-g", "--partition", "1", stdin="e\nf\n")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "cli-grp",
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("cli-g", 0, 1), TopicPartition("cli-g", 1, 2)],
                    asynchronous=False)
    consumer.close()
    groups = json.loads(odradek(broker, "groups", "list", "--json").stdout)
    assert {"group": "cli-grp", "protocol_type": "", "state": "Empty"} in groups
    desc = json.loads(odradek(broker, "groups", "describe", "cli-grp", "--json").stdout)
    lag = {(r["topic"], r["partition"]): (r["current_offset"], r["log_end_offset"], r["lag"])
           for r in desc["partitions"]}
    assert lag == {("cli-g", 0): (1, 4, 3), ("cli-g", 1): (2, 2, 0)}
    assert "LAG" in odradek(broker, "groups", "describe", "cli-grp").stdout
    plan = json.loads(odradek(broker, "groups", "reset-offsets", "cli-grp", "--topic", "cli-g",
                              "--shift-by", "5", "--json").stdout)
    assert plan["offsets"] == {"0": 4, "1": 2} and not plan["executed"]
    odradek(broker, "groups", "reset-offsets", "cli-grp", "--topic", "cli-g", "--to-earliest",
            "--execute")
    desc = json.loads(odradek(broker, "groups", "describe", "cli-grp", "--json").stdout)
    assert [r["current_offset"] for r in desc["partitions"]] == [0, 0]
    resumed = odradek(broker, "consume", "cli-g", "--group", "cli-grp", "--partition", "1",
                      "--max-messages", "2").stdout
    assert resumed.splitlines() == ["e", "f"]
    odradek(broker, "groups", "delete", "cli-grp")
    assert "does not exist" in fails(broker, "groups", "describe", "cli-grp")
    assert "GROUP_ID_NOT_FOUND" in fails(broker, "groups", "delete", "cli-grp")


def test_groups_describe_shows_members_of_an_active_group(broker: Broker) -> None:
    odradek(broker, "topics", "create", "cli-active", "--partitions", "2")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                         "group.id": "cli-active-g", "client.id": "the-client"})
    consumer.subscribe(["cli-active"])
    try:
        for _ in range(100):
            consumer.poll(0.1)
            if len(consumer.assignment()) == 2:
                break
        desc = json.loads(odradek(broker, "groups", "describe", "cli-active-g",
                                  "--json").stdout)
        assert desc["state"] == "Stable" and desc["members"] == 1
        assert {r["client_id"] for r in desc["partitions"]} == {"the-client"}
        assert "NON_EMPTY_GROUP" in fails(broker, "groups", "delete", "cli-active-g")
    finally:
        consumer.close()


def test_cluster_describe(broker: Broker) -> None:
    desc = json.loads(odradek(broker, "cluster", "describe", "--json").stdout)
    port = int(broker.bootstrap_servers.rsplit(":", 1)[1])
    assert desc["controller"] == 1 and desc["brokers"] == [
        {"id": 1, "host": "127.0.0.1", "port": port, "rack": None}
    ]
    assert "Cluster id:" in odradek(broker, "cluster", "describe").stdout


def test_topics_describe_shows_the_cleaner_state_of_compacted_topics(tmp_path: Path) -> None:
    """First dirty offset and dirty ratio per partition, read from the broker's log
    directory (DescribeLogDirs names it): before any pass (the log start, every
    inactive segment dirty) and after one (the checkpoint, nothing dirty)."""
    compact = {"cleanup.policy": "compact", "segment.ms": "100",
               "min.cleanable.dirty.ratio": "0.01"}
    with Broker(**{"log.cleaner.backoff.ms": "50"}) as b:
        b.create_topic("waiting", 1, {**compact, "min.compaction.lag.ms": "3600000"})
        b.create_topic("cleaned", 1, compact)
        b.create_topic("plain", 1)
        producer = Producer({"bootstrap.servers": b.bootstrap_servers})
        for rnd in range(3):  # a segment a round
            for topic in ("waiting", "cleaned"):
                for k in range(5):
                    producer.produce(topic, f"v{rnd}".encode(), key=f"k{k}".encode())
            producer.flush(10)
            time.sleep(0.11)
        deadline = time.monotonic() + 30
        while True:
            described = json.loads(odradek(b, "topics", "describe", "--json").stdout)
            by_name = {d["topic"]: d["partitions"][0] for d in described}
            if by_name["cleaned"]["cleaner"]["checkpointed"]:
                break
            assert time.monotonic() < deadline, by_name
            time.sleep(0.1)
        assert "cleaner" not in by_name["plain"]
        waiting = by_name["waiting"]["cleaner"]
        assert (waiting["first_dirty_offset"], waiting["checkpointed"],
                waiting["dirty_ratio"]) == (0, False, 1.0)
        assert waiting["dirty_bytes"] == waiting["inactive_bytes"] > 0
        cleaned = by_name["cleaned"]["cleaner"]
        assert cleaned["first_dirty_offset"] == 10 and cleaned["dirty_ratio"] == 0.0
        text = odradek(b, "topics", "describe", "waiting", "cleaned").stdout
        assert "FirstDirtyOffset  DirtyRatio" in text and "1.00" in text and "0.00" in text
        assert "cleaner state not shown" not in text
        plain = odradek(b, "topics", "describe", "plain").stdout
        assert "DirtyRatio" not in plain
        # Another directory (as on a machine that is not the broker's): said, not guessed.
        (tmp_path / "waiting-0").mkdir()
        (tmp_path / "waiting-0" / "partition.metadata").write_text(
            "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA")
        (elsewhere,) = json.loads(odradek(b, "topics", "describe", "waiting", "--json",
                                          "--log-dir", str(tmp_path)).stdout)
        assert elsewhere["partitions"][0]["cleaner"] is None
        text = odradek(b, "topics", "describe", "waiting", "--log-dir", str(tmp_path)).stdout
        assert "cleaner state not shown" in text


def test_groups_describe_shows_a_consumer_protocol_group(broker: Broker) -> None:
    odradek(broker, "topics", "create", "cli-848", "--partitions", "2")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                         "group.id": "cli-848-g", "client.id": "the-848-client",
                         "group.protocol": "consumer"})
    consumer.subscribe(["cli-848"])
    try:
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) != 2:
            assert time.monotonic() < deadline, "no assignment"
            consumer.poll(0.1)
        desc = json.loads(odradek(broker, "groups", "describe", "cli-848-g",
                                  "--json").stdout)
        assert desc["state"] == "Stable" and desc["members"] == 1
        assert desc["protocol"] == "uniform"
        assert {(r["partition"], r["client_id"]) for r in desc["partitions"]} == {
            (0, "the-848-client"), (1, "the-848-client")}
    finally:
        consumer.close()
