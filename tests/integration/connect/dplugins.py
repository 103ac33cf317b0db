"""A counter source for the distributed tests: task N writes ``task-N:i`` for
i = 0, 1, 2... to ``topic`` (key ``task-N``), one record every
``interval.ms``, with source partition ``{"task": N}`` and offset ``{"i": i}``;
a task started again resumes after the last committed ``i``. ``tasks.max``
tasks, always."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from odradek.connect.api import SourceConnector, SourceTask, Task
from odradek.connect.config import INT, STRING, ConfigDef, ConfigKey
from odradek.connect.data import SourceRecord


class CounterSource(SourceConnector):
    CONFIG = ConfigDef((ConfigKey("topic", STRING),
                        ConfigKey("interval.ms", INT, 20)))

    def __init__(self) -> None:
        self.props: dict[str, str] = {}

    def version(self) -> str:
        return "0.1"

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return CounterTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{"topic": self.props["topic"], "task.number": str(n),
                 "interval.ms": self.props.get("interval.ms", "20")} for n in range(max_tasks)]

    def stop(self) -> None:
        pass


class CounterTask(SourceTask):
    def __init__(self) -> None:
        self.topic = ""
        self.n = 0
        self.next = 0
        self.interval = 0.02

    def version(self) -> str:
        return "0.1"

    def start(self, props: Mapping[str, str]) -> None:
        self.topic = props["topic"]
        self.n = int(props["task.number"])
        self.interval = int(props.get("interval.ms", "20")) / 1000
        last = self.context.offset_storage_reader.offset({"task": self.n})
        self.next = int(last["i"]) + 1 if last else 0

    def poll(self) -> Sequence[SourceRecord] | None:
        time.sleep(self.interval)
        i, self.next = self.next, self.next + 1
        return [SourceRecord(self.topic, None, None, f"task-{self.n}", None,
                             f"task-{self.n}:{i}", source_partition={"task": self.n},
                             source_offset={"i": i})]

    def stop(self) -> None:
        pass
