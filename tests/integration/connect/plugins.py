"""Test plugins referenced by Python path: a connector whose start raises,
and a source whose task raises, while a flag file (``fail.file``) exists; a
converter refusing ``bad``; a transform upper-casing values and a predicate
matching a value prefix."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from odradek.connect.api import SourceConnector, SourceTask, Task
from odradek.connect.config import STRING, ConfigDef, ConfigKey
from odradek.connect.converters.simple import StringConverter
from odradek.connect.data import ConnectRecord, Header, Schema, SourceRecord
from odradek.connect.transforms.base import Predicate, Transformation

CONFIG = ConfigDef((ConfigKey("fail.file", STRING, documentation="Fail while it exists."),
                    ConfigKey("fail.in", STRING, "connector",
                              documentation="connector or task")))


class FlakyConnector(SourceConnector):
    CONFIG = CONFIG

    def __init__(self) -> None:
        self.props: dict[str, str] = {}

    def version(self) -> str:
        return "0.1"

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        if props.get("fail.in", "connector") == "connector" and os.path.exists(
                props["fail.file"]):
            raise RuntimeError("flaky connector: the fail file exists")

    def task_class(self) -> type[Task]:
        return FlakyTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass


class FlakyTask(SourceTask):
    def __init__(self) -> None:
        self.props: dict[str, str] = {}

    def version(self) -> str:
        return "0.1"

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def poll(self) -> Sequence[SourceRecord] | None:
        if self.props.get("fail.in") == "task" and os.path.exists(self.props["fail.file"]):
            raise RuntimeError("flaky task: the fail file exists")
        time.sleep(0.05)
        return []

    def stop(self) -> None:
        pass


class FailingConverter(StringConverter):
    """StringConverter that refuses the value ``bad`` when reading."""

    def to_connect_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        if data == b"bad":
            raise ValueError("bad data")
        return super().to_connect_data(topic, data)


class UpperCase(Transformation[ConnectRecord]):
    def configure(self, props: Mapping[str, str]) -> None:
        pass

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        return record.new_record(value=str(record.value).upper())


class StartsWith(Predicate[ConnectRecord]):
    CONFIG = ConfigDef((ConfigKey("prefix", STRING),))

    def configure(self, props: Mapping[str, str]) -> None:
        self.prefix = str(self.CONFIG.parse(props)["prefix"])

    def test(self, record: ConnectRecord) -> bool:
        return str(record.value).startswith(self.prefix)


class FixedSourceConnector(SourceConnector):
    """Emits two keyed records with headers to ``topic``, once."""

    CONFIG = ConfigDef((ConfigKey("topic", STRING),))

    def __init__(self) -> None:
        self.props: dict[str, str] = {}

    def version(self) -> str:
        return "0.1"

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return FixedSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass


class FixedSourceTask(SourceTask):
    def __init__(self) -> None:
        self.topic = ""
        self.done = False
        self.committed: list[int] = []

    def version(self) -> str:
        return "0.1"

    def start(self, props: Mapping[str, str]) -> None:
        self.topic = props["topic"]
        self.done = self.context.offset_storage_reader.offset({"fixed": 1}) is not None

    def poll(self) -> Sequence[SourceRecord] | None:
        if self.done:
            time.sleep(0.05)
            return []
        self.done = True
        return [SourceRecord(self.topic, 0, None, f"k{i}", None, {"n": i},
                             headers=(Header("h", "v"), Header("n", i)),
                             source_partition={"fixed": 1}, source_offset={"i": i})
                for i in range(2)]

    def stop(self) -> None:
        pass
