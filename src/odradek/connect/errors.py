"""Error handling of converters and transforms (KIP-298, KIP-610).

Settings (connector config; Kafka's names and defaults):

- ``errors.tolerance``: ``none`` (the first failure fails the task) or ``all``
  (the record is skipped, and sent to the dead letter queue if one is set);
- ``errors.retry.timeout`` ms (0: no retry, -1: forever) and
  ``errors.retry.delay.max.ms`` (60000): an operation that raises
  :class:`RetriableError` is called again after 300 ms, then 600, 1200, ...
  (each wait at most ``errors.retry.delay.max.ms``, and never past the
  timeout; Kafka picks a random wait below the cap once the doubling reaches
  it, this waits the cap), until it succeeds or the timeout has passed since
  the first attempt; then the last error counts as a failure. Other errors
  are failures at once.
- ``errors.log.enable`` / ``errors.log.include.messages``: log each failure
  (and the record);
- sinks only: ``errors.deadletterqueue.topic.name``,
  ``errors.deadletterqueue.topic.replication.factor`` (3; -1 or 1..32767),
  ``errors.deadletterqueue.context.headers.enable`` (false): the failed
  record's original key and value bytes go to that topic, with the
  ``__connect.errors.*`` headers when enabled. The DLQ topic is created with
  one partition (as Kafka's reporter does) at the first failed record; a
  replication factor above the cluster's size fails the task then, as in
  Kafka.

The runtime calls :meth:`ErrorHandler.run` around each stage (``KEY_CONVERTER``,
``VALUE_CONVERTER``, ``HEADER_CONVERTER``, ``TRANSFORMATION``, ``KAFKA_PRODUCE``,
``KAFKA_CONSUME``), and :func:`dlq_headers` to build a DLQ record's headers.
A sink's ``put`` is not such a stage (as in Kafka, an exception from it fails
the task); records its task reports through the errant record reporter count
as failures of stage ``TASK_PUT``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from odradek.connect.config import (
    BOOLEAN,
    INT,
    LONG,
    STRING,
    ConfigDef,
    ConfigKey,
    at_least,
    one_of,
)

T = TypeVar("T")
log = logging.getLogger("odradek.connect.errors")

def replication_factor(name: str, value: Any) -> None:
    """A topic's replication factor: -1 (the broker's default) or 1..32767
    (Kafka's is a short)."""
    if value is not None and not (value == -1 or 1 <= value <= 32767):
        raise ValueError("Value must be -1 (the broker's default) or between 1 and 32767")


CONFIG = ConfigDef((
    ConfigKey("errors.tolerance", STRING, "none", validator=one_of("none", "all"),
              documentation="none: a failure fails the task; all: the record is skipped.",
              group="Error Handling"),
    ConfigKey("errors.retry.timeout", LONG, 0, validator=at_least(-1),
              documentation="How long (ms) a failing operation is retried; -1 forever.",
              group="Error Handling"),
    ConfigKey("errors.retry.delay.max.ms", LONG, 60000, validator=at_least(1),
              documentation="The longest wait between retries (ms).", group="Error Handling"),
    ConfigKey("errors.log.enable", BOOLEAN, False,
              documentation="Log each failure.", group="Error Handling"),
    ConfigKey("errors.log.include.messages", BOOLEAN, False,
              documentation="Include the failed record in the log.", group="Error Handling"),
))
SINK_CONFIG = CONFIG.define(
    ConfigKey("errors.deadletterqueue.topic.name", STRING, "",
              documentation="The topic failed records are written to (none when empty).",
              group="Error Handling"),
    ConfigKey("errors.deadletterqueue.topic.replication.factor", INT, 3,
              validator=replication_factor,
              documentation="The replication factor of the DLQ topic if it is created "
                            "(-1: the broker's default); creating it fails when the "
                            "cluster has fewer brokers.",
              group="Error Handling"),
    ConfigKey("errors.deadletterqueue.context.headers.enable", BOOLEAN, False,
              documentation="Add __connect.errors.* headers to DLQ records.",
              group="Error Handling"),
)


RETRY_DELAY_MIN_MS = 300


class RetriableError(Exception):
    """An error worth retrying (Kafka's ``RetriableException``): connectors,
    converters, transforms and the runtime raise it (or a subclass) for
    transient failures such as a lost connection."""


class Skip(Exception):
    """Raised by :meth:`ErrorHandler.run` when tolerance is ``all``: skip the record."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(str(failure.error))
        self.failure = failure


@dataclass(frozen=True, slots=True)
class Failure:
    stage: str
    class_name: str
    error: BaseException
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None


class ErrorHandler:
    """One per task. :meth:`run` calls ``fn``; on failure, with tolerance
    ``none`` the error propagates (the task fails), with ``all`` it is logged
    if asked and :class:`Skip` is raised (the caller drops the record and, for
    a sink, sends it to the DLQ)."""

    def __init__(self, props: Mapping[str, str], *, sink: bool,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        """``clock`` gives seconds and ``sleep`` waits seconds (inject both in
        tests; a runtime may pass a ``sleep`` that returns early on stop)."""
        values = (SINK_CONFIG if sink else CONFIG).parse(
            {k: v for k, v in props.items() if k.startswith("errors.")})
        self.tolerance_all = values["errors.tolerance"] == "all"
        self.retry_timeout_ms = int(values["errors.retry.timeout"])
        self.retry_delay_max_ms = int(values["errors.retry.delay.max.ms"])
        self.clock = clock
        self.sleep = sleep
        self.stopping = False
        self.retries = 0
        self.log_enable = bool(values["errors.log.enable"])
        self.log_messages = bool(values["errors.log.include.messages"])
        self.dlq_topic = str(values.get("errors.deadletterqueue.topic.name") or "")
        self.dlq_replication = int(values.get(
            "errors.deadletterqueue.topic.replication.factor") or 3)
        self.dlq_headers = bool(values.get("errors.deadletterqueue.context.headers.enable"))
        self.failures = 0
        self.skipped = 0

    def run(self, stage: str, class_name: str, fn: Callable[[], T], *,
            topic: str | None = None, partition: int | None = None,
            offset: int | None = None, record: Any = None) -> T:
        try:
            return self._with_retries(fn)
        except Exception as e:
            self.failures += 1
            failure = Failure(stage, class_name, e, topic, partition, offset)
            if self.log_enable:
                extra = f" record={record!r}" if self.log_messages else ""
                log.error("Error encountered in task at stage %s in class %s: %s%s",
                          stage, class_name, e, extra)
            if not self.tolerance_all:
                raise
            self.skipped += 1
            raise Skip(failure) from e


    def stop(self) -> None:
        """Stop retrying: the next retriable failure counts at once."""
        self.stopping = True

    def _with_retries(self, fn: Callable[[], T]) -> T:
        start = self.clock()
        attempt = 0
        while True:
            try:
                return fn()
            except RetriableError:
                elapsed_ms = (self.clock() - start) * 1000
                forever = self.retry_timeout_ms < 0
                if self.stopping or not (forever or elapsed_ms < self.retry_timeout_ms):
                    raise
                delay: float = min(RETRY_DELAY_MIN_MS << min(attempt, 40),
                                   self.retry_delay_max_ms)
                if not forever:
                    delay = min(delay, max(0.0, self.retry_timeout_ms - elapsed_ms))
                attempt += 1
                self.retries += 1
                log.debug("Retriable failure; retrying in %s ms (attempt %d)", delay, attempt)
                self.sleep(delay / 1000)


def dlq_headers(failure: Failure, connector: str, task_id: int) -> list[tuple[str, bytes]]:
    """The ``__connect.errors.*`` headers of a DLQ record, as Kafka writes them
    (UTF-8 strings; partition and offset in decimal)."""
    import traceback

    e = failure.error
    out = [
        ("__connect.errors.topic", failure.topic or ""),
        ("__connect.errors.partition", "" if failure.partition is None
         else str(failure.partition)),
        ("__connect.errors.offset", "" if failure.offset is None else str(failure.offset)),
        ("__connect.errors.connector.name", connector),
        ("__connect.errors.task.id", str(task_id)),
        ("__connect.errors.stage", failure.stage),
        ("__connect.errors.class.name", failure.class_name),
        ("__connect.errors.exception.class.name", type(e).__module__ + "." + type(e).__name__),
        ("__connect.errors.exception.message", str(e)),
        ("__connect.errors.exception.stacktrace",
         "".join(traceback.format_exception(e))),
    ]
    return [(k, v.encode()) for k, v in out]
