"""The partition log: segments, indexes, checkpoints (sync file IO through a seam).

Entry points for the broker: :class:`LogManager` (one log directory) and
:class:`Log` (one partition). File formats are described in the docstrings of
:mod:`.segment`, :mod:`.index` and :mod:`.checkpoint`; durability in
``docs/durability.md``.
"""

from odradek.storage.config import LogConfig, LogManagerConfig, log_config_from_server
from odradek.storage.dir_checkpoints import CheckpointJob
from odradek.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    RecordTooLargeError,
    StorageError,
)
from odradek.storage.flush import FlushJob, FlushPolicy, IoJob
from odradek.storage.fs import FileHandle, FileSystem, OsFileSystem
from odradek.storage.log import AppendInfo, Log
from odradek.storage.manager import LogManager, Tick
from odradek.storage.memfs import MemoryFileSystem
from odradek.storage.slices import FileSlice
from odradek.storage.timestamps import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    RecordTimestampSearch,
    TimestampOffset,
)

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIERED_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AppendInfo",
    "CheckpointJob",
    "CorruptRecordError",
    "FileHandle",
    "FileSlice",
    "FileSystem",
    "FlushJob",
    "FlushPolicy",
    "InvalidRecordError",
    "InvalidTimestampError",
    "IoJob",
    "KafkaStorageError",
    "Log",
    "LogConfig",
    "LogManager",
    "LogManagerConfig",
    "MemoryFileSystem",
    "OffsetOutOfRangeError",
    "OsFileSystem",
    "RecordListTooLargeError",
    "RecordTimestampSearch",
    "RecordTooLargeError",
    "StorageError",
    "Tick",
    "TimestampOffset",
    "log_config_from_server",
]
