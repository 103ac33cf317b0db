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

    @classmethod
    def fail(cls, error: ErrorCode, message: str) -> Outcome:
        return cls(error, message, [])
