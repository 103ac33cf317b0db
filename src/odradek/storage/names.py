"""File and directory names of a log directory, exactly as Kafka spells them.

A log directory (``log.dir``) holds one directory per partition, named
``<topic>-<partition>``, plus the checkpoint files and the clean-shutdown marker.
A partition directory holds, for each segment, three files named by the
segment's base offset written as 20 decimal digits, zero padded::

    00000000000000000000.log        record batches
    00000000000000000000.index      offset index
    00000000000000000000.timeindex  time index
    00000000000000000000.txnindex   aborted transactions (once transactions land)

plus ``partition.metadata`` and ``leader-epoch-checkpoint``. Files of a deleted
segment get the suffix
``.deleted`` until ``file.delete.delay.ms`` has passed; a deleted partition
directory is renamed ``<topic>-<partition>.<32 hex digits>-delete``. A copy of a
partition being moved into another log directory (AlterReplicaLogDirs) is
``<topic>-<partition>.<32 hex digits>-future`` in the target directory.
"""

from __future__ import annotations

import functools
import posixpath
import re
import sys
import uuid
from typing import Final

LOG_SUFFIX: Final = ".log"
INDEX_SUFFIX: Final = ".index"
TIME_INDEX_SUFFIX: Final = ".timeindex"
TXN_INDEX_SUFFIX: Final = ".txnindex"
DELETED_SUFFIX: Final = ".deleted"
TMP_SUFFIX: Final = ".tmp"
CLEANED_SUFFIX: Final = ".cleaned"
"""A cleaner pass's output before its swap (``<base>.log.cleaned``)."""
SWAP_SUFFIX: Final = ".swap"
"""A cleaned segment decided but not yet renamed in (``<base>.log.swap``)."""
COMPANION_SUFFIXES: Final = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
"""Files that live and die with a segment's ``.log``: renamed, deleted and swapped
with it. ``.txnindex`` (aborted transactions) is written once transactions land."""
SEGMENT_SUFFIXES: Final = (LOG_SUFFIX, *COMPANION_SUFFIXES)

PARTITION_METADATA_FILE: Final = "partition.metadata"
CLEAN_SHUTDOWN_FILE: Final = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT: Final = "recovery-point-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT: Final = "cleaner-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT: Final = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT: Final = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT: Final = "leader-epoch-checkpoint"
DELETE_DIR_SUFFIX: Final = "-delete"
FUTURE_DIR_SUFFIX: Final = "-future"
STRAY_DIR_SUFFIX: Final = "-stray"

_TOPIC_RE: Final = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
_SEGMENT_RE: Final = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)$")


def segment_file_name(base_offset: int, suffix: str) -> str:
    """``00000000000000000042.log`` for base offset 42."""
    if base_offset < 0:
        raise ValueError(f"negative base offset {base_offset}")
    return f"{base_offset:020d}{suffix}"


def segment_path(dir_path: str, base_offset: int, suffix: str) -> str:
    return posixpath.join(dir_path, segment_file_name(base_offset, suffix))


def parse_segment_file_name(name: str) -> tuple[int, str] | None:
    """(base offset, suffix) of a segment file name, or None for other files."""
    match = _SEGMENT_RE.match(name)
    if match is None:
        return None
    return int(match.group(1)), match.group(2)


@functools.lru_cache(maxsize=1 << 16)
def is_valid_topic(topic: str) -> bool:
    """(Remembered: a start-up asks once per partition and checkpoint line, and a
    topic has many.)"""
    return bool(_TOPIC_RE.match(topic)) and topic not in (".", "..")


def partition_dir_name(topic: str, partition: int) -> str:
    if not is_valid_topic(topic):
        raise ValueError(f"illegal topic name {topic!r}")
    if partition < 0:
        raise ValueError(f"negative partition {partition}")
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) of ``<topic>-<partition>``; None for anything else
    (including ``-delete``, ``-future`` and ``-stray`` directories)."""
    topic, sep, part = name.rpartition("-")
    if not sep or not part.isdigit() or not is_valid_topic(topic):
        return None
    if part != str(int(part)):
        return None
    return sys.intern(topic), int(part)  # one string for all of a topic's partitions


def stray_dir_name(topic: str, partition: int, unique: uuid.UUID) -> str:
    """Kafka's name for a partition directory moved aside because the metadata does
    not know it (or knows another topic by that name); never deleted by the broker."""
    return f"{partition_dir_name(topic, partition)}.{unique.hex}{STRAY_DIR_SUFFIX}"


def deleted_dir_name(topic: str, partition: int, unique: uuid.UUID) -> str:
    """Kafka's name for a partition directory scheduled for deletion."""
    return f"{partition_dir_name(topic, partition)}.{unique.hex}{DELETE_DIR_SUFFIX}"


def future_dir_name(topic: str, partition: int, unique: uuid.UUID) -> str:
    """Kafka's name for the copy of a partition being moved into another log
    directory (AlterReplicaLogDirs), in that directory."""
    return f"{partition_dir_name(topic, partition)}.{unique.hex}{FUTURE_DIR_SUFFIX}"


def parse_future_dir_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) of ``<topic>-<partition>.<32 hex>-future``; None otherwise."""
    if not name.endswith(FUTURE_DIR_SUFFIX):
        return None
    stem, dot, unique = name[: -len(FUTURE_DIR_SUFFIX)].rpartition(".")
    if not dot or len(unique) != 32 or any(c not in "0123456789abcdef" for c in unique):
        return None
    return parse_partition_dir_name(stem)


def parse_log_dir_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a partition directory, current or ``-future``."""
    return parse_partition_dir_name(name) or parse_future_dir_name(name)
