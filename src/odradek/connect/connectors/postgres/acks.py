"""How far a replication slot may be acknowledged (the CDC source's bookkeeping).

Every record the task returns is tracked, in order, with its offset's
``lsn_commit`` (non-decreasing along the stream). :meth:`Acks.ack` marks a
record acknowledged (matched by its source offset: the worker may hand back an
equal record rather than the same object); the safe flush LSN is the largest
``lsn_commit`` of the longest acknowledged prefix. :meth:`Acks.committed`
takes a committed offset's ``lsn_commit`` as safe and forgets the records up
to it (their acknowledgements can no longer move anything). Thread-safe: acks
arrive from the producer's callbacks while ``poll`` reads :attr:`Acks.lsn`.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True, eq=False)
class _Pending:
    key: tuple[Any, ...]
    lsn_commit: int
    acked: bool = False


def offset_key(offset: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted((k, str(v)) for k, v in offset.items()))


class Acks:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: deque[_Pending] = deque()
        self._by_key: dict[tuple[Any, ...], deque[_Pending]] = {}
        self._lsn = 0

    @property
    def lsn(self) -> int:
        """The LSN the slot may be flushed to."""
        with self._lock:
            return self._lsn

    def __len__(self) -> int:
        """Records tracked and not yet released."""
        with self._lock:
            return len(self._pending)

    def track(self, offset: Mapping[str, Any]) -> None:
        entry = _Pending(offset_key(offset), int(offset.get("lsn_commit") or 0))
        with self._lock:
            self._pending.append(entry)
            self._by_key.setdefault(entry.key, deque()).append(entry)

    def ack(self, offset: Mapping[str, Any]) -> None:
        with self._lock:
            key = offset_key(offset)
            same = self._by_key.get(key)
            if not same:
                return
            entry = same.popleft()
            if not same:
                del self._by_key[key]
            entry.acked = True
            while self._pending and self._pending[0].acked:
                self._lsn = max(self._lsn, self._pending.popleft().lsn_commit)

    def committed(self, lsn_commit: int) -> None:
        with self._lock:
            self._lsn = max(self._lsn, lsn_commit)
            while self._pending and self._pending[0].lsn_commit <= lsn_commit:
                entry = self._pending.popleft()
                same = self._by_key.get(entry.key)
                if same is not None and entry in same:
                    same.remove(entry)
                    if not same:
                        del self._by_key[entry.key]
