"""Test plugins referenced by Python path: a connector whose start raises,
and a source whose task raises, while a flag file (``fail.file``) exists."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence

from odradek.connect.api import SourceConnector, SourceTask, Task
from odradek.connect.config import STRING, ConfigDef, ConfigKey
from odradek.connect.data import SourceRecord

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
