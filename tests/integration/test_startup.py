"""``odradek serve`` imports only what serving needs at once.

A subprocess runs the CLI's ``main(["serve", ...])`` with ``print`` wrapped:
when the broker prints its ``serving on`` line (it listens by then), the
wrapper writes the names in ``sys.modules`` as JSON to stdout and exits. The
test then checks what is not there: the other subcommands and the client
they use, the cluster-only machinery (Raft, replica fetchers, ISR changes),
Spark, and the handler modules and generated messages of every API but
ApiVersions, which are imported on the first request of their API. A second
test serves those first requests through a real client. No timing asserts:
``benchmarks/startup_bench.py`` measures the start-up time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support.process import ServerProcess

PROBE = """
import builtins, json, os, sys
from odradek.cli.main import main

_print = builtins.print

def probe(*args, **kwargs):
    if args and str(args[0]).startswith("odradek: serving on"):
        _print(json.dumps(sorted(sys.modules)), flush=True)
        os._exit(0)
    _print(*args, **kwargs)

builtins.print = probe
sys.exit(main(sys.argv[1:]))
"""

NOT_AT_START = (
    "odradek.cli.topics", "odradek.cli.produce", "odradek.cli.consume", "odradek.cli.groups",
    "odradek.cli.dev", "odradek.cli.storage", "odradek.cli.metadata", "odradek.cli.leaders",
    "odradek.client",
    "odradek.raft", "odradek.broker.control.quorum_driver", "odradek.broker.replica.fetchers",
    "odradek.broker.replica.isr", "odradek.broker.control.sessions",
    "odradek.broker.control.broker_channel",
    "odradek.spark", "pyspark", "odradek.testing",
    "odradek.broker.handlers.k00_produce", "odradek.broker.handlers.k01_fetch",
    "odradek.broker.handlers.k03_metadata", "odradek.broker.handlers.k19_create_topics",
    "odradek.wire.messages.produce_request", "odradek.wire.messages.fetch_response",
    "odradek.wire.messages.metadata_response",
    "odradek.wire.internal.share_group_metadata_value",
    "odradek.wire.internal.user_scram_credential_record",
)


def modules_when_serving(data_dir: Path) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, "serve",
         "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={data_dir}", "--log-level", "WARNING"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.splitlines()[-1]))


def test_serve_imports_no_more_than_serving_needs(tmp_path: Path) -> None:
    for data_dir in (tmp_path / "fresh", tmp_path / "fresh"):  # formatted, then existing
        loaded = modules_when_serving(data_dir)
        assert "odradek.broker.net.server" in loaded  # the probe saw a listening broker
        assert "odradek.broker.handlers.k18_api_versions" in loaded
        early = sorted(m for m in loaded
                       if any(m == n or m.startswith(n + ".") for n in NOT_AT_START))
        assert early == []
        handlers = {m for m in loaded if m.startswith("odradek.broker.handlers.k")}
        assert handlers == {"odradek.broker.handlers.k18_api_versions"}


def test_a_served_broker_loads_each_api_on_its_first_request() -> None:
    with ServerProcess(None, "num.partitions=2") as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
        for i in range(10):
            producer.produce("lazy", str(i).encode(), partition=i % 2)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lazy",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition("lazy", p, 0) for p in range(2)])
            got: list[bytes] = []
            while len(got) < 10:
                msg = consumer.poll(30)
                assert msg is not None and msg.error() is None
                got.append(msg.value())
            assert sorted(got) == [str(i).encode() for i in range(10)]
        finally:
            consumer.close()
        assert broker.stop() == 0
        assert "Traceback" not in broker.stderr_text()


def test_a_misspelt_key_is_logged_with_its_suggestion_and_the_broker_says_what_it_is(
        tmp_path: Path) -> None:
    """Typos used to start the broker without a word (issue 32). Now each
    unknown key is logged once with the known key it is closest to, Kafka's
    settings Odradek does not use are listed as such, and the broker names its
    node, roles, cluster id, data directories, listeners and configuration."""
    props = tmp_path / "server.properties"
    props.write_text("num.partitons=3\nlog.retention.hour=1\nnum.network.threads=3\n")
    broker = ServerProcess(tmp_path / "data", properties=props, log_level="INFO",
                           stderr_to_file=True).start()
    try:
        broker.stop()
        text = broker.stderr_text()
    finally:
        broker.stop()
    assert "unknown config 'num.partitons'" in text and "did you mean 'num.partitions'?" in text
    assert "did you mean 'log.retention.hours'?" in text
    assert text.count("num.partitons") == 1
    assert "Kafka settings accepted and not used here: num.network.threads" in text
    assert "node 1, roles broker,controller" in text and "cluster id " in text
    assert f"data in {(tmp_path / 'data').resolve()}" in text
    assert f"configuration: {props}" in text


def test_the_sample_config_starts_a_broker_with_no_unknown_key(tmp_path: Path) -> None:
    """``config/server.properties``, the file the README starts the broker with,
    holds only keys Odradek reads, and a broker started with it serves."""
    sample = Path(__file__).resolve().parents[2] / "config" / "server.properties"
    broker = ServerProcess(tmp_path / "data", properties=sample, log_level="INFO",
                           stderr_to_file=True).start()
    try:
        conf = {"bootstrap.servers": broker.bootstrap}
        producer = Producer(conf)
        producer.produce("sample", b"v")
        assert producer.flush(10) == 0
        producer.close()
        consumer = Consumer({**conf, "group.id": "sample"})
        consumer.assign([TopicPartition("sample", 0, 0)])
        msg = consumer.poll(10)
        assert msg is not None and msg.value() == b"v"
        consumer.close()
    finally:
        broker.stop()
    text = broker.stderr_text()
    assert "unknown config" not in text and "accepted and not used" not in text, text
    assert f"configuration: {sample}" in text
