"""Log configuration by Kafka's names, with Kafka's defaults.

:class:`LogConfig` holds the topic-level settings one partition log obeys
(``segment.bytes``, ``retention.ms``, ...). :meth:`LogConfig.from_properties`
reads them from a mapping of topic-level names; :func:`log_config_from_server`
reads the broker-level ``log.*`` names of a ``server.properties`` that supply the
defaults. :class:`LogManagerConfig` holds the broker-wide settings of the log
manager (``log.dir``, checkpoint and retention-check intervals), and
:class:`LogIo` how the manager has one log use the disk.

Kafka accepts some settings we ignore on purpose (``preallocate``,
``compression.type`` other than ``producer``); they are parsed and kept so a
topic's configuration round-trips, and the docstring of each field says what
we do with it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from odradek.storage.pagecache import DEFAULT_WINDOW_BYTES, PageCacheTrimmer

LONG_MAX: Final = 2**63 - 1
INT_MAX: Final = 2**31 - 1

CREATE_TIME: Final = "CreateTime"
LOG_APPEND_TIME: Final = "LogAppendTime"

# topic-level name -> LogConfig field
_TOPIC_KEYS: Final = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "max.message.bytes": "max_message_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "message.timestamp.type": "message_timestamp_type",
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "cleanup.policy": "cleanup_policy",
    "compression.type": "compression_type",
    "preallocate": "preallocate",
    "delete.retention.ms": "delete_retention_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
}

# broker-level name -> topic-level name (the broker value is the topic default)
_SERVER_KEYS: Final = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "message.max.bytes": "max.message.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.cleanup.policy": "cleanup.policy",
    "compression.type": "compression.type",
    "log.preallocate": "preallocate",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
}

# Kafka's coarser broker-level spellings, lowest precedence last.
_SERVER_UNITS: Final = (
    ("log.roll.hours", "segment.ms", 3_600_000),
    ("log.retention.minutes", "retention.ms", 60_000),
    ("log.retention.hours", "retention.ms", 3_600_000),
    ("log.flush.scheduler.interval.ms", "flush.ms", 1),
)

Props = Mapping[str, object]


def _as_int(key: str, value: object) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{key}: expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ValueError(f"{key}: expected an integer, got {value!r}")


def _as_float(key: str, value: object) -> float:
    try:
        return float(str(value).strip())
    except ValueError:
        raise ValueError(f"{key}: expected a number, got {value!r}") from None


def _as_bool(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"{key}: expected true or false, got {value!r}")


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    """``segment.bytes``: roll when the active segment would grow past this.
    Kafka 4 refuses values under 1 MiB; we accept any value that holds a batch
    header, so tests can roll often."""
    segment_ms: int = 7 * 24 * 3_600_000
    """``segment.ms``: roll when the time since the segment's first batch passes this."""
    segment_index_bytes: int = 10 * 1024 * 1024
    """``segment.index.bytes``: largest index file; a full index rolls the segment."""
    index_interval_bytes: int = 4096
    """``index.interval.bytes``: log bytes between two offset-index entries."""
    retention_ms: int = 7 * 24 * 3_600_000
    """``retention.ms``: delete segments whose newest timestamp is older; -1 = forever."""
    retention_bytes: int = -1
    """``retention.bytes``: delete oldest segments while the log is larger; -1 = no limit."""
    max_message_bytes: int = 1_048_588
    """``max.message.bytes``: largest batch (whole, with its 12-byte log overhead)."""
    flush_messages: int = LONG_MAX
    """``flush.messages``: fsync after this many appended records."""
    flush_ms: int = LONG_MAX
    """``flush.ms``: fsync when this long has passed since the last fsync."""
    message_timestamp_type: str = CREATE_TIME
    """``message.timestamp.type``: ``CreateTime`` or ``LogAppendTime``."""
    message_timestamp_before_max_ms: int = LONG_MAX
    """``message.timestamp.before.max.ms``: oldest CreateTime accepted (relative to now).
    Checked against each batch's first timestamp only (records are not decoded)."""
    message_timestamp_after_max_ms: int = 3_600_000
    """``message.timestamp.after.max.ms``: newest CreateTime accepted (Kafka 4 default,
    1 hour). Exact: a batch's max timestamp bounds every record in it."""
    file_delete_delay_ms: int = 60_000
    """``file.delete.delay.ms``: how long a deleted segment lingers as ``*.deleted``."""
    cleanup_policy: str = "delete"
    """``cleanup.policy``: ``delete`` (retention), ``compact`` (the cleaner), or both."""
    delete_retention_ms: int = 86_400_000
    """``delete.retention.ms``: how long a tombstone outlives the first cleaning that
    kept it (its batch's delete horizon, KIP-534)."""
    min_cleanable_dirty_ratio: float = 0.5
    """``min.cleanable.dirty.ratio``: clean once dirty bytes / cleanable bytes pass it."""
    min_compaction_lag_ms: int = 0
    """``min.compaction.lag.ms``: a segment with newer records is not cleaned yet."""
    max_compaction_lag_ms: int = LONG_MAX
    """``max.compaction.lag.ms``: a dirty segment older than this is cleaned whatever
    the ratio."""
    compression_type: str = "producer"
    """``compression.type``: kept for the record; batches are stored as produced."""
    preallocate: bool = False
    """``preallocate``: ignored, segment files grow as written."""

    def __post_init__(self) -> None:
        if self.segment_bytes < 61:
            raise ValueError("segment.bytes must hold at least one batch header (61 bytes)")
        if self.segment_bytes > INT_MAX:
            raise ValueError("segment.bytes must fit a 32-bit index position")
        if self.segment_index_bytes < 8 * 2:
            raise ValueError("segment.index.bytes must hold at least two entries")
        if self.index_interval_bytes < 0:
            raise ValueError("index.interval.bytes must not be negative")
        if self.segment_ms < 1:
            raise ValueError("segment.ms must be positive")
        if self.max_message_bytes < 0:
            raise ValueError("max.message.bytes must not be negative")
        if self.flush_messages < 1 or self.flush_ms < 0:
            raise ValueError("flush.messages must be >= 1 and flush.ms >= 0")
        if self.message_timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise ValueError(f"message.timestamp.type: unknown {self.message_timestamp_type!r}")
        if self.retention_ms < -1 or self.retention_bytes < -1:
            raise ValueError("retention.ms and retention.bytes must be >= -1")
        if self.file_delete_delay_ms < 0:
            raise ValueError("file.delete.delay.ms must not be negative")

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.replace(" ", "").split(",")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @classmethod
    def from_properties(cls, props: Props, defaults: LogConfig | None = None) -> LogConfig:
        """Overlay topic-level properties on ``defaults``. Unknown names are ignored
        (other layers own them); a known name with a bad value raises ValueError."""
        changes: dict[str, object] = {}
        for key, value in props.items():
            attr = _TOPIC_KEYS.get(key)
            if attr is None:
                continue
            if attr in ("message_timestamp_type", "cleanup_policy", "compression_type"):
                changes[attr] = str(value).strip()
            elif attr == "preallocate":
                changes[attr] = _as_bool(key, value)
            elif attr == "min_cleanable_dirty_ratio":
                changes[attr] = _as_float(key, value)
            else:
                changes[attr] = _as_int(key, value)
        return dataclasses.replace(defaults or cls(), **changes)  # type: ignore[arg-type]

    def to_properties(self) -> dict[str, str]:
        return {key: str(getattr(self, attr)) for key, attr in _TOPIC_KEYS.items()}


