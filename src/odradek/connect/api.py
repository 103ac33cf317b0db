"""The task model a connector is written against (Kafka Connect's, in Python).

A **connector** checks its configuration and splits the work into task
configurations; the worker runs each **task** in a thread of its own:

- ``SourceTask.poll()`` returns records (or ``[]``/``None`` when there is
  nothing yet; it may block briefly). The worker transforms and converts them,
  produces them, and commits each record's ``source_offset`` under its
  ``source_partition`` only after the producer acknowledged it (with
  exactly-once on, in the same transaction as the records). ``commit()`` is
  called after offsets are committed; ``commit_record(record, metadata)``
  after each acknowledgement.
- ``SinkTask.put(records)`` takes records consumed from the sink's topics;
  ``pre_commit(offsets)`` is called before the worker commits the consumer
  offsets it returns (by default it calls ``flush(offsets)`` and returns them:
  a task that writes synchronously in ``put`` commits what it was given).
  ``open(partitions)``/``close(partitions)`` follow the consumer's rebalances.
  A ``put`` that raises :class:`odradek.connect.errors.RetriableError` is called again with the same
  records after the context's ``timeout``; any other exception fails the task
  whatever ``errors.tolerance`` says (a task hands single bad records to
  ``context.errant_record_reporter`` instead).

A task that raises is FAILED; its trace is shown in ``/status``, and it runs
again only when restarted. Connectors and tasks are found by class name
(``connector.class``: a full dotted path, the class's simple name, or the name
with ``Connector`` dropped, as Kafka resolves aliases) among the plugins
(:mod:`odradek.connect.plugins`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from odradek.connect.config import ConfigDef
from odradek.connect.data import SinkRecord, SourceRecord


@dataclass(frozen=True, slots=True)
class TopicPartition:
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where the producer wrote a source record."""

    topic: str
    partition: int
    offset: int


