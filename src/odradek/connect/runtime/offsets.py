"""Source offsets of a standalone worker, in a JSON file.

The file (``offset.storage.file.filename``) is a JSON array of
``[[<connector>, <source partition>], <source offset>]`` pairs: the key is the
one Kafka's offsets topic uses (``["<connector>", {partition}]``), the value
the connector's offset map, e.g.::

    [[["local-file-source", {"filename": "/tmp/in.txt"}], {"position": 4096}]]

It is rewritten whole (a temporary file, fsync, rename) on each flush, so a
crash leaves either the old or the new content. Offsets only reach it after the
producer acknowledged the records they cover (at-least-once).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from odradek.connect.api import OffsetStorageReader


class OffsetStore(Protocol):
    """Where a worker keeps source offsets: :class:`OffsetFile` (standalone) or
    ``offset_topic.TopicOffsets`` (the offsets topic). ``put`` returns once the
    offsets are durable (file synced, or records acknowledged)."""

    def get(self, connector: str, partition: Mapping[str, Any]) -> dict[str, Any] | None: ...

    def of(self, connector: str) -> list[tuple[dict[str, Any], dict[str, Any]]]: ...

    def put(self, connector: str,
            offsets: Iterable[tuple[Mapping[str, Any], Mapping[str, Any] | None]]) -> None: ...

    def remove(self, connector: str) -> None: ...


def _key(connector: str, partition: Mapping[str, Any]) -> str:
    return json.dumps([connector, partition], sort_keys=True, separators=(",", ":"))


class OffsetFile:
    """Thread-safe: tasks write, the REST API reads and alters."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._data: dict[str, Any] = {}
        if self.path.exists():
            text = self.path.read_text(encoding="utf-8")
            try:
                pairs = json.loads(text) if text.strip() else []
                self._data = {_key(k[0], k[1]): v for k, v in pairs}
            except (ValueError, TypeError, IndexError, KeyError):
                raise ValueError(f"offset.storage.file.filename: {path} is not an "
                                 "offsets file (a JSON array of [key, offset] pairs)") from None
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def get(self, connector: str, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        with self._lock:
            value = self._data.get(_key(connector, partition))
            return dict(value) if value is not None else None

    def of(self, connector: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(partition, offset) of every partition of ``connector``."""
        with self._lock:
            out = []
            for k, v in self._data.items():
                name, partition = json.loads(k)
                if name == connector:
                    out.append((partition, v))
            return out

    def put(self, connector: str,
            offsets: Iterable[tuple[Mapping[str, Any], Mapping[str, Any] | None]]) -> None:
        """Store (partition, offset) pairs (offset None deletes) and write the file."""
        with self._lock:
            for partition, offset in offsets:
                key = _key(connector, partition)
                if offset is None:
                    self._data.pop(key, None)
                else:
                    self._data[key] = dict(offset)
            self._write()

    def remove(self, connector: str) -> None:
        with self._lock:
            for k in [k for k in self._data if json.loads(k)[0] == connector]:
                del self._data[k]
            self._write()

    def _write(self) -> None:
        pairs = [[json.loads(k), v] for k, v in self._data.items()]
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(pairs, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


class Reader(OffsetStorageReader):
    def __init__(self, store: OffsetStore, connector: str) -> None:
        self.store = store
        self.connector = connector

    def offset(self, partition: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return self.store.get(self.connector, partition)
