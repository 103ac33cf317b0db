"""Test sources of the exactly-once tests, referenced by Python path.

:class:`CounterSource` emits the values ``"0"``, ``"1"``, ... to ``topic``,
``batch`` per ``poll`` (every ``delay.ms``), up to ``count`` (0: forever),
with source offset ``{"next": n}`` under partition ``{"counter": <name>}``; it
resumes from its committed offset. Record ``big.at`` is too large to
produce (2 MB). With ``commit.every`` N it asks for a
commit after every N-th record (``transaction.boundary=connector``). It
declares exactly-once support and connector-defined boundaries;
:class:`UndeclaredSource` is the same source declaring nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from odradek.connect.api import SourceConnector, SourceTask, Task
from odradek.connect.config import INT, STRING, ConfigDef, ConfigKey
from odradek.connect.data import SourceRecord

CONFIG = ConfigDef((
    ConfigKey("topic", STRING, documentation="Where the numbers go."),
    ConfigKey("batch", INT, 1, documentation="Records per poll."),
    ConfigKey("delay.ms", INT, 10, documentation="Sleep before each poll."),
    ConfigKey("count", INT, 0, documentation="How many numbers (0: forever)."),
    ConfigKey("commit.every", INT, 0, documentation="Ask for a commit every N records."),
    ConfigKey("big.at", INT, -1, documentation="Record n's value is 2 MB (too large)."),
))


class CounterSource(SourceConnector):
    CONFIG = CONFIG

    def __init__(self) -> None:
        self.props: dict[str, str] = {}

    def version(self) -> str:
        return "0.1"

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return CounterTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass

    def exactly_once_support(self, props: Mapping[str, str]) -> bool | None:
        return True

    def can_define_transaction_boundaries(self, props: Mapping[str, str]) -> bool:
        return True


class UndeclaredSource(CounterSource):
    def exactly_once_support(self, props: Mapping[str, str]) -> bool | None:
        return None

    def can_define_transaction_boundaries(self, props: Mapping[str, str]) -> bool:
        return False


class CounterTask(SourceTask):
    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.next = 0

    def version(self) -> str:
        return "0.1"

    def start(self, props: Mapping[str, str]) -> None:
        c = CONFIG.parse(props)
        self.topic = str(c["topic"])
        self.batch, self.delay = int(c["batch"]), int(c["delay.ms"]) / 1000
        self.count, self.every = int(c["count"]), int(c["commit.every"])
        self.big_at = int(c["big.at"])
        self.partition = {"counter": props.get("name", "counter")}
        stored = self.context.offset_storage_reader.offset(self.partition)
        self.next = int(stored["next"]) if stored else 0

    def poll(self) -> Sequence[SourceRecord] | None:
        if self.stopping.wait(self.delay):
            return None
        out = []
        while len(out) < self.batch and (self.count == 0 or self.next < self.count):
            n = self.next
            self.next += 1
            value = "x" * 2_000_000 if n == self.big_at else str(n)
            record = SourceRecord(self.topic, 0, None, None, None, value,
                                  source_partition=self.partition,
                                  source_offset={"next": n + 1})
            out.append(record)
            txns = self.context.transaction_context
            if self.every and txns is not None and (n + 1) % self.every == 0:
                txns.commit_transaction(record)
        return out

    def stop(self) -> None:
        self.stopping.set()
