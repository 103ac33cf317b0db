"""What a controller decision returns (:mod:`odradek.metadata.controller`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from odradek.wire.errors import ErrorCode


@dataclass(slots=True)
class Outcome:
    """What a controller call decided: an error (or NONE) and the records to write."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    records: list[Any] = field(default_factory=list)
    atomic: bool = True
    """All the records or none: committed as one entry of the metadata log. A
    decision whose records each stand alone (one leader election per
    partition: fencing, unfencing, registering a broker, preferred elections)
    is not atomic, and a quorum commits it in entries of at most
    ``MAX_RECORDS_PER_ENTRY`` records, as Kafka's controller appends such a
    result in batches of 10,000 (a leadership change part-way leaves the
    partitions not reached as they were, to be decided again)."""

    @classmethod
    def fail(cls, error: ErrorCode, message: str) -> Outcome:
        return cls(error, message, [])
