"""``odradek storage`` as a user runs it (``python -m odradek``), then ``odradek
serve FILE`` on the formatted directory, asked for its cluster id by a real client.

Errors are one line on stderr, exit status 1, no traceback."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.support.process import ServerProcess

UUID = re.compile(r"[A-Za-z0-9_-]{22}")


def storage(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "odradek", "storage", *args],
                          capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def fails(*args: str) -> str:
    proc = storage(*args, ok=False)
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def new_id() -> str:
    return storage("random-uuid").stdout.strip()


def meta(directory: Path) -> dict[str, str]:
    lines = (directory / "meta.properties").read_text().splitlines()
    return dict(ln.split("=", 1) for ln in lines if ln and not ln.startswith("#"))


@pytest.fixture
def props(tmp_path: Path) -> Path:
    path = tmp_path / "server.properties"
    path.write_text(f"# a single node\nnode.id=3\nlog.dirs={tmp_path / 'data'}\n")
    return path


def test_random_uuid_is_a_kafka_uuid() -> None:
    ids = {new_id() for _ in range(3)}
    assert len(ids) == 3
    for text in ids:
        assert UUID.fullmatch(text) and not text.startswith("-")
        assert len(base64.urlsafe_b64decode(text + "==")) == 16


def test_format_writes_v1_meta_properties_everywhere(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    dirs = [tmp_path / "d1", tmp_path / "nested" / "d2"]
    path.write_text(f"node.id=2\nlog.dirs={dirs[0]}, {dirs[1]}\n"
                    f"metadata.log.dir={tmp_path / 'meta'}\n")
    cluster_id = new_id()
    out = storage("format", "-t", cluster_id, "-c", str(path)).stdout.splitlines()
    every = sorted([*dirs, tmp_path / "meta"])
    assert out[:-1] == [f"Formatting {d} with metadata.version 4.0-IV3." for d in every]
    assert out[-1] == ("Bootstrap metadata (metadata.version=25, group.version=1, "
                       "transaction.version=2; 0 SCRAM credential(s)) written to "
                       f"{tmp_path / 'meta'}/bootstrap.checkpoint.")
    assert [d for d in every if (d / "bootstrap.checkpoint").exists()] == [tmp_path / "meta"]
    directory_ids = set()
    for d in every:
        written = meta(d)
        assert written.keys() == {"version", "directory.id", "node.id", "cluster.id"}
        assert written["version"] == "1" and written["node.id"] == "2"
        assert written["cluster.id"] == cluster_id
        assert UUID.fullmatch(written["directory.id"])
        directory_ids.add(written["directory.id"])
        assert not (d / "meta.properties.tmp").exists()
    assert len(directory_ids) == 3

    info = storage("info", "-c", str(path)).stdout
    for d in every:
        assert f"{d}:\n  cluster.id={cluster_id}\n" in info
        assert f"  directory.id={meta(d)['directory.id']}\n  node.id=2\n  version=1" in info


def test_format_twice_and_ignore_formatted(props: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    cluster_id = new_id()
    storage("format", "-t", cluster_id, "-c", str(props))
    before = (data / "meta.properties").read_bytes()
    assert fails("format", "-t", cluster_id, "-c", str(props)) == (
        f"odradek: Log directory {data} is already formatted. Use --ignore-formatted to "
        f"ignore this directory and format the others.")
    out = storage("format", "-t", cluster_id, "-c", str(props), "--ignore-formatted").stdout
    assert out == "All of the log directories are already formatted.\n"
    # A second directory: -g formats only the new one.
    other = tmp_path / "data2"
    out = storage("format", "-g", "-t", cluster_id, "-c", str(props),
                  "--override", f"log.dirs={data},{other}").stdout
    assert out == f"Formatting {other} with metadata.version 4.0-IV3.\n"
    assert meta(other)["cluster.id"] == cluster_id
    assert (data / "meta.properties").read_bytes() == before
    # Another cluster's id is refused even with -g, and nothing is written.
    line = fails("format", "-g", "-t", new_id(), "-c", str(props),
                 "--override", f"log.dirs={data},{tmp_path / 'data3'}")
    assert line.startswith(f"odradek: Log directory {data} is already formatted for "
                           f"cluster.id={cluster_id}, not ")
    assert not (tmp_path / "data3").exists()
    assert "already formatted for node.id=3, not 4" in fails(
        "format", "-g", "-t", cluster_id, "-c", str(props), "--override", "node.id=4")


@pytest.mark.parametrize(("cluster_id", "says"), [
    ("not-a-uuid", "10 base64url characters, not the 22 of 16 bytes"),
    ("AAAAAAAAAAAAAAAAAAAAAAAA", "24 base64url characters"),
    ("AAAAAAAAAAAAAAAAAAAA+/", "not base64url"),
])
def test_bad_cluster_id(props: Path, tmp_path: Path, cluster_id: str, says: str) -> None:
    line = fails("format", "-t", cluster_id, "-c", str(props))
    assert line.startswith(f"odradek: Cluster ID string '{cluster_id}' does not appear to be a "
                           f"valid UUID: ")
    assert says in line
    assert not (tmp_path / "data").exists()


def test_bad_config(props: Path, tmp_path: Path) -> None:
    cluster_id = new_id()
    with props.open("a") as f:
        f.write("controller.quorum.voters=1@localhost:9093,1@localhost:9094\n")
    assert fails("format", "-t", cluster_id, "-c", str(props)) == (
        "odradek: controller.quorum.voters: node id 1 is listed twice")
    assert fails("format", "-t", cluster_id, "-c", str(tmp_path / "missing.properties")
                 ).startswith("odradek: cannot read ")
    assert fails("format", "-t", cluster_id, "-c", str(props), "--override",
                 "process.roles=broker,zookeeper") == (
        "odradek: process.roles: unknown role 'zookeeper' (broker or controller)")
    assert not (tmp_path / "data").exists()


def test_standalone(props: Path, tmp_path: Path) -> None:
    cluster_id = new_id()
    out = storage("format", "--standalone", "-t", cluster_id, "-c", str(props)).stdout
    assert out.splitlines()[-1] == "Node 3 alone forms the controller quorum (a single voter)."
    cluster = ["--override", "controller.quorum.voters=3@localhost:9093",
               "--override", "controller.listener.names=CONTROLLER",
               "--override", "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"]
    assert "You cannot use --standalone with controller.quorum.voters set" in fails(
        "format", "-g", "-s", "-t", cluster_id, "-c", str(props), *cluster)
    broker_only = ["--override", "process.roles=broker",
                   "--override", "controller.quorum.bootstrap.servers=localhost:9093",
                   "--override", "controller.listener.names=CONTROLLER"]
    assert "You cannot use --standalone on a broker node" in fails(
        "format", "-g", "-s", "-t", cluster_id, "-c", str(props), *broker_only)


def test_info(props: Path, tmp_path: Path) -> None:
    proc = storage("info", "-c", str(props), ok=False)
    assert proc.returncode == 1 and proc.stdout == f"{tmp_path / 'data'}: does not exist\n"
    (tmp_path / "data").mkdir()
    proc = storage("info", "-c", str(props), ok=False)
    assert proc.returncode == 1 and proc.stdout == f"{tmp_path / 'data'}: not formatted\n"
    storage("format", "-t", new_id(), "-c", str(props))
    assert "  node.id=3\n" in storage("info", "-c", str(props)).stdout
    (tmp_path / "data" / "meta.properties").write_text("cluster.id\n")
    proc = storage("info", "-c", str(props), ok=False)
    assert proc.returncode == 1 and "meta.properties is damaged" in proc.stdout


def test_a_formatted_node_serves_its_cluster_id(props: Path, tmp_path: Path) -> None:
    cluster_id = new_id()
    storage("format", "-t", cluster_id, "-c", str(props))
    data = tmp_path / "data"
    before = (data / "meta.properties").read_bytes()
    server = ServerProcess(data, properties=props)
    server.start()
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        described = admin.describe_cluster(request_timeout=10).result(timeout=20)
        assert described.cluster_id == cluster_id
        assert [n.id for n in described.nodes] == [3]  # node.id from the file
        assert admin.list_topics(timeout=10).cluster_id == cluster_id  # Metadata
    finally:
        assert server.stop() == 0
    assert (data / "meta.properties").read_bytes() == before  # the broker did not rewrite it


def test_a_quorum_node_must_be_formatted_first(props: Path, tmp_path: Path) -> None:
    cluster = ("controller.quorum.voters=3@localhost:9093", "controller.listener.names=CONTROLLER",
               "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0")
    server = ServerProcess(tmp_path / "data", *cluster, properties=props)
    with pytest.raises(RuntimeError, match=r"is not formatted \(no meta.properties\) and this "
                                           r"node is part of a controller quorum"):
        server.start()
    assert not (tmp_path / "data" / "meta.properties").exists()


def test_an_unformatted_single_node_still_formats_itself(props: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    with ServerProcess(data, properties=props) as server:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        described = admin.describe_cluster(request_timeout=10).result(timeout=20)
    written = meta(data)
    assert written["cluster.id"] == described.cluster_id
    assert written["version"] == "1" and written["node.id"] == "3"
    assert UUID.fullmatch(written["directory.id"])


def test_format_feature_picks_the_transaction_version(props: Path, tmp_path: Path) -> None:
    from tests.integration.test_transactions_v2 import finalized

    assert "level must be a whole number" in fails(
        "format", "-t", new_id(), "-c", str(props), "--feature", "transaction.version=x")
    assert "not supported (supported: 0-2)" in fails(
        "format", "-t", new_id(), "-c", str(props), "--feature", "transaction.version=3")
    assert "cannot be chosen" in fails(
        "format", "-t", new_id(), "-c", str(props), "--feature", "metadata.version=25")
    out = storage("format", "-t", new_id(), "-c", str(props),
                  "--feature", "transaction.version=1").stdout
    assert "transaction.version=1" in out and "metadata.version=25" in out
    assert (tmp_path / "data" / "bootstrap.checkpoint").exists()
    with ServerProcess(tmp_path / "data", properties=props) as server:
        assert finalized(server.bootstrap)[0]["transaction.version"] == 1


def test_a_directory_formatted_before_bootstrap_checkpoints_starts_as_it_did(
        props: Path, tmp_path: Path) -> None:
    """No ``bootstrap.checkpoint``: an older ``bootstrap.records`` still names the
    levels, and with neither file the new cluster gets the default levels."""
    import shutil
    import struct

    from odradek.broker.control.journal import encode_record
    from odradek.wire.internal.feature_level_record import FeatureLevelRecord
    from tests.integration.test_transactions_v2 import finalized

    data = tmp_path / "data"
    for older, want in [(FeatureLevelRecord("transaction.version", 1), 1), (None, 2)]:
        storage("format", "-t", new_id(), "-c", str(props), "--feature", "transaction.version=0")
        (data / "bootstrap.checkpoint").unlink()
        if older is not None:
            record = encode_record(older)
            (data / "bootstrap.records").write_bytes(struct.pack(">i", len(record)) + record)
        with ServerProcess(data, properties=props) as server:
            levels, _ = finalized(server.bootstrap)
            assert (levels["transaction.version"], levels["metadata.version"]) == (want, 25)
        shutil.rmtree(data)  # a new cluster each round


def test_a_damaged_bootstrap_checkpoint_stops_the_start_naming_it(
        props: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    storage("format", "-t", new_id(), "-c", str(props))
    checkpoint = data / "bootstrap.checkpoint"
    checkpoint.write_bytes(checkpoint.read_bytes()[:-3])  # torn in its footer batch
    server = ServerProcess(data, properties=props)
    with pytest.raises(RuntimeError, match=r"bootstrap\.checkpoint is not a bootstrap "
                                           r"checkpoint: batch at offset \d+ claims .*; "
                                           r"format .* again"):
        server.start()


def test_release_version_and_group_version_0_are_formatted_and_served(
        props: Path, tmp_path: Path) -> None:
    from odradek.broker.control.bootstrap import read_bootstrap
    from odradek.wire.errors import ErrorCode
    from odradek.wire.internal.feature_level_record import FeatureLevelRecord
    from odradek.wire.messages.api_versions_request import ApiVersionsRequest
    from odradek.wire.messages.consumer_group_heartbeat_request import (
        ConsumerGroupHeartbeatRequest,
    )
    from tests.support.rawclient import RawClient

    assert fails("format", "-t", new_id(), "-c", str(props), "--release-version", "3.9") == (
        "odradek: --release-version 3.9: not supported; this build formats 4.0 "
        "(4.0-IV3, metadata.version 25) only")
    assert not (tmp_path / "data").exists()
    storage("format", "-t", new_id(), "-c", str(props), "--release-version", "4.0",
            "--feature", "group.version=0")
    data = tmp_path / "data"
    levels = {r.name: r.feature_level for r in read_bootstrap(data)
              if isinstance(r, FeatureLevelRecord)}
    assert levels == {"metadata.version": 25, "group.version": 0, "transaction.version": 2}
    server = ServerProcess(data, properties=props)
    server.start()
    try:
        raw = RawClient(server.bootstrap)
        try:
            finalized = {f.name: f.max_version_level for f in raw.request(ApiVersionsRequest(
                client_software_name="t", client_software_version="1"), 3).finalized_features}
            assert finalized == {"metadata.version": 25, "transaction.version": 2}
            joined = raw.request(ConsumerGroupHeartbeatRequest(
                group_id="g", member_id="m", member_epoch=0, rebalance_timeout_ms=5000,
                subscribed_topic_names=["t"], topic_partitions=[]), 1)
            assert joined.error_code == ErrorCode.UNSUPPORTED_VERSION
        finally:
            raw.close()
    finally:
        assert server.stop() == 0