class OffsetStorageReader(ABC):
    """What a source task reads its last committed offsets from."""

    @abstractmethod
    def offset(self, partition: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The last committed offset of ``partition``, None if there is none."""


class ConnectorContext(ABC):
    @abstractmethod
    def request_task_reconfiguration(self) -> None:
        """Ask the worker to call ``task_configs`` again (the work changed)."""

    @abstractmethod
    def raise_error(self, error: Exception) -> None:
        """Fail the connector with ``error`` (it shows as FAILED in /status)."""


class TransactionContext(ABC):
    """A source task's say over its transactions (``transaction.boundary=connector``).

    ``commit_transaction()``/``abort_transaction()`` end the transaction after
    the records of the current ``poll()`` batch; with a record, right after
    that record (an abort discards it too, and its offset). Records after it
    in the batch start a new transaction. Aborted records are not written: the
    task must return them again if it wants them written."""

    @abstractmethod
    def commit_transaction(self, record: SourceRecord | None = None) -> None: ...

    @abstractmethod
    def abort_transaction(self, record: SourceRecord | None = None) -> None: ...


class SourceTaskContext(ABC):
    configs: Mapping[str, str]

    @property
    @abstractmethod
    def offset_storage_reader(self) -> OffsetStorageReader: ...

    @property
    def transaction_context(self) -> TransactionContext | None:
        """Set only when the connector defines transaction boundaries (as Kafka's)."""
        return None


class ErrantRecordReporter(ABC):
    """Reports a record ``put`` could not handle (KIP-610).

    With ``errors.tolerance=all`` the record is counted, logged if asked, and
    its original key and value bytes go to the dead letter queue (when one is
    set); the task carries on. With ``none`` ``report`` raises, and the task
    fails when the exception leaves ``put``. Everything reported is written
    before the consumer offsets past it are committed."""

    @abstractmethod
    def report(self, record: SinkRecord, error: BaseException) -> None: ...


class SinkTaskContext(ABC):
    """``errant_record_reporter`` and ``timeout`` have defaults so that test
    doubles need not define them (the worker's context overrides both)."""

    configs: Mapping[str, str]

    @property
    def errant_record_reporter(self) -> ErrantRecordReporter | None:
        """The reporter of records ``put`` failed on (None: the worker has none)."""
        return None

    def timeout(self, timeout_ms: int) -> None:
        """The back-off (ms) before a ``put`` that raised
        :class:`odradek.connect.errors.RetriableError`
        is called again with the same records."""
        self.timeout_ms = timeout_ms

    @abstractmethod
    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Reset the consumer to these offsets (the task keeps its own)."""

    @abstractmethod
    def assignment(self) -> set[TopicPartition]: ...

    @abstractmethod
    def pause(self, *partitions: TopicPartition) -> None: ...

    @abstractmethod
    def resume(self, *partitions: TopicPartition) -> None: ...

    @abstractmethod
    def request_commit(self) -> None: ...


class Task(ABC):
    @abstractmethod
    def version(self) -> str: ...

    @abstractmethod
    def start(self, props: Mapping[str, str]) -> None: ...

    @abstractmethod
    def stop(self) -> None:
        """Called from another thread: make ``poll``/``put`` return soon."""


class SourceTask(Task):
    context: SourceTaskContext

    def initialize(self, context: SourceTaskContext) -> None:
        self.context = context

    @abstractmethod
    def poll(self) -> Sequence[SourceRecord] | None: ...

    def commit(self) -> None:
        """The offsets of every record returned so far and acknowledged are committed."""

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        """``record`` was acknowledged (``metadata`` None: a transform dropped it)."""


class SinkTask(Task):
    context: SinkTaskContext

    def initialize(self, context: SinkTaskContext) -> None:
        self.context = context

    @abstractmethod
    def put(self, records: Sequence[SinkRecord]) -> None: ...

    def flush(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Make everything ``put`` so far durable (``offsets``: next to consume)."""

    def pre_commit(self, offsets: Mapping[TopicPartition, int]
                   ) -> Mapping[TopicPartition, int]:
        """The offsets the worker may commit (next to consume, per partition)."""
        self.flush(offsets)
        return offsets

    def open(self, partitions: Sequence[TopicPartition]) -> None:
        """These partitions were assigned to the task."""

    def close(self, partitions: Sequence[TopicPartition]) -> None:
        """These partitions were taken away (flush what is buffered for them)."""


class Connector(ABC):
    """``CONFIG`` defines the connector's own settings (the worker adds the
    common ones: ``name``, ``connector.class``, ``tasks.max``, converters,
    ``transforms``, ``predicates``, ``errors.*``)."""

    CONFIG: ClassVar[ConfigDef] = ConfigDef()
    context: ConnectorContext

    def initialize(self, context: ConnectorContext) -> None:
        self.context = context

    @abstractmethod
    def version(self) -> str: ...

    @abstractmethod
    def start(self, props: Mapping[str, str]) -> None: ...

    @abstractmethod
    def task_class(self) -> type[Task]: ...

    @abstractmethod
    def task_configs(self, max_tasks: int) -> list[dict[str, str]]: ...

    @abstractmethod
    def stop(self) -> None: ...

    def validate(self, props: Mapping[str, str]) -> Mapping[str, list[str]]:
        """Errors by setting name beyond ``CONFIG``'s own checks (default: none)."""
        return {}


class SourceConnector(Connector):
    def exactly_once_support(self, props: Mapping[str, str]) -> bool | None:
        """Whether the connector can be exactly-once (None: it does not say;
        ``exactly.once.support=required`` then fails validation)."""
        return None

    def can_define_transaction_boundaries(self, props: Mapping[str, str]) -> bool:
        """Whether its tasks can use ``transaction.boundary=connector``."""
        return False

    def alter_offsets(self, props: Mapping[str, str],
                      offsets: Mapping[Mapping[str, Any], Mapping[str, Any] | None]) -> bool:
        """Check operator-written offsets (KIP-875); raise ValueError to refuse."""
        return True


class SinkConnector(Connector):
    def alter_offsets(self, props: Mapping[str, str],
                      offsets: Mapping[TopicPartition, int | None]) -> bool:
        return True