def log_config_from_server(props: Props) -> LogConfig:
    """Topic defaults from broker-level names (``log.segment.bytes``, ``log.retention.hours``...).

    As in Kafka, the finer unit wins: ``log.retention.ms`` over ``.minutes`` over ``.hours``.
    """
    topic: dict[str, object] = {}
    for key, unit_key, unit_ms in reversed(_SERVER_UNITS):
        if key in props:
            topic[unit_key] = _as_int(key, props[key]) * unit_ms
    for key, topic_key in _SERVER_KEYS.items():
        if key in props and props[key] is not None and str(props[key]).strip() != "":
            topic[topic_key] = props[key]
    return LogConfig.from_properties(topic)


MAP_SLOT_BYTES: Final = 24
"""Bytes per key in Kafka's cleaner offset map (16-byte MD5 + 8-byte offset)."""


@dataclass(frozen=True, slots=True)
class CleanerSettings:
    """The broker-wide ``log.cleaner.*`` settings."""

    enable: bool = True
    dedupe_buffer_size: int = 128 * 1024 * 1024
    backoff_ms: int = 15_000
    threads: int = 1
    io_max_bytes_per_second: float = float("inf")
    """``log.cleaner.io.max.bytes.per.second`` (read and write bytes of a pass)."""

    @property
    def max_map_entries(self) -> int:
        return max(self.dedupe_buffer_size // max(self.threads, 1) // MAP_SLOT_BYTES, 1)


@dataclass(frozen=True, slots=True)
class LogManagerConfig:
    log_dir: str = "/tmp/kafka-logs"
    """``log.dir``: the first of ``log.dirs`` when given."""
    log_dirs: tuple[str, ...] = ()
    """``log.dirs``, every directory in order (empty: ``log_dir`` alone)."""
    recovery_point_checkpoint_interval_ms: int = 60_000
    """``log.flush.offset.checkpoint.interval.ms``."""
    log_start_offset_checkpoint_interval_ms: int = 60_000
    """``log.flush.start.offset.checkpoint.interval.ms``."""
    high_watermark_checkpoint_interval_ms: int = 5_000
    """``replica.high.watermark.checkpoint.interval.ms``."""
    retention_check_interval_ms: int = 300_000
    """``log.retention.check.interval.ms``."""
    max_open_files: int = 4096
    """Cap on segment and index files held open at once (an LRU closes the rest).
    Not a Kafka setting: Kafka keeps every segment open and relies on a large
    ``ulimit -n``."""
    cleaner: CleanerSettings = CleanerSettings()
    """``log.cleaner.enable``, ``.dedupe.buffer.size``, ``.backoff.ms``, ``.threads``."""
    page_cache_window_bytes: int = DEFAULT_WINDOW_BYTES
    """``odradek.log.page.cache.window.bytes``: the newest bytes of each partition
    left in the page cache while memory is short (or always, with a retain of
    0); older ones are written back and dropped (:mod:`odradek.storage.pagecache`).
    Below 0: the kernel alone decides, as in Kafka. Not a Kafka setting."""
    page_cache_retain_bytes: int = -1
    """``odradek.log.page.cache.retain.bytes``: the most the partitions keep in the
    page cache in all while the kernel reports no memory pressure (past it the
    oldest are dropped first, never a partition's window); -1: half of
    ``MemTotal``; 0: the window applies always. Not a Kafka setting."""
    preallocate_bytes: int = 8 << 20
    """``odradek.log.preallocate.bytes``: the most an active segment reserves on
    disk ahead of its appends without changing its size
    (:meth:`~odradek.storage.segment.Segment.allocate_for`); 0 turns it off.
    Not a Kafka setting (Kafka's ``preallocate`` sets a new segment's file to
    ``segment.bytes`` at once, and is ignored here)."""
    skip_damage: bool = True
    """``log.recovery.damaged.batches``: ``skip`` (the default) cuts damaged bytes out
    of a segment during recovery and keeps every later batch; ``truncate`` cuts
    the log at the first damage as Kafka does. Not a Kafka setting."""

    @classmethod
    def from_properties(cls, props: Props) -> LogManagerConfig:
        changes: dict[str, object] = {}
        policy = str(props.get("log.recovery.damaged.batches") or "skip").strip().lower()
        if policy not in ("skip", "truncate"):
            raise ValueError(
                f"log.recovery.damaged.batches: expected skip or truncate, got {policy!r}")
        changes["skip_damage"] = policy == "skip"
        dirs = props.get("log.dirs") or props.get("log.dir")
        if dirs:
            listed = tuple(d.strip() for d in str(dirs).split(",") if d.strip())
            changes["log_dir"], changes["log_dirs"] = listed[0], listed
        changes["cleaner"] = CleanerSettings(
            enable=_as_bool("log.cleaner.enable", props.get("log.cleaner.enable", "true")),
            dedupe_buffer_size=_as_int("log.cleaner.dedupe.buffer.size",
                                       props.get("log.cleaner.dedupe.buffer.size", 134217728)),
            backoff_ms=_as_int("log.cleaner.backoff.ms",
                               props.get("log.cleaner.backoff.ms", 15000)),
            threads=_as_int("log.cleaner.threads", props.get("log.cleaner.threads", 1)),
            io_max_bytes_per_second=_as_float(
                "log.cleaner.io.max.bytes.per.second",
                props.get("log.cleaner.io.max.bytes.per.second", "inf")),
        )
        for key, attr in (
            ("log.flush.offset.checkpoint.interval.ms", "recovery_point_checkpoint_interval_ms"),
            (
                "log.flush.start.offset.checkpoint.interval.ms",
                "log_start_offset_checkpoint_interval_ms",
            ),
            (
                "replica.high.watermark.checkpoint.interval.ms",
                "high_watermark_checkpoint_interval_ms",
            ),
            ("log.retention.check.interval.ms", "retention_check_interval_ms"),
            ("odradek.log.max.open.files", "max_open_files"),
            ("odradek.log.page.cache.window.bytes", "page_cache_window_bytes"),
            ("odradek.log.page.cache.retain.bytes", "page_cache_retain_bytes"),
            ("odradek.log.preallocate.bytes", "preallocate_bytes"),
        ):
            if key in props:
                changes[attr] = _as_int(key, props[key])
        return dataclasses.replace(cls(), **changes)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class LogIo:
    """How the log manager has a log use the disk, fixed when the log is opened."""

    allocate_ahead_bytes: int = 0
    """``odradek.log.preallocate.bytes``: the most the active segment reserves on disk
    ahead of its appends (:meth:`Segment.allocate_for`); 0 reserves nothing."""
    page_cache: PageCacheTrimmer | None = None
    """Where the log gets its page-cache window (the newest bytes it keeps in the
    page cache, :mod:`odradek.storage.pagecache`) at its first write
    (:attr:`LocalLog.cache_window <odradek.storage.local_log.LocalLog.cache_window>`);
    None leaves the cache to the kernel. One ``LogIo`` is shared by every log
    of a manager: an idle log holds no window."""
