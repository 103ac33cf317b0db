"""The runtime's parts without a broker: the offsets file's format, the
worker's settings and their librdkafka names, the transform chain's errors,
and the FileStream source task (partial lines, resume, CRLF)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from odradek.connect.api import OffsetStorageReader, SourceTaskContext
from odradek.connect.config import ConfigError
from odradek.connect.connectors.file import FileStreamSourceConnector, FileStreamSourceTask
from odradek.connect.data import ConnectRecord
from odradek.connect.runtime.config import WorkerConfig, librdkafka
from odradek.connect.runtime.offsets import OffsetFile
from odradek.connect.transforms.chain import TransformChain

BASE = {"key.converter": "StringConverter", "value.converter": "StringConverter",
        "offset.storage.file.filename": "/tmp/x"}


def test_offsets_file_format_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "offsets.json"
    store = OffsetFile(str(path))
    store.put("c", [({"filename": "/a"}, {"position": 5}), ({"filename": "/b"}, {"position": 1})])
    store.put("d", [({"filename": "/a"}, {"position": 9})])
    store.put("c", [({"filename": "/b"}, None)])
    assert json.loads(path.read_text()) == [[["c", {"filename": "/a"}], {"position": 5}],
                                            [["d", {"filename": "/a"}], {"position": 9}]]
    again = OffsetFile(str(path))
    assert again.get("c", {"filename": "/a"}) == {"position": 5}
    assert again.get("c", {"filename": "/b"}) is None
    assert again.of("d") == [({"filename": "/a"}, {"position": 9})]
    again.remove("c")
    assert OffsetFile(str(path)).of("c") == []
    assert not (tmp_path / "sub" / "offsets.json.tmp").exists()


def test_offsets_file_that_is_not_one(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"not": "pairs"}')
    with pytest.raises(ValueError, match=r"offset\.storage\.file\.filename"):
        OffsetFile(str(path))


def test_worker_config() -> None:
    config = WorkerConfig.parse({**BASE, "listeners": "http://127.0.0.1:0",
                                 "bootstrap.servers": "a:1, b:2",
                                 "security.protocol": "SASL_PLAINTEXT",
                                 "sasl.mechanism": "PLAIN", "producer.linger.ms": "50",
                                 "consumer.fetch.min.bytes": "10",
                                 "sasl.jaas.config": 'org.apache.kafka.common.security.plain.'
                                 'PlainLoginModule required username="u" password="p";'})
    assert (config.host, config.port, config.flush_interval_ms) == ("127.0.0.1", 0, 60000)
    producer = config.client_config("producer", {"linger.ms": "7"})
    assert producer == {"bootstrap.servers": "a:1,b:2", "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanisms": "PLAIN", "sasl.username": "u", "sasl.password": "p",
                        "linger.ms": "7"}
    assert config.client_config("consumer")["fetch.min.bytes"] == "10"
    assert WorkerConfig.parse(BASE).port == 8083


@pytest.mark.parametrize("change,name", [
    ({"offset.flush.interval.ms": "soon"}, "offset.flush.interval.ms"),
    ({"offset.flush.interval.ms": "0"}, "offset.flush.interval.ms"),
    ({"listeners": "https://:8443"}, "listeners"),
    ({"value.converter": None}, "value.converter"),
    ({"offset.storage.file.filename": None}, "offset.storage.file.filename"),
])
def test_worker_config_errors_name_the_setting(change: dict[str, Any], name: str) -> None:
    props = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    with pytest.raises(ConfigError) as e:
        WorkerConfig.parse(props)
    assert e.value.name == name


def test_pem_truststore_becomes_ca_location() -> None:
    assert librdkafka({"ssl.truststore.location": "/ca.pem", "ssl.truststore.type": "PEM",
                       "ssl.endpoint.identification.algorithm": ""}) == {
        "ssl.ca.location": "/ca.pem", "ssl.endpoint.identification.algorithm": "none"}
    with pytest.raises(ConfigError, match=r"ssl\.truststore\.type"):
        librdkafka({"ssl.truststore.location": "/ts.p12", "ssl.truststore.type": "PKCS12"})


@pytest.mark.parametrize("props,name", [
    ({"transforms": "a"}, "transforms.a.type"),
    ({"transforms": "a", "transforms.a.type": "NoSuchTransform"}, "transforms.a.type"),
    ({"transforms": "a", "transforms.a.type": "StringConverter"}, "transforms.a.type"),
])
def test_chain_errors_name_the_setting(props: dict[str, str], name: str) -> None:
    with pytest.raises(ConfigError) as e:
        TransformChain.from_props(props)
    assert e.value.name == name


def test_chain_predicate_must_be_listed() -> None:
    p = "tests.integration.connect.plugins"
    with pytest.raises(ConfigError) as e:
        TransformChain.from_props({"transforms": "a", "transforms.a.type": f"{p}.UpperCase",
               "transforms.a.predicate": "x"})
    assert e.value.name == "transforms.a.predicate"


class _Reader(OffsetStorageReader):
    def __init__(self, offset: Mapping[str, Any] | None) -> None:
        self.value = offset

    def offset(self, partition: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return self.value


class _Context(SourceTaskContext):
    def __init__(self, offset: Mapping[str, Any] | None) -> None:
        self.configs = {}
        self.reader = _Reader(offset)

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        return self.reader


def _task(path: Path, offset: Mapping[str, Any] | None = None) -> FileStreamSourceTask:
    task = FileStreamSourceTask()
    task.initialize(_Context(offset))
    task.start({"file": str(path), "topic": "t", "batch.size": "2"})
    return task


def test_file_source_lines_offsets_and_partial_lines(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes("a\r\nžb\nc\npart".encode())
    task = _task(path)
    first = task.poll() or []
    assert [r.value for r in first] == ["a", "žb"]
    assert [r.source_offset for r in first] == [{"position": 3}, {"position": 7}]
    assert first[0].source_partition == {"filename": str(path)} and first[0].key is None
    assert [r.value for r in task.poll() or []] == ["c"]
    with path.open("ab") as f:
        f.write(b"ial\n")
    assert [r.value for r in task.poll() or []] == ["partial"]
    task.stop()
    assert task.poll() == []


def test_file_source_resumes_at_the_committed_position(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("one\ntwo\nthree\n")
    task = _task(path, {"position": 4})
    assert [r.value for r in task.poll() or []] == ["two", "three"]
    task.stop()
    task.poll()


def test_file_source_offsets_are_checked() -> None:
    connector = FileStreamSourceConnector()
    assert connector.alter_offsets({}, {})
    for bad in ({"position": -1}, {"position": "3"}):
        with pytest.raises(ValueError):
            connector.alter_offsets({}, {_Key(filename="/a"): bad})


class _Key(dict[str, str]):
    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))


@pytest.mark.parametrize("negate,expected", [("false", ["XA", "yb"]), ("true", ["xa", "YB"])])
def test_chain_predicate_and_negate(negate: str, expected: list[str]) -> None:
    p = "tests.integration.connect.plugins"
    chain = TransformChain.from_props({"transforms": "up", "transforms.up.type": f"{p}.UpperCase",
                   "transforms.up.predicate": "x", "transforms.up.negate": negate,
                   "predicates": "x", "predicates.x.type": f"{p}.StartsWith",
                   "predicates.x.prefix": "x"})
    out = []
    for value in ("xa", "yb"):
        record = chain.apply(ConnectRecord("t", None, None, None, None, value))
        assert record is not None
        out.append(record.value)
    assert out == expected


def test_the_quick_start_properties_are_valid() -> None:
    from odradek.broker.config import read_properties
    from odradek.connect.runtime.validation import config_errors, connector_class

    root = Path(__file__).resolve().parents[3] / "config"
    worker = read_properties(root / "connect-standalone.properties")
    assert WorkerConfig.parse(worker).port == 8083
    for name in ("connect-file-source.properties", "connect-file-sink.properties"):
        props = read_properties(root / name)
        assert config_errors(connector_class(props), props, worker) == {}, name
