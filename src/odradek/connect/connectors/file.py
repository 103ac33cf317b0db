"""FileStreamSource and FileStreamSink, Kafka's example connectors.

Source (``org.apache.kafka.connect.file.FileStreamSourceConnector``): settings
``file`` (required here: no stdin), ``topic``, ``batch.size`` (2000); one task.
Each complete line (``\\n``-terminated; a ``\\r`` before it dropped) is a
record with a null key and a STRING value (the line decoded as UTF-8). Its
source partition is ``{"filename": <file>}`` and its offset
``{"position": <byte offset just after the line>}``; a restarted task seeks to
the committed position, so no line is lost (lines produced but not yet
committed are sent again: at-least-once). A line still being written (no
newline yet) waits for its newline.

Sink (``org.apache.kafka.connect.file.FileStreamSinkConnector``): settings
``file``, ``topics``/``topics.regex``; each record's value is written as one
line (``str()`` of the value, ``\\n`` appended) in UTF-8, flushed on
``flush``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import IO, Any, ClassVar

from odradek.connect.api import SinkConnector, SinkTask, SourceConnector, SourceTask, Task
from odradek.connect.config import INT, LIST, STRING, ConfigDef, ConfigKey, at_least, non_empty
from odradek.connect.data import OPTIONAL_STRING, SinkRecord, SourceRecord

VERSION = "1.0"
POLL_WAIT_S = 0.1
"""How long poll waits when the file has no new complete line."""


class _Checked:
    """What both FileStream connectors do with their settings: check them
    against ``CONFIG`` at start and keep them for the tasks."""

    CONFIG: ClassVar[ConfigDef]

    def __init__(self) -> None:
        self.props: dict[str, str] = {}

    def version(self) -> str:
        return VERSION

    def start(self, props: Mapping[str, str]) -> None:
        self.CONFIG.parse(props)
        self.props = dict(props)

    def stop(self) -> None:
        pass


class FileStreamSourceConnector(_Checked, SourceConnector):
    CONFIG = ConfigDef((
        ConfigKey("file", STRING, validator=non_empty, importance="HIGH",
                  documentation="The file to read, line by line."),
        ConfigKey("topic", STRING, validator=non_empty, importance="HIGH",
                  documentation="The topic to write the lines to."),
        ConfigKey("batch.size", INT, 2000, validator=at_least(1), importance="LOW",
                  documentation="The most lines a poll returns."),
    ))

    def exactly_once_support(self, props: Mapping[str, str]) -> bool | None:
        """Each line's offset is its end position: a resumed task repeats nothing."""
        return True

    def task_class(self) -> type[Task]:
        return FileStreamSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{k: self.props[k] for k in ("file", "topic", "batch.size") if k in self.props}]

    def alter_offsets(self, props: Mapping[str, str],
                      offsets: Mapping[Mapping[str, Any], Mapping[str, Any] | None]) -> bool:
        for partition, offset in offsets.items():
            if set(partition) != {"filename"}:
                raise ValueError("a partition must be {\"filename\": <path>}")
            if offset is None:
                continue
            position = offset.get("position")
            if not isinstance(position, int) or isinstance(position, bool) or position < 0:
                raise ValueError("an offset must be {\"position\": <non-negative integer>}")
        return True


class FileStreamSourceTask(SourceTask):
    def __init__(self) -> None:
        self.file: IO[bytes] | None = None
        self.filename = ""
        self.topic = ""
        self.batch = 2000
        self.position = 0
        self.partition: dict[str, str] = {}
        self.stopping = False

    def version(self) -> str:
        return VERSION

    def start(self, props: Mapping[str, str]) -> None:
        values = FileStreamSourceConnector.CONFIG.parse(props)
        self.filename, self.topic = str(values["file"]), str(values["topic"])
        self.batch = int(values["batch.size"])
        self.partition = {"filename": self.filename}
        committed = self.context.offset_storage_reader.offset({"filename": self.filename})
        self.position = int(committed["position"]) if committed else 0

    def _open(self) -> IO[bytes] | None:
        if self.file is None:
            try:
                self.file = open(self.filename, "rb")  # noqa: SIM115 (held across polls)
            except FileNotFoundError:
                return None
            self.file.seek(self.position)
        return self.file

    def poll(self) -> Sequence[SourceRecord] | None:
        f = self._open()
        records: list[SourceRecord] = []
        if f is not None:
            while len(records) < self.batch:
                line = f.readline()
                if not line.endswith(b"\n"):
                    f.seek(self.position)  # a partial line: read it again when complete
                    break
                self.position += len(line)
                text = line[:-1].removesuffix(b"\r").decode("utf-8", errors="replace")
                records.append(SourceRecord(
                    self.topic, None, None, None, OPTIONAL_STRING, text,
                    source_partition=self.partition,
                    source_offset={"position": self.position}))
        if self.stopping:
            if self.file is not None:  # closed here, on the task's own thread
                self.file.close()
                self.file = None
        elif not records:
            time.sleep(POLL_WAIT_S)
        return records

    def stop(self) -> None:
        self.stopping = True


class FileStreamSinkConnector(_Checked, SinkConnector):
    CONFIG = ConfigDef((
        ConfigKey("file", STRING, validator=non_empty, importance="HIGH",
                  documentation="The file to append each record's value to."),
        ConfigKey("topics", LIST, [], importance="HIGH",
                  documentation="The topics to consume."),
        ConfigKey("topics.regex", STRING, "", importance="HIGH",
                  documentation="A regular expression of the topics to consume."),
    ))

    def task_class(self) -> type[Task]:
        return FileStreamSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max(1, max_tasks))]


class FileStreamSinkTask(SinkTask):
    def __init__(self) -> None:
        self.out: IO[str] | None = None

    def version(self) -> str:
        return VERSION

    def start(self, props: Mapping[str, str]) -> None:
        path = str(FileStreamSinkConnector.CONFIG.parse(props)["file"])
        self.out = open(path, "a", encoding="utf-8", newline="")  # noqa: SIM115

    def put(self, records: Sequence[SinkRecord]) -> None:
        assert self.out is not None
        for r in records:
            self.out.write(f"{'' if r.value is None else r.value}\n")

    def flush(self, offsets: Mapping[Any, int]) -> None:
        if self.out is not None:
            self.out.flush()

    def stop(self) -> None:
        if self.out is not None:
            self.out.close()
            self.out = None
