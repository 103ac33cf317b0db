"""A test sink whose ``put`` misbehaves as ``mode`` says, writing one JSON
line per ``put`` call (``{"values": [...]}``) to ``out.file``:

- ``report``: values ``bad`` go to ``context.errant_record_reporter``;
  ``report-new``: a new record made for each ``bad`` one is reported instead;
- ``fail``: a batch holding ``boom`` raises RuntimeError;
- ``retriable``: the first ``retries`` calls set ``context.timeout(200)`` and
  raise RetriableError (the line is written first, so the retried batches show).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from odradek.connect.api import SinkConnector, SinkTask, Task
from odradek.connect.config import INT, STRING, ConfigDef, ConfigKey
from odradek.connect.data import SinkRecord
from odradek.connect.errors import RetriableError


class MisbehavingSinkConnector(SinkConnector):
    CONFIG = ConfigDef((ConfigKey("out.file", STRING), ConfigKey("mode", STRING),
                        ConfigKey("retries", INT, 2)))

    def __init__(self) -> None:
        self.props: dict[str, str] = {}

    def version(self) -> str:
        return "0.1"

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return MisbehavingSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass


class MisbehavingSinkTask(SinkTask):
    def __init__(self) -> None:
        self.props: dict[str, str] = {}
        self.calls = 0

    def version(self) -> str:
        return "0.1"

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def put(self, records: Sequence[SinkRecord]) -> None:
        values = [r.value for r in records]
        with open(self.props["out.file"], "a", encoding="utf-8") as f:
            f.write(json.dumps({"values": values}) + "\n")
        self.calls += 1
        mode = self.props["mode"]
        if mode == "fail" and "boom" in values:
            raise RuntimeError("put exploded on boom")
        if mode == "retriable" and self.calls <= int(self.props.get("retries", "2")):
            self.context.timeout(200)
            raise RetriableError(f"not yet (call {self.calls})")
        if mode in ("report", "report-new"):
            reporter = self.context.errant_record_reporter
            assert reporter is not None
            for r in records:
                if r.value == "bad":
                    if mode == "report-new":  # a record the worker never consumed
                        r = SinkRecord(r.topic, r.kafka_partition, None, "made-key", None,
                                       "made-value", kafka_offset=10**6)
                    reporter.report(r, ValueError(f"cannot store {r.value}"))

    def stop(self) -> None:
        pass
